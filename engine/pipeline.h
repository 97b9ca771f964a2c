// engine/pipeline: the pipeline-parallel trainer of one process. The L layers are cut into
// S = P*V stages, each stage a StageModel with its own AdamW state; P ranks run as threads
// (created once per pipeline) over the local transport, each interpreting its own action
// list of the lowered schedule (engine/runtime.h). One step: zero grads, run the actions,
// global grad norm summed over stages in fixed rank order, clip, AdamW per stage. It computes
// what trainer_step computes on one device, up to float summation order (DESIGN.md, "Parity").
#ifndef PPTRAIN_PIPELINE_H
#define PPTRAIN_PIPELINE_H
#include <stdint.h>

#include "engine/error.h"
#include "engine/model.h"
#include "engine/trainer.h"

typedef struct {
    int ranks;            // P (a CSV schedule must have this many rows)
    int virtual_stages;   // V stages per rank; 0 = the schedule's default (1, or 2)
    char schedule[4096];  // a built-in name (engine/schedule.h) or the path of a .csv file
    char split[256];      // manual layers per stage, "3,3,2"; "" = partition_balance
    double timeout_s;     // longest wait for one message (default 300)
} PipelineOptions;

PipelineOptions pipeline_options_defaults(void);  // 1 rank, gpipe, balanced, 300 s

typedef struct {
    StepReport step;          // loss, lr, grad_norm (before clipping), step_ms, tokens_per_s
    int n_ranks, n_stages;
    const double *busy_ms;    // (n_ranks) compute time of each rank this step
    const int *peak_slots;    // (n_stages) activation slots (microbatches in flight) per stage
} PipelineReport;             // arrays owned by the pipeline, valid until its next step

typedef struct Pipeline Pipeline;

// Partitions, builds the stages (weights from (seed, name), as the single-device model's),
// builds or loads the schedule for rc->microbatches, validates and lowers it, starts the
// rank threads. Returns NULL with a one-line err for a bad option, split or schedule.
Pipeline *pipeline_create(const RunConfig *rc, const PipelineOptions *opts, Error *err);
// One optimizer step (0-based `step`) over a batch of rc->batch rows of rc->seq_len tokens:
// inputs, targets (B*T), target -1 = pad. Returns 0, or -1 with a one-line err naming the
// rank, stage, action and microbatch that failed; after a failure the pipeline only frees.
int pipeline_step(Pipeline *p, const int32_t *inputs, const int32_t *targets, int step, PipelineReport *out,
                  Error *err);
// Stops the threads and frees everything.
void pipeline_free(Pipeline *p);

int pipeline_n_stages(const Pipeline *p);
const StageModel *pipeline_stage(const Pipeline *p, int stage);
// The weights of the parameter with this HF name, whichever stage holds it (NULL if none);
// *info, when asked for, its shape.
const float *pipeline_weights(const Pipeline *p, const char *name, const ParamInfo **info);
#endif
