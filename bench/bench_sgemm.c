// bench_sgemm: cblas_sgemm throughput (median GFLOP/s) at the GEMM shapes of a Llama layer.
//   bench_sgemm M N K [iters]   one row-major C(M, N) = A(M, K) @ B(K, N)
//   bench_sgemm                 the forward / backward-input / backward-weight GEMMs of the
//                               "tiny" and "small" presets, as kernels/cpu/linear.c calls them
// Threads: OpenBLAS reads OPENBLAS_NUM_THREADS / OMP_NUM_THREADS; the count is printed.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cblas.h>

typedef struct {
    const char *name;
    int M, N, K;
    enum CBLAS_TRANSPOSE ta, tb;
} GemmShape;

typedef struct {
    const char *name;
    int rows, C, inter, q, kv, V;   // rows = B*T; inter = I (a macro after cblas.h's
                                    // <complex.h>); q = NH*HD, kv = NKV*HD
} Preset;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *alloc_filled(size_t n) {
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "bench_sgemm: out of memory (%zu floats)\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    return x;
}

// Median seconds of one sgemm over iters runs (after one warm-up); iters <= 0 picks a count
// that does about 2 GFLOP of work.
static double bench_one(const GemmShape *s, int iters, int *iters_used) {
    double flops = 2.0 * s->M * s->N * s->K;
    if (iters <= 0) {
        iters = (int)(2e9 / flops);
        iters = iters < 5 ? 5 : iters > 200 ? 200 : iters;
    }
    int lda = s->ta == CblasNoTrans ? s->K : s->M, ldb = s->tb == CblasNoTrans ? s->N : s->K;
    float *A = alloc_filled((size_t)s->M * s->K), *B = alloc_filled((size_t)s->K * s->N);
    float *C = alloc_filled((size_t)s->M * s->N);
    double *t = malloc((size_t)iters * sizeof *t);
    if (!t) exit(1);
    for (int i = -1; i < iters; i++) {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f,
                    C, s->N);
        if (i >= 0) t[i] = now_s() - t0;
    }
    qsort(t, (size_t)iters, sizeof *t, cmp_double);
    double median = t[iters / 2];
    free(A); free(B); free(C); free(t);
    *iters_used = iters;
    return median;
}

static void print_row(const char *preset, const GemmShape *s, int iters) {
    int used;
    double sec = bench_one(s, iters, &used);
    printf("%-6s %-28s %6d %6d %6d  %c%c %5d %10.3f %9.2f\n", preset, s->name, s->M, s->N, s->K,
           s->ta == CblasNoTrans ? 'N' : 'T', s->tb == CblasNoTrans ? 'N' : 'T', used, sec * 1e3,
           2.0 * s->M * s->N * s->K / sec * 1e-9);
}

// The three GEMMs of one linear layer (OC, IC) over `rows` tokens, as linear.c issues them.
static void bench_linear(const char *preset, const char *layer, int rows, int IC, int OC) {
    char name[3][48];
    snprintf(name[0], sizeof name[0], "%s fwd", layer);
    snprintf(name[1], sizeof name[1], "%s bwd-input", layer);
    snprintf(name[2], sizeof name[2], "%s bwd-weight", layer);
    GemmShape g[3] = {
        {name[0], rows, OC, IC, CblasNoTrans, CblasTrans},    // out = inp @ W^T
        {name[1], rows, IC, OC, CblasNoTrans, CblasNoTrans},  // dinp = dout @ W
        {name[2], OC, IC, rows, CblasTrans, CblasNoTrans},    // dW = dout^T @ inp
    };
    for (int i = 0; i < 3; i++) print_row(preset, &g[i], 0);
}

static void bench_preset(const Preset *p) {
    bench_linear(p->name, "q_proj", p->rows, p->C, p->q);
    bench_linear(p->name, "k_proj/v_proj", p->rows, p->C, p->kv);
    bench_linear(p->name, "o_proj", p->rows, p->q, p->C);
    bench_linear(p->name, "gate_proj/up_proj", p->rows, p->C, p->inter);
    bench_linear(p->name, "down_proj", p->rows, p->inter, p->C);
    bench_linear(p->name, "lm_head", p->rows, p->C, p->V);
}

static int parse_positive(const char *s, const char *what) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v <= 0 || v > 1000000) {
        fprintf(stderr, "bench_sgemm: %s must be a positive integer, got '%s'\n", what, s);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: bench_sgemm [M N K [iters]]\n");
        return 0;
    }
    if (argc != 1 && argc != 4 && argc != 5) {
        fprintf(stderr, "usage: bench_sgemm [M N K [iters]]\n");
        return 2;
    }
    GemmShape one = {"C = A @ B", 0, 0, 0, CblasNoTrans, CblasNoTrans};
    int iters = 0;
    if (argc > 1) {
        one.M = parse_positive(argv[1], "M");
        one.N = parse_positive(argv[2], "N");
        one.K = parse_positive(argv[3], "K");
        iters = argc == 5 ? parse_positive(argv[4], "iters") : 0;
    }
    printf("OpenBLAS threads: %d   (%s)\n", openblas_get_num_threads(), openblas_get_config());
    printf("%-6s %-28s %6s %6s %6s  %-2s %5s %10s %9s\n", "preset", "gemm", "M", "N", "K", "op",
           "iters", "median_ms", "GFLOP/s");
    if (argc > 1) {
        print_row("-", &one, iters);
        return 0;
    }
    const Preset presets[] = {
        {"tiny", 512, 64, 128, 64, 32, 259},
        {"small", 8 * 256, 512, 1536, 512, 256, 259},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) bench_preset(&presets[i]);
    return 0;
}
