#include "engine/trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/kernels.h"

RunConfig run_config_defaults(void) {
    RunConfig rc;
    memset(&rc, 0, sizeof rc);
    Error unused;
    model_config_preset(&rc.model, "tiny", &unused);
    rc.optim = optim_defaults();
    rc.batching = BATCHING_PAD;
    rc.batch = 8;
    rc.seq_len = 64;
    rc.microbatches = 1;
    rc.steps = 20;
    rc.seed = 1337;
    return rc;
}

int run_config_validate(const RunConfig *rc, Error *err) {
    if (model_config_validate(&rc->model, err)) return -1;
    if (rc->batch % rc->microbatches != 0) {
        error_set(err, "--batch %d is not divisible by --microbatches %d", rc->batch, rc->microbatches);
        return -1;
    }
    if (rc->seq_len > rc->model.max_positions) {
        error_set(err, "--seq %d exceeds the model's max_position_embeddings (%d)",
                  rc->seq_len, rc->model.max_positions);
        return -1;
    }
    if (rc->optim.warmup_steps > rc->steps) {
        error_set(err, "--warmup %d exceeds --steps %d", rc->optim.warmup_steps, rc->steps);
        return -1;
    }
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    if (n <= 0) return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int count_targets(const int32_t *targets, size_t n) {
    int c = 0;
    for (size_t i = 0; i < n; i++) c += targets[i] >= 0;
    return c;
}

StepReport trainer_step(StageModel *sm, StageActs *acts, AdamWState *opt, const RunConfig *rc,
                             const int32_t *inputs, const int32_t *targets, int step) {
    const int rows = rc->batch / rc->microbatches, T = rc->seq_len;
    const size_t mb_tokens = (size_t)rows * T;
    const int n_targets = count_targets(targets, (size_t)rc->batch * T);
    const float scale = n_targets ? 1.0f / (float)n_targets : 0.0f;
    stage_zero_grads(sm);
    double loss = 0.0;
    for (int m = 0; m < rc->microbatches; m++) {
        loss += stage_forward(sm, acts, inputs + m * mb_tokens, NULL, targets + m * mb_tokens, scale);
        stage_backward(sm, acts, NULL);
    }
    const double norm = sqrt(grad_sum_squares(sm->grads, sm->numel));
    const float clip = rc->optim.grad_clip > 0 ? grad_clip_factor(norm, (float)rc->optim.grad_clip) : 1.0f;
    if (clip < 1.0f) grad_scale(sm->grads, sm->numel, clip);
    const double lr = optim_lr_at(&rc->optim, step);
    adamw_state_step(opt, sm->weights, sm->grads, &rc->optim, lr);
    return (StepReport){.step = step + 1, .steps = rc->steps, .loss = loss, .lr = lr, .grad_norm = norm};
}

int trainer_run(const RunConfig *rc, const TrainerHooks *hooks, Error *err) {
    if (run_config_validate(rc, err)) return -1;
    Dataset *ds = dataset_open(rc->data_path, rc->batching, rc->seq_len, rc->seed, err);
    if (!ds) return -1;
    if (dataset_max_token(ds) >= rc->model.vocab) {
        error_set(err, "%s: token id %d is outside the model's vocabulary (%d)", rc->data_path,
                  (int)dataset_max_token(ds), rc->model.vocab);
        dataset_close(ds);
        return -1;
    }
    StageModel *sm = stage_create(&rc->model, 0, rc->model.layers, true, true, rc->seed, err);
    if (!sm) {
        dataset_close(ds);
        return -1;
    }
    const int rows = rc->batch / rc->microbatches;
    StageActs *acts = stage_acts_create(sm, rows, rc->seq_len);
    AdamWState opt = adamw_state_create(sm->numel);
    const size_t batch_tokens = (size_t)rc->batch * rc->seq_len;
    int32_t *inputs = xmalloc(batch_tokens * sizeof(int32_t));
    int32_t *targets = xmalloc(batch_tokens * sizeof(int32_t));
    double *tps = xmalloc((size_t)rc->steps * sizeof(double));
    double *gfl = xmalloc((size_t)rc->steps * sizeof(double));
    double *ms = xmalloc((size_t)rc->steps * sizeof(double));
    const double flops_per_token = model_flops_per_token(&rc->model, rc->seq_len);

    RunInfo info = {.data_kind = dataset_kind(ds), .data_items = dataset_items(ds),
                    .data_tokens = dataset_tokens(ds), .params = model_config_param_count(&rc->model),
                    .activation_bytes = stage_acts_bytes(sm, rows, rc->seq_len)};
    if (hooks && hooks->on_start) hooks->on_start(hooks->ctx, rc, &info);
    RunSummary sum = {.steps = rc->steps};
    const double t_run = now_s();
    for (int step = 0; step < rc->steps; step++) {
        const double t0 = now_s();
        dataset_next_batch(ds, rc->batch, inputs, targets);
        StepReport r = trainer_step(sm, acts, &opt, rc, inputs, targets, step);
        const double dt = now_s() - t0;
        r.step_ms = dt * 1e3;
        r.tokens_per_s = batch_tokens / dt;
        r.gflops = flops_per_token * batch_tokens / dt * 1e-9;
        tps[step] = r.tokens_per_s;
        gfl[step] = r.gflops;
        ms[step] = r.step_ms;
        if (step == 0) sum.first_loss = r.loss;
        sum.last_loss = r.loss;
        if (hooks && hooks->on_step) hooks->on_step(hooks->ctx, &r);
    }
    sum.wall_s = now_s() - t_run;
    // The first step pays for page faults and cold caches: leave it out when there are more.
    const int skip = rc->steps > 1 ? 1 : 0;
    sum.median_tokens_per_s = median(tps + skip, rc->steps - skip);
    sum.median_gflops = median(gfl + skip, rc->steps - skip);
    sum.median_step_ms = median(ms + skip, rc->steps - skip);
    if (hooks && hooks->on_end) hooks->on_end(hooks->ctx, &sum);

    free(tps);
    free(gfl);
    free(ms);
    free(inputs);
    free(targets);
    adamw_state_free(&opt);
    stage_acts_free(acts);
    stage_free(sm);
    dataset_close(ds);
    return 0;
}
