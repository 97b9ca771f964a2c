// The console's pure chart, plan and bubble helpers (console/tui/pure/tui_chart.c, tui_plan.c,
// tui_bubble.c): Gantt rasterization, utilization bars, EMA, the fixed-memory loss series,
// braille plotting, layer ranges, number formats, the plan the setup screen previews, and the
// bubble's parts as text (pptrain_console_pure).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "console/tui/pure/tui_bubble.h"
#include "console/tui/pure/tui_chart.h"
#include "console/tui/pure/tui_plan.h"
#include "engine/partition.h"
#include "engine/schedule/schedule.h"
#include "tests/unit/test_util.h"

static void test_cell_kinds(void) {
    CHECK(tui_cell_kind(ACT_F) == TUI_CELL_F && tui_cell_kind(ACT_B) == TUI_CELL_B, "F, B");
    CHECK(tui_cell_kind(ACT_I) == TUI_CELL_I && tui_cell_kind(ACT_W) == TUI_CELL_W, "I, W");
    CHECK(tui_cell_kind(ACT_SEND_F) == TUI_CELL_COMM && tui_cell_kind(ACT_RECV_B) == TUI_CELL_COMM, "comm");
    const char want[] = ".FBIW-";
    for (int k = 0; k < TUI_CELL_KINDS; k++)
        CHECK(tui_cell_char((TuiCellKind)k) == want[k], "char of kind %d", k);
}

static void test_gantt(void) {
    const TuiEvent ev[] = {{0, 2, TUI_CELL_F, 0, 3}, {2, 6, TUI_CELL_B, 0, 3}, {6.9f, 7, TUI_CELL_COMM, 0, 4}};
    TuiGanttCell c[8];
    tui_gantt_raster(ev, 3, 0.0, 1.0, 8, c);
    const char want[] = "FFBBBB..";
    for (int k = 0; k < 8; k++) CHECK(tui_cell_char((TuiCellKind)c[k].kind) == want[k], "unit 1, column %d", k);
    CHECK(c[0].start && !c[1].start && c[2].start && !c[3].start, "block starts");
    CHECK(c[1].mb == 3 && c[5].mb == 3 && c[6].mb == -1, "microbatches: %d %d %d", c[1].mb, c[5].mb, c[6].mb);
    // Coarser: column 0 holds F 2 and B 2 (a tie goes to the first kind), column 1 B 2 and 2 idle.
    tui_gantt_raster(ev, 3, 0.0, 4.0, 2, c);
    CHECK(c[0].kind == TUI_CELL_F && c[1].kind == TUI_CELL_B, "unit 4: %d %d", c[0].kind, c[1].kind);
    // Idle wins a column only when it covers more than any one kind; an action that would
    // then show nowhere keeps the column of its middle.
    const TuiEvent over = {0, 1.2f, TUI_CELL_F, 0, 0};
    tui_gantt_raster(&over, 1, 0.0, 1.0, 2, c);
    CHECK(c[0].kind == TUI_CELL_F && c[1].kind == TUI_CELL_IDLE, "the tail of an action in a long column is idle");
    const TuiEvent short_f = {0, 0.2f, TUI_CELL_F, 0, 0};
    tui_gantt_raster(&short_f, 1, 0.0, 1.0, 1, c);
    CHECK(c[0].kind == TUI_CELL_F && c[0].start, "a short action alone in a long column still shows");
    // Events outside the window, reversed or unsorted, and an offset origin.
    const TuiEvent odd[] = {{-5, -1, TUI_CELL_F, 0, 0}, {10, 20, TUI_CELL_B, 0, 1}, {3, 4, TUI_CELL_W, 0, 2},
                            {1, 2, TUI_CELL_I, 0, 5}};
    tui_gantt_raster(odd, 4, 1.0, 1.0, 4, c);
    CHECK(c[0].kind == TUI_CELL_I && c[1].kind == TUI_CELL_IDLE && c[2].kind == TUI_CELL_W &&
              c[3].kind == TUI_CELL_IDLE, "origin 1: %d %d %d %d", c[0].kind, c[1].kind, c[2].kind, c[3].kind);
    tui_gantt_raster(odd, 4, 0.0, 1.0, 0, c);   // width 0: nothing written, no crash
}

