// tests/unit/test_theme.c: the tests of console/tui/pure/theme.
// console/tui/pure/theme: the shipped themes load and set every role, the built-in default is
// dark.theme, each kind of malformed line is reported with file and line, --theme lookup,
// NO_COLOR, and random mutations of a valid file either load or fail cleanly.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "console/tui/pure/theme.h"
#include "tests/unit/test_util.h"

#ifndef PPTRAIN_SOURCE_DIR
#define PPTRAIN_SOURCE_DIR "."
#endif
#define THEMES_DIR PPTRAIN_SOURCE_DIR "/themes"

static const char *const SHIPPED[] = {"dark", "light", "high-contrast", "monochrome"};
enum { N_SHIPPED = sizeof SHIPPED / sizeof SHIPPED[0] };

static int style_eq(ThemeStyle a, ThemeStyle b) { return a.fg == b.fg && a.bg == b.bg && a.attrs == b.attrs; }

static int styles_eq(const Theme *a, const Theme *b) {
    for (int r = 0; r < THEME_ROLE_COUNT; r++)
        if (!style_eq(a->style[r], b->style[r])) return 0;
    return 1;
}

static int load_shipped(const char *name, Theme *t) {
    char path[512];
    Error err = {{0}};
    if (theme_find(name, THEMES_DIR, path, sizeof path, &err) != 0 || theme_load(path, t, &err) != 0) {
        fprintf(stderr, "  %s: %s\n", name, err.msg);
        return -1;
    }
    return 0;
}

static void test_shipped(void) {
    for (int i = 0; i < N_SHIPPED; i++) {
        Theme t;
        CHECK(load_shipped(SHIPPED[i], &t) == 0, "%s loads", SHIPPED[i]);
        CHECK(strcmp(t.name, SHIPPED[i]) == 0, "name %s", t.name);
        for (int r = 0; r < THEME_ROLE_COUNT; r++)
            CHECK(t.defined[r], "%s sets %s", SHIPPED[i], theme_role_name((ThemeRole)r));
    }
    Theme dark, builtin;
    theme_default(&builtin);
    CHECK(load_shipped("dark", &dark) == 0 && styles_eq(&dark, &builtin) && strcmp(builtin.name, "dark") == 0,
          "the built-in default is themes/dark.theme");
    Theme mono;
    load_shipped("monochrome", &mono);
    for (int r = 0; r < THEME_ROLE_COUNT; r++)
        CHECK(mono.style[r].fg == THEME_COLOR_DEFAULT && mono.style[r].bg == THEME_COLOR_DEFAULT, "monochrome %s has a color",
              theme_role_name((ThemeRole)r));
    CHECK(theme_role_name(THEME_ACTION_F) && strcmp(theme_role_name(THEME_ACTION_F), "action_F") == 0, "role names");
    CHECK(theme_role_name(THEME_ROLE_COUNT) == NULL, "no name past the last role");
}

// Writes text to a fresh temporary .theme file; path receives its name.
static void write_temp(const char *text, char *path, size_t size) {
    snprintf(path, size, "/tmp/pptrain-test-XXXXXX.theme");
    int fd = mkstemps(path, 6);
    CHECK(fd >= 0, "mkstemps");
    if (fd < 0) return;
    size_t n = strlen(text);
    CHECK(write(fd, text, n) == (ssize_t)n, "write %s", path);
    close(fd);
}

// The file fails to load with "<path>:<line>: ...<want>..." and leaves the default.
static void expect_bad(const char *text, int line, const char *want) {
    char path[64], prefix[96];
    write_temp(text, path, sizeof path);
    Theme t, def;
    Error err = {{0}};
    theme_default(&def);
    int rc = theme_load(path, &t, &err);
    snprintf(prefix, sizeof prefix, "%s:%d: ", path, line);
    CHECK(rc == -1, "loaded a bad theme (want '%s')", want);
    CHECK(strncmp(err.msg, prefix, strlen(prefix)) == 0 && strstr(err.msg, want), "message '%s', want '%s%s'", err.msg, prefix, want);
    CHECK(styles_eq(&t, &def), "a failed load leaves the default (%s)", want);
    unlink(path);
}

