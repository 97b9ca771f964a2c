// kernels/cuda/convert_kernels.cuh: the kernels of convert.cu (which launches them), in the
// subset of CUDA C++ that tests/gpu_emu/simt.h also gives a host compiler, so
// tests/gpu_emu/test_kernels_simt.cc runs this same source on CPU threads. Include after
// kernels/cuda/common.cuh on the GPU, after simt.h and device_math.cuh on the CPU.
#ifndef PPTRAIN_KERNELS_CUDA_CONVERT_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_CONVERT_KERNELS_CUH

// One element per thread step; __float2bfloat16 rounds to nearest even and keeps NaN a NaN.
__global__ void f32_to_bf16_kernel(__nv_bfloat16 *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16(src[i]);
}

__global__ void bf16_to_f32_kernel(float *dst, const __nv_bfloat16 *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __bfloat162float(src[i]);
}

// dst(rows, ld)[:, 0:cols] = src(rows, cols), a copy (fp32 mode's packed operands); n = rows * cols.
__global__ void pack_cols_kernel(float *dst, int ld, const float *src, int cols, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[(i / cols) * ld + i % cols] = src[i];
}
#endif
