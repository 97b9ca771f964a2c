// SwiGLU gate of the Llama MLP: out(N, FF) = silu(gate) * up, elementwise over N*FF.
// fp32 mode reads fp32 gate and up; bf16 mode reads them as the batched gate|up GEMM stored
// them, bf16 (cuda_linear_forward_shared_to_bf16), and computes in fp32 from the widened values.
#include "kernels/cuda/common.cuh"

// In: the type gate and up are stored in. Out: fp32, or bf16 rounded from the fp32 value (the
// down projection's operand).
template <typename In, typename Out>
__global__ void swiglu_forward_kernel(Out *__restrict__ out, const In *__restrict__ gate, const In *__restrict__ up,
                                      size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = to_f32(gate[i]);
        // silu(g) = g / (1 + exp(-g)), the form torch (and kernels/cpu) uses.
        out[i] = from_f32<Out>(g / (1.0f + expf(-g)) * to_f32(up[i]));
    }
}

__global__ void swiglu_backward_kernel(float *__restrict__ dgate, float *__restrict__ dup,
                                       const float *__restrict__ dout,
                                       const float *__restrict__ gate,
                                       const float *__restrict__ up, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = gate[i], d = dout[i];
        // silu'(g) = s (1 + g (1 - s)), s = sigmoid(g)
        float s = 1.0f / (1.0f + expf(-g));
        dgate[i] = d * up[i] * (s * (1.0f + g * (1.0f - s)));   // written, as the bf16 form
        dup[i] = d * (g * s);
    }
}

// bf16 mode: dgate and dup written (not added), rounded to bf16, side by side into the packed
// (N, ld) gate|up gradient: columns [0, FF) and [FF, 2 FF) of each row; dout, gate and up bf16.
__global__ void swiglu_backward_packed_kernel(__nv_bfloat16 *__restrict__ dgate_up, int ld,
                                              const __nv_bfloat16 *__restrict__ dout,
                                              const __nv_bfloat16 *__restrict__ gate,
                                              const __nv_bfloat16 *__restrict__ up, int FF, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = to_f32(gate[i]), u = to_f32(up[i]), d = to_f32(dout[i]);
        float s = 1.0f / (1.0f + expf(-g));
        __nv_bfloat16 *row = dgate_up + (i / FF) * (size_t)ld;
        row[i % FF] = from_f32<__nv_bfloat16>(d * u * (s * (1.0f + g * (1.0f - s))));
        row[FF + i % FF] = from_f32<__nv_bfloat16>(d * (g * s));
    }
}

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

void cuda_swiglu_forward_bf16(CudaCtx *ctx, cuda_bf16 *out, const cuda_bf16 *gate, const cuda_bf16 *up, int N,
                              int FF) {
    swiglu_forward(ctx, (__nv_bfloat16 *)out, (const __nv_bfloat16 *)gate, (const __nv_bfloat16 *)up, N, FF);
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
    size_t n = (size_t)N * FF;
    if (n == 0) return;
    swiglu_backward_packed_kernel<<<grid_for(n, 256), 256, 0, ctx->stream>>>(
        (__nv_bfloat16 *)dgate_up, ld, (const __nv_bfloat16 *)dout, (const __nv_bfloat16 *)gate,
        (const __nv_bfloat16 *)up, FF, n);
    CUDA_CHECK_LAUNCH();
}
