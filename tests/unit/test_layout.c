// tests/unit/test_layout.c: the tests of console/tui/pure/layout.
// console/tui/pure/layout: every screen at every terminal size from 20x8 to 400x120 and every stage
// count the console meets either reports "too small" with a centered notice, or tiles the
// terminal exactly with the panels it means to show, and shows every rank unless even its
// compact panels cannot (then both scroll); the live screen's sample panel, when asked for,
// shows from LAYOUT_SAMPLE_MIN_H rows up and never hides a rank. Nothing is cut inside a word
// from 60x16 up: the key bar drops whole items by priority and never cuts a label, the
// stage-row columns fit their texts, the bubble's text and wrapped messages fit their widths. The key bar's hit
// test agrees with its placement at every width. Then a few sizes checked by hand against
// the pictures in layout.h.
#include <stdarg.h>
#include <string.h>

#include "console/tui/pure/layout.h"
#include "console/tui/pure/tui_bubble.h"
#include "console/tui/pure/tui_text.h"
#include "tests/unit/test_util.h"

enum { COLS_MIN = 20, COLS_MAX = 400, ROWS_MIN = 8, ROWS_MAX = 120 };
static const int STAGE_COUNTS[] = {1, 2, 3, 4, 8, 16, 32, 64};
enum { N_STAGE_COUNTS = sizeof STAGE_COUNTS / sizeof STAGE_COUNTS[0] };

// The sweeps make millions of checks: count them in one CHECK per sweep and print only
// the first few failures, each with the size that broke.
typedef struct {
    long checks, fails;
} Sweep;

