// console/tui/pure/layout: where every panel of every console screen goes, as pure functions of the
// terminal size and the pipeline's shape. No curses here: the draw_*.c files only paint the
// rectangles these functions return, and tests/unit/test_layout.c checks them across every
// terminal size from 20x8 to 400x120 (the nvtop lesson: resize and many-device layouts are
// where consoles crash).
//
// Conventions every screen keeps:
//   - Rect is in terminal cells, origin at the top-left; x, y are the first column and row.
//   - A screen's rectangles tile the terminal exactly: no gaps, no overlaps.
//   - Row 0 is the header, the last row is the key bar, both full width.
//   - Panels (stages, timeline, loss, form, plan, table, detail) are drawn with a one-cell
//     box border; layout_inner() is their content. The sub-rectangles below (stage_list,
//     lanes, plan_lanes) already lie inside that border.
//   - A hidden panel has an empty Rect (w = h = 0).
//   - Below a screen's minimum size nothing is laid out but the "terminal too small" notice.
//
// Many stages. The stages panel shows one row per pipeline rank and the timeline one lane
// per rank. When every rank does not fit, both panels first drop a decoration (the stages'
// column headings, the timeline's time axis: compact); only then do they scroll (by the same
// selection: the drawing code keeps the selected rank visible in each, and both titles say
// which ranks they show). Lanes never compress several ranks into one row: the F/B/I/W
// characters are what make the chart readable without color, and one character cell cannot
// hold two ranks. When there is room to spare a lane grows up to LAYOUT_LANE_H_MAX rows.
//
// Text. Nothing is cut inside a word at any size from the minimum up: every text the screens
// draw is fitted by a rule (whole fields, abbreviated labels, wrapped messages; see
// console/tui/pure/tui_text.h), and test_layout sweeps those rules too.
#ifndef PPTRAIN_LAYOUT_H
#define PPTRAIN_LAYOUT_H
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    int x, y, w, h;
} Rect;

// Smallest terminals that show a whole screen. 60 columns fit a stages row (rank, layers, a
// 10-cell bar, busy / transfer / wait ms, peak memory; layout_stage_columns) and the key
// bar's priority-0 items with whole labels; 16 rows fit header, key bar and the minimum
// panels: live 4 (stages: border, column header, one rank) + 4 (timeline: border, one lane,
// axis) + 6 (loss: four plot rows).
#define LAYOUT_LIVE_MIN_W 60
#define LAYOUT_LIVE_MIN_H 16
#define LAYOUT_SETUP_MIN_W 60
#define LAYOUT_SETUP_MIN_H 16
#define LAYOUT_HISTORY_MIN_W 60
#define LAYOUT_HISTORY_MIN_H 16

// From this width on, live puts the loss panel beside the timeline (at 120: a 72-column
// timeline and a 48-column loss chart) and history puts the detail pane beside the run
// table (66 + 54). Setup puts the plan beside the form from LAYOUT_SETUP_SIDE_COLS (a
// 32-column form leaves a 58-column Gantt chart).
#define LAYOUT_WIDE_COLS 120
#define LAYOUT_SETUP_SIDE_COLS 90
#define LAYOUT_LANE_H_MAX 3
#define LAYOUT_MAX_STAGES 4096

