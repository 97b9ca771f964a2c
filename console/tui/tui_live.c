// console/tui/tui_live: the live screen. Header (identity, progress), one row per pipeline rank
// (layers, a utilization bar, busy / transfer / wait ms, peak activation memory) under the
// measured bubble and its parts, a step's timeline as a Gantt chart (zoomable, the run's
// earlier steps a key away), and the loss curve. Draws only from app->view, the UI's copy of
// the run's snapshot, and from the kept timelines of earlier steps.
#define NCURSES_WIDECHAR 1
#include <curses.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/tui/pure/tui_sample.h"
#include "console/tui/pure/tui_text.h"
#include "console/tui/tui_app.h"
#include "console/tui/tui_draw.h"

static int min_i(int a, int b) { return a < b ? a : b; }
static int max_i(int a, int b) { return a > b ? a : b; }

#define TL_ZOOM_MAX 64

// ---- header -----------------------------------------------------------------------------------

static ThemeRole state_role(TuiRunState s) {
    switch (s) {
    case TUI_RUN_FAILED: return THEME_ERROR;
    case TUI_RUN_PAUSED:
    case TUI_RUN_STOPPING:
    case TUI_RUN_STOPPED: return THEME_WARNING;
    case TUI_RUN_RUNNING:
    case TUI_RUN_FINISHED: return THEME_TITLE;
    default: return THEME_DIM;
    }
}

static bool oversubscribed(const TuiView *v) { return v->host_cores > 0 && v->host_ranks > v->host_cores; }

// A header field: its text, role and priority (lower stays longer when the row is short).
typedef struct {
    char text[96];
    ThemeRole role;
    int priority;
} Field;

enum { MAX_FIELDS = 12, FIELD_GAP = 2 };

// Draws the fields that fit in w, chosen by priority and drawn in their order; returns the
// columns used.
static int draw_fields(int y, int x, int w, const Field *f, int n) {
    bool on[MAX_FIELDS] = {false};
    int used = 0;
    for (int p = 0; p <= 9; p++)
        for (int i = 0; i < n; i++) {
            if (f[i].priority != p || on[i]) continue;
            const int need = tui_text_width(f[i].text) + (used ? FIELD_GAP : 0);
            if (used + need <= w) on[i] = true, used += need;
        }
    int at = 0;
    for (int i = 0; i < n; i++) {
        if (!on[i]) continue;
        if (at) at += FIELD_GAP;
        at += tui_text(y, x + at, w - at, f[i].role, f[i].text);
    }
    return at;
}

static void add_field(Field *f, int *n, ThemeRole role, int priority, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void add_field(Field *f, int *n, ThemeRole role, int priority, const char *fmt, ...) {
    Field *x = &f[(*n)++];
    x->role = role;
    x->priority = priority;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->text, sizeof x->text, fmt, ap);
    va_end(ap);
}

// The run's identity, and the CPU oversubscription and kernels held below the CPU whenever
// they hold.
static int identity_fields(const TuiView *v, Field *f) {
    int n = 0;
    char params[16];
    tui_fmt_count(v->params, params, sizeof params);
    if (v->run_id > 0) add_field(f, &n, THEME_HEADER, 3, "run %lld", (long long)v->run_id);
    add_field(f, &n, THEME_HEADER, 1, "%.90s", v->schedule);
    add_field(f, &n, THEME_HEADER, 2, "P%d V%d D%d M%d", v->P, v->V, v->D, v->M);
    add_field(f, &n, THEME_HEADER, 4, "%.60s %s", v->model, params);
    add_field(f, &n, THEME_HEADER, 6, "B%d T%d", v->B, v->T);
    add_field(f, &n, THEME_HEADER, 7, "lr %g", v->lr_peak);
    add_field(f, &n, THEME_HEADER, 5, "%s %s", v->transport, v->device);
    if (oversubscribed(v)) add_field(f, &n, THEME_WARNING, 0, "%d ranks on %d cores", v->host_ranks, v->host_cores);
    // Products held below the CPU's widest kernels, at about half their speed, outrank the batch
    // shape and the learning rate (the setup screen shows those): at 120 columns it makes them
    // give way, not the device.
    if (v->blas_warning[0]) add_field(f, &n, THEME_WARNING, 5, "%s", v->blas_warning);
    return n;
}

// The columns the fields of priority 0 take, each with its gap: what nothing else may crowd out.
static int kept_width(const Field *f, int n) {
    int w = 0;
    for (int i = 0; i < n; i++)
        if (f[i].priority == 0) w += FIELD_GAP + tui_text_width(f[i].text);
    return w;
}

