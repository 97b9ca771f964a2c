// console/tui/tui_snapshot: the live view and the run hooks that fill it (see tui_snapshot.h).
#include "console/tui/tui_snapshot.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "console/cli.h"
#include "engine/clock.h"
#include "engine/schedule/schedule.h"
#include "kernels/cpu/blas_core.h"

static int min_i(int a, int b) { return a < b ? a : b; }

const char *tui_run_state_name(TuiRunState s) {
    static const char *const NAMES[] = {"ready", "starting", "running", "paused", "stopping",
                                        "finished", "stopped", "failed"};
    return s <= TUI_RUN_FAILED ? NAMES[s] : "?";
}

bool tui_run_state_live(TuiRunState s) { return s >= TUI_RUN_STARTING && s <= TUI_RUN_STOPPING; }

// ---- the view -------------------------------------------------------------------------------

void tui_view_reset(TuiView *v) {
    memset(v, 0, offsetof(TuiView, ev));
    v->bubble_ideal = NAN;
    v->loss = v->lr = v->grad_norm = v->tokens_per_s = v->gflops = v->step_ms = NAN;
    tui_series_reset(&v->loss_series);
}

// Copies the filled parts of src (the whole struct is ~300 KiB, mostly spare capacity).
static void view_copy(TuiView *dst, const TuiView *src) {
    memcpy(dst, src, offsetof(TuiView, ev));
    const int n = src->ev_off[min_i(src->n_ranks, TUI_MAX_RANKS)];
    memcpy(dst->ev, src->ev, sizeof(TuiEvent) * (size_t)n);
    tui_series_copy(&dst->loss_series, &src->loss_series);
    dst->version = src->version;
}

void tui_view_identity(TuiView *v, const RunConfig *rc, const PipelineOptions *po) {
    snprintf(v->schedule, sizeof v->schedule, "%.255s", po->schedule);
    snprintf(v->model, sizeof v->model, "%s", rc->model.name);
    snprintf(v->transport, sizeof v->transport, "%s", transport_kind_name(po->transport));
    cli_device_text(po->device, po->gpu_fp32, v->device, sizeof v->device);
    v->blas_warning[0] = '\0';
    BlasCpu cpu;
    blas_cpu_read(&cpu);
    const BlasWidth runs = blas_core_width(), best = blas_cpu_width(&cpu);
    if (po->device == DEVICE_CPU && runs < best)
        snprintf(v->blas_warning, sizeof v->blas_warning, "kernels %s (CPU: %s)", blas_width_name(runs),
                 blas_width_name(best));
    v->host_cores = telemetry_host_cores();
    v->host_ranks = telemetry_host_ranks(!transport_multi_process(po->transport), po->ranks * (po->dp > 0 ? po->dp : 1));
    v->P = po->ranks;
    v->V = po->virtual_stages ? po->virtual_stages
           : schedule_is_builtin(po->schedule) ? schedule_default_virtual(po->schedule) : 0;
    v->D = po->dp > 0 ? po->dp : 1;
    v->M = rc->microbatches;
    v->B = rc->batch;
    v->T = rc->seq_len;
    v->steps_planned = rc->steps;
    v->sample_every = rc->sample_every;
    v->lr_peak = rc->optim.lr;
    v->params = (double)model_config_param_count(&rc->model);
    v->n_ranks = min_i(po->ranks, TUI_MAX_RANKS);
    for (int r = 0; r < v->n_ranks; r++) {
        TuiRankRow *row = &v->rank[r];
        snprintf(row->layers, sizeof row->layers, "?");
        row->busy_ms = row->transfer_ms = row->wait_ms = row->peak_bytes = NAN;
        row->cpu_pct = row->rss_bytes = NAN;
    }
}

double tui_view_eta(const TuiView *v) {
    if (v->steps_done <= 0 || v->run_s <= 0) return NAN;
    const int left = v->steps_planned - v->step;
    return left > 0 ? left * v->run_s / v->steps_done : 0.0;
}

// ---- kept timelines -----------------------------------------------------------------------------

