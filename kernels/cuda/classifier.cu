// kernels/cuda/classifier.cu: the LM head, its loss and the loss's gradients fused, row chunk
// by row chunk, so no (N, V) tensor exists (llm.c's fused classifier, without its bf16 logits).
//
// For rows r0, r0 + R, ... of x(N, C) (R = cuda_classifier_chunk_rows(N, V)):
//   logits(R, V) = x[r0 : r0+R] @ W(V, C)^T                   (fp32, in the context's arena)
//   row_loss[r0 + i] = logsumexp(logits[i]) - logits[i][target]     (crossentropy_rows)
//   then, when a gradient is asked for, in place (fp32) or into the arena (bf16, below):
//   dlogits = scale * (softmax - onehot)                      (zero on pad rows)
//   dx[r0 : r0+R]  = dlogits @ W                              (dx != NULL; written, beta 0)
//   dW            += dlogits^T @ x[r0 : r0+R]                 (dW != NULL)
// and at the end *loss += scale * sum of row_loss(N) in one fixed tree (loss != NULL), exactly
// as cuda_crossentropy_forward_backward adds it. In bf16 mode the GEMM operands are bf16: x
// and W as given, and dlogits, which the loss kernel writes in bf16 itself (each value the
// fp32 one rounded), so no conversion pass reads the chunk's fp32 dlogits back; results stay
// fp32.
// The chunk's logits are the only large scratch: R x V floats, R chosen so they fit
// CUDA_CLASSIFIER_CHUNK_BYTES; cuda_classifier_arena_bytes says the whole arena a call takes
// (both in kernels_cuda.h).
#include "kernels/cuda/common.cuh"

// The chunk and the arena are kernels_cuda.h's (CUDA_CLASSIFIER_CHUNK_BYTES), in plain C there
// so that an estimate made in a build without the toolkit is this number.
extern "C" int cuda_classifier_chunk_rows(int N, int V) { return cuda_classifier_gpu_chunk_rows(N, V); }

static void classifier(CudaCtx *ctx, double *loss, float *dx, float *dW, const void *x,
                       const void *W, const int32_t *targets, int N, int C, int V, float scale,
                       cudaDataType_t t) {
    if (N <= 0) return;
    const bool bf16 = t == CUDA_R_16BF, grad = dx || dW;
    const int R = cuda_classifier_chunk_rows(N, V);
    const size_t esz = bf16 ? sizeof(cuda_bf16) : sizeof(float);
    char *arena = (char *)ctx_arena(ctx, cuda_classifier_arena_bytes(N, V, bf16));
    double *row_loss = (double *)arena;
    float *logits = (float *)(arena + cuda_arena_round((size_t)N * sizeof(double)));
    __nv_bfloat16 *dl16 = (__nv_bfloat16 *)((char *)logits + cuda_arena_round((size_t)R * V * sizeof(float)));
    for (int r0 = 0; r0 < N; r0 += R) {
        const int rows = N - r0 < R ? N - r0 : R;
        const void *xr = (const char *)x + (size_t)r0 * C * esz;
        gemm_rm(ctx, false, true, rows, V, C, 1.0f, xr, C, W, C, t, 0.0f, logits, V);
        const int32_t *tr = targets + r0;
        double *rl = row_loss + r0;
        if (bf16) crossentropy_rows(ctx, grad ? dl16 : (__nv_bfloat16 *)NULL, rl, logits, tr, rows, V, scale);
        else crossentropy_rows(ctx, grad ? logits : (float *)NULL, rl, logits, tr, rows, V, scale);
        if (!grad) continue;
        const void *dl = bf16 ? (const void *)dl16 : (const void *)logits;
        if (dx) gemm_rm(ctx, false, false, rows, C, V, 1.0f, dl, V, W, C, t, 0.0f, dx + (size_t)r0 * C, C);
        if (dW) gemm_rm(ctx, true, false, V, C, rows, 1.0f, dl, V, xr, C, t, 1.0f, dW, C);
    }
    if (loss) crossentropy_sum(ctx, loss, row_loss, N, scale);
}

extern "C" void cuda_classifier(CudaCtx *ctx, double *loss, float *dx, float *dW, const float *x,
                                const float *W, const int32_t *targets, int N, int C, int V,
                                float scale) {
    classifier(ctx, loss, dx, dW, x, W, targets, N, C, V, scale, CUDA_R_32F);
}

extern "C" void cuda_classifier_bf16(CudaCtx *ctx, double *loss, float *dx, float *dW,
                                     const cuda_bf16 *x, const cuda_bf16 *W,
                                     const int32_t *targets, int N, int C, int V, float scale) {
    classifier(ctx, loss, dx, dW, x, W, targets, N, C, V, scale, CUDA_R_16BF);
}
