// console/tui/tui_app: the console's state and its UI loop. One thread (the caller's) owns
// curses: it reads keys and mouse with a timeout and redraws at most 10 times a second from
// the latest snapshot of the run (console/tui/tui_snapshot), which the training thread
// (console/tui/tui_runner) publishes without ever waiting for it.
//
// Screens: live (tui_live.c), setup (tui_setup.c), history (tui_history.c); `pptrain watch`
// is the watch screen alone: the live screen's drawing, read-only, fed from the run store
// (tui_watch.c). Each screen is one TuiScreenOps (htop's PanelClass): the loop calls its
// refresh, draw, key and click, and its one table of key bindings gives the key bar, the
// help text and the mouse clicks on the key bar.
#ifndef PPTRAIN_TUI_APP_H
#define PPTRAIN_TUI_APP_H
#include <stdbool.h>
#include <stdint.h>

#include "console/run_options.h"
#include "console/tui/pure/layout.h"
#include "console/tui/pure/theme.h"
#include "console/tui/pure/tui_plan.h"
#include "console/tui/tui_runner.h"
#include "console/tui/tui_snapshot.h"
#include "console/tui/tui_term.h"
#include "storage/db.h"

// Tab cycles through the first three; WATCH is `pptrain watch`'s only screen.
typedef enum { TUI_SCREEN_LIVE, TUI_SCREEN_SETUP, TUI_SCREEN_HISTORY, TUI_SCREEN_WATCH, TUI_SCREEN_COUNT } TuiScreen;

// Keys: printable characters as their code point, curses KEY_* codes negated (TUI_FN).
#define TUI_FN(k) (-(k))
#define TUI_CTRL(c) ((c) & 0x1f)

typedef struct TuiApp TuiApp;

typedef struct {
    int keys[3];              // up to three keys (0: none)
    const char *bar_key;      // key-bar item ("F5"); NULL: not on the bar
    const char *bar_label;
    int bar_priority;         // who leaves a narrow bar first (layout.h KeyBarItem.priority)
    const char *help;         // the help screen's line
    void (*fn)(TuiApp *app);
    const char *(*label_fn)(const TuiApp *app);  // a label that changes with the state, or NULL
} TuiBinding;

// ---- setup ------------------------------------------------------------------------------------
#define TUI_MAX_SCHEDULES 64
typedef enum {
    TUI_FIELD_STAGES, TUI_FIELD_VIRTUAL, TUI_FIELD_DP, TUI_FIELD_MICRO, TUI_FIELD_BATCH, TUI_FIELD_SEQ,
    TUI_FIELD_MODEL, TUI_FIELD_STEPS, TUI_FIELD_LR, TUI_FIELD_WARMUP, TUI_FIELD_DATA, TUI_FIELD_COUNT
} TuiField;

typedef struct {
    char names[TUI_MAX_SCHEDULES][256];   // built-in schedules, then *.csv in the working directory
    int n_names;
    int chosen;                           // the selected schedule
    RunOptions ro;                        // the form's values (the next run's options)
    int cursor;                           // form line: schedules first, then fields
    int scroll;
    bool editing;
    char edit[512];
    bool dirty;                           // plan and validation need redoing
    TuiPlan plan;
    bool plan_ok;
    char problem[512];                    // why the run cannot start ("" when it can)
    char suggestion[512];                 // plan --from-run latest's best layout ("" when none)
    bool suggested;                       // suggestion is current (cleared on entering the screen)
    RunOptions resumed;                   // ro.resume set: the form's values as it opened on the checkpoint's run
    bool refused;                         // the status says why Enter could not start the form's run
} TuiSetup;

// ---- history ---------------------------------------------------------------------------------
#define TUI_MAX_MARKED 6
typedef struct {
    int64_t id;
    float *loss;
    float *val;          // (n) the validation loss on loss's points (tui_series_overlay); NULL: none
    int n;
    bool running;
    int64_t peak_bytes;
} TuiRunCurve;

typedef struct {
    Db *db;
    char error[512];
    double loaded_at;
    DbRunInfo *runs;
    int n_runs;
    int *shown;                           // indices into runs after filter and sort
    int n_shown;
    int sel, scroll;
    int sort;                             // column index of TUI_HISTORY_SORTS
    bool sort_desc;                       // newest first until the user sorts
    char filter[128];
    bool filter_open;
    // Resuming a run whose checkpoint is at its last step asks for the step to go on to.
    bool goon_open;
    char goon[16];                        // the typed step
    int goon_from;                        // the checkpoint's step
    RunOptions goon_ro;                   // the resume, but for --steps
    int64_t marked[TUI_MAX_MARKED];
    int n_marked;
    int64_t detail_id;                    // the detail pane's run
    DbStageSummary *stages;
    int n_stages;
    DbCheckpointInfo *cks;
    int n_cks;
    int ck_sel;
    DbSample *samples;                    // the detail run's samples (train --sample-every), in step order
    int n_samples;
    TuiRunCurve curves[TUI_MAX_MARKED + 1];
    int n_curves;
} TuiHistory;

// ---- watch -------------------------------------------------------------------------------------
typedef struct {
    char db_path[4096];
    int64_t want;                         // the RUN argument; 0: the newest run, following new ones
    Db *db;
    int64_t run;
    int last_step;
    int evals;                            // validation passes shown (DbRunInfo.evals when read)
    double polled_at;
    double ms_sum;                        // step times seen, for the pace
} TuiWatch;

