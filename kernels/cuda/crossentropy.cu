// Fused softmax + cross-entropy over the LM head's logits(N, V), as
// kernels/cpu/crossentropy.c: per row, loss = m + log(sum exp(x - m)) - x[target] in double;
// dlogits = scale * (softmax - onehot), zero on pad rows (target < 0). The row losses go to
// the arena and one block adds scale * (their sum, in a fixed order) to the device loss.
#include "kernels/cuda/common.cuh"

// One block per row. dlogits is D: fp32, which may alias logits (every read of the row's max,
// sum and x[target] completes before the block barrier inside block_sum, and only then is the
// row written; each later element is read, then written, by one thread), or bf16, each value
// rounded from the fp32 one (a separate buffer: a bf16 store would overlap fp32 values still
// unread).
template <typename D>
__global__ void crossentropy_rows_kernel(D *dlogits, double *row_loss, const float *logits,
                                         const int32_t *__restrict__ targets, int V,
                                         float scale) {
    const size_t n = blockIdx.x;
    const float *x = logits + n * V;
    D *d = dlogits ? dlogits + n * V : nullptr;
    const int target = targets[n];
    if (target < 0) {                                   // pad: no loss, zero gradient
        if (d)
            for (int j = threadIdx.x; j < V; j += blockDim.x) d[j] = from_f32<D>(0.0f);
        if (threadIdx.x == 0) row_loss[n] = 0.0;
        return;                                         // the whole block takes this branch
    }
    const float xt = x[target];
    float m = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, x[j]);
    m = block_max(m);
    double sum = 0.0;
    for (int j = threadIdx.x; j < V; j += blockDim.x) sum += (double)expf(x[j] - m);
    sum = block_sum(sum);
    if (threadIdx.x == 0) row_loss[n] = (double)m + log(sum) - (double)xt;
    if (d) {
        const float k = (float)((double)scale / sum);
        for (int j = threadIdx.x; j < V; j += blockDim.x) {
            float g = expf(x[j] - m) * k;
            d[j] = from_f32<D>(j == target ? g - scale : g);
        }
    }
}

// *loss += scale * sum of row_loss(N): one block, strided partials then a fixed tree.
__global__ void crossentropy_sum_kernel(double *loss, const double *__restrict__ row_loss,
                                        int N, float scale) {
    double s = 0.0;
    for (int i = threadIdx.x; i < N; i += blockDim.x) s += row_loss[i];
    s = block_sum(s);
    if (threadIdx.x == 0) *loss += (double)scale * s;
}

template <typename D>
static void rows(CudaCtx *ctx, D *dlogits, double *row_loss, const float *logits, const int32_t *targets, int N, int V,
                 float scale) {
    if (N <= 0) return;
    // Large vocabularies (32k..128k) want a full block per row; small ones waste it.
    const int block = V >= 8192 ? 1024 : 256;
    crossentropy_rows_kernel<D><<<(unsigned)N, block, 0, ctx->stream>>>(dlogits, row_loss, logits, targets, V, scale);
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
