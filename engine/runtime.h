// engine/runtime: interprets one rank's lowered action list for one step (DESIGN.md, "One
// step, as data"). The runtime owns, per local stage, a pool of activation slots (StageActs +
// one message buffer each), as many as the schedule keeps in flight on that stage; a
// microbatch takes a slot at its first action on the stage (RECV_F or F) and gives it back
// after the last action that reads it (its B or W, its SEND_B, or the backward of the stage
// below on the same rank, which reads its input gradient directly).
//
// Recompute (RuntimeOptions.recompute, --recompute all): slots are light StageActs (the stage
// input, output and input gradient, engine/model/model.h), and each local stage also owns a small
// pool of full workspaces: an F borrows one for its forward, a B for its recompute + backward,
// an I from its recompute until the W of the same microbatch. The pool is planned from the
// schedule: the most microbatches held between I and W on the stage, plus one (1 when the
// schedule does not split the backward).
//
// torch's OVERLAP_F_B (DualPipeV's "(0F3;3B1)OVERLAP_F_B") reaches the runtime as its two
// sub-actions, the F and then the B: the CSV reader and the dualpipe-v generator both write it
// so. A CPU rank has one stream, so the runtime runs them one after the other; nothing here
// overlaps them (on a GPU that would take a second stream).
//
// Telemetry: every action a step runs is recorded as one ActionEvent (engine/telemetry.h) on
// CLOCK_MONOTONIC, into a buffer sized at creation from the rank's action count.
#ifndef PPTRAIN_RUNTIME_H
#define PPTRAIN_RUNTIME_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/error.h"
#include "engine/model/model.h"
#include "engine/schedule/schedule.h"
#include "engine/telemetry.h"
#include "engine/transport/transport.h"

typedef struct Runtime Runtime;

typedef enum {
    RUNTIME_OK = 0,
    RUNTIME_FAILED = -1,   // this rank failed (timeout, bad message): the root cause
    RUNTIME_ABORTED = -2,  // stopped because another rank failed
} RuntimeStatus;

typedef struct {
    double loss;      // sum of the last stage's microbatch losses, in microbatch order (0 elsewhere)
    double busy_s;    // summed duration of the compute actions (F, B, I, W): their events' sum
    double comm_s;    // summed duration of SEND / RECV (a RECV: the time it waited)
} RuntimeStats;

typedef struct {
    bool recompute;   // re-materialize activations in the backward (light slots + workspaces)
    // Post each receive itself (transport_post), one at a time: the next RECV's once the one
    // before it has completed, instead of the caller posting a step's receives at its start
    // (transport_post_one_ahead: NCCL).
    bool post_one_ahead;
} RuntimeOptions;

// sched: validated and lowered, borrowed for the runtime's life. stages: (S) the models of
// every stage, only those on `rank` are used (others may be NULL). rows x T: one microbatch.
Runtime *runtime_create(const Schedule *sched, int rank, StageModel *const *stages, int rows, int T,
                        Transport *tp);
// runtime_create with options (opts NULL: the defaults, recompute off, as runtime_create).
Runtime *runtime_create_opts(const Schedule *sched, int rank, StageModel *const *stages, int rows, int T,
                             Transport *tp, const RuntimeOptions *opts);
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
// Full workspaces `stage` holds under recompute (0 without recompute or for another rank).
int runtime_peak_workspaces(const Runtime *rt, int stage);
// Bytes of activation memory `stage` holds for the whole run: its slots (StageActs, full or
// light, plus message buffers) and its workspaces. 0 for a stage of another rank.
size_t runtime_peak_bytes(const Runtime *rt, int stage);

// Generation (engine/generate.h): from now on the last stage keeps its logits apart from the
// loss gradient, and after each of its F copies, for each row r of the microbatch with
// pos[mb * rows + r] >= 0, the logits at that position to out + (mb * rows + r) * V.
// pos (M * rows) and out (M * rows, V) are the caller's, read and written during runtime_step.
// CPU stages only (a device keeps its logits on the device); a no-op on a rank without the
// last stage.
void runtime_tap_logits(Runtime *rt, const int32_t *pos, float *out);
// Generation with a KV cache (engine/model/model.h, StageKV), for the following steps: kv (S)
// holds this rank's stages' caches (the others' entries are unused), *pos is read at each
// step. decode false: each F runs its stage's whole forward (one row of the run's T), then
// keeps the keys and values of positions [0, *pos] in the cache (the prefill). decode true,
// on a runtime of one row of T = 1: each F is stage_decode of its one token at position
// *pos. kv NULL: plain forwards again. CPU stages only.
void runtime_use_kv(Runtime *rt, StageKV *const *kv, const int32_t *pos, bool decode);

// The events of the last runtime_step, in execution order (*n of them: every action of the
// rank's list, fewer after a failed step). Owned by the runtime, valid until its next step.
const ActionEvent *runtime_events(const Runtime *rt, int *n);

// Device time for the compute actions of stages that only queue their work (a GPU: the
// stage_time_* marks of engine/model/model.h, one before and one after each such action).
// Once the device has run all of a stage's actions of the last step, that stage's compute
// events become device time: each action's device start and end, placed on the host clock
// as early as the rule "the device starts an action no sooner than the host queued it"
// allows (one offset per stage). A stage the device has not finished keeps its host times;
// nothing waits. Call it after the step's wait for its gradient norm (runtime_step has none
// of its own: RuntimeStats.busy_s counts host times until then). Returns the busy seconds of
// the rank's events as they are then (RuntimeStats.busy_s, recounted).
double runtime_device_times(Runtime *rt);
#endif
