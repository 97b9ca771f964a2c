// Forward + backward of one Llama decoder layer at 125M-parameter shapes on the bf16 GEMM
// path (C = 768, 12 heads of 64, 4 kv heads, FF = 2048, T = 1024, B = 4), timed with CUDA
// events, plus one large bf16 and fp32 GEMM for the device's reference rate, and a
// device-to-device copy for its memory's (what the memory-bound passes' estimates scale by).
//   bench_cuda [iterations]        (built, not run by ctest; prints TFLOP/s; the emulated build
//                                   at a small shape is: bench_cuda_emulated)
// FLOPs counted: every GEMM, and flash attention's products over the causal pairs as it
// computes them (below). Elementwise kernels are timed but not counted. The layer runs the bf16
// mode's attention (tensor cores); attention alone is also timed in both forms.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cuda/kernels_cuda.h"

#ifndef BENCH_CUDA_SMALL
enum { B = 4, T = 1024, N = B * T, C = 768, NH = 12, NKV = 4, HD = C / NH, CKV = NKV * HD,
       FF = 2048 };
enum { GEMM_OC = 3072 };
#define COPY_BYTES ((size_t)1 << 30)   // 1 GiB: 20 times the 50 MB L2 of an H100 or H200
#else   // the same calls at a shape the GPU emulator runs in seconds (tests/gpu_emu: bench_cuda_emulated)
enum { B = 2, T = 64, N = B * T, C = 64, NH = 4, NKV = 2, HD = C / NH, CKV = NKV * HD, FF = 128 };
enum { GEMM_OC = 256 };
#define COPY_BYTES ((size_t)1 << 20)
#endif

static CudaCtx *ctx;

static void *dalloc(size_t bytes) {
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
}
static float *drand_f32(size_t n, float amp) {
    float *h = malloc(n * sizeof *h);
    if (!h) abort();
    uint32_t s = 12345u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        h[i] = amp * ((float)(s >> 8) / 8388608.0f - 1.0f);
    }
    float *d = dalloc(n * sizeof *d);
    // Queued on the context's stream: the kernels that read d come after it in stream order.
    CUDA_CHECK(cudaMemcpyAsync(d, h, n * sizeof *d, cudaMemcpyHostToDevice, cuda_ctx_stream(ctx)));
    cuda_ctx_synchronize(ctx);
    free(h);
    return d;
}
static cuda_bf16 *drand_bf16(size_t n, float amp) {
    float *f = drand_f32(n, amp);
    cuda_bf16 *d = dalloc(n * sizeof *d);
    cuda_f32_to_bf16(ctx, d, f, n);
    cuda_ctx_synchronize(ctx);
    CUDA_CHECK(cudaFree(f));
    return d;
}
static float *dzeros(size_t n) {
    float *d = dalloc(n * sizeof *d);
    cuda_zero(ctx, d, n * sizeof *d);
    return d;
}
static cuda_bf16 *dbf(size_t n) { return dalloc(n * sizeof(cuda_bf16)); }

// The layer's buffers, as a bf16-mode slot keeps them (engine/model/model_cuda.c): weights in
// bf16 (the AdamW working copy), wq | wk | wv and wg | wu back to back; norms' outputs, q, k, v,
// attention's output, gate | up and h in bf16; the residual stream, xmid and the residual
// gradients in fp32; the norms' output gradients and the packed gradients of q | k | v and
// gate | up in bf16, written in place by the GEMMs and kernels that make them.
struct Layer {
    cuda_bf16 *wq, *wk, *wv, *wo, *wg, *wu, *wd;
    float *ln1, *ln2, *cos_tab, *sin_tab;
    float *dwq, *dwo, *dwg, *dwd, *dln1w, *dln2w;   // dwq: dwq | dwk | dwv; dwg: dwg | dwu
    // forward: x in, out (the next layer's input) and its norm's output next_b
    float *x, *rstd1, *lse, *xmid, *rstd2, *out, *rstd_next;
    cuda_bf16 *ln1_b, *q_b, *k_b, *v_b, *ao_b, *ln2_b, *g_b, *u_b, *h_b, *next_b;
    // backward: dout (and dout_b, as the next layer's backward leaves it) in, dx out
    float *dout, *dxmid, *dq, *dk, *dx, *dsum;
    // dgu_b (N, 2 FF), dqkv_b (N, C + 2 CKV)
    cuda_bf16 *dout_b, *dh_b, *dgu_b, *dln2_b, *dxmid_b, *dao_b, *dqkv_b, *dln1_b, *dx_b;
    // attention alone in fp32 (the fp32 kernels' timing)
    float *q, *k, *v, *ao, *dao, *dv;
};

