// console/tui/pure/tui_sample: a sample of the model (train --sample-every) made safe to show.
// The text is the tokenizer's decoding of whatever the model wrote: any bytes, control bytes
// and invalid UTF-8 included, which must never reach a terminal raw (an ESC starts a control
// sequence) nor a JSON document (which must be UTF-8). Pure: no curses.
#ifndef PPTRAIN_TUI_SAMPLE_H
#define PPTRAIN_TUI_SAMPLE_H
#include <stddef.h>

// Bytes of the valid UTF-8 sequence at s[0..n) (1 to 4; shortest form, no surrogates, at
// most U+10FFFF), or 0 when s does not start one.
int tui_utf8_seq(const unsigned char *s, size_t n);

// For a terminal: printable ASCII and valid UTF-8 of printable code points as they are; a
// newline as the two characters \n, a tab as \t, a backslash as \\; every other C0 or C1
// control, DEL, and each byte of an invalid sequence as \xNN (its hex). Writes at most
// size - 1 bytes and a NUL, never cutting an escape or a code point (size 0: nothing, out may
// be NULL); returns the bytes the whole escaped text takes (as snprintf).
size_t tui_sample_escape(const char *text, char *out, size_t size);

// For JSON: the text with each byte of an invalid UTF-8 sequence replaced by U+FFFD (the
// JSON writer escapes the control characters). out as above; returns the bytes it takes.
size_t tui_sample_utf8(const char *text, char *out, size_t size);
#endif