// Labels say the action and its microbatch; an action narrower than a cell still shows.
static void test_gantt_labels(void) {
    const TuiEvent ev[] = {{0, 2, TUI_CELL_F, 0, 3}, {2, 6, TUI_CELL_B, 0, 3}, {6.9f, 7, TUI_CELL_COMM, 0, 4}};
    TuiGanttCell c[16];
    char text[17];
    tui_gantt_raster(ev, 3, 0.0, 1.0, 8, c);
    tui_gantt_text(c, 8, text);
    CHECK(strcmp(text, "F3B3BB..") == 0, "inline microbatches: %s", text);
    tui_gantt_labels(c, 8, text);
    CHECK(strcmp(text, "  B3    ") == 0, "labels with a blank between them: '%s'", text);
    tui_gantt_raster(ev, 3, 0.0, 0.5, 16, c);
    tui_gantt_labels(c, 16, text);
    CHECK(strcmp(text, "F3  B3          ") == 0, "zoomed in, both labelled: '%s'", text);
    // F of microbatch 1 takes 0.3 of a cell, B the rest of four: F keeps a cell, B three.
    const TuiEvent thin[] = {{0, 0.3f, TUI_CELL_F, 0, 1}, {0.3f, 4, TUI_CELL_B, 0, 1}, {4.2f, 4.4f, TUI_CELL_W, 0, 2}};
    tui_gantt_raster(thin, 3, 0.0, 1.0, 6, c);
    tui_gantt_text(c, 6, text);
    CHECK(strcmp(text, "FB1BW.") == 0, "every action visible: %s", text);
    CHECK(c[0].mb == 1 && c[1].start && c[4].mb == 2 && c[4].start, "the rescued cells carry their microbatch");
    // More actions than cells: each still gets a cell while one is free, none is stacked.
    TuiEvent many[8];
    for (int i = 0; i < 8; i++) many[i] = (TuiEvent){i * 0.25f, i * 0.25f + 0.2f, TUI_CELL_F, 0, i};
    tui_gantt_raster(many, 8, 0.0, 1.0, 2, c);
    CHECK(c[0].kind == TUI_CELL_F && c[1].kind == TUI_CELL_F, "two cells for eight actions: both used");
}

// Compact labels name each block's own action (issue 29): four forwards of 2.24 cells each read
// F0F1F2F3, not F0F1F1F2 (a block took the microbatch of the action before it, which covers
// more of the block's first cell); and a rank's two virtual stages differ in case, so its
// forwards of one microbatch on stage 0 and stage 4 read F1f1, not F1F1.
static void test_gantt_compact_labels(void) {
    TuiEvent four[4];
    for (int i = 0; i < 4; i++) four[i] = (TuiEvent){2.24f * i, 2.24f * (i + 1), TUI_CELL_F, 0, i};
    TuiGanttCell c[16];
    char text[17];
    tui_gantt_raster(four, 4, 0.0, 1.0, 9, c);
    tui_gantt_text(c, 9, text);
    CHECK(strcmp(text, "F0F1F2F3F") == 0, "each block labelled with its own microbatch: %s", text);
    const TuiEvent virt[] = {{0, 2, TUI_CELL_F, 0, 1}, {2, 4, TUI_CELL_F, 4, 1}, {4, 8, TUI_CELL_B, 4, 1},
                             {8, 12, TUI_CELL_B, 0, 1}};
    tui_gantt_raster(virt, 4, 0.0, 1.0, 12, c);
    tui_gantt_text(c, 12, text);
    CHECK(strcmp(text, "F1f1b1bbB1BB") == 0, "a rank's second stage in lower case: %s", text);
    tui_gantt_labels(c, 12, text);
    CHECK(strcmp(text, "    b1  B1  ") == 0, "labels keep the case (f1 has no room before b1): '%s'", text);
}

