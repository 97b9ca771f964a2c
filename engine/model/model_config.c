// Llama configuration: presets, Hugging Face config.json, validation, sizes and FLOPs.
#include <cjson/cJSON.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/file_read.h"
#include "engine/json_read.h"
#include "engine/model/model.h"
#include "engine/data/tokenizer.h"

static void preset_common(ModelConfig *cfg, const char *name) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->name, sizeof cfg->name, "%s", name);
    cfg->vocab = BYTE_VOCAB_SIZE;
    cfg->rope_theta = 10000.0f;
    cfg->rms_eps = 1e-5f;
    cfg->tie_word_embeddings = false;
    cfg->init_std = 0.02f;
    cfg->has_bos = true;                // the byte tokenizer's ids (engine/data/tokenizer.h)
    cfg->bos_id = TOKEN_BOS;
    cfg->n_eos = 1;
    cfg->eos_ids[0] = TOKEN_EOS;
}

int model_config_preset(ModelConfig *cfg, const char *name, Error *err) {
    preset_common(cfg, name);
    if (strcmp(name, "tiny") == 0) {           // 329,152 parameters: tests, 8 layers to cut
        cfg->hidden = 64;
        cfg->intermediate = 128;
        cfg->layers = 8;
        cfg->heads = 4;
        cfg->kv_heads = 2;
        cfg->head_dim = 16;
        cfg->max_positions = 256;
    } else if (strcmp(name, "small") == 0) {   // 25,439,744 parameters: demos, benchmarks
        cfg->hidden = 512;
        cfg->intermediate = 1536;
        cfg->layers = 8;
        cfg->heads = 8;
        cfg->kv_heads = 4;
        cfg->head_dim = 64;
        cfg->max_positions = 1024;
    } else if (strcmp(name, "125m") == 0) {    // 127,027,968 parameters: the GPU benchmark (GPT-2 small's
        cfg->hidden = 768;                     // size, Llama-shaped: 12 x 768, a 32000-token vocabulary)
        cfg->intermediate = 1792;
        cfg->layers = 12;
        cfg->heads = 12;
        cfg->kv_heads = 12;
        cfg->head_dim = 64;
        cfg->vocab = 32000;
        cfg->max_positions = 1024;
    } else {
        error_set(err, "--model: unknown preset '%s' (tiny, small, 125m, or a config.json path)", name);
        return -1;
    }
    return 0;
}

int model_config_validate(const ModelConfig *cfg, Error *err) {
    const char *src = cfg->name;
    struct { const char *key; int value; } dims[] = {
        {"hidden_size", cfg->hidden}, {"intermediate_size", cfg->intermediate},
        {"num_hidden_layers", cfg->layers}, {"num_attention_heads", cfg->heads},
        {"num_key_value_heads", cfg->kv_heads}, {"head_dim", cfg->head_dim},
        {"vocab_size", cfg->vocab}, {"max_position_embeddings", cfg->max_positions},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        if (dims[i].value <= 0) {
            error_set(err, "%s: %s must be positive, got %d", src, dims[i].key, dims[i].value);
            return -1;
        }
    }
    if (cfg->heads % cfg->kv_heads != 0) {
        error_set(err, "%s: num_attention_heads (%d) is not divisible by num_key_value_heads (%d)",
                  src, cfg->heads, cfg->kv_heads);
        return -1;
    }
    if (cfg->head_dim > ROPE_MAX_HEAD_DIM) {
        error_set(err, "%s: head_dim (%d) exceeds %d", src, cfg->head_dim, ROPE_MAX_HEAD_DIM);
        return -1;
    }
    if (cfg->head_dim % 2 != 0) {
        error_set(err, "%s: head_dim (%d) must be even for rotary embeddings", src, cfg->head_dim);
        return -1;
    }
    if (!(cfg->rope_theta > 0.0f) || !(cfg->rms_eps > 0.0f) || !(cfg->init_std >= 0.0f)) {
        error_set(err, "%s: rope_theta and rms_norm_eps must be positive", src);
        return -1;
    }
    return 0;
}

