// Forward and backward of one stage on one microbatch.
//
// Per decoder layer (N = B*T rows, Q = NH*HD, KV = NKV*HD), x = the layer's input:
//   ln1  = rmsnorm(x)               q, k = rope(ln1 Wq^T), rope(ln1 Wk^T)    v = ln1 Wv^T
//   y    = attention(q, k, v)       xmid = x + y Wo^T
//   ln2  = rmsnorm(xmid)            h = silu(ln2 Wgate^T) * (ln2 Wup^T)
//   x'   = xmid + h Wdown^T
// With attention_bias / mlp_bias each projection adds its bias (before RoPE for q and k, as
// transformers does); a bias's gradient is the column sum of its projection's output gradient.
// The backward is split as in the zero-bubble paper: the input half (I) walks the layers in
// reverse computing activation gradients and keeps those the weight gradients need; the
// weight half (W) turns them into parameter gradients. A full backward (B) is I then W.
// These are the CPU backend's equations (model_cpu.c puts them in its table); the GPU backend
// (engine/model/stage_ops.h) runs the same ones, in the same order, on its device.
#include <assert.h>
#include <string.h>

#include "engine/model/model_acts.h"
#include "engine/model/model_cpu.h"
#include "kernels/cpu/kernels.h"

static void zero(float *p, size_t n) {
    memset(p, 0, n * sizeof(float));
}

// A projection: out(N, OC) = in(N, IC) W^T, + b when the layer has that bias (b NULL: none).
static void project(float *out, const float *in, const float *W, const float *b, int N, int IC, int OC) {
    linear_forward(out, in, W, N, IC, OC);
    if (b) bias_forward(out, b, N, OC);
}

// Its weight half: dW += dout^T in, and db += dout's column sums (db NULL: no bias).
static void project_weight_grad(float *dW, float *db, const float *dout, const float *in, int N, int IC, int OC) {
    linear_backward_weight(dW, dout, in, N, IC, OC);
    if (db) bias_backward(db, dout, N, OC);
}

static void layer_forward(const LayerParams *w, LayerActs *la, const float *x, float *out,
                          const StageActs *a, StageDims d, float eps) {
    rmsnorm_forward(la->ln1, la->rstd1, x, w->ln1, d.N, d.C, eps);
    project(la->q, la->ln1, w->wq, w->bq, d.N, d.C, d.Q);
    project(la->k, la->ln1, w->wk, w->bk, d.N, d.C, d.KV);
    project(la->v, la->ln1, w->wv, w->bv, d.N, d.C, d.KV);
    rope_forward(la->q, la->q, a->cos_tab, a->sin_tab, d.B, d.T, d.NH, d.HD);
    rope_forward(la->k, la->k, a->cos_tab, a->sin_tab, d.B, d.T, d.NKV, d.HD);
    attention_forward(la->atty, la->att, la->q, la->k, la->v, d.B, d.T, d.NH, d.NKV, d.HD);
    project(la->xmid, la->atty, w->wo, w->bo, d.N, d.Q, d.C);
    residual_forward(la->xmid, la->xmid, x, (size_t)d.N * d.C);
    rmsnorm_forward(la->ln2, la->rstd2, la->xmid, w->ln2, d.N, d.C, eps);
    project(la->gate, la->ln2, w->wgate, w->bgate, d.N, d.C, d.I);
    project(la->up, la->ln2, w->wup, w->bup, d.N, d.C, d.I);
    swiglu_forward(la->h, la->gate, la->up, d.N, d.I);
    project(out, la->h, w->wdown, w->bdown, d.N, d.I, d.C);
    residual_forward(out, out, la->xmid, (size_t)d.N * d.C);
}

double stage_cpu_forward(StageModel *s, StageActs *a, const int32_t *tokens, const void *input,
                         const int32_t *targets, float loss_scale) {
    assert(!a->light);
    const StageDims d = stage_dims(s, a);
    const size_t NC = (size_t)d.N * d.C;
    if (s->has_embed) {
        memcpy(a->tokens, tokens, (size_t)d.N * sizeof(int32_t));
        embedding_forward(acts_resid_at(a, 0), tokens, s->w.wte, d.N, d.C);
    } else {
        memcpy(acts_resid_at(a, 0), input, NC * sizeof(float));
    }
    for (int l = 0; l < a->n_layers; l++)
        layer_forward(&s->w.layer[l], &a->layer[l], acts_resid_at(a, l), acts_resid_at(a, l + 1), a, d,
                      s->cfg.rms_eps);
    if (!s->has_head) return 0.0;
    rmsnorm_forward(a->lnf, a->rstdf, acts_resid_at(a, a->n_layers), s->w.norm, d.N, d.C, s->cfg.rms_eps);
    linear_forward(a->logits, a->lnf, s->w.lm_head, d.N, d.C, d.V);
    // The loss gradient is computed with the loss, while the logits are hot in cache.
    return crossentropy_forward_backward(a->dlogits, a->logits, targets, d.N, d.V, loss_scale);
}

