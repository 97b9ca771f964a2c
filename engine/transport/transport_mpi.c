// The MPI transport: this process is one rank of an mpirun job of P x D ranks.
//
// Communicators, all made once at create from the run's communicator, all MPI_ERRORS_RETURN
// so every failure comes back as a code this file turns into one line:
//   pipe      split by replica: point-to-point messages inside a replica (comm rank = p)
//   replicas  split by pipeline rank: the D ranks holding the same stages (gradient all-reduce)
//   world     a duplicate: world collectives (norm, loss), clock ping-pongs, gathers
//   ctrl      a duplicate: only abort notices, so they never match a data receive
// Sends copy into a preallocated buffer and MPI_Isend from it (finished sends are recycled
// with MPI_Test; the sender never waits for the receiver unless every buffer is in flight).
// Receives are posted ahead (post: MPI_Irecv into a preallocated buffer) and completed by
// recv, which copies the bytes out. Every wait polls its request, then the ctrl
// communicator for an abort notice, then sleeps a little (1 us doubling to 200 us), until
// the timeout: nothing blocks inside MPI, so no rank can hang.
// Progress (engine/transport/progress.h): each rank's slot lives in a window shared by the ranks
// of its node (MPI_Win_allocate_shared), read with plain loads, so a stopped or killed rank is
// read without its help; every wait beats this rank's slot at each poll.
#include <limits.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/transport/mpi_notices.h"
#include "engine/transport/mpi_process.h"
#include "engine/transport/transport.h"

enum { TAG_CLOCK = 1, CLOCK_ROUNDS = 5 };

typedef struct {
    MPI_Request req;  // MPI_REQUEST_NULL when free
    unsigned char *data;
} SendSlot;

typedef struct {
    MPI_Request req;
    bool posted;
    int from, tag;    // pipe-comm source, message tag
    unsigned long order;
    unsigned char *data;
} RecvSlot;

typedef struct {
    Transport base;
    MPI_Comm pipe, replicas, world;
    AbortNotices notices;   // the ctrl communicator: abort notices only
    int rank, P, D;           // world rank; the layout (world size P * D, replicas group size D)
    size_t max_bytes;
    int capacity, max_tag;
    SendSlot *sends;        // (capacity)
    RecvSlot *recvs;        // (capacity)
    unsigned long n_posted; // post order, so equal (from, tag) complete first-posted first
    MPI_Request coll_req;   // a collective in flight (MPI_REQUEST_NULL when none)
    float *fold;            // the ordered reduction's pieces (D x the largest chunk), grown once
    size_t fold_cap;        // floats in fold
    MPI_Comm node;          // the ranks sharing this node's memory
    MPI_Win board_win;      // their progress slots, one ProgressSlot each
} MpiTransport;

static MpiTransport *as_mpi(Transport *t) { return (MpiTransport *)t; }

// ---- waiting -------------------------------------------------------------------------------

static bool poll_abort(MpiTransport *mt) { return abort_notices_poll(&mt->notices); }

// One poll of wait_request: done, an abort notice, mpirun's signal, or the deadline passed.
static TransportStatus poll_request(MpiTransport *mt, MPI_Request *req, MPI_Status *status, const char *what,
                                    double deadline, bool *done, Error *err) {
    int flag = 0;
    int rc = MPI_Test(req, &flag, status);
    if (rc != MPI_SUCCESS) return mpi_call_failed(rc, "MPI_Test", err);
    *done = flag != 0;
    if (*done) return TRANSPORT_OK;
    const char *sig = mpi_process_signal_name();
    if (sig) {
        error_set(err, "stopped by %s from mpirun while %s", sig, what);
        return TRANSPORT_ABORTED;
    }
    if (poll_abort(mt)) {
        error_set(err, "aborted (another rank failed) while %s", what);
        return TRANSPORT_ABORTED;
    }
    if (notices_now_s() > deadline) {
        error_set(err, "timed out after %g s %s", mt->base.timeout_s, what);
        return TRANSPORT_FAILED;
    }
    return TRANSPORT_OK;
}

