// console/tui/tui_runner: the training thread and the MPI command broadcast (see tui_runner.h).
#include "console/tui/tui_runner.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "console/run_session.h"
#include "console/tui/pure/tui_plan.h"
#include "engine/transport/mpi_process.h"

typedef enum { TUI_CMD_RUN = 1, TUI_CMD_QUIT = 2 } TuiCmdKind;

// What rank 0 broadcasts: plain bytes (RunOptions holds no pointers the other ranks read:
// mpi_comm is reset to NULL on arrival).
typedef struct {
    int32_t kind;
    RunOptions ro;
} TuiCommand;

static MpiChannel *commands;   // the command broadcast's channel, open from start to shutdown

static int broadcast(TuiCommand *cmd) { return mpi_process_broadcast(commands, cmd, sizeof *cmd); }

// The schedule's ideal bubble (NaN when it cannot be simulated: the run will say why).
static double ideal_bubble(const RunOptions *ro) {
    TuiPlan plan;
    Error err;
    if (tui_plan_build(ro->pipe.schedule, ro->pipe.ranks, ro->rc.microbatches, ro->pipe.virtual_stages,
                       &ro->rc.model, ro->rc.seq_len, &plan, &err))
        return NAN;
    const double b = plan.bubble;
    tui_plan_free(&plan);
    return b;
}

// A checkpoint folder as the header shows it: relative to the working directory when it lies
// below it (the store keeps it absolute; the header's width is better spent on the run).
static const char *shown_folder(const char *dir) {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return dir;
    const size_t n = strlen(cwd);
    return strncmp(dir, cwd, n) == 0 && dir[n] == '/' ? dir + n + 1 : dir;
}

static int run_one(TuiRunner *r, const RunOptions *ro) {
    RunSession *s = xcalloc(1, sizeof *s);
    s->ro = *ro;
    s->ro.pipe.mpi_comm = NULL;
    s->view = tui_snapshot_hooks(r->snap);
    tui_snapshot_begin(r->snap, ro, &s->recorder.run, ideal_bubble(ro));
    r->snap->pause_limit_s = r->mpi ? 0.5 * ro->pipe.timeout_s : 0.0;
    RunSummary sum;
    Error err = {{0}};
    const int rc = run_session(s, &sum, &err);
    char note[512] = "";
    if (rc) snprintf(note, sizeof note, "%s", err.msg);
    else if (s->last_ckpt_id > 0) snprintf(note, sizeof note, "checkpoint %.480s", shown_folder(s->last_ckpt_dir));
    tui_snapshot_end(r->snap, rc ? TUI_RUN_FAILED : sum.stopped ? TUI_RUN_STOPPED : TUI_RUN_FINISHED, note,
                 s->recorder.run);
    free(s);
    return rc;
}

static void *runner_main(void *arg) {
    TuiRunner *r = arg;
    TuiCommand *cmd = xmalloc(sizeof *cmd);
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (!r->pending) pthread_cond_wait(&r->cv, &r->mu);
        memset(cmd, 0, sizeof *cmd);
        cmd->kind = r->pending;
        cmd->ro = r->pending_ro;
        r->pending = 0;
        pthread_mutex_unlock(&r->mu);
        if (r->mpi && broadcast(cmd)) cmd->kind = TUI_CMD_QUIT;
        if (cmd->kind == TUI_CMD_QUIT) break;
        const int rc = run_one(r, &cmd->ro);
        pthread_mutex_lock(&r->mu);
        r->busy = false;
        r->mpi_broken |= r->mpi && rc != 0;
        pthread_mutex_unlock(&r->mu);
    }
    free(cmd);
    return NULL;
}

int tui_runner_start(TuiRunner *r, TuiSnapshot *snap, bool mpi, Error *err) {
    memset(r, 0, sizeof *r);
    r->snap = snap;
    r->mpi = mpi;
    if (mpi && !(commands = mpi_process_channel_open(err))) return -1;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (pthread_create(&r->thread, NULL, runner_main, r) != 0) {
        error_set(err, "cannot start the training thread");
        return -1;
    }
    r->started = true;
    return 0;
}

int tui_runner_submit(TuiRunner *r, const RunOptions *ro, Error *err) {
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    if (r->busy || r->pending) {
        error_set(err, "a run is live: stop it first");
        rc = -1;
    } else if (r->mpi_broken) {
        error_set(err, "an MPI run failed: quit and relaunch mpirun to run again");
        rc = -1;
    } else {
        r->pending_ro = *ro;
        r->pending = TUI_CMD_RUN;
        r->busy = true;
        pthread_cond_signal(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

bool tui_runner_busy(TuiRunner *r) {
    pthread_mutex_lock(&r->mu);
    const bool busy = r->busy;
    pthread_mutex_unlock(&r->mu);
    return busy;
}

void tui_runner_shutdown(TuiRunner *r) {
    if (!r->started) return;
    pthread_mutex_lock(&r->mu);
    r->pending = TUI_CMD_QUIT;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    mpi_process_channel_close(commands);
    commands = NULL;
    r->started = false;
}

int tui_runner_follow(void) {
    Error open_err;
    if (!(commands = mpi_process_channel_open(&open_err))) return 1;
    TuiCommand *cmd = xmalloc(sizeof *cmd);
    RunSession *s = xmalloc(sizeof *s);
    int code = 0;
    while (broadcast(cmd) == 0 && cmd->kind == TUI_CMD_RUN) {
        memset(s, 0, sizeof *s);
        s->ro = cmd->ro;
        s->ro.pipe.mpi_comm = NULL;
        Error err = {{0}};
        RunSummary sum;
        if (run_session(s, &sum, &err)) {
            fprintf(stderr, "pptrain: rank %d: %s\n", mpi_process_rank(), err.msg);
            code = 1;
        }
    }
    free(s);
    free(cmd);
    mpi_process_channel_close(commands);
    commands = NULL;
    return code;
}
