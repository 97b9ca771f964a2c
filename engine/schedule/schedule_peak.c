// engine/schedule/schedule_peak: how many microbatches of activations a schedule holds at its
// peak (schedule.h, schedule_peak_in_flight), for the run's memory estimate before it allocates.
#include <stdbool.h>

#include "engine/schedule/schedule.h"
#include "engine/schedule/simulate.h"

// Each stage's most in flight comes from the schedule's order, simulated at unit costs (the
// order alone decides it). The sum per rank, divided by its V stages, is that rank's share of
// the whole model's activations (stages split the layers evenly).
double schedule_peak_in_flight(const char *name, int P, int M, int V, bool one_process) {
    Error why;
    Schedule *s = schedule_resolve(name, P, M, V, &why);
    SimResult r;
    double peak = M;
    if (s && sim_run(s, (SimCosts){.f = 1.0, .b = 2.0, .w = 1.0}, &r, &why) == 0) {
        const Schedule *o = r.schedule;
        const int S = o->n_stages, per_rank = S / o->n_ranks > 0 ? S / o->n_ranks : 1;
        double all = 0.0, rank_max = 0.0;
        for (int rank = 0; rank < o->n_ranks; rank++) {
            double mine = 0.0;
            for (int st = 0; st < S; st++)
                if (o->stage_rank[st] == rank) mine += r.peak_act[st];
            all += mine;
            if (mine / per_rank > rank_max) rank_max = mine / per_rank;
        }
        peak = one_process ? all / S : rank_max;
        sim_free(&r);
    }
    schedule_free(s);
    return peak > 0.0 ? peak : M;
}
