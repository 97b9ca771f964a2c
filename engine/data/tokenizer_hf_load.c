// engine/data/tokenizer_hf_load.c: tokenizer.json -> HfTokenizer: the top level, the BPE model
// (vocab, merges), the added tokens, and tokenizer_config.json's token names.
// Every key is read and honoured or refused by name (hf_check_keys), the way the config reader
// treats config.json: an id that differs from `tokenizers`' would silently train a model on
// the wrong text.
#include "engine/data/tokenizer_hf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/data/tokenizer_hf_encoder.h"
#include "engine/json_read.h"

int hf_check_keys(const cJSON *o, const char *where, const char *const *known, Error *err) {
    if (!cJSON_IsObject(o)) {
        error_set(err, "%s is not a JSON object", where);
        return -1;
    }
    for (const cJSON *c = o->child; c; c = c->next) {
        int ok = 0;
        for (const char *const *k = known; *k && !ok; k++) ok = strcmp(*k, c->string) == 0;
        if (!ok) {
            error_set(err, "%s: unsupported key \"%s\"", where, c->string);
            return -1;
        }
    }
    return 0;
}

static size_t pow2_above(size_t n) {
    size_t c = 16;
    while (c < 2 * n) c *= 2;
    return c;
}

// Token texts go to the pool (sized for the added tokens' texts too: extra bytes); ids must
// be below n_total, each once.
static int load_vocab(HfTokenizer *t, const cJSON *vocab, int32_t n_total, size_t extra,
                      Error *err) {
    size_t bytes = extra;
    for (const cJSON *c = vocab->child; c; c = c->next) bytes += strlen(c->string);
    t->pool = xmalloc(bytes + 1);
    t->pool_used = 0;
    t->tok_off = xcalloc((size_t)n_total, sizeof *t->tok_off);
    t->tok_len = xcalloc((size_t)n_total, sizeof *t->tok_len);
    t->map.cap = pow2_above((size_t)n_total);
    t->map.slot = xcalloc(t->map.cap, sizeof *t->map.slot);
    uint8_t *seen = xcalloc((size_t)n_total, 1);
    size_t at = 0;
    int rc = 0;
    t->has_text = seen;
    for (const cJSON *c = vocab->child; c && rc == 0; c = c->next) {
        double v = cJSON_IsNumber(c) ? c->valuedouble : -1;
        if (v < 0 || v >= n_total || v != (int32_t)v || seen[(int32_t)v]) {
            error_set(err, "%s: model.vocab: \"%s\" has id %s (ids must be 0..%d, each once)",
                      t->name, c->string, cJSON_IsNumber(c) ? "out of range or repeated" : "not a number",
                      n_total - 1);
            rc = -1;
            break;
        }
        int32_t id = (int32_t)v;
        size_t len = strlen(c->string);
        memcpy(t->pool + at, c->string, len);
        t->tok_off[id] = at;
        t->tok_len[id] = (uint32_t)len;
        at += len;
        seen[id] = 1;
        if (hf_map_get(t, c->string, len) >= 0) {
            error_set(err, "%s: model.vocab: \"%s\" appears twice", t->name, c->string);
            rc = -1;
        } else hf_map_put(t, id);
    }
    t->pool_used = at;
    return rc;
}

// One merge, as "a b" (the old format) or ["a", "b"].
static int merge_parts(const cJSON *m, const char **a, size_t *la, const char **b, size_t *lb) {
    if (cJSON_IsString(m)) {
        const char *s = m->valuestring, *sp = strchr(s, ' ');
        if (!sp || strchr(sp + 1, ' ')) return -1;
        *a = s, *la = (size_t)(sp - s), *b = sp + 1, *lb = strlen(sp + 1);
        return 0;
    }
    if (cJSON_GetArraySize(m) != 2 || !cJSON_IsString(m->child) || !cJSON_IsString(m->child->next))
        return -1;
    *a = m->child->valuestring, *la = strlen(*a);
    *b = m->child->next->valuestring, *lb = strlen(*b);
    return 0;
}

