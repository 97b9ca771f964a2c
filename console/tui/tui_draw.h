// console/tui_draw: painting primitives shared by the console's screens: theme roles as
// curses attributes, clipped text, panels, the key bar, the "too small" notice, and the
// widgets (utilization bar, progress bar, Gantt lanes, braille / block plots). They paint
// the rectangles console/layout computes and nothing else. UI thread only (curses is not
// thread-safe; the console has exactly one thread that calls it).
//
// Every widget stays readable without color: bars use one character per part (busy, comm,
// idle), timeline cells carry their letter (F B I W, '-' comm, '.' idle), overlaid plots
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
// UTF-8 text at (y, x), at most w cells; returns the cells drawn.
int tui_text(int y, int x, int w, ThemeRole role, const char *s);
int tui_textf(int y, int x, int w, ThemeRole role, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
// Right-aligned in [x, x+w).
int tui_text_right(int y, int x, int w, ThemeRole role, const char *s);

// A bordered panel with its title in the top border.
void tui_panel(Rect r, const char *title, ThemeRole title_role);

void tui_keybar(const Rect *bar, const KeyBarItem *items, int n);
void tui_too_small(const Rect *notice, int need_w, int need_h);
// A centered box with lines of text (help, confirmation); returns its rectangle.
Rect tui_dialog(int cols, int rows, const char *title, const char *const *lines, int n);

// busy / comm / idle as one bar of w cells.
void tui_util_bar(int y, int x, int w, double busy, double comm, double idle);
// A progress bar of w cells filled to frac, with text centered on it.
void tui_progress(int y, int x, int w, double frac, const char *text);

// Gantt lanes: lane k (k = 0 .. n_lanes-1) of rect `lanes`, lane_h rows each, shows the
// events of rank first + k: ev[ev_off[r] .. ev_off[r+1]), time [0, span) across the width.
// selected: a rank whose label is highlighted (-1: none). Labels take the first 4 columns.
void tui_gantt(Rect lanes, int lane_h, int first, int n_lanes, int selected, const TuiEvent *ev,
               const int *ev_off, double span);
// The time axis under the lanes: "0" at the left, `span` with its unit at the right.
void tui_gantt_axis(int y, int x, int w, double span, const char *unit);

// A line plot of up to TUI_PLOT_MAX series over area (y range [lo, hi]); each series its
// role and, without color or UTF-8, its own character.
#define TUI_PLOT_MAX 6
typedef struct {
    const float *y;
    int n;
    ThemeRole role;
    char mark;               // the cell character where braille cannot be used (or without color)
} TuiPlotSeries;
void tui_plot(Rect area, const TuiPlotSeries *series, int n_series, float lo, float hi);
#endif
