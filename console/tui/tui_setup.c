// console/tui/tui_setup: the run setup screen. A form (every built-in schedule plus the CSV
// schedules in the working directory, then stages / virtual / dp / microbatches / batch /
// seq / model / steps / lr / warmup / data) beside the plan the choice predicts: the
// simulated timeline, its bubble, and the peak activations per stage (`pptrain plan`); on
// the plan panel's border, the layout `pptrain plan --from-run latest` ranks first.
#define NCURSES_WIDECHAR 1
#include <ctype.h>
#include <curses.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "console/tui/tui_app.h"
#include "console/tui/tui_draw.h"
#include "console/plan_from_run.h"
#include "console/run_session.h"
#include "engine/schedule/schedule.h"

static int min_i(int a, int b) { return a < b ? a : b; }
static int max_i(int a, int b) { return a > b ? a : b; }

static const char *const FIELD_LABELS[TUI_FIELD_COUNT] = {
    "stages P", "virtual V", "dp D", "microbatches M", "batch B", "seq T",
    "model", "steps", "lr", "warmup", "data"};

static int form_lines(const TuiSetup *s) { return s->n_names + TUI_FIELD_COUNT; }
static bool on_schedule(const TuiSetup *s) { return s->cursor < s->n_names; }
static TuiField cursor_field(const TuiSetup *s) { return (TuiField)(s->cursor - s->n_names); }
static const char *chosen_name(const TuiSetup *s) { return s->names[s->chosen]; }
static bool chosen_csv(const TuiSetup *s) { return schedule_is_file(chosen_name(s)); }

static int cmp_names(const void *a, const void *b) { return strcmp(a, b); }

