// engine/data/tokenizer_hf_encoder.h: one thread's encoding state (scratch buffers, the
// PCRE2 match data, the pre-token cache). Private to engine/data/tokenizer_hf*.c.
#ifndef PPTRAIN_TOKENIZER_HF_ENCODER_H
#define PPTRAIN_TOKENIZER_HF_ENCODER_H
#include "engine/data/tokenizer_hf_internal.h"

enum {
    HF_CACHE_WORD = 64,          // bytes: longer pre-tokens are merged every time
    HF_CACHE_SLOTS = 1 << 16,    // power of two; cleared at half full
    HF_CACHE_TEXT = 1 << 21,     // bytes of cached pre-token text
    HF_CACHE_IDS = 1 << 19,      // cached ids
};

typedef struct {
    int32_t id;
    uint32_t len;                // bytes of the pre-token this symbol covers; 0 = merged away
    int32_t prev, next;          // neighbours in the list, -1 at the ends
} Sym;

typedef struct {
    uint32_t rank;
    int32_t pos;                 // index of the left symbol
    int32_t merged;
} Cand;

typedef struct {
    uint64_t hash;
    uint32_t text, len;          // offset and length in cache_text; len 0 = empty slot
    uint32_t ids, n_ids;         // offset and count in cache_ids
} CacheEntry;

// One stretch of a piece: a regex match or the text between two.
typedef struct {
    size_t start, end;           // bytes within the piece
    int match;
} Seg;

// A growable byte buffer with a list of pieces (offset, length, at-start flag).
typedef struct {
    char *buf;
    size_t n, cap;
    size_t *off, *len;           // (n_piece)
    uint8_t *first;              // (n_piece) 1 when the piece starts the text's first segment
    size_t n_piece, cap_piece;
} Pieces;

struct HfEncoder {
    const HfTokenizer *t;
    pcre2_match_data *md;
    Sym *sym;
    size_t n_sym, cap_sym;
    Cand *heap;
    size_t n_heap, cap_heap;
    CacheEntry *cache;           // (HF_CACHE_SLOTS)
    char *cache_text;            // (HF_CACHE_TEXT)
    int32_t *cache_ids;          // (HF_CACHE_IDS)
    size_t cache_used, text_used, ids_used;
    char *text;                  // the input after UTF-8 repair, (n_text)
    size_t n_text, cap_text;
    Pieces a, b;                 // pre-tokens: the current list and the one being built
    Seg *seg;                    // one piece's stretches, (n_seg)
    size_t n_seg, cap_seg;
};
#endif
