// NCCL emulated over MPI, for pptrain_emu (CMakeLists.txt): lets the nccl transport
// (engine/transport/transport_nccl.c) run between the processes of an mpirun job on a machine without
// GPUs. Each communicator is an MPI communicator (ncclCommInitRank: a duplicate of
// MPI_COMM_WORLD; ncclCommSplit: MPI_Comm_split), and each operation a non-blocking MPI call
// on the emulated device memory, enqueued on its stream (emu.h) so events complete when it
// does. MPI delivers the messages of one pair on one communicator in order, as NCCL matches
// its sends and receives. Not emulated: that an NCCL send waits for its receive on the GPU
// (MPI may buffer it), so NCCL-only deadlocks are not caught here.
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu_emu/emu.h"

struct ncclComm {
    MPI_Comm mpi;
};

static ncclComm_t wrap(MPI_Comm mpi) {
    if (mpi == MPI_COMM_NULL) return NULL;
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c) abort();
    c->mpi = mpi;
    return c;
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

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    MPI_Comm_free(&comm->mpi);
    free(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    free(comm);   // requests may still be pending on its MPI communicator: left to the exit
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

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
    MPI_Request req;
    MPI_Isend(buf, (int)count, mpi_type(type), peer, 0, comm->mpi, &req);
    emu_stream_push(stream, req);
    return ncclSuccess;
}

ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
    MPI_Request req;
    MPI_Irecv(buf, (int)count, mpi_type(type), peer, 0, comm->mpi, &req);
    emu_stream_push(stream, req);
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuf, void *recvbuf, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
    if (op != ncclSum) return ncclInvalidArgument;
    MPI_Request req;
    MPI_Iallreduce(sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf, recvbuf, (int)count, mpi_type(type), MPI_SUM, comm->mpi,
                   &req);
    emu_stream_push(stream, req);
    return ncclSuccess;
}
