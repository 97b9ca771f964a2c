// engine/run_config: what a run is (RunConfig: model, optimizer, data, batch shape, steps,
// seed) and what a step reports (StepReport). The single-device reference step every layout
// reproduces is engine/reference_step; the run loop is engine/train_loop.
#ifndef PPTRAIN_RUN_CONFIG_H
#define PPTRAIN_RUN_CONFIG_H
#include <stdbool.h>
#include <stdint.h>

#include "engine/data/data.h"
#include "engine/error.h"
#include "engine/model/model.h"
#include "engine/optim.h"
typedef struct {
    ModelConfig model;
    OptimConfig optim;
    char data_path[4096];
    char tokenizer_path[4096];  // a tokenizer.json for text data ("": the byte tokenizer)
    Batching batching;
    int batch;              // B sequences per step
    int seq_len;            // T
    int microbatches;       // M (divides B): gradient accumulation over B/M-row slices
    int steps;
    int ckpt_every;         // also a checkpoint every N steps (0: only at the end and on a stop)
    uint64_t seed;          // parameter init and data order
    // Validation (pipeline_eval): the same val_batches batches of val_data_path (or, when that
    // is empty, the _val_ shards a training folder set aside) every val_every steps and after
    // the last; 0: every steps / 10 (at least 1). No source: no validation.
    char val_data_path[4096];
    int val_every;
    int val_batches;
    // Samples (engine/generate.h): every sample_every steps (0: none) and after the last, the
    // greedy continuation of sample_prompt, at most sample_tokens new tokens (and what fits
    // in seq_len), on the training pipeline between steps.
    int sample_every;
    int sample_tokens;
    char sample_prompt[256];
} RunConfig;

RunConfig run_config_defaults(void);
// Cross-field checks (B % M, T <= max positions, ...): one line, -1 on failure.
int run_config_validate(const RunConfig *rc, Error *err);
// A rough lower bound of the host memory one process needs, in bytes (double: sizes that
// overflow an integer must still be refused): weights, gradients and AdamW moments of the
// model_share of the model it holds (1: all stages; 1/P: one of P ranks), for each of its
// replicas, plus the activations of in_flight microbatches and the step's token ids.
double run_config_memory_bytes(const RunConfig *rc, double model_share, int replicas, double in_flight,
                               bool recompute);

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

#endif
