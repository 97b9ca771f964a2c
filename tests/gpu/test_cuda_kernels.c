// Every CUDA kernel (kernels/cuda) against the CPU backend (kernels/cpu) on fresh random
// inputs: forward outputs and the increments that backward ops ACCUMULATE into gradient
// buffers that start non-zero (so "+=" is checked, not just "="). Errors are norm-relative
// (rel_norm_diff). Bounds: fp32 paths 1e-6..1e-4 (float summation order only); bf16 GEMM
// paths against the fp32 CPU on the unrounded inputs, 1e-2 for forward outputs and 3e-2 for
// gradients (bf16 operands carry 8 significant bits; llm.c's GPU tests bound them alike).
// Exit 77 (ctest: skipped) when no CUDA device is visible. Written in C on purpose: the
// header must serve the engine's C code.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cpu/kernels.h"
#include "kernels/cuda/kernels_cuda.h"
#include "tests/gpu_emu/flash_emu.h"

// Shapes: small, odd where it hurts (FF, V not multiples of 8 or 16).
enum { B = 2, T = 64, N = B * T, C = 64, NH = 4, NKV = 2, HD = C / NH, FF = 172, V = 259 };

static CudaCtx *ctx;
static int checks, failures;

// ---- host helpers ------------------------------------------------------------------------
static uint64_t rng_state = 0x243F6A8885A308D3ull;
static float frand(void) {                               // uniform in [-1, 1)
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (2.0 / 16777216.0) - 1.0);
}
static float *hrand(size_t n, float amp) {
    float *x = malloc(n * sizeof *x);
    if (!x) abort();
    for (size_t i = 0; i < n; i++) x[i] = amp * frand();
    return x;
}
static float *hcopy(const float *x, size_t n) {
    float *y = malloc(n * sizeof *y);
    if (!y) abort();
    memcpy(y, x, n * sizeof *y);
    return y;
}
// fp32 -> bf16, round to nearest even (what __float2bfloat16 does).
static cuda_bf16 f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (cuda_bf16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (cuda_bf16)(u >> 16);
}
static float bf2f(cuda_bf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// ---- device helpers (all copies are queued on the context's stream) ---------------------
static void *dalloc(size_t bytes) {
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
}
static void upload(void *d, const void *h, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, cuda_ctx_stream(ctx)));
}
static void download(void *h, const void *d, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, cuda_ctx_stream(ctx)));
    cuda_ctx_synchronize(ctx);
}
static float *dfloat(const float *h, size_t n) {
    float *d = dalloc(n * sizeof *d);
    upload(d, h, n * sizeof *d);
    return d;
}
static cuda_bf16 *dbf16(const float *h, size_t n) {
    cuda_bf16 *tmp = malloc(n * sizeof *tmp);
    if (!tmp) abort();
    for (size_t i = 0; i < n; i++) tmp[i] = f2bf(h[i]);
    cuda_bf16 *d = dalloc(n * sizeof *d);
    upload(d, tmp, n * sizeof *d);
    cuda_ctx_synchronize(ctx);                           // tmp is freed next
    free(tmp);
    return d;
}
static float *fetch(const float *d, size_t n) {
    float *h = malloc(n * sizeof *h);
    if (!h) abort();
    download(h, d, n * sizeof *h);
    return h;
}

// ---- checks ------------------------------------------------------------------------------
static void report(const char *name, double err, double tol) {
    int ok = isfinite(err) && err <= tol;
    checks++;
    if (!ok) failures++;
    printf("%-44s rel err %.3e  (bound %.0e)  %s\n", name, err, tol, ok ? "ok" : "FAIL");
}
// A kernel's bf16 form (d16) against its fp32 form's output on the device (d32): each value
// must be that fp32 value rounded to nearest even, bitwise (the same arithmetic, then one
// rounding: what cuda_f32_to_bf16 did to it before the GEMM read it).
static void check_rounded(const char *name, const cuda_bf16 *d16, const float *d32, size_t n) {
    float *want = fetch(d32, n);
    cuda_bf16 *got = malloc(n * sizeof *got);
    if (!got) abort();
    download(got, d16, n * sizeof *got);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += got[i] != f2bf(want[i]);
    report(name, (double)bad, 0.0);
    free(want);
    free(got);
}
// A packed bf16 form's buffer d16 (rows, ld) against what it must hold: `fill` everywhere but
// the blocks the fp32 forms' outputs (rows, cols[i]) d32[i] went to, at columns col0[i],
// rounded; bitwise (a value written out of place, or one not written, shows).
static void check_packed_rounded(const char *name, const cuda_bf16 *d16, int rows, int ld, cuda_bf16 fill, int n,
                                 const float *const d32[], const int col0[], const int cols[]) {
    cuda_bf16 *want = malloc((size_t)rows * ld * sizeof *want), *got = malloc((size_t)rows * ld * sizeof *got);
    if (!want || !got) abort();
    for (size_t i = 0; i < (size_t)rows * ld; i++) want[i] = fill;
    for (int k = 0; k < n; k++) {
        float *block = fetch(d32[k], (size_t)rows * cols[k]);
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < cols[k]; j++) want[(size_t)r * ld + col0[k] + j] = f2bf(block[(size_t)r * cols[k] + j]);
        free(block);
    }
    download(got, d16, (size_t)rows * ld * sizeof *got);
    size_t bad = 0;
    for (size_t i = 0; i < (size_t)rows * ld; i++) bad += got[i] != want[i];
    report(name, (double)bad, 0.0);
    free(want);
    free(got);
}
// A device bf16 buffer of n values, each `fill`.
static cuda_bf16 *dfill16(size_t n, cuda_bf16 fill) {
    cuda_bf16 *h = malloc(n * sizeof *h);
    if (!h) abort();
    for (size_t i = 0; i < n; i++) h[i] = fill;
    cuda_bf16 *d = dalloc(n * sizeof *d);
    upload(d, h, n * sizeof *d);
    cuda_ctx_synchronize(ctx);
    free(h);
    return d;
}
// n quiet NaNs, on the host and on the device: the start of an output a kernel must write
// without reading (a value read and added to, or one not written, comes back NaN and fails
// the check: rel_norm_diff is then NaN).
static float *hnan(size_t n) {
    float *h = malloc(n * sizeof *h);
    if (!h) abort();
    for (size_t i = 0; i < n; i++) h[i] = NAN;
    return h;
}
static float *dnan(size_t n) {
    float *h = hnan(n);
    float *d = dfloat(h, n);
    cuda_ctx_synchronize(ctx);
    free(h);
    return d;
}
// The device tensor d against the host reference want.
static void check(const char *name, const float *d, const float *want, size_t n, double tol) {
    float *got = fetch(d, n);
    report(name, rel_norm_diff(got, want, n), tol);
    free(got);
}
// Accumulating ops (parameter gradients; RMSNorm's and the embedding's input gradients):
// compares the increments (device result - init) and (want - init). Ops that write their
// gradient start the device buffer at NaN instead (dnan) and are compared whole.
static void check_delta(const char *name, const float *d, const float *want, const float *init,
                        size_t n, double tol) {
    float *got = fetch(d, n);
    float *dg = malloc(n * sizeof *dg), *dw = malloc(n * sizeof *dw);
    if (!dg || !dw) abort();
    for (size_t i = 0; i < n; i++) {
        dg[i] = (float)((double)got[i] - init[i]);
        dw[i] = (float)((double)want[i] - init[i]);
    }
    report(name, rel_norm_diff(dg, dw, n), tol);
    free(got);
    free(dg);
    free(dw);
}
// The device tensor d against want, its difference measured against the size of the terms each
// element sums (terms: one non-negative bound per element, at least |want|) instead of want's own
// norm: where the terms cancel, want is small beside the rounding of its sum, whose order the two
// sides take differently. attention_grad_terms says where that matters.
static void check_terms(const char *name, const float *d, const float *want, const float *terms, size_t n,
                        double tol) {
    float *got = fetch(d, n);
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double e = (double)got[i] - want[i];
        num += e * e;
        den += (double)terms[i] * terms[i];
    }
    report(name, den > 0.0 ? sqrt(num / den) : sqrt(num), tol);
    free(got);
}
static void check_scalar(const char *name, double got, double want, double tol) {
    report(name, want != 0.0 ? fabs(got - want) / fabs(want) : fabs(got), tol);
}
static void check_true(const char *name, int cond) { report(name, cond ? 0.0 : 1.0, 0.0); }

// ---- tests -------------------------------------------------------------------------------
static void test_device(void) {
    check_true("cuda_unavailable_reason() == NULL", cuda_unavailable_reason() == NULL);
}

static void test_convert(void) {
    enum { n = 4099 };
    float *x = hrand(n, 1.0f);
    for (size_t i = 0; i < n; i++) x[i] = ldexpf(x[i], (int)(i % 61) - 30);   // wide exponents
    x[0] = 1.0f + 1.0f / 256.0f;                         // a tie: rounds to even (1.0)
    x[1] = 1.0f + 3.0f / 256.0f;                         // a tie: rounds to even (up)
    float *dx = dfloat(x, n);
    cuda_bf16 *db = dalloc(n * sizeof *db);
    float *dy = dalloc(n * sizeof *dy);
    cuda_f32_to_bf16(ctx, db, dx, n);
    cuda_bf16_to_f32(ctx, dy, db, n);
    cuda_bf16 *hb = malloc(n * sizeof *hb);
    float *hy = malloc(n * sizeof *hy);
    if (!hb || !hy) abort();
    download(hb, db, n * sizeof *hb);
    download(hy, dy, n * sizeof *hy);
    int bad_b = 0, bad_f = 0;
    for (size_t i = 0; i < n; i++) {
        bad_b += hb[i] != f2bf(x[i]);
        bad_f += hy[i] != bf2f(f2bf(x[i]));
    }
    check_true("f32_to_bf16: round to nearest even, exact", bad_b == 0);
    check_true("bf16_to_f32: exact", bad_f == 0);
    free(x); free(hb); free(hy);
    CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(db)); CUDA_CHECK(cudaFree(dy));
}