// Polls req to completion, an abort notice or the timeout. what: "waiting", "in a collective":
// "timed out after 1 s waiting", "aborted (another rank failed) while waiting", as local says.
// peer: whom this rank waits on, for its progress slot (a world rank or PROGRESS_GROUP).
static TransportStatus wait_request(MpiTransport *mt, MPI_Request *req, MPI_Status *status, const char *what,
                                    int peer, Error *err) {
    const double deadline = notices_now_s() + mt->base.timeout_s;
    long ns = 1000;
    progress_wait_begin(mt->base.board, mt->rank, peer);
    for (;;) {
        bool done = false;
        TransportStatus st = poll_request(mt, req, status, what, deadline, &done, err);
        if (done || st != TRANSPORT_OK) {
            progress_wait_end(mt->base.board, mt->rank);
            return st;
        }
        progress_beat(mt->base.board, mt->rank);
        notices_backoff(&ns);
    }
}

static TransportStatus refuse_if_aborted(MpiTransport *mt, const char *what, Error *err) {
    if (!poll_abort(mt)) return TRANSPORT_OK;
    error_set(err, "aborted (another rank failed) while %s", what);
    return TRANSPORT_ABORTED;
}

// ---- point to point ------------------------------------------------------------------------

// A free send buffer: recycles finished sends; when all are in flight waits for the oldest.
static TransportStatus free_send_slot(MpiTransport *mt, SendSlot **slot, Error *err) {
    for (int i = 0; i < mt->capacity; i++) {
        SendSlot *s = &mt->sends[i];
        int done = 1;
        if (s->req != MPI_REQUEST_NULL) {
            int rc = MPI_Test(&s->req, &done, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) return mpi_call_failed(rc, "MPI_Test", err);
        }
        if (done) {
            *slot = s;
            return TRANSPORT_OK;
        }
    }
    *slot = &mt->sends[0];
    return wait_request(mt, &mt->sends[0].req, MPI_STATUS_IGNORE, "waiting for a send buffer", PROGRESS_GROUP, err);
}

static TransportStatus transport_mpi_send(Transport *t, int from, int to, int tag, const void *data, size_t bytes,
                                          Error *err) {
    MpiTransport *mt = as_mpi(t);
    (void)from;
    if (bytes > mt->max_bytes || tag < 0 || tag >= mt->max_tag) {
        error_set(err, "message of %zu bytes, tag %d exceeds the transport's %zu bytes, %d tags", bytes, tag,
                  mt->max_bytes, mt->max_tag);
        return TRANSPORT_FAILED;
    }
    TransportStatus st = refuse_if_aborted(mt, "sending", err);
    SendSlot *slot = NULL;
    if (st == TRANSPORT_OK) st = free_send_slot(mt, &slot, err);
    if (st != TRANSPORT_OK) return st;
    memcpy(slot->data, data, bytes);
    int rc = MPI_Isend(slot->data, (int)bytes, MPI_BYTE, to % mt->P, tag, mt->pipe, &slot->req);
    return rc == MPI_SUCCESS ? TRANSPORT_OK : mpi_call_failed(rc, "MPI_Isend", err);
}

static TransportStatus transport_mpi_post(Transport *t, int self, int from, int tag, size_t bytes, Error *err) {
    MpiTransport *mt = as_mpi(t);
    (void)self, (void)bytes;
    RecvSlot *slot = NULL;
    for (int i = 0; i < mt->capacity && !slot; i++)
        if (!mt->recvs[i].posted) slot = &mt->recvs[i];
    if (!slot) {
        error_set(err, "more than %d receives pending", mt->capacity);
        return TRANSPORT_FAILED;
    }
    // Room for max_bytes: a longer message than announced then shows up as a size mismatch.
    int rc = MPI_Irecv(slot->data, (int)mt->max_bytes, MPI_BYTE, from % mt->P, tag, mt->pipe, &slot->req);
    if (rc != MPI_SUCCESS) return mpi_call_failed(rc, "MPI_Irecv", err);
    *slot = (RecvSlot){.req = slot->req, .posted = true, .from = from % mt->P, .tag = tag,
                       .order = mt->n_posted++, .data = slot->data};
    return TRANSPORT_OK;
}

