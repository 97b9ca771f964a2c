// `pptrain console` (and `pptrain` alone): the curses console, opened on the setup screen
// with a run ready to start (Enter). The run options set the first run; every one of them
// can be changed on the setup screen between runs.
//
// Under MPI every rank runs this command: rank 0 opens the console on /dev/tty, the others
// wait for its commands (console/tui/tui_runner) and run what it starts.
#include "console/cmd/cmd_console.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "console/cli.h"
#include "console/cli_options.h"
#include "console/run_options.h"
#include "console/run_session.h"
#include "console/tui/tui_app.h"
#include "console/tui/tui_term.h"
#include "engine/transport/mpi_process.h"

// The demo text: the `fortunes` package's quotes (setup.sh installs it).
#define CONSOLE_DATA "/usr/share/games/fortunes"

typedef struct {
    const char *theme, *themes_dir;
    bool ascii, start, help, gave_stages;
} ConsoleFlags;

CLI_TEXT_SETTER(set_theme, ConsoleFlags, theme)
CLI_TEXT_SETTER(set_themes_dir, ConsoleFlags, themes_dir)
CLI_SWITCH_SETTER(set_ascii, ConsoleFlags, ascii)
CLI_SWITCH_SETTER(set_start, ConsoleFlags, start)
CLI_SWITCH_SETTER(set_help, ConsoleFlags, help)

// The console's own flags; every other flag is a run option (console/run_options.h).
static const CliOption CONSOLE_FLAGS[] = {
    {"--theme", "NAME|FILE", "dark, light, high-contrast, monochrome, or a .theme file (dark; t cycles)", set_theme,
     0},
    {"--themes-dir", "DIR", "where theme names are found (./themes, $PPTRAIN_THEMES, or beside pptrain)",
     set_themes_dir, 0},
    {"--ascii", NULL, "no braille, block or other UTF-8 characters, even in a UTF-8 locale", set_ascii, 0},
    {"--start", NULL, "start the run at once instead of waiting for Enter", set_start, 0},
    {"--help", NULL, "this help", set_help, 0},
};
#define N_CONSOLE_FLAGS ((int)(sizeof CONSOLE_FLAGS / sizeof CONSOLE_FLAGS[0]))

// The default run: 4 stages under 1F1B on the tiny model; on 2 cores its loss falls from
// 5.6 to 3.5 in about a second and to 2.3 in about 12 s (500 steps take ~30 s).
static RunOptions console_defaults(void) {
    RunOptions ro = run_options_defaults();
    ro.pipe.ranks = 4;
    snprintf(ro.pipe.schedule, sizeof ro.pipe.schedule, "1f1b");
    ro.rc.microbatches = 8;
    ro.rc.batch = 16;
    ro.rc.seq_len = 128;
    ro.rc.steps = 500;
    ro.rc.optim.lr = 3e-3;
    ro.rc.optim.warmup_steps = 20;
    // A greedy sample every 25 steps: 20 in the run, gibberish turning into words, at well
    // under 1% of the run's time (bench/bench_sample.c measures one sample and one step).
    ro.rc.sample_every = 25;
    snprintf(ro.ckpt_dir, sizeof ro.ckpt_dir, "checkpoints");
    return ro;
}

static void usage(FILE *out) {
    fprintf(out, "usage: pptrain [console] [console options] [run options]\n\n"
                 "The console: live stage utilization, the bubble timeline and the loss; run setup with\n"
                 "the plan's prediction; the run history. It opens on the setup screen with a run ready\n"
                 "to start (Enter). Under MPI: mpirun -np N pptrain console --transport mpi (rank 0 hosts\n"
                 "the console; stages x dp must be N).\n\nconsole options:\n");
    cli_options_usage(out, CONSOLE_FLAGS, N_CONSOLE_FLAGS, 32, NULL, NULL);
    fprintf(out, "\nrun options (the first run's; defaults here: --data %s --stages 4 --schedule 1f1b\n"
                 "--microbatches 8 --batch 16 --seq 128 --steps 500 --lr 3e-3 --warmup 20 --sample-every 25\n"
                 "--ckpt-dir checkpoints):\n",
            CONSOLE_DATA);
    run_options_usage(out);
}

