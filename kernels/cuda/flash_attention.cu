// kernels/cuda/flash_attention.cu: causal grouped-query flash attention (FlashAttention-2),
// forward and backward, with no (T, T) buffer: per head it keeps out and the row logsumexp
// (B, NH, T), and backward recomputes each tile's probabilities from them.
//
// Layouts (kernels_cuda.h): q, out, dout (B, T, NH, HD); k, v (B, T, NKV, HD); lse, dsum
// (B, NH, T). Query head h reads kv head h / g, g = NH / NKV.
//
// The kernels are kernels/cuda/flash_kernels.cuh (this file launches them; a CPU test runs
// their source on threads); the math of one tile is kernels/cuda/flash_tile.h (shared with
// the emulator, which runs it in the kernels' tile order: tests/gpu_emu/flash_emu.c). The
// kernels only move tiles into shared memory and share a tile's elements out over the block's
// threads. A block owns one tile of rows and walks the tiles it meets in a fixed order, so
// every sum has one order and a run repeats itself bitwise, with no atomics:
//   flash_forward_kernel  block (query tile, b * NH + h): key tiles 0, 1, ... up to the diagonal.
//   flash_decode_kernel   block h: generation's one query row against the cached keys, as forward.
//   flash_rowsum_kernel   D = rowsum(dout * out), one thread a row.
//   flash_dq_kernel       block (query tile, b * NH + h): dq = scale dS k, key tiles as forward.
//   flash_dkdv_kernel     block (key tile, b * NH + h): query head h over the query tiles from the
//                         diagonal on; dk = scale dS^T q, dv = P^T dout (bf16 mode: dv into the
//                         packed q|k|v gradient, FlashDv; with grouped queries, each head's
//                         share to the arena, then flash_group_sum_kernel sums the group's
//                         shares in head order). dq and dk/dv are split so each has one writer
//                         per row, at the price of computing the backward's scores twice.
// Each writer writes its gradient once (flash_written), so no caller zeroes dq, dk or dv first.
// Shared tiles are (rows, HD + 1) and score tiles (BQ, BK + 1): the odd strides spread a
// column's reads over the banks. fp32 throughout, on CUDA cores (see flash_tile.h: nothing is
// rounded to bf16).
//
// The bf16 mode runs the *_bf16 functions at the end: the same walk in 64-row tiles, 4 warps of
// 16 rows, with every product on tensor cores (mma.sync, the softmax in registers:
// kernels/cuda/flash_mma_kernels.cuh; what they
// round is in flash_tile.h, "Tensor-core tiles"). Head dims that are not a multiple of 16 up to
// 128 fall back to the fp32 kernels. The engine calls the backward as
// cuda_flash_attention_rope_backward_bf16: the tensor-core kernels rotate dq (and dk, without
// grouped queries) back by RoPE in registers and write them bf16 into the packed q|k|v gradient;
// with grouped queries the group sum rotates dk as it sums it. Their dq kernel takes D itself
// (no flash_rowsum_kernel pass), from dout and out rows 16-byte aligned, as q, k and v are for
// the tiles' cp.async, and writes it to dsum for the dk/dv kernel after it.
//
// Every product of two shared tiles (scores, P v, dS k, dS^T q, P^T dout) is register-tiled:
// thread t computes a 2 x 4 micro-tile, rows t / 8 and t / 8 + 16, columns t % 8 + 8 j, so
// each step of the sum reads 6 shared values for 8 fused multiply-adds (one element a thread
// read 2 for 1, and the kernels were bound by shared-memory reads: an H200 ran the forward at
// about 4 TFLOP/s). Each element is still one sum in index order, the same operations as the
// flash_tile.h call it replaces, so the emulator's tiles stay the GPU's. Tiles load as float4s
// where rows allow, and query tiles run longest first (docs/gpu.md has the times).
#include <math.h>
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/flash_mma_kernels.cuh"

// Shared memory above 48 KiB (the tensor-core kernels, double-buffered, at HD 64: 45 KiB
// forward, 55 KiB backward; at HD 128: 85 and 103 KiB; the fp32 dk/dv kernel at HD 256 needs
// more than an A100's 163 KiB) is asked for by allow_smem (common.cuh). It also asks for the
// largest shared-memory carveout of the SM's L1: these kernels read global memory through
// cp.async and their own loads, not L1, and 4 blocks of 55 KiB need 224 of an H100's 228 KiB.

