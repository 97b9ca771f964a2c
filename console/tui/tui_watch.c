// console/tui/tui_watch: the live view of a run another process is writing, read from the run
// store once a second (`pptrain watch`). The store keeps steps and per-stage means but no
// action events, so the timeline panel shows the schedule's planned timeline (the simulator's)
// with the run's measured mean bubble beside the ideal one.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/tui/tui_app.h"
#include "engine/clock.h"
#include "engine/schedule/schedule.h"

#define WATCH_POLL_S 1.0

void tui_watch_free(TuiWatch *w) {
    if (w->db) db_close(w->db);
    w->db = NULL;
}

static TuiRunState state_of(const DbRunInfo *r) {
    if (r->crashed) return TUI_RUN_FAILED;
    if (!r->status || !strcmp(r->status, "running")) return TUI_RUN_RUNNING;
    if (!strcmp(r->status, "finished")) return TUI_RUN_FINISHED;
    if (!strcmp(r->status, "stopped")) return TUI_RUN_STOPPED;
    return TUI_RUN_FAILED;
}

// "cpu fp32", "cuda bf16": the stored device and the precision from the run's configuration.
static void watch_device(const DbRunInfo *r, char *buf, size_t size) {
    cJSON *config = r->config_json ? cJSON_Parse(r->config_json) : NULL;
    const cJSON *prec = cJSON_GetObjectItem(cJSON_GetObjectItem(config, "pipeline"), "precision");
    const bool cuda = r->device && strcmp(r->device, "cuda") == 0;
    snprintf(buf, size, "%s %s", r->device ? r->device : "?",
             cJSON_IsString(prec) && cuda ? prec->valuestring : cuda ? "bf16" : "fp32");
    cJSON_Delete(config);
}

// Identity, and the planned timeline with the stage-to-rank map, for a newly watched run.
static void watch_begin(TuiView *v, const DbRunInfo *r) {
    tui_view_reset(v);
    v->read_only = true;
    v->run_id = r->id;
    snprintf(v->schedule, sizeof v->schedule, "%s", r->schedule ? r->schedule : "?");
    snprintf(v->model, sizeof v->model, "%s", r->model ? r->model : "?");
    snprintf(v->transport, sizeof v->transport, "%s", r->transport ? r->transport : "?");
    watch_device(r, v->device, sizeof v->device);
    v->host_cores = r->host_cores;
    v->host_ranks = r->host_ranks;
    v->P = r->stages, v->V = r->virtual_stages, v->D = r->dp, v->M = r->microbatches;
    v->B = r->batch, v->T = r->seq_len, v->steps_planned = r->steps_planned;
    v->params = (double)r->params;
    v->lr_peak = r->lr;
    v->n_ranks = r->stages < TUI_MAX_RANKS ? (r->stages > 0 ? r->stages : 1) : TUI_MAX_RANKS;
    for (int q = 0; q < v->n_ranks; q++) {
        snprintf(v->rank[q].layers, sizeof v->rank[q].layers, "?");
        v->rank[q].busy_ms = v->rank[q].transfer_ms = v->rank[q].wait_ms = v->rank[q].peak_bytes = NAN;
        v->rank[q].cpu_pct = v->rank[q].rss_bytes = NAN;
    }
}

// The planned timeline (and the stage owners, for the rank rows) of the run's schedule.
static void watch_plan(TuiView *v, const DbRunInfo *r, TuiPlan *plan) {
    Error err;
    ModelConfig m;
    int layers = r->model && model_config_preset(&m, r->model, &err) == 0 ? m.layers : 0;
    if (!layers && r->model && model_config_from_json(&m, r->model, &err) == 0) layers = m.layers;
    if (!layers || tui_plan_build(r->schedule ? r->schedule : "", r->stages, r->microbatches, r->virtual_stages,
                                  &m, r->seq_len, plan, &err)) {
        memset(plan, 0, sizeof *plan);
        return;
    }
    v->bubble_ideal = plan->bubble;
    v->timeline_planned = true;
    v->span_ms = plan->makespan;
    int n = 0;
    for (int q = 0; q < v->n_ranks; q++) {
        v->ev_off[q] = n;
        if (q >= plan->P) continue;
        for (int i = plan->ev_off[q]; i < plan->ev_off[q + 1] && n < TUI_MAX_EVENTS; i++) v->ev[n++] = plan->ev[i];
    }
    v->ev_off[v->n_ranks] = n;
}

// Rank rows from the per-stage means: a rank's busy and transfer add up its stages; wait is
// the rank's own (every stage row of a rank carries it). A store before version 3 has no
// transfer: the rank's whole non-busy time (comm + idle) shows as wait.
static void watch_ranks(TuiView *v, const DbStageSummary *st, int n, const TuiPlan *plan) {
    int layers_of[TUI_MAX_STAGES], rank_of[TUI_MAX_STAGES];
    const int S = plan->S < TUI_MAX_STAGES ? plan->S : 0;
    for (int s = 0; s < S; s++) layers_of[s] = plan->layers[s], rank_of[s] = plan->stage_rank[s];
    for (int q = 0; q < v->n_ranks; q++) {
        TuiRankRow *row = &v->rank[q];
        if (S) tui_layer_ranges(layers_of, rank_of, S, q, row->layers, sizeof row->layers);
        bool any = false;
        double busy = 0, comm = 0, idle = 0, xfer = 0, wait = NAN, peak = 0;
        for (int k = 0; k < n; k++) {
            const int s = st[k].stage;
            const int owner = s < S ? rank_of[s] : s % (v->P > 0 ? v->P : 1);
            if (owner != q) continue;
            busy += st[k].busy_ms, comm += st[k].sendrecv_ms, idle = st[k].between_ms;
            xfer += st[k].transfer_ms, wait = st[k].wait_ms;
            peak += (double)st[k].peak_act_bytes;
            any = true;
        }
        if (!any) continue;
        const bool split = isfinite(xfer) && isfinite(wait);
        row->busy_ms = busy;
        row->transfer_ms = split ? xfer : NAN;
        row->wait_ms = split ? wait : comm + idle;
        row->peak_bytes = peak > 0 ? peak : NAN;
    }
}

