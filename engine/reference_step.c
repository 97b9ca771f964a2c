// The single-device reference step (engine/reference_step.h).
#include "engine/reference_step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h"

static int count_targets(const int32_t *targets, size_t n) {
    int c = 0;
    for (size_t i = 0; i < n; i++) c += targets[i] >= 0;
    return c;
}

// One replica's share: its M microbatches accumulate into sm->grads (zeroed first) in
// microbatch order; returns the sum of their losses, in that order.
static double replica_forward_backward(StageModel *sm, StageActs *acts, int M, size_t mb_tokens, float scale,
                                       const int32_t *inputs, const int32_t *targets) {
    stage_zero_grads(sm);
    double loss = 0.0;
    for (int m = 0; m < M; m++) {
        loss += stage_forward(sm, acts, inputs + m * mb_tokens, NULL, targets + m * mb_tokens, scale);
        stage_backward(sm, acts, NULL);
    }
    return loss;
}

double reference_forward_backward(StageModel *sm, StageActs *acts, const RunConfig *rc, int replicas,
                                const int32_t *inputs, const int32_t *targets) {
    const int D = replicas, M = rc->microbatches, T = rc->seq_len;
    const size_t mb_tokens = (size_t)(rc->batch / (D * M)) * T, replica_tokens = (size_t)M * mb_tokens;
    const int n_targets = count_targets(targets, (size_t)rc->batch * T);
    const float scale = n_targets ? 1.0f / (float)n_targets : 0.0f;
    // Replica 0's sum, then each later replica's added in replica order: the sums the
    // replicas' gradient all-reduce makes (engine/transport/transport.h).
    float *sum = D > 1 ? xmalloc(sm->numel * sizeof(float)) : NULL;
    double loss = 0.0;
    for (int d = 0; d < D; d++) {
        loss += replica_forward_backward(sm, acts, M, mb_tokens, scale, inputs + d * replica_tokens,
                                         targets + d * replica_tokens);
        if (D == 1) break;
        if (d == 0) memcpy(sum, sm->grads, sm->numel * sizeof(float));
        else
            for (size_t i = 0; i < sm->numel; i++) sum[i] += sm->grads[i];
    }
    if (sum) memcpy(sm->grads, sum, sm->numel * sizeof(float));
    free(sum);
    // Tied embeddings: E + H, after the replicas' sums, as the pipeline ties them.
    stage_tie_grads(sm);
    return loss;
}

double reference_grad_norm(const StageModel *sm) {
    double *per = xmalloc(sizeof(double) * (size_t)(sm->n_params ? sm->n_params : 1));
    stage_grad_sum_squares(sm, per);
    double norm2 = 0.0;
    for (int i = 0; i < sm->n_params; i++) norm2 += per[i];
    free(per);
    return sqrt(norm2);
}

StepReport reference_step(StageModel *sm, StageActs *acts, AdamWState *opt, const RunConfig *rc, int replicas,
                        const int32_t *inputs, const int32_t *targets, int step) {
    const double loss = reference_forward_backward(sm, acts, rc, replicas, inputs, targets);
    const double norm = reference_grad_norm(sm);
    const float clip = rc->optim.grad_clip > 0 ? grad_clip_factor(norm, (float)rc->optim.grad_clip) : 1.0f;
    if (clip < 1.0f) grad_scale(sm->grads, sm->numel, clip);
    const double lr = optim_lr_at(&rc->optim, step);
    adamw_state_step(opt, sm->weights, sm->grads, &rc->optim, lr);
    return (StepReport){.step = step + 1, .steps = rc->steps, .loss = loss, .lr = lr, .grad_norm = norm};
}
