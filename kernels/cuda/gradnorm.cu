// Global gradient norm pieces for clip_grad_norm_, on the device: the sum of squares stays
// in a device double (reduced across stages by the transport, read by the host only when
// it wants to report it) and clipping reads it there (the kernels: gradnorm_kernels.cuh).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gradnorm_kernels.cuh"

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
