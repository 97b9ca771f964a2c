// kernels/cuda/gradnorm_kernels.cuh: the kernels of gradnorm.cu (which launches them), in the
// subset of CUDA C++ that tests/gpu_emu/simt.h also gives a host compiler, so
// tests/gpu_emu/test_kernels_simt.cc runs this same source on CPU threads. Include after
// kernels/cuda/common.cuh on the GPU, after simt.h and device_math.cuh on the CPU.
#ifndef PPTRAIN_KERNELS_CUDA_GRADNORM_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_GRADNORM_KERNELS_CUH
#include <math.h>

#define GRADNORM_BLOCK 256   // threads a block: what cuda_grad_sum_squares_blocks (kernels_cuda.h) counts with

// partial[block] = sum of g^2 over the block's grid-stride slice, in double.
__global__ void sumsq_partial_kernel(double *__restrict__ partial, const float *__restrict__ g, size_t n) {
    double acc = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        acc += (double)g[i] * g[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// *sumsq += sum of partial(nblocks), one block, fixed order.
__global__ void sumsq_final_kernel(double *sumsq, const double *__restrict__ partial, int nblocks) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < nblocks; i += blockDim.x) acc += partial[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0) *sumsq += acc;
}

__global__ void scale_kernel(float *g, size_t n, float s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        g[i] *= s;
}

// grad_clip_factor on the device: min(1, max_norm / (sqrt(sumsq) + 1e-6)).
__global__ void clip_kernel(float *g, size_t n, const double *__restrict__ sumsq, float max_norm) {
    const double f = (double)max_norm / (sqrt(*sumsq) + 1e-6);
    const float s = f < 1.0 ? (float)f : 1.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        g[i] *= s;
}
#endif