// Reads an optional integer field; a present field of the wrong type is an error.
static int json_int(const cJSON *root, const char *key, int *out, const char *path, Error *err) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!item || cJSON_IsNull(item)) return 0;
    const double v = cJSON_IsNumber(item) ? item->valuedouble : 0.5;
    if (!cJSON_IsNumber(item) || v != floor(v)) {
        error_set(err, "%s: \"%s\" must be an integer", path, key);
        return -1;
    }
    if (!(v >= INT_MIN && v <= INT_MAX)) {   // before the cast: a huge double's is undefined
        error_set(err, "%s: \"%s\" %.17g is out of range (at most %d)", path, key, v, INT_MAX);
        return -1;
    }
    *out = (int)item->valuedouble;
    return 0;
}

static int json_float(const cJSON *root, const char *key, float *out, const char *path, Error *err) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!item || cJSON_IsNull(item)) return 0;
    if (!cJSON_IsNumber(item) || !(fabs(item->valuedouble) <= FLT_MAX)) {
        error_set(err, "%s: \"%s\" must be a (float) number", path, key);
        return -1;
    }
    *out = (float)item->valuedouble;
    return 0;
}

// A config.json is a few kilobytes; 16 MB is a generous ceiling that still refuses a wrong file.
// The error names the file, not a flag: --model and --init-from both read one.
static char *read_small_file(const char *path, Error *err) {
    return file_read_all(path, (size_t)1 << 24, "a config.json", NULL, err);
}

// Every key of a Hugging Face Llama config.json falls in one of three sets (docs/config-keys.md
// lists them all): keys read and honoured, keys that must hold the one value pptrain
// implements, and metadata with no effect on the math. Any other key is refused with its
// name: a model that silently trains as a different model is the worst outcome there is.
static const char *const CONFIG_HONOURED[] = {
    "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "head_dim", "vocab_size", "max_position_embeddings", "rope_theta", "rope_parameters", "rope_scaling",
    "rms_norm_eps", "initializer_range", "tie_word_embeddings", "attention_bias", "mlp_bias",
    "bos_token_id", "eos_token_id", "pad_token_id", NULL};
// What transformers 4.x and 5.x write beside the math (PretrainedConfig's own attributes, the
// generation defaults 4.x kept in config.json) and what published Llama configs add
// (SmolLM's "is_llama_config", "_model_name_or_path"). None of them changes a logit.
static const char *const CONFIG_METADATA[] = {
    "architectures", "torch_dtype", "dtype", "transformers_version", "use_cache", "_name_or_path",
    "_model_name_or_path", "_commit_hash", "_attn_implementation", "_attn_implementation_autoset",
    "output_attentions", "output_hidden_states", "return_dict", "tokenizer_class", "is_llama_config",
    "unk_token_id", "sep_token_id", "decoder_start_token_id", "id2label", "label2id", "problem_type",
    "finetuning_task", "task_specific_params", "prefix", "torchscript", "use_bfloat16", "tf_legacy_loss",
    "chunk_size_feed_forward", "is_decoder", "return_dict_in_generate", "output_scores", "max_length",
    "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty",
    "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty",
    "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences",
    "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
    "forced_bos_token_id", "forced_eos_token_id", NULL};

static bool in_list(const char *const *list, const char *key) {
    for (; *list; list++)
        if (strcmp(*list, key) == 0) return true;
    return false;
}

