// The NCCL transport: this process is one rank of an mpirun job of P x D ranks, on one GPU.
//
// Communicators, all made once at create:
//   world     ncclCommInitRank over all W ranks (id from rank 0, broadcast with MPI); the
//             parent of the others, and GROUP_WORLD's all-reduce
//   links     one 2-rank communicator per replica per EDGE of the stage graph that crosses
//             ranks: stage s's activations to s+1, its gradients to s-1 (a message's tag
//             names its edge: transport_tag). The sender is its rank 0, the receiver rank 1
//   replicas  split by pipeline rank: the D ranks holding the same stages (GROUP_REPLICAS)
//   ctl       an inner MPI transport: allreduce_f64, clock_offsets, gather_bytes
//   ctrl      an MPI duplicate of the run's communicator: only this transport's abort notices
// Why a communicator per edge: NCCL runs the operations of one communicator in the order they
// were issued, matches the k-th send with the k-th receive (no tags), and a receive posted
// ahead waits on the GPU until its sender gets there. On a shared communicator that receive
// would hold up every later operation, those of the other direction and of other peers
// included, and two ranks could wait on each other; even one communicator per pair of ranks
// mixes two edges whose messages interleave differently at the two ends (zb-v's rank 0 sends
// stage 0's activations and stage 11's gradients to rank 1). With its own communicator and
// its own stream at each end, a posted receive only holds up later messages of its own edge,
// which come after it anyway: the caller checks that every edge receives in the order it
// sends (schedule_check_fifo).
// Sends copy the caller's device buffer into a preallocated device buffer (copy stream), and
// ncclSend from it on the pair's stream once an event says the copy is done: the sender never
// waits for the receiver unless every send buffer is still in flight. Receives are posted
// ahead, one at a time by the runtime (RuntimeOptions.post_one_ahead: a posted receive spins
// on the GPU) (post: ncclRecv into a preallocated device buffer, event recorded) and completed by
// recv, which waits for the event and queues the copy out. The caller's buffers (messages, a
// stage's gradients) pass between its stage's stream and this transport's streams by events
// (engine/model/cuda_handoff.h): no host sync in a step. Every wait polls its event, the communicator's async
// error, an abort notice and the deadline, sleeping 1 us doubling to 200 us in between:
// nothing blocks inside NCCL during a step, so no rank can hang.
#include <assert.h>
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/model/cuda_handoff.h"
#include "engine/transport/mpi_notices.h"
#include "engine/transport/mpi_process.h"
#include "engine/transport/transport_nccl.h"
#include "kernels/cuda/cuda_check.h"

enum { SLOT_ALIGN = 256 };  // SLOT_ALIGN: bytes, every device buffer starts aligned

typedef struct {
    ncclComm_t comm;      // 2 ranks: sender 0, receiver 1; NULL where this rank is neither end
    cudaStream_t stream;  // this end's stream for the edge (non-blocking)
    int from, to;         // the pipeline ranks of its sender and receiver
} Link;

typedef struct {
    unsigned char *data;  // device (max_bytes)
    cudaEvent_t copied;   // recorded after the copy into data (the send's stream waits for it)
    cudaEvent_t done;     // recorded after the ncclSend reading data
    bool busy;            // a send from data may still be in flight
    ncclComm_t comm;      // that send's communicator, for its async errors
    int to;               // its receiver (world rank), for messages
    unsigned long order;  // send order: when every buffer is busy the oldest is waited for
} SendSlot;

typedef struct {
    unsigned char *data;  // device (max_bytes)
    cudaEvent_t copied;   // recorded after the copy out of data (the next receive waits for it)
    cudaEvent_t done;     // recorded after the ncclRecv writing data
    bool posted;
    int from, tag;        // world rank of the sender, message tag
    size_t bytes;         // the posted count: the sender's must be the same
    ncclComm_t comm;
    unsigned long order;  // post order, so equal (from, tag) complete first-posted first
} RecvSlot;

