// console/tui/tui_app: the UI loop, key dispatch, mouse, help, quit, themes (see tui_app.h).
#define NCURSES_WIDECHAR 1
#include "console/tui/tui_app.h"

#include <curses.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "console/tui/pure/tui_text.h"
#include "console/tui/tui_draw.h"
#include "console/tui/tui_term.h"
#include "engine/clock.h"

#define FRAME_S 0.1      // at most 10 frames a second, for keys and mouse
#define DATA_FRAME_S 0.2 // at most 5 for new steps: every frame is CPU time the stages could use
#define UI_NICE 10       // the UI thread yields the cores to the stage threads (see tui_app_loop)
#define STATUS_S 6.0     // how long a status message stays
// Columns a header keeps for itself before a note: "pptrain watch stopping  " is the longest.
#define HEADER_FIXED_W 24

void tui_app_status(TuiApp *app, ThemeRole role, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(app->status, sizeof app->status, fmt, ap);
    va_end(ap);
    app->status_role = role;
    app->status_until = clock_now_s() + (role == THEME_ERROR ? 2 * STATUS_S : STATUS_S);
    app->status_while = 0;
}

void tui_app_status_while(TuiApp *app, unsigned mask) { app->status_while = mask; }

// Whether the status still shows: within its time, and while the run is in a state it allows.
static bool status_live(const TuiApp *app, double now) {
    if (!app->status[0] || now >= app->status_until) return false;
    return !app->status_while || !app->view || (app->status_while & (1u << app->view->state));
}

static const TuiScreenOps *const SCREENS[TUI_SCREEN_COUNT] = {
    [TUI_SCREEN_LIVE] = &TUI_LIVE_SCREEN,
    [TUI_SCREEN_SETUP] = &TUI_SETUP_SCREEN,
    [TUI_SCREEN_HISTORY] = &TUI_HISTORY_SCREEN,
    [TUI_SCREEN_WATCH] = &TUI_WATCH_SCREEN,
};

static const TuiScreenOps *screen_ops(const TuiApp *app) { return SCREENS[app->screen]; }

const char *tui_app_note(const TuiApp *app, ThemeRole *role) {
    if (status_live(app, clock_now_s())) {
        *role = app->status_role;
        return app->status;
    }
    *role = THEME_DIM;
    const TuiScreenOps *ops = screen_ops(app);
    return ops->note ? ops->note(app, role) : "";
}

int tui_app_header_note(TuiApp *app, int y, int x, int w) {
    ThemeRole role;
    const char *note = tui_app_note(app, &role);
    if (!note[0] || !app->note_in_header || w < 4) return 0;
    const int cells = tui_text_width(note) < w - 2 ? tui_text_width(note) : w - 2;
    tui_text_words(y, x + w - cells, cells, role, note);
    return cells + 2;
}

static void tui_app_show(TuiApp *app, TuiScreen screen) {
    if (app->watch_mode) return;
    app->screen = screen;
    if (screen_ops(app)->enter) screen_ops(app)->enter(app);
}

// Loads theme k of app->theme_names (or the built-in dark on error, with the error shown).
static void tui_app_theme(TuiApp *app, int k) {
    Theme t;
    theme_default(&t);
    if (k >= 0 && k < app->n_themes) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.theme", app->themes_dir, app->theme_names[k]);
        Error err;
        if (theme_load(path, &t, &err)) {
            theme_default(&t);
            tui_app_status(app, THEME_ERROR, "%s (using the built-in dark theme)", err.msg);
        } else {
            tui_app_status(app, THEME_DIM, "theme %s", t.name);
        }
        app->theme_index = k;
    }
    if (app->no_color) theme_apply_no_color(&t);
    tui_draw_setup(&t, app->utf8, app->no_color);
    clearok(stdscr, TRUE);
}