// "step 123/500 [====== 24% ======] loss ... ETA 0:21": the bar goes before the fields do.
static void draw_progress(const TuiView *v, int y, int x, int w) {
    char step[48], pct[16], tok[16], eta[16], gf[16];
    snprintf(step, sizeof step, "step %d/%d", v->step, v->steps_planned);
    const int sw = tui_text(y, x, w, THEME_HEADER, step);
    if (v->step <= 0) return;
    tui_fmt_count(v->tokens_per_s, tok, sizeof tok);
    tui_fmt_duration(tui_view_eta(v), eta, sizeof eta);
    tui_fmt_count(v->gflops, gf, sizeof gf);
    Field f[5] = {{"", THEME_HEADER, 0}, {"", THEME_HEADER, 2}, {"", THEME_HEADER, 4}, {"", THEME_HEADER, 3},
                  {"", THEME_HEADER, 1}};
    snprintf(f[0].text, 96, "loss %.4f", v->loss);
    snprintf(f[1].text, 96, "%s tok/s", tok);
    snprintf(f[2].text, 96, "%s GFLOP/s", gf);
    snprintf(f[3].text, 96, "%.1f ms/step", v->step_ms);
    snprintf(f[4].text, 96, "ETA %s", eta);
    int fw = 0;
    for (int i = 0; i < 5; i++) fw += tui_text_width(f[i].text) + (i ? FIELD_GAP : 0);
    const double frac = v->steps_planned > 0 ? (double)v->step / v->steps_planned : 0.0;
    snprintf(pct, sizeof pct, "%.0f%%", 100 * frac);
    const int bar = w - sw - fw - 4;
    if (bar >= 8) {
        tui_progress(y, x + sw + 1, bar, frac, pct);
        draw_fields(y, x + sw + bar + 3, w - sw - bar - 3, f, 5);
    } else {
        draw_fields(y, x + sw + 2, w - sw - 2, f, 5);
    }
}

// Two rows: identity (and a note on the right), then progress. One row: the state, step
// and loss first, then as much of the identity as fits.
static void draw_header(TuiApp *app, const Rect *h) {
    const TuiView *v = app->view;
    tui_fill(*h, THEME_HEADER);
    int x = tui_text(h->y, h->x, h->w, THEME_TITLE, v->read_only ? "pptrain watch " : "pptrain ");
    x += tui_text(h->y, h->x + x, h->w - x, state_role(v->state), tui_run_state_name(v->state));
    Field f[MAX_FIELDS];
    int n = 0;
    if (h->h < 2 && v->step > 0) {
        add_field(f, &n, THEME_HEADER, 0, "step %d/%d", v->step, v->steps_planned);
        add_field(f, &n, THEME_HEADER, 2, "loss %.4f", v->loss);
    }
    n += identity_fields(v, f + n);
    // A note (a passing message) takes the row's right end, but never the room of the fields
    // that must stay (the CPU's oversubscription, the step in one row).
    const int kept = kept_width(f, n);
    const int note = tui_app_header_note(app, h->y, h->x + x + kept, h->w - x - kept);
    draw_fields(h->y, h->x + x + FIELD_GAP, h->w - x - FIELD_GAP - note, f, n);
    if (h->h >= 2) draw_progress(v, h->y + 1, h->x, h->w);
}

// ---- stages ------------------------------------------------------------------------------------

static int first_visible(int selected, int n, int visible) {
    if (visible >= n) return 0;
    return max_i(0, min_i(selected - visible / 2, n - visible));
}

// "ranks 3-5 of 8" when a panel shows only some ranks, else "".
static void shown_ranks(int first, int visible, int n, char *buf, size_t size) {
    if (visible >= n) buf[0] = '\0';
    else snprintf(buf, size, "ranks %d-%d of %d (j/k)", first, first + visible - 1, n);
}

// The title: the bubble and its parts as wide as fits, the ranks shown when some are not.
static void stages_title(const TuiApp *app, const LiveLayout *L, char *buf, size_t size) {
    const TuiView *v = app->view;
    char ranks[64], bubble[256] = "";
    shown_ranks(first_visible(app->sel_rank, v->n_ranks, L->stage_rows), L->stage_rows, v->n_ranks, ranks,
                sizeof ranks);
    const int room = L->stages.w - 5 - (ranks[0] ? tui_text_width(ranks) + FIELD_GAP : 0) - 8;
    if (v->has_parts) tui_bubble_text(&v->parts, room, bubble, sizeof bubble);
    else if (v->has_bubble && room >= 16) snprintf(bubble, sizeof bubble, "bubble %.1f%%", 100 * v->bubble);
    snprintf(buf, size, "stages%s%s%s%s%s", bubble[0] ? "  " : "", bubble, ranks[0] ? "  " : "", ranks,
             v->read_only && bubble[0] ? "  (run means)" : "");
}

// The layers text of a row in its column: the list, else "N layers", else the count.
static void fit_layers(const char *layers, int w, char *buf, size_t size) {
    if (tui_text_width(layers) < w) {
        snprintf(buf, size, "%s", layers);
        return;
    }
    int count = 0, a, b;
    for (const char *p = layers; *p;) {
        const int got = sscanf(p, "%d-%d", &a, &b);
        count += got == 2 ? b - a + 1 : got == 1 ? 1 : 0;
        p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p);
    }
    snprintf(buf, size, "%d layers", count);
    if (tui_text_width(buf) >= w) snprintf(buf, size, "%d", count);
}

