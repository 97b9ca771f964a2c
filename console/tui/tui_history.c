// console/tui/tui_history: the history screen. The run store's runs as a sortable, filterable
// table; beside it the selected run (configuration, results, checkpoints, loss curve), or,
// with two or more runs marked, their loss curves overlaid and their measured bubble,
// tokens/s and peak activation memory side by side. A run resumes from its newest checkpoint
// or from the one picked in the detail pane.
#define NCURSES_WIDECHAR 1
#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/tui/pure/tui_sample.h"
#include "console/tui/pure/tui_text.h"
#include "console/tui/tui_app.h"
#include "console/tui/pure/tui_bubble.h"
#include "console/tui/tui_draw.h"
#include "console/cli.h"
#include "engine/clock.h"
#include "engine/run_json.h"

static int min_i(int a, int b) { return a < b ? a : b; }
static int max_i(int a, int b) { return a > b ? a : b; }

#define HISTORY_REFRESH_S 2.0

static const char *const SORT_NAMES[] = {"id", "schedule", "status", "loss", "tok/s", "bubble"};
enum { N_SORTS = sizeof SORT_NAMES / sizeof SORT_NAMES[0] };

static const char *shown_status(const DbRunInfo *r) { return r->crashed ? "crashed" : r->status ? r->status : "?"; }

// ---- loading ---------------------------------------------------------------------------------------

static void free_curves(TuiHistory *h) {
    for (int i = 0; i < h->n_curves; i++) free(h->curves[i].loss), free(h->curves[i].val);
    h->n_curves = 0;
}

static void free_detail(TuiHistory *h) {
    free(h->stages);
    db_checkpoints_free(h->cks, h->n_cks);
    db_samples_free(h->samples, h->n_samples);
    h->stages = NULL;
    h->cks = NULL;
    h->samples = NULL;
    h->n_stages = h->n_cks = h->n_samples = 0;
    h->detail_id = 0;
}

void tui_history_free(TuiHistory *h) {
    free_curves(h);
    free_detail(h);
    db_runs_free(h->runs, h->n_runs);
    free(h->shown);
    h->runs = NULL;
    h->shown = NULL;
    h->n_runs = h->n_shown = 0;
    if (h->db) db_close(h->db);
    h->db = NULL;
}

static const DbRunInfo *find_run(const TuiHistory *h, int64_t id) {
    for (int i = 0; i < h->n_runs; i++)
        if (h->runs[i].id == id) return &h->runs[i];
    return NULL;
}

static const DbRunInfo *selected(const TuiHistory *h) {
    return h->sel >= 0 && h->sel < h->n_shown ? &h->runs[h->shown[h->sel]] : NULL;
}

static double sort_key(const DbRunInfo *r, int sort) {
    switch (sort) {
    case 3: return r->last_loss;
    case 4: return r->median_tokens_per_s;
    case 5: return r->mean_bubble;
    default: return (double)r->id;
    }
}

static const TuiHistory *sorting;   // qsort has no context argument; UI thread only

static int cmp_runs(const void *pa, const void *pb) {
    const DbRunInfo *a = &sorting->runs[*(const int *)pa], *b = &sorting->runs[*(const int *)pb];
    int c = 0;
    if (sorting->sort == 1) c = strcmp(a->schedule ? a->schedule : "", b->schedule ? b->schedule : "");
    else if (sorting->sort == 2) c = strcmp(shown_status(a), shown_status(b));
    else {
        const double x = sort_key(a, sorting->sort), y = sort_key(b, sorting->sort);
        // NaN (no steps) sorts last either way.
        c = isnan(x) ? (isnan(y) ? 0 : 1) : isnan(y) ? -1 : (x > y) - (x < y);
        if (isnan(x) != isnan(y)) return c;
    }
    if (c == 0) c = (a->id > b->id) - (a->id < b->id);
    return sorting->sort_desc ? -c : c;
}

static bool matches(const DbRunInfo *r, const char *filter) {
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)r->id);
    return tui_contains_ci(id, filter) || tui_contains_ci(r->schedule, filter) ||
           tui_contains_ci(shown_status(r), filter) || tui_contains_ci(r->model, filter) ||
           tui_contains_ci(r->transport, filter);
}

static void apply_view(TuiHistory *h) {
    const int64_t keep = selected(h) ? selected(h)->id : 0;
    free(h->shown);
    h->shown = xmalloc(sizeof(int) * (size_t)(h->n_runs + 1));
    h->n_shown = 0;
    for (int i = 0; i < h->n_runs; i++)
        if (matches(&h->runs[i], h->filter)) h->shown[h->n_shown++] = i;
    sorting = h;
    qsort(h->shown, (size_t)h->n_shown, sizeof(int), cmp_runs);
    sorting = NULL;
    for (int i = 0; i < h->n_shown; i++)
        if (h->runs[h->shown[i]].id == keep) h->sel = i;
    h->sel = max_i(0, min_i(h->sel, h->n_shown - 1));
}