static RecvSlot *find_posted(MpiTransport *mt, int from, int tag) {
    RecvSlot *best = NULL;
    for (int i = 0; i < mt->capacity; i++) {
        RecvSlot *s = &mt->recvs[i];
        if (s->posted && s->from == from && s->tag == tag && (!best || s->order < best->order)) best = s;
    }
    return best;
}

static TransportStatus transport_mpi_recv(Transport *t, int self, int from, int tag, void *data, size_t bytes,
                                          Error *err) {
    MpiTransport *mt = as_mpi(t);
    RecvSlot *slot = find_posted(mt, from % mt->P, tag);
    if (!slot) {  // not announced: post it now
        TransportStatus st = transport_mpi_post(t, self, from, tag, bytes, err);
        if (st != TRANSPORT_OK) return st;
        slot = find_posted(mt, from % mt->P, tag);
    }
    mt->base.wait = (TransportWait){.what = WAIT_RECV, .peer = from, .tag = tag};
    MPI_Status status;
    TransportStatus st = wait_request(mt, &slot->req, &status, "waiting", from, err);
    mt->base.wait.what = WAIT_NONE;
    if (st != TRANSPORT_OK) return st;
    slot->posted = false;
    int count = 0, rc = MPI_Get_count(&status, MPI_BYTE, &count);
    if (rc != MPI_SUCCESS) return mpi_call_failed(rc, "MPI_Get_count", err);
    if ((size_t)count != bytes) {
        error_set(err, "message from rank %d has %d bytes, expected %zu", from, count, bytes);
        return TRANSPORT_FAILED;
    }
    memcpy(data, slot->data, bytes);
    return TRANSPORT_OK;
}

// ---- collectives ---------------------------------------------------------------------------

static TransportStatus wait_collective(MpiTransport *mt, Error *err) {
    mt->base.wait.what = WAIT_COLLECTIVE;
    TransportStatus st = wait_request(mt, &mt->coll_req, MPI_STATUS_IGNORE, "in a collective", PROGRESS_GROUP, err);
    mt->base.wait.what = WAIT_NONE;
    return st;
}

static TransportStatus mpi_allreduce(MpiTransport *mt, TransportGroup g, void *buf, size_t n, MPI_Datatype type,
                                     Error *err) {
    MPI_Comm comm = g == GROUP_WORLD ? mt->world : mt->replicas;
    const int size = g == GROUP_WORLD ? mt->P * mt->D : mt->D;
    if (size == 1 || n == 0) return TRANSPORT_OK;
    if (n > INT_MAX) {
        error_set(err, "all-reduce of %zu elements exceeds MPI's int count", n);
        return TRANSPORT_FAILED;
    }
    TransportStatus st = refuse_if_aborted(mt, "in a collective", err);
    if (st != TRANSPORT_OK) return st;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, type, MPI_SUM, comm, &mt->coll_req);
    if (rc != MPI_SUCCESS) return mpi_call_failed(rc, "MPI_Iallreduce", err);
    return wait_collective(mt, err);
}