static void test_embedding(void) {
    int32_t tokens[N];
    for (int n = 0; n < N; n++)                          // many repeats, and the last row of V
        tokens[n] = n % 5 == 0 ? V - 1 : (int32_t)((frand() + 1.0f) * 18.0f);
    float *wte = hrand((size_t)V * C, 1.0f), *out = malloc(sizeof(float) * N * C);
    float *dout = hrand((size_t)N * C, 1.0f), *dwte0 = hrand((size_t)V * C, 1.0f);
    float *dwte = hcopy(dwte0, (size_t)V * C);
    if (!out) abort();
    embedding_forward(out, tokens, wte, N, C);
    embedding_backward(dwte, dout, tokens, N, C);

    int32_t *dtok = dalloc(sizeof tokens);
    upload(dtok, tokens, sizeof tokens);
    float *d_wte = dfloat(wte, (size_t)V * C), *d_out = dalloc(sizeof(float) * N * C);
    float *d_dout = dfloat(dout, (size_t)N * C), *d_dwte = dfloat(dwte0, (size_t)V * C);
    cuda_embedding_forward(ctx, d_out, dtok, d_wte, N, C);
    check("embedding_forward", d_out, out, (size_t)N * C, 0.0);
    cuda_embedding_backward(ctx, d_dwte, d_dout, dtok, N, C);
    check_delta("embedding_backward dwte (+=)", d_dwte, dwte, dwte0, (size_t)V * C, 1e-6);
    // Deterministic: the same call on the same input gives the same bits.
    float *first = fetch(d_dwte, (size_t)V * C);
    upload(d_dwte, dwte0, sizeof(float) * V * C);
    cuda_embedding_backward(ctx, d_dwte, d_dout, dtok, N, C);
    float *second = fetch(d_dwte, (size_t)V * C);
    check_true("embedding_backward bitwise repeatable",
               memcmp(first, second, sizeof(float) * V * C) == 0);
    free(first); free(second);
    free(wte); free(out); free(dout); free(dwte0); free(dwte);
    CUDA_CHECK(cudaFree(dtok)); CUDA_CHECK(cudaFree(d_wte)); CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaFree(d_dout)); CUDA_CHECK(cudaFree(d_dwte));
}

static void test_rmsnorm(void) {
    const float eps = 1e-5f;
    float *inp = hrand((size_t)N * C, 2.0f), *w = hrand(C, 0.5f);
    for (int c = 0; c < C; c++) w[c] += 1.0f;
    float *out = malloc(sizeof(float) * N * C), *rstd = malloc(sizeof(float) * N);
    float *dout = hrand((size_t)N * C, 1.0f);
    float *dinp0 = hrand((size_t)N * C, 1.0f), *dw0 = hrand(C, 1.0f);
    float *dinp = hcopy(dinp0, (size_t)N * C), *dw = hcopy(dw0, C);
    if (!out || !rstd) abort();
    rmsnorm_forward(out, rstd, inp, w, N, C, eps);
    rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C);

    float *d_inp = dfloat(inp, (size_t)N * C), *d_w = dfloat(w, C);
    float *d_out = dalloc(sizeof(float) * N * C), *d_rstd = dalloc(sizeof(float) * N);
    float *d_dout = dfloat(dout, (size_t)N * C);
    float *d_dinp = dfloat(dinp0, (size_t)N * C), *d_dw = dfloat(dw0, C);
    cuda_rmsnorm_forward(ctx, d_out, d_rstd, d_inp, d_w, N, C, eps);
    check("rmsnorm_forward out", d_out, out, (size_t)N * C, 1e-6);
    check("rmsnorm_forward rstd", d_rstd, rstd, N, 1e-6);
    cuda_bf16 *d_out16 = dalloc(sizeof(cuda_bf16) * N * C);
    float *d_rstd16 = dalloc(sizeof(float) * N);
    cuda_rmsnorm_forward_bf16(ctx, d_out16, d_rstd16, d_inp, d_w, N, C, eps);
    check_rounded("rmsnorm_forward_bf16 out: fp32's, rounded", d_out16, d_out, (size_t)N * C);
    check("rmsnorm_forward_bf16 rstd", d_rstd16, rstd, N, 1e-6);
    CUDA_CHECK(cudaFree(d_out16)); CUDA_CHECK(cudaFree(d_rstd16));
    // The two halves apart (NULL for the other): the weight gradient alone runs the norm's own
    // kernels, which rows the fused backward does not take (C > 1024, unaligned) still use.
    cuda_rmsnorm_backward(ctx, d_dinp, NULL, d_dout, d_inp, d_w, d_rstd, N, C);
    cuda_rmsnorm_backward(ctx, NULL, d_dw, d_dout, d_inp, d_w, d_rstd, N, C);
    check_delta("rmsnorm_backward dinp (+=)", d_dinp, dinp, dinp0, (size_t)N * C, 1e-5);
    check_delta("rmsnorm_backward dweight (+=)", d_dw, dw, dw0, C, 1e-5);
    // The fused residual form: dinp = resid + the term, with the value's bf16 copy; resid NULL
    // is the term alone; resid == dinp is the accumulation above, to the bit.
    const size_t NC = (size_t)N * C;
    float *zero = calloc(NC, sizeof(float)), *term = calloc(NC, sizeof(float));
    if (!zero || !term) abort();
    rmsnorm_backward(term, NULL, dout, inp, w, rstd, N, C);
    float *d_resid = dfloat(dinp0, NC), *d_fused = dalloc(sizeof(float) * NC);
    cuda_bf16 *d_fused16 = dalloc(sizeof(cuda_bf16) * NC);
    cuda_residual_rmsnorm_backward(ctx, d_fused, d_fused16, NULL, d_resid, d_dout, d_inp, d_w, d_rstd, N, C);
    check_delta("residual_rmsnorm_backward dinp = resid + term", d_fused, dinp, dinp0, NC, 1e-5);
    check_rounded("residual_rmsnorm_backward bf16 copy: fp32's, rounded", d_fused16, d_fused, NC);
    cuda_residual_rmsnorm_backward(ctx, d_fused, NULL, NULL, NULL, d_dout, d_inp, d_w, d_rstd, N, C);
    check_delta("residual_rmsnorm_backward resid NULL: the term", d_fused, term, zero, NC, 1e-5);
    upload(d_fused, dinp0, sizeof(float) * NC);
    cuda_residual_rmsnorm_backward(ctx, d_fused, NULL, NULL, d_fused, d_dout, d_inp, d_w, d_rstd, N, C);
    float *fused = fetch(d_fused, NC), *accumulated = fetch(d_dinp, NC);
    check_true("residual_rmsnorm_backward resid == dinp: rmsnorm_backward's bits",
               memcmp(fused, accumulated, sizeof(float) * NC) == 0);
    {   // bf16 mode's forms read dout (the norm output's gradient) in bf16: the fp32 forms on the
        // widened dout are their results, bit for bit (the same kernels, a widening load)
        float *dout_r = malloc(sizeof(float) * NC);
        if (!dout_r) abort();
        for (size_t i = 0; i < NC; i++) dout_r[i] = bf2f(f2bf(dout[i]));
        float *d_dout_r = dfloat(dout_r, NC), *d_want = dalloc(sizeof(float) * NC), *d_got = dnan(NC);
        cuda_bf16 *d_dout16 = dbf16(dout, NC), *d_got16 = dfill16(NC, 0x7fc1);
        // ... and with the weight gradient fused in (dweight += its term from the same rows): the
        // input gradient's bits unchanged, bf16's weight gradient fp32's on the widened dout, and
        // both the CPU's within the rounding of their sums' order (doubles, then one float).
        float *d_dw_want = dfloat(dw0, C), *d_dw_got = dfloat(dw0, C);
        cuda_residual_rmsnorm_backward(ctx, d_want, NULL, d_dw_want, d_resid, d_dout_r, d_inp, d_w, d_rstd, N, C);
        cuda_residual_rmsnorm_backward_bf16(ctx, d_got, d_got16, d_dw_got, d_resid, d_dout16, d_inp, d_w, d_rstd, N,
                                            C);
        float *want = fetch(d_want, NC), *got = fetch(d_got, NC);
        check_true("residual_rmsnorm_backward_bf16: fp32's on the widened dout, bitwise",
                   memcmp(want, got, sizeof(float) * NC) == 0);
        check_rounded("residual_rmsnorm_backward_bf16 bf16 copy: its value, rounded", d_got16, d_got, NC);
        float *dw_want = fetch(d_dw_want, C), *dw_got = fetch(d_dw_got, C);
        check_true("residual_rmsnorm_backward_bf16 dweight (+=): fp32's on the widened dout, bitwise",
                   memcmp(dw_want, dw_got, sizeof(float) * C) == 0);
        check_delta("residual_rmsnorm_backward_bf16 dweight (+=) vs CPU", d_dw_got, dw, dw0, C, 1e-2);
        cuda_residual_rmsnorm_backward(ctx, d_want, NULL, NULL, d_resid, d_dout_r, d_inp, d_w, d_rstd, N, C);
        float *alone = fetch(d_want, NC);
        check_true("residual_rmsnorm_backward: dinp's bits the same with dweight fused",
                   memcmp(want, alone, sizeof(float) * NC) == 0);
        upload(d_dw_got, dw0, sizeof(float) * C);
        cuda_residual_rmsnorm_backward(ctx, d_want, NULL, d_dw_got, d_resid, d_dout, d_inp, d_w, d_rstd, N, C);
        check_delta("residual_rmsnorm_backward dweight (+=) vs CPU", d_dw_got, dw, dw0, C, 1e-5);
        free(alone);
        free(dout_r); free(want); free(got); free(dw_want); free(dw_got);
        CUDA_CHECK(cudaFree(d_dout_r)); CUDA_CHECK(cudaFree(d_want)); CUDA_CHECK(cudaFree(d_got));
        CUDA_CHECK(cudaFree(d_dout16)); CUDA_CHECK(cudaFree(d_got16));
        CUDA_CHECK(cudaFree(d_dw_want)); CUDA_CHECK(cudaFree(d_dw_got));
    }
    free(zero); free(term); free(fused); free(accumulated);
    CUDA_CHECK(cudaFree(d_resid)); CUDA_CHECK(cudaFree(d_fused)); CUDA_CHECK(cudaFree(d_fused16));
    free(inp); free(w); free(out); free(rstd); free(dout); free(dinp0); free(dw0);
    free(dinp); free(dw);
    CUDA_CHECK(cudaFree(d_inp)); CUDA_CHECK(cudaFree(d_w)); CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaFree(d_rstd)); CUDA_CHECK(cudaFree(d_dout)); CUDA_CHECK(cudaFree(d_dinp));
    CUDA_CHECK(cudaFree(d_dw));
}

