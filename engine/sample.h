// engine/sample: the next token from one row of logits: greedy, or drawn at a temperature
// from the top-k and top-p (nucleus) part of the distribution. Pure and seeded: the same
// logits, options and generator state give the same token on every machine and layout.
//
// The generator is splitmix64 (the counter step of engine/model/init.h's mix): one uint64 of
// state, one draw per sampled token, none for greedy. A draw u in [0, 1) walks the kept
// tokens in order of falling probability (ties: the lower id first), so the token chosen is
// a function of (logits, options, state) alone.
#ifndef PPTRAIN_SAMPLE_H
#define PPTRAIN_SAMPLE_H
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    bool greedy;          // argmax (the lowest id among equal maxima); the rest is ignored
    double temperature;   // > 0: logits / temperature before the softmax
    int top_k;            // keep the k most probable tokens; 0 = all
    double top_p;         // keep the smallest most-probable set whose mass reaches top_p; (0, 1]
} SampleOptions;

// Scratch for one vocabulary of V tokens (no allocation per token).
typedef struct {
    int V;
    double *prob;         // (V)
    int32_t *order;       // (V) token ids by falling probability
} Sampler;

Sampler *sampler_create(int V);
void sampler_free(Sampler *s);

// The next splitmix64 value of *state, and u in [0, 1) with 53 random bits from it.
uint64_t sample_splitmix64(uint64_t *state);
double sample_uniform(uint64_t *state);

// Index of the largest of logits[0..V): the lowest one among equal maxima (as torch.argmax).
int32_t sample_argmax(const float *logits, int V);
// The next token from logits (V) under o; *state advances by one draw unless o->greedy.
int32_t sample_next(Sampler *s, const float *logits, const SampleOptions *o, uint64_t *state);
#endif
