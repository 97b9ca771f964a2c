// kernels/cuda/gemm_plans.c: the GEMM plan cache (gemm_plans.h): an array searched in order,
// newest last. A run has a few dozen distinct GEMMs, so a linear scan of small keys costs less
// than one kernel launch.
#include "kernels/cuda/gemm_plans.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct GemmPlans {
    size_t value_bytes;
    void (*release)(void *value);
    GemmKey *keys;        // (GEMM_PLANS_MAX)
    char *values;         // (GEMM_PLANS_MAX, value_bytes)
    int n;
    unsigned long misses;
};

static void *xalloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "pptrain: out of host memory for the GEMM plan cache\n");
        exit(EXIT_FAILURE);
    }
    return p;
}

GemmPlans *gemm_plans_create(size_t value_bytes, void (*release)(void *value)) {
    GemmPlans *p = xalloc(sizeof *p);
    p->value_bytes = value_bytes;
    p->release = release;
    p->keys = xalloc(GEMM_PLANS_MAX * sizeof *p->keys);
    p->values = xalloc(GEMM_PLANS_MAX * value_bytes);
    return p;
}

static void release_all(GemmPlans *p) {
    for (int i = 0; p->release && i < p->n; i++) p->release(p->values + (size_t)i * p->value_bytes);
    p->n = 0;
}

void gemm_plans_destroy(GemmPlans *p) {
    if (!p) return;
    release_all(p);
    free(p->keys);
    free(p->values);
    free(p);
}

// Keys are compared field by field (no padding bytes enter the comparison).
static bool same_key(const GemmKey *a, const GemmKey *b) {
    return a->m == b->m && a->n == b->n && a->k == b->k && a->ta == b->ta && a->tb == b->tb && a->lda == b->lda &&
           a->ldb == b->ldb && a->ldc == b->ldc && a->ab_type == b->ab_type && a->c_type == b->c_type &&
           a->epilogue == b->epilogue && a->align_a == b->align_a && a->align_b == b->align_b &&
           a->align_c == b->align_c;
}

void *gemm_plans_find(GemmPlans *p, const GemmKey *key, bool *is_new) {
    for (int i = p->n - 1; i >= 0; i--)
        if (same_key(&p->keys[i], key)) {
            *is_new = false;
            return p->values + (size_t)i * p->value_bytes;
        }
    if (p->n == GEMM_PLANS_MAX) release_all(p);
    void *v = p->values + (size_t)p->n * p->value_bytes;
    memset(v, 0, p->value_bytes);
    p->keys[p->n++] = *key;
    p->misses++;
    *is_new = true;
    return v;
}

unsigned long gemm_plans_misses(const GemmPlans *p) { return p->misses; }

uint32_t gemm_ptr_alignment(const void *ptr) {
    const uintptr_t a = (uintptr_t)ptr;
    uint32_t al = 256;
    while (al > 1 && (a & (al - 1))) al >>= 1;
    return al;
}

uint32_t gemm_pair_alignment(const void *c, const void *d) {
    const uint32_t ac = gemm_ptr_alignment(c), ad = gemm_ptr_alignment(d);
    return ac < ad ? ac : ad;
}
