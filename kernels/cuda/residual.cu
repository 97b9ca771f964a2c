// Residual add, out(n) = a + b, and (bf16 mode, a stage's last layer) the sum's bf16 copy: the
// output message, written with the sum instead of by a conversion pass after it.
#include "kernels/cuda/common.cuh"

// out may alias a or b: each element is read, then written, by the same thread (no restrict).
// out16 (may be NULL) gets the sum rounded to nearest even.
__global__ void residual_kernel(float *out, __nv_bfloat16 *__restrict__ out16, const float *a, const float *b,
                                size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float sum = a[i] + b[i];
        out[i] = sum;
        if (out16) out16[i] = __float2bfloat16(sum);
    }
}

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
