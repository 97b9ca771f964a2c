// Fused softmax + cross-entropy over the LM head's logits(N, V), as
// kernels/cpu/crossentropy.c: per row, loss = m + log(sum exp(x - m)) - x[target] in double;
// dlogits = scale * (softmax - onehot), zero on pad rows (target < 0). The row losses go to
// the arena and one block adds scale * (their sum, in a fixed order) to the device loss.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/crossentropy_kernels.cuh"

// A block a row; the register form where every row's float4s fit its threads 8 each (V <= 32771
// at 1024), else the walk, which reads the row twice (crossentropy_kernels.cuh: the same bits).
template <typename D>
static void rows(CudaCtx *ctx, D *dlogits, double *row_loss, const float *logits, const int32_t *targets, int N, int V,
                 float scale) {
    if (N <= 0) return;
    // Large vocabularies (32k..128k) want a full block per row; small ones waste it.
    const int block = V >= 8192 ? 1024 : 256;
    const dim3 grid((unsigned)N);
    if (crossentropy_held_fits(V, block, CROSSENTROPY_HELD_GROUPS))
        crossentropy_rows_held_kernel<D, CROSSENTROPY_HELD_GROUPS>
            <<<grid, block, 0, ctx->stream>>>(dlogits, row_loss, logits, targets, V, scale);
    else crossentropy_rows_kernel<D><<<grid, block, 0, ctx->stream>>>(dlogits, row_loss, logits, targets, V, scale);
    CUDA_CHECK_LAUNCH();
}

void crossentropy_rows(CudaCtx *ctx, float *dlogits, double *row_loss, const float *logits,
                       const int32_t *targets, int N, int V, float scale) {
    rows(ctx, dlogits, row_loss, logits, targets, N, V, scale);
}

void crossentropy_rows(CudaCtx *ctx, __nv_bfloat16 *dlogits, double *row_loss, const float *logits,
                       const int32_t *targets, int N, int V, float scale) {
    rows(ctx, dlogits, row_loss, logits, targets, N, V, scale);
}

void crossentropy_sum(CudaCtx *ctx, double *loss, const double *row_loss, int N, float scale) {
    if (N <= 0) return;
    crossentropy_sum_kernel<<<1, 1024, 0, ctx->stream>>>(loss, row_loss, N, scale);
    CUDA_CHECK_LAUNCH();
}

void cuda_crossentropy_forward_backward(CudaCtx *ctx, float *dlogits, double *loss,
                                        const float *logits, const int32_t *targets, int N,
                                        int V, float scale) {
    if (N <= 0) return;
    double *row_loss = (double *)ctx_arena(ctx, (size_t)N * sizeof(double));
    crossentropy_rows(ctx, dlogits, row_loss, logits, targets, N, V, scale);
    if (loss) crossentropy_sum(ctx, loss, row_loss, N, scale);
}
