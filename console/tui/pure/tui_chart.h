// console/tui/pure/tui_chart: the console's charts as pure functions of their data and a cell grid,
// so tests reach them without a terminal (tests/unit/test_tui_chart.c). Drawing code only maps
// the cells these functions fill to glyphs and colors.
//
//   - Gantt lanes: a rank's timed actions rasterized to one cell per `unit` of time.
//   - Braille plot: a series on a w x h cell grid at 2 x 4 dots per cell (U+2800 + bits);
//     without UTF-8 each non-empty cell is drawn as one block character instead.
//   - Utilization bars, EMA smoothing, a fixed-memory downsampled series, number formats.
#ifndef PPTRAIN_TUI_CHART_H
#define PPTRAIN_TUI_CHART_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// What a timeline cell shows. The order is the drawing code's glyph and theme index.
typedef enum {
    TUI_CELL_IDLE,   // bubble: '.'
    TUI_CELL_F,      // forward: 'F'
    TUI_CELL_B,      // full backward: 'B'
    TUI_CELL_I,      // input-gradient backward: 'I'
    TUI_CELL_W,      // weight-gradient backward: 'W'
    TUI_CELL_COMM,   // send / receive wait: '-'
    TUI_CELL_KINDS
} TuiCellKind;

// One action of one rank, in ms from the step's (or plan's) first action.
typedef struct {
    float t0, t1;
    uint8_t kind;    // TuiCellKind (never IDLE)
    int16_t stage;
    int32_t mb;
} TuiEvent;

typedef struct {
    uint8_t kind;    // TuiCellKind
    bool start;      // an action of this kind starts in this cell (a block's first cell)
    bool alt;        // that action is on the rank's 2nd (4th, ...) stage: its letter in lower case
    int32_t mb;      // the microbatch of the action that starts here (start), else of the one
                     // covering most of the cell
} TuiGanttCell;

// The cell kind of an engine ActionType (engine/schedule/schedule.h): F, B, I, W, or COMM for the four
// SEND/RECV types.
TuiCellKind tui_cell_kind(int action_type);
char tui_cell_char(TuiCellKind k);

// Column k covers [t0 + k*unit, t0 + (k+1)*unit). It shows the kind that covers most of it,
// or IDLE when uncovered time exceeds every kind's cover (as `pptrain plan` draws). A compute
// action (F, B, I, W) that wins no column of its own still shows: it takes the column of its
// midpoint, unless that column is another such action's or the only column of a block (so
// every action is visible while there are columns for them; zoom in for the rest). events
// need not be sorted; unit > 0.
void tui_gantt_raster(const TuiEvent *ev, int n, double t0, double unit, int width, TuiGanttCell *out);

// The characters of a rasterized lane: each cell its kind's letter ('.' idle, '-' messages),
// and every compute block labelled with its microbatch right after its letter ("F12FFF",
// "B3BB") when the block is wide enough for the digits. A lane's stages alternate between
// upper and lower case in stage order (tui_gantt_raster sets alt), so the actions of a rank's
// two virtual stages on one microbatch read "F1f1", "b5B5", not "F1F1", "B5B5" (issue 29).
void tui_gantt_text(const TuiGanttCell *cells, int width, char *out /* width + 1 */);
// One cell's letter as tui_gantt_text draws it (lower case on an alternate stage), without labels.
char tui_gantt_cell_char(const TuiGanttCell *c);
// The labels of a lane's second row (lanes of two rows or more): "F12", "B3" under the first
// cell of each compute block, blanks elsewhere; a label that would run into the next block's
// label (or past the lane) is left out.
void tui_gantt_labels(const TuiGanttCell *cells, int width, char *out /* width + 1 */);

// Splits a bar of `width` cells into three parts in proportion (the stage rows: busy,
// transfer, wait), rounded so the parts add up to width (a nonzero part of at least half a
// cell gets a cell).
void tui_bar_split(double busy, double comm, double idle, int width, int *n_busy, int *n_comm, int *n_idle);

// EMA with smoothing `alpha` per step applied to points that each stand for `stride` steps.
double tui_ema_alpha(double alpha, int stride);
// out[i] = EMA of y[0..i] (NaN points are skipped: out keeps the previous value).
void tui_ema(const float *y, int n, double alpha, float *out);

// A sparse series (validation loss at steps[0..n), increasing) on the points of a TuiSeries
// that starts at first_step with `stride` steps a point (a fraction where a history curve
// buckets step_max steps into fewer points): out[i] is the line through the
// sparse values at the middle of point i's steps, NaN (a gap) before the first and after the last,
// except that every sparse value shows on the point whose steps hold it.
void tui_series_overlay(const int *steps, const float *vals, int n, double first_step, double stride, int n_points,
                        float *out);

// Range of the finite values of y (lo == hi when constant; false when none is finite).
bool tui_series_range(const float *y, int n, float *lo, float *hi);

// Braille plot: cells[w*h] (row-major, row 0 on top) get OR-ed dot bits for series y[0..n)
// scaled to [lo, hi] bottom-to-top, x spread over the 2w dot columns; consecutive points are
// joined by a vertical run of dots. Non-finite points are gaps.
void tui_braille_plot(const float *y, int n, float lo, float hi, int w, int h, uint8_t *cells);
// The braille bit of dot (dx 0..1, dy 0..3) in a cell (Unicode's dot numbering).
uint8_t tui_braille_bit(int dx, int dy);

// A series kept in fixed memory: when full, pairs of points are averaged and each point
// then stands for twice as many steps. Feed steps in order with tui_series_push.
#define TUI_SERIES_CAP 2048
typedef struct {
    float y[TUI_SERIES_CAP];
    int n;            // complete points
    int stride;       // steps per point (a power of two)
    int first_step;   // the step of point 0 (1-based)
    double acc;       // the partial point being summed
    int acc_n;
} TuiSeries;

void tui_series_reset(TuiSeries *s);
void tui_series_push(TuiSeries *s, int step, double value);
// Points including the partial one: writes at most cap values into out; returns the count.
int tui_series_points(const TuiSeries *s, float *out, int cap);
// Copies the used part of src (a TuiSeries is 8 KiB; copy only what is filled).
void tui_series_copy(TuiSeries *dst, const TuiSeries *src);

// "0-1", "2,5-6", "-" (none): the decoder layers of pipeline rank `rank`, from each stage's
// layer count and owner. stage_layers[s] < 0 (unknown) gives "?".
void tui_layer_ranges(const int *stage_layers, const int *stage_rank, int n_stages, int rank, char *buf,
                      size_t size);

// Compact numbers for narrow columns: "512B", "3.4K", "12M", "1.2G" (bytes, 1024-based);
// "980", "38.2k", "1.2M" (counts, 1000-based); "0:42", "12:05", "1h02m" (seconds).
void tui_fmt_bytes(double bytes, char *buf, size_t size);
void tui_fmt_count(double v, char *buf, size_t size);
void tui_fmt_duration(double seconds, char *buf, size_t size);

// Case-insensitive substring test ("" matches everything).
bool tui_contains_ci(const char *haystack, const char *needle);
#endif
