// A stage's named parameters: one allocation for weights and one for gradients, carved into
// Hugging Face–named tensors, initialized from (seed, name) alone.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/init.h"
#include "engine/model/model.h"
#include "engine/model/model_cpu.h"

typedef struct {
    StageModel *s;
    size_t offset;
    int count;          // counting pass when s->params is NULL
} ParamLayout;

static void add_param(ParamLayout *pl, const char *name, int rows, int cols) {
    const size_t numel = (size_t)rows * (cols ? cols : 1);
    if (pl->s->params) {
        ParamInfo *p = &pl->s->params[pl->count];
        snprintf(p->name, sizeof p->name, "%s", name);
        p->rows = rows;
        p->cols = cols;
        p->numel = numel;
        p->offset = pl->offset;
    }
    pl->offset += numel;
    pl->count++;
}

// One decoder layer's tensors in state_dict order: each projection's weight, then its bias
// when the config has one, then the two norms. stage_carve_views walks the same list.
typedef struct {
    const char *module;     // "self_attn.q_proj", ...
    int rows, cols;         // the weight's shape; the bias is (rows)
    bool bias;
} LayerTensor;

enum { LAYER_PROJECTIONS = 7 };

static void layer_tensors(const ModelConfig *c, LayerTensor t[LAYER_PROJECTIONS]) {
    const int C = c->hidden, Q = c->heads * c->head_dim, KV = c->kv_heads * c->head_dim;
    const int I = c->intermediate;
    const bool ab = c->attention_bias, mb = c->mlp_bias;
    const LayerTensor all[LAYER_PROJECTIONS] = {
        {"self_attn.q_proj", Q, C, ab}, {"self_attn.k_proj", KV, C, ab}, {"self_attn.v_proj", KV, C, ab},
        {"self_attn.o_proj", C, Q, ab}, {"mlp.gate_proj", I, C, mb},     {"mlp.up_proj", I, C, mb},
        {"mlp.down_proj", C, I, mb},
    };
    memcpy(t, all, sizeof all);
}

// The stage's tensors in Hugging Face state_dict order. Called twice: to count, then to fill.
static void layout_params(ParamLayout *pl) {
    const StageModel *s = pl->s;
    const ModelConfig *c = &s->cfg;
    const int C = c->hidden;
    LayerTensor t[LAYER_PROJECTIONS];
    layer_tensors(c, t);
    char name[96];
    if (s->has_embed) add_param(pl, "model.embed_tokens.weight", c->vocab, C);
    for (int l = s->layer_begin; l < s->layer_end; l++) {
        for (int i = 0; i < LAYER_PROJECTIONS; i++) {
            snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, t[i].module);
            add_param(pl, name, t[i].rows, t[i].cols);
            if (!t[i].bias) continue;
            snprintf(name, sizeof name, "model.layers.%d.%s.bias", l, t[i].module);
            add_param(pl, name, t[i].rows, 0);
        }
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        add_param(pl, name, C, 0);
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l);
        add_param(pl, name, C, 0);
    }
    if (s->has_head) {
        add_param(pl, "model.norm.weight", C, 0);
        if (!c->tie_word_embeddings) add_param(pl, "lm_head.weight", c->vocab, C);
    }
}

// Tensors of a stage shaped like s with layers [0, layer_end) and the given ends, counted
// by the same layout that creates stages (so every tensor kind is counted once, in order).
static int count_tensors(const ModelConfig *cfg, int layer_end, bool has_embed, bool has_head) {
    StageModel shell = {.cfg = *cfg, .layer_begin = 0, .layer_end = layer_end, .has_embed = has_embed,
                        .has_head = has_head};
    ParamLayout pl = {.s = &shell};
    layout_params(&pl);
    return pl.count;
}

int model_param_tensors(const ModelConfig *cfg) {
    return count_tensors(cfg, cfg->layers, true, true);
}

ParamInfo *model_param_infos(const ModelConfig *cfg, int *n) {
    StageModel shell = {.cfg = *cfg, .layer_begin = 0, .layer_end = cfg->layers, .has_embed = true, .has_head = true};
    ParamLayout pl = {.s = &shell};
    layout_params(&pl);
    shell.params = xcalloc((size_t)pl.count, sizeof *shell.params);
    pl = (ParamLayout){.s = &shell};
    layout_params(&pl);
    *n = pl.count;
    return shell.params;
}

int stage_param_base(const StageModel *s) {
    // The embedding (unless this stage holds it) and every layer before layer_begin.
    return count_tensors(&s->cfg, s->layer_begin, !s->has_embed, false);
}

// Points the named views of one flat buffer (weights or grads) at their tensors.
void stage_carve_views(const StageModel *s, float *base, ParamViews *v) {
    const int n_layers = s->layer_end - s->layer_begin;
    int i = 0;
    if (s->has_embed) v->wte = base + s->params[i++].offset;
    LayerTensor t[LAYER_PROJECTIONS];
    layer_tensors(&s->cfg, t);
    for (int l = 0; l < n_layers; l++) {
        LayerParams *lp = &v->layer[l];
        float **weight[LAYER_PROJECTIONS] = {&lp->wq, &lp->wk, &lp->wv, &lp->wo, &lp->wgate, &lp->wup, &lp->wdown};
        float **bias[LAYER_PROJECTIONS] = {&lp->bq, &lp->bk, &lp->bv, &lp->bo, &lp->bgate, &lp->bup, &lp->bdown};
        for (int k = 0; k < LAYER_PROJECTIONS; k++) {
            *weight[k] = base + s->params[i++].offset;
            *bias[k] = t[k].bias ? base + s->params[i++].offset : NULL;
        }
        lp->ln1 = base + s->params[i++].offset;
        lp->ln2 = base + s->params[i++].offset;
    }
    if (s->has_head) {
        v->norm = base + s->params[i++].offset;
        v->lm_head = base + (s->head_copy_offset ? s->head_copy_offset : s->params[i++].offset);
    }
}

