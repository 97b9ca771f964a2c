// Linear layer y = x @ W^T with W in (OC, IC) layout, all three products on cblas_sgemm.
#include "kernels/cpu/kernels.h"
#include <cblas.h>

void linear_forward(float *out, const float *inp, const float *W, int N, int IC, int OC) {
    // out(N, OC) = inp(N, IC) @ W(OC, IC)^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, IC,
                1.0f, inp, IC, W, IC, 0.0f, out, OC);
}

void linear_backward_input(float *dinp, const float *dout, const float *W, int N, int IC, int OC) {
    // dinp(N, IC) += dout(N, OC) @ W(OC, IC)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IC, OC,
                1.0f, dout, OC, W, IC, 1.0f, dinp, IC);
}

void linear_backward_weight(float *dW, const float *dout, const float *inp, int N, int IC, int OC) {
    // dW(OC, IC) += dout(N, OC)^T @ inp(N, IC)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, N,
                1.0f, dout, OC, inp, IC, 1.0f, dW, IC);
}