// Keys accepted only with the value pptrain implements (null counts as absent where
// transformers reads null as the default, for the false and empty ones).
typedef enum { FIX_STRING, FIX_NUMBER, FIX_FALSE, FIX_EMPTY, FIX_NULL } FixedKind;
static const struct {
    const char *key;
    FixedKind kind;
    const char *text;     // FIX_STRING's value
    double number;        // FIX_NUMBER's value
} CONFIG_FIXED[] = {
    {"model_type", FIX_STRING, "llama", 0}, {"hidden_act", FIX_STRING, "silu", 0},
    {"attention_dropout", FIX_NUMBER, NULL, 0.0}, {"pretraining_tp", FIX_NUMBER, NULL, 1.0},
    {"partial_rotary_factor", FIX_NUMBER, NULL, 1.0}, {"rope_interleaved", FIX_FALSE, NULL, 0},
    {"is_encoder_decoder", FIX_FALSE, NULL, 0}, {"add_cross_attention", FIX_FALSE, NULL, 0},
    {"tie_encoder_decoder", FIX_FALSE, NULL, 0}, {"pruned_heads", FIX_EMPTY, NULL, 0},
    {"cross_attention_hidden_size", FIX_NULL, NULL, 0},
};
#define N_CONFIG_FIXED (sizeof CONFIG_FIXED / sizeof CONFIG_FIXED[0])

static bool is_fixed_key(const char *key) {
    for (size_t i = 0; i < N_CONFIG_FIXED; i++)
        if (strcmp(CONFIG_FIXED[i].key, key) == 0) return true;
    return false;
}

// One fixed key's value against the implemented one; the message says which value works.
static int check_fixed(const cJSON *v, size_t i, const char *path, Error *err) {
    const char *key = CONFIG_FIXED[i].key;
    switch (CONFIG_FIXED[i].kind) {
    case FIX_STRING:
        if (cJSON_IsString(v) && strcmp(v->valuestring, CONFIG_FIXED[i].text) == 0) return 0;
        error_set(err, "%s: %s must be \"%s\"", path, key, CONFIG_FIXED[i].text);
        return -1;
    case FIX_NUMBER:
        if (cJSON_IsNumber(v) && v->valuedouble == CONFIG_FIXED[i].number) return 0;
        error_set(err, "%s: %s must be %g (pptrain trains without it)", path, key, CONFIG_FIXED[i].number);
        return -1;
    case FIX_FALSE:
        if (cJSON_IsFalse(v) || cJSON_IsNull(v)) return 0;
        error_set(err, "%s: %s must be false (pptrain implements only that)", path, key);
        return -1;
    case FIX_EMPTY:
        if (cJSON_IsNull(v) || ((cJSON_IsObject(v) || cJSON_IsArray(v)) && !v->child)) return 0;
        error_set(err, "%s: %s must be empty (pptrain implements only that)", path, key);
        return -1;
    case FIX_NULL:
        if (cJSON_IsNull(v)) return 0;
        error_set(err, "%s: %s must be null (pptrain implements only that)", path, key);
        return -1;
    }
    return -1;
}

// The keys whose value must be the one pptrain implements, checked one by one.
static int check_fixed_values(const cJSON *root, const char *path, Error *err) {
    for (size_t i = 0; i < N_CONFIG_FIXED; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, CONFIG_FIXED[i].key);
        if (v && check_fixed(v, i, path, err)) return -1;
    }
    return 0;
}

// An optional true/false key: left as it is when absent.
static int json_bool(const cJSON *root, const char *key, bool *out, const char *path, Error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) {
        error_set(err, "%s: \"%s\" must be true or false", path, key);
        return -1;
    }
    *out = cJSON_IsTrue(v);
    return 0;
}

static int check_keys(const cJSON *root, const char *path, Error *err) {
    for (const cJSON *item = root->child; item; item = item->next)
        if (!in_list(CONFIG_HONOURED, item->string) && !in_list(CONFIG_METADATA, item->string) &&
            !is_fixed_key(item->string)) {
            error_set(err, "%s: key \"%s\" is not one pptrain implements (it could change the model); refusing "
                           "rather than training another model", path, item->string);
            return -1;
        }
    return check_fixed_values(root, path, err);
}