void tui_app_start_run(TuiApp *app, const RunOptions *ro) {
    Error err;
    if (tui_runner_submit(app->runner, ro, &err)) {
        tui_app_status(app, THEME_ERROR, "%s", err.msg);
        return;
    }
    app->sel_rank = 0;
    app->tl_step = 0;
    app->tl_zoom = 1;
    app->tl_pos = 0.0;
    app->screen = TUI_SCREEN_LIVE;
    app->setup.ro.resume[0] = '\0';   // a --resume given to the console applies to its first run
    tui_app_status(app, THEME_TEXT, "%s started%s", ro->pipe.schedule, ro->resume[0] ? " (resuming)" : "");
    // Not beside "failed": a run that fails at its start must not read as started.
    tui_app_status_while(app, 1u << TUI_RUN_NONE | 1u << TUI_RUN_STARTING | 1u << TUI_RUN_RUNNING);
}

// ---- shared keys --------------------------------------------------------------------------------------

void tui_key_help(TuiApp *app) {
    app->help = true;
    app->help_first = 0;
}
void tui_key_live(TuiApp *app) { tui_app_show(app, TUI_SCREEN_LIVE); }
void tui_key_setup(TuiApp *app) { tui_app_show(app, TUI_SCREEN_SETUP); }
void tui_key_history(TuiApp *app) { tui_app_show(app, TUI_SCREEN_HISTORY); }

void tui_key_theme(TuiApp *app) {
    if (app->n_themes == 0) {
        tui_app_status(app, THEME_WARNING, "no themes found in %s (looked at --themes-dir, $PPTRAIN_THEMES, ./themes, "
                       "beside pptrain, /usr/share/pptrain/themes)", app->themes_dir);
        return;
    }
    tui_app_theme(app, (app->theme_index + 1) % app->n_themes);
}

void tui_key_quit(TuiApp *app) {
    if (!app->watch_mode && tui_runner_busy(app->runner)) app->confirm_quit = true;
    else app->quit = true;
}

static void confirm_key(TuiApp *app, int key) {
    app->confirm_quit = false;
    if (key != 'y' && key != 'Y') return;
    tui_snapshot_request_stop(app->snap);
    app->quitting = true;
    tui_app_status(app, THEME_WARNING, "stopping the run, then quitting");
}

// ---- bindings ---------------------------------------------------------------------------------------

static const TuiBinding *bindings(const TuiApp *app, int *n) {
    *n = screen_ops(app)->n_keys;
    return screen_ops(app)->keys;
}

// The key bar's items, and for each the binding it stands for.
static int keybar_items(const TuiApp *app, KeyBarItem *items, const TuiBinding **which, int cap) {
    int n, k = 0;
    const TuiBinding *b = bindings(app, &n);
    for (int i = 0; i < n && k < cap; i++) {
        if (!b[i].bar_key) continue;
        items[k] = (KeyBarItem){b[i].bar_key, b[i].label_fn ? b[i].label_fn(app) : b[i].bar_label,
                                b[i].bar_priority};
        which[k++] = &b[i];
    }
    return k;
}

static bool dispatch(TuiApp *app, int key) {
    int n;
    const TuiBinding *b = bindings(app, &n);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            if (b[i].keys[k] && b[i].keys[k] == key) {
                b[i].fn(app);
                return true;
            }
    return false;
}

static void mouse(TuiApp *app) {
    MEVENT ev;
    if (getmouse(&ev) != OK) return;
    if (app->help || app->confirm_quit) {
        app->help = false;
        app->confirm_quit = false;
        return;
    }
    int rows, cols;
    getmaxyx(stdscr, rows, cols);
    (void)rows;
    rows = app->body_rows;   // the screen's rows; the key bar stays on the terminal's last
    if (ev.y == getmaxy(stdscr) - 1) {
        KeyBarItem items[16];
        const TuiBinding *which[16];
        const int n = keybar_items(app, items, which, 16);
        const Rect bar = {0, getmaxy(stdscr) - 1, cols, 1};
        const int hit = layout_keybar_hit(&bar, items, n, ev.x);
        if (hit >= 0) which[hit]->fn(app);
        return;
    }
    const bool twice = (ev.bstate & BUTTON1_DOUBLE_CLICKED) != 0;
    if (screen_ops(app)->click) screen_ops(app)->click(app, cols, rows, ev.x, ev.y, twice);
}

