// `pptrain plan --from-run RUN` (plan_from_run.h): the run store's measured stage times, fitted
// to per-layer costs, then every registry layout simulated at them.
#include "console/cmd/plan_from_run.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/cmd/history_format.h"
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
    if (history_run_id(db, run_text, &id, err) || db_run_get(db, id, &r, err)) return -1;
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
    return plan_search(&out->costs, &out->layouts, &out->n_layouts, err);
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

// ---- printing --------------------------------------------------------------------------------

static void list_text(const int *v, int n, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < n && len + 12 < size; k++)
        len += (size_t)snprintf(buf + len, size - len, "%s%d", k ? "," : "", v[k]);
}

static void print_text(const RunPlan *p, int top) {
    char split[256];
    list_text(p->split, p->S, split, sizeof split);
    printf("run %lld: %s, P %d, V %d, M %d, layers per stage %s; %d step%s measured (the first left out)\n", p->run,
           p->schedule, p->P, p->V, p->M, split, p->steps, p->steps == 1 ? "" : "s");
    printf("measured:  step %.3f ms, bubble %.1f %%, stage busy per step", p->step_ms, 100.0 * p->bubble);
    for (int k = 0; k < p->S; k++) printf("%s%.3f", k ? "," : " ", p->busy_ms[k]);
    printf(" ms\n");
    if (p->same_ok)
        printf("predicted: step %.3f ms, bubble %.1f %% (this layout at the measured stage times, messages free)\n",
               p->same.step_ms, 100.0 * p->same.bubble);
    if (p->host_ranks > p->host_cores && p->host_cores > 0)
        printf("note: %d ranks shared %d cores, so the measured bubble holds contention the plan leaves out\n",
               p->host_ranks, p->host_cores);
    printf("costs per step: layer %.3f ms, embedding %.3f ms, head %.3f ms (F = (F+B)/3, W = %.2f B)\n\n",
           p->costs.layer_ms, p->costs.embed_ms, p->costs.head_ms, p->costs.w_share);
    printf("  #  %-17s %2s %4s  %-24s %9s %8s %5s\n", "schedule", "V", "M", "layers per stage", "step ms", "bubble",
           "peak");
    for (int i = 0; i < p->n_layouts && i < top; i++) {
        const PlanLayout *l = &p->layouts[i];
        list_text(l->split, l->S, split, sizeof split);
        printf("%3d  %-17s %2d %4d  %-24s %9.3f %6.1f %% %5d\n", i + 1, l->schedule, l->V, l->M, split, l->step_ms,
               100.0 * l->bubble, l->peak_act);
    }
}

static cJSON *layout_json(const PlanLayout *l) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "schedule", l->schedule);
    cJSON_AddNumberToObject(o, "virtual", l->V);
    cJSON_AddNumberToObject(o, "microbatches", l->M);
    if (l->split) cJSON_AddItemToObject(o, "layers_per_stage", cJSON_CreateIntArray(l->split, l->S));
    cJSON_AddNumberToObject(o, "step_ms", l->step_ms);
    cJSON_AddNumberToObject(o, "bubble", l->bubble);
    cJSON_AddNumberToObject(o, "peak_activations", l->peak_act);
    return o;
}

static void print_json(const RunPlan *p, int top) {
    cJSON *o = cJSON_CreateObject();
    history_json_int64(o, "run", p->run);
    cJSON *m = cJSON_AddObjectToObject(o, "measured");
    cJSON_AddStringToObject(m, "schedule", p->schedule);
    cJSON_AddNumberToObject(m, "stages", p->P);
    cJSON_AddNumberToObject(m, "virtual", p->V);
    cJSON_AddNumberToObject(m, "microbatches", p->M);
    cJSON_AddItemToObject(m, "layers_per_stage", cJSON_CreateIntArray(p->split, p->S));
    cJSON_AddNumberToObject(m, "steps", p->steps);
    history_json_num(m, "step_ms", p->step_ms);
    history_json_num(m, "bubble", p->bubble);
    cJSON_AddItemToObject(m, "stage_busy_ms", cJSON_CreateDoubleArray(p->busy_ms, p->S));
    if (p->same_ok) cJSON_AddItemToObject(o, "predicted", layout_json(&p->same));
    else cJSON_AddNullToObject(o, "predicted");
    cJSON *c = cJSON_AddObjectToObject(o, "costs_ms");
    cJSON_AddNumberToObject(c, "layer", p->costs.layer_ms);
    cJSON_AddNumberToObject(c, "embedding", p->costs.embed_ms);
    cJSON_AddNumberToObject(c, "head", p->costs.head_ms);
    cJSON *list = cJSON_AddArrayToObject(o, "layouts");
    for (int i = 0; i < p->n_layouts && i < top; i++) cJSON_AddItemToArray(list, layout_json(&p->layouts[i]));
    history_json_print(o);
}

void plan_from_run_print(const RunPlan *p, int top, bool json) {
    if (json) print_json(p, top);
    else print_text(p, top);
}
