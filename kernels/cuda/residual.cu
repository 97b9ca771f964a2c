// Residual add, out(n) = a + b, and (bf16 mode, a stage's last layer) the sum's bf16 copy: the
// output message, written with the sum instead of by a conversion pass after it.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/residual_kernels.cuh"

static void residual(CudaCtx *ctx, float *out, __nv_bfloat16 *out16, const float *a, const float *b, size_t n) {
    if (n == 0) return;
    residual_kernel<<<grid_for(n, 256), 256, 0, ctx->stream>>>(out, out16, a, b, n);
    CUDA_CHECK_LAUNCH();
}

void cuda_residual_forward(CudaCtx *ctx, float *out, const float *a, const float *b, size_t n) {
    residual(ctx, out, NULL, a, b, n);
}

void cuda_residual_forward_bf16(CudaCtx *ctx, float *out, cuda_bf16 *out16, const float *a, const float *b, size_t n) {
    residual(ctx, out, (__nv_bfloat16 *)out16, a, b, n);
}
