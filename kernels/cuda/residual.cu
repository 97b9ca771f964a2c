// Residual add, out(n) = a + b.
#include "kernels/cuda/common.cuh"

// out may alias a or b: each element is read, then written, by the same thread (no restrict).
__global__ void residual_kernel(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = a[i] + b[i];
}

void cuda_residual_forward(CudaCtx *ctx, float *out, const float *a, const float *b, size_t n) {
    if (n == 0) return;
    residual_kernel<<<grid_for(n, 256), 256, 0, ctx->stream>>>(out, a, b, n);
    CUDA_CHECK_LAUNCH();
}
