// kernels/cpu/gemm: matrix products on oneDNN's dnnl_sgemm whose bits do not depend on the
// thread count.
//
// This file holds the one call into the GEMM library (gemm_serial); kernels/cpu/blas_core.h
// says why it is oneDNN and which of its kernels run.
//
// A library that splits one product among its threads adds, where a thread's block ends, in
// another order: with OpenBLAS's Haswell and Zen kernels the same 512x512x64 product differed
// in about 5% of its elements between 1 and 2 threads. A pipeline rank runs with fewer threads
// than a single device, so "the pipeline computes what one device computes" needs products
// whose bits depend on the shape alone.
//
// Here the output is cut into tiles whose bounds are a function of (M, N) only. Each tile is
// one single-threaded sgemm (gemm_serial), and OpenMP spreads the tiles over the threads. K is
// never split, so every element's sum runs whole inside one call, in the order that call's
// kernel gives it: the same on every layout, at every thread count, at any alignment (checked
// for every kernel width this machine runs: see gemm_fixed's test in tests/unit/test_kernels_fd.c).
//
// The price: each tile packs the operand it shares with the others again (see gemm_plan).
#include <oneapi/dnnl/dnnl.h>
#include <assert.h>
#include <omp.h>

#include "kernels/cpu/kernels.h"

// The plan. Each tile packs the operand it shares with the others again: cutting C's longer
// side (say N) repacks the operand that spans the shorter one (op(A), M x K) per extra tile,
// an overhead of 1 / (2 N) packed floats per flop, the least any cut gives. A product whose
// longer side exceeds GEMM_TILE is cut in two; one of more than GEMM_WORK flops gets a tile
// per GEMM_WORK for more threads, tiles never under 64 rows. At one thread the extra packing
// cost about 1% of the products of `small` (bench/bench_sgemm.c) and 2% of its step, measured
// when OpenBLAS ran them.
#define GEMM_TILE 256
#define GEMM_WORK (1L << 30)

static int gemm_plan(int M, int N, int K, bool *rows) {
    *rows = M >= N;
    const int dim = *rows ? M : N;
    if (dim <= GEMM_TILE) return 1;
    long n = (2L * M * N * K) / GEMM_WORK;
    if (n > dim / 64) n = dim / 64;
    return n > 2 ? (int)n : 2;
}

int gemm_tile_count(int M, int N, int K) {
    bool rows;
    return gemm_plan(M, N, K, &rows);
}

// oneDNN runs a product on omp_get_max_threads() threads outside a parallel region and on
// one inside it; here it always runs on one, so its bits follow from the shape alone.
void gemm_serial(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc) {
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (threads > 1) omp_set_num_threads(1);
    const dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (threads > 1) omp_set_num_threads(threads);
    assert(st == dnnl_success);   // only bad dimensions fail, and the callers' are checked
    (void)st;
}

// Tile t of n along rows or columns: [dim * t / n, dim * (t + 1) / n).
static void tile_product(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc, bool rows, int t, int n) {
    if (rows) {   // cut C's rows: A's rows (or columns when transposed) follow
        const int r0 = (int)((long)M * t / n), r1 = (int)((long)M * (t + 1) / n);
        const float *a = ta ? A + r0 : A + (size_t)r0 * lda;
        gemm_serial(ta, tb, r1 - r0, N, K, alpha, a, lda, B, ldb, beta, C + (size_t)r0 * ldc, ldc);
    } else {      // cut C's columns: B's columns (or rows when transposed) follow
        const int c0 = (int)((long)N * t / n), c1 = (int)((long)N * (t + 1) / n);
        const float *b = tb ? B + (size_t)c0 * ldb : B + c0;
        gemm_serial(ta, tb, M, c1 - c0, K, alpha, A, lda, b, ldb, beta, C + c0, ldc);
    }
}

void gemm_fixed(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                int ldb, float beta, float *C, int ldc) {
    bool rows;
    const int n = gemm_plan(M, N, K, &rows);
    if (n == 1 || omp_get_max_threads() == 1) {
        for (int t = 0; t < n; t++) tile_product(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, rows, t, n);
        return;
    }
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < n; t++) tile_product(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, rows, t, n);
}