typedef struct {
    Transport base;
    Transport *ctl;            // inner MPI transport
    AbortNotices notices;      // ctrl: abort notices only (and the NCCL id's broadcast)
    int rank, P, D;            // world rank; the layout (world size P * D)
    size_t max_bytes;
    int capacity, max_tag;
    ncclComm_t world;
    ncclComm_t replicas;       // NULL when D == 1
    int S;                     // stages: a tag's edge is tag % (2 * S) (transport_tag)
    Link *links;               // (2 * S) links[stage * 2 + kind]: this replica's edges
    cudaStream_t copy;         // only copies in and out of the buffers (each one waited for)
    cudaStream_t coll;         // all-reduces on world and replicas
    cudaEvent_t coll_done;
    unsigned char *buffers;    // one allocation: (2 * capacity) buffers of slot_bytes
    SendSlot *sends;           // (capacity)
    RecvSlot *recvs;           // (capacity)
    unsigned long n_sent, n_posted;
    bool failed;               // a wait or check failed: free aborts the communicators
    bool cuda_failed;          // a CUDA error surfaced in a wait: the context may be unusable
} NcclTransport;

static NcclTransport *as_nccl(Transport *t) { return (NcclTransport *)t; }

// ---- waiting -------------------------------------------------------------------------------

// True once an abort notice arrived (or this rank aborted).
static bool poll_abort(NcclTransport *nt) { return abort_notices_poll(&nt->notices); }

// Why this rank stops: "rank 3 failed" once that rank's notice named it, else "another rank
// failed".
static const char *who_failed(const NcclTransport *nt, char *buf, size_t size) {
    if (nt->notices.from < 0) return "another rank failed";
    snprintf(buf, size, "rank %d failed", nt->notices.from);
    return buf;
}

// What a wait waits for, for its error line: "waiting for rank 2", "in a collective".
static void describe(char *out, size_t n, const char *what, int peer) {
    if (peer >= 0)
        snprintf(out, n, "%s rank %d", what, peer);
    else
        snprintf(out, n, "%s", what);
}

// One look at ev: *done once it completed. A real CUDA error, or an async error of comm (a
// peer that failed inside NCCL), fails the wait with one line.
static TransportStatus poll_event(NcclTransport *nt, cudaEvent_t ev, ncclComm_t comm, bool *done, const char *what,
                                  int peer, Error *err) {
    char who[96];
    const cudaError_t ce = cudaEventQuery(ev);
    *done = ce == cudaSuccess;
    if (*done) return TRANSPORT_OK;
    if (ce != cudaErrorNotReady) {
        describe(who, sizeof who, what, peer);
        error_set(err, "CUDA error: %s (%s) while %s", cudaGetErrorString(ce), cudaGetErrorName(ce), who);
        nt->failed = nt->cuda_failed = true;
        return TRANSPORT_FAILED;
    }
    // Not ready is no error; clear it so no later checked call reports it.
    (void)cudaGetLastError();
    ncclResult_t async = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(comm, &async);
    if (rc != ncclSuccess) async = rc;
    if (async == ncclSuccess || async == ncclInProgress) return TRANSPORT_OK;
    describe(who, sizeof who, what, peer);
    const char *detail = ncclGetLastError(comm);
    error_set(err, "NCCL error: %s (%s) while %s", ncclGetErrorString(async), detail && *detail ? detail : "no detail",
              who);
    nt->failed = true;
    return TRANSPORT_FAILED;
}

// Polls ev to completion, an error of comm, an abort notice or the timeout. what + peer name
// the wait: "timed out after 300 s waiting for rank 2", "aborted (another rank failed) while
// in a collective".
static TransportStatus wait_event(NcclTransport *nt, cudaEvent_t ev, ncclComm_t comm, const char *what, int peer,
                                  Error *err) {
    const double deadline = notices_now_s() + nt->base.timeout_s;
    long ns = 1000;
    char who[96];
    for (;;) {
        bool done = false;
        TransportStatus st = poll_event(nt, ev, comm, &done, what, peer, err);
        if (st != TRANSPORT_OK || done) return st;
        if (poll_abort(nt)) {
            char failed[32];
            describe(who, sizeof who, what, peer);
            error_set(err, "aborted (%s) while %s", who_failed(nt, failed, sizeof failed), who);
            return TRANSPORT_ABORTED;
        }
        if (notices_now_s() > deadline) {
            describe(who, sizeof who, what, peer);
            error_set(err, "timed out after %g s %s", nt->base.timeout_s, who);
            nt->failed = true;
            return TRANSPORT_FAILED;
        }
        notices_backoff(&ns);
    }
}

