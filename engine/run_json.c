#include "engine/run_json.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

static void add_model(cJSON *root, const ModelConfig *m) {
    cJSON *o = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(o, "name", m->name);
    cJSON_AddNumberToObject(o, "hidden_size", m->hidden);
    cJSON_AddNumberToObject(o, "intermediate_size", m->intermediate);
    cJSON_AddNumberToObject(o, "num_hidden_layers", m->layers);
    cJSON_AddNumberToObject(o, "num_attention_heads", m->heads);
    cJSON_AddNumberToObject(o, "num_key_value_heads", m->kv_heads);
    cJSON_AddNumberToObject(o, "head_dim", m->head_dim);
    cJSON_AddNumberToObject(o, "vocab_size", m->vocab);
    cJSON_AddNumberToObject(o, "max_position_embeddings", m->max_positions);
    cJSON_AddNumberToObject(o, "rope_theta", m->rope_theta);
    cJSON_AddNumberToObject(o, "rms_norm_eps", m->rms_eps);
    cJSON_AddBoolToObject(o, "tie_word_embeddings", m->tie_word_embeddings);
    cJSON_AddNumberToObject(o, "initializer_range", m->init_std);
}

static void add_optim(cJSON *root, const OptimConfig *o) {
    cJSON *j = cJSON_AddObjectToObject(root, "optimizer");
    cJSON_AddNumberToObject(j, "lr", o->lr);
    cJSON_AddNumberToObject(j, "min_lr", o->min_lr);
    cJSON_AddNumberToObject(j, "warmup_steps", o->warmup_steps);
    cJSON_AddNumberToObject(j, "total_steps", o->total_steps);
    cJSON_AddNumberToObject(j, "beta1", o->beta1);
    cJSON_AddNumberToObject(j, "beta2", o->beta2);
    cJSON_AddNumberToObject(j, "eps", o->eps);
    cJSON_AddNumberToObject(j, "weight_decay", o->weight_decay);
    cJSON_AddNumberToObject(j, "grad_clip", o->grad_clip);
}

char *run_json(const RunConfig *rc, const PipelineOptions *po) {
    cJSON *root = cJSON_CreateObject();
    add_model(root, &rc->model);
    add_optim(root, &rc->optim);
    cJSON_AddStringToObject(root, "data", rc->data_path);
    cJSON_AddStringToObject(root, "batching", rc->batching == BATCHING_PAD ? "pad" : "pack");
    cJSON_AddNumberToObject(root, "batch", rc->batch);
    cJSON_AddNumberToObject(root, "seq_len", rc->seq_len);
    cJSON_AddNumberToObject(root, "microbatches", rc->microbatches);
    cJSON_AddNumberToObject(root, "steps", rc->steps);
    char seed[32];   // a uint64 does not fit a JSON number exactly
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)rc->seed);
    cJSON_AddStringToObject(root, "seed", seed);
    cJSON *p = cJSON_AddObjectToObject(root, "pipeline");
    cJSON_AddStringToObject(p, "schedule", po->schedule);
    cJSON_AddNumberToObject(p, "stages", po->ranks);
    cJSON_AddNumberToObject(p, "virtual", po->virtual_stages);
    cJSON_AddStringToObject(p, "split", po->split);
    cJSON_AddNumberToObject(p, "timeout_s", po->timeout_s);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return check_alloc(text, 1, __FILE__, __LINE__);
}
