// Matrix products on cblas_sgemm whose bits do not depend on the thread count.
//
// OpenBLAS splits one product among its threads, and where a thread's block ends its kernels
// switch to edge code that adds in another order. With the Haswell and Zen kernels the same
// 512x512x64 product differs in about 5% of its elements between 1 and 2 threads (measured
// with OPENBLAS_CORETYPE=Haswell on an EPYC). A pipeline rank runs with fewer threads than
// a single device, so "the pipeline computes what one device computes" needs products whose
// bits depend on the shape alone.
//
// Here the output is cut into tiles whose bounds are a function of (M, N) only. Each tile is
// one single-threaded sgemm (OpenBLAS runs single-threaded inside an active OpenMP region, or
// when the thread limit is 1), and OpenMP spreads the tiles over the threads. K is never
// split, so every element's sum runs whole inside one call, in the order that call's kernel
// gives it: the same on every layout, at every thread count, at any alignment (checked for
// every kernel family this machine runs: see gemm_fixed's test in tests/unit/test_kernels_fd.c).
//
// The price: each tile packs the operand it shares with the others again (see gemm_plan).
#include <cblas.h>
#include <omp.h>

#include "kernels/cpu/kernels.h"

// The plan. Each tile packs the operand it shares with the others again: cutting C's longer
// side (say N) repacks the operand that spans the shorter one (op(A), M x K) per extra tile,
// an overhead of 1 / (2 N) packed floats per flop, the least any cut gives. A product whose
// longer side exceeds GEMM_TILE is cut in two; one of more than GEMM_WORK flops gets a tile
// per GEMM_WORK for more threads, tiles never under 64 rows. At one thread the extra packing
// costs about 1% of the products of `small` (bench/bench_sgemm.c) and 2% of its step.
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

// Tile t of n along rows or columns: [dim * t / n, dim * (t + 1) / n).
static void tile_product(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc, bool rows, int t, int n) {
    const CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans, opb = tb ? CblasTrans : CblasNoTrans;
    if (rows) {   // cut C's rows: A's rows (or columns when transposed) follow
        const int r0 = (int)((long)M * t / n), r1 = (int)((long)M * (t + 1) / n);
        const float *a = ta ? A + r0 : A + (size_t)r0 * lda;
        cblas_sgemm(CblasRowMajor, opa, opb, r1 - r0, N, K, alpha, a, lda, B, ldb, beta, C + (size_t)r0 * ldc, ldc);
    } else {      // cut C's columns: B's columns (or rows when transposed) follow
        const int c0 = (int)((long)N * t / n), c1 = (int)((long)N * (t + 1) / n);
        const float *b = tb ? B + (size_t)c0 * ldb : B + c0;
        cblas_sgemm(CblasRowMajor, opa, opb, M, c1 - c0, K, alpha, A, lda, b, ldb, beta, C + c0, ldc);
    }
}

void gemm_fixed(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                int ldb, float beta, float *C, int ldc) {
    bool rows;
    const int n = gemm_plan(M, N, K, &rows);
    if (n == 1 || omp_get_max_threads() == 1) {
        // One thread: OpenBLAS must not start its own team, whatever its thread setting.
        const int threads = omp_get_max_threads();
        omp_set_num_threads(1);
        for (int t = 0; t < n; t++) tile_product(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, rows, t, n);
        omp_set_num_threads(threads);
        return;
    }
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < n; t++) tile_product(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, rows, t, n);
}
