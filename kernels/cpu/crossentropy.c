// Fused softmax + cross-entropy over logits(N, V), loss in double.
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/vecmath.h"

// Row segments of the loss sum (the parallelism of the kernel, up to this many threads).
#define CROSSENTROPY_SEGMENTS 64

// -log softmax(x)[target] of one row; d (may equal x, or NULL) <- scale * (softmax - onehot).
static double crossentropy_row(float *d, const float *x, int target, int V, float scale) {
    float m = vec_max(x, V);
    float xt = x[target];                             // read before d overwrites the row
    double sum = vec_exp_sum(d, x, m, V);
    if (d) {
        float k = (float)(scale / sum);
        for (int j = 0; j < V; j++) d[j] *= k;
        d[target] -= scale;
    }
    return (double)m + log(sum) - (double)xt;
}

double crossentropy_forward_backward(float *dlogits, const float *logits, const int32_t *targets,
                                     int N, int V, float scale) {
    // Rows are cut into CROSSENTROPY_SEGMENTS fixed segments, each summed in row order, and the
    // segment sums added in order: the loss's bits depend on N alone, not on the thread count.
    double partial[CROSSENTROPY_SEGMENTS] = {0};
    const int segs = N < CROSSENTROPY_SEGMENTS ? N : CROSSENTROPY_SEGMENTS;
    #pragma omp parallel for schedule(static) if ((size_t)N * V >= KERNEL_PARALLEL_MIN_WORK)
    for (int g = 0; g < segs; g++) {
        const int n0 = (int)((long)N * g / segs), n1 = (int)((long)N * (g + 1) / segs);
        double local = 0.0;
        for (int n = n0; n < n1; n++) {
            const float *x = logits + (size_t)n * V;
            float *d = dlogits ? dlogits + (size_t)n * V : NULL;
            if (targets[n] < 0) {
                if (d) memset(d, 0, (size_t)V * sizeof(float));
                continue;
            }
            local += crossentropy_row(d, x, targets[n], V, scale);
        }
        partial[g] = local;
    }
    double loss = 0.0;
    for (int g = 0; g < segs; g++) loss += partial[g];
    return (double)scale * loss;
}
