// console/tui/pure/tui_chart: pure chart math (see tui_chart.h). No curses here.
#include "console/tui/pure/tui_chart.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/schedule/schedule.h"

TuiCellKind tui_cell_kind(int action_type) {
    switch (action_type) {
    case ACT_F: return TUI_CELL_F;
    case ACT_B: return TUI_CELL_B;
    case ACT_I: return TUI_CELL_I;
    case ACT_W: return TUI_CELL_W;
    default: return TUI_CELL_COMM;
    }
}

char tui_cell_char(TuiCellKind k) {
    static const char CHARS[TUI_CELL_KINDS] = {'.', 'F', 'B', 'I', 'W', '-'};
    return k < TUI_CELL_KINDS ? CHARS[k] : '?';
}

// ---- Gantt lanes ------------------------------------------------------------------------

typedef struct {
    double cover[TUI_CELL_KINDS];   // time of each kind inside the column
    double best[TUI_CELL_KINDS];    // the largest single action's share, per kind
    int32_t mb[TUI_CELL_KINDS];     // ... and its microbatch
    bool alt[TUI_CELL_KINDS];       // ... and whether its stage is an odd one of the lane's
} ColumnCover;

static void cover_event(ColumnCover *cols, int width, const TuiEvent *e, bool alt, double t0, double unit) {
    const double a = (e->t0 - t0) / unit, b = (e->t1 - t0) / unit;
    if (!(b > 0) || !(a < width) || e->kind >= TUI_CELL_KINDS) return;
    const int first = a < 0 ? 0 : (int)a;
    const int last = b >= width ? width - 1 : (int)ceil(b) - 1;
    for (int k = first; k <= last; k++) {
        const double lo = fmax(a, k), hi = fmin(b, k + 1.0);
        if (hi <= lo) continue;
        ColumnCover *c = &cols[k];
        c->cover[e->kind] += hi - lo;
        if (hi - lo > c->best[e->kind]) {
            c->best[e->kind] = hi - lo;
            c->mb[e->kind] = e->mb;
            c->alt[e->kind] = alt;
        }
    }
}

static bool is_compute_kind(int kind) { return kind >= TUI_CELL_F && kind <= TUI_CELL_W; }

// A compute action that shows in none of its columns takes its midpoint's column (see .h).
static void rescue_narrow(const TuiEvent *e, bool alt, double t0, double unit, int width, TuiGanttCell *out) {
    if (!is_compute_kind(e->kind)) return;
    const double a = (e->t0 - t0) / unit, b = (e->t1 - t0) / unit;
    if (!(b > 0) || !(a < width)) return;
    const int first = a < 0 ? 0 : (int)a, last = b >= width ? width - 1 : (b > a ? (int)ceil(b) - 1 : first);
    for (int k = first; k <= last; k++)
        if (out[k].kind == e->kind && out[k].mb == e->mb) return;
    int mid = (int)((a + b) / 2);
    mid = mid < 0 ? 0 : mid >= width ? width - 1 : mid;
    TuiGanttCell *c = &out[mid];
    // A block's first cell is taken only from a block that goes on after it.
    if (c->start && is_compute_kind(c->kind)) {
        if (!(mid + 1 < width && out[mid + 1].kind == c->kind && !out[mid + 1].start)) return;
        out[mid + 1].start = true;
    }
    *c = (TuiGanttCell){.kind = e->kind, .start = true, .alt = alt, .mb = e->mb};
}

