// kernels/cuda/gemm_plans: a context's cache of GEMM plans, keyed by everything a cuBLASLt
// heuristic query depends on, so that the query (and building the matmul descriptor and
// layouts) happens once per distinct GEMM, in the first step, not on every call (gemm.cu).
// Plain C, no CUDA type: the emulator (tests/gpu_emu/kernels_emu.c) keeps the same cache over
// the same keys and counts its misses, the heuristic queries a GPU would make.
// A plan is value_bytes of the caller's (gemm.cu: descriptors, layouts, the algorithm).
#ifndef PPTRAIN_KERNELS_CUDA_GEMM_PLANS_H
#define PPTRAIN_KERNELS_CUDA_GEMM_PLANS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// What a row-major GEMM's plan depends on (gemm.cu's gemm_rm arguments): shape, transposes,
// leading dimensions, operand and result types, the epilogue, and the operands' alignments
// (the heuristic must offer only kernels that accept them). Zero unused fields.
typedef struct {
    int32_t m, n, k;
    int32_t ta, tb;
    int32_t lda, ldb, ldc;
    int32_t ab_type, c_type;      // cudaDataType_t values
    int32_t epilogue;             // cublasLtEpilogue_t (CUBLASLT_EPILOGUE_DEFAULT: 1)
    uint32_t align_a, align_b, align_c;
} GemmKey;

typedef struct GemmPlans GemmPlans;

// An empty cache of plans of value_bytes each; release(value) frees one plan's resources
// (gemm_plans_destroy, and when the cache is full and starts over).
GemmPlans *gemm_plans_create(size_t value_bytes, void (*release)(void *value));
void gemm_plans_destroy(GemmPlans *p);
// The plan for key. *is_new: it was not cached (a miss): the caller fills the zeroed value
// (the heuristic query) before its next call of gemm_plans_find. Past GEMM_PLANS_MAX plans
// the cache releases them all and starts over (a run has a few dozen distinct GEMMs).
void *gemm_plans_find(GemmPlans *p, const GemmKey *key, bool *is_new);
// Misses so far: the plans ever built.
unsigned long gemm_plans_misses(const GemmPlans *p);
// Largest power of two (<= 256) dividing the address: the alignment a GemmKey records.
uint32_t gemm_ptr_alignment(const void *p);
// The same for two buffers a GEMM reads and writes as C and D: the smaller of theirs.
uint32_t gemm_pair_alignment(const void *c, const void *d);

#define GEMM_PLANS_MAX 256

#ifdef __cplusplus
}
#endif
#endif
