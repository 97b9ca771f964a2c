// engine/data/tokenizer_hf_config.c: hf_tokenizer_load: reads tokenizer.json from a file or a
// model folder, and tokenizer_config.json beside it for the ids transformers gives the bos,
// eos, pad and unk names. Of tokenizer_config.json only the keys that change ids are read:
// the token names (a string, or an object with "content"), which must exist in the
// vocabulary, and add_bos_token / add_eos_token, which must agree with tokenizer.json's
// template (transformers would rewrite the template; pptrain refuses to guess which wins).
// Its other keys (model_max_length, chat_template, ...) do not change an id.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/data/tokenizer_hf_internal.h"
#include "engine/file_read.h"
#include "engine/json_read.h"

// The largest published tokenizer.json files are tens of MB (Gemma's 250k vocabulary: ~33 MB).
#define TOKENIZER_FILE_MAX ((size_t)1 << 30)

static char *read_all(const char *path, size_t *len, Error *err) {
    return file_read_all(path, TOKENIZER_FILE_MAX, "a tokenizer file", len, err);
}

// A token name in tokenizer_config.json: "text", {"content": "text", ...} or null (-1).
static int config_token(HfTokenizer *t, const cJSON *cfg, const char *key, int32_t *id,
                        const char *path, Error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (!v || cJSON_IsNull(v)) return 0;
    const char *s = cJSON_IsString(v) ? v->valuestring
                  : cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "content"));
    if (!s) {
        error_set(err, "%s: %s is not a string or {\"content\": ...}", path, key);
        return -1;
    }
    if ((*id = hf_tokenizer_token_id(t, s)) < 0) {
        error_set(err, "%s: %s \"%s\" is not a token of %s", path, key, s, t->name);
        return -1;
    }
    return 0;
}

static int config_flag(const HfTokenizer *t, const cJSON *cfg, const char *key, int32_t id,
                       const int32_t *ids, size_t n, const char *path, Error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (!v || cJSON_IsNull(v)) return 0;
    int has = id >= 0 && n == 1 && ids[0] == id;
    if (!cJSON_IsBool(v) || cJSON_IsTrue(v) != has) {
        error_set(err, "%s: %s is %s but %s's post_processor %s it", path, key,
                  cJSON_IsTrue(v) ? "true" : "not true", t->name, has ? "adds" : "does not add");
        return -1;
    }
    return 0;
}

static int read_config(HfTokenizer *t, const char *path, Error *err) {
    size_t len;
    char *json = read_all(path, &len, err);
    if (!json) return -1;
    cJSON *cfg = cJSON_ParseWithLength(json, len);
    free(json);
    int32_t unk = -1;
    int rc = !cJSON_IsObject(cfg) ? (error_set(err, "%s: malformed JSON (not an object)", path), -1)
           : json_check_unique_keys(cfg, path, err) ? -1
           : config_token(t, cfg, "bos_token", &t->bos, path, err) ||
             config_token(t, cfg, "eos_token", &t->eos, path, err) ||
             config_token(t, cfg, "pad_token", &t->pad, path, err) ||
             config_token(t, cfg, "unk_token", &unk, path, err) ||
             config_flag(t, cfg, "add_bos_token", t->bos, t->prefix, t->n_prefix, path, err) ||
             config_flag(t, cfg, "add_eos_token", t->eos, t->suffix, t->n_suffix, path, err) ? -1 : 0;
    cJSON_Delete(cfg);
    return rc;
}

HfTokenizer *hf_tokenizer_load(const char *path, Error *err) {
    char file[4096], dir[4096];
    struct stat st;
    int is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    snprintf(file, sizeof file, is_dir ? "%s/tokenizer.json" : "%s", path);
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = '\0';
    else dir[0] = '\0';
    size_t len;
    char *json = read_all(file, &len, err);
    if (!json) return NULL;
    HfTokenizer *t = hf_tokenizer_parse(json, len, file, err);
    free(json);
    if (!t) return NULL;
    char cfg[4200];
    snprintf(cfg, sizeof cfg, "%stokenizer_config.json", dir);
    if (stat(cfg, &st) == 0 && read_config(t, cfg, err) != 0) {
        hf_tokenizer_free(t);
        return NULL;
    }
    return t;
}