static TransportStatus refuse_if_aborted(NcclTransport *nt, const char *what, Error *err) {
    if (!poll_abort(nt)) return TRANSPORT_OK;
    char failed[32];
    error_set(err, "aborted (%s) while %s", who_failed(nt, failed, sizeof failed), what);
    return TRANSPORT_ABORTED;
}

// ---- point to point ------------------------------------------------------------------------

// The link of the edge a message's tag names, between world ranks from and to; NULL (with
// err) when the stage graph has no such edge between their pipeline ranks.
static Link *link_of(NcclTransport *nt, int tag, int from, int to, Error *err) {
    Link *l = &nt->links[tag % (2 * nt->S)];
    if (l->comm && l->from == from % nt->P && l->to == to % nt->P) return l;
    error_set(err, "message %d from rank %d to rank %d is on no edge of the stage graph", tag, from, to);
    nt->failed = true;
    return NULL;
}

// A free send buffer: any whose send finished; when all are in flight waits for the oldest.
static TransportStatus free_send_slot(NcclTransport *nt, SendSlot **slot, Error *err) {
    static const char what[] = "waiting for a send buffer, still sending to";
    SendSlot *oldest = NULL;
    for (int i = 0; i < nt->capacity; i++) {
        SendSlot *s = &nt->sends[i];
        bool done = !s->busy;
        if (!done) {
            TransportStatus st = poll_event(nt, s->done, s->comm, &done, what, s->to, err);
            if (st != TRANSPORT_OK) return st;
        }
        if (done) {
            s->busy = false;
            *slot = s;
            return TRANSPORT_OK;
        }
        if (!oldest || s->order < oldest->order) oldest = s;
    }
    assert(oldest);  // capacity >= 1
    TransportStatus st = wait_event(nt, oldest->done, oldest->comm, what, oldest->to, err);
    if (st != TRANSPORT_OK) return st;
    oldest->busy = false;
    *slot = oldest;
    return TRANSPORT_OK;
}

// from, to: world ranks of one replica (the view adds the replica's offset).
static TransportStatus transport_nccl_send(Transport *t, int from, int to, int tag, const void *data, size_t bytes,
                                           Error *err) {
    NcclTransport *nt = as_nccl(t);
    assert(from == nt->rank && to / nt->P == nt->rank / nt->P);
    if (bytes > nt->max_bytes || tag < 0 || tag >= nt->max_tag) {
        error_set(err, "message of %zu bytes, tag %d exceeds the transport's %zu bytes, %d tags", bytes, tag,
                  nt->max_bytes, nt->max_tag);
        return TRANSPORT_FAILED;
    }
    Link *l = link_of(nt, tag, from, to, err);
    if (!l) return TRANSPORT_FAILED;
    TransportStatus st = refuse_if_aborted(nt, "sending", err);
    SendSlot *slot = NULL;
    if (st == TRANSPORT_OK) st = free_send_slot(nt, &slot, err);
    if (st != TRANSPORT_OK) return st;
    // data is the caller's message: copied after whatever wrote it, before it is written again
    // (cuda_handoff.h); the send after the copy, by an event: the host waits for neither.
    REQUIRED_WAIT(1, cuda_handoff_acquire(data, nt->copy));
    CUDA_CHECK(cudaMemcpyAsync(slot->data, data, bytes, cudaMemcpyDeviceToDevice, nt->copy));
    cuda_handoff_release(data, nt->copy);
    CUDA_CHECK(cudaEventRecord(slot->copied, nt->copy));
    REQUIRED_WAIT(2, CUDA_CHECK(cudaStreamWaitEvent(l->stream, slot->copied, 0)));
    NCCL_CHECK(ncclSend(slot->data, bytes, ncclUint8, 1, l->comm, l->stream));
    CUDA_CHECK(cudaEventRecord(slot->done, l->stream));
    *slot = (SendSlot){.data = slot->data, .copied = slot->copied, .done = slot->done, .busy = true,
                       .comm = l->comm, .to = to, .order = nt->n_sent++};
    return TRANSPORT_OK;
}

