// tests/gpu_emu/nccl_emu.c: NCCL emulated over MPI, for pptrain_emu (CMakeLists.txt): lets the
// nccl transport (engine/transport/transport_nccl.c) run between the processes of an mpirun job
// on a machine without GPUs. Each communicator is an MPI communicator (ncclCommInitRank: a
// duplicate of MPI_COMM_WORLD; ncclCommSplit: MPI_Comm_split), and each operation an item of
// its stream (emu.h: EmuOp) that becomes a non-blocking MPI call on the emulated device memory
// when the stream gets there, and lets the stream go on once that call completed. MPI
// delivers the messages of one pair on one communicator in order, as NCCL matches its sends
// and receives. A send is MPI_Issend: like NCCL's, it never completes before its receive is
// posted (no buffering), so a schedule that only works because sends are buffered deadlocks
// here as it would on GPUs.
// PPTRAIN_EMU_COUNT_SYNCS=1 also prints, at exit, the most receives this process had queued and
// not yet completed at once: "pptrain (NCCL emulation): at most N receives pending (rank R)".
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "tests/gpu_emu/emu.h"

struct ncclComm {
    MPI_Comm mpi;
    bool aborted;   // destroyed or aborted: operations still queued are dropped
};

// Communicators ended while operations may still refer to them: kept (reachable) to the exit.
static ncclComm_t *ended;
static size_t n_ended;

static ncclComm_t wrap(MPI_Comm mpi) {
    if (mpi == MPI_COMM_NULL) return NULL;
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c) abort();
    c->mpi = mpi;
    return c;
}

static void end_comm(ncclComm_t comm) {
    comm->aborted = true;
    ncclComm_t *more = realloc(ended, (n_ended + 1) * sizeof *ended);
    if (!more) abort();
    ended = more;
    ended[n_ended++] = comm;
}

const char *ncclGetErrorString(ncclResult_t result) {
    return result == ncclSuccess ? "no error" : "emulated NCCL error";
}

const char *ncclGetLastError(ncclComm_t comm) {
    (void)comm;
    return "";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "pptrain emulated NCCL");
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    (void)id;
    int size = 0, me = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (size != nranks || me != rank) return ncclInvalidArgument;   // the transport's runs use the world
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    *comm = wrap(dup);
    return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
    (void)config;
    MPI_Comm part;
    MPI_Comm_split(comm->mpi, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &part);
    *newcomm = wrap(part);
    return ncclSuccess;
}

// Operations still queued on it are dropped (the transport destroys only when none is).
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    MPI_Comm_free(&comm->mpi);
    end_comm(comm);
    return ncclSuccess;
}

// Requests in flight on its MPI communicator are left to the exit.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (comm) end_comm(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
    (void)comm;
    *asyncError = ncclSuccess;
    return ncclSuccess;
}

static MPI_Datatype mpi_type(ncclDataType_t t) {
    switch (t) {
    case ncclUint8: return MPI_BYTE;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    default: fprintf(stderr, "pptrain (NCCL emulation): data type %d not emulated\n", (int)t); abort();
    }
}

typedef enum { OP_SEND, OP_RECV, OP_ALLREDUCE } OpKind;

typedef struct {
    OpKind kind;
    const void *sendbuf;
    void *recvbuf;
    int count, peer;
    MPI_Datatype type;
    MPI_Comm comm;
    bool started;
    MPI_Request req;
} OpArgs;

// Receives queued (ncclRecv) and not yet completed or dropped, and the most there were at once.
static _Atomic int recvs_pending, recvs_most;

static void recv_ended(void) { recvs_pending--; }

static void print_recvs(void) {
    int rank = 0, on = 0;
    MPI_Initialized(&on);
    if (on) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "pptrain (NCCL emulation): at most %d receives pending (rank %d)\n", (int)recvs_most, rank);
}

// Starts the MPI call on the first step, then tests it (EmuOp).
static bool op_step(void *p, bool drop) {
    OpArgs *a = p;
    if (drop) {   // an ended communicator: a request in flight is left to the exit
        if (a->kind == OP_RECV) recv_ended();
        return true;
    }
    if (!a->started) {
        a->started = true;
        switch (a->kind) {
        case OP_SEND: MPI_Issend(a->sendbuf, a->count, a->type, a->peer, 0, a->comm, &a->req); break;
        case OP_RECV: MPI_Irecv(a->recvbuf, a->count, a->type, a->peer, 0, a->comm, &a->req); break;
        case OP_ALLREDUCE:
            MPI_Iallreduce(a->sendbuf == a->recvbuf ? MPI_IN_PLACE : a->sendbuf, a->recvbuf, a->count, a->type, MPI_SUM,
                           a->comm, &a->req);
            break;
        }
    }
    int done = 0;
    MPI_Test(&a->req, &done, MPI_STATUS_IGNORE);
    if (done && a->kind == OP_RECV) recv_ended();
    return done;
}

static ncclResult_t queue_op(OpArgs a, size_t bytes, const char *call, ncclComm_t comm, cudaStream_t stream) {
    if (a.kind != OP_RECV) emu_need_device(call, a.sendbuf, bytes);
    if (a.kind != OP_SEND) emu_need_device(call, a.recvbuf, bytes);
    a.comm = comm->mpi;
    emu_enqueue_op(stream, (EmuOp){.step = op_step, .aborted = &comm->aborted}, &a, sizeof a);
    return ncclSuccess;
}

static size_t type_bytes(ncclDataType_t t) { return t == ncclFloat64 ? 8 : t == ncclFloat32 ? 4 : 1; }

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
    const OpArgs a = {.kind = OP_SEND, .sendbuf = buf, .count = (int)count, .peer = peer, .type = mpi_type(type)};
    return queue_op(a, count * type_bytes(type), __func__, comm, stream);
}

ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
    const OpArgs a = {.kind = OP_RECV, .recvbuf = buf, .count = (int)count, .peer = peer, .type = mpi_type(type)};
    static _Atomic int watching;
    if (!watching++) {
        const char *count_syncs = getenv("PPTRAIN_EMU_COUNT_SYNCS");
        if (count_syncs && atoi(count_syncs) == 1) atexit(print_recvs);
    }
    const int now = ++recvs_pending;
    if (now > recvs_most) recvs_most = now;
    return queue_op(a, count * type_bytes(type), __func__, comm, stream);
}

ncclResult_t ncclAllReduce(const void *sendbuf, void *recvbuf, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
    if (op != ncclSum) return ncclInvalidArgument;
    const OpArgs a = {.kind = OP_ALLREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = (int)count,
                      .type = mpi_type(type)};
    return queue_op(a, count * type_bytes(type), __func__, comm, stream);
}
