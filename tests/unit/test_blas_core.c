// tests/unit/test_blas_core: the products run the widest kernels this CPU runs, chosen by its
// features, and pptrain says which and why (--version, the run banner) and refuses a cap the
// CPU cannot run (kernels/cpu/blas_core.h); and pptrain's OpenMP threads sleep when they wait
// unless the user chose (console/main.c). Holds on any CPU: what it asserts of the binary
// follows from this CPU's features, which it reads.
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "kernels/cpu/blas_core.h"
#include "test_util.h"

// The width rule: each width needs its instructions and the OS's saved state for them.
static void test_width_rule(void) {
    BlasCpu c = {0};
    CHECK(blas_cpu_width(&c) == BLAS_WIDTH_GENERIC, "nothing: generic");
    c.sse41 = true;
    CHECK(blas_cpu_width(&c) == BLAS_WIDTH_SSE41, "SSE4.1");
    c.avx = c.fma = c.avx2 = c.avx512 = true;
    CHECK(blas_cpu_width(&c) == BLAS_WIDTH_SSE41, "AVX without the OS saving YMM: SSE4.1");
    c.os_ymm = true;
    CHECK(blas_cpu_width(&c) == BLAS_WIDTH_AVX2, "AVX-512 without the OS saving ZMM: AVX2");
    c.os_zmm = true;
    CHECK(blas_cpu_width(&c) == BLAS_WIDTH_AVX512, "AVX-512 with its state saved");
    c.fma = false;
    CHECK(blas_cpu_width(&c) == BLAS_WIDTH_AVX, "AVX2 without FMA: AVX");
    c.fma = true;
    c.avx2 = false;
    CHECK(blas_cpu_width(&c) == BLAS_WIDTH_AVX, "no AVX2: AVX");
}

static void test_cap_names(void) {
    static const struct { const char *name; BlasWidth w; } known[] = {
        {"SSE41", BLAS_WIDTH_SSE41}, {"avx", BLAS_WIDTH_AVX}, {"AVX2", BLAS_WIDTH_AVX2},
        {"AVX2_VNNI", BLAS_WIDTH_AVX2}, {"AVX512_CORE", BLAS_WIDTH_AVX512}, {"avx512_core_bf16", BLAS_WIDTH_AVX512},
        {"ALL", BLAS_WIDTH_AVX512},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        BlasWidth w = BLAS_WIDTH_GENERIC;
        CHECK(blas_cap_width(known[i].name, &w) && w == known[i].w, "cap %s", known[i].name);
    }
    BlasWidth w;
    CHECK(!blas_cap_width("Haswell", &w) && !blas_cap_width("AVX3", &w) && !blas_cap_width("", &w), "unknown caps");
}

// oneDNN's own choice, with nothing set, is this CPU's widest: what item 1 of the design asks.
static void test_choice_is_widest(void) {
    BlasCpu cpu;
    blas_cpu_read(&cpu);
    CHECK(blas_core_width() == blas_cpu_width(&cpu), "oneDNN runs %s, this CPU runs %s",
          blas_width_name(blas_core_width()), blas_width_name(blas_cpu_width(&cpu)));
}

// Runs `pptrain ARGS` with ENV in front (through /bin/sh, the caps unset first) and returns its
// exit status; its output, stdout and stderr, goes to out.
static int run_pptrain(const char *env, const char *args, char *out, size_t size) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "env -u OPENBLAS_CORETYPE -u ONEDNN_MAX_CPU_ISA -u DNNL_MAX_CPU_ISA -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "
             "%s '%s' %s 2>&1",
             env, PPTRAIN_BINARY, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    const int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *s = hay; (s = strstr(s, needle)); s += strlen(needle)) n++;
    return n;
}

static const char *const TRAIN =
    "train --model tiny --data '" PPTRAIN_SOURCE_DIR "/tests/fixtures/text' --batch 2 --seq 16 --steps 1 --db ''";

