// kernels/cpu/blas_core: which of OpenBLAS's kernel families ("cores") runs the CPU products,
// and whether a faster one sits unused on this CPU.
//
// A DYNAMIC_ARCH OpenBLAS (Debian's) picks its core when it loads, from the CPU's family and
// model, unless OPENBLAS_CORETYPE names one. A core older than the CPU costs most of a CPU
// run's time: on a 2-core AMD EPYC with AVX-512 (family 0x1a), OPENBLAS_CORETYPE=Haswell (AVX2
// kernels) ran `small`'s products at 101-111 GFLOP/s on one core where OpenBLAS's own choice
// there, Cooperlake (AVX-512), ran them at 181-206 (build/bench/bench_sgemm), and `small`
// trained on one stage at 655-673 tok/s instead of 1,220-1,256 (2026-11-25). pptrain honours the
// variable and says so: --version names the core, and a run's banner carries a note when its
// core has no AVX-512 kernels on a CPU that runs them (forced, or an OpenBLAS too old to know
// the CPU).
#ifndef PPTRAIN_BLAS_CORE_H
#define PPTRAIN_BLAS_CORE_H
#include <stdbool.h>
#include <stddef.h>

// Whether `core` (an OpenBLAS corename, such as "Haswell") leaves AVX-512 unused on a CPU
// that runs it (`avx512`: blas_core_cpu_avx512()). Pure: the rule alone, for tests.
bool blas_core_below_cpu(const char *core, bool avx512);

// Whether this CPU runs AVX-512 F, CD, BW, DQ and VL, the subsets OpenBLAS's SkylakeX kernels
// are built for, with the OS saving their state (false off x86-64).
bool blas_core_cpu_avx512(void);

// This process's core, as OpenBLAS names it ("Cooperlake"), and whether it leaves this CPU's
// AVX-512 unused (blas_core_below_cpu of the two).
const char *blas_core_name(void);
bool blas_core_leaves_avx512(void);

// The core and how it was chosen, for --version: "Cooperlake (OpenBLAS's choice)",
// "Haswell (OPENBLAS_CORETYPE=Haswell)". Returns buf.
const char *blas_core_describe(char *buf, size_t size);

// A run banner's note when this process's core leaves AVX-512 unused,
// with what to do about it; "" otherwise. Returns buf.
const char *blas_core_note(char *buf, size_t size);
#endif