static int load_merges(HfTokenizer *t, const cJSON *merges, Error *err) {
    size_t n = (size_t)cJSON_GetArraySize(merges);
    PairMap *m = &t->merges;
    m->cap = pow2_above(n);
    m->key = xmalloc(m->cap * sizeof *m->key);
    memset(m->key, 0xff, m->cap * sizeof *m->key);
    m->rank = xmalloc(m->cap * sizeof *m->rank);
    m->merged = xmalloc(m->cap * sizeof *m->merged);
    char *joined = NULL;
    size_t cap = 0, rank = 0;
    for (const cJSON *c = merges->child; c; c = c->next, rank++) {
        const char *a, *b;
        size_t la, lb;
        if (merge_parts(c, &a, &la, &b, &lb) != 0) {
            error_set(err, "%s: model.merges[%zu] is not \"a b\" or [\"a\", \"b\"]", t->name, rank);
            goto fail;
        }
        if (la + lb + 1 > cap) {
            cap = 2 * (la + lb + 1);
            joined = check_alloc(realloc(joined, cap), cap, __FILE__, __LINE__);
        }
        memcpy(joined, a, la);
        memcpy(joined + la, b, lb);
        int32_t ia = hf_map_get(t, a, la), ib = hf_map_get(t, b, lb), im = hf_map_get(t, joined, la + lb);
        if (ia < 0 || ib < 0 || im < 0) {
            error_set(err, "%s: model.merges[%zu] (\"%.*s\" \"%.*s\") names a token not in the "
                      "vocabulary: \"%.*s\"", t->name, rank, (int)la, a, (int)lb, b,
                      ia < 0 ? (int)la : ib < 0 ? (int)lb : (int)(la + lb), ia < 0 ? a : ib < 0 ? b : joined);
            goto fail;
        }
        if (hf_pairs_put(m, ia, ib, (uint32_t)rank, im)) {
            error_set(err, "%s: model.merges[%zu] repeats an earlier merge", t->name, rank);
            goto fail;
        }
    }
    free(joined);
    return 0;
fail:
    free(joined);
    return -1;
}

static int want_null(const cJSON *o, const char *key, const char *where, Error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    error_set(err, "%s: %s.%s is set; pptrain supports only null", where, "model", key);
    return -1;
}

static int get_bool(const cJSON *o, const char *key, int dflt, const char *where, int *out,
                    Error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) *out = dflt;
    else if (cJSON_IsBool(v)) *out = cJSON_IsTrue(v);
    else {
        error_set(err, "%s: %s is not true or false", where, key);
        return -1;
    }
    return 0;
}

static void find_byte_tokens(HfTokenizer *t) {
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        t->byte_id[b] = hf_map_get(t, s, 6);
    }
}

static int load_model(HfTokenizer *t, const cJSON *m, int32_t n_total, size_t extra, Error *err) {
    static const char *const keys[] = {"type", "dropout", "unk_token", "continuing_subword_prefix",
        "end_of_word_suffix", "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges", NULL};
    char where[300];
    snprintf(where, sizeof where, "%s: model", t->name);
    if (hf_check_keys(m, where, keys, err) != 0) return -1;
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "type"));
    if (!type || strcmp(type, "BPE") != 0) {
        error_set(err, "%s: model.type \"%s\" is not supported (pptrain reads BPE)", t->name,
                  type ? type : "(missing)");
        return -1;
    }
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(m, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(m, "merges");
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges)) {
        error_set(err, "%s: model.vocab must be an object and model.merges an array", t->name);
        return -1;
    }
    if (want_null(m, "dropout", t->name, err) || want_null(m, "continuing_subword_prefix", t->name, err) ||
        want_null(m, "end_of_word_suffix", t->name, err) ||
        get_bool(m, "fuse_unk", 0, where, &t->fuse_unk, err) ||
        get_bool(m, "byte_fallback", 0, where, &t->byte_fallback, err) ||
        get_bool(m, "ignore_merges", 0, where, &t->ignore_merges, err) ||
        load_vocab(t, vocab, n_total, extra, err) || load_merges(t, merges, err))
        return -1;
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(m, "unk_token");
    t->unk = -1;
    if (cJSON_IsString(unk) && (t->unk = hf_map_get(t, unk->valuestring, strlen(unk->valuestring))) < 0) {
        error_set(err, "%s: model.unk_token \"%s\" is not in the vocabulary", t->name, unk->valuestring);
        return -1;
    }
    if (unk && !cJSON_IsString(unk) && !cJSON_IsNull(unk)) {
        error_set(err, "%s: model.unk_token is not a string", t->name);
        return -1;
    }
    find_byte_tokens(t);
    return 0;
}

