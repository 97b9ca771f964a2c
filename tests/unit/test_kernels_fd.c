// tests/unit/test_kernels_fd.c: the tests of kernels/cpu.
// kernels/cpu against double precision: every fp32 forward against a plain double reference
// written here (independent of the kernel code), every fp32 backward against central finite
// differences of <G, reference_forward(x)> in double for a random upstream gradient G.
// Backward outputs are pre-filled with random values to hold the accumulate (+=) contract.
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include "kernels/cpu/kernels.h"
#include "tests/unit/test_util.h"

#define FD_H 1e-5
#define TOL_FWD 2e-6      // fp32 forward vs double reference, relative norm
#define TOL_GRAD 1e-4     // fp32 backward vs finite differences, relative norm
#define REF_MAX_T 256

// ---- helpers ------------------------------------------------------------------------------
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static double rng_uniform(double lo, double hi) {   // splitmix64 -> [lo, hi)
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return lo + (hi - lo) * (double)(z >> 11) * 0x1.0p-53;
}

static float *frand(size_t n, double lo, double hi) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    assert(x);
    for (size_t i = 0; i < n; i++) x[i] = (float)rng_uniform(lo, hi);
    return x;
}

static float *fcopy(const float *src, size_t n) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    assert(x);
    memcpy(x, src, n * sizeof *x);
    return x;
}

static double *dalloc(size_t n) {
    double *x = calloc(n ? n : 1, sizeof *x);
    assert(x);
    return x;
}

