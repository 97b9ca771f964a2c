#include "engine/model/init.h"

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
    for (size_t i = 0; i < n; i++) {
        const uint64_t pair = i / 2;
        const double rad = sqrt(-2.0 * log(uniform_open(key, 2 * pair)));
        const double ang = 2.0 * M_PI * uniform_open(key, 2 * pair + 1);
        const double normal = rad * ((i % 2 == 0) ? cos(ang) : sin(ang));
        out[i] = (float)((double)std * normal);
    }
}
