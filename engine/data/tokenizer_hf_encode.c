// engine/data/tokenizer_hf_encode.c: text -> ids, in `tokenizers`' order: UTF-8 check (and
// repair, under byte fallback), added tokens cut out of the raw text, each remaining segment
// normalized, pre-tokenized into pieces, each piece merged by the BPE model; then the
// template's special tokens around the whole.
#include <stdlib.h>
#include <string.h>

#include "engine/data/tokenizer_hf_encoder.h"
#include "engine/data/tokenizer_hf_utf8.h"

void hf_ids_push(HfIds *v, int32_t id) {
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 1024;
        v->id = check_alloc(realloc(v->id, v->cap * sizeof *v->id), v->cap * sizeof *v->id,
                            __FILE__, __LINE__);
    }
    v->id[v->n++] = id;
}

void hf_ids_free(HfIds *v) {
    free(v->id);
    *v = (HfIds){0};
}

HfEncoder *hf_encoder_new(const HfTokenizer *t) {
    HfEncoder *e = xcalloc(1, sizeof *e);
    e->t = t;
    e->md = pcre2_match_data_create(1, NULL);
    return e;   // the pre-token cache comes with the first word (hf_bpe_word)
}

static void pieces_free(Pieces *p) {
    free(p->buf);
    free(p->off);
    free(p->len);
    free(p->first);
}

void hf_encoder_free(HfEncoder *e) {
    if (!e) return;
    pcre2_match_data_free(e->md);
    free(e->sym);
    free(e->heap);
    free(e->cache);
    free(e->cache_text);
    free(e->cache_ids);
    free(e->text);
    free(e->seg);
    pieces_free(&e->a);
    pieces_free(&e->b);
    free(e);
}

static void put_bytes(Pieces *p, const char *s, size_t n) {
    if (!n) return;   // buf may still be NULL
    if (p->n + n > p->cap) {
        p->cap = (p->n + n) * 2 + 256;
        p->buf = check_alloc(realloc(p->buf, p->cap), p->cap, __FILE__, __LINE__);
    }
    memcpy(p->buf + p->n, s, n);
    p->n += n;
}

// Opens a piece at the end of p->buf; bytes put from now on belong to it.
static void piece_open(Pieces *p, int first) {
    if (!p->buf) {   // never NULL: callers index into it
        p->cap = 256;
        p->buf = xmalloc(p->cap);
    }
    if (p->n_piece == p->cap_piece) {
        p->cap_piece = p->cap_piece ? 2 * p->cap_piece : 256;
        p->off = check_alloc(realloc(p->off, p->cap_piece * sizeof *p->off), p->cap_piece * sizeof *p->off, __FILE__, __LINE__);
        p->len = check_alloc(realloc(p->len, p->cap_piece * sizeof *p->len), p->cap_piece * sizeof *p->len, __FILE__, __LINE__);
        p->first = check_alloc(realloc(p->first, p->cap_piece), p->cap_piece, __FILE__, __LINE__);
    }
    p->off[p->n_piece] = p->n;
    p->first[p->n_piece] = (uint8_t)first;
    p->n_piece++;
}

// Closes the open piece; an empty one is dropped, as `tokenizers` drops empty splits.
static void piece_close(Pieces *p) {
    size_t i = p->n_piece - 1;
    p->len[i] = p->n - p->off[i];
    if (!p->len[i]) p->n_piece--;
}

static void piece_add(Pieces *p, const char *s, size_t n, int first) {
    piece_open(p, first);
    put_bytes(p, s, n);
    piece_close(p);
}

static void pieces_reset(Pieces *p) { p->n = p->n_piece = 0; }

// One piece after the normalizers: Prepend (to a non-empty segment), Replace (every match).
static void normalize(HfEncoder *e, const char *s, size_t n, int first) {
    const HfTokenizer *t = e->t;
    Pieces *a = &e->a, *b = &e->b;
    pieces_reset(a);
    piece_add(a, s, n, first);
    for (size_t k = 0; k < t->n_norm && a->n_piece; k++) {
        const NormOp *op = &t->norm[k];
        const char *src = a->buf;
        size_t len = a->len[0], la = strlen(op->a);
        pieces_reset(b);
        piece_open(b, first);
        if (op->kind == NORM_PREPEND) {
            put_bytes(b, op->a, la);
            put_bytes(b, src, len);
        } else {
            size_t lb = strlen(op->b);
            for (size_t i = 0; i < len;) {
                if (len - i >= la && memcmp(src + i, op->a, la) == 0) put_bytes(b, op->b, lb), i += la;
                else put_bytes(b, src + i, 1), i++;
            }
        }
        piece_close(b);
        Pieces tmp = *a;
        *a = *b;
        *b = tmp;
    }
}

