// console/tui/tui_draw: painting primitives (see tui_draw.h). UI thread only.
#define NCURSES_WIDECHAR 1
#include "console/tui/tui_draw.h"

#include "console/tui/pure/tui_text.h"

#include <curses.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

static struct {
    bool utf8, color;
    attr_t attr[THEME_ROLE_COUNT];
    short pair[THEME_ROLE_COUNT];
} paint;

// ---- theme roles ----------------------------------------------------------------------------

// A theme color on this terminal: bright colors on 8-color terminals become their base color
// in bold; 256-color indices the nearest of the eight.
static short fit_color(short c, bool *bold) {
    if (c < 0 || c < COLORS) return c;
    if (c < 16) {
        *bold = true;
        return (short)(c - 8);
    }
    if (c >= 232) return c < 244 ? COLOR_BLACK : COLOR_WHITE;
    const int k = c - 16, r = k / 36, g = k / 6 % 6, b = k % 6;
    return (short)((r >= 3 ? 1 : 0) | (g >= 3 ? 2 : 0) | (b >= 3 ? 4 : 0));
}

void tui_draw_setup(const Theme *theme, bool utf8, bool no_color) {
    paint.utf8 = utf8;
    paint.color = !no_color && has_colors();
    if (paint.color) {
        start_color();
        use_default_colors();
    }
    for (int r = 0; r < THEME_ROLE_COUNT; r++) {
        const ThemeStyle *st = &theme->style[r];
        attr_t a = A_NORMAL;
        if (st->attrs & THEME_ATTR_BOLD) a |= A_BOLD;
        if (st->attrs & THEME_ATTR_DIM) a |= A_DIM;
        if (st->attrs & THEME_ATTR_REVERSE) a |= A_REVERSE;
        if (st->attrs & THEME_ATTR_UNDERLINE) a |= A_UNDERLINE;
        paint.pair[r] = 0;
        if (paint.color && COLOR_PAIRS > THEME_ROLE_COUNT) {
            bool bold = false;
            const short fg = fit_color(st->fg, &bold), bg = fit_color(st->bg, &(bool){false});
            init_pair((short)(r + 1), fg, bg);
            paint.pair[r] = (short)(r + 1);
            if (bold) a |= A_BOLD;
        }
        paint.attr[r] = a;
    }
}

void tui_set_role(ThemeRole role) { attr_set(paint.attr[role], paint.pair[role], NULL); }

void tui_fill(Rect r, ThemeRole role) {
    tui_set_role(role);
    for (int y = r.y; y < r.y + r.h; y++) mvhline(y, r.x, ' ', r.w);
}

// ---- text -----------------------------------------------------------------------------------

int tui_text(int y, int x, int w, ThemeRole role, const char *s) {
    if (w <= 0 || !s) return 0;
    wchar_t buf[512];
    mbstate_t st;
    memset(&st, 0, sizeof st);
    const char *p = s;
    size_t n = mbsrtowcs(buf, &p, sizeof buf / sizeof buf[0] - 1, &st);
    if (n == (size_t)-1) {   // not valid in this locale: show the bytes as '?'
        n = 0;
        for (const char *q = s; *q && n < sizeof buf / sizeof buf[0] - 1; q++)
            buf[n++] = (unsigned char)*q < 128 ? (wchar_t)*q : L'?';
    }
    buf[n] = L'\0';
    int cells = 0;
    size_t k = 0;
    for (; k < n; k++) {
        int cw = wcwidth(buf[k]);
        if (cw < 0) buf[k] = L'?', cw = 1;
        if (cells + cw > w) break;
        cells += cw;
    }
    tui_set_role(role);
    mvaddnwstr(y, x, buf, (int)k);
    return cells;
}

int tui_textf(int y, int x, int w, ThemeRole role, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return tui_text_words(y, x, w, role, buf);
}

static int text_cells(const char *s) {
    wchar_t buf[512];
    mbstate_t st;
    memset(&st, 0, sizeof st);
    const char *p = s;
    const size_t n = mbsrtowcs(buf, &p, sizeof buf / sizeof buf[0] - 1, &st);
    if (n == (size_t)-1) return (int)strlen(s);
    const int w = wcswidth(buf, n);
    return w < 0 ? (int)n : w;
}

