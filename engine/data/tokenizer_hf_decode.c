// engine/data/tokenizer_hf_decode.c: ids -> text, as `tokenizers`' Tokenizer.decode does it:
// each id's token text (special tokens skipped), the decoder steps over that list of strings
// in order, the results concatenated (without a decoder: joined with spaces).
#include <stdlib.h>
#include <string.h>

#include "engine/data/tokenizer_hf_internal.h"

// A list of strings in one buffer: (off[i], len[i]) into buf.
typedef struct {
    char *buf;
    size_t n, cap;
    size_t *off, *len;
    size_t n_tok, cap_tok;
} Toks;

static void put(Toks *t, const char *s, size_t n) {
    if (!n) return;   // buf may still be NULL
    if (t->n + n > t->cap) {
        t->cap = 2 * (t->n + n) + 64;
        t->buf = check_alloc(realloc(t->buf, t->cap), t->cap, __FILE__, __LINE__);
    }
    memcpy(t->buf + t->n, s, n);
    t->n += n;
}

static void open_tok(Toks *t) {
    if (!t->buf) {   // never NULL: callers index into it
        t->cap = 64;
        t->buf = xmalloc(t->cap);
    }
    if (t->n_tok == t->cap_tok) {
        t->cap_tok = 2 * t->cap_tok + 16;
        t->off = check_alloc(realloc(t->off, t->cap_tok * sizeof *t->off), t->cap_tok * sizeof *t->off, __FILE__, __LINE__);
        t->len = check_alloc(realloc(t->len, t->cap_tok * sizeof *t->len), t->cap_tok * sizeof *t->len, __FILE__, __LINE__);
    }
    t->off[t->n_tok] = t->n;
    t->len[t->n_tok++] = 0;
}

static void close_tok(Toks *t) { t->len[t->n_tok - 1] = t->n - t->off[t->n_tok - 1]; }

static void add_tok(Toks *t, const char *s, size_t n) {
    open_tok(t);
    put(t, s, n);
    close_tok(t);
}

static void toks_free(Toks *t) {
    free(t->buf);
    free(t->off);
    free(t->len);
}

static uint32_t code_point(const char *s, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    *len = hf_utf8_len(u[0]);
    if (*len == 1) return u[0];
    uint32_t c = u[0] & (0x3F >> (*len - 1));
    for (size_t k = 1; k < *len; k++) c = c << 6 | (u[k] & 0x3F);
    return c;
}

// ByteLevel: every token's characters back to bytes (a token with a character outside the
// table keeps its own bytes), all joined, then read as lossy UTF-8: one string.
static void dec_bytelevel(const Toks *in, Toks *out) {
    Toks raw = {0};
    open_tok(&raw);
    for (size_t i = 0; i < in->n_tok; i++) {
        const char *s = in->buf + in->off[i];
        size_t at = raw.n, len;
        int ok = 1;
        for (size_t k = 0; k < in->len[i] && ok; k += len) {
            int b = hf_char_byte(code_point(s + k, &len));
            if (b < 0) ok = 0;
            else put(&raw, &(char){(char)b}, 1);
        }
        if (!ok) raw.n = at, put(&raw, s, in->len[i]);
    }
    char *fixed = NULL;
    size_t cap = 0, n = hf_utf8_repair(raw.buf ? raw.buf : "", raw.n, &fixed, &cap);
    add_tok(out, fixed, n);
    free(fixed);
    toks_free(&raw);
}

static int byte_token(const char *s, size_t n) {
    static const char hex[] = "0123456789ABCDEF0123456789abcdef";
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    const char *h = memchr(hex, s[3], 32), *l = memchr(hex, s[4], 32);
    return h && l ? (int)((h - hex) % 16 * 16 + (l - hex) % 16) : -1;
}

// ByteFallback: runs of <0xNN> tokens become their bytes when those are valid UTF-8, else
// one U+FFFD per byte token.
static void dec_bytefallback(const Toks *in, Toks *out) {
    char *run = xmalloc(in->n_tok + 1);
    size_t n_run = 0;
    for (size_t i = 0; i <= in->n_tok; i++) {
        int b = i < in->n_tok ? byte_token(in->buf + in->off[i], in->len[i]) : -1;
        if (b >= 0) {
            run[n_run++] = (char)b;
            continue;
        }
        if (n_run && hf_utf8_check(run, n_run) == n_run) add_tok(out, run, n_run);
        else
            for (size_t k = 0; k < n_run; k++) add_tok(out, "\xEF\xBF\xBD", 3);
        n_run = 0;
        if (i < in->n_tok) add_tok(out, in->buf + in->off[i], in->len[i]);
    }
    free(run);
}