// "12.3", "12345", "1.2e+06": ms in STAGE_NUM_W columns.
static void fmt_ms(double ms, char *buf, size_t size) {
    if (isnan(ms)) snprintf(buf, size, "-");
    else if (ms < 1e4) snprintf(buf, size, "%.1f", ms);
    else if (ms < 1e7) snprintf(buf, size, "%.0f", ms);
    else snprintf(buf, size, "%.1e", ms);
}

// CPU % in STAGE_CPU_W columns, as htop: "99.5", "187", "-" when unknown.
static void fmt_cpu(double pct, char *buf, size_t size) {
    if (!isfinite(pct) || pct < 0) snprintf(buf, size, "-");
    else if (pct < 100.0) snprintf(buf, size, "%.1f", pct);
    else if (pct < 1e5) snprintf(buf, size, "%.0f", pct);
    else snprintf(buf, size, "9999+");
}

static void stages_heading(const StageColumns *c, int y, int x) {
    for (int k = 0; k < STAGE_COLS; k++) {
        if (!c->w[k]) continue;
        const char *head = layout_stage_heading((StageCol)k);
        if (k == STAGE_COL_BAR) {
            const char *bar = c->w[k] > 30 ? "utilization (busy xfer wait)" : c->w[k] > 12 ? "utilization" : "";
            tui_text(y, x + c->x[k], c->w[k] - 1, THEME_DIM, bar);
        } else if (k >= STAGE_COL_BUSY) {
            tui_text_right(y, x + c->x[k], c->w[k], THEME_DIM, head);
        } else {
            tui_text(y, x + c->x[k], c->w[k] - 1, THEME_DIM, head);
        }
    }
}

static void stage_row(const TuiApp *app, const StageColumns *c, int r, int y, int x) {
    const TuiView *v = app->view;
    const TuiRankRow *row = &v->rank[r];
    const ThemeRole base = r == app->sel_rank ? THEME_SELECTED : THEME_TEXT;
    char text[64];
    tui_textf(y, x, c->w[STAGE_COL_RANK] - 1, base, "%d", r);
    if (c->w[STAGE_COL_DEV]) tui_textf(y, x + c->x[STAGE_COL_DEV], c->w[STAGE_COL_DEV] - 1, base, "%.4s", v->device);
    fit_layers(row->layers, c->w[STAGE_COL_LAYERS], text, sizeof text);
    tui_text(y, x + c->x[STAGE_COL_LAYERS], c->w[STAGE_COL_LAYERS] - 1, base, text);
    const int xb = x + c->x[STAGE_COL_BAR], wb = c->w[STAGE_COL_BAR] - 1;
    if (isnan(row->busy_ms)) {
        tui_text_words(y, xb, wb, THEME_DIM, tui_run_state_live(v->state) ? "waiting for the first step" : "");
        return;
    }
    tui_util_bar(y, xb, wb, row->busy_ms, isnan(row->transfer_ms) ? 0.0 : row->transfer_ms, row->wait_ms);
    const double values[] = {row->busy_ms, row->transfer_ms, row->wait_ms};
    for (int k = STAGE_COL_BUSY; k <= STAGE_COL_WAIT; k++) {
        if (!c->w[k]) continue;
        fmt_ms(values[k - STAGE_COL_BUSY], text, sizeof text);
        tui_text_right(y, x + c->x[k], c->w[k], THEME_TEXT, text);
    }
    if (c->w[STAGE_COL_PEAK]) {
        tui_fmt_bytes(row->peak_bytes, text, sizeof text);
        tui_text_right(y, x + c->x[STAGE_COL_PEAK], c->w[STAGE_COL_PEAK], THEME_TEXT, text);
    }
    if (c->w[STAGE_COL_CPU]) {
        fmt_cpu(row->cpu_pct, text, sizeof text);
        tui_text_right(y, x + c->x[STAGE_COL_CPU], c->w[STAGE_COL_CPU], THEME_TEXT, text);
    }
    if (c->w[STAGE_COL_RSS]) {
        tui_fmt_bytes(row->rss_bytes, text, sizeof text);
        tui_text_right(y, x + c->x[STAGE_COL_RSS], c->w[STAGE_COL_RSS], THEME_TEXT, text);
    }
}

static void draw_stages(TuiApp *app, const LiveLayout *L) {
    const TuiView *v = app->view;
    char title[512];
    stages_title(app, L, title, sizeof title);
    tui_panel(L->stages, title, THEME_TITLE);
    const Rect in = layout_inner(L->stages);
    int layers_w = 1;
    for (int r = 0; r < v->n_ranks; r++) layers_w = max_i(layers_w, tui_text_width(v->rank[r].layers));
    char rank[16];
    StageColumns c;
    layout_stage_columns(in.w, snprintf(rank, sizeof rank, "%d", max_i(0, v->n_ranks - 1)), layers_w, &c);
    if (L->stages_heading) stages_heading(&c, in.y, in.x);
    const int first = first_visible(app->sel_rank, v->n_ranks, L->stage_rows);
    for (int k = 0; k < L->stage_rows && first + k < v->n_ranks; k++) stage_row(app, &c, first + k, L->stage_list.y + k, in.x);
}