// The fp32 kernels: q, k, v and out fp32, or (bf16 mode, a head dim the tensor cores do not
// take) bf16, widened as they load and rounded as out is stored.
template <typename OutT, typename InT>
static void forward_fp32(CudaCtx *ctx, OutT *out, float *lse, const InT *q, const InT *k, const InT *v, int B, int T,
                         int NH, int NKV, int HD) {
    if (B <= 0 || T <= 0 || NH <= 0) return;
    const size_t smem = forward_smem(HD) * sizeof(float);
    allow_smem(ctx, flash_forward_kernel<OutT, InT>, smem);
    const dim3 grid((unsigned)flash_tiles(T, FLASH_BQ), (unsigned)(B * NH));
    flash_forward_kernel<OutT, InT><<<grid, FLASH_THREADS, smem, ctx->stream>>>(out, lse, q, k, v, T, NH, NKV, HD,
                                                                                flash_scale(HD));
    CUDA_CHECK_LAUNCH();
}

void cuda_flash_attention_forward(CudaCtx *ctx, float *out, float *lse, const float *q,
                                  const float *k, const float *v, int B, int T, int NH, int NKV,
                                  int HD) {
    forward_fp32(ctx, out, lse, q, k, v, B, T, NH, NKV, HD);
}

template <typename OutT, typename InT>
static void decode(CudaCtx *ctx, OutT *out, const InT *q, const InT *k, const InT *v, int n, int NH, int NKV, int HD) {
    if (n <= 0 || NH <= 0) return;
    const size_t smem = decode_smem(HD) * sizeof(float);
    allow_smem(ctx, flash_decode_kernel<OutT, InT>, smem);
    flash_decode_kernel<OutT, InT><<<(unsigned)NH, FLASH_THREADS, smem, ctx->stream>>>(out, q, k, v, n, NH, NKV, HD,
                                                                                       flash_scale(HD));
    CUDA_CHECK_LAUNCH();
}

void cuda_flash_decode(CudaCtx *ctx, float *out, const float *q, const float *k, const float *v, int n, int NH, int NKV,
                       int HD) {
    decode(ctx, out, q, k, v, n, NH, NKV, HD);
}

void cuda_flash_decode_bf16(CudaCtx *ctx, cuda_bf16 *out, const cuda_bf16 *q, const cuda_bf16 *k, const cuda_bf16 *v,
                            int n, int NH, int NKV, int HD) {
    decode(ctx, (__nv_bfloat16 *)out, (const __nv_bfloat16 *)q, (const __nv_bfloat16 *)k, (const __nv_bfloat16 *)v, n,
           NH, NKV, HD);
}

// D = rowsum(dout * out) (the fp32 kernels'; the tensor-core dq kernel takes it itself)
// (dout and out fp32, or both bf16 in bf16 mode).
template <typename E>
static void backward_rowsum(CudaCtx *ctx, float *dsum, const E *dout, const E *out, int B, int T, int NH, int HD) {
    const size_t rows = (size_t)B * NH * T;
    flash_rowsum_kernel<E><<<grid_for(rows, 256), 256, 0, ctx->stream>>>(dsum, dout, out, B, T, NH, HD);
    CUDA_CHECK_LAUNCH();
}

// The arena for grouped queries' shares of dk and dv (NULL without grouped queries).
static float *backward_shares(CudaCtx *ctx, int B, int T, int NH, int NKV, int HD) {
    return NH > NKV ? (float *)ctx_arena(ctx, cuda_flash_backward_arena_bytes((size_t)B * T, NH, NKV, HD)) : NULL;
}

// The second share tensor, after the first in the arena.
static float *dv_share(float *dk_part, size_t tokens, int NH, int HD) {
    return dk_part ? dk_part + cuda_arena_round(tokens * NH * HD * sizeof(float)) / sizeof(float) : NULL;
}

// Grouped queries: dk and dv written from the group's shares, summed in head order (dk rotated
// back by RoPE into the packed gradient instead, where rk.dst).
static void group_sum(CudaCtx *ctx, float *dk, FlashDv dv, float *dk_part, int B, int T, int NH, int NKV, int HD,
                      float scale, FlashRopeOut rk) {
    if (!dk_part) return;
    const size_t tokens = (size_t)B * T;
    flash_group_sum_kernel<<<grid_for(tokens, 1), 256, 0, ctx->stream>>>(   // a block a token row at a time
        dk, dv, dk_part, dv_share(dk_part, tokens, NH, HD), tokens, T, NH, NKV, HD, scale, rk);
    CUDA_CHECK_LAUNCH();
}

