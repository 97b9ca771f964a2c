// engine/telemetry: what each rank did during a step, as timed events, and the numbers the
// console and the run store show: per-rank busy / idle / communication-wait time and the
// measured bubble = 1 - sum(busy) / (P * step wall time) (DESIGN.md, "One step, as data").
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
    int events;
} RankTelemetry;

typedef struct {
    double busy_ms;         // this stage's compute (F, B, I, W)
    double comm_ms;         // this stage's SEND/RECV time
    int rank;
} StageTelemetry;

typedef struct {
    int n_ranks, n_stages;
    double step_ms;         // wall time of the step's actions: first start to last end, rank-0 clock
    double bubble;          // 1 - sum(busy) / (n_ranks * step_ms)
    RankTelemetry *ranks;   // (n_ranks), caller-owned
    StageTelemetry *stages; // (n_stages), caller-owned
} StepTelemetry;

// events[r][0..n_events[r]) are rank r's events of one step; offsets[r] is added to rank r's
// times to put them on rank 0's clock (0 for threads of one process). stage_rank[s] is the
// rank of stage s. Fills out->ranks / out->stages (which the caller sized) and the totals.
void telemetry_summarize(int n_ranks, int n_stages, const int *stage_rank,
                         const ActionEvent *const *events, const int *n_events,
                         const double *offsets, StepTelemetry *out);
#endif
