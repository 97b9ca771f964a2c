// Global gradient norm pieces for clip_grad_norm_.
#include <math.h>
#include "kernels/cpu/kernels.h"

#define GRADNORM_LANES 8
// Fixed segments of a tensor (the parallelism of the sum, up to this many threads).
#define GRADNORM_SEGMENTS 64

// Values [i0, i1) in double lanes, in order.
static double sum_squares_range(const float *g, size_t i0, size_t i1) {
    double acc[GRADNORM_LANES] = {0};
    size_t i = i0;
    for (; i + GRADNORM_LANES <= i1; i += GRADNORM_LANES)
        for (int l = 0; l < GRADNORM_LANES; l++) acc[l] += (double)g[i + l] * g[i + l];
    for (; i < i1; i++) acc[0] += (double)g[i] * g[i];
    double s = 0.0;
    for (int l = 0; l < GRADNORM_LANES; l++) s += acc[l];
    return s;
}

double grad_sum_squares(const float *g, size_t n) {
    // GRADNORM_SEGMENTS fixed segments (bounds depend on n alone), each summed in lanes, the
    // segment sums added in order: the same bits at every thread count.
    double partial[GRADNORM_SEGMENTS] = {0};
    const int segs = n < 4096 ? 1 : GRADNORM_SEGMENTS;
    #pragma omp parallel for schedule(static) if (segs > 1)
    for (int k = 0; k < segs; k++) partial[k] = sum_squares_range(g, n * k / segs, n * (k + 1) / segs);
    double total = 0.0;
    for (int k = 0; k < segs; k++) total += partial[k];
    return total;
}

void grad_scale(float *g, size_t n, float s) {
    #pragma omp parallel for schedule(static) if (n >= KERNEL_PARALLEL_MIN_WORK)
    for (size_t i = 0; i < n; i++) g[i] *= s;
}

float grad_clip_factor(double total_norm, float max_norm) {
    double f = (double)max_norm / (total_norm + 1e-6);
    return f < 1.0 ? (float)f : 1.0f;
}

double rel_norm_diff(const float *a, const float *b, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
