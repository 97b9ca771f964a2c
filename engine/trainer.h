// engine/trainer: the run loop. Builds the model and the data from a RunConfig, runs the
// steps, and reports each one through hooks (the console prints them; later, storage records
// them). The engine never prints or writes files itself.
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

typedef struct {
    const char *data_kind;
    uint64_t data_items, data_tokens;
    size_t params;
    size_t activation_bytes; // per microbatch slot
} RunInfo;

typedef struct {
    int steps;
    double first_loss, last_loss;
    double median_tokens_per_s, median_gflops, median_step_ms;
    double wall_s;
} RunSummary;

typedef struct {
    void *ctx;
    void (*on_start)(void *ctx, const RunConfig *rc, const RunInfo *info);
    void (*on_step)(void *ctx, const StepReport *r);
    void (*on_end)(void *ctx, const RunSummary *s);
} TrainerHooks;

// One optimizer step on one device over a batch of rc->batch rows: rc->microbatches slices
// accumulate gradients (weighted so the loss is the batch's per-token mean), then the global
// norm is clipped and AdamW applied at the schedule's lr for the 0-based step. The report's
// timing fields are left 0. Exposed for tests that feed their own batches.
StepReport trainer_step(StageModel *sm, StageActs *acts, AdamWState *opt, const RunConfig *rc,
                        const int32_t *inputs, const int32_t *targets, int step);

// Runs rc->steps steps. Returns 0, or -1 with err set for a user error (data, config).
int trainer_run(const RunConfig *rc, const TrainerHooks *hooks, Error *err);
#endif
