#include "engine/model/init.h"
#include "kernels/cpu/kernels.h"

#include <math.h>

#define GOLDEN_GAMMA 0x9E3779B97F4A7C15ull

uint64_t init_fnv1a64(const char *s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001B3ull;
    }
    return h;
}

uint64_t init_mix64(uint64_t z) {
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z;
}

static double uniform_open(uint64_t key, uint64_t counter) {
    uint64_t r = init_mix64(key + (counter + 1) * GOLDEN_GAMMA);
    return ((double)(r >> 11) + 0.5) * 0x1.0p-53;
}

void init_normal(float *out, size_t n, uint64_t seed, const char *name, float std) {
    const uint64_t key = init_mix64(init_fnv1a64(name) ^ init_mix64(seed));
    const long pairs = (long)((n + 1) / 2);
    // One Box-Muller pair per iteration: its two elements share rad and ang, which depend on
    // the pair's counters alone, so any split over threads writes the same bits.
    #pragma omp parallel for schedule(static) if (n >= KERNEL_PARALLEL_MIN_WORK)
    for (long p = 0; p < pairs; p++) {
        const size_t i = 2 * (size_t)p;
        const double rad = sqrt(-2.0 * log(uniform_open(key, i)));
        const double ang = 2.0 * M_PI * uniform_open(key, i + 1);
        out[i] = (float)((double)std * (rad * cos(ang)));
        if (i + 1 < n) out[i + 1] = (float)((double)std * (rad * sin(ang)));
    }
}
