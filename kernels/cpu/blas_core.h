// kernels/cpu/blas_core: which kernels run the CPU products (oneDNN's sgemm), why, and what
// pptrain says about a user's cap on them.
//
// The products run on oneDNN's dnnl_sgemm (kernels/cpu/gemm.c), which picks its kernels from
// the CPU's features when it first runs: cpuid for what the CPU has, xgetbv for the register
// state the OS saves. No list of CPU models is involved, so a CPU newer than the library still
// gets the widest kernels it runs. OpenBLAS 0.3.21 chose by model number instead and fell back
// to its SSE3 (Prescott) kernels on a new Xeon (family 6, model 207), 3-4x slower; oneDNN was
// also the fastest of the three libraries measured at this project's shapes (docs/benchmarks.md, "Which
// library runs the products").
//
// The user may cap oneDNN's kernels with ONEDNN_MAX_CPU_ISA (or its older name
// DNNL_MAX_CPU_ISA). A cap at or below this CPU is honoured with a note; a cap the CPU cannot
// run, or a name oneDNN does not know, is refused (blas_core_check).
#ifndef PPTRAIN_BLAS_CORE_H
#define PPTRAIN_BLAS_CORE_H
#include <stdbool.h>
#include <stddef.h>

// Widths of vector kernels, in the order each one's CPU runs all those before it. oneDNN's
// sgemm kernels come in these widths; its finer ISA steps (VNNI, bf16, AMX) add nothing to fp32
// products.
typedef enum {
    BLAS_WIDTH_GENERIC,   // not x86-64, or less than SSE4.1: oneDNN's plain C++
    BLAS_WIDTH_SSE41,
    BLAS_WIDTH_AVX,
    BLAS_WIDTH_AVX2,      // AVX2 + FMA
    BLAS_WIDTH_AVX512,    // AVX-512 F, CD, BW, DQ, VL (oneDNN's avx512_core)
} BlasWidth;

// The CPU's features as cpuid reports them and xgetbv says the OS saves: a width is counted
// only when both hold.
typedef struct {
    bool sse41, avx, fma, avx2, avx512;   // avx512: the five subsets of BLAS_WIDTH_AVX512
    bool os_ymm, os_zmm;                  // XCR0 saves the YMM state; the opmask and ZMM state
} BlasCpu;

void blas_cpu_read(BlasCpu *cpu);
// The widest kernels `cpu` runs. Pure, for tests.
BlasWidth blas_cpu_width(const BlasCpu *cpu);
// "AVX2", "AVX-512", ...
const char *blas_width_name(BlasWidth w);

// The width of a oneDNN ISA cap name (ONEDNN_MAX_CPU_ISA's values: "AVX2", "avx512_core_bf16",
// "ALL" ...), case-insensitive; false for a name oneDNN does not know. Pure, for tests.
bool blas_cap_width(const char *name, BlasWidth *w);

// The width oneDNN runs in this process (from dnnl_get_effective_cpu_isa).
BlasWidth blas_core_width(void);

// One line for --version and the run banner: the library, the kernels it runs and why, e.g.
// "oneDNN 2.6.3 sgemm, AVX2 kernels: the widest this CPU runs (cpuid: AVX2 + FMA, no
// AVX-512; the OS saves the YMM state)". Returns buf.
const char *blas_core_describe(char *buf, size_t size);

// Checks the environment's caps before any product runs. Returns 0 when nothing is to be said,
// 1 with a note in msg (a cap below this CPU, honoured; an OPENBLAS_CORETYPE that no longer
// does anything), 2 with an error in msg (a cap this CPU cannot run, or an unknown name).
int blas_core_check(char *msg, size_t size);
#endif
