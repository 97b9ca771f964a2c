// engine/data/tokenizer_hf_load_parts.c: the normalizer, pre_tokenizer, post_processor and
// decoder sections of a tokenizer.json, each flattened into a list of steps (a "Sequence"
// contributes its members in order). Unknown types and settings are refused by name.
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

// The GPT-2 pattern that `tokenizers`' ByteLevel pre-tokenizer uses when use_regex is true.
const char *hf_gpt2_pattern(void) {
    return "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
}

pcre2_code *hf_regex(const char *pattern, int literal, const char *where, Error *err) {
    int code;
    PCRE2_SIZE at;
    // A {"String": ...} pattern is literal text; PCRE2 refuses UCP beside LITERAL (it has no
    // classes for UCP to change).
    uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &code, &at, NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        error_set(err, "%s: regex does not compile at offset %zu: %s", where, (size_t)at, (char *)msg);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);   // falls back to the interpreter where JIT is absent
    return re;
}

// A "pattern" object: {"String": s} or {"Regex": r}; literal says which.
static const char *pattern_of(const cJSON *o, int *literal, const char *where, Error *err) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pattern");
    const char *s = str(p, "String"), *r = str(p, "Regex");
    if (!cJSON_IsObject(p) || cJSON_GetArraySize(p) != 1 || (!s && !r)) {
        error_set(err, "%s: pattern must be {\"String\": ...} or {\"Regex\": ...}", where);
        return NULL;
    }
    *literal = s != NULL;
    return s ? s : r;
}

static const char *type_of(const cJSON *o, const char *where, Error *err) {
    const char *type = cJSON_IsObject(o) ? str(o, "type") : NULL;
    if (!type) error_set(err, "%s: not an object with a \"type\"", where);
    return type;
}

#define GROW(arr, n) ((arr) = check_alloc(realloc((arr), ((n) + 1) * sizeof *(arr)), \
                                          ((n) + 1) * sizeof *(arr), __FILE__, __LINE__))

static int normalizer(HfTokenizer *t, const cJSON *o, const char *where, Error *err) {
    const char *type = type_of(o, where, err);
    if (!type) return -1;
    if (strcmp(type, "Sequence") == 0) {
        static const char *const keys[] = {"type", "normalizers", NULL};
        if (hf_check_keys(o, where, keys, err)) return -1;
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "normalizers");
        for (const cJSON *c = cJSON_IsArray(list) ? list->child : NULL; c; c = c->next)
            if (normalizer(t, c, where, err)) return -1;
        return 0;
    }
    GROW(t->norm, t->n_norm);
    NormOp *op = &t->norm[t->n_norm];
    if (strcmp(type, "Prepend") == 0) {
        static const char *const keys[] = {"type", "prepend", NULL};
        if (hf_check_keys(o, where, keys, err)) return -1;
        if (!str(o, "prepend")) {
            error_set(err, "%s: Prepend needs a \"prepend\" string", where);
            return -1;
        }
        *op = (NormOp){NORM_PREPEND, dup_str(str(o, "prepend")), NULL};
    } else if (strcmp(type, "Replace") == 0) {
        static const char *const keys[] = {"type", "pattern", "content", NULL};
        int literal;
        const char *p = hf_check_keys(o, where, keys, err) ? NULL : pattern_of(o, &literal, where, err);
        if (!p) return -1;
        if (!literal || !*p || !str(o, "content")) {
            error_set(err, "%s: Replace with a regex or empty pattern is not supported", where);
            return -1;
        }
        *op = (NormOp){NORM_REPLACE, dup_str(p), dup_str(str(o, "content"))};
    } else {
        error_set(err, "%s: normalizer type \"%s\" is not supported (pptrain reads Sequence, "
                  "Prepend, Replace)", where, type);
        return -1;
    }
    t->n_norm++;
    return 0;
}

int hf_load_normalizer(HfTokenizer *t, const cJSON *j, Error *err) {
    char where[300];
    snprintf(where, sizeof where, "%s: normalizer", t->name);
    return !j || cJSON_IsNull(j) ? 0 : normalizer(t, j, where, err);
}

static int prepend_scheme(const cJSON *o, PrependScheme *s, const char *where, Error *err) {
    const char *v = str(o, "prepend_scheme");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(o, "add_prefix_space");   // before 0.19
    if (!v && add) v = cJSON_IsTrue(add) ? "always" : "never";
    if (v && strcmp(v, "always") == 0) *s = PREPEND_ALWAYS;
    else if (v && strcmp(v, "first") == 0) *s = PREPEND_FIRST;
    else if (v && strcmp(v, "never") == 0) *s = PREPEND_NEVER;
    else {
        error_set(err, "%s: prepend_scheme \"%s\" is not always, first or never", where, v ? v : "(missing)");
        return -1;
    }
    return 0;
}

