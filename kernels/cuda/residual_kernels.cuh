// kernels/cuda/residual_kernels.cuh: the kernels of residual.cu (which launches them), in the
// subset of CUDA C++ that tests/gpu_emu/simt.h also gives a host compiler, so
// tests/gpu_emu/test_kernels_simt.cc runs this same source on CPU threads. Include after
// kernels/cuda/common.cuh on the GPU, after simt.h and device_math.cuh on the CPU.
#ifndef PPTRAIN_KERNELS_CUDA_RESIDUAL_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_RESIDUAL_KERNELS_CUH

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

#endif