// Input half of one layer: dout = gradient of the layer output -> dx = gradient of its input.
static void layer_backward_input(const LayerParams *w, LayerActs *la, const float *x,
                                 const float *dout, float *dx, StageActs *a, StageDims d) {
    const size_t NC = (size_t)d.N * d.C;
    // MLP branch: x' = xmid + h Wdown^T. The first product or kernel into each gradient
    // overwrites it, the later ones add: nothing is zeroed first.
    linear_backward_input(a->dh, dout, w->wdown, d.N, d.I, d.C, false);
    swiglu_backward(la->dgate, la->dup, a->dh, la->gate, la->up, d.N, d.I);
    linear_backward_input(la->dln2, la->dgate, w->wgate, d.N, d.C, d.I, false);
    linear_backward_input(la->dln2, la->dup, w->wup, d.N, d.C, d.I, true);
    memcpy(la->dxmid, dout, NC * sizeof(float));
    rmsnorm_backward(la->dxmid, NULL, la->dln2, la->xmid, w->ln2, la->rstd2, d.N, d.C);
    // Attention branch: xmid = x + attention(...) Wo^T
    linear_backward_input(a->datty, la->dxmid, w->wo, d.N, d.Q, d.C, false);
    attention_backward(a->drot_q, a->drot_k, la->dv, a->datt, a->datty, la->q, la->k, la->v,
                       la->att, d.B, d.T, d.NH, d.NKV, d.HD);
    rope_backward(la->dq, a->drot_q, a->cos_tab, a->sin_tab, d.B, d.T, d.NH, d.HD);
    rope_backward(la->dk, a->drot_k, a->cos_tab, a->sin_tab, d.B, d.T, d.NKV, d.HD);
    linear_backward_input(la->dln1, la->dq, w->wq, d.N, d.C, d.Q, false);
    linear_backward_input(la->dln1, la->dk, w->wk, d.N, d.C, d.KV, true);
    linear_backward_input(la->dln1, la->dv, w->wv, d.N, d.C, d.KV, true);
    memcpy(dx, la->dxmid, NC * sizeof(float));
    rmsnorm_backward(dx, NULL, la->dln1, x, w->ln1, la->rstd1, d.N, d.C);
}

void stage_cpu_backward_input(StageModel *s, StageActs *a, const void *dout) {
    assert(!a->light);
    const StageDims d = stage_dims(s, a);
    const size_t NC = (size_t)d.N * d.C;
    float *dtop = acts_dresid_at(a, a->n_layers);
    if (s->has_head) {
        linear_backward_input(a->dlnf, a->dlogits, s->w.lm_head, d.N, d.C, d.V, false);
        zero(dtop, NC);
        rmsnorm_backward(dtop, NULL, a->dlnf, acts_resid_at(a, a->n_layers), s->w.norm, a->rstdf, d.N, d.C);
    } else {
        memcpy(dtop, dout, NC * sizeof(float));
    }
    for (int l = a->n_layers - 1; l >= 0; l--)
        layer_backward_input(&s->w.layer[l], &a->layer[l], acts_resid_at(a, l), acts_dresid_at(a, l + 1),
                             acts_dresid_at(a, l), a, d);
}

static void layer_backward_weight(const LayerParams *w, LayerParams *g, const LayerActs *la,
                                  const float *x, const float *dout, StageDims d) {
    project_weight_grad(g->wdown, g->bdown, dout, la->h, d.N, d.I, d.C);
    project_weight_grad(g->wgate, g->bgate, la->dgate, la->ln2, d.N, d.C, d.I);
    project_weight_grad(g->wup, g->bup, la->dup, la->ln2, d.N, d.C, d.I);
    rmsnorm_backward(NULL, g->ln2, la->dln2, la->xmid, w->ln2, la->rstd2, d.N, d.C);
    project_weight_grad(g->wo, g->bo, la->dxmid, la->atty, d.N, d.Q, d.C);
    project_weight_grad(g->wq, g->bq, la->dq, la->ln1, d.N, d.C, d.Q);
    project_weight_grad(g->wk, g->bk, la->dk, la->ln1, d.N, d.C, d.KV);
    project_weight_grad(g->wv, g->bv, la->dv, la->ln1, d.N, d.C, d.KV);
    rmsnorm_backward(NULL, g->ln1, la->dln1, x, w->ln1, la->rstd1, d.N, d.C);
}

void stage_cpu_backward_weight(StageModel *s, StageActs *a) {
    assert(!a->light);
    const StageDims d = stage_dims(s, a);
    if (s->has_head) {
        linear_backward_weight(s->g.lm_head, a->dlogits, a->lnf, d.N, d.C, d.V);
        rmsnorm_backward(NULL, s->g.norm, a->dlnf, acts_resid_at(a, a->n_layers), s->w.norm, a->rstdf,
                         d.N, d.C);
    }
    for (int l = a->n_layers - 1; l >= 0; l--)
        layer_backward_weight(&s->w.layer[l], &s->g.layer[l], &a->layer[l], acts_resid_at(a, l),
                              acts_dresid_at(a, l + 1), d);
    if (s->has_embed) embedding_backward(s->g.wte, acts_dresid_at(a, 0), a->tokens, d.N, d.C);
}
