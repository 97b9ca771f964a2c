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

// Forward and backward of a batch of rc->batch rows on one device, as `replicas`
// data-parallel replicas would split it (1 for plain single-device training): replica d takes
// rows [d*B/D, (d+1)*B/D) in rc->microbatches microbatches of B/(D*M) rows. Each replica's
// microbatch gradients accumulate in microbatch order; the replicas' sums are added in replica
// order. Gradients are zeroed first and end in sm->grads; the returned loss (replica sums in
// replica order) is the batch's mean over its non-pad target tokens. These are the sums a
// pipelined run makes, so any layout's bits equal these (DESIGN.md "Parity").
double trainer_forward_backward(StageModel *sm, StageActs *acts, const RunConfig *rc, int replicas,
                                const int32_t *inputs, const int32_t *targets);

// The global gradient norm of a whole model: per-tensor sums of squares added in tensor
// order, as the pipeline adds them across stages.
double trainer_grad_norm(const StageModel *sm);

// One optimizer step on one device: trainer_forward_backward, then the global norm is
// clipped and AdamW applied at the schedule's lr for the 0-based step. The report's timing
// fields are left 0. Exposed for tests that feed their own batches.
StepReport trainer_step(StageModel *sm, StageActs *acts, AdamWState *opt, const RunConfig *rc, int replicas,
                        const int32_t *inputs, const int32_t *targets, int step);

#endif
