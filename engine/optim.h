// engine/optim: AdamW with linear warmup then cosine decay, and global-norm clipping.
// The schedule follows the seed article's torch setup (LinearLR from 0.1x, then
// CosineAnnealingLR), written as a closed form of the 0-based step s:
//   lr(s) = lr * (0.1 + 0.9 * s / warmup)                                   s < warmup
//         = min_lr + (lr - min_lr) * (1 + cos(pi * (s - warmup) / (steps - warmup))) / 2
#ifndef PPTRAIN_OPTIM_H
#define PPTRAIN_OPTIM_H
#include <stddef.h>

typedef struct {
    double lr;             // peak learning rate (default 1e-3)
    double min_lr;         // end of the cosine (default 0)
    int warmup_steps;     // default 0: no warmup
    int total_steps;      // length of the schedule (the run's steps)
    double beta1, beta2;   // default 0.9, 0.99
    double eps;            // default 1e-8
    double weight_decay;   // default 0.1, decoupled, on every parameter (as the seed article)
    double grad_clip;      // max global L2 norm, default 1.0; 0 disables clipping
} OptimConfig;

OptimConfig optim_defaults(void);
double optim_lr_at(const OptimConfig *o, int step);

// Moments for n parameters (one stage's flat buffer) and the step count t.
typedef struct {
    float *m, *v;         // (n)
    size_t n;
    int t;                // updates applied so far
} AdamWState;

AdamWState adamw_state_create(size_t n);
void adamw_state_free(AdamWState *st);
// One update of params(n) from grads(n), already clipped.
void adamw_state_step(AdamWState *st, float *params, const float *grads, const OptimConfig *o, double lr);
#endif
