// Internal to engine/model/*.c: what one microbatch keeps on one stage (see model_stage.c for
// the equations), its layout, and the shapes both backends compute with. Other rooms see
// StageActs only through engine/model/model.h.
#ifndef PPTRAIN_MODEL_ACTS_H
#define PPTRAIN_MODEL_ACTS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/model/model.h"

typedef struct {
    float *ln1, *rstd1;     // (N, C), (N)
    float *q, *k, *v;       // (N, Q), (N, KV), (N, KV): q and k after rotary
    float *att;             // (B, NH, T, T) softmax probabilities (NULL under flash attention)
    float *lse;             // (B, NH, T) flash attention: each query row's logsumexp (else NULL)
    float *atty;            // (N, Q) attention output before o_proj
    float *xmid;            // (N, C) residual stream after attention
    float *ln2, *rstd2;     // (N, C), (N)
    float *gate, *up, *h;   // (N, I) each; h = silu(gate) * up
    // kept by the input half for the weight half:
    float *dq, *dk, *dv;    // (N, Q), (N, KV), (N, KV) gradients before rotary
    float *dxmid;           // (N, C)
    float *dgate, *dup;     // (N, I)
    float *dln1, *dln2;     // (N, C) gradients of the norm outputs (norm_grads_in_input: one slot buffer)
    // narrow_operands (StageActs): ln1, ln2, h and atty are these bf16 GEMM operands instead
    // (the fp32 pointers above NULL): GEMMs read them, in bf16 mode as bf16 (and attention's
    // backward reads atty for D = rowsum(dout * atty)).
    uint16_t *ln1_16, *ln2_16, *h_16, *atty_16;
    // ... and the gradients the input half hands the weight half as GEMM operands are kept
    // packed and bf16, written so by the kernels that make them: dqkv_16 (N, Q + 2 KV), dq | dk
    // | dv side by side (RoPE's backward writes dq and dk there, attention's backward dv), and
    // dgate_up_16 (N, 2 I); dq, dk, dv, dgate and dup are then NULL.
    uint16_t *dqkv_16, *dgate_up_16;
    // ... and so are the two residual gradients the GEMMs read: dout_16 (N, C), the layer's
    // output gradient, written by whatever wrote it in fp32 (the next layer's input half, the
    // head's final norm, or the message), and dxmid_16 (N, C). The fp32 dxmid is then
    // StageActs.dxmid, and StageActs.dresid keeps one row (acts_dresid_at).
    uint16_t *dout_16, *dxmid_16;
    // ... and gate and up (N, I) each are stored bf16 by their GEMM (gate_16, up_16; gate and up
    // NULL): only SwiGLU reads them, forward and backward, widening them to fp32.
    uint16_t *gate_16, *up_16;
    // ... and so are q, k and v (q_16 (N, Q), k_16 and v_16 (N, KV); q, k and v NULL), q and k
    // rotated in place by RoPE's bf16 form: only attention reads them, as bf16.
    uint16_t *q_16, *k_16, *v_16;
    // ... and the norms' output gradients dln1_16, dln2_16 (N, C) each (dln1, dln2 NULL), stored
    // bf16 by the input-gradient GEMMs of the projections after each norm: the norm's backward
    // reads them, widened (with norm_grads_in_input, in the input half only: one slot buffer).
    uint16_t *dln1_16, *dln2_16;
} LayerActs;

