// engine/data/tokenizer_hf_bpe.c: the BPE model of a tokenizer.json: the vocabulary and merge
// maps, the merge of one pre-token, and each encoder's cache of pre-tokens already merged.
//
// The merge follows `tokenizers`' Word::merge_all: a min-heap of adjacent pairs ordered by
// (rank, position), symbols in a doubly linked list, stale heap entries skipped when popped.
// That is O(n log n) in the pre-token's length, which matters for SentencePiece-style
// tokenizers whose "pre-token" is a whole document.
#include "engine/data/tokenizer_hf_encoder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t hf_hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;   // FNV-1a, 64-bit
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

int32_t hf_map_get(const HfTokenizer *t, const char *s, size_t n) {
    const StrMap *m = &t->map;
    for (size_t i = hf_hash(s, n) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        uint32_t v = m->slot[i];
        if (!v) return -1;
        int32_t id = (int32_t)v - 1;
        if (t->tok_len[id] == n && memcmp(t->pool + t->tok_off[id], s, n) == 0) return id;
    }
}

// The caller sized map.cap to at least twice the vocabulary and checked id is not present.
void hf_map_put(HfTokenizer *t, int32_t id) {
    StrMap *m = &t->map;
    size_t i = hf_hash(t->pool + t->tok_off[id], t->tok_len[id]) & (m->cap - 1);
    while (m->slot[i]) i = (i + 1) & (m->cap - 1);
    m->slot[i] = (uint32_t)id + 1;
}

static size_t pair_slot(const PairMap *m, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 20) & (m->cap - 1);
    while (m->key[i] != UINT64_MAX && m->key[i] != key) i = (i + 1) & (m->cap - 1);
    return i;
}

// Returns 1 when the pair is already present: the loader refuses a repeated merge, which
// `tokenizers` would resolve silently (the last one wins).
int hf_pairs_put(PairMap *m, int32_t a, int32_t b, uint32_t rank, int32_t merged) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = pair_slot(m, key);
    if (m->key[i] == key) return 1;
    m->key[i] = key;
    m->rank[i] = rank;
    m->merged[i] = merged;
    return 0;
}

static int pair_get(const PairMap *m, int32_t a, int32_t b, uint32_t *rank, int32_t *merged) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = pair_slot(m, key);
    if (m->key[i] != key) return 0;
    *rank = m->rank[i];
    *merged = m->merged[i];
    return 1;
}

void hf_bpe_free(HfTokenizer *t) {
    free(t->map.slot);
    free(t->merges.key);
    free(t->merges.rank);
    free(t->merges.merged);
}

static size_t utf8_len(unsigned char c) {
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;   // text is valid UTF-8 here
}

static void sym_push(HfEncoder *e, int32_t id, uint32_t len) {
    if (e->n_sym == e->cap_sym) {
        e->cap_sym = e->cap_sym ? 2 * e->cap_sym : 256;
        e->sym = check_alloc(realloc(e->sym, e->cap_sym * sizeof *e->sym),
                             e->cap_sym * sizeof *e->sym, __FILE__, __LINE__);
    }
    Sym *s = &e->sym[e->n_sym];
    *s = (Sym){id, len, (int32_t)e->n_sym - 1, (int32_t)e->n_sym + 1};
    e->n_sym++;
}

// One character without an id of its own: its bytes' <0xNN> tokens, or unk (fused with
// an unk before it when fuse_unk), or an error.
static int sym_unknown(HfEncoder *e, const char *c, size_t len, int prev_unk, Error *err) {
    const HfTokenizer *t = e->t;
    int all = t->byte_fallback;
    for (size_t k = 0; all && k < len; k++) all = t->byte_id[(unsigned char)c[k]] >= 0;
    if (all) {
        for (size_t k = 0; k < len; k++) sym_push(e, t->byte_id[(unsigned char)c[k]], 1);
        return 0;
    }
    if (t->unk < 0) {
        // `tokenizers` drops such a character silently; pptrain says so instead.
        error_set(err, "%s: the text holds \"%.*s\", which is not in the vocabulary, and the "
                  "tokenizer has no unk_token or byte_fallback", t->name, (int)len, c);
        return -1;
    }
    if (prev_unk && t->fuse_unk) e->sym[e->n_sym - 1].len += (uint32_t)len;
    else sym_push(e, t->unk, (uint32_t)len);
    return 0;
}

// Fills e->sym with one symbol per character of w.
static int split_chars(HfEncoder *e, const char *w, size_t n, Error *err) {
    e->n_sym = 0;
    int prev_unk = 0;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_len((unsigned char)w[i]);
        if (len > n - i) len = n - i;
        int32_t id = hf_map_get(e->t, w + i, len);
        if (id >= 0) sym_push(e, id, (uint32_t)len);
        else if (sym_unknown(e, w + i, len, prev_unk, err) != 0) return -1;
        prev_unk = id < 0 && e->n_sym && e->sym[e->n_sym - 1].id == e->t->unk;
        i += len;
    }
    if (e->n_sym) e->sym[e->n_sym - 1].next = -1;
    return 0;
}

