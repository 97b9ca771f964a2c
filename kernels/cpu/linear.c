// Linear layer y = x @ W^T with W in (OC, IC) layout, all three products on gemm_fixed
// (kernels/cpu/gemm.c), so their bits do not depend on the thread count.
#include "kernels/cpu/kernels.h"

void linear_forward(float *out, const float *inp, const float *W, int N, int IC, int OC) {
    // out(N, OC) = inp(N, IC) @ W(OC, IC)^T
    gemm_fixed(false, true, N, OC, IC, 1.0f, inp, IC, W, IC, 0.0f, out, OC);
}

void linear_backward_input(float *dinp, const float *dout, const float *W, int N, int IC, int OC, bool accumulate) {
    // dinp(N, IC) (+)= dout(N, OC) @ W(OC, IC)
    gemm_fixed(false, false, N, IC, OC, 1.0f, dout, OC, W, IC, accumulate ? 1.0f : 0.0f, dinp, IC);
}

void linear_backward_weight(float *dW, const float *dout, const float *inp, int N, int IC, int OC) {
    // dW(OC, IC) += dout(N, OC)^T @ inp(N, IC)
    gemm_fixed(true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dW, IC);
}

void bias_forward(float *out, const float *b, int N, int OC) {
    // out(N, OC) += b(OC), each row
    for (int n = 0; n < N; n++) {
        float *row = out + (size_t)n * OC;
        for (int o = 0; o < OC; o++) row[o] += b[o];
    }
}

void bias_backward(float *db, const float *dout, int N, int OC) {
    // db(OC) += sum over rows of dout(N, OC), rows added in order: the same bits at any
    // thread count, as gemm_fixed's products.
    for (int n = 0; n < N; n++) {
        const float *row = dout + (size_t)n * OC;
        for (int o = 0; o < OC; o++) db[o] += row[o];
    }
}
