// console/tui/pure/theme: the theme file parser, the built-in default, --theme lookup and NO_COLOR.
// The format and the error contract are in theme.h.
#include "console/tui/pure/theme.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

// A theme file is a page of text; anything bigger is not one (and not worth reading).
enum { THEME_FILE_MAX = 64 * 1024, LINE_MAX_BYTES = 1024, WORDS_MAX = 16, QUOTE_MAX = 40 };
#define BLANKS " \t\r\v\f" // '\r' too: a file saved with CRLF line ends reads the same

static const char *const ROLE_NAMES[THEME_ROLE_COUNT] = {
    "background", "text",     "dim",      "title",       "border",       "header",   "progress",
    "bar_busy",   "bar_idle", "bar_comm", "action_F",    "action_B",     "action_I", "action_W",
    "action_comm", "idle",    "loss",     "loss_ema",    "loss_compare", "loss_val", "selected", "input",
    "warning",    "error",    "keybar_key", "keybar_label",
};

static const char *const COLOR_NAMES[8] = {"black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"};

static const struct {
    const char *name;
    unsigned bit;
} ATTRS[] = {{"bold", THEME_ATTR_BOLD}, {"dim", THEME_ATTR_DIM}, {"reverse", THEME_ATTR_REVERSE}, {"underline", THEME_ATTR_UNDERLINE}};

enum { D = THEME_COLOR_DEFAULT, BLACK = 0, RED, GREEN, YELLOW, BLUE, MAGENTA, CYAN, WHITE };
enum { BOLD = THEME_ATTR_BOLD, DIM = THEME_ATTR_DIM, REV = THEME_ATTR_REVERSE, UL = THEME_ATTR_UNDERLINE };

// themes/dark.theme, line for line (tests/unit/test_theme.c holds the two equal). Basic colors
// plus bold only, so it looks the same on an 8-color terminal.
static const ThemeStyle DARK[THEME_ROLE_COUNT] = {
    [THEME_BACKGROUND] = {D, D, 0},          [THEME_TEXT] = {D, D, 0},
    [THEME_DIM] = {D, D, DIM},               [THEME_TITLE] = {CYAN, D, BOLD},
    [THEME_BORDER] = {BLUE, D, 0},           [THEME_HEADER] = {D, D, BOLD},
    [THEME_PROGRESS] = {BLACK, CYAN, 0},     [THEME_BAR_BUSY] = {GREEN, D, 0},
    [THEME_BAR_IDLE] = {D, D, DIM},          [THEME_BAR_COMM] = {MAGENTA, D, 0},
    [THEME_ACTION_F] = {WHITE, BLUE, BOLD},  [THEME_ACTION_B] = {BLACK, GREEN, 0},
    [THEME_ACTION_I] = {BLACK, CYAN, 0},     [THEME_ACTION_W] = {BLACK, YELLOW, 0},
    [THEME_ACTION_COMM] = {BLACK, MAGENTA, 0}, [THEME_IDLE] = {D, D, DIM},
    [THEME_LOSS] = {YELLOW, D, 0},           [THEME_LOSS_EMA] = {RED, D, BOLD},
    [THEME_LOSS_COMPARE] = {CYAN, D, 0},     [THEME_LOSS_VAL] = {GREEN, D, BOLD},
    [THEME_SELECTED] = {BLACK, CYAN, 0},
    [THEME_INPUT] = {D, D, UL},              [THEME_WARNING] = {YELLOW, D, BOLD},
    [THEME_ERROR] = {RED, D, BOLD},          [THEME_KEYBAR_KEY] = {D, D, BOLD},
    [THEME_KEYBAR_LABEL] = {BLACK, CYAN, 0},
};