static void dec_replace(const DecOp *op, const Toks *in, Toks *out) {
    size_t la = strlen(op->a), lb = strlen(op->b);
    for (size_t i = 0; i < in->n_tok; i++) {
        const char *s = in->buf + in->off[i];
        open_tok(out);
        for (size_t k = 0; k < in->len[i];)
            if (in->len[i] - k >= la && memcmp(s + k, op->a, la) == 0) put(out, op->b, lb), k += la;
            else put(out, s + k, 1), k++;
        close_tok(out);
    }
}

// Strip: up to start copies of the content character off each token's front, up to stop
// off its back.
static void dec_strip(const DecOp *op, const Toks *in, Toks *out) {
    size_t lc = strlen(op->a);
    for (size_t i = 0; i < in->n_tok; i++) {
        const char *s = in->buf + in->off[i];
        size_t a = 0, b = in->len[i];
        for (int k = 0; k < op->start && b - a >= lc && memcmp(s + a, op->a, lc) == 0; k++) a += lc;
        for (int k = 0; k < op->stop && b - a >= lc && memcmp(s + b - lc, op->a, lc) == 0; k++) b -= lc;
        add_tok(out, s + a, b - a);
    }
}

// Metaspace: the replacement becomes a space, except in the first token (unless the scheme
// is "never"), where `tokenizers` drops every replacement character.
static void dec_metaspace(const DecOp *op, const Toks *in, Toks *out) {
    size_t lr = strlen(op->a);
    for (size_t i = 0; i < in->n_tok; i++) {
        const char *s = in->buf + in->off[i];
        open_tok(out);
        for (size_t k = 0; k < in->len[i];) {
            if (in->len[i] - k >= lr && memcmp(s + k, op->a, lr) == 0) {
                if (i != 0 || op->scheme == PREPEND_NEVER) put(out, " ", 1);
                k += lr;
            } else put(out, s + k, 1), k++;
        }
        close_tok(out);
    }
}

static void dec_step(const DecOp *op, const Toks *in, Toks *out) {
    switch (op->kind) {
    case DEC_BYTELEVEL: dec_bytelevel(in, out); break;
    case DEC_BYTEFALLBACK: dec_bytefallback(in, out); break;
    case DEC_REPLACE: dec_replace(op, in, out); break;
    case DEC_STRIP: dec_strip(op, in, out); break;
    case DEC_METASPACE: dec_metaspace(op, in, out); break;
    case DEC_FUSE:
        open_tok(out);
        put(out, in->buf ? in->buf : "", in->n);   // the tokens are back to back in buf
        close_tok(out);
        break;
    }
}

int hf_decode(const HfTokenizer *t, const int32_t *ids, size_t n, char **out, size_t *len,
              Error *err) {
    Toks a = {0}, b = {0};
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab) {
            error_set(err, "%s: id %d at position %zu is outside the vocabulary (0..%d)", t->name,
                      ids[i], i, t->vocab - 1);
            toks_free(&a);
            return -1;
        }
        if (!t->is_special[ids[i]]) add_tok(&a, t->pool + t->tok_off[ids[i]], t->tok_len[ids[i]]);
    }
    for (size_t k = 0; k < t->n_dec; k++) {
        b.n = b.n_tok = 0;
        dec_step(&t->dec[k], &a, &b);
        Toks tmp = a;
        a = b;
        b = tmp;
    }
    Toks joined = {0};
    for (size_t i = 0; i < a.n_tok; i++) {
        if (i && !t->n_dec) put(&joined, " ", 1);
        put(&joined, a.buf + a.off[i], a.len[i]);
    }
    put(&joined, "", 1);
    *out = joined.buf;
    *len = joined.n - 1;
    free(joined.off);
    free(joined.len);
    toks_free(&a);
    toks_free(&b);
    return 0;
}