// Mean loss per bucket of `step_max / m` steps: every curve gets the same x axis.
static float *resample(const DbStep *steps, int n, int step_max, int m) {
    float *out = xmalloc(sizeof(float) * (size_t)m);
    double *sum = xcalloc((size_t)m, sizeof(double));
    int *cnt = xcalloc((size_t)m, sizeof(int));
    for (int i = 0; i < n; i++) {
        if (!isfinite(steps[i].loss) || steps[i].step < 1) continue;
        const int b = min_i(m - 1, (int)((double)(steps[i].step - 1) * m / step_max));
        sum[b] += steps[i].loss;
        cnt[b]++;
    }
    for (int j = 0; j < m; j++) out[j] = cnt[j] ? (float)(sum[j] / cnt[j]) : NAN;
    free(sum);
    free(cnt);
    return out;
}

#define CURVE_POINTS 512

// The run's validation passes on the m points of a curve of step_max steps; NULL when none.
static float *load_val(Db *db, int64_t id, int step_max, int m) {
    DbEval *ev = NULL;
    int n = 0;
    Error err;
    if (db_evals_read(db, id, &ev, &n, &err) || n == 0) {
        free(ev);
        return NULL;
    }
    int *steps = xmalloc(sizeof(int) * (size_t)n);
    float *vals = xmalloc(sizeof(float) * (size_t)n);
    for (int k = 0; k < n; k++) steps[k] = ev[k].step, vals[k] = (float)ev[k].val_loss;
    float *out = xmalloc(sizeof(float) * (size_t)m);
    tui_series_overlay(steps, vals, n, 1.0, (double)step_max / m, m, out);   // resample's buckets
    free(steps);
    free(vals);
    free(ev);
    return out;
}

// The curves of the marked runs (or of the selected run alone), on a common step axis.
static void load_curves(TuiHistory *h) {
    free_curves(h);
    int64_t ids[TUI_MAX_MARKED + 1];
    int n = 0;
    if (h->n_marked >= 2) for (int i = 0; i < h->n_marked; i++) ids[n++] = h->marked[i];
    else if (selected(h)) ids[n++] = selected(h)->id;
    int step_max = 1;
    DbStep *steps[TUI_MAX_MARKED + 1] = {NULL};
    int counts[TUI_MAX_MARKED + 1] = {0};
    Error err;
    for (int i = 0; i < n; i++) {
        if (db_steps_read(h->db, ids[i], 0, &steps[i], &counts[i], &err)) counts[i] = 0, steps[i] = NULL;
        if (counts[i]) step_max = max_i(step_max, steps[i][counts[i] - 1].step);
    }
    for (int i = 0; i < n; i++) {
        TuiRunCurve *c = &h->curves[h->n_curves++];
        const DbRunInfo *r = find_run(h, ids[i]);
        c->id = ids[i];
        c->running = r && r->status && strcmp(r->status, "running") == 0 && !r->crashed;
        c->n = min_i(CURVE_POINTS, step_max);
        c->loss = resample(steps[i], counts[i], step_max, c->n);
        c->val = load_val(h->db, ids[i], step_max, c->n);
        c->peak_bytes = -1;
        DbStageSummary *st = NULL;
        int n_st = 0;
        if (db_stage_summary(h->db, ids[i], &st, &n_st, &err) == 0)
            for (int k = 0; k < n_st; k++)
                if (st[k].peak_act_bytes > c->peak_bytes) c->peak_bytes = st[k].peak_act_bytes;
        free(st);
        free(steps[i]);
    }
}

static void load_detail(TuiHistory *h, int64_t id) {
    free_detail(h);
    Error err;
    h->detail_id = id;
    if (db_stage_summary(h->db, id, &h->stages, &h->n_stages, &err)) h->stages = NULL, h->n_stages = 0;
    if (db_checkpoints_read(h->db, id, &h->cks, &h->n_cks, &err)) h->cks = NULL, h->n_cks = 0;
    if (db_samples_read(h->db, id, &h->samples, &h->n_samples, &err)) h->samples = NULL, h->n_samples = 0;
    h->ck_sel = max_i(0, h->n_cks - 1);
}

// Reloads the detail and curves when the selection, the marks or a running run changed.
static void sync_panes(TuiHistory *h, bool force) {
    const DbRunInfo *r = selected(h);
    const bool running = r && r->status && strcmp(r->status, "running") == 0;
    if (!r) {
        free_detail(h);
        free_curves(h);
        return;
    }
    if (force || running || h->detail_id != r->id) {
        const int keep = h->ck_sel;
        const bool same = h->detail_id == r->id;
        load_detail(h, r->id);
        if (same) h->ck_sel = min_i(keep, max_i(0, h->n_cks - 1));
    }
    bool stale = force || h->n_curves == 0;
    const int want = h->n_marked >= 2 ? h->n_marked : 1;
    if (h->n_curves != want) stale = true;
    for (int i = 0; i < h->n_curves && !stale; i++)
        stale = h->curves[i].running || (h->n_marked >= 2 ? h->curves[i].id != h->marked[i] : h->curves[i].id != r->id);
    if (stale) load_curves(h);
}