static double *to_double(const float *x, size_t n) {
    double *d = dalloc(n);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static double dot(const double *a, const double *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

// ||got - want|| / ||want||, got in fp32.
static double rel_err(const float *got, const double *want, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

// Relative error of an accumulated gradient: (after - before) against want.
static double rel_err_acc(const float *after, const float *before, const double *want, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double g = (double)after[i] - (double)before[i];
        num += (g - want[i]) * (g - want[i]);
        den += want[i] * want[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

static void report(const char *what, double err, double tol) {
    printf("  %-44s %.3g\n", what, err);
    CHECK(err <= tol, "%s: error %.3g > %.3g", what, err, tol);
}

typedef double (*objective_fn)(void *ctx);

// grad[i] = d f / d x[i] by central differences, perturbing x (one of ctx's inputs) in place.
static void fd_grad(double *grad, double *x, size_t n, objective_fn f, void *ctx) {
    for (size_t i = 0; i < n; i++) {
        double save = x[i];
        x[i] = save + FD_H;
        double fp = f(ctx);
        x[i] = save - FD_H;
        double fm = f(ctx);
        x[i] = save;
        grad[i] = (fp - fm) / (2.0 * FD_H);
    }
}

// ---- embedding ----------------------------------------------------------------------------
typedef struct { double *wte, *G, *out; const int32_t *tok; int N, C; } EmbCtx;

static void ref_embedding(double *out, const int32_t *tok, const double *wte, int N, int C) {
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) out[n * C + c] = wte[tok[n] * C + c];
}

static double obj_embedding(void *p) {
    EmbCtx *e = p;
    ref_embedding(e->out, e->tok, e->wte, e->N, e->C);
    return dot(e->G, e->out, (size_t)e->N * e->C);
}

static void test_embedding(void) {
    enum { N = 9, C = 70, V = 5 };
    const int32_t tok[N] = {3, 0, 3, 4, 1, 3, 0, 2, 3};   // repeats exercise the scatter order
    float *wte = frand(V * C, -1, 1), *out = frand(N * C, -1, 1), *dout = frand(N * C, -1, 1);
    float *dwte = frand(V * C, -1, 1), *dwte0 = fcopy(dwte, V * C);
    EmbCtx e = {to_double(wte, V * C), to_double(dout, N * C), dalloc(N * C), tok, N, C};
    double *want = dalloc(V * C);

    embedding_forward(out, tok, wte, N, C);
    ref_embedding(e.out, tok, e.wte, N, C);
    report("embedding forward", rel_err(out, e.out, N * C), 0.0);
    embedding_backward(dwte, dout, tok, N, C);
    fd_grad(want, e.wte, V * C, obj_embedding, &e);
    report("embedding dwte", rel_err_acc(dwte, dwte0, want, V * C), TOL_GRAD);
    free(wte); free(out); free(dout); free(dwte); free(dwte0);
    free(e.wte); free(e.G); free(e.out); free(want);
}

// ---- rmsnorm ------------------------------------------------------------------------------
typedef struct { double *x, *w, *G, *out; int N, C; double eps; } RmsCtx;

static void ref_rmsnorm(double *out, double *rstd, const double *x, const double *w, int N, int C,
                        double eps) {
    for (int n = 0; n < N; n++) {
        double ss = 0.0;
        for (int c = 0; c < C; c++) ss += x[n * C + c] * x[n * C + c];
        double r = 1.0 / sqrt(ss / C + eps);
        if (rstd) rstd[n] = r;
        for (int c = 0; c < C; c++) out[n * C + c] = x[n * C + c] * r * w[c];
    }
}

static double obj_rmsnorm(void *p) {
    RmsCtx *r = p;
    ref_rmsnorm(r->out, NULL, r->x, r->w, r->N, r->C, r->eps);
    return dot(r->G, r->out, (size_t)r->N * r->C);
}

static void test_rmsnorm(void) {
    enum { N = 6, C = 70 };
    const float eps = 1e-5f;
    float *x = frand(N * C, -2, 2), *w = frand(C, 0.5, 1.5), *dout = frand(N * C, -1, 1);
    float *out = frand(N * C, -1, 1), *rstd = frand(N, -1, 1);
    float *dx = frand(N * C, -1, 1), *dx0 = fcopy(dx, N * C);
    float *dw = frand(C, -1, 1), *dw0 = fcopy(dw, C);
    RmsCtx r = {to_double(x, N * C), to_double(w, C), to_double(dout, N * C), dalloc(N * C), N, C, eps};
    double *want_rstd = dalloc(N), *want_dx = dalloc(N * C), *want_dw = dalloc(C);

    rmsnorm_forward(out, rstd, x, w, N, C, eps);
    ref_rmsnorm(r.out, want_rstd, r.x, r.w, N, C, eps);
    report("rmsnorm forward out", rel_err(out, r.out, N * C), TOL_FWD);
    report("rmsnorm forward rstd", rel_err(rstd, want_rstd, N), TOL_FWD);

    rmsnorm_backward(dx, dw, dout, x, w, rstd, N, C);
    fd_grad(want_dx, r.x, N * C, obj_rmsnorm, &r);
    fd_grad(want_dw, r.w, C, obj_rmsnorm, &r);
    report("rmsnorm dinp", rel_err_acc(dx, dx0, want_dx, N * C), TOL_GRAD);
    report("rmsnorm dweight", rel_err_acc(dw, dw0, want_dw, C), TOL_GRAD);

    // The split halves (NULL outputs) give the same bits as the fused call.
    float *dx_only = fcopy(dx0, N * C), *dw_only = fcopy(dw0, C);
    rmsnorm_backward(dx_only, NULL, dout, x, w, rstd, N, C);
    rmsnorm_backward(NULL, dw_only, dout, x, w, rstd, N, C);
    CHECK(memcmp(dx_only, dx, N * C * sizeof(float)) == 0, "rmsnorm dinp alone differs");
    CHECK(memcmp(dw_only, dw, C * sizeof(float)) == 0, "rmsnorm dweight alone differs");

    // Determinism: a second identical call gives identical bits.
    float *dx2 = fcopy(dx0, N * C), *dw2 = fcopy(dw0, C);
    rmsnorm_backward(dx2, dw2, dout, x, w, rstd, N, C);
    CHECK(memcmp(dx2, dx, N * C * sizeof(float)) == 0 && memcmp(dw2, dw, C * sizeof(float)) == 0,
          "rmsnorm backward not deterministic");

    free(x); free(w); free(dout); free(out); free(rstd); free(dx); free(dx0); free(dw); free(dw0);
    free(dx_only); free(dw_only); free(dx2); free(dw2);
    free(r.x); free(r.w); free(r.G); free(r.out); free(want_rstd); free(want_dx); free(want_dw);
}

// ---- linear -------------------------------------------------------------------------------
typedef struct { double *x, *W, *G, *out; int N, IC, OC; } LinCtx;

static void ref_linear(double *out, const double *x, const double *W, int N, int IC, int OC) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = 0.0;
            for (int i = 0; i < IC; i++) s += x[n * IC + i] * W[o * IC + i];
            out[n * OC + o] = s;
        }
}

static double obj_linear(void *p) {
    LinCtx *l = p;
    ref_linear(l->out, l->x, l->W, l->N, l->IC, l->OC);
    return dot(l->G, l->out, (size_t)l->N * l->OC);
}

static void test_linear(void) {
    enum { N = 7, IC = 13, OC = 5 };
    float *x = frand(N * IC, -1, 1), *W = frand(OC * IC, -1, 1), *dout = frand(N * OC, -1, 1);
    float *out = frand(N * OC, -1, 1);
    float *dx = frand(N * IC, -1, 1), *dx0 = fcopy(dx, N * IC);
    float *dW = frand(OC * IC, -1, 1), *dW0 = fcopy(dW, OC * IC);
    LinCtx l = {to_double(x, N * IC), to_double(W, OC * IC), to_double(dout, N * OC),
                dalloc(N * OC), N, IC, OC};
    double *want_dx = dalloc(N * IC), *want_dW = dalloc(OC * IC);

    linear_forward(out, x, W, N, IC, OC);
    ref_linear(l.out, l.x, l.W, N, IC, OC);
    report("linear forward", rel_err(out, l.out, N * OC), TOL_FWD);
    linear_backward_input(dx, dout, W, N, IC, OC, true);
    linear_backward_weight(dW, dout, x, N, IC, OC);
    fd_grad(want_dx, l.x, N * IC, obj_linear, &l);
    fd_grad(want_dW, l.W, OC * IC, obj_linear, &l);
    report("linear dinp (accumulate)", rel_err_acc(dx, dx0, want_dx, N * IC), TOL_GRAD);
    linear_backward_input(dx0, dout, W, N, IC, OC, false);   // dx0 still holds other numbers
    report("linear dinp (overwrite)", rel_err(dx0, want_dx, N * IC), TOL_GRAD);
    report("linear dW", rel_err_acc(dW, dW0, want_dW, OC * IC), TOL_GRAD);
    free(x); free(W); free(dout); free(out); free(dx); free(dx0); free(dW); free(dW0);
    free(l.x); free(l.W); free(l.G); free(l.out); free(want_dx); free(want_dW);
}

// ---- bias (attention_bias, mlp_bias) -------------------------------------------------------
typedef struct { double *x, *b, *G, *out; int N, OC; } BiasCtx;

// f = sum G * (x + b), x (N, OC) and b (OC) broadcast over rows.
static double obj_bias(void *p) {
    BiasCtx *c = p;
    for (int n = 0; n < c->N; n++)
        for (int o = 0; o < c->OC; o++) c->out[n * c->OC + o] = c->x[n * c->OC + o] + c->b[o];
    return dot(c->G, c->out, (size_t)c->N * c->OC);
}

static void test_bias(void) {
    enum { N = 9, OC = 6 };
    float *x = frand(N * OC, -1, 1), *b = frand(OC, -1, 1), *dout = frand(N * OC, -1, 1);
    float *out = fcopy(x, N * OC), *db = frand(OC, -1, 1), *db0 = fcopy(db, OC);
    BiasCtx c = {to_double(x, N * OC), to_double(b, OC), to_double(dout, N * OC), dalloc(N * OC), N, OC};
    double *want_db = dalloc(OC);
    bias_forward(out, b, N, OC);
    obj_bias(&c);
    report("bias forward", rel_err(out, c.out, N * OC), TOL_FWD);
    bias_backward(db, dout, N, OC);
    fd_grad(want_db, c.b, OC, obj_bias, &c);
    report("bias db", rel_err_acc(db, db0, want_db, OC), TOL_GRAD);
    free(x); free(b); free(dout); free(out); free(db); free(db0);
    free(c.x); free(c.b); free(c.G); free(c.out); free(want_db);
}

// ---- rope ---------------------------------------------------------------------------------
typedef struct { double *x, *G, *out; const double *cs, *sn; int B, T, H, HD; } RopeCtx;

static void ref_rope(double *out, const double *x, const double *cs, const double *sn,
                     int B, int T, int H, int HD) {
    int half = HD / 2;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                const double *xi = x + ((size_t)(b * T + t) * H + h) * HD;
                double *o = out + ((size_t)(b * T + t) * H + h) * HD;
                for (int i = 0; i < half; i++) {
                    double c = cs[t * half + i], s = sn[t * half + i];
                    o[i] = xi[i] * c - xi[i + half] * s;
                    o[i + half] = xi[i + half] * c + xi[i] * s;
                }
            }
}

static double obj_rope(void *p) {
    RopeCtx *r = p;
    ref_rope(r->out, r->x, r->cs, r->sn, r->B, r->T, r->H, r->HD);
    return dot(r->G, r->out, (size_t)r->B * r->T * r->H * r->HD);
}

static void test_rope_tables(void) {
    enum { T = 40, HD = 16 };
    const float theta = 10000.0f;
    float cs[T * HD / 2], sn[T * HD / 2], inv_freq[HD / 2];
    rope_inv_freq(inv_freq, HD, theta, NULL);
    rope_tables(cs, sn, T, HD, inv_freq);
    double err = 0.0, maxdev = 0.0;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < HD / 2; i++) {
            // The contract: fp32 inv_freq and angle, cos/sin of that angle rounded once.
            float angle = (float)t * (1.0f / powf(theta, (float)(2 * i) / (float)HD));
            err = fmax(err, fabs(cs[t * HD / 2 + i] - (float)cos((double)angle)));
            err = fmax(err, fabs(sn[t * HD / 2 + i] - (float)sin((double)angle)));
            // And it stays close to the exact double-precision rotation angle.
            double exact = t * pow(theta, -2.0 * i / HD);
            maxdev = fmax(maxdev, fabs(cs[t * HD / 2 + i] - cos(exact)));
        }
    report("rope tables vs fp32-angle contract", err, 0.0);
    report("rope tables vs exact angle (abs)", maxdev, 1e-5);
}