// What each role needs to stay recognisable without color: themes/monochrome.theme's
// attributes (a test holds them equal). Timeline blocks are reversed so work stands out
// from the bubble.
static const unsigned MONO_ATTRS[THEME_ROLE_COUNT] = {
    [THEME_DIM] = DIM,          [THEME_TITLE] = BOLD,        [THEME_HEADER] = BOLD,
    [THEME_PROGRESS] = REV,     [THEME_BAR_BUSY] = BOLD,     [THEME_BAR_IDLE] = DIM,
    [THEME_ACTION_F] = REV,     [THEME_ACTION_B] = REV,      [THEME_ACTION_I] = REV,
    [THEME_ACTION_W] = REV,     [THEME_ACTION_COMM] = UL,    [THEME_IDLE] = DIM,
    [THEME_LOSS] = BOLD,        [THEME_LOSS_COMPARE] = DIM,  [THEME_LOSS_VAL] = UL,       [THEME_SELECTED] = REV,
    [THEME_INPUT] = UL,         [THEME_WARNING] = BOLD,      [THEME_ERROR] = BOLD | UL,
    [THEME_KEYBAR_KEY] = BOLD,  [THEME_KEYBAR_LABEL] = REV,
};

const char *theme_role_name(ThemeRole role) {
    return (int)role >= 0 && role < THEME_ROLE_COUNT ? ROLE_NAMES[role] : NULL;
}

void theme_default(Theme *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "dark");
    for (int r = 0; r < THEME_ROLE_COUNT; r++) {
        out->style[r] = DARK[r];
        out->defined[r] = true;
    }
}

bool theme_no_color_requested(const char *no_color_env) { return no_color_env && no_color_env[0]; }

void theme_apply_no_color(Theme *t) {
    for (int r = 0; r < THEME_ROLE_COUNT; r++) {
        t->style[r].fg = t->style[r].bg = THEME_COLOR_DEFAULT;
        t->style[r].attrs = MONO_ATTRS[r];
    }
}

// ---- parsing ----------------------------------------------------------------------------

// Where a parse is: for messages ("source:line: ...") and the roles already set.
typedef struct {
    const char *source;
    int line;
    int first_line[THEME_ROLE_COUNT]; // line that set each role, 0 = not yet
    Error *err;
} Parse;

// A word as it may appear in a one-line message: at most QUOTE_MAX characters, anything
// unprintable (binary junk, escape sequences) shown as '?'.
static const char *quote(const char *word, char *buf, size_t size) {
    size_t n = 0;
    for (; word[n] && n < QUOTE_MAX && n + 4 < size; n++)
        buf[n] = word[n] >= 0x20 && word[n] < 0x7f ? word[n] : '?';
    buf[n] = '\0';
    if (word[n]) snprintf(buf + n, size - n, "...");
    return buf;
}

// "source:line: <what> '<word>'<after>"; returns -1.
static int fail_word(Parse *p, const char *what, const char *word, const char *after) {
    char q[QUOTE_MAX + 8];
    error_set(p->err, "%s:%d: %s '%s'%s", p->source, p->line, what, quote(word, q, sizeof q), after);
    return -1;
}

static int find_role(const char *word) {
    for (int r = 0; r < THEME_ROLE_COUNT; r++)
        if (strcasecmp(word, ROLE_NAMES[r]) == 0) return r;
    return -1;
}

static unsigned find_attr(const char *word) {
    for (size_t i = 0; i < sizeof ATTRS / sizeof ATTRS[0]; i++)
        if (strcasecmp(word, ATTRS[i].name) == 0) return ATTRS[i].bit;
    return 0;
}

// "red" -> 1, "bright-red" / "bright_red" / "brightred" -> 9, "default" -> -1; -2 if none.
static int find_named_color(const char *word) {
    if (strcasecmp(word, "default") == 0) return THEME_COLOR_DEFAULT;
    int base = 0;
    if (strncasecmp(word, "bright", 6) == 0) {
        word += 6;
        if (*word == '-' || *word == '_') word++;
        base = 8;
    }
    for (int c = 0; c < 8; c++)
        if (strcasecmp(word, COLOR_NAMES[c]) == 0) return base + c;
    return -2;
}

static bool all_digits(const char *w) {
    if (!*w) return false;
    for (; *w; w++)
        if (!isdigit((unsigned char)*w)) return false;
    return true;
}

