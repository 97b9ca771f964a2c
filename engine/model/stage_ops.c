// The stage API of engine/model/model.h: each entry point calls the stage's backend
// (engine/model/stage_ops.h); the optional ones do nothing where the backend has none.
#include "engine/model/stage_ops.h"

#include "engine/model/model_acts.h"

StageActs *stage_acts_create(const StageModel *s, int B, int T) { return s->ops->acts_create(s, B, T); }

void stage_acts_free(StageActs *a) {
    if (a) a->ops->acts_free(a);
}

void stage_acts_set_forward_only(StageActs *a, bool forward_only) { a->forward_only = forward_only; }

double stage_forward(StageModel *s, StageActs *a, const int32_t *tokens, const void *input, const int32_t *targets,
                     float loss_scale) {
    return s->ops->forward(s, a, tokens, input, targets, loss_scale);
}

double stage_step_loss(StageModel *s) { return s->ops->step_loss ? s->ops->step_loss(s) : 0.0; }

bool stage_device_timed(const StageModel *s) { return s->ops->time_mark != NULL; }

void stage_time_reserve(StageModel *s, int n) {
    if (s->ops->time_reserve) s->ops->time_reserve(s, n);
}

void stage_time_mark(StageModel *s, int k) {
    if (s->ops->time_mark) s->ops->time_mark(s, k);
}

bool stage_time_since(const StageModel *s, int base, int k, double *seconds) {
    return s->ops->time_since && s->ops->time_since(s, base, k, seconds);
}

void stage_backward_input(StageModel *s, StageActs *a, const void *dout) { s->ops->backward_input(s, a, dout); }

void stage_backward_weight(StageModel *s, StageActs *a) { s->ops->backward_weight(s, a); }

void stage_backward(StageModel *s, StageActs *a, const void *dout) {
    s->ops->backward_input(s, a, dout);
    s->ops->backward_weight(s, a);
}

size_t stage_msg_bytes(const StageModel *s, int B, int T) { return s->ops->msg_bytes(s, B, T); }

void *stage_msg_alloc(const StageModel *s, size_t bytes) { return s->ops->msg_alloc(s, bytes); }

void stage_msg_free(const StageModel *s, void *msg) { s->ops->msg_free(s, msg); }

void stage_zero_grads(StageModel *s) { s->ops->zero_grads(s); }

void stage_grad_sum_squares(const StageModel *s, double *out) { s->ops->grad_sum_squares(s, out); }

void stage_update(StageModel *s, AdamWState *opt, const OptimConfig *o, double lr, float clip) {
    s->ops->update(s, opt, o, lr, clip);
}

float *stage_reduce_begin(StageModel *s, bool device) { return s->ops->reduce_begin(s, device); }

void stage_reduce_end(StageModel *s, bool device) {
    if (s->ops->reduce_end) s->ops->reduce_end(s, device);
}

void stage_download(StageModel *s, bool grads, AdamWState *opt) {
    if (s->ops->download) s->ops->download(s, grads, opt);
}

void stage_upload(StageModel *s, const AdamWState *opt) {
    if (s->ops->upload) s->ops->upload(s, opt);
}

void stage_bind_thread(const StageModel *s) {
    if (s->ops->bind_thread) s->ops->bind_thread(s);
}
