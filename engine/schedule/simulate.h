// engine/schedule/simulate: times a schedule under a cost model (what `pptrain plan` shows).
//
// Every rank runs its list in order; an action starts when its rank is free and what it
// needs has ended (plus the message latency across ranks). Per stage and microbatch a
// forward takes f, a full backward b, and a split backward I = b - w then W = w. Sends and
// receives take no time themselves. Bubble = 1 - sum(busy) / (P * makespan).
#ifndef PPTRAIN_SIMULATE_H
#define PPTRAIN_SIMULATE_H
#include "engine/schedule/schedule.h"

typedef struct {
    double f;        // forward of one stage, one microbatch (time units)
    double b;        // full backward (B), = I + W
    double w;        // weight-gradient part of b (W); I = b - w. Negative: w = b / 2
    double latency;  // added to every message between ranks (default 0)
} SimCosts;

typedef struct {
    Schedule *schedule;  // the ordered, lowered copy that was run (owned)
    double *start, *end; // (total actions) rank-major: rank r's action i at offset[r] + i
    int *offset;         // (P+1)
    double makespan;     // last end (every rank starts at time 0)
    double *busy;        // (P) compute time per rank
    double bubble;       // idle fraction of P x makespan
    int *peak_act;       // (S) most microbatches with F done and last backward piece not
    int messages;        // SEND actions (each has one RECV)
} SimResult;

// Checks the costs (f > 0, b > 0, 0 < w < b, latency >= 0). Returns 0 or -1 with err.
int sim_check_costs(SimCosts c, Error *err);
// Validates s, puts a copy's weight gradients in microbatch order and lowers it, as the
// pipeline runs it (schedule_order_weight_grads), and times it. Returns 0, or -1 with err (bad costs, invalid
// schedule); out is then empty.
int sim_run(const Schedule *s, SimCosts c, SimResult *out, Error *err);
// sim_run with each stage at its own costs: stage_costs (S), the latency read from stage 0's.
int sim_run_stages(const Schedule *s, const SimCosts *stage_costs, SimResult *out, Error *err);
void sim_free(SimResult *r);

// Draws rank r's timeline into out[0..width) (plus a NUL): column k covers time
// [k*unit, (k+1)*unit) and shows the type letter (F, B, I, W) that fills most of it, or '.'
// when idle time fills more of it than any one type. With unit no longer than the shortest
// action every action gets its own columns; a longer unit scales a long run down.
void sim_render_row(const SimResult *r, int rank, double unit, char *out, int width);
#endif
