// engine/transport/mpi_process: this process as one rank of an mpirun job, beyond any one
// transport: MPI's initialization and finalization, the rank and world size, a byte broadcast
// from rank 0 for the console's commands, and the one line a rank prints when mpirun stops it.
// It is MPI's one owner outside the transports: the pipeline and the console call it; the
// transports built on MPI (transport_mpi.c, transport_nccl.c) assume MPI is initialized.
//
// Finalization. MPI initialized here is finalized at exit (atexit), unless a step failed: a
// failed run leaves requests that can never complete, so the process just exits non-zero with
// its one error line (mpi_process_failed).
//
// Signals. mpirun kills the surviving ranks with SIGTERM when one dies (SIGINT: the user's
// Ctrl-C), and SIGKILL a second later. While they are installed, the handlers only mark the
// signal: the rank's waits return with it (mpi_process_signal_name), and the run ends through
// its error path, naming the lost rank (engine/transport/progress.h). Last words, when that
// path has not ended the process within a second: one line naming the rank, its stage, and
// what it was waiting for, read from the transport's TransportWait:
//   "pptrain: rank 1 (stage 1): peer lost (SIGTERM) while waiting at action 7 (RECV_B 2,mb 3)"
//   "pptrain: rank 0 (stage 0): interrupted (SIGINT) in a collective of step 4"
// and exit with 128 + the signal. Once a step has failed they stay silent, so the caller's own
// error line is the only one.
#ifndef PPTRAIN_MPI_PROCESS_H
#define PPTRAIN_MPI_PROCESS_H
#include <stdbool.h>
#include <stddef.h>

#include "engine/error.h"
#include "engine/transport/transport.h"

// Whether a launcher (mpirun, or any PMI/PMIx one) started this process: it then sets the
// rank in the environment. Without one, MPI_Init would start a singleton world of 1, which
// only fails later on a confusing size (and, under ASan, leaks inside Open MPI).
bool mpi_process_launched(void);
// Initializes MPI at MPI_THREAD_SERIALIZED unless someone has (then it is theirs to finalize).
// -1 with one line in err when MPI cannot start: not under mpirun (said before MPI starts).
int mpi_process_init(Error *err);
// The line for a process that --transport mpi needs mpirun for and that mpirun did not start.
#define MPI_PROCESS_NOT_LAUNCHED \
    "--transport mpi needs mpirun: start every rank with it (mpirun -np N pptrain ... --transport mpi)"

// A step failed: no finalization at exit, no last words on a signal.
void mpi_process_failed(void);

// The rank the launcher gave this process (from its environment), 0 when no launcher started
// it; callable before MPI starts. For lines every rank would print alike: rank 0's only.
int mpi_process_launch_rank(void);
// The world's size the launcher gave (OMPI_COMM_WORLD_SIZE, PMI_SIZE), 1 when no launcher
// started this process, 0 when one did but named no size (PMIx alone: then only MPI can tell,
// mpi_process_size after mpi_process_init); callable before MPI starts.
int mpi_process_launch_size(void);
// For a rank other than 0 that stops before MPI starts, for a reason rank 0 prints for every
// rank: mpirun ends the whole job, rank 0 included, as soon as one rank exits non-zero, so it
// first gives rank 0 up to ROOT_GRACE_S (2 s) to print its line and exit, upon which mpirun
// ends this process. Returns after that time when mpirun has not.
void mpi_process_wait_for_root(void);
// This process's rank in the world and the world's size (MPI initialized).
int mpi_process_rank(void);
int mpi_process_size(void);
// "Open MPI v4.1.4" (the library's first line, up to its first comma); callable before init.
void mpi_process_library_version(char *buf, size_t size);

// A channel of byte broadcasts from rank 0 over a communicator of its own (a duplicate of the
// world), so its messages never meet a transport's. Every rank opens it, broadcasts the same
// sizes in the same order, and closes it. Open: NULL with one line in err.
typedef struct MpiChannel MpiChannel;
MpiChannel *mpi_process_channel_open(Error *err);
// Rank 0's bytes into every rank's buf; -1 when MPI fails.
int mpi_process_broadcast(MpiChannel *ch, void *buf, size_t bytes);
void mpi_process_channel_close(MpiChannel *ch);

// What the last words say about this rank. at and stage are malloc'd; the handlers own them
// from mpi_process_watch until mpi_process_unwatch.
typedef struct {
    int world;              // this process's world rank
    int first_stage;        // the stage named when the rank waits for no message
    int n_tags;             // the message tags of a step (transport_tag: 2 * M * S)
    char (*at)[72];         // (n_tags) " at action K (RECV_B 2,mb 3)" where this rank receives that tag, else ""
    int *stage;             // (n_tags) the stage of that receive
} MpiLastWords;

// Installs the SIGTERM and SIGINT handlers for the rank that waits on tp.
void mpi_process_watch(const Transport *tp, MpiLastWords words);
// The 0-based step being run, for the line (async-signal-safe to read).
void mpi_process_set_step(int step);
// "SIGTERM" or "SIGINT" once the handlers caught one, else NULL (async-signal-safe).
const char *mpi_process_signal_name(void);
// Restores the previous handlers and frees the words, if tp is the transport watched.
void mpi_process_unwatch(const Transport *tp);
#endif
