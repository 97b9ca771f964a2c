// Layout search over the schedule registry at measured costs (plan_search.h).
#include "engine/schedule/plan_search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/schedule/schedule.h"
#include "engine/schedule/simulate.h"

#define PLAN_MAX_VIRTUAL 4
#define PLAN_REFINED 12   // the best layouts whose split is refined (and each schedule and V's best)

int plan_costs_fit(const double *busy_ms, int n_stages, int n_layers, PartitionCosts pc, PlanCosts *out, Error *err) {
    double total = 0;
    for (int k = 0; k < n_stages; k++) {
        if (!(busy_ms[k] > 0) || !isfinite(busy_ms[k])) {
            error_set(err, "stage %d has no measured busy time (%g ms)", k, busy_ms[k]);
            return -1;
        }
        total += busy_ms[k];
    }
    const double layers = n_layers + (pc.embed + pc.head) / pc.layer;   // in layer-equivalents
    out->n_layers = n_layers;
    out->layer_ms = total / layers;
    out->embed_ms = out->layer_ms * pc.embed / pc.layer;
    out->head_ms = out->layer_ms * pc.head / pc.layer;
    return 0;
}

// One microbatch through a stage that takes step_ms per step: F, then B split into I and W.
static SimCosts stage_costs(double step_ms, int M, double w_share) {
    const double fb = step_ms / M, b = fb * (1.0 - PLAN_FORWARD_SHARE);
    return (SimCosts){.f = fb * PLAN_FORWARD_SHARE, .b = b, .w = b * w_share, .latency = 0.0};
}

// Simulates schedule (P, V, M) with stage k taking stage_ms[k] per step; fills all of out but
// split.
static int simulate_layout(const char *schedule, int P, int V, int M, const double *stage_ms, double w_share,
                           PlanLayout *out, Error *err) {
    Schedule *s = schedule_build(schedule, P, M, V, err);
    if (!s) return -1;
    SimCosts *costs = xmalloc(sizeof(SimCosts) * (size_t)s->n_stages);
    for (int k = 0; k < s->n_stages; k++) costs[k] = stage_costs(stage_ms[k], M, w_share);
    SimResult r;
    const int rc = sim_run_stages(s, costs, &r, err);
    if (rc == 0) {
        *out = (PlanLayout){.schedule = schedule_find(schedule)->name,
                            .V = s->n_stages / P,
                            .M = M,
                            .S = s->n_stages,
                            .step_ms = r.makespan,
                            .bubble = r.bubble,
                            .peak_act = 0};
        for (int k = 0; k < s->n_stages; k++)
            if (r.peak_act[k] > out->peak_act) out->peak_act = r.peak_act[k];
        sim_free(&r);
    }
    free(costs);
    schedule_free(s);
    return rc;
}

int plan_predict_measured(const char *schedule, int P, int V, int M, const double *stage_ms, double w_share,
                          PlanLayout *out, Error *err) {
    memset(out, 0, sizeof *out);
    return simulate_layout(schedule, P, V, M, stage_ms, w_share, out, err);
}

int plan_predict(const PlanCosts *c, const char *schedule, int V, int M, const int *split, PlanLayout *out,
                 Error *err) {
    memset(out, 0, sizeof *out);
    const int S = c->n_ranks * (V ? V : schedule_default_virtual(schedule));
    double *stage_ms = xmalloc(sizeof(double) * (size_t)S);
    for (int k = 0; k < S; k++)
        stage_ms[k] = partition_stage_cost(k, S, split[k], c->layer_ms, c->embed_ms, c->head_ms);
    const int rc = simulate_layout(schedule, c->n_ranks, V, M, stage_ms, c->w_share, out, err);
    free(stage_ms);
    if (rc) return -1;
    out->split = xmalloc(sizeof(int) * (size_t)S);
    memcpy(out->split, split, sizeof(int) * (size_t)S);
    return 0;
}

// Best first: shorter step, smaller bubble, fewer microbatches in flight, then registry order.
static int layout_cmp(const void *pa, const void *pb) {
    const PlanLayout *a = pa, *b = pb;
    const double rel = 1e-9 * fmax(a->step_ms, b->step_ms);
    if (fabs(a->step_ms - b->step_ms) > rel) return a->step_ms < b->step_ms ? -1 : 1;
    if (fabs(a->bubble - b->bubble) > 1e-12) return a->bubble < b->bubble ? -1 : 1;
    if (a->peak_act != b->peak_act) return a->peak_act - b->peak_act;
    return (int)(schedule_find(a->schedule) - schedule_find(b->schedule));
}