static int metaspace(const cJSON *o, char repl[8], PrependScheme *scheme, int *split,
                     const char *where, Error *err) {
    static const char *const keys[] = {"type", "replacement", "prepend_scheme", "split",
                                       "add_prefix_space", "str_rep", NULL};
    if (hf_check_keys(o, where, keys, err)) return -1;
    const char *r = str(o, "replacement");
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(o, "split");
    if (!r || !*r || strlen(r) >= 8 || (sp && !cJSON_IsBool(sp))) {
        error_set(err, "%s: Metaspace needs a one-character replacement and a boolean split", where);
        return -1;
    }
    snprintf(repl, 8, "%s", r);
    *split = !sp || cJSON_IsTrue(sp);
    return prepend_scheme(o, scheme, where, err);
}

static int split_behavior(const char *b, SplitBehavior *out) {
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious",
                                        "MergedWithNext", "Contiguous"};
    for (int i = 0; i < 5; i++)
        if (b && strcmp(b, names[i]) == 0) {
            *out = (SplitBehavior)i;
            return 0;
        }
    return -1;
}

static int pre_split(PreOp *op, const cJSON *o, const char *where, Error *err) {
    static const char *const keys[] = {"type", "pattern", "behavior", "invert", NULL};
    int literal;
    const char *p = hf_check_keys(o, where, keys, err) ? NULL : pattern_of(o, &literal, where, err);
    if (!p) return -1;
    const cJSON *inv = cJSON_GetObjectItemCaseSensitive(o, "invert");
    if (split_behavior(str(o, "behavior"), &op->behavior) || (inv && !cJSON_IsBool(inv))) {
        error_set(err, "%s: Split behavior \"%s\" or invert is not supported", where,
                  str(o, "behavior") ? str(o, "behavior") : "(missing)");
        return -1;
    }
    op->invert = cJSON_IsTrue(inv);
    return (op->re = hf_regex(p, literal, where, err)) ? 0 : -1;
}

static int pre_bytelevel(PreOp *op, const cJSON *o, const char *where, Error *err) {
    static const char *const keys[] = {"type", "add_prefix_space", "trim_offsets", "use_regex", NULL};
    if (hf_check_keys(o, where, keys, err)) return -1;
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(o, "use_regex");
    op->add_prefix_space = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "add_prefix_space"));
    // trim_offsets changes offsets only, never ids.
    if (re && !cJSON_IsTrue(re)) return 0;
    return (op->re = hf_regex(hf_gpt2_pattern(), 0, where, err)) ? 0 : -1;
}

static int pre_tokenizer(HfTokenizer *t, const cJSON *o, const char *where, Error *err) {
    const char *type = type_of(o, where, err);
    if (!type) return -1;
    if (strcmp(type, "Sequence") == 0) {
        static const char *const keys[] = {"type", "pretokenizers", NULL};
        if (hf_check_keys(o, where, keys, err)) return -1;
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "pretokenizers");
        for (const cJSON *c = cJSON_IsArray(list) ? list->child : NULL; c; c = c->next)
            if (pre_tokenizer(t, c, where, err)) return -1;
        return 0;
    }
    GROW(t->pre, t->n_pre);
    PreOp *op = &t->pre[t->n_pre];
    *op = (PreOp){0};
    int rc;
    if (strcmp(type, "Split") == 0) op->kind = PRE_SPLIT, rc = pre_split(op, o, where, err);
    else if (strcmp(type, "ByteLevel") == 0) op->kind = PRE_BYTELEVEL, rc = pre_bytelevel(op, o, where, err);
    else if (strcmp(type, "Metaspace") == 0)
        op->kind = PRE_METASPACE, rc = metaspace(o, op->repl, &op->scheme, &op->split, where, err);
    else if (strcmp(type, "Digits") == 0) {
        // `tokenizers` isolates runs of char::is_numeric (Unicode N*), or each one alone.
        static const char *const keys[] = {"type", "individual_digits", NULL};
        op->kind = PRE_SPLIT;
        op->behavior = SPLIT_ISOLATED;
        int each = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "individual_digits"));
        rc = hf_check_keys(o, where, keys, err) ? -1
           : (op->re = hf_regex(each ? "\\p{N}" : "\\p{N}+", 0, where, err)) ? 0 : -1;
    } else {
        error_set(err, "%s: pre_tokenizer type \"%s\" is not supported (pptrain reads Sequence, "
                  "Split, ByteLevel, Metaspace, Digits)", where, type);
        return -1;
    }
    t->n_pre++;   // counted even on failure, so hf_tokenizer_free frees its regex
    return rc;
}

int hf_load_pre_tokenizer(HfTokenizer *t, const cJSON *j, Error *err) {
    char where[300];
    snprintf(where, sizeof where, "%s: pre_tokenizer", t->name);
    return !j || cJSON_IsNull(j) ? 0 : pre_tokenizer(t, j, where, err);
}
