// kernels/cuda/classifier.cu: the LM head, its loss and the loss's gradients fused, row chunk
// by row chunk, so no (N, V) tensor exists (llm.c's fused classifier, without its bf16 logits).
//
// For rows r0, r0 + R, ... of x(N, C) (R = cuda_classifier_chunk_rows(N, V)):
//   logits(R, V) = x[r0 : r0+R] @ W(V, C)^T                   (fp32, in the context's arena)
//   row_loss[r0 + i] = logsumexp(logits[i]) - logits[i][target]     (crossentropy_rows)
//   then, when a gradient is asked for, in place (fp32) or into the arena (bf16, below):
//   dlogits = scale * (softmax - onehot)                      (zero on pad rows)
// and the gradient GEMMs over a group of those rows, g0 .. g0+G (G = cuda_classifier_group_rows:
// one chunk in fp32, CUDA_CLASSIFIER_GROUP_CHUNKS chunks in bf16):
//   dx[g0 : g0+G]  = dlogits @ W                              (dx != NULL; written, beta 0)
//   dW            += dlogits^T @ x[g0 : g0+G]                 (dW != NULL)
// and at the end *loss += scale * sum of row_loss(N) in one fixed tree (loss != NULL), exactly
// as cuda_crossentropy_forward_backward adds it. In bf16 mode the GEMM operands are bf16: x
// and W as given, and dlogits, which the loss kernel writes in bf16 itself (each value the
// fp32 one rounded), so no conversion pass reads the chunk's fp32 dlogits back; results stay
// fp32.
// Why bf16 groups chunks for its gradient GEMMs: dW (V x C fp32, 98 MB at 125m's 32000 x 768)
// is read and written whole by every dW GEMM, while its work is 2 V C flops a row. At a
// chunk's 524 rows that is 196 MB of memory traffic (about 59 us at 3.35 TB/s) against 26
// GFLOP (about 43 us at 600 TFLOP/s): the GEMM would wait on its own output. Over 4 chunks'
// rows the work is 4 times larger and the traffic the same. fp32 mode keeps each chunk's
// dlogits in place in its logits, and a group would need 4 chunks' fp32 logits.
// The chunk's logits and the group's bf16 dlogits are the only large scratch: R x V floats
// (R chosen so they fit CUDA_CLASSIFIER_CHUNK_BYTES) and G x V bf16s;
// cuda_classifier_arena_bytes says the whole arena a call takes (both in kernels_cuda.h).
#include "kernels/cuda/common.cuh"

// The chunk and the arena are kernels_cuda.h's (CUDA_CLASSIFIER_CHUNK_BYTES), in plain C there
// so that an estimate made in a build without the toolkit is this number.
extern "C" int cuda_classifier_chunk_rows(int N, int V) { return cuda_classifier_gpu_chunk_rows(N, V); }

static void classifier(CudaCtx *ctx, double *loss, float *dx, float *dW, const void *x,
                       const void *W, const int32_t *targets, int N, int C, int V, float scale,
                       cudaDataType_t t) {
    if (N <= 0) return;
    const bool bf16 = t == CUDA_R_16BF, grad = dx || dW;
    const int R = cuda_classifier_chunk_rows(N, V), G = cuda_classifier_group_rows(N, V, bf16);
    const size_t esz = bf16 ? sizeof(cuda_bf16) : sizeof(float);
    char *arena = (char *)ctx_arena(ctx, cuda_classifier_arena_bytes(N, V, bf16));
    double *row_loss = (double *)arena;
    float *logits = (float *)(arena + cuda_arena_round((size_t)N * sizeof(double)));
    __nv_bfloat16 *dl16 = (__nv_bfloat16 *)((char *)logits + cuda_arena_round((size_t)R * V * sizeof(float)));
    for (int g0 = 0; g0 < N; g0 += G) {
        const int grows = N - g0 < G ? N - g0 : G;
        for (int r0 = g0; r0 < g0 + grows; r0 += R) {   // the group's chunks: logits, row losses, dlogits
            const int rows = g0 + grows - r0 < R ? g0 + grows - r0 : R;
            gemm_rm(ctx, false, true, rows, V, C, 1.0f, (const char *)x + (size_t)r0 * C * esz, C, W, C, t, 0.0f,
                    logits, V);
            if (bf16)
                crossentropy_rows(ctx, grad ? dl16 + (size_t)(r0 - g0) * V : (__nv_bfloat16 *)NULL, row_loss + r0,
                                  logits, targets + r0, rows, V, scale);
            else
                crossentropy_rows(ctx, grad ? logits : (float *)NULL, row_loss + r0, logits, targets + r0, rows, V,
                                  scale);
        }
        if (!grad) continue;
        const void *dl = bf16 ? (const void *)dl16 : (const void *)logits;
        const void *xg = (const char *)x + (size_t)g0 * C * esz;
        if (dx) gemm_rm(ctx, false, false, grows, C, V, 1.0f, dl, V, W, C, t, 0.0f, dx + (size_t)g0 * C, C);
        if (dW) gemm_rm(ctx, true, false, V, C, grows, 1.0f, dl, V, xg, C, t, 1.0f, dW, C);
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