static void test_bars(void) {
    int b, c, i;
    for (int w = 0; w <= 40; w++) {
        tui_bar_split(3.0, 1.0, 2.0, w, &b, &c, &i);
        CHECK(b + c + i == w && b >= 0 && c >= 0 && i >= 0, "width %d: %d %d %d", w, b, c, i);
    }
    tui_bar_split(3.0, 1.0, 2.0, 12, &b, &c, &i);
    CHECK(b == 6 && c == 2 && i == 4, "12 cells: %d %d %d", b, c, i);
    tui_bar_split(0, 0, 0, 10, &b, &c, &i);
    CHECK(b == 0 && c == 0 && i == 10, "nothing measured: all idle");
    tui_bar_split(5, 0, 0, 10, &b, &c, &i);
    CHECK(b == 10 && c == 0 && i == 0, "all busy");
    tui_bar_split(NAN, -1, 4, 10, &b, &c, &i);
    CHECK(b + c + i == 10, "NaN and negative parts");
}

static void test_ema(void) {
    const float y[] = {2, 2, NAN, 2, 4};
    float out[5];
    tui_ema(y, 5, 0.5, out);
    CHECK(out[0] == 2 && out[1] == 2 && out[2] == 2 && out[3] == 2 && out[4] == 3, "EMA %g %g %g %g %g", out[0],
          out[1], out[2], out[3], out[4]);
    const float lead_nan[] = {NAN, 1};
    tui_ema(lead_nan, 2, 0.1, out);
    CHECK(isnan(out[0]) && out[1] == 1, "a leading NaN");
    CHECK_NEAR(tui_ema_alpha(0.5, 1), 0.5, 1e-15, "stride 1");
    CHECK_NEAR(tui_ema_alpha(0.5, 2), 0.75, 1e-15, "stride 2: two steps of 0.5");
    float lo, hi;
    CHECK(tui_series_range(y, 5, &lo, &hi) && lo == 2 && hi == 4, "range %g..%g", lo, hi);
    const float none[] = {NAN, INFINITY};
    CHECK(!tui_series_range(none, 2, &lo, &hi), "no finite values");
}

static void test_series(void) {
    static TuiSeries s, copy;
    tui_series_reset(&s);
    const int steps = 5 * TUI_SERIES_CAP + 7;
    for (int k = 1; k <= steps; k++) tui_series_push(&s, k + 10, k);
    CHECK(s.n <= TUI_SERIES_CAP && s.n >= TUI_SERIES_CAP / 2, "points %d", s.n);
    CHECK(s.stride == 8, "stride %d", s.stride);
    CHECK(s.n * s.stride + s.acc_n == steps, "every step counted: %d x %d + %d", s.n, s.stride, s.acc_n);
    CHECK(s.first_step == 11, "first step %d", s.first_step);
    // Point j averages steps j*stride+1 .. (j+1)*stride of the values pushed (k).
    for (int j = 0; j < s.n; j += 97)
        CHECK_NEAR(s.y[j], j * s.stride + (s.stride + 1) / 2.0, 1e-3, "point mean");
    static float pts[TUI_SERIES_CAP + 1];
    const int n = tui_series_points(&s, pts, TUI_SERIES_CAP + 1);
    CHECK(n == s.n + (s.acc_n > 0), "points with the partial one: %d", n);
    CHECK(tui_series_points(&s, pts, 3) == 3, "capped");
    tui_series_copy(&copy, &s);
    CHECK(copy.n == s.n && copy.stride == s.stride && copy.acc_n == s.acc_n && copy.y[s.n - 1] == s.y[s.n - 1],
          "copy");
}

static int bits_set(const uint8_t *cells, int n) {
    int total = 0;
    for (int i = 0; i < n; i++)
        for (int b = 0; b < 8; b++) total += (cells[i] >> b) & 1;
    return total;
}

static void test_braille(void) {
    CHECK(tui_braille_bit(0, 0) == 0x01 && tui_braille_bit(0, 3) == 0x40, "left column bits");
    CHECK(tui_braille_bit(1, 0) == 0x08 && tui_braille_bit(1, 3) == 0x80, "right column bits");
    uint8_t cells[3 * 2];
    memset(cells, 0, sizeof cells);
    const float rise[] = {0, 1};
    tui_braille_plot(rise, 2, 0, 1, 3, 2, cells);
    CHECK(cells[3] & 0x40, "the first point: bottom-left dot");
    CHECK(cells[2] & 0x08, "the last point: top-right dot");
    CHECK(bits_set(cells, 6) == 8, "a diagonal over 6 x 8 dots sets 8: %d", bits_set(cells, 6));
    memset(cells, 0, sizeof cells);
    const float flat[] = {5, 5, 5};
    tui_braille_plot(flat, 3, 5, 5, 3, 2, cells);
    CHECK(bits_set(cells, 6) == 6 && cells[3] == (0x01 | 0x08), "a flat series on the middle row");
    memset(cells, 0, sizeof cells);
    const float wild[] = {-100, NAN, 100, 0.5f};
    tui_braille_plot(wild, 4, 0, 1, 3, 2, cells);   // clamped, a gap at the NaN: stays in the grid
    CHECK(bits_set(cells, 6) > 0, "clamped points drawn");
    tui_braille_plot(wild, 4, 0, 1, 0, 0, cells);   // empty grid: nothing written
}

