// kernels/cuda/rope_kernels.cuh: the kernels of rope.cu (which launches them), in the
// subset of CUDA C++ that tests/gpu_emu/simt.h also gives a host compiler, so
// tests/gpu_emu/test_kernels_simt.cc runs this same source on CPU threads. Include after
// kernels/cuda/common.cuh on the GPU, after simt.h and device_math.cuh on the CPU.
#ifndef PPTRAIN_KERNELS_CUDA_ROPE_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_ROPE_KERNELS_CUH

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

// One thread per pair (b, t, h, i < half): reads both halves, then writes both, so out may
// alias x (each pair has exactly one owner).
__global__ void rope_forward_kernel(float *out, const float *x, const float *__restrict__ cos_tab,
                                    const float *__restrict__ sin_tab, int T, int H, int HD,
                                    size_t pairs) {
    int half = HD / 2;
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < pairs;
         p += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(p % half);
        size_t bth = p / half;                      // (b*T + t)*H + h
        int t = (int)((bth / H) % T);
        size_t off = bth * HD;                      // start of head h of row (b, t)
        float c = cos_tab[(size_t)t * half + i], s = sin_tab[(size_t)t * half + i];
        float x0 = x[off + i], x1 = x[off + i + half];
        out[off + i] = x0 * c - x1 * s;
        out[off + i + half] = x1 * c + x0 * s;
    }
}

// bf16 mode: x (q or k as their GEMM stored them) rotated in place, each pair widened, rotated
// in fp32 with rope_forward_kernel's expressions, and rounded to nearest even.
__global__ void rope_forward_bf16_kernel(__nv_bfloat16 *x, const float *__restrict__ cos_tab,
                                         const float *__restrict__ sin_tab, int T, int H, int HD, size_t pairs) {
    int half = HD / 2;
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < pairs; p += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(p % half);
        size_t bth = p / half;
        int t = (int)((bth / H) % T);
        size_t off = bth * HD;
        float c = cos_tab[(size_t)t * half + i], s = sin_tab[(size_t)t * half + i];
        float x0 = to_f32(x[off + i]), x1 = to_f32(x[off + i + half]);
        x[off + i] = from_f32<__nv_bfloat16>(x0 * c - x1 * s);
        x[off + i + half] = from_f32<__nv_bfloat16>(x1 * c + x0 * s);
    }
}

// dx = R^T dout (written): rotation by -angle.
__global__ void rope_backward_kernel(float *__restrict__ dx, const float *__restrict__ dout,
                                     const float *__restrict__ cos_tab,
                                     const float *__restrict__ sin_tab, int T, int H, int HD,
                                     size_t pairs) {
    int half = HD / 2;
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < pairs;
         p += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(p % half);
        size_t bth = p / half;
        int t = (int)((bth / H) % T);
        size_t off = bth * HD;
        float c = cos_tab[(size_t)t * half + i], s = sin_tab[(size_t)t * half + i];
        float g0 = dout[off + i], g1 = dout[off + i + half];
        dx[off + i] = g0 * c + g1 * s;
        dx[off + i + half] = g1 * c - g0 * s;
    }
}

// bf16 mode: R^T dout written (not added), rounded to bf16, into a packed GEMM operand: head h
// of token row n at dx[n * ld + h * HD] (q's or k's column block of the packed q|k|v gradient).
__global__ void rope_backward_packed_kernel(__nv_bfloat16 *__restrict__ dx, int ld, const float *__restrict__ dout,
                                            const float *__restrict__ cos_tab, const float *__restrict__ sin_tab,
                                            int T, int H, int HD, size_t pairs) {
    int half = HD / 2;
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < pairs; p += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(p % half);
        size_t bth = p / half;
        int t = (int)((bth / H) % T);
        size_t off = bth * HD, at = (bth / H) * (size_t)ld + (bth % H) * (size_t)HD;
        float c = cos_tab[(size_t)t * half + i], s = sin_tab[(size_t)t * half + i];
        float g0 = dout[off + i], g1 = dout[off + i + half];
        dx[at + i] = from_f32<__nv_bfloat16>(g0 * c + g1 * s);
        dx[at + i + half] = from_f32<__nv_bfloat16>(g1 * c - g0 * s);
    }
}

#endif