static void seg_push(HfEncoder *e, size_t start, size_t end, int match) {
    if (e->n_seg == e->cap_seg) {
        e->cap_seg = e->cap_seg ? 2 * e->cap_seg : 256;
        e->seg = check_alloc(realloc(e->seg, e->cap_seg * sizeof *e->seg), e->cap_seg * sizeof *e->seg, __FILE__, __LINE__);
    }
    e->seg[e->n_seg++] = (Seg){start, end, match};
}

// `tokenizers`' find_matches: the matches of re in s[0..n) and the stretches between them,
// covering s. An empty match is kept (as `tokenizers` keeps it) and the search moves one
// character on. A regex that gives up (match or JIT stack limit) is an error, never a
// silently unsplit rest.
static int find_matches(HfEncoder *e, const pcre2_code *re, const char *s, size_t n, Error *err) {
    e->n_seg = 0;
    size_t prev = 0, at = 0;
    while (at <= n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK, e->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            error_set(err, "%s: a pre-tokenizer regex failed on a %zu-byte piece: %s", e->t->name, n, (char *)msg);
            return -1;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        if (ov[0] > prev) seg_push(e, prev, ov[0], 0);
        seg_push(e, ov[0], ov[1], 1);
        prev = ov[1];
        at = ov[1] > ov[0] ? ov[1] : ov[1] + hf_utf8_len((unsigned char)s[ov[1] < n ? ov[1] : 0]);
    }
    if (prev < n) seg_push(e, prev, n, 0);
    return 0;
}

// Applies a Split behavior to e->seg in place (`tokenizers`' SplitDelimiterBehavior).
static void apply_behavior(HfEncoder *e, SplitBehavior b, int invert) {
    size_t w = 0;
    int prev_match = 0;
    if (invert)
        for (size_t i = 0; i < e->n_seg; i++) e->seg[i].match = !e->seg[i].match;
    if (b == SPLIT_MERGED_NEXT) {     // walk backwards: a delimiter joins the stretch after it
        size_t r = e->n_seg;
        for (size_t i = e->n_seg; i-- > 0;) {
            Seg s = e->seg[i];
            if (s.match && !prev_match && r < e->n_seg) e->seg[r].start = s.start;
            else e->seg[--r] = s;
            prev_match = s.match;
        }
        memmove(e->seg, e->seg + r, (e->n_seg - r) * sizeof *e->seg);
        e->n_seg -= r;
        return;
    }
    for (size_t i = 0; i < e->n_seg; i++) {
        Seg s = e->seg[i];
        if (b == SPLIT_REMOVED && s.match) continue;
        if ((b == SPLIT_MERGED_PREV && s.match && !prev_match && w) ||
            (b == SPLIT_CONTIGUOUS && w && s.match == prev_match))
            e->seg[w - 1].end = s.end;
        else e->seg[w++] = s;
        prev_match = s.match;
    }
    e->n_seg = w;
}

static void swap_pieces(HfEncoder *e) {
    Pieces tmp = e->a;
    e->a = e->b;
    e->b = tmp;
}

static int pre_split(HfEncoder *e, const PreOp *op, Error *err) {
    Pieces *a = &e->a, *b = &e->b;
    pieces_reset(b);
    for (size_t i = 0; i < a->n_piece; i++) {
        const char *s = a->buf + a->off[i];
        if (find_matches(e, op->re, s, a->len[i], err)) return -1;
        apply_behavior(e, op->behavior, op->invert);
        for (size_t k = 0; k < e->n_seg; k++)
            piece_add(b, s + e->seg[k].start, e->seg[k].end - e->seg[k].start,
                      a->first[i] && e->seg[k].start == 0);
    }
    swap_pieces(e);
    return 0;
}

// ByteLevel: optional leading space, GPT-2's regex (Isolated), then every byte as its
// printable stand-in character.
static int pre_bytelevel(HfEncoder *e, const PreOp *op, Error *err) {
    Pieces *a = &e->a, *b = &e->b;
    if (op->add_prefix_space) {
        pieces_reset(b);
        for (size_t i = 0; i < a->n_piece; i++) {
            piece_open(b, a->first[i]);
            if (a->buf[a->off[i]] != ' ') put_bytes(b, " ", 1);
            put_bytes(b, a->buf + a->off[i], a->len[i]);
            piece_close(b);
        }
        swap_pieces(e);
    }
    if (op->re && pre_split(e, &(PreOp){.re = op->re, .behavior = SPLIT_ISOLATED}, err)) return -1;
    pieces_reset(b);
    for (size_t i = 0; i < a->n_piece; i++) {
        piece_open(b, a->first[i]);
        for (size_t k = 0; k < a->len[i]; k++) {
            char c[3];
            size_t n;
            hf_byte_char((unsigned char)a->buf[a->off[i] + k], c, &n);
            put_bytes(b, c, n);
        }
        piece_close(b);
    }
    swap_pieces(e);
    return 0;
}

