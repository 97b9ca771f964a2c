// Global gradient norm pieces for clip_grad_norm_.
#include <math.h>
#include <omp.h>
#include "kernels/cpu/kernels.h"

#define GRADNORM_LANES 8
// Per-thread partial sums live on the stack; the team is capped to fit.
#define GRADNORM_MAX_THREADS 256

double grad_sum_squares(const float *g, size_t n) {
    double partial[GRADNORM_MAX_THREADS] = {0};
    int nthreads = omp_get_max_threads();
    if (nthreads > GRADNORM_MAX_THREADS) nthreads = GRADNORM_MAX_THREADS;
    // Each thread sums one static chunk in double lanes; chunks combine in thread order, so the
    // result is deterministic for a given thread count.
    #pragma omp parallel num_threads(nthreads)
    {
        int tid = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t i0 = n * tid / nt, i1 = n * (tid + 1) / nt;
        double acc[GRADNORM_LANES] = {0};
        size_t i = i0;
        for (; i + GRADNORM_LANES <= i1; i += GRADNORM_LANES)
            for (int l = 0; l < GRADNORM_LANES; l++) acc[l] += (double)g[i + l] * g[i + l];
        for (; i < i1; i++) acc[0] += (double)g[i] * g[i];
        double s = 0.0;
        for (int l = 0; l < GRADNORM_LANES; l++) s += acc[l];
        partial[tid] = s;
    }
    double total = 0.0;
    for (int i = 0; i < nthreads; i++) total += partial[i];
    return total;
}

void grad_scale(float *g, size_t n, float s) {
    #pragma omp parallel for schedule(static)
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
