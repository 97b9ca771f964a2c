// engine/transport/mpi_process: MPI's life in this process, its rank and world, the console's
// byte broadcast, and a rank's last words on a signal (mpi_process.h).
#include "engine/transport/mpi_process.h"

#include "engine/clock.h"
#include "engine/transport/progress.h"

#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool mpi_owned;                    // this module called MPI_Init_thread
static const ProgressSlot *root_slot;     // rank 0's progress slot, when another rank's on this node
static bool mpi_finalized;
static volatile sig_atomic_t mpi_failed;  // a step failed: no finalize, signals silent

// mpirun tears the job down (SIGCONT, SIGTERM, then SIGKILL) as soon as one rank exits
// non-zero, so a failed rank other than 0 lets rank 0, which says who stopped and records the
// run's end, exit first. How long it waits depends on what rank 0's progress slot says:
//   not given up  rank 0 has not heard of the failure yet, or is the rank that stopped: up to
//                 ROOT_GRACE_S (its wait sees the abort notice within milliseconds if it can);
//   given up      rank 0 is on its way out: recording the end may wait out a store another
//                 process holds locked (the recorder's patience is a minute), so up to
//                 ROOT_REPORT_S. Leaving earlier would have mpirun kill it mid-report: its
//                 line lost, and the run left 'running' in the store.
#define ROOT_GRACE_S 2.0
#define ROOT_REPORT_S 90.0
// The process exists and has not exited (a zombie, not yet reaped by mpirun, has).
static bool process_running(pid_t pid) {
    if (kill(pid, 0) != 0) return false;
    char path[32], stat[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return true;   // no procfs: kill(2) is all there is
    const size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    const char *state = strrchr(stat, ')');   // "pid (comm) S ...": comm may hold spaces
    return !(state && state[1] == ' ' && state[2] == 'Z');
}

static void wait_for_root(void) {
    const pid_t pid = root_slot ? (pid_t)atomic_load(&root_slot->pid) : 0;
    const struct timespec pause = {0, 10 * 1000 * 1000};
    const double t0 = clock_now_s();
    while (pid > 0 && process_running(pid)) {
        const double limit = atomic_load(&root_slot->gave_up) ? ROOT_REPORT_S : ROOT_GRACE_S;
        if (clock_now_s() - t0 > limit) return;
        nanosleep(&pause, NULL);
    }
}

static void mpi_process_finalize(void) {
    if (mpi_failed) wait_for_root();
    if (!mpi_owned || mpi_finalized || mpi_failed) return;
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
    mpi_finalized = true;
}

// What a launcher puts in each process's environment: its rank in the world, and the world's
// size where the launcher says it (PMIx alone does not: there the size is MPI's to tell).
static const struct {
    const char *rank, *size;
} LAUNCH_VARS[] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},   // Open MPI's mpirun
    {"PMIX_RANK", NULL},                                 // a PMIx launcher (prterun, srun --mpi=pmix)
    {"PMI_RANK", "PMI_SIZE"},                            // a PMI one (MPICH's and Intel MPI's hydra)
};
#define N_LAUNCH_VARS (sizeof LAUNCH_VARS / sizeof LAUNCH_VARS[0])

bool mpi_process_launched(void) {
    for (size_t i = 0; i < N_LAUNCH_VARS; i++)
        if (getenv(LAUNCH_VARS[i].rank)) return true;
    return false;
}

int mpi_process_launch_rank(void) {
    for (size_t i = 0; i < N_LAUNCH_VARS; i++) {
        const char *v = getenv(LAUNCH_VARS[i].rank);
        if (v) return atoi(v);
    }
    return 0;
}

int mpi_process_launch_size(void) {
    for (size_t i = 0; i < N_LAUNCH_VARS; i++) {
        const char *v = LAUNCH_VARS[i].size ? getenv(LAUNCH_VARS[i].size) : NULL;
        if (v) return atoi(v) > 1 ? atoi(v) : 1;
    }
    return mpi_process_launched() ? 0 : 1;
}

void mpi_process_wait_for_root(void) {
    const struct timespec grace = {(time_t)ROOT_GRACE_S, 0};
    nanosleep(&grace, NULL);   // mpirun ends this process once rank 0 has exited
}

int mpi_process_init(Error *err) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) return 0;
    if (!mpi_process_launched()) {
        error_set(err, MPI_PROCESS_NOT_LAUNCHED);
        return -1;
    }
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS ||
        provided < MPI_THREAD_SERIALIZED) {
        error_set(err, "MPI_Init_thread failed (is this run under mpirun?)");
        return -1;
    }
    mpi_owned = true;
    atexit(mpi_process_finalize);
    return 0;
}

void mpi_process_failed(void) { mpi_failed = 1; }

int mpi_process_rank(void) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

int mpi_process_size(void) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    return size;
}

void mpi_process_library_version(char *buf, size_t size) {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(text, &len);   // callable before MPI_Init
    char *comma = strchr(text, ',');
    if (comma) *comma = '\0';
    snprintf(buf, size, "%s", text);
}

// ---- the console's channel -------------------------------------------------------------------

struct MpiChannel {
    MPI_Comm comm;
};

MpiChannel *mpi_process_channel_open(Error *err) {
    MpiChannel *ch = xmalloc(sizeof *ch);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &ch->comm) != MPI_SUCCESS) {
        error_set(err, "MPI_Comm_dup failed");
        free(ch);
        return NULL;
    }
    return ch;
}

// MPI counts in int: a larger message would need splitting, and no command is that large.
int mpi_process_broadcast(MpiChannel *ch, void *buf, size_t bytes) {
    if (bytes > (size_t)INT_MAX) return -1;
    return MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, ch->comm) == MPI_SUCCESS ? 0 : -1;
}