// Enqueues the receive of (from, tag): NCCL gives it the next message of the tag's edge, so
// posts must come in the order of this rank's receives on that edge.
static TransportStatus transport_nccl_post(Transport *t, int self, int from, int tag, size_t bytes, Error *err) {
    NcclTransport *nt = as_nccl(t);
    assert(self == nt->rank && from / nt->P == nt->rank / nt->P);
    if (bytes > nt->max_bytes) {
        error_set(err, "message of %zu bytes from rank %d exceeds the transport's %zu bytes", bytes, from,
                  nt->max_bytes);
        return TRANSPORT_FAILED;
    }
    Link *l = link_of(nt, tag, from, self, err);
    if (!l) return TRANSPORT_FAILED;
    TransportStatus st = refuse_if_aborted(nt, "receiving", err);
    if (st != TRANSPORT_OK) return st;
    RecvSlot *slot = NULL;
    for (int i = 0; i < nt->capacity && !slot; i++)
        if (!nt->recvs[i].posted) slot = &nt->recvs[i];
    if (!slot) {
        error_set(err, "more than %d receives pending", nt->capacity);
        return TRANSPORT_FAILED;
    }
    // The slot's last message may still be on its way out (recv's copy): received over after it.
    CUDA_CHECK(cudaStreamWaitEvent(l->stream, slot->copied, 0));
    NCCL_CHECK(ncclRecv(slot->data, bytes, ncclUint8, 0, l->comm, l->stream));
    CUDA_CHECK(cudaEventRecord(slot->done, l->stream));
    *slot = (RecvSlot){.data = slot->data, .copied = slot->copied, .done = slot->done, .posted = true,
                       .from = from, .tag = tag, .bytes = bytes, .comm = l->comm, .order = nt->n_posted++};
    return TRANSPORT_OK;
}

static RecvSlot *find_posted(NcclTransport *nt, int from, int tag) {
    RecvSlot *best = NULL;
    for (int i = 0; i < nt->capacity; i++) {
        RecvSlot *s = &nt->recvs[i];
        if (s->posted && s->from == from && s->tag == tag && (!best || s->order < best->order)) best = s;
    }
    return best;
}

static TransportStatus transport_nccl_recv(Transport *t, int self, int from, int tag, void *data, size_t bytes,
                                           Error *err) {
    NcclTransport *nt = as_nccl(t);
    assert(self == nt->rank && from / nt->P == nt->rank / nt->P);
    RecvSlot *slot = find_posted(nt, from, tag);
    if (!slot) {  // not announced: post it now
        TransportStatus st = transport_nccl_post(t, self, from, tag, bytes, err);
        if (st != TRANSPORT_OK) return st;
        slot = find_posted(nt, from, tag);
    }
    if (slot->bytes != bytes) {  // the posted receive takes slot->bytes: this rank's sizes disagree
        error_set(err, "message from rank %d, tag %d was posted for %zu bytes, received as %zu", from, tag,
                  slot->bytes, bytes);
        nt->failed = true;
        return TRANSPORT_FAILED;
    }
    nt->base.wait = (TransportWait){.what = WAIT_RECV, .peer = from, .tag = tag};
    TransportStatus st = wait_event(nt, slot->done, slot->comm, "waiting for", from, err);
    nt->base.wait.what = WAIT_NONE;
    if (st != TRANSPORT_OK) return st;
    // Into the caller's message, after its last access; the caller's stream takes it over from
    // here (cuda_handoff.h) and the slot's next receive waits for `copied` (post).
    cuda_handoff_acquire(data, nt->copy);
    CUDA_CHECK(cudaMemcpyAsync(data, slot->data, bytes, cudaMemcpyDeviceToDevice, nt->copy));
    cuda_handoff_release(data, nt->copy);
    CUDA_CHECK(cudaEventRecord(slot->copied, nt->copy));
    slot->posted = false;
    return TRANSPORT_OK;
}

// ---- collectives ---------------------------------------------------------------------------

