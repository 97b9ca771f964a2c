// Schedule timing on top of schedule_execute, plus the derived numbers: busy time, bubble,
// peak in-flight activations per stage, message count.
#include "engine/schedule/simulate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int sim_check_costs(SimCosts c, Error *err) {
    double w = c.w < 0 ? c.b / 2 : c.w;
    if (!(c.f > 0) || !(c.b > 0) || !isfinite(c.f) || !isfinite(c.b)) {
        error_set(err, "costs: forward (%g) and backward (%g) must be positive", c.f, c.b);
        return -1;
    }
    if (!(w > 0 && w < c.b)) {
        error_set(err, "costs: the weight-gradient time W (%g) must be positive and below the backward time B (%g), "
                       "since the input gradient takes B - W", w, c.b);
        return -1;
    }
    if (!(c.latency >= 0) || !isfinite(c.latency)) {
        error_set(err, "costs: latency (%g) must be >= 0", c.latency);
        return -1;
    }
    return 0;
}

// In flight on a stage: from its F to its last backward piece (B, or W when split). A stage's
// actions all run on one rank, in list order, so the count only depends on that order.
static void count_peaks(const Schedule *s, int *peak) {
    int *live = xcalloc((size_t)s->n_stages, sizeof(int));
    memset(peak, 0, sizeof(int) * (size_t)s->n_stages);
    for (int r = 0; r < s->n_ranks; r++)
        for (int i = 0; i < s->ranks[r].n; i++) {
            Action a = s->ranks[r].actions[i];
            if (a.type == ACT_F && ++live[a.stage] > peak[a.stage]) peak[a.stage] = live[a.stage];
            if (a.type == ACT_B || a.type == ACT_W) live[a.stage]--;
        }
    free(live);
}

static void sum_up(SimResult *out) {
    const Schedule *s = out->schedule;
    out->makespan = 0;
    out->messages = 0;
    double busy_total = 0;
    for (int r = 0; r < s->n_ranks; r++) {
        out->busy[r] = 0;
        for (int i = 0; i < s->ranks[r].n; i++) {
            int pos = out->offset[r] + i;
            out->busy[r] += out->end[pos] - out->start[pos];
            if (out->end[pos] > out->makespan) out->makespan = out->end[pos];
            ActionType t = s->ranks[r].actions[i].type;
            out->messages += t == ACT_SEND_F || t == ACT_SEND_B;
        }
        busy_total += out->busy[r];
    }
    out->bubble = out->makespan > 0 ? 1.0 - busy_total / (s->n_ranks * out->makespan) : 0.0;
}

// dur: stride 0, one row of ACT_COUNT for every stage; stride ACT_COUNT, (S x ACT_COUNT).
static int simulate(const Schedule *s, const double *dur, bool per_stage, double latency, SimResult *out,
                    Error *err) {
    out->schedule = schedule_copy(s);
    schedule_order_weight_grads(out->schedule);  // what the pipeline runs
    schedule_lower(out->schedule);
    const Schedule *ls = out->schedule;
    int total = schedule_total_actions(ls);
    out->start = xmalloc(sizeof(double) * (size_t)(total ? total : 1));
    out->end = xmalloc(sizeof(double) * (size_t)(total ? total : 1));
    out->offset = xmalloc(sizeof(int) * (size_t)(ls->n_ranks + 1));
    out->busy = xmalloc(sizeof(double) * (size_t)ls->n_ranks);
    out->peak_act = xmalloc(sizeof(int) * (size_t)ls->n_stages);
    out->offset[0] = 0;
    for (int r = 0; r < ls->n_ranks; r++) out->offset[r + 1] = out->offset[r] + ls->ranks[r].n;
    // Lowering keeps a valid schedule valid (messages sit right beside their computes).
    int rc = per_stage ? schedule_execute_stages(ls, dur, latency, out->start, out->end, err)
                       : schedule_execute(ls, dur, latency, out->start, out->end, err);
    if (rc) {
        sim_free(out);
        return -1;
    }
    sum_up(out);
    count_peaks(ls, out->peak_act);
    return 0;
}

// One stage's durations per action type (comm actions 0).
static void stage_durations(SimCosts c, double *dur) {
    double w = c.w < 0 ? c.b / 2 : c.w;
    for (int t = 0; t < ACT_COUNT; t++) dur[t] = 0.0;
    dur[ACT_F] = c.f;
    dur[ACT_B] = c.b;
    dur[ACT_I] = c.b - w;
    dur[ACT_W] = w;
}

int sim_run(const Schedule *s, SimCosts c, SimResult *out, Error *err) {
    memset(out, 0, sizeof *out);
    if (sim_check_costs(c, err) || schedule_validate(s, err)) return -1;
    double dur[ACT_COUNT];
    stage_durations(c, dur);
    return simulate(s, dur, false, c.latency, out, err);
}

int sim_run_stages(const Schedule *s, const SimCosts *stage_costs, SimResult *out, Error *err) {
    memset(out, 0, sizeof *out);
    if (schedule_validate(s, err)) return -1;
    double *dur = xmalloc(sizeof(double) * ACT_COUNT * (size_t)s->n_stages);
    for (int st = 0; st < s->n_stages; st++) {
        Error why;
        if (sim_check_costs(stage_costs[st], &why)) {
            error_set(err, "stage %d: %s", st, why.msg);
            free(dur);
            return -1;
        }
        stage_durations(stage_costs[st], dur + (size_t)st * ACT_COUNT);
    }
    const int rc = simulate(s, dur, true, stage_costs[0].latency, out, err);
    free(dur);
    return rc;
}

void sim_free(SimResult *r) {
    schedule_free(r->schedule);
    free(r->start);
    free(r->end);
    free(r->offset);
    free(r->busy);
    free(r->peak_act);
    memset(r, 0, sizeof *r);
}

// Adds the part of [t0, t1) that falls in each column to occ[column][type].
static void add_occupancy(double (*occ)[4], int width, double unit, double t0, double t1, ActionType t) {
    int k0 = (int)floor(t0 / unit), k1 = (int)ceil(t1 / unit);
    for (int k = k0 < 0 ? 0 : k0; k < k1 && k < width; k++) {
        double lo = fmax(t0, k * unit), hi = fmin(t1, (k + 1) * unit);
        if (hi > lo) occ[k][t] += hi - lo;
    }
}

void sim_render_row(const SimResult *r, int rank, double unit, char *out, int width) {
    const ScheduleList *l = &r->schedule->ranks[rank];
    double (*occ)[4] = xcalloc((size_t)width + 1, sizeof *occ);  // time of F, B, I, W per column
    for (int i = 0; i < l->n; i++)
        if (!schedule_is_comm(l->actions[i].type))
            add_occupancy(occ, width, unit, r->start[r->offset[rank] + i], r->end[r->offset[rank] + i],
                          l->actions[i].type);
    for (int k = 0; k < width; k++) {
        double busy = 0, best = 0;
        int pick = -1;
        for (int t = 0; t < 4; t++) {
            busy += occ[k][t];
            if (occ[k][t] > best * (1 + 1e-9) + 1e-12) best = occ[k][t], pick = t;
        }
        // Idle wins only when it fills more of the column than any one action type.
        out[k] = pick < 0 || unit - busy > best * (1 + 1e-9) ? '.' : schedule_type_name((ActionType)pick)[0];
    }
    out[width] = '\0';
    free(occ);
}