// ---- timeline ------------------------------------------------------------------------------------

// The step the timeline shows: the latest (the view's) or a kept earlier one.
typedef struct {
    int step;
    bool planned;
    double span;
    const TuiEvent *ev;
    const int *ev_off;
} Shown;

static Shown shown_timeline(const TuiApp *app) {
    const TuiView *v = app->view;
    if (app->tl_step > 0 && app->tl_kept && app->tl_kept->step > 0)
        return (Shown){app->tl_kept->step, false, app->tl_kept->span_ms, app->tl_kept->ev, app->tl_kept->ev_off};
    return (Shown){v->timeline_step, v->timeline_planned, v->span_ms, v->ev, v->ev_off};
}

// The window of the step the timeline shows: [t0, t0 + span).
static void tl_window(const TuiApp *app, double span, double *t0, double *w) {
    *w = span / (app->tl_zoom > 0 ? app->tl_zoom : 1);
    *t0 = app->tl_pos * span;
}

static void timeline_title(const TuiApp *app, const LiveLayout *L, const Shown *s, char *buf, size_t size) {
    const TuiView *v = app->view;
    char ranks[64], what[160], zoom[32] = "";
    shown_ranks(first_visible(app->sel_rank, v->n_ranks, L->lanes_visible), L->lanes_visible, v->n_ranks, ranks,
                sizeof ranks);
    if (s->planned && !isnan(v->bubble_ideal))
        snprintf(what, sizeof what, "timeline: %.60s planned, bubble %.1f%% at F=1 B=2", v->schedule,
                 100 * v->bubble_ideal);
    else if (s->planned) snprintf(what, sizeof what, "timeline: %.60s planned", v->schedule);
    else if (app->tl_step > 0) snprintf(what, sizeof what, "timeline step %d of %d", s->step, v->timeline_step);
    else snprintf(what, sizeof what, "timeline step %d", s->step);
    if (app->tl_zoom > 1) snprintf(zoom, sizeof zoom, "x%d", app->tl_zoom);
    Field f[3] = {{"", THEME_TITLE, 0}, {"", THEME_TITLE, 1}, {"", THEME_TITLE, 2}};
    snprintf(f[0].text, sizeof f[0].text, "%.95s", what);
    snprintf(f[1].text, 96, "%s", ranks);
    snprintf(f[2].text, 96, "%s", zoom);
    int n = 0, used = 0;
    buf[0] = '\0';
    for (int i = 0; i < 3; i++) {
        const int w = tui_text_width(f[i].text);
        if (!w || used + w + (used ? FIELD_GAP : 0) > L->timeline.w - 6) continue;
        used += w + (used ? FIELD_GAP : 0);
        n += snprintf(buf + n, size - (size_t)n, "%s%s", n ? "  " : "", f[i].text);
    }
}

// The legend sits in the bottom border when it fits.
static void timeline_legend(const LiveLayout *L) {
    static const char *const LEGENDS[] = {("F fwd B bwd I in-grad W w-grad (f b i w: a rank's 2nd stage) - messages . idle; "
                                           "+/- zoom, arrows"),
                                          "F fwd B bwd I in-grad W w-grad (f b i w: 2nd stage) - messages . idle",
                                          "F fwd B bwd I in-grad W w-grad - messages . idle; +/- zoom, arrows",
                                          "F fwd B bwd I in-grad W w-grad - messages . idle", "F B I W - msg . idle"};
    for (size_t k = 0; k < sizeof LEGENDS / sizeof LEGENDS[0]; k++)
        if ((int)strlen(LEGENDS[k]) + 4 <= L->timeline.w) {
            tui_text(L->timeline.y + L->timeline.h - 1, L->timeline.x + 2, L->timeline.w - 4, THEME_DIM, LEGENDS[k]);
            return;
        }
}

static void draw_timeline(TuiApp *app, const LiveLayout *L) {
    const TuiView *v = app->view;
    const Shown s = shown_timeline(app);
    char title[256];
    timeline_title(app, L, &s, title, sizeof title);
    tui_panel(L->timeline, title, THEME_TITLE);
    timeline_legend(L);
    const Rect in = layout_inner(L->timeline);
    if (s.ev_off[min_i(v->n_ranks, TUI_MAX_RANKS)] == 0) {
        const bool failed = v->state == TUI_RUN_FAILED && v->message[0];
        const char *hint = v->state == TUI_RUN_NONE      ? "no run yet: Enter or F5 starts the run set up in F2 Setup"
                           : tui_run_state_live(v->state) ? "waiting for the first step"
                           : failed                       ? v->message
                                                          : "no timeline recorded";
        tui_text_words(in.y, in.x + 1, in.w - 1, failed ? THEME_ERROR : THEME_DIM, hint);
        return;
    }
    double t0, span;
    tl_window(app, s.span, &t0, &span);
    const int first = first_visible(app->sel_rank, v->n_ranks, L->lanes_visible);
    const TuiGanttData d = {s.ev, s.ev_off, v->n_ranks, t0, span};
    tui_gantt(L->lanes, L->lane_h, first, min_i(L->lanes_visible, v->n_ranks - first), app->sel_rank, &d);
    if (L->timeline_axis && in.h > L->lanes.h)
        tui_gantt_axis(L->lanes.y + L->lanes.h, in.x, in.w, tui_gantt_label_w(v->n_ranks, in.w), t0, span,
                       s.planned ? "units" : "ms");
}

