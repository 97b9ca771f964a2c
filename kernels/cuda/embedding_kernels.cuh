// kernels/cuda/embedding_kernels.cuh: the kernels of embedding.cu (which launches them), in the
// subset of CUDA C++ that tests/gpu_emu/simt.h also gives a host compiler, so
// tests/gpu_emu/test_kernels_simt.cc runs this same source on CPU threads. Include after
// kernels/cuda/common.cuh on the GPU, after simt.h and device_math.cuh on the CPU.
#ifndef PPTRAIN_KERNELS_CUDA_EMBEDDING_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_EMBEDDING_KERNELS_CUH

// out(N, C) = wte[tokens[n]](C). Blocks take token rows in turn and a block's threads the
// row's columns, coalesced along C: the row's table offset is one multiply a row (one thread an
// element of the whole output divided a 64-bit index twice an element).
__global__ void embedding_forward_kernel(float *__restrict__ out, const int32_t *__restrict__ tokens,
                                         const float *__restrict__ wte, int N, int C) {
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const float *src = wte + (size_t)tokens[n] * C;
        float *dst = out + (size_t)n * C;
        for (int c = threadIdx.x; c < C; c += blockDim.x) dst[c] = src[c];
    }
}

// rows(N) = 0, 1, ..., N-1: the values the sort carries along with the token keys.
__global__ void iota_kernel(int32_t *rows, int N) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) rows[i] = i;
}

// After a stable sort, keys(N) are tokens in increasing order and rows(N) the row each came
// from, increasing within equal tokens. Block x = sorted position i; if i starts a run of
// equal tokens, its threads (one per column, y-blocks cover C) sum the run's dout rows in row
// order and add the sum to that token's dwte row. One writer per (token, column): no atomics.
__global__ void embedding_backward_runs_kernel(float *__restrict__ dwte, const float *__restrict__ dout,
                                               const int32_t *__restrict__ keys, const int32_t *__restrict__ rows,
                                               int N, int C) {
    int i = blockIdx.x;
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    int tok = keys[i];
    if (i > 0 && keys[i - 1] == tok) return;   // not the first row of its token
    float acc = 0.0f;
    for (int j = i; j < N && keys[j] == tok; j++) acc += dout[(size_t)rows[j] * C + c];
    dwte[(size_t)tok * C + c] += acc;
}

#endif