static void ring_free(TuiSnapshot *l) {
    free(l->ring_ev);
    free(l->ring_off);
    free(l->ring_step);
    free(l->ring_span);
    l->ring_ev = NULL, l->ring_off = l->ring_step = NULL, l->ring_span = NULL;
    l->ring_cap = l->ring_n = l->ring_next = 0;
}

// Sized from the first measured step: every step of a run has the same actions.
static void ring_alloc(TuiSnapshot *l, const TuiView *v) {
    const int lanes = v->n_ranks, per = v->ev_off[lanes] > 0 ? v->ev_off[lanes] : 1;
    const size_t step_bytes = (size_t)per * sizeof(TuiEvent) + (size_t)(lanes + 1) * sizeof(int) + 16;
    const int want = v->steps_planned > 0 ? v->steps_planned : 1;
    const size_t fit = TUI_HISTORY_BYTES / step_bytes;
    l->ring_cap = (int)(fit < 1 ? 1 : fit < (size_t)want ? fit : (size_t)want);
    l->ring_ev_per = per;
    l->ring_lanes = lanes;
    l->ring_ev = xmalloc(sizeof(TuiEvent) * (size_t)l->ring_cap * (size_t)per);
    l->ring_off = xmalloc(sizeof(int) * (size_t)l->ring_cap * (size_t)(lanes + 1));
    l->ring_step = xmalloc(sizeof(int) * (size_t)l->ring_cap);
    l->ring_span = xmalloc(sizeof(double) * (size_t)l->ring_cap);
}

// Keeps the staging view's measured timeline when it is a step not kept yet. Under mu.
static void ring_push(TuiSnapshot *l) {
    const TuiView *v = &l->staging;
    if (v->timeline_planned || v->timeline_step <= 0 || v->ev_off[v->n_ranks] == 0) return;
    const int newest = l->ring_n ? l->ring_step[(l->ring_next + l->ring_cap - 1) % l->ring_cap] : 0;
    if (l->ring_n && v->timeline_step <= newest) return;
    if (!l->ring_cap) ring_alloc(l, v);
    const int k = l->ring_next, lanes = l->ring_lanes;
    int *off = l->ring_off + (size_t)k * (size_t)(lanes + 1);
    int n = 0;
    for (int q = 0; q < lanes; q++) {
        off[q] = n;
        for (int i = v->ev_off[q]; q < v->n_ranks && i < v->ev_off[q + 1] && n < l->ring_ev_per; i++)
            l->ring_ev[(size_t)k * (size_t)l->ring_ev_per + (size_t)n++] = v->ev[i];
    }
    off[lanes] = n;
    l->ring_step[k] = v->timeline_step;
    l->ring_span[k] = v->span_ms;
    l->ring_next = (k + 1) % l->ring_cap;
    if (l->ring_n < l->ring_cap) l->ring_n++;
}

int tui_snapshot_kept(TuiSnapshot *l, int *oldest, int *newest) {
    pthread_mutex_lock(&l->mu);
    const int n = l->ring_n;
    *oldest = n ? l->ring_step[(l->ring_next + l->ring_cap - n) % l->ring_cap] : 0;
    *newest = n ? l->ring_step[(l->ring_next + l->ring_cap - 1) % l->ring_cap] : 0;
    pthread_mutex_unlock(&l->mu);
    return n;
}

bool tui_snapshot_timeline(TuiSnapshot *l, int step, TuiTimeline *out) {
    pthread_mutex_lock(&l->mu);
    int pick = -1;
    for (int j = 0; j < l->ring_n; j++) {   // oldest to newest: steps increase
        const int k = (l->ring_next + l->ring_cap - l->ring_n + j) % l->ring_cap;
        if (pick < 0 || l->ring_step[k] <= step) pick = k;
    }
    if (pick >= 0) {
        const int lanes = l->ring_lanes < TUI_MAX_RANKS ? l->ring_lanes : TUI_MAX_RANKS;
        const int *off = l->ring_off + (size_t)pick * (size_t)(l->ring_lanes + 1);
        out->step = l->ring_step[pick];
        out->span_ms = l->ring_span[pick];
        out->n_lanes = lanes;
        memcpy(out->ev_off, off, sizeof(int) * (size_t)(lanes + 1));
        const int n = off[lanes] < TUI_MAX_EVENTS ? off[lanes] : TUI_MAX_EVENTS;
        memcpy(out->ev, l->ring_ev + (size_t)pick * (size_t)l->ring_ev_per, sizeof(TuiEvent) * (size_t)n);
    }
    pthread_mutex_unlock(&l->mu);
    return pick >= 0;
}

