// console/tui_live: the live screen. Header (identity, progress), one row per pipeline rank
// (layers, utilization bar, busy / idle / comm ms, peak activation memory), the latest step's
// timeline as a Gantt chart with the measured and ideal bubble, and the loss curve.
// Draws only from app->view, the UI's copy of the run's snapshot.
#define NCURSES_WIDECHAR 1
#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/tui/tui_app.h"
#include "console/tui/tui_draw.h"

static int min_i(int a, int b) { return a < b ? a : b; }
static int max_i(int a, int b) { return a > b ? a : b; }

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

static void identity(const TuiView *v, char *buf, size_t size) {
    char params[16], run[32] = "";
    tui_fmt_count(v->params, params, sizeof params);
    if (v->run_id > 0) snprintf(run, sizeof run, "run %lld  ", (long long)v->run_id);
    snprintf(buf, size, "%s%s  P%d V%d D%d M%d  %s %s  B%d T%d  lr %g  %s/%s", run, v->schedule, v->P, v->V,
             v->D, v->M, v->model, params, v->B, v->T, v->lr_peak, v->transport, v->device);
}

static void progress_text(const TuiView *v, char *buf, size_t size) {
    char tok[16], eta[16], gf[16];
    tui_fmt_count(v->tokens_per_s, tok, sizeof tok);
    tui_fmt_duration(tui_view_eta(v), eta, sizeof eta);
    tui_fmt_count(v->gflops, gf, sizeof gf);
    if (v->step <= 0) buf[0] = '\0';
    else
        snprintf(buf, size, "loss %.4f  %s tok/s  %s GFLOP/s  %.1f ms/step  ETA %s", v->loss, tok, gf, v->step_ms,
                 eta);
}

// "step 123/500 [====== 24% ======] loss ... ETA 0:21"
static void draw_progress(const TuiView *v, int y, int x, int w) {
    char text[256], step[48], pct[16];
    progress_text(v, text, sizeof text);
    snprintf(step, sizeof step, "step %d/%d", v->step, v->steps_planned);
    const double frac = v->steps_planned > 0 ? (double)v->step / v->steps_planned : 0.0;
    snprintf(pct, sizeof pct, "%.0f%%", 100 * frac);
    const int sw = tui_text(y, x, w, THEME_HEADER, step);
    const int tw = (int)strlen(text), bar = w - sw - tw - 4;
    if (bar >= 8) {
        tui_progress(y, x + sw + 1, bar, frac, pct);
        tui_text(y, x + sw + bar + 3, tw, THEME_HEADER, text);
    } else {
        tui_text(y, x + sw + 1, w - sw - 1, THEME_HEADER, text);
    }
}

// Two rows: identity (and a message on the right), then progress. One row: the state, step
// and loss first, then as much of the identity as fits.
static void draw_header(TuiApp *app, const Rect *h) {
    const TuiView *v = app->view;
    tui_fill(*h, THEME_HEADER);
    char id[512];
    identity(v, id, sizeof id);
    int x = tui_text(h->y, h->x, h->w, THEME_TITLE, v->read_only ? "pptrain watch " : "pptrain ");
    x += tui_text(h->y, h->x + x, h->w - x, state_role(v->state), tui_run_state_name(v->state));
    if (h->h < 2 && v->step > 0)
        x += tui_textf(h->y, h->x + x, h->w - x, THEME_HEADER, "  step %d/%d  loss %.4f", v->step, v->steps_planned,
                       v->loss);
    x += tui_text(h->y, h->x + x, h->w - x, THEME_HEADER, "  ");
    x += tui_text(h->y, h->x + x, h->w - x, THEME_HEADER, id);
    const bool status = app->status[0] && tui_now() < app->status_until;
    const char *note = status ? app->status : v->message;
    const ThemeRole role = status ? app->status_role : v->state == TUI_RUN_FAILED ? THEME_ERROR : THEME_DIM;
    if (note[0] && h->w - x > 12) tui_text_right(h->y, h->x + x + 2, h->w - x - 2, role, note);
    if (h->h >= 2) draw_progress(v, h->y + 1, h->x, h->w);
}

// ---- stages ------------------------------------------------------------------------------------

// Column widths of a stage row: rank, device, layers, bar (the rest), busy, idle, comm, peak.
enum { COL_RANK = 5, COL_DEV = 5, COL_LAYERS = 9, COL_MS = 8, COL_PEAK = 9 };