// A CSV that starts as torch's schedule files do: the first cell an action such as "0F0",
// "0UNSHARD" or "(0F3;3B1)OVERLAP_F_B" (a stage number, then capitals). Keeps the working
// directory's other CSVs (a `history export`, data) out of the schedule list.
static bool looks_like_schedule_csv(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char head[64] = {0};
    const size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    size_t i = n >= 3 && memcmp(head, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;   // a UTF-8 byte order mark
    while (i < n && (head[i] == ' ' || head[i] == '\t')) i++;
    if (i < n && head[i] == '(') i++;
    const size_t digits = i;
    while (i < n && isdigit((unsigned char)head[i])) i++;
    return i > digits && i < n && isupper((unsigned char)head[i]);
}

// Built-in schedules, then the working directory's schedule CSVs (looks_like_schedule_csv), sorted.
static void scan_schedules(TuiSetup *s) {
    char keep[256];
    snprintf(keep, sizeof keep, "%.255s", s->n_names ? chosen_name(s) : s->ro.pipe.schedule);
    s->n_names = 0;
    for (int i = 0; i < SCHEDULE_COUNT && s->n_names < TUI_MAX_SCHEDULES; i++)
        snprintf(s->names[s->n_names++], sizeof s->names[0], "%s", SCHEDULE_REGISTRY[i].name);
    const int builtin = s->n_names;
    DIR *d = opendir(".");
    for (struct dirent *e; d && (e = readdir(d)) && s->n_names < TUI_MAX_SCHEDULES;) {
        const size_t len = strlen(e->d_name);
        if (e->d_name[0] != '.' && len > 4 && len < sizeof s->names[0] && strcmp(e->d_name + len - 4, ".csv") == 0 &&
            looks_like_schedule_csv(e->d_name))
            snprintf(s->names[s->n_names++], sizeof s->names[0], "%s", e->d_name);
    }
    if (d) closedir(d);
    qsort(s->names[builtin], (size_t)(s->n_names - builtin), sizeof s->names[0], cmp_names);
    s->chosen = 0;
    bool found = false;
    for (int i = 0; i < s->n_names; i++)
        if (strcmp(s->names[i], keep) == 0) s->chosen = i, found = true;
    // A CSV given with --schedule outside the working directory stays choosable.
    if (!found && keep[0] && s->n_names < TUI_MAX_SCHEDULES) {
        snprintf(s->names[s->n_names], sizeof s->names[0], "%s", keep);
        s->chosen = s->n_names++;
    }
    s->dirty = true;
}

void tui_setup_init(TuiSetup *s, const RunOptions *ro) {
    memset(s, 0, sizeof *s);
    s->ro = *ro;
    if (s->ro.pipe.virtual_stages == 0) s->ro.pipe.virtual_stages = 2;
    scan_schedules(s);
    s->cursor = s->chosen;
    s->resumed = s->ro;
}

void tui_setup_free(TuiSetup *s) { tui_plan_free(&s->plan); }

static void list_ints(const int *v, int n, char *buf, size_t size);

// The layout `pptrain plan --from-run latest` ranks first: the store's newest run, its measured
// stage times, every registry layout simulated at them. "" when the store has no measured run.
static void suggest_layout(TuiApp *app) {
    TuiSetup *s = &app->setup;
    s->suggestion[0] = '\0';
    s->suggested = true;
    RunPlan rp;
    Error err;
    if (access(app->db_path, F_OK) != 0 || plan_from_run_build(app->db_path, "latest", &rp, &err)) return;
    const PlanLayout *best = &rp.layouts[0];
    char layers[256];
    list_ints(best->split, best->S, layers, sizeof layers);
    snprintf(s->suggestion, sizeof s->suggestion,
             " by run %lld's stage times, next: %s P%d V%d M%d layers %s: %.1fms, bubble %.1f%% "
             "(run %lld: %.1fms, %.1f%%) ",   // "281.2ms": a cut after a word never strands a figure
             rp.run, best->schedule, rp.P, best->V, best->M, layers, best->step_ms, 100 * best->bubble, rp.run,
             rp.step_ms, 100 * rp.bubble);
    plan_from_run_free(&rp);
}

static void setup_enter(TuiApp *app) {
    scan_schedules(&app->setup);
    app->setup.suggested = false;  // a run may have ended since: the next draw asks the store again
}

// ---- options and validation ---------------------------------------------------------------------

// A resumed run (console --resume, its first run): the form opened on the checkpoint's options,
// and a field changed since counts as given, as on a command line: run_session takes a new
// layout, steps or data, and refuses a change to what a resumed run keeps (its batch, seq,
// model, lr, warmup) in one line, where unmarked it would have gone back to the checkpoint's
// without a word.
static void mark_changed_fields(const TuiSetup *s, const char *schedule, RunOptions *ro) {
    const RunOptions *now = &s->ro, *was = &s->resumed;
    const struct {
        bool changed;
        const char *flag;
    } fields[] = {
        {strcmp(schedule, was->pipe.schedule) != 0, "--schedule"},
        {now->pipe.ranks != was->pipe.ranks, "--stages"},
        {now->pipe.virtual_stages != was->pipe.virtual_stages, "--virtual"},
        {now->pipe.dp != was->pipe.dp, "--dp"},
        {now->rc.microbatches != was->rc.microbatches, "--microbatches"},
        {now->rc.batch != was->rc.batch, "--batch"},
        {now->rc.seq_len != was->rc.seq_len, "--seq"},
        {strcmp(now->rc.model.name, was->rc.model.name) != 0, "--model"},
        {now->rc.steps != was->rc.steps, "--steps"},
        {now->rc.optim.lr != was->rc.optim.lr, "--lr"},
        {now->rc.optim.warmup_steps != was->rc.optim.warmup_steps, "--warmup"},
        {strcmp(now->rc.data_path, was->rc.data_path) != 0, "--data"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].changed) run_options_set_given(ro, fields[i].flag);
}

// The form's choice as run options (before validation).
static void form_options(const TuiSetup *s, RunOptions *ro) {
    *ro = s->ro;
    const char *name = chosen_name(s);
    snprintf(ro->pipe.schedule, sizeof ro->pipe.schedule, "%s", name);
    ro->pipe.virtual_stages = schedule_virtual_free(name) ? s->ro.pipe.virtual_stages : 0;
    if (chosen_csv(s) && s->plan_ok) {
        ro->pipe.ranks = s->plan.P;
        ro->rc.microbatches = s->plan.M;
        ro->pipe.virtual_stages = s->plan.S / s->plan.P;
    }
    ro->rc.optim.total_steps = ro->rc.steps;   // resume: --resume on the command line, for the first run only
    if (ro->resume[0]) mark_changed_fields(s, name, ro);
}

static void replan(TuiApp *app) {
    TuiSetup *s = &app->setup;
    if (!s->dirty) return;
    s->dirty = false;
    // A "cannot start" in the header was about the form as it was: once the form changes, the
    // plan panel says what is wrong now (or nothing), and the old reason would mislead.
    if (s->refused) app->status[0] = '\0';
    s->refused = false;
    tui_plan_free(&s->plan);
    s->plan_ok = false;
    RunOptions ro;
    form_options(s, &ro);
    Error err;
    s->plan_ok = tui_plan_build(ro.pipe.schedule, ro.pipe.ranks, ro.rc.microbatches, ro.pipe.virtual_stages,
                                &ro.rc.model, ro.rc.seq_len, &s->plan, &err) == 0;
    s->problem[0] = '\0';
    if (!s->plan_ok) snprintf(s->problem, sizeof s->problem, "%s", err.msg);
    else if (tui_setup_options(app, &ro, &err)) snprintf(s->problem, sizeof s->problem, "%s", err.msg);
}

int tui_setup_options(TuiApp *app, RunOptions *ro, Error *err) {
    TuiSetup *s = &app->setup;
    if (s->dirty) replan(app);
    form_options(s, ro);
    if (ro->resume[0] && run_session_check_kept(ro, err)) return -1;
    if (!s->plan_ok) {
        error_set(err, "%s", s->problem);
        return -1;
    }
    if (access(ro->rc.data_path, R_OK) != 0) {
        error_set(err, "data: %s not found (apt-get install fortunes, or type a path in the data field)",
                  ro->rc.data_path);
        return -1;
    }
    const int D = ro->pipe.dp > 0 ? ro->pipe.dp : 1;
    if (ro->rc.batch % (D * ro->rc.microbatches) != 0) {
        error_set(err, "batch %d is not a multiple of dp x microbatches = %d", ro->rc.batch, D * ro->rc.microbatches);
        return -1;
    }
    if (app->mpi && ro->pipe.ranks * D != app->world) {
        error_set(err, "under mpirun -np %d: stages x dp must be %d (it is %d x %d)", app->world, app->world,
                  ro->pipe.ranks, D);
        return -1;
    }
    return run_config_validate(&ro->rc, err);
}

// ---- values ----------------------------------------------------------------------------------------

static void field_value(const TuiSetup *s, TuiField f, char *buf, size_t size) {
    const RunOptions *ro = &s->ro;
    const bool csv = chosen_csv(s) && s->plan_ok;
    switch (f) {
    case TUI_FIELD_STAGES:
        if (csv) snprintf(buf, size, "%d (from the file)", s->plan.P);
        else snprintf(buf, size, "%d", ro->pipe.ranks);
        break;
    case TUI_FIELD_VIRTUAL:
        if (csv) snprintf(buf, size, "%d (from the file)", s->plan.S / s->plan.P);
        else if (schedule_virtual_free(chosen_name(s))) snprintf(buf, size, "%d", ro->pipe.virtual_stages);
        else snprintf(buf, size, "%d (fixed by %s)", schedule_default_virtual(chosen_name(s)), chosen_name(s));
        break;
    case TUI_FIELD_DP: snprintf(buf, size, "%d", ro->pipe.dp > 0 ? ro->pipe.dp : 1); break;
    case TUI_FIELD_MICRO:
        if (csv) snprintf(buf, size, "%d (from the file)", s->plan.M);
        else snprintf(buf, size, "%d", ro->rc.microbatches);
        break;
    case TUI_FIELD_BATCH: snprintf(buf, size, "%d", ro->rc.batch); break;
    case TUI_FIELD_SEQ: snprintf(buf, size, "%d", ro->rc.seq_len); break;
    case TUI_FIELD_MODEL: snprintf(buf, size, "%s", ro->rc.model.name); break;
    case TUI_FIELD_STEPS: snprintf(buf, size, "%d", ro->rc.steps); break;
    case TUI_FIELD_LR: snprintf(buf, size, "%g", ro->rc.optim.lr); break;
    case TUI_FIELD_WARMUP: snprintf(buf, size, "%d", ro->rc.optim.warmup_steps); break;
    case TUI_FIELD_DATA: snprintf(buf, size, "%.500s", ro->rc.data_path); break;
    default: buf[0] = '\0';
    }
}

static int clamp_i(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static const double LR_STEPS[] = {1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2};
enum { N_LR_STEPS = sizeof LR_STEPS / sizeof LR_STEPS[0] };

// Left / right on a field: the next smaller or larger sensible value.
static void field_step(TuiApp *app, TuiField f, int dir) {
    RunOptions *ro = &app->setup.ro;
    const int D = ro->pipe.dp > 0 ? ro->pipe.dp : 1, unit = D * ro->rc.microbatches;
    switch (f) {
    case TUI_FIELD_STAGES: ro->pipe.ranks = clamp_i(ro->pipe.ranks + dir, 1, 64); break;
    case TUI_FIELD_VIRTUAL: ro->pipe.virtual_stages = clamp_i(ro->pipe.virtual_stages + dir, 1, 8); break;
    case TUI_FIELD_DP: ro->pipe.dp = clamp_i(D + dir, 1, 64); break;
    case TUI_FIELD_MICRO: ro->rc.microbatches = clamp_i(ro->rc.microbatches + dir, 1, 1024); break;
    case TUI_FIELD_BATCH: ro->rc.batch = max_i(unit, (ro->rc.batch / unit + dir) * unit); break;
    case TUI_FIELD_SEQ: ro->rc.seq_len = clamp_i(dir > 0 ? ro->rc.seq_len * 2 : ro->rc.seq_len / 2, 1, 1 << 16); break;
    case TUI_FIELD_MODEL: {
        Error err;
        ModelConfig m;
        if (model_config_preset(&m, strcmp(ro->rc.model.name, "tiny") == 0 ? "small" : "tiny", &err) == 0)
            ro->rc.model = m;
        break;
    }
    case TUI_FIELD_STEPS: {
        const int step = ro->rc.steps < 100 ? 10 : ro->rc.steps < 1000 ? 100 : 1000;
        ro->rc.steps = clamp_i(ro->rc.steps + dir * step, 1, 100000000);
        break;
    }
    case TUI_FIELD_LR: {
        int k = 0;
        while (k < N_LR_STEPS - 1 && LR_STEPS[k] < ro->rc.optim.lr * 0.999) k++;
        if (dir < 0 && k > 0 && LR_STEPS[k] >= ro->rc.optim.lr * 0.999) k--;
        else if (dir > 0 && LR_STEPS[k] <= ro->rc.optim.lr * 1.001) k = min_i(k + 1, N_LR_STEPS - 1);
        ro->rc.optim.lr = LR_STEPS[k];
        break;
    }
    case TUI_FIELD_WARMUP: ro->rc.optim.warmup_steps = max_i(0, ro->rc.optim.warmup_steps + dir * 10); break;
    default: tui_app_status(app, THEME_DIM, "e edits this field"); return;
    }
    app->setup.dirty = true;
}

static int parse_int(const char *text, long lo, long hi, int *out) {
    char *end;
    const long v = strtol(text, &end, 10);
    if (end == text || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

// Enter after editing: the typed text into the field, or a message saying why not.
static void field_commit(TuiApp *app) {
    TuiSetup *s = &app->setup;
    RunOptions *ro = &s->ro;
    const char *t = s->edit;
    const TuiField f = cursor_field(s);
    int bad = 0;
    Error err = {{0}};
    switch (f) {
    case TUI_FIELD_STAGES: bad = parse_int(t, 1, 4096, &ro->pipe.ranks); break;
    case TUI_FIELD_VIRTUAL: bad = parse_int(t, 1, 64, &ro->pipe.virtual_stages); break;
    case TUI_FIELD_DP: bad = parse_int(t, 1, 4096, &ro->pipe.dp); break;
    case TUI_FIELD_MICRO: bad = parse_int(t, 1, 1 << 20, &ro->rc.microbatches); break;
    case TUI_FIELD_BATCH: bad = parse_int(t, 1, 1 << 20, &ro->rc.batch); break;
    case TUI_FIELD_SEQ: bad = parse_int(t, 1, 1 << 20, &ro->rc.seq_len); break;
    case TUI_FIELD_STEPS: bad = parse_int(t, 1, 100000000, &ro->rc.steps); break;
    case TUI_FIELD_WARMUP: bad = parse_int(t, 0, 100000000, &ro->rc.optim.warmup_steps); break;
    case TUI_FIELD_LR: {
        char *end;
        const double v = strtod(t, &end);
        bad = end == t || *end || !(v > 0 && v <= 10);
        if (!bad) ro->rc.optim.lr = v;
        break;
    }
    case TUI_FIELD_MODEL: {
        ModelConfig m;
        const bool path = strchr(t, '/') || strstr(t, ".json");
        if ((path ? model_config_from_json(&m, t, &err) : model_config_preset(&m, t, &err)) == 0) ro->rc.model = m;
        else bad = 2;
        break;
    }
    case TUI_FIELD_DATA: snprintf(ro->rc.data_path, sizeof ro->rc.data_path, "%s", t); break;
    default: break;
    }
    if (bad == 2) tui_app_status(app, THEME_ERROR, "%s", err.msg);
    else if (bad) tui_app_status(app, THEME_ERROR, "%s: '%s' is not a valid value", FIELD_LABELS[f], t);
    s->editing = false;
    s->dirty = true;
}

// ---- drawing ----------------------------------------------------------------------------------------

static void draw_form(TuiApp *app, const SetupLayout *L) {
    TuiSetup *s = &app->setup;
    tui_panel(L->form, "run setup", THEME_TITLE);
    const Rect in = layout_inner(L->form);
    const int n = form_lines(s);
    if (s->cursor < s->scroll) s->scroll = s->cursor;
    if (s->cursor >= s->scroll + L->form_rows) s->scroll = s->cursor - L->form_rows + 1;
    s->scroll = clamp_i(s->scroll, 0, max_i(0, n - L->form_rows));
    for (int k = 0; k < L->form_rows; k++) {
        const int line = s->scroll + k, y = in.y + k;
        const bool cur = line == s->cursor;
        const ThemeRole role = cur ? THEME_SELECTED : THEME_TEXT;
        if (cur) tui_fill((Rect){in.x, y, in.w, 1}, THEME_SELECTED);
        if (line < s->n_names) {
            tui_textf(y, in.x, in.w, role, " %s %s%s", line == s->chosen ? "(*)" : "( )", s->names[line],
                      schedule_is_file(s->names[line]) ? "  csv" : "");
            continue;
        }
        const TuiField f = (TuiField)(line - s->n_names);
        char value[512];
        field_value(s, f, value, sizeof value);
        const int lw = min_i(16, in.w / 2);
        tui_textf(y, in.x, lw, role, " %s", FIELD_LABELS[f]);
        if (cur && s->editing) {
            tui_fill((Rect){in.x + lw, y, in.w - lw, 1}, THEME_INPUT);
            tui_textf(y, in.x + lw, in.w - lw, THEME_INPUT, "%s_", s->edit);
        } else {
            tui_text_words(y, in.x + lw, in.w - lw, role, value);
        }
    }
}

// The textbook bubble of a built-in schedule (P ranks, M microbatches, V stages per rank).
static double formula_bubble(const char *name, int P, int M, int V) {
    const ScheduleInfo *info = schedule_find(name);
    return info ? info->ideal_bubble(P, M, V) : NAN;
}

static void list_ints(const int *v, int n, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && len + 12 < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%d", i ? "," : "", v[i]);
}

static void draw_plan(TuiApp *app, const SetupLayout *L) {
    TuiSetup *s = &app->setup;
    const Rect in = layout_inner(L->plan);
    if (!s->plan_ok) {
        tui_panel(L->plan, "plan", THEME_TITLE);
        tui_text(in.y, in.x + 1, in.w - 1, THEME_ERROR, s->problem);
        return;
    }
    const TuiPlan *p = &s->plan;
    char title[384];
    snprintf(title, sizeof title, "plan: %s  P%d x V%d  M%d  (F=1 B=2 W=1 per rank's layers)", p->name, p->P,
             p->S / p->P, p->M);
    tui_panel(L->plan, title, THEME_TITLE);
    const TuiGanttData d = {p->ev, p->ev_off, p->P, 0.0, p->makespan};
    const int shown = min_i(L->lanes_visible, p->P);
    tui_gantt(L->plan_lanes, L->lane_h, 0, shown, -1, &d);
    int y = L->plan_lanes.y + L->plan_lanes.h;
    if (shown < p->P)   // the axis gives way to saying who is left out
        tui_textf(y++, in.x, in.w, THEME_WARNING, "ranks 0-%d of %d shown (a taller terminal shows all)", shown - 1,
                  p->P);
    else
        tui_gantt_axis(y++, in.x, in.w, tui_gantt_label_w(p->P, in.w), 0.0, p->makespan, "units");
    const double f = formula_bubble(p->name, p->P, p->M, p->S / p->P);
    char formula[64] = "";
    if (!isnan(f)) snprintf(formula, sizeof formula, "; the paper's formula %.2f%%", 100 * f);
    tui_textf(y++, in.x, in.w, THEME_TEXT, "bubble %.2f%% predicted%s", 100 * p->bubble, formula);
    char peak[256], layers[256];
    list_ints(p->peak_act, p->S, peak, sizeof peak);
    list_ints(p->layers, p->S, layers, sizeof layers);
    if (s->problem[0]) tui_text(y, in.x, in.w, THEME_ERROR, s->problem);
    else tui_textf(y, in.x, in.w, THEME_TEXT, "peak activations (microbatches) per stage %s; layers %s", peak, layers);
    if (s->suggestion[0])  // on the panel's bottom border: the next run's layout from measured costs
        tui_text_words(L->plan.y + L->plan.h - 1, L->plan.x + 2, L->plan.w - 4, THEME_TITLE, s->suggestion);
}

static void setup_draw(TuiApp *app, int cols, int rows) {
    TuiSetup *s = &app->setup;
    replan(app);
    if (!s->suggested) suggest_layout(app);
    SetupLayout L;
    const int P = s->plan_ok ? max_i(1, min_i(s->plan.P, LAYOUT_MAX_STAGES)) : 1;
    if (layout_setup(cols, rows, P, form_lines(s), &L)) {
        tui_too_small(&L.notice, LAYOUT_SETUP_MIN_W, LAYOUT_SETUP_MIN_H);
        return;
    }
    tui_fill(L.header, THEME_HEADER);
    const int x = tui_text(0, 0, cols, THEME_TITLE, "pptrain setup  ");
    const bool live = app->runner && tui_runner_busy(app->runner);
    if (!tui_app_header_note(app, 0, x, cols - x))
        tui_text_words(0, x, cols - x, THEME_HEADER,
                       live ? "a run is live (F3); stop it to start another"
                            : "Enter/F5 starts  arrows/hjkl move and change  e or digits edit");
    draw_form(app, &L);
    draw_plan(app, &L);
}

// ---- keys ------------------------------------------------------------------------------------------

static void start(TuiApp *app) {
    TuiSetup *s = &app->setup;
    if (on_schedule(s) && s->chosen != s->cursor) {
        s->chosen = s->cursor;
        s->dirty = true;
    }
    RunOptions ro;
    Error err;
    if (tui_setup_options(app, &ro, &err)) {
        tui_app_status(app, THEME_ERROR, "cannot start: %s", err.msg);
        s->refused = true;
    } else {
        tui_app_start_run(app, &ro);
    }
}

static void form_move(TuiApp *app, int d) {
    TuiSetup *s = &app->setup;
    s->cursor = clamp_i(s->cursor + d, 0, form_lines(s) - 1);
}

static void key_up(TuiApp *app) { form_move(app, -1); }
static void key_down(TuiApp *app) { form_move(app, 1); }
static void key_pgup(TuiApp *app) { form_move(app, -10); }
static void key_pgdn(TuiApp *app) { form_move(app, 10); }

static void change(TuiApp *app, int dir) {
    TuiSetup *s = &app->setup;
    if (on_schedule(s)) {
        s->chosen = s->cursor;
        s->dirty = true;
        return;
    }
    const TuiField f = cursor_field(s);
    if (chosen_csv(s) && (f == TUI_FIELD_STAGES || f == TUI_FIELD_MICRO || f == TUI_FIELD_VIRTUAL)) {
        tui_app_status(app, THEME_DIM, "the CSV file fixes %s", FIELD_LABELS[f]);
        return;
    }
    if (f == TUI_FIELD_VIRTUAL && !schedule_virtual_free(chosen_name(s))) {
        tui_app_status(app, THEME_DIM, "%s fixes V", chosen_name(s));
        return;
    }
    field_step(app, f, dir);
}

static void key_left(TuiApp *app) { change(app, -1); }
static void key_right(TuiApp *app) { change(app, +1); }

static void key_edit(TuiApp *app) {
    TuiSetup *s = &app->setup;
    if (on_schedule(s)) return;
    s->editing = true;
    field_value(s, cursor_field(s), s->edit, sizeof s->edit);
    char *paren = strstr(s->edit, " (");
    if (paren) *paren = '\0';
}

static const TuiBinding SETUP_KEYS[] = {
    {{TUI_FN(KEY_F(1)), '?', 0}, "F1", "Help", 0, "F1 ?      help", tui_key_help, NULL},
    {{TUI_FN(KEY_F(2)), 0, 0}, "F2", "Setup", 3, "F2        this setup screen", tui_key_setup, NULL},
    {{TUI_FN(KEY_F(3)), 0, 0}, "F3", "Live", 1, "F3        the live run", tui_key_live, NULL},
    {{TUI_FN(KEY_F(4)), 0, 0}, "F4", "History", 1, "F4        history of runs", tui_key_history, NULL},
    {{TUI_FN(KEY_F(5)), '\n', '\r'}, "F5", "Start", 0,
     "F5 Enter  start the run (Enter on a schedule: choose it and start)", start, NULL},
    {{TUI_FN(KEY_F(8)), 't', 0}, "F8", "Theme", 2, "F8 t      next theme", tui_key_theme, NULL},
    {{TUI_FN(KEY_F(10)), 'q', 0}, "F10", "Quit", 0, "F10 q     quit (asks first while a run is live)", tui_key_quit,
     NULL},
    {{TUI_FN(KEY_UP), 'k', 0}, NULL, NULL, 0, "up k      previous line", key_up, NULL},
    {{TUI_FN(KEY_DOWN), 'j', 0}, NULL, NULL, 0, "down j    next line", key_down, NULL},
    {{TUI_FN(KEY_PPAGE), 0, 0}, NULL, NULL, 0, "PgUp PgDn  ten lines", key_pgup, NULL},
    {{TUI_FN(KEY_NPAGE), 0, 0}, NULL, NULL, 0, NULL, key_pgdn, NULL},
    {{TUI_FN(KEY_LEFT), 'h', '-'}, NULL, NULL, 0, "left h -  smaller value (on a schedule: choose it)", key_left, NULL},
    {{TUI_FN(KEY_RIGHT), 'l', '+'}, NULL, NULL, 0, "right l + larger value (space: choose the schedule)", key_right, NULL},
    {{' ', 0, 0}, NULL, NULL, 0, NULL, key_right, NULL},
    {{'e', TUI_FN(KEY_IC), 0}, NULL, NULL, 0,
     "e         edit the field (digits start editing too; Enter keeps, Esc drops)", key_edit, NULL},
    {{TUI_FN(KEY_ENTER), 0, 0}, NULL, NULL, 0, NULL, start, NULL},
};

// Editing takes every key; digits start editing a numeric field.
static bool setup_key(TuiApp *app, int key) {
    TuiSetup *s = &app->setup;
    if (!s->editing) {
        const bool numeric = !on_schedule(s) && cursor_field(s) != TUI_FIELD_MODEL && cursor_field(s) != TUI_FIELD_DATA;
        if (numeric && key > 0 && (isdigit(key) || key == '.')) {
            s->editing = true;
            s->edit[0] = (char)key;
            s->edit[1] = '\0';
            return true;
        }
        return false;
    }
    const size_t len = strlen(s->edit);
    if (key == '\n' || key == '\r' || key == TUI_FN(KEY_ENTER)) field_commit(app);
    else if (key == 27) s->editing = false;
    else if (key == TUI_FN(KEY_BACKSPACE) || key == 127 || key == 8) {
        if (len) s->edit[len - 1] = '\0';
    } else if (key == TUI_CTRL('u')) s->edit[0] = '\0';
    else if (key >= 32 && key < 127 && len + 1 < sizeof s->edit) {
        s->edit[len] = (char)key;
        s->edit[len + 1] = '\0';
    }
    return true;
}

static void setup_click(TuiApp *app, int cols, int rows, int x, int y, bool twice) {
    (void)twice;
    TuiSetup *s = &app->setup;
    SetupLayout L;
    const int P = s->plan_ok ? max_i(1, min_i(s->plan.P, LAYOUT_MAX_STAGES)) : 1;
    if (layout_setup(cols, rows, P, form_lines(s), &L)) return;
    const Rect in = layout_inner(L.form);
    if (!layout_contains(&in, x, y)) return;
    const int line = s->scroll + (y - in.y);
    if (line >= form_lines(s)) return;
    s->editing = false;
    s->cursor = line;
    if (line < s->n_names) change(app, 1);   // a click on a schedule chooses it
}

const TuiScreenOps TUI_SETUP_SCREEN = {.enter = setup_enter, .draw = setup_draw, .key = setup_key,
                                       .click = setup_click, .keys = SETUP_KEYS,
                                       .n_keys = (int)(sizeof SETUP_KEYS / sizeof SETUP_KEYS[0])};