// ---- publishing -------------------------------------------------------------------------------

// blocking: wait for the UI's copy to finish (only before or after the run's steps).
static void publish(TuiSnapshot *l, bool blocking) {
    if (blocking) pthread_mutex_lock(&l->mu);
    else if (pthread_mutex_trylock(&l->mu) != 0) {
        l->publish_pending = true;
        return;
    }
    l->staging.version++;
    view_copy(&l->shared, &l->staging);
    ring_push(l);
    pthread_mutex_unlock(&l->mu);
    l->publish_pending = false;
}

void tui_snapshot_init(TuiSnapshot *l) {
    memset(l, 0, offsetof(TuiSnapshot, shared));
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->resume_cv, NULL);
    tui_view_reset(&l->shared);
    tui_view_reset(&l->staging);
    atomic_init(&l->pause, false);
    atomic_init(&l->stop, false);
    l->publish_pending = false;
    l->run_id = NULL;
    l->pause_limit_s = 0.0;
    l->ring_ev = NULL, l->ring_off = l->ring_step = NULL, l->ring_span = NULL;
    l->ring_cap = l->ring_ev_per = l->ring_lanes = l->ring_n = l->ring_next = 0;
}

void tui_snapshot_destroy(TuiSnapshot *l) {
    ring_free(l);
    pthread_cond_destroy(&l->resume_cv);
    pthread_mutex_destroy(&l->mu);
}

bool tui_snapshot_take(TuiSnapshot *l, TuiView *out) {
    pthread_mutex_lock(&l->mu);
    const bool changed = l->shared.version != out->version;
    if (changed) view_copy(out, &l->shared);
    pthread_mutex_unlock(&l->mu);
    return changed;
}

void tui_snapshot_begin(TuiSnapshot *l, const RunOptions *ro, const int64_t *run_id, double bubble_ideal) {
    const unsigned version = l->staging.version;
    tui_view_reset(&l->staging);
    l->staging.version = version;
    tui_view_identity(&l->staging, &ro->rc, &ro->pipe);
    l->staging.state = TUI_RUN_STARTING;
    l->staging.bubble_ideal = bubble_ideal;
    l->run_id = run_id;
    l->n_stages = 0;
    l->bubble_sum = 0.0;
    atomic_store(&l->pause, false);
    atomic_store(&l->stop, false);
    pthread_mutex_lock(&l->mu);
    ring_free(l);
    pthread_mutex_unlock(&l->mu);
    publish(l, true);
}

void tui_snapshot_end(TuiSnapshot *l, TuiRunState state, const char *message, int64_t run_id) {
    l->staging.state = state;
    snprintf(l->staging.message, sizeof l->staging.message, "%s", message ? message : "");
    if (run_id > 0) l->staging.run_id = run_id;
    publish(l, true);
}

void tui_snapshot_set_pause(TuiSnapshot *l, bool paused) {
    pthread_mutex_lock(&l->mu);
    atomic_store(&l->pause, paused);
    pthread_cond_broadcast(&l->resume_cv);
    pthread_mutex_unlock(&l->mu);
}

void tui_snapshot_request_stop(TuiSnapshot *l) {
    pthread_mutex_lock(&l->mu);
    atomic_store(&l->stop, true);
    pthread_cond_broadcast(&l->resume_cv);
    pthread_mutex_unlock(&l->mu);
}

// ---- the run's hooks (engine thread) ------------------------------------------------------------

