// Every rank's progress where the others can read it (engine/transport/progress.h).
#include "engine/transport/progress.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/error.h"

// A waiting rank beats every poll (at most 200 us apart under MPI, 250 ms under local); one
// silent longer than this while "waiting" is not polling any more (stopped).
#define PROGRESS_STALE_NS 1000000000LL

volatile sig_atomic_t progress_test_stalled;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// PPTRAIN_TEST_STALL=RANK:STEP:POINT; anything else leaves the hook off.
static void parse_stall(ProgressBoard *b) {
    b->stall_rank = -1;
    const char *v = getenv("PPTRAIN_TEST_STALL");
    int rank = 0, step = 0, used = 0;
    char point[16] = "";
    if (!v || sscanf(v, "%d:%d:%15s%n", &rank, &step, point, &used) != 3 || v[used] || step < 1) return;
    char *end = NULL;
    const long action = strtol(point, &end, 10);
    if (strcmp(point, "grads") == 0) b->stall_action = PROGRESS_GRADS;
    else if (strcmp(point, "norm") == 0) b->stall_action = PROGRESS_NORM;
    else if (end != point && !*end && action >= 0) b->stall_action = (int)action;
    else return;
    b->stall_rank = rank;
    b->stall_step = step - 1;
}

void progress_slot_init(ProgressSlot *s) {
    const int64_t t = now_ns();
    atomic_store(&s->beat_ns, t);
    atomic_store(&s->moved_ns, t);
    atomic_store(&s->step, 0);
    atomic_store(&s->action, PROGRESS_IDLE);
    atomic_store(&s->waiting_on, PROGRESS_NOBODY);
    atomic_store(&s->last_peer, PROGRESS_NOBODY);
    atomic_store(&s->pid, (int32_t)getpid());
    atomic_store(&s->gave_up, 0);
}

ProgressBoard *progress_board_wrap(int n, ProgressSlot **slots) {
    ProgressBoard *b = xcalloc(1, sizeof *b);
    b->n = n;
    b->slots = slots;
    atomic_init(&b->ended, 0);
    parse_stall(b);
    return b;
}

ProgressBoard *progress_board_create(int n) {
    ProgressSlot *owned = xcalloc((size_t)n, sizeof *owned);
    ProgressSlot **slots = xcalloc((size_t)n, sizeof *slots);
    for (int r = 0; r < n; r++) {
        progress_slot_init(&owned[r]);
        slots[r] = &owned[r];
    }
    ProgressBoard *b = progress_board_wrap(n, slots);
    b->owned = owned;
    return b;
}

void progress_board_free(ProgressBoard *b) {
    if (!b) return;
    free(b->owned);
    free(b->slots);
    free(b);
}

// NULL once the board ended: the slots stay as they were when the transport was aborted, so
// the ranks that leave their waits afterwards do not hide the one that stopped.
static ProgressSlot *slot_of(ProgressBoard *b, int rank) {
    return b && rank >= 0 && rank < b->n && !atomic_load(&b->ended) ? b->slots[rank] : NULL;
}

void progress_step(ProgressBoard *b, int rank, int step) {
    ProgressSlot *s = slot_of(b, rank);
    if (s) atomic_store(&s->step, step);
    progress_action(b, rank, PROGRESS_IDLE);
}

// The test stall: no beat, no progress, until the board ends (or the process is killed).
static void stall(ProgressBoard *b) {
    progress_test_stalled = 1;
    const struct timespec pause = {0, 10 * 1000 * 1000};
    while (!atomic_load(&b->ended)) nanosleep(&pause, NULL);
}

void progress_action(ProgressBoard *b, int rank, int action) {
    ProgressSlot *s = slot_of(b, rank);
    if (!s) return;
    const int64_t t = now_ns();
    atomic_store(&s->action, action);
    atomic_store(&s->moved_ns, t);
    atomic_store(&s->beat_ns, t);
    if (rank == b->stall_rank && action == b->stall_action && atomic_load(&s->step) == b->stall_step) stall(b);
}