static void history_load(TuiApp *app, bool force) {
    TuiHistory *h = &app->history;
    const double now = clock_now_s();
    if (!force && now - h->loaded_at < HISTORY_REFRESH_S) return;
    h->loaded_at = now;
    Error err;
    if (!h->db && !(h->db = db_open(app->db_path, false, &err))) {
        snprintf(h->error, sizeof h->error, "no runs yet (%.480s)", err.msg);
        return;
    }
    h->error[0] = '\0';
    const int64_t keep = selected(h) ? selected(h)->id : 0;
    DbRunInfo *runs = NULL;
    int n = 0;
    const DbRunFilter all = {0};
    if (db_runs_list(h->db, &all, &runs, &n, &err)) {
        snprintf(h->error, sizeof h->error, "%s", err.msg);
        return;
    }
    db_runs_free(h->runs, h->n_runs);
    h->runs = runs;
    h->n_runs = n;
    apply_view(h);
    for (int i = 0; i < h->n_shown; i++)
        if (h->runs[h->shown[i]].id == keep) h->sel = i;
    sync_panes(h, force);
}

// ---- drawing: the table ------------------------------------------------------------------------------

typedef struct {
    const char *head;
    int w;          // columns, the first one included (the schedule's: at least)
    int drop;       // dropped first when narrow: higher first; 0 never
} Column;

enum { C_MARK, C_ID, C_STARTED, C_STATUS, C_SCHED, C_SHAPE, C_STEPS, C_LOSS, C_TOKS, C_BUBBLE, N_COLS };
static const Column TABLE_COLS[N_COLS] = {
    {"", 2, 0}, {"id", 5, 0}, {"started", 12, 2}, {"status", 9, 0}, {"schedule", 10, 0},
    {"PxVxD M", 10, 3}, {"steps", 10, 1}, {"loss", 7, 0}, {"tok/s", 7, 4}, {"bubble", 7, 5}};
#define SCHED_COL_MAX 28

// A schedule as the table shows it: the name, or a CSV file's name without its folder.
static const char *schedule_label(const DbRunInfo *r) {
    const char *s = r->schedule ? r->schedule : "-", *slash = strrchr(s, '/');
    return slash && slash[1] ? slash + 1 : s;
}

// Which columns show, and how wide: the schedule column fits the longest shown name (up to
// SCHED_COL_MAX); columns leave, by their drop level, until the rest fit.
static void visible_columns(const TuiHistory *h, int width, bool *on, int *w) {
    int total = 0;
    for (int c = 0; c < N_COLS; c++) on[c] = true, w[c] = TABLE_COLS[c].w;
    for (int i = 0; i < h->n_shown; i++)
        w[C_SCHED] = max_i(w[C_SCHED], min_i(SCHED_COL_MAX, tui_text_width(schedule_label(&h->runs[h->shown[i]])) + 1));
    for (int c = 0; c < N_COLS; c++) total += w[c];
    for (int level = 1; level <= 5 && total > width; level++)
        for (int c = 0; c < N_COLS; c++)
            if (TABLE_COLS[c].drop == level) on[c] = false, total -= w[c];
}

static bool is_marked(const TuiHistory *h, int64_t id) {
    for (int i = 0; i < h->n_marked; i++)
        if (h->marked[i] == id) return true;
    return false;
}

static void cell_text(const TuiHistory *h, const DbRunInfo *r, int c, char *buf, size_t size) {
    switch (c) {
    case C_MARK: snprintf(buf, size, "%s", is_marked(h, r->id) ? "*" : ""); break;
    case C_ID: snprintf(buf, size, "%lld", (long long)r->id); break;
    case C_STARTED:   // "2026-11-21T20:35:01.123Z" -> "11-21T20:35" (the T becomes a blank below)
        snprintf(buf, size, "%.11s", r->started_at && strlen(r->started_at) > 16 ? r->started_at + 5 : "-");
        break;
    case C_STATUS: snprintf(buf, size, "%s", shown_status(r)); break;
    case C_SCHED: snprintf(buf, size, "%s", schedule_label(r)); break;
    case C_SHAPE: snprintf(buf, size, "%dx%dx%d M%d", r->stages, r->virtual_stages, r->dp, r->microbatches); break;
    case C_STEPS: snprintf(buf, size, "%d/%d", r->last_step, r->steps_planned); break;
    case C_LOSS: snprintf(buf, size, isnan(r->last_loss) ? "-" : "%.4f", r->last_loss); break;
    case C_TOKS: tui_fmt_count(r->median_tokens_per_s, buf, size); break;
    case C_BUBBLE: snprintf(buf, size, isnan(r->mean_bubble) ? "-" : "%.1f%%", 100 * r->mean_bubble); break;
    default: buf[0] = '\0';
    }
    if (c == C_STARTED && buf[0] != '-' && strlen(buf) > 5) buf[5] = ' ';   // "11-21T20:35" -> "11-21 20:35"
}

