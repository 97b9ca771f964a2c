// engine/data/tokenizer_hf.h: Hugging Face tokenizers (tokenizer.json) in C.
//
// The families Llama checkpoints use, and only what they use; any other type or setting is
// refused by name, so an id pptrain writes is the id the `tokenizers` library writes:
//   model: BPE (merges, unk + fuse_unk, byte_fallback with <0xNN> tokens, ignore_merges);
//   normalizer: Sequence, Prepend, Replace (string patterns);
//   pre_tokenizer: Sequence, ByteLevel (GPT-2's regex), Split (any regex, every behavior,
//     invert), Metaspace (prepend_scheme always/first/never, split), Digits;
//   post_processor: TemplateProcessing (single sequences), ByteLevel (offsets only), Sequence;
//   decoder: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence;
//   added tokens (matched in the raw text, longest first), special ones skipped by decode.
// Regexes are PCRE2 with Unicode properties (JIT-compiled where the platform has it).
// Text must be UTF-8. Invalid UTF-8 under a tokenizer with byte_fallback is read as Python's
// errors="replace" reads it (one U+FFFD per maximal invalid subpart); under one without,
// it is refused (encode returns -1), since `tokenizers` itself cannot take such text.
// decode follows `tokenizers`' Tokenizer.decode (special tokens skipped), not transformers'
// clean_up_tokenization_spaces.
// A loaded HfTokenizer is read-only: threads share it, each with its own HfEncoder.
#ifndef PPTRAIN_TOKENIZER_HF_H
#define PPTRAIN_TOKENIZER_HF_H
#include <stddef.h>
#include <stdint.h>

#include "engine/error.h"

typedef struct HfTokenizer HfTokenizer;
typedef struct HfEncoder HfEncoder;

typedef struct {
    int32_t *id;     // (n) token ids, capacity cap
    size_t n, cap;
} HfIds;

// Reads path (a tokenizer.json, or a folder holding one) and, beside it, tokenizer_config.json
// when present (bos/eos/pad/unk token names, add_bos_token/add_eos_token). NULL + err on any
// malformed, unknown or unsupported field (one line naming the field).
HfTokenizer *hf_tokenizer_load(const char *path, Error *err);
// The same from memory (no tokenizer_config.json); name is used in messages.
HfTokenizer *hf_tokenizer_parse(const char *json, size_t len, const char *name, Error *err);
void hf_tokenizer_free(HfTokenizer *t);

int32_t hf_tokenizer_vocab(const HfTokenizer *t);   // 1 + the largest id
// The last id the template puts after a sequence (an EOS it adds), or -1 when none.
int32_t hf_tokenizer_last_special(const HfTokenizer *t);
int32_t hf_tokenizer_bos(const HfTokenizer *t);     // -1 when it has none
int32_t hf_tokenizer_eos(const HfTokenizer *t);
int32_t hf_tokenizer_pad(const HfTokenizer *t);
int hf_tokenizer_byte_fallback(const HfTokenizer *t);
const char *hf_tokenizer_name(const HfTokenizer *t);
// Id of a token's exact text (vocabulary or added token); -1 when absent.
int32_t hf_tokenizer_token_id(const HfTokenizer *t, const char *s);

HfEncoder *hf_encoder_new(const HfTokenizer *t);
void hf_encoder_free(HfEncoder *e);
// Appends the ids of text[0..n) to out; add_special adds the post-processor's tokens (BOS).
// -1 + err (with the byte offset) for text the tokenizer cannot take.
int hf_encode(HfEncoder *e, const char *text, size_t n, int add_special, HfIds *out, Error *err);
// Decodes ids into a fresh NUL-terminated buffer (*out, *len bytes); -1 + err on an id
// outside the vocabulary.
int hf_decode(const HfTokenizer *t, const int32_t *ids, size_t n, char **out, size_t *len,
              Error *err);

void hf_ids_push(HfIds *v, int32_t id);
void hf_ids_free(HfIds *v);
#endif
