// Tiny test harness shared by tests/unit/test_*.c: CHECK macros that count and report failures,
// and the closing line "N passed, N failed" that CI reads.
#ifndef PPTRAIN_TEST_UTIL_H
#define PPTRAIN_TEST_UTIL_H
#include <stdio.h>
#include <math.h>

static int test_passed_count, test_failed_count;

#define CHECK(cond, ...) do { \
    if (cond) { test_passed_count++; } \
    else { test_failed_count++; fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
           fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } \
} while (0)

#define CHECK_NEAR(a, b, tol, what) do { \
    double check_a_ = (double)(a), check_b_ = (double)(b); \
    CHECK(fabs(check_a_ - check_b_) <= (tol), "%s: %.9g vs %.9g (tol %.3g)", what, check_a_, check_b_, (double)(tol)); \
} while (0)

static inline int test_finish(void) {
    printf("%d passed, %d failed\n", test_passed_count, test_failed_count);
    return test_failed_count ? 1 : 0;
}
#endif
