// Causal grouped-query attention: cuBLAS strided-batched GEMMs for the products, own kernels
// for the causal masked softmax and its backward.
//
// Layouts (kernels/cpu/kernels.h): q, out, dout (B, T, NH, HD); k, v (B, T, NKV, HD);
// att, scratch (B, NH, T, T). Query head h reads kv head h / g, g = NH / NKV.
// Each (b, h) block is a row-major matrix read in place: q's rows are NH*HD apart, k's
// NKV*HD apart. For a fixed sequence b and a fixed position j inside a kv group, the heads
// h = kv*g + j (kv = 0..NKV-1) sit at uniform strides in every tensor:
//     q, out, dout, dq: + kv * g*HD      k, v, dk, dv: + kv * HD      att, dS: + kv * g*T*T
// so one strided-batched GEMM per (b, j) covers NKV heads. The entries of one call own
// distinct kv heads, so dk and dv (+=) have one writer per call; the g calls of a group run
// one after another on the stream, which orders their accumulation.
// The T x T products are computed in full; the softmax writes exact zeros above the
// diagonal, so the masked half contributes nothing to the products that follow.
#include <math.h>
#include "kernels/cuda/common.cuh"

#define ATT_WARPS 8                                   // rows (warps) per 256-thread block

// Rows of (B*NH*T, T) scores -> causal softmax probabilities in place; row r is query
// position t = r % T, valid for columns 0..t, zero above. Optional bf16 copy in pb.
__global__ void causal_softmax_kernel(float *att, __nv_bfloat16 *pb, size_t rows, int T) {
    size_t row = (size_t)blockIdx.x * ATT_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    int t = (int)(row % (size_t)T);
    float *s = att + row * T;
    float m = -INFINITY;
    for (int j = lane; j <= t; j += 32) m = fmaxf(m, s[j]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int j = lane; j <= t; j += 32) sum += expf(s[j] - m);
    sum = warp_sum(sum);
    float inv = 1.0f / sum;
    for (int j = lane; j < T; j += 32) {
        float p = j <= t ? expf(s[j] - m) * inv : 0.0f;
        s[j] = p;
        if (pb) pb[row * T + j] = __float2bfloat16(p);
    }
}

// dP (in ds) -> dS / scale = P * (dP - rowsum(P * dP)), zero above the diagonal. With dsb
// non-NULL the result goes to dsb in bf16 only (the bf16 GEMM operand), else to ds in fp32.
__global__ void causal_softmax_backward_kernel(float *ds, __nv_bfloat16 *dsb,
                                               const float *__restrict__ att, size_t rows,
                                               int T) {
    size_t row = (size_t)blockIdx.x * ATT_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    int t = (int)(row % (size_t)T);
    float *d = ds + row * T;
    const float *p = att + row * T;
    float dot = 0.0f;
    for (int j = lane; j <= t; j += 32) dot += p[j] * d[j];
    dot = warp_sum(dot);
    for (int j = lane; j < T; j += 32) {
        float v = j <= t ? p[j] * (d[j] - dot) : 0.0f;
        if (dsb) dsb[row * T + j] = __float2bfloat16(v);
        else d[j] = v;
    }
}

static unsigned att_blocks(size_t rows) { return (unsigned)((rows + ATT_WARPS - 1) / ATT_WARPS); }

// Element offset helpers (in elements of the tensor's own type).
struct AttShape {
    int B, T, NH, NKV, HD, g, ldq, ldk;
    size_t qb(int b, int j) const { return (size_t)b * T * ldq + (size_t)j * HD; }  // q-like
    size_t kb(int b) const { return (size_t)b * T * ldk; }                          // k-like
    size_t ab(int b, int j) const { return ((size_t)b * NH + j) * T * T; }          // att-like
};