// Replica gradients, D >= 3: MPI's sum may associate (a + b) + (c + d), and which way can
// change with the message size, so the sum is made here in replica order, as the local
// transport and the single-device reference make it (DESIGN.md "Parity"). Replica k owns
// elements [n*k/D, n*(k+1)/D): an all-to-all brings it every replica's copy of its chunk, it
// adds them as ((x0 + x1) + x2) + ..., and an all-gather hands the sums back. Same bytes on the
// wire as a ring all-reduce. (For D = 2, a + b = b + a: MPI's sum is used.)
static TransportStatus ordered_allreduce_f32(MpiTransport *mt, float *buf, size_t n, Error *err) {
    const int D = mt->D;
    int me = 0;
    MPI_Comm_rank(mt->replicas, &me);
    int counts[D], displs[D], mine_counts[D], mine_displs[D];
    for (int k = 0; k < D; k++) {
        displs[k] = (int)(n * (size_t)k / (size_t)D);
        counts[k] = (int)(n * (size_t)(k + 1) / (size_t)D) - displs[k];
    }
    const int chunk = counts[me];
    if ((size_t)D * (size_t)chunk > mt->fold_cap) {
        free(mt->fold);
        mt->fold_cap = (size_t)D * (size_t)chunk;
        mt->fold = xmalloc(mt->fold_cap * sizeof(float));
    }
    for (int k = 0; k < D; k++) mine_counts[k] = chunk, mine_displs[k] = k * chunk;
    int rc = MPI_Ialltoallv(buf, counts, displs, MPI_FLOAT, mt->fold, mine_counts, mine_displs, MPI_FLOAT,
                            mt->replicas, &mt->coll_req);
    if (rc != MPI_SUCCESS) return mpi_call_failed(rc, "MPI_Ialltoallv", err);
    TransportStatus st = wait_collective(mt, err);
    if (st != TRANSPORT_OK) return st;
    float *sum = buf + displs[me];
    for (int i = 0; i < chunk; i++) {
        float x = mt->fold[i];
        for (int k = 1; k < D; k++) x += mt->fold[(size_t)k * chunk + i];
        sum[i] = x;
    }
    rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT, mt->replicas,
                         &mt->coll_req);
    if (rc != MPI_SUCCESS) return mpi_call_failed(rc, "MPI_Iallgatherv", err);
    return wait_collective(mt, err);
}

static TransportStatus transport_mpi_allreduce_f32(Transport *t, int self, TransportGroup g, float *buf, size_t n,
                                                   Error *err) {
    (void)self;
    MpiTransport *mt = as_mpi(t);
    if (g == GROUP_REPLICAS && mt->D > 2 && n > 0) {
        if (n > INT_MAX) {
            error_set(err, "all-reduce of %zu elements exceeds MPI's int count", n);
            return TRANSPORT_FAILED;
        }
        TransportStatus st = refuse_if_aborted(mt, "in a collective", err);
        return st != TRANSPORT_OK ? st : ordered_allreduce_f32(mt, buf, n, err);
    }
    return mpi_allreduce(mt, g, buf, n, MPI_FLOAT, err);
}

static TransportStatus transport_mpi_allreduce_f64(Transport *t, int self, TransportGroup g, double *buf, size_t n,
                                                   Error *err) {
    (void)self;
    return mpi_allreduce(as_mpi(t), g, buf, n, MPI_DOUBLE, err);
}

// One blocking-with-timeout message on the world communicator (clock ping-pong).
static TransportStatus world_msg(MpiTransport *mt, bool send, double *value, int peer, Error *err) {
    MPI_Request req;
    int rc = send ? MPI_Isend(value, 1, MPI_DOUBLE, peer, TAG_CLOCK, mt->world, &req)
                  : MPI_Irecv(value, 1, MPI_DOUBLE, peer, TAG_CLOCK, mt->world, &req);
    if (rc != MPI_SUCCESS) return mpi_call_failed(rc, send ? "MPI_Isend" : "MPI_Irecv", err);
    return wait_request(mt, &req, MPI_STATUS_IGNORE, "in the clock ping-pong", PROGRESS_GROUP, err);
}

