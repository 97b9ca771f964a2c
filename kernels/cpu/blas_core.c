// kernels/cpu/blas_core: the CPU's vector width by cpuid and xgetbv, the width oneDNN runs, and
// the check of a user's cap on it (kernels/cpu/blas_core.h).
#include "kernels/cpu/blas_core.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

// XCR0, the register state the OS saves on a context switch (0 when the OS has not enabled
// XSAVE: then no AVX register survives a switch, whatever cpuid says).
static unsigned long long xcr0(bool osxsave) {
    if (!osxsave) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

void blas_cpu_read(BlasCpu *cpu) {
    memset(cpu, 0, sizeof *cpu);
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    cpu->sse41 = c & (1u << 19);
    cpu->fma = c & (1u << 12);
    cpu->avx = c & (1u << 28);
    const unsigned long long x = xcr0(c & (1u << 27));
    cpu->os_ymm = (x & 0x6) == 0x6;      // SSE and AVX (YMM upper) state
    cpu->os_zmm = (x & 0xe6) == 0xe6;    // and opmask, ZMM_Hi256, Hi16_ZMM
    if (__get_cpuid_max(0, NULL) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    cpu->avx2 = b & (1u << 5);
    const unsigned avx512 = (1u << 16) | (1u << 17) | (1u << 28) | (1u << 30) | (1u << 31);   // F DQ CD BW VL
    cpu->avx512 = (b & avx512) == avx512;
}
#else
void blas_cpu_read(BlasCpu *cpu) { memset(cpu, 0, sizeof *cpu); }
#endif

BlasWidth blas_cpu_width(const BlasCpu *cpu) {
    if (cpu->avx512 && cpu->avx2 && cpu->fma && cpu->os_zmm) return BLAS_WIDTH_AVX512;
    if (cpu->avx2 && cpu->fma && cpu->avx && cpu->os_ymm) return BLAS_WIDTH_AVX2;
    if (cpu->avx && cpu->os_ymm) return BLAS_WIDTH_AVX;
    return cpu->sse41 ? BLAS_WIDTH_SSE41 : BLAS_WIDTH_GENERIC;
}

const char *blas_width_name(BlasWidth w) {
    static const char *const NAMES[] = {"generic C++", "SSE4.1", "AVX", "AVX2", "AVX-512"};
    return NAMES[w];
}

// oneDNN 2.6's cap names (its ONEDNN_MAX_CPU_ISA values) and the sgemm width each allows. The
// Xeon Phi names (AVX512_MIC*) are left out: their kernels are no subset of AVX512_CORE's.
static const struct {
    const char *name;
    BlasWidth width;
} CAPS[] = {
    {"SSE41", BLAS_WIDTH_SSE41},         {"AVX", BLAS_WIDTH_AVX},
    {"AVX2", BLAS_WIDTH_AVX2},           {"AVX2_VNNI", BLAS_WIDTH_AVX2},
    {"AVX512_CORE", BLAS_WIDTH_AVX512},  {"AVX512_CORE_VNNI", BLAS_WIDTH_AVX512},
    {"AVX512_CORE_BF16", BLAS_WIDTH_AVX512}, {"AVX512_CORE_AMX", BLAS_WIDTH_AVX512},
    {"ALL", BLAS_WIDTH_AVX512},
};

bool blas_cap_width(const char *name, BlasWidth *w) {
    for (size_t i = 0; i < sizeof CAPS / sizeof CAPS[0]; i++)
        if (strcasecmp(name, CAPS[i].name) == 0) {
            *w = CAPS[i].width;
            return true;
        }
    return false;
}

BlasWidth blas_core_width(void) {
    // oneDNN's ISA values are bit masks, each holding those of the ISAs it extends.
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    if ((isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core) return BLAS_WIDTH_AVX512;
    if ((isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2) return BLAS_WIDTH_AVX2;
    if ((isa & dnnl_cpu_isa_avx) == dnnl_cpu_isa_avx) return BLAS_WIDTH_AVX;
    return isa & dnnl_cpu_isa_sse41 ? BLAS_WIDTH_SSE41 : BLAS_WIDTH_GENERIC;
}

// The cap in the environment, as oneDNN reads it: ONEDNN_MAX_CPU_ISA, else DNNL_MAX_CPU_ISA.
// Returns the variable's name, or NULL when neither is set (empty counts as unset).
static const char *cap_env(const char **value) {
    static const char *const VARS[] = {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"};
    for (size_t i = 0; i < 2; i++)
        if ((*value = getenv(VARS[i])) && (*value)[0]) return VARS[i];
    return NULL;
}

// "SSE4.1, AVX, AVX2 + FMA, no AVX-512": what cpuid says; then what XCR0 says.
static void cpu_text(const BlasCpu *cpu, char *buf, size_t size) {
    snprintf(buf, size, "cpuid: %s, %s, AVX2%s, %s; xgetbv: the OS saves %s", cpu->sse41 ? "SSE4.1" : "no SSE4.1",
             cpu->avx ? "AVX" : "no AVX", cpu->avx2 ? (cpu->fma ? " + FMA" : " without FMA") : " no",
             cpu->avx512 ? "AVX-512" : "no AVX-512",
             cpu->os_zmm ? "the ZMM state" : cpu->os_ymm ? "the YMM state, not ZMM" : "no AVX state");
}

const char *blas_core_describe(char *buf, size_t size) {
    BlasCpu cpu;
    blas_cpu_read(&cpu);
    const BlasWidth best = blas_cpu_width(&cpu), runs = blas_core_width();
    const char *val, *var = cap_env(&val);
    char why[160], feats[160];
    cpu_text(&cpu, feats, sizeof feats);
    if (runs == best) snprintf(why, sizeof why, "the widest this CPU runs");
    else if (var) snprintf(why, sizeof why, "%s=%s holds them below this CPU's %s", var, val, blas_width_name(best));
    else snprintf(why, sizeof why, "below this CPU's %s", blas_width_name(best));
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, size, "oneDNN %d.%d.%d sgemm, %s kernels: %s (%s)", v->major, v->minor, v->patch,
             blas_width_name(runs), why, feats);
    return buf;
}

int blas_core_check(char *msg, size_t size) {
    msg[0] = '\0';
    BlasCpu cpu;
    blas_cpu_read(&cpu);
    const BlasWidth best = blas_cpu_width(&cpu);
    const char *val, *var = cap_env(&val), *coretype = getenv("OPENBLAS_CORETYPE");
    BlasWidth cap;
    if (var && !blas_cap_width(val, &cap)) {
        snprintf(msg, size, "%s=%s: not a oneDNN ISA name (SSE41, AVX, AVX2, AVX2_VNNI, AVX512_CORE, "
                 "AVX512_CORE_VNNI, AVX512_CORE_BF16, AVX512_CORE_AMX, ALL); unset it to run the widest kernels "
                 "this CPU runs", var, val);
        return 2;
    }
    if (var && cap > best) {
        snprintf(msg, size, "%s=%s: this CPU cannot run %s kernels (its widest are %s); unset it", var, val,
                 blas_width_name(cap), blas_width_name(best));
        return 2;
    }
    if (var && cap < best) {
        snprintf(msg, size, "%s=%s holds the products to %s kernels on this %s CPU; unset, they run the faster %s ones",
                 var, val, blas_width_name(cap), blas_width_name(best), blas_width_name(best));
        return 1;
    }
    if (coretype && coretype[0]) {
        snprintf(msg, size, "OPENBLAS_CORETYPE=%s does nothing: the products run on oneDNN (ONEDNN_MAX_CPU_ISA caps "
                 "its kernels)", coretype);
        return 1;
    }
    return 0;
}