int tui_text_right(int y, int x, int w, ThemeRole role, const char *s) {
    const int cells = text_cells(s);
    return cells >= w ? tui_text(y, x, w, role, s) : tui_text(y, x + w - cells, cells, role, s);
}

int tui_text_words(int y, int x, int w, ThemeRole role, const char *s) {
    if (w <= 0 || !s) return 0;
    if (text_cells(s) <= w) return tui_text(y, x, w, role, s);
    const char *ellipsis = paint.utf8 ? "\u2026" : "...";
    const int ell_w = paint.utf8 ? 1 : 3;
    const int keep = tui_words_fit(s, w, ell_w);
    char buf[1024];
    if (keep > 0) {
        snprintf(buf, sizeof buf, "%.*s%s", keep, s, ellipsis);
        return tui_text(y, x, w, role, buf);
    }
    // Not one word fits: a name (a file's, a schedule's) keeps its end, which tells it apart.
    if (w <= ell_w) return 0;
    const int len = (int)strlen(s);
    int from = len;
    while (from > 0 && tui_text_width(s + from - 1) <= w - ell_w) from--;
    snprintf(buf, sizeof buf, "%s%s", ellipsis, s + from);
    return tui_text(y, x, w, role, buf);
}

// One cell: the wide character when UTF-8 is available, else the ASCII / ACS fallback.
static void tui_cell(int y, int x, ThemeRole role, wchar_t wide, chtype narrow) {
    tui_set_role(role);
    if (paint.utf8 && wide) {
        cchar_t c;
        const wchar_t s[2] = {wide, L'\0'};
        setcchar(&c, s, paint.attr[role], paint.pair[role], NULL);
        mvadd_wch(y, x, &c);
    } else {
        mvaddch(y, x, narrow);
    }
}

// ---- frames -----------------------------------------------------------------------------------

void tui_panel(Rect r, const char *title, ThemeRole title_role) {
    if (r.w < 2 || r.h < 2) return;
    tui_set_role(THEME_BORDER);
    mvhline(r.y, r.x + 1, ACS_HLINE, r.w - 2);
    mvhline(r.y + r.h - 1, r.x + 1, ACS_HLINE, r.w - 2);
    mvvline(r.y + 1, r.x, ACS_VLINE, r.h - 2);
    mvvline(r.y + 1, r.x + r.w - 1, ACS_VLINE, r.h - 2);
    mvaddch(r.y, r.x, ACS_ULCORNER);
    mvaddch(r.y, r.x + r.w - 1, ACS_URCORNER);
    mvaddch(r.y + r.h - 1, r.x, ACS_LLCORNER);
    mvaddch(r.y + r.h - 1, r.x + r.w - 1, ACS_LRCORNER);
    if (title && title[0] && r.w > 7) {
        tui_text(r.y, r.x + 2, 1, title_role, " ");
        const int w = tui_text_words(r.y, r.x + 3, r.w - 6, title_role, title);
        if (w) tui_text(r.y, r.x + 3 + w, 1, title_role, " ");
    }
}

void tui_keybar(const Rect *bar, const KeyBarItem *items, int n) {
    KeyBarSlot slots[32];
    if (n > 32) n = 32;
    tui_fill(*bar, THEME_KEYBAR_LABEL);
    layout_keybar(bar, items, n, slots);
    for (int i = 0; i < n; i++) {
        if (!slots[i].key_w) continue;   // off the bar (still in F1's help)
        tui_text(bar->y, slots[i].x, slots[i].key_w, THEME_KEYBAR_KEY, items[i].key);
        tui_text(bar->y, slots[i].x + slots[i].key_w, slots[i].label_w, THEME_KEYBAR_LABEL, items[i].label);
        // The gap after an item belongs to the key style, as in htop.
        const int gap = slots[i].x + slots[i].key_w + slots[i].label_w;
        if (gap < bar->x + bar->w) tui_text(bar->y, gap, 1, THEME_KEYBAR_KEY, " ");
    }
}

