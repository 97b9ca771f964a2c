// Linear layer y = x @ W^T with W in (OC, IC) layout, all three products on gemm_fixed
// (kernels/cpu/gemm.c), so their bits do not depend on the thread count.
#include "kernels/cpu/kernels.h"

void linear_forward(float *out, const float *inp, const float *W, int N, int IC, int OC) {
    // out(N, OC) = inp(N, IC) @ W(OC, IC)^T
    gemm_fixed(false, true, N, OC, IC, 1.0f, inp, IC, W, IC, 0.0f, out, OC);
}

void linear_backward_input(float *dinp, const float *dout, const float *W, int N, int IC, int OC) {
    // dinp(N, IC) += dout(N, OC) @ W(OC, IC)
    gemm_fixed(false, false, N, IC, OC, 1.0f, dout, OC, W, IC, 1.0f, dinp, IC);
}

void linear_backward_weight(float *dW, const float *dout, const float *inp, int N, int IC, int OC) {
    // dW(OC, IC) += dout(N, OC)^T @ inp(N, IC)
    gemm_fixed(true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dW, IC);
}
