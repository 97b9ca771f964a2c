// AdamW on fp32 master weights and moments, term for term as kernels/cpu/adamw.c (torch's
// single-tensor fp32 path) on the gradients times the clip factor, plus the bf16 working copy
// the bf16 GEMMs read (the kernel: adamw_kernels.cuh).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/adamw_kernels.cuh"

void cuda_adamw_update(CudaCtx *ctx, float *params, cuda_bf16 *params_bf16, const float *grads,
                       float clip, float *m, float *v, size_t n, int t, double lr, double beta1,
                       double beta2, double eps, double weight_decay) {
    if (n == 0) return;
    const AdamwScalars s = adamw_scalars(t, lr, beta1, beta2, eps, weight_decay);
    adamw_kernel<<<grid_for(n, 256), 256, 0, ctx->stream>>>(params, as_bf16(params_bf16), grads,
                                                            clip, m, v, n, s);
    CUDA_CHECK_LAUNCH();
}