static void handle_key(TuiApp *app, int key) {
    if (key == TUI_FN(KEY_RESIZE)) return;
    if (key == TUI_FN(KEY_MOUSE)) {
        mouse(app);
        return;
    }
    if (app->confirm_quit) {
        confirm_key(app, key);
        return;
    }
    if (app->help) {   // up and down scroll a help taller than the terminal; any other key closes it
        if (key == TUI_FN(KEY_DOWN) || key == 'j' || key == TUI_FN(KEY_NPAGE)) app->help_first++;
        else if (key == TUI_FN(KEY_UP) || key == 'k' || key == TUI_FN(KEY_PPAGE)) app->help_first--;
        else app->help = false;
        if (app->help_first < 0) app->help_first = 0;
        return;
    }
    if (key == TUI_CTRL('l')) {
        clearok(stdscr, TRUE);
        return;
    }
    if (screen_ops(app)->key && screen_ops(app)->key(app, key)) return;
    if (key == '\t' && !app->watch_mode) {
        tui_app_show(app, (TuiScreen)((app->screen + 1) % TUI_SCREEN_WATCH));
        return;
    }
    dispatch(app, key);
}

// ---- drawing ----------------------------------------------------------------------------------------

// The help's lines: the screen's keys, the mouse, the bubble and the note in full.
typedef struct {
    const char *line[64];
    int n;
    char bubble[2][160], note[8][160];
} HelpText;

static void help_add_wrapped(HelpText *t, const char *text, int width, char (*buf)[160], int max) {
    TuiLine l[8];
    const int n = tui_wrap(text, width < 150 ? width : 150, l, max);
    for (int i = 0; i < n && i < max && t->n < 62; i++) {
        snprintf(buf[i], sizeof buf[i], "%.*s", l[i].len, text + l[i].start);
        t->line[t->n++] = buf[i];
    }
    if (n) t->line[t->n++] = "";
}

static void help_text(const TuiApp *app, int cols, HelpText *t) {
    int n;
    const TuiBinding *b = bindings(app, &n);
    t->n = 0;
    for (int i = 0; i < n && t->n < 40; i++)
        if (b[i].help) t->line[t->n++] = b[i].help;
    if (!app->watch_mode) t->line[t->n++] = "Tab       next screen";
    t->line[t->n++] = "mouse     click a key, a rank, a form line or a run";
    t->line[t->n++] = "          (double-click a run marks it)";
    t->line[t->n++] = "";
    // The screen's own lines (the live screen: the bubble and all its parts, which a narrow
    // stages title shortens); the note whole.
    char text[256] = "";
    if (screen_ops(app)->help) screen_ops(app)->help(app, text, sizeof text);
    if (text[0]) help_add_wrapped(t, text, cols - 6, t->bubble, 2);
    ThemeRole role;
    const char *note = tui_app_note(app, &role);
    if (note[0]) help_add_wrapped(t, note, cols - 6, t->note, 8);
}

static void draw_help(TuiApp *app, int cols, int rows) {
    HelpText t;
    help_text(app, cols, &t);
    const char *title = app->watch_mode ? "pptrain watch: keys" : "pptrain console: keys";
    const int fit = rows - 2;
    if (t.n + 1 <= fit) {
        t.line[t.n++] = "any key closes this help";
        tui_dialog(cols, rows, title, t.line, t.n, 0);
        return;
    }
    // Taller than the terminal: the window's last row says so, up and down scroll the rest.
    const int page = fit - 1 > 1 ? fit - 1 : 1;
    if (app->help_first > t.n - page) app->help_first = t.n - page;
    const char *view[64];
    int shown = 0;
    for (int i = app->help_first; i < t.n && shown < page; i++) view[shown++] = t.line[i];
    char more[96];
    snprintf(more, sizeof more, "(%d-%d of %d; up/down scroll, other keys close)", app->help_first + 1,
             app->help_first + shown, t.n);
    view[shown++] = more;
    tui_dialog(cols, rows, title, view, shown, 0);
}

