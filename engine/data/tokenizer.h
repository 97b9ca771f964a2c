// The byte tokenizer: token id = byte value for 0..255, plus three specials.
#ifndef PPTRAIN_TOKENIZER_H
#define PPTRAIN_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>

enum {
    TOKEN_BOS = 256,
    TOKEN_EOS = 257,
    TOKEN_PAD = 258,
    BYTE_VOCAB_SIZE = 259,
};

// Writes one id per byte of text[0..n) into ids; returns n.
size_t tokenizer_encode(const char *text, size_t n, int32_t *ids);
// Decodes ids into out (bytes; specials become "" except EOS -> '\n'); returns bytes written
// (at most cap - 1), NUL-terminated.
size_t tokenizer_decode(const int32_t *ids, size_t n, char *out, size_t cap);
#endif
