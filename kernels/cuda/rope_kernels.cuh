// kernels/cuda/rope_kernels.cuh: the kernels of rope.cu (which launches them), in the
// subset of CUDA C++ that tests/gpu_emu/simt.h also gives a host compiler, so
// tests/gpu_emu/test_kernels_simt.cc runs this same source on CPU threads. Include after
// kernels/cuda/common.cuh on the GPU, after simt.h and device_math.cuh on the CPU.
#ifndef PPTRAIN_KERNELS_CUDA_ROPE_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_ROPE_KERNELS_CUH
#include "kernels/cuda/rope_pair.cuh"

#define ROPE_MAX_HALF 512                          // HD <= 1024

// inv_freq by value (2 KiB of kernel parameters): the host's (rope_inv_freq), so the tables
// agree with rope_tables bit for bit.
struct RopeInvFreq {
    float v[ROPE_MAX_HALF];
};

// cos/sin(T, half): fp32 angle t * inv_freq[i] (one rounding, as torch), cos/sin in double,
// rounded once to fp32.
__global__ void rope_tables_kernel(float *cos_tab, float *sin_tab, int T, int half,
                                   RopeInvFreq f) {
    size_t total = (size_t)T * half;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        int t = (int)(idx / half), i = (int)(idx % half);
        float angle = __fmul_rn((float)t, f.v[i]);
        cos_tab[idx] = (float)cos((double)angle);
        sin_tab[idx] = (float)sin((double)angle);
    }
}

// The rotation pairs (head h, index i < HD/2) of rows n = b * T + t of an (N = B x T, H, HD)
// tensor: blocks take rows in turn, a block's threads the row's H x HD/2 pairs, and
// pair(n, h, i, c, s) runs once a pair with the row's cos and sin of index i. A thread divides
// once a row (n % T) and once a pair (j / half, 32-bit), where one thread a pair over the
// whole tensor divided 64-bit indices three times a pair: more time than the pair's bytes.
template <typename Pair>
__device__ __forceinline__ static void rope_rows(int N, int T, int H, int HD, const float *__restrict__ cos_tab,
                                                 const float *__restrict__ sin_tab, Pair pair) {
    const int half = HD / 2, per_row = H * half;
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const size_t at = (size_t)(n % T) * half;
        for (int j = threadIdx.x; j < per_row; j += blockDim.x) {
            const int h = j / half, i = j - h * half;
            pair(n, h, i, cos_tab[at + i], sin_tab[at + i]);
        }
    }
}

// Each pair reads both halves, then writes both, so out may alias x (a pair has one owner).
__global__ void rope_forward_kernel(float *out, const float *x, const float *__restrict__ cos_tab,
                                    const float *__restrict__ sin_tab, int N, int T, int H, int HD) {
    const int half = HD / 2;
    rope_rows(N, T, H, HD, cos_tab, sin_tab, [&](int n, int h, int i, float c, float s) {
        const size_t off = ((size_t)n * H + h) * HD;
        const float x0 = x[off + i], x1 = x[off + i + half];
        out[off + i] = x0 * c - x1 * s;
        out[off + i + half] = x1 * c + x0 * s;
    });
}

// bf16 mode: x (q or k as their GEMM stored them) rotated in place, each pair widened, rotated
// in fp32 with rope_forward_kernel's expressions, and rounded to nearest even.
__global__ void rope_forward_bf16_kernel(__nv_bfloat16 *x, const float *__restrict__ cos_tab,
                                         const float *__restrict__ sin_tab, int N, int T, int H, int HD) {
    const int half = HD / 2;
    rope_rows(N, T, H, HD, cos_tab, sin_tab, [&](int n, int h, int i, float c, float s) {
        const size_t off = ((size_t)n * H + h) * HD;
        const float x0 = to_f32(x[off + i]), x1 = to_f32(x[off + i + half]);
        x[off + i] = from_f32<__nv_bfloat16>(x0 * c - x1 * s);
        x[off + i + half] = from_f32<__nv_bfloat16>(x1 * c + x0 * s);
    });
}

