// engine/sample: greedy, temperature, top-k and top-p sampling of one token (engine/sample.h).
#include "engine/sample.h"

#include <math.h>
#include <stdlib.h>

#include "engine/error.h"

Sampler *sampler_create(int V) {
    Sampler *s = xcalloc(1, sizeof *s);
    s->V = V;
    s->prob = xmalloc(sizeof(double) * (size_t)V);
    s->order = xmalloc(sizeof(int32_t) * (size_t)V);
    return s;
}

void sampler_free(Sampler *s) {
    if (!s) return;
    free(s->prob);
    free(s->order);
    free(s);
}

uint64_t sample_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double sample_uniform(uint64_t *state) {
    return (double)(sample_splitmix64(state) >> 11) * 0x1.0p-53;
}

int32_t sample_argmax(const float *logits, int V) {
    int32_t best = 0;
    for (int32_t i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

// qsort has no context argument: the probabilities being sorted, for this thread's call.
static _Thread_local const double *sort_prob;

// Falling probability, then rising id, so the order is total and the same everywhere.
static int by_prob(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (sort_prob[x] != sort_prob[y]) return sort_prob[x] > sort_prob[y] ? -1 : 1;
    return x < y ? -1 : 1;
}

// prob := softmax(logits / temperature) in double, the max subtracted first.
static void softmax_at(Sampler *s, const float *logits, double temperature) {
    const int32_t top = sample_argmax(logits, s->V);
    double sum = 0.0;
    for (int i = 0; i < s->V; i++) sum += s->prob[i] = exp(((double)logits[i] - logits[top]) / temperature);
    for (int i = 0; i < s->V; i++) s->prob[i] /= sum;
}

// How many of the sorted tokens top-k and top-p keep (at least one).
static int kept_count(const Sampler *s, const SampleOptions *o) {
    int n = o->top_k > 0 && o->top_k < s->V ? o->top_k : s->V;
    double mass = 0.0;
    for (int i = 0; i < n; i++) {
        mass += s->prob[s->order[i]];
        if (mass >= o->top_p) return i + 1;
    }
    return n;
}

int32_t sample_next(Sampler *s, const float *logits, const SampleOptions *o, uint64_t *state) {
    if (o->greedy) return sample_argmax(logits, s->V);
    softmax_at(s, logits, o->temperature);
    for (int32_t i = 0; i < s->V; i++) s->order[i] = i;
    sort_prob = s->prob;
    qsort(s->order, (size_t)s->V, sizeof(int32_t), by_prob);
    const int n = kept_count(s, o);
    double mass = 0.0;
    for (int i = 0; i < n; i++) mass += s->prob[s->order[i]];
    // u scaled to the kept mass: the kept tokens renormalized without dividing each one.
    const double u = sample_uniform(state) * mass;
    double acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += s->prob[s->order[i]];
        if (u < acc) return s->order[i];
    }
    return s->order[n - 1];   // u within rounding of the kept mass
}