static void draw_table(TuiApp *app, const HistoryLayout *L) {
    TuiHistory *h = &app->history;
    char title[256];
    snprintf(title, sizeof title, "runs  %d of %d  sorted by %s %s%s%s", h->n_shown, h->n_runs, SORT_NAMES[h->sort],
             h->sort_desc ? "desc" : "asc", h->filter[0] ? "  filter: " : "", h->filter);
    tui_panel(L->table, title, THEME_TITLE);
    const Rect in = layout_inner(L->table);
    bool on[N_COLS];
    int cw[N_COLS];
    visible_columns(h, in.w, on, cw);
    int x = in.x;
    for (int c = 0; c < N_COLS; c++)
        if (on[c]) x += tui_textf(in.y, x, min_i(cw[c], in.x + in.w - x), THEME_DIM, "%-*s", cw[c], TABLE_COLS[c].head);
    if (h->error[0] && h->n_runs == 0) {
        tui_text(in.y + 1, in.x + 1, in.w - 1, THEME_DIM, h->error);
        return;
    }
    if (h->sel < h->scroll) h->scroll = h->sel;
    if (h->sel >= h->scroll + L->table_rows) h->scroll = h->sel - L->table_rows + 1;
    h->scroll = max_i(0, min_i(h->scroll, h->n_shown - L->table_rows));
    for (int k = 0; k < L->table_rows && h->scroll + k < h->n_shown; k++) {
        const int i = h->scroll + k, y = in.y + 1 + k;
        const DbRunInfo *r = &h->runs[h->shown[i]];
        const bool sel = i == h->sel;
        if (sel) tui_fill((Rect){in.x, y, in.w, 1}, THEME_SELECTED);
        x = in.x;
        for (int c = 0; c < N_COLS; c++) {
            if (!on[c]) continue;
            char cell[256];
            cell_text(h, r, c, cell, sizeof cell);
            ThemeRole role = sel ? THEME_SELECTED : THEME_TEXT;
            const bool failed = r->crashed || (r->status && !strcmp(r->status, "failed"));
            const bool running = !r->crashed && r->status && !strcmp(r->status, "running");
            if (!sel && c == C_STATUS && (failed || running)) role = failed ? THEME_ERROR : THEME_TITLE;
            const int w = min_i(cw[c], in.x + in.w - x);
            tui_text_words(y, x, w - 1, role, cell);
            x += w;
        }
    }
}

// ---- drawing: detail and compare ------------------------------------------------------------------

static const ThemeRole CURVE_ROLES[TUI_MAX_MARKED + 1] = {THEME_LOSS, THEME_LOSS_COMPARE, THEME_LOSS_EMA,
                                                           THEME_BAR_BUSY, THEME_BAR_COMM, THEME_TITLE, THEME_TEXT};
static const char CURVE_MARKS[TUI_MAX_MARKED + 1] = {'*', '+', 'o', 'x', '#', '@', '%'};

// The runs' loss curves, each with its validation loss where it has one: in the validation
// colour beside a lone run, in the run's own colour (mark 'v') among marked runs.
static void draw_curves(const TuiHistory *h, Rect area) {
    if (area.h < 2 || area.w < 12 || h->n_curves == 0) return;
    TuiPlotSeries s[2 * (TUI_MAX_MARKED + 1)];
    int n = 0;
    const bool alone = h->n_curves == 1;
    for (int i = 0; i < h->n_curves; i++) {
        const TuiRunCurve *c = &h->curves[i];
        s[n++] = (TuiPlotSeries){c->loss, c->n, CURVE_ROLES[i], CURVE_MARKS[i]};
        if (c->val) s[n++] = (TuiPlotSeries){c->val, c->n, alone ? THEME_LOSS_VAL : CURVE_ROLES[i], 'v'};
    }
    float lo = 0, hi = 0;
    bool any = false;
    for (int i = 0; i < n; i++) {
        float a, b;
        if (!tui_series_range(s[i].y, s[i].n, &a, &b)) continue;
        lo = any ? fminf(lo, a) : a, hi = any ? fmaxf(hi, b) : b, any = true;
    }
    if (!any) {
        tui_text(area.y, area.x, area.w, THEME_DIM, "no steps recorded");
        return;
    }
    tui_textf(area.y, area.x, 7, THEME_DIM, "%6.3f", hi);
    tui_textf(area.y + area.h - 1, area.x, 7, THEME_DIM, "%6.3f", lo);
    tui_plot((Rect){area.x + 7, area.y, area.w - 7, area.h}, s, n, lo, hi);
}

