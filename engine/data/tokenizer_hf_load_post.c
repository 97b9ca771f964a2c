// engine/data/tokenizer_hf_load_post.c: the post_processor (TemplateProcessing's special
// tokens around a single sequence) and decoder sections of a tokenizer.json.
#include "engine/data/tokenizer_hf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *str(const cJSON *o, const char *key) {
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

// Appends special_tokens[name].ids to *ids.
static int template_special(HfTokenizer *t, const cJSON *specials, const char *name,
                            int32_t **ids, size_t *n, const char *where, Error *err) {
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(specials, name);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(sp, "ids");
    if (!cJSON_IsArray(list)) {
        error_set(err, "%s: special token \"%s\" has no ids in special_tokens", where, name);
        return -1;
    }
    for (const cJSON *c = list->child; c; c = c->next) {
        if (!cJSON_IsNumber(c) || c->valuedouble < 0 || c->valuedouble >= t->vocab) {
            error_set(err, "%s: special token \"%s\" has an id outside 0..%d", where, name, t->vocab - 1);
            return -1;
        }
        *ids = check_alloc(realloc(*ids, (*n + 1) * sizeof **ids), (*n + 1) * sizeof **ids, __FILE__, __LINE__);
        (*ids)[(*n)++] = (int32_t)c->valuedouble;
    }
    return 0;
}

// "single": special tokens, one {"Sequence": {"id": "A"}}, special tokens. "pair" is read
// for its shape only: pptrain encodes single documents.
static int template_processing(HfTokenizer *t, const cJSON *o, const char *where, Error *err) {
    static const char *const keys[] = {"type", "single", "pair", "special_tokens", NULL};
    if (hf_check_keys(o, where, keys, err)) return -1;
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(o, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(o, "special_tokens");
    if (!cJSON_IsArray(single) || !cJSON_IsObject(specials) ||
        !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "pair"))) {
        error_set(err, "%s: TemplateProcessing needs arrays single and pair and an object special_tokens", where);
        return -1;
    }
    int seen_a = 0;
    for (const cJSON *c = single->child; c; c = c->next) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(c, "SpecialToken");
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(c, "Sequence");
        const char *id = str(sp ? sp : seq, "id");
        if (!id || cJSON_GetArraySize(c) != 1) {
            error_set(err, "%s: single holds an item that is not a SpecialToken or Sequence", where);
            return -1;
        }
        if (seq && (strcmp(id, "A") != 0 || seen_a++)) {
            error_set(err, "%s: single must hold sequence A exactly once", where);
            return -1;
        }
        if (sp && (seen_a ? template_special(t, specials, id, &t->suffix, &t->n_suffix, where, err)
                          : template_special(t, specials, id, &t->prefix, &t->n_prefix, where, err)))
            return -1;
    }
    if (!seen_a) {
        error_set(err, "%s: single must hold sequence A exactly once", where);
        return -1;
    }
    return 0;
}

static int post_processor(HfTokenizer *t, const cJSON *o, const char *where, Error *err) {
    const char *type = cJSON_IsObject(o) ? str(o, "type") : NULL;
    if (!type) {
        error_set(err, "%s: not an object with a \"type\"", where);
        return -1;
    }
    if (strcmp(type, "Sequence") == 0) {
        static const char *const keys[] = {"type", "processors", NULL};
        if (hf_check_keys(o, where, keys, err)) return -1;
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "processors");
        for (const cJSON *c = cJSON_IsArray(list) ? list->child : NULL; c; c = c->next)
            if (post_processor(t, c, where, err)) return -1;
        return 0;
    }
    if (strcmp(type, "ByteLevel") == 0) {   // it trims offsets, and ids do not change
        static const char *const keys[] = {"type", "add_prefix_space", "trim_offsets", "use_regex", NULL};
        return hf_check_keys(o, where, keys, err);
    }
    if (strcmp(type, "TemplateProcessing") == 0) {
        if (t->n_prefix || t->n_suffix) {
            error_set(err, "%s: more than one TemplateProcessing", where);
            return -1;
        }
        return template_processing(t, o, where, err);
    }
    error_set(err, "%s: post_processor type \"%s\" is not supported (pptrain reads "
              "TemplateProcessing, ByteLevel, Sequence)", where, type);
    return -1;
}

int hf_load_post_processor(HfTokenizer *t, const cJSON *j, Error *err) {
    char where[300];
    snprintf(where, sizeof where, "%s: post_processor", t->name);
    return !j || cJSON_IsNull(j) ? 0 : post_processor(t, j, where, err);
}

