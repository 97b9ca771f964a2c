// AdamW on fp32 master weights and moments, term for term as kernels/cpu/adamw.c (torch's
// single-tensor fp32 path), plus the bf16 working copy the bf16 GEMMs read.
#include <math.h>
#include "kernels/cuda/common.cuh"

// The step's scalars, computed on the host in double and rounded to fp32 as adamw_update does.
struct AdamwScalars {
    float decay, w1, w2, b2, eps, step_size, bc2_sqrt;
};

__global__ void adamw_kernel(float *__restrict__ params, __nv_bfloat16 *__restrict__ params_bf16,
                             const float *__restrict__ grads, float *__restrict__ m,
                             float *__restrict__ v, size_t n, AdamwScalars s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = grads[i];
        float p = params[i] * s.decay;
        float mi = m[i];
        mi += s.w1 * (g - mi);                          // exp_avg.lerp_(grad, 1 - beta1)
        float vi = v[i] * s.b2 + s.w2 * g * g;          // exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2)
        p -= s.step_size * (mi / (sqrtf(vi) / s.bc2_sqrt + s.eps));
        params[i] = p;
        m[i] = mi;
        v[i] = vi;
        if (params_bf16) params_bf16[i] = __float2bfloat16(p);
    }
}

void cuda_adamw_update(CudaCtx *ctx, float *params, cuda_bf16 *params_bf16, const float *grads,
                       float *m, float *v, size_t n, int t, double lr, double beta1,
                       double beta2, double eps, double weight_decay) {
    if (n == 0) return;
    const double bc1 = 1.0 - pow(beta1, t), bc2 = 1.0 - pow(beta2, t);
    AdamwScalars s;
    s.decay = (float)(1.0 - lr * weight_decay);
    s.w1 = (float)(1.0 - beta1);
    s.w2 = (float)(1.0 - beta2);
    s.b2 = (float)beta2;
    s.eps = (float)eps;
    s.step_size = (float)(lr / bc1);
    s.bc2_sqrt = (float)sqrt(bc2);
    adamw_kernel<<<grid_for(n, 256), 256, 0, ctx->stream>>>(params, as_bf16(params_bf16), grads,
                                                            m, v, n, s);
    CUDA_CHECK_LAUNCH();
}
