#include "engine/data/tokenizer.h"

size_t tokenizer_encode(const char *text, size_t n, int32_t *ids) {
    for (size_t i = 0; i < n; i++) ids[i] = (unsigned char)text[i];
    return n;
}

size_t tokenizer_decode(const int32_t *ids, size_t n, char *out, size_t cap) {
    if (cap == 0) return 0;
    size_t w = 0;
    for (size_t i = 0; i < n && w + 1 < cap; i++) {
        if (ids[i] >= 0 && ids[i] < 256) out[w++] = (char)(unsigned char)ids[i];
        else if (ids[i] == TOKEN_EOS) out[w++] = '\n';
        // BOS, PAD and ids outside the byte vocabulary decode to nothing.
    }
    out[w] = '\0';
    return w;
}
