// bench_sgemm: sgemm throughput (median GFLOP/s) at the GEMM shapes of a Llama layer, on the
// library pptrain runs (oneDNN, through kernels/cpu/gemm.c's gemm_serial) or, for comparison,
// on OpenBLAS or BLIS loaded at run time.
//   bench_sgemm [--lib onednn|openblas|blis] M N K [iters]   one C(M, N) = A(M, K) @ B(K, N)
//   bench_sgemm [--lib ...]   the forward / backward-input / backward-weight GEMMs of the
//                             "tiny" and "small" presets, as kernels/cpu/linear.c calls them,
//                             and each preset's mean
// One thread: every product runs on the calling thread. Each library picks its own kernels:
// OPENBLAS_CORETYPE forces OpenBLAS's (Haswell, Zen, SkylakeX ...), ONEDNN_MAX_CPU_ISA caps
// oneDNN's; the kernels that ran are printed.
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/blas_core.h"
#include "kernels/cpu/kernels.h"

// cblas's row-major and transpose codes (the values every cblas.h gives them).
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
typedef void (*CblasSgemm)(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                           const float *B, int ldb, float beta, float *C, int ldc);
static CblasSgemm cblas_fn;   // NULL: oneDNN

// One product on the library under test: C = A @ B (op by ta, tb), row-major.
static void product(bool ta, bool tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                    float *C, int ldc) {
    if (cblas_fn)
        cblas_fn(CBLAS_ROW_MAJOR, ta ? CBLAS_TRANS : CBLAS_NO_TRANS, tb ? CBLAS_TRANS : CBLAS_NO_TRANS, M, N, K, 1.0f,
                 A, lda, B, ldb, 0.0f, C, ldc);
    else
        gemm_serial(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}

static const char *corename_symbol(const char *so, const char *openblas, const char *blis) {
    return strstr(so, "openblas") ? openblas : blis;
}

// Loads `lib` (RTLD_LOCAL, so neither library's cblas_sgemm shadows the other) and prints the
// kernels it runs.
static void load_library(const char *lib) {
    char what[512];
    if (strcmp(lib, "onednn") == 0) {
        printf("library: %s\n", blas_core_describe(what, sizeof what));
        return;
    }
    const char *so = strcmp(lib, "openblas") == 0 ? "libopenblas.so.0" : strcmp(lib, "blis") == 0 ? "libblis.so.4" : NULL;
    if (!so) {
        fprintf(stderr, "bench_sgemm: --lib must be onednn, openblas or blis, got '%s'\n", lib);
        exit(2);
    }
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!h || !(cblas_fn = (CblasSgemm)dlsym(h, "cblas_sgemm"))) {
        fprintf(stderr, "bench_sgemm: cannot load %s: %s\n", so, dlerror());
        exit(2);
    }
    // One thread whatever OMP_NUM_THREADS says: both libraries have a call for it.
    void (*threads)(int) = (void (*)(int))dlsym(h, corename_symbol(so, "openblas_set_num_threads",
                                                                  "bli_thread_set_num_threads"));
    if (threads) threads(1);
    const char *(*corename)(void) = (const char *(*)(void))dlsym(h, "openblas_get_corename");
    const char *(*arch)(int) = (const char *(*)(int))dlsym(h, "bli_arch_string");
    int (*arch_id)(void) = (int (*)(void))dlsym(h, "bli_arch_query_id");
    if (corename) printf("library: OpenBLAS (%s), its %s kernels\n", so, corename());
    else if (arch && arch_id) printf("library: BLIS (%s), its %s kernels\n", so, arch(arch_id()));
    else printf("library: %s\n", so);
}

typedef struct {
    const char *name;
    int M, N, K;
    bool ta, tb;
} GemmShape;