static AttShape att_shape(int B, int T, int NH, int NKV, int HD) {
    AttShape s;
    s.B = B; s.T = T; s.NH = NH; s.NKV = NKV; s.HD = HD;
    s.g = NH / NKV; s.ldq = NH * HD; s.ldk = NKV * HD;
    return s;
}

// Shared by the fp32 and bf16 versions: q, k, v are of type `ty` (esz bytes); pb, when
// non-NULL, receives bf16 probabilities and is the P operand of out = P v.
static void attention_forward_impl(CudaCtx *ctx, float *out, float *att, const void *q,
                                   const void *k, const void *v, __nv_bfloat16 *pb,
                                   cudaDataType_t ty, size_t esz, int B, int T, int NH, int NKV,
                                   int HD) {
    if (B <= 0 || T <= 0 || NH <= 0) return;
    const AttShape s = att_shape(B, T, NH, NKV, HD);
    const float scale = (float)(1.0 / sqrt((double)HD));
    const char *qc = (const char *)q, *kc = (const char *)k, *vc = (const char *)v;
    const long long TT = (long long)T * T;
    // scores(T, T) = scale * q(T, HD) @ k(T, HD)^T, written into att.
    for (int b = 0; b < B; b++)
        for (int j = 0; j < s.g; j++)
            gemm_rm_strided(ctx, false, true, T, T, HD, scale, qc + s.qb(b, j) * esz, s.ldq,
                            (long long)s.g * HD, kc + s.kb(b) * esz, s.ldk, HD, ty, 0.0f,
                            att + s.ab(b, j), T, s.g * TT, NKV);
    size_t rows = (size_t)B * NH * T;
    causal_softmax_kernel<<<att_blocks(rows), 32 * ATT_WARPS, 0, ctx->stream>>>(att, pb, rows, T);
    CUDA_CHECK_LAUNCH();
    // out(T, HD) = P(T, T) @ v(T, HD)
    const char *pc = pb ? (const char *)pb : (const char *)att;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < s.g; j++)
            gemm_rm_strided(ctx, false, false, T, HD, T, 1.0f, pc + s.ab(b, j) * esz, T, s.g * TT,
                            vc + s.kb(b) * esz, s.ldk, HD, ty, 0.0f, out + s.qb(b, j), s.ldq,
                            (long long)s.g * HD, NKV);
}

// pb, dsb: bf16 copies of P and dS (bf16 version) or NULL (fp32: att and scratch are used).
static void attention_backward_impl(CudaCtx *ctx, float *dq, float *dk, float *dv,
                                    float *scratch, const void *dout, const void *q,
                                    const void *k, const void *v, const float *att,
                                    __nv_bfloat16 *pb, __nv_bfloat16 *dsb, cudaDataType_t ty,
                                    size_t esz, int B, int T, int NH, int NKV, int HD) {
    if (B <= 0 || T <= 0 || NH <= 0) return;
    const AttShape s = att_shape(B, T, NH, NKV, HD);
    const float scale = (float)(1.0 / sqrt((double)HD));
    const char *qc = (const char *)q, *kc = (const char *)k, *vc = (const char *)v,
               *oc = (const char *)dout;
    const long long TT = (long long)T * T, qstride = (long long)s.g * HD;
    const size_t rows = (size_t)B * NH * T;
    // dP(T, T) = dout(T, HD) @ v(T, HD)^T, fp32 into scratch.
    for (int b = 0; b < B; b++)
        for (int j = 0; j < s.g; j++)
            gemm_rm_strided(ctx, false, true, T, T, HD, 1.0f, oc + s.qb(b, j) * esz, s.ldq,
                            qstride, vc + s.kb(b) * esz, s.ldk, HD, ty, 0.0f,
                            scratch + s.ab(b, j), T, s.g * TT, NKV);
    causal_softmax_backward_kernel<<<att_blocks(rows), 32 * ATT_WARPS, 0, ctx->stream>>>(
        scratch, dsb, att, rows, T);
    CUDA_CHECK_LAUNCH();
    if (pb) {                                      // bf16 copy of P for dv's GEMM
        cuda_f32_to_bf16(ctx, reinterpret_cast<cuda_bf16 *>(pb), att, rows * T);
    }
    const char *dsc = dsb ? (const char *)dsb : (const char *)scratch;
    const char *pc = pb ? (const char *)pb : (const char *)att;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < s.g; j++) {
            // dq(T, HD) += scale * dS(T, T) @ k(T, HD)
            gemm_rm_strided(ctx, false, false, T, HD, T, scale, dsc + s.ab(b, j) * esz, T,
                            s.g * TT, kc + s.kb(b) * esz, s.ldk, HD, ty, 1.0f, dq + s.qb(b, j),
                            s.ldq, qstride, NKV);
            // dk(T, HD) += scale * dS(T, T)^T @ q(T, HD)
            gemm_rm_strided(ctx, true, false, T, HD, T, scale, dsc + s.ab(b, j) * esz, T,
                            s.g * TT, qc + s.qb(b, j) * esz, s.ldq, qstride, ty, 1.0f,
                            dk + s.kb(b), s.ldk, HD, NKV);
            // dv(T, HD) += P(T, T)^T @ dout(T, HD)
            gemm_rm_strided(ctx, true, false, T, HD, T, 1.0f, pc + s.ab(b, j) * esz, T, s.g * TT,
                            oc + s.qb(b, j) * esz, s.ldq, qstride, ty, 1.0f, dv + s.kb(b),
                            s.ldk, HD, NKV);
        }
}

