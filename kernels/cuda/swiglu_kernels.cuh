// kernels/cuda/swiglu_kernels.cuh: the kernels of swiglu.cu (which launches them), in the
// subset of CUDA C++ that tests/gpu_emu/simt.h also gives a host compiler, so
// tests/gpu_emu/test_kernels_simt.cc runs this same source on CPU threads. Include after
// kernels/cuda/common.cuh on the GPU, after simt.h and device_math.cuh on the CPU.
#ifndef PPTRAIN_KERNELS_CUDA_SWIGLU_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_SWIGLU_KERNELS_CUH

// silu(g) u, silu(g) = g / (1 + exp(-g)): the form torch (and kernels/cpu) uses.
__device__ __forceinline__ float swiglu_value(float g, float u) { return g / (1.0f + expf(-g)) * u; }
// Its gradients for dout d: dgate = d u silu'(g), silu'(g) = s (1 + g (1 - s)), s = sigmoid(g);
// dup = d silu(g), silu(g) taken as g s.
__device__ __forceinline__ float swiglu_sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }
__device__ __forceinline__ float swiglu_dgate(float g, float u, float d) {
    const float s = swiglu_sigmoid(g);
    return d * u * (s * (1.0f + g * (1.0f - s)));
}
__device__ __forceinline__ float swiglu_dup(float g, float d) { return d * (g * swiglu_sigmoid(g)); }

// In: the type gate and up are stored in. Out: fp32, or bf16 rounded from the fp32 value (the
// down projection's operand).
template <typename In, typename Out>
__global__ void swiglu_forward_kernel(Out *__restrict__ out, const In *__restrict__ gate, const In *__restrict__ up,
                                      size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = from_f32<Out>(swiglu_value(to_f32(gate[i]), to_f32(up[i])));
}

// bf16 mode's form, 8 elements a 16-byte load (out, gate and up 16-byte aligned): the same
// values as swiglu_forward_kernel's, element by element; the last n % 8 one at a time.
__global__ void swiglu_forward_bf16x8_kernel(__nv_bfloat16 *__restrict__ out, const __nv_bfloat16 *__restrict__ gate,
                                             const __nv_bfloat16 *__restrict__ up, size_t n) {
    const size_t first = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = first; i < n / 8; i += stride) {
        const Bf16x8 g = reinterpret_cast<const Bf16x8 *>(gate)[i], u = reinterpret_cast<const Bf16x8 *>(up)[i];
        Bf16x8 o;
        for (int e = 0; e < 8; e++) o.v[e] = from_f32<__nv_bfloat16>(swiglu_value(to_f32(g.v[e]), to_f32(u.v[e])));
        reinterpret_cast<Bf16x8 *>(out)[i] = o;
    }
    for (size_t i = n / 8 * 8 + first; i < n; i += stride)
        out[i] = from_f32<__nv_bfloat16>(swiglu_value(to_f32(gate[i]), to_f32(up[i])));
}

__global__ void swiglu_backward_kernel(float *__restrict__ dgate, float *__restrict__ dup,
                                       const float *__restrict__ dout,
                                       const float *__restrict__ gate,
                                       const float *__restrict__ up, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float g = gate[i], d = dout[i];
        dgate[i] = swiglu_dgate(g, up[i], d);   // written, as the bf16 form
        dup[i] = swiglu_dup(g, d);
    }
}

// bf16 mode: dgate and dup written (not added), rounded to bf16, side by side into the packed
// (N, ld) gate|up gradient: columns [0, FF) and [FF, 2 FF) of each row; dout, gate and up bf16.
// Blocks take rows in turn and a block's threads the row's columns, so no thread divides (one
// thread an element of the whole (N, FF) divided a 64-bit index by FF for its row, at a cost
// above the element's bytes). With vectors (every row of all four 16-byte aligned: FF and ld
// multiples of 8, bf16_vectors) a thread takes 8 columns a 16-byte load, the same values.
__global__ void swiglu_backward_packed_kernel(__nv_bfloat16 *__restrict__ dgate_up, int ld,
                                              const __nv_bfloat16 *__restrict__ dout,
                                              const __nv_bfloat16 *__restrict__ gate,
                                              const __nv_bfloat16 *__restrict__ up, int N, int FF, bool vectors) {
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const size_t in = (size_t)n * FF;
        __nv_bfloat16 *row = dgate_up + (size_t)n * ld;
        if (vectors) {
            for (int j = threadIdx.x; j < FF / 8; j += blockDim.x) {
                const Bf16x8 g = reinterpret_cast<const Bf16x8 *>(gate + in)[j],
                             u = reinterpret_cast<const Bf16x8 *>(up + in)[j],
                             d = reinterpret_cast<const Bf16x8 *>(dout + in)[j];
                Bf16x8 dg, du;
                for (int e = 0; e < 8; e++) {
                    const float gf = to_f32(g.v[e]), df = to_f32(d.v[e]);
                    dg.v[e] = from_f32<__nv_bfloat16>(swiglu_dgate(gf, to_f32(u.v[e]), df));
                    du.v[e] = from_f32<__nv_bfloat16>(swiglu_dup(gf, df));
                }
                reinterpret_cast<Bf16x8 *>(row)[j] = dg;
                reinterpret_cast<Bf16x8 *>(row + FF)[j] = du;
            }
            continue;
        }
        for (int j = threadIdx.x; j < FF; j += blockDim.x) {
            const float g = to_f32(gate[in + j]), d = to_f32(dout[in + j]);
            row[j] = from_f32<__nv_bfloat16>(swiglu_dgate(g, to_f32(up[in + j]), d));
            row[FF + j] = from_f32<__nv_bfloat16>(swiglu_dup(g, d));
        }
    }
}

#endif
