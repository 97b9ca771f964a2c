// engine/transport/progress: every rank's progress, readable by the others without its help, so
// that a timeout names the rank that stopped (issue 12 §4).
//
// Each rank owns one ProgressSlot and writes only its own: the step, the index of the action it
// runs (or PROGRESS_GRADS / PROGRESS_NORM for the two reductions), whom it waits on, and two
// CLOCK_MONOTONIC stamps: `moved` when the action last changed, `beat` at every sign of life (an
// action began, or a wait polled). The others read the slot with plain atomic loads:
//   local  the slots are an array in this process (threads);
//   MPI    each slot lives in a node-shared window (MPI_Win_allocate_shared over the node's
//          ranks), so a rank stopped with SIGSTOP, or killed, is still read without its help:
//          its slot is ordinary shared memory. Ranks on other nodes are unreadable (NULL).
//
// The culprit (progress_culprit): a rank whose process is gone (MPI, same node) first; else, of
// the ranks not busy waiting (a waiting rank beats every poll, so a fresh beat while waiting
// means "alive, blocked on someone"), the one silent the longest; else (everyone alive and
// waiting: a deadlock) the one whose action has not changed for the longest. A rank that gave
// up (aborted after a failure) was beating until then, so it is silent the longest only if it
// had stopped before; it is never called dead when its process is gone (it exited).
// Across nodes: when that rank was alive (a fresh beat) and its latest wait was on a rank of
// another node (an unreadable slot), or on a collective with one rank on another node, that
// rank is the culprit, `remote`: a link cut leaves every readable rank alive and waiting, and
// naming one of them would blame a rank that only waited.
// Reading it is async-signal-safe.
//
// Test hook: PPTRAIN_TEST_STALL=RANK:STEP:POINT (STEP 1-based, POINT an action index, `grads` or
// `norm`) makes world rank RANK stop there: it sleeps, publishing nothing, until the board ends
// (local: the transport was aborted) or the process is killed (MPI).
#ifndef PPTRAIN_PROGRESS_H
#define PPTRAIN_PROGRESS_H
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum {
    PROGRESS_IDLE = -1,    // action: between steps, or before the first action
    PROGRESS_GRADS = -2,   // action: the gradient all-reduce over replicas
    PROGRESS_NORM = -3,    // action: the norm and loss all-reduce
};
enum {
    PROGRESS_NOBODY = -1,   // waiting_on: not waiting
    PROGRESS_GROUP = -2,    // waiting_on: a collective
};

typedef struct {
    _Atomic int64_t beat_ns;      // last sign of life
    _Atomic int64_t moved_ns;     // when `action` last changed
    _Atomic int32_t step;         // 0-based
    _Atomic int32_t action;       // index in the rank's action list, or PROGRESS_*
    _Atomic int32_t waiting_on;   // world rank, PROGRESS_GROUP or PROGRESS_NOBODY
    _Atomic int32_t last_peer;    // whom the latest wait was on (kept after it ends), as waiting_on
    _Atomic int32_t pid;          // the process holding the rank
    _Atomic int32_t gave_up;      // 1 once the rank aborted after a failure
} ProgressSlot;

typedef struct {
    int n;                                      // world ranks
    ProgressSlot **slots;                       // (n) NULL where unreadable (another node)
    ProgressSlot *owned;                        // local: the (n) slots; MPI: NULL (the window owns them)
    atomic_int ended;                           // the transport was aborted: a test stall returns
    int stall_rank, stall_step, stall_action;   // PPTRAIN_TEST_STALL (stall_rank -1: none)
} ProgressBoard;

typedef struct {
    int rank;         // -1: no slot readable
    bool dead;        // its process is gone
    bool remote;      // on another node: its slot is unreadable, so only rank is known
    double stuck_s;   // seconds since its last sign of life
    int step, action, waiting_on;
} ProgressCulprit;

// Threads of one process: n slots here.
ProgressBoard *progress_board_create(int n);
// slots: (n) pointers into shared memory, taken over (the array, not what it points to).
ProgressBoard *progress_board_wrap(int n, ProgressSlot **slots);
void progress_board_free(ProgressBoard *b);
// A fresh slot for this process, before anyone reads it.
void progress_slot_init(ProgressSlot *s);

void progress_step(ProgressBoard *b, int rank, int step);
// Rank begins action (or PROGRESS_*); the test stall happens here.
void progress_action(ProgressBoard *b, int rank, int action);
void progress_wait_begin(ProgressBoard *b, int rank, int peer);
void progress_beat(ProgressBoard *b, int rank);
void progress_wait_end(ProgressBoard *b, int rank);
void progress_gave_up(ProgressBoard *b, int rank);
void progress_end(ProgressBoard *b);

// Async-signal-safe (atomic loads, clock_gettime, kill(pid, 0)).
ProgressCulprit progress_culprit(const ProgressBoard *b);

// Set (never cleared) once this process's rank stalls for PPTRAIN_TEST_STALL.
extern volatile sig_atomic_t progress_test_stalled;
#endif
