// kernels/cuda/gradnorm_kernels.cuh: the kernels of gradnorm.cu (which launches them), in the
// subset of CUDA C++ that tests/gpu_emu/simt.h also gives a host compiler, so
// tests/gpu_emu/test_kernels_simt.cc runs this same source on CPU threads. Include after
// kernels/cuda/common.cuh on the GPU, after simt.h and device_math.cuh on the CPU.
#ifndef PPTRAIN_KERNELS_CUDA_GRADNORM_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_GRADNORM_KERNELS_CUH
#include <math.h>

#define GRADNORM_BLOCK 256   // threads a block: what cuda_grad_sum_squares_blocks (kernels_cuda.h) counts with
#define GRADNORM_STEPS 8     // grid-stride steps loaded at once: GRADNORM_STEPS / 4 float4s a thread

// partial[block] = sum of g^2 over the block's grid-stride slice, in double: thread t of block b
// adds g[b B + t + k S]^2 (B = blockDim.x, S = the grid's threads) for k = 0, 1, ... in that
// order, then the block adds its threads' sums (block_sum). How the values are loaded does not
// touch that order, so the sum has the same bits whichever loop below loads them.
// Vector loop: GRADNORM_STEPS steps at once while all of them lie inside g. The block's values
// of those steps are GRADNORM_STEPS runs of B, each a multiple of B values into g (16-byte
// aligned when g is): 2 B float4s, 2 a thread, both in flight together (a value a thread kept
// one 4-byte load in flight: about 2.45 TB/s of an H200's 4.8). They pass through shared memory
// so that each thread takes back its own value of each step, in step order. The steps left
// (fewer than GRADNORM_STEPS), and every step of a g that is not 16-byte aligned (no caller's
// is: a stage's gradients are one allocation), take the value-a-thread loop. blockDim.x a
// multiple of 32 (block_sum) and at most GRADNORM_BLOCK.
__global__ void sumsq_partial_kernel(double *__restrict__ partial, const float *__restrict__ g, size_t n) {
    __shared__ float4 tile[GRADNORM_STEPS * GRADNORM_BLOCK / 4];   // step j's B values from float j B
    const size_t B = blockDim.x, stride = (size_t)gridDim.x * B;
    const unsigned quads = blockDim.x / 4;   // float4s a step
    double acc = 0.0;
    size_t base = blockIdx.x * B;   // the block's first value of the next step
    // While the last of the GRADNORM_STEPS steps from base ends inside g (no overflow near SIZE_MAX).
    if ((uintptr_t)g % 16 == 0)
        for (; n >= B && base <= n - B && (n - B - base) / stride >= GRADNORM_STEPS - 1;
             base += GRADNORM_STEPS * stride) {
            float4 x[GRADNORM_STEPS / 4];
            for (int h = 0; h < GRADNORM_STEPS / 4; h++) {   // float4 q of the steps: step q / quads's
                const unsigned q = threadIdx.x + h * blockDim.x;
                x[h] = load_f32x4(g + base + q / quads * stride, q % quads);
            }
            for (int h = 0; h < GRADNORM_STEPS / 4; h++) tile[threadIdx.x + h * blockDim.x] = x[h];
            __syncthreads();
            const float *v = reinterpret_cast<const float *>(tile) + threadIdx.x;
            for (int j = 0; j < GRADNORM_STEPS; j++) acc += (double)v[j * B] * v[j * B];
            __syncthreads();   // the next steps' loads overwrite the tile
        }
    for (size_t i = base + threadIdx.x; i < n; i += stride) acc += (double)g[i] * g[i];
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

#endif