// rope_forward_bf16_kernel four pairs at a time, for head dims that are multiples of 8 (every
// preset's: 64), x 8-byte aligned and the tables 16-byte aligned (cuda_rope_forward_bf16 checks):
// pairs i .. i + 3 of head h, i a multiple of 4, so each half's 4 values are one 8-byte load and
// store and their cos and sin one 16-byte load each. A pair at a time, each access moved 2
// bytes (4 of the table): 125m's q (16 x 1024 rows of 12 heads of 64, 25 MB read and written)
// took 28.7 us on an H200, a third of its memory's rate, with few bytes in flight a thread. Same
// expressions per element, same bits. A block a row: H x HD / 8 threads a row's quads (96 at
// 125m), blocks taking rows in turn as rope_rows does.
__global__ void rope_forward_bf16x4_kernel(__nv_bfloat16 *x, const float *__restrict__ cos_tab,
                                           const float *__restrict__ sin_tab, int N, int T, int H, int HD) {
    const int half = HD / 2, quads = half / 4, per_row = H * quads;
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const size_t at = (size_t)(n % T) * half;
        for (int j = threadIdx.x; j < per_row; j += blockDim.x) {
            const int h = j / quads, i = 4 * (j - h * quads);
            const float4 c = load_f32x4(cos_tab + at + i, 0), s = load_f32x4(sin_tab + at + i, 0);
            __nv_bfloat16 *lo = x + ((size_t)n * H + h) * HD + i, *hi = lo + half;
            const float4 a = load_f32x4(lo, 0), b = load_f32x4(hi, 0);
            store_f32x4(lo, 0, float4{a.x * c.x - b.x * s.x, a.y * c.y - b.y * s.y, a.z * c.z - b.z * s.z,
                                      a.w * c.w - b.w * s.w});
            store_f32x4(hi, 0, float4{b.x * c.x + a.x * s.x, b.y * c.y + a.y * s.y, b.z * c.z + a.z * s.z,
                                      b.w * c.w + a.w * s.w});
        }
    }
}

// dx = R^T dout (written): rotation by -angle.
__global__ void rope_backward_kernel(float *__restrict__ dx, const float *__restrict__ dout,
                                     const float *__restrict__ cos_tab, const float *__restrict__ sin_tab, int N,
                                     int T, int H, int HD) {
    const int half = HD / 2;
    rope_rows(N, T, H, HD, cos_tab, sin_tab, [&](int n, int h, int i, float c, float s) {
        const size_t off = ((size_t)n * H + h) * HD;
        const RopePair g = rope_pair_backward(dout[off + i], dout[off + i + half], c, s);
        dx[off + i] = g.lo;
        dx[off + i + half] = g.hi;
    });
}

// bf16 mode: R^T dout written (not added), rounded to bf16, into a packed GEMM operand: head h
// of token row n at dx[n * ld + h * HD] (q's or k's column block of the packed q|k|v gradient).
__global__ void rope_backward_packed_kernel(__nv_bfloat16 *__restrict__ dx, int ld, const float *__restrict__ dout,
                                            const float *__restrict__ cos_tab, const float *__restrict__ sin_tab,
                                            int N, int T, int H, int HD) {
    const int half = HD / 2;
    rope_rows(N, T, H, HD, cos_tab, sin_tab, [&](int n, int h, int i, float c, float s) {
        const size_t off = ((size_t)n * H + h) * HD, at = (size_t)n * ld + (size_t)h * HD;
        const RopePair g = rope_pair_backward(dout[off + i], dout[off + i + half], c, s);
        dx[at + i] = from_f32<__nv_bfloat16>(g.lo);
        dx[at + i + half] = from_f32<__nv_bfloat16>(g.hi);
    });
}

#endif