// One linear shape, fp32 and bf16 paths.
// out = resid + the product in the GEMM's epilogue (cuda_linear_forward_residual, fp32 or bf16
// operands) against the same GEMM's product written (d_prod, just computed by the plain form,
// which shares its plan: same shape and alignments) and added after on the host: bitwise, the
// epilogue's alpha acc + beta C with alpha = beta = 1 rounding once, as the add does. Into a
// separate buffer, and in place (out == resid).
static void check_linear_residual(const char *form, const float *d_prod, const void *d_inp, const void *d_W, int IC,
                                  int OC, bool bf16) {
    char name[96];
    const size_t no = (size_t)N * OC;
    float *resid = hrand(no, 1.0f), *want = fetch(d_prod, no);
    for (size_t i = 0; i < no; i++) want[i] += resid[i];
    float *d_resid = dfloat(resid, no), *d_sum = dnan(no);
    for (int in_place = 0; in_place < 2; in_place++) {
        float *dst = in_place ? d_resid : d_sum;
        if (bf16) cuda_linear_forward_residual_bf16(ctx, dst, d_resid, d_inp, d_W, N, IC, OC);
        else cuda_linear_forward_residual(ctx, dst, d_resid, d_inp, d_W, N, IC, OC);
        snprintf(name, sizeof name, "linear_forward_residual %s (%d->%d%s): product + resid", form, IC, OC,
                 in_place ? ", in place" : "");
        check(name, dst, want, no, 0.0);
    }
    free(resid); free(want);
    CUDA_CHECK(cudaFree(d_resid)); CUDA_CHECK(cudaFree(d_sum));
}

static void test_linear_shape(int IC, int OC) {
    char name[96];
    size_t ni = (size_t)N * IC, no = (size_t)N * OC, nw = (size_t)OC * IC;
    float *inp = hrand(ni, 1.0f), *W = hrand(nw, 0.2f), *dout = hrand(no, 1.0f);
    float *out = malloc(sizeof(float) * no);
    float *dinp = hrand(ni, 1.0f), *dW0 = hrand(nw, 1.0f);   // dinp: the reference overwrites it
    float *dW = hcopy(dW0, nw);
    if (!out) abort();
    linear_forward(out, inp, W, N, IC, OC);
    linear_backward_input(dinp, dout, W, N, IC, OC, false);
    linear_backward_weight(dW, dout, inp, N, IC, OC);

    float *d_inp = dfloat(inp, ni), *d_W = dfloat(W, nw), *d_dout = dfloat(dout, no);
    float *d_out = dalloc(sizeof(float) * no);
    float *d_dinp = dnan(ni), *d_dW = dfloat(dW0, nw);   // the input gradient is written: from NaN
    cuda_linear_forward(ctx, d_out, d_inp, d_W, N, IC, OC);
    snprintf(name, sizeof name, "linear_forward fp32 (%d->%d)", IC, OC);
    check(name, d_out, out, no, 1e-5);
    check_linear_residual("fp32", d_out, d_inp, d_W, IC, OC, false);
    cuda_linear_backward_input(ctx, d_dinp, d_dout, d_W, N, IC, OC);
    snprintf(name, sizeof name, "linear_backward_input fp32 (%d->%d, written)", IC, OC);
    check(name, d_dinp, dinp, ni, 1e-5);
    cuda_linear_backward_weight(ctx, d_dW, d_dout, d_inp, N, IC, OC);
    snprintf(name, sizeof name, "linear_backward_weight fp32 (%d->%d, +=)", IC, OC);
    check_delta(name, d_dW, dW, dW0, nw, 1e-5);

    cuda_bf16 *b_inp = dbf16(inp, ni), *b_W = dbf16(W, nw), *b_dout = dbf16(dout, no);
    CUDA_CHECK(cudaFree(d_dinp));
    d_dinp = dnan(ni);
    upload(d_dW, dW0, sizeof(float) * nw);
    cuda_linear_forward_bf16(ctx, d_out, b_inp, b_W, N, IC, OC);
    snprintf(name, sizeof name, "linear_forward bf16 (%d->%d)", IC, OC);
    check(name, d_out, out, no, 1e-2);
    check_linear_residual("bf16", d_out, b_inp, b_W, IC, OC, true);
    cuda_linear_backward_input_bf16(ctx, d_dinp, b_dout, b_W, N, IC, OC);
    snprintf(name, sizeof name, "linear_backward_input bf16 (%d->%d, written)", IC, OC);
    check(name, d_dinp, dinp, ni, 3e-2);
    cuda_linear_backward_weight_bf16(ctx, d_dW, b_dout, b_inp, N, IC, OC);
    snprintf(name, sizeof name, "linear_backward_weight bf16 (%d->%d, +=)", IC, OC);
    check_delta(name, d_dW, dW, dW0, nw, 3e-2);
    {   // the input gradient stored bf16: against the fp32-result form, within one bf16 rounding
        // (2^-8 relative) and a GEMM's own order
        float *want = fetch(d_dinp, ni);
        cuda_bf16 *d_d16 = dfill16(ni, 0x7fc1), *got16 = malloc(sizeof(cuda_bf16) * ni);
        float *got = malloc(sizeof(float) * ni);
        if (!got16 || !got) abort();
        cuda_linear_backward_input_to_bf16(ctx, d_d16, b_dout, b_W, N, IC, OC);
        download(got16, d_d16, sizeof(cuda_bf16) * ni);
        for (size_t i = 0; i < ni; i++) got[i] = bf2f(got16[i]);
        float *d_got = dfloat(got, ni);
        snprintf(name, sizeof name, "linear_backward_input_to_bf16 (%d->%d): the fp32 result's, rounded", IC, OC);
        check(name, d_got, want, ni, 1.0 / 256);
        free(want); free(got16); free(got);
        CUDA_CHECK(cudaFree(d_d16)); CUDA_CHECK(cudaFree(d_got));
    }

    free(inp); free(W); free(dout); free(out); free(dW0); free(dinp); free(dW);
    CUDA_CHECK(cudaFree(d_inp)); CUDA_CHECK(cudaFree(d_W)); CUDA_CHECK(cudaFree(d_dout));
    CUDA_CHECK(cudaFree(d_out)); CUDA_CHECK(cudaFree(d_dinp)); CUDA_CHECK(cudaFree(d_dW));
    CUDA_CHECK(cudaFree(b_inp)); CUDA_CHECK(cudaFree(b_W)); CUDA_CHECK(cudaFree(b_dout));
}

static void test_linear(void) {
    test_linear_shape(C, FF);        // up/gate projection
    test_linear_shape(FF, C);        // down projection
    test_linear_shape(C, V);         // LM head
}