// An optional token id: an integer, or null (absent, as transformers reads it).
static int json_token_id(const cJSON *root, const char *key, bool *has, int *id, const char *path, Error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    *has = false;
    if (!v || cJSON_IsNull(v)) return 0;
    if (json_int(root, key, id, path, err)) return -1;
    *has = true;
    return 0;
}

// bos_token_id, eos_token_id (an integer or a list of them, as Llama 3 writes) and
// pad_token_id, kept as the file has them; a file without them has none (model.h).
static int read_token_ids(const cJSON *root, ModelConfig *cfg, const char *path, Error *err) {
    if (json_token_id(root, "bos_token_id", &cfg->has_bos, &cfg->bos_id, path, err) ||
        json_token_id(root, "pad_token_id", &cfg->has_pad, &cfg->pad_id, path, err))
        return -1;
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    bool has = false;
    cfg->n_eos = 0;
    cfg->eos_is_list = cJSON_IsArray(eos);
    if (!cfg->eos_is_list) {
        if (json_token_id(root, "eos_token_id", &has, &cfg->eos_ids[0], path, err)) return -1;
        cfg->n_eos = has;
        return 0;
    }
    if (cJSON_GetArraySize(eos) > MODEL_MAX_EOS) {
        error_set(err, "%s: eos_token_id lists %d ids; pptrain keeps at most %d", path, cJSON_GetArraySize(eos),
                  MODEL_MAX_EOS);
        return -1;
    }
    for (const cJSON *e = eos->child; e; e = e->next) {
        const double v = cJSON_IsNumber(e) ? e->valuedouble : 0.5;
        if (!(v >= INT_MIN && v <= INT_MAX) || v != floor(v)) {
            error_set(err, "%s: \"eos_token_id\" must be an integer or a list of integers", path);
            return -1;
        }
        cfg->eos_ids[cfg->n_eos++] = (int)v;
    }
    return 0;
}

// RoPE: transformers 5 writes "rope_parameters": {"rope_theta", "rope_type", ...}; older
// versions a top-level "rope_theta" and "rope_scaling": {"rope_type" or "type", ...}. Both
// are read (rope_parameters wins); types "default" and "llama3" are honoured, any other
// refused, as is a parameter pptrain does not know.
static int read_rope_params(const cJSON *p, const char *what, ModelConfig *cfg, const char *path, Error *err) {
    if (!p || cJSON_IsNull(p)) return 0;
    if (!cJSON_IsObject(p)) {
        error_set(err, "%s: \"%s\" must be an object", path, what);
        return -1;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "rope_type");
    if (!type) type = cJSON_GetObjectItemCaseSensitive(p, "type");
    const char *t = type && cJSON_IsString(type) ? type->valuestring : type ? "" : "default";
    if (strcmp(t, "default") != 0 && strcmp(t, "llama3") != 0) {
        error_set(err, "%s: %s rope_type \"%s\" is not implemented (default and llama3 are)", path, what, t);
        return -1;
    }
    cfg->rope_type = strcmp(t, "llama3") == 0 ? ROPE_LLAMA3 : ROPE_DEFAULT;
    static const char *const llama3_keys[] = {"factor", "low_freq_factor", "high_freq_factor",
                                              "original_max_position_embeddings", "rope_type", "type",
                                              "rope_theta", "partial_rotary_factor", NULL};
    const char *const *allowed = cfg->rope_type == ROPE_LLAMA3 ? llama3_keys : llama3_keys + 4;
    for (const cJSON *item = p->child; item; item = item->next)
        if (!in_list(allowed, item->string)) {
            error_set(err, "%s: %s key \"%s\" is not one pptrain implements for rope_type %s", path, what,
                      item->string, t);
            return -1;
        }
    const cJSON *partial = cJSON_GetObjectItemCaseSensitive(p, "partial_rotary_factor");
    if (partial && (!cJSON_IsNumber(partial) || partial->valuedouble != 1.0)) {
        error_set(err, "%s: %s partial_rotary_factor must be 1", path, what);
        return -1;
    }
    RopeLlama3 *l = &cfg->rope_llama3;
    l->original_max_positions = cfg->max_positions;   // transformers' fallback
    if (json_float(p, "rope_theta", &cfg->rope_theta, path, err)) return -1;
    if (cfg->rope_type == ROPE_DEFAULT) return 0;
    const char *required[] = {"factor", "low_freq_factor", "high_freq_factor"};
    float *dst[] = {&l->factor, &l->low_freq_factor, &l->high_freq_factor};
    for (int i = 0; i < 3; i++) {
        if (!cJSON_GetObjectItemCaseSensitive(p, required[i])) {
            error_set(err, "%s: %s (llama3) is missing \"%s\"", path, what, required[i]);
            return -1;
        }
        if (json_float(p, required[i], dst[i], path, err)) return -1;
    }
    if (json_int(p, "original_max_position_embeddings", &l->original_max_positions, path, err)) return -1;
    if (!(l->factor > 0) || !(l->low_freq_factor > 0) || !(l->high_freq_factor > l->low_freq_factor) ||
        l->original_max_positions <= 0) {
        error_set(err, "%s: %s (llama3) needs factor > 0, 0 < low_freq_factor < high_freq_factor and "
                       "original_max_position_embeddings > 0", path, what);
        return -1;
    }
    return 0;
}

