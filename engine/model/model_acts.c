// The activation arena of one microbatch slot on one stage: sized and carved once per run.
// Full form: everything the stage's backward reads. Light form (recompute): only what crosses
// the stage boundary, plus what the forward needs to run again (tokens, targets).
#include <stdlib.h>
#include <string.h>

#include "engine/model/model.h"
#include "engine/model/model_acts.h"
#include "engine/model/model_cuda.h"
#include "kernels/cpu/kernels.h"

// Carves buffers out of one arena; the counting pass (base == NULL) only sums sizes.
typedef struct {
    char *base;
    size_t used;
} Carver;

static float *carve(Carver *cv, size_t floats) {
    const size_t bytes = (floats * sizeof(float) + 63) & ~(size_t)63;   // 64-byte aligned
    float *p = cv->base ? (float *)(cv->base + cv->used) : NULL;
    cv->used += bytes;
    return p;
}

static void carve_acts(const StageModel *s, StageActs *a, Carver *cv) {
    const ModelConfig *c = &s->cfg;
    const size_t N = (size_t)a->N, C = (size_t)c->hidden, I = (size_t)c->intermediate;
    const size_t Q = (size_t)c->heads * c->head_dim, KV = (size_t)c->kv_heads * c->head_dim;
    const size_t ATT = (size_t)a->B * c->heads * a->T * a->T;
    a->tokens = (int32_t *)carve(cv, N);
    a->resid = carve(cv, (a->n_layers + 1) * N * C);
    a->dresid = carve(cv, (a->n_layers + 1) * N * C);
    for (int l = 0; l < a->n_layers; l++) {
        LayerActs *la = cv->base ? &a->layer[l] : &(LayerActs){0};
        la->ln1 = carve(cv, N * C);
        la->rstd1 = carve(cv, N);
        la->q = carve(cv, N * Q);
        la->k = carve(cv, N * KV);
        la->v = carve(cv, N * KV);
        la->att = carve(cv, ATT);
        la->atty = carve(cv, N * Q);
        la->xmid = carve(cv, N * C);
        la->ln2 = carve(cv, N * C);
        la->rstd2 = carve(cv, N);
        la->gate = carve(cv, N * I);
        la->up = carve(cv, N * I);
        la->h = carve(cv, N * I);
        la->dq = carve(cv, N * Q);
        la->dk = carve(cv, N * KV);
        la->dv = carve(cv, N * KV);
        la->dxmid = carve(cv, N * C);
        la->dgate = carve(cv, N * I);
        la->dup = carve(cv, N * I);
        la->dln1 = carve(cv, N * C);
        la->dln2 = carve(cv, N * C);
    }
    if (s->has_head) {
        a->lnf = carve(cv, N * C);
        a->rstdf = carve(cv, N);
        a->logits = carve(cv, N * (size_t)c->vocab);
        a->dlnf = carve(cv, N * C);
    }
    a->cos_tab = carve(cv, (size_t)a->T * c->head_dim / 2);
    a->sin_tab = carve(cv, (size_t)a->T * c->head_dim / 2);
    if (a->n_layers > 0) {
        a->datty = carve(cv, N * Q);
        a->drot_q = carve(cv, N * Q);
        a->drot_k = carve(cv, N * KV);
        a->dh = carve(cv, N * I);
        a->datt = carve(cv, ATT);
    }
}

// Light form: tokens (first stage), targets (last), input and dinput (non-first), output
// (non-last), each (N) or (N, C). Every other pointer stays NULL.
static void carve_light(const StageModel *s, StageActs *a, Carver *cv) {
    const size_t N = (size_t)a->N, C = (size_t)s->cfg.hidden;
    if (s->has_embed) a->tokens = (int32_t *)carve(cv, N);
    if (s->has_head) a->targets = (int32_t *)carve(cv, N);
    if (!s->has_embed) a->input = carve(cv, N * C);
    if (!s->has_embed) a->dinput = carve(cv, N * C);
    if (!s->has_head) a->output = carve(cv, N * C);
}

StageActs stage_acts_shape(const StageModel *s, int B, int T, bool light) {
    return (StageActs){.B = B, .T = T, .N = B * T, .n_layers = s->layer_end - s->layer_begin,
                       .C = s->cfg.hidden, .V = s->cfg.vocab, .light = light};
}

