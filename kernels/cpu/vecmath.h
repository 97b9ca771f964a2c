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

// max of x[0..n), n >= 1, over 8 fixed lanes (vectorizes; the order is fixed).
static inline float vec_max(const float *restrict x, int n) {
    float acc[VEC_LANES];
    for (int l = 0; l < VEC_LANES; l++) acc[l] = x[0];
    int j = 0;
    for (; j + VEC_LANES <= n; j += VEC_LANES)
        for (int l = 0; l < VEC_LANES; l++) acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
    for (; j < n; j++) acc[0] = x[j] > acc[0] ? x[j] : acc[0];
    float m = acc[0];
    for (int l = 1; l < VEC_LANES; l++) m = acc[l] > m ? acc[l] : m;
    return m;
}
#endif