static int read_rope(const cJSON *root, ModelConfig *cfg, const char *path, Error *err) {
    if (json_float(root, "rope_theta", &cfg->rope_theta, path, err)) return -1;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if (params && !cJSON_IsNull(params)) return read_rope_params(params, "rope_parameters", cfg, path, err);
    return read_rope_params(cJSON_GetObjectItemCaseSensitive(root, "rope_scaling"), "rope_scaling", cfg, path, err);
}

void model_rope_inv_freq(const ModelConfig *cfg, float *inv_freq) {
    rope_inv_freq(inv_freq, cfg->head_dim, cfg->rope_theta, cfg->rope_type == ROPE_LLAMA3 ? &cfg->rope_llama3 : NULL);
}

int model_config_from_json(ModelConfig *cfg, const char *path, Error *err) {
    char *text = read_small_file(path, err);
    if (!text) return -1;
    const int rc = model_config_from_json_text(cfg, text, path, err);
    free(text);
    return rc;
}

int model_config_from_json_text(ModelConfig *cfg, const char *text, const char *path, Error *err) {
    cJSON *root = json_parse_object(text, strlen(text), path, err);
    if (!root) return -1;
    preset_common(cfg, path);
    cfg->max_positions = 2048;
    cfg->rms_eps = 1e-6f;               // HF LlamaConfig defaults for absent keys
    int rc = check_keys(root, path, err);
    const char *required[] = {"hidden_size", "intermediate_size", "num_hidden_layers",
                              "num_attention_heads", "vocab_size"};
    for (int i = 0; rc == 0 && i < 5; i++) {   // null too: json_int reads it as absent, the preset's value
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, required[i]);
        if (!item || cJSON_IsNull(item)) {
            error_set(err, "%s: missing \"%s\"%s", path, required[i], item ? " (it is null)" : "");
            rc = -1;
        }
    }
    if (rc == 0)
        rc = json_int(root, "hidden_size", &cfg->hidden, path, err) ||
             json_int(root, "intermediate_size", &cfg->intermediate, path, err) ||
             json_int(root, "num_hidden_layers", &cfg->layers, path, err) ||
             json_int(root, "num_attention_heads", &cfg->heads, path, err) ||
             json_int(root, "vocab_size", &cfg->vocab, path, err) ||
             json_int(root, "max_position_embeddings", &cfg->max_positions, path, err) ||
             json_float(root, "rms_norm_eps", &cfg->rms_eps, path, err) ||
             json_float(root, "initializer_range", &cfg->init_std, path, err);
    if (rc == 0) {
        cfg->kv_heads = cfg->heads;
        cfg->head_dim = cfg->heads > 0 ? cfg->hidden / cfg->heads : 0;
        rc = json_int(root, "num_key_value_heads", &cfg->kv_heads, path, err) ||
             json_int(root, "head_dim", &cfg->head_dim, path, err);
        if (rc == 0 && !cJSON_GetObjectItemCaseSensitive(root, "head_dim") && cfg->heads > 0 &&
            cfg->hidden % cfg->heads != 0) {
            error_set(err, "%s: hidden_size (%d) is not divisible by num_attention_heads (%d)",
                      path, cfg->hidden, cfg->heads);
            rc = -1;
        }
    }
    if (rc == 0) rc = read_rope(root, cfg, path, err);
    if (rc == 0) rc = read_token_ids(root, cfg, path, err);   // after max_position_embeddings (llama3's default)
    if (rc == 0) rc = json_bool(root, "tie_word_embeddings", &cfg->tie_word_embeddings, path, err) ||
                      json_bool(root, "attention_bias", &cfg->attention_bias, path, err) ||
                      json_bool(root, "mlp_bias", &cfg->mlp_bias, path, err);
    cJSON_Delete(root);
    if (rc) return -1;
    return model_config_validate(cfg, err);
}