size_t stage_acts_light_bytes(const StageModel *s, int B, int T) {
    StageActs a = stage_acts_shape(s, B, T, true);
    Carver cv = {0};
    carve_light(s, &a, &cv);
    return cv.used + sizeof(StageActs);
}

StageActs *stage_acts_create_light(const StageModel *s, int B, int T) {
    StageActs *a = xcalloc(1, sizeof *a);
    *a = stage_acts_shape(s, B, T, true);
    Carver cv = {0};
    carve_light(s, a, &cv);
    a->arena_bytes = cv.used;
    a->arena = aligned_alloc(64, cv.used ? cv.used : 64);
    check_alloc(a->arena, cv.used, __FILE__, __LINE__);
    memset(a->arena, 0, cv.used);
    cv = (Carver){.base = a->arena};
    carve_light(s, a, &cv);
    return a;
}

bool stage_acts_is_light(const StageActs *a) {
    return a->light;
}

size_t stage_acts_layout(const StageModel *s, StageActs *a, char *base) {
    Carver cv = {.base = base};
    carve_acts(s, a, &cv);
    return cv.used;
}

size_t stage_acts_bytes(const StageModel *s, int B, int T) {
    StageActs a = stage_acts_shape(s, B, T, false);
    return stage_acts_layout(s, &a, NULL) + sizeof(StageActs) + a.n_layers * sizeof(LayerActs);
}

StageActs *stage_acts_create(const StageModel *s, int B, int T) {
    if (s->cuda) return stage_cuda_acts_create(s, B, T);
    StageActs *a = xcalloc(1, sizeof *a);
    *a = stage_acts_shape(s, B, T, false);
    a->layer = xcalloc((size_t)(a->n_layers ? a->n_layers : 1), sizeof(LayerActs));
    a->arena_bytes = stage_acts_layout(s, a, NULL);
    a->arena = aligned_alloc(64, a->arena_bytes);
    check_alloc(a->arena, a->arena_bytes, __FILE__, __LINE__);
    memset(a->arena, 0, a->arena_bytes);      // touch every page now, not inside the first step
    stage_acts_layout(s, a, a->arena);
    a->input = a->resid;
    a->output = a->resid + (size_t)a->n_layers * a->N * a->C;
    a->dinput = a->dresid;
    a->dlogits = a->logits;
    float inv_freq[ROPE_MAX_HEAD_DIM / 2];
    model_rope_inv_freq(&s->cfg, inv_freq);
    rope_tables(a->cos_tab, a->sin_tab, T, s->cfg.head_dim, inv_freq);
    return a;
}

void stage_acts_free(StageActs *a) {
    if (!a) return;
    if (a->cuda) {
        stage_cuda_acts_free(a);
        return;
    }
    if (a->dlogits != a->logits) free(a->dlogits);
    free(a->arena);
    free(a->layer);
    free(a);
}

// Gives the loss gradient a buffer of its own so the logits survive the forward (tests).
// Called at set-up, never inside a step.
void stage_acts_keep_logits(StageActs *a, bool keep) {
    if (a->cuda) return;   // a GPU stage's logits stay on the device (tests read CPU stages)
    const bool kept = a->dlogits != a->logits;
    if (!a->logits || keep == kept) return;
    if (keep) {
        const size_t bytes = (size_t)a->N * a->V * sizeof(float);
        a->dlogits = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        check_alloc(a->dlogits, bytes, __FILE__, __LINE__);
    } else {
        free(a->dlogits);
        a->dlogits = a->logits;
    }
}

const void *stage_acts_output(const StageActs *a) {
    return a->cuda ? stage_cuda_acts_output(a) : a->output;
}

const void *stage_acts_dinput(const StageActs *a) {
    return a->cuda ? stage_cuda_acts_dinput(a) : a->dinput;
}

size_t stage_msg_bytes(const StageModel *s, int B, int T) {
    return (size_t)B * T * s->cfg.hidden * (s->cuda ? stage_cuda_msg_elem_bytes(s) : sizeof(float));
}

void *stage_msg_alloc(const StageModel *s, size_t bytes) {
    return s->cuda ? stage_cuda_msg_alloc(s, bytes) : xmalloc(bytes ? bytes : 1);
}

void stage_msg_free(const StageModel *s, void *msg) {
    if (s->cuda) stage_cuda_msg_free(s, msg);
    else free(msg);
}

const float *stage_acts_logits(const StageActs *a) {
    return a->logits;
}