static void draw_compare(TuiApp *app, const HistoryLayout *L) {
    TuiHistory *h = &app->history;
    tui_panel(L->detail, "compare  (space marks or unmarks)", THEME_TITLE);
    const Rect in = layout_inner(L->detail);
    int y = in.y;
    // run, schedule (what is left), bubble, tok/s, peak act, loss: numbers right-aligned.
    const int num_w = 8 + 7 + 9 + 8, sched_w = in.w - 2 - 5 - num_w;
    tui_textf(y, in.x, in.w, THEME_DIM, "  %-5s", "run");
    tui_text(y, in.x + 7, sched_w - 1, THEME_DIM, "schedule");
    tui_textf(y++, in.x + 7 + sched_w, num_w, THEME_DIM, "%8s%7s%9s%8s", "bubble", "tok/s", "peak act", "loss");
    for (int i = 0; i < h->n_curves && y < in.y + in.h; i++) {
        const TuiRunCurve *c = &h->curves[i];
        const DbRunInfo *r = find_run(h, c->id);
        char toks[16], peak[16], bubble[16] = "-", loss[16] = "-";
        tui_fmt_count(r ? r->median_tokens_per_s : NAN, toks, sizeof toks);
        tui_fmt_bytes(c->peak_bytes >= 0 ? (double)c->peak_bytes : NAN, peak, sizeof peak);
        if (r && !isnan(r->mean_bubble)) snprintf(bubble, sizeof bubble, "%.1f%%", 100 * r->mean_bubble);
        if (r && !isnan(r->last_loss)) snprintf(loss, sizeof loss, "%.4f", r->last_loss);
        tui_textf(y, in.x, 2, CURVE_ROLES[i], "%c ", CURVE_MARKS[i]);
        tui_textf(y, in.x + 2, 5, CURVE_ROLES[i], "%lld", (long long)c->id);
        tui_text_words(y, in.x + 7, sched_w - 1, CURVE_ROLES[i], r ? schedule_label(r) : "-");
        tui_textf(y++, in.x + 7 + sched_w, num_w, CURVE_ROLES[i], "%8s%7s%9s%8s", bubble, toks, peak, loss);
    }
    draw_curves(h, (Rect){in.x, y, in.w, in.y + in.h - y});
}

// Fields left to right, two blanks apart; a field that does not fit the row starts the next.
// Returns the row after the last one used (at most end).
static int draw_wrapped(int y, int end, int x, int w, ThemeRole role, char (*fields)[96], int n) {
    int at = 0;
    for (int i = 0; i < n && y < end; i++) {
        const int fw = tui_text_width(fields[i]);
        if (at && at + 2 + fw > w) {
            if (++y >= end) return y;
            at = 0;
        }
        at += (at ? 2 : 0);
        at += tui_text_words(y, x + at, w - at, role, fields[i]);
    }
    return y + 1 < end ? y + 1 : end;
}

// The run's latest two samples, one line each, escaped (control bytes and invalid UTF-8 as
// \xNN, console/tui/pure/tui_sample.h) and clipped at the pane's edge; *y moves past them.
static void draw_samples(const TuiHistory *h, Rect in, int *y) {
    const int end = in.y + in.h;
    if (h->n_samples == 0 || *y >= end) return;
    tui_textf((*y)++, in.x, in.w, THEME_DIM, "samples (%d in the run), the latest:", h->n_samples);
    static char esc[4 * 1024];   // an escape is at most 4 bytes for each byte it stands for
    for (int k = max_i(0, h->n_samples - 2); k < h->n_samples && *y < end; k++) {
        const DbSample *s = &h->samples[k];
        char text[1024];
        snprintf(text, sizeof text, "%s", s->text);
        tui_sample_escape(text, esc, sizeof esc);
        const int x = tui_textf(*y, in.x, in.w, THEME_DIM, "step %-6d ", s->step);
        tui_text((*y)++, in.x + x, in.w - x, THEME_TEXT, esc);
    }
}