static void test_malformed(void) {
    expect_bad("text = default\n\ntxt = red\n", 3, "unknown role 'txt'");
    expect_bad("# a\n\n\n\n\n\ntitle = purpel bold\n", 7, "unknown color 'purpel'");
    expect_bad("selected = black on blu\n", 1, "unknown color 'blu'");
    expect_bad("title red\n", 1, "expected 'role = style'");
    expect_bad("= red\n", 1, "expected one role name before '='");
    expect_bad("title text = red\n", 1, "expected one role name before '='");
    expect_bad("text = default\ntitle =   # nothing\n", 2, "missing style for 'title'");
    expect_bad("selected = black on\n", 1, "missing background color after 'on'");
    expect_bad("title = 256\n", 1, "color index '256' out of range (0..255)");
    expect_bad("title = 99999999999999999999\n", 1, "color index '99999999999999999999' out of range");
    expect_bad("title = black on 300 bold\n", 1, "color index '300' out of range");
    expect_bad("title = -1\n", 1, "unknown color '-1'");
    expect_bad("text = default\ntitle = red\n\n\ntitle = blue\n", 5, "duplicate role 'title' (first set on line 2)");
    expect_bad("TITLE = red\ntitle = blue\n", 2, "duplicate role 'title'");
    expect_bad("title = red blink\n", 1, "unknown attribute 'blink'");
    expect_bad("title = bold red\n", 1, "unexpected 'red' (write 'fg on bg', then attributes)");
    expect_bad("title = red green\n", 1, "unexpected 'green'");
    expect_bad("title = bold on red\n", 1, "unexpected 'on'");
    expect_bad("title = \x1b[31m\n", 1, "unknown color '?[31m'");
    expect_bad("title = a b c d e f g h i j k l m n o p q r\n", 1, "too many words for 'title'");

    // NUL bytes and overlong lines, through the in-memory parser.
    Theme t;
    Error err = {{0}};
    CHECK(theme_parse("text = red\ntitle\0 = red\n", 24, "mem", "m", &t, &err) == -1 && strcmp(err.msg, "mem:2: NUL byte (not a text file?)") == 0,
          "NUL: %s", err.msg);
    char long_line[2100];
    memset(long_line, ' ', sizeof long_line);
    memcpy(long_line, "title = red", 11);
    CHECK(theme_parse(long_line, sizeof long_line, "mem", "m", &t, &err) == -1 && strstr(err.msg, "mem:1: line longer than"),
          "long line: %s", err.msg);
    CHECK(theme_load("/nonexistent/x.theme", &t, &err) == -1 && strstr(err.msg, "/nonexistent/x.theme: "), "missing file: %s", err.msg);
    CHECK(theme_load(THEMES_DIR, &t, &err) == -1 && strncmp(err.msg, THEMES_DIR ": ", strlen(THEMES_DIR) + 2) == 0, "directory: %s",
          err.msg);
    static char big[70 * 1024];
    memset(big, '#', sizeof big - 1);
    char path[64];
    write_temp(big, path, sizeof path);
    CHECK(theme_load(path, &t, &err) == -1 && strstr(err.msg, "larger than 64 KiB"), "huge file: %s", err.msg);
    unlink(path);
}