// ---- Live: header / stages / timeline (+ loss beside or below) / key bar ----------------
//
//   wide (>= 120 cols)              narrow
//   +------ header --------+        +---- header ----+
//   | stages               |        | stages         |
//   +----------------------+        | timeline       |
//   | timeline    | loss   |        | loss           |
//   +------ key bar -------+        +---- key bar ---+
//
// Rows: stages and timeline each want one row per rank plus 3 (border, and column headings
// or time axis). Narrow, the loss panel keeps a quarter of the body (at least 6 rows; the
// minimum screen fits it), unless without it the compact panels would show every rank and
// with it they would not: then it steps aside (4 ranks below 20 rows), so every rank
// that fits shows from the smallest screen on; stages and timeline get
// their wish if it fits in the rest, and the rows left over go to the loss curve (or, with
// the loss panel hidden, to taller lanes). Otherwise they go compact (one row less each) if
// that shows every rank, else they split the rest evenly, compact, so both scroll through
// the same number of ranks (the odd row goes to the loss panel, or to the timeline when
// that is hidden). Wide, the stages panel takes at most half the body (compact when that
// shows every rank) and the timeline (three fifths of the width) and the loss panel share
// the rest.
typedef struct {
    bool too_small;        // only notice is set
    Rect notice;           // "terminal too small" text, centered (too_small only)
    Rect header;           // 1 row; 2 rows from 24 rows on (identity line, progress line)
    Rect stages;           // panel
    Rect stage_list;       // inside stages: one row per rank, below the column headings if any
    bool stages_heading;   // the column-heading row is shown (not compact)
    bool timeline_axis;    // the time-axis row under the lanes is shown (not compact)
    Rect timeline;         // panel
    Rect lanes;            // inside timeline: the Gantt chart; the time axis is the row below
    Rect loss;             // panel; empty when hidden
    Rect sample;           // panel: the model's latest sample (layout_live_sample); empty when hidden
    Rect keybar;           // last row
    bool loss_visible;     // requested, and no rank is hidden for its rows
    bool loss_beside;      // right of the timeline (wide) rather than below it
    int stage_rows;        // ranks visible in stage_list (<= n_stages)
    bool stages_scroll;    // stage_rows < n_stages
    int lane_h;            // rows per lane, 1..LAYOUT_LANE_H_MAX
    int lanes_visible;     // lanes that fit in lanes (<= n_stages)
    bool timeline_scrolls; // lanes_visible < n_stages
} LiveLayout;

// n_stages: pipeline ranks P (a rank's virtual stages share its row and lane), 1..4096.
// show_loss: the user's loss-panel toggle. Returns 0, or 1 when too small (out->notice).
int layout_live(int cols, int rows, int n_stages, bool show_loss, LiveLayout *out);
// The same with the sample panel: the latest sample of the model and the step it came from
// (train --sample-every), LAYOUT_SAMPLE_H rows across the whole width at the bottom of the
// body, above the key bar (border, then its text wrapped on two lines), taken before the
// other panels share the body. It folds away below LAYOUT_SAMPLE_MIN_H rows, where the body
// keeps every row for the pipeline, where it would hide a rank that the screen shows without
// it (as a message line never does), and when show_sample (the user's toggle) is off.
#define LAYOUT_SAMPLE_H 4
#define LAYOUT_SAMPLE_MIN_H 24
int layout_live_sample(int cols, int rows, int n_stages, bool show_loss, bool show_sample, LiveLayout *out);

// The columns of a stages-panel row, left to right: rank, device, layers, the utilization bar
// (busy, transfer, wait), busy / transfer / wait ms, peak activation memory, and as htop shows
// a process, the rank's CPU % and resident memory. x is the first column inside the panel, w
// its width (0: not shown). The bar takes what the others leave; while that is below
// LAYOUT_BAR_WANT the device column goes first, then resident memory, CPU %, peak memory and
// transfer ms; the bar keeps at least LAYOUT_BAR_MIN.
typedef enum {
    STAGE_COL_RANK, STAGE_COL_DEV, STAGE_COL_LAYERS, STAGE_COL_BAR, STAGE_COL_BUSY, STAGE_COL_XFER,
    STAGE_COL_WAIT, STAGE_COL_PEAK, STAGE_COL_CPU, STAGE_COL_RSS, STAGE_COLS
} StageCol;
typedef struct {
    int x[STAGE_COLS], w[STAGE_COLS];
} StageColumns;
#define LAYOUT_BAR_WANT 10
#define LAYOUT_BAR_MIN 4
// The widest text of the fixed columns: a device name ("cuda"), a number of ms or bytes
// ("99999.9", "123.4M"; console/tui/pure/tui_chart.h formats them to fit).
// STAGE_CPU_W: "1600" (16 cores busy) or "99.5".
enum { STAGE_NUM_W = 7, STAGE_DEV_W = 4, STAGE_LAYERS_MIN_W = 8, STAGE_CPU_W = 5 };
// width: the panel's inside; rank_w and layers_w: the widest rank number and layer list.
void layout_stage_columns(int width, int rank_w, int layers_w, StageColumns *out);
// The heading of each column ("rank", "dev", "layers", ...); each fits its column.
const char *layout_stage_heading(StageCol c);

