// The CPU backend of a stage (engine/model/stage_ops.h): activations and messages in host
// memory, the equations of model_stage.c, gradients and AdamW on the stage's own host arrays.
// Recompute's light activations (model_recompute.c) are this backend's too.
#include "engine/model/model_cpu.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/model_acts.h"
#include "kernels/cpu/kernels.h"

char *stage_cpu_arena(size_t bytes) {
    char *p = aligned_alloc(64, bytes ? bytes : 64);
    check_alloc(p, bytes, __FILE__, __LINE__);
    memset(p, 0, bytes);
    return p;
}

static StageActs *cpu_acts_create(const StageModel *s, int B, int T) {
    StageActs *a = xcalloc(1, sizeof *a);
    *a = stage_acts_shape(s, B, T, false);
    a->ops = &stage_cpu_ops;
    a->layer = xcalloc((size_t)(a->n_layers ? a->n_layers : 1), sizeof(LayerActs));
    a->arena_bytes = stage_acts_layout(s, a, NULL);
    a->arena = stage_cpu_arena(a->arena_bytes);
    stage_acts_layout(s, a, a->arena);
    float inv_freq[ROPE_MAX_HEAD_DIM / 2];
    model_rope_inv_freq(&s->cfg, inv_freq);
    rope_tables(a->cos_tab, a->sin_tab, T, s->cfg.head_dim, inv_freq);
    return a;
}

// Either form (a light one has no layers and no logits).
static void cpu_acts_free(StageActs *a) {
    if (a->dlogits != a->logits) free(a->dlogits);
    free(a->arena);
    free(a->layer);
    free(a);
}

// Gives the loss gradient a buffer of its own so the logits survive the forward (tests).
// Called at set-up, never inside a step. A device's slot keeps none (its head makes no logits:
// stage_logits_row computes a tapped row's), so there it does nothing.
void stage_acts_keep_logits(StageActs *a, bool keep) {
    if (a->ops != &stage_cpu_ops) return;
    const bool kept = a->dlogits != a->logits;
    if (!a->logits || keep == kept) return;
    if (keep) {
        const size_t bytes = (size_t)a->N * a->V * sizeof(float);
        a->dlogits = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        check_alloc(a->dlogits, bytes, __FILE__, __LINE__);
    } else {
        free(a->dlogits);
        a->dlogits = a->logits;
    }
}

static size_t cpu_msg_bytes(const StageModel *s, int B, int T) {
    return (size_t)B * T * s->cfg.hidden * sizeof(float);
}

static void *cpu_msg_alloc(const StageModel *s, size_t bytes) {
    (void)s;
    return xmalloc(bytes ? bytes : 1);
}

static void cpu_msg_free(const StageModel *s, void *msg) {
    (void)s;
    free(msg);
}

static void cpu_zero_grads(StageModel *s) {
    memset(s->grads, 0, s->numel * sizeof(float));
}

static void cpu_grad_sum_squares(const StageModel *s, double *out) {
    for (int i = 0; i < s->n_params; i++) out[i] = grad_sum_squares(s->grads + s->params[i].offset, s->params[i].numel);
}

static void cpu_update(StageModel *s, AdamWState *opt, const OptimConfig *o, double lr, float clip) {
    if (clip < 1.0f) grad_scale(s->grads, s->numel, clip);
    adamw_state_step(opt, s->weights, s->grads, o, lr);
}

static float *cpu_reduce_begin(StageModel *s, bool device) {
    assert(!device);   // a transport of device memory carries device stages only
    (void)device;
    return s->grads;
}

const StageOps stage_cpu_ops = {
    .acts_create = cpu_acts_create,
    .acts_free = cpu_acts_free,
    .forward = stage_cpu_forward,
    .backward_input = stage_cpu_backward_input,
    .backward_weight = stage_cpu_backward_weight,
    .msg_bytes = cpu_msg_bytes,
    .msg_alloc = cpu_msg_alloc,
    .msg_free = cpu_msg_free,
    .zero_grads = cpu_zero_grads,
    .grad_sum_squares = cpu_grad_sum_squares,
    .update = cpu_update,
    .reduce_begin = cpu_reduce_begin,
};
