// Rotary position embedding, Hugging Face half-split convention (dim i pairs with i + HD/2).
#include <math.h>
#include <string.h>
#include "kernels/cpu/kernels.h"

void rope_inv_freq(float *inv_freq, int HD, float theta, const RopeLlama3 *llama3) {
    const int half = HD / 2;
    // fp32 as transformers computes it: 1 / theta ** (arange(0, HD, 2) / HD).
    for (int i = 0; i < half; i++) inv_freq[i] = 1.0f / powf(theta, (float)(2 * i) / (float)HD);
    if (!llama3) return;
    // transformers' _compute_llama3_parameters, op for op in fp32 (a Python number meeting an
    // fp32 tensor is rounded to fp32 first; `x / t` for a number x is reciprocal(t) * x).
    const float factor = llama3->factor, lo = llama3->low_freq_factor, hi = llama3->high_freq_factor;
    const float old_len = (float)llama3->original_max_positions;
    const float low_wavelen = (float)((double)llama3->original_max_positions / (double)lo);
    const float high_wavelen = (float)((double)llama3->original_max_positions / (double)hi);
    const float two_pi = (float)(2.0 * 3.14159265358979323846);
    const float span = (float)((double)hi - (double)lo);
    for (int i = 0; i < half; i++) {
        const float f = inv_freq[i];
        const float wavelen = (1.0f / f) * two_pi;
        float scaled = wavelen > low_wavelen ? f / factor : f;
        const float smooth = ((1.0f / wavelen) * old_len - lo) / span;
        const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
        if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) scaled = smoothed;
        inv_freq[i] = scaled;
    }
}

void rope_tables(float *cos_tab, float *sin_tab, int T, int HD, const float *inv_freq) {
    int half = HD / 2;
    for (int i = 0; i < half; i++) {
        // fp32 angle, as torch computes it; cos/sin of that angle rounded once.
        for (int t = 0; t < T; t++) {
            float angle = (float)t * inv_freq[i];
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
    #pragma omp parallel for schedule(static) if ((size_t)B * T * H * HD >= KERNEL_PARALLEL_MIN_WORK)
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
    #pragma omp parallel for schedule(static) if ((size_t)B * T * H * HD >= KERNEL_PARALLEL_MIN_WORK)
    for (int bt = 0; bt < B * T; bt++) {
        const float *restrict c = cos_tab + (size_t)(bt % T) * half;
        const float *restrict s = sin_tab + (size_t)(bt % T) * half;
        for (int h = 0; h < H; h++) {
            size_t off = ((size_t)bt * H + h) * HD;
            float *restrict d0 = dx + off, *restrict d1 = dx + off + half;
            const float *restrict g0 = dout + off, *restrict g1 = dout + off + half;
            // R^T: rotation by -angle.
            for (int i = 0; i < half; i++) {
                d0[i] = g0[i] * c[i] + g1[i] * s[i];
                d1[i] = g1[i] * c[i] - g0[i] * s[i];
            }
        }
    }
}
