// console/tui/pure/tui_plan: simulate a schedule for the console (see tui_plan.h).
#include "console/tui/pure/tui_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/partition.h"
#include "engine/schedule/schedule.h"
#include "engine/schedule/simulate.h"

void tui_plan_free(TuiPlan *p) {
    free(p->peak_act);
    free(p->layers);
    free(p->stage_rank);
    free(p->ev_off);
    free(p->ev);
    memset(p, 0, sizeof *p);
}

// The simulated compute actions of every rank, as TuiEvents.
static void plan_events(TuiPlan *p, const SimResult *r) {
    const Schedule *s = r->schedule;
    int total = 0;
    for (int q = 0; q < s->n_ranks; q++) total += s->ranks[q].n;
    p->ev = xmalloc(sizeof(TuiEvent) * (size_t)(total > 0 ? total : 1));
    p->ev_off = xmalloc(sizeof(int) * (size_t)(s->n_ranks + 1));
    int n = 0;
    for (int q = 0; q < s->n_ranks; q++) {
        p->ev_off[q] = n;
        for (int i = 0; i < s->ranks[q].n; i++) {
            const Action a = s->ranks[q].actions[i];
            if (schedule_is_comm(a.type)) continue;
            const int at = r->offset[q] + i;
            p->ev[n++] = (TuiEvent){.t0 = (float)r->start[at], .t1 = (float)r->end[at],
                                    .kind = (uint8_t)tui_cell_kind(a.type), .stage = (int16_t)a.stage, .mb = a.mb};
        }
    }
    p->ev_off[s->n_ranks] = n;
}

int tui_plan_build(const char *schedule, int P, int M, int V, const ModelConfig *model, int T, TuiPlan *out,
                   Error *err) {
    const int n_layers = model->layers;
    memset(out, 0, sizeof *out);
    Schedule *s = schedule_resolve(schedule, P, M, V, err);
    if (!s) return -1;
    if (s->n_stages > n_layers) {
        error_set(err, "%d stages (%d ranks x %d) need at least %d layers; the model has %d", s->n_stages,
                  s->n_ranks, s->n_stages / s->n_ranks, s->n_stages, n_layers);
        schedule_free(s);
        return -1;
    }
    // Costs are per rank's share of the layers: a stage takes P/S of them (cmd_plan's rule).
    const double share = (double)s->n_ranks / s->n_stages;
    const SimCosts c = {1.0 * share, 2.0 * share, 1.0 * share, 0.0};
    SimResult r;
    if (sim_run(s, c, &r, err)) {
        schedule_free(s);
        return -1;
    }
    snprintf(out->name, sizeof out->name, "%s", s->name);
    out->P = s->n_ranks;
    out->S = s->n_stages;
    out->M = s->n_microbatches;
    out->bubble = r.bubble;
    out->makespan = r.makespan;
    out->peak_act = xmalloc(sizeof(int) * (size_t)s->n_stages);
    memcpy(out->peak_act, r.peak_act, sizeof(int) * (size_t)s->n_stages);
    out->layers = xmalloc(sizeof(int) * (size_t)s->n_stages);
    Error why;
    if (partition_balance_model(model, T, s->n_stages, out->layers, &why))  // the split train makes
        for (int k = 0; k < s->n_stages; k++) out->layers[k] = -1;
    out->stage_rank = xmalloc(sizeof(int) * (size_t)s->n_stages);
    memcpy(out->stage_rank, s->stage_rank, sizeof(int) * (size_t)s->n_stages);
    plan_events(out, &r);
    sim_free(&r);
    schedule_free(s);
    return 0;
}