// Rank 0 pings rank r; r answers with its clock. Of a few rounds the one with the shortest
// round trip bounds the error best: offset = rank 0's midpoint - r's reading.
static TransportStatus clock_ping(MpiTransport *mt, int r, double *offset, Error *err) {
    double best_rtt = 1e30;
    for (int k = 0; k < CLOCK_ROUNDS; k++) {
        double t1 = notices_now_s(), tr = 0.0;
        TransportStatus st = world_msg(mt, true, &t1, r, err);
        if (st == TRANSPORT_OK) st = world_msg(mt, false, &tr, r, err);
        if (st != TRANSPORT_OK) return st;
        const double t2 = notices_now_s();
        if (t2 - t1 < best_rtt) {
            best_rtt = t2 - t1;
            *offset = 0.5 * (t1 + t2) - tr;
        }
    }
    return TRANSPORT_OK;
}

static TransportStatus clock_pong(MpiTransport *mt, Error *err) {
    for (int k = 0; k < CLOCK_ROUNDS; k++) {
        double ping = 0.0;
        TransportStatus st = world_msg(mt, false, &ping, 0, err);
        double mine = notices_now_s();
        if (st == TRANSPORT_OK) st = world_msg(mt, true, &mine, 0, err);
        if (st != TRANSPORT_OK) return st;
    }
    return TRANSPORT_OK;
}

static TransportStatus transport_mpi_clock_offsets(Transport *t, int self, double *offsets, Error *err) {
    MpiTransport *mt = as_mpi(t);
    (void)self;
    const int W = t->n_ranks;
    for (int r = 0; r < W; r++) offsets[r] = 0.0;
    TransportStatus st = TRANSPORT_OK;
    if (mt->rank == 0)
        for (int r = 1; r < W && st == TRANSPORT_OK; r++) st = clock_ping(mt, r, &offsets[r], err);
    else
        st = clock_pong(mt, err);
    // Everyone learns every offset (only rank 0's entries are non-zero, so the sum is exact).
    return st == TRANSPORT_OK ? mpi_allreduce(mt, GROUP_WORLD, offsets, (size_t)W, MPI_DOUBLE, err) : st;
}

static TransportStatus transport_mpi_gather_bytes(Transport *t, int self, const void *mine, size_t bytes, void *all,
                                                  size_t cap, size_t *counts, Error *err) {
    MpiTransport *mt = as_mpi(t);
    (void)self;
    const int W = t->n_ranks;
    if (bytes > cap || cap > INT_MAX / (size_t)W) {
        error_set(err, "gather of %zu bytes per rank (at most %zu) does not fit", bytes, cap);
        return TRANSPORT_FAILED;
    }
    int n = (int)bytes, *ns = mt->rank == 0 ? xmalloc(sizeof(int) * 2 * (size_t)W) : NULL;
    int rc = MPI_Igather(&n, 1, MPI_INT, ns, 1, MPI_INT, 0, mt->world, &mt->coll_req);
    TransportStatus st = rc == MPI_SUCCESS ? wait_collective(mt, err) : mpi_call_failed(rc, "MPI_Igather", err);
    int *displs = ns ? ns + W : NULL;
    for (int r = 0; ns && r < W; r++) displs[r] = r * (int)cap;
    if (st == TRANSPORT_OK) {
        rc = MPI_Igatherv(mine, n, MPI_BYTE, all, ns, displs, MPI_BYTE, 0, mt->world, &mt->coll_req);
        st = rc == MPI_SUCCESS ? wait_collective(mt, err) : mpi_call_failed(rc, "MPI_Igatherv", err);
    }
    for (int r = 0; ns && r < W; r++) counts[r] = (size_t)ns[r];
    free(ns);
    return st;
}

// ---- abort and free ------------------------------------------------------------------------

// Tells every other rank, without waiting for anyone (the notices are tiny, sent eagerly).
// Best effort: a notice that cannot be sent leaves that rank to its own timeout.
// This rank gave up first: it is never the culprit, and its slot stays as the failure found it.
static void transport_mpi_abort(Transport *t) {
    MpiTransport *mt = as_mpi(t);
    progress_gave_up(t->board, mt->rank);
    progress_end(t->board);
    abort_notices_send(&mt->notices);
}