// ---- Setup: header / form | plan / key bar ----------------------------------------------
// The form (schedule list, then the run fields) is on the left from 90 columns, above the
// plan when narrower. The plan panel holds the predicted timeline (plan_lanes) and, under
// its time axis, two summary lines (bubble: predicted and ideal; peak activation memory).
typedef struct {
    bool too_small;
    Rect notice;
    Rect header;           // 1 row
    Rect form;             // panel
    Rect plan;             // panel
    Rect plan_lanes;       // inside plan: the Gantt chart; axis and 2 summary rows below it
    Rect keybar;
    bool plan_beside;      // plan right of the form
    int form_rows;         // form lines visible (<= form_lines)
    bool form_scrolls;
    int lane_h;
    int lanes_visible;
    bool plan_scrolls;
} SetupLayout;

// form_lines: lines the form wants (schedules + fields), >= 1; n_stages as for live.
int layout_setup(int cols, int rows, int n_stages, int form_lines, SetupLayout *out);

// ---- History: header / table | detail / [filter] / key bar ------------------------------
// The run table is on the left (55%) from 120 columns, above the detail/compare pane when
// narrower (the pane keeps 40% of the body, at least 8 rows: run fields and a loss chart).
// The filter line, an htop-style prompt, sits just above the key bar while it is open.
typedef struct {
    bool too_small;
    Rect notice;
    Rect header;           // 1 row
    Rect table;            // panel
    Rect detail;           // panel: run details, or two runs' loss curves overlaid
    Rect filter;           // 1 row above the key bar; empty when closed
    Rect keybar;
    bool detail_beside;
    int table_rows;        // runs visible: table inner rows minus the column-header row
} HistoryLayout;

int layout_history(int cols, int rows, bool show_filter, HistoryLayout *out);

// ---- Shared pieces ----------------------------------------------------------------------

// Content area of a bordered panel (empty when the panel is narrower or shorter than 3).
Rect layout_inner(Rect r);
bool layout_contains(const Rect *r, int x, int y);
bool layout_empty(const Rect *r);

// True when cols x rows is below need_w x need_h; then *notice is where the lines of
// layout_too_small_lines go: as many rows as lines (at most rows), as wide as the widest
// line, centered. Sizes <= 0 give an empty notice.
bool layout_too_small(int cols, int rows, int need_w, int need_h, Rect *notice);
// The notice's text in lines of at most cols columns: one line when it fits, else
// "terminal too small" and "(need 60x16)" each wrapped at its spaces. Returns the count.
#define LAYOUT_NOTICE_LINE 48
int layout_too_small_lines(int cols, int need_w, int need_h, char lines[][LAYOUT_NOTICE_LINE], int max);
// "terminal too small (need 60x16)"; ASCII so its width in cells is its length in bytes.
// Returns that length (snprintf's).
int layout_too_small_text(int need_w, int need_h, char *buf, size_t size);

// ---- Key bar (htop style: "F1Help F2Setup ... F10Quit") ---------------------------------
// Each item is its key then its label, items one blank column apart, from the bar's left
// edge. A label is never cut: when all items do not fit, items leave the bar by priority
// (the highest number first, the later item first among equals; priority 0 stays), and the
// rest move left; when even the priority-0 items do not fit, the bar shows every key without
// its label, and on a bar narrower than that the last keys go. An item off the bar still
// works (and is in F1's help). Keys and labels are ASCII: one byte, one cell.
typedef struct {
    const char *key;   // "F1"
    const char *label; // "Help"
    int priority;      // 0: always on the bar with its label while the bar has labels
} KeyBarItem;

typedef struct {
    int x;        // first column of the key
    int key_w;    // characters of the key drawn (0 when the item is dropped)
    int label_w;  // characters of the label drawn right after the key
} KeyBarSlot;

#define LAYOUT_KEYBAR_MAX 32

// Fills slots[0..n) (n <= LAYOUT_KEYBAR_MAX; a dropped item: key_w = label_w = 0) and returns
// how many are shown.
int layout_keybar(const Rect *bar, const KeyBarItem *items, int n, KeyBarSlot *slots);
// The item under column x of the bar (key or label), or -1 for a gap, the free space to
// the right, or a dropped item. The caller checks the row.
int layout_keybar_hit(const Rect *bar, const KeyBarItem *items, int n, int x);
#endif