// The run to show: the one asked for, else the newest (switching when a newer one starts).
static int64_t pick_run(TuiWatch *w, Error *err) {
    if (w->want > 0) return w->want;
    const int64_t id = db_run_latest(w->db, err);
    return id;
}

// The run's samples (train --sample-every): the latest for the sample panel, their count and time.
static void watch_samples(TuiWatch *w, int64_t id, TuiView *v) {
    DbSample *sm = NULL;
    int n = 0;
    Error err;
    if (db_samples_read(w->db, id, &sm, &n, &err)) return;
    v->n_samples = n;
    v->sample_s = 0.0;
    for (int i = 0; i < n; i++) v->sample_s += isfinite(sm[i].seconds) ? sm[i].seconds : 0.0;
    if (n > 0) {
        v->sample_step = sm[n - 1].step;
        snprintf(v->sample_text, sizeof v->sample_text, "%s", sm[n - 1].text);
    }
    db_samples_free(sm, n);
}

bool tui_watch_poll(TuiApp *app) {
    TuiWatch *w = &app->watcher;
    TuiView *v = app->view;
    const double now = clock_now_s();
    if (now - w->polled_at < WATCH_POLL_S) return false;
    w->polled_at = now;
    Error err;
    if (!w->db && !(w->db = db_open(w->db_path, false, &err))) {
        snprintf(v->message, sizeof v->message, "waiting for the run store: %.480s", err.msg);
        return true;
    }
    const int64_t id = pick_run(w, &err);
    if (id <= 0) {
        snprintf(v->message, sizeof v->message, id == 0 ? "waiting for a run in %s" : "%s",
                 id == 0 ? w->db_path : err.msg);
        return true;
    }
    DbRunInfo r;
    if (db_run_get(w->db, id, &r, &err)) {
        snprintf(v->message, sizeof v->message, "%s", err.msg);
        return true;
    }
    if (id != w->run) {
        watch_begin(v, &r);
        w->run = id;
        w->last_step = 0;
        w->evals = 0;
        w->ms_sum = 0;
    }
    TuiPlan plan;
    watch_plan(v, &r, &plan);
    DbStep *steps = NULL;
    int n = 0;
    const int fresh = r.last_step - w->last_step;
    if (fresh > 0 && db_steps_read(w->db, id, fresh, &steps, &n, &err) == 0) {
        for (int i = 0; i < n; i++) {
            if (steps[i].step <= w->last_step) continue;
            tui_series_push(&v->loss_series, steps[i].step, steps[i].loss);
            w->ms_sum += isfinite(steps[i].step_ms) ? steps[i].step_ms : 0;
            v->steps_done++;
            const DbStep *s = &steps[i];
            v->step = s->step, v->loss = s->loss, v->lr = s->lr, v->grad_norm = s->grad_norm;
            v->tokens_per_s = s->tokens_per_s, v->gflops = s->gflops, v->step_ms = s->step_ms;
            if (isfinite(s->bubble)) v->has_bubble = true, v->bubble = s->bubble;
            w->last_step = s->step;
        }
        free(steps);
    }
    DbEval *ev = NULL;
    int n_ev = 0;
    if (r.evals > w->evals && db_evals_read(w->db, id, &ev, &n_ev, &err) == 0) {   // the new passes
        for (int k = w->evals; k < n_ev; k++) tui_view_push_val(v, ev[k].step, ev[k].val_loss);
        w->evals = n_ev;
    }
    free(ev);
    watch_samples(w, id, v);
    v->run_s = w->ms_sum / 1e3;
    // The measured bubble shown beside the plan is the run's mean.
    if (isfinite(r.mean_bubble)) v->has_bubble = true, v->bubble = r.mean_bubble, v->bubble_mean = r.mean_bubble;
    v->has_parts = isfinite(r.mean_bubble) && isfinite(r.mean_ideal);
    v->parts = (TuiBubble){r.mean_bubble, r.mean_ideal, r.mean_imbalance, r.mean_transfer, r.mean_contention};
    DbStageSummary *st = NULL;
    int n_st = 0;
    if (db_stage_summary(w->db, id, &st, &n_st, &err) == 0) watch_ranks(v, st, n_st, &plan);
    free(st);
    v->state = state_of(&r);
    snprintf(v->message, sizeof v->message, "%s", r.crashed ? "the writing process is gone" : r.error ? r.error : "");
    v->timeline_step = v->step;
    v->version++;
    tui_plan_free(&plan);
    db_run_info_clear(&r);
    return true;
}