// Llama 3.1's rescaled frequencies, bit for bit what transformers computes
// (tests/reference/rope_llama3.py printed the table).
static void test_rope_llama3(void) {
    static const struct {
        int HD;
        float theta;
        RopeLlama3 l;
        float want[64];
    } cases[] = {
    {128, 500000.0f, {8.0f, 1.0f, 4.0f, 8192}, {0x1.0000000000000p+0f, 0x1.a115820000000p-1f, 0x1.53c38c0000000p-1f, 0x1.14c7080000000p-1f, 0x1.c2ef780000000p-2f, 0x1.6f56fa0000000p-2f, 0x1.2b3dc60000000p-2f, 0x1.e788c20000000p-3f, 0x1.8d27600000000p-3f, 0x1.4387400000000p-3f, 0x1.078d400000000p-3f, 0x1.ad63380000000p-4f, 0x1.5dc95a0000000p-4f, 0x1.1cf1300000000p-4f, 0x1.d03cce0000000p-5f, 0x1.7a2d080000000p-5f, 0x1.3411900000000p-5f, 0x1.f5ea7e0000000p-6f, 0x1.98de920000000p-6f, 0x1.4d12720000000p-6f, 0x1.0f53860000000p-6f, 0x1.ba0dd80000000p-7f, 0x1.681ada0000000p-7f, 0x1.2558fe0000000p-7f, 0x1.ddee9e0000000p-8f, 0x1.8554ec0000000p-8f, 0x1.3d28040000000p-8f, 0x1.025c6a0000000p-8f, 0x1.a4ee400000000p-9f, 0x1.1bfa0c0000000p-9f, 0x1.67a23a0000000p-10f, 0x1.c12f3c0000000p-11f, 0x1.132ba40000000p-11f, 0x1.47e2100000000p-12f, 0x1.765ba40000000p-13f, 0x1.90d10c0000000p-14f, 0x1.46831a0000000p-14f, 0x1.09fb7e0000000p-14f, 0x1.b159020000000p-15f, 0x1.6103320000000p-15f, 0x1.1f91f00000000p-15f, 0x1.d484de0000000p-16f, 0x1.7da9e80000000p-16f, 0x1.36e8ea0000000p-16f, 0x1.fa8b860000000p-17f, 0x1.9ca3ea0000000p-17f, 0x1.5024d60000000p-17f, 0x1.11d41e0000000p-17f, 0x1.be21880000000p-18f, 0x1.6b6d0e0000000p-18f, 0x1.280d960000000p-18f, 0x1.e257000000000p-19f, 0x1.88ec200000000p-19f, 0x1.4014d20000000p-19f, 0x1.04be680000000p-19f, 0x1.a8d0100000000p-20f, 0x1.5a0f4e0000000p-20f, 0x1.19e8000000000p-20f, 0x1.cb4a9a0000000p-21f, 0x1.76258e0000000p-21f, 0x1.30c94e0000000p-21f, 0x1.f091840000000p-22f, 0x1.9483600000000p-22f, 0x1.4985fe0000000p-22f}},
    {64, 500000.0f, {8.0f, 1.0f, 4.0f, 8192}, {0x1.0000000000000p+0f, 0x1.53c38c0000000p-1f, 0x1.c2ef780000000p-2f, 0x1.2b3dc60000000p-2f, 0x1.8d27600000000p-3f, 0x1.078d400000000p-3f, 0x1.5dc95a0000000p-4f, 0x1.d03cce0000000p-5f, 0x1.3411900000000p-5f, 0x1.98de920000000p-6f, 0x1.0f53860000000p-6f, 0x1.681ada0000000p-7f, 0x1.ddee9e0000000p-8f, 0x1.3d28040000000p-8f, 0x1.a4ee400000000p-9f, 0x1.67a23a0000000p-10f, 0x1.132ba40000000p-11f, 0x1.765ba40000000p-13f, 0x1.46831a0000000p-14f, 0x1.b159020000000p-15f, 0x1.1f91f00000000p-15f, 0x1.7da9e80000000p-16f, 0x1.fa8b860000000p-17f, 0x1.5024d60000000p-17f, 0x1.be21880000000p-18f, 0x1.280d960000000p-18f, 0x1.88ec200000000p-19f, 0x1.04be680000000p-19f, 0x1.5a0f4e0000000p-20f, 0x1.cb4a9a0000000p-21f, 0x1.30c94e0000000p-21f, 0x1.9483600000000p-22f}},
    {16, 10000.0f, {4.0f, 1.0f, 4.0f, 64}, {0x1.0000000000000p+0f, 0x1.04c26c0000000p-2f, 0x1.a137120000000p-6f, 0x1.030dc60000000p-7f, 0x1.47ae140000000p-9f, 0x1.9e7c700000000p-11f, 0x1.0624de0000000p-12f, 0x1.4b96c00000000p-14f}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float got[64];
        rope_inv_freq(got, cases[c].HD, cases[c].theta, &cases[c].l);
        int same = 0;
        for (int i = 0; i < cases[c].HD / 2; i++) same += got[i] == cases[c].want[i];
        CHECK(same == cases[c].HD / 2, "llama3 inv_freq, head_dim %d: %d of %d values equal transformers'", cases[c].HD,
              same, cases[c].HD / 2);
    }
}

static void test_rope_heads(int B, int T, int H, int HD) {
    size_t n = (size_t)B * T * H * HD;
    float *cs = frand(T * HD / 2, 0, 1), *sn = frand(T * HD / 2, 0, 1), inv_freq[64];
    rope_inv_freq(inv_freq, HD, 500000.0f, NULL);
    rope_tables(cs, sn, T, HD, inv_freq);
    float *x = frand(n, -1, 1), *out = frand(n, -1, 1), *dout = frand(n, -1, 1);
    float *dx = frand(n, -1, 1), *dx0 = fcopy(dx, n);
    double *dcs = to_double(cs, T * HD / 2), *dsn = to_double(sn, T * HD / 2);
    RopeCtx r = {to_double(x, n), to_double(dout, n), dalloc(n), dcs, dsn, B, T, H, HD};
    double *want = dalloc(n);
    char what[64];

    rope_forward(out, x, cs, sn, B, T, H, HD);
    ref_rope(r.out, r.x, dcs, dsn, B, T, H, HD);
    snprintf(what, sizeof what, "rope forward H=%d", H);
    report(what, rel_err(out, r.out, n), TOL_FWD);
    float *inplace = fcopy(x, n);
    rope_forward(inplace, inplace, cs, sn, B, T, H, HD);
    CHECK(memcmp(inplace, out, n * sizeof(float)) == 0, "rope in place differs from out of place");

    rope_backward(dx, dout, cs, sn, B, T, H, HD);
    fd_grad(want, r.x, n, obj_rope, &r);
    snprintf(what, sizeof what, "rope dx H=%d", H);
    report(what, rel_err(dx, want, n), TOL_GRAD);   // dx started as other numbers: overwritten
    free(cs); free(sn); free(x); free(out); free(dout); free(dx); free(dx0); free(inplace);
    free(dcs); free(dsn); free(r.x); free(r.G); free(r.out); free(want);
}

// ---- attention ----------------------------------------------------------------------------
typedef struct { double *q, *k, *v, *G, *out; int B, T, NH, NKV, HD; } AttCtx;

// Causal GQA softmax(q k^T / sqrt(HD)) v; att (optional) receives the probabilities.
static void ref_attention(double *out, double *att, const double *q, const double *k,
                          const double *v, int B, int T, int NH, int NKV, int HD) {
    double p[REF_MAX_T];
    assert(T <= REF_MAX_T);
    double scale = 1.0 / sqrt((double)HD);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            int kh = h / (NH / NKV);
            for (int t = 0; t < T; t++) {
                const double *qt = q + ((size_t)(b * T + t) * NH + h) * HD;
                double m = -INFINITY, sum = 0.0;
                for (int j = 0; j <= t; j++) {
                    const double *kj = k + ((size_t)(b * T + j) * NKV + kh) * HD;
                    double s = 0.0;
                    for (int d = 0; d < HD; d++) s += qt[d] * kj[d];
                    p[j] = s * scale;
                    m = fmax(m, p[j]);
                }
                for (int j = 0; j <= t; j++) sum += (p[j] = exp(p[j] - m));
                double *o = out + ((size_t)(b * T + t) * NH + h) * HD;
                for (int d = 0; d < HD; d++) o[d] = 0.0;
                for (int j = 0; j < T; j++) {
                    double pj = j <= t ? p[j] / sum : 0.0;
                    if (att) att[(((size_t)b * NH + h) * T + t) * T + j] = pj;
                    if (j > t) continue;
                    const double *vj = v + ((size_t)(b * T + j) * NKV + kh) * HD;
                    for (int d = 0; d < HD; d++) o[d] += pj * vj[d];
                }
            }
        }
}

