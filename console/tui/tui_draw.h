// console/tui/tui_draw: painting primitives shared by the console's screens: theme roles as
// curses attributes, clipped text, panels, the key bar, the "too small" notice, and the
// widgets (utilization bar, progress bar, Gantt lanes, braille / block plots). They paint
// the rectangles console/tui/pure/layout computes and nothing else. UI thread only (curses is not
// thread-safe; the console has exactly one thread that calls it).
//
// Every widget stays readable without color: bars use one character per part (busy,
// transfer, wait), timeline cells carry their letter (F B I W, '-' messages, '.' idle), overlaid plots
// use different characters per series.
#ifndef PPTRAIN_TUI_DRAW_H
#define PPTRAIN_TUI_DRAW_H
#include <stdbool.h>
#include <wchar.h>
#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1
#endif
#include <curses.h>

#include "console/tui/pure/layout.h"
#include "console/tui/pure/theme.h"
#include "console/tui/pure/tui_chart.h"

// After newterm(): sets up color pairs for the theme. utf8: the locale's codeset is UTF-8
// (braille, block and box characters); no_color: NO_COLOR asked for attributes only (the
// theme has then already been through theme_apply_no_color).
void tui_draw_setup(const Theme *theme, bool utf8, bool no_color);

void tui_set_role(ThemeRole role);    // attribute + color pair for the following drawing
void tui_fill(Rect r, ThemeRole role);
// UTF-8 text at (y, x), at most w cells (clipped: for texts sized to fit); returns the cells
// drawn. tui_textf formats, then fits by whole words as tui_text_words does.
int tui_text(int y, int x, int w, ThemeRole role, const char *s);
int tui_textf(int y, int x, int w, ThemeRole role, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
// Right-aligned in [x, x+w).
int tui_text_right(int y, int x, int w, ThemeRole role, const char *s);
// s when it fits in w cells, else its whole words that fit followed by an ellipsis (never a
// word cut in two), and when not even its first word fits, an ellipsis and the end of s (a
// long file name keeps the part that tells it apart); returns the cells drawn.
int tui_text_words(int y, int x, int w, ThemeRole role, const char *s);

// A bordered panel with its title in the top border (whole words: tui_text_words).
void tui_panel(Rect r, const char *title, ThemeRole title_role);

void tui_keybar(const Rect *bar, const KeyBarItem *items, int n);
void tui_too_small(const Rect *notice, int need_w, int need_h);
// A centered box with lines of text (help, confirmation), lines first .. first + rows it has,
// each fitted by whole words; returns how many lines it shows.
int tui_dialog(int cols, int rows, const char *title, const char *const *lines, int n, int first);

// busy / transfer / wait as one bar of w cells.
void tui_util_bar(int y, int x, int w, double busy, double transfer, double wait);
// A progress bar of w cells filled to frac, with text centered on it.
void tui_progress(int y, int x, int w, double frac, const char *text);

// Gantt lanes: lane k (k = 0 .. n_lanes-1) of rect `lanes`, lane_h rows each, shows the
// events of rank first + k: ev[ev_off[r] .. ev_off[r+1]), time [t0, t0 + span) across the
// width, blocks labelled with their microbatch (tui_gantt_text). selected: a rank whose label
// is highlighted (-1: none). Labels ("r12") take the first tui_gantt_label_w(n_ranks) columns.
typedef struct {
    const TuiEvent *ev;
    const int *ev_off;
    int n_ranks;             // lanes that exist (for the label width)
    double t0, span;         // the window shown
} TuiGanttData;
void tui_gantt(Rect lanes, int lane_h, int first, int n_lanes, int selected, const TuiGanttData *d);
int tui_gantt_label_w(int n_ranks, int width);
// The time axis under the lanes: the window's start at the left, its end with its unit at
// the right, the middle between them when there is room.
void tui_gantt_axis(int y, int x, int w, int label_w, double t0, double span, const char *unit);

// A line plot of up to TUI_PLOT_MAX series over area (y range [lo, hi]); each series its
// role and, without color or UTF-8, its own character.
#define TUI_PLOT_MAX 14   // the history overlay: 7 runs, each with its validation loss
typedef struct {
    const float *y;
    int n;
    ThemeRole role;
    char mark;               // the cell character where braille cannot be used (or without color)
} TuiPlotSeries;
void tui_plot(Rect area, const TuiPlotSeries *series, int n_series, float lo, float hi);
#endif
