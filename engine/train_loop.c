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
    int first_layer = 0;
    for (int s = 0; s < S; s++) {
        layers[s] = pipeline_stage_layers(p, s);
        // The sizes depend only on the stage's shape, so a shell (no weights) answers for
        // stages held by other processes too. Under recompute a microbatch keeps the light set.
        const StageModel shell = {.cfg = rc->model, .layer_begin = first_layer, .layer_end = first_layer + layers[s],
                                  .has_embed = s == 0, .has_head = s == S - 1};
        bytes[s] = po->recompute ? stage_acts_light_bytes(&shell, rows, rc->seq_len)
                                 : stage_acts_bytes(&shell, rows, rc->seq_len);
        first_layer += layers[s];
    }
    *info = (RunInfo){.data_kind = dataset_kind(ds), .data_items = dataset_items(ds),
                      .data_tokens = dataset_tokens(ds), .params = model_config_param_count(&rc->model),
                      .n_stages = S, .stage_layers = layers, .slot_bytes = bytes, .notice = pipeline_notice(p)};
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

// Every process calls this with its own verdict; all of them get the same answer (under
// local there is one process and the answer is its own).
static bool anyone(Pipeline *p, bool mine) { return pipeline_world_max(p, mine ? 1.0 : 0.0) > 0.0; }

// Runs the checkpoint hook on every process; a failure anywhere fails the run everywhere.
static int save_checkpoint(const CheckpointHooks *ckpt, Pipeline *p, const TrainPosition *pos, Error *err) {
    Error mine = {{0}};
    const int rc = ckpt->save(ckpt->ctx, p, pos, &mine);
    if (!anyone(p, rc != 0)) return 0;
    if (rc) *err = mine;
    else error_set(err, "checkpoint at step %d failed on another rank (see its error line)", pos->step);
    return -1;
}

typedef struct {
    const RunConfig *rc;
    Pipeline *p;
    Dataset *ds;
    const TrainHooks *hooks;          // the root's hooks, NULL elsewhere
    const CheckpointHooks *ckpt;      // every process's, or NULL
    bool mpi;                         // the stop decision must be shared with the other processes
} Loop;

static int run_steps(const Loop *lp, TrainPosition *pos, RunSummary *sum, Error *err) {
    const RunConfig *rc = lp->rc;
    const TrainHooks *hooks = lp->hooks;
    const size_t batch_tokens = (size_t)rc->batch * rc->seq_len;
    int32_t *inputs = xmalloc(batch_tokens * sizeof(int32_t));
    int32_t *targets = xmalloc(batch_tokens * sizeof(int32_t));
    const int planned = rc->steps - pos->step > 0 ? rc->steps - pos->step : 0;
    StepSeries ser = {.tokens_per_s = xmalloc((planned + 1) * sizeof(double)),
                      .gflops = xmalloc((planned + 1) * sizeof(double)),
                      .step_ms = xmalloc((planned + 1) * sizeof(double))};
    int result = 0, saved_at = -1;
    const double t_run = now_s();
    for (int n = 0; pos->step < rc->steps; n++) {
        if (n > 0) {
            bool stop = hooks && hooks->should_stop && hooks->should_stop(hooks->ctx);
            if (lp->mpi) stop = anyone(lp->p, stop);
            // A failed agreement is not a stop request: the run failed (and says where).
            if ((result = pipeline_failed(lp->p, err))) break;
            if (stop) {
                sum->stopped = true;
                break;
            }
        }
        dataset_next_batch(lp->ds, rc->batch, inputs, targets);
        PipelineReport r;
        if ((result = pipeline_step(lp->p, inputs, targets, pos->step, &r, err))) break;
        pos->step++;
        pos->cursor = dataset_get_cursor(lp->ds);
        ser.tokens_per_s[n] = r.step.tokens_per_s;
        ser.gflops[n] = r.step.gflops;
        ser.step_ms[n] = r.step.step_ms;
        if (n == 0) sum->first_loss = r.step.loss;
        sum->last_loss = r.step.loss;
        sum->steps = n + 1;
        if (hooks && hooks->on_step) hooks->on_step(hooks->ctx, lp->p, &r);
        if (lp->ckpt && lp->ckpt->save && lp->ckpt->every > 0 && pos->step % lp->ckpt->every == 0 &&
            pos->step < rc->steps) {
            if ((result = save_checkpoint(lp->ckpt, lp->p, pos, err))) break;
            saved_at = pos->step;
        }
    }
    if (result == 0 && lp->ckpt && lp->ckpt->save && saved_at != pos->step && sum->steps > 0) {
        pos->final = true;
        result = save_checkpoint(lp->ckpt, lp->p, pos, err);
    }
    sum->wall_s = now_s() - t_run;
    summarize(&ser, sum->steps, sum);
    free(ser.tokens_per_s);
    free(ser.gflops);
    free(ser.step_ms);
    free(inputs);
    free(targets);
    return result;
}

// Restores the pipeline and the position on every process; a failure anywhere fails all.
static int restore(const CheckpointHooks *ckpt, Pipeline *p, Dataset *ds, TrainPosition *pos, Error *err) {
    *pos = (TrainPosition){.step = 0, .cursor = dataset_get_cursor(ds)};
    if (!ckpt || !ckpt->restore) return 0;
    Error mine = {{0}};
    const int rc = ckpt->restore(ckpt->ctx, p, pos, &mine);
    if (anyone(p, rc != 0)) {
        if (rc) *err = mine;
        else error_set(err, "restoring the run failed on another rank (see its error line)");
        return -1;
    }
    dataset_set_cursor(ds, pos->cursor);
    return 0;
}

int train_run(const RunConfig *rc, const PipelineOptions *po, const TrainHooks *hooks, const CheckpointHooks *ckpt,
              RunSummary *summary, Error *err) {
    if (run_config_validate(rc, err)) return -1;
    Dataset *ds = open_data(rc, err);
    if (!ds) return -1;
    Pipeline *p = pipeline_create(rc, po, err);
    if (!p) {
        dataset_close(ds);
        return -1;
    }
    TrainPosition pos;
    RunSummary sum = {0};
    int result = restore(ckpt, p, ds, &pos, err);
    const int S = pipeline_n_stages(p);
    int *layers = xmalloc(S * sizeof(int));
    size_t *bytes = xmalloc(S * sizeof(size_t));
    RunInfo info;
    describe_run(rc, po, p, ds, layers, bytes, &info);
    info.start_step = pos.step;
    const bool root = pipeline_is_root(p);
    const TrainHooks *root_hooks = root ? hooks : NULL;
    if (result == 0 && root_hooks && root_hooks->on_start) result = root_hooks->on_start(hooks->ctx, rc, po, &info, err);
    // Only the root runs on_start (opens the store, ...): when it fails there, the other
    // processes must not step into a run the root has left.
    if (anyone(p, result != 0) && result == 0) {
        error_set(err, "the run could not start on rank 0 (see its error line)");
        result = -1;
    }
    const Loop loop = {.rc = rc, .p = p, .ds = ds, .hooks = root_hooks, .ckpt = ckpt,
                       .mpi = po->transport != TRANSPORT_KIND_LOCAL};
    if (result == 0) result = run_steps(&loop, &pos, &sum, err);
    if (result == 0 && root_hooks && root_hooks->on_end) root_hooks->on_end(hooks->ctx, &sum);
    if (summary) *summary = sum;
    free(layers);
    free(bytes);
    pipeline_free(p);
    dataset_close(ds);
    return result;
}
