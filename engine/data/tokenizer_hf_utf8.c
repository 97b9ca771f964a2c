// engine/data/tokenizer_hf_utf8.c: UTF-8 validation and lossy repair (maximal subparts, the
// Unicode standard's recommended practice that Python and Rust follow), and GPT-2's table of
// printable stand-ins for bytes (bytes_to_unicode).
#include "engine/data/tokenizer_hf_utf8.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/tokenizer_hf_internal.h"

// Length of the valid character at s[0..n), or 0 with *sub = the maximal invalid subpart
// (the bytes that could start a character, stopped at the first that cannot continue it).
static size_t char_at(const unsigned char *s, size_t n, size_t *sub) {
    unsigned c = s[0];
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;   // the second byte's range
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) need = 2, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) need = 2;
    else if (c == 0xED) need = 2, hi = 0x9F;
    else if (c == 0xF0) need = 3, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else if (c == 0xF4) need = 3, hi = 0x8F;
    else {
        *sub = 1;
        return 0;
    }
    for (size_t k = 1; k <= need; k++) {
        unsigned b = k < n ? s[k] : 0x100;
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) {
            *sub = k;
            return 0;
        }
    }
    return need + 1;
}

size_t hf_utf8_check(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, sub;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        size_t len = char_at(u + i, n - i, &sub);
        if (!len) return i;
        i += len;
    }
    return n;
}

size_t hf_utf8_repair(const char *s, size_t n, char **buf, size_t *cap) {
    if (*cap < 3 * n + 1) {   // each invalid byte grows to at most 3
        *cap = 3 * n + 1;
        *buf = check_alloc(realloc(*buf, *cap), *cap, __FILE__, __LINE__);
    }
    const unsigned char *u = (const unsigned char *)s;
    size_t w = 0, sub;
    for (size_t i = 0; i < n;) {
        size_t len = char_at(u + i, n - i, &sub);
        if (len) {
            memcpy(*buf + w, s + i, len);
            w += len, i += len;
        } else {
            memcpy(*buf + w, "\xEF\xBF\xBD", 3);
            w += 3, i += sub;
        }
    }
    return w;
}

// bytes_to_unicode: printable Latin-1 bytes stand for themselves; the other 68 bytes
// (controls, space, DEL, NBSP, soft hyphen) take U+0100.. in byte order.
static int printable(unsigned b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

static uint32_t byte_code(unsigned b) {
    if (printable(b)) return b;
    uint32_t k = 0;
    for (unsigned x = 0; x < b; x++) k += !printable(x);
    return 256 + k;
}

static char byte_utf8[256][2];   // the stand-in's UTF-8
static uint8_t byte_len[256];     // its length, 1 or 2
static int16_t code_byte[324];    // stand-in code point -> byte, -1 for others
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void) {
    memset(code_byte, 0xff, sizeof code_byte);
    for (unsigned x = 0; x < 256; x++) {
        uint32_t c = byte_code(x);
        code_byte[c] = (int16_t)x;
        if (c < 0x80) byte_utf8[x][0] = (char)c, byte_len[x] = 1;
        else byte_utf8[x][0] = (char)(0xC0 | c >> 6), byte_utf8[x][1] = (char)(0x80 | (c & 0x3F)), byte_len[x] = 2;
    }
}

void hf_byte_char(unsigned b, char out[3], size_t *len) {
    pthread_once(&tables_once, build_tables);
    memcpy(out, byte_utf8[b], 2);
    *len = byte_len[b];
}

int hf_char_byte(uint32_t c) {
    pthread_once(&tables_once, build_tables);
    return c < 324 ? code_byte[c] : -1;
}