static int snap_on_start(void *ctx, const RunConfig *rc, const PipelineOptions *po, const RunInfo *info,
                         Error *err) {
    (void)err;
    TuiSnapshot *l = ctx;
    TuiView *v = &l->staging;
    tui_view_identity(v, rc, po);
    v->params = (double)info->params;
    v->host_ranks = info->host_ranks, v->host_cores = info->host_cores;
    v->V = po->ranks > 0 ? info->n_stages / po->ranks : 0;
    v->state = atomic_load(&l->stop) ? TUI_RUN_STOPPING : TUI_RUN_RUNNING;
    if (l->run_id) v->run_id = *l->run_id;
    l->n_stages = min_i(info->n_stages, TUI_MAX_STAGES);
    for (int s = 0; s < l->n_stages; s++) {
        l->stage_layers[s] = info->stage_layers[s];
        l->slot_bytes[s] = (double)info->slot_bytes[s];
    }
    l->t_first = clock_now_s();
    l->paused_s = 0.0;
    publish(l, false);
    return 0;
}

// Per pipeline rank: the mean over its replicas' busy / transfer / wait, the layers of its
// stages and the activation memory they peaked at.
static void update_ranks(TuiSnapshot *l, const PipelineReport *r) {
    TuiView *v = &l->staging;
    const StepTelemetry *t = &r->telemetry;
    const int P = v->P > 0 ? v->P : 1, D = r->n_ranks / P > 0 ? r->n_ranks / P : 1;
    int stage_rank[TUI_MAX_STAGES];
    const int S = min_i(min_i(r->n_stages, l->n_stages), TUI_MAX_STAGES);
    for (int s = 0; s < S; s++) stage_rank[s] = t->stages[s].rank % P;
    for (int q = 0; q < v->n_ranks; q++) {
        TuiRankRow *row = &v->rank[q];
        row->busy_ms = row->transfer_ms = row->wait_ms = row->cpu_pct = row->rss_bytes = 0.0;
        for (int d = 0; d < D && d * P + q < t->n_ranks; d++) {
            const RankTelemetry *rt = &t->ranks[d * P + q];
            row->busy_ms += rt->busy_ms / D;
            row->transfer_ms += rt->transfer_ms / D;
            row->wait_ms += rt->wait_ms / D;
            row->cpu_pct += r->cpu_pct[d * P + q] / D;
            row->rss_bytes += r->rss_bytes[d * P + q] / D;
        }
        double peak = 0.0;
        for (int s = 0; s < S; s++) {
            if (stage_rank[s] != q) continue;
            peak += l->slot_bytes[s] > 0 ? r->peak_slots[s] * l->slot_bytes[s] : NAN;
        }
        row->peak_bytes = peak;
        tui_layer_ranges(l->stage_layers, stage_rank, S, q, row->layers, sizeof row->layers);
    }
}

// Lane q is world rank q (replica 0), its times moved onto rank 0's clock.
static void update_timeline(TuiSnapshot *l, const Pipeline *p, const PipelineReport *r) {
    TuiView *v = &l->staging;
    const ActionEvent *const *events;
    const int *n_events;
    const int W = pipeline_events(p, &events, &n_events);
    const double *off = pipeline_clock_offsets(p);
    const int lanes = min_i(v->n_ranks, W);
    double t0 = INFINITY, t1 = -INFINITY;
    for (int q = 0; q < lanes; q++)
        for (int i = 0; i < n_events[q]; i++) {
            t0 = fmin(t0, events[q][i].start + off[q]);
            t1 = fmax(t1, events[q][i].end + off[q]);
        }
    int n = 0;
    for (int q = 0; q < v->n_ranks; q++) {
        v->ev_off[q] = n;
        for (int i = 0; q < lanes && i < n_events[q] && n < TUI_MAX_EVENTS; i++) {
            const ActionEvent *e = &events[q][i];
            v->ev[n++] = (TuiEvent){.t0 = (float)((e->start + off[q] - t0) * 1e3),
                                    .t1 = (float)((e->end + off[q] - t0) * 1e3),
                                    .kind = (uint8_t)tui_cell_kind(e->type), .stage = e->stage, .mb = e->mb};
        }
    }
    v->ev_off[v->n_ranks] = n;
    v->span_ms = n ? (t1 - t0) * 1e3 : 0.0;
    v->timeline_step = r->step.step;
    v->timeline_planned = false;
}