static void expect(Sweep *s, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void expect(Sweep *s, int ok, const char *fmt, ...) {
    s->checks++;
    if (ok) return;
    if (s->fails++ < 20) {
        va_list ap;
        va_start(ap, fmt);
        fputs("  ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
}

static int inside(Rect in, Rect out) {
    return in.x >= out.x && in.y >= out.y && in.x + in.w <= out.x + out.w && in.y + in.h <= out.y + out.h;
}

static int overlap(Rect a, Rect b) {
    return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

typedef struct {
    const char *name;
    Rect r;
    int shown; // meant to be on screen: non-empty; otherwise empty
} Panel;

// Shown panels are non-empty and inside the screen, hidden ones empty, no two overlap, and
// together they cover every cell (disjoint + areas summing to the screen = exact tiling).
static void expect_tiling(Sweep *s, const char *screen, int cols, int rows, const Panel *p, int n) {
    Rect scr = {0, 0, cols, rows};
    long area = 0;
    for (int i = 0; i < n; i++) {
        Rect r = p[i].r;
        if (!p[i].shown) {
            expect(s, layout_empty(&r), "%s %dx%d: hidden %s not empty", screen, cols, rows, p[i].name);
            continue;
        }
        expect(s, r.w > 0 && r.h > 0, "%s %dx%d: %s empty (%d,%d %dx%d)", screen, cols, rows, p[i].name, r.x, r.y, r.w, r.h);
        expect(s, inside(r, scr), "%s %dx%d: %s (%d,%d %dx%d) off screen", screen, cols, rows, p[i].name, r.x, r.y, r.w, r.h);
        area += (long)r.w * r.h;
        for (int j = 0; j < i; j++)
            if (p[j].shown)
                expect(s, !overlap(r, p[j].r), "%s %dx%d: %s overlaps %s", screen, cols, rows, p[i].name, p[j].name);
    }
    expect(s, area == (long)cols * rows, "%s %dx%d: panels cover %ld of %ld cells", screen, cols, rows, area, (long)cols * rows);
}

static void expect_bars(Sweep *s, const char *screen, int cols, int rows, Rect header, Rect keybar) {
    expect(s, header.x == 0 && header.y == 0 && header.w == cols && header.h >= 1, "%s %dx%d: header not on row 0", screen, cols, rows);
    expect(s, keybar.x == 0 && keybar.y == rows - 1 && keybar.w == cols && keybar.h == 1, "%s %dx%d: key bar not on the last row",
           screen, cols, rows);
}

// The notice: the text wrapped at its spaces, every line within the terminal and (from 8
// columns, the longest word) every word whole.
static void expect_notice(Sweep *s, const char *screen, int cols, int rows, Rect n, int need_w, int need_h) {
    char text[64];
    layout_too_small_text(need_w, need_h, text, sizeof text);
    char lines[8][LAYOUT_NOTICE_LINE];
    const int k = layout_too_small_lines(cols, need_w, need_h, lines, 8);
    int w = 0, words = 0;
    for (int i = 0; i < k; i++) {
        const int len = (int)strlen(lines[i]);
        w = len > w ? len : w;
        words += len > 0;
        for (int c = 0; c < len; c++) words += lines[i][c] == ' ';
    }
    // From 8 columns (the longest word) every word is whole: the lines hold its five words.
    expect(s, cols < 8 || words == 5, "%s %dx%d: the notice's %d words are not whole", screen, cols, rows, words);
    expect(s, n.h == (k < rows ? k : rows) && n.w == w && w <= cols, "%s %dx%d: notice %dx%d for %d lines of %d", screen,
           cols, rows, n.w, n.h, k, w);
    // Centered: equal margins, give or take the odd cell.
    int left = n.x, right = cols - n.x - n.w, top = n.y, bottom = rows - n.y - n.h;
    expect(s, left >= 0 && right >= 0 && (left - right == 0 || left - right == -1), "%s %dx%d: notice not centered horizontally",
           screen, cols, rows);
    expect(s, top >= 0 && bottom >= 0 && (top - bottom == 0 || top - bottom == -1), "%s %dx%d: notice not centered vertically",
           screen, cols, rows);
}

// The rows of a list or chart panel that its sub-rectangle and counts claim.
static void expect_live_counts(Sweep *s, int cols, int rows, int n, bool show_loss, const LiveLayout *l) {
    expect(s, inside(l->stage_list, layout_inner(l->stages)) && !layout_empty(&l->stage_list), "live %dx%d n=%d: stage_list", cols,
           rows, n);
    expect(s, inside(l->lanes, layout_inner(l->timeline)) && !layout_empty(&l->lanes), "live %dx%d n=%d: lanes", cols, rows, n);
    int want_rows = n < l->stage_list.h ? n : l->stage_list.h;
    expect(s, l->stage_rows == want_rows && l->stages_scroll == (want_rows < n), "live %dx%d n=%d: stage_rows %d", cols, rows, n,
           l->stage_rows);
    expect(s, l->lane_h >= 1 && l->lane_h <= LAYOUT_LANE_H_MAX && l->lanes_visible >= 1 && l->lanes_visible <= n &&
                  l->lanes_visible * l->lane_h <= l->lanes.h,
           "live %dx%d n=%d: %d lanes of %d rows in %d", cols, rows, n, l->lanes_visible, l->lane_h, l->lanes.h);
    expect(s, l->timeline_scrolls == (l->lanes_visible < n), "live %dx%d n=%d: timeline_scrolls", cols, rows, n);
    // Scrolling lanes are one row each: taller lanes only when all of them fit.
    expect(s, !l->timeline_scrolls || l->lane_h == 1, "live %dx%d n=%d: scrolling lanes %d rows tall", cols, rows, n, l->lane_h);
    // Every rank shows wherever the compact stacked panels fit them (issue 29: 4 ranks at 60x16
    // showed 2), the loss panel stepping aside if it must; else the loss panel shows as asked.
    const int body = rows - (rows >= 24 ? 2 : 1) - 1, compact_pair = 2 * (n + 2);
    const bool stacked = !show_loss || cols < LAYOUT_WIDE_COLS;
    if (stacked && compact_pair <= body)
        expect(s, l->stage_rows == n && l->lanes_visible == n, "live %dx%d n=%d: %d stage rows, %d lanes", cols, rows, n,
               l->stage_rows, l->lanes_visible);
    const bool steps_aside = stacked && compact_pair <= body && compact_pair > body - (body / 4 > 6 ? body / 4 : 6);
    expect(s, l->loss_visible == (show_loss && !steps_aside), "live %dx%d n=%d: loss_visible %d", cols, rows, n,
           l->loss_visible);
    expect(s, l->loss_beside == (show_loss && cols >= LAYOUT_WIDE_COLS), "live %dx%d n=%d: loss_beside", cols, rows, n);
    if (l->loss_visible) expect(s, l->loss.h >= 6 && l->loss.w >= 30, "live %dx%d n=%d: loss %dx%d too small", cols, rows, n, l->loss.w, l->loss.h);
    // Stacked with both scrolling, the two panels show the same ranks.
    if (show_loss && !l->loss_beside && l->stages_scroll)
        expect(s, l->stage_rows == l->lanes_visible, "live %dx%d n=%d: %d stage rows vs %d lanes", cols, rows, n, l->stage_rows,
               l->lanes_visible);
    // Nobody hidden while a compact panel could show them: a panel that scrolls has already
    // dropped its heading (stages) or axis (stacked timeline).
    expect(s, !l->stages_scroll || !l->stages_heading, "live %dx%d n=%d: stages scroll with headings on", cols, rows, n);
    expect(s, l->loss_beside || !l->timeline_scrolls || !l->timeline_axis, "live %dx%d n=%d: timeline scrolls with its axis",
           cols, rows, n);
    expect(s, l->stage_list.h == layout_inner(l->stages).h - (l->stages_heading ? 1 : 0) &&
                  l->lanes.h == layout_inner(l->timeline).h - (l->timeline_axis ? 1 : 0),
           "live %dx%d n=%d: heading and axis rows", cols, rows, n);
}

static void sweep_live(void) {
    Sweep s = {0, 0};
    for (int k = 0; k < N_STAGE_COUNTS; k++)
        for (int loss = 0; loss < 4; loss++)   // bit 0: the loss panel, bit 1: the sample panel
            for (int cols = COLS_MIN; cols <= COLS_MAX; cols++) {
                int prev_rows = 0, prev_lanes = 0; // growing the terminal never shows fewer ranks
                bool prev_shown = false;
                for (int rows = ROWS_MIN; rows <= ROWS_MAX; rows++) {
                    int n = STAGE_COUNTS[k];
                    const bool sample = loss & 2;
                    LiveLayout l, plain;
                    int rc = layout_live_sample(cols, rows, n, loss & 1, sample, &l);
                    layout_live(cols, rows, n, loss & 1, &plain);
                    const bool sample_shown = !layout_empty(&l.sample);
                    bool small = cols < LAYOUT_LIVE_MIN_W || rows < LAYOUT_LIVE_MIN_H;
                    expect(&s, rc == (small ? 1 : 0) && l.too_small == small, "live %dx%d: rc %d", cols, rows, rc);
                    if (small) {
                        expect_notice(&s, "live", cols, rows, l.notice, LAYOUT_LIVE_MIN_W, LAYOUT_LIVE_MIN_H);
                        continue;
                    }
                    Panel p[] = {{"header", l.header, 1},   {"stages", l.stages, 1}, {"timeline", l.timeline, 1},
                                 {"loss", l.loss, l.loss_visible}, {"sample", l.sample, sample_shown},
                                 {"keybar", l.keybar, 1},    {"notice", l.notice, 0}};
                    expect_tiling(&s, "live", cols, rows, p, 7);
                    expect_bars(&s, "live", cols, rows, l.header, l.keybar);
                    expect_live_counts(&s, cols, rows, n, loss & 1, &l);
                    // The sample panel: whole width, its rows, right above the key bar.
                    expect(&s, !sample_shown || (l.sample.w == cols && l.sample.h == LAYOUT_SAMPLE_H &&
                                                 l.sample.y + l.sample.h == l.keybar.y),
                           "live %dx%d n=%d: sample panel %d,%d %dx%d", cols, rows, n, l.sample.x, l.sample.y, l.sample.w,
                           l.sample.h);
                    // Asked for, it shows from its height on wherever it hides no rank: with few
                    // ranks always on a tall screen; it never shows a rank fewer than without it.
                    expect(&s, sample || !sample_shown, "live %dx%d n=%d: a sample panel nobody asked for", cols, rows, n);
                    expect(&s, !sample_shown || rows >= LAYOUT_SAMPLE_MIN_H, "live %dx%d n=%d: sample panel below %d rows",
                           cols, rows, n, LAYOUT_SAMPLE_MIN_H);
                    expect(&s, !sample || n > 4 || rows < 40 || sample_shown, "live %dx%d n=%d: no sample panel", cols, rows,
                           n);
                    expect(&s, l.stage_rows == plain.stage_rows && l.lanes_visible == plain.lanes_visible,
                           "live %dx%d n=%d: the sample panel hides ranks", cols, rows, n);
                    expect(&s, l.loss_visible == plain.loss_visible, "live %dx%d n=%d: the sample panel pushes the loss aside",
                           cols, rows, n);
                    // Where the sample panel unfolds, its rows come out of the pipeline's.
                    if (sample_shown && !prev_shown) prev_rows = prev_lanes = 0;
                    prev_shown = sample_shown;
                    expect(&s, l.stage_rows >= prev_rows && l.lanes_visible >= prev_lanes, "live %dx%d n=%d: fewer ranks than at %d rows",
                           cols, rows, n, rows - 1);
                    prev_rows = l.stage_rows;
                    prev_lanes = l.lanes_visible;
                }
            }
    CHECK(s.fails == 0, "live sweep: %ld of %ld checks failed", s.fails, s.checks);
}

static void expect_setup_counts(Sweep *s, int cols, int rows, int n, int lines, const SetupLayout *l) {
    Rect in = layout_inner(l->form);
    int want = lines < in.h ? lines : in.h;
    expect(s, l->form_rows >= 1 && l->form_rows == want && l->form_scrolls == (want < lines), "setup %dx%d: form_rows %d", cols,
           rows, l->form_rows);
    expect(s, inside(l->plan_lanes, layout_inner(l->plan)) && !layout_empty(&l->plan_lanes), "setup %dx%d n=%d: plan_lanes", cols,
           rows, n);
    // Axis and two summary rows fit under the lanes, inside the border.
    expect(s, l->plan_lanes.y + l->plan_lanes.h + 3 <= l->plan.y + l->plan.h - 1, "setup %dx%d n=%d: no room for plan summary",
           cols, rows, n);
    expect(s, l->lanes_visible >= 1 && l->lanes_visible * l->lane_h <= l->plan_lanes.h && l->plan_scrolls == (l->lanes_visible < n),
           "setup %dx%d n=%d: lanes", cols, rows, n);
    expect(s, l->plan_beside == (cols >= LAYOUT_SETUP_SIDE_COLS), "setup %dx%d: plan_beside", cols, rows);
}

static void sweep_setup(void) {
    static const int FORM_LINES[] = {1, 15, 40};
    Sweep s = {0, 0};
    for (int k = 0; k < N_STAGE_COUNTS; k++)
        for (int f = 0; f < 3; f++)
            for (int cols = COLS_MIN; cols <= COLS_MAX; cols++)
                for (int rows = ROWS_MIN; rows <= ROWS_MAX; rows++) {
                    SetupLayout l;
                    int rc = layout_setup(cols, rows, STAGE_COUNTS[k], FORM_LINES[f], &l);
                    bool small = cols < LAYOUT_SETUP_MIN_W || rows < LAYOUT_SETUP_MIN_H;
                    expect(&s, rc == (small ? 1 : 0) && l.too_small == small, "setup %dx%d: rc %d", cols, rows, rc);
                    if (small) {
                        expect_notice(&s, "setup", cols, rows, l.notice, LAYOUT_SETUP_MIN_W, LAYOUT_SETUP_MIN_H);
                        continue;
                    }
                    Panel p[] = {{"header", l.header, 1}, {"form", l.form, 1}, {"plan", l.plan, 1}, {"keybar", l.keybar, 1}};
                    expect_tiling(&s, "setup", cols, rows, p, 4);
                    expect_bars(&s, "setup", cols, rows, l.header, l.keybar);
                    expect_setup_counts(&s, cols, rows, STAGE_COUNTS[k], FORM_LINES[f], &l);
                }
    CHECK(s.fails == 0, "setup sweep: %ld of %ld checks failed", s.fails, s.checks);
}

static void sweep_history(void) {
    Sweep s = {0, 0};
    for (int filter = 0; filter < 2; filter++)
        for (int cols = COLS_MIN; cols <= COLS_MAX; cols++)
            for (int rows = ROWS_MIN; rows <= ROWS_MAX; rows++) {
                HistoryLayout l;
                int rc = layout_history(cols, rows, filter, &l);
                bool small = cols < LAYOUT_HISTORY_MIN_W || rows < LAYOUT_HISTORY_MIN_H;
                expect(&s, rc == (small ? 1 : 0) && l.too_small == small, "history %dx%d: rc %d", cols, rows, rc);
                if (small) {
                    expect_notice(&s, "history", cols, rows, l.notice, LAYOUT_HISTORY_MIN_W, LAYOUT_HISTORY_MIN_H);
                    continue;
                }
                Panel p[] = {{"header", l.header, 1}, {"table", l.table, 1},     {"detail", l.detail, 1},
                             {"filter", l.filter, filter}, {"keybar", l.keybar, 1}};
                expect_tiling(&s, "history", cols, rows, p, 5);
                expect_bars(&s, "history", cols, rows, l.header, l.keybar);
                expect(&s, !filter || (l.filter.y == rows - 2 && l.filter.h == 1), "history %dx%d: filter row", cols, rows);
                expect(&s, l.table_rows >= 2 && l.table_rows == l.table.h - 3, "history %dx%d: table_rows %d", cols, rows, l.table_rows);
                expect(&s, l.detail.h >= 8 && l.detail.w >= 30, "history %dx%d: detail %dx%d", cols, rows, l.detail.w, l.detail.h);
                expect(&s, l.detail_beside == (cols >= LAYOUT_WIDE_COLS), "history %dx%d: detail_beside", cols, rows);
            }
    CHECK(s.fails == 0, "history sweep: %ld of %ld checks failed", s.fails, s.checks);
}

// ---- key bar ----------------------------------------------------------------------------

// The live screen's bar (console/tui/tui_live.c), an htop-like one, odd keys, and one key.
static const KeyBarItem LIVE_KEYS[] = {{"F1", "Help", 0},   {"F2", "Setup", 1}, {"F3", "Live", 3},
                                       {"F4", "History", 1}, {"F5", "Pause", 0}, {"F6", "EMA", 2},
                                       {"F7", "Stop", 0},    {"F8", "Theme", 2}, {"F10", "Quit", 0}};
static const KeyBarItem HTOP_KEYS[] = {{"F1", "Help", 0},  {"F2", "Setup", 2},  {"F3", "History", 2}, {"F4", "Filter", 1},
                                       {"F5", "Pause", 0}, {"F6", "SortBy", 1}, {"F7", "EMA", 3},     {"F8", "Loss", 3},
                                       {"F9", "Stop", 0},  {"F10", "Quit", 0}};
static const KeyBarItem ODD_KEYS[] = {{"Enter", "Open", 0}, {"q", "Q", 1}, {"Tab", "NextPanel", 2}, {"/", "Search", 1},
                                      {"Esc", "", 1}};
static const KeyBarItem ONE_KEY[] = {{"F10", "Quit", 0}};

// Dropped before item i (labels on): every item that left the bar outranks (or equals and
// follows) every item that stayed.
static bool keybar_order_kept(const KeyBarItem *items, int n, const KeyBarSlot *slots) {
    for (int i = 0; i < n; i++) {
        if (slots[i].key_w) continue;
        for (int j = 0; j < n; j++) {
            if (!slots[j].key_w) continue;
            const int pi = items[i].priority, pj = items[j].priority;
            if (pi == 0 || pj > pi || (pj == pi && j > i)) return false;
        }
    }
    return true;
}

static void sweep_keybar_set(Sweep *s, const char *set, const KeyBarItem *items, int n) {
    KeyBarSlot slots[16];
    for (int bx = 0; bx <= 7; bx += 7)
        for (int w = 0; w <= 200; w++) {
            Rect bar = {bx, 3, w, 1};
            int shown = layout_keybar(&bar, items, n, slots);
            int end = bar.x;
            bool labels = false;
            expect(s, shown >= 0 && shown <= n, "%s w=%d: shown %d", set, w, shown);
            for (int i = 0; i < n; i++) {
                int iw = slots[i].key_w + slots[i].label_w, len = (int)strlen(items[i].label);
                if (!slots[i].key_w) {
                    expect(s, iw == 0, "%s w=%d: dropped item %d has width", set, w, i);
                    continue;
                }
                labels |= slots[i].label_w > 0;
                expect(s, slots[i].key_w == (int)strlen(items[i].key), "%s w=%d: key %d cut", set, w, i);
                expect(s, slots[i].label_w == 0 || slots[i].label_w == len, "%s w=%d: label %d cut to %d", set, w, i,
                       slots[i].label_w);
                expect(s, slots[i].x >= end && slots[i].x + iw <= bar.x + bar.w, "%s w=%d: item %d at %d+%d", set, w, i, slots[i].x, iw);
                expect(s, end == bar.x || slots[i].x == end + 1, "%s w=%d: not one blank before item %d", set, w, i);
                end = slots[i].x + iw;
            }
            if (labels) {
                expect(s, keybar_order_kept(items, n, slots), "%s w=%d: items left out of priority order", set, w);
                for (int i = 0; i < n; i++)
                    expect(s, items[i].priority > 0 || slots[i].key_w, "%s w=%d: priority-0 item %d off a labelled bar",
                           set, w, i);
            } else {
                for (int i = 0; i < shown; i++) expect(s, slots[i].key_w, "%s w=%d: keys only, but key %d missing", set, w, i);
            }
            // Every column: its item, or -1 in a gap, past the end, or off the bar.
            for (int x = bar.x - 2; x < bar.x + w + 3; x++) {
                int want = -1;
                for (int i = 0; i < n; i++)
                    if (slots[i].key_w && x >= slots[i].x && x < slots[i].x + slots[i].key_w + slots[i].label_w) want = i;
                int got = layout_keybar_hit(&bar, items, n, x);
                expect(s, got == want, "%s w=%d x=%d: hit %d, want %d", set, w, x, got, want);
            }
        }
}

static void test_keybar(void) {
    Sweep s = {0, 0};
    sweep_keybar_set(&s, "live", LIVE_KEYS, 9);
    sweep_keybar_set(&s, "htop", HTOP_KEYS, 10);
    sweep_keybar_set(&s, "odd", ODD_KEYS, 5);
    sweep_keybar_set(&s, "one", ONE_KEY, 1);
    CHECK(s.fails == 0, "key bar sweep: %ld of %ld checks failed", s.fails, s.checks);

    KeyBarSlot slots[10];
    Rect bar = {0, 23, 200, 1};
    CHECK(layout_keybar(&bar, HTOP_KEYS, 10, slots) == 10 && slots[2].label_w == 7, "wide bar shows full labels");
    CHECK(slots[1].x == 7 && layout_keybar_hit(&bar, HTOP_KEYS, 10, 6) == -1 && layout_keybar_hit(&bar, HTOP_KEYS, 10, 7) == 1,
          "F2 starts after 'F1Help' and a gap (x=%d)", slots[1].x);
    bar.w = LAYOUT_LIVE_MIN_W;
    CHECK(layout_keybar(&bar, LIVE_KEYS, 9, slots) == 7 && !slots[2].key_w && !slots[7].key_w && slots[3].label_w == 7,
          "60 columns: the live bar leaves out F3 Live and F8 Theme, the rest whole");
    bar.w = 30;
    CHECK(layout_keybar(&bar, HTOP_KEYS, 10, slots) == 4 && slots[0].label_w == 4 && slots[9].label_w == 4,
          "30 columns: the four priority-0 items");
    bar.w = 20;
    CHECK(layout_keybar(&bar, HTOP_KEYS, 10, slots) == 7 && slots[0].label_w == 0, "20 columns: keys only");
    bar.w = 10;
    CHECK(layout_keybar(&bar, HTOP_KEYS, 10, slots) == 3, "10 columns: F1 F2 F3");
    CHECK(layout_keybar(&bar, HTOP_KEYS, 0, slots) == 0 && layout_keybar_hit(&bar, HTOP_KEYS, 0, 0) == -1, "no items");
}

// ---- texts ------------------------------------------------------------------------------

// The stage row's columns tile the panel's inside and hold their texts and headings, for
// every width from the minimum screen's up.
static void sweep_stage_columns(void) {
    Sweep s = {0, 0};
    for (int width = LAYOUT_LIVE_MIN_W - 2; width <= COLS_MAX - 2; width++)
        for (int rank_w = 1; rank_w <= 4; rank_w++)
            for (int layers_w = 1; layers_w <= 40; layers_w++) {
                StageColumns c;
                layout_stage_columns(width, rank_w, layers_w, &c);
                int x = 0;
                for (int k = 0; k < STAGE_COLS; k++) {
                    expect(&s, c.x[k] == x, "stage cols w=%d: column %d at %d, want %d", width, k, c.x[k], x);
                    x += c.w[k];
                    const int head = (int)strlen(layout_stage_heading((StageCol)k));
                    if (c.w[k] && k != STAGE_COL_BAR)
                        expect(&s, head + 1 <= c.w[k], "stage cols w=%d: heading %d does not fit %d", width, k, c.w[k]);
                }
                expect(&s, x == width, "stage cols w=%d rank %d layers %d: %d columns used", width, rank_w, layers_w, x);
                expect(&s, c.w[STAGE_COL_BAR] >= LAYOUT_BAR_MIN && c.w[STAGE_COL_RANK] > rank_w &&
                               c.w[STAGE_COL_BUSY] > STAGE_NUM_W && c.w[STAGE_COL_WAIT] > STAGE_NUM_W,
                       "stage cols w=%d: a column too narrow", width);
                expect(&s, c.w[STAGE_COL_LAYERS] > layers_w || c.w[STAGE_COL_LAYERS] >= 8,
                       "stage cols w=%d: layers %d in %d", width, layers_w, c.w[STAGE_COL_LAYERS]);
            }
    CHECK(s.fails == 0, "stage column sweep: %ld of %ld checks failed", s.fails, s.checks);
}

// Wrapped lines fit and keep words whole; the bubble's text fits every width.
static void sweep_texts(void) {
    Sweep s = {0, 0};
    const char *msg = "the checkpoint is at step 500, the end of its 500-step run (give --steps N above 500 to go on)";
    const TuiBubble b = {0.5623, 0.2727, 0.0991, 0.0042, 0.1863};
    for (int width = 10; width <= COLS_MAX; width++) {
        TuiLine lines[32];
        const int n = tui_wrap(msg, width, lines, 32);
        int words = 0;
        for (int i = 0; i < n && i < 32; i++) {
            expect(&s, tui_text_width_n(msg + lines[i].start, lines[i].len) <= width, "wrap w=%d: line %d too wide", width, i);
            const char before = lines[i].start ? msg[lines[i].start - 1] : ' ', after = msg[lines[i].start + lines[i].len];
            expect(&s, before == ' ' && (after == ' ' || after == '\0'), "wrap w=%d: line %d cuts a word", width, i);
            for (int k = 0; k < lines[i].len; k++) words += msg[lines[i].start + k] == ' ';
        }
        expect(&s, words + n == 20, "wrap w=%d: %d words kept of 20", width, words + n);
        char text[256];
        const int len = tui_bubble_text(&b, width, text, sizeof text);
        expect(&s, len <= width && (width < 12 || len >= 12) && (int)strlen(text) == len, "bubble w=%d: %d columns", width,
               len);
    }
    CHECK(s.fails == 0, "text sweep: %ld of %ld checks failed", s.fails, s.checks);
    TuiLine l[4];
    const char *path = "see /a/very/long/path/that/cannot/fit";
    CHECK(tui_wrap(path, 12, l, 4) == 5 && l[1].len == 8 && !strncmp(path + l[1].start, "/a/very/", 8) &&
              !strncmp(path + l[3].start, "that/cannot/", 12),
          "a path breaks after its slashes");
    const int fit = tui_words_fit("stopping after this step (a checkpoint is written)", 30, 1);
    CHECK(fit == 27, "whole words before the ellipsis: %d", fit);
    const int fields[] = {7, 8, 20, 5};
    CHECK(tui_fields_fit(fields, 4, 2, 40) == 3 && tui_fields_fit(fields, 4, 2, 6) == 0, "fields that fit");
}

// ---- specific sizes ---------------------------------------------------------------------

static void test_live_examples(void) {
    LiveLayout l;
    CHECK(layout_live(200, 50, 4, true, &l) == 0 && l.loss_beside, "200x50: loss beside timeline");
    CHECK(l.loss.x == l.timeline.x + l.timeline.w && l.loss.y == l.timeline.y && l.loss.h == l.timeline.h,
          "200x50: loss right of the timeline, same rows");
    CHECK(l.header.h == 2 && l.stages.h == 7 && l.stage_rows == 4 && !l.stages_scroll, "200x50: 4 ranks, no scroll");
    CHECK(l.lanes_visible == 4 && l.lane_h == LAYOUT_LANE_H_MAX && !l.timeline_scrolls, "200x50: tall lanes (%d)", l.lane_h);

    CHECK(layout_live(80, 24, 4, true, &l) == 0 && !l.loss_beside && l.loss_visible, "80x24: loss stacked");
    CHECK(l.loss.y == l.timeline.y + l.timeline.h && l.stage_rows == 4 && l.lanes_visible == 4, "80x24: below the timeline");
    CHECK(layout_live(80, 24, 4, false, &l) == 0 && layout_empty(&l.loss) && l.timeline.y + l.timeline.h == 23,
          "80x24, loss hidden: the timeline reaches the key bar");

    CHECK(layout_live(80, 24, 64, true, &l) == 0 && l.stages_scroll && l.timeline_scrolls && l.stage_rows == l.lanes_visible,
          "80x24, 64 ranks: both scroll in step (%d, %d)", l.stage_rows, l.lanes_visible);
    CHECK(layout_live(120, 40, 64, true, &l) == 0 && l.stages.h <= (40 - 3) / 2 && l.lanes_visible >= 15,
          "120x40, 64 ranks: stages at most half, %d lanes", l.lanes_visible);
    CHECK(layout_live(200, 50, 4, false, &l) == 0 && l.timeline.w == 200 && l.lane_h == LAYOUT_LANE_H_MAX,
          "200x50, loss hidden: full-width timeline");

    CHECK(layout_live(60, 16, 1, true, &l) == 0 && l.header.h == 1 && l.stages.h == 4 && l.timeline.h == 4 && l.loss.h == 6,
          "60x16 is the minimum: every panel at its smallest");
    CHECK(layout_live(60, 16, 4, true, &l) == 0 && l.stage_rows == 4 && l.lanes_visible == 4 && !l.loss_visible,
          "60x16, 4 ranks: every rank shows, the loss panel steps aside (%d rows, %d lanes)", l.stage_rows,
          l.lanes_visible);
    CHECK(layout_live(60, 20, 4, true, &l) == 0 && l.stage_rows == 4 && l.lanes_visible == 4 && l.loss_visible,
          "60x20, 4 ranks: every rank and the loss panel");
    CHECK(layout_live(60, 20, 4, true, &l) == 0 && l.stage_rows == 4 && l.lanes_visible == 4 && !l.stages_heading &&
              !l.timeline_axis,
          "60x20, 4 ranks: compact panels show all four (%d, %d)", l.stage_rows, l.lanes_visible);
    CHECK(layout_live(80, 24, 4, true, &l) == 0 && l.stages_heading && l.timeline_axis, "80x24: headings and axis");
    CHECK(layout_live_sample(80, 24, 4, false, true, &l) == 0 && l.sample.h == LAYOUT_SAMPLE_H && l.sample.y == 19 &&
              l.timeline.y + l.timeline.h == 19 && l.stage_rows == 4,
          "80x24: the sample panel above the key bar, the timeline above it");
    CHECK(layout_live_sample(80, 24, 4, true, true, &l) == 0 && layout_empty(&l.sample) && l.stage_rows == 4,
          "80x24 with the loss panel: the sample panel folds away rather than hide rank 3");
    CHECK(layout_live_sample(80, 23, 4, true, true, &l) == 0 && layout_empty(&l.sample),
          "80x23: the sample panel folds away below %d rows", LAYOUT_SAMPLE_MIN_H);
    CHECK(layout_live_sample(120, 40, 4, true, true, &l) == 0 && l.sample.h == LAYOUT_SAMPLE_H && l.stage_rows == 4,
          "120x40: the sample panel and every rank");
    CHECK(layout_live(59, 16, 1, true, &l) == 1 && layout_live(60, 15, 1, true, &l) == 1, "59x16 and 60x15 are too small");
    char text[64];
    layout_too_small_text(LAYOUT_LIVE_MIN_W, LAYOUT_LIVE_MIN_H, text, sizeof text);
    CHECK(strcmp(text, "terminal too small (need 60x16)") == 0, "notice text: %s", text);
    CHECK(l.notice.y == 7 && l.notice.w == (int)strlen(text) && l.notice.x == (60 - l.notice.w) / 2, "60x15: notice centered");
    CHECK(layout_live(30, 10, 4, true, &l) == 1 && l.notice.h == 2 && l.notice.w == 18 && l.notice.y == 4,
          "30x10: the notice in two lines (%dx%d)", l.notice.w, l.notice.h);
}

static void test_other_examples(void) {
    SetupLayout s;
    CHECK(layout_setup(100, 30, 4, 15, &s) == 0 && s.plan_beside && s.form.w >= 32 && s.form.w <= 44, "100x30: form left");
    CHECK(s.form_rows == 15 && !s.form_scrolls && s.lanes_visible == 4, "100x30: whole form, all lanes");
    CHECK(layout_setup(80, 30, 4, 15, &s) == 0 && !s.plan_beside && s.plan.y == s.form.y + s.form.h, "80x30: plan below");
    CHECK(layout_setup(60, 16, 64, 15, &s) == 0 && s.form_scrolls && s.plan_scrolls, "60x16, 64 ranks: both scroll");

    HistoryLayout h;
    CHECK(layout_history(160, 40, false, &h) == 0 && h.detail_beside && h.table.w == 88, "160x40: detail beside");
    CHECK(layout_history(80, 24, true, &h) == 0 && !h.detail_beside && h.detail.h >= 8 && h.filter.y == 22,
          "80x24: detail below, filter above the key bar");
}

static void test_rect_helpers(void) {
    Rect r = {2, 3, 10, 4}, tiny = {0, 0, 2, 5};
    Rect in = layout_inner(r);
    CHECK(in.x == 3 && in.y == 4 && in.w == 8 && in.h == 2, "inner of 10x4");
    in = layout_inner(tiny);
    CHECK(layout_empty(&in), "inner of 2x5 is empty");
    CHECK(layout_contains(&r, 2, 3) && layout_contains(&r, 11, 6) && !layout_contains(&r, 12, 6) && !layout_contains(&r, 2, 7),
          "contains: edges");
    Rect n;
    CHECK(layout_too_small(0, 0, 60, 16, &n) && layout_empty(&n), "0x0: empty notice");
    CHECK(layout_too_small(5, 1, 60, 16, &n) && n.x == 0 && n.y == 0 && n.w == 5 && n.h == 1, "5x1: notice clipped");
    CHECK(layout_too_small(20, 8, 60, 16, &n) && n.h == 2 && n.w == 18, "20x8: two lines");
    CHECK(!layout_too_small(60, 16, 60, 16, &n), "exactly the minimum is not too small");
}

int main(void) {
    test_rect_helpers();
    test_live_examples();
    test_other_examples();
    test_keybar();
    sweep_live();
    sweep_setup();
    sweep_history();
    sweep_stage_columns();
    sweep_texts();
    return test_finish();
}