// ---- loss ----------------------------------------------------------------------------------------

#define LOSS_EMA_ALPHA 0.05

static void draw_loss(TuiApp *app, const LiveLayout *L) {
    const TuiView *v = app->view;
    char title[96];
    snprintf(title, sizeof title, "%s%s", app->ema ? "loss + EMA" : "loss  (e: EMA)", v->n_val ? " + val" : "");
    if (v->n_val && tui_text_width(title) + 14 < L->loss.w)
        snprintf(title + strlen(title), sizeof title - strlen(title), " %.3f", v->val_loss[v->n_val - 1]);
    tui_panel(L->loss, title, THEME_TITLE);
    const Rect in = layout_inner(L->loss);
    static float y[TUI_SERIES_CAP + 1], ema[TUI_SERIES_CAP + 1], val[TUI_SERIES_CAP + 1];
    const int n = tui_series_points(&v->loss_series, y, TUI_SERIES_CAP + 1);
    tui_series_overlay(v->val_step, v->val_loss, v->n_val, v->loss_series.first_step, v->loss_series.stride, n, val);
    float lo = 0, hi = 0, vlo = 0, vhi = 0;
    const bool has_val = n > 0 && tui_series_range(val, n, &vlo, &vhi);
    if (n == 0 || !tui_series_range(y, n, &lo, &hi) || in.w < 10 || in.h < 2) {
        tui_text(in.y, in.x + 1, in.w - 1, THEME_DIM, "no steps yet");
        return;
    }
    if (has_val) lo = fminf(lo, vlo), hi = fmaxf(hi, vhi);
    // Axis labels: 7 columns on the left; the step range on the bottom row.
    const int lab = 7;
    const bool x_axis = in.h >= 4;
    const Rect area = {in.x + lab, in.y, in.w - lab, in.h - (x_axis ? 1 : 0)};
    tui_textf(area.y, in.x, lab, THEME_DIM, "%6.3f", hi);
    tui_textf(area.y + area.h - 1, in.x, lab, THEME_DIM, "%6.3f", lo);
    TuiPlotSeries s[3] = {{y, n, THEME_LOSS, '.'}};
    int n_series = 1;
    if (app->ema) {
        tui_ema(y, n, tui_ema_alpha(LOSS_EMA_ALPHA, v->loss_series.stride), ema);
        s[n_series++] = (TuiPlotSeries){ema, n, THEME_LOSS_EMA, '*'};
    }
    if (has_val) s[n_series++] = (TuiPlotSeries){val, n, THEME_LOSS_VAL, 'v'};
    tui_plot(area, s, n_series, lo, hi);
    if (x_axis) {
        const int last = v->loss_series.first_step + v->loss_series.stride * n - 1;
        char left[32], right[48];
        snprintf(left, sizeof left, "step %d", v->loss_series.first_step);
        snprintf(right, sizeof right, "%s%d", app->ema ? "EMA * " : "", last < v->step ? v->step : last);
        if ((int)strlen(left) + (int)strlen(right) + 1 <= area.w) tui_text(in.y + in.h - 1, area.x, area.w, THEME_DIM, left);
        tui_text_right(in.y + in.h - 1, area.x, area.w, THEME_DIM, right);
    }
}

// ---- the sample ----------------------------------------------------------------------------------

// The model's latest sample and the step it came from, escaped (control bytes and invalid
// UTF-8 as \xNN: nothing the model writes reaches the terminal raw) and wrapped at its spaces
// on the panel's rows. The title gives sampling's share of the run's time, which no step's
// time includes (watch: run_s is the steps' time alone).
static void draw_sample(TuiApp *app, const LiveLayout *L) {
    const TuiView *v = app->view;
    char title[128];
    const double total = v->run_s + (v->read_only ? v->sample_s : 0.0);
    if (v->sample_step > 0 && total > 0)
        snprintf(title, sizeof title, "sample at step %d  (sampling: %.1f%% of the run's time)", v->sample_step,
                 100.0 * v->sample_s / total);
    else snprintf(title, sizeof title, v->sample_step > 0 ? "sample at step %d" : "sample", v->sample_step);
    tui_panel(L->sample, title, THEME_TITLE);
    const Rect in = layout_inner(L->sample);
    if (v->sample_step == 0) {
        if (v->sample_every > 0) tui_textf(in.y, in.x + 1, in.w - 1, THEME_DIM, "the first after step %d", v->sample_every);
        else tui_text(in.y, in.x + 1, in.w - 1, THEME_DIM, "none yet");
        return;
    }
    static char esc[4 * TUI_SAMPLE_TEXT];   // an escape is at most 4 bytes for each byte it stands for
    tui_sample_escape(v->sample_text, esc, sizeof esc);
    TuiLine lines[LAYOUT_SAMPLE_H];
    const int n = min_i(tui_wrap(esc, in.w - 1, lines, LAYOUT_SAMPLE_H), min_i(in.h, LAYOUT_SAMPLE_H));
    for (int i = 0; i < n; i++)
        tui_textf(in.y + i, in.x + 1, in.w - 1, THEME_TEXT, "%.*s", lines[i].len, esc + lines[i].start);
}