static void layer_alloc(struct Layer *L) {
    const size_t nc = (size_t)N * C, nkv = (size_t)N * CKV, nf = (size_t)N * FF;
    const size_t nr = (size_t)B * NH * T;   // flash attention's row statistics
    L->wq = drand_bf16((size_t)(C + 2 * CKV) * C, 0.03f);
    L->wk = L->wq + (size_t)C * C, L->wv = L->wk + (size_t)CKV * C;
    L->wo = drand_bf16((size_t)C * C, 0.03f);
    L->wg = drand_bf16((size_t)2 * FF * C, 0.03f), L->wu = L->wg + (size_t)FF * C;
    L->wd = drand_bf16((size_t)C * FF, 0.03f);
    L->ln1 = drand_f32(C, 1.0f), L->ln2 = drand_f32(C, 1.0f);
    L->cos_tab = dalloc(sizeof(float) * T * HD / 2), L->sin_tab = dalloc(sizeof(float) * T * HD / 2);
    float inv_freq[HD / 2];
    for (int i = 0; i < HD / 2; i++) inv_freq[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)HD);
    cuda_rope_tables(ctx, L->cos_tab, L->sin_tab, T, HD, inv_freq);
    L->dwq = dzeros((size_t)(C + 2 * CKV) * C), L->dwo = dzeros((size_t)C * C);
    L->dwg = dzeros((size_t)2 * FF * C), L->dwd = dzeros((size_t)C * FF);
    L->dln1w = dzeros(C), L->dln2w = dzeros(C);
    L->x = drand_f32(nc, 1.0f), L->rstd1 = dzeros(N), L->lse = dzeros(nr);
    L->xmid = dzeros(nc), L->rstd2 = dzeros(N), L->out = dzeros(nc), L->rstd_next = dzeros(N);
    L->ln1_b = dbf(nc), L->q_b = dbf(nc), L->k_b = dbf(2 * nkv), L->v_b = L->k_b + nkv;
    L->ao_b = dbf(nc), L->ln2_b = dbf(nc), L->g_b = dbf(2 * nf), L->u_b = L->g_b + nf;
    L->h_b = dbf(nf), L->next_b = dbf(nc);
    cuda_rmsnorm_forward_bf16(ctx, L->ln1_b, L->rstd1, L->x, L->ln1, N, C, 1e-5f);   // the previous layer's part
    L->dout = drand_f32(nc, 1e-3f), L->dout_b = drand_bf16(nc, 1e-3f);   // as the next layer's backward leaves them
    L->dxmid = dzeros(nc), L->dq = dzeros(nc), L->dk = dzeros(nkv), L->dx = dzeros(nc), L->dsum = dzeros(nr);
    L->dh_b = dbf(nf), L->dgu_b = dbf(2 * nf), L->dln2_b = dbf(nc), L->dxmid_b = dbf(nc), L->dao_b = dbf(nc);
    L->dqkv_b = dbf((size_t)N * (C + 2 * CKV)), L->dln1_b = dbf(nc), L->dx_b = dbf(nc);
    L->q = dzeros(nc), L->k = dzeros(nkv), L->v = dzeros(nkv), L->ao = dzeros(nc), L->dao = dzeros(nc);
    L->dv = dzeros(nkv);
    // attention is also timed alone, before any forward or backward: its bf16 inputs start at 0
    cuda_zero(ctx, L->q_b, nc * sizeof(cuda_bf16));
    cuda_zero(ctx, L->k_b, 2 * nkv * sizeof(cuda_bf16));
    cuda_zero(ctx, L->dao_b, nc * sizeof(cuda_bf16));
}