static double obj_attention(void *p) {
    AttCtx *a = p;
    ref_attention(a->out, NULL, a->q, a->k, a->v, a->B, a->T, a->NH, a->NKV, a->HD);
    return dot(a->G, a->out, (size_t)a->B * a->T * a->NH * a->HD);
}

static void test_attention(int B, int T, int NH, int NKV, int HD) {
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD, natt = (size_t)B * NH * T * T;
    float *q = frand(nq, -1, 1), *k = frand(nkv, -1, 1), *v = frand(nkv, -1, 1);
    float *out = frand(nq, -1, 1), *att = frand(natt, -1, 1), *scratch = frand(natt, -1, 1);
    float *dout = frand(nq, -1, 1);
    float *dq = frand(nq, -1, 1), *dk = frand(nkv, -1, 1), *dv = frand(nkv, -1, 1);
    float *dq0 = fcopy(dq, nq), *dk0 = fcopy(dk, nkv), *dv0 = fcopy(dv, nkv);
    AttCtx a = {to_double(q, nq), to_double(k, nkv), to_double(v, nkv), to_double(dout, nq),
                dalloc(nq), B, T, NH, NKV, HD};
    double *want_att = dalloc(natt), *want_q = dalloc(nq), *want_k = dalloc(nkv), *want_v = dalloc(nkv);
    char what[96];

    attention_forward(out, att, q, k, v, B, T, NH, NKV, HD);
    ref_attention(a.out, want_att, a.q, a.k, a.v, B, T, NH, NKV, HD);
    snprintf(what, sizeof what, "attention forward B%d T%d NH%d NKV%d HD%d", B, T, NH, NKV, HD);
    report(what, rel_err(out, a.out, nq), TOL_FWD);
    report("  probabilities (zero above diagonal)", rel_err(att, want_att, natt), TOL_FWD);
    size_t above = 0;
    for (size_t i = 0; i < natt; i++) above += (i % T > (i / T) % T) && att[i] != 0.0f;
    CHECK(above == 0, "%zu probabilities above the diagonal are not zero", above);

    attention_backward(dq, dk, dv, scratch, dout, q, k, v, att, B, T, NH, NKV, HD);
    fd_grad(want_q, a.q, nq, obj_attention, &a);
    fd_grad(want_k, a.k, nkv, obj_attention, &a);
    fd_grad(want_v, a.v, nkv, obj_attention, &a);
    report("  dq (overwritten)", rel_err(dq, want_q, nq), TOL_GRAD);   // they started as other numbers
    report("  dk (overwritten)", rel_err(dk, want_k, nkv), TOL_GRAD);
    report("  dv (overwritten)", rel_err(dv, want_v, nkv), TOL_GRAD);

    // Determinism: the same call again from the same starting buffers gives the same bits.
    float *dq2 = fcopy(dq0, nq), *dk2 = fcopy(dk0, nkv), *dv2 = fcopy(dv0, nkv);
    attention_backward(dq2, dk2, dv2, scratch, dout, q, k, v, att, B, T, NH, NKV, HD);
    CHECK(memcmp(dq2, dq, nq * sizeof(float)) == 0 && memcmp(dk2, dk, nkv * sizeof(float)) == 0 &&
          memcmp(dv2, dv, nkv * sizeof(float)) == 0, "attention backward not deterministic");

    free(q); free(k); free(v); free(out); free(att); free(scratch); free(dout);
    free(dq); free(dk); free(dv); free(dq0); free(dk0); free(dv0); free(dq2); free(dk2); free(dv2);
    free(a.q); free(a.k); free(a.v); free(a.G); free(a.out);
    free(want_att); free(want_q); free(want_k); free(want_v);
}

