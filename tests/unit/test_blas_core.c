// kernels/cpu/blas_core: the rule that says when OpenBLAS's core leaves this CPU's AVX-512
// unused, and what pptrain prints of it (--version's core line, a run banner's note). Holds on
// any CPU: what it asserts of the binary depends only on whether this CPU runs AVX-512, which
// it asks.
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "kernels/cpu/blas_core.h"
#include "test_util.h"

static void test_rule(void) {
    static const char *const older[] = {"Haswell", "Zen", "Sandybridge", "Nehalem", "Prescott", "Excavator"};
    for (size_t i = 0; i < sizeof older / sizeof older[0]; i++) {
        CHECK(blas_core_below_cpu(older[i], true), "%s on an AVX-512 CPU is below it", older[i]);
        CHECK(!blas_core_below_cpu(older[i], false), "%s without AVX-512 is not", older[i]);
    }
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids", "skylakex"};
    for (size_t i = 0; i < sizeof avx512 / sizeof avx512[0]; i++)
        CHECK(!blas_core_below_cpu(avx512[i], true), "%s is not below an AVX-512 CPU", avx512[i]);
    CHECK(!blas_core_below_cpu(NULL, true), "no corename: nothing said");
}

// Runs `pptrain ARGS` with ENV in front (through /bin/sh) and returns its exit status; its
// output, stdout and stderr, goes to out.
static int run_pptrain(const char *env, const char *args, char *out, size_t size) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "env -u OPENBLAS_CORETYPE %s '%s' %s 2>&1", env, PPTRAIN_BINARY,
             args);
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

static void test_binary(void) {
    char out[8192];
    const bool avx512 = blas_core_cpu_avx512();
    // Unset: OpenBLAS's choice, named; on this CPU it should be an AVX-512 core when the CPU has
    // AVX-512 (if not, the run banner says so).
    CHECK(run_pptrain("", "--version", out, sizeof out) == 0, "--version: %s", out);
    const char *line = strstr(out, "OpenBLAS core: ");
    CHECK(line && strstr(line, "(OpenBLAS's choice)"), "--version names OpenBLAS's choice: %s", out);
    CHECK(run_pptrain("", TRAIN, out, sizeof out) == 0, "tiny run: %s", out);
    const bool noted = strstr(out, "AVX-512") != NULL;
    CHECK(!noted || avx512, "no AVX-512 note off AVX-512 CPUs: %s", out);
    // Forced to an AVX2 core: named as forced, and on an AVX-512 CPU the banner says what it costs.
    CHECK(run_pptrain("OPENBLAS_CORETYPE=Haswell", "--version", out, sizeof out) == 0, "--version: %s", out);
    CHECK(strstr(out, "OpenBLAS core: Haswell (OPENBLAS_CORETYPE=Haswell)") != NULL, "forced core: %s", out);
    CHECK(run_pptrain("OPENBLAS_CORETYPE=Haswell", TRAIN, out, sizeof out) == 0, "forced run: %s", out);
    const char *note = "note: OPENBLAS_CORETYPE=Haswell runs OpenBLAS's Haswell kernels on this AVX-512 CPU";
    CHECK((strstr(out, note) != NULL) == avx512, "the note %s: %s", avx512 ? "is there" : "is not there", out);
    CHECK(count(out, "\n  note: ") <= 2, "one note line: %s", out);
}

int main(void) {
    test_rule();
    test_binary();
    return test_finish();
}
