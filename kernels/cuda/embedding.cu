// Token embedding lookup and its deterministic scatter-add gradient.
#include <cub/device/device_radix_sort.cuh>
#include "kernels/cuda/common.cuh"

// out(N, C) = wte[tokens[n]](C): one thread per output element, coalesced along C.
__global__ void embedding_forward_kernel(float *__restrict__ out,
                                         const int32_t *__restrict__ tokens,
                                         const float *__restrict__ wte, int N, int C) {
    size_t total = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / (size_t)C, c = i % (size_t)C;
        out[i] = wte[(size_t)tokens[n] * C + c];
    }
}

// rows(N) = 0, 1, ..., N-1: the values the sort carries along with the token keys.
__global__ void iota_kernel(int32_t *rows, int N) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x)
        rows[i] = i;
}

// After a stable sort, keys(N) are tokens in increasing order and rows(N) the row each came
// from, increasing within equal tokens. Block x = sorted position i; if i starts a run of
// equal tokens, its threads (one per column, y-blocks cover C) sum the run's dout rows in row
// order and add the sum to that token's dwte row. One writer per (token, column): no atomics.
__global__ void embedding_backward_runs_kernel(float *__restrict__ dwte,
                                               const float *__restrict__ dout,
                                               const int32_t *__restrict__ keys,
                                               const int32_t *__restrict__ rows, int N, int C) {
    int i = blockIdx.x;
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    int tok = keys[i];
    if (i > 0 && keys[i - 1] == tok) return;            // not the first row of its token
    float acc = 0.0f;
    for (int j = i; j < N && keys[j] == tok; j++) acc += dout[(size_t)rows[j] * C + c];
    dwte[(size_t)tok * C + c] += acc;
}

void cuda_embedding_forward(CudaCtx *ctx, float *out, const int32_t *tokens, const float *wte,
                            int N, int C) {
    size_t n = (size_t)N * C;
    if (n == 0) return;
    embedding_forward_kernel<<<grid_for(n, 256), 256, 0, ctx->stream>>>(out, tokens, wte, N, C);
    CUDA_CHECK_LAUNCH();
}

void cuda_embedding_backward(CudaCtx *ctx, float *dwte, const float *dout,
                             const int32_t *tokens, int N, int C) {
    if (N <= 0 || C <= 0) return;
    // Arena: rows_in, keys_out, rows_out (N int32 each), then cub's temporary storage.
    size_t temp_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens, (int32_t *)nullptr,
                                               (const int32_t *)nullptr, (int32_t *)nullptr, N,
                                               0, 32, ctx->stream));
    size_t vec = cuda_arena_round((size_t)N * sizeof(int32_t));
    char *base = (char *)ctx_arena(ctx, 3 * vec + cuda_arena_round(temp_bytes));
    int32_t *rows_in = (int32_t *)base, *keys_out = (int32_t *)(base + vec),
            *rows_out = (int32_t *)(base + 2 * vec);
    void *temp = base + 3 * vec;
    iota_kernel<<<grid_for((size_t)N, 256), 256, 0, ctx->stream>>>(rows_in, N);
    CUDA_CHECK_LAUNCH();
    // LSD radix sort is stable: equal tokens keep increasing row order (the CPU's order).
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, keys_out, rows_in,
                                               rows_out, N, 0, 32, ctx->stream));
    const int block = 128;
    dim3 grid((unsigned)N, (unsigned)((C + block - 1) / block));
    embedding_backward_runs_kernel<<<grid, block, 0, ctx->stream>>>(dwte, dout, keys_out,
                                                                    rows_out, N, C);
    CUDA_CHECK_LAUNCH();
}