// The bias vectors of one layer: q, k, v, o (attention_bias) and gate, up, down (mlp_bias).
static size_t layer_bias_count(const ModelConfig *c) {
    const size_t C = (size_t)c->hidden, Q = (size_t)c->heads * c->head_dim;
    const size_t KV = (size_t)c->kv_heads * c->head_dim, I = (size_t)c->intermediate;
    return (c->attention_bias ? Q + 2 * KV + C : 0) + (c->mlp_bias ? 2 * I + C : 0);
}

static size_t layer_param_count(const ModelConfig *c) {
    const size_t C = (size_t)c->hidden, Q = (size_t)c->heads * c->head_dim;
    const size_t KV = (size_t)c->kv_heads * c->head_dim, I = (size_t)c->intermediate;
    return Q * C + 2 * KV * C + C * Q + 3 * I * C + 2 * C + layer_bias_count(c);
}

size_t model_config_param_count(const ModelConfig *c) {
    const size_t VC = (size_t)c->vocab * c->hidden;
    return VC + (size_t)c->layers * layer_param_count(c) + (size_t)c->hidden +
           (c->tie_word_embeddings ? 0 : VC);
}

double model_flops_per_token(const ModelConfig *c, int T) {
    // Every weight matrix except the embedding lookup takes part in a matmul: 2 FLOPs per
    // parameter forward, 4 backward. Attention adds QK^T and PV: 2 * 2 * NH*HD * T forward
    // per token and layer, x3 with backward (PaLM appendix B's count).
    const double matmul_params = (double)c->layers * ((double)layer_param_count(c) - 2.0 * c->hidden -
                                                      (double)layer_bias_count(c)) +
                                 (double)c->vocab * c->hidden;
    const double attn = 12.0 * c->layers * (double)c->heads * c->head_dim * T;
    return 6.0 * matmul_params + attn;
}

// Floats as the shortest text that reads back to the same float (1e-05, not 9.99999974e-06),
// so the file looks like one Hugging Face wrote and parses back bitwise.
static void add_float(cJSON *o, const char *key, float x) {
    char text[32];
    snprintf(text, sizeof text, "%.9g", (double)x);
    if (x == (float)(long)x && x > -1e9f && x < 1e9f) {   // 10000.0, as Python writes it
        snprintf(text, sizeof text, "%.1f", (double)x);
        cJSON_AddRawToObject(o, key, text);
        return;
    }
    for (int digits = 1; digits <= 9; digits++) {
        char shorter[32];
        snprintf(shorter, sizeof shorter, "%.*g", digits, (double)x);
        if (strtof(shorter, NULL) == x) {
            snprintf(text, sizeof text, "%s", shorter);
            break;
        }
    }
    cJSON_AddRawToObject(o, key, text);
}