typedef struct {
    const char *name;
    int rows, C, inter, q, kv, V;   // rows = B*T; inter = the MLP's width; q = NH*HD, kv = NKV*HD
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
    int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    float *A = alloc_filled((size_t)s->M * s->K), *B = alloc_filled((size_t)s->K * s->N);
    float *C = alloc_filled((size_t)s->M * s->N);
    double *t = malloc((size_t)iters * sizeof *t);
    if (!t) exit(1);
    for (int i = -1; i < iters; i++) {
        double t0 = now_s();
        product(s->ta, s->tb, s->M, s->N, s->K, A, lda, B, ldb, C, s->N);
        if (i >= 0) t[i] = now_s() - t0;
    }
    qsort(t, (size_t)iters, sizeof *t, cmp_double);
    double median = t[iters / 2];
    free(A); free(B); free(C); free(t);
    *iters_used = iters;
    return median;
}

// Prints one shape's row; returns its GFLOP/s.
static double print_row(const char *preset, const GemmShape *s, int iters) {
    int used;
    double sec = bench_one(s, iters, &used), gflops = 2.0 * s->M * s->N * s->K / sec * 1e-9;
    printf("%-6s %-28s %6d %6d %6d  %c%c %5d %10.3f %9.2f\n", preset, s->name, s->M, s->N, s->K, s->ta ? 'T' : 'N',
           s->tb ? 'T' : 'N', used, sec * 1e3, gflops);
    return gflops;
}

// The three GEMMs of one linear layer (OC, IC) over `rows` tokens, as linear.c issues them;
// returns the sum of their GFLOP/s.
static double bench_linear(const char *preset, const char *layer, int rows, int IC, int OC) {
    char name[3][48];
    snprintf(name[0], sizeof name[0], "%s fwd", layer);
    snprintf(name[1], sizeof name[1], "%s bwd-input", layer);
    snprintf(name[2], sizeof name[2], "%s bwd-weight", layer);
    GemmShape g[3] = {
        {name[0], rows, OC, IC, false, true},    // out = inp @ W^T
        {name[1], rows, IC, OC, false, false},   // dinp = dout @ W
        {name[2], OC, IC, rows, true, false},    // dW = dout^T @ inp
    };
    double sum = 0;
    for (int i = 0; i < 3; i++) sum += print_row(preset, &g[i], 0);
    return sum;
}

// Every linear layer's three GEMMs, then their mean GFLOP/s (18 shapes, unweighted).
static void bench_preset(const Preset *p) {
    double sum = bench_linear(p->name, "q_proj", p->rows, p->C, p->q);
    sum += bench_linear(p->name, "k_proj/v_proj", p->rows, p->C, p->kv);
    sum += bench_linear(p->name, "o_proj", p->rows, p->q, p->C);
    sum += bench_linear(p->name, "gate_proj/up_proj", p->rows, p->C, p->inter);
    sum += bench_linear(p->name, "down_proj", p->rows, p->inter, p->C);
    sum += bench_linear(p->name, "lm_head", p->rows, p->C, p->V);
    printf("%-6s %-28s %60.2f\n", p->name, "mean of the 18 shapes", sum / 18);
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

static const char USAGE[] = "usage: bench_sgemm [--lib onednn|openblas|blis] [M N K [iters]]\n";

int main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("%s", USAGE);
        return 0;
    }
    const char *lib = "onednn";
    if (argc >= 3 && strcmp(argv[1], "--lib") == 0) {
        lib = argv[2];
        argc -= 2;
        argv += 2;
    }
    if (argc != 1 && argc != 4 && argc != 5) {
        fprintf(stderr, "%s", USAGE);
        return 2;
    }
    GemmShape one = {"C = A @ B", 0, 0, 0, false, false};
    int iters = 0;
    if (argc > 1) {
        one.M = parse_positive(argv[1], "M");
        one.N = parse_positive(argv[2], "N");
        one.K = parse_positive(argv[3], "K");
        iters = argc == 5 ? parse_positive(argv[4], "iters") : 0;
    }
    load_library(lib);
    printf("%-6s %-28s %6s %6s %6s  %-2s %5s %10s %9s\n", "preset", "gemm", "M", "N", "K", "op", "iters",
           "median_ms", "GFLOP/s");
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