static void test_rope(void) {
    const int half = HD / 2;
    const size_t nt = (size_t)T * half, nx = (size_t)N * NH * HD;
    float *cos_tab = malloc(sizeof(float) * nt), *sin_tab = malloc(sizeof(float) * nt);
    if (!cos_tab || !sin_tab) abort();
    float inv_freq[HD / 2];
    rope_inv_freq(inv_freq, HD, 10000.0f, NULL);
    rope_tables(cos_tab, sin_tab, T, HD, inv_freq);
    float *d_cos = dalloc(sizeof(float) * nt), *d_sin = dalloc(sizeof(float) * nt);
    cuda_rope_tables(ctx, d_cos, d_sin, T, HD, inv_freq);
    check("rope_tables cos", d_cos, cos_tab, nt, 1e-7);
    check("rope_tables sin", d_sin, sin_tab, nt, 1e-7);

    float *x = hrand(nx, 1.0f), *out = malloc(sizeof(float) * nx);
    float *dout = hrand(nx, 1.0f), *dx = hrand(nx, 1.0f);   // dx: the reference overwrites it
    if (!out) abort();
    rope_forward(out, x, cos_tab, sin_tab, B, T, NH, HD);
    rope_backward(dx, dout, cos_tab, sin_tab, B, T, NH, HD);
    // Device runs on the CPU's tables so the kernels are checked on their own.
    upload(d_cos, cos_tab, sizeof(float) * nt);
    upload(d_sin, sin_tab, sizeof(float) * nt);
    float *d_x = dfloat(x, nx), *d_out = dalloc(sizeof(float) * nx);
    float *d_dout = dfloat(dout, nx), *d_dx = dnan(nx);   // written: from NaN
    cuda_rope_forward(ctx, d_out, d_x, d_cos, d_sin, B, T, NH, HD);
    check("rope_forward", d_out, out, nx, 1e-6);
    cuda_rope_forward(ctx, d_x, d_x, d_cos, d_sin, B, T, NH, HD);      // in place
    check("rope_forward in place (out == x)", d_x, out, nx, 1e-6);
    cuda_rope_backward(ctx, d_dx, d_dout, d_cos, d_sin, B, T, NH, HD);
    check("rope_backward dx (written)", d_dx, dx, nx, 1e-6);
    {   // the bf16 form, in place on bf16 x (as the q|k|v GEMM stores it): the fp32 kernel's
        // rotation of the widened x, rounded, bitwise
        float *xw = malloc(sizeof(float) * nx);
        if (!xw) abort();
        for (size_t i = 0; i < nx; i++) xw[i] = bf2f(f2bf(x[i]));
        float *d_xw = dfloat(xw, nx), *d_r = dalloc(sizeof(float) * nx);
        cuda_rope_forward(ctx, d_r, d_xw, d_cos, d_sin, B, T, NH, HD);
        cuda_bf16 *d_x16 = dbf16(x, nx);
        cuda_rope_forward_bf16(ctx, d_x16, d_cos, d_sin, B, T, NH, HD);
        check_rounded("rope_forward_bf16 (in place): fp32's of the widened x, rounded", d_x16, d_r, nx);
        free(xw);
        CUDA_CHECK(cudaFree(d_xw)); CUDA_CHECK(cudaFree(d_r)); CUDA_CHECK(cudaFree(d_x16));
    }
    {   // the bf16 form writes R^T dout into a packed operand: columns [3, 3 + NH HD) of rows NH HD + 5 wide
        const int ld = NH * HD + 5;
        float *d_g = dalloc(sizeof(float) * nx);
        cuda_rope_backward(ctx, d_g, d_dout, d_cos, d_sin, B, T, NH, HD);
        cuda_bf16 *d_p = dfill16((size_t)N * ld, 0x7fc1);
        cuda_rope_backward_bf16(ctx, d_p + 3, ld, d_dout, d_cos, d_sin, B, T, NH, HD);
        check_packed_rounded("rope_backward_bf16: fp32's, rounded, packed", d_p, N, ld, 0x7fc1, 1,
                             (const float *const[]){d_g}, (const int[]){3}, (const int[]){NH * HD});
        CUDA_CHECK(cudaFree(d_g)); CUDA_CHECK(cudaFree(d_p));
    }
    free(cos_tab); free(sin_tab); free(x); free(out); free(dout); free(dx);
    CUDA_CHECK(cudaFree(d_cos)); CUDA_CHECK(cudaFree(d_sin)); CUDA_CHECK(cudaFree(d_x));
    CUDA_CHECK(cudaFree(d_out)); CUDA_CHECK(cudaFree(d_dout)); CUDA_CHECK(cudaFree(d_dx));
}

// cuda_flash_attention_rope_backward_bf16 against the unfused calls it replaces (attention's
// backward, whose fp32 dq and dk the caller made, then cuda_rope_backward_bf16 of each) in one
// packed q|k|v gradient 3 columns wider than q|k|v: dv bitwise, the rotated dq and dk within one
// bf16 rounding (the fused kernels rotate in registers; a compiler may contract the rotation's
// multiply-adds differently in the two kernels), the pad untouched.
static void check_rope_fused(CudaCtx *ctx, int b, int t, int nh, int nkv, int hd, const float *d_dq, const float *d_dk,
                             float *d_dsum, const cuda_bf16 *d_dout16, const cuda_bf16 *d_q16, const cuda_bf16 *d_k16,
                             const cuda_bf16 *d_v16, const cuda_bf16 *d_out16, const float *d_lse) {
    const int half = hd / 2, Q = nh * hd, KV = nkv * hd, ld = Q + 2 * KV + 3;
    const size_t rows = (size_t)b * t, n = rows * ld;
    float *cos_tab = malloc(sizeof(float) * t * half), *sin_tab = malloc(sizeof(float) * t * half);
    if (!cos_tab || !sin_tab) abort();
    for (int p = 0; p < t; p++)
        for (int i = 0; i < half; i++) {
            const double angle = (double)p * pow(10000.0, -2.0 * i / hd);
            cos_tab[p * half + i] = (float)cos(angle), sin_tab[p * half + i] = (float)sin(angle);
        }
    float *d_cos = dfloat(cos_tab, (size_t)t * half), *d_sin = dfloat(sin_tab, (size_t)t * half);
    float *d_sq = dnan((size_t)rows * Q), *d_sk = dnan((size_t)rows * KV);
    cuda_bf16 *d_want = dfill16(n, 0x7fc1), *d_got = dfill16(n, 0x7fc1);
    cuda_flash_attention_backward_bf16(ctx, d_sq, d_sk, d_want + Q + KV, ld, d_dsum, d_dout16, d_q16, d_k16, d_v16,
                                       d_out16, d_lse, b, t, nh, nkv, hd);
    cuda_rope_backward_bf16(ctx, d_want, ld, d_dq, d_cos, d_sin, b, t, nh, hd);
    cuda_rope_backward_bf16(ctx, d_want + Q, ld, d_dk, d_cos, d_sin, b, t, nkv, hd);
    cuda_flash_attention_rope_backward_bf16(ctx, d_got, ld, d_sq, d_sk, d_dsum, d_dout16, d_q16, d_k16, d_v16, d_out16,
                                            d_lse, d_cos, d_sin, b, t, nh, nkv, hd);
    cuda_bf16 *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    if (!want || !got) abort();
    download(want, d_want, n * sizeof *want);
    download(got, d_got, n * sizeof *got);
    double qk_diff = 0.0, qk_max = 0.0, dv_err = 0.0, pad = 0.0;   // q|k: largest difference over largest value
    for (size_t i = 0; i < n; i++) {
        const size_t col = i % ld;
        const double g = bf2f(got[i]), w = bf2f(want[i]);
        if (col >= (size_t)(Q + 2 * KV)) pad += got[i] != 0x7fc1;
        else if (col >= (size_t)(Q + KV)) dv_err += got[i] != want[i];
        else {
            qk_diff = isnan(g) || isnan(w) ? INFINITY : fmax(qk_diff, fabs(g - w));
            qk_max = fmax(qk_max, fabs(w));
        }
    }
    const double qk_err = qk_max > 0.0 ? qk_diff / qk_max : qk_diff;
    char name[160];
    snprintf(name, sizeof name, "flash bf16 B%d T%d NH%d NKV%d HD%d rope fused: dq, dk vs unfused", b, t, nh, nkv, hd);
    report(name, qk_err, 1.0 / 128);
    snprintf(name, sizeof name, "flash bf16 B%d T%d NH%d NKV%d HD%d rope fused: dv bitwise, pad untouched", b, t, nh,
             nkv, hd);
    report(name, dv_err + pad, 0.0);
    free(cos_tab); free(sin_tab); free(want); free(got);
    float *dev[] = {d_cos, d_sin, d_sq, d_sk};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) CUDA_CHECK(cudaFree(dev[i]));
    CUDA_CHECK(cudaFree(d_want)); CUDA_CHECK(cudaFree(d_got));
}