// Largest id among the vocabulary and the added tokens, and the added tokens' text bytes.
static int32_t count_ids(const cJSON *vocab, const cJSON *added, size_t *added_bytes) {
    double top = -1;
    for (const cJSON *c = vocab ? vocab->child : NULL; c; c = c->next)
        if (cJSON_IsNumber(c) && c->valuedouble > top) top = c->valuedouble;
    *added_bytes = 0;
    for (const cJSON *a = added ? added->child : NULL; a; a = a->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(a, "id");
        const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "content"));
        if (cJSON_IsNumber(id) && id->valuedouble > top) top = id->valuedouble;
        if (s) *added_bytes += strlen(s);
    }
    return top >= INT32_MAX - 1 ? -1 : (int32_t)top + 1;
}

static int add_token(HfTokenizer *t, const cJSON *a, size_t i, Error *err) {
    static const char *const keys[] = {"id", "content", "single_word", "lstrip", "rstrip",
                                       "normalized", "special", NULL};
    char where[300];
    snprintf(where, sizeof where, "%s: added_tokens[%zu]", t->name, i);
    if (hf_check_keys(a, where, keys, err) != 0) return -1;
    const cJSON *idj = cJSON_GetObjectItemCaseSensitive(a, "id");
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "content"));
    int single, lstrip, rstrip, normalized, special;
    if (!cJSON_IsNumber(idj) || idj->valuedouble < 0 || idj->valuedouble >= t->vocab ||
        idj->valuedouble != (int32_t)idj->valuedouble || !s || !*s) {
        error_set(err, "%s: needs an id in 0..%d and a non-empty content", where, t->vocab - 1);
        return -1;
    }
    if (get_bool(a, "single_word", 0, where, &single, err) || get_bool(a, "lstrip", 0, where, &lstrip, err) ||
        get_bool(a, "rstrip", 0, where, &rstrip, err) || get_bool(a, "normalized", 0, where, &normalized, err) ||
        get_bool(a, "special", 0, where, &special, err))
        return -1;
    const char *bad = single ? "single_word" : lstrip ? "lstrip" : rstrip ? "rstrip"
                    : normalized && t->n_norm ? "normalized" : NULL;
    if (bad) {
        error_set(err, "%s (\"%s\"): %s true is not supported", where, s, bad);
        return -1;
    }
    int32_t id = (int32_t)idj->valuedouble;
    size_t len = strlen(s);
    if (t->has_text[id] && (t->tok_len[id] != len || memcmp(t->pool + t->tok_off[id], s, len))) {
        error_set(err, "%s: id %d is already the vocabulary's \"%.*s\"", where, id,
                  (int)t->tok_len[id], t->pool + t->tok_off[id]);
        return -1;
    }
    if (!t->has_text[id]) {
        memcpy(t->pool + t->pool_used, s, len);
        t->tok_off[id] = t->pool_used;
        t->tok_len[id] = (uint32_t)len;
        t->pool_used += len;
        t->has_text[id] = 1;
    }
    t->added[t->n_added++] = (AddedToken){t->pool + t->tok_off[id], len, id, special};
    t->first_byte[(unsigned char)s[0]] = 1;
    t->is_special[id] = (uint8_t)special;
    return 0;
}

static int by_length_desc(const void *a, const void *b) {
    const AddedToken *x = a, *y = b;
    return x->len != y->len ? (x->len < y->len ? 1 : -1) : (x->id > y->id) - (x->id < y->id);
}

static int load_added(HfTokenizer *t, const cJSON *added, Error *err) {
    size_t n = added ? (size_t)cJSON_GetArraySize(added) : 0;
    t->added = xcalloc(n + 1, sizeof *t->added);
    size_t i = 0;
    for (const cJSON *a = added ? added->child : NULL; a; a = a->next, i++)
        if (add_token(t, a, i, err) != 0) return -1;
    qsort(t->added, t->n_added, sizeof *t->added, by_length_desc);
    for (int32_t id = 0; id < t->vocab; id++)
        if (!t->has_text[id]) {
            error_set(err, "%s: id %d is neither in model.vocab nor in added_tokens", t->name, id);
            return -1;
        }
    return 0;
}

