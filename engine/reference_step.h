// engine/reference_step: the single-device step every pipelined layout reproduces bit for
// bit (DESIGN.md "Parity"): what `pptrain check` and the parity tests compare against.
#ifndef PPTRAIN_REFERENCE_STEP_H
#define PPTRAIN_REFERENCE_STEP_H
#include <stdint.h>

#include "engine/model/model.h"
#include "engine/optim.h"
#include "engine/run_config.h"

// Forward and backward of a batch of rc->batch rows on one device, as `replicas`
// data-parallel replicas would split it (1 for plain single-device training): replica d takes
// rows [d*B/D, (d+1)*B/D) in rc->microbatches microbatches of B/(D*M) rows. Each replica's
// microbatch gradients accumulate in microbatch order; the replicas' sums are added in replica
// order. Gradients are zeroed first and end in sm->grads; the returned loss (replica sums in
// replica order) is the batch's mean over its non-pad target tokens. These are the sums a
// pipelined run makes, so any layout's bits equal these (DESIGN.md "Parity").
double reference_forward_backward(StageModel *sm, StageActs *acts, const RunConfig *rc, int replicas,
                                const int32_t *inputs, const int32_t *targets);

// The global gradient norm of a whole model: per-tensor sums of squares added in tensor
// order, as the pipeline adds them across stages.
double reference_grad_norm(const StageModel *sm);

// One optimizer step on one device: reference_forward_backward, then the global norm is
// clipped and AdamW applied at the schedule's lr for the 0-based step. The report's timing
// fields are left 0. Exposed for tests that feed their own batches.
StepReport reference_step(StageModel *sm, StageActs *acts, AdamWState *opt, const RunConfig *rc, int replicas,
                        const int32_t *inputs, const int32_t *targets, int step);

#endif
