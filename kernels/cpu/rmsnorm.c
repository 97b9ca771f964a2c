// RMSNorm (Llama): out = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps).
#include <math.h>
#include "kernels/cpu/kernels.h"

#define RMSNORM_LANES 8
// Columns per task of the dweight reduction: each task walks all rows in order (fixed order).
#define RMSNORM_COL_BLOCK 64

// sum of a[c] * b[c] * w[c] (w == NULL: of a[c] * b[c]) in double lanes: fixed order,
// vectorizable without -ffast-math.
static double rmsnorm_dot(const float *restrict a, const float *restrict b,
                          const float *restrict w, int n) {
    double acc[RMSNORM_LANES] = {0};
    int c = 0;
    if (w) {
        for (; c + RMSNORM_LANES <= n; c += RMSNORM_LANES)
            for (int l = 0; l < RMSNORM_LANES; l++)
                acc[l] += (double)a[c + l] * b[c + l] * w[c + l];
        for (; c < n; c++) acc[0] += (double)a[c] * b[c] * w[c];
    } else {
        for (; c + RMSNORM_LANES <= n; c += RMSNORM_LANES)
            for (int l = 0; l < RMSNORM_LANES; l++) acc[l] += (double)a[c + l] * b[c + l];
        for (; c < n; c++) acc[0] += (double)a[c] * b[c];
    }
    double s = 0.0;
    for (int l = 0; l < RMSNORM_LANES; l++) s += acc[l];
    return s;
}

void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight,
                     int N, int C, float eps) {
    #pragma omp parallel for schedule(static) if ((size_t)N * C >= KERNEL_PARALLEL_MIN_WORK)
    for (int n = 0; n < N; n++) {
        const float *restrict x = inp + (size_t)n * C;
        float *restrict o = out + (size_t)n * C;
        float r = (float)(1.0 / sqrt(rmsnorm_dot(x, x, NULL, C) / C + (double)eps));
        rstd[n] = r;
        for (int c = 0; c < C; c++) o[c] = x[c] * r * weight[c];
    }
}

// dinp = rstd * (w*dout) - rstd^3 / C * inp * sum(w*dout*inp), row by row.
static void rmsnorm_backward_input(float *dinp, const float *dout, const float *inp,
                                   const float *weight, const float *rstd, int N, int C) {
    #pragma omp parallel for schedule(static) if ((size_t)N * C >= KERNEL_PARALLEL_MIN_WORK)
    for (int n = 0; n < N; n++) {
        const float *restrict x = inp + (size_t)n * C, *restrict d = dout + (size_t)n * C;
        float *restrict dx = dinp + (size_t)n * C;
        double r = rstd[n];
        double wdx = rmsnorm_dot(d, x, weight, C);
        float a = (float)r, b = (float)(r * r * r * wdx / C);
        for (int c = 0; c < C; c++) dx[c] += a * (weight[c] * d[c]) - b * x[c];
    }
}

// dweight(C) += sum_n dout * inp * rstd, columns in parallel, rows in order.
static void rmsnorm_backward_weight(float *dweight, const float *dout, const float *inp,
                                    const float *rstd, int N, int C) {
    int nblocks = (C + RMSNORM_COL_BLOCK - 1) / RMSNORM_COL_BLOCK;
    #pragma omp parallel for schedule(static) if ((size_t)N * C >= KERNEL_PARALLEL_MIN_WORK)
    for (int blk = 0; blk < nblocks; blk++) {
        int c0 = blk * RMSNORM_COL_BLOCK;
        int c1 = c0 + RMSNORM_COL_BLOCK < C ? c0 + RMSNORM_COL_BLOCK : C;
        double acc[RMSNORM_COL_BLOCK] = {0};
        for (int n = 0; n < N; n++) {
            const float *restrict x = inp + (size_t)n * C, *restrict d = dout + (size_t)n * C;
            float r = rstd[n];
            for (int c = c0; c < c1; c++) acc[c - c0] += (double)d[c] * (x[c] * r);
        }
        for (int c = c0; c < c1; c++) dweight[c] += (float)acc[c - c0];
    }
}

void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                      const float *weight, const float *rstd, int N, int C) {
    if (dinp) rmsnorm_backward_input(dinp, dout, inp, weight, rstd, N, C);
    if (dweight) rmsnorm_backward_weight(dweight, dout, inp, rstd, N, C);
}