static void draw_detail(TuiApp *app, const HistoryLayout *L) {
    TuiHistory *h = &app->history;
    const DbRunInfo *r = selected(h);
    char title[64];
    snprintf(title, sizeof title, r ? "run %lld" : "run", r ? (long long)r->id : 0LL);
    tui_panel(L->detail, title, THEME_TITLE);
    const Rect in = layout_inner(L->detail);
    if (!r) return;
    int y = in.y;
    const int end = in.y + in.h;
    char params[16], toks[16];
    tui_fmt_count((double)r->params, params, sizeof params);
    tui_fmt_count(r->median_tokens_per_s, toks, sizeof toks);
    char f[8][96];
    snprintf(f[0], 96, "%s", shown_status(r));
    snprintf(f[1], 96, "started %.40s", r->started_at ? r->started_at : "-");
    y = draw_wrapped(y, end, in.x, in.w, THEME_TEXT, f, 2);
    snprintf(f[0], 96, "%.90s", schedule_label(r));
    snprintf(f[1], 96, "P%d V%d D%d M%d", r->stages, r->virtual_stages, r->dp, r->microbatches);
    snprintf(f[2], 96, "%.60s %s", r->model ? r->model : "-", params);
    snprintf(f[3], 96, "B%d T%d", r->batch, r->seq_len);
    snprintf(f[4], 96, "lr %g", r->lr);
    snprintf(f[5], 96, "%s %s", r->transport ? r->transport : "-", r->device ? r->device : "-");
    y = draw_wrapped(y, end, in.x, in.w, THEME_TEXT, f, 6);
    snprintf(f[0], 96, "steps %d/%d", r->last_step, r->steps_planned);
    snprintf(f[1], 96, "loss %.4f (min %.4f)", r->last_loss, r->min_loss);
    snprintf(f[2], 96, "%s tok/s", toks);
    int n_f = 3;
    if (r->evals > 0)
        snprintf(f[n_f++], 96, "val %.4f at step %d (min %.4f)", r->last_val_loss, r->last_val_step, r->min_val_loss);
    if (y < end) y = draw_wrapped(y, end, in.x, in.w, THEME_TEXT, f, n_f);
    if (y < end && isfinite(r->mean_bubble)) {
        const TuiBubble b = {r->mean_bubble, r->mean_ideal, r->mean_imbalance, r->mean_transfer, r->mean_contention};
        char text[256];
        if (isfinite(r->mean_ideal)) tui_bubble_text(&b, in.w, text, sizeof text);
        else snprintf(text, sizeof text, "bubble %.1f%%", 100 * r->mean_bubble);
        tui_text(y++, in.x, in.w, THEME_TEXT, text);
    }
    if (r->error && y < end) tui_text(y++, in.x, in.w, THEME_ERROR, r->error);
    if (h->n_stages && y < end) {
        char line[512];
        size_t len = (size_t)snprintf(line, sizeof line, "peak act per stage:");
        for (int k = 0; k < h->n_stages && len + 12 < sizeof line; k++) {
            char b[16];
            tui_fmt_bytes((double)h->stages[k].peak_act_bytes, b, sizeof b);
            len += (size_t)snprintf(line + len, sizeof line - len, " %s", b);
        }
        tui_text(y++, in.x, in.w, THEME_TEXT, line);
    }
    if (y < end && !h->n_cks) tui_text(y++, in.x, in.w, THEME_DIM, "no checkpoints");
    // One line left (80x24): the picked checkpoint with the keys, never a heading without rows.
    if (y + 1 == end && h->n_cks) {
        const DbCheckpointInfo *c = &h->cks[h->ck_sel];
        tui_textf(y++, in.x, in.w, THEME_SELECTED, "checkpoint %d/%d: step %d %s (c picks, F5 resumes)", h->ck_sel + 1,
                  h->n_cks, c->step, c->status ? c->status : "-");
    }
    if (y + 1 < end && h->n_cks) tui_text(y++, in.x, in.w, THEME_DIM, "checkpoints (c picks, F5 resumes):");
    // At most three checkpoint lines, around the picked one; the rest of the pane is the curve.
    const int first = max_i(0, min_i(h->ck_sel - 1, h->n_cks - 3));
    for (int k = first; k < h->n_cks && k < first + 3 && y < end; k++) {
        const DbCheckpointInfo *c = &h->cks[k];
        char size[16];
        tui_fmt_bytes((double)c->bytes, size, sizeof size);
        tui_textf(y++, in.x, in.w, k == h->ck_sel ? THEME_SELECTED : THEME_TEXT, "%s step %-6d %-9s %6s  %s",
                  k == h->ck_sel ? ">" : " ", c->step, c->status ? c->status : "-", size, c->dir ? c->dir : "-");
    }
    draw_samples(h, in, &y);
    draw_curves(h, (Rect){in.x, y, in.w, end - y});
}

static void history_draw(TuiApp *app, int cols, int rows) {
    TuiHistory *h = &app->history;
    HistoryLayout L;
    if (layout_history(cols, rows, h->filter_open || h->goon_open, &L)) {
        tui_too_small(&L.notice, LAYOUT_HISTORY_MIN_W, LAYOUT_HISTORY_MIN_H);
        return;
    }
    tui_fill(L.header, THEME_HEADER);
    const int x = tui_text(0, 0, cols, THEME_TITLE, "pptrain history  ");
    if (!tui_app_header_note(app, 0, x, cols - x))
        tui_textf(0, x, cols - x, THEME_HEADER, "%s  space marks runs to compare  / filters", app->db_path);
    draw_table(app, &L);
    if (h->n_marked >= 2) draw_compare(app, &L);
    else draw_detail(app, &L);
    if (h->goon_open) {
        tui_fill(L.filter, THEME_INPUT);
        tui_textf(L.filter.y, 0, cols, THEME_INPUT, "Go on to step: %s_   (its checkpoint is at its last step, %d; "
                  "Enter resumes, Esc cancels)", h->goon, h->goon_from);
    } else if (h->filter_open) {
        tui_fill(L.filter, THEME_INPUT);
        tui_textf(L.filter.y, 0, cols, THEME_INPUT, "Filter: %s_   (Enter keeps, Esc clears)", h->filter);
    }
}

// ---- keys -----------------------------------------------------------------------------------------

static void history_move(TuiApp *app, int d) {
    TuiHistory *h = &app->history;
    h->sel = max_i(0, min_i(h->n_shown - 1, h->sel + d));
    sync_panes(h, false);
}

static void key_up(TuiApp *app) { history_move(app, -1); }
static void key_down(TuiApp *app) { history_move(app, 1); }
static void key_pgup(TuiApp *app) { history_move(app, -10); }
static void key_pgdn(TuiApp *app) { history_move(app, 10); }
static void key_home(TuiApp *app) { history_move(app, -1000000); }
static void key_end(TuiApp *app) { history_move(app, 1000000); }

