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

#define EMBEDDING_RUN_BATCH 16   // positions of a run whose loads are in flight together

// After a stable sort, keys(N) are tokens in increasing order and rows(N) the row each came
// from, increasing within equal tokens. Block x = sorted position i; if i starts a run of
// equal tokens, its threads (one per column, y-blocks cover C) sum the run's dout rows in row
// order and add the sum to that token's dwte row. One writer per (token, column): no atomics.
// A run is long where a byte-level corpus repeats a token (a space: some 18% of the rows), and
// walking it one dependent step at a time (the loop's exit waited on keys[j], the load of
// dout on rows[j]) took a load latency a position: so the run's end comes first, then its
// values in batches.
// The end, by the block together: it probes blockDim.x keys at once, lo + step (t + 1) for
// thread t, from lo, a position known in the run. The run is one interval of the sorted keys,
// so the equal probes come first and their count (block_sum) places the end within one step:
// all equal, lo moves past them and the step grows blockDim.x times; else lo moves to the last
// equal probe and the step shrinks back, down to 1, where the end is lo + 1. About
// 2 log_blockDim(L) + 1 rounds for a run of L (3 for 2950 at 128 threads; 1 up to blockDim.x).
// The walk: EMBEDDING_RUN_BATCH positions a batch, their dout values loaded together (their
// rows[] indices were loaded the batch before), then added in row order: the same adds in the
// same order as a position at a time, so the same bits. blockDim.x a multiple of 32 (block_sum).
__global__ void embedding_backward_runs_kernel(float *__restrict__ dwte, const float *__restrict__ dout,
                                               const int32_t *__restrict__ keys, const int32_t *__restrict__ rows,
                                               int N, int C) {
    const int i = blockIdx.x;
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    const int tok = keys[i];
    if (i > 0 && keys[i - 1] == tok) return;   // not the first row of its token (the whole block)
    long long lo = i, step = 1;                // keys[lo] == tok
    for (;;) {
        const long long p = lo + step * (threadIdx.x + 1);
        const int equal = block_sum(p < N && keys[p] == tok ? 1 : 0);
        if (equal == (int)blockDim.x) {
            lo += step * blockDim.x;
            step *= blockDim.x;
        } else {
            lo += step * equal;
            if (step == 1) break;
            step /= blockDim.x;
        }
    }
    const int end = (int)lo + 1;
    if (c >= C) return;   // (after the search: every thread takes part in its block sums)
    int r[EMBEDDING_RUN_BATCH];   // the batch's rows
    for (int u = 0; u < EMBEDDING_RUN_BATCH; u++) r[u] = u < end - i ? rows[i + u] : 0;
    float acc = 0.0f;
    for (int j = i; j < end; j += EMBEDDING_RUN_BATCH) {
        const int left = end - j;
        float x[EMBEDDING_RUN_BATCH];
        for (int u = 0; u < EMBEDDING_RUN_BATCH; u++) x[u] = u < left ? dout[(size_t)r[u] * C + c] : 0.0f;
        for (int u = 0; u < EMBEDDING_RUN_BATCH; u++)   // the next batch's rows, in flight while this one adds
            r[u] = EMBEDDING_RUN_BATCH + u < left ? rows[j + EMBEDDING_RUN_BATCH + u] : 0;
        for (int u = 0; u < EMBEDDING_RUN_BATCH; u++)
            if (u < left) acc += x[u];
    }
    dwte[(size_t)tok * C + c] += acc;
}

#endif
