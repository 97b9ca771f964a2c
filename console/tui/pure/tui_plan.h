// console/tui/pure/tui_plan: a schedule's predicted timeline and bubble, as `pptrain plan` computes
// them (engine/schedule/simulate, costs F=1 B=2 and W=1 for split backwards, per rank's share of the
// layers), in the form the console draws: TuiEvents per rank. The setup screen previews it,
// the live screen shows its bubble as the ideal beside the measured one, and `pptrain watch`
// draws it where the run store has no measured timeline. Pure: no curses.
#ifndef PPTRAIN_TUI_PLAN_H
#define PPTRAIN_TUI_PLAN_H
#include <stdbool.h>

#include "console/tui/pure/tui_chart.h"
#include "engine/error.h"
#include "engine/model/model.h"

typedef struct {
    char name[256];
    int P, S, M;            // ranks, stages, microbatches (a CSV brings its own)
    double bubble;          // idle fraction of P x makespan
    double makespan;        // time units
    int *peak_act;          // (S) microbatches in flight at most, per stage
    int *layers;            // (S) decoder layers per stage (train's default split, model costs)
    int *stage_rank;        // (S) the rank holding each stage
    int *ev_off;            // (P+1) rank r's events are ev[ev_off[r] .. ev_off[r+1])
    TuiEvent *ev;           // compute actions only, times in units
} TuiPlan;

// schedule: a built-in name or a .csv path, as the registry resolves it (schedule_resolve); P, M, V as the run would pass them (V = 0: the
// schedule's default; ignored with a CSV). model, T: the run's model (every stage needs one of
// its decoder layers) and sequence length, which give the layer split the way train makes it
// (partition_balance_model). Returns 0, or -1 with a one-line err; out is then empty
// (tui_plan_free is safe).
int tui_plan_build(const char *schedule, int P, int M, int V, const ModelConfig *model, int T, TuiPlan *out,
                   Error *err);
void tui_plan_free(TuiPlan *p);
#endif