static void snap_on_step(void *ctx, const Pipeline *p, const PipelineReport *r) {
    TuiSnapshot *l = ctx;
    TuiView *v = &l->staging;
    const StepReport *s = &r->step;
    v->step = s->step;
    v->steps_planned = s->steps;
    v->loss = s->loss;
    v->lr = s->lr;
    v->grad_norm = s->grad_norm;
    v->tokens_per_s = s->tokens_per_s;
    v->gflops = s->gflops;
    v->step_ms = s->step_ms;
    v->steps_done++;
    v->run_s = clock_now_s() - l->t_first - l->paused_s;
    tui_series_push(&v->loss_series, s->step, s->loss);
    if (r->has_telemetry) {
        const BubbleParts *b = &r->telemetry.parts;
        v->has_bubble = r->n_ranks > 1;
        v->has_parts = v->has_bubble && b->valid;
        v->parts = (TuiBubble){r->telemetry.bubble, b->ideal, b->imbalance, b->transfer, b->contention};
        v->bubble = r->telemetry.bubble;
        l->bubble_sum += r->telemetry.bubble;
        v->bubble_mean = l->bubble_sum / v->steps_done;
        update_ranks(l, r);
        update_timeline(l, p, r);
    }
    publish(l, false);
}

// A paused run waits here, between steps, until resume or stop; under MPI it lets one step
// through every pause_limit_s so that no other process's wait reaches the timeout.
static bool snap_should_stop(void *ctx) {
    TuiSnapshot *l = ctx;
    if (l->publish_pending) publish(l, false);
    if (atomic_load(&l->stop)) {
        l->staging.state = TUI_RUN_STOPPING;
        publish(l, true);
        return true;
    }
    if (!atomic_load(&l->pause)) return false;
    l->staging.state = TUI_RUN_PAUSED;
    publish(l, true);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    const double limit = l->pause_limit_s > 0 ? l->pause_limit_s : 1e9;
    until.tv_sec += (time_t)limit;
    const double paused_at = clock_now_s();
    pthread_mutex_lock(&l->mu);
    int rc = 0;
    while (atomic_load(&l->pause) && !atomic_load(&l->stop) && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&l->resume_cv, &l->mu, &until);
    pthread_mutex_unlock(&l->mu);
    l->paused_s += clock_now_s() - paused_at;
    const bool stop = atomic_load(&l->stop);
    l->staging.state = stop ? TUI_RUN_STOPPING : atomic_load(&l->pause) ? TUI_RUN_PAUSED : TUI_RUN_RUNNING;
    publish(l, true);
    return stop;
}

void tui_view_push_val(TuiView *v, int step, double val_loss) {
    if (v->n_val == TUI_VAL_CAP) {
        for (int k = 0; k < TUI_VAL_CAP / 2; k++) {
            v->val_step[k] = v->val_step[2 * k + 1];
            v->val_loss[k] = v->val_loss[2 * k + 1];
        }
        v->n_val = TUI_VAL_CAP / 2;
    }
    v->val_step[v->n_val] = step;
    v->val_loss[v->n_val++] = (float)val_loss;
}

static void snap_on_eval(void *ctx, int step, double val_loss) {
    TuiSnapshot *l = ctx;
    tui_view_push_val(&l->staging, step, val_loss);
    publish(l, false);
}

static void snap_on_sample(void *ctx, int step, const int32_t *ids, int n, const char *text, double seconds) {
    (void)ids, (void)n;
    TuiSnapshot *l = ctx;
    TuiView *v = &l->staging;
    v->sample_step = step;
    v->n_samples++;
    v->sample_s += seconds;
    snprintf(v->sample_text, sizeof v->sample_text, "%s", text);
    publish(l, false);
}

static void snap_on_end(void *ctx, const RunSummary *s) {
    TuiSnapshot *l = ctx;
    (void)s;
    if (l->publish_pending) publish(l, true);
}

TrainHooks tui_snapshot_hooks(TuiSnapshot *l) {
    return (TrainHooks){.ctx = l, .on_start = snap_on_start, .on_step = snap_on_step, .on_eval = snap_on_eval,
                        .on_sample = snap_on_sample, .should_stop = snap_should_stop, .on_end = snap_on_end};
}