// Two forms (engine/model/model.h): a full StageActs holds everything below; a light one (recompute)
// holds only tokens / targets / input / output / dinput, and every other pointer is NULL.
struct StageActs {
    int B, T, N, n_layers;
    int C, V;               // hidden and vocabulary sizes of the stage's model
    bool light;
    // The backend runs flash attention (stage_ops.h: flash_attention): a layer keeps its
    // attention as (B, NH, T) row statistics (lse, dsum), not (T, T) matrices (att, datt).
    bool flash_attention;
    bool no_logits;         // the backend's head needs no (N, V) logits (stage_ops.h): logits, dlogits NULL
    bool narrow_operands;   // ln1, ln2, h, atty, gate, up, q, k, v and lnf are bf16 (LayerActs' *_16, lnf_16; stage_ops.h)
    // The norms' weight gradients come with the input half (stage_ops.h): every layer's dln1 and
    // dln2 (or dln1_16, dln2_16) are one (N, C) buffer of the slot, which each norm's backward
    // writes and reads before the next one's.
    bool norm_grads_in_input;
    bool forward_only;      // no backward follows this slot's forwards (stage_acts_set_forward_only)
    // What crosses the stage boundary, in both forms (full: views into resid / dresid).
    float *input;           // (N, C) stage input (non-first stages)
    float *output;          // (N, C) stage output (non-last stages)
    float *dinput;          // (N, C) gradient of the stage input (non-first stages)
    // output and dinput as messages of the stage's format (stage_acts_output, _dinput): the
    // buffers themselves on the CPU; a backend with narrower messages keeps copies.
    const void *msg_out, *msg_din;
    // Light form only, last stage: the targets and scale of the loss, so that the backward
    // can recompute the loss gradient.
    int32_t *targets;       // (N)
    float loss_scale;
    int32_t *tokens;        // (N) first stage: kept for the embedding gradient
    float *resid;           // (n_layers + 1, N, C): stage input, then each layer's output
    float *dresid;          // (n_layers + 1, N, C): their gradients; [0] is the stage's dinput
                            // (narrow_operands: one row, acts_dresid_at)
    LayerActs *layer;       // [n_layers]
    float *lnf, *rstdf;     // (N, C), (N) last stage: final norm
    uint16_t *lnf_16;       // (N, C) last stage, narrow_operands: lnf as a bf16 operand (lnf NULL)
    float *logits;          // (N, V) last stage, unless no_logits
    float *dlogits;         // (N, V) last stage: == logits unless logits are kept (NULL: no_logits)
    float *dlnf;            // (N, C) last stage
    float *cos_tab, *sin_tab;   // (T, HD/2) rotary tables
    // scratch shared by the layers (never needed across layers):
    float *datty;           // (N, Q) attention output's gradient (narrow_operands: NULL, datty_16)
    uint16_t *datty_16;     // (N, Q) narrow_operands: datty stored bf16 by its GEMM (only attention reads it)
    float *drot_q, *drot_k; // (N, Q), (N, KV) gradients after rotary
    float *dxmid;           // (N, C) narrow_operands: a layer's dxmid (kept as LayerActs.dxmid_16; else NULL)
    float *dh;              // (N, I) the MLP hidden's gradient (narrow_operands: NULL, dh_16)
    uint16_t *dh_16;        // (N, I) narrow_operands: dh stored bf16 by its GEMM (only SwiGLU reads it)
    float *datt;            // (B, NH, T, T) score gradients (NULL under flash attention)
    float *dsum;            // (B, NH, T) flash attention: rowsum(dout * out) (else NULL)
    char *arena;            // on the stage's device
    size_t arena_bytes;
    const StageOps *ops;    // the backend that made it (stage_acts_free calls its acts_free)
    void *dev;              // that backend's extras (NULL on the CPU)
};

// The shape fields of a StageActs for B x T (no buffers), flash_attention as the stage's
// backend says.
StageActs stage_acts_shape(const StageModel *s, int B, int T, bool light);
// The full form's arena: carves every buffer above out of base (NULL: only counts) and
// returns the bytes it takes. a->layer must hold n_layers entries when base is set. Every
// backend carves its arena with it, so every device shares one layout; with a base, input,
// output, dinput and dlogits then point at their places.
size_t stage_acts_layout(const StageModel *s, StageActs *a, char *base);
// The light form's (recompute, CPU only), as stage_acts_layout.
size_t stage_acts_light_layout(const StageModel *s, StageActs *a, char *base);

// The dimension letters of one stage's microbatch (N = B*T rows, Q = NH*HD, KV = NKV*HD), as
// the equations of both backends use them.
typedef struct {
    int B, T, N, C, Q, KV, I, V, NH, NKV, HD;
} StageDims;

static inline StageDims stage_dims(const StageModel *s, const StageActs *a) {
    const ModelConfig *c = &s->cfg;
    return (StageDims){.B = a->B, .T = a->T, .N = a->N, .C = c->hidden, .Q = c->heads * c->head_dim,
                       .KV = c->kv_heads * c->head_dim, .I = c->intermediate, .V = c->vocab, .NH = c->heads,
                       .NKV = c->kv_heads, .HD = c->head_dim};
}

// The residual stream after l layers (l = 0: the stage input) and its gradient: (N, C) each.
// With narrow_operands every gradient row is the one row, the stage's dinput: each layer's
// input half reads its output gradient (into dxmid) before it writes its input gradient over
// it, and the weight half reads each layer's output gradient from its bf16 copy
// (LayerActs.dout_16).
static inline float *acts_resid_at(const StageActs *a, int l) { return a->resid + (size_t)l * a->N * a->C; }
static inline float *acts_dresid_at(const StageActs *a, int l) {
    return a->dresid + (size_t)(a->narrow_operands ? 0 : l) * a->N * a->C;
}
// Rows of StageActs.dresid.
static inline int acts_dresid_rows(const StageActs *a) { return a->narrow_operands ? 1 : a->n_layers + 1; }

#endif
