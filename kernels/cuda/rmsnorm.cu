// RMSNorm (Llama): out = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps).
// Row kernels use one warp per row (8 rows per 256-thread block); row sums are accumulated
// in double per lane as the CPU does, then combined by a fixed butterfly (deterministic).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rmsnorm_kernels.cuh"

template <typename T>
static void rmsnorm_forward(CudaCtx *ctx, T *out, float *rstd, const float *inp, const float *weight, int N, int C,
                            float eps) {
    if (N <= 0) return;
    int blocks = (N + RMSNORM_ROWS_PER_BLOCK - 1) / RMSNORM_ROWS_PER_BLOCK;
    rmsnorm_forward_kernel<T><<<blocks, 32 * RMSNORM_ROWS_PER_BLOCK, 0, ctx->stream>>>(out, rstd, inp, weight, N, C,
                                                                                      eps);
    CUDA_CHECK_LAUNCH();
}

void cuda_rmsnorm_forward(CudaCtx *ctx, float *out, float *rstd, const float *inp,
                          const float *weight, int N, int C, float eps) {
    rmsnorm_forward(ctx, out, rstd, inp, weight, N, C, eps);
}

void cuda_rmsnorm_forward_bf16(CudaCtx *ctx, cuda_bf16 *out, float *rstd, const float *inp, const float *weight, int N,
                               int C, float eps) {
    rmsnorm_forward(ctx, (__nv_bfloat16 *)out, rstd, inp, weight, N, C, eps);
}

template <typename T>
static void residual_rmsnorm_forward(CudaCtx *ctx, float *sum, T *out, float *rstd, const float *a, const float *b,
                                     const float *weight, int N, int C, float eps) {
    if (N <= 0) return;
    int blocks = (N + RMSNORM_ROWS_PER_BLOCK - 1) / RMSNORM_ROWS_PER_BLOCK;
    residual_rmsnorm_forward_kernel<T><<<blocks, 32 * RMSNORM_ROWS_PER_BLOCK, 0, ctx->stream>>>(sum, out, rstd, a, b,
                                                                                               weight, N, C, eps);
    CUDA_CHECK_LAUNCH();
}

void cuda_residual_rmsnorm_forward(CudaCtx *ctx, float *sum, float *out, float *rstd,
                                   const float *a, const float *b, const float *weight, int N,
                                   int C, float eps) {
    residual_rmsnorm_forward(ctx, sum, out, rstd, a, b, weight, N, C, eps);
}

void cuda_residual_rmsnorm_forward_bf16(CudaCtx *ctx, float *sum, cuda_bf16 *out, float *rstd, const float *a,
                                        const float *b, const float *weight, int N, int C, float eps) {
    residual_rmsnorm_forward(ctx, sum, (__nv_bfloat16 *)out, rstd, a, b, weight, N, C, eps);
}

template <typename D>
static void rmsnorm_backward_input(CudaCtx *ctx, float *dinp, __nv_bfloat16 *dinp16, const float *resid, const D *dout,
                                   const float *inp, const float *weight, const float *rstd, int N, int C) {
    if (N <= 0 || C <= 0) return;
    const int blocks = (N + RMSNORM_ROWS_PER_BLOCK - 1) / RMSNORM_ROWS_PER_BLOCK;
    rmsnorm_backward_input_kernel<D><<<blocks, 32 * RMSNORM_ROWS_PER_BLOCK, 0, ctx->stream>>>(dinp, dinp16, resid, dout,
                                                                                            inp, weight, rstd, N, C);
    CUDA_CHECK_LAUNCH();
}

// dweight(C) += sum over rows of dout * inp * rstd: per-chunk partial sums in the arena, then
// their sum in chunk order.
template <typename D>
static void rmsnorm_dweight(CudaCtx *ctx, float *dweight, const D *dout, const float *inp, const float *rstd, int N,
                            int C) {
    if (N <= 0 || C <= 0) return;
    const int chunk = cuda_rmsnorm_chunk_rows(N), chunks = (N + chunk - 1) / chunk;
    double *partial = (double *)ctx_arena(ctx, cuda_rmsnorm_arena_bytes(N, C));
    dim3 grid((unsigned)((C + 31) / 32), (unsigned)chunks);
    rmsnorm_dweight_partial_kernel<D><<<grid, RMSNORM_DWEIGHT_THREADS, 0, ctx->stream>>>(partial, dout, inp, rstd, N, C,
                                                                                       chunk);
    CUDA_CHECK_LAUNCH();
    rmsnorm_dweight_final_kernel<<<(C + 255) / 256, 256, 0, ctx->stream>>>(dweight, partial, chunks, C);
    CUDA_CHECK_LAUNCH();
}

void cuda_rmsnorm_backward(CudaCtx *ctx, float *dinp, float *dweight, const float *dout,
                           const float *inp, const float *weight, const float *rstd, int N,
                           int C) {
    if (dinp) rmsnorm_backward_input(ctx, dinp, (__nv_bfloat16 *)NULL, dinp, dout, inp, weight, rstd, N, C);
    if (dweight) rmsnorm_dweight(ctx, dweight, dout, inp, rstd, N, C);
}

void cuda_rmsnorm_dweight_bf16(CudaCtx *ctx, float *dweight, const cuda_bf16 *dout, const float *inp, const float *rstd,
                               int N, int C) {
    rmsnorm_dweight(ctx, dweight, (const __nv_bfloat16 *)dout, inp, rstd, N, C);
}

void cuda_residual_rmsnorm_backward(CudaCtx *ctx, float *dinp, cuda_bf16 *dinp16, const float *resid,
                                    const float *dout, const float *inp, const float *weight, const float *rstd, int N,
                                    int C) {
    rmsnorm_backward_input(ctx, dinp, (__nv_bfloat16 *)dinp16, resid, dout, inp, weight, rstd, N, C);
}

void cuda_residual_rmsnorm_backward_bf16(CudaCtx *ctx, float *dinp, cuda_bf16 *dinp16, const float *resid,
                                         const cuda_bf16 *dout, const float *inp, const float *weight,
                                         const float *rstd, int N, int C) {
    rmsnorm_backward_input(ctx, dinp, (__nv_bfloat16 *)dinp16, resid, (const __nv_bfloat16 *)dout, inp, weight, rstd, N,
                           C);
}
