// engine/model/model_decode: one new token through a CPU stage against the stage's KV cache
// (generation, engine/generate.h); a device stage's cache, decode and tapped logits are its
// backend's (StageOps.kv_create ... logits_row: engine/model/model_cuda.c), reached from here.
// A prefill forward of the whole row (stage_forward, B = 1) leaves every layer's rotated keys
// and values in its acts; stage_kv_fill keeps those of the prompt. Each later token is then
// one row (N = 1) through the same equations as model_stage.c's layer_forward, its query
// attending to the cached keys of positions [0, pos] (its own appended first), so a token
// costs one row's work instead of the whole prefix's.
//
// Attention of the one row mirrors attention_forward's row path: scores by gemm_serial,
// softmax by vec_max / vec_exp_sum in double, the output by gemm_serial. The float sums run
// in another order than the prefix forward's blocks, so the logits may differ from a
// recompute in the last bits; greedy ids are held to transformers' (tests/cli/cli_sample.sh)
// and to the recomputed prefix (tests/unit/test_sample.c).
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/model_acts.h"
#include "engine/model/model_cpu.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/vecmath.h"

struct StageKV {
    const StageModel *stage;  // whose cache
    void *dev;                // a device backend's cache (StageOps.kv_create), else NULL: the fields below
    int T, n_layers;
    int KV, half;             // KV = NKV * HD floats of one position's keys; half = HD / 2
    float *k, *v;             // (n_layers, T, KV) rotated keys and values of positions [0, T)
    float *cos_tab, *sin_tab; // (T, half) rotary tables of every position
    float *scores;            // (T) one head's scores, then its probabilities
};

StageKV *stage_kv_create(const StageModel *s, int T) {
    const ModelConfig *c = &s->cfg;
    StageKV *kv = xcalloc(1, sizeof *kv);
    if (s->ops->kv_create) {
        *kv = (StageKV){.stage = s, .dev = s->ops->kv_create(s, T), .T = T};
        return kv;
    }
    const int L = s->layer_end - s->layer_begin;
    *kv = (StageKV){.stage = s, .T = T, .n_layers = L, .KV = c->kv_heads * c->head_dim, .half = c->head_dim / 2};
    const size_t cache = (size_t)(L ? L : 1) * T * kv->KV;
    kv->k = xcalloc(cache, sizeof(float));
    kv->v = xcalloc(cache, sizeof(float));
    kv->cos_tab = xcalloc((size_t)T * kv->half, sizeof(float));
    kv->sin_tab = xcalloc((size_t)T * kv->half, sizeof(float));
    kv->scores = xcalloc((size_t)T, sizeof(float));
    float inv_freq[ROPE_MAX_HEAD_DIM / 2];
    model_rope_inv_freq(c, inv_freq);
    rope_tables(kv->cos_tab, kv->sin_tab, T, c->head_dim, inv_freq);
    return kv;
}

void stage_kv_free(StageKV *kv) {
    if (!kv) return;
    if (kv->dev) kv->stage->ops->kv_free(kv->dev);
    free(kv->k);
    free(kv->v);
    free(kv->cos_tab);
    free(kv->sin_tab);
    free(kv->scores);
    free(kv);
}

static float *kv_k(const StageKV *kv, int l) { return kv->k + (size_t)l * kv->T * kv->KV; }
static float *kv_v(const StageKV *kv, int l) { return kv->v + (size_t)l * kv->T * kv->KV; }

void stage_kv_fill(StageKV *kv, const StageActs *a, int n) {
    if (kv->dev) {
        kv->stage->ops->kv_fill(kv->stage, kv->dev, a, n);
        return;
    }
    assert(a->ops == &stage_cpu_ops && a->B == 1 && a->T == kv->T && n <= kv->T);
    for (int l = 0; l < kv->n_layers; l++) {
        memcpy(kv_k(kv, l), a->layer[l].k, sizeof(float) * (size_t)n * kv->KV);
        memcpy(kv_v(kv, l), a->layer[l].v, sizeof(float) * (size_t)n * kv->KV);
    }
}

// out(1, OC) = in(1, IC) W^T (+ b), as model_stage.c's project.
static void project_row(float *out, const float *in, const float *W, const float *b, int IC, int OC) {
    linear_forward(out, in, W, 1, IC, OC);
    if (b) bias_forward(out, b, 1, OC);
}