// RoPE as trained, in both spellings: transformers 5 reads rope_parameters, 4.x the
// top-level rope_theta and rope_scaling.
static void add_rope(cJSON *o, const ModelConfig *c) {
    add_float(o, "rope_theta", c->rope_theta);
    cJSON *params = cJSON_AddObjectToObject(o, "rope_parameters");
    cJSON_AddStringToObject(params, "rope_type", c->rope_type == ROPE_LLAMA3 ? "llama3" : "default");
    add_float(params, "rope_theta", c->rope_theta);
    if (c->rope_type != ROPE_LLAMA3) {
        cJSON_AddNullToObject(o, "rope_scaling");
        return;
    }
    cJSON *scaling = cJSON_AddObjectToObject(o, "rope_scaling");
    for (cJSON *d = params; d; d = d == params ? scaling : NULL) {
        if (d == scaling) cJSON_AddStringToObject(d, "rope_type", "llama3");
        add_float(d, "factor", c->rope_llama3.factor);
        add_float(d, "low_freq_factor", c->rope_llama3.low_freq_factor);
        add_float(d, "high_freq_factor", c->rope_llama3.high_freq_factor);
        cJSON_AddNumberToObject(d, "original_max_position_embeddings", c->rope_llama3.original_max_positions);
    }
}

// The special token ids as the model's source had them (model.h): transformers' generate
// stops on eos_token_id, so a rewritten id would stop it on the wrong token.
static void add_token_ids(cJSON *o, const ModelConfig *c) {
    if (c->has_bos) cJSON_AddNumberToObject(o, "bos_token_id", c->bos_id);
    if (c->eos_is_list) {
        cJSON *list = cJSON_AddArrayToObject(o, "eos_token_id");
        for (int i = 0; i < c->n_eos; i++) cJSON_AddItemToArray(list, cJSON_CreateNumber(c->eos_ids[i]));
    } else if (c->n_eos > 0) {
        cJSON_AddNumberToObject(o, "eos_token_id", c->eos_ids[0]);
    }
    if (c->has_pad) cJSON_AddNumberToObject(o, "pad_token_id", c->pad_id);
}

char *model_config_to_hf_json(const ModelConfig *c, const char *torch_dtype) {
    cJSON *o = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("LlamaForCausalLM"));
    cJSON_AddStringToObject(o, "model_type", "llama");
    cJSON_AddNumberToObject(o, "hidden_size", c->hidden);
    cJSON_AddNumberToObject(o, "intermediate_size", c->intermediate);
    cJSON_AddNumberToObject(o, "num_hidden_layers", c->layers);
    cJSON_AddNumberToObject(o, "num_attention_heads", c->heads);
    cJSON_AddNumberToObject(o, "num_key_value_heads", c->kv_heads);
    cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab);
    cJSON_AddNumberToObject(o, "max_position_embeddings", c->max_positions);
    add_rope(o, c);
    add_float(o, "rms_norm_eps", c->rms_eps);
    add_float(o, "initializer_range", c->init_std);
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_word_embeddings);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddBoolToObject(o, "attention_bias", c->attention_bias);
    cJSON_AddBoolToObject(o, "mlp_bias", c->mlp_bias);
    cJSON_AddNumberToObject(o, "attention_dropout", 0);
    cJSON_AddNumberToObject(o, "pretraining_tp", 1);
    add_token_ids(o, c);
    cJSON_AddStringToObject(o, "torch_dtype", torch_dtype);
    cJSON_AddBoolToObject(o, "use_cache", true);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    return check_alloc(text, 1, __FILE__, __LINE__);
}
