// Global gradient norm pieces for clip_grad_norm_, on the device: the sum of squares stays
// in a device double (reduced across stages by the transport, read by the host only when
// it wants to report it) and clipping reads it there.
#include "kernels/cuda/common.cuh"

#define GRADNORM_BLOCK 256   // threads a block: what cuda_grad_sum_squares_blocks (kernels_cuda.h) counts with

// partial[block] = sum of g^2 over the block's grid-stride slice, in double.
__global__ void sumsq_partial_kernel(double *__restrict__ partial, const float *__restrict__ g,
                                     size_t n) {
    double acc = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        acc += (double)g[i] * g[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// *sumsq += sum of partial(nblocks), one block, fixed order.
__global__ void sumsq_final_kernel(double *sumsq, const double *__restrict__ partial,
                                   int nblocks) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < nblocks; i += blockDim.x) acc += partial[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0) *sumsq += acc;
}

__global__ void scale_kernel(float *g, size_t n, float s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        g[i] *= s;
}

// grad_clip_factor on the device: min(1, max_norm / (sqrt(sumsq) + 1e-6)).
__global__ void clip_kernel(float *g, size_t n, const double *__restrict__ sumsq,
                            float max_norm) {
    const double f = (double)max_norm / (sqrt(*sumsq) + 1e-6);
    const float s = f < 1.0 ? (float)f : 1.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        g[i] *= s;
}

void cuda_grad_sum_squares(CudaCtx *ctx, double *sumsq, const float *g, size_t n) {
    if (n == 0) return;
    // The block count depends on n only, so the summation order is fixed for a tensor.
    const int nblocks = cuda_grad_sum_squares_blocks(n);
    double *partial = (double *)ctx_arena(ctx, cuda_grad_sum_squares_arena_bytes(n));
    sumsq_partial_kernel<<<nblocks, GRADNORM_BLOCK, 0, ctx->stream>>>(partial, g, n);
    CUDA_CHECK_LAUNCH();
    sumsq_final_kernel<<<1, GRADNORM_BLOCK, 0, ctx->stream>>>(sumsq, partial, nblocks);
    CUDA_CHECK_LAUNCH();
}

void cuda_grad_scale(CudaCtx *ctx, float *g, size_t n, float s) {
    if (n == 0) return;
    scale_kernel<<<grid_for(n, 256), 256, 0, ctx->stream>>>(g, n, s);
    CUDA_CHECK_LAUNCH();
}

void cuda_grad_clip(CudaCtx *ctx, float *g, size_t n, const double *sumsq, float max_norm) {
    if (n == 0) return;
    clip_kernel<<<grid_for(n, 256), 256, 0, ctx->stream>>>(g, n, sumsq, max_norm);
    CUDA_CHECK_LAUNCH();
}