// ---- swiglu -------------------------------------------------------------------------------
typedef struct { double *g, *u, *G, *out; int n; } SwiCtx;

static void ref_swiglu(double *out, const double *g, const double *u, int n) {
    for (int i = 0; i < n; i++) out[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
}

static double obj_swiglu(void *p) {
    SwiCtx *s = p;
    ref_swiglu(s->out, s->g, s->u, s->n);
    return dot(s->G, s->out, (size_t)s->n);
}

static void test_swiglu(void) {
    enum { N = 3, I = 37 };
    float *g = frand(N * I, -6, 6), *u = frand(N * I, -2, 2), *dout = frand(N * I, -1, 1);
    float *out = frand(N * I, -1, 1);
    float *dg = frand(N * I, -1, 1), *du = frand(N * I, -1, 1), *dg0 = fcopy(dg, N * I), *du0 = fcopy(du, N * I);
    g[0] = -100.0f;   // far tails: sigmoid saturates without overflow
    g[1] = 100.0f;
    SwiCtx s = {to_double(g, N * I), to_double(u, N * I), to_double(dout, N * I), dalloc(N * I), N * I};
    double *want_g = dalloc(N * I), *want_u = dalloc(N * I);

    swiglu_forward(out, g, u, N, I);
    ref_swiglu(s.out, s.g, s.u, N * I);
    report("swiglu forward", rel_err(out, s.out, N * I), TOL_FWD);
    swiglu_backward(dg, du, dout, g, u, N, I);
    fd_grad(want_g, s.g, N * I, obj_swiglu, &s);
    fd_grad(want_u, s.u, N * I, obj_swiglu, &s);
    report("swiglu dgate", rel_err(dg, want_g, N * I), TOL_GRAD);   // dg, du started as other
    report("swiglu dup", rel_err(du, want_u, N * I), TOL_GRAD);     // numbers: overwritten
    free(g); free(u); free(dout); free(out); free(dg); free(du); free(dg0); free(du0);
    free(s.g); free(s.u); free(s.G); free(s.out); free(want_g); free(want_u);
}

// ---- crossentropy -------------------------------------------------------------------------
typedef struct { double *x; const int32_t *tgt; int N, V; double scale; } CeCtx;

static double ref_crossentropy(void *p) {
    CeCtx *c = p;
    double loss = 0.0;
    for (int n = 0; n < c->N; n++) {
        if (c->tgt[n] < 0) continue;
        const double *x = c->x + (size_t)n * c->V;
        double m = -INFINITY, s = 0.0;
        for (int j = 0; j < c->V; j++) m = fmax(m, x[j]);
        for (int j = 0; j < c->V; j++) s += exp(x[j] - m);
        loss += m + log(s) - x[c->tgt[n]];   // -log_softmax(x)[target]
    }
    return c->scale * loss;
}

static void test_crossentropy(void) {
    enum { N = 7, V = 37 };
    const int32_t tgt[N] = {3, -1, 36, 0, -100, 17, 5};
    const float scale = 0.7f / 5.0f;   // != 1, over the 5 non-pad rows
    float *x = frand(N * V, -3, 3);
    for (int j = 0; j < V; j++) x[5 * V + j] *= 20.0f;   // one row of large logits
    float *d = frand(N * V, -1, 1);
    CeCtx c = {to_double(x, N * V), tgt, N, V, scale};
    double *want = dalloc(N * V);

    double loss = crossentropy_forward_backward(d, x, tgt, N, V, scale);
    double want_loss = ref_crossentropy(&c);
    report("crossentropy loss (relative)", fabs(loss - want_loss) / want_loss, 1e-6);
    fd_grad(want, c.x, N * V, ref_crossentropy, &c);
    report("crossentropy dlogits", rel_err(d, want, N * V), TOL_GRAD);
    int pad_clean = 1;
    for (int j = 0; j < V; j++) pad_clean &= d[1 * V + j] == 0.0f && d[4 * V + j] == 0.0f;
    CHECK(pad_clean, "pad rows must have a zero gradient");

    CHECK(crossentropy_forward_backward(NULL, x, tgt, N, V, scale) == loss,
          "loss without gradient differs");
    float *alias = fcopy(x, N * V);
    double loss_alias = crossentropy_forward_backward(alias, alias, tgt, N, V, scale);
    CHECK(loss_alias == loss && memcmp(alias, d, N * V * sizeof(float)) == 0,
          "in-place (dlogits == logits) differs from out of place");
    const int32_t all_pad[2] = {-1, -1};
    CHECK(crossentropy_forward_backward(d, x, all_pad, 2, V, 1.0f) == 0.0, "all-pad loss != 0");
    free(x); free(d); free(alias); free(c.x); free(want);
}

// ---- residual -----------------------------------------------------------------------------
static void test_residual(void) {
    enum { n = 1001 };
    float *a = frand(n, -1, 1), *b = frand(n, -1, 1), *out = frand(n, -1, 1);
    residual_forward(out, a, b, n);
    int exact = 1;
    for (int i = 0; i < n; i++) exact &= out[i] == a[i] + b[i];
    CHECK(exact, "residual out != a + b");
    residual_forward(a, a, b, n);   // aliasing
    CHECK(memcmp(a, out, n * sizeof(float)) == 0, "residual in place differs");
    free(a); free(b); free(out);
}

// ---- adamw --------------------------------------------------------------------------------
static void test_adamw(void) {
    enum { n = 257, steps = 3 };
    const float lr = 3e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    float *p = frand(n, -1, 1), *m = frand(n, 0, 0), *v = frand(n, 0, 0);
    double *rp = to_double(p, n), *rm = dalloc(n), *rv = dalloc(n);
    for (int t = 1; t <= steps; t++) {
        float *g = frand(n, -1, 1);
        g[0] = 0.0f;   // zero gradient: only decay moves the parameter
        adamw_update(p, g, m, v, n, t, lr, b1, b2, eps, wd);
        double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
        for (int i = 0; i < n; i++) {   // torch.optim.AdamW, in double
            rp[i] *= 1.0 - (double)lr * wd;
            rm[i] = b1 * rm[i] + (1.0 - b1) * g[i];
            rv[i] = b2 * rv[i] + (1.0 - b2) * (double)g[i] * g[i];
            rp[i] -= (lr / bc1) * rm[i] / (sqrt(rv[i]) / sqrt(bc2) + eps);
        }
        free(g);
    }
    report("adamw params after 3 steps", rel_err(p, rp, n), 1e-6);
    report("adamw exp_avg", rel_err(m, rm, n), 1e-6);
    report("adamw exp_avg_sq", rel_err(v, rv, n), 1e-6);
    free(p); free(m); free(v); free(rp); free(rm); free(rv);
}

// ---- gradnorm -----------------------------------------------------------------------------
static void test_gradnorm(void) {
    enum { n = 100003 };
    float *g = frand(n, -1, 1), *g0 = fcopy(g, n);
    double want = 0.0;
    for (int i = 0; i < n; i++) want += (double)g[i] * g[i];
    double got = grad_sum_squares(g, n);
    report("grad_sum_squares (relative)", fabs(got - want) / want, 1e-12);
    CHECK(grad_sum_squares(g, 0) == 0.0, "empty sum of squares != 0");
    CHECK(grad_sum_squares(g, n) == got, "grad_sum_squares not deterministic");

    grad_scale(g, n, 0.37f);
    int exact = 1;
    for (int i = 0; i < n; i++) exact &= g[i] == g0[i] * 0.37f;
    CHECK(exact, "grad_scale is not g * s");

    CHECK_NEAR(grad_clip_factor(10.0, 1.0f), 1.0 / (10.0 + 1e-6), 1e-7, "clip factor, norm 10");
    CHECK(grad_clip_factor(0.5, 1.0f) == 1.0f, "clip factor must not exceed 1");
    CHECK(grad_clip_factor(0.0, 1.0f) == 1.0f, "clip factor at zero norm");
    free(g); free(g0);
}

// ---- thread-count invariance ---------------------------------------------------------------
// gemm_fixed, the loss and the sum of squares give the same bits at 1, 2 and 3 threads and at
// any alignment of their operands (the pipeline's parity rests on it), and gemm_fixed's tiles
// cover the product exactly (against a double reference, in all four transposes and both cut
// directions).
static void gemm_reference(bool ta, bool tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                           float beta, const float *C0, double *out) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = beta * (double)C0[(size_t)i * N + j];
            for (int k = 0; k < K; k++)
                acc += (double)(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                       (double)(tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
            out[(size_t)i * N + j] = acc;
        }
}

static void test_gemm_fixed(void) {
    const int shapes[][3] = {{600, 300, 70}, {260, 700, 33}, {64, 64, 16}, {513, 257, 129}};
    double worst = 0.0;
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (int t = 0; t < 4; t++) {
            const bool ta = t & 1, tb = t & 2;
            const int M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2];
            const int lda = ta ? M : K, ldb = tb ? K : N;
            const size_t nA = (size_t)M * K, nB = (size_t)K * N, nC = (size_t)M * N;
            float *A = frand(nA + 7, -1, 1), *B = frand(nB + 7, -1, 1), *C0 = frand(nC + 7, -1, 1);
            float *first = NULL;
            for (int threads = 1; threads <= 3; threads++)
                for (int shift = 0; shift <= 3; shift += 3) {   // shift 3: every operand off alignment
                    float *a = malloc((nA + 7) * sizeof(float)), *b = malloc((nB + 7) * sizeof(float));
                    float *c = malloc((nC + 7) * sizeof(float));
                    memcpy(a + shift, A, nA * sizeof(float));
                    memcpy(b + shift, B, nB * sizeof(float));
                    memcpy(c + shift, C0, nC * sizeof(float));
                    omp_set_num_threads(threads);
                    gemm_fixed(ta, tb, M, N, K, 0.5f, a + shift, lda, b + shift, ldb, 1.0f, c + shift, N);
                    if (!first)
                        first = fcopy(c + shift, nC);
                    else
                        CHECK(memcmp(first, c + shift, nC * sizeof(float)) == 0,
                              "gemm_fixed %dx%dx%d ta=%d tb=%d: other bits at %d threads, shift %d", M, N, K, ta, tb,
                              threads, shift);
                    free(a); free(b); free(c);
                }
            omp_set_num_threads(2);
            double *want = malloc(nC * sizeof(double));
            float *Ah = fcopy(A, nA), *Bh = fcopy(B, nB);
            for (size_t i = 0; i < nA; i++) Ah[i] *= 0.5f;   // alpha 0.5 is exact
            gemm_reference(ta, tb, M, N, K, Ah, lda, Bh, ldb, 1.0f, C0, want);
            double num = 0, den = 0;
            for (size_t i = 0; i < nC; i++) {
                num += (first[i] - want[i]) * (first[i] - want[i]);
                den += want[i] * want[i];
            }
            if (sqrt(num / den) > worst) worst = sqrt(num / den);
            free(want); free(Ah); free(Bh); free(A); free(B); free(C0); free(first);
        }
    report("gemm_fixed vs double (every transpose, both cuts)", worst, TOL_FWD);
}