static int first_visible(int selected, int n, int visible) {
    if (visible >= n) return 0;
    return max_i(0, min_i(selected - visible / 2, n - visible));
}

static void draw_stages(TuiApp *app, const LiveLayout *L) {
    const TuiView *v = app->view;
    char title[128];
    snprintf(title, sizeof title, "stages  %d rank%s x %d replica%s%s%s", v->P, v->P == 1 ? "" : "s", v->D,
             v->D == 1 ? "" : "s", v->read_only ? "  means over the run" : "  latest step",
             L->stages_scroll ? "  (j/k scroll)" : "");
    tui_panel(L->stages, title, THEME_TITLE);
    const Rect in = layout_inner(L->stages);
    const int bar_w = max_i(4, in.w - (COL_RANK + COL_DEV + COL_LAYERS + 3 * COL_MS + COL_PEAK + 1));
    const int x_bar = in.x + COL_RANK + COL_DEV + COL_LAYERS, x_num = x_bar + bar_w + 1;
    tui_textf(in.y, in.x, in.w, THEME_DIM, "%-*s%-*s%-*s", COL_RANK, "rank", COL_DEV, "dev", COL_LAYERS, "layers");
    tui_text(in.y, x_bar, bar_w - 1, THEME_DIM, bar_w > 28 ? "utilization (busy comm idle)" : "utilization");
    tui_textf(in.y, x_num, in.x + in.w - x_num, THEME_DIM, "%*s%*s%*s%*s", COL_MS, "busy ms", COL_MS, "idle",
              COL_MS, "comm", COL_PEAK, "peak act");
    const int first = first_visible(app->sel_rank, v->n_ranks, L->stage_rows);
    for (int k = 0; k < L->stage_rows && first + k < v->n_ranks; k++) {
        const int r = first + k, y = L->stage_list.y + k;
        const TuiRankRow *row = &v->rank[r];
        const ThemeRole base = r == app->sel_rank ? THEME_SELECTED : THEME_TEXT;
        tui_textf(y, in.x, COL_RANK + COL_DEV + COL_LAYERS, base, "%-*d%-*s%-*s", COL_RANK, r, COL_DEV, v->device,
                  COL_LAYERS, row->layers);
        if (isnan(row->busy_ms)) {
            tui_text(y, x_bar, bar_w, THEME_DIM, tui_run_state_live(v->state) ? "waiting for the first step" : "");
            continue;
        }
        tui_util_bar(y, x_bar, bar_w, row->busy_ms, row->comm_ms, row->idle_ms);
        char peak[16];
        tui_fmt_bytes(row->peak_bytes, peak, sizeof peak);
        tui_textf(y, x_num, in.x + in.w - x_num, THEME_TEXT, "%*.1f%*.1f%*.1f%*s", COL_MS, row->busy_ms, COL_MS,
                  row->idle_ms, COL_MS, row->comm_ms, COL_PEAK, peak);
    }
}

// ---- timeline ------------------------------------------------------------------------------------

static void draw_timeline(TuiApp *app, const LiveLayout *L) {
    const TuiView *v = app->view;
    char title[512], measured[32] = "-", ideal[32] = "-";
    if (v->has_bubble) snprintf(measured, sizeof measured, "%.1f%%", 100 * v->bubble);
    if (!isnan(v->bubble_ideal)) snprintf(ideal, sizeof ideal, "%.1f%%", 100 * v->bubble_ideal);
    if (v->timeline_planned)
        snprintf(title, sizeof title, "timeline (planned: %s)  bubble: measured mean %s, ideal %s", v->schedule,
                 measured, ideal);
    else
        snprintf(title, sizeof title, "timeline step %d  bubble %s measured | %s ideal", v->timeline_step, measured,
                 ideal);
    tui_panel(L->timeline, title, THEME_TITLE);
    const Rect in = layout_inner(L->timeline);
    // The legend sits in the bottom border.
    const char *legend = "F fwd B bwd I in-grad W w-grad - comm . idle";
    if ((int)strlen(legend) + 4 <= L->timeline.w)
        tui_text(L->timeline.y + L->timeline.h - 1, L->timeline.x + 2, L->timeline.w - 4, THEME_DIM, legend);
    const int n_ev = v->ev_off[min_i(v->n_ranks, TUI_MAX_RANKS)];
    if (n_ev == 0) {
        const bool failed = v->state == TUI_RUN_FAILED && v->message[0];
        const char *hint = v->state == TUI_RUN_NONE      ? "no run yet: Enter or F5 starts the run set up in F2 Setup"
                           : tui_run_state_live(v->state) ? "waiting for the first step"
                           : failed                       ? v->message
                                                          : "no timeline recorded";
        tui_text(in.y, in.x + 1, in.w - 1, failed ? THEME_ERROR : THEME_DIM, hint);
        return;
    }
    const int first = first_visible(app->sel_rank, v->n_ranks, L->lanes_visible);
    tui_gantt(L->lanes, L->lane_h, first, min_i(L->lanes_visible, v->n_ranks - first), app->sel_rank, v->ev,
              v->ev_off, v->span_ms);
    if (in.h > L->lanes.h)
        tui_gantt_axis(L->lanes.y + L->lanes.h, in.x, in.w, v->span_ms, v->timeline_planned ? "units" : "ms");
}