// In place on the group's communicator; the sum is NCCL's (its algorithm's order).
static TransportStatus transport_nccl_allreduce_f32(Transport *t, int self, TransportGroup g, float *buf, size_t n,
                                                    Error *err) {
    NcclTransport *nt = as_nccl(t);
    (void)self;
    const int size = g == GROUP_WORLD ? nt->P * nt->D : nt->D;
    if (size == 1 || n == 0) return TRANSPORT_OK;
    ncclComm_t comm = g == GROUP_WORLD ? nt->world : nt->replicas;
    TransportStatus st = refuse_if_aborted(nt, "in a collective", err);
    if (st != TRANSPORT_OK) return st;
    REQUIRED_WAIT(6, cuda_handoff_acquire(buf, nt->coll));   // buf: a stage's gradients (reduce_begin)
    NCCL_CHECK(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, nt->coll));
    cuda_handoff_release(buf, nt->coll);
    CUDA_CHECK(cudaEventRecord(nt->coll_done, nt->coll));
    nt->base.wait.what = WAIT_COLLECTIVE;
    st = wait_event(nt, nt->coll_done, comm, "in a collective", -1, err);
    nt->base.wait.what = WAIT_NONE;
    return st;
}

// The host collectives run on the inner MPI transport; this rank's wait shows them too.
static TransportStatus ctl_done(NcclTransport *nt, TransportStatus st) {
    nt->base.wait.what = WAIT_NONE;
    if (st == TRANSPORT_FAILED) nt->failed = true;
    if (st == TRANSPORT_ABORTED) nt->notices.aborted = true;
    return st;
}

static TransportStatus transport_nccl_allreduce_f64(Transport *t, int self, TransportGroup g, double *buf, size_t n,
                                                    Error *err) {
    NcclTransport *nt = as_nccl(t);
    nt->base.wait.what = WAIT_COLLECTIVE;
    return ctl_done(nt, transport_allreduce_f64(nt->ctl, self, g, buf, n, err));
}

static TransportStatus transport_nccl_clock_offsets(Transport *t, int self, double *offsets, Error *err) {
    NcclTransport *nt = as_nccl(t);
    nt->base.wait.what = WAIT_COLLECTIVE;
    return ctl_done(nt, transport_clock_offsets(nt->ctl, self, offsets, err));
}

static TransportStatus transport_nccl_gather_bytes(Transport *t, int self, const void *mine, size_t bytes,
                                                   void *all, size_t cap, size_t *counts, Error *err) {
    NcclTransport *nt = as_nccl(t);
    nt->base.wait.what = WAIT_COLLECTIVE;
    return ctl_done(nt, transport_gather_bytes(nt->ctl, self, mine, bytes, all, cap, counts, err));
}

// ---- abort and free ------------------------------------------------------------------------

// Tells every other rank on ctrl without waiting for anyone (best effort, as the MPI
// transport does), then aborts ctl, whose own notices wake the ranks in host collectives.
static void transport_nccl_abort(Transport *t) {
    NcclTransport *nt = as_nccl(t);
    abort_notices_send(&nt->notices);
    transport_abort(nt->ctl);
}

// A checked CUDA or NCCL call of this rank failed and the process is about to exit
// (cuda_check_fail): every other rank hears it now, by the abort notices, and stops naming
// this rank instead of waiting out --timeout. No finalize at exit (the others will not come to
// it), and rank 0 gets its grace to report first (mpi_process_failed).
static void nccl_last_words(void *arg) {
    NcclTransport *nt = arg;
    mpi_process_failed();
    transport_nccl_abort(&nt->base);
    abort_notices_flush(&nt->notices, 1.0);
}

// After a CUDA error the context may refuse every further call, and after an abort the
// notices' sends may never complete: what they hold is left to the exit. Kept reachable from
// here so leak checkers do not flag what is deliberately left.
static NcclTransport *transport_nccl_abandoned;

// Every communicator this rank belongs to, children before world, in the same order on every
// rank: NCCL documents ncclCommDestroy as an intra-node collective, and in one order, as with
// the splits, the earliest pending one always has all of its ranks at it. After a failure
// ncclCommAbort instead: local, it stops whatever is still in flight.
static void end_comms(NcclTransport *nt, bool clean) {
    ncclComm_t *comms = xmalloc(sizeof(ncclComm_t) * (size_t)(2 * nt->S + 2));
    int n = 0;
    if (nt->replicas) comms[n++] = nt->replicas;
    for (int i = 2 * nt->S - 1; i >= 0; i--)
        if (nt->links[i].comm) comms[n++] = nt->links[i].comm;
    comms[n++] = nt->world;
    for (int i = 0; i < n; i++) {
        if (clean)
            NCCL_CHECK(ncclCommDestroy(comms[i]));
        else
            NCCL_CHECK(ncclCommAbort(comms[i]));
    }
    free(comms);
}