static void test_syntax(void) {
    Theme t, def;
    Error err = {{0}};
    theme_default(&def);
    const char *text = "# partial theme\r\n"
                       "TITLE\t=  Bright_Red on 17 BOLD underline   # inline comment\r\n"
                       "idle = dim\n"
                       "action_f = on blue\n"
                       "loss = brightcyan\n"
                       "border = bright-black on 255\n"
                       "   \t\n"
                       "text = default"; // no final newline
    CHECK(theme_parse(text, strlen(text), "mem", "mine", &t, &err) == 0, "valid file: %s", err.msg);
    CHECK(strcmp(t.name, "mine") == 0, "name");
    CHECK(style_eq(t.style[THEME_TITLE], (ThemeStyle){9, 17, THEME_ATTR_BOLD | THEME_ATTR_UNDERLINE}), "title");
    CHECK(style_eq(t.style[THEME_IDLE], (ThemeStyle){THEME_COLOR_DEFAULT, THEME_COLOR_DEFAULT, THEME_ATTR_DIM}), "idle");
    CHECK(style_eq(t.style[THEME_ACTION_F], (ThemeStyle){THEME_COLOR_DEFAULT, 4, 0}), "bg only");
    CHECK(t.style[THEME_LOSS].fg == 14 && t.style[THEME_BORDER].fg == 8 && t.style[THEME_BORDER].bg == 255, "bright names, 255");
    CHECK(t.defined[THEME_TEXT] && t.defined[THEME_TITLE] && !t.defined[THEME_SELECTED], "defined marks what the file set");
    CHECK(style_eq(t.style[THEME_SELECTED], def.style[THEME_SELECTED]), "roles left out keep the default");
    CHECK(theme_parse("", 0, "mem", "empty", &t, &err) == 0 && styles_eq(&t, &def), "an empty file is the default");
}

static void test_find(void) {
    char path[512];
    Error err = {{0}};
    CHECK(theme_find("light", THEMES_DIR, path, sizeof path, &err) == 0 && strcmp(path, THEMES_DIR "/light.theme") == 0,
          "light -> %s", path);
    CHECK(theme_find(THEMES_DIR "/monochrome.theme", "/elsewhere", path, sizeof path, &err) == 0 &&
              strcmp(path, THEMES_DIR "/monochrome.theme") == 0,
          "a path is taken as is");
    CHECK(theme_find("purple", THEMES_DIR, path, sizeof path, &err) == -1 &&
              strstr(err.msg, "theme 'purple' not found") && strstr(err.msg, "(have: dark, high-contrast, light, monochrome)"),
          "unknown name lists the themes: %s", err.msg);
    CHECK(theme_find("nope.theme", THEMES_DIR, path, sizeof path, &err) == -1 && strstr(err.msg, "nope.theme"), "missing path: %s",
          err.msg);
    CHECK(theme_find("", THEMES_DIR, path, sizeof path, &err) == -1, "empty name");
    CHECK(theme_find("dark", THEMES_DIR, path, 8, &err) == -1 && strstr(err.msg, "too long"), "small buffer: %s", err.msg);
}

static void test_no_color(void) {
    CHECK(!theme_no_color_requested(NULL) && !theme_no_color_requested("") && theme_no_color_requested("1"), "NO_COLOR values");
    Theme mono;
    load_shipped("monochrome", &mono);
    // Whatever the theme, NO_COLOR draws it as monochrome.theme (which also holds the
    // built-in table of monochrome attributes to the file).
    for (int i = 0; i < N_SHIPPED; i++) {
        Theme t;
        load_shipped(SHIPPED[i], &t);
        theme_apply_no_color(&t);
        CHECK(styles_eq(&t, &mono) && strcmp(t.name, SHIPPED[i]) == 0, "%s under NO_COLOR is monochrome", SHIPPED[i]);
    }
    // Roles drawn side by side or over each other, which must differ without color.
    static const ThemeRole APART[][2] = {
        {THEME_SELECTED, THEME_TEXT},     {THEME_KEYBAR_KEY, THEME_KEYBAR_LABEL}, {THEME_TITLE, THEME_TEXT},
        {THEME_ERROR, THEME_TEXT},        {THEME_WARNING, THEME_TEXT},             {THEME_DIM, THEME_TEXT},
        {THEME_ACTION_F, THEME_IDLE},     {THEME_ACTION_COMM, THEME_IDLE},         {THEME_PROGRESS, THEME_TEXT},
        {THEME_BAR_BUSY, THEME_BAR_IDLE}, {THEME_LOSS, THEME_LOSS_EMA},            {THEME_INPUT, THEME_TEXT},
        {THEME_ERROR, THEME_WARNING},     {THEME_LOSS, THEME_LOSS_COMPARE},        {THEME_ACTION_COMM, THEME_ACTION_W},
    };
    for (size_t k = 0; k < sizeof APART / sizeof APART[0]; k++)
        CHECK(mono.style[APART[k][0]].attrs != mono.style[APART[k][1]].attrs, "without color %s looks like %s",
              theme_role_name(APART[k][0]), theme_role_name(APART[k][1]));
}