// Where the note goes this frame (rules: tui_app.h); returns the message lines it needs
// above the key bar (0: none, or in the header), filling lines.
static int place_note(TuiApp *app, int cols, int rows, TuiLine *lines) {
    ThemeRole role;
    const char *note = tui_app_note(app, &role);
    app->note_in_header = false;
    if (!note[0]) return 0;
    const int kept = screen_ops(app)->header_kept ? screen_ops(app)->header_kept(app) : 0;
    if (tui_text_width(note) + 2 <= cols - HEADER_FIXED_W - kept) {
        app->note_in_header = true;
        return 0;
    }
    int k = tui_wrap(note, cols, lines, TUI_MESSAGE_LINES);
    k = k < TUI_MESSAGE_LINES ? k : TUI_MESSAGE_LINES;
    // A terminal with no rows to spare keeps the note in its header, cut after a whole word
    // (F1's help has it whole): below the minimum size, or where the live screen would hide
    // a rank to make room for it.
    bool room = rows - k >= LAYOUT_LIVE_MIN_H;
    if (room && screen_ops(app)->note_room) room = screen_ops(app)->note_room(app, cols, rows, k);
    if (!room) {
        app->note_in_header = true;
        return 0;
    }
    return k;
}

static void draw_message(TuiApp *app, int cols, int y, const TuiLine *lines, int k) {
    ThemeRole role;
    const char *note = tui_app_note(app, &role);
    tui_fill((Rect){0, y, cols, k}, THEME_HEADER);
    for (int i = 0; i < k; i++) {
        const bool last = i == k - 1 && lines[i].start + lines[i].len < (int)strlen(note);
        char text[1024];
        snprintf(text, sizeof text, "%.*s", last ? (int)strlen(note) - lines[i].start : lines[i].len,
                 note + lines[i].start);
        tui_text_words(y + i, 0, cols, role, text);
    }
}

static void draw(TuiApp *app) {
    int rows, cols;
    getmaxyx(stdscr, rows, cols);
    tui_set_role(THEME_BACKGROUND);
    erase();
    TuiLine lines[TUI_MESSAGE_LINES];
    const int k = place_note(app, cols, rows, lines);
    app->body_rows = rows - k;
    screen_ops(app)->draw(app, cols, app->body_rows);
    if (k && !layout_too_small(cols, rows, LAYOUT_LIVE_MIN_W, LAYOUT_LIVE_MIN_H, &(Rect){0, 0, 0, 0}))
        draw_message(app, cols, rows - 1 - k, lines, k);
    Rect notice;
    // Every screen has the same minimum: below it only the notice is drawn.
    if (!layout_too_small(cols, rows, LAYOUT_LIVE_MIN_W, LAYOUT_LIVE_MIN_H, &notice)) {
        KeyBarItem items[16];
        const TuiBinding *which[16];
        const int n = keybar_items(app, items, which, 16);
        const Rect bar = {0, rows - 1, cols, 1};
        tui_keybar(&bar, items, n);
        if (app->help) draw_help(app, cols, rows);
        if (app->confirm_quit) {
            const char *lines[] = {"A run is live. Stop it (writing a checkpoint) and quit?", "",
                                   "y: stop and quit     any other key: keep running"};
            tui_dialog(cols, rows, "quit", lines, 3, 0);
        }
    }
    refresh();
}

// The UI thread runs niced: on a machine whose cores the stage threads fill, the scheduler
// then gives them the CPU first and the console what is left (Linux nice is per thread; the
// training thread, started before, keeps its priority, and so do the stage threads it starts).
static void yield_to_training(void) { setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), UI_NICE); }

void tui_app_loop(TuiApp *app) {
    double last_draw = -1.0;
    bool input_dirty = true, data_dirty = false, status_shown = false;
    app->body_rows = getmaxy(stdscr);
    if (app->tl_zoom < 1) app->tl_zoom = 1;
    yield_to_training();
    while (!app->quit) {
        if (screen_ops(app)->poll && screen_ops(app)->poll(app)) data_dirty = true;
        if (app->quitting && !tui_runner_busy(app->runner)) break;
        const double now = clock_now_s();
        const bool status_now = status_live(app, now);
        if (status_now != status_shown) status_shown = status_now, input_dirty = true;
        // Keys redraw within a tenth of a second, new steps within a fifth.
        const double due = input_dirty ? last_draw + FRAME_S : data_dirty ? last_draw + DATA_FRAME_S : now + FRAME_S;
        if ((input_dirty || data_dirty) && now >= due) {
            draw(app);
            last_draw = now;
            input_dirty = data_dirty = false;
        }
        const double wait = input_dirty || data_dirty ? due - now : FRAME_S;
        timeout(wait > 0.001 ? (int)(wait * 1000) : 1);
        wint_t wch;
        const int rc = get_wch(&wch);
        if (app->term && tui_term_poll_size(app->term)) input_dirty = true;
        if (tui_term_interrupted() || tui_term_is_ctrl_c(rc, wch)) {
            if (app->confirm_quit) app->quit = true;   // a second Ctrl-C: no more questions
            else tui_key_quit(app);
            input_dirty = true;
            continue;
        }
        if (rc == ERR) continue;
        handle_key(app, rc == KEY_CODE_YES ? TUI_FN((int)wch) : (int)wch);
        input_dirty = true;
    }
}