static void transport_nccl_free(Transport *t) {
    cuda_check_on_fail(NULL, NULL);   // no last words from a transport that is gone
    cuda_check_name_rank(-1);
    NcclTransport *nt = as_nccl(t);
    // A clean end: every send taken and no receive left posted; anything else ends as a failure.
    bool clean = !nt->failed && !poll_abort(nt);
    for (int i = 0; i < nt->capacity; i++) {
        Error e;
        SendSlot *s = &nt->sends[i];
        if (clean && s->busy)
            clean = wait_event(nt, s->done, s->comm, "finishing a send to", s->to, &e) == TRANSPORT_OK;
        if (nt->recvs[i].posted) clean = false;
    }
    Transport *ctl = nt->ctl;
    if (nt->cuda_failed) {
        transport_nccl_abandoned = nt;
        transport_free(ctl);
        return;
    }
    end_comms(nt, clean);
    for (int i = 0; i < nt->capacity; i++) {
        CUDA_CHECK(cudaEventDestroy(nt->sends[i].copied));
        CUDA_CHECK(cudaEventDestroy(nt->sends[i].done));
        CUDA_CHECK(cudaEventDestroy(nt->recvs[i].copied));
        CUDA_CHECK(cudaEventDestroy(nt->recvs[i].done));
    }
    CUDA_CHECK(cudaEventDestroy(nt->coll_done));
    for (int i = 0; i < 2 * nt->S; i++)
        if (nt->links[i].stream) CUDA_CHECK(cudaStreamDestroy(nt->links[i].stream));
    CUDA_CHECK(cudaStreamDestroy(nt->copy));
    CUDA_CHECK(cudaStreamDestroy(nt->coll));
    CUDA_CHECK(cudaFree(nt->buffers));
    free(nt->links);
    free(nt->sends);
    free(nt->recvs);
    transport_free(ctl);
    if (nt->notices.aborted) {  // notices may still be on their way: ctrl and its requests stay
        nt->base.wait.what = WAIT_NONE;
        transport_nccl_abandoned = nt;
        return;
    }
    abort_notices_free(&nt->notices);
    free(nt);
}

static const TransportOps NCCL_OPS = {
    .send = transport_nccl_send,
    .post = transport_nccl_post,
    .recv = transport_nccl_recv,
    .allreduce_f32 = transport_nccl_allreduce_f32,
    .allreduce_f64 = transport_nccl_allreduce_f64,
    .clock_offsets = transport_nccl_clock_offsets,
    .gather_bytes = transport_nccl_gather_bytes,
    .abort = transport_nccl_abort,
    .free = transport_nccl_free,
};

// ---- create --------------------------------------------------------------------------------

// ctrl (errors returned, not fatal), then the world communicator from rank 0's id.
static int make_world(NcclTransport *nt, MPI_Comm run, Error *err) {
    if (abort_notices_init(&nt->notices, run, err)) return -1;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (nt->rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    const int rc = MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, nt->notices.comm);
    if (rc != MPI_SUCCESS) {
        mpi_call_failed(rc, "MPI_Bcast of the NCCL id", err);
        abort_notices_free(&nt->notices);
        return -1;
    }
    NCCL_CHECK(ncclCommInitRank(&nt->world, nt->P * nt->D, id, nt->rank));
    return 0;
}

// Does edge e (stage e / 2's activations forward, kind 0, or gradients back, kind 1) cross
// ranks? Its ends' pipeline ranks in *a (sender) and *b.
static bool edge_crosses(int e, int S, const int *stage_rank, int *a, int *b) {
    const int s = e / 2, t = e % 2 ? s - 1 : s + 1;
    if (t < 0 || t >= S) return false;
    *a = stage_rank[s];
    *b = stage_rank[t];
    return *a != *b;
}

