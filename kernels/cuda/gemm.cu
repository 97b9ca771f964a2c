// Row-major GEMMs on cuBLASLt (single) and cuBLAS (strided batched), fp32 accumulation.
// Each distinct cuBLASLt GEMM is planned once per context (gemm_plans.h): its descriptor,
// layouts and the heuristic's algorithm are kept, so a step makes no heuristic query.
//
// cuBLAS is column-major. A row-major (r, c) matrix with row stride ld IS the column-major
// (c, r) matrix with the same ld, its transpose. So row-major C = op(A) op(B) is computed as
// column-major C^T = op(B)^T op(A)^T: cuBLAS's first operand is our B, its second our A,
// m = N, n = M, k = K, and each operand keeps its own transpose flag:
//   B not transposed: stored (K, N) row-major = col-major (N, K) = op(B)^T as is -> OP_N
//   B transposed:     stored (N, K) row-major = col-major (K, N), transpose it  -> OP_T
// and likewise for A. Leading dimensions are the row-major row strides unchanged.
#include "kernels/cuda/common.cuh"

// One cached GEMM (gemm_plans.h): what gemm_rm used to build, ask for and destroy on every call.
typedef struct {
    bool lt;                              // cuBLASLt offered an algorithm; else the cuBLAS path
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t lx, ly, lc;
    cublasLtMatmulAlgo_t algo;
} GemmPlan;

void gemm_plan_release(void *value) {
    GemmPlan *g = (GemmPlan *)value;
    if (!g->desc) return;
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->lc));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->ly));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(g->lx));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(g->desc));
}

size_t gemm_plan_bytes(void) { return sizeof(GemmPlan); }

// The plain cuBLAS path: used when cuBLASLt's heuristic offers nothing for a shape/alignment.
static void gemm_cublas(CudaCtx *ctx, bool ta, bool tb, int M, int N, int K, float alpha,
                        const void *A, int lda, const void *B, int ldb, cudaDataType_t ab_type,
                        float beta, float *C, int ldc) {
    CUBLAS_CHECK(cublasGemmEx(ctx->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                              ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ab_type, ldb,
                              A, ab_type, lda, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
}

// Builds the plan of key into g: descriptor, layouts, and one heuristic query (its answer
// kept, "nothing" included, so the fallback is decided once too).
static void plan_build(CudaCtx *ctx, const GemmKey *key, GemmPlan *g) {
    const bool ta = key->ta, tb = key->tb;
    const int M = key->m, N = key->n, K = key->k;
    const cudaDataType_t ab_type = (cudaDataType_t)key->ab_type;
    const cublasOperation_t opx = tb ? CUBLAS_OP_T : CUBLAS_OP_N;   // cuBLAS "A" = our B
    const cublasOperation_t opy = ta ? CUBLAS_OP_T : CUBLAS_OP_N;   // cuBLAS "B" = our A
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&g->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opx, sizeof opx));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opy, sizeof opy));
    // Stored column-major shapes (rows, cols) before op: x is (N, K) or (K, N); y is (K, M)
    // or (M, K); c is (N, M).
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->lx, ab_type, tb ? K : N, tb ? N : K, key->ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->ly, ab_type, ta ? M : K, ta ? K : M, key->lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&g->lc, CUDA_R_32F, N, M, key->ldc));
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &ctx->lt_workspace_bytes,
                                                      sizeof ctx->lt_workspace_bytes));
    const uint32_t al_x = key->align_b, al_y = key->align_a, al_c = key->align_c;
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
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx->lt, g->desc, g->lx, g->ly, g->lc, g->lc,
                                                       pref, 1, &heur, &found);
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) CUBLAS_CHECK(st);
    g->lt = st == CUBLAS_STATUS_SUCCESS && found > 0 && heur.state == CUBLAS_STATUS_SUCCESS;
    if (g->lt) g->algo = heur.algo;
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
}

void gemm_rm_into(CudaCtx *ctx, bool ta, bool tb, int M, int N, int K, float alpha, const void *A, int lda,
                  const void *B, int ldb, cudaDataType_t ab_type, float beta, const float *Cin, float *D, int ldc) {
    if (M <= 0 || N <= 0) return;
    GemmPlan *g = NULL;
    if (K > 0) {   // (K <= 0: nothing to multiply, no plan)
        const GemmKey key = {.m = M, .n = N, .k = K, .ta = ta, .tb = tb, .lda = lda, .ldb = ldb,
                             .ldc = ldc, .ab_type = (int32_t)ab_type, .c_type = (int32_t)CUDA_R_32F,
                             .epilogue = (int32_t)CUBLASLT_EPILOGUE_DEFAULT,
                             .align_a = gemm_ptr_alignment(A), .align_b = gemm_ptr_alignment(B),
                             .align_c = gemm_pair_alignment(Cin, D)};
        bool is_new = false;
        g = (GemmPlan *)gemm_plans_find(ctx->plans, &key, &is_new);
        if (is_new) plan_build(ctx, &key, g);
    }
    if (g && g->lt) {   // C and D may be one buffer: beta = 1 then reads the old gradient, writes the sum
        CUBLAS_CHECK(cublasLtMatmul(ctx->lt, g->desc, &alpha, B, g->lx, A, g->ly, &beta, Cin, g->lc, D, g->lc,
                                    &g->algo, ctx->lt_workspace, ctx->lt_workspace_bytes, ctx->stream));
        return;
    }
    // cuBLAS (and K <= 0: nothing to multiply, D = beta * C, which cuBLAS does) reads C from D.
    if (Cin != D && beta != 0.0f)
        CUDA_CHECK(cudaMemcpy2DAsync(D, (size_t)ldc * sizeof(float), Cin, (size_t)ldc * sizeof(float),
                                     (size_t)N * sizeof(float), (size_t)M, cudaMemcpyDeviceToDevice, ctx->stream));
    gemm_cublas(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, ab_type, beta, D, ldc);
}

void gemm_rm(CudaCtx *ctx, bool ta, bool tb, int M, int N, int K, float alpha, const void *A,
             int lda, const void *B, int ldb, cudaDataType_t ab_type, float beta, float *C,
             int ldc) {
    gemm_rm_into(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, ab_type, beta, C, C, ldc);
}

void gemm_rm_strided(CudaCtx *ctx, bool ta, bool tb, int M, int N, int K, float alpha,
                     const void *A, int lda, long long sA, const void *B, int ldb, long long sB,
                     cudaDataType_t ab_type, float beta, void *C, cudaDataType_t c_type, int ldc,
                     long long sC, int batch) {
    if (M <= 0 || N <= 0 || batch <= 0) return;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        ctx->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
        &alpha, B, ab_type, ldb, sB, A, ab_type, lda, sA, &beta, C, c_type, ldc, sC, batch,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
