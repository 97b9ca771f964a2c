// Weight gradients in microbatch order (DESIGN.md "Parity"): a stage's gradient is the sum of
// its microbatches' contributions, and float addition depends on order, so every layout adds
// them as one device does: microbatch 0, then 1, ... Most schedules already run a stage's
// backward in that order; torch's looped BFS runs it in reverse, and a CSV may do anything.
//
// Two rewrites, the first that gives a valid schedule wins:
//   permute  (compute-only schedules) a stage's B actions keep their places in the lists but
//            take the stage's microbatches in increasing order, and likewise its I actions and
//            its W actions. The timeline keeps its shape and memory (looped BFS's reversed
//            backward becomes the forward-order one, same bubble, same peak).
//   defer    a B that comes early runs as I where it stands, and every W, the B's included,
//            runs as soon as the W of the microbatch before it has: only weight gradients
//            move, later, so no message moves and no deadlock can appear; their activations
//            live until then.
#include <stdlib.h>
#include <string.h>

#include "engine/schedule/schedule.h"

// Whether stage s's weight-gradient actions (B or W) come in increasing microbatch order on
// its rank's list.
static bool stage_in_order(const Schedule *sc, int stage) {
    const ScheduleList *l = &sc->ranks[sc->stage_rank[stage]];
    int next = 0;
    for (int i = 0; i < l->n; i++) {
        const Action a = l->actions[i];
        if (a.stage != stage || (a.type != ACT_B && a.type != ACT_W)) continue;
        if (a.mb != next) return false;
        next++;
    }
    return true;
}

bool schedule_weight_order_ok(const Schedule *sc) {
    for (int s = 0; s < sc->n_stages; s++)
        if (!stage_in_order(sc, s)) return false;
    return true;
}

// Within each (stage, type in {B, I, W}), the k-th action on the list takes the k-th smallest
// microbatch of that stage and type.
static void permute(Schedule *sc) {
    const int M = sc->n_microbatches;
    int *seen = xmalloc(sizeof(int) * (size_t)M);
    for (int s = 0; s < sc->n_stages; s++) {
        ScheduleList *l = &sc->ranks[sc->stage_rank[s]];
        const ActionType types[] = {ACT_B, ACT_I, ACT_W};
        for (int t = 0; t < 3; t++) {
            memset(seen, 0, sizeof(int) * (size_t)M);
            for (int i = 0; i < l->n; i++)
                if (l->actions[i].stage == s && l->actions[i].type == types[t]) seen[l->actions[i].mb] = 1;
            int mb = 0;
            for (int i = 0; i < l->n; i++) {
                Action *a = &l->actions[i];
                if (a->stage != s || a->type != types[t]) continue;
                while (!seen[mb]) mb++;
                a->mb = mb++;
            }
        }
    }
    free(seen);
}

// An overlapped pair that defer breaks (its second moves later, or a moved W would stand
// between the two) runs as two plain actions: clears the overlap of rank's last compute action.
static void unpair_last(Schedule *out, int rank) {
    ScheduleList *l = &out->ranks[rank];
    for (int i = l->n - 1; i >= 0; i--)
        if (!schedule_is_comm(l->actions[i].type)) {
            l->actions[i].overlap_next = false;
            return;
        }
}

// Pushes W(stage, next[stage]) and its successors while they are pending.
static void flush_pending(Schedule *out, int rank, int stage, int M, int *next, unsigned char *pending) {
    while (next[stage] < M && pending[(size_t)stage * M + next[stage]]) {
        unpair_last(out, rank);
        schedule_push(out, rank, ACT_W, stage, next[stage]);
        next[stage]++;
    }
}

static Schedule *defer(const Schedule *sc) {
    const int S = sc->n_stages, M = sc->n_microbatches;
    Schedule *out = schedule_copy(sc);
    int *next = xcalloc((size_t)S, sizeof(int));
    unsigned char *pending = xcalloc((size_t)S * M, 1);
    for (int r = 0; r < sc->n_ranks; r++) {
        out->ranks[r].n = 0;
        const ScheduleList *l = &sc->ranks[r];
        for (int i = 0; i < l->n; i++) {
            const Action a = l->actions[i];
            const bool weights = a.type == ACT_B || a.type == ACT_W;
            if (!weights || a.mb == next[a.stage]) {
                schedule_push_action(out, r, a);
                if (weights) next[a.stage]++;
            } else {
                // The I keeps the B's overlap; a W that moves later leaves its pair.
                if (a.type == ACT_B) schedule_push_action(out, r, (Action){ACT_I, a.stage, a.mb, a.overlap_next});
                else unpair_last(out, r);
                pending[(size_t)a.stage * M + a.mb] = 1;
            }
            if (weights) flush_pending(out, r, a.stage, M, next, pending);
        }
    }
    free(next);
    free(pending);
    return out;
}

int schedule_order_weight_grads(Schedule *sc) {
    if (schedule_weight_order_ok(sc)) return 0;
    if (!schedule_has_comm(sc)) {
        Schedule *p = schedule_copy(sc);
        permute(p);
        Error ignored;
        const bool ok = schedule_weight_order_ok(p) && schedule_validate(p, &ignored) == 0;
        if (ok) {
            for (int r = 0; r < sc->n_ranks; r++) memcpy(sc->ranks[r].actions, p->ranks[r].actions,
                                                         sizeof(Action) * (size_t)sc->ranks[r].n);
            schedule_free(p);
            return 1;
        }
        schedule_free(p);
    }
    Schedule *d = defer(sc);
    for (int r = 0; r < sc->n_ranks; r++) {
        ScheduleList *dst = &sc->ranks[r];
        dst->n = 0;
        for (int i = 0; i < d->ranks[r].n; i++) schedule_push_action(sc, r, d->ranks[r].actions[i]);
    }
    schedule_free(d);
    return 1;
}
