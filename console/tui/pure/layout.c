// console/tui/pure/layout: pure rectangle math for the console screens (see layout.h for the
// pictures and the rules). Every function here is a function of its arguments only.
#include "console/tui/pure/layout.h"

#include "console/tui/pure/tui_text.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

// Rows a bordered list panel spends on itself: top and bottom border plus one row of
// column headings (stages) or time axis (timeline).
enum { PANEL_OVERHEAD = 3 };
enum { LIVE_STAGES_MIN = PANEL_OVERHEAD + 1, LIVE_TIMELINE_MIN = PANEL_OVERHEAD + 1, LIVE_LOSS_MIN = 6 };
// The plan panel adds two summary rows (bubble, peak activations) under its axis.
enum { PLAN_OVERHEAD = PANEL_OVERHEAD + 2, PLAN_MIN = PLAN_OVERHEAD + 1, FORM_MIN = 5 };
enum { TABLE_MIN = PANEL_OVERHEAD + 2, DETAIL_MIN = 8 };
// Rows from which the live header gets its second line.
enum { LIVE_HEADER2_ROWS = 24 };
// The minimum live screen (1-row header, key bar) holds all three minimum panels, so the
// loss panel is only ever hidden by the user's toggle.
_Static_assert(LAYOUT_LIVE_MIN_H - 2 >= LIVE_STAGES_MIN + LIVE_TIMELINE_MIN + LIVE_LOSS_MIN,
               "live minimum height must fit stages, timeline and loss");
// From LAYOUT_SAMPLE_MIN_H rows (a two-row header) the sample panel leaves them room too.
_Static_assert(LAYOUT_SAMPLE_MIN_H >= LIVE_HEADER2_ROWS &&
                   LAYOUT_SAMPLE_MIN_H - 3 - LAYOUT_SAMPLE_H >= LIVE_STAGES_MIN + LIVE_TIMELINE_MIN + LIVE_LOSS_MIN,
               "the sample panel must leave stages, timeline and loss their minimum");
enum { KEYBAR_GAP = 1 };