// The engine's bf16 layer_forward: q alone and k | v as one batch (grouped queries), RoPE in
// place, attention, the o projection adding the residual in its epilogue, the second norm,
// gate | up as one batch, SwiGLU, the down projection adding the residual, the next layer's norm.
static void layer_forward(struct Layer *L) {
    cuda_linear_forward_shared_to_bf16(ctx, L->q_b, 0, L->ln1_b, L->wq, 0, 1, N, C, C);
    cuda_linear_forward_shared_to_bf16(ctx, L->k_b, (size_t)N * CKV, L->ln1_b, L->wk, (size_t)CKV * C, 2, N, C, CKV);
    cuda_rope_forward_bf16(ctx, L->q_b, L->cos_tab, L->sin_tab, B, T, NH, HD);
    cuda_rope_forward_bf16(ctx, L->k_b, L->cos_tab, L->sin_tab, B, T, NKV, HD);
    cuda_flash_attention_forward_bf16(ctx, L->ao_b, L->lse, L->q_b, L->k_b, L->v_b, B, T, NH, NKV, HD);
    cuda_linear_forward_residual_bf16(ctx, L->xmid, L->x, L->ao_b, L->wo, N, C, C);
    cuda_rmsnorm_forward_bf16(ctx, L->ln2_b, L->rstd2, L->xmid, L->ln2, N, C, 1e-5f);
    cuda_linear_forward_shared_to_bf16(ctx, L->g_b, (size_t)N * FF, L->ln2_b, L->wg, (size_t)FF * C, 2, N, C, FF);
    cuda_swiglu_forward_bf16(ctx, L->h_b, L->g_b, L->u_b, N, FF);
    cuda_linear_forward_residual_bf16(ctx, L->out, L->xmid, L->h_b, L->wd, N, FF, C);
    cuda_rmsnorm_forward_bf16(ctx, L->next_b, L->rstd_next, L->out, L->ln1, N, C, 1e-5f);
}

// The engine's bf16 layer_backward_input then layer_backward_weight: every activation gradient
// written by the call that makes it, the packed q | k | v and gate | up gradients one GEMM
// each, the norms' weight gradients in the kernels of their input gradients, the weight half
// last (as zero-bubble schedules split it off).
static void layer_backward(struct Layer *L) {
    const int QKV = C + 2 * CKV;
    cuda_linear_backward_input_to_bf16(ctx, L->dh_b, L->dout_b, L->wd, N, FF, C);
    cuda_swiglu_backward_bf16(ctx, L->dgu_b, 2 * FF, L->dh_b, L->g_b, L->u_b, N, FF);
    cuda_linear_backward_input_to_bf16(ctx, L->dln2_b, L->dgu_b, L->wg, N, C, 2 * FF);
    cuda_residual_rmsnorm_backward_bf16(ctx, L->dxmid, L->dxmid_b, L->dln2w, L->dout, L->dln2_b, L->xmid, L->ln2,
                                        L->rstd2, N, C);
    cuda_linear_backward_input_to_bf16(ctx, L->dao_b, L->dxmid_b, L->wo, N, C, C);
    cuda_flash_attention_rope_backward_bf16(ctx, L->dqkv_b, QKV, L->dq, L->dk, L->dsum, L->dao_b, L->q_b, L->k_b,
                                            L->v_b, L->ao_b, L->lse, L->cos_tab, L->sin_tab, B, T, NH, NKV, HD);
    cuda_linear_backward_input_to_bf16(ctx, L->dln1_b, L->dqkv_b, L->wq, N, C, QKV);
    cuda_residual_rmsnorm_backward_bf16(ctx, L->dx, L->dx_b, L->dln1w, L->dxmid, L->dln1_b, L->x, L->ln1, L->rstd1, N,
                                        C);
    // the weight half
    cuda_linear_backward_weight_bf16(ctx, L->dwd, L->dout_b, L->h_b, N, FF, C);
    cuda_linear_backward_weight_bf16(ctx, L->dwg, L->dgu_b, L->ln2_b, N, C, 2 * FF);
    cuda_linear_backward_weight_bf16(ctx, L->dwo, L->dxmid_b, L->ao_b, N, C, C);
    cuda_linear_backward_weight_bf16(ctx, L->dwq, L->dqkv_b, L->ln1_b, N, C, QKV);
}

