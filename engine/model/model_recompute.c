// Recompute on CPU stages (engine/model/model.h, --recompute all): the *_light functions run the
// CPU backend's equations (model_stage.c) in a borrowed full workspace and keep in a light
// StageActs only the stage's boundary tensors, plus what the forward needs to run again.
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/model_acts.h"
#include "engine/model/model_cpu.h"

StageActs *stage_acts_create_light(const StageModel *s, int B, int T) {
    assert(s->ops == &stage_cpu_ops);
    StageActs *a = xcalloc(1, sizeof *a);
    *a = stage_acts_shape(s, B, T, true);
    a->ops = &stage_cpu_ops;   // its acts_free frees either form
    a->arena_bytes = stage_acts_light_layout(s, a, NULL);
    a->arena = stage_cpu_arena(a->arena_bytes);
    stage_acts_light_layout(s, a, a->arena);
    return a;
}

static void copy_floats(float *dst, const float *src, size_t n) {
    if (dst != src) memcpy(dst, src, n * sizeof(float));
}

double stage_forward_light(StageModel *s, StageActs *light, StageActs *ws, const int32_t *tokens,
                           const void *input, const int32_t *targets, float loss_scale) {
    assert(light->light && !ws->light && light->N == ws->N && s->ops == &stage_cpu_ops);
    const size_t N = (size_t)ws->N, NC = N * (size_t)ws->C;
    const double loss = stage_cpu_forward(s, ws, tokens, input, targets, loss_scale);
    if (s->has_embed) memcpy(light->tokens, tokens, N * sizeof(int32_t));
    else copy_floats(light->input, input, NC);   // input may be light's own (a caller's choice)
    if (s->has_head) {
        memcpy(light->targets, targets, N * sizeof(int32_t));
        light->loss_scale = loss_scale;
    } else {
        memcpy(light->output, ws->output, NC * sizeof(float));
    }
    return loss;
}

void stage_backward_input_light(StageModel *s, StageActs *light, StageActs *ws, const void *dout) {
    assert(light->light && !ws->light && light->N == ws->N && s->ops == &stage_cpu_ops);
    // The last stage's loss gradient is made by its forward: running it again restores it.
    stage_cpu_forward(s, ws, light->tokens, light->input, light->targets, light->loss_scale);
    stage_cpu_backward_input(s, ws, dout);
    if (!s->has_embed) memcpy(light->dinput, ws->dinput, (size_t)ws->N * ws->C * sizeof(float));
}

void stage_backward_light(StageModel *s, StageActs *light, StageActs *ws, const void *dout) {
    stage_backward_input_light(s, light, ws, dout);
    stage_cpu_backward_weight(s, ws);
}