// The size of the terms each element of attention's dq and dk sums, for check_terms: a norm
// that cancellation cannot shrink. q (B, T, NH, HD), k and v (B, T, NKV, HD), att the
// CPU's probabilities (B NH, T, T), causal; dS_ij = scale P_ij (dP_ij - D_i), dP_ij = dout_i . v_j,
// D_i = sum_j P_ij dP_ij. Writes tq (as q) = scale sum_j P_ij (|dP_ij| + |D_i|) |k_j| and tk (as k)
// = scale sum over the group's heads and i of P_ij (|dP_ij| + |D_i|) |q_i|, each at least the
// magnitude of the exact dq, dk element (|dP - D| <= |dP| + |D|).
static void attention_grad_terms(float *tq, float *tk, const float *att, const float *dout, const float *q,
                                 const float *k, const float *v, int B, int T, int NH, int NKV, int HD) {
    const int group = NH / NKV, ldq = NH * HD, ldk = NKV * HD;
    const double scale = 1.0 / sqrt((double)HD);
    double *w = malloc((size_t)T * sizeof *w);   // one row's P_ij (|dP_ij| + |D_i|)
    if (!w) abort();
    memset(tq, 0, (size_t)B * T * ldq * sizeof *tq);
    memset(tk, 0, (size_t)B * T * ldk * sizeof *tk);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const float *p = att + ((size_t)(b * NH + h) * T + i) * T;
                const float *di = dout + ((size_t)b * T + i) * ldq + h * HD;
                double D = 0.0;
                for (int j = 0; j <= i; j++) {
                    const float *vj = v + ((size_t)b * T + j) * ldk + h / group * HD;
                    double dp = 0.0;
                    for (int d = 0; d < HD; d++) dp += (double)di[d] * vj[d];
                    w[j] = dp;
                    D += p[j] * dp;
                }
                for (int j = 0; j <= i; j++) w[j] = p[j] * (fabs(w[j]) + fabs(D)) * scale;
                float *qi = tq + ((size_t)b * T + i) * ldq + h * HD;
                const float *qs = q + ((size_t)b * T + i) * ldq + h * HD;
                for (int j = 0; j <= i; j++) {
                    const size_t kj = ((size_t)b * T + j) * ldk + h / group * HD;
                    for (int d = 0; d < HD; d++) {
                        qi[d] += (float)(w[j] * fabs(k[kj + d]));
                        tk[kj + d] += (float)(w[j] * fabs(qs[d]));
                    }
                }
            }
    free(w);
}

// Flash attention (flash_attention.cu) at one shape, against the CPU reference attention
// (fp32 two-pass softmax over the full (T, T) scores) and against the same tiles run on the
// CPU (tests/gpu_emu/flash_emu.c: what the emulator runs), which must agree to a few ulps: the
// two differ only in expf/logf and fused multiply-adds. The emulated tiles are scalar C (about
// 50 s at T 1024, 32 heads of 128 on one core), so `emulated` picks the shapes that run them.
// bf16: the tensor-core kernels (cuda_flash_attention_*_bf16, given q, k, v and dout rounded to bf16
// as bf16 mode keeps them) against the same fp32 CPU reference on the unrounded inputs, at the bf16 GEMMs' bounds, and against the emulator's bf16
// tiles, which model each 16-term mma as a sum in index order: the tensor core's own order moves
// a sum by a few fp32 ulps, and now and then that flips one bf16 rounding of a probability or a
// score gradient. Summing the 16 in another order on the CPU (even and odd terms apart) moved
// the results by at most 6.5e-6 (norm-relative, T 1024, HD 64). The bf16 out is rounded too (on
// both sides, and the emulated backward reads the rounded out as the GPU's does): a difference
// of a few fp32 ulps flips its rounding for about 1 value in 4000 by 1 bf16 ulp (2^-8), about
// 6e-5 in norm; 1e-3 for out and dv leaves 15x and still catches a wrong tile (O(1)).
// dq and dk against the emulated tiles are measured against the size of their terms
// (check_terms, attention_grad_terms), not their own norm: each sums dS_ij = P_ij (dP_ij - D_i)
// times k or q, and D_i = sum_j P_ij dP_ij cancels dP_ij. At T 1 it cancels whole (P = 1, D =
// dP: the gradient is zero), and in bf16 D and dP are the same products summed in two orders
// (rowsum(dout . out) and the mma's dout v^T), so each side's dq, dk is its own rounding noise
// (norms about 3e-7 and 4.5e-7 on an H200, 2026-11-27, 1.6 apart relatively, which failed the
// norm-relative check). The terms' norm is 5 to 27 times dq's and dk's on these shapes (0.24
// to 0.037 of it, least at T 1024's dk; 0 at T 1), so the bounds are 1e-4 (bf16) and 1e-6 (fp32):
// the H200's largest errors were 7e-6 and 3e-8 so measured (its norm-relative ones times those
// ratios), and a wrong tile, about 1/4 of a gradient's norm, is over 1e-3 of the terms' norm.
static void test_flash_attention_at(int b, int t, int nh, int nkv, int hd, bool emulated, bool bf16) {
    const size_t nq = (size_t)b * t * nh * hd, nk = (size_t)b * t * nkv * hd;
    const size_t na = (size_t)b * nh * t * t, nr = (size_t)b * nh * t;
    float *q = hrand(nq, 1.0f), *k = hrand(nk, 1.0f), *v = hrand(nk, 1.0f), *dout = hrand(nq, 1.0f);
    float *out = malloc(sizeof(float) * nq), *att = malloc(sizeof(float) * na);
    float *scratch = malloc(sizeof(float) * na);
    // the gradients are written (the CPU's and the device's): every form starts them at NaN
    float *dq = hnan(nq), *dk = hnan(nk), *dv = hnan(nk);
    float *eout = malloc(sizeof(float) * nq), *e_lse = malloc(sizeof(float) * nr);
    float *edsum = malloc(sizeof(float) * nr);
    float *edq = hnan(nq), *edk = hnan(nk), *edv = hnan(nk);
    float *tq = malloc(sizeof(float) * nq), *tk = malloc(sizeof(float) * nk);   // dq's, dk's terms' size
    if (!out || !att || !scratch || !eout || !e_lse || !edsum || !tq || !tk) abort();
    attention_forward(out, att, q, k, v, b, t, nh, nkv, hd);
    attention_backward(dq, dk, dv, scratch, dout, q, k, v, att, b, t, nh, nkv, hd);
    if (emulated) attention_grad_terms(tq, tk, att, dout, q, k, v, b, t, nh, nkv, hd);
    if (emulated) {   // the bf16 form's q, k, v and dout as the device gets them: rounded (eq, ek, ev, ed)
        float *eq = hcopy(q, nq), *ek = hcopy(k, nk), *ev = hcopy(v, nk), *ed = hcopy(dout, nq);
        for (size_t i = 0; bf16 && i < nq; i++) eq[i] = bf2f(f2bf(eq[i])), ed[i] = bf2f(f2bf(ed[i]));
        for (size_t i = 0; bf16 && i < nk; i++) ek[i] = bf2f(f2bf(ek[i])), ev[i] = bf2f(f2bf(ev[i]));
        (bf16 ? flash_emu_forward_bf16 : flash_emu_forward)(eout, e_lse, eq, ek, ev, b, t, nh, nkv, hd);
        for (size_t i = 0; bf16 && i < nq; i++) eout[i] = bf2f(f2bf(eout[i]));   // the bf16 form's out
        (bf16 ? flash_emu_backward_bf16 : flash_emu_backward)(edq, edk, edv, edsum, ed, eq, ek, ev, eout, e_lse, b,
                                                              t, nh, nkv, hd);
        for (size_t i = 0; bf16 && i < nk; i++) edv[i] = bf2f(f2bf(edv[i]));   // the bf16 form's dv, rounded
        free(eq); free(ek); free(ev); free(ed);
    }
    const double cpu_out = bf16 ? 1e-2 : 1e-5, cpu_grad = bf16 ? 3e-2 : 1e-4;
    const double emu_out = bf16 ? 1e-3 : 1e-6, emu_lse = bf16 ? 1e-4 : 1e-6, emu_grad = bf16 ? 1e-3 : 1e-5;
    const double emu_terms = bf16 ? 1e-4 : 1e-6;   // dq, dk against their terms' size

    float *d_q = dfloat(q, nq), *d_k = dfloat(k, nk), *d_v = dfloat(v, nk), *d_dout = dfloat(dout, nq);
    float *d_out = dalloc(sizeof(float) * nq), *d_lse = dalloc(sizeof(float) * nr);
    cuda_bf16 *d_out16 = dalloc(sizeof(cuda_bf16) * nq);   // the bf16 form's out
    // the bf16 form's q, k, v (the emulated tiles round the fp32 ones on load: the same values)
    cuda_bf16 *d_q16 = dbf16(q, nq), *d_k16 = dbf16(k, nk), *d_v16 = dbf16(v, nk), *d_dout16 = dbf16(dout, nq);
    float *d_dsum = dalloc(sizeof(float) * nr);
    float *d_dq = dnan(nq), *d_dk = dnan(nk), *d_dv = dnan(nk);
    char name[160];
#define FLASH_CHECK(what, fn, ...)                                                                  \
    do {                                                                                           \
        snprintf(name, sizeof name, "flash%s B%d T%d NH%d NKV%d HD%d %s", bf16 ? " bf16" : "", b, t, nh, nkv, hd, \
                 what);                                                                            \
        fn(name, __VA_ARGS__);                                                                     \
    } while (0)
    if (bf16) {   // out in bf16; widened into d_out (exactly: cuda_bf16_to_f32) to compare
        cuda_flash_attention_forward_bf16(ctx, d_out16, d_lse, d_q16, d_k16, d_v16, b, t, nh, nkv, hd);
        cuda_bf16_to_f32(ctx, d_out, d_out16, nq);
    } else {
        cuda_flash_attention_forward(ctx, d_out, d_lse, d_q, d_k, d_v, b, t, nh, nkv, hd);
    }
    FLASH_CHECK("out vs CPU", check, d_out, out, nq, cpu_out);
    if (emulated) FLASH_CHECK("out vs emulated tiles", check, d_out, eout, nq, emu_out);
    if (emulated) FLASH_CHECK("lse vs emulated tiles", check, d_lse, e_lse, nr, emu_lse);
    if (bf16) {   // dv written, rounded, into a packed operand 5 columns wider: widened into d_dv to compare
        const size_t ld = (size_t)nkv * hd + 5, rows = (size_t)b * t, width = (size_t)nkv * hd;
        cuda_bf16 *d_p = dfill16(rows * ld, 0x7fc1);
        cuda_flash_attention_backward_bf16(ctx, d_dq, d_dk, d_p, (int)ld, d_dsum, d_dout16, d_q16, d_k16, d_v16, d_out16,
                                           d_lse, b, t, nh, nkv, hd);
        cuda_bf16 *p = malloc(rows * ld * sizeof *p);
        float *w = malloc(nk * sizeof *w);
        if (!p || !w) abort();
        download(p, d_p, rows * ld * sizeof *p);
        size_t strays = 0;
        for (size_t i = 0; i < rows * ld; i++) {
            if (i % ld < width) w[i / ld * width + i % ld] = bf2f(p[i]);
            else strays += p[i] != 0x7fc1;
        }
        upload(d_dv, w, nk * sizeof *w);
        snprintf(name, sizeof name, "flash bf16 B%d T%d NH%d NKV%d HD%d dv packed: gaps untouched", b, t, nh, nkv, hd);
        report(name, (double)strays, 0.0);
        cuda_ctx_synchronize(ctx);   // w is freed next
        free(p); free(w);
        CUDA_CHECK(cudaFree(d_p));
        check_rope_fused(ctx, b, t, nh, nkv, hd, d_dq, d_dk, d_dsum, d_dout16, d_q16, d_k16, d_v16, d_out16, d_lse);
    } else {
        cuda_flash_attention_backward(ctx, d_dq, d_dk, d_dv, d_dsum, d_dout, d_q, d_k, d_v, d_out, d_lse, b, t, nh, nkv,
                                      hd);
    }
    FLASH_CHECK("dq (written) vs CPU", check, d_dq, dq, nq, cpu_grad);
    FLASH_CHECK("dk (written, GQA) vs CPU", check, d_dk, dk, nk, cpu_grad);
    FLASH_CHECK("dv (written, GQA) vs CPU", check, d_dv, dv, nk, cpu_grad);
    if (emulated) {
        FLASH_CHECK("dq vs emulated tiles (of terms)", check_terms, d_dq, edq, tq, nq, emu_terms);
        FLASH_CHECK("dk vs emulated tiles (of terms)", check_terms, d_dk, edk, tk, nk, emu_terms);
        FLASH_CHECK("dv vs emulated tiles", check, d_dv, edv, nk, emu_grad);
    }
#undef FLASH_CHECK
    float *host[] = {q, k, v, dout, out, att, scratch, dq, dk, dv, eout, e_lse, edsum, edq, edk, edv, tq, tk};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
    float *dev[] = {d_q, d_k, d_v, d_dout, d_out, d_lse, d_dsum, d_dq, d_dk, d_dv};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) CUDA_CHECK(cudaFree(dev[i]));
    cuda_bf16 *dev16[] = {d_out16, d_q16, d_k16, d_v16, d_dout16};
    for (size_t i = 0; i < sizeof dev16 / sizeof dev16[0]; i++) CUDA_CHECK(cudaFree(dev16[i]));
}