// The split communicators. ncclCommSplit is collective over world, so every rank walks the
// edges in the same order and joins each split, as a member (color: its replica, so each
// replica gets its own 2-rank communicator; key: 0 sender, 1 receiver) or not
// (NCCL_SPLIT_NOCOLOR, which gives no communicator).
static void make_comms(NcclTransport *nt, const int *stage_rank) {
    const int P = nt->P, d = nt->rank / P, p = nt->rank % P;
    nt->links = xcalloc((size_t)(2 * nt->S), sizeof(Link));
    for (int e = 0; e < 2 * nt->S; e++) {
        int a, b;
        if (!edge_crosses(e, nt->S, stage_rank, &a, &b)) continue;
        const bool member = p == a || p == b;
        Link *l = &nt->links[e];
        l->from = a;
        l->to = b;
        NCCL_CHECK(ncclCommSplit(nt->world, member ? d : NCCL_SPLIT_NOCOLOR, p == a ? 0 : 1, &l->comm, NULL));
        if (member) CUDA_CHECK(cudaStreamCreateWithFlags(&l->stream, cudaStreamNonBlocking));
    }
    if (nt->D > 1) NCCL_CHECK(ncclCommSplit(nt->world, p, d, &nt->replicas, NULL));
}

// Streams, events and the buffers: one device allocation carved into (2 * capacity) buffers
// of slot_bytes (max_bytes rounded up to SLOT_ALIGN), sends first. Zeroed once, so the
// connecting messages below carry defined bytes.
static void make_buffers(NcclTransport *nt) {
    const size_t slot_bytes = (nt->max_bytes + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
    const size_t total = 2 * (size_t)nt->capacity * slot_bytes;
    CUDA_CHECK(cudaStreamCreateWithFlags(&nt->copy, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&nt->coll, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&nt->coll_done, cudaEventDisableTiming));
    CUDA_CHECK(cudaMalloc((void **)&nt->buffers, total));
    CUDA_CHECK(cudaMemsetAsync(nt->buffers, 0, total, nt->copy));
    CUDA_CHECK(cudaStreamSynchronize(nt->copy));
    nt->sends = xcalloc((size_t)nt->capacity, sizeof(SendSlot));
    nt->recvs = xcalloc((size_t)nt->capacity, sizeof(RecvSlot));
    for (int i = 0; i < nt->capacity; i++) {
        nt->sends[i].data = nt->buffers + (size_t)i * slot_bytes;
        nt->recvs[i].data = nt->buffers + (size_t)(nt->capacity + i) * slot_bytes;
        CUDA_CHECK(cudaEventCreateWithFlags(&nt->sends[i].copied, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&nt->sends[i].done, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&nt->recvs[i].copied, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&nt->recvs[i].done, cudaEventDisableTiming));
    }
}

// NCCL connects a pair lazily, at its first send or receive, and that first call blocks the
// host until the peer makes its own (a bootstrap handshake without timeout or abort). Left to
// the step, a receive posted ahead could block this rank while the peer waits for one of its
// messages. So every link carries one byte here, edge after edge in the splits' order on
// every rank: the earliest edge not yet connected always has both its ranks at it, so the
// walk finishes. Then one float through each collective group. The connections' buffers are
// allocated here as well, not in the first step.
static TransportStatus connect_all(NcclTransport *nt, Error *err) {
    const int P = nt->P, d = nt->rank / P, p = nt->rank % P;
    TransportStatus st = TRANSPORT_OK;
    for (int e = 0; e < 2 * nt->S && st == TRANSPORT_OK; e++) {
        const Link *l = &nt->links[e];
        if (!l->comm) continue;  // no crossing edge, or this rank is neither end
        const bool sender = p == l->from;
        cudaEvent_t ev = sender ? nt->sends[0].done : nt->recvs[0].done;
        if (sender)
            NCCL_CHECK(ncclSend(nt->sends[0].data, 1, ncclUint8, 1, l->comm, l->stream));
        else
            NCCL_CHECK(ncclRecv(nt->recvs[0].data, 1, ncclUint8, 0, l->comm, l->stream));
        CUDA_CHECK(cudaEventRecord(ev, l->stream));
        st = wait_event(nt, ev, l->comm, "connecting to", d * P + (sender ? l->to : l->from), err);
    }
    float *one = (float *)(void *)nt->sends[0].data;
    if (st == TRANSPORT_OK && nt->replicas) {
        NCCL_CHECK(ncclAllReduce(one, one, 1, ncclFloat, ncclSum, nt->replicas, nt->coll));
        CUDA_CHECK(cudaEventRecord(nt->coll_done, nt->coll));
        st = wait_event(nt, nt->coll_done, nt->replicas, "connecting the replicas", -1, err);
    }
    if (st == TRANSPORT_OK && nt->P * nt->D > 1) {
        NCCL_CHECK(ncclAllReduce(one, one, 1, ncclFloat, ncclSum, nt->world, nt->coll));
        CUDA_CHECK(cudaEventRecord(nt->coll_done, nt->coll));
        st = wait_event(nt, nt->coll_done, nt->world, "connecting the world", -1, err);
    }
    return st;
}

Transport *transport_nccl_create(Transport *ctl, const void *comm, int P, int D, int S, const int *stage_rank,
                                 size_t max_bytes, int capacity, int max_tag, double timeout_s, int device, Error *err) {
    // The inner transport checked the world size and the tags, and tells this rank's number.
    MPI_Comm run = comm ? *(const MPI_Comm *)comm : MPI_COMM_WORLD;
    NcclTransport *nt = xcalloc(1, sizeof *nt);
    *nt = (NcclTransport){.base = {.ops = &NCCL_OPS, .n_ranks = P * D, .n_pipe = P, .timeout_s = timeout_s},
                          .ctl = ctl, .rank = transport_mpi_rank(ctl), .P = P, .D = D,
                          .max_bytes = max_bytes ? max_bytes : 1, .capacity = capacity > 0 ? capacity : 1,
                          .max_tag = max_tag, .S = S};
    // Made current by the caller; again here so every stream, buffer and communicator is on it.
    CUDA_CHECK(cudaSetDevice(device));
    if (make_world(nt, run, err)) {
        transport_free(ctl);
        free(nt);
        return NULL;
    }
    cuda_check_on_fail(nccl_last_words, nt);
    cuda_check_name_rank(nt->rank);
    make_comms(nt, stage_rank);
    make_buffers(nt);
    if (connect_all(nt, err) != TRANSPORT_OK) {
        transport_abort(&nt->base);  // the peers still connecting stop too
        transport_nccl_free(&nt->base);
        return NULL;
    }
    return &nt->base;
}

// ---- which GPU -------------------------------------------------------------------------------

int transport_nccl_pick_device(const void *comm, int *device, Error *err) {
    MPI_Comm run = comm ? *(const MPI_Comm *)comm : MPI_COMM_WORLD, node;
    if (MPI_Comm_split_type(run, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) {
        error_set(err, "--transport nccl: MPI could not group the ranks by node");
        return -1;
    }
    int local = 0, on_node = 1, count = 0;
    MPI_Comm_rank(node, &local);
    MPI_Comm_size(node, &on_node);
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) count = 1;   // usable: the caller checked
    *device = local % count;
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, *device));
    char *uuids = xmalloc(sizeof prop.uuid.bytes * (size_t)on_node);
    int rc = MPI_Allgather(prop.uuid.bytes, (int)sizeof prop.uuid.bytes, MPI_BYTE, uuids, (int)sizeof prop.uuid.bytes,
                           MPI_BYTE, node);
    int clash = -1;
    for (int r = 0; rc == MPI_SUCCESS && r < on_node && clash < 0; r++)
        if (r != local && memcmp(uuids + (size_t)r * sizeof prop.uuid.bytes, prop.uuid.bytes, sizeof prop.uuid.bytes) == 0)
            clash = r;
    free(uuids);
    MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS) {
        mpi_call_failed(rc, "--transport nccl: comparing the node's GPUs", err);
        return -1;
    }
    if (clash >= 0) {
        error_set(err, "--transport nccl: ranks %d and %d of this node would share GPU %d (%s) of the %d it sees; NCCL "
                       "needs a GPU per rank (several stages on one GPU: --transport local)",
                  local < clash ? local : clash, local < clash ? clash : local, *device, prop.name, count);
        return -1;
    }
    return 0;
}