// Min-heap of candidate merges, ordered by (rank, position of the left symbol).
static int heap_less(const Cand *a, const Cand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(HfEncoder *e, Cand c) {
    if (e->n_heap == e->cap_heap) {
        e->cap_heap = e->cap_heap ? 2 * e->cap_heap : 256;
        e->heap = check_alloc(realloc(e->heap, e->cap_heap * sizeof *e->heap),
                              e->cap_heap * sizeof *e->heap, __FILE__, __LINE__);
    }
    size_t i = e->n_heap++;
    while (i && heap_less(&c, &e->heap[(i - 1) / 2])) {
        e->heap[i] = e->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    e->heap[i] = c;
}

static Cand heap_pop(HfEncoder *e) {
    Cand top = e->heap[0], last = e->heap[--e->n_heap];
    size_t i = 0, n = e->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_less(&e->heap[c + 1], &e->heap[c])) c++;
        if (!heap_less(&e->heap[c], &last)) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n) e->heap[i] = last;
    return top;
}

static void push_pair(HfEncoder *e, int32_t left) {
    if (left < 0) return;
    int32_t right = e->sym[left].next;
    if (right < 0) return;
    uint32_t rank;
    int32_t merged;
    if (pair_get(&e->t->merges, e->sym[left].id, e->sym[right].id, &rank, &merged))
        heap_push(e, (Cand){rank, left, merged});
}

static void merge_all(HfEncoder *e) {
    e->n_heap = 0;
    for (size_t i = 0; i + 1 < e->n_sym; i++) push_pair(e, (int32_t)i);
    while (e->n_heap) {
        Cand c = heap_pop(e);
        Sym *l = &e->sym[c.pos];
        if (l->len == 0 || l->next < 0) continue;
        Sym *r = &e->sym[l->next];
        uint32_t rank;
        int32_t merged;
        if (!pair_get(&e->t->merges, l->id, r->id, &rank, &merged) || rank != c.rank ||
            merged != c.merged)
            continue;   // stale: one side merged since this entry was pushed
        l->id = merged;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (l->next >= 0) e->sym[l->next].prev = c.pos;
        push_pair(e, l->prev);
        push_pair(e, c.pos);
    }
}

// The cache: pre-token text -> its ids, for pre-tokens up to HF_CACHE_WORD bytes. Cleared
// when full rather than evicting (a corpus's frequent words come back within a few KB).
static int cache_get(HfEncoder *e, const char *w, size_t n, uint64_t h, HfIds *out) {
    for (size_t i = h & (HF_CACHE_SLOTS - 1);; i = (i + 1) & (HF_CACHE_SLOTS - 1)) {
        CacheEntry *c = &e->cache[i];
        if (!c->len) return 0;
        if (c->hash == h && c->len == n && memcmp(e->cache_text + c->text, w, n) == 0) {
            for (uint32_t k = 0; k < c->n_ids; k++) hf_ids_push(out, e->cache_ids[c->ids + k]);
            return 1;
        }
    }
}

static void cache_put(HfEncoder *e, const char *w, size_t n, uint64_t h, const int32_t *ids,
                      size_t n_ids) {
    if (e->cache_used * 2 >= HF_CACHE_SLOTS || e->text_used + n > HF_CACHE_TEXT ||
        e->ids_used + n_ids > HF_CACHE_IDS) {
        memset(e->cache, 0, HF_CACHE_SLOTS * sizeof *e->cache);
        e->cache_used = e->text_used = e->ids_used = 0;
    }
    size_t i = h & (HF_CACHE_SLOTS - 1);
    while (e->cache[i].len) i = (i + 1) & (HF_CACHE_SLOTS - 1);
    memcpy(e->cache_text + e->text_used, w, n);
    memcpy(e->cache_ids + e->ids_used, ids, n_ids * sizeof *ids);
    e->cache[i] = (CacheEntry){h, (uint32_t)e->text_used, (uint32_t)n, (uint32_t)e->ids_used,
                               (uint32_t)n_ids};
    e->cache_used++;
    e->text_used += n;
    e->ids_used += n_ids;
}

int hf_bpe_word(HfEncoder *e, const char *w, size_t n, HfIds *out, Error *err) {
    if (n == 0) return 0;
    const HfTokenizer *t = e->t;
    if (t->ignore_merges) {
        int32_t id = hf_map_get(t, w, n);
        if (id >= 0) {
            hf_ids_push(out, id);
            return 0;
        }
    }
    uint64_t h = 0;
    int cacheable = n <= HF_CACHE_WORD;
    if (cacheable && !e->cache) {
        e->cache = xcalloc(HF_CACHE_SLOTS, sizeof *e->cache);
        e->cache_text = xmalloc(HF_CACHE_TEXT);
        e->cache_ids = xmalloc(HF_CACHE_IDS * sizeof *e->cache_ids);
    }
    if (cacheable) {
        h = hf_hash(w, n);
        if (cache_get(e, w, n, h, out)) return 0;
    }
    if (split_chars(e, w, n, err) != 0) return -1;
    merge_all(e);
    size_t first = out->n;
    for (int32_t i = e->n_sym ? 0 : -1; i >= 0; i = e->sym[i].next) hf_ids_push(out, e->sym[i].id);
    if (cacheable) cache_put(e, w, n, h, out->id + first, out->n - first);
    return 0;
}
