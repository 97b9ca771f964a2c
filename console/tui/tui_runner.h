// console/tui/tui_runner: the console's training thread. The UI thread submits a run; this
// thread runs it through run_session (so it lands in the run store like a headless run)
// with the live view's hooks, and is the only thread of the process that talks to the other
// ranks (through engine/transport/mpi_process).
//
// Under MPI (`mpirun -np N pptrain console --transport mpi`) the UI lives on rank 0. Before
// each run rank 0's runner broadcasts a fixed-size command (the run's options, or quit) over
// a channel of its own (mpi_process_channel_open); every other rank waits for it in tui_runner_follow and runs
// the same options (the pipeline's collectives then pair the ranks up; only rank 0's hooks
// fire). Commands go out only between runs, so the pipeline's MPI traffic and the commands
// never overlap (MPI runs serialized: one thread at a time calls it).
#ifndef PPTRAIN_TUI_RUNNER_H
#define PPTRAIN_TUI_RUNNER_H
#include <pthread.h>
#include <stdbool.h>

#include "console/run_options.h"
#include "console/tui/tui_snapshot.h"

typedef struct {
    TuiSnapshot *snap;
    bool mpi;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;                // a TuiCmdKind waiting for the thread, 0 when none
    RunOptions pending_ro;
    bool busy;                  // a run was submitted and has not ended
    bool mpi_broken;            // an MPI run failed: the processes cannot run another
} TuiRunner;

// Starts the thread. mpi: broadcast commands over a channel of their own (MPI must be
// initialized). Returns 0, or -1 with err.
int tui_runner_start(TuiRunner *r, TuiSnapshot *snap, bool mpi, Error *err);
// Queues a run; refused (-1 with err) while one is live or after a failed MPI run.
int tui_runner_submit(TuiRunner *r, const RunOptions *ro, Error *err);
bool tui_runner_busy(TuiRunner *r);
// Ends the thread: the caller has let any run end first (tui_runner_busy false). Under MPI
// the other ranks get the quit command.
void tui_runner_shutdown(TuiRunner *r);

// Every rank but 0 under MPI: runs what rank 0 sends until it sends quit. Returns the exit
// code (0, or 1 after a failed run).
int tui_runner_follow(void);
#endif