// After a failure some requests may never complete and MPI could still write into their
// buffers: no more MPI calls; the process is about to exit. Kept reachable from here so leak
// checkers do not flag what is deliberately left.
static MpiTransport *transport_mpi_abandoned;

static void transport_mpi_free(Transport *t) {
    MpiTransport *mt = as_mpi(t);
    if (mt->notices.aborted) {
        mt->base.wait.what = WAIT_NONE;
        transport_mpi_abandoned = mt;
        return;
    }
    for (int i = 0; i < mt->capacity; i++) {
        if (mt->recvs[i].posted) {
            MPI_Cancel(&mt->recvs[i].req);
            MPI_Wait(&mt->recvs[i].req, MPI_STATUS_IGNORE);
        }
        if (mt->sends[i].req != MPI_REQUEST_NULL) MPI_Wait(&mt->sends[i].req, MPI_STATUS_IGNORE);
        free(mt->sends[i].data);
        free(mt->recvs[i].data);
    }
    MPI_Win_unlock_all(mt->board_win);
    MPI_Win_free(&mt->board_win);
    MPI_Comm_free(&mt->node);
    progress_board_free(mt->base.board);
    MPI_Comm_free(&mt->pipe);
    MPI_Comm_free(&mt->replicas);
    MPI_Comm_free(&mt->world);
    abort_notices_free(&mt->notices);
    free(mt->sends);
    free(mt->fold);
    free(mt->recvs);
    free(mt);
}

static const TransportOps MPI_OPS = {
    .send = transport_mpi_send,
    .post = transport_mpi_post,
    .recv = transport_mpi_recv,
    .allreduce_f32 = transport_mpi_allreduce_f32,
    .allreduce_f64 = transport_mpi_allreduce_f64,
    .clock_offsets = transport_mpi_clock_offsets,
    .gather_bytes = transport_mpi_gather_bytes,
    .abort = transport_mpi_abort,
    .free = transport_mpi_free,
};

// ---- create --------------------------------------------------------------------------------

// The run's communicator split three ways and duplicated once (see the top of the file).
static int make_comms(MpiTransport *mt, MPI_Comm run, Error *err) {
    const int d = mt->rank / mt->P, p = mt->rank % mt->P;
    int rc = MPI_Comm_dup(run, &mt->world);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(mt->world, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_split(mt->world, d, p, &mt->pipe);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_split(mt->world, p, d, &mt->replicas);
    if (rc != MPI_SUCCESS) {  // the derived communicators inherit MPI_ERRORS_RETURN
        mpi_call_failed(rc, "creating the communicators", err);
        return -1;
    }
    return abort_notices_init(&mt->notices, mt->world, err);
}

// The progress board: one slot per rank in a window shared by the ranks of this node; slots of
// ranks on other nodes stay NULL (unreadable). A shared passive epoch stays open for the run.
static int make_board(MpiTransport *mt, Error *err) {
    const int W = mt->P * mt->D;
    ProgressSlot *mine = NULL;
    int rc = MPI_Comm_split_type(mt->world, MPI_COMM_TYPE_SHARED, mt->rank, MPI_INFO_NULL, &mt->node);
    if (rc == MPI_SUCCESS)
        rc = MPI_Win_allocate_shared(sizeof(ProgressSlot), 1, MPI_INFO_NULL, mt->node, &mine, &mt->board_win);
    if (rc == MPI_SUCCESS) rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, mt->board_win);
    if (rc != MPI_SUCCESS) {
        mpi_call_failed(rc, "creating the progress window", err);
        return -1;
    }
    progress_slot_init(mine);
    int n_node = 0;
    MPI_Comm_size(mt->node, &n_node);
    MPI_Group node_group, world_group;
    MPI_Comm_group(mt->node, &node_group);
    MPI_Comm_group(mt->world, &world_group);
    ProgressSlot **slots = xcalloc((size_t)W, sizeof *slots);
    for (int q = 0; q < n_node && rc == MPI_SUCCESS; q++) {
        MPI_Aint size = 0;
        int disp = 0, world = MPI_UNDEFINED;
        ProgressSlot *slot = NULL;
        rc = MPI_Win_shared_query(mt->board_win, q, &size, &disp, &slot);
        if (rc == MPI_SUCCESS) rc = MPI_Group_translate_ranks(node_group, 1, &q, world_group, &world);
        if (rc == MPI_SUCCESS && world >= 0 && world < W) slots[world] = slot;
    }
    MPI_Group_free(&node_group);
    MPI_Group_free(&world_group);
    // Every slot is initialized before anyone may read it.
    if (rc == MPI_SUCCESS) rc = MPI_Barrier(mt->node);
    if (rc != MPI_SUCCESS) {
        free(slots);
        mpi_call_failed(rc, "reading the progress window", err);
        return -1;
    }
    mt->base.board = progress_board_wrap(W, slots);
    return 0;
}