struct TuiApp {
    bool watch_mode;                      // `pptrain watch`: live screen only, read-only
    bool mpi;
    int world;                            // MPI world size (1 under local)
    char db_path[4096];
    char themes_dir[4096];
    char theme_names[16][64];
    int n_themes, theme_index;
    bool utf8, no_color;
    const TuiTerm *term;                  // the terminal it draws on (NULL in tests)

    TuiScreen screen;
    bool help, confirm_quit, quitting, quit;
    int help_first;                       // the help's first line shown (it scrolls on short terminals)
    char status[512];
    ThemeRole status_role;
    double status_until;
    // A status that announces a change of the run's state ("pausing after this step") holds
    // only while the run is in one of these states (bit 1 << TuiRunState); 0: any state.
    unsigned status_while;
    // Messages (the status, a run's note): in the header when they fit there, else on up to
    // TUI_MESSAGE_LINES lines above the key bar (the screen gets the rows above them). Set by
    // each draw, read by the screens' headers and clicks.
    bool note_in_header;
    int body_rows;                        // rows the screen lays out (terminal rows - message lines)

    TuiSnapshot *snap;                    // NULL in watch mode
    TuiRunner *runner;
    TuiView *view;                        // the UI's copy of the latest snapshot
    bool ema, show_loss, show_sample;
    int sel_rank;
    // The timeline: zoomed in tl_zoom times, its window starting tl_pos of the way into the
    // step; tl_step 0 follows the latest step, else a kept earlier one, copied into tl_kept.
    int tl_zoom;
    double tl_pos;
    int tl_step;
    TuiTimeline *tl_kept;

    TuiSetup setup;
    TuiHistory history;
    TuiWatch watcher;
};

// The UI loop; returns when the user quits (a live run stopped first). curses is set up.
void tui_app_loop(TuiApp *app);
// A message for a few seconds (THEME_TEXT, THEME_WARNING or THEME_ERROR).
void tui_app_status(TuiApp *app, ThemeRole role, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// Limits the status just set to the run states in mask (bits 1 << TuiRunState): it goes as soon
// as the run leaves them, so "stopping after this step" never stands beside "stopped".
void tui_app_status_while(TuiApp *app, unsigned mask);
// The message shown now: the status while it lasts, else the screen's note (a live run's
// failure or checkpoint line); "" when none.
const char *tui_app_note(const TuiApp *app, ThemeRole *role);
// Draws the note at the right end of a header row [x, x + w) when it belongs there
// (note_in_header); returns the columns it took (with a gap before it), 0 when none.
int tui_app_header_note(TuiApp *app, int y, int x, int w);
#define TUI_MESSAGE_LINES 3
// Finds the themes folder (--themes-dir, $PPTRAIN_THEMES, ./themes, beside the executable)
// and loads `theme` (a name or a path; NULL: the built-in dark). A theme that fails to load
// leaves the built-in dark in use and its error (file and line) in the status.
void tui_app_setup_themes(TuiApp *app, const char *themes_dir, const char *theme);
// Submits options as the next run and switches to the live screen; errors go to the status.
void tui_app_start_run(TuiApp *app, const RunOptions *ro);

// Shared key-table entries: help, screens, theme, quit.
void tui_key_help(TuiApp *app);
void tui_key_quit(TuiApp *app);
void tui_key_theme(TuiApp *app);
void tui_key_live(TuiApp *app);
void tui_key_setup(TuiApp *app);
void tui_key_history(TuiApp *app);

// ---- screens -------------------------------------------------------------------------------------
// What the UI loop calls on the screen in front. Every member but draw and keys may be NULL.
typedef struct {
    void (*enter)(TuiApp *app);                   // the screen comes to the front
    bool (*poll)(TuiApp *app);                    // every loop turn: true when there is new data to draw
    void (*draw)(TuiApp *app, int cols, int rows);
    bool (*key)(TuiApp *app, int key);            // before the key table (text entry): true when taken
    void (*click)(TuiApp *app, int cols, int rows, int x, int y, bool twice);
    const TuiBinding *keys;
    int n_keys;
    // The screen's own note, shown while no status line is up (the live run's message), with
    // its role; NULL: none.
    const char *(*note)(const TuiApp *app, ThemeRole *role);
    // Help of its own after the keys (the bubble and all its parts) into buf, "" for none;
    // NULL: none.
    void (*help)(const TuiApp *app, char *buf, size_t size);
    // Whether k lines of note above the key bar leave the screen the room it needs at cols x
    // rows (the live screen: no rank hidden for them); NULL: always.
    bool (*note_room)(const TuiApp *app, int cols, int rows, int k);
    // Columns of the header the screen's must-stay fields take (the live screen: the CPU's
    // oversubscription), which a note in the header leaves them; NULL: none.
    int (*header_kept)(const TuiApp *app);
} TuiScreenOps;

extern const TuiScreenOps TUI_LIVE_SCREEN;     // tui_live.c
extern const TuiScreenOps TUI_WATCH_SCREEN;    // tui_live.c (drawing) + tui_watch.c (data)
extern const TuiScreenOps TUI_SETUP_SCREEN;    // tui_setup.c
extern const TuiScreenOps TUI_HISTORY_SCREEN;  // tui_history.c

void tui_setup_init(TuiSetup *s, const RunOptions *ro);
void tui_setup_free(TuiSetup *s);
// The form's options, validated; -1 with err when they cannot run.
int tui_setup_options(TuiApp *app, RunOptions *ro, Error *err);

void tui_history_free(TuiHistory *h);

// Watch: polls the store once a second into app->view. Returns true when the view changed.
bool tui_watch_poll(TuiApp *app);
void tui_watch_free(TuiWatch *w);
#endif
