// engine/transport/mpi_notices: what the two transports built on MPI (engine/transport/transport_mpi.c,
// engine/transport/transport_nccl.c) share: abort notices, their waits' clock and backoff, and the one
// line of a failed MPI call.
//
// Abort notices travel on a communicator of their own (a duplicate of the run's), so they
// never match a data receive. A rank that aborts sends one tiny notice to every other rank
// without waiting for anyone (best effort: a rank that misses it ends at its own timeout);
// every wait polls for them between its own checks.
#ifndef PPTRAIN_MPI_NOTICES_H
#define PPTRAIN_MPI_NOTICES_H
#include <mpi.h>
#include <stdbool.h>

#include "engine/error.h"
#include "engine/transport/transport.h"

typedef struct {
    MPI_Comm comm;          // notices only (MPI_ERRORS_RETURN)
    int rank, size;         // this rank in it, and the world's size
    bool aborted;           // this rank aborted, or a notice arrived
    int from;               // the rank whose notice arrived first, -1 before one did
    int payload;            // what a notice carries: the sender's rank
    MPI_Request *reqs;      // (size) the notices this rank sent
} AbortNotices;

// Duplicates `from` for the notices. -1 with one line in err.
int abort_notices_init(AbortNotices *n, MPI_Comm from, Error *err);
// True once this rank aborted or a notice arrived (consuming it).
bool abort_notices_poll(AbortNotices *n);
// Marks this rank aborted and tells every other rank, once (no echo of a received notice).
void abort_notices_send(AbortNotices *n);
// After abort_notices_send, in a process about to exit: lets the notices leave, for up to
// `seconds` (MPI_Test on each), so the exit does not take them down with it.
void abort_notices_flush(AbortNotices *n, double seconds);
// Frees the communicator and requests. Not after an abort: notices may still be in flight,
// and the process is about to exit.
void abort_notices_free(AbortNotices *n);

// "MPI_Test failed: <MPI's error string>" in err; returns TRANSPORT_FAILED.
TransportStatus mpi_call_failed(int code, const char *call, Error *err);
// CLOCK_MONOTONIC seconds, for deadlines.
double notices_now_s(void);
// A poll loop's pause (start *ns at 1000): sleeps *ns nanoseconds, then doubles it up to 50 us,
// then lengthens it by 1 us a poll up to 1 ms. A wait of a few milliseconds (a pipeline
// bubble, a message in flight) is answered within 50 us of the message; one of seconds (a
// stalled peer, a paused console) settles at a thousand wake-ups a second. Measured on 2 cores,
// mpirun -np 4 --stages 4 (tiny): 10.5 ms a step with the former 200 us cap and the default
// 50 us timer slack, 9.6 ms with these pauses, 9.4 ms under the local transport.
#define NOTICES_POLL_SHORT_NS 50000L
#define NOTICES_POLL_LONG_NS 1000000L
void notices_backoff(long *ns);
#endif