// Console flags here; everything else is a run option, parsed over the defaults in *ro (the
// console's, with its fortune data unless default_data is false: train's, for train --tui).
static int parse(int argc, char **argv, int first, bool default_data, ConsoleFlags *f, RunOptions *ro,
                 Error *err) {
    char **rest = xmalloc(sizeof(char *) * (size_t)(argc + 2));
    int n = 0;
    // A --resume goes on with its checkpoint's data unless --data is given: the demo text
    // would otherwise count as given and replace it.
    for (int i = first; i < argc; i++) default_data &= strcmp(argv[i], "--resume") != 0;
    if (default_data) {
        rest[n++] = "--data";
        rest[n++] = CONSOLE_DATA;
    }
    int rc = 0;
    for (int i = first; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        const CliOption *opt = cli_option_find(CONSOLE_FLAGS, N_CONSOLE_FLAGS, strcmp(a, "-h") ? a : "--help");
        if (opt) rc = cli_option_take(opt, argc, argv, &i, f, err);
        else {
            f->gave_stages |= !strcmp(a, "--stages");
            rest[n++] = argv[i];
        }
    }
    if (rc == 0 && !f->help && run_options_parse(n, rest, 0, ro, err) < 0) rc = -1;
    free(rest);
    return rc;
}

// MPI is engine/transport/mpi_process's: it initializes it here and finalizes it at exit.
static int mpi_start(int *rank, int *world, Error *err) {
    if (mpi_process_init(err)) return -1;
    *rank = mpi_process_rank();
    *world = mpi_process_size();
    return 0;
}

// Waits for a live run to end after the UI has gone (a second Ctrl-C skips the question).
static void wait_idle(TuiApp *app) {
    if (!tui_runner_busy(app->runner)) return;
    tui_snapshot_set_pause(app->snap, false);
    tui_snapshot_request_stop(app->snap);
    const struct timespec nap = {0, 20 * 1000 * 1000};
    while (tui_runner_busy(app->runner)) nanosleep(&nap, NULL);
}

static TuiApp *app_new(const RunOptions *ro, bool mpi, int world) {
    TuiApp *app = xcalloc(1, sizeof *app);
    app->mpi = mpi;
    app->world = world;
    snprintf(app->db_path, sizeof app->db_path, "%s", ro->db_path[0] ? ro->db_path : DB_DEFAULT_PATH);
    app->ema = true;
    app->show_loss = true;
    app->show_sample = true;
    app->screen = TUI_SCREEN_SETUP;
    app->snap = xmalloc(sizeof *app->snap);
    tui_snapshot_init(app->snap);
    app->runner = xcalloc(1, sizeof *app->runner);
    app->view = xmalloc(sizeof *app->view);
    tui_view_reset(app->view);
    tui_view_identity(app->view, &ro->rc, &ro->pipe);
    tui_setup_init(&app->setup, ro);
    app->history.sort_desc = true;
    return app;
}

static void app_free(TuiApp *app) {
    tui_setup_free(&app->setup);
    tui_history_free(&app->history);
    free(app->tl_kept);
    tui_snapshot_destroy(app->snap);
    free(app->snap);
    free(app->runner);
    free(app->view);
    free(app);
}

// A --resume: the options of the run it continues (its checkpoint's, with those given on the
// command line), as run_session will take them, so the form shows that run and Enter starts it.
static int resumed_options(RunOptions *ro, Error *err) {
    RunSession *s = xcalloc(1, sizeof *s);
    s->ro = *ro;
    s->options_only = true;   // the run hashes the shards when Enter starts it, not twice
    const int rc = run_session_prepare(s, err);
    if (rc == 0) *ro = s->ro;
    run_session_release(s);
    free(s);
    return rc;
}