static void test_layers(void) {
    const int layers[] = {1, 2, 3, 2}, plain[] = {0, 1, 2, 3};
    char buf[32];
    tui_layer_ranges(layers, plain, 4, 2, buf, sizeof buf);
    CHECK(!strcmp(buf, "3-5"), "plain rank 2: %s", buf);
    tui_layer_ranges(layers, plain, 4, 0, buf, sizeof buf);
    CHECK(!strcmp(buf, "0"), "one layer: %s", buf);
    const int ones[] = {1, 1, 1, 1, 1, 1, 1, 1}, v_map[] = {0, 1, 2, 3, 3, 2, 1, 0};
    tui_layer_ranges(ones, v_map, 8, 0, buf, sizeof buf);
    CHECK(!strcmp(buf, "0,7"), "zb-v rank 0: %s", buf);
    tui_layer_ranges(ones, v_map, 8, 3, buf, sizeof buf);
    CHECK(!strcmp(buf, "3-4"), "zb-v rank 3 merges adjacent stages: %s", buf);
    tui_layer_ranges(layers, plain, 4, 9, buf, sizeof buf);
    CHECK(!strcmp(buf, "-"), "a rank with no stage: %s", buf);
    const int unknown[] = {2, -1};
    tui_layer_ranges(unknown, plain, 2, 0, buf, sizeof buf);
    CHECK(!strcmp(buf, "?"), "unknown counts: %s", buf);
    char tiny[4];
    const int many[] = {1, 1, 1, 1, 1, 1}, loop[] = {0, 1, 0, 1, 0, 1};
    tui_layer_ranges(many, loop, 6, 0, tiny, sizeof tiny);
    CHECK(strlen(tiny) < sizeof tiny, "truncated safely: %s", tiny);
}

static void test_formats(void) {
    char b[32];
    tui_fmt_bytes(512, b, sizeof b);
    CHECK(!strcmp(b, "512B"), "%s", b);
    tui_fmt_bytes(3.4 * 1024, b, sizeof b);
    CHECK(!strcmp(b, "3.4K"), "%s", b);
    tui_fmt_bytes(12.0 * 1048576, b, sizeof b);
    CHECK(!strcmp(b, "12M"), "%s", b);
    tui_fmt_bytes(NAN, b, sizeof b);
    CHECK(!strcmp(b, "-"), "%s", b);
    tui_fmt_count(980, b, sizeof b);
    CHECK(!strcmp(b, "980"), "%s", b);
    tui_fmt_count(38200, b, sizeof b);
    CHECK(!strcmp(b, "38.2k"), "%s", b);
    tui_fmt_count(329152, b, sizeof b);
    CHECK(!strcmp(b, "329k"), "%s", b);
    tui_fmt_count(2.5e7, b, sizeof b);
    CHECK(!strcmp(b, "25.0M"), "%s", b);
    tui_fmt_duration(42, b, sizeof b);
    CHECK(!strcmp(b, "0:42"), "%s", b);
    tui_fmt_duration(725, b, sizeof b);
    CHECK(!strcmp(b, "12:05"), "%s", b);
    tui_fmt_duration(3720, b, sizeof b);
    CHECK(!strcmp(b, "1h02m"), "%s", b);
    tui_fmt_duration(NAN, b, sizeof b);
    CHECK(!strcmp(b, "--:--"), "%s", b);
    CHECK(tui_contains_ci("Interleaved-1F1B", "1f1b") && tui_contains_ci("x", "") && !tui_contains_ci(NULL, "a") &&
              !tui_contains_ci("zb-h1", "zb-v"), "substring search");
}

