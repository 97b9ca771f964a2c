// RMSNorm (Llama): out = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps).
// Row kernels use one warp per row (8 rows per 256-thread block); row sums are accumulated
// in double per lane as the CPU does, then combined by a fixed butterfly (deterministic).
// Each lane takes its row's columns in groups of 4 (rmsnorm_kernels.cuh gives the shapes and
// why): one vector load or store a group where C % 4 == 0 and every pointer is 16-byte aligned
// (cudaMalloc and the arena give 256; a view into packed parameters or messages may not), else
// element by element in the same order, so every form gives the same bits.
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rmsnorm_kernels.cuh"

// Whether the kernels' group loads and stores can run on rows of C from these pointers.
static bool rmsnorm_vectors(int C, std::initializer_list<const void *> ptrs) { return C % 4 == 0 && aligned16(ptrs); }

// Calls go(V, VEC) with the row kernels' template arguments as std::integral_constants: the
// groups a lane holds (rmsnorm_held_groups: 2, 4, 6, 8, or 0 to walk the row again) where VEC,
// and the element-by-element walk otherwise (held registers only pay with vector loads).
template <typename Go>
static void rmsnorm_rows(int C, bool vec, Go go) {
    using VecOn = std::true_type;
    if (!vec) return go(std::integral_constant<int, 0>(), std::false_type());
    switch (rmsnorm_held_groups(C)) {
    case 2: return go(std::integral_constant<int, 2>(), VecOn());
    case 4: return go(std::integral_constant<int, 4>(), VecOn());
    case 6: return go(std::integral_constant<int, 6>(), VecOn());
    case 8: return go(std::integral_constant<int, 8>(), VecOn());
    default: return go(std::integral_constant<int, 0>(), VecOn());
    }
}

template <typename T>
static void rmsnorm_forward(CudaCtx *ctx, T *out, float *rstd, const float *inp, const float *weight, int N, int C,
                            float eps) {
    if (N <= 0) return;
    const int blocks = (N + RMSNORM_ROWS_PER_BLOCK - 1) / RMSNORM_ROWS_PER_BLOCK;
    rmsnorm_rows(C, rmsnorm_vectors(C, {out, inp, weight}), [&](auto held, auto vec) {
        rmsnorm_forward_kernel<T, decltype(held)::value, decltype(vec)::value>
            <<<blocks, 32 * RMSNORM_ROWS_PER_BLOCK, 0, ctx->stream>>>(out, rstd, inp, weight, N, C, eps);
    });
    CUDA_CHECK_LAUNCH();
}

void cuda_rmsnorm_forward(CudaCtx *ctx, float *out, float *rstd, const float *inp,
                          const float *weight, int N, int C, float eps) {
    rmsnorm_forward(ctx, out, rstd, inp, weight, N, C, eps);
}

void cuda_rmsnorm_forward_bf16(CudaCtx *ctx, cuda_bf16 *out, float *rstd, const float *inp, const float *weight, int N,
                               int C, float eps) {
    rmsnorm_forward(ctx, (__nv_bfloat16 *)out, rstd, inp, weight, N, C, eps);
}

static_assert(RMSNORM_FUSED_ROWS == CUDA_RMSNORM_FUSED_ROWS, "kernels_cuda.h sizes the fused backward's partial sums");

// dweight(C) += the `chunks` rows of partial sums, column by column (rmsnorm_dweight_final_kernel).
static void rmsnorm_dweight_final(CudaCtx *ctx, float *dweight, const double *partial, int chunks, int C) {
    rmsnorm_dweight_final_kernel<<<(C + 31) / 32, RMSNORM_FINAL_THREADS, 0, ctx->stream>>>(dweight, partial, chunks,
                                                                                           C);
    CUDA_CHECK_LAUNCH();
}

// dweight(C) += sum over rows of dout * inp * rstd on its own: per-chunk partial sums in the
// arena, then their sum (the backward's fallback where the input gradient's kernel does not hold
// its rows).
template <typename D>
static void rmsnorm_dweight(CudaCtx *ctx, float *dweight, const D *dout, const float *inp, const float *rstd, int N,
                            int C) {
    const int chunk = cuda_rmsnorm_chunk_rows(N), chunks = (N + chunk - 1) / chunk;
    double *partial = (double *)ctx_arena(ctx, cuda_rmsnorm_arena_bytes(N, C));
    dim3 grid((unsigned)((C + RMSNORM_DWEIGHT_COLS - 1) / RMSNORM_DWEIGHT_COLS), (unsigned)chunks);
    if (rmsnorm_vectors(C, {dout, inp}))
        rmsnorm_dweight_partial_kernel<D, true>
            <<<grid, RMSNORM_DWEIGHT_THREADS, 0, ctx->stream>>>(partial, dout, inp, rstd, N, C, chunk);
    else
        rmsnorm_dweight_partial_kernel<D, false>
            <<<grid, RMSNORM_DWEIGHT_THREADS, 0, ctx->stream>>>(partial, dout, inp, rstd, N, C, chunk);
    CUDA_CHECK_LAUNCH();
    rmsnorm_dweight_final(ctx, dweight, partial, chunks, C);
}

