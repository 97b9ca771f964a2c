// kernels/cuda/adamw_kernels.cuh: the kernel of adamw.cu (which launches it), in the subset of
// CUDA C++ that tests/gpu_emu/simt.h also gives a host compiler, so
// tests/gpu_emu/test_kernels_simt.cc runs this same source on CPU threads. Include after
// kernels/cuda/common.cuh on the GPU, after simt.h and device_math.cuh on the CPU. The step's
// scalars come from kernels/adamw_scalars.h, which the CPU's update takes too.
#ifndef PPTRAIN_KERNELS_CUDA_ADAMW_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_ADAMW_KERNELS_CUH
#include "kernels/adamw_scalars.h"

// One grid-stride pass over n values: params, m and v (fp32) updated in place, term for term as
// adamw_update on the gradients times clip (the clip factor, 1 when not clipping: grad_scale
// then adamw_update on the CPU); params_bf16 (may be NULL) gets the bf16 working copy the bf16
// GEMMs read. grads are only read: the clip is applied as each is read, not written back (a
// separate pass over them read and wrote every gradient only to multiply it). The same
// operations in the same order: bitwise the CPU's where nothing is contracted into a
// multiply-add (the host test); nvcc contracts by default, so on a GPU within an ulp or so.
// The clip's multiply is __fmul_rn, never contracted into the lerp's subtraction after it, so
// g has the bits grad_scale (and a GPU pass of g *= clip) would have stored, and a factor of 1
// leaves it exact.
__global__ void adamw_kernel(float *__restrict__ params, __nv_bfloat16 *__restrict__ params_bf16,
                             const float *__restrict__ grads, float clip, float *__restrict__ m, float *__restrict__ v,
                             size_t n, AdamwScalars s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = __fmul_rn(grads[i], clip);
        float p = params[i] * s.decay;
        float mi = m[i];
        mi += s.w1 * (g - mi);                   // exp_avg.lerp_(grad, 1 - beta1)
        float vi = v[i] * s.b2 + s.w2 * g * g;   // exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2)
        p -= s.step_size * (mi / (sqrtf(vi) / s.bc2_sqrt + s.eps));
        params[i] = p;
        m[i] = mi;
        v[i] = vi;
        if (params_bf16) params_bf16[i] = __float2bfloat16(p);
    }
}
#endif