void cuda_attention_forward(CudaCtx *ctx, float *out, float *att, const float *q,
                            const float *k, const float *v, int B, int T, int NH, int NKV,
                            int HD) {
    attention_forward_impl(ctx, out, att, q, k, v, NULL, CUDA_R_32F, sizeof(float), B, T, NH,
                           NKV, HD);
}

void cuda_attention_backward(CudaCtx *ctx, float *dq, float *dk, float *dv, float *scratch,
                             const float *dout, const float *q, const float *k, const float *v,
                             const float *att, int B, int T, int NH, int NKV, int HD) {
    attention_backward_impl(ctx, dq, dk, dv, scratch, dout, q, k, v, att, NULL, NULL,
                            CUDA_R_32F, sizeof(float), B, T, NH, NKV, HD);
}

void cuda_attention_forward_bf16(CudaCtx *ctx, float *out, float *att, const cuda_bf16 *q,
                                 const cuda_bf16 *k, const cuda_bf16 *v, int B, int T, int NH,
                                 int NKV, int HD) {
    size_t n = (size_t)B * NH * T * T;
    if (n == 0) return;
    __nv_bfloat16 *pb = (__nv_bfloat16 *)ctx_arena(ctx, n * sizeof(__nv_bfloat16));
    attention_forward_impl(ctx, out, att, q, k, v, pb, CUDA_R_16BF, sizeof(__nv_bfloat16), B, T,
                           NH, NKV, HD);
}

void cuda_attention_backward_bf16(CudaCtx *ctx, float *dq, float *dk, float *dv,
                                  float *scratch, const cuda_bf16 *dout, const cuda_bf16 *q,
                                  const cuda_bf16 *k, const cuda_bf16 *v, const float *att,
                                  int B, int T, int NH, int NKV, int HD) {
    size_t n = (size_t)B * NH * T * T;
    if (n == 0) return;
    size_t half = arena_round(n * sizeof(__nv_bfloat16));
    char *base = (char *)ctx_arena(ctx, 2 * half);
    attention_backward_impl(ctx, dq, dk, dv, scratch, dout, q, k, v, att,
                            (__nv_bfloat16 *)base, (__nv_bfloat16 *)(base + half), CUDA_R_16BF,
                            sizeof(__nv_bfloat16), B, T, NH, NKV, HD);
}
