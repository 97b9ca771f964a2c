// engine/generate: text generation on the training pipeline, on the same stages and
// transports as training. The prompt is one forward-only pass of one row of the run's T
// tokens, whatever the training batch, padded with token 0 after its end (causal attention
// makes the logits at position t independent of every later position, so the padding changes
// nothing that is read); every stage keeps its layers' keys and values of the prompt
// (pipeline_prefill). Each new token is then one pass of that token alone, every stage
// attending to its cache (pipeline_decode), so a token costs one position's work, not the
// prefix's: recomputing the prefix instead (pipeline_logits) took 17x as long for the
// console's default run and sample (bench/bench_sample.c).
//
// The root samples (engine/sample.h) and shares the chosen id with every process (one
// pipeline_world_max), so every rank feeds the same sequence to the next pass; greedy
// output is the same on every layout because every layout computes one device's logits
// (DESIGN.md, "Parity").
#ifndef PPTRAIN_GENERATE_H
#define PPTRAIN_GENERATE_H
#include <stdint.h>

#include "engine/error.h"
#include "engine/pipeline.h"
#include "engine/run_config.h"
#include "engine/sample.h"

typedef struct {
    const int32_t *prompt;   // (n_prompt) token ids, n_prompt >= 1
    int n_prompt;
    int max_new;             // stop after this many new tokens
    int32_t eos;             // stop after this id (it is returned); -1: never
    SampleOptions sample;
    uint64_t seed;           // the sampler's splitmix64 state at the start
} GenerateOptions;

// Called at the root after each new token (the EOS included), as it is made.
typedef void (*GenerateToken)(void *ctx, int32_t id);

typedef struct {
    int n;                   // new tokens (<= max_new, fewer at EOS or at the end of T)
    double seconds;          // wall time of the whole generation
} GenerateResult;

// Generates on p, built from rc, in a sequence of T = rc->seq_len tokens (T >= n_prompt; at
// most T + 1 - n_prompt new tokens fit). out (max_new) receives the new ids
// on every process. Collective: every process calls it with the same options. 0, or -1 with
// err (the pipeline is then broken).
int generate(Pipeline *p, const RunConfig *rc, const GenerateOptions *o, GenerateToken on_token, void *ctx,
             int32_t *out, GenerateResult *res, Error *err);
#endif
