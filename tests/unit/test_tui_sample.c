// tests/unit/test_tui_sample: a sample's text is never shown raw (console/tui/pure/tui_sample):
// control bytes (ESC above all), C1 controls and every byte of invalid UTF-8 come out as \xNN
// escapes that leave nothing for a terminal to act on; valid UTF-8 passes whole; a small
// buffer is never cut inside an escape or a code point. For JSON, invalid bytes become U+FFFD.
#include <string.h>

#include "console/tui/pure/tui_sample.h"
#include "tests/unit/test_util.h"

// Every byte of an escaped text is printable ASCII or part of a valid UTF-8 code point >= U+00A0.
static int terminal_safe(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    const size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        const int len = tui_utf8_seq(u + i, n - i);
        if (len == 0 || (len == 1 && (u[i] < 0x20 || u[i] == 0x7f)) || (len == 2 && u[i] == 0xc2 && u[i + 1] < 0xa0))
            return 0;
        i += (size_t)len;
    }
    return 1;
}

static void test_escape(void) {
    char out[256];
    const struct {
        const char *in, *want;
    } cases[] = {
        {"The cat", "The cat"},
        {"a\nb\tc\\d", "a\\nb\\tc\\\\d"},
        {"\x1b[2J\x07" "x\x7f", "\\x1b[2J\\x07x\\x7f"},                       // ESC, BEL, DEL
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},  // é € 😀
        {"\xc2\x9b" "31m", "\\xc2\\x9b31m"},                                      // C1 CSI
        {"\xff\xfe", "\\xff\\xfe"},                                               // never UTF-8
        {"\xc3(", "\\xc3("},                                                      // lead without continuation
        {"\xe2\x82", "\\xe2\\x82"},                                               // cut short at the end
        {"\xc0\xaf", "\\xc0\\xaf"},                                               // overlong '/'
        {"\xed\xa0\x80", "\\xed\\xa0\\x80"},                                      // a surrogate
        {"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},                             // past U+10FFFF
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const size_t n = tui_sample_escape(cases[i].in, out, sizeof out);
        CHECK(strcmp(out, cases[i].want) == 0 && n == strlen(cases[i].want), "case %zu: got \"%s\"", i, out);
        CHECK(terminal_safe(out), "case %zu: \"%s\" is not safe for a terminal", i, out);
    }
    // Every byte value, alone and after a lead byte: the result is always terminal-safe.
    for (int b = 0; b < 256; b++) {
        const char one[3] = {(char)(b ? b : 'x'), 0, 0}, two[3] = {(char)0xc3, (char)(b ? b : 'x'), 0};
        tui_sample_escape(one, out, sizeof out);
        CHECK(terminal_safe(out), "byte 0x%02x escapes to an unsafe \"%s\"", b, out);
        tui_sample_escape(two, out, sizeof out);
        CHECK(terminal_safe(out), "0xc3 0x%02x escapes to an unsafe \"%s\"", b, out);
    }
}

// A short buffer holds a whole prefix: never half an escape or half a code point.
static void test_escape_fits(void) {
    const char *in = "ab\x1b\xc3\xa9z";   // a b \x1b é z: 2 + 4 + 2 + 1 bytes escaped
    char out[16];
    const size_t want[] = {0, 1, 2, 2, 2, 2, 6, 6, 8, 9, 9};   // written for size 1..11
    for (size_t size = 1; size <= 11; size++) {
        memset(out, 'Q', sizeof out);
        const size_t n = tui_sample_escape(in, out, size);
        CHECK(n == 9 && strlen(out) == want[size - 1], "size %zu: \"%s\" (%zu of %zu bytes)", size, out, strlen(out), n);
        CHECK(terminal_safe(out), "size %zu: \"%s\" is cut unsafely", size, out);
    }
}

static void test_utf8(void) {
    char out[64];
    tui_sample_utf8("ok \xff\xc3\xa9\xe2\x82", out, sizeof out);
    CHECK(strcmp(out, "ok \xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd") == 0, "invalid bytes become U+FFFD: \"%s\"", out);
    tui_sample_utf8("a\nb", out, sizeof out);
    CHECK(strcmp(out, "a\nb") == 0, "valid text, control characters included, is left to the JSON writer");
}

int main(void) {
    test_escape();
    test_escape_fits();
    test_utf8();
    return test_finish();
}
