// engine/schedule/plan_search: which layout to run next, from one run's measured stage times.
//
// The run store holds every stage's busy time per step (storage/db_stage_costs.h). Divided by
// its layers, with the embedding and the head weighted by the model's cost model
// (engine/partition.h), that is a cost per layer on this machine. For every schedule in the
// registry, every V it takes and every M that divides the batch, the search splits the layers
// by those costs (partition_balance_costs), simulates the step with each stage at its own
// cost (sim_run_stages) and ranks the layouts by predicted step time; the best few then get
// their split refined against the simulated step (a rank holding several stages may be the
// slowest though every stage is even).
//
// The store has one busy time per stage, not one per action type: a forward is taken as a
// third of F+B (the backward computes two matmuls per forward one) and W as the model's weight
// share of the backward (partition_weight_share).
#ifndef PPTRAIN_PLAN_SEARCH_H
#define PPTRAIN_PLAN_SEARCH_H
#include "engine/error.h"
#include "engine/partition.h"

#define PLAN_FORWARD_SHARE (1.0 / 3.0)   // F / (F + B)

typedef struct {
    int n_ranks;            // P: the machine's pipeline ranks stay as measured
    int n_layers;           // L
    int batch;              // B: M must divide it
    int max_microbatches;   // largest M to try
    // One step's whole batch (all M microbatches) through one layer, the embedding and the
    // head, forward and backward, in ms.
    double layer_ms, embed_ms, head_ms;
    double w_share;   // W / B, in (0, 1)
} PlanCosts;

typedef struct {
    const char *schedule;   // a registry name (static storage)
    int V, M, S;            // stages per rank, microbatches, stages (P x V)
    int *split;             // (S) layers per stage
    double step_ms;         // predicted makespan of one step
    double bubble;          // predicted idle fraction
    int peak_act;           // most microbatches in flight on one stage
} PlanLayout;

// The costs that explain one run's measured busy time per step: busy_ms (n_stages, holding
// n_layers layers between them) sums to the layers plus the embedding and the head at the
// cost model's ratios (pc). Fills layer_ms, embed_ms, head_ms and n_layers; returns 0, or -1
// with err when a stage time is not positive.
int plan_costs_fit(const double *busy_ms, int n_stages, int n_layers, PartitionCosts pc, PlanCosts *out, Error *err);

// Predicts one layout: schedule with V stages per rank, M microbatches, the layers split as
// split (S = P x V counts) at costs c. out->split is a copy. Returns 0, or -1 with err when the
// registry's generator refuses (P, M, V).
int plan_predict(const PlanCosts *c, const char *schedule, int V, int M, const int *split, PlanLayout *out, Error *err);
// The same with measured stage times (stage_ms: one step's busy time of each of the S stages)
// in place of the fitted costs: how the measured run itself should have gone.
int plan_predict_measured(const char *schedule, int P, int V, int M, const double *stage_ms, double w_share,
                          PlanLayout *out, Error *err);

// Every layout the registry offers at c (V 1..4 where a schedule takes any, M dividing the
// batch up to max_microbatches, every stage holding a layer), best first: shortest step, then
// smallest bubble, then fewest microbatches in flight. The first 12, and each schedule and V's
// best, have their splits refined by single-layer moves that shorten the predicted step; the
// other layouts of that schedule and V take the refined split where it shortens theirs. *out has *n layouts; free with
// plan_layouts_free. Returns 0, or -1 with err when none fits (more ranks than layers).
int plan_search(const PlanCosts *c, PlanLayout **out, int *n, Error *err);
void plan_layouts_free(PlanLayout *layouts, int n);
#endif
