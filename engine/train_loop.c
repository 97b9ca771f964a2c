#include "engine/train_loop.h"

#include <stdlib.h>
#include <time.h>

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

static Dataset *open_data(const RunConfig *rc, Error *err) {
    Dataset *ds = dataset_open(rc->data_path, rc->batching, rc->seq_len, rc->seed, err);
    if (ds && dataset_max_token(ds) >= rc->model.vocab) {
        error_set(err, "%s: token id %d is outside the model's vocabulary (%d)", rc->data_path,
                  (int)dataset_max_token(ds), rc->model.vocab);
        dataset_close(ds);
        return NULL;
    }
    return ds;
}

// What the run will do, for the banner: layers and activation bytes per stage.
static void describe_run(const RunConfig *rc, const PipelineOptions *po, const Pipeline *p, const Dataset *ds, int *layers,
                         size_t *bytes, RunInfo *info) {
    const int S = pipeline_n_stages(p);
    const int rows = rc->batch / (rc->microbatches * (po->dp > 0 ? po->dp : 1));
    for (int s = 0; s < S; s++) {
        const StageModel *sm = pipeline_stage(p, s);
        layers[s] = pipeline_stage_layers(p, s);
        bytes[s] = sm ? stage_acts_bytes(sm, rows, rc->seq_len) : 0;
    }
    *info = (RunInfo){.data_kind = dataset_kind(ds), .data_items = dataset_items(ds),
                      .data_tokens = dataset_tokens(ds), .params = model_config_param_count(&rc->model),
                      .n_stages = S, .stage_layers = layers, .slot_bytes = bytes};
}

typedef struct {
    double *tokens_per_s, *gflops, *step_ms;   // (steps)
} StepSeries;

static void summarize(const StepSeries *ser, int steps, RunSummary *sum) {
    // The first step pays for page faults and cold caches: leave it out when there are more.
    const int skip = steps > 1 ? 1 : 0;
    sum->median_tokens_per_s = median(ser->tokens_per_s + skip, steps - skip);
    sum->median_gflops = median(ser->gflops + skip, steps - skip);
    sum->median_step_ms = median(ser->step_ms + skip, steps - skip);
}

static int run_steps(const RunConfig *rc, Pipeline *p, Dataset *ds, const TrainHooks *hooks,
                     RunSummary *sum, Error *err) {
    const size_t batch_tokens = (size_t)rc->batch * rc->seq_len;
    int32_t *inputs = xmalloc(batch_tokens * sizeof(int32_t));
    int32_t *targets = xmalloc(batch_tokens * sizeof(int32_t));
    StepSeries ser = {.tokens_per_s = xmalloc(rc->steps * sizeof(double)),
                      .gflops = xmalloc(rc->steps * sizeof(double)),
                      .step_ms = xmalloc(rc->steps * sizeof(double))};
    int rc_step = 0;
    const double t_run = now_s();
    for (int step = 0; step < rc->steps && rc_step == 0; step++) {
        if (step > 0 && hooks && hooks->should_stop && hooks->should_stop(hooks->ctx)) {
            sum->stopped = true;
            break;
        }
        dataset_next_batch(ds, rc->batch, inputs, targets);
        PipelineReport r;
        rc_step = pipeline_step(p, inputs, targets, step, &r, err);
        if (rc_step) break;
        ser.tokens_per_s[step] = r.step.tokens_per_s;
        ser.gflops[step] = r.step.gflops;
        ser.step_ms[step] = r.step.step_ms;
        if (step == 0) sum->first_loss = r.step.loss;
        sum->last_loss = r.step.loss;
        sum->steps = step + 1;
        if (hooks && hooks->on_step) hooks->on_step(hooks->ctx, p, &r);
    }
    sum->wall_s = now_s() - t_run;
    summarize(&ser, sum->steps, sum);
    free(ser.tokens_per_s);
    free(ser.gflops);
    free(ser.step_ms);
    free(inputs);
    free(targets);
    return rc_step;
}

int train_run(const RunConfig *rc, const PipelineOptions *po, const TrainHooks *hooks, RunSummary *summary,
              Error *err) {
    if (run_config_validate(rc, err)) return -1;
    Dataset *ds = open_data(rc, err);
    if (!ds) return -1;
    Pipeline *p = pipeline_create(rc, po, err);
    if (!p) {
        dataset_close(ds);
        return -1;
    }
    const int S = pipeline_n_stages(p);
    int *layers = xmalloc(S * sizeof(int));
    size_t *bytes = xmalloc(S * sizeof(size_t));
    RunInfo info;
    describe_run(rc, po, p, ds, layers, bytes, &info);
    const bool root = pipeline_is_root(p);
    const TrainHooks *root_hooks = root ? hooks : NULL;
    int result = root_hooks && root_hooks->on_start ? root_hooks->on_start(hooks->ctx, rc, po, &info, err) : 0;
    RunSummary sum = {0};
    if (result == 0) result = run_steps(rc, p, ds, root_hooks, &sum, err);
    if (result == 0 && root_hooks && root_hooks->on_end) root_hooks->on_end(hooks->ctx, &sum);
    if (summary) *summary = sum;
    free(layers);
    free(bytes);
    pipeline_free(p);
    dataset_close(ds);
    return result;
}
