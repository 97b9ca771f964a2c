// SwiGLU gate of the Llama MLP: out = silu(gate) * up.
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/vecmath.h"

void swiglu_forward(float *out, const float *gate, const float *up, int N, int FF) {
    #pragma omp parallel for schedule(static) if ((size_t)N * FF >= KERNEL_PARALLEL_MIN_WORK)
    for (int n = 0; n < N; n++) {
        float *restrict o = out + (size_t)n * FF;
        const float *restrict g = gate + (size_t)n * FF, *restrict u = up + (size_t)n * FF;
        // silu(g) = g / (1 + exp(-g)), the form torch uses.
        for (int i = 0; i < FF; i++) o[i] = g[i] / (1.0f + vec_expf(-g[i])) * u[i];
    }
}

void swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                     const float *up, int N, int FF) {
    #pragma omp parallel for schedule(static) if ((size_t)N * FF >= KERNEL_PARALLEL_MIN_WORK)
    for (int n = 0; n < N; n++) {
        size_t off = (size_t)n * FF;
        float *restrict dg = dgate + off, *restrict du = dup + off;
        const float *restrict d = dout + off, *restrict g = gate + off, *restrict u = up + off;
        for (int i = 0; i < FF; i++) {
            // silu'(g) = s (1 + g (1 - s)), s = sigmoid(g)
            float s = 1.0f / (1.0f + vec_expf(-g[i]));
            dg[i] = d[i] * u[i] * (s * (1.0f + g[i] * (1.0f - s)));
            du[i] = d[i] * (g[i] * s);
        }
    }
}