static int live_ranks(const TuiApp *app) { return max_i(1, min_i(app->view->n_ranks, TUI_MAX_RANKS)); }

// The live screen's layout: the sample panel when it is on and the run samples.
static int live_layout(const TuiApp *app, int cols, int rows, LiveLayout *L) {
    const bool sample = app->show_sample && (app->view->sample_every > 0 || app->view->n_samples > 0);
    return layout_live_sample(cols, rows, live_ranks(app), app->show_loss, sample, L);
}

static void live_draw(TuiApp *app, int cols, int rows) {
    LiveLayout L;
    if (live_layout(app, cols, rows, &L)) {
        tui_too_small(&L.notice, LAYOUT_LIVE_MIN_W, LAYOUT_LIVE_MIN_H);
        return;
    }
    draw_header(app, &L.header);
    draw_stages(app, &L);
    draw_timeline(app, &L);
    if (L.loss_visible) draw_loss(app, &L);
    if (!layout_empty(&L.sample)) draw_sample(app, &L);
}

// ---- keys: the run ----------------------------------------------------------------------------

static void key_pause(TuiApp *app) {
    const TuiRunState s = app->view->state;
    if (!tui_runner_busy(app->runner)) {
        RunOptions ro;
        Error err;
        if (tui_setup_options(app, &ro, &err)) tui_app_status(app, THEME_ERROR, "cannot start: %s", err.msg);
        else tui_app_start_run(app, &ro);
        return;
    }
    const bool pause = s != TUI_RUN_PAUSED && !atomic_load(&app->snap->pause);
    tui_snapshot_set_pause(app->snap, pause);
    tui_app_status(app, THEME_WARNING, pause ? "pausing after this step" : "resumed");
    // Gone once the run is paused: the header says "paused" then (issue 29).
    if (pause) tui_app_status_while(app, 1u << TUI_RUN_STARTING | 1u << TUI_RUN_RUNNING);
}

static const char *label_pause(const TuiApp *app) {
    if (!app->runner || !tui_runner_busy(app->runner)) return "Start";
    return atomic_load(&app->snap->pause) ? "Resume" : "Pause";
}

static void key_stop(TuiApp *app) {
    if (!tui_runner_busy(app->runner)) {
        tui_app_status(app, THEME_DIM, "no run is live");
        return;
    }
    tui_snapshot_request_stop(app->snap);
    tui_app_status(app, THEME_WARNING, "stopping after this step%s",
                   app->setup.ro.ckpt_dir[0] ? " (a checkpoint is written)" : "");
    // Gone once the run has stopped (or ended another way): the header says so then.
    tui_app_status_while(app, 1u << TUI_RUN_STARTING | 1u << TUI_RUN_RUNNING | 1u << TUI_RUN_PAUSED |
                                  1u << TUI_RUN_STOPPING);
}

static void key_ema(TuiApp *app) { app->ema = !app->ema; }
static void key_loss(TuiApp *app) { app->show_loss = !app->show_loss; }
static void key_sample(TuiApp *app) { app->show_sample = !app->show_sample; }
static void key_up(TuiApp *app) { app->sel_rank = max_i(0, app->sel_rank - 1); }
static void key_down(TuiApp *app) { app->sel_rank = min_i(app->view->n_ranks - 1, app->sel_rank + 1); }

// ---- keys: the timeline ---------------------------------------------------------------------------

// The window stays inside the step: [0, 1 - 1/zoom] of its length.
static void tl_clamp(TuiApp *app) {
    const double most = 1.0 - 1.0 / app->tl_zoom;
    app->tl_pos = app->tl_pos < 0 ? 0 : app->tl_pos > most ? most : app->tl_pos;
}

// Zooms about the window's middle.
static void tl_zoom(TuiApp *app, int factor_up) {
    const double mid = app->tl_pos + 0.5 / app->tl_zoom;
    const int z = factor_up ? min_i(TL_ZOOM_MAX, app->tl_zoom * 2) : max_i(1, app->tl_zoom / 2);
    if (z == app->tl_zoom) {
        tui_app_status(app, THEME_DIM, z == 1 ? "the whole step is shown" : "zoomed in as far as it goes (x%d)", z);
        return;
    }
    app->tl_zoom = z;
    app->tl_pos = mid - 0.5 / z;
    tl_clamp(app);
}

