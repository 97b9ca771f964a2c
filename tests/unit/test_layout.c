// console/tui/pure/layout: every screen at every terminal size from 20x8 to 400x120 and every stage
// count the console meets either reports "too small" with a centered notice, or tiles the
// terminal exactly with the panels it means to show; the key bar's hit test agrees with its
// placement at every width. Then a few sizes checked by hand against the pictures in
// layout.h.
#include <stdarg.h>
#include <string.h>

#include "console/tui/pure/layout.h"
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

static void expect_notice(Sweep *s, const char *screen, int cols, int rows, Rect n, int need_w, int need_h) {
    char text[64];
    int len = layout_too_small_text(need_w, need_h, text, sizeof text);
    int w = len < cols ? len : cols;
    expect(s, n.h == 1 && n.w == w, "%s %dx%d: notice %dx%d, text is %d wide", screen, cols, rows, n.w, n.h, len);
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
    expect(s, l->loss_visible == show_loss, "live %dx%d n=%d: loss_visible %d", cols, rows, n, l->loss_visible);
    expect(s, l->loss_beside == (show_loss && cols >= LAYOUT_WIDE_COLS), "live %dx%d n=%d: loss_beside", cols, rows, n);
    if (l->loss_visible) expect(s, l->loss.h >= 6 && l->loss.w >= 30, "live %dx%d n=%d: loss %dx%d too small", cols, rows, n, l->loss.w, l->loss.h);
    // Stacked with both scrolling, the two panels show the same ranks.
    if (show_loss && !l->loss_beside && l->stages_scroll)
        expect(s, l->stage_rows == l->lanes_visible, "live %dx%d n=%d: %d stage rows vs %d lanes", cols, rows, n, l->stage_rows,
               l->lanes_visible);
}

static void sweep_live(void) {
    Sweep s = {0, 0};
    for (int k = 0; k < N_STAGE_COUNTS; k++)
        for (int loss = 0; loss < 2; loss++)
            for (int cols = COLS_MIN; cols <= COLS_MAX; cols++) {
                int prev_rows = 0, prev_lanes = 0; // growing the terminal never shows fewer ranks
                for (int rows = ROWS_MIN; rows <= ROWS_MAX; rows++) {
                    int n = STAGE_COUNTS[k];
                    LiveLayout l;
                    int rc = layout_live(cols, rows, n, loss, &l);
                    bool small = cols < LAYOUT_LIVE_MIN_W || rows < LAYOUT_LIVE_MIN_H;
                    expect(&s, rc == (small ? 1 : 0) && l.too_small == small, "live %dx%d: rc %d", cols, rows, rc);
                    if (small) {
                        expect_notice(&s, "live", cols, rows, l.notice, LAYOUT_LIVE_MIN_W, LAYOUT_LIVE_MIN_H);
                        continue;
                    }
                    Panel p[] = {{"header", l.header, 1}, {"stages", l.stages, 1}, {"timeline", l.timeline, 1},
                                 {"loss", l.loss, loss},  {"keybar", l.keybar, 1}, {"notice", l.notice, 0}};
                    expect_tiling(&s, "live", cols, rows, p, 6);
                    expect_bars(&s, "live", cols, rows, l.header, l.keybar);
                    expect_live_counts(&s, cols, rows, n, loss, &l);
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

static const KeyBarItem HTOP_KEYS[] = {{"F1", "Help"},  {"F2", "Setup"},   {"F3", "History"}, {"F4", "Filter"},
                                       {"F5", "Pause"}, {"F6", "SortBy"}, {"F7", "EMA"},     {"F8", "Loss"},
                                       {"F9", "Stop"},  {"F10", "Quit"}};
static const KeyBarItem ODD_KEYS[] = {{"Enter", "Open"}, {"q", "Q"}, {"Tab", "NextPanel"}, {"/", "Search"}, {"Esc", ""}};
static const KeyBarItem ONE_KEY[] = {{"F10", "Quit"}};

static void sweep_keybar_set(Sweep *s, const char *set, const KeyBarItem *items, int n) {
    KeyBarSlot slots[16];
    for (int bx = 0; bx <= 7; bx += 7)
        for (int w = 0; w <= 200; w++) {
            Rect bar = {bx, 3, w, 1};
            int shown = layout_keybar(&bar, items, n, slots);
            int cut = -1, end = bar.x;
            expect(s, shown >= 0 && shown <= n, "%s w=%d: shown %d", set, w, shown);
            for (int i = 0; i < n; i++) {
                int iw = slots[i].key_w + slots[i].label_w, len = (int)strlen(items[i].label);
                if (i >= shown) {
                    expect(s, iw == 0, "%s w=%d: dropped item %d has width", set, w, i);
                    continue;
                }
                expect(s, slots[i].key_w == (int)strlen(items[i].key), "%s w=%d: key %d cut", set, w, i);
                expect(s, slots[i].x >= end && slots[i].x + iw <= bar.x + bar.w, "%s w=%d: item %d at %d+%d", set, w, i, slots[i].x, iw);
                expect(s, i == 0 || slots[i].x > end, "%s w=%d: no gap before item %d", set, w, i);
                // One cut for every label: the label's own length when shorter.
                if (slots[i].label_w < len) {
                    expect(s, cut < 0 || cut == slots[i].label_w, "%s w=%d: labels cut unevenly", set, w);
                    cut = slots[i].label_w;
                }
                end = slots[i].x + iw;
            }
            expect(s, cut <= 0 || cut >= LAYOUT_KEYBAR_MIN_LABEL, "%s w=%d: labels cut to %d", set, w, cut);
            // Every column: its item, or -1 in a gap, past the end, or off the bar.
            for (int x = bar.x - 2; x < bar.x + w + 3; x++) {
                int want = -1;
                for (int i = 0; i < shown; i++)
                    if (x >= slots[i].x && x < slots[i].x + slots[i].key_w + slots[i].label_w) want = i;
                int got = layout_keybar_hit(&bar, items, n, x);
                expect(s, got == want, "%s w=%d x=%d: hit %d, want %d", set, w, x, got, want);
            }
        }
}

static void test_keybar(void) {
    Sweep s = {0, 0};
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
    CHECK(layout_keybar(&bar, HTOP_KEYS, 10, slots) == 10 && slots[2].label_w >= LAYOUT_KEYBAR_MIN_LABEL,
          "all ten keys keep a label at the minimum width (label %d)", slots[2].label_w);
    bar.w = 30;
    CHECK(layout_keybar(&bar, HTOP_KEYS, 10, slots) == 10 && slots[0].label_w == 0, "30 columns: keys only");
    bar.w = 10;
    CHECK(layout_keybar(&bar, HTOP_KEYS, 10, slots) == 3, "10 columns: F1 F2 F3");
    CHECK(layout_keybar(&bar, HTOP_KEYS, 0, slots) == 0 && layout_keybar_hit(&bar, HTOP_KEYS, 0, 0) == -1, "no items");
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
    CHECK(layout_live(59, 16, 1, true, &l) == 1 && layout_live(60, 15, 1, true, &l) == 1, "59x16 and 60x15 are too small");
    char text[64];
    layout_too_small_text(LAYOUT_LIVE_MIN_W, LAYOUT_LIVE_MIN_H, text, sizeof text);
    CHECK(strcmp(text, "terminal too small (need 60x16)") == 0, "notice text: %s", text);
    CHECK(l.notice.y == 7 && l.notice.w == (int)strlen(text) && l.notice.x == (60 - l.notice.w) / 2, "60x15: notice centered");
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
    return test_finish();
}
