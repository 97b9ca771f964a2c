// engine/transport/transport: messages between the ranks of a run, behind one small table of
// functions so `local` (ranks as threads of one process), `mpi` (one rank per process) and
// `nccl` are interchangeable; which transports exist is engine/transport/transport_registry.h.
//
// Ranks. A transport connects the W = P x D ranks of a run: world rank r is pipeline rank
// r % P of data-parallel replica r / P (engine/pipeline.h, "World layout"). Every `self`,
// `from` and `to` below is a world rank. The runtime numbers ranks inside its replica
// (0..P-1): it talks through transport_view_create(world, d * P), which adds the offset.
//
// Contract (what the runtime and the pipeline rely on):
//   send   copies the bytes out before it returns and never waits for the receiver (buffered).
//   post   (optional) announces a receive of (from, tag) before it is needed, so a transport
//          that can receive into its own buffers ahead of time does (MPI); no-op elsewhere.
//   recv   blocks until the message (from, tag) arrives, at most timeout_s seconds; it never
//          hangs: on a timeout, or once any rank called abort, it returns an error.
//   abort  wakes every rank's pending and future wait (recv and collectives) with
//          TRANSPORT_ABORTED, so one failing rank stops all of them promptly.
//   allreduce_sum_{f32,f64}  sums buf elementwise over a group of ranks, result on every
//          member; every member calls it with the same n, in the same order of calls per group.
//          Same waits, timeouts and abort as recv. Local sums in group-rank order.
//   clock_offsets  fills offsets[W]: what to add to rank r's CLOCK_MONOTONIC to get rank 0's
//          (collective over the world; zeros for threads of one process).
//   gather_bytes   rank 0 receives every rank's bytes (collective over the world).
// A tag names one message of a step: (kind, sending stage, microbatch), see transport_tag.
#ifndef PPTRAIN_TRANSPORT_H
#define PPTRAIN_TRANSPORT_H
#include <signal.h>
#include <stddef.h>

#include "engine/error.h"
#include "engine/transport/progress.h"
#include "engine/transport/transport_memory.h"

typedef enum {
    TRANSPORT_OK = 0,
    TRANSPORT_FAILED = -1,   // this rank's own failure (timeout, bad size, full mailbox)
    TRANSPORT_ABORTED = -2,  // another rank aborted the transport
} TransportStatus;

typedef enum { MSG_ACT = 0, MSG_GRAD = 1 } MsgKind;  // activations forward, gradients back

// The groups a collective runs over, fixed by the world layout.
typedef enum {
    GROUP_REPLICAS = 0,  // the D ranks with self's pipeline rank (they hold the same stages)
    GROUP_WORLD = 1,     // all W ranks
} TransportGroup;

// Unique within a step for S stages: ((mb * S) + stage) * 2 + kind, stage = the sender's.
int transport_tag(MsgKind kind, int stage, int mb, int n_stages);

typedef struct Transport Transport;

typedef struct {
    // Rank `from` sends bytes to rank `to`. err: one line, without rank/action context.
    TransportStatus (*send)(Transport *t, int from, int to, int tag, const void *data, size_t bytes, Error *err);
    // NULL when the transport has nothing to do ahead of a receive.
    TransportStatus (*post)(Transport *t, int self, int from, int tag, size_t bytes, Error *err);
    // Rank `self` receives exactly `bytes` of (from, tag) into data.
    TransportStatus (*recv)(Transport *t, int self, int from, int tag, void *data, size_t bytes, Error *err);
    TransportStatus (*allreduce_f32)(Transport *t, int self, TransportGroup g, float *buf, size_t n, Error *err);
    TransportStatus (*allreduce_f64)(Transport *t, int self, TransportGroup g, double *buf, size_t n, Error *err);
    TransportStatus (*clock_offsets)(Transport *t, int self, double *offsets, Error *err);
    // Rank 0 gets rank r's `bytes` (at most cap each) at all + r * cap and their count in
    // counts[r]; the other ranks pass all = counts = NULL.
    TransportStatus (*gather_bytes)(Transport *t, int self, const void *mine, size_t bytes, void *all, size_t cap,
                                    size_t *counts, Error *err);
    void (*abort)(Transport *t);
    void (*free)(Transport *t);
} TransportOps;

// What the process's one rank is blocked on, for a signal handler's last words (MPI only;
// async-signal-safe to read): WAIT_NONE, WAIT_RECV (peer, tag) or WAIT_COLLECTIVE.
enum { WAIT_NONE = 0, WAIT_RECV = 1, WAIT_COLLECTIVE = 2 };
typedef struct {
    volatile sig_atomic_t what, peer, tag;
} TransportWait;

