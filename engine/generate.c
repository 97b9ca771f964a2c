// engine/generate: token by token on the pipeline, against each stage's KV cache (engine/generate.h).
#include "engine/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/clock.h"

// The root's token after position pos; every process gets it. The first pass is the prompt's
// prefill (pos = n_prompt - 1), each later one decodes the token at pos. -1 on failure.
static int32_t next_token(Pipeline *p, const int32_t *inputs, int pos, float *logits, Sampler *smp,
                          const GenerateOptions *o, uint64_t *state, Error *err) {
    const int pass = pos < o->n_prompt ? pipeline_prefill(p, inputs, o->n_prompt, logits, err)
                                       : pipeline_decode(p, inputs[pos], pos, logits, err);
    if (pass) return -1;
    const bool root = pipeline_is_root(p);
    const int32_t id = root ? sample_next(smp, logits, &o->sample, state) : -1;
    const double shared = pipeline_world_max(p, (double)id);
    if (!isfinite(shared)) {   // the processes could not agree: the pipeline's failure says why
        pipeline_failed(p, err);
        return -1;
    }
    return (int32_t)shared;
}

int generate(Pipeline *p, const RunConfig *rc, const GenerateOptions *o, GenerateToken on_token, void *ctx,
             int32_t *out, GenerateResult *res, Error *err) {
    const double t0 = clock_now_s();
    const int T = rc->seq_len, V = rc->model.vocab;
    int32_t *inputs = xcalloc((size_t)T, sizeof(int32_t));   // the sequence, then pads of 0
    float *logits = xmalloc(sizeof(float) * (size_t)V);
    Sampler *smp = sampler_create(V);
    uint64_t state = o->seed;
    memcpy(inputs, o->prompt, sizeof(int32_t) * (size_t)o->n_prompt);
    int len = o->n_prompt, status = 0;
    *res = (GenerateResult){0};
    while (res->n < o->max_new && len <= T) {
        const int32_t id = next_token(p, inputs, len - 1, logits, smp, o, &state, err);
        if (id < 0) {
            status = -1;
            break;
        }
        out[res->n++] = id;
        if (len < T) inputs[len] = id;
        len++;
        if (pipeline_is_root(p) && on_token) on_token(ctx, id);
        if (id == o->eos) break;
    }
    res->seconds = clock_now_s() - t0;
    sampler_free(smp);
    free(logits);
    free(inputs);
    return status;
}