static int load_sections(HfTokenizer *t, const cJSON *root, Error *err) {
    static const char *const keys[] = {"version", "truncation", "padding", "added_tokens",
        "normalizer", "pre_tokenizer", "post_processor", "decoder", "model", NULL};
    if (hf_check_keys(root, t->name, keys, err) != 0) return -1;
    const char *version = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "version"));
    if (!version || strcmp(version, "1.0") != 0) {
        error_set(err, "%s: version \"%s\" is not supported (pptrain reads \"1.0\")", t->name,
                  version ? version : "(missing)");
        return -1;
    }
    const char *const nulls[] = {"truncation", "padding"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, nulls[i]);
        if (v && !cJSON_IsNull(v)) {
            error_set(err, "%s: %s is set; pptrain cuts and pads batches itself (set it to null)",
                      t->name, nulls[i]);
            return -1;
        }
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (added && !cJSON_IsArray(added) && !cJSON_IsNull(added)) {
        error_set(err, "%s: added_tokens is not an array", t->name);
        return -1;
    }
    size_t extra;
    t->vocab = count_ids(cJSON_GetObjectItemCaseSensitive(model, "vocab"), added, &extra);
    if (t->vocab < 0) {
        error_set(err, "%s: token ids above %d", t->name, INT32_MAX - 2);
        return -1;
    }
    t->is_special = xcalloc((size_t)t->vocab + 1, 1);
    if (!model) {
        error_set(err, "%s: no \"model\" section", t->name);
        return -1;
    }
    return hf_load_normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), err) ||
           load_model(t, model, t->vocab, extra, err) || load_added(t, added, err) ||
           hf_load_pre_tokenizer(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), err) ||
           hf_load_post_processor(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), err) ||
           hf_load_decoder(t, cJSON_GetObjectItemCaseSensitive(root, "decoder"), err) ? -1 : 0;
}

HfTokenizer *hf_tokenizer_parse(const char *json, size_t len, const char *name, Error *err) {
    HfTokenizer *t = xcalloc(1, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->bos = t->eos = t->pad = t->unk = -1;
    cJSON *root = cJSON_ParseWithLength(json, len);
    int rc = -1;
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        error_set(err, "%s: malformed JSON near byte %zu", name,
                  at && at >= json && at <= json + len ? (size_t)(at - json) : len);
    } else if (json_check_unique_keys(root, name, err) == 0) {   // as transformers reads it, or refused
        rc = load_sections(t, root, err);
    }
    cJSON_Delete(root);
    free(t->has_text);
    t->has_text = NULL;
    if (rc != 0) {
        hf_tokenizer_free(t);
        return NULL;
    }
    if (t->n_prefix) t->bos = t->prefix[0];
    return t;
}

void hf_tokenizer_free(HfTokenizer *t) {
    if (!t) return;
    hf_bpe_free(t);
    for (size_t i = 0; i < t->n_norm; i++) free(t->norm[i].a), free(t->norm[i].b);
    for (size_t i = 0; i < t->n_pre; i++) pcre2_code_free(t->pre[i].re);
    for (size_t i = 0; i < t->n_dec; i++) free(t->dec[i].a), free(t->dec[i].b);
    free(t->norm);
    free(t->pre);
    free(t->dec);
    free(t->prefix);
    free(t->suffix);
    free(t->added);
    free(t->is_special);
    free(t->has_text);
    free(t->pool);
    free(t->tok_off);
    free(t->tok_len);
    free(t);
}

int32_t hf_tokenizer_token_id(const HfTokenizer *t, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].len == n && memcmp(t->added[i].content, s, n) == 0) return t->added[i].id;
    return hf_map_get(t, s, n);
}

int32_t hf_tokenizer_vocab(const HfTokenizer *t) { return t->vocab; }
int32_t hf_tokenizer_last_special(const HfTokenizer *t) { return t->n_suffix ? t->suffix[t->n_suffix - 1] : -1; }
int32_t hf_tokenizer_bos(const HfTokenizer *t) { return t->bos; }
int32_t hf_tokenizer_eos(const HfTokenizer *t) { return t->eos; }
int32_t hf_tokenizer_pad(const HfTokenizer *t) { return t->pad; }
int hf_tokenizer_byte_fallback(const HfTokenizer *t) { return t->byte_fallback; }
const char *hf_tokenizer_name(const HfTokenizer *t) { return t->name; }
