// engine/data/tokenizer_hf_internal.h: the parsed tokenizer.json, shared by the files that
// load it (tokenizer_hf_load*.c), encode with it (tokenizer_hf_encode.c, tokenizer_hf_bpe.c)
// and decode with it (tokenizer_hf_decode.c). Private to those files.
#ifndef PPTRAIN_TOKENIZER_HF_INTERNAL_H
#define PPTRAIN_TOKENIZER_HF_INTERNAL_H
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/data/tokenizer_hf.h"
#include "engine/data/tokenizer_hf_utf8.h"

// String -> id map (open addressing, linear probing; keys point into HfTokenizer.pool or
// into the caller's buffers, never copied per lookup).
typedef struct {
    uint32_t *slot;      // (cap) id + 1, 0 = empty
    size_t cap;          // power of two, at least twice the entries
} StrMap;

// (left id, right id) -> (rank, merged id): the merges, rank = line in "merges".
typedef struct {
    uint64_t *key;       // (cap) left << 32 | right, UINT64_MAX = empty
    uint32_t *rank;      // (cap)
    int32_t *merged;     // (cap)
    size_t cap;
} PairMap;

typedef enum { NORM_PREPEND, NORM_REPLACE } NormKind;
typedef struct {
    NormKind kind;
    char *a, *b;         // prepend: a; replace: a -> b (plain strings, never regexes)
} NormOp;

typedef enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT,
               SPLIT_CONTIGUOUS } SplitBehavior;
typedef enum { PRE_SPLIT, PRE_BYTELEVEL, PRE_METASPACE } PreKind;   // Digits is a Split
typedef enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } PrependScheme;
typedef struct {
    PreKind kind;
    pcre2_code *re;           // split: the pattern; bytelevel with use_regex: GPT-2's
    SplitBehavior behavior;   // split
    int invert;               // split
    int add_prefix_space;     // bytelevel
    char repl[8];             // metaspace: the replacement character, UTF-8
    PrependScheme scheme;     // metaspace
    int split;                // metaspace: split at the replacement
} PreOp;

typedef enum { DEC_BYTELEVEL, DEC_METASPACE, DEC_REPLACE, DEC_BYTEFALLBACK, DEC_FUSE,
               DEC_STRIP } DecKind;
typedef struct {
    DecKind kind;
    char *a, *b;              // replace: a -> b; metaspace: a = replacement; strip: a = content
    PrependScheme scheme;     // metaspace
    int start, stop;          // strip: characters removed at each end of every token
} DecOp;

typedef struct {
    char *content;
    size_t len;
    int32_t id;
    int special;
} AddedToken;

struct HfTokenizer {
    char *pool;               // every token's text, back to back
    size_t pool_used;         // bytes
    uint8_t *has_text;        // (vocab) 1 once an id has its text (loading only)
    size_t *tok_off;          // (vocab) offset of token id's text in pool
    uint32_t *tok_len;        // (vocab)
    int32_t vocab;            // ids are 0..vocab-1 (model vocab and added tokens together)
    StrMap map;               // token text -> id (model vocabulary only)
    PairMap merges;
    int32_t unk;              // -1: none
    int fuse_unk, byte_fallback, ignore_merges;
    int32_t byte_id[256];     // byte fallback: id of "<0xNN>", -1 when absent
    AddedToken *added;        // (n_added) sorted by descending length, so the first match is longest
    size_t n_added;
    uint8_t first_byte[256];  // 1 where some added token starts with that byte
    uint8_t *is_special;      // (vocab) 1 for special added tokens (skipped by decode)
    NormOp *norm;
    size_t n_norm;
    PreOp *pre;
    size_t n_pre;
    int32_t *prefix, *suffix; // TemplateProcessing: ids before and after the sequence
    size_t n_prefix, n_suffix;
    DecOp *dec;
    size_t n_dec;
    int32_t bos, eos, pad;    // from tokenizer_config.json (or the template); -1 when unknown
    char name[256];
};

// tokenizer_hf_bpe.c
uint64_t hf_hash(const char *s, size_t n);
int32_t hf_map_get(const HfTokenizer *t, const char *s, size_t n);
void hf_map_put(HfTokenizer *t, int32_t id);
int hf_pairs_put(PairMap *m, int32_t a, int32_t b, uint32_t rank, int32_t merged);
void hf_bpe_free(HfTokenizer *t);
// Appends the ids of one pre-token (already byte-level or metaspace mapped) to out.
// Returns -1 with err set when a character has no id and the model has no unk token.
int hf_bpe_word(HfEncoder *e, const char *w, size_t n, HfIds *out, Error *err);

// tokenizer_hf_load_parts.c: the normalizer, pre-tokenizer, post-processor, decoder sections.
#include <cjson/cJSON.h>
int hf_check_keys(const cJSON *o, const char *where, const char *const *known, Error *err);
int hf_load_normalizer(HfTokenizer *t, const cJSON *j, Error *err);
int hf_load_pre_tokenizer(HfTokenizer *t, const cJSON *j, Error *err);
int hf_load_post_processor(HfTokenizer *t, const cJSON *j, Error *err);
int hf_load_decoder(HfTokenizer *t, const cJSON *j, Error *err);
pcre2_code *hf_regex(const char *pattern, int literal, const char *where, Error *err);
const char *hf_gpt2_pattern(void);

// GPT-2's byte <-> printable character table: the UTF-8 of byte b's character (*len 1 or 2).
void hf_byte_char(unsigned b, char out[3], size_t *len);
#endif
