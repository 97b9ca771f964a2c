// `pptrain watch [--db FILE] [RUN]`: the live screen, read-only, for a run that another
// process (e.g. `mpirun ... pptrain train`) is writing into the run store; refreshed from
// SQLite once a second. Without RUN it shows the newest run and moves on to newer ones.
#include "console/cmd/cmd_watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "console/cli.h"
#include "console/cli_options.h"
#include "console/tui/tui_app.h"
#include "console/tui/tui_term.h"
#include "storage/db.h"

typedef struct {
    const char *db, *theme, *themes_dir, *run;
    bool ascii, help;
} WatchFlags;

CLI_TEXT_SETTER(set_db, WatchFlags, db)
CLI_TEXT_SETTER(set_theme, WatchFlags, theme)
CLI_TEXT_SETTER(set_themes_dir, WatchFlags, themes_dir)
CLI_SWITCH_SETTER(set_ascii, WatchFlags, ascii)
CLI_SWITCH_SETTER(set_help, WatchFlags, help)

static const CliOption OPTIONS[] = {
    {"--db", "FILE", "the run store (pptrain.db)", set_db, 0},
    {"--theme", "NAME|FILE", "dark, light, high-contrast, monochrome, or a .theme file", set_theme, 0},
    {"--themes-dir", "DIR", "where theme names are found", set_themes_dir, 0},
    {"--ascii", NULL, "no UTF-8 characters", set_ascii, 0},
    {"--help", NULL, "this help", set_help, 0},
};
#define N_OPTIONS ((int)(sizeof OPTIONS / sizeof OPTIONS[0]))

static void usage(FILE *out) {
    fprintf(out, "usage: pptrain watch [--db FILE] [--theme NAME|FILE] [--themes-dir DIR] [--ascii] [RUN]\n\n"
                 "The live console, read-only, for a run another process is writing: refreshed from the\n"
                 "run store once a second. RUN is a run id or 'latest' (default: the newest run, and the\n"
                 "next one when a newer run starts). The timeline shows the schedule's plan: the store\n"
                 "keeps steps and per-stage times, not every action.\n\n");
    cli_options_usage(out, OPTIONS, N_OPTIONS, 26, NULL, NULL);
}

// watch's one word: the run to watch.
static int take_run(void *ctx, const char *arg, Error *err) {
    WatchFlags *f = ctx;
    if (f->run) {
        error_set(err, "watch: one RUN at most ('%s' and '%s')", f->run, arg);
        return -1;
    }
    f->run = arg;
    return 0;
}

static int parse(int argc, char **argv, WatchFlags *f, Error *err) {
    *f = (WatchFlags){.db = DB_DEFAULT_PATH};
    const CliCommand command = {"watch", OPTIONS, N_OPTIONS, true, "-", take_run, NULL};
    return cli_options_parse(&command, argc, argv, 2, f, f, err);
}

// The store must open now (a store this build cannot read, say a newer schema, is refused
// as history refuses it, not waited on); the run asked for must exist now; the newest run
// may come later.
static int check_run(const WatchFlags *f, int64_t *want, Error *err) {
    *want = 0;
    if (access(f->db, F_OK) != 0) {
        error_set(err, "%s: no run store here (start a run, or pass --db FILE)", f->db);
        return -1;
    }
    long id = 0;
    const bool latest = !f->run || !strcmp(f->run, "latest");
    if (!latest && cli_parse_int("RUN", f->run, 1, 1L << 62, &id, err)) return -1;
    Db *db = db_open(f->db, false, err);
    if (!db) return -1;
    if (latest) {
        db_close(db);
        return 0;
    }
    DbRunInfo r;
    const int rc = db_run_get(db, id, &r, err);
    if (rc == 0) db_run_info_clear(&r);
    db_close(db);
    *want = id;
    return rc;
}

int cmd_watch(int argc, char **argv) {
    WatchFlags f;
    Error err = {{0}};
    if (parse(argc, argv, &f, &err)) return cli_fail(&err);
    if (f.help) {
        usage(stdout);
        return 0;
    }
    int64_t want;
    if (check_run(&f, &want, &err)) return cli_fail(&err);
    TuiTerm term;
    if (tui_term_open(&term, f.ascii, false, &err)) return cli_fail(&err);
    TuiApp *app = xcalloc(1, sizeof *app);
    app->watch_mode = true;
    app->utf8 = term.utf8;
    app->term = &term;
    app->no_color = term.no_color;
    app->ema = true;
    app->show_loss = true;
    app->show_sample = true;
    app->screen = TUI_SCREEN_WATCH;
    snprintf(app->db_path, sizeof app->db_path, "%s", f.db);
    snprintf(app->watcher.db_path, sizeof app->watcher.db_path, "%s", f.db);
    app->watcher.want = want;
    app->watcher.polled_at = -1e9;
    app->view = xmalloc(sizeof *app->view);
    tui_view_reset(app->view);
    app->view->read_only = true;
    app->view->n_ranks = 1;
    tui_app_setup_themes(app, f.themes_dir, f.theme);
    tui_app_loop(app);
    tui_term_close(&term);
    tui_watch_free(&app->watcher);
    free(app->tl_kept);
    free(app->view);
    free(app);
    return 0;
}