struct Transport {
    const TransportOps *ops;
    int n_ranks;         // W (a view: the P ranks of its replica)
    int n_pipe;          // P: world rank r is pipeline rank r % P of replica r / P
    double timeout_s;    // longest wait of one recv or collective (default 300)
    TransportWait wait;  // maintained by the MPI transport
    ProgressBoard *board;  // every rank's progress (progress.h); NULL: not published (nccl)
    int board_offset;      // a view's world offset: rank i of it is slot board_offset + i
};

#define TRANSPORT_DEFAULT_TIMEOUT_S 300.0


// Ranks as threads of one process: a world of P x D ranks. Each rank's mailbox preallocates
// `capacity` messages of at most max_bytes each (no allocation per message); capacity must
// cover the messages a rank can have received but not yet consumed (its RECV actions per step
// is always enough). Collectives reduce in place through shared pointers, in group-rank order.
Transport *transport_local_create_world(int P, int D, size_t max_bytes, int capacity, double timeout_s);
// The same with the mailboxes in `mem` (NULL: host memory).
Transport *transport_local_create_mem(int P, int D, size_t max_bytes, int capacity, double timeout_s,
                                      const TransportMemory *mem);
// One replica of n_ranks pipeline ranks (D = 1).
Transport *transport_local_create(int n_ranks, size_t max_bytes, int capacity, double timeout_s);

// This process as one rank of an MPI job of P x D ranks over *comm (an MPI_Comm, passed by
// pointer so this header needs no mpi.h; NULL = MPI_COMM_WORLD), MPI already initialized
// with at least MPI_THREAD_SERIALIZED. Preallocates `capacity` send and `capacity` receive
// buffers of max_bytes; tags must stay below max_tag (checked here: the run's 2 * M * S).
// Returns NULL with one line in err (wrong world size, untaggable run, an MPI error).
Transport *transport_mpi_create(const void *comm, int P, int D, size_t max_bytes, int capacity, int max_tag,
                                double timeout_s, Error *err);
int transport_mpi_rank(const Transport *t);  // this process's world rank

// A replica's window on a world transport: rank i of the view is world rank offset + i.
// Borrows `world` (free the view first); abort aborts the world.
Transport *transport_view_create(Transport *world, int offset, int n_ranks);

static inline TransportStatus transport_send(Transport *t, int from, int to, int tag, const void *data,
                                             size_t bytes, Error *err) {
    return t->ops->send(t, from, to, tag, data, bytes, err);
}
static inline TransportStatus transport_post(Transport *t, int self, int from, int tag, size_t bytes, Error *err) {
    return t->ops->post ? t->ops->post(t, self, from, tag, bytes, err) : TRANSPORT_OK;
}
static inline TransportStatus transport_recv(Transport *t, int self, int from, int tag, void *data, size_t bytes,
                                             Error *err) {
    return t->ops->recv(t, self, from, tag, data, bytes, err);
}
static inline TransportStatus transport_allreduce_f32(Transport *t, int self, TransportGroup g, float *buf,
                                                      size_t n, Error *err) {
    return t->ops->allreduce_f32(t, self, g, buf, n, err);
}
static inline TransportStatus transport_allreduce_f64(Transport *t, int self, TransportGroup g, double *buf,
                                                      size_t n, Error *err) {
    return t->ops->allreduce_f64(t, self, g, buf, n, err);
}
static inline TransportStatus transport_clock_offsets(Transport *t, int self, double *offsets, Error *err) {
    return t->ops->clock_offsets(t, self, offsets, err);
}
static inline TransportStatus transport_gather_bytes(Transport *t, int self, const void *mine, size_t bytes,
                                                     void *all, size_t cap, size_t *counts, Error *err) {
    return t->ops->gather_bytes(t, self, mine, bytes, all, cap, counts, err);
}
// Progress of rank `self` (engine/transport/progress.h): a new step, then each action it begins.
static inline void transport_mark_step(Transport *t, int self, int step) {
    if (t->board) progress_step(t->board, t->board_offset + self, step);
}
static inline void transport_mark(Transport *t, int self, int action) {
    if (t->board) progress_action(t->board, t->board_offset + self, action);
}
// The rank that stopped making progress (rank -1 when nothing is published).
static inline ProgressCulprit transport_culprit(const Transport *t) { return progress_culprit(t->board); }
static inline void transport_abort(Transport *t) { t->ops->abort(t); }
static inline void transport_free(Transport *t) {
    if (t) t->ops->free(t);
}
#endif