static void test_plan(void) {
    TuiPlan p;
    Error err;
    ModelConfig tiny;
    CHECK(model_config_preset(&tiny, "tiny", &err) == 0, "tiny preset");
    CHECK(tui_plan_build("1f1b", 4, 8, 0, &tiny, 64, &p, &err) == 0, "1f1b builds");
    CHECK_NEAR(p.bubble, 3.0 / 11.0, 1e-12, "1f1b P4 M8 bubble");
    CHECK(p.P == 4 && p.S == 4 && p.M == 8, "shape %d %d %d", p.P, p.S, p.M);
    int layers = 0;
    for (int s = 0; s < p.S; s++) layers += p.layers[s];
    CHECK(layers == 8 && p.stage_rank[3] == 3 && p.peak_act[0] == 4, "layers, owners, peak");
    int train_split[4];  // the console shows the split train makes: model costs, not flat ones
    CHECK(partition_balance_model(&tiny, 64, 4, train_split, &err) == 0 && !memcmp(train_split, p.layers, sizeof train_split),
          "plan split %d,%d,%d,%d is train's", p.layers[0], p.layers[1], p.layers[2], p.layers[3]);
    for (int r = 0; r < p.P; r++) CHECK(p.ev_off[r + 1] - p.ev_off[r] == 16, "rank %d: 8 F + 8 B", r);
    for (int i = 0; i < p.ev_off[p.P]; i++)
        CHECK(p.ev[i].t1 > p.ev[i].t0 && p.ev[i].t1 <= p.makespan + 1e-6, "event times");
    char path[] = "/tmp/pptrain-tui-plan-XXXXXX.csv";
    const int fd = mkstemps(path, 4);
    FILE *f = fdopen(fd, "w");
    Schedule *s = schedule_build("1f1b", 4, 8, 0, &err);
    schedule_write_csv(s, f, false);
    fclose(f);
    schedule_free(s);
    TuiPlan q;
    CHECK(tui_plan_build(path, 99, 99, 7, &tiny, 64, &q, &err) == 0, "a CSV brings its own shape: %s", err.msg);
    CHECK(q.P == 4 && q.M == 8 && fabs(q.bubble - p.bubble) < 1e-12, "the CSV plans as the generator");
    tui_plan_free(&q);
    unlink(path);
    tui_plan_free(&p);
    CHECK(tui_plan_build("zb-v", 2, 4, 0, &tiny, 64, &p, &err) == 0, "zb-v builds");
    bool split = false;
    for (int i = 0; i < p.ev_off[p.P]; i++) split |= p.ev[i].kind == TUI_CELL_W;
    CHECK(p.S == 4 && split && p.stage_rank[3] == 0, "zb-v: 4 stages, W actions, V map");
    tui_plan_free(&p);
    CHECK(tui_plan_build("1f1b", 16, 8, 0, &tiny, 64, &p, &err) == -1 && strstr(err.msg, "layers"), "too many stages: %s",
          err.msg);
    CHECK(tui_plan_build("2f2b", 4, 8, 0, &tiny, 64, &p, &err) == -1, "an unknown schedule");
    CHECK(tui_plan_build("missing.csv", 4, 8, 0, &tiny, 64, &p, &err) == -1 && strstr(err.msg, "missing.csv"),
          "a missing CSV: %s", err.msg);
    tui_plan_free(&p);
}