static void key_zoom_in(TuiApp *app) { tl_zoom(app, 1); }
static void key_zoom_out(TuiApp *app) { tl_zoom(app, 0); }

// Scrolls by half a window.
static void tl_scroll(TuiApp *app, int dir) {
    if (app->tl_zoom == 1) {
        tui_app_status(app, THEME_DIM, "+ zooms in; then [ and ] scroll");
        return;
    }
    app->tl_pos += dir * 0.5 / app->tl_zoom;
    tl_clamp(app);
}

static void key_scroll_left(TuiApp *app) { tl_scroll(app, -1); }
static void key_scroll_right(TuiApp *app) { tl_scroll(app, +1); }

// Shows the kept step nearest at or before `step`; 0, or past the newest: follow the latest.
static void tl_show(TuiApp *app, int step) {
    int oldest, newest;
    if (!app->snap || tui_snapshot_kept(app->snap, &oldest, &newest) == 0) {
        tui_app_status(app, THEME_DIM, app->snap ? "no step measured yet" : "watch keeps no timelines of earlier steps");
        return;
    }
    if (step <= 0 || step >= newest) {
        app->tl_step = 0;
        return;
    }
    if (!app->tl_kept) app->tl_kept = xmalloc(sizeof *app->tl_kept);
    if (!tui_snapshot_timeline(app->snap, step < oldest ? oldest : step, app->tl_kept)) return;
    app->tl_step = app->tl_kept->step;
    if (step < oldest) tui_app_status(app, THEME_DIM, "step %d is the oldest kept", oldest);
}

static void key_step_back(TuiApp *app) {
    const int at = app->tl_step > 0 ? app->tl_step : app->view->timeline_step;
    tl_show(app, at - 1);
}

static void key_step_fwd(TuiApp *app) {
    if (app->tl_step > 0) tl_show(app, app->tl_step + 1);
}

static void key_step_latest(TuiApp *app) { app->tl_step = 0; }

static void key_step_first(TuiApp *app) {
    int oldest, newest;
    if (app->snap && tui_snapshot_kept(app->snap, &oldest, &newest) > 0) tl_show(app, oldest);
}

#define LIVE_COMMON_HEAD \
    {{TUI_FN(KEY_F(1)), '?', 0}, "F1", "Help", 0, "F1 ?      help", tui_key_help, NULL}, \
    {{TUI_FN(KEY_F(2)), 0, 0}, "F2", "Setup", 1, "F2        setup: schedule, stages, run options", tui_key_setup, NULL}, \
    {{TUI_FN(KEY_F(3)), 0, 0}, "F3", "Live", 3, "F3        this live screen", tui_key_live, NULL}, \
    {{TUI_FN(KEY_F(4)), 0, 0}, "F4", "History", 1, "F4        history of runs", tui_key_history, NULL}

// Keys for the timeline, shared by the live and watch screens (watch has no earlier steps).
#define TIMELINE_KEYS \
    {{'+', '=', 0}, NULL, NULL, 0, "+ -       timeline: zoom in, out", key_zoom_in, NULL}, \
    {{'-', '_', 0}, NULL, NULL, 0, NULL, key_zoom_out, NULL}, \
    {{'[', '<', 0}, NULL, NULL, 0, "[ ]       timeline: scroll left, right (zoomed in)", key_scroll_left, NULL}, \
    {{']', '>', 0}, NULL, NULL, 0, NULL, key_scroll_right, NULL}

static const TuiBinding LIVE_KEYS[] = {
    LIVE_COMMON_HEAD,
    {{TUI_FN(KEY_F(5)), 'p', ' '}, "F5", "Pause", 0, "F5 p      start the run (none live), pause / resume", key_pause,
     label_pause},
    {{TUI_FN(KEY_F(6)), 'e', 0}, "F6", "EMA", 2, "F6 e      loss: EMA smoothing on / off", key_ema, NULL},
    {{TUI_FN(KEY_F(7)), 's', 0}, "F7", "Stop", 0, "F7 s      stop the run (with a checkpoint)", key_stop, NULL},
    {{TUI_FN(KEY_F(8)), 't', 0}, "F8", "Theme", 2, "F8 t      next theme", tui_key_theme, NULL},
    {{TUI_FN(KEY_F(10)), 'q', 0}, "F10", "Quit", 0, "F10 q     quit (asks first while a run is live)", tui_key_quit,
     NULL},
    {{'l', 0, 0}, NULL, NULL, 0, "l         loss panel on / off", key_loss, NULL},
    {{'w', 0, 0}, NULL, NULL, 0, "w         sample panel on / off: what the model writes", key_sample, NULL},
    {{TUI_FN(KEY_UP), 'k', 0}, NULL, NULL, 0, "up k      previous rank", key_up, NULL},
    {{TUI_FN(KEY_DOWN), 'j', 0}, NULL, NULL, 0, "down j    next rank", key_down, NULL},
    TIMELINE_KEYS,
    {{TUI_FN(KEY_LEFT), 0, 0}, NULL, NULL, 0, "left right timeline: earlier, later steps", key_step_back, NULL},
    {{TUI_FN(KEY_RIGHT), 0, 0}, NULL, NULL, 0, NULL, key_step_fwd, NULL},
    {{TUI_FN(KEY_HOME), 0, 0}, NULL, NULL, 0, "Home End  timeline: the oldest kept step, the latest", key_step_first,
     NULL},
    {{TUI_FN(KEY_END), 0, 0}, NULL, NULL, 0, NULL, key_step_latest, NULL},
    {{'\n', '\r', TUI_FN(KEY_ENTER)}, NULL, NULL, 0, "Enter     start the run set up in F2 (none live)", key_pause, NULL},
};