void tui_too_small(const Rect *notice, int need_w, int need_h) {
    char lines[8][LAYOUT_NOTICE_LINE];
    const int cols = getmaxx(stdscr);
    const int n = layout_too_small_lines(cols, need_w, need_h, lines, 8);
    for (int i = 0; i < n && i < notice->h; i++) {
        const int len = (int)strlen(lines[i]);
        tui_text(notice->y + i, notice->x + (notice->w - len) / 2, len, THEME_WARNING, lines[i]);
    }
}

int tui_dialog(int cols, int rows, const char *title, const char *const *lines, int n, int first) {
    int w = (int)strlen(title) + 6;
    for (int i = 0; i < n; i++) w = text_cells(lines[i]) + 4 > w ? text_cells(lines[i]) + 4 : w;
    w = w > cols ? cols : w;
    const int h = n + 2 > rows ? rows : n + 2;
    const Rect r = {(cols - w) / 2, (rows - h) / 2, w, h};
    tui_fill(r, THEME_TEXT);
    tui_panel(r, title, THEME_TITLE);
    int shown = 0;
    for (int i = first; i < n && shown < h - 2; i++, shown++)
        tui_text_words(r.y + 1 + shown, r.x + 2, r.w - 4, THEME_TEXT, lines[i]);
    return shown;
}

// ---- widgets ----------------------------------------------------------------------------------

void tui_util_bar(int y, int x, int w, double busy, double transfer, double wait) {
    int nb, nc, ni;
    tui_bar_split(busy, transfer, wait, w, &nb, &nc, &ni);
    for (int k = 0; k < w; k++) {
        if (k < nb) tui_cell(y, x + k, THEME_BAR_BUSY, L'\u2588', '#');
        else if (k < nb + nc) tui_cell(y, x + k, THEME_BAR_COMM, L'\u2592', '=');
        else tui_cell(y, x + k, THEME_BAR_IDLE, L'\u00b7', '.');
    }
}

void tui_progress(int y, int x, int w, double frac, const char *text) {
    if (w <= 0) return;
    frac = isfinite(frac) ? (frac < 0 ? 0 : frac > 1 ? 1 : frac) : 0;
    const int fill = (int)lround(frac * w);
    const int len = (int)strlen(text), at = len < w ? (w - len) / 2 : 0;
    for (int k = 0; k < w; k++) {
        const char c = k >= at && k - at < len ? text[k - at] : (k < fill && !paint.color ? '=' : ' ');
        tui_set_role(k < fill ? THEME_PROGRESS : THEME_DIM);
        mvaddch(y, x + k, (chtype)(unsigned char)c);
    }
}

static ThemeRole cell_role(TuiCellKind k) {
    static const ThemeRole ROLES[TUI_CELL_KINDS] = {THEME_IDLE, THEME_ACTION_F, THEME_ACTION_B,
                                                    THEME_ACTION_I, THEME_ACTION_W, THEME_ACTION_COMM};
    return ROLES[k];
}

// One lane. One row: the blocks' letters with each microbatch inline ("F12FFF"). Two rows
// or more: the letters, then the labels under the blocks ("F12"), then the blocks' colors.
static void gantt_lane(int y, int x, int w, int h, const TuiEvent *ev, int n, double t0, double span) {
    if (w <= 0) return;
    TuiGanttCell *cells = xmalloc(sizeof *cells * (size_t)w);
    char *text = xmalloc((size_t)w + 1), *labels = xmalloc((size_t)w + 1);
    tui_gantt_raster(ev, n, t0, span > 0 ? span / w : 1.0, w, cells);
    if (h == 1) tui_gantt_text(cells, w, text);
    else {
        for (int k = 0; k < w; k++) text[k] = tui_gantt_cell_char(&cells[k]);
        tui_gantt_labels(cells, w, labels);
    }
    for (int k = 0; k < w; k++) {
        const TuiCellKind kind = cells[k].kind;
        const ThemeRole role = cell_role(kind);
        for (int row = 0; row < h; row++) {
            const char c = row == 0 ? text[k] : row == 1 ? labels[k] : ' ';
            if (row == 0 && kind == TUI_CELL_IDLE) tui_cell(y, x + k, role, L'\u00b7', '.');
            else if (row == 1 && c != ' ') tui_text(y + row, x + k, 1, THEME_TEXT, (char[]){c, 0});
            else {
                tui_set_role(kind == TUI_CELL_IDLE ? THEME_BACKGROUND : role);
                mvaddch(y + row, x + k, (chtype)(unsigned char)c);
            }
        }
    }
    free(labels);
    free(text);
    free(cells);
}

