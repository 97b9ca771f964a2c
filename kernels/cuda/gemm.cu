// Row-major GEMMs on cuBLASLt (single) and cuBLAS (strided batched), fp32 accumulation.
//
// cuBLAS is column-major. A row-major (r, c) matrix with row stride ld IS the column-major
// (c, r) matrix with the same ld, its transpose. So row-major C = op(A) op(B) is computed as
// column-major C^T = op(B)^T op(A)^T: cuBLAS's first operand is our B, its second our A,
// m = N, n = M, k = K, and each operand keeps its own transpose flag:
//   B not transposed: stored (K, N) row-major = col-major (N, K) = op(B)^T as is -> OP_N
//   B transposed:     stored (N, K) row-major = col-major (K, N), transpose it  -> OP_T
// and likewise for A. Leading dimensions are the row-major row strides unchanged.
#include "kernels/cuda/common.cuh"

// Largest power of two (<= 256) dividing the address: cuBLASLt's heuristic must only offer
// kernels that accept the operands' real alignment (it assumes 256 bytes otherwise).
static uint32_t ptr_alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && (a & (al - 1))) al >>= 1;
    return al;
}

// The plain cuBLAS path: used when cuBLASLt's heuristic offers nothing for a shape/alignment.
static void gemm_cublas(CudaCtx *ctx, bool ta, bool tb, int M, int N, int K, float alpha,
                        const void *A, int lda, const void *B, int ldb, cudaDataType_t ab_type,
                        float beta, float *C, int ldc) {
    CUBLAS_CHECK(cublasGemmEx(ctx->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                              ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ab_type, ldb,
                              A, ab_type, lda, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
}

void gemm_rm(CudaCtx *ctx, bool ta, bool tb, int M, int N, int K, float alpha, const void *A,
             int lda, const void *B, int ldb, cudaDataType_t ab_type, float beta, float *C,
             int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {                       // nothing to multiply: C = beta * C, which cuBLAS does
        gemm_cublas(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, ab_type, beta, C, ldc);
        return;
    }
    const cublasOperation_t opx = tb ? CUBLAS_OP_T : CUBLAS_OP_N;   // cuBLAS "A" = our B
    const cublasOperation_t opy = ta ? CUBLAS_OP_T : CUBLAS_OP_N;   // cuBLAS "B" = our A
    cublasLtMatmulDesc_t desc;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opx, sizeof opx));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opy, sizeof opy));
    // Stored column-major shapes (rows, cols) before op: x is (N, K) or (K, N); y is (K, M)
    // or (M, K); c is (N, M).
    cublasLtMatrixLayout_t lx, ly, lc;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lx, ab_type, tb ? K : N, tb ? N : K, ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ly, ab_type, ta ? M : K, ta ? K : M, lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, N, M, ldc));
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &ctx->lt_workspace_bytes,
                                                      sizeof ctx->lt_workspace_bytes));
    const uint32_t al_x = ptr_alignment(B), al_y = ptr_alignment(A), al_c = ptr_alignment(C);
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                      &al_x, sizeof al_x));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                      &al_y, sizeof al_y));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                      &al_c, sizeof al_c));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                      &al_c, sizeof al_c));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    // NOT_SUPPORTED (no algorithm for this shape/type/alignment) is an answer, not an error.
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx->lt, desc, lx, ly, lc, lc, pref, 1,
                                                       &heur, &found);
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) CUBLAS_CHECK(st);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0 && heur.state == CUBLAS_STATUS_SUCCESS) {
        // C and D are the same buffer: beta = 1 reads the old gradient and writes the sum.
        CUBLAS_CHECK(cublasLtMatmul(ctx->lt, desc, &alpha, B, lx, A, ly, &beta, C, lc, C, lc,
                                    &heur.algo, ctx->lt_workspace, ctx->lt_workspace_bytes,
                                    ctx->stream));
    } else {
        gemm_cublas(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, ab_type, beta, C, ldc);
    }
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lc));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(ly));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lx));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc));
}
