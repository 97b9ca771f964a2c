// Which OpenBLAS core runs the products, and whether it is below the CPU (kernels/cpu/blas_core.h).
#include "kernels/cpu/blas_core.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

// Cores with AVX-512 kernels, as openblas_get_corename() spells them.
static const char *const AVX512_CORES[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};

bool blas_core_below_cpu(const char *core, bool avx512) {
    if (!avx512 || !core) return false;
    for (size_t i = 0; i < sizeof AVX512_CORES / sizeof AVX512_CORES[0]; i++)
        if (strcasecmp(core, AVX512_CORES[i]) == 0) return false;
    return true;
}

bool blas_core_cpu_avx512(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    // __builtin_cpu_supports checks the OS too (XCR0 saves the AVX-512 state), as OpenBLAS does.
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

const char *blas_core_name(void) { return openblas_get_corename(); }

bool blas_core_leaves_avx512(void) { return blas_core_below_cpu(openblas_get_corename(), blas_core_cpu_avx512()); }

const char *blas_core_describe(char *buf, size_t size) {
    const char *forced = getenv("OPENBLAS_CORETYPE");
    if (forced && forced[0]) snprintf(buf, size, "%s (OPENBLAS_CORETYPE=%s)", openblas_get_corename(), forced);
    else snprintf(buf, size, "%s (OpenBLAS's choice)", openblas_get_corename());
    return buf;
}

const char *blas_core_note(char *buf, size_t size) {
    const char *core = openblas_get_corename(), *forced = getenv("OPENBLAS_CORETYPE");
    if (!blas_core_leaves_avx512()) {
        if (size) buf[0] = '\0';
    } else if (forced && forced[0]) {
        snprintf(buf, size, "OPENBLAS_CORETYPE=%s runs OpenBLAS's %s kernels on this AVX-512 CPU; unset, OpenBLAS "
                 "picks its faster AVX-512 ones", forced, core);
    } else {
        snprintf(buf, size, "this OpenBLAS took this AVX-512 CPU for %s; OPENBLAS_CORETYPE=SkylakeX runs its AVX-512 "
                 "kernels", core);
    }
    return buf;
}
