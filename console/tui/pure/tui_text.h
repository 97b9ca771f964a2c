// console/tui/pure/tui_text: text fitted to a width without cutting a word: wrapping for the message
// line and the "too small" notice, whole fields for headers and titles. Pure: no curses.
// Widths are in terminal columns; a UTF-8 code point counts as one column (the console's own
// texts are ASCII; paths and messages from outside may not be).
#ifndef PPTRAIN_TUI_TEXT_H
#define PPTRAIN_TUI_TEXT_H
#include <stddef.h>

// Columns of a NUL-terminated string (code points).
int tui_text_width(const char *s);
// Columns of the first n bytes.
int tui_text_width_n(const char *s, int n);

// A line of wrapped text: bytes [start, start + len) of the text.
typedef struct {
    int start, len;
} TuiLine;

// Wraps text into lines of at most width columns, breaking at spaces (which are dropped). A
// word wider than a line breaks after a '/' or ',' when one falls in the line, else at the
// width (a path longer than the terminal has no better place). Returns the lines the whole
// text needs; out gets at most max of them.
int tui_wrap(const char *text, int width, TuiLine *out, int max);

// Fields drawn left to right, gap columns apart: how many of the first ones fit in width.
int tui_fields_fit(const int *field_w, int n, int gap, int width);

// The longest prefix of text that ends at a word boundary and fits in width columns together
// with a trailing ellipsis (ellipsis_w columns). Returns its length in bytes: the whole
// text when it fits as it is (then no ellipsis is needed), 0 when not even one word fits.
int tui_words_fit(const char *text, int width, int ellipsis_w);
#endif
