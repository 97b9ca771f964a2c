// AdamW step, term for term as torch.optim.AdamW (single-tensor path) computes it in fp32.
#include <math.h>
#include "kernels/adamw_scalars.h"
#include "kernels/cpu/kernels.h"

void adamw_update(float *params, const float *grads, float *m, float *v, size_t n, int t,
                  double lr, double beta1, double beta2, double eps, double weight_decay) {
    const AdamwScalars s = adamw_scalars(t, lr, beta1, beta2, eps, weight_decay);
    const float decay = s.decay, w1 = s.w1, w2 = s.w2, b2 = s.b2, epsf = s.eps;
    const float step_size = s.step_size, bc2_sqrt = s.bc2_sqrt;
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