static void key_mark(TuiApp *app) {
    TuiHistory *h = &app->history;
    const DbRunInfo *r = selected(h);
    if (!r) return;
    for (int i = 0; i < h->n_marked; i++) {
        if (h->marked[i] != r->id) continue;
        memmove(&h->marked[i], &h->marked[i + 1], sizeof h->marked[0] * (size_t)(h->n_marked - i - 1));
        h->n_marked--;
        sync_panes(h, false);
        return;
    }
    if (h->n_marked == TUI_MAX_MARKED) {
        tui_app_status(app, THEME_WARNING, "at most %d runs at once", TUI_MAX_MARKED);
        return;
    }
    h->marked[h->n_marked++] = r->id;
    sync_panes(h, false);
}

static void key_sort(TuiApp *app) {
    TuiHistory *h = &app->history;
    h->sort = (h->sort + 1) % N_SORTS;
    h->sort_desc = h->sort == 0 || h->sort >= 4;   // newest, fastest, most bubble first; the rest ascending
    apply_view(h);
    sync_panes(h, false);
}

static void key_reverse(TuiApp *app) {
    app->history.sort_desc = !app->history.sort_desc;
    apply_view(&app->history);
}

static void key_filter(TuiApp *app) { app->history.filter_open = true; }

static void key_checkpoint(TuiApp *app) {
    TuiHistory *h = &app->history;
    if (h->n_cks) h->ck_sel = (h->ck_sel + 1) % h->n_cks;
}

// The newest complete checkpoint of the detail pane's run at or before the picked one.
static const DbCheckpointInfo *resume_checkpoint(const TuiHistory *h, int64_t run) {
    if (h->detail_id != run) return NULL;
    for (int k = h->ck_sel; k >= 0 && k < h->n_cks; k--)
        if (h->cks[k].dir && h->cks[k].status && strcmp(h->cks[k].status, "complete") == 0) return &h->cks[k];
    return NULL;
}

// Resume the selected run: from the picked checkpoint's folder, or the run's newest one. A
// checkpoint at the run's last step has nothing left to run: ask for the step to go on to.
static void key_resume(TuiApp *app) {
    TuiHistory *h = &app->history;
    const DbRunInfo *r = selected(h);
    if (!r) return;
    RunOptions ro = app->setup.ro;
    Error err;
    if (r->config_json && run_json_parse(r->config_json, "the run store", &ro.rc, &ro.pipe, &err)) {
        tui_app_status(app, THEME_ERROR, "run %lld: %s", (long long)r->id, err.msg);
        return;
    }
    ro.rc.optim.total_steps = ro.rc.steps;
    // The run goes on as its checkpoint says: the options the console was started with were
    // for its first run (a --batch among them would be refused as a change on --resume).
    ro.given = 0;
    const int D = ro.pipe.dp > 0 ? ro.pipe.dp : 1;
    if (app->mpi && ro.pipe.ranks * D != app->world) {
        tui_app_status(app, THEME_ERROR, "run %lld ran on %d x %d ranks; this mpirun has %d", (long long)r->id,
                       ro.pipe.ranks, D, app->world);
        return;
    }
    const DbCheckpointInfo *ck = resume_checkpoint(h, r->id);
    if (ck) snprintf(ro.resume, sizeof ro.resume, "%s", ck->dir);
    else snprintf(ro.resume, sizeof ro.resume, "%lld", (long long)r->id);
    if (ck && ck->step >= ro.rc.steps) {
        h->goon_open = true;
        h->goon_from = ck->step;
        h->goon_ro = ro;
        snprintf(h->goon, sizeof h->goon, "%d", 2 * ck->step);
        return;
    }
    tui_app_start_run(app, &ro);
}

// Enter on the go-on line: the resume with --steps N, as `pptrain train --resume DIR --steps N`.
static void goon_start(TuiApp *app) {
    TuiHistory *h = &app->history;
    char steps[16];
    snprintf(steps, sizeof steps, "%s", h->goon);
    char *argv[] = {"--steps", steps};
    Error err;
    RunOptions ro = h->goon_ro;
    long n = 0;
    if (cli_parse_int("steps", steps, h->goon_from + 1, 100000000, &n, &err) ||
        run_options_parse(2, argv, 0, &ro, &err) < 0) {
        tui_app_status(app, THEME_ERROR, "%s (more than %d)", err.msg, h->goon_from);
        return;
    }
    h->goon_open = false;
    tui_app_start_run(app, &ro);
}

