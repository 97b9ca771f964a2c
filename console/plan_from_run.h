// console/plan_from_run: the next run's layout from a stored run's measured stage times
// (engine/schedule/plan_search.h), for `pptrain plan --from-run RUN` and the setup screen.
#ifndef PPTRAIN_PLAN_FROM_RUN_H
#define PPTRAIN_PLAN_FROM_RUN_H
#include <stdbool.h>

#include "engine/error.h"
#include "engine/schedule/plan_search.h"

typedef struct {
    long long run;
    int P, V, M, S;           // the run's layout
    char schedule[4096];      // the run's schedule: a registry name or a CSV's path
    int *split;               // (S) the run's layers per stage
    int steps;                // steps averaged (the first left out)
    double step_ms, bubble;   // measured means
    double *busy_ms;          // (S) measured busy time per step of each stage (one replica's)
    double outside_ms;        // of step_ms, the time outside the schedule's actions: the optimizer,
                              // the gradient reduction across replicas, the data; every
                              // prediction (same, layouts) includes it as measured
    bool same_ok;             // same: the run's own layout at its measured stage times
    PlanLayout same;
    PlanCosts costs;   // the fitted costs
    int host_cores, host_ranks;
    PlanLayout *layouts;   // (n_layouts) best first
    int n_layouts;
} RunPlan;

// Reads run_text ("N" or "latest") from the store at db_path and ranks the layouts. Returns 0,
// or -1 with one line (no such run, no measurements, a store that cannot be read).
int plan_from_run_build(const char *db_path, const char *run_text, RunPlan *out, Error *err);
void plan_from_run_free(RunPlan *p);
#endif
