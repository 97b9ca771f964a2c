// The layout of one microbatch slot's activation arena on one stage: what is carved where,
// and how many bytes it takes. Full form: everything the stage's backward reads. Light form
// (recompute): only what crosses the stage boundary, plus what the forward needs to run again
// (tokens, targets). Each backend (engine/model/stage_ops.h) allocates the arena on its
// device and carves it here, so every device lays it out alike, but for attention's own
// buffers: (T, T) matrices on the CPU, row statistics under flash attention (a GPU).
#include "engine/model/model_acts.h"

#include "engine/model/stage_ops.h"

// Carves buffers out of one arena; the counting pass (base == NULL) only sums sizes.
typedef struct {
    char *base;
    size_t used;
} Carver;

static float *carve(Carver *cv, size_t floats) {
    const size_t bytes = (floats * sizeof(float) + 63) & ~(size_t)63;   // 64-byte aligned
    float *p = cv->base ? (float *)(cv->base + cv->used) : NULL;
    cv->used += bytes;
    return p;
}

static uint16_t *carve_bf16(Carver *cv, size_t n) {
    const size_t bytes = (n * sizeof(uint16_t) + 63) & ~(size_t)63;
    uint16_t *p = cv->base ? (uint16_t *)(cv->base + cv->used) : NULL;
    cv->used += bytes;
    return p;
}

// An operand activation of n values (model_acts.h: narrow_operands): bf16 into *narrow_out when
// the stage keeps those narrow, else fp32 into *wide.
static void carve_operand(Carver *cv, bool narrow, float **wide, uint16_t **narrow_out, size_t n) {
    if (narrow) *narrow_out = carve_bf16(cv, n);
    else *wide = carve(cv, n);
}

static void carve_acts(const StageModel *s, StageActs *a, Carver *cv) {
    const ModelConfig *c = &s->cfg;
    const size_t N = (size_t)a->N, C = (size_t)c->hidden, I = (size_t)c->intermediate;
    const size_t Q = (size_t)c->heads * c->head_dim, KV = (size_t)c->kv_heads * c->head_dim;
    // Attention's own: (T, T) per head, or under flash attention a row statistic per head.
    const size_t ATT = (size_t)a->B * c->heads * a->T * (a->flash_attention ? 1 : a->T);
    a->tokens = (int32_t *)carve(cv, N);
    a->resid = carve(cv, (a->n_layers + 1) * N * C);
    a->dresid = carve(cv, (size_t)acts_dresid_rows(a) * N * C);
    float *dln = NULL;   // norm_grads_in_input: the slot's one norm output gradient (or dln_16)
    uint16_t *dln_16 = NULL;
    if (a->norm_grads_in_input && a->n_layers > 0) carve_operand(cv, a->narrow_operands, &dln, &dln_16, N * C);
    for (int l = 0; l < a->n_layers; l++) {
        LayerActs *la = cv->base ? &a->layer[l] : &(LayerActs){0};
        const bool narrow = a->narrow_operands;
        carve_operand(cv, narrow, &la->ln1, &la->ln1_16, N * C);
        la->rstd1 = carve(cv, N);
        carve_operand(cv, narrow, &la->q, &la->q_16, N * Q);   // q_16, k_16, v_16: as their GEMM stores them
        carve_operand(cv, narrow, &la->k, &la->k_16, N * KV);
        carve_operand(cv, narrow, &la->v, &la->v_16, N * KV);
        if (a->flash_attention) la->lse = carve(cv, ATT);
        else la->att = carve(cv, ATT);
        carve_operand(cv, narrow, &la->atty, &la->atty_16, N * Q);
        la->xmid = carve(cv, N * C);
        carve_operand(cv, narrow, &la->ln2, &la->ln2_16, N * C);
        la->rstd2 = carve(cv, N);
        carve_operand(cv, narrow, &la->gate, &la->gate_16, N * I);   // gate_16, up_16: as their GEMM stores them
        carve_operand(cv, narrow, &la->up, &la->up_16, N * I);
        carve_operand(cv, narrow, &la->h, &la->h_16, N * I);
        if (narrow) la->dqkv_16 = carve_bf16(cv, N * (Q + 2 * KV));   // dq, dk, dv packed there
        else la->dq = carve(cv, N * Q), la->dk = carve(cv, N * KV), la->dv = carve(cv, N * KV);
        if (narrow) la->dout_16 = carve_bf16(cv, N * C), la->dxmid_16 = carve_bf16(cv, N * C);
        else la->dxmid = carve(cv, N * C);
        if (narrow) la->dgate_up_16 = carve_bf16(cv, N * 2 * I);
        else la->dgate = carve(cv, N * I), la->dup = carve(cv, N * I);
        if (a->norm_grads_in_input) {
            la->dln1 = la->dln2 = dln;
            la->dln1_16 = la->dln2_16 = dln_16;
        } else {
            carve_operand(cv, narrow, &la->dln1, &la->dln1_16, N * C);   // as their GEMM stores them
            carve_operand(cv, narrow, &la->dln2, &la->dln2_16, N * C);
        }
    }
    if (s->has_head) {
        carve_operand(cv, a->narrow_operands, &a->lnf, &a->lnf_16, N * C);
        a->rstdf = carve(cv, N);
        if (!a->no_logits) a->logits = carve(cv, N * (size_t)c->vocab);
        a->dlnf = carve(cv, N * C);
    }
    a->cos_tab = carve(cv, (size_t)a->T * c->head_dim / 2);
    a->sin_tab = carve(cv, (size_t)a->T * c->head_dim / 2);
    if (a->n_layers > 0) {
        carve_operand(cv, a->narrow_operands, &a->datty, &a->datty_16, N * Q);   // as its GEMM stores it
        a->drot_q = carve(cv, N * Q);
        a->drot_k = carve(cv, N * KV);
        if (a->narrow_operands) a->dxmid = carve(cv, N * C);   // kept as the layer's dxmid_16
        carve_operand(cv, a->narrow_operands, &a->dh, &a->dh_16, N * I);   // as its GEMM stores it
        if (a->flash_attention) a->dsum = carve(cv, ATT);
        else a->datt = carve(cv, ATT);
    }
}

