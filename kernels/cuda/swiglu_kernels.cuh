// kernels/cuda/swiglu_kernels.cuh: the kernels of swiglu.cu (which launches them), in the
// subset of CUDA C++ that tests/gpu_emu/simt.h also gives a host compiler, so
// tests/gpu_emu/test_kernels_simt.cc runs this same source on CPU threads. Include after
// kernels/cuda/common.cuh on the GPU, after simt.h and device_math.cuh on the CPU.
#ifndef PPTRAIN_KERNELS_CUDA_SWIGLU_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_SWIGLU_KERNELS_CUH

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
// Blocks take rows in turn and a block's threads the row's columns, so no thread divides (one
// thread an element of the whole (N, FF) divided a 64-bit index by FF for its row, at a cost
// above the element's bytes).
__global__ void swiglu_backward_packed_kernel(__nv_bfloat16 *__restrict__ dgate_up, int ld,
                                              const __nv_bfloat16 *__restrict__ dout,
                                              const __nv_bfloat16 *__restrict__ gate,
                                              const __nv_bfloat16 *__restrict__ up, int N, int FF) {
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const size_t in = (size_t)n * FF;
        __nv_bfloat16 *row = dgate_up + (size_t)n * ld;
        for (int j = threadIdx.x; j < FF; j += blockDim.x) {
            float g = to_f32(gate[in + j]), u = to_f32(up[in + j]), d = to_f32(dout[in + j]);
            float s = 1.0f / (1.0f + expf(-g));
            row[j] = from_f32<__nv_bfloat16>(d * u * (s * (1.0f + g * (1.0f - s))));
            row[FF + j] = from_f32<__nv_bfloat16>(d * (g * s));
        }
    }
}

#endif
