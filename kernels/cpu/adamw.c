// AdamW step, term for term as torch.optim.AdamW (single-tensor path) computes it in fp32.
#include <math.h>
#include "kernels/cpu/kernels.h"

void adamw_update(float *params, const float *grads, float *m, float *v, size_t n, int t,
                  double lr, double beta1, double beta2, double eps, double weight_decay) {
    // Scalars in double, as torch computes them from Python floats, then used in fp32.
    const double bc1 = 1.0 - pow(beta1, t), bc2 = 1.0 - pow(beta2, t);
    const float decay = (float)(1.0 - lr * weight_decay);
    const float w1 = (float)(1.0 - beta1), w2 = (float)(1.0 - beta2);
    const float b2 = (float)beta2, epsf = (float)eps;
    const float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    float *restrict p = params, *restrict mm = m, *restrict vv = v;
    const float *restrict g = grads;
    #pragma omp parallel for schedule(static) if (n >= KERNEL_PARALLEL_MIN_WORK)
    for (size_t i = 0; i < n; i++) {
        p[i] *= decay;
        mm[i] += w1 * (g[i] - mm[i]);                 // exp_avg.lerp_(grad, 1 - beta1)
        vv[i] = vv[i] * b2 + w2 * g[i] * g[i];     // exp_avg_sq.mul_(beta2).addcmul_(g, g, 1 - beta2)
        p[i] -= step_size * (mm[i] / (sqrtf(vv[i]) / bc2_sqrt + epsf));
    }
}