// Unset: the widest kernels, said in --version and in the banner, and no note.
static void test_binary_default(BlasWidth best) {
    char out[8192], want[96];
    snprintf(want, sizeof want, "sgemm, %s kernels: the widest this CPU runs (cpuid: ", blas_width_name(best));
    CHECK(run_pptrain("", "--version", out, sizeof out) == 0, "--version: %s", out);
    CHECK(strstr(out, "CPU products: oneDNN ") && strstr(out, want), "--version says %s: %s", want, out);
    CHECK(run_pptrain("", TRAIN, out, sizeof out) == 0, "tiny run: %s", out);
    CHECK(strstr(out, "  products: oneDNN ") && strstr(out, want), "the banner says %s: %s", want, out);
    CHECK(count(out, "\n  note: ") == 0, "no note: %s", out);
}

// A cap at SSE4.1 is honoured, with one note where the CPU runs wider; AVX-512 on a CPU without
// it, and a name oneDNN does not know, are refused: one line, exit 2, nothing run.
static void test_binary_caps(BlasWidth best) {
    char out[8192];
    if (best >= BLAS_WIDTH_SSE41) {
        CHECK(run_pptrain("ONEDNN_MAX_CPU_ISA=SSE41", TRAIN, out, sizeof out) == 0, "capped run: %s", out);
        const bool wider = best > BLAS_WIDTH_SSE41;
        CHECK(strstr(out, "products: oneDNN ") && strstr(out, "SSE4.1 kernels"), "capped banner: %s", out);
        CHECK(count(out, "\n  note: ONEDNN_MAX_CPU_ISA=SSE41 holds the products to SSE4.1 kernels") == wider,
              "one note where the CPU runs wider: %s", out);
    }
    if (best < BLAS_WIDTH_AVX512) {
        CHECK(run_pptrain("DNNL_MAX_CPU_ISA=AVX512_CORE", TRAIN, out, sizeof out) == 2, "refused: %s", out);
        CHECK(count(out, "\n") == 1 && strstr(out, "pptrain: DNNL_MAX_CPU_ISA=AVX512_CORE: this CPU cannot run AVX-512"),
              "one line: %s", out);
    }
    CHECK(run_pptrain("ONEDNN_MAX_CPU_ISA=Haswell", TRAIN, out, sizeof out) == 2, "unknown refused: %s", out);
    CHECK(count(out, "\n") == 1 && strstr(out, "ONEDNN_MAX_CPU_ISA=Haswell: not a oneDNN ISA name"), "one line: %s", out);
    CHECK(run_pptrain("OPENBLAS_CORETYPE=Prescott", TRAIN, out, sizeof out) == 0, "old variable: %s", out);
    CHECK(count(out, "\n  note: OPENBLAS_CORETYPE=Prescott does nothing") == 1, "noted once: %s", out);
}

// Unset, pptrain runs itself again with OMP_WAIT_POLICY=PASSIVE; a policy the user set stays.
static void test_wait_policy(void) {
    char out[8192];
    CHECK(run_pptrain("", "--version", out, sizeof out) == 0, "--version: %s", out);
    CHECK(strstr(out, "\n  OpenMP waiting threads: OMP_WAIT_POLICY=PASSIVE\n") != NULL, "passive by default: %s", out);
    CHECK(run_pptrain("OMP_WAIT_POLICY=active", "--version", out, sizeof out) == 0, "--version: %s", out);
    CHECK(strstr(out, "\n  OpenMP waiting threads: OMP_WAIT_POLICY=active\n") != NULL, "the user's policy: %s", out);
    CHECK(run_pptrain("GOMP_SPINCOUNT=1000", "--version", out, sizeof out) == 0, "--version: %s", out);
    CHECK(strstr(out, "\n  OpenMP waiting threads: GOMP_SPINCOUNT=1000\n") != NULL, "the user's spin count: %s", out);
}

int main(void) {
    test_width_rule();
    test_cap_names();
    test_choice_is_widest();
    BlasCpu cpu;
    blas_cpu_read(&cpu);
    test_binary_default(blas_cpu_width(&cpu));
    test_binary_caps(blas_cpu_width(&cpu));
    test_wait_policy();
    return test_finish();
}
