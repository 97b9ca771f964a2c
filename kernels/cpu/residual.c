// Residual add.
#include "kernels/cpu/kernels.h"

// out may alias a or b: element i is read before it is written, so no restrict here.
void residual_forward(float *out, const float *a, const float *b, size_t n) {
    #pragma omp parallel for schedule(static) if (n >= KERNEL_PARALLEL_MIN_WORK)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}
