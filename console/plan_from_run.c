// console/plan_from_run: a stored run's measured stage times, fitted to per-layer costs, then
// every registry layout simulated at them (`pptrain plan --from-run`, the setup screen's advice).
#include "console/plan_from_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/run_ref.h"
#include "engine/partition.h"
#include "engine/run_json.h"
#include "engine/schedule/schedule.h"
#include "storage/db_stage_costs.h"

#define PLAN_MAX_MICROBATCHES 64

void plan_from_run_free(RunPlan *p) {
    free(p->split);
    free(p->busy_ms);
    free(p->same.split);
    plan_layouts_free(p->layouts, p->n_layouts);
    memset(p, 0, sizeof *p);
}

// The run's configuration and layout as it ran: P, V, M, the split (manual or train's). A CSV
// schedule brings its own stage count: the measured one (out->S on entry).
static int run_layout(const DbRunInfo *r, RunConfig *rc, RunPlan *out, Error *err) {
    if (!r->config_json) {
        error_set(err, "run %lld has no stored configuration to plan from", (long long)r->id);
        return -1;
    }
    PipelineOptions po;
    char where[64];
    snprintf(where, sizeof where, "run %lld", (long long)r->id);
    if (run_json_parse(r->config_json, where, rc, &po, err)) return -1;
    snprintf(out->schedule, sizeof out->schedule, "%s", po.schedule);
    out->P = po.ranks;
    out->V = po.virtual_stages ? po.virtual_stages : schedule_default_virtual(po.schedule);
    out->M = rc->microbatches;
    if (!schedule_is_builtin(po.schedule) && out->P > 0 && out->S % out->P == 0) out->V = out->S / out->P;
    if (out->S != out->P * out->V) {
        error_set(err, "run %lld has timings for %d stages, its layout %d (%d ranks x %d)", (long long)r->id, out->S,
                  out->P * out->V, out->P, out->V);
        return -1;
    }
    out->split = xmalloc(sizeof(int) * (size_t)out->S);
    return po.split[0] ? partition_parse_split(po.split, rc->model.layers, out->S, out->split, err)
                       : partition_balance_model(&rc->model, rc->seq_len, out->S, out->split, err);
}

// The measured stage times; out->S their count.
static int run_measured(Db *db, RunPlan *out, Error *err) {
    DbStageCosts m;
    if (db_stage_costs(db, out->run, &m, err)) return -1;
    out->steps = m.steps;
    out->step_ms = m.step_ms;
    out->bubble = m.bubble;
    out->busy_ms = m.busy_ms;   // taken over
    out->S = m.n_stages;
    return 0;
}

static int plan_run(Db *db, const char *run_text, RunPlan *out, Error *err) {
    int64_t id;
    DbRunInfo r;
    if (run_ref_id(db, run_text, &id, err) || db_run_get(db, id, &r, err)) return -1;
    out->run = id;
    out->host_cores = r.host_cores;
    out->host_ranks = r.host_ranks;
    RunConfig rc;
    const int bad = run_measured(db, out, err) || run_layout(&r, &rc, out, err);
    db_run_info_clear(&r);
    if (bad) return -1;
    Error why;
    const double w_share = partition_weight_share(&rc.model, rc.seq_len);
    if (schedule_is_builtin(out->schedule))
        out->same_ok =
            plan_predict_measured(out->schedule, out->P, out->V, out->M, out->busy_ms, w_share, &out->same, &why) == 0;
    if (plan_costs_fit(out->busy_ms, out->S, rc.model.layers, partition_costs(&rc.model, rc.seq_len), &out->costs, err))
        return -1;
    out->costs.n_ranks = out->P;
    out->costs.w_share = w_share;
    out->costs.batch = rc.batch;
    out->costs.max_microbatches = PLAN_MAX_MICROBATCHES;
    if (plan_search(&out->costs, &out->layouts, &out->n_layouts, err)) return -1;
    // The schedule's span follows from the measured bubble, 1 - sum(busy) / (P x span): what
    // the step took beyond it, the plan cannot see and adds as measured.
    double busy = 0.0;
    for (int s = 0; s < out->S; s++) busy += out->busy_ms[s];
    const double span = out->bubble < 1.0 ? busy / (out->P * (1.0 - out->bubble)) : out->step_ms;
    out->outside_ms = out->step_ms > span ? out->step_ms - span : 0.0;
    out->same.step_ms += out->outside_ms;
    for (int k = 0; k < out->n_layouts; k++) out->layouts[k].step_ms += out->outside_ms;
    return 0;
}

int plan_from_run_build(const char *db_path, const char *run_text, RunPlan *out, Error *err) {
    memset(out, 0, sizeof *out);
    Db *db = db_open(db_path, false, err);
    if (!db) return -1;
    const int rc = plan_run(db, run_text, out, err);
    db_close(db);
    if (rc) plan_from_run_free(out);
    return rc;
}