// Metaspace: spaces become the replacement, which is prepended per the scheme ("first":
// only to the piece that starts the text), then optionally split before each replacement.
static void pre_metaspace(HfEncoder *e, const PreOp *op) {
    Pieces *a = &e->a, *b = &e->b;
    size_t lr = strlen(op->repl);
    pieces_reset(b);
    for (size_t i = 0; i < a->n_piece; i++) {
        const char *s = a->buf + a->off[i];
        size_t n = a->len[i];
        piece_open(b, a->first[i]);
        int starts = (n && s[0] == ' ') || (n >= lr && memcmp(s, op->repl, lr) == 0);
        if (!starts && (op->scheme == PREPEND_ALWAYS || (op->scheme == PREPEND_FIRST && a->first[i])))
            put_bytes(b, op->repl, lr);
        for (size_t k = 0; k < n; k++)
            if (s[k] == ' ') put_bytes(b, op->repl, lr);
            else put_bytes(b, s + k, 1);
        piece_close(b);
    }
    swap_pieces(e);
    if (!op->split) return;
    pieces_reset(b);
    for (size_t i = 0; i < a->n_piece; i++) {
        const char *s = a->buf + a->off[i];
        size_t start = 0;
        for (size_t k = 1; k + lr <= a->len[i]; k++)
            if (memcmp(s + k, op->repl, lr) == 0) {
                piece_add(b, s + start, k - start, a->first[i] && start == 0);
                start = k;
            }
        piece_add(b, s + start, a->len[i] - start, a->first[i] && start == 0);
    }
    swap_pieces(e);
}

// One segment between added tokens: normalize, pre-tokenize, merge each piece.
static int encode_segment(HfEncoder *e, const char *s, size_t n, int first, HfIds *out, Error *err) {
    const HfTokenizer *t = e->t;
    normalize(e, s, n, first);
    for (size_t k = 0; k < t->n_pre; k++) {
        const PreOp *op = &t->pre[k];
        if (op->kind == PRE_SPLIT ? pre_split(e, op, err)
            : op->kind == PRE_BYTELEVEL ? pre_bytelevel(e, op, err) : (pre_metaspace(e, op), 0))
            return -1;
    }
    for (size_t i = 0; i < e->a.n_piece; i++)
        if (hf_bpe_word(e, e->a.buf + e->a.off[i], e->a.len[i], out, err) != 0) return -1;
    return 0;
}

// The longest added token that starts at s[0..n), or NULL.
static const AddedToken *added_at(const HfTokenizer *t, const char *s, size_t n) {
    for (size_t i = 0; i < t->n_added; i++) {
        const AddedToken *a = &t->added[i];
        if (a->len <= n && a->content[0] == s[0] && memcmp(a->content, s, a->len) == 0) return a;
    }
    return NULL;
}

int hf_encode(HfEncoder *e, const char *text, size_t n, int add_special, HfIds *out, Error *err) {
    const HfTokenizer *t = e->t;
    size_t bad = hf_utf8_check(text, n);
    if (bad < n) {
        if (!t->byte_fallback) {
            error_set(err, "invalid UTF-8 at byte %zu, and the tokenizer %s has no byte_fallback to "
                      "represent it", bad, t->name);
            return -1;
        }
        e->n_text = hf_utf8_repair(text, n, &e->text, &e->cap_text);
        text = e->text, n = e->n_text;
    }
    if (add_special)
        for (size_t i = 0; i < t->n_prefix; i++) hf_ids_push(out, t->prefix[i]);
    size_t seg = 0;
    for (size_t i = 0; i < n;) {
        const AddedToken *a = t->first_byte[(unsigned char)text[i]] ? added_at(t, text + i, n - i) : NULL;
        if (!a) {
            i++;
            continue;
        }
        if (i > seg && encode_segment(e, text + seg, i - seg, seg == 0, out, err) != 0) return -1;
        hf_ids_push(out, a->id);
        seg = i += a->len;
    }
    if (n > seg && encode_segment(e, text + seg, n - seg, seg == 0, out, err) != 0) return -1;
    if (add_special)
        for (size_t i = 0; i < t->n_suffix; i++) hf_ids_push(out, t->suffix[i]);
    return 0;
}
