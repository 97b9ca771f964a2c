// engine/trainer: what a run is (RunConfig), what a step reports (StepReport), and the
// single-device reference step that every pipelined layout must reproduce (DESIGN.md,
// "Parity"). The run loop itself is engine/train_loop.
#ifndef PPTRAIN_TRAINER_H
#define PPTRAIN_TRAINER_H
#include <stdint.h>

#include "engine/data.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/optim.h"

typedef struct {
    ModelConfig model;
    OptimConfig optim;
    char data_path[4096];
    Batching batching;
    int batch;              // B sequences per step
    int seq_len;            // T
    int microbatches;       // M (divides B): gradient accumulation over B/M-row slices
    int steps;
    uint64_t seed;          // parameter init and data order
} RunConfig;

RunConfig run_config_defaults(void);
// Cross-field checks (B % M, T <= max positions, ...): one line, -1 on failure.
int run_config_validate(const RunConfig *rc, Error *err);

typedef struct {
    int step;               // 1-based
    int steps;
    double loss;            // mean over the batch's non-pad target tokens
    double lr;
    double grad_norm;       // before clipping
    double step_ms;
    double tokens_per_s;    // B*T / step time
    double gflops;          // achieved model FLOP/s / 1e9 (model_flops_per_token)
} StepReport;

// Forward and backward of a batch of rc->batch rows on one device: gradients zeroed, then
// rc->microbatches slices accumulate into sm->grads, each weighted so the returned loss is
// the batch's mean over its non-pad target tokens.
double trainer_forward_backward(StageModel *sm, StageActs *acts, const RunConfig *rc,
                                const int32_t *inputs, const int32_t *targets);

// One optimizer step on one device over a batch of rc->batch rows: rc->microbatches slices
// accumulate gradients (weighted so the loss is the batch's per-token mean), then the global
// norm is clipped and AdamW applied at the schedule's lr for the 0-based step. The report's
// timing fields are left 0. Exposed for tests that feed their own batches.
StepReport trainer_step(StageModel *sm, StageActs *acts, AdamWState *opt, const RunConfig *rc,
                        const int32_t *inputs, const int32_t *targets, int step);

#endif