static const TuiBinding HISTORY_KEYS[] = {
    {{TUI_FN(KEY_F(1)), '?', 0}, "F1", "Help", 0, "F1 ?      help", tui_key_help, NULL},
    {{TUI_FN(KEY_F(2)), 0, 0}, "F2", "Setup", 1, "F2        setup: schedule, stages, run options", tui_key_setup, NULL},
    {{TUI_FN(KEY_F(3)), 0, 0}, "F3", "Live", 1, "F3        the live run", tui_key_live, NULL},
    {{TUI_FN(KEY_F(4)), 0, 0}, "F4", "History", 3, "F4        this history screen", tui_key_history, NULL},
    {{TUI_FN(KEY_F(5)), 'R', 0}, "F5", "Resume", 0, "F5 R      resume the run from the picked (or newest) checkpoint",
     key_resume, NULL},
    {{TUI_FN(KEY_F(6)), 'o', 0}, "F6", "Sort", 2, "F6 o      sort by the next column (r reverses)", key_sort, NULL},
    {{TUI_FN(KEY_F(7)), ' ', 'm'}, "F7", "Mark", 0, "F7 space  mark / unmark a run; two or more are compared", key_mark,
     NULL},
    {{TUI_FN(KEY_F(8)), 't', 0}, "F8", "Theme", 2, "F8 t      next theme", tui_key_theme, NULL},
    {{TUI_FN(KEY_F(9)), '/', 0}, "F9", "Filter", 1, "F9 /      filter by id, schedule, status, model", key_filter, NULL},
    {{TUI_FN(KEY_F(10)), 'q', 0}, "F10", "Quit", 0, "F10 q     quit (asks first while a run is live)", tui_key_quit,
     NULL},
    {{TUI_FN(KEY_UP), 'k', 0}, NULL, NULL, 0, "up k      previous run", key_up, NULL},
    {{TUI_FN(KEY_DOWN), 'j', 0}, NULL, NULL, 0, "down j    next run", key_down, NULL},
    {{TUI_FN(KEY_PPAGE), 0, 0}, NULL, NULL, 0, "PgUp PgDn Home End  move further", key_pgup, NULL},
    {{TUI_FN(KEY_NPAGE), 0, 0}, NULL, NULL, 0, NULL, key_pgdn, NULL},
    {{TUI_FN(KEY_HOME), 'g', 0}, NULL, NULL, 0, NULL, key_home, NULL},
    {{TUI_FN(KEY_END), 'G', 0}, NULL, NULL, 0, NULL, key_end, NULL},
    {{'c', TUI_FN(KEY_RIGHT), 'l'}, NULL, NULL, 0, "c l right pick the next checkpoint of the run", key_checkpoint, NULL},
    {{'r', 0, 0}, NULL, NULL, 0, "r         reverse the sort", key_reverse, NULL},
};

// The go-on line takes digits, Backspace, Enter and Esc while open.
static bool goon_key(TuiApp *app, int key) {
    TuiHistory *h = &app->history;
    const size_t len = strlen(h->goon);
    if (key == '\n' || key == '\r' || key == TUI_FN(KEY_ENTER)) goon_start(app);
    else if (key == 27) h->goon_open = false;
    else if (key == TUI_FN(KEY_BACKSPACE) || key == 127 || key == 8) {
        if (len) h->goon[len - 1] = '\0';
    } else if (key >= '0' && key <= '9' && len + 1 < sizeof h->goon) {
        h->goon[len] = (char)key;
        h->goon[len + 1] = '\0';
    }
    return true;
}

// The filter line (and the go-on line) take every key while open.
static bool history_key(TuiApp *app, int key) {
    TuiHistory *h = &app->history;
    if (h->goon_open) return goon_key(app, key);
    if (!h->filter_open) return false;
    const size_t len = strlen(h->filter);
    if (key == '\n' || key == '\r' || key == TUI_FN(KEY_ENTER)) h->filter_open = false;
    else if (key == 27) h->filter_open = false, h->filter[0] = '\0';
    else if (key == TUI_FN(KEY_BACKSPACE) || key == 127 || key == 8) {
        if (len) h->filter[len - 1] = '\0';
    } else if (key >= 32 && key < 127 && len + 1 < sizeof h->filter) {
        h->filter[len] = (char)key;
        h->filter[len + 1] = '\0';
    } else return true;
    apply_view(h);
    sync_panes(h, false);
    return true;
}

static void history_click(TuiApp *app, int cols, int rows, int x, int y, bool twice) {
    TuiHistory *h = &app->history;
    HistoryLayout L;
    if (layout_history(cols, rows, h->filter_open || h->goon_open, &L)) return;
    const Rect in = layout_inner(L.table);
    const Rect list = {in.x, in.y + 1, in.w, L.table_rows};
    if (!layout_contains(&list, x, y)) return;
    const int i = h->scroll + (y - list.y);
    if (i >= h->n_shown) return;
    h->sel = i;
    sync_panes(h, false);
    if (twice) key_mark(app);
}

static void history_enter(TuiApp *app) { history_load(app, true); }

// Reloads the store every HISTORY_REFRESH_S; true when it did.
static bool history_refresh(TuiApp *app) {
    const double loaded = app->history.loaded_at;
    history_load(app, false);
    return app->history.loaded_at != loaded;
}

const TuiScreenOps TUI_HISTORY_SCREEN = {.enter = history_enter, .poll = history_refresh, .draw = history_draw,
                                         .key = history_key, .click = history_click, .keys = HISTORY_KEYS,
                                         .n_keys = (int)(sizeof HISTORY_KEYS / sizeof HISTORY_KEYS[0])};
