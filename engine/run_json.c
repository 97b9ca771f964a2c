#include "engine/run_json.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/json_read.h"

// The model as its Hugging Face config.json (model_config_to_hf_json: every field that shapes
// the math, RoPE included), plus the preset's name.
static void add_model(cJSON *root, const ModelConfig *m) {
    char *hf = model_config_to_hf_json(m, "float32");
    cJSON *o = cJSON_Parse(hf);
    free(hf);
    check_alloc(o, 1, __FILE__, __LINE__);
    cJSON_AddStringToObject(o, "name", m->name);
    cJSON_AddItemToObject(root, "model", o);
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
    if (rc->tokenizer_path[0]) cJSON_AddStringToObject(root, "tokenizer", rc->tokenizer_path);
    cJSON_AddStringToObject(root, "batching", rc->batching == BATCHING_PAD ? "pad" : "pack");
    cJSON_AddNumberToObject(root, "batch", rc->batch);
    cJSON_AddNumberToObject(root, "seq_len", rc->seq_len);
    cJSON_AddNumberToObject(root, "microbatches", rc->microbatches);
    cJSON_AddNumberToObject(root, "steps", rc->steps);
    cJSON_AddNumberToObject(root, "checkpoint_every", rc->ckpt_every);
    char seed[32];   // a uint64 does not fit a JSON number exactly
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)rc->seed);
    cJSON_AddStringToObject(root, "seed", seed);
    cJSON *p = cJSON_AddObjectToObject(root, "pipeline");
    cJSON_AddStringToObject(p, "schedule", po->schedule);
    cJSON_AddNumberToObject(p, "stages", po->ranks);
    cJSON_AddNumberToObject(p, "virtual", po->virtual_stages);
    cJSON_AddStringToObject(p, "split", po->split);
    cJSON_AddNumberToObject(p, "timeout_s", po->timeout_s);
    cJSON_AddNumberToObject(p, "dp", po->dp);
    cJSON_AddStringToObject(p, "transport", transport_kind_name(po->transport));
    cJSON_AddBoolToObject(p, "recompute", po->recompute);
    cJSON_AddStringToObject(p, "device", po->device == DEVICE_CUDA ? "cuda" : "cpu");
    cJSON_AddStringToObject(p, "precision", po->device != DEVICE_CUDA ? "fp32" : po->gpu_fp32 ? "fp32" : "bf16");
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return check_alloc(text, 1, __FILE__, __LINE__);
}

// ---- reading it back -----------------------------------------------------------------------

typedef struct {
    const char *where;
    Error *err;
    int failed;
} Reader;

static const cJSON *field(Reader *r, const cJSON *obj, const char *key, bool string) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (r->failed) return NULL;
    if (!v || (string ? !cJSON_IsString(v) : !cJSON_IsNumber(v))) {
        error_set(r->err, "%s: run config: \"%s\" is missing or not a %s", r->where, key, string ? "string" : "number");
        r->failed = 1;
        return NULL;
    }
    return v;
}

static void read_int(Reader *r, const cJSON *obj, const char *key, int *out) {
    const cJSON *v = field(r, obj, key, false);
    if (!v) return;
    if (!(v->valuedouble >= INT_MIN && v->valuedouble <= INT_MAX) || v->valuedouble != floor(v->valuedouble)) {
        error_set(r->err, "%s: run config: \"%s\" is not an integer", r->where, key);
        r->failed = 1;
        return;
    }
    *out = (int)v->valuedouble;
}

static void read_double(Reader *r, const cJSON *obj, const char *key, double *out) {
    const cJSON *v = field(r, obj, key, false);
    if (v) *out = v->valuedouble;
}

static void read_string(Reader *r, const cJSON *obj, const char *key, char *out, size_t cap) {
    const cJSON *v = field(r, obj, key, true);
    if (v) snprintf(out, cap, "%s", v->valuestring);
}

static const cJSON *object(Reader *r, const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!r->failed && !cJSON_IsObject(v)) {
        error_set(r->err, "%s: run config: \"%s\" is missing or not an object", r->where, key);
        r->failed = 1;
    }
    return r->failed ? NULL : v;
}