// ---- loss ----------------------------------------------------------------------------------------

#define LOSS_EMA_ALPHA 0.05

static void draw_loss(TuiApp *app, const LiveLayout *L) {
    const TuiView *v = app->view;
    char title[128];
    snprintf(title, sizeof title, "loss%s", app->ema ? " + EMA" : "  (e: EMA)");
    tui_panel(L->loss, title, THEME_TITLE);
    const Rect in = layout_inner(L->loss);
    static float y[TUI_SERIES_CAP + 1], ema[TUI_SERIES_CAP + 1];
    const int n = tui_series_points(&v->loss_series, y, TUI_SERIES_CAP + 1);
    float lo = 0, hi = 0;
    if (n == 0 || !tui_series_range(y, n, &lo, &hi) || in.w < 10 || in.h < 2) {
        tui_text(in.y, in.x + 1, in.w - 1, THEME_DIM, "no steps yet");
        return;
    }
    // Axis labels: 7 columns on the left; the step range on the bottom row.
    const int lab = 7;
    const bool x_axis = in.h >= 4;
    const Rect area = {in.x + lab, in.y, in.w - lab, in.h - (x_axis ? 1 : 0)};
    tui_textf(area.y, in.x, lab, THEME_DIM, "%6.3f", hi);
    tui_textf(area.y + area.h - 1, in.x, lab, THEME_DIM, "%6.3f", lo);
    TuiPlotSeries s[2] = {{y, n, THEME_LOSS, '.'}};
    int n_series = 1;
    if (app->ema) {
        tui_ema(y, n, tui_ema_alpha(LOSS_EMA_ALPHA, v->loss_series.stride), ema);
        s[n_series++] = (TuiPlotSeries){ema, n, THEME_LOSS_EMA, '*'};
    }
    tui_plot(area, s, n_series, lo, hi);
    if (x_axis) {
        const int last = v->loss_series.first_step + v->loss_series.stride * n - 1;
        tui_textf(in.y + in.h - 1, area.x, area.w, THEME_DIM, "step %d", v->loss_series.first_step);
        char right[48];
        snprintf(right, sizeof right, "%s%d", app->ema ? "EMA * " : "", last < v->step ? v->step : last);
        tui_text_right(in.y + in.h - 1, area.x, area.w, THEME_DIM, right);
    }
}

static void live_draw(TuiApp *app, int cols, int rows) {
    LiveLayout L;
    const int P = max_i(1, min_i(app->view->n_ranks, TUI_MAX_RANKS));
    if (layout_live(cols, rows, P, app->show_loss, &L)) {
        tui_too_small(&L.notice, LAYOUT_LIVE_MIN_W, LAYOUT_LIVE_MIN_H);
        return;
    }
    draw_header(app, &L.header);
    draw_stages(app, &L);
    draw_timeline(app, &L);
    if (L.loss_visible) draw_loss(app, &L);
}

// ---- keys ----------------------------------------------------------------------------------------

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
}

static void key_ema(TuiApp *app) { app->ema = !app->ema; }
static void key_loss(TuiApp *app) { app->show_loss = !app->show_loss; }
static void key_up(TuiApp *app) { app->sel_rank = max_i(0, app->sel_rank - 1); }
static void key_down(TuiApp *app) { app->sel_rank = min_i(app->view->n_ranks - 1, app->sel_rank + 1); }