// The run's world: its size must be P x D; tags must fit under MPI_TAG_UB.
static int check_world(MPI_Comm run, int P, int D, int max_tag, int *rank, Error *err) {
    int size = 0, rc = MPI_Comm_size(run, &size);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(run, rank);
    if (rc != MPI_SUCCESS) {
        mpi_call_failed(rc, "MPI_Comm_size", err);
        return -1;
    }
    if (size != P * D) {
        error_set(err, "mpirun started %d ranks but --stages %d x --dp %d needs %d", size, P, D, P * D);
        return -1;
    }
    int *tag_ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
    const int ub = flag && tag_ub ? *tag_ub : 32767;
    if (max_tag - 1 > ub) {
        error_set(err, "the run needs %d message tags, MPI offers %d (fewer --microbatches or stages)", max_tag, ub);
        return -1;
    }
    return 0;
}

Transport *transport_mpi_create(const void *comm, int P, int D, size_t max_bytes, int capacity, int max_tag,
                                double timeout_s, Error *err) {
    MPI_Comm run = comm ? *(const MPI_Comm *)comm : MPI_COMM_WORLD;
    int rank = 0;
    if (check_world(run, P, D, max_tag, &rank, err)) return NULL;
    if (max_bytes > INT_MAX) {
        error_set(err, "messages of %zu bytes exceed MPI's int count", max_bytes);
        return NULL;
    }
    MpiTransport *mt = xcalloc(1, sizeof *mt);
    mt->base = (Transport){.ops = &MPI_OPS, .n_ranks = P * D, .n_pipe = P, .timeout_s = timeout_s};
    *mt = (MpiTransport){.base = mt->base, .rank = rank, .P = P, .D = D, .max_bytes = max_bytes ? max_bytes : 1,
                         .capacity = capacity > 0 ? capacity : 1, .max_tag = max_tag, .coll_req = MPI_REQUEST_NULL};
    if (make_comms(mt, run, err) || make_board(mt, err)) {
        free(mt);
        return NULL;
    }
    mt->sends = xcalloc((size_t)mt->capacity, sizeof(SendSlot));
    mt->recvs = xcalloc((size_t)mt->capacity, sizeof(RecvSlot));
    for (int i = 0; i < mt->capacity; i++) {
        mt->sends[i] = (SendSlot){.req = MPI_REQUEST_NULL, .data = xmalloc(mt->max_bytes)};
        mt->recvs[i] = (RecvSlot){.req = MPI_REQUEST_NULL, .data = xmalloc(mt->max_bytes)};
    }
    return &mt->base;
}

int transport_mpi_rank(const Transport *t) { return ((const MpiTransport *)t)->rank; }