void mpi_process_channel_close(MpiChannel *ch) {
    if (!ch) return;
    MPI_Comm_free(&ch->comm);
    free(ch);
}

// ---- last words ----------------------------------------------------------------------------

// What the handler reads. Every field is written before the handlers are installed, except
// step, which is a sig_atomic_t.
static struct {
    const Transport *tp;      // NULL: not watching
    MpiLastWords words;
    volatile sig_atomic_t step;
    volatile sig_atomic_t pending;  // the signal received, 0 before
    struct sigaction old_term, old_int, old_alarm, old_pipe;
} watch;

static void append(char *line, size_t *n, size_t cap, const char *s) {
    while (*s && *n + 1 < cap) line[(*n)++] = *s++;
}

static void append_int(char *line, size_t *n, size_t cap, long v) {
    char digits[24];
    int k = 0;
    if (v < 0) append(line, n, cap, "-"), v = -v;
    do digits[k++] = (char)('0' + v % 10); while ((v /= 10) && k < 23);
    while (k && *n + 1 < cap) line[(*n)++] = digits[--k];
}

// Async-signal-safe: fixed buffers, write(2), _exit.
static void say_last_words(int sig) {
    const MpiLastWords *w = &watch.words;
    char line[256];
    size_t n = 0;
    const int what = watch.tp ? watch.tp->wait.what : WAIT_NONE;
    const int tag = watch.tp ? watch.tp->wait.tag : -1;
    const bool recv = what == WAIT_RECV && tag >= 0 && tag < w->n_tags && w->at[tag][0];
    append(line, &n, sizeof line, "pptrain: rank ");
    append_int(line, &n, sizeof line, w->world);
    append(line, &n, sizeof line, " (stage ");
    append_int(line, &n, sizeof line, recv ? w->stage[tag] : w->first_stage);
    append(line, &n, sizeof line, sig == SIGTERM ? "): peer lost (SIGTERM) " : "): interrupted (SIGINT) ");
    if (recv) {
        append(line, &n, sizeof line, "while waiting");
        append(line, &n, sizeof line, w->at[tag]);
    } else {
        append(line, &n, sizeof line, what == WAIT_COLLECTIVE ? "in a collective of step " : "in step ");
        append_int(line, &n, sizeof line, watch.step + 1);
    }
    line[n++] = '\n';
    const ssize_t written = write(STDERR_FILENO, line, n);
    (void)written;  // nothing else to do if stderr is gone
    _exit(128 + sig);
}

// A rank died (its process is gone: mpirun then sends SIGTERM to the rest), or nobody asked to
// stop: the first signal only marks it. Every wait then returns (mpi_process_signal_name), so
// the run ends through its error path, which names the rank that was lost and lets rank 0
// record the run as failed. Last words if that takes over a second (or on a second signal). A
// rank stalled by PPTRAIN_TEST_STALL just goes.
static void on_signal(int sig) {
    if (mpi_failed) return;  // the step's own error line is on its way
    if (progress_test_stalled) _exit(128 + sig);
    if (watch.pending) say_last_words(watch.pending);
    // No rank on this node is gone: mpirun forwards the user's Ctrl-C (as SIGTERM to every
    // rank). The caller's own handler asks the run to stop after the step, as under the local
    // transport (and then saves the final checkpoint).
    const struct sigaction *old = sig == SIGTERM ? &watch.old_term : &watch.old_int;
    const bool chained = !(old->sa_flags & SA_SIGINFO) && old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN;
    if (chained && !(watch.tp && progress_culprit(watch.tp->board).dead)) {
        // mpirun no longer drains the ranks' stdout once it tears the job down, and a rank
        // blocked printing a step would never save the checkpoint: stdout goes nowhere now.
        const int null_fd = open("/dev/null", O_WRONLY);
        if (null_fd >= 0) dup2(null_fd, STDOUT_FILENO), close(null_fd);
        old->sa_handler(sig);
        return;
    }
    watch.pending = sig;
    alarm(1);
}

static void on_alarm(int sig) {
    (void)sig;
    if (!mpi_failed && watch.pending) say_last_words(watch.pending);
}

const char *mpi_process_signal_name(void) {
    const int sig = watch.pending;
    return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : NULL;
}

void mpi_process_watch(const Transport *tp, MpiLastWords words) {
    // A failed run abandons its transport, board included, so the slot outlives the pipeline.
    root_slot = words.world != 0 && tp->board ? tp->board->slots[0] : NULL;
    watch.words = words;
    watch.tp = tp;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &watch.old_term);
    sigaction(SIGINT, &sa, &watch.old_int);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, &watch.old_alarm);
    // On Ctrl-C mpirun stops forwarding output at once: a rank that prints its step, its
    // checkpoint or its error line must not die of SIGPIPE before it has finished.
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, &watch.old_pipe);
}

void mpi_process_set_step(int step) { watch.step = step; }

void mpi_process_unwatch(const Transport *tp) {
    if (!tp || watch.tp != tp) return;
    if (!mpi_failed) root_slot = NULL;  // the window goes with the transport
    sigaction(SIGTERM, &watch.old_term, NULL);
    sigaction(SIGINT, &watch.old_int, NULL);
    sigaction(SIGALRM, &watch.old_alarm, NULL);
    sigaction(SIGPIPE, &watch.old_pipe, NULL);
    watch.tp = NULL;
    free(watch.words.at);
    free(watch.words.stage);
    watch.words = (MpiLastWords){0};
}