// Rank 0 (or the only process): the console.
static int console_main(const ConsoleFlags *f, const RunOptions *ro, bool mpi, int world) {
    TuiTerm term;
    Error err = {{0}};
    TuiApp *app = app_new(ro, mpi, world);
    // The runner starts first: under MPI its communicator is made together with the other
    // ranks', and it tells them to quit when the terminal cannot be opened (or a --resume
    // cannot be resumed).
    if (tui_runner_start(app->runner, app->snap, mpi, &err)) {
        app_free(app);
        return cli_fail(&err);
    }
    if (ro->resume[0]) {
        RunOptions resumed = *ro;
        if (resumed_options(&resumed, &err)) {
            tui_runner_shutdown(app->runner);
            app_free(app);
            return cli_fail(&err);
        }
        tui_setup_free(&app->setup);
        tui_setup_init(&app->setup, &resumed);
        tui_view_identity(app->view, &resumed.rc, &resumed.pipe);
    }
    if (tui_term_open(&term, f->ascii, mpi, &err)) {
        tui_runner_shutdown(app->runner);
        app_free(app);
        return cli_fail(&err);
    }
    app->utf8 = term.utf8;
    app->term = &term;
    app->no_color = term.no_color;
    tui_app_setup_themes(app, f->themes_dir, f->theme);
    if (f->start) {
        RunOptions first;
        if (tui_setup_options(app, &first, &err)) tui_app_status(app, THEME_ERROR, "cannot start: %s", err.msg);
        else tui_app_start_run(app, &first);
    }
    tui_app_loop(app);
    wait_idle(app);
    const bool broken = app->runner->mpi_broken;
    tui_runner_shutdown(app->runner);
    tui_term_close(&term);
    app_free(app);
    return broken ? 1 : 0;
}

// The console on argv[first..], its first run's options over `defaults`.
static int console_with_defaults(int argc, char **argv, int first, RunOptions defaults, bool default_data,
                                 bool start) {
    ConsoleFlags f = {.start = start};
    RunOptions *ro = xmalloc(sizeof *ro);
    *ro = defaults;
    Error err = {{0}};
    if (parse(argc, argv, first, default_data, &f, ro, &err)) {
        free(ro);
        return cli_fail(&err);
    }
    if (f.help) {
        usage(stdout);
        free(ro);
        return 0;
    }
    // A --themes-dir that is no folder is refused now, not the first time t is pressed.
    // errno is read only when stat failed: a file that exists is "not a folder" whatever errno held.
    struct stat themes;
    if (f.themes_dir && f.themes_dir[0]) {
        const bool found = stat(f.themes_dir, &themes) == 0;
        if (!found || !S_ISDIR(themes.st_mode)) {
            error_set(&err, "--themes-dir %s: %s", f.themes_dir,
                      !found && errno == ENOENT ? "no such folder" : !found ? strerror(errno) : "not a folder");
            free(ro);
            return cli_fail(&err);
        }
    }
    // Under mpirun with the local transport every process would open its own console on the
    // terminal, each with its own runs.
    const int refused = cli_refuse_mpirun_copies("console", &ro->pipe.transport);
    if (refused) {
        free(ro);
        return refused;
    }
    const bool mpi = transport_multi_process(ro->pipe.transport);
    int rank = 0, world = 1, code;
    if (mpi && mpi_start(&rank, &world, &err)) {
        free(ro);
        return cli_fail(&err);
    }
    const int dp = ro->pipe.dp > 0 ? ro->pipe.dp : 1;
    if (mpi && !f.gave_stages && world % dp == 0) ro->pipe.ranks = world / dp;
    if (rank != 0) {
        TuiTerm quiet = {.saved_stderr = -1};
        tui_stderr_capture(&quiet);   // mpirun would copy it onto rank 0's console
        code = tui_runner_follow();
        tui_stderr_release(&quiet);
    } else {
        code = console_main(&f, ro, mpi, world);
    }
    free(ro);
    // After a failed MPI run requests are left that can never complete: exit without finalizing.
    if (mpi && code != 0) mpi_process_failed();
    return code;
}

int cmd_console(int argc, char **argv) {
    const int first = argc >= 2 && !strcmp(argv[1], "console") ? 2 : 1;
    return console_with_defaults(argc, argv, first, console_defaults(), true, false);
}

int cmd_console_train(int argc, char **argv, int first) {
    return console_with_defaults(argc, argv, first, run_options_defaults(), false, true);
}