int tui_gantt_label_w(int n_ranks, int width) {
    int digits = 1;
    for (int r = n_ranks - 1; r >= 10; r /= 10) digits++;
    const int w = 1 + digits + 1;   // "r12 "
    return width >= 3 * w ? w : 0;
}

void tui_gantt(Rect lanes, int lane_h, int first, int n_lanes, int selected, const TuiGanttData *d) {
    const int label_w = tui_gantt_label_w(d->n_ranks, lanes.w);
    for (int k = 0; k < n_lanes; k++) {
        const int r = first + k, y = lanes.y + k * lane_h;
        if (y + lane_h > lanes.y + lanes.h) break;
        if (label_w) tui_textf(y, lanes.x, label_w, r == selected ? THEME_SELECTED : THEME_DIM, "r%-*d", label_w - 1, r);
        gantt_lane(y, lanes.x + label_w, lanes.w - label_w, lane_h, d->ev + d->ev_off[r], d->ev_off[r + 1] - d->ev_off[r],
                   d->t0, d->span);
    }
}

void tui_gantt_axis(int y, int x, int w, int label_w, double t0, double span, const char *unit) {
    tui_set_role(THEME_DIM);
    mvhline(y, x, ' ', w);
    const int aw = w - label_w;
    if (aw < 8) return;
    char left[32], right[48], mid[32];
    snprintf(left, sizeof left, "%.4g", t0);
    snprintf(right, sizeof right, "%.4g %s", t0 + span, unit);
    snprintf(mid, sizeof mid, "%.4g", t0 + span / 2);
    const int lw = (int)strlen(left), rw = (int)strlen(right), mw = (int)strlen(mid);
    if (lw + rw + 1 > aw) return;
    tui_text(y, x + label_w, lw, THEME_DIM, left);
    tui_text_right(y, x + label_w + lw, aw - lw, THEME_DIM, right);
    const int at = x + label_w + aw / 2 - mw / 2;
    if (at > x + label_w + lw + 1 && at + mw < x + w - rw - 1) tui_text(y, at, mw, THEME_DIM, mid);
}

void tui_plot(Rect area, const TuiPlotSeries *series, int n_series, float lo, float hi) {
    if (area.w <= 0 || area.h <= 0) return;
    const size_t cells = (size_t)area.w * (size_t)area.h;
    uint8_t *grid = xcalloc(cells * (size_t)n_series + 1, 1);
    for (int s = 0; s < n_series; s++)
        tui_braille_plot(series[s].y, series[s].n, lo, hi, area.w, area.h, grid + cells * (size_t)s);
    // Braille when UTF-8 and colors tell the series apart (or there is one); else each
    // series' own character, the later series on top.
    const bool braille = paint.utf8 && (paint.color || n_series == 1);
    for (size_t c = 0; c < cells; c++) {
        const int y = area.y + (int)(c / (size_t)area.w), x = area.x + (int)(c % (size_t)area.w);
        uint8_t bits = 0;
        int top = -1;
        for (int s = 0; s < n_series; s++) {
            const uint8_t b = grid[cells * (size_t)s + c];
            bits |= b;
            if (b) top = s;
        }
        if (top < 0) continue;
        if (braille) tui_cell(y, x, series[top].role, (wchar_t)(0x2800 + bits), (chtype)series[top].mark);
        else if (n_series == 1 && !paint.utf8) tui_cell(y, x, series[top].role, 0, ACS_BLOCK);
        else tui_cell(y, x, series[top].role, 0, (chtype)(unsigned char)series[top].mark);
    }
    free(grid);
}
