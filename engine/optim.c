#include "engine/optim.h"

#include <math.h>
#include <stdlib.h>

#include "engine/error.h"
#include "kernels/cpu/kernels.h"

OptimConfig optim_defaults(void) {
    return (OptimConfig){.lr = 1e-3, .min_lr = 0.0, .warmup_steps = 0, .total_steps = 1,
                         .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1,
                         .grad_clip = 1.0};
}

double optim_lr_at(const OptimConfig *o, int step) {
    if (step < o->warmup_steps)
        return o->lr * (0.1 + 0.9 * (double)step / o->warmup_steps);
    const int decay = o->total_steps - o->warmup_steps;
    const double progress = (double)(step - o->warmup_steps) / (decay > 1 ? decay : 1);
    const double cosine = 0.5 * (1.0 + cos(M_PI * (progress < 1.0 ? progress : 1.0)));
    return o->min_lr + (o->lr - o->min_lr) * cosine;
}

AdamWState adamw_state_create(size_t n) {
    return (AdamWState){.m = xcalloc(n, sizeof(float)), .v = xcalloc(n, sizeof(float)), .n = n};
}

void adamw_state_free(AdamWState *st) {
    free(st->m);
    free(st->v);
    *st = (AdamWState){0};
}

void adamw_state_step(AdamWState *st, float *params, const float *grads, const OptimConfig *o, double lr) {
    st->t++;
    adamw_update(params, grads, st->m, st->v, st->n, st->t, lr, o->beta1, o->beta2, o->eps,
                 o->weight_decay);
}
