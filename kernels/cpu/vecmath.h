// Private to kernels/cpu: helpers whose loops vectorize without -ffast-math and whose results
// do not depend on thread timing. vec_expf: a branch-free expf that vectorizes (glibc's expf does not without
// -ffast-math). Cephes polynomial after exact 2^n range reduction, <= 1.5 ulp; inputs are
// clamped to [-87, 88] so 2^n stays finite and normal; NaN passes through.
#ifndef PPTRAIN_KERNELS_CPU_VECMATH_H
#define PPTRAIN_KERNELS_CPU_VECMATH_H
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float vec_expf(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    float big = fmaf(x, 1.44269504f, 12582912.0f);    // 1.5 * 2^23: rounds x/ln2 to an integer
    float n = big - 12582912.0f;
    float r = fmaf(n, -0.693145751953125f, x);        // ln2 split in two for an exact r
    r = fmaf(n, -1.428606765330187e-6f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, r * r, r) + 1.0f;
    uint32_t bits;                                    // low bits of big hold n: build 2^n
    memcpy(&bits, &big, sizeof bits);
    bits = (bits - 0x4B400000u + 127u) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

#define VEC_LANES 8

// Eight float lanes in one vector (GCC and clang vector extensions: one AVX register, or two
// SSE ones), and their lane masks. The loops below use it where the compiler keeps a
// per-lane array in memory and runs it one lane at a time.
typedef float vec_f8 __attribute__((vector_size(VEC_LANES * sizeof(float))));
typedef int32_t vec_i8 __attribute__((vector_size(VEC_LANES * sizeof(int32_t))));

// Lane by lane: a where mask is all ones, b where it is zero (a mask from a comparison).
static inline vec_f8 vec_where(vec_i8 mask, vec_f8 a, vec_f8 b) {
    return (vec_f8)(((vec_i8)a & mask) | ((vec_i8)b & ~mask));
}

// max of x[0..n), n >= 1, over 8 fixed lanes (the order is fixed; max is exact, so the
// result does not depend on it).
static inline float vec_max(const float *restrict x, int n) {
    vec_f8 acc;
    for (int l = 0; l < VEC_LANES; l++) acc[l] = x[0];
    int j = 0;
    for (; j + VEC_LANES <= n; j += VEC_LANES) {
        vec_f8 v;
        memcpy(&v, x + j, sizeof v);
        acc = vec_where(v > acc, v, acc);             // as x > m ? x : m
    }
    float m = acc[0];
    for (; j < n; j++) m = x[j] > m ? x[j] : m;
    for (int l = 1; l < VEC_LANES; l++) m = acc[l] > m ? acc[l] : m;
    return m;
}

// sum_j exp(x[j] - m) over j < n, in 8 double lanes (lane l takes j = l mod 8, the tail
// goes to lane 0, the lanes are added in order); when e != NULL the exps are also stored
// there (e may equal x: each element is read before it is written).
static inline double vec_exp_sum(float *e, const float *x, float m, int n) {
    typedef float f4 __attribute__((vector_size(4 * sizeof(float))));
    typedef double d4 __attribute__((vector_size(4 * sizeof(double))));
    d4 lo = {0}, hi = {0};                            // lanes 0-3 and 4-7, kept as vectors
    int j = 0;
    for (; j + VEC_LANES <= n; j += VEC_LANES) {
        float t[VEC_LANES];
        for (int l = 0; l < VEC_LANES; l++) t[l] = vec_expf(x[j + l] - m);
        f4 a, b;
        memcpy(&a, t, sizeof a);
        memcpy(&b, t + 4, sizeof b);
        lo += __builtin_convertvector(a, d4);
        hi += __builtin_convertvector(b, d4);
        if (e) memcpy(e + j, t, sizeof t);
    }
    double lane0 = lo[0];
    for (; j < n; j++) {
        float t = vec_expf(x[j] - m);
        lane0 += t;
        if (e) e[j] = t;
    }
    return 0.0 + lane0 + lo[1] + lo[2] + lo[3] + hi[0] + hi[1] + hi[2] + hi[3];
}
#endif