static const TuiBinding WATCH_KEYS[] = {
    {{TUI_FN(KEY_F(1)), '?', 0}, "F1", "Help", 0, "F1 ?      help", tui_key_help, NULL},
    {{TUI_FN(KEY_F(6)), 'e', 0}, "F6", "EMA", 1, "F6 e      loss: EMA smoothing on / off", key_ema, NULL},
    {{TUI_FN(KEY_F(8)), 't', 0}, "F8", "Theme", 1, "F8 t      next theme", tui_key_theme, NULL},
    {{TUI_FN(KEY_F(10)), 'q', 0}, "F10", "Quit", 0, "F10 q     quit (the run goes on)", tui_key_quit, NULL},
    {{'l', 0, 0}, NULL, NULL, 0, "l         loss panel on / off", key_loss, NULL},
    {{'w', 0, 0}, NULL, NULL, 0, "w         sample panel on / off: what the model writes", key_sample, NULL},
    {{TUI_FN(KEY_UP), 'k', 0}, NULL, NULL, 0, "up k      previous rank", key_up, NULL},
    {{TUI_FN(KEY_DOWN), 'j', 0}, NULL, NULL, 0, "down j    next rank", key_down, NULL},
    TIMELINE_KEYS,
};

static void live_click(TuiApp *app, int cols, int rows, int x, int y, bool twice) {
    (void)twice;
    LiveLayout L;
    if (live_layout(app, cols, rows, &L)) return;
    if (layout_contains(&L.stage_list, x, y)) {
        const int r = first_visible(app->sel_rank, app->view->n_ranks, L.stage_rows) + (y - L.stage_list.y);
        if (r < app->view->n_ranks) app->sel_rank = r;
    } else if (layout_contains(&L.lanes, x, y)) {
        const int r = first_visible(app->sel_rank, app->view->n_ranks, L.lanes_visible) + (y - L.lanes.y) / L.lane_h;
        if (r < app->view->n_ranks) app->sel_rank = r;
    } else if (layout_contains(&L.loss, x, y)) {
        app->ema = !app->ema;
    }
}

static bool live_poll(TuiApp *app) { return tui_snapshot_take(app->snap, app->view); }

// The run's own message (a failed run's in the error role) is the live screen's note.
static const char *live_note(const TuiApp *app, ThemeRole *role) {
    *role = app->view && app->view->state == TUI_RUN_FAILED ? THEME_ERROR : THEME_DIM;
    return app->view ? app->view->message : "";
}

// F1 gives the bubble and all its parts, which a narrow stages title shortens.
static void live_help(const TuiApp *app, char *buf, size_t size) {
    const TuiView *v = app->view;
    buf[0] = '\0';
    if (v && v->has_parts) tui_bubble_text(&v->parts, (int)size - 1, buf, size);
}

// A note may take rows above the key bar only where the ranks still fit without scrolling
// (or scrolled already without it): the note never hides a rank.
static bool live_note_room(const TuiApp *app, int cols, int rows, int k) {
    LiveLayout with, without;
    live_layout(app, cols, rows - k, &with);
    live_layout(app, cols, rows, &without);
    return !with.stages_scroll || without.stages_scroll;
}

// The header's columns a note must leave (tui_app's place_note sends a note that would crowd
// them out below, where rows allow).
static int live_header_kept(const TuiApp *app) {
    Field f[MAX_FIELDS];
    return app->view ? kept_width(f, identity_fields(app->view, f)) : 0;
}

static void live_enter(TuiApp *app) { live_poll(app); }

#define N_KEYS(table) ((int)(sizeof table / sizeof table[0]))

const TuiScreenOps TUI_LIVE_SCREEN = {.enter = live_enter, .poll = live_poll, .draw = live_draw,
                                      .click = live_click, .keys = LIVE_KEYS, .n_keys = N_KEYS(LIVE_KEYS),
                                      .note = live_note, .help = live_help, .note_room = live_note_room,
                                      .header_kept = live_header_kept};

const TuiScreenOps TUI_WATCH_SCREEN = {.poll = tui_watch_poll, .draw = live_draw, .click = live_click,
                                       .keys = WATCH_KEYS, .n_keys = N_KEYS(WATCH_KEYS),
                                       .note = live_note, .help = live_help, .note_room = live_note_room,
                                       .header_kept = live_header_kept};
