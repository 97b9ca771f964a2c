// Token embedding lookup and its scatter-add gradient.
#include <string.h>
#include "kernels/cpu/kernels.h"

// Columns per task of the backward scatter: each task owns a column slice of dwte and walks
// the rows in order, so repeated tokens accumulate in a fixed order (deterministic, no atomics).
#define EMBEDDING_COL_BLOCK 64

void embedding_forward(float *out, const int32_t *tokens, const float *wte, int N, int C) {
    #pragma omp parallel for schedule(static) if ((size_t)N * C >= KERNEL_PARALLEL_MIN_WORK)
    for (int n = 0; n < N; n++)
        memcpy(out + (size_t)n * C, wte + (size_t)tokens[n] * C, (size_t)C * sizeof(float));
}

void embedding_backward(float *dwte, const float *dout, const int32_t *tokens, int N, int C) {
    int nblocks = (C + EMBEDDING_COL_BLOCK - 1) / EMBEDDING_COL_BLOCK;
    #pragma omp parallel for schedule(static) if ((size_t)N * C >= KERNEL_PARALLEL_MIN_WORK)
    for (int blk = 0; blk < nblocks; blk++) {
        int c0 = blk * EMBEDDING_COL_BLOCK;
        int c1 = c0 + EMBEDDING_COL_BLOCK < C ? c0 + EMBEDDING_COL_BLOCK : C;
        for (int n = 0; n < N; n++) {
            float *restrict dst = dwte + (size_t)tokens[n] * C;
            const float *restrict src = dout + (size_t)n * C;
            for (int c = c0; c < c1; c++) dst[c] += src[c];
        }
    }
}
