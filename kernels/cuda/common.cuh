// Private to kernels/cuda: the context's definition, the scratch arena, the GEMM helpers
// (gemm.cu) and the device-side reductions every kernel file shares.
#ifndef PPTRAIN_KERNELS_CUDA_COMMON_CUH
#define PPTRAIN_KERNELS_CUDA_COMMON_CUH
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <initializer_list>

#include "kernels/cuda/kernels_cuda.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm_plans.h"
#include "kernels/cuda/device_math.cuh"

#define CTX_SMEM_KERNELS 64   // more kernels than ask for a grant: flash_attention.cu about 30, rmsnorm.cu 8

struct CudaCtx {
    int device;
    cudaStream_t stream;          // every kernel, copy and GEMM of this context goes here
    cublasHandle_t cublas;        // fallback GEMMs (shapes cuBLASLt has no algorithm for)
    cublasLtHandle_t lt;          // linear layers
    void *lt_workspace;
    size_t lt_workspace_bytes;
    GemmPlans *plans;             // gemm.cu's cuBLASLt plans (descriptors, layouts, algorithms)
    void *arena;                  // scratch of one call at a time (stream order), grown on demand
    size_t arena_bytes;
    double *fetched;              // pinned: where cuda_fetch_double's copy lands
    // Dynamic shared memory granted per kernel on this context's device (allow_smem, below):
    // asked for once, and again only for more bytes.
    struct {
        const void *kernel;
        size_t bytes;
    } smem_granted[CTX_SMEM_KERNELS];
    int n_smem_granted;
};

// Dynamic shared memory above 48 KiB must be asked for per kernel, and the largest
// shared-memory carveout of the SM's L1 with it (the driver's default may split it so that
// fewer blocks fit). The grant is per kernel and device, so the context (one device, one
// stage's thread) keeps what it asked for and asks the driver again only for more; a full
// table just asks every time.
template <typename Kernel>
static void allow_smem(CudaCtx *ctx, Kernel kernel, size_t bytes) {
    const void *key = (const void *)kernel;
    int i = 0;
    while (i < ctx->n_smem_granted && ctx->smem_granted[i].kernel != key) i++;
    if (i < ctx->n_smem_granted && bytes <= ctx->smem_granted[i].bytes) return;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    (int)cudaSharedmemCarveoutMaxShared));
    if (i == ctx->n_smem_granted) {
        if (i == CTX_SMEM_KERNELS) return;
        ctx->n_smem_granted++;
        ctx->smem_granted[i].kernel = key;
    }
    ctx->smem_granted[i].bytes = bytes;
}

// The arena: at least `bytes` of device scratch, 256-byte aligned, valid for the work this
// call queues (the next call on the same stream may reuse it: stream order keeps them apart).
// Growing waits for the stream before freeing the old block, so queued work never sees it go.
void *ctx_arena(CudaCtx *ctx, size_t bytes);

// ---- gemm.cu -----------------------------------------------------------------------------
// Row-major GEMM, C(M, N) (ldc) = alpha * op(A) @ op(B) + beta * C, fp32 C and accumulation.
// op(A) is (M, K): A is stored (M, K) with row stride lda, or (K, M) when ta.
// op(B) is (K, N): B is stored (K, N) with ldb, or (N, K) when tb.
// ab_type: CUDA_R_32F (fp32 GEMM, no TF32) or CUDA_R_16BF (bf16 operands, fp32 accumulate).
// beta = 1 accumulates (the backward contract); with beta = 0, C is not read.
void gemm_rm(CudaCtx *ctx, bool ta, bool tb, int M, int N, int K, float alpha, const void *A,
             int lda, const void *B, int ldb, cudaDataType_t ab_type, float beta, float *C,
             int ldc);
// The same with C read from Cin and the result written to D (same shape and ldc; Cin may be D):
// D = alpha * op(A) @ op(B) + beta * Cin, the sum rounded once. The forward's residual adds run
// so, in the GEMM's epilogue (cuda_linear_forward_residual): no separate add reads the output.
void gemm_rm_into(CudaCtx *ctx, bool ta, bool tb, int M, int N, int K, float alpha, const void *A, int lda,
                  const void *B, int ldb, cudaDataType_t ab_type, float beta, const float *Cin, float *D, int ldc);
// The plan cache's value size and release (context.cu makes and frees the cache).
size_t gemm_plan_bytes(void);
void gemm_plan_release(void *value);
// The same over `batch` independent problems at element strides sA, sB, sC (cuBLAS strided
// batched). Entries of one call must not write overlapping C blocks. c_type: CUDA_R_32F, or
// CUDA_R_16BF (bf16 operands only: the fp32 accumulator rounded to bf16 as it is stored).
void gemm_rm_strided(CudaCtx *ctx, bool ta, bool tb, int M, int N, int K, float alpha,
                     const void *A, int lda, long long sA, const void *B, int ldb, long long sB,
                     cudaDataType_t ab_type, float beta, void *C, cudaDataType_t c_type, int ldc,
                     long long sC, int batch);

// ---- crossentropy.cu (also the fused classifier's, classifier.cu) ----------------------
// Per row of logits(N, V): row_loss[n] = logsumexp - x[target] (double; 0 on pad rows), and
// when dlogits is non-NULL it is overwritten with scale * (softmax - onehot) (may alias logits).
void crossentropy_rows(CudaCtx *ctx, float *dlogits, double *row_loss, const float *logits,
                       const int32_t *targets, int N, int V, float scale);
// The same with dlogits written in bf16, each the fp32 value rounded to nearest even (the
// fused classifier's bf16 GEMM operand, with no conversion pass after): must not alias logits.
void crossentropy_rows(CudaCtx *ctx, __nv_bfloat16 *dlogits, double *row_loss, const float *logits,
                       const int32_t *targets, int N, int V, float scale);
// *loss += scale * sum of row_loss(N), one block in a fixed order.
void crossentropy_sum(CudaCtx *ctx, double *loss, const double *row_loss, int N, float scale);

// ---- launch shapes -----------------------------------------------------------------------
// Blocks for a grid-stride loop over n elements: enough to fill an H100 several times over,
// capped so the count fits the grid limit; the loop covers the rest.
static inline unsigned grid_for(size_t n, int block) {
    size_t blocks = (n + (size_t)block - 1) / (size_t)block;
    if (blocks > 65536) blocks = 65536;
    return blocks ? (unsigned)blocks : 1u;
}

// Whether 16-byte loads and stores (Bf16x8, float4) can start at these pointers: all 16-byte
// aligned (NULL passes: a kernel does not touch it).
static inline bool aligned16(std::initializer_list<const void *> ptrs) {
    for (const void *p : ptrs)
        if ((uintptr_t)p % 16) return false;
    return true;
}
// ... and walk rows of `width` bf16s at stride ld from them: width and ld multiples of 8 too.
static inline bool bf16_vectors(size_t width, size_t ld, std::initializer_list<const void *> ptrs) {
    return width % 8 == 0 && ld % 8 == 0 && aligned16(ptrs);
}

static inline __nv_bfloat16 *as_bf16(cuda_bf16 *p) { return reinterpret_cast<__nv_bfloat16 *>(p); }
static inline const __nv_bfloat16 *as_bf16(const cuda_bf16 *p) {
    return reinterpret_cast<const __nv_bfloat16 *>(p);
}

#endif