// A color word into *out; 1 if it is one, 0 if it is not a color at all, -1 for a number
// out of range (error set).
static int parse_color(Parse *p, const char *word, short *out) {
    if (all_digits(word)) {
        // Four or more digits cannot be <= 255; checking the length first keeps strtol
        // away from overflow.
        long v = strlen(word) <= 3 ? strtol(word, NULL, 10) : 256;
        if (v > 255) return fail_word(p, "color index", word, " out of range (0..255)");
        *out = (short)v;
        return 1;
    }
    int c = find_named_color(word);
    if (c == -2) return 0;
    *out = (short)c;
    return 1;
}

// "[fg] [on bg] [attribute...]" into *st.
static int parse_style(Parse *p, char **words, int n, ThemeStyle *st) {
    *st = (ThemeStyle){THEME_COLOR_DEFAULT, THEME_COLOR_DEFAULT, 0};
    int i = 0, rc;
    if (i < n && strcasecmp(words[i], "on") != 0 && !find_attr(words[i])) {
        if ((rc = parse_color(p, words[i], &st->fg)) <= 0) return rc < 0 ? -1 : fail_word(p, "unknown color", words[i], "");
        i++;
    }
    if (i < n && strcasecmp(words[i], "on") == 0) {
        if (++i == n) return fail_word(p, "missing background color after", "on", "");
        if ((rc = parse_color(p, words[i], &st->bg)) <= 0) return rc < 0 ? -1 : fail_word(p, "unknown color", words[i], "");
        i++;
    }
    for (; i < n; i++) {
        unsigned bit = find_attr(words[i]);
        short ignored;
        if (bit) st->attrs |= bit;
        else if (strcasecmp(words[i], "on") == 0 || parse_color(p, words[i], &ignored) != 0)
            return fail_word(p, "unexpected", words[i], " (write 'fg on bg', then attributes)");
        else return fail_word(p, "unknown attribute", words[i], "");
    }
    return 0;
}

// Splits s in place at blanks; returns the word count, or -1 past WORDS_MAX.
static int split_words(char *s, char **words) {
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(s, BLANKS, &save); tok; tok = strtok_r(NULL, BLANKS, &save)) {
        if (n == WORDS_MAX) return -1;
        words[n++] = tok;
    }
    return n;
}

// One line (NUL-terminated, no newline, comment removed) into the theme.
static int parse_line(Parse *p, char *line, Theme *t) {
    char *eq = strchr(line, '=');
    char *left[WORDS_MAX], *right[WORDS_MAX];
    if (!eq) {
        if (split_words(line, left) == 0) return 0; // blank or comment-only
        error_set(p->err, "%s:%d: expected 'role = style'", p->source, p->line);
        return -1;
    }
    *eq = '\0';
    int nl = split_words(line, left), nr = split_words(eq + 1, right);
    if (nl != 1) {
        error_set(p->err, "%s:%d: expected one role name before '='", p->source, p->line);
        return -1;
    }
    int role = find_role(left[0]);
    if (role < 0) return fail_word(p, "unknown role", left[0], "");
    if (nr <= 0) {
        error_set(p->err, "%s:%d: %s for '%s'", p->source, p->line, nr == 0 ? "missing style" : "too many words", ROLE_NAMES[role]);
        return -1;
    }
    if (p->first_line[role]) {
        error_set(p->err, "%s:%d: duplicate role '%s' (first set on line %d)", p->source, p->line, ROLE_NAMES[role],
                  p->first_line[role]);
        return -1;
    }
    if (parse_style(p, right, nr, &t->style[role]) < 0) return -1;
    p->first_line[role] = p->line;
    t->defined[role] = true;
    return 0;
}

// Copies the next line of text[*pos..len) into buf (without the newline, '#' comment
// cut) and advances *pos. Returns -1 with the error set for NUL bytes or an overlong line.
static int next_line(Parse *p, const char *text, size_t len, size_t *pos, char *buf) {
    const char *start = text + *pos, *nl = memchr(start, '\n', len - *pos);
    size_t n = nl ? (size_t)(nl - start) : len - *pos;
    *pos += n + (nl ? 1 : 0);
    if (n >= LINE_MAX_BYTES) {
        error_set(p->err, "%s:%d: line longer than %d bytes", p->source, p->line, LINE_MAX_BYTES - 1);
        return -1;
    }
    if (memchr(start, '\0', n)) {
        error_set(p->err, "%s:%d: NUL byte (not a text file?)", p->source, p->line);
        return -1;
    }
    memcpy(buf, start, n);
    buf[n] = '\0';
    char *hash = strchr(buf, '#');
    if (hash) *hash = '\0';
    return 0;
}