// Appends the layout (schedule, V, M) with its balanced split; skipped when the generator
// refuses it or the stages outnumber the layers.
static void try_layout(const PlanCosts *c, const ScheduleInfo *info, int V, int M, PlanLayout **out, int *n, int *cap) {
    const int S = c->n_ranks * V;
    if (S > c->n_layers) return;
    int *split = xmalloc(sizeof(int) * (size_t)S);
    Error err;
    if (partition_balance_costs(c->n_layers, S, c->layer_ms, c->embed_ms, c->head_ms, split, &err) == 0) {
        if (*n == *cap) {
            *cap = *cap ? 2 * *cap : 16;
            const size_t bytes = sizeof(PlanLayout) * (size_t)*cap;
            *out = check_alloc(realloc(*out, bytes), bytes, __FILE__, __LINE__);
        }
        if (plan_predict(c, info->name, V, M, split, &(*out)[*n], &err) == 0) ++*n;
    }
    free(split);
}

// One layer moved from stage `from` to its neighbour `to`, if the layout then predicts a shorter
// step: *l becomes that layout. Returns whether it did.
static bool try_move(const PlanCosts *c, PlanLayout *l, int from, int to) {
    if (to < 0 || to >= l->S || l->split[from] == 1) return false;
    int *split = xmalloc(sizeof(int) * (size_t)l->S);
    memcpy(split, l->split, sizeof(int) * (size_t)l->S);
    split[from]--, split[to]++;
    PlanLayout moved;
    Error err;
    const bool better =
        plan_predict(c, l->schedule, l->V, l->M, split, &moved, &err) == 0 && moved.step_ms < l->step_ms * (1 - 1e-9);
    free(split);
    if (!better) {
        free(moved.split);
        return false;
    }
    free(l->split);
    *l = moved;
    return true;
}

// The balanced split evens the stages; a rank holding several (zb-v's first and last, with
// the embedding and the head) may still be the slowest. Moves single layers between
// neighbouring stages while the predicted step gets shorter (at most 4L moves).
static void refine_split(const PlanCosts *c, PlanLayout *l) {
    for (int moves = 0; moves < 4 * c->n_layers; moves++) {
        bool moved = false;
        for (int k = 0; k < l->S && !moved; k++) moved = try_move(c, l, k, k - 1) || try_move(c, l, k, k + 1);
        if (!moved) return;
    }
}

// Tries split on *l (same schedule and V); keeps it when the step gets shorter.
static void try_split(const PlanCosts *c, PlanLayout *l, const int *split) {
    PlanLayout other;
    Error err;
    if (plan_predict(c, l->schedule, l->V, l->M, split, &other, &err) == 0 && other.step_ms < l->step_ms * (1 - 1e-9)) {
        free(l->split);
        *l = other;
    } else {
        free(other.split);
    }
}

// Layout i of the sorted list: refined when it is among the first PLAN_REFINED or the best of
// its schedule and V; else given the refined split of that best, when it helps.
static void refine_layout(const PlanCosts *c, PlanLayout *sorted, int i) {
    int best = 0;
    while (best < i && (sorted[best].schedule != sorted[i].schedule || sorted[best].V != sorted[i].V)) best++;
    if (i < PLAN_REFINED || best == i) refine_split(c, &sorted[i]);
    else try_split(c, &sorted[i], sorted[best].split);
}

int plan_search(const PlanCosts *c, PlanLayout **out, int *n, Error *err) {
    *out = NULL;
    *n = 0;
    int cap = 0;
    for (const ScheduleInfo *info = SCHEDULE_REGISTRY; info < SCHEDULE_REGISTRY + SCHEDULE_COUNT; info++) {
        const int V_first = info->virtual_fixed ? info->default_virtual : 1;
        const int V_last = info->virtual_fixed ? info->default_virtual : PLAN_MAX_VIRTUAL;
        for (int V = V_first; V <= V_last; V++)
            for (int M = 1; M <= c->batch && M <= c->max_microbatches; M++)
                if (c->batch % M == 0) try_layout(c, info, V, M, out, n, &cap);
    }
    if (*n == 0) {
        error_set(err, "no layout fits: %d ranks need at least %d layers, the model has %d", c->n_ranks, c->n_ranks,
                  c->n_layers);
        return -1;
    }
    qsort(*out, (size_t)*n, sizeof **out, layout_cmp);
    for (int i = 0; i < *n; i++) refine_layout(c, *out, i);
    qsort(*out, (size_t)*n, sizeof **out, layout_cmp);
    return 0;
}

void plan_layouts_free(PlanLayout *layouts, int n) {
    for (int i = 0; i < n; i++) free(layouts[i].split);
    free(layouts);
}