// The backward: dinp (and dinp16) from the rows, and with dweight (may be NULL) dweight += its
// term. Where the rows are held (vectors, C <= 1024), the input gradient's kernel adds the
// weight gradient's partial sums of the rows it has in registers (WEIGHT); otherwise
// rmsnorm_dweight reads the rows again after it.
template <typename D>
static void rmsnorm_backward(CudaCtx *ctx, float *dinp, __nv_bfloat16 *dinp16, float *dweight, const float *resid,
                             const D *dout, const float *inp, const float *weight, const float *rstd, int N, int C) {
    if (N <= 0 || C <= 0) return;
    const bool vec = rmsnorm_vectors(C, {dinp, dinp16, resid, dout, inp, weight});
    if (dweight && vec && cuda_rmsnorm_fused(C)) {   // (then rmsnorm_held_groups(C) > 0: V below)
        const int chunks = (N + RMSNORM_FUSED_ROWS - 1) / RMSNORM_FUSED_ROWS;
        double *partial = (double *)ctx_arena(ctx, cuda_rmsnorm_arena_bytes(N, C));
        rmsnorm_rows(C, vec, [&](auto held, auto) {
            constexpr int V = decltype(held)::value;
            if constexpr (V > 0) {
                const auto kernel = rmsnorm_backward_input_kernel<D, V, true, true>;
                const size_t smem = rmsnorm_fused_smem_bytes(V);
                allow_smem(ctx, kernel, smem);
                kernel<<<chunks, 32 * RMSNORM_ROWS_PER_BLOCK, smem, ctx->stream>>>(dinp, dinp16, resid, dout, inp,
                                                                                   weight, rstd, partial, N, C);
            }
        });
        CUDA_CHECK_LAUNCH();
        rmsnorm_dweight_final(ctx, dweight, partial, chunks, C);
        return;
    }
    const int blocks = (N + RMSNORM_ROWS_PER_BLOCK - 1) / RMSNORM_ROWS_PER_BLOCK;
    rmsnorm_rows(C, vec, [&](auto held, auto vecs) {
        rmsnorm_backward_input_kernel<D, decltype(held)::value, decltype(vecs)::value, false>
            <<<blocks, 32 * RMSNORM_ROWS_PER_BLOCK, 0, ctx->stream>>>(dinp, dinp16, resid, dout, inp, weight, rstd,
                                                                      (double *)NULL, N, C);
    });
    CUDA_CHECK_LAUNCH();
    if (dweight) rmsnorm_dweight(ctx, dweight, dout, inp, rstd, N, C);
}

void cuda_rmsnorm_backward(CudaCtx *ctx, float *dinp, float *dweight, const float *dout, const float *inp,
                           const float *weight, const float *rstd, int N, int C) {
    if (dinp) rmsnorm_backward(ctx, dinp, (__nv_bfloat16 *)NULL, dweight, dinp, dout, inp, weight, rstd, N, C);
    else if (dweight && N > 0 && C > 0) rmsnorm_dweight(ctx, dweight, dout, inp, rstd, N, C);
}

void cuda_residual_rmsnorm_backward(CudaCtx *ctx, float *dinp, cuda_bf16 *dinp16, float *dweight, const float *resid,
                                    const float *dout, const float *inp, const float *weight, const float *rstd, int N,
                                    int C) {
    rmsnorm_backward(ctx, dinp, (__nv_bfloat16 *)dinp16, dweight, resid, dout, inp, weight, rstd, N, C);
}

void cuda_residual_rmsnorm_backward_bf16(CudaCtx *ctx, float *dinp, cuda_bf16 *dinp16, float *dweight,
                                         const float *resid, const cuda_bf16 *dout, const float *inp,
                                         const float *weight, const float *rstd, int N, int C) {
    rmsnorm_backward(ctx, dinp, (__nv_bfloat16 *)dinp16, dweight, resid, (const __nv_bfloat16 *)dout, inp, weight,
                     rstd, N, C);
}