#define LIVE_COMMON_HEAD \
    {{TUI_FN(KEY_F(1)), '?', 0}, "F1", "Help", "F1 ?      help", tui_key_help, NULL}, \
    {{TUI_FN(KEY_F(2)), 0, 0}, "F2", "Setup", "F2        setup: schedule, stages, run options", tui_key_setup, NULL}, \
    {{TUI_FN(KEY_F(3)), 0, 0}, "F3", "Live", "F3        this live screen", tui_key_live, NULL}, \
    {{TUI_FN(KEY_F(4)), 0, 0}, "F4", "History", "F4        history of runs", tui_key_history, NULL}

static const TuiBinding LIVE_KEYS[] = {
    LIVE_COMMON_HEAD,
    {{TUI_FN(KEY_F(5)), 'p', ' '}, "F5", "Pause", "F5 p      start the run (none live), pause / resume", key_pause,
     label_pause},
    {{TUI_FN(KEY_F(6)), 'e', 0}, "F6", "EMA", "F6 e      loss: EMA smoothing on / off", key_ema, NULL},
    {{TUI_FN(KEY_F(7)), 's', 0}, "F7", "Stop", "F7 s      stop the run (with a checkpoint)", key_stop, NULL},
    {{TUI_FN(KEY_F(8)), 't', 0}, "F8", "Theme", "F8 t      next theme", tui_key_theme, NULL},
    {{TUI_FN(KEY_F(10)), 'q', 0}, "F10", "Quit", "F10 q     quit (asks first while a run is live)", tui_key_quit,
     NULL},
    {{'l', 0, 0}, NULL, NULL, "l         loss panel on / off", key_loss, NULL},
    {{TUI_FN(KEY_UP), 'k', 0}, NULL, NULL, "up k      previous rank", key_up, NULL},
    {{TUI_FN(KEY_DOWN), 'j', 0}, NULL, NULL, "down j    next rank", key_down, NULL},
    {{'\n', '\r', TUI_FN(KEY_ENTER)}, NULL, NULL, "Enter     start the run set up in F2 (none live)", key_pause, NULL},
};

static const TuiBinding WATCH_KEYS[] = {
    {{TUI_FN(KEY_F(1)), '?', 0}, "F1", "Help", "F1 ?      help", tui_key_help, NULL},
    {{TUI_FN(KEY_F(6)), 'e', 0}, "F6", "EMA", "F6 e      loss: EMA smoothing on / off", key_ema, NULL},
    {{TUI_FN(KEY_F(8)), 't', 0}, "F8", "Theme", "F8 t      next theme", tui_key_theme, NULL},
    {{TUI_FN(KEY_F(10)), 'q', 0}, "F10", "Quit", "F10 q     quit (the run goes on)", tui_key_quit, NULL},
    {{'l', 0, 0}, NULL, NULL, "l         loss panel on / off", key_loss, NULL},
    {{TUI_FN(KEY_UP), 'k', 0}, NULL, NULL, "up k      previous rank", key_up, NULL},
    {{TUI_FN(KEY_DOWN), 'j', 0}, NULL, NULL, "down j    next rank", key_down, NULL},
};

static void live_click(TuiApp *app, int cols, int rows, int x, int y, bool twice) {
    (void)twice;
    LiveLayout L;
    const int P = max_i(1, min_i(app->view->n_ranks, TUI_MAX_RANKS));
    if (layout_live(cols, rows, P, app->show_loss, &L)) return;
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

static bool live_refresh(TuiApp *app) { return tui_snapshot_take(app->snap, app->view); }

static void live_enter(TuiApp *app) { live_refresh(app); }

#define N_KEYS(table) ((int)(sizeof table / sizeof table[0]))

const TuiScreenOps TUI_LIVE_SCREEN = {.enter = live_enter, .poll = live_refresh, .draw = live_draw,
                                      .click = live_click, .keys = LIVE_KEYS, .n_keys = N_KEYS(LIVE_KEYS)};

const TuiScreenOps TUI_WATCH_SCREEN = {.poll = tui_watch_poll, .draw = live_draw, .click = live_click,
                                       .keys = WATCH_KEYS, .n_keys = N_KEYS(WATCH_KEYS)};