// atty(NH, HD) = softmax(q k^T / sqrt(HD)) v over the n cached positions, per query head.
static void attend_row(float *atty, const float *q, const float *k, const float *v, float *scores, int n,
                       StageDims d) {
    const int group = d.NH / d.NKV;
    const float scale = (float)(1.0 / sqrt((double)d.HD));
    for (int h = 0; h < d.NH; h++) {
        const float *kh = k + (size_t)(h / group) * d.HD, *vh = v + (size_t)(h / group) * d.HD;
        gemm_serial(false, true, 1, n, d.HD, scale, q + (size_t)h * d.HD, d.Q, kh, d.KV, 0.0f, scores, n);
        const float m = vec_max(scores, n);
        const float inv = (float)(1.0 / vec_exp_sum(scores, scores, m, n));
        for (int j = 0; j < n; j++) scores[j] *= inv;
        gemm_serial(false, false, 1, d.HD, n, 1.0f, scores, n, vh, d.KV, 0.0f, atty + (size_t)h * d.HD, d.Q);
    }
}

// layer_forward for the one row at position pos; its k and v go straight into the cache.
static void layer_decode(const LayerParams *w, LayerActs *la, const float *x, float *out, StageKV *kv, int l,
                         int pos, StageDims d, float eps) {
    float *k = kv_k(kv, l) + (size_t)pos * d.KV, *v = kv_v(kv, l) + (size_t)pos * d.KV;
    const float *c = kv->cos_tab + (size_t)pos * kv->half, *s = kv->sin_tab + (size_t)pos * kv->half;
    rmsnorm_forward(la->ln1, la->rstd1, x, w->ln1, 1, d.C, eps);
    project_row(la->q, la->ln1, w->wq, w->bq, d.C, d.Q);
    project_row(k, la->ln1, w->wk, w->bk, d.C, d.KV);
    project_row(v, la->ln1, w->wv, w->bv, d.C, d.KV);
    rope_forward(la->q, la->q, c, s, 1, 1, d.NH, d.HD);
    rope_forward(k, k, c, s, 1, 1, d.NKV, d.HD);
    attend_row(la->atty, la->q, kv_k(kv, l), kv_v(kv, l), kv->scores, pos + 1, d);
    project_row(la->xmid, la->atty, w->wo, w->bo, d.Q, d.C);
    residual_forward(la->xmid, la->xmid, x, (size_t)d.C);
    rmsnorm_forward(la->ln2, la->rstd2, la->xmid, w->ln2, 1, d.C, eps);
    project_row(la->gate, la->ln2, w->wgate, w->bgate, d.C, d.I);
    project_row(la->up, la->ln2, w->wup, w->bup, d.C, d.I);
    swiglu_forward(la->h, la->gate, la->up, 1, d.I);
    project_row(out, la->h, w->wdown, w->bdown, d.I, d.C);
    residual_forward(out, out, la->xmid, (size_t)d.C);
}

void stage_decode(StageModel *s, StageKV *kv, StageActs *a, const int32_t *token, const void *input, int pos) {
    if (kv->dev) {
        s->ops->decode(s, kv->dev, a, token, input, pos);
        return;
    }
    assert(a->ops == &stage_cpu_ops && !a->light && a->N == 1 && pos >= 0 && pos < kv->T);
    const StageDims d = stage_dims(s, a);
    if (s->has_embed) embedding_forward(acts_resid_at(a, 0), token, s->w.wte, 1, d.C);
    else memcpy(acts_resid_at(a, 0), input, (size_t)d.C * sizeof(float));
    for (int l = 0; l < a->n_layers; l++)
        layer_decode(&s->w.layer[l], &a->layer[l], acts_resid_at(a, l), acts_resid_at(a, l + 1), kv, l, pos, d,
                     s->cfg.rms_eps);
    if (!s->has_head) return;
    rmsnorm_forward(a->lnf, a->rstdf, acts_resid_at(a, a->n_layers), s->w.norm, 1, d.C, s->cfg.rms_eps);
    linear_forward(a->logits, a->lnf, s->w.lm_head, 1, d.C, d.V);
}

void stage_logits_row(const StageModel *s, const StageActs *a, int row, float *out) {
    if (s->ops->logits_row) {
        s->ops->logits_row(s, a, row, out);
        return;
    }
    const size_t V = (size_t)s->cfg.vocab;
    memcpy(out, stage_acts_logits(a) + (size_t)row * V, V * sizeof(float));
}