// Milliseconds per call of fn, averaged over iters after one warm-up call.
static double time_ms(void (*fn)(struct Layer *), struct Layer *L, int iters) {
    cudaEvent_t t0, t1;
    CUDA_CHECK(cudaEventCreate(&t0));
    CUDA_CHECK(cudaEventCreate(&t1));
    fn(L);                                              // warm-up: arena, cuBLAS plans
    CUDA_CHECK(cudaEventRecord(t0, cuda_ctx_stream(ctx)));
    for (int i = 0; i < iters; i++) fn(L);
    CUDA_CHECK(cudaEventRecord(t1, cuda_ctx_stream(ctx)));
    CUDA_CHECK(cudaEventSynchronize(t1));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    CUDA_CHECK(cudaEventDestroy(t0));
    CUDA_CHECK(cudaEventDestroy(t1));
    return ms / iters;
}

// Attention alone, forward and backward, in each form: the fp32 kernels (CUDA cores) and the
// bf16 mode's tensor-core kernels.
static void attention_fp32(struct Layer *L) {
    cuda_flash_attention_forward(ctx, L->ao, L->lse, L->q, L->k, L->v, B, T, NH, NKV, HD);
    cuda_flash_attention_backward(ctx, L->dq, L->dk, L->dv, L->dsum, L->dao, L->q, L->k, L->v, L->ao, L->lse, B, T,
                                  NH, NKV, HD);
}
static void attention_bf16(struct Layer *L) {
    cuda_flash_attention_forward_bf16(ctx, L->ao_b, L->lse, L->q_b, L->k_b, L->v_b, B, T, NH, NKV, HD);
    cuda_flash_attention_backward_bf16(ctx, L->dq, L->dk, L->dqkv_b + C + CKV, C + 2 * CKV, L->dsum, L->dao_b, L->q_b,
                                       L->k_b, L->v_b, L->ao_b, L->lse, B, T, NH, NKV, HD);
}

static void fwd_bwd(struct Layer *L) {
    layer_forward(L);
    layer_backward(L);
}

// One (N x 3072) = (N x 768) @ (768 x 3072)^T GEMM, bf16 and fp32 operands.
static struct Layer *gemm_layer;
static cuda_bf16 *gA_b, *gW_b;
static float *gA_f, *gW_f, *gOut;
static void gemm_bf16(struct Layer *L) { (void)L; cuda_linear_forward_bf16(ctx, gOut, gA_b, gW_b, N, C, GEMM_OC); }
static void gemm_f32(struct Layer *L) { (void)L; cuda_linear_forward(ctx, gOut, gA_f, gW_f, N, C, GEMM_OC); }

