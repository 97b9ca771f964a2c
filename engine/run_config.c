// RunConfig's defaults and its cross-field checks.
#include "engine/run_config.h"

#include <stdio.h>

#include <math.h>
#include <string.h>

RunConfig run_config_defaults(void) {
    RunConfig rc;
    memset(&rc, 0, sizeof rc);
    Error unused;
    model_config_preset(&rc.model, "tiny", &unused);
    rc.optim = optim_defaults();
    rc.batching = BATCHING_PAD;
    rc.batch = 8;
    rc.seq_len = 64;
    rc.microbatches = 1;
    rc.steps = 20;
    rc.seed = 1337;
    rc.val_batches = 4;
    rc.sample_tokens = 64;
    snprintf(rc.sample_prompt, sizeof rc.sample_prompt, "The ");
    return rc;
}

// Values AdamW cannot work with: eps 0 divides by zero on the first parameter whose second
// moment is 0 (the loss turns NaN at step 2), beta 1 never forgets, a negative rate climbs.
static int optim_validate(const OptimConfig *o, Error *err) {
    const char *flag = NULL, *want = NULL;
    double value = 0.0;
    if (!(o->eps > 0.0) || !isfinite(o->eps)) flag = "--eps", value = o->eps, want = "a positive number (1e-8)";
    else if (!(o->lr >= 0.0) || !isfinite(o->lr)) flag = "--lr", value = o->lr, want = "0 or more";
    else if (!(o->min_lr >= 0.0) || !isfinite(o->min_lr)) flag = "--min-lr", value = o->min_lr, want = "0 or more";
    else if (!(o->beta1 >= 0.0 && o->beta1 < 1.0)) flag = "--beta1", value = o->beta1, want = "in [0, 1)";
    else if (!(o->beta2 >= 0.0 && o->beta2 < 1.0)) flag = "--beta2", value = o->beta2, want = "in [0, 1)";
    else if (!(o->weight_decay >= 0.0) || !isfinite(o->weight_decay))
        flag = "--weight-decay", value = o->weight_decay, want = "0 or more";
    else if (!(o->grad_clip >= 0.0) || !isfinite(o->grad_clip))
        flag = "--grad-clip", value = o->grad_clip, want = "0 (off) or more";
    if (!flag && o->min_lr > o->lr) {   // the cosine would climb from --lr to --min-lr
        error_set(err, "--min-lr %g exceeds --lr %g: the schedule decays from --lr down to --min-lr", o->min_lr, o->lr);
        return -1;
    }
    if (!flag) return 0;
    error_set(err, "%s %g: AdamW needs %s", flag, value, want);
    return -1;
}

int run_config_validate(const RunConfig *rc, Error *err) {
    if (model_config_validate(&rc->model, err) || optim_validate(&rc->optim, err)) return -1;
    if (rc->batch % rc->microbatches != 0) {
        error_set(err, "--batch %d is not divisible by --microbatches %d", rc->batch, rc->microbatches);
        return -1;
    }
    if (rc->seq_len > rc->model.max_positions) {
        error_set(err, "--seq %d exceeds the model's max_position_embeddings (%d)",
                  rc->seq_len, rc->model.max_positions);
        return -1;
    }
    if (rc->optim.warmup_steps > rc->steps) {
        error_set(err, "--warmup %d exceeds --steps %d", rc->optim.warmup_steps, rc->steps);
        return -1;
    }
    return 0;
}


// Counted in double: a config with hidden 1e9 overflows any integer count.
static double param_count(const ModelConfig *m) {
    const double C = m->hidden, I = m->intermediate, Q = (double)m->heads * m->head_dim,
                 KV = (double)m->kv_heads * m->head_dim;
    const double layer = C * Q + 2.0 * C * KV + Q * C + 3.0 * C * I + 2.0 * C;
    return (double)m->vocab * C * (m->tie_word_embeddings ? 1.0 : 2.0) + m->layers * layer + C;
}

// Activations of one microbatch of `rows` sequences through the whole model: per layer and
// token its inputs, norms, q/k/v, attention output, the MLP's three intermediate rows and the
// attention probabilities (heads x T); the head's logits and their gradient. Under recompute
// a layer keeps only its input, and one layer's full set is live at a time.
static double acts_bytes(const ModelConfig *m, double rows, double T, bool recompute) {
    const double Q = (double)m->heads * m->head_dim, KV = (double)m->kv_heads * m->head_dim;
    const double per_layer = 4.0 * m->hidden + Q * 2.0 + KV * 2.0 + 3.0 * m->intermediate + m->heads * T;
    const double layers = recompute ? m->layers * (double)m->hidden + per_layer : m->layers * per_layer;
    return 4.0 * rows * T * (layers + 2.0 * m->vocab + m->hidden);
}

double run_config_memory_bytes(const RunConfig *rc, double model_share, int replicas, double in_flight,
                               bool recompute) {
    // fp32 weights, gradients and both Adam moments: 16 bytes a parameter.
    const double state = 16.0 * param_count(&rc->model) * model_share;
    const double rows = (double)rc->batch / rc->microbatches / replicas;
    const double acts = acts_bytes(&rc->model, rows, rc->seq_len, recompute) * model_share * in_flight;
    const double batch = 8.0 * rc->batch * (double)rc->seq_len;   // the step's input and target ids
    return replicas * (state + acts) + batch;
}