// The file's small shape, then issue 30's: T in {1, 1024}, HD in {24, 64, 128}, GQA 32/8;
// against the emulated tiles at every shape but T 1024 with HD 24 and 128 (time). The bf16
// (tensor-core) kernels at the small shape, T 1 and 1024 at HD 64 (the 125m preset's), a ragged
// T over four 64-row tiles at HD 128, HD 24, which they do not take (the fp32 kernels run), and
// a ragged T without grouped queries (as 125m has them: RoPE's backward fused into dk as well).
static void test_attention(void) {
    test_flash_attention_at(B, T, NH, NKV, HD, true, false);
    const int Ts[] = {1, 1024}, HDs[] = {24, 64, 128};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) test_flash_attention_at(1, Ts[i], 32, 8, HDs[j], Ts[i] == 1 || HDs[j] == 64, false);
    test_flash_attention_at(B, T, NH, NKV, HD, true, true);
    test_flash_attention_at(1, 1, 32, 8, 64, true, true);
    test_flash_attention_at(1, 1024, 32, 8, 64, false, true);
    test_flash_attention_at(2, 200, 8, 2, 128, true, true);
    test_flash_attention_at(1, 100, 8, 2, 24, true, true);
    test_flash_attention_at(2, 130, 4, 4, 64, true, true);   // no grouped queries: RoPE fused into dk too (125m's)
}

// SwiGLU's bf16 forms where they move 16 bytes a load (cudaMalloc's buffers are aligned): the
// forward over a length with a tail past the vectors (3 x 173 = 64 x 8 + 7), the packed
// backward at a width and stride of whole vectors (176 and 2 x 176 + 8), each against the fp32
// forms on the bf16 values widened, rounded. (test_swiglu_residual's shapes take the forward
// without a tail and the backward one value at a time.)
static void test_swiglu_vectors(void) {
    const int rows = 3, fwd = 173, bwd = 176, ld = 2 * bwd + 8;
    const size_t n = (size_t)rows * bwd;   // enough for both
    float *gate = hrand(n, 4.0f), *up = hrand(n, 2.0f), *dout = hrand(n, 1.0f);
    for (size_t i = 0; i < n; i++) {   // bf16 values, so the fp32 forms read what the bf16 forms read
        gate[i] = bf2f(f2bf(gate[i]));
        up[i] = bf2f(f2bf(up[i]));
        dout[i] = bf2f(f2bf(dout[i]));
    }
    float *d_gate = dfloat(gate, n), *d_up = dfloat(up, n), *d_dout = dfloat(dout, n);
    cuda_bf16 *d_gate16 = dbf16(gate, n), *d_up16 = dbf16(up, n), *d_dout16 = dbf16(dout, n);
    float *d_out = dalloc(sizeof(float) * n), *d_g = dalloc(sizeof(float) * n), *d_u = dalloc(sizeof(float) * n);
    cuda_bf16 *d_out16 = dfill16(n, 0x7fc1), *d_p = dfill16((size_t)rows * ld, 0x7fc1);
    cuda_swiglu_forward(ctx, d_out, d_gate, d_up, rows, fwd);
    cuda_swiglu_forward_bf16(ctx, d_out16, d_gate16, d_up16, rows, fwd);
    check_rounded("swiglu_forward_bf16 by vectors, a tail of 7: fp32's rounded", d_out16, d_out, (size_t)rows * fwd);
    cuda_swiglu_backward(ctx, d_g, d_u, d_dout, d_gate, d_up, rows, bwd);
    cuda_swiglu_backward_bf16(ctx, d_p, ld, d_dout16, d_gate16, d_up16, rows, bwd);
    check_packed_rounded("swiglu_backward_bf16 by vectors: fp32's rounded, packed", d_p, rows, ld, 0x7fc1, 2,
                         (const float *const[]){d_g, d_u}, (const int[]){0, bwd}, (const int[]){bwd, bwd});
    free(gate); free(up); free(dout);
    CUDA_CHECK(cudaFree(d_gate)); CUDA_CHECK(cudaFree(d_up)); CUDA_CHECK(cudaFree(d_dout));
    CUDA_CHECK(cudaFree(d_gate16)); CUDA_CHECK(cudaFree(d_up16)); CUDA_CHECK(cudaFree(d_dout16));
    CUDA_CHECK(cudaFree(d_out)); CUDA_CHECK(cudaFree(d_g)); CUDA_CHECK(cudaFree(d_u));
    CUDA_CHECK(cudaFree(d_out16)); CUDA_CHECK(cudaFree(d_p));
}

