// kernels/cuda/embedding.cu: token embedding lookup and its deterministic scatter-add gradient
// (the kernels: embedding_kernels.cuh).
#include <cub/device/device_radix_sort.cuh>
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/embedding_kernels.cuh"

void cuda_embedding_forward(CudaCtx *ctx, float *out, const int32_t *tokens, const float *wte,
                            int N, int C) {
    if (N <= 0 || C <= 0) return;
    // a block a row at a time
    embedding_forward_kernel<<<grid_for((size_t)N, 1), 256, 0, ctx->stream>>>(out, tokens, wte, N, C);
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