// Light form: tokens (first stage), targets (last), input and dinput (non-first), output
// (non-last), each (N) or (N, C). Every other pointer stays NULL.
static void carve_light(const StageModel *s, StageActs *a, Carver *cv) {
    const size_t N = (size_t)a->N, C = (size_t)s->cfg.hidden;
    if (s->has_embed) a->tokens = (int32_t *)carve(cv, N);
    if (s->has_head) a->targets = (int32_t *)carve(cv, N);
    if (!s->has_embed) a->input = carve(cv, N * C);
    if (!s->has_embed) a->dinput = carve(cv, N * C);
    if (!s->has_head) a->output = carve(cv, N * C);
}

StageActs stage_acts_shape(const StageModel *s, int B, int T, bool light) {
    return (StageActs){.B = B, .T = T, .N = B * T, .n_layers = s->layer_end - s->layer_begin,
                       .C = s->cfg.hidden, .V = s->cfg.vocab, .light = light,
                       .flash_attention = s->ops && s->ops->flash_attention,
                       .norm_grads_in_input = s->ops && s->ops->norm_grads_in_input,
                       .no_logits = s->ops && s->ops->head_without_logits,
                       .narrow_operands = s->ops && s->ops->narrow_operands && s->ops->narrow_operands(s)};
}

// The boundary tensors as messages: the buffers themselves unless the backend keeps copies.
static void point_messages(StageActs *a) {
    a->msg_out = a->output;
    a->msg_din = a->dinput;
}

size_t stage_acts_layout(const StageModel *s, StageActs *a, char *base) {
    Carver cv = {.base = base};
    carve_acts(s, a, &cv);
    if (base) {
        a->input = a->resid;
        a->output = acts_resid_at(a, a->n_layers);
        a->dinput = a->dresid;
        a->dlogits = a->logits;
        point_messages(a);
    }
    return cv.used;
}

size_t stage_acts_light_layout(const StageModel *s, StageActs *a, char *base) {
    Carver cv = {.base = base};
    carve_light(s, a, &cv);
    if (base) point_messages(a);
    return cv.used;
}

static size_t full_bytes(const StageModel *s, StageActs a) {
    return stage_acts_layout(s, &a, NULL) + sizeof(StageActs) + a.n_layers * sizeof(LayerActs);
}

size_t stage_acts_bytes(const StageModel *s, int B, int T) {
    return full_bytes(s, stage_acts_shape(s, B, T, false));
}

// The CUDA backend is the one that runs flash attention (engine/model/model_cuda.c).
size_t stage_acts_bytes_on(const StageModel *s, int B, int T, DeviceKind device, bool low_precision) {
    StageActs a = stage_acts_shape(s, B, T, false);
    a.flash_attention = device == DEVICE_CUDA;   // a GPU stage: flash attention's row statistics,
    a.no_logits = device == DEVICE_CUDA;         // the fused classifier's head (no N x V logits),
    a.norm_grads_in_input = device == DEVICE_CUDA;   // one norm output gradient a slot,
    a.narrow_operands = device == DEVICE_CUDA && low_precision;   // and bf16 operand activations
    return full_bytes(s, a);
}

size_t stage_acts_light_bytes(const StageModel *s, int B, int T) {
    StageActs a = stage_acts_shape(s, B, T, true);
    return stage_acts_light_layout(s, &a, NULL) + sizeof(StageActs);
}

bool stage_acts_is_light(const StageActs *a) {
    return a->light;
}

const void *stage_acts_output(const StageActs *a) {
    return a->msg_out;
}

const void *stage_acts_dinput(const StageActs *a) {
    return a->msg_din;
}

const float *stage_acts_logits(const StageActs *a) {
    return a->logits;
}
