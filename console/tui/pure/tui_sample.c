// console/tui/pure/tui_sample: a sample's text escaped for the terminal or made UTF-8 for JSON
// (console/tui/pure/tui_sample.h).
#include "console/tui/pure/tui_sample.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int tui_utf8_seq(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    if (s[0] < 0x80) return 1;
    int len;
    uint32_t cp, min;
    if ((s[0] & 0xe0) == 0xc0) len = 2, cp = s[0] & 0x1f, min = 0x80;
    else if ((s[0] & 0xf0) == 0xe0) len = 3, cp = s[0] & 0x0f, min = 0x800;
    else if ((s[0] & 0xf8) == 0xf0) len = 4, cp = s[0] & 0x07, min = 0x10000;
    else return 0;
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

// The code point of a valid sequence of len bytes.
static uint32_t code_point(const unsigned char *s, int len) {
    uint32_t cp = len == 1 ? s[0] : s[0] & (0x7f >> len);
    for (int i = 1; i < len; i++) cp = cp << 6 | (s[i] & 0x3f);
    return cp;
}

// Appends piece (k bytes) when it fits whole before the NUL; *used counts it either way, and
// once one piece has not fitted nothing more is written (no cut in the middle of the text).
static void put(char *out, size_t size, size_t *used, bool *full, const char *piece, size_t k) {
    if (!*full && *used + k < size) memcpy(out + *used, piece, k);
    else *full = true;
    *used += k;
}

size_t tui_sample_escape(const char *text, char *out, size_t size) {
    const unsigned char *s = (const unsigned char *)text;
    const size_t n = strlen(text);
    size_t used = 0, written = 0;
    bool full = false;
    for (size_t i = 0; i < n;) {
        char piece[12];   // the longest: a C1 control's two escapes, 8 bytes
        size_t k;
        const int len = tui_utf8_seq(s + i, n - i);
        const uint32_t cp = len ? code_point(s + i, len) : 0;
        if (len == 0) k = (size_t)snprintf(piece, sizeof piece, "\\x%02x", s[i]);
        else if (cp == '\n') k = 2, memcpy(piece, "\\n", 2);
        else if (cp == '\t') k = 2, memcpy(piece, "\\t", 2);
        else if (cp == '\\') k = 2, memcpy(piece, "\\\\", 2);
        else if (cp < 0x20 || cp == 0x7f) k = (size_t)snprintf(piece, sizeof piece, "\\x%02x", s[i]);
        else if (cp >= 0x80 && cp < 0xa0) {   // C1 controls: both bytes, as the bytes they are
            k = (size_t)snprintf(piece, sizeof piece, "\\x%02x\\x%02x", s[i], s[i + 1]);
        } else k = (size_t)len, memcpy(piece, s + i, k);
        put(out, size, &used, &full, piece, k);
        if (!full) written = used;
        i += len ? (size_t)len : 1;
    }
    if (size) out[written] = '\0';   // written + 1 <= size: put wrote only what fit before the NUL
    return used;
}

size_t tui_sample_utf8(const char *text, char *out, size_t size) {
    const unsigned char *s = (const unsigned char *)text;
    const size_t n = strlen(text);
    size_t used = 0, written = 0;
    bool full = false;
    for (size_t i = 0; i < n;) {
        const int len = tui_utf8_seq(s + i, n - i);
        if (len) put(out, size, &used, &full, text + i, (size_t)len);
        else put(out, size, &used, &full, "\xef\xbf\xbd", 3);
        if (!full) written = used;
        i += len ? (size_t)len : 1;
    }
    if (size) out[written] = '\0';   // written + 1 <= size: put wrote only what fit before the NUL
    return used;
}