// One device-to-device copy of COPY_BYTES: it reads and writes each byte once, so the memory
// moves twice COPY_BYTES a call.
static void *copy_src, *copy_dst;
static void copy_d2d(struct Layer *L) {
    (void)L;
    CUDA_CHECK(cudaMemcpyAsync(copy_dst, copy_src, COPY_BYTES, cudaMemcpyDeviceToDevice, cuda_ctx_stream(ctx)));
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 20;
    if (iters < 1) iters = 1;
    const char *why = cuda_unavailable_reason();
    if (why) {
        fprintf(stderr, "bench_cuda: %s\n", why);
        return 77;
    }
    ctx = cuda_ctx_create(0);
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);

    copy_src = dzeros(COPY_BYTES / sizeof(float));
    copy_dst = dalloc(COPY_BYTES);
    double ms = time_ms(copy_d2d, NULL, iters);
    printf("device copy %zu MiB:        %8.3f ms  %7.1f GB/s (read + write)\n", COPY_BYTES >> 20, ms,
           2.0 * (double)COPY_BYTES / (ms * 1e6));
    CUDA_CHECK(cudaFree(copy_src));
    CUDA_CHECK(cudaFree(copy_dst));

    gA_f = drand_f32((size_t)N * C, 1.0f);
    gW_f = drand_f32((size_t)GEMM_OC * C, 0.03f);
    gOut = dzeros((size_t)N * GEMM_OC);
    gA_b = drand_bf16((size_t)N * C, 1.0f);
    gW_b = drand_bf16((size_t)GEMM_OC * C, 0.03f);
    const double gemm_flops = 2.0 * N * C * GEMM_OC;
    ms = time_ms(gemm_bf16, gemm_layer, iters);
    printf("GEMM %dx%dx%d bf16 -> fp32:  %8.3f ms  %7.1f TFLOP/s\n", N, GEMM_OC, C, ms,
           gemm_flops / (ms * 1e9));
    ms = time_ms(gemm_f32, gemm_layer, iters);
    printf("GEMM %dx%dx%d fp32:          %8.3f ms  %7.1f TFLOP/s\n", N, GEMM_OC, C, ms,
           gemm_flops / (ms * 1e9));

    struct Layer L;
    memset(&L, 0, sizeof L);
    layer_alloc(&L);
    // Linear FLOPs per token-row: q, o (C x C), k, v (CKV x C), gate, up, down (FF x C).
    const double lin = 2.0 * N * ((double)C * C * 2 + (double)CKV * C * 2 + (double)FF * C * 3);
    // Flash attention computes the causal (query, key) pairs only: forward the scores and P v
    // (4 HD a pair); backward the scores and dP twice (dq's kernel and dk/dv's), dq, dk and dv
    // (14 HD a pair).
    const double pairs = (double)B * NH * T * (T + 1) / 2.0;
    const double fwd_flops = lin + 4.0 * HD * pairs, bwd_flops = 2.0 * lin + 14.0 * HD * pairs;
    double f_ms = time_ms(layer_forward, &L, iters);
    double fb_ms = time_ms(fwd_bwd, &L, iters);
    printf("layer B=%d T=%d C=%d NH=%d NKV=%d FF=%d (bf16 GEMMs, fp32 accumulate)\n", B, T, C,
           NH, NKV, FF);
    printf("  forward:            %8.3f ms  %7.1f TFLOP/s\n", f_ms, fwd_flops / (f_ms * 1e9));
    printf("  forward + backward: %8.3f ms  %7.1f TFLOP/s  (%.0f tokens/s per layer)\n", fb_ms,
           (fwd_flops + bwd_flops) / (fb_ms * 1e9), N / (fb_ms * 1e-3));
    const double attn_flops = 18.0 * HD * pairs;
    const double a32_ms = time_ms(attention_fp32, &L, iters), a16_ms = time_ms(attention_bf16, &L, iters);
    printf("  attention fwd+bwd fp32 (CUDA cores):   %8.3f ms  %7.1f TFLOP/s\n", a32_ms, attn_flops / (a32_ms * 1e9));
    printf("  attention fwd+bwd bf16 (tensor cores): %8.3f ms  %7.1f TFLOP/s\n", a16_ms, attn_flops / (a16_ms * 1e9));
    cuda_ctx_destroy(ctx);
    return 0;
}
