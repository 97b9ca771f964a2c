// Rotary position embedding, Hugging Face half-split convention: dimension i pairs with
// i + HD/2 (DESIGN.md "Numerics"), angles in fp32 exactly as kernels/cpu/rope.c makes them.
#include <stdio.h>
#include <stdlib.h>
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rope_kernels.cuh"

void cuda_rope_tables(CudaCtx *ctx, float *cos_tab, float *sin_tab, int T, int HD,
                      const float *inv_freq) {
    int half = HD / 2;
    if (HD <= 0 || HD % 2 != 0 || half > ROPE_MAX_HALF) {
        fprintf(stderr, "pptrain: cuda_rope_tables: head dim %d must be even and <= %d\n", HD,
                2 * ROPE_MAX_HALF);
        exit(EXIT_FAILURE);
    }
    RopeInvFreq f;
    for (int i = 0; i < half; i++) f.v[i] = inv_freq[i];
    for (int i = half; i < ROPE_MAX_HALF; i++) f.v[i] = 0.0f;
    size_t total = (size_t)T * half;
    if (total == 0) return;
    rope_tables_kernel<<<grid_for(total, 256), 256, 0, ctx->stream>>>(cos_tab, sin_tab, T, half, f);
    CUDA_CHECK_LAUNCH();
}

// A block a token row at a time (rope_rows): a warp's multiple of threads for the row's pairs,
// 256 at most; as many blocks as rows, up to grid_for's cap (blocks then take rows in turn).
static unsigned rope_threads(int H, int HD) {
    const int per_row = H * (HD / 2), warps = (per_row + 31) / 32;
    return 32u * (unsigned)(warps < 8 ? warps : 8);
}

void cuda_rope_forward(CudaCtx *ctx, float *out, const float *x, const float *cos_tab,
                       const float *sin_tab, int B, int T, int H, int HD) {
    const int N = B * T;
    if (N <= 0 || H <= 0 || HD < 2) return;
    rope_forward_kernel<<<grid_for((size_t)N, 1), rope_threads(H, HD), 0, ctx->stream>>>(out, x, cos_tab, sin_tab, N,
                                                                                       T, H, HD);
    CUDA_CHECK_LAUNCH();
}

void cuda_rope_forward_bf16(CudaCtx *ctx, cuda_bf16 *x, const float *cos_tab, const float *sin_tab, int B, int T, int H,
                            int HD) {
    const int N = B * T;
    if (N <= 0 || H <= 0 || HD < 2) return;
    if (HD % 8 == 0 && (uintptr_t)x % 8 == 0 && (uintptr_t)cos_tab % 16 == 0 && (uintptr_t)sin_tab % 16 == 0) {
        // quads of pairs: rope_threads counts pairs, so HD / 4 gives a row's quads
        rope_forward_bf16x4_kernel<<<grid_for((size_t)N, 1), rope_threads(H, HD / 4), 0, ctx->stream>>>(
            (__nv_bfloat16 *)x, cos_tab, sin_tab, N, T, H, HD);
    } else {
        rope_forward_bf16_kernel<<<grid_for((size_t)N, 1), rope_threads(H, HD), 0, ctx->stream>>>(
            (__nv_bfloat16 *)x, cos_tab, sin_tab, N, T, H, HD);
    }
    CUDA_CHECK_LAUNCH();
}

void cuda_rope_backward(CudaCtx *ctx, float *dx, const float *dout, const float *cos_tab,
                        const float *sin_tab, int B, int T, int H, int HD) {
    const int N = B * T;
    if (N <= 0 || H <= 0 || HD < 2) return;
    rope_backward_kernel<<<grid_for((size_t)N, 1), rope_threads(H, HD), 0, ctx->stream>>>(dx, dout, cos_tab, sin_tab,
                                                                                         N, T, H, HD);
    CUDA_CHECK_LAUNCH();
}

void cuda_rope_backward_bf16(CudaCtx *ctx, cuda_bf16 *dx, int ld, const float *dout, const float *cos_tab,
                             const float *sin_tab, int B, int T, int H, int HD) {
    const int N = B * T;
    if (N <= 0 || H <= 0 || HD < 2) return;
    rope_backward_packed_kernel<<<grid_for((size_t)N, 1), rope_threads(H, HD), 0, ctx->stream>>>(
        (__nv_bfloat16 *)dx, ld, dout, cos_tab, sin_tab, N, T, H, HD);
    CUDA_CHECK_LAUNCH();
}