void progress_wait_begin(ProgressBoard *b, int rank, int peer) {
    ProgressSlot *s = slot_of(b, rank);
    if (!s) return;
    atomic_store(&s->beat_ns, now_ns());
    atomic_store(&s->waiting_on, peer);
    atomic_store(&s->last_peer, peer);
}

void progress_beat(ProgressBoard *b, int rank) {
    ProgressSlot *s = slot_of(b, rank);
    if (s) atomic_store(&s->beat_ns, now_ns());
}

// No beat: a rank resumed after SIGSTOP leaves its wait at once (the deadline passed, or an
// abort notice came) and must still look as silent as it was.
void progress_wait_end(ProgressBoard *b, int rank) {
    ProgressSlot *s = slot_of(b, rank);
    if (s) atomic_store(&s->waiting_on, PROGRESS_NOBODY);
}

void progress_gave_up(ProgressBoard *b, int rank) {
    if (b && rank >= 0 && rank < b->n && b->slots[rank]) atomic_store(&b->slots[rank]->gave_up, 1);
}

void progress_end(ProgressBoard *b) {
    if (b) atomic_store(&b->ended, 1);
}

// Another process that no longer exists (kill(2) and getpid(2) are async-signal-safe).
static bool process_gone(const ProgressSlot *s) {
    const pid_t pid = (pid_t)atomic_load(&s->pid);
    return pid > 0 && pid != getpid() && kill(pid, 0) == -1 && errno == ESRCH;
}

static ProgressCulprit describe(const ProgressSlot *s, int rank, bool dead, int64_t now) {
    return (ProgressCulprit){.rank = rank,
                             .dead = dead,
                             .stuck_s = (double)(now - atomic_load(&s->beat_ns)) * 1e-9,
                             .step = atomic_load(&s->step),
                             .action = atomic_load(&s->action),
                             .waiting_on = atomic_load(&s->waiting_on)};
}

// The rank of another node that alive rank c waited on last (progress.h), or -1: its peer
// when that slot is unreadable; for a collective, the one unreadable rank if there is one.
static int remote_peer(const ProgressBoard *b, const ProgressCulprit *c) {
    if (c->dead || c->stuck_s * 1e9 >= PROGRESS_STALE_NS) return -1;
    const int peer = atomic_load(&b->slots[c->rank]->last_peer);
    if (peer >= 0) return peer < b->n && !b->slots[peer] ? peer : -1;
    if (peer != PROGRESS_GROUP) return -1;
    int unread = -1;
    for (int r = 0; r < b->n; r++)
        if (!b->slots[r]) {
            if (unread >= 0) return -1;   // several: which one stopped cannot be told from here
            unread = r;
        }
    return unread;
}

ProgressCulprit progress_culprit(const ProgressBoard *b) {
    const int saved_errno = errno;
    const int64_t now = now_ns();
    int silent = -1, idle = -1;   // oldest beat not busy waiting; oldest move overall
    int64_t silent_beat = 0, idle_moved = 0;
    ProgressCulprit c = {.rank = -1};
    for (int r = 0; b && r < b->n && c.rank < 0; r++) {
        const ProgressSlot *s = b->slots[r];
        if (!s) continue;
        // A rank that gave up may have exited already: gone, but not dead of its own.
        if (!atomic_load(&s->gave_up) && process_gone(s)) c = describe(s, r, true, now);
        const int64_t beat = atomic_load(&s->beat_ns), moved = atomic_load(&s->moved_ns);
        const bool waiting = atomic_load(&s->waiting_on) != PROGRESS_NOBODY && now - beat < PROGRESS_STALE_NS;
        if (!waiting && (silent < 0 || beat < silent_beat)) silent = r, silent_beat = beat;
        if (idle < 0 || moved < idle_moved) idle = r, idle_moved = moved;
    }
    if (c.rank < 0 && (silent >= 0 || idle >= 0)) {
        const int r = silent >= 0 ? silent : idle;
        c = describe(b->slots[r], r, false, now);
        const int peer = remote_peer(b, &c);
        if (peer >= 0) c = (ProgressCulprit){.rank = peer, .remote = true, .step = c.step, .action = PROGRESS_IDLE,
                                             .waiting_on = PROGRESS_NOBODY};
    }
    errno = saved_errno;
    return c;
}
