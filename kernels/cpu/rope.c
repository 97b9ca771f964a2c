// Rotary position embedding, Hugging Face half-split convention (dim i pairs with i + HD/2).
#include <math.h>
#include <string.h>
#include "kernels/cpu/kernels.h"

void rope_tables(float *cos_tab, float *sin_tab, int T, int HD, float theta) {
    int half = HD / 2;
    for (int i = 0; i < half; i++) {
        // fp32 inv_freq and fp32 angle, as torch computes them; cos/sin of that angle rounded once.
        float inv_freq = 1.0f / powf(theta, (float)(2 * i) / (float)HD);
        for (int t = 0; t < T; t++) {
            float angle = (float)t * inv_freq;
            cos_tab[(size_t)t * half + i] = (float)cos((double)angle);
            sin_tab[(size_t)t * half + i] = (float)sin((double)angle);
        }
    }
}

// Rotates one head in place: lo = x[0, half), hi = x[half, HD) never overlap, hence restrict.
static void rope_rotate(float *restrict lo, float *restrict hi, const float *restrict c,
                        const float *restrict s, int half) {
    for (int i = 0; i < half; i++) {
        float x0 = lo[i], x1 = hi[i];
        lo[i] = x0 * c[i] - x1 * s[i];
        hi[i] = x1 * c[i] + x0 * s[i];
    }
}

void rope_forward(float *out, const float *x, const float *cos_tab, const float *sin_tab,
                  int B, int T, int H, int HD) {
    int half = HD / 2;
    size_t row = (size_t)H * HD;
    #pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        float *o = out + (size_t)bt * row;
        // Out-of-place: copy, then rotate in place, so one code path serves out == x.
        if (o != x + (size_t)bt * row) memcpy(o, x + (size_t)bt * row, row * sizeof(float));
        const float *c = cos_tab + (size_t)(bt % T) * half;
        const float *s = sin_tab + (size_t)(bt % T) * half;
        for (int h = 0; h < H; h++) rope_rotate(o + (size_t)h * HD, o + (size_t)h * HD + half, c, s, half);
    }
}

void rope_backward(float *dx, const float *dout, const float *cos_tab, const float *sin_tab,
                   int B, int T, int H, int HD) {
    int half = HD / 2;
    #pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        const float *restrict c = cos_tab + (size_t)(bt % T) * half;
        const float *restrict s = sin_tab + (size_t)(bt % T) * half;
        for (int h = 0; h < H; h++) {
            size_t off = ((size_t)bt * H + h) * HD;
            float *restrict d0 = dx + off, *restrict d1 = dx + off + half;
            const float *restrict g0 = dout + off, *restrict g1 = dout + off + half;
            // R^T: rotation by -angle.
            for (int i = 0; i < half; i++) {
                d0[i] += g0[i] * c[i] + g1[i] * s[i];
                d1[i] += g1[i] * c[i] - g0[i] * s[i];
            }
        }
    }
}