static void test_reductions_thread_invariant(void) {
    enum { N = 517, V = 259, n = 1000003 };
    float *logits = frand((size_t)N * V, -4, 4), *g = frand(n, -1, 1);
    int32_t *targets = malloc(N * sizeof *targets);
    for (int i = 0; i < N; i++) targets[i] = i % 7 == 0 ? -1 : (int32_t)(i * 31 % V);
    double loss[3], sumsq[3];
    for (int threads = 1; threads <= 3; threads++) {
        omp_set_num_threads(threads);
        loss[threads - 1] = crossentropy_forward_backward(NULL, logits, targets, N, V, 0.01f);
        sumsq[threads - 1] = grad_sum_squares(g, n);
    }
    omp_set_num_threads(2);
    CHECK(loss[0] == loss[1] && loss[1] == loss[2], "loss differs across thread counts: %.17g %.17g %.17g", loss[0],
          loss[1], loss[2]);
    CHECK(sumsq[0] == sumsq[1] && sumsq[1] == sumsq[2], "sum of squares differs across thread counts");
    free(logits); free(g); free(targets);
}

int main(void) {
    printf("max relative errors:\n");
    test_gemm_fixed();
    test_reductions_thread_invariant();
    test_embedding();
    test_rmsnorm();
    test_linear();
    test_bias();
    test_rope_tables();
    test_rope_llama3();
    test_rope_heads(2, 5, 4, 8);    // query heads
    test_rope_heads(2, 5, 2, 8);    // kv heads (NKV != NH)
    test_attention(2, 7, 4, 2, 8);  // GQA, group 2
    test_attention(2, 5, 3, 3, 6);  // NH == NKV
    test_attention(1, 70, 4, 1, 4); // more than one row block, group 4
    test_attention(2, 24, 2, 1, 4); // one block of whole vectors (the masked full-width softmax)
    test_swiglu();
    test_crossentropy();
    test_residual();
    test_adamw();
    test_gradnorm();
    return test_finish();
}
