// engine/runtime: interprets one rank's lowered action list for one step (DESIGN.md, "One
// step, as data"). The runtime owns, per local stage, a pool of activation slots (StageActs +
// one message buffer each), as many as the schedule keeps in flight on that stage; a
// microbatch takes a slot at its first action on the stage (RECV_F or F) and gives it back
// after the last action that reads it (its B or W, its SEND_B, or the backward of the stage
// below on the same rank, which reads its input gradient directly).
#ifndef PPTRAIN_RUNTIME_H
#define PPTRAIN_RUNTIME_H
#include <stdint.h>

#include "engine/error.h"
#include "engine/model.h"
#include "engine/schedule.h"
#include "engine/transport.h"

typedef struct Runtime Runtime;

typedef enum {
    RUNTIME_OK = 0,
    RUNTIME_FAILED = -1,   // this rank failed (timeout, bad message): the root cause
    RUNTIME_ABORTED = -2,  // stopped because another rank failed
} RuntimeStatus;

typedef struct {
    double loss;      // sum of the last stage's microbatch losses, in microbatch order (0 elsewhere)
    double busy_s;    // summed duration of the compute actions (F, B, I, W)
} RuntimeStats;

// sched: validated and lowered, borrowed for the runtime's life. stages: (S) the models of
// every stage, only those on `rank` are used (others may be NULL). rows x T: one microbatch.
Runtime *runtime_create(const Schedule *sched, int rank, StageModel *const *stages, int rows, int T,
                        Transport *tp);
void runtime_free(Runtime *rt);

// Runs the rank's actions once. inputs, targets: (M * rows * T) the whole batch, microbatch
// mb at offset mb * rows * T. loss_scale: 1 / (non-pad targets in the whole batch).
// Gradients accumulate into the local stages' grads (the caller zeroes them). On failure
// aborts the transport (so every other rank stops promptly) and fills err with one line:
// "rank 2 (stage 2): timed out after 300 s waiting at action 7 (RECV_B 2,mb 3)".
RuntimeStatus runtime_step(Runtime *rt, const int32_t *inputs, const int32_t *targets, float loss_scale,
                           RuntimeStats *stats, Error *err);

// Activation slots the schedule needs on `stage` (0 for a stage of another rank).
int runtime_peak_slots(const Runtime *rt, int stage);
#endif