static void test_swiglu_residual(void) {
    const size_t n = (size_t)N * FF;
    float *gate = hrand(n, 4.0f), *up = hrand(n, 2.0f), *out = malloc(sizeof(float) * n);
    float *dout = hrand(n, 1.0f), *dg = hrand(n, 1.0f), *du = hrand(n, 1.0f);   // dg, du: overwritten
    if (!out) abort();
    swiglu_forward(out, gate, up, N, FF);
    swiglu_backward(dg, du, dout, gate, up, N, FF);
    float *d_gate = dfloat(gate, n), *d_up = dfloat(up, n), *d_out = dalloc(sizeof(float) * n);
    float *d_dout = dfloat(dout, n), *d_dg = dnan(n), *d_du = dnan(n);   // written: from NaN
    cuda_swiglu_forward(ctx, d_out, d_gate, d_up, N, FF);
    check("swiglu_forward", d_out, out, n, 1e-6);
    // The bf16 forms read gate and up in bf16 (as the gate|up GEMM stores them): the fp32 forms
    // run on the same values widened are their reference, rounded.
    float *gate_r = malloc(sizeof(float) * n), *up_r = malloc(sizeof(float) * n);
    if (!gate_r || !up_r) abort();
    for (size_t i = 0; i < n; i++) gate_r[i] = bf2f(f2bf(gate[i])), up_r[i] = bf2f(f2bf(up[i]));
    float *d_gate_r = dfloat(gate_r, n), *d_up_r = dfloat(up_r, n), *d_out_r = dalloc(sizeof(float) * n);
    cuda_bf16 *d_gate16 = dbf16(gate, n), *d_up16 = dbf16(up, n);
    cuda_swiglu_forward(ctx, d_out_r, d_gate_r, d_up_r, N, FF);
    cuda_bf16 *d_out16 = dalloc(sizeof(cuda_bf16) * n);
    cuda_swiglu_forward_bf16(ctx, d_out16, d_gate16, d_up16, N, FF);
    check_rounded("swiglu_forward_bf16: fp32's on bf16 inputs, rounded", d_out16, d_out_r, n);
    CUDA_CHECK(cudaFree(d_out16)); CUDA_CHECK(cudaFree(d_out_r));
    cuda_swiglu_backward(ctx, d_dg, d_du, d_dout, d_gate, d_up, N, FF);
    check("swiglu_backward dgate (written)", d_dg, dg, n, 1e-6);
    check("swiglu_backward dup (written)", d_du, du, n, 1e-6);
    {   // the bf16 form (dout bf16 too) writes dgate | dup side by side: rows 2 FF + 3 wide
        const int ld = 2 * FF + 3;
        float *d_g = dalloc(sizeof(float) * n), *d_u = dalloc(sizeof(float) * n), *dout_r = malloc(sizeof(float) * n);
        if (!dout_r) abort();
        for (size_t i = 0; i < n; i++) dout_r[i] = bf2f(f2bf(dout[i]));
        float *d_dout_r = dfloat(dout_r, n);
        cuda_bf16 *d_dout16 = dbf16(dout, n);
        cuda_swiglu_backward(ctx, d_g, d_u, d_dout_r, d_gate_r, d_up_r, N, FF);
        cuda_bf16 *d_p = dfill16((size_t)N * ld, 0x7fc1);
        cuda_swiglu_backward_bf16(ctx, d_p, ld, d_dout16, d_gate16, d_up16, N, FF);
        check_packed_rounded("swiglu_backward_bf16: fp32's on bf16 inputs, rounded, packed", d_p, N, ld, 0x7fc1, 2,
                             (const float *const[]){d_g, d_u}, (const int[]){0, FF}, (const int[]){FF, FF});
        free(dout_r);
        CUDA_CHECK(cudaFree(d_g)); CUDA_CHECK(cudaFree(d_u)); CUDA_CHECK(cudaFree(d_p));
        CUDA_CHECK(cudaFree(d_dout_r)); CUDA_CHECK(cudaFree(d_dout16));
    }
    free(gate_r); free(up_r);
    CUDA_CHECK(cudaFree(d_gate_r)); CUDA_CHECK(cudaFree(d_up_r));
    CUDA_CHECK(cudaFree(d_gate16)); CUDA_CHECK(cudaFree(d_up16));

    free(gate); free(up); free(out); free(dout); free(dg); free(du);
    CUDA_CHECK(cudaFree(d_gate)); CUDA_CHECK(cudaFree(d_up)); CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaFree(d_dout)); CUDA_CHECK(cudaFree(d_dg)); CUDA_CHECK(cudaFree(d_du));
}

static void test_crossentropy(void) {
    const size_t n = (size_t)N * V;
    int32_t targets[N];
    int nonpad = 0;
    for (int i = 0; i < N; i++) {
        targets[i] = i % 7 == 3 ? -1 : (int32_t)((frand() + 1.0f) * 0.5f * (V - 1));
        nonpad += targets[i] >= 0;
    }
    const float scale = 1.0f / (float)nonpad;
    float *logits = hrand(n, 4.0f), *dlogits = malloc(sizeof(float) * n);
    if (!dlogits) abort();
    double loss = crossentropy_forward_backward(dlogits, logits, targets, N, V, scale);

    int32_t *d_t = dalloc(sizeof targets);
    upload(d_t, targets, sizeof targets);
    float *d_logits = dfloat(logits, n), *d_dlogits = dalloc(sizeof(float) * n);
    double *d_loss = dalloc(sizeof(double));
    cuda_zero(ctx, d_loss, sizeof(double));
    cuda_crossentropy_forward_backward(ctx, d_dlogits, d_loss, d_logits, d_t, N, V, scale);
    check_scalar("crossentropy loss", cuda_fetch_double(ctx, d_loss), loss, 1e-6);
    check("crossentropy dlogits", d_dlogits, dlogits, n, 1e-6);
    // In place (dlogits == logits), then loss only: the device loss accumulates (+=).
    cuda_crossentropy_forward_backward(ctx, d_logits, d_loss, d_logits, d_t, N, V, scale);
    check("crossentropy dlogits in place", d_logits, dlogits, n, 1e-6);
    upload(d_logits, logits, sizeof(float) * n);
    cuda_crossentropy_forward_backward(ctx, NULL, d_loss, d_logits, d_t, N, V, scale);
    check_scalar("crossentropy loss accumulates (3 calls)", cuda_fetch_double(ctx, d_loss),
                 3.0 * loss, 1e-6);
    free(logits); free(dlogits);
    CUDA_CHECK(cudaFree(d_t)); CUDA_CHECK(cudaFree(d_logits)); CUDA_CHECK(cudaFree(d_dlogits));
    CUDA_CHECK(cudaFree(d_loss));
}

// The fused classifier against the unfused CPU path (linear_forward, crossentropy, the two
// linear backwards) at a real vocabulary (Llama's 32000, GPT-2's 50257), with rows enough for
// several chunks of classifier.cu's
// (the last one short); fp32 bounds as the linears' (only the order of the sums over rows
// changes: dW sums chunk by chunk), bf16 as the bf16 GEMMs'.
static void test_classifier(int VL) {
    // Rows enough for two whole gradient groups of the bf16 form and a short third, itself a
    // whole chunk and half of one: 524 rows a chunk and 2096 a group at 32000 on a GPU (4978
    // rows), 332 and 1328 at 50257 (3154); the emulator's 16 KiB chunks are a row or a few, and
    // 701 rows end in a short group there.
    const int R = cuda_classifier_chunk_rows(1 << 30, VL), G = cuda_classifier_group_rows(1 << 30, VL, true);
    const int NR = 2 * G + R + R / 2 > 701 ? 2 * G + R + R / 2 : 701;
    const size_t nx = (size_t)NR * C, nw = (size_t)VL * C, nl = (size_t)NR * VL;
    int32_t *targets = malloc(NR * sizeof *targets);
    if (!targets) abort();
    for (int i = 0; i < NR; i++) targets[i] = i % 7 == 3 ? -1 : (int32_t)((frand() + 1.0f) * 0.5f * (VL - 1));
    // scale 1 and small starting weight gradients: dW's increments are compared (check_delta),
    // and with 1 / nonpad they would drown in the starting values' rounding. dx is written:
    // the device's starts at NaN.
    const float scale = 1.0f;
    float *x = hrand(nx, 1.0f), *W = hrand(nw, 0.2f), *logits = malloc(sizeof(float) * nl);
    float *dx = hrand(nx, 0.01f), *dW0 = hrand(nw, 0.01f), *dW = hcopy(dW0, nw);
    if (!logits) abort();
    linear_forward(logits, x, W, NR, C, VL);
    const double loss = crossentropy_forward_backward(logits, logits, targets, NR, VL, scale);
    linear_backward_input(dx, logits, W, NR, C, VL, false);
    linear_backward_weight(dW, logits, x, NR, C, VL);
    char what[96];
    snprintf(what, sizeof what, "classifier: %d rows at V=%d, groups of %d (%d-row chunks), the last short", NR, VL,
             G, R);
    check_true(what, R < G && 2 * G < NR && NR % G != 0 && cuda_classifier_group_rows(NR, VL, false) == R);

    int32_t *d_t = dalloc(NR * sizeof *targets);
    upload(d_t, targets, NR * sizeof *targets);
    float *d_x = dfloat(x, nx), *d_W = dfloat(W, nw), *d_dx = dnan(nx), *d_dW = dfloat(dW0, nw);
    double *d_loss = dalloc(sizeof(double));
    cuda_zero(ctx, d_loss, sizeof(double));
    cuda_ctx_reserve(ctx, cuda_classifier_arena_bytes(NR, VL, true));
    cuda_classifier(ctx, d_loss, d_dx, d_dW, d_x, d_W, d_t, NR, C, VL, scale);
    check_scalar("classifier fp32 loss", cuda_fetch_double(ctx, d_loss), loss, 1e-6);
    check("classifier fp32 dx (written)", d_dx, dx, nx, 1e-5);
    check_delta("classifier fp32 dW (+=)", d_dW, dW, dW0, nw, 1e-5);
    // Each part alone: the loss only accumulates, dW only, as the weight half calls it.
    upload(d_dW, dW0, sizeof(float) * nw);
    cuda_classifier(ctx, d_loss, NULL, NULL, d_x, d_W, d_t, NR, C, VL, scale);
    check_scalar("classifier fp32 loss accumulates (2 calls)", cuda_fetch_double(ctx, d_loss), 2.0 * loss, 1e-6);
    cuda_classifier(ctx, NULL, NULL, d_dW, d_x, d_W, d_t, NR, C, VL, scale);
    check_delta("classifier fp32 dW alone (+=)", d_dW, dW, dW0, nw, 1e-5);

    cuda_bf16 *b_x = dbf16(x, nx), *b_W = dbf16(W, nw);
    CUDA_CHECK(cudaFree(d_dx));
    d_dx = dnan(nx);
    upload(d_dW, dW0, sizeof(float) * nw);
    cuda_zero(ctx, d_loss, sizeof(double));
    cuda_classifier_bf16(ctx, d_loss, d_dx, d_dW, b_x, b_W, d_t, NR, C, VL, scale);
    check_scalar("classifier bf16 loss", cuda_fetch_double(ctx, d_loss), loss, 1e-2);
    check("classifier bf16 dx (written)", d_dx, dx, nx, 3e-2);
    check_delta("classifier bf16 dW (+=)", d_dW, dW, dW0, nw, 3e-2);

    free(targets); free(x); free(W); free(logits); free(dW0); free(dx); free(dW);
    CUDA_CHECK(cudaFree(d_t)); CUDA_CHECK(cudaFree(d_x)); CUDA_CHECK(cudaFree(d_W));
    CUDA_CHECK(cudaFree(d_dx)); CUDA_CHECK(cudaFree(d_dW)); CUDA_CHECK(cudaFree(d_loss));
    CUDA_CHECK(cudaFree(b_x)); CUDA_CHECK(cudaFree(b_W));
}