int theme_parse(const char *text, size_t len, const char *source, const char *name, Theme *out, Error *err) {
    Theme t;
    theme_default(&t);
    memset(t.defined, 0, sizeof t.defined);
    snprintf(t.name, sizeof t.name, "%s", name ? name : "");
    Parse p = {.source = source, .err = err};
    char buf[LINE_MAX_BYTES];
    for (size_t pos = 0; pos < len;) {
        p.line++;
        if (next_line(&p, text, len, &pos, buf) < 0 || parse_line(&p, buf, &t) < 0) {
            theme_default(out);
            return -1;
        }
    }
    *out = t;
    return 0;
}

// ---- files ------------------------------------------------------------------------------

// "themes/light.theme" -> "light".
static void name_from_path(const char *path, char *name, size_t size) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t n = strlen(base);
    if (n > 6 && strcmp(base + n - 6, ".theme") == 0) n -= 6;
    snprintf(name, size, "%.*s", (int)n, base);
}

// The whole file into a new buffer (caller frees), or NULL with the error set.
static char *read_small_file(const char *path, size_t *len, Error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        error_set(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = xmalloc(THEME_FILE_MAX + 1);
    *len = fread(buf, 1, THEME_FILE_MAX + 1, f);
    int read_errno = ferror(f) ? errno : 0; // e.g. EISDIR: fopen opens a directory
    fclose(f);
    if (read_errno || *len > THEME_FILE_MAX) {
        if (read_errno) error_set(err, "%s: %s", path, strerror(read_errno));
        else error_set(err, "%s: larger than 64 KiB, not a theme file", path);
        free(buf);
        return NULL;
    }
    return buf;
}

int theme_load(const char *path, Theme *out, Error *err) {
    size_t len;
    char *text = read_small_file(path, &len, err);
    if (!text) {
        theme_default(out);
        return -1;
    }
    char name[64];
    name_from_path(path, name, sizeof name);
    int rc = theme_parse(text, len, path, name, out, err);
    free(text);
    return rc;
}

static bool is_path(const char *s) {
    size_t n = strlen(s);
    return strchr(s, '/') || (n >= 6 && strcmp(s + n - 6, ".theme") == 0);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// "dark, high-contrast, light, monochrome": the theme names in dir, sorted.
static void list_themes(const char *dir, char *out, size_t size) {
    out[0] = '\0';
    DIR *d = opendir(dir);
    if (!d) return;
    char *names[64];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 64;)
        if (is_path(e->d_name) && e->d_name[0] != '.')
            names[n++] = check_alloc(strdup(e->d_name), strlen(e->d_name) + 1, __FILE__, __LINE__);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    for (int i = 0; i < n; i++) {
        char name[64];
        name_from_path(names[i], name, sizeof name);
        size_t used = strlen(out);
        snprintf(out + used, size - used, "%s%s", i ? ", " : "", name);
        free(names[i]);
    }
}

int theme_find(const char *name_or_path, const char *themes_dir, char *path, size_t path_size, Error *err) {
    if (!name_or_path[0]) {
        error_set(err, "--theme: empty theme name");
        return -1;
    }
    int n = is_path(name_or_path) ? snprintf(path, path_size, "%s", name_or_path)
                                  : snprintf(path, path_size, "%s/%s.theme", themes_dir, name_or_path);
    if (n < 0 || (size_t)n >= path_size) {
        error_set(err, "--theme: path too long: %.100s", name_or_path);
        return -1;
    }
    struct stat st;
    int found = stat(path, &st);
    if (found == 0 && S_ISREG(st.st_mode)) return 0;
    if (is_path(name_or_path)) {
        error_set(err, "--theme: %s: %s", path, found == 0 ? "not a regular file" : strerror(errno));
        return -1;
    }
    char have[400];
    list_themes(themes_dir, have, sizeof have);
    error_set(err, "--theme: theme '%.60s' not found in %.200s (have: %s)", name_or_path, themes_dir, have[0] ? have : "none");
    return -1;
}
