// bench_sgemm: sgemm throughput (median GFLOP/s) at the GEMM shapes of a Llama layer, on the
// library pptrain runs (oneDNN, through kernels/cpu/gemm.c's gemm_serial) or, for comparison,
// on OpenBLAS or BLIS loaded at run time.
//   bench_sgemm [--lib onednn|openblas|blis] M N K [iters]   one C(M, N) = A(M, K) @ B(K, N)
//   bench_sgemm [--lib ...] [--model PRESET|CONFIG.json --rows R]
//                             the forward / backward-input / backward-weight GEMMs of every
//                             linear layer, as kernels/cpu/linear.c calls them, over R rows
//                             (a microbatch's B*T tokens); without --model, those of the
//                             "tiny" (8 x 64 rows) and "small" (8 x 256) presets. Then the
//                             mean of the shapes and the model's rate: its step's products
//                             counted as often as it runs them (the FLOPs over the time).
// One thread: every product runs on the calling thread. Each library picks its own kernels:
// OPENBLAS_CORETYPE forces OpenBLAS's (Haswell, Zen, SkylakeX ...), ONEDNN_MAX_CPU_ISA caps
// oneDNN's; the kernels that ran are printed.
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/model/model.h"
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

// A model's linear layers over `rows` tokens: the shapes of one step's products.
typedef struct {
    const char *name;
    int rows, C, inter, q, kv, V, L;   // rows = B*T; inter = the MLP's width; q = NH*HD, kv = NKV*HD
} Preset;

// One model's tally: the plain sum of the shapes' rates, and FLOPs and seconds with each shape
// counted as often as a step runs it.
typedef struct {
    double rate_sum, flops, seconds;
    int shapes;
} Tally;

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

// Prints one shape's row and adds it to the tally, `count` times for the weighted rate.
static void print_row(const char *preset, const GemmShape *s, int iters, int count, Tally *tally) {
    int used;
    const double sec = bench_one(s, iters, &used), flops = 2.0 * s->M * s->N * s->K;
    printf("%-6s %-28s %6d %6d %6d  %c%c %5d %10.3f %9.2f\n", preset, s->name, s->M, s->N, s->K, s->ta ? 'T' : 'N',
           s->tb ? 'T' : 'N', used, sec * 1e3, flops / sec * 1e-9);
    tally->rate_sum += flops / sec * 1e-9;
    tally->shapes++;
    tally->flops += count * flops;
    tally->seconds += count * sec;
}

// The three GEMMs of a linear layer (OC, IC) over `rows` tokens, as linear.c issues them; a
// step runs each `count` times.
static void bench_linear(const char *preset, const char *layer, int rows, int IC, int OC, int count, Tally *t) {
    char name[3][48];
    snprintf(name[0], sizeof name[0], "%s fwd", layer);
    snprintf(name[1], sizeof name[1], "%s bwd-input", layer);
    snprintf(name[2], sizeof name[2], "%s bwd-weight", layer);
    GemmShape g[3] = {
        {name[0], rows, OC, IC, false, true},    // out = inp @ W^T
        {name[1], rows, IC, OC, false, false},   // dinp = dout @ W
        {name[2], OC, IC, rows, true, false},    // dW = dout^T @ inp
    };
    for (int i = 0; i < 3; i++) print_row(preset, &g[i], 0, count, t);
}

// Every linear layer's three GEMMs, then their mean GFLOP/s (18 shapes, unweighted) and the
// model's rate (k and v, gate and up: two of each per layer; the LM head once).
static void bench_preset(const Preset *p) {
    Tally t = {0};
    bench_linear(p->name, "q_proj", p->rows, p->C, p->q, p->L, &t);
    bench_linear(p->name, "k_proj/v_proj", p->rows, p->C, p->kv, 2 * p->L, &t);
    bench_linear(p->name, "o_proj", p->rows, p->q, p->C, p->L, &t);
    bench_linear(p->name, "gate_proj/up_proj", p->rows, p->C, p->inter, 2 * p->L, &t);
    bench_linear(p->name, "down_proj", p->rows, p->inter, p->C, p->L, &t);
    bench_linear(p->name, "lm_head", p->rows, p->C, p->V, 1, &t);
    printf("%-6s %-28s %60.2f\n", p->name, "mean of the shapes", t.rate_sum / t.shapes);
    printf("%-6s %-28s %60.2f\n", p->name, "model rate (FLOPs / time)", t.flops / t.seconds * 1e-9);
}

// --model NAME --rows R: a preset or config.json, as pptrain reads it.
static Preset model_preset(const char *model, int rows) {
    ModelConfig c;
    Error err;
    const bool json = strlen(model) > 5 && strcmp(model + strlen(model) - 5, ".json") == 0;
    if ((json ? model_config_from_json(&c, model, &err) : model_config_preset(&c, model, &err)) != 0) {
        fprintf(stderr, "bench_sgemm: %s\n", err.msg);
        exit(2);
    }
    return (Preset){"model", rows, c.hidden, c.intermediate, c.heads * c.head_dim, c.kv_heads * c.head_dim, c.vocab,
                    c.layers};
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

static const char USAGE[] =
    "usage: bench_sgemm [--lib onednn|openblas|blis] [M N K [iters] | --model PRESET|CONFIG.json --rows R]\n";

int main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("%s", USAGE);
        return 0;
    }
    const char *lib = "onednn", *model = NULL;
    int rows = 0;
    while (argc >= 3 && argv[1][0] == '-') {
        if (strcmp(argv[1], "--lib") == 0) lib = argv[2];
        else if (strcmp(argv[1], "--model") == 0) model = argv[2];
        else if (strcmp(argv[1], "--rows") == 0) rows = parse_positive(argv[2], "--rows");
        else break;
        argc -= 2;
        argv += 2;
    }
    if ((argc != 1 && argc != 4 && argc != 5) || (argc > 1 && model) || (!model != !rows)) {
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
    const Preset chosen = model ? model_preset(model, rows) : (Preset){0};
    load_library(lib);
    printf("%-6s %-28s %6s %6s %6s  %-2s %5s %10s %9s\n", "preset", "gemm", "M", "N", "K", "op", "iters",
           "median_ms", "GFLOP/s");
    if (argc > 1) {
        Tally t = {0};
        print_row("-", &one, iters, 1, &t);
        return 0;
    }
    if (model) {
        bench_preset(&chosen);
        return 0;
    }
    const Preset presets[] = {
        {"tiny", 8 * 64, 64, 128, 64, 32, 259, 8},
        {"small", 8 * 256, 512, 1536, 512, 256, 259, 8},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) bench_preset(&presets[i]);
    return 0;
}