// The fused layer's kernels (engine/model/model_cuda.c "Fused projections"): batched
// projections of one input against one linear each; column blocks packed side by side, fp32
// exact and bf16 rounded as cuda_f32_to_bf16 rounds. (The residual add in the GEMM's epilogue:
// check_linear_residual.)
static void test_fused_layer(void) {
    const size_t nc = (size_t)N * C;
    float *a = hrand(nc, 2.0f), *b = hrand(nc, 2.0f);
    float *d_b = dfloat(b, nc);

    // Three projections (OC = FF) of one input, weights back to back, outputs spaced by `gap`.
    enum { batch = 3 };
    const size_t nw = (size_t)FF * C, no = (size_t)N * FF, gap = no + 64;
    float *W = hrand(batch * nw, 0.2f), *want = malloc(sizeof(float) * batch * gap);
    if (!want) abort();
    for (int k = 0; k < batch; k++) linear_forward(want + k * gap, a, W + k * nw, N, C, FF);
    float *d_x = dfloat(a, nc), *d_W = dfloat(W, batch * nw), *d_o = dalloc(sizeof(float) * batch * gap);
    cuda_linear_forward_shared(ctx, d_o, gap, d_x, d_W, nw, batch, N, C, FF);
    for (int k = 0; k < batch; k++)
        check("linear_forward_shared fp32 (one of 3)", d_o + k * gap, want + k * gap, no, 1e-5);
    cuda_bf16 *b_x = dbf16(a, nc), *b_W = dbf16(W, batch * nw);
    cuda_linear_forward_shared_bf16(ctx, d_o, gap, b_x, b_W, nw, batch, N, C, FF);
    for (int k = 0; k < batch; k++)
        check("linear_forward_shared bf16 (one of 3)", d_o + k * gap, want + k * gap, no, 1e-2);
    {   // outputs stored bf16: the fp32-output form's values within a bf16 rounding (2^-8
        // relative, more than the one rounding's 2^-9 for a different summation order), the
        // gaps between the outputs untouched
        cuda_bf16 *d_o16 = dfill16(batch * gap, 0x7fc1);
        cuda_linear_forward_shared_to_bf16(ctx, d_o16, gap, b_x, b_W, nw, batch, N, C, FF);
        float *d_wide = dalloc(sizeof(float) * no);
        for (int k = 0; k < batch; k++) {
            cuda_bf16_to_f32(ctx, d_wide, d_o16 + k * gap, no);
            float *fp32_out = fetch(d_o + k * gap, no);
            check("linear_forward_shared_to_bf16 (one of 3)", d_wide, fp32_out, no, 1.0 / 256);
            free(fp32_out);
        }
        cuda_bf16 *got = malloc(sizeof(cuda_bf16) * batch * gap);
        if (!got) abort();
        download(got, d_o16, sizeof(cuda_bf16) * batch * gap);
        size_t touched = 0;
        for (int k = 0; k < batch; k++)
            for (size_t i = no; i < gap; i++) touched += got[k * gap + i] != 0x7fc1;
        report("linear_forward_shared_to_bf16: gaps untouched", (double)touched, 0.0);
        free(got);
        CUDA_CHECK(cudaFree(d_o16)); CUDA_CHECK(cudaFree(d_wide));
    }

    // Packing: [a | b] (N, 2C).
    float *packed = malloc(sizeof(float) * 2 * nc);
    if (!packed) abort();
    for (int r = 0; r < N; r++)
        for (int k = 0; k < C; k++) {
            packed[(size_t)r * 2 * C + k] = a[(size_t)r * C + k];
            packed[(size_t)r * 2 * C + C + k] = b[(size_t)r * C + k];
        }
    float *d_p = dalloc(sizeof(float) * 2 * nc);
    cuda_pack_cols(ctx, d_p, 2 * C, d_x, N, C);
    cuda_pack_cols(ctx, d_p + C, 2 * C, d_b, N, C);
    check("pack_cols fp32 (exact)", d_p, packed, 2 * nc, 0.0);

    free(a); free(b); free(W); free(want);
    free(packed);
    CUDA_CHECK(cudaFree(d_b)); CUDA_CHECK(cudaFree(d_x)); CUDA_CHECK(cudaFree(d_W)); CUDA_CHECK(cudaFree(d_o));
    CUDA_CHECK(cudaFree(b_x)); CUDA_CHECK(cudaFree(b_W)); CUDA_CHECK(cudaFree(d_p));
}

static void test_adamw(void) {
    enum { n = 1000 };
    float *p = hrand(n, 1.0f), *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
    if (!m || !v) abort();
    float *d_p = dfloat(p, n), *d_m = dfloat(m, n), *d_v = dfloat(v, n);
    float *d_g = dalloc(sizeof(float) * n);
    cuda_bf16 *d_pb = dalloc(sizeof(cuda_bf16) * n);
    for (int t = 1; t <= 3; t++) {
        // Step 2 clips: the CPU scales its gradients first (grad_scale); the device's are only read.
        const float clip = t == 2 ? 0.37f : 1.0f;
        float *g = hrand(n, 1.0f), *scaled = hcopy(g, n);
        upload(d_g, g, sizeof(float) * n);
        grad_scale(scaled, n, clip);
        adamw_update(p, scaled, m, v, n, t, 1e-3, 0.9, 0.95, 1e-8, 0.1);
        cuda_adamw_update(ctx, d_p, d_pb, d_g, clip, d_m, d_v, n, t, 1e-3, 0.9, 0.95, 1e-8, 0.1);
        if (t == 2) check("adamw leaves the gradients unscaled (exact)", d_g, g, n, 0.0);
        cuda_ctx_synchronize(ctx);                       // g is freed next
        free(g); free(scaled);
    }
    check("adamw params (3 steps, one clipped)", d_p, p, n, 1e-6);
    check("adamw m", d_m, m, n, 1e-6);
    check("adamw v", d_v, v, n, 1e-6);
    float *gp = fetch(d_p, n);
    cuda_bf16 *gb = malloc(sizeof(cuda_bf16) * n);
    if (!gb) abort();
    download(gb, d_pb, sizeof(cuda_bf16) * n);
    int bad = 0;
    for (int i = 0; i < n; i++) bad += gb[i] != f2bf(gp[i]);
    check_true("adamw bf16 working copy == bf16(params)", bad == 0);
    free(p); free(m); free(v); free(gp); free(gb);
    CUDA_CHECK(cudaFree(d_p)); CUDA_CHECK(cudaFree(d_m)); CUDA_CHECK(cudaFree(d_v));
    CUDA_CHECK(cudaFree(d_g)); CUDA_CHECK(cudaFree(d_pb));
}

static void test_gradnorm(void) {
    const size_t n1 = 1000, n2 = 300007;                 // one block; many blocks, ragged
    float *g1 = hrand(n1, 1.0f), *g2 = hrand(n2, 0.1f);
    double want = grad_sum_squares(g1, n1) + grad_sum_squares(g2, n2);
    float *d_g1 = dfloat(g1, n1), *d_g2 = dfloat(g2, n2);
    double *d_ss = dalloc(sizeof(double));
    cuda_zero(ctx, d_ss, sizeof(double));
    cuda_grad_sum_squares(ctx, d_ss, d_g1, n1);
    cuda_grad_sum_squares(ctx, d_ss, d_g2, n2);
    check_scalar("grad_sum_squares (two tensors, +=)", cuda_fetch_double(ctx, d_ss), want, 1e-10);
    free(g1); free(g2);
    CUDA_CHECK(cudaFree(d_g1)); CUDA_CHECK(cudaFree(d_g2)); CUDA_CHECK(cudaFree(d_ss));
}

int main(void) {
    if (cuda_device_count() == 0) {
        printf("no CUDA device visible: skipped\n");
        return 77;
    }
    ctx = cuda_ctx_create(0);
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("device 0: %s (sm_%d%d); N=%d C=%d NH=%d NKV=%d HD=%d FF=%d V=%d\n", prop.name,
           prop.major, prop.minor, N, C, NH, NKV, HD, FF, V);
    test_device();
    test_convert();
    test_embedding();
    test_rmsnorm();
    test_linear();
    test_rope();
    test_attention();
    test_swiglu_residual();
    test_swiglu_vectors();
    test_crossentropy();
    test_classifier(32000);
    test_classifier(50257);
    test_fused_layer();
    test_adamw();
    test_gradnorm();
    cuda_ctx_destroy(ctx);
    printf("test_cuda_kernels: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
