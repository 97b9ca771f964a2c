// console/cmd/plan_from_run_print: how `pptrain plan --from-run` prints a RunPlan.
#ifndef PPTRAIN_PLAN_FROM_RUN_PRINT_H
#define PPTRAIN_PLAN_FROM_RUN_PRINT_H
#include <stdbool.h>

#include "console/plan_from_run.h"

// Prints the measured run, its layout predicted, and the top layouts (text or one JSON line).
void plan_from_run_print(const RunPlan *p, int top, bool json);
#endif