static int cmp_int(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

// alt[i]: event i's stage is the 2nd, 4th, ... of the distinct stages among the lane's
// events, in stage order (a rank's virtual stages: its chunk 1 of 2 under interleaving, zb-v
// and dualpipe-v).
static bool *stage_alternation(const TuiEvent *ev, int n) {
    bool *alt = xcalloc((size_t)n + 1, sizeof(bool));
    int *stages = xmalloc(sizeof(int) * ((size_t)n + 1)), n_distinct = 0;
    for (int i = 0; i < n; i++) stages[i] = ev[i].stage;
    qsort(stages, (size_t)n, sizeof(int), cmp_int);
    for (int i = 0; i < n; i++)
        if (i == 0 || stages[i] != stages[i - 1]) stages[n_distinct++] = stages[i];
    for (int i = 0; i < n; i++) {
        const int stage = ev[i].stage;
        const int *at = bsearch(&stage, stages, (size_t)n_distinct, sizeof(int), cmp_int);
        alt[i] = at && (at - stages) % 2 == 1;
    }
    free(stages);
    return alt;
}

void tui_gantt_raster(const TuiEvent *ev, int n, double t0, double unit, int width, TuiGanttCell *out) {
    if (width <= 0) return;
    ColumnCover *cols = xcalloc((size_t)width, sizeof *cols);
    bool *alt = stage_alternation(ev, n);
    for (int i = 0; i < n; i++) cover_event(cols, width, &ev[i], alt[i], t0, unit);
    for (int k = 0; k < width; k++) {
        const ColumnCover *c = &cols[k];
        int kind = TUI_CELL_IDLE;
        double most = 0.0, used = 0.0;
        for (int t = 1; t < TUI_CELL_KINDS; t++) {
            used += c->cover[t];
            if (c->cover[t] > most) most = c->cover[t], kind = t;
        }
        if (1.0 - used > most) kind = TUI_CELL_IDLE;
        out[k] = (TuiGanttCell){.kind = (uint8_t)kind, .start = false, .alt = kind && c->alt[kind],
                                .mb = kind ? c->mb[kind] : -1};
    }
    // A block starts at the first column its action wins (not before the window), and is
    // labelled with that action: a column the previous action of its kind covers more of
    // would otherwise give the new block the old one's microbatch ("F0F1F1F2", issue 29).
    for (int i = 0; i < n; i++) {
        const double a = (ev[i].t0 - t0) / unit, b = (ev[i].t1 - t0) / unit;
        if (a < 0 || a >= width) continue;
        for (int k = (int)a; k < width && k < b; k++)
            if (out[k].kind == ev[i].kind) {
                out[k].start = true;
                out[k].mb = ev[i].mb;
                out[k].alt = alt[i];
                break;
            }
    }
    free(cols);
    for (int i = 0; i < n; i++) rescue_narrow(&ev[i], alt[i], t0, unit, width, out);
    free(alt);
}

// A cell's letter: its kind's, in lower case for a compute action on an alternate stage.
static char cell_letter(const TuiGanttCell *c) {
    const char ch = tui_cell_char((TuiCellKind)c->kind);
    return c->alt && is_compute_kind(c->kind) ? (char)tolower((unsigned char)ch) : ch;
}

char tui_gantt_cell_char(const TuiGanttCell *c) { return cell_letter(c); }

void tui_gantt_text(const TuiGanttCell *cells, int width, char *out) {
    for (int k = 0; k < width; k++) out[k] = cell_letter(&cells[k]);
    out[width > 0 ? width : 0] = '\0';
    for (int k = 0; k < width; k++) {
        if (!cells[k].start || !is_compute_kind(cells[k].kind) || cells[k].mb < 0) continue;
        int end = k + 1;
        while (end < width && cells[end].kind == cells[k].kind && cells[end].alt == cells[k].alt && !cells[end].start)
            end++;
        char digits[16];
        const int len = snprintf(digits, sizeof digits, "%d", cells[k].mb);
        if (1 + len <= end - k) memcpy(out + k + 1, digits, (size_t)len);
    }
}

void tui_gantt_labels(const TuiGanttCell *cells, int width, char *out) {
    memset(out, ' ', (size_t)(width > 0 ? width : 0));
    out[width > 0 ? width : 0] = '\0';
    for (int k = 0; k < width; k++) {
        if (!cells[k].start || !is_compute_kind(cells[k].kind) || cells[k].mb < 0) continue;
        int next = k + 1;
        while (next < width && !(cells[next].start && is_compute_kind(cells[next].kind))) next++;
        char label[16];
        const int len = snprintf(label, sizeof label, "%c%d", cell_letter(&cells[k]), cells[k].mb);
        const int room = next < width ? next - k - 1 : width - k;
        if (len <= room) memcpy(out + k, label, (size_t)len);
    }
}

// ---- bars, smoothing, ranges --------------------------------------------------------------

void tui_bar_split(double busy, double comm, double idle, int width, int *n_busy, int *n_comm, int *n_idle) {
    busy = busy > 0 ? busy : 0, comm = comm > 0 ? comm : 0, idle = idle > 0 ? idle : 0;
    const double total = busy + comm + idle;
    *n_busy = *n_comm = 0;
    *n_idle = width > 0 ? width : 0;
    if (!(total > 0) || width <= 0) return;
    // Cumulative rounding keeps the parts summing to width.
    int b = (int)lround(width * busy / total);
    int bc = (int)lround(width * (busy + comm) / total);
    if (bc < b) bc = b;
    *n_busy = b;
    *n_comm = bc - b;
    *n_idle = width - bc;
}

double tui_ema_alpha(double alpha, int stride) {
    if (stride <= 1) return alpha;
    return 1.0 - pow(1.0 - alpha, stride);
}

void tui_ema(const float *y, int n, double alpha, float *out) {
    double m = NAN;
    for (int i = 0; i < n; i++) {
        if (isfinite(y[i])) m = isnan(m) ? y[i] : m + alpha * (y[i] - m);
        out[i] = (float)m;
    }
}

// The value at step x of the polyline through (steps[k], vals[k]); NaN outside its span.
static float polyline_at(const int *steps, const float *vals, int n, double x) {
    if (n == 0 || x < steps[0] || x > steps[n - 1]) return NAN;
    int k = 0;
    while (k + 1 < n && steps[k + 1] < x) k++;
    if (k + 1 == n || steps[k + 1] == steps[k]) return vals[k];
    const double f = (x - steps[k]) / (double)(steps[k + 1] - steps[k]);
    return (float)(vals[k] + f * (vals[k + 1] - vals[k]));
}

void tui_series_overlay(const int *steps, const float *vals, int n, double first_step, double stride, int n_points,
                        float *out) {
    for (int i = 0; i < n_points; i++) {
        // Point i stands for (the mean of) steps [first_step + i*stride, first_step + (i+1)*stride).
        const double at = first_step + i * stride + (stride - 1) / 2.0;
        out[i] = polyline_at(steps, vals, n, at);
    }
    // Every evaluation shows on the point whose span holds it, even where the line has none
    // (the first, the last, a lone one).
    for (int k = 0; k < n; k++) {
        const int i = stride > 0 ? (int)floor((steps[k] - first_step) / stride) : -1;
        if (i >= 0 && i < n_points && isnan(out[i])) out[i] = vals[k];
    }
}

bool tui_series_range(const float *y, int n, float *lo, float *hi) {
    bool any = false;
    for (int i = 0; i < n; i++) {
        if (!isfinite(y[i])) continue;
        if (!any || y[i] < *lo) *lo = y[i];
        if (!any || y[i] > *hi) *hi = y[i];
        any = true;
    }
    return any;
}

// ---- braille --------------------------------------------------------------------------------

uint8_t tui_braille_bit(int dx, int dy) {
    static const uint8_t BITS[2][4] = {{0x01, 0x02, 0x04, 0x40}, {0x08, 0x10, 0x20, 0x80}};
    return BITS[dx & 1][dy & 3];
}

static void set_dot(uint8_t *cells, int w, int h, int x, int y) {
    if (x < 0 || y < 0 || x >= 2 * w || y >= 4 * h) return;
    cells[(y / 4) * w + x / 2] |= tui_braille_bit(x % 2, y % 4);
}

static void dot_line(uint8_t *cells, int w, int h, int x0, int y0, int x1, int y1) {
    const int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
    const int dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
    int e = dx + dy;
    for (;;) {
        set_dot(cells, w, h, x0, y0);
        if (x0 == x1 && y0 == y1) return;
        const int e2 = 2 * e;
        if (e2 >= dy) e += dy, x0 += sx;
        if (e2 <= dx) e += dx, y0 += sy;
    }
}

void tui_braille_plot(const float *y, int n, float lo, float hi, int w, int h, uint8_t *cells) {
    if (w <= 0 || h <= 0 || n <= 0) return;
    const int W = 2 * w, H = 4 * h;
    int px = 0, py = 0;
    bool have_prev = false;
    for (int i = 0; i < n; i++) {
        if (!isfinite(y[i])) {
            have_prev = false;
            continue;
        }
        const int x = n == 1 ? 0 : (int)lround((double)i * (W - 1) / (n - 1));
        double f = hi > lo ? (hi - y[i]) / (double)(hi - lo) : 0.5;
        f = f < 0 ? 0 : f > 1 ? 1 : f;
        const int yy = (int)lround(f * (H - 1));
        if (have_prev) dot_line(cells, w, h, px, py, x, yy);
        else set_dot(cells, w, h, x, yy);
        px = x, py = yy, have_prev = true;
    }
}

// ---- a series in fixed memory -----------------------------------------------------------------

void tui_series_reset(TuiSeries *s) {
    s->n = 0;
    s->stride = 1;
    s->first_step = 1;
    s->acc = 0.0;
    s->acc_n = 0;
}

void tui_series_push(TuiSeries *s, int step, double value) {
    if (s->n == 0 && s->acc_n == 0) s->first_step = step;
    s->acc += value;
    if (++s->acc_n < s->stride) return;
    s->y[s->n++] = (float)(s->acc / s->acc_n);
    s->acc = 0.0;
    s->acc_n = 0;
    if (s->n < TUI_SERIES_CAP) return;
    for (int i = 0; i < TUI_SERIES_CAP / 2; i++) s->y[i] = 0.5f * (s->y[2 * i] + s->y[2 * i + 1]);
    s->n = TUI_SERIES_CAP / 2;
    s->stride *= 2;
}

int tui_series_points(const TuiSeries *s, float *out, int cap) {
    int n = s->n < cap ? s->n : cap;
    memcpy(out, s->y, sizeof(float) * (size_t)n);
    if (s->acc_n > 0 && n < cap) out[n++] = (float)(s->acc / s->acc_n);
    return n;
}

void tui_series_copy(TuiSeries *dst, const TuiSeries *src) {
    dst->n = src->n;
    dst->stride = src->stride;
    dst->first_step = src->first_step;
    dst->acc = src->acc;
    dst->acc_n = src->acc_n;
    memcpy(dst->y, src->y, sizeof(float) * (size_t)src->n);
}

// ---- text -----------------------------------------------------------------------------------

static void append(char *buf, size_t size, size_t *len, const char *fmt, int a, int b) {
    if (*len >= size) return;
    const int w = snprintf(buf + *len, size - *len, fmt, a, b);  // "%d," ignores b
    if (w > 0) *len += (size_t)w;
}

void tui_layer_ranges(const int *stage_layers, const int *stage_rank, int n_stages, int rank, char *buf,
                      size_t size) {
    size_t len = 0;
    int first = 0, run_lo = -1, run_hi = -1;
    buf[0] = '\0';
    for (int s = 0; s < n_stages; s++) {
        if (stage_layers[s] < 0) {
            snprintf(buf, size, "?");
            return;
        }
        const int lo = first, hi = first + stage_layers[s] - 1;
        first += stage_layers[s];
        if (stage_rank[s] != rank || stage_layers[s] == 0) continue;
        if (run_lo >= 0 && lo == run_hi + 1) {
            run_hi = hi;
            continue;
        }
        if (run_lo >= 0) append(buf, size, &len, run_lo == run_hi ? "%d," : "%d-%d,", run_lo, run_hi);
        run_lo = lo, run_hi = hi;
    }
    if (run_lo < 0) snprintf(buf, size, "-");
    else append(buf, size, &len, run_lo == run_hi ? "%d" : "%d-%d", run_lo, run_hi);
}

void tui_fmt_bytes(double v, char *buf, size_t size) {
    static const char UNITS[] = "BKMGTP";
    if (!isfinite(v) || v < 0) {
        snprintf(buf, size, "-");
        return;
    }
    int u = 0;
    while (v >= 1024.0 && u < 5) v /= 1024.0, u++;
    if (u == 0) snprintf(buf, size, "%.0fB", v);
    else snprintf(buf, size, v < 9.95 ? "%.1f%c" : "%.0f%c", v, UNITS[u]);
}

void tui_fmt_count(double v, char *buf, size_t size) {
    static const char UNITS[] = " kMGT";
    if (!isfinite(v)) {
        snprintf(buf, size, "-");
        return;
    }
    int u = 0;
    while (fabs(v) >= 999.5 && u < 4) v /= 1000.0, u++;
    if (u == 0) snprintf(buf, size, "%.0f", v);
    else snprintf(buf, size, fabs(v) < 9.995 ? "%.2f%c" : fabs(v) < 99.95 ? "%.1f%c" : "%.0f%c", v, UNITS[u]);
}

void tui_fmt_duration(double s, char *buf, size_t size) {
    if (!isfinite(s) || s < 0) {
        snprintf(buf, size, "--:--");
        return;
    }
    const long t = lround(s);
    if (t < 3600) snprintf(buf, size, "%ld:%02ld", t / 60, t % 60);
    else snprintf(buf, size, "%ldh%02ldm", t / 3600, t / 60 % 60);
}

bool tui_contains_ci(const char *hay, const char *needle) {
    if (!needle || !needle[0]) return true;
    if (!hay) return false;
    const size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return true;
    }
    return false;
}