// The parts, rounded to tenths, always add up to the measured figure as printed; the text
// keeps the richest form that fits and never cuts one.
static void test_bubble(void) {
    // 0.686 = 0.27273 + 0.17876 + 0.00142 + 0.23309: rounded one by one they print 27.3 + 17.9
    // + 0.1 + 23.3 = 68.6; the largest remainders decide.
    TuiBubble b = {0.68600, 0.27273, 0.17876, 0.00142, 0.23309};
    long t[5];
    tui_bubble_tenths(&b, t);
    CHECK(t[0] == 686 && t[1] + t[2] + t[3] + t[4] == 686, "sum %ld + %ld + %ld + %ld vs %ld", t[1], t[2], t[3], t[4],
          t[0]);
    CHECK(t[1] == 273 && t[2] == 179 && t[3] == 1 && t[4] == 233, "largest remainders: %ld %ld %ld %ld", t[1], t[2],
          t[3], t[4]);
    // Every split of a random measured figure into random parts (some negative) adds up.
    srand(7);
    int bad = 0;
    for (int k = 0; k < 100000; k++) {
        double p[4], sum = 0;
        for (int i = 0; i < 4; i++) sum += p[i] = (rand() / (double)RAND_MAX - 0.2) * 0.4;
        TuiBubble r = {sum, p[0], p[1], p[2], p[3]};
        tui_bubble_tenths(&r, t);
        bad += t[1] + t[2] + t[3] + t[4] != t[0];
        for (int i = 0; i < 4; i++) bad += labs(t[1 + i] - lround(1000 * p[i])) > 1;
    }
    CHECK(bad == 0, "%d random splits do not add up or stray beyond a tenth", bad);
    const TuiBubble unknown = {0.5, NAN, NAN, NAN, NAN};
    tui_bubble_tenths(&unknown, t);
    CHECK(t[0] == 0 && t[1] == 0 && t[4] == 0, "parts not measured: nothing to round");
    char text[256], v[16];
    tui_fmt_tenths(-4, v, sizeof v);
    CHECK(strcmp(v, "-0.4") == 0, "negative tenths: %s", v);
    CHECK(tui_bubble_text(&b, 200, text, sizeof text) > 0 &&
              strcmp(text, "bubble 68.6% = 27.3 ideal + 17.9 imbalance + 0.1 transfer + 23.3 contention") == 0,
          "long form: %s", text);
    CHECK(tui_bubble_text(&b, 62, text, sizeof text) == 62 &&
              strcmp(text, "bubble 68.6% = 27.3 ideal + 17.9 imbal + 0.1 xfer + 23.3 contn") == 0,
          "short labels, one word per part (issue 29): %s", text);
    CHECK(tui_bubble_text(&b, 40, text, sizeof text) > 0 && strcmp(text, "bubble 68.6% (27.3 ideal)") == 0,
          "narrow: %s", text);
    CHECK(tui_bubble_text(&b, 12, text, sizeof text) == 12 && strcmp(text, "bubble 68.6%") == 0, "narrower: %s", text);
    CHECK(tui_bubble_text(&b, 11, text, sizeof text) == 0 && text[0] == '\0', "too narrow for any form");
}

// Validation loss on the training loss's points: the line through the evaluations, each
// evaluation on its own point, gaps outside them.
static void test_overlay(void) {
    const int steps[] = {10, 20, 40};
    const float vals[] = {4.0f, 3.0f, 1.0f};
    float out[50];
    tui_series_overlay(steps, vals, 3, 1, 1, 50, out);   // one step a point: point i is step i + 1
    CHECK(isnan(out[8]) && out[9] == 4.0f && out[19] == 3.0f && out[39] == 1.0f && isnan(out[40]), "on the steps");
    CHECK(fabsf(out[14] - 3.5f) < 1e-6f && fabsf(out[29] - 2.0f) < 1e-6f, "between them, the line: %g %g", out[14],
          out[29]);
    tui_series_overlay(steps, vals, 3, 1, 4, 12, out);   // four steps a point: point i is steps 4i+1 .. 4i+4
    CHECK(fabsf(out[2] - 3.95f) < 1e-6f, "point 2 (steps 9-12) at 10.5: %g", out[2]);
    CHECK(fabsf(out[3] - 3.55f) < 1e-6f, "point 3 at 14.5: %g", out[3]);
    CHECK(fabsf(out[9] - 1.15f) < 1e-6f && isnan(out[10]) && isnan(out[1]), "point 9 at 38.5, gaps outside: %g %g",
          out[9], out[10]);
    const int one[] = {7};
    const float v1[] = {2.5f};
    tui_series_overlay(one, v1, 1, 1, 4, 3, out);
    CHECK(isnan(out[0]) && out[1] == 2.5f && isnan(out[2]), "a lone evaluation shows on its point");
}

int main(void) {
    test_cell_kinds();
    test_gantt();
    test_gantt_labels();
    test_gantt_compact_labels();
    test_bars();
    test_ema();
    test_series();
    test_braille();
    test_layers();
    test_formats();
    test_plan();
    test_bubble();
    test_overlay();
    return test_finish();
}
