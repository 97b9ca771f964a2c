// storage/db_stage_costs: one run's measured costs, for plans made from them (`pptrain plan
// --from-run`, engine/schedule/plan_search.h): each stage's busy time per step and the step
// time and bubble they made. The first step (allocation, cold caches) is left out whenever
// the run has more than one.
#ifndef PPTRAIN_DB_STAGE_COSTS_H
#define PPTRAIN_DB_STAGE_COSTS_H
#include <stdint.h>

#include "storage/db.h"

typedef struct {
    int steps;          // steps averaged
    double step_ms;     // mean step time
    double bubble;      // mean measured bubble (NaN: not measured)
    int n_stages;       // S
    double *busy_ms;    // (S) mean busy time per step of each stage, over steps and replicas
} DbStageCosts;

// Fills out for the run; -1 with one line when the run does not exist, has no measured steps,
// or its stage rows do not cover stages 0..S-1. Free with db_stage_costs_free.
int db_stage_costs(Db *db, int64_t run, DbStageCosts *out, Error *err);
void db_stage_costs_free(DbStageCosts *c);
#endif