// Vectors are norm weights (initialized to 1) or biases (0, as torch.nn.Linear under
// transformers' _init_weights).
static bool is_bias(const ParamInfo *p) {
    const size_t n = strlen(p->name);
    return p->cols == 0 && n > 5 && strcmp(p->name + n - 5, ".bias") == 0;
}

static bool is_norm_weight(const ParamInfo *p) {
    return p->cols == 0 && !is_bias(p);
}

StageModel *stage_create(const ModelConfig *cfg, int layer_begin, int layer_end,
                         bool has_embed, bool has_head, uint64_t seed, Error *err) {
    if (layer_begin < 0 || layer_end > cfg->layers || layer_begin > layer_end ||
        (layer_begin == layer_end && !has_embed && !has_head)) {
        error_set(err, "stage holds no work: layers [%d, %d) of %d", layer_begin, layer_end, cfg->layers);
        return NULL;
    }
    StageModel *s = xcalloc(1, sizeof *s);
    s->cfg = *cfg;
    s->layer_begin = layer_begin;
    s->layer_end = layer_end;
    s->has_embed = has_embed;
    s->has_head = has_head;
    s->ops = &stage_cpu_ops;
    ParamLayout pl = {.s = s};
    layout_params(&pl);
    s->n_params = pl.count;
    s->numel = pl.offset;
    if (cfg->tie_word_embeddings && has_head) {
        s->head_copy_offset = s->numel;
        s->numel += (size_t)cfg->vocab * cfg->hidden;
    }
    s->params = xcalloc((size_t)s->n_params, sizeof *s->params);
    pl = (ParamLayout){.s = s};
    layout_params(&pl);
    s->weights = xmalloc(s->numel * sizeof(float));
    s->grads = xcalloc(s->numel, sizeof(float));
    const int n_layers = layer_end - layer_begin;
    s->w.layer = xcalloc((size_t)(n_layers ? n_layers : 1), sizeof(LayerParams));
    s->g.layer = xcalloc((size_t)(n_layers ? n_layers : 1), sizeof(LayerParams));
    stage_carve_views(s, s->weights, &s->w);
    stage_carve_views(s, s->grads, &s->g);
    for (int i = 0; i < s->n_params; i++) {
        const ParamInfo *p = &s->params[i];
        float *w = s->weights + p->offset;
        if (is_norm_weight(p)) {
            for (size_t k = 0; k < p->numel; k++) w[k] = 1.0f;
        } else if (is_bias(p)) {
            memset(w, 0, p->numel * sizeof(float));
        } else {
            init_normal(w, p->numel, seed, p->name, cfg->init_std);
        }
    }
    // The head copy starts as the embedding does: drawn from (seed, its name).
    if (s->head_copy_offset)
        init_normal(s->weights + s->head_copy_offset, s->numel - s->head_copy_offset, seed,
                    "model.embed_tokens.weight", cfg->init_std);
    return s;
}

ParamInfo stage_head_copy_info(const StageModel *s) {
    ParamInfo p = {.name = "model.embed_tokens.weight"};
    if (!s->head_copy_offset) return p;
    p.rows = s->cfg.vocab;
    p.cols = s->cfg.hidden;
    p.numel = s->numel - s->head_copy_offset;
    p.offset = s->head_copy_offset;
    return p;
}

void stage_sync_head_copy(StageModel *s) {
    if (s->head_copy_offset && s->has_embed)
        memcpy(s->weights + s->head_copy_offset, s->w.wte, (s->numel - s->head_copy_offset) * sizeof(float));
}

float *stage_tied_grad(StageModel *s) {
    if (!s->cfg.tie_word_embeddings) return NULL;
    if (s->has_embed) return s->g.wte;
    return s->head_copy_offset ? s->grads + s->head_copy_offset : NULL;
}

void stage_tie_grads(StageModel *s) {
    if (!s->head_copy_offset || !s->has_embed) return;
    const size_t n = s->numel - s->head_copy_offset;
    float *e = s->g.wte, *h = s->grads + s->head_copy_offset;
    for (size_t i = 0; i < n; i++) e[i] += h[i];
    memcpy(h, e, n * sizeof(float));
}

void stage_tie_set(StageModel *s, const float *sum) {
    const size_t n = (size_t)s->cfg.vocab * s->cfg.hidden;
    if (s->has_embed && s->cfg.tie_word_embeddings) memcpy(s->g.wte, sum, n * sizeof(float));
    if (s->head_copy_offset) memcpy(s->grads + s->head_copy_offset, sum, n * sizeof(float));
}

void stage_free(StageModel *s) {
    if (!s) return;
    if (s->ops->detach) s->ops->detach(s);
    free(s->params);
    free(s->weights);
    free(s->grads);
    free(s->w.layer);
    free(s->g.layer);
    free(s);
}

const ParamInfo *stage_find_param(const StageModel *s, const char *name) {
    for (int i = 0; i < s->n_params; i++)
        if (strcmp(s->params[i].name, name) == 0) return &s->params[i];
    return NULL;
}