// The model object less pptrain's "name" is a Hugging Face config.json.
static int read_model(Reader *r, const cJSON *m, ModelConfig *out) {
    cJSON *hf = cJSON_Duplicate(m, true);
    check_alloc(hf, 1, __FILE__, __LINE__);
    cJSON_DeleteItemFromObjectCaseSensitive(hf, "name");
    char *text = cJSON_PrintUnformatted(hf);
    cJSON_Delete(hf);
    const int rc = model_config_from_json_text(out, check_alloc(text, 1, __FILE__, __LINE__), r->where, r->err);
    free(text);
    read_string(r, m, "name", out->name, sizeof out->name);   // the preset's name, not the file's
    return rc || r->failed ? -1 : 0;
}

int run_json_parse(const char *text, const char *where, RunConfig *rc, PipelineOptions *po, Error *err) {
    cJSON *root = json_parse_object(text, strlen(text), where, err);
    Reader r = {.where = where, .err = err};
    if (!root) return -1;
    const cJSON *m = object(&r, root, "model"), *o = object(&r, root, "optimizer"), *p = object(&r, root, "pipeline");
    if (m && read_model(&r, m, &rc->model)) r.failed = 1;
    if (o) {
        read_double(&r, o, "lr", &rc->optim.lr);
        read_double(&r, o, "min_lr", &rc->optim.min_lr);
        read_int(&r, o, "warmup_steps", &rc->optim.warmup_steps);
        read_int(&r, o, "total_steps", &rc->optim.total_steps);
        read_double(&r, o, "beta1", &rc->optim.beta1);
        read_double(&r, o, "beta2", &rc->optim.beta2);
        read_double(&r, o, "eps", &rc->optim.eps);
        read_double(&r, o, "weight_decay", &rc->optim.weight_decay);
        read_double(&r, o, "grad_clip", &rc->optim.grad_clip);
    }
    char batching[16] = "", seed[32] = "";
    read_string(&r, root, "data", rc->data_path, sizeof rc->data_path);
    // Optional: runs before --tokenizer, and runs on the byte tokenizer, have none.
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
    if (cJSON_IsString(tok)) snprintf(rc->tokenizer_path, sizeof rc->tokenizer_path, "%s", tok->valuestring);
    read_string(&r, root, "batching", batching, sizeof batching);
    read_int(&r, root, "batch", &rc->batch);
    read_int(&r, root, "seq_len", &rc->seq_len);
    read_int(&r, root, "microbatches", &rc->microbatches);
    read_int(&r, root, "steps", &rc->steps);
    // Absent in checkpoints written before a resumed run kept its interval: at the end only.
    rc->ckpt_every = 0;
    if (cJSON_GetObjectItemCaseSensitive(root, "checkpoint_every")) read_int(&r, root, "checkpoint_every", &rc->ckpt_every);
    read_string(&r, root, "seed", seed, sizeof seed);
    if (p) {
        read_string(&r, p, "schedule", po->schedule, sizeof po->schedule);
        read_int(&r, p, "stages", &po->ranks);
        read_int(&r, p, "virtual", &po->virtual_stages);
        read_string(&r, p, "split", po->split, sizeof po->split);
        read_double(&r, p, "timeout_s", &po->timeout_s);
        read_int(&r, p, "dp", &po->dp);
        char transport[16] = "";
        read_string(&r, p, "transport", transport, sizeof transport);
        if (transport_kind_parse(transport, &po->transport)) po->transport = TRANSPORT_KIND_LOCAL;
        po->recompute = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "recompute"));
        // Absent in runs recorded before GPUs: the CPU.
        char device[16] = "cpu", precision[16] = "bf16";
        const cJSON *dv = cJSON_GetObjectItemCaseSensitive(p, "device");
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(p, "precision");
        if (cJSON_IsString(dv)) snprintf(device, sizeof device, "%s", dv->valuestring);
        if (cJSON_IsString(pr)) snprintf(precision, sizeof precision, "%s", pr->valuestring);
        po->device = strcmp(device, "cuda") == 0 ? DEVICE_CUDA : DEVICE_CPU;
        po->gpu_fp32 = po->device == DEVICE_CUDA && strcmp(precision, "fp32") == 0;   // CPU runs: the GPU default
    }
    if (!r.failed) {
        char *end = NULL;
        rc->seed = strtoull(seed, &end, 10);
        rc->batching = strcmp(batching, "pack") == 0 ? BATCHING_PACK : BATCHING_PAD;
        if (!seed[0] || *end || (strcmp(batching, "pack") && strcmp(batching, "pad"))) {
            error_set(err, "%s: run config: bad \"seed\" or \"batching\"", where);
            r.failed = 1;
        }
    }
    cJSON_Delete(root);
    return r.failed ? -1 : 0;
}