// ---- fuzz -------------------------------------------------------------------------------

static unsigned long long rng_next(unsigned long long *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

// One random edit of buf[0..*len): flip, insert or delete a byte, splice in a theme word,
// duplicate or cut a stretch. Keeps *len <= cap.
static void mutate(char *buf, size_t *len, size_t cap, unsigned long long *rng) {
    static const char *const WORDS[] = {"=", " on ", "#", "\n", "bold", "256", "bright-", "title", "\0", "\r", " ", "99999"};
    size_t at = *len ? rng_next(rng) % (*len + 1) : 0;
    switch (rng_next(rng) % 5) {
    case 0:
        if (at < *len) buf[at] = (char)rng_next(rng);
        break;
    case 1:
        if (at < *len) memmove(buf + at, buf + at + 1, *len - at - 1), (*len)--;
        break;
    case 2: {
        const char *w = WORDS[rng_next(rng) % (sizeof WORDS / sizeof WORDS[0])];
        size_t n = *w ? strlen(w) : 1;
        if (*len + n > cap) break;
        memmove(buf + at + n, buf + at, *len - at);
        memcpy(buf + at, w, n);
        *len += n;
        break;
    }
    case 3: { // duplicate a stretch (repeats roles, lines)
        size_t n = rng_next(rng) % 64;
        if (at + n > *len || *len + n > cap) break;
        memmove(buf + at + n, buf + at, *len - at);
        *len += n;
        break;
    }
    default:
        *len = at; // truncate
    }
}

static void test_fuzz(void) {
    FILE *f = fopen(THEMES_DIR "/dark.theme", "rb");
    CHECK(f != NULL, "open dark.theme");
    if (!f) return;
    char base[8192], buf[16384];
    size_t base_len = fread(base, 1, sizeof base, f);
    fclose(f);
    unsigned long long rng = 0x9e3779b97f4a7c15ull;
    long loaded = 0, failed = 0, bad = 0;
    for (int iter = 0; iter < 20000; iter++) {
        size_t len = base_len;
        memcpy(buf, base, len);
        int edits = 1 + (int)(rng_next(&rng) % 8);
        for (int e = 0; e < edits; e++) mutate(buf, &len, sizeof buf, &rng);
        Theme t;
        Error err = {{0}};
        int rc = theme_parse(buf, len, "fuzz", "fuzz", &t, &err);
        if (rc == 0) {
            loaded++;
            for (int r = 0; r < THEME_ROLE_COUNT; r++)
                if (t.style[r].fg < -1 || t.style[r].fg > 255 || t.style[r].bg < -1 || t.style[r].bg > 255 || t.style[r].attrs > 15)
                    bad++;
        } else {
            failed++;
            int line = 0;
            if (rc != -1 || sscanf(err.msg, "fuzz:%d: ", &line) != 1 || line < 1 || strchr(err.msg, '\n')) bad++;
        }
    }
    CHECK(bad == 0, "fuzz: %ld malformed results", bad);
    CHECK(loaded > 0 && failed > 0, "fuzz exercised both outcomes (%ld loaded, %ld failed)", loaded, failed);
}

int main(void) {
    test_shipped();
    test_malformed();
    test_syntax();
    test_find();
    test_no_color();
    test_fuzz();
    return test_finish();
}