static int dec_step(HfTokenizer *t, const cJSON *o, const char *type, DecOp *op,
                    const char *where, Error *err) {
    static const char *const bl[] = {"type", "add_prefix_space", "trim_offsets", "use_regex", NULL};
    static const char *const one[] = {"type", NULL};
    static const char *const rep[] = {"type", "pattern", "content", NULL};
    static const char *const strip[] = {"type", "content", "start", "stop", NULL};
    static const char *const ms[] = {"type", "replacement", "prepend_scheme", "split",
                                     "add_prefix_space", "str_rep", NULL};
    (void)t;
    if (strcmp(type, "ByteLevel") == 0) return op->kind = DEC_BYTELEVEL, hf_check_keys(o, where, bl, err);
    if (strcmp(type, "ByteFallback") == 0) return op->kind = DEC_BYTEFALLBACK, hf_check_keys(o, where, one, err);
    if (strcmp(type, "Fuse") == 0) return op->kind = DEC_FUSE, hf_check_keys(o, where, one, err);
    if (strcmp(type, "Replace") == 0) {
        op->kind = DEC_REPLACE;
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pattern");
        const char *s = str(p, "String"), *c = str(o, "content");
        if (hf_check_keys(o, where, rep, err)) return -1;
        if (!s || !*s || !c) {
            error_set(err, "%s: Replace needs a non-empty {\"String\": ...} pattern and a content "
                      "(regex patterns are not supported)", where);
            return -1;
        }
        op->a = dup_str(s), op->b = dup_str(c);
        return 0;
    }
    if (strcmp(type, "Strip") == 0) {
        op->kind = DEC_STRIP;
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "start"), *b = cJSON_GetObjectItemCaseSensitive(o, "stop");
        const char *c = str(o, "content");
        if (hf_check_keys(o, where, strip, err)) return -1;
        if (!c || !*c || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) || a->valuedouble < 0 || b->valuedouble < 0) {
            error_set(err, "%s: Strip needs a content character and counts start and stop", where);
            return -1;
        }
        op->a = dup_str(c), op->start = (int)a->valuedouble, op->stop = (int)b->valuedouble;
        return 0;
    }
    if (strcmp(type, "Metaspace") == 0) {
        op->kind = DEC_METASPACE;
        if (hf_check_keys(o, where, ms, err)) return -1;
        const char *r = str(o, "replacement"), *v = str(o, "prepend_scheme");
        const cJSON *add = cJSON_GetObjectItemCaseSensitive(o, "add_prefix_space");
        if (!v && add) v = cJSON_IsTrue(add) ? "always" : "never";
        op->scheme = !v ? (PrependScheme)99 : strcmp(v, "always") == 0 ? PREPEND_ALWAYS
                   : strcmp(v, "first") == 0 ? PREPEND_FIRST : strcmp(v, "never") == 0 ? PREPEND_NEVER : (PrependScheme)99;
        if (!r || !*r || op->scheme > PREPEND_NEVER) {
            error_set(err, "%s: Metaspace needs a replacement and a prepend_scheme always, first or never", where);
            return -1;
        }
        op->a = dup_str(r);
        return 0;
    }
    error_set(err, "%s: decoder type \"%s\" is not supported (pptrain reads ByteLevel, Metaspace, "
              "Replace, ByteFallback, Fuse, Strip, Sequence)", where, type);
    return -1;
}

static int decoder(HfTokenizer *t, const cJSON *o, const char *where, Error *err) {
    const char *type = cJSON_IsObject(o) ? str(o, "type") : NULL;
    if (!type) {
        error_set(err, "%s: not an object with a \"type\"", where);
        return -1;
    }
    if (strcmp(type, "Sequence") == 0) {
        static const char *const keys[] = {"type", "decoders", NULL};
        if (hf_check_keys(o, where, keys, err)) return -1;
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "decoders");
        for (const cJSON *c = cJSON_IsArray(list) ? list->child : NULL; c; c = c->next)
            if (decoder(t, c, where, err)) return -1;
        return 0;
    }
    t->dec = check_alloc(realloc(t->dec, (t->n_dec + 1) * sizeof *t->dec),
                         (t->n_dec + 1) * sizeof *t->dec, __FILE__, __LINE__);
    DecOp *op = &t->dec[t->n_dec++];   // counted before filling, so free() sees its strings
    *op = (DecOp){0};
    return dec_step(t, o, type, op, where, err);
}

int hf_load_decoder(HfTokenizer *t, const cJSON *j, Error *err) {
    char where[300];
    snprintf(where, sizeof where, "%s: decoder", t->name);
    return !j || cJSON_IsNull(j) ? 0 : decoder(t, j, where, err);
}