// The fp32 kernels' backward: dout, q, k, v and out all fp32, or all bf16 (bf16 mode at a head
// dim the tensor cores do not take), widened as they load.
template <typename E>
static void backward_fp32(CudaCtx *ctx, float *dq, float *dk, FlashDv dv, float *dsum, const E *dout, const E *q,
                          const E *k, const E *v, const E *out, const float *lse, int B, int T, int NH, int NKV,
                          int HD) {
    if (B <= 0 || T <= 0 || NH <= 0) return;
    backward_rowsum(ctx, dsum, dout, out, B, T, NH, HD);
    float *dk_part = backward_shares(ctx, B, T, NH, NKV, HD);
    float *dv_part = dv_share(dk_part, (size_t)B * T, NH, HD);
    const float scale = flash_scale(HD);
    const size_t dq_bytes = dq_smem(HD) * sizeof(float), dkdv_bytes = dkdv_smem(HD) * sizeof(float);
    allow_smem(ctx, flash_dq_kernel<E>, dq_bytes);
    allow_smem(ctx, flash_dkdv_kernel<E>, dkdv_bytes);
    const dim3 qgrid((unsigned)flash_tiles(T, FLASH_BQ), (unsigned)(B * NH));
    flash_dq_kernel<<<qgrid, FLASH_THREADS, dq_bytes, ctx->stream>>>(dq, dout, q, k, v, lse, dsum, T, NH, NKV,
                                                                     HD, scale);
    CUDA_CHECK_LAUNCH();
    const dim3 kgrid((unsigned)flash_tiles(T, FLASH_BK), (unsigned)(B * NH));
    flash_dkdv_kernel<<<kgrid, FLASH_THREADS, dkdv_bytes, ctx->stream>>>(dk, dv, dk_part, dv_part, dout, q, k, v,
                                                                         lse, dsum, T, NH, NKV, HD, scale);
    CUDA_CHECK_LAUNCH();
    group_sum(ctx, dk, dv, dk_part, B, T, NH, NKV, HD, scale, FlashRopeOut{NULL, NULL, NULL, 0});
}

void cuda_flash_attention_backward(CudaCtx *ctx, float *dq, float *dk, float *dv, float *dsum,
                                   const float *dout, const float *q, const float *k,
                                   const float *v, const float *out, const float *lse, int B, int T,
                                   int NH, int NKV, int HD) {
    backward_fp32(ctx, dq, dk, FlashDv{dv, NULL, (size_t)NKV * HD}, dsum, dout, q, k, v, out, lse, B, T, NH, NKV, HD);
}

// ---- bf16 mode: the tensor-core kernels (flash_mma_kernels.cuh) -------------------------------
void cuda_flash_attention_forward_bf16(CudaCtx *ctx, cuda_bf16 *out_bits, float *lse, const cuda_bf16 *q_bits,
                                       const cuda_bf16 *k_bits, const cuda_bf16 *v_bits, int B, int T, int NH, int NKV,
                                       int HD) {
    __nv_bfloat16 *out = (__nv_bfloat16 *)out_bits;
    const __nv_bfloat16 *q = (const __nv_bfloat16 *)q_bits, *k = (const __nv_bfloat16 *)k_bits;
    const __nv_bfloat16 *v = (const __nv_bfloat16 *)v_bits;
    if (!flash_mma_takes(HD)) {
        forward_fp32(ctx, out, lse, q, k, v, B, T, NH, NKV, HD);
        return;
    }
    if (B <= 0 || T <= 0 || NH <= 0) return;
    const dim3 grid((unsigned)flash_tiles(T, FLASH_MMA_ROWS), (unsigned)(B * NH));
    mma_dispatch(HD, [&](auto hd) {
        constexpr int D = decltype(hd)::value;
        const size_t smem = mma_forward_smem(D) * sizeof(float);
        allow_smem(ctx, flash_mma_forward_kernel<D>, smem);
        flash_mma_forward_kernel<D><<<grid, MMA_THREADS, smem, ctx->stream>>>(out, lse, q, k, v, T, NH, NKV,
                                                                               mma_scales(flash_scale(D)));
        CUDA_CHECK_LAUNCH();
    });
}

