// SwiGLU gate of the Llama MLP: out(N, FF) = silu(gate) * up, elementwise over N*FF.
// fp32 mode reads fp32 gate and up; bf16 mode reads them as the batched gate|up GEMM stored
// them, bf16 (cuda_linear_forward_shared_to_bf16), and computes in fp32 from the widened values.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/swiglu_kernels.cuh"

template <typename In, typename Out>
static void swiglu_forward(CudaCtx *ctx, Out *out, const In *gate, const In *up, int N, int FF) {
    size_t n = (size_t)N * FF;
    if (n == 0) return;
    swiglu_forward_kernel<In, Out><<<grid_for(n, 256), 256, 0, ctx->stream>>>(out, gate, up, n);
    CUDA_CHECK_LAUNCH();
}

void cuda_swiglu_forward(CudaCtx *ctx, float *out, const float *gate, const float *up, int N,
                         int FF) {
    swiglu_forward(ctx, out, gate, up, N, FF);
}

// 8 elements a 16-byte load where the three are aligned (as the arena's are), else one at a time.
void cuda_swiglu_forward_bf16(CudaCtx *ctx, cuda_bf16 *out, const cuda_bf16 *gate, const cuda_bf16 *up, int N,
                              int FF) {
    const size_t n = (size_t)N * FF;
    if (n == 0) return;
    if (!aligned16({out, gate, up})) {   // a tail of n % 8 is the kernel's own
        swiglu_forward(ctx, as_bf16(out), as_bf16(gate), as_bf16(up), N, FF);
        return;
    }
    swiglu_forward_bf16x8_kernel<<<grid_for((n + 7) / 8, 256), 256, 0, ctx->stream>>>(as_bf16(out), as_bf16(gate),
                                                                                     as_bf16(up), n);
    CUDA_CHECK_LAUNCH();
}

void cuda_swiglu_backward(CudaCtx *ctx, float *dgate, float *dup, const float *dout,
                          const float *gate, const float *up, int N, int FF) {
    size_t n = (size_t)N * FF;
    if (n == 0) return;
    swiglu_backward_kernel<<<grid_for(n, 256), 256, 0, ctx->stream>>>(dgate, dup, dout, gate,
                                                                       up, n);
    CUDA_CHECK_LAUNCH();
}

void cuda_swiglu_backward_bf16(CudaCtx *ctx, cuda_bf16 *dgate_up, int ld, const cuda_bf16 *dout, const cuda_bf16 *gate,
                               const cuda_bf16 *up, int N, int FF) {
    if (N <= 0 || FF <= 0) return;   // a block a row at a time (the kernel's comment)
    swiglu_backward_packed_kernel<<<grid_for((size_t)N, 1), 256, 0, ctx->stream>>>(
        (__nv_bfloat16 *)dgate_up, ld, (const __nv_bfloat16 *)dout, (const __nv_bfloat16 *)gate,
        (const __nv_bfloat16 *)up, N, FF, bf16_vectors((size_t)FF, (size_t)ld, {dgate_up, dout, gate, up}));
    CUDA_CHECK_LAUNCH();
}
