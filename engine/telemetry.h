// engine/telemetry: what each rank did during a step, as timed events, and the numbers the
// console and the run store show: per-rank busy / idle / communication-wait time and the
// measured bubble = 1 - sum(busy) / (P * step wall time) (DESIGN.md, "One step, as data"),
// and what that bubble is made of (BubbleParts).
//
// Who does what:
//   runtime   records one ActionEvent per action it runs, on its rank's CLOCK_MONOTONIC
//             (runtime_events), into a buffer sized once from the schedule.
//   pipeline  gathers every rank's events of the step at rank 0 (threads: shared memory;
//             MPI: a gather), with each rank's clock offset to rank 0's clock, and calls
//             telemetry_summarize.
//   storage   writes the events of every step to a Chrome trace (storage/trace.h).
#ifndef PPTRAIN_TELEMETRY_H
#define PPTRAIN_TELEMETRY_H
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    double start, end;      // seconds on the recording rank's monotonic clock
    int32_t mb;             // microbatch
    int16_t stage;          // global stage index (for SEND/RECV: the stage the runtime acts for)
    uint8_t type;           // ActionType (engine/schedule/schedule.h): F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B
    uint8_t pad;
} ActionEvent;

typedef struct {
    double busy_ms;         // sum of F, B, I, W durations
    double comm_ms;         // sum of SEND/RECV durations (for RECV: the time blocked waiting)
    double idle_ms;         // step wall time - busy - comm
    // The non-busy time (comm + idle) split by cause, transfer + wait = step_ms - busy:
    double transfer_ms;     // moving bytes: each SEND and RECV copies one message, as fast as the
                            // step's fastest SEND did (every message has the same size)
    double wait_ms;         // the rest: blocked on a peer, or done before the step ends: the bubble
    int events;
} RankTelemetry;

// One replica's view of a stage: under data parallelism, the mean over the D replicas that run it.
typedef struct {
    double busy_ms;         // this stage's compute (F, B, I, W)
    double comm_ms;         // this stage's SEND/RECV time
    double transfer_ms;     // of comm_ms, moving bytes (as RankTelemetry.transfer_ms)
    int rank;
} StageTelemetry;

// The measured bubble in parts that add up to it (fractions of n_ranks x step_ms). Each comes
// from replaying the step's actions in their recorded order, every action as early as its
// rank and its message allow (engine/telemetry_bubble.c):
//   ideal       the schedule's own bubble: every stage at the mean measured time of each
//               action type (F, B, I, W), messages free;
//   imbalance   added by giving each stage its own mean times;
//   transfer    added by the messages' measured transfer times;
//   contention  the rest: what the measured step lost beyond that replay, that is ranks
//               ready to run that did not (rank threads beyond the cores: CPU
//               oversubscription), action times that varied, and runtime overhead.
// Every replay keeps the measured sum of busy times, so the parts differ only in how long
// the step would take; contention is the measured bubble minus the other three.
typedef struct {
    bool valid;             // false: no events, or a receive without its send
    double ideal, imbalance, transfer, contention;
} BubbleParts;

typedef struct {
    int n_ranks, n_stages;
    double step_ms;         // wall time of the step's actions: first start to last end, rank-0 clock
    double bubble;          // 1 - sum(busy) / (n_ranks * step_ms)
    BubbleParts parts;      // the bubble's parts (n_ranks > 0)
    RankTelemetry *ranks;   // (n_ranks), caller-owned
    StageTelemetry *stages; // (n_stages), caller-owned
} StepTelemetry;

// events[r][0..n_events[r]) are rank r's events of one step in the order it ran them;
// offsets[r] is added to rank r's times to put them on rank 0's clock; NULL for threads of one
// process (one clock, and messages that never leave memory: the transfer part then has no
// wire time, and a receiver's late wake-up stays contention). stage_rank[s] is the pipeline rank of stage s; world rank r belongs to replica
// r / P (P = the largest stage_rank + 1), and messages stay inside a replica. Fills
// out->ranks / out->stages (which the caller sized), the totals and the bubble's parts.
void telemetry_summarize(int n_ranks, int n_stages, const int *stage_rank,
                         const ActionEvent *const *events, const int *n_events,
                         const double *offsets, StepTelemetry *out);

// The transfer / wait split of every rank and the bubble's parts, for a StepTelemetry whose
// busy, comm, idle, step_ms and bubble are filled (telemetry_summarize calls it); offsets as
// there, for the messages' wire time.
void telemetry_attribute(int n_ranks, int n_stages, const int *stage_rank, const ActionEvent *const *events,
                         const int *n_events, const double *offsets, StepTelemetry *out);

// CPU oversubscription, the bubble's likeliest contention: more rank threads or processes on
// this host than cores to run them. host_cores: the cores this process may run on
// (sched_getaffinity). host_ranks: world ranks when they are threads of this process
// (one_process); else the ranks of this mpirun job on this node (Open MPI's
// OMPI_COMM_WORLD_LOCAL_SIZE), 0 when unknown.
int telemetry_host_cores(void);
int telemetry_host_ranks(bool one_process, int world);
#endif