// ---- themes -------------------------------------------------------------------------------------------

static int cmp_theme_names(const void *a, const void *b) {
    const bool dark_a = !strcmp(a, "dark"), dark_b = !strcmp(b, "dark");   // dark first
    if (dark_a != dark_b) return dark_a ? -1 : 1;
    return strcmp(a, b);
}

// The themes folder: --themes-dir, else $PPTRAIN_THEMES, else ./themes, else beside the
// executable (build/../themes, as in a source checkout), else /usr/share/pptrain/themes.
static void find_themes_dir(TuiApp *app, const char *given) {
    char exe[2048], cand[2100];
    const char *env = getenv("PPTRAIN_THEMES");
    if (given && given[0]) {
        snprintf(app->themes_dir, sizeof app->themes_dir, "%s", given);
        return;
    }
    if (env && env[0]) {
        snprintf(app->themes_dir, sizeof app->themes_dir, "%s", env);
        return;
    }
    snprintf(app->themes_dir, sizeof app->themes_dir, "themes");
    DIR *d = opendir("themes");
    if (d) {
        closedir(d);
        return;
    }
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        const char *const tries[] = {"%s/../themes", "%s/themes", "%s/../share/pptrain/themes"};
        for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
            snprintf(cand, sizeof cand, tries[i], exe);
            if ((d = opendir(cand))) {
                closedir(d);
                snprintf(app->themes_dir, sizeof app->themes_dir, "%s", cand);
                return;
            }
        }
    }
    snprintf(app->themes_dir, sizeof app->themes_dir, "/usr/share/pptrain/themes");
}

static void list_themes(TuiApp *app) {
    app->n_themes = 0;
    DIR *d = opendir(app->themes_dir);
    for (struct dirent *e; d && (e = readdir(d)) && app->n_themes < 16;) {
        const size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len <= 6 || len - 6 >= sizeof app->theme_names[0] ||
            strcmp(e->d_name + len - 6, ".theme") != 0)
            continue;
        snprintf(app->theme_names[app->n_themes], sizeof app->theme_names[0], "%.*s", (int)(len - 6), e->d_name);
        app->n_themes++;
    }
    if (d) closedir(d);
    qsort(app->theme_names, (size_t)app->n_themes, sizeof app->theme_names[0], cmp_theme_names);
}

void tui_app_setup_themes(TuiApp *app, const char *themes_dir, const char *theme) {
    find_themes_dir(app, themes_dir);
    list_themes(app);
    app->theme_index = -1;
    if (!theme || !theme[0]) {
        for (int k = 0; k < app->n_themes; k++)
            if (!strcmp(app->theme_names[k], "dark")) app->theme_index = k;
        tui_app_theme(app, -1);   // the built-in dark: the same as themes/dark.theme
        app->status[0] = '\0';
        return;
    }
    char path[4096];
    Error err;
    Theme t;
    if (theme_find(theme, app->themes_dir, path, sizeof path, &err) || theme_load(path, &t, &err)) {
        tui_app_theme(app, -1);
        tui_app_status(app, THEME_ERROR, "%s (using the built-in dark theme)", err.msg);
        return;
    }
    for (int k = 0; k < app->n_themes; k++)
        if (!strcmp(app->theme_names[k], t.name)) app->theme_index = k;
    if (app->no_color) theme_apply_no_color(&t);
    tui_draw_setup(&t, app->utf8, app->no_color);
}
