// engine/data/tokenizer_hf_utf8.h: UTF-8 checks and repair, and GPT-2's byte <-> character
// table, for the Hugging Face tokenizer. Private to engine/data/tokenizer_hf*.c.
#ifndef PPTRAIN_TOKENIZER_HF_UTF8_H
#define PPTRAIN_TOKENIZER_HF_UTF8_H
#include <stddef.h>
#include <stdint.h>

// Bytes of the character that starts with c, read from a valid string.
static inline size_t hf_utf8_len(unsigned char c) {
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}
// Offset of the first byte that is not part of a valid UTF-8 character, or n.
size_t hf_utf8_check(const char *s, size_t n);
// s with each maximal invalid subpart replaced by U+FFFD, as Python's
// bytes.decode("utf-8", "replace") and Rust's String::from_utf8_lossy do, into *buf
// (grown as needed, capacity *cap); returns the length.
size_t hf_utf8_repair(const char *s, size_t n, char **buf, size_t *cap);
// The byte GPT-2's table maps character c (a code point) to, or -1.
int hf_char_byte(uint32_t c);
#endif
