// Rotary position embedding, Hugging Face half-split convention: dimension i pairs with
// i + HD/2 (DESIGN.md "Numerics"), angles in fp32 exactly as kernels/cpu/rope.c makes them.
#include <stdio.h>
#include <stdlib.h>
#include "kernels/cuda/common.cuh"

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

void cuda_rope_tables(CudaCtx *ctx, float *cos_tab, float *sin_tab, int T, int HD,
                      const float *inv_freq) {
    int half = HD / 2;
    if (HD <= 0 || HD % 2 != 0 || half > ROPE_MAX_HALF) {
        fprintf(stderr, "pptrain: cuda_rope_tables: head dim %d must be even and <= %d\n", HD,
                2 * ROPE_MAX_HALF);
        exit(EXIT_FAILURE);
    }
    RopeInvFreq f;
    for (int i = 0; i < half; i++) f.v[i] = inv_freq[i];
    for (int i = half; i < ROPE_MAX_HALF; i++) f.v[i] = 0.0f;
    size_t total = (size_t)T * half;
    if (total == 0) return;
    rope_tables_kernel<<<grid_for(total, 256), 256, 0, ctx->stream>>>(cos_tab, sin_tab, T, half, f);
    CUDA_CHECK_LAUNCH();
}

void cuda_rope_forward(CudaCtx *ctx, float *out, const float *x, const float *cos_tab,
                       const float *sin_tab, int B, int T, int H, int HD) {
    size_t pairs = (size_t)B * T * H * (HD / 2);
    if (pairs == 0) return;
    rope_forward_kernel<<<grid_for(pairs, 256), 256, 0, ctx->stream>>>(out, x, cos_tab, sin_tab,
                                                                       T, H, HD, pairs);
    CUDA_CHECK_LAUNCH();
}

void cuda_rope_forward_bf16(CudaCtx *ctx, cuda_bf16 *x, const float *cos_tab, const float *sin_tab, int B, int T, int H,
                            int HD) {
    size_t pairs = (size_t)B * T * H * (HD / 2);
    if (pairs == 0) return;
    rope_forward_bf16_kernel<<<grid_for(pairs, 256), 256, 0, ctx->stream>>>((__nv_bfloat16 *)x, cos_tab, sin_tab, T, H,
                                                                            HD, pairs);
    CUDA_CHECK_LAUNCH();
}

void cuda_rope_backward(CudaCtx *ctx, float *dx, const float *dout, const float *cos_tab,
                        const float *sin_tab, int B, int T, int H, int HD) {
    size_t pairs = (size_t)B * T * H * (HD / 2);
    if (pairs == 0) return;
    rope_backward_kernel<<<grid_for(pairs, 256), 256, 0, ctx->stream>>>(dx, dout, cos_tab,
                                                                        sin_tab, T, H, HD, pairs);
    CUDA_CHECK_LAUNCH();
}

void cuda_rope_backward_bf16(CudaCtx *ctx, cuda_bf16 *dx, int ld, const float *dout, const float *cos_tab,
                             const float *sin_tab, int B, int T, int H, int HD) {
    size_t pairs = (size_t)B * T * H * (HD / 2);
    if (pairs == 0) return;
    rope_backward_packed_kernel<<<grid_for(pairs, 256), 256, 0, ctx->stream>>>((__nv_bfloat16 *)dx, ld, dout, cos_tab,
                                                                               sin_tab, T, H, HD, pairs);
    CUDA_CHECK_LAUNCH();
}
