// console/tui/pure/tui_text: text fitted to a width without cutting a word (see tui_text.h).
#include "console/tui/pure/tui_text.h"

#include <stdbool.h>
#include <string.h>

static int is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

int tui_text_width_n(const char *s, int n) {
    int w = 0;
    for (int i = 0; i < n && s[i]; i++) w += !is_cont((unsigned char)s[i]);
    return w;
}

int tui_text_width(const char *s) { return tui_text_width_n(s, (int)strlen(s)); }

// Bytes of the longest prefix of s[0, n) at most width columns wide (whole code points).
static int bytes_in(const char *s, int n, int width) {
    int w = 0, i = 0;
    while (i < n) {
        int next = i + 1;
        while (next < n && is_cont((unsigned char)s[next])) next++;
        if (w + 1 > width) break;
        w++;
        i = next;
    }
    return i;
}

// Where a word of n bytes that is wider than the line breaks: after the last '/' or ',' that
// keeps the piece within width, else at width.
static int word_break(const char *s, int n, int width) {
    const int most = bytes_in(s, n, width);
    for (int i = most; i > 0; i--)
        if (s[i - 1] == '/' || s[i - 1] == ',') return i;
    return most > 0 ? most : 1;
}

int tui_wrap(const char *text, int width, TuiLine *out, int max) {
    if (width < 1) width = 1;
    const int len = (int)strlen(text);
    int lines = 0, i = 0;
    while (i < len) {
        while (i < len && text[i] == ' ') i++;
        if (i >= len) break;
        // Take whole words while they fit.
        int end = i, w = 0;
        for (int j = i; j < len;) {
            int k = j;
            while (k < len && text[k] != ' ') k++;
            const int word_w = tui_text_width_n(text + j, k - j);
            const int need = (end > i ? w + 1 : 0) + word_w;
            if (need > width) break;
            w = need;
            end = k;
            j = k;
            while (j < len && text[j] == ' ') j++;
        }
        if (end == i) {   // one word wider than the line
            int k = i;
            while (k < len && text[k] != ' ') k++;
            end = i + word_break(text + i, k - i, width);
        }
        if (lines < max) out[lines] = (TuiLine){i, end - i};
        lines++;
        i = end;
    }
    return lines;
}

int tui_fields_fit(const int *field_w, int n, int gap, int width) {
    int used = 0;
    for (int k = 0; k < n; k++) {
        used += (k ? gap : 0) + field_w[k];
        if (used > width) return k;
    }
    return n;
}

int tui_words_fit(const char *text, int width, int ellipsis_w) {
    const int len = (int)strlen(text);
    if (tui_text_width(text) <= width) return len;
    int best = 0;
    for (int i = 1; i <= len; i++) {
        const bool boundary = i == len || text[i] == ' ';
        if (!boundary || text[i - 1] == ' ') continue;
        if (tui_text_width_n(text, i) + ellipsis_w > width) break;
        best = i;
    }
    return best;
}