static int min_i(int a, int b) { return a < b ? a : b; }
static int max_i(int a, int b) { return a > b ? a : b; }
static int clamp_i(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static Rect rect(int x, int y, int w, int h) {
    Rect r = {x, y, w, h};
    return r;
}

Rect layout_inner(Rect r) {
    if (r.w < 3 || r.h < 3) return rect(r.x, r.y, 0, 0);
    return rect(r.x + 1, r.y + 1, r.w - 2, r.h - 2);
}

bool layout_contains(const Rect *r, int x, int y) {
    return x >= r->x && x < r->x + r->w && y >= r->y && y < r->y + r->h;
}

bool layout_empty(const Rect *r) { return r->w <= 0 || r->h <= 0; }

int layout_too_small_text(int need_w, int need_h, char *buf, size_t size) {
    return snprintf(buf, size, "terminal too small (need %dx%d)", need_w, need_h);
}

int layout_too_small_lines(int cols, int need_w, int need_h, char lines[][LAYOUT_NOTICE_LINE], int max) {
    char text[LAYOUT_NOTICE_LINE], need[32];
    const int len = layout_too_small_text(need_w, need_h, text, sizeof text);
    int n = 0;
    if (cols <= 0) return 0;
    if (len <= cols) {
        snprintf(lines[n++], LAYOUT_NOTICE_LINE, "%s", text);
        return n;
    }
    // Two phrases, each wrapped on its own: "terminal too small" and "(need 60x16)".
    snprintf(need, sizeof need, "(need %dx%d)", need_w, need_h);
    const char *const phrases[] = {"terminal too small", need};
    for (int p = 0; p < 2; p++) {
        TuiLine l[8];
        const int k = tui_wrap(phrases[p], cols, l, 8);
        for (int i = 0; i < k && i < 8 && n < max; i++)
            snprintf(lines[n++], LAYOUT_NOTICE_LINE, "%.*s", l[i].len, phrases[p] + l[i].start);
    }
    return n;
}

bool layout_too_small(int cols, int rows, int need_w, int need_h, Rect *notice) {
    char lines[8][LAYOUT_NOTICE_LINE];
    const int n = layout_too_small_lines(cols, need_w, need_h, lines, 8);
    int w = 0;
    for (int i = 0; i < n; i++) w = max_i(w, (int)strlen(lines[i]));
    const int h = min_i(n, max_i(rows, 0));
    *notice = rect((max_i(cols, 0) - w) / 2, (max_i(rows, 0) - h) / 2, w, h);
    if (h == 0 || w == 0) *notice = rect(0, 0, 0, 0);
    return cols < need_w || rows < need_h;
}

// The part of a list panel below its column-header row (inside the border).
static Rect list_below_heading(Rect panel) {
    Rect in = layout_inner(panel);
    return rect(in.x, in.y + 1, in.w, max_i(in.h - 1, 0));
}

// The part of a chart panel above its `below` footer rows (axis, summaries).
static Rect chart_above_footer(Rect panel, int below) {
    Rect in = layout_inner(panel);
    return rect(in.x, in.y, in.w, max_i(in.h - below, 0));
}

// Lanes of a Gantt chart area: as tall as fits up to LAYOUT_LANE_H_MAX, then as many as fit.
static void fit_lanes(const Rect *chart, int n, int *lane_h, int *visible) {
    *lane_h = clamp_i(chart->h / n, 1, LAYOUT_LANE_H_MAX);
    *visible = min_i(n, chart->h / *lane_h);
}

// ---- live -------------------------------------------------------------------------------

// Stacked rows for stages, timeline and loss (0 = hidden) in a body of `body` rows; *compact:
// the panels go without column headings and time axis.
static void live_rows_stacked(int body, int n, bool show_loss, int *st, int *tl, int *loss, bool *compact) {
    // The ranks come first: the loss panel steps aside when its rows are what keeps the compact
    // panels from showing every rank (4 ranks below 20 rows; issue 29).
    const int compact_pair = 2 * (n + PANEL_OVERHEAD - 1);
    if (show_loss && compact_pair > body - max_i(LIVE_LOSS_MIN, body / 4) && compact_pair <= body) show_loss = false;
    *loss = show_loss ? max_i(LIVE_LOSS_MIN, body / 4) : 0;
    int rest = body - *loss, want = n + PANEL_OVERHEAD;
    *compact = 2 * want > rest;
    if (*compact) want--;
    if (2 * want <= rest) {
        *st = *tl = want;
        // Spare rows go to the loss curve when it is shown, else to taller lanes.
        if (*loss) *loss += rest - 2 * want;
        else *tl += rest - 2 * want;
        return;
    }
    // Equal panels show the same ranks; an odd row goes to the loss panel when it is shown.
    *st = max_i(LIVE_STAGES_MIN - 1, rest / 2);
    *tl = rest - *st;
    if (*loss && *tl > *st) {
        (*tl)--;
        (*loss)++;
    }
}

static void live_place_stacked(LiveLayout *o, int cols, int y, int body, int n, bool show_loss) {
    int st, tl, loss;
    bool compact;
    live_rows_stacked(body, n, show_loss, &st, &tl, &loss, &compact);
    o->stages_heading = o->timeline_axis = !compact;
    o->stages = rect(0, y, cols, st);
    o->timeline = rect(0, y + st, cols, tl);
    o->loss = loss ? rect(0, y + st + tl, cols, loss) : rect(0, 0, 0, 0);
}

// Wide: stages on top (at most half the body), timeline and loss side by side below it.
// The loss panel gets two fifths of the width: the Gantt chart needs the columns more.
static void live_place_wide(LiveLayout *o, int cols, int y, int body, int n) {
    const int half = max_i(LIVE_STAGES_MIN, body / 2);
    int st = min_i(n + PANEL_OVERHEAD, half);
    // Compact (no column headings) when the full panel does not fit: one more rank shows.
    o->stages_heading = n + PANEL_OVERHEAD <= half;
    o->timeline_axis = true;
    int loss_w = cols * 2 / 5;
    o->stages = rect(0, y, cols, st);
    o->timeline = rect(0, y + st, cols - loss_w, body - st);
    o->loss = rect(cols - loss_w, y + st, loss_w, body - st);
    o->loss_beside = true;
}

static void live_counts(LiveLayout *o, int n) {
    o->stage_list = o->stages_heading ? list_below_heading(o->stages) : layout_inner(o->stages);
    o->lanes = chart_above_footer(o->timeline, o->timeline_axis ? 1 : 0);
    o->stage_rows = min_i(n, o->stage_list.h);
    o->stages_scroll = o->stage_rows < n;
    fit_lanes(&o->lanes, n, &o->lane_h, &o->lanes_visible);
    o->timeline_scrolls = o->lanes_visible < n;
    o->loss_visible = !layout_empty(&o->loss);
}

// The live screen, the sample panel taking its rows when it is asked for and there are enough.
static int live_place(int cols, int rows, int n_stages, bool show_loss, bool show_sample, LiveLayout *out) {
    assert(n_stages >= 1 && n_stages <= LAYOUT_MAX_STAGES);
    memset(out, 0, sizeof *out);
    if (layout_too_small(cols, rows, LAYOUT_LIVE_MIN_W, LAYOUT_LIVE_MIN_H, &out->notice)) {
        out->too_small = true;
        return 1;
    }
    out->notice = rect(0, 0, 0, 0);
    int header_h = rows >= LIVE_HEADER2_ROWS ? 2 : 1;
    int body = rows - header_h - 1;
    out->header = rect(0, 0, cols, header_h);
    out->keybar = rect(0, rows - 1, cols, 1);
    if (show_sample && rows >= LAYOUT_SAMPLE_MIN_H) {
        body -= LAYOUT_SAMPLE_H;
        out->sample = rect(0, header_h + body, cols, LAYOUT_SAMPLE_H);
    }
    if (show_loss && cols >= LAYOUT_WIDE_COLS) live_place_wide(out, cols, header_h, body, n_stages);
    else live_place_stacked(out, cols, header_h, body, n_stages, show_loss);
    live_counts(out, n_stages);
    return 0;
}

int layout_live(int cols, int rows, int n_stages, bool show_loss, LiveLayout *out) {
    return live_place(cols, rows, n_stages, show_loss, false, out);
}

int layout_live_sample(int cols, int rows, int n_stages, bool show_loss, bool show_sample, LiveLayout *out) {
    const int rc = live_place(cols, rows, n_stages, show_loss, false, out);
    if (rc || !show_sample || rows < LAYOUT_SAMPLE_MIN_H) return rc;
    // The sample panel never hides a rank the screen shows without it, nor pushes the loss
    // panel aside (which steps aside only for ranks).
    LiveLayout with;
    live_place(cols, rows, n_stages, show_loss, true, &with);
    if (with.stage_rows == out->stage_rows && with.lanes_visible == out->lanes_visible &&
        with.loss_visible == out->loss_visible)
        *out = with;
    return 0;
}

// ---- setup ------------------------------------------------------------------------------

// Stacked: the form gets what it wants unless that would squeeze the plan below its own
// wish or half the body, whichever is smaller (and never below PLAN_MIN).
static int setup_form_rows_stacked(int body, int n, int form_lines) {
    int form_want = form_lines + 2, plan_want = n + PLAN_OVERHEAD;
    if (form_want + plan_want <= body) return form_want;
    int plan = max_i(PLAN_MIN, min_i(plan_want, body / 2));
    return clamp_i(form_want, FORM_MIN, body - plan);
}

// Side by side: a third of the width for the form, 32 to 44 columns (labels such as
// "microbatches" plus a 16-character value and the schedule names fit in 32).
static int setup_form_cols(int cols) { return clamp_i(cols / 3, 32, 44); }

int layout_setup(int cols, int rows, int n_stages, int form_lines, SetupLayout *out) {
    assert(n_stages >= 1 && n_stages <= LAYOUT_MAX_STAGES && form_lines >= 1);
    memset(out, 0, sizeof *out);
    if (layout_too_small(cols, rows, LAYOUT_SETUP_MIN_W, LAYOUT_SETUP_MIN_H, &out->notice)) {
        out->too_small = true;
        return 1;
    }
    out->notice = rect(0, 0, 0, 0);
    int body = rows - 2;
    out->header = rect(0, 0, cols, 1);
    out->keybar = rect(0, rows - 1, cols, 1);
    if (cols >= LAYOUT_SETUP_SIDE_COLS) {
        int fw = setup_form_cols(cols);
        out->form = rect(0, 1, fw, body);
        out->plan = rect(fw, 1, cols - fw, body);
        out->plan_beside = true;
    } else {
        int fh = setup_form_rows_stacked(body, n_stages, form_lines);
        out->form = rect(0, 1, cols, fh);
        out->plan = rect(0, 1 + fh, cols, body - fh);
    }
    out->form_rows = min_i(form_lines, layout_inner(out->form).h);
    out->form_scrolls = out->form_rows < form_lines;
    out->plan_lanes = chart_above_footer(out->plan, 3);
    fit_lanes(&out->plan_lanes, n_stages, &out->lane_h, &out->lanes_visible);
    out->plan_scrolls = out->lanes_visible < n_stages;
    return 0;
}

// ---- history ----------------------------------------------------------------------------

int layout_history(int cols, int rows, bool show_filter, HistoryLayout *out) {
    memset(out, 0, sizeof *out);
    if (layout_too_small(cols, rows, LAYOUT_HISTORY_MIN_W, LAYOUT_HISTORY_MIN_H, &out->notice)) {
        out->too_small = true;
        return 1;
    }
    out->notice = rect(0, 0, 0, 0);
    int filter_h = show_filter ? 1 : 0;
    int body = rows - 2 - filter_h;
    out->header = rect(0, 0, cols, 1);
    out->keybar = rect(0, rows - 1, cols, 1);
    out->filter = show_filter ? rect(0, rows - 2, cols, 1) : rect(0, 0, 0, 0);
    if (cols >= LAYOUT_WIDE_COLS) {
        int tw = cols * 11 / 20;
        out->table = rect(0, 1, tw, body);
        out->detail = rect(tw, 1, cols - tw, body);
        out->detail_beside = true;
    } else {
        int dh = clamp_i(body * 2 / 5, DETAIL_MIN, body - TABLE_MIN);
        out->table = rect(0, 1, cols, body - dh);
        out->detail = rect(0, 1 + body - dh, cols, dh);
    }
    out->table_rows = list_below_heading(out->table).h;
    return 0;
}

// ---- key bar ----------------------------------------------------------------------------

static int str_w(const char *s) { return s ? (int)strlen(s) : 0; }

// Width of the items with on[i], with or without their labels.
static int keybar_width(const KeyBarItem *items, int n, const bool *on, bool labels) {
    int w = 0, shown = 0;
    for (int i = 0; i < n; i++)
        if (on[i]) w += str_w(items[i].key) + (labels ? str_w(items[i].label) : 0), shown++;
    return w + (shown > 1 ? (shown - 1) * KEYBAR_GAP : 0);
}

// The item to leave the bar next: the highest priority number, the later one among equals;
// -1 when only priority 0 is left.
static int keybar_next_drop(const KeyBarItem *items, int n, const bool *on) {
    int pick = -1;
    for (int i = 0; i < n; i++)
        if (on[i] && items[i].priority > 0 && (pick < 0 || items[i].priority >= items[pick].priority)) pick = i;
    return pick;
}

// Which items are on the bar, and whether with their labels (rules: layout.h).
static bool keybar_fit(int width, const KeyBarItem *items, int n, bool *on) {
    for (int i = 0; i < n; i++) on[i] = true;
    while (keybar_width(items, n, on, true) > width) {
        const int drop = keybar_next_drop(items, n, on);
        if (drop < 0) break;
        on[drop] = false;
    }
    if (keybar_width(items, n, on, true) <= width) return true;
    for (int i = 0; i < n; i++) on[i] = true;
    for (int i = n - 1; i >= 0 && keybar_width(items, n, on, false) > width; i--) on[i] = false;
    return false;
}

int layout_keybar(const Rect *bar, const KeyBarItem *items, int n, KeyBarSlot *slots) {
    bool on[LAYOUT_KEYBAR_MAX];
    assert(n <= LAYOUT_KEYBAR_MAX);
    const bool labels = keybar_fit(bar->w, items, n, on);
    int x = bar->x, shown = 0;
    for (int i = 0; i < n; i++) {
        if (!on[i]) {
            slots[i] = (KeyBarSlot){x, 0, 0};
            continue;
        }
        slots[i] = (KeyBarSlot){x, str_w(items[i].key), labels ? str_w(items[i].label) : 0};
        x += slots[i].key_w + slots[i].label_w + KEYBAR_GAP;
        shown++;
    }
    return shown;
}

int layout_keybar_hit(const Rect *bar, const KeyBarItem *items, int n, int x) {
    KeyBarSlot slots[LAYOUT_KEYBAR_MAX];
    layout_keybar(bar, items, n, slots);
    for (int i = 0; i < n; i++) {
        const int w = slots[i].key_w + slots[i].label_w;
        if (w > 0 && x >= slots[i].x && x < slots[i].x + w) return i;
    }
    return -1;
}

// ---- stage rows -------------------------------------------------------------------------

const char *layout_stage_heading(StageCol c) {
    static const char *const HEADINGS[STAGE_COLS] = {"rank", "dev", "layers", "utilization", "busy ms", "xfer",
                                                     "wait", "peak act", "cpu%", "rss"};
    return c < STAGE_COLS ? HEADINGS[c] : "";
}

void layout_stage_columns(int width, int rank_w, int layers_w, StageColumns *out) {
    // Each column: its widest text or heading plus one blank column (numbers: the one before them).
    int w[STAGE_COLS];
    w[STAGE_COL_RANK] = max_i(rank_w, str_w(layout_stage_heading(STAGE_COL_RANK))) + 1;
    w[STAGE_COL_DEV] = STAGE_DEV_W + 1;
    // A long layer list (many virtual stages) gets at most a quarter of the row; the drawing
    // code then shows the layer count instead.
    w[STAGE_COL_LAYERS] = min_i(max_i(layers_w, str_w(layout_stage_heading(STAGE_COL_LAYERS))) + 1,
                                max_i(STAGE_LAYERS_MIN_W, width / 4));
    w[STAGE_COL_BAR] = 0;
    for (int c = STAGE_COL_BUSY; c <= STAGE_COL_RSS; c++)
        w[c] = max_i(STAGE_NUM_W, str_w(layout_stage_heading((StageCol)c))) + 1;
    w[STAGE_COL_CPU] = STAGE_CPU_W + 1;
    static const StageCol DROP[] = {STAGE_COL_DEV, STAGE_COL_RSS, STAGE_COL_CPU, STAGE_COL_PEAK, STAGE_COL_XFER};
    int fixed = 0;
    for (int c = 0; c < STAGE_COLS; c++) fixed += w[c];
    for (size_t k = 0; k < sizeof DROP / sizeof DROP[0] && width - fixed < LAYOUT_BAR_WANT; k++) {
        fixed -= w[DROP[k]];
        w[DROP[k]] = 0;
    }
    w[STAGE_COL_BAR] = max_i(LAYOUT_BAR_MIN, width - fixed);
    int x = 0;
    for (int c = 0; c < STAGE_COLS; c++) {
        out->x[c] = x;
        out->w[c] = w[c];
        x += w[c];
    }
}
