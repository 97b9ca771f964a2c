// fp32 <-> bf16 conversion: GEMM operands and inter-stage messages (DESIGN.md "Numerics"),
// and the packing of column blocks side by side into one GEMM operand (fused projections); the
// kernels: convert_kernels.cuh.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/convert_kernels.cuh"

void cuda_pack_cols(CudaCtx *ctx, float *dst, int ld, const float *src, int rows, int cols) {
    const size_t n = (size_t)rows * cols;
    if (n == 0) return;
    pack_cols_kernel<<<grid_for(n, 256), 256, 0, ctx->stream>>>(dst, ld, src, cols, n);
    CUDA_CHECK_LAUNCH();
}

void cuda_f32_to_bf16(CudaCtx *ctx, cuda_bf16 *dst, const float *src, size_t n) {
    if (n == 0) return;
    f32_to_bf16_kernel<<<grid_for(n, 256), 256, 0, ctx->stream>>>(as_bf16(dst), src, n);
    CUDA_CHECK_LAUNCH();
}

void cuda_bf16_to_f32(CudaCtx *ctx, float *dst, const cuda_bf16 *src, size_t n) {
    if (n == 0) return;
    bf16_to_f32_kernel<<<grid_for(n, 256), 256, 0, ctx->stream>>>(dst, as_bf16(src), n);
    CUDA_CHECK_LAUNCH();
}
