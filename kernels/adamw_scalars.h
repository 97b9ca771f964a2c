// kernels/adamw_scalars.h: the scalars of one AdamW step, computed once for both backends
// (kernels/cpu/adamw.c and kernels/cuda/adamw_kernels.cuh), so the CPU's and the GPU's updates
// cannot drift apart in how they round them. Plain C, also read by nvcc.
#ifndef PPTRAIN_KERNELS_ADAMW_SCALARS_H
#define PPTRAIN_KERNELS_ADAMW_SCALARS_H
#include <math.h>

// As torch computes them from Python floats: in double, then rounded to fp32 for the update.
typedef struct {
    float decay;       // 1 - lr * weight_decay
    float w1, w2;      // 1 - beta1, 1 - beta2
    float b2;          // beta2
    float eps;
    float step_size;   // lr / (1 - beta1^t)
    float bc2_sqrt;    // sqrt(1 - beta2^t)
} AdamwScalars;

// Step t (1-based) of AdamW with these hyperparameters.
static inline AdamwScalars adamw_scalars(int t, double lr, double beta1, double beta2, double eps,
                                         double weight_decay) {
    const double bc1 = 1.0 - pow(beta1, t), bc2 = 1.0 - pow(beta2, t);
    AdamwScalars s;
    s.decay = (float)(1.0 - lr * weight_decay);
    s.w1 = (float)(1.0 - beta1);
    s.w2 = (float)(1.0 - beta2);
    s.b2 = (float)beta2;
    s.eps = (float)eps;
    s.step_size = (float)(lr / bc1);
    s.bc2_sqrt = (float)sqrt(bc2);
    return s;
}

#endif