// The bf16 backward; rq.dst / rk.dst: the tensor-core kernels write dq / dk (the latter
// without grouped queries only) through RoPE's backward into the packed gradient instead.
static void backward_bf16(CudaCtx *ctx, float *dq, float *dk, cuda_bf16 *dv_bits, int dv_ld, float *dsum,
                          const cuda_bf16 *dout_bits, const cuda_bf16 *q_bits, const cuda_bf16 *k_bits,
                          const cuda_bf16 *v_bits, const cuda_bf16 *out_bits, const float *lse, int B, int T, int NH,
                          int NKV, int HD, FlashRopeOut rq, FlashRopeOut rk) {
    const __nv_bfloat16 *out = (const __nv_bfloat16 *)out_bits, *dout = (const __nv_bfloat16 *)dout_bits;
    const __nv_bfloat16 *q = (const __nv_bfloat16 *)q_bits, *k = (const __nv_bfloat16 *)k_bits;
    const __nv_bfloat16 *v = (const __nv_bfloat16 *)v_bits;
    const FlashDv dv = {NULL, (__nv_bfloat16 *)dv_bits, (size_t)dv_ld};
    if (!flash_mma_takes(HD)) {
        backward_fp32(ctx, dq, dk, dv, dsum, dout, q, k, v, out, lse, B, T, NH, NKV, HD);
        return;
    }
    if (B <= 0 || T <= 0 || NH <= 0) return;
    float *dk_part = backward_shares(ctx, B, T, NH, NKV, HD);   // D: the dq kernel's
    float *dv_part = dv_share(dk_part, (size_t)B * T, NH, HD);
    const dim3 grid((unsigned)flash_tiles(T, FLASH_MMA_ROWS), (unsigned)(B * NH));
    const float scale = flash_scale(HD);
    mma_dispatch(HD, [&](auto hd) {
        constexpr int D = decltype(hd)::value;
        const size_t smem = mma_backward_smem(D) * sizeof(float);
        allow_smem(ctx, flash_mma_dq_kernel<D>, smem);
        allow_smem(ctx, flash_mma_dkdv_kernel<D>, smem);
        flash_mma_dq_kernel<D><<<grid, MMA_THREADS, smem, ctx->stream>>>(dq, dsum, dout, q, k, v, out, lse, T, NH,
                                                                          NKV, mma_scales(scale), rq);
        CUDA_CHECK_LAUNCH();
        flash_mma_dkdv_kernel<D><<<grid, MMA_THREADS, smem, ctx->stream>>>(dk, dv, dk_part, dv_part, dout, q, k, v,
                                                                            lse, dsum, T, NH, NKV, mma_scales(scale),
                                                                            rk);
        CUDA_CHECK_LAUNCH();
    });
    group_sum(ctx, dk, dv, dk_part, B, T, NH, NKV, HD, scale, rk);
}

void cuda_flash_attention_backward_bf16(CudaCtx *ctx, float *dq, float *dk, cuda_bf16 *dv, int dv_ld, float *dsum,
                                        const cuda_bf16 *dout, const cuda_bf16 *q, const cuda_bf16 *k, const cuda_bf16 *v,
                                        const cuda_bf16 *out, const float *lse, int B, int T, int NH, int NKV, int HD) {
    const FlashRopeOut none = {NULL, NULL, NULL, 0};
    backward_bf16(ctx, dq, dk, dv, dv_ld, dsum, dout, q, k, v, out, lse, B, T, NH, NKV, HD, none, none);
}

// RoPE's backward fused where the tensor-core kernels run (flash_rope_fused: dq and dk in their
// registers, or dk in the group sum with grouped queries); elsewhere as the unfused calls make it.
void cuda_flash_attention_rope_backward_bf16(CudaCtx *ctx, cuda_bf16 *dqkv, int ld, float *dq, float *dk, float *dsum,
                                             const cuda_bf16 *dout, const cuda_bf16 *q, const cuda_bf16 *k,
                                             const cuda_bf16 *v, const cuda_bf16 *out, const float *lse,
                                             const float *cos_tab, const float *sin_tab, int B, int T, int NH, int NKV,
                                             int HD) {
    const size_t Q = (size_t)NH * HD, KV = (size_t)NKV * HD;
    const bool fused = flash_rope_fused(HD);
    __nv_bfloat16 *packed = (__nv_bfloat16 *)dqkv;
    const FlashRopeOut rq = {cos_tab, sin_tab, fused ? packed : NULL, (size_t)ld};
    const FlashRopeOut rk = {cos_tab, sin_tab, fused ? packed + Q : NULL, (size_t)ld};
    backward_bf16(ctx, dq, dk, dqkv + Q + KV, ld, dsum, dout, q, k, v, out, lse, B, T, NH, NKV, HD, rq, rk);
    if (fused) return;
    cuda_rope_backward_bf16(ctx, dqkv, ld, dq, cos_tab, sin_tab, B, T, NH, HD);
    cuda_rope_backward_bf16(ctx, dqkv + Q, ld, dk, cos_tab, sin_tab, B, T, NKV, HD);
}
