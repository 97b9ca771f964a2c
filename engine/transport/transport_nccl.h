// engine/transport/transport_nccl: the `nccl` transport. This process is one rank of an mpirun job of
// P x D ranks and drives ONE GPU: messages and the float all-reduce move device memory with
// NCCL; the host-memory operations (allreduce_f64, clock_offsets, gather_bytes) go through
// an inner MPI transport (transport_mpi_create, made by the caller), as do abort notices.
//
// What differs from engine/transport/transport.h's contract, all forced by NCCL and the device:
//   * send's `data`, recv's `data` and allreduce_f32's `buf` are DEVICE pointers on `device`;
//     allreduce_f64, clock_offsets and gather_bytes take host memory.
//   * The work that wrote a buffer handed to send or allreduce_f32 must be finished (the
//     caller synchronizes the stream that wrote it): the transport copies on its own streams.
//     What recv and allreduce_f32 write is finished when they return.
//   * NCCL has no tags: it matches the k-th send with the k-th receive of a communicator.
//     Every edge of the stage graph that crosses ranks (stage s's activations to s + 1, its
//     gradients to s - 1; a tag names its edge, transport_tag) has a communicator of its own,
//     and on each edge the receiver must post (or receive, when it did not post) in the
//     order the sender sends (schedule_check_fifo); tags select the edge. Sender and receiver must agree on each
//     message's size (NCCL does not carry it): recv checks its size against its post's only.
//   * allreduce_f32 sums in NCCL's order (ring, tree or NVLS, chosen by NCCL), not in
//     group-rank order: the replicas' sum can differ in the last bits from local and mpi.
//   * While receives are posted, NCCL kernels wait on the GPU for their senders: between
//     create and free the caller must not make device-synchronizing calls (cudaFree,
//     cudaDeviceSynchronize), which would wait for messages that may depend on this rank.
#ifndef PPTRAIN_TRANSPORT_NCCL_H
#define PPTRAIN_TRANSPORT_NCCL_H
#include <stdbool.h>
#include <stddef.h>

#include "engine/transport/transport.h"

// This process as one rank of an MPI job of P x D ranks over *comm (an MPI_Comm, passed by
// pointer so this header needs no mpi.h; NULL = MPI_COMM_WORLD), MPI already initialized
// with at least MPI_THREAD_SERIALIZED. Collective over the world: every rank calls it with
// the same arguments (but its own device).
// ctl: an MPI transport over the same ranks (transport_mpi_create; its messages go unused, so
// its buffers may be minimal) that carries the host collectives. The caller makes it first, so
// it knows its rank and can agree with the others before NCCL's initialization, which has no
// timeout; the nccl transport owns it from here, also when create fails.
// S, stage_rank: the schedule's stages and the pipeline rank of each (the same on every
// rank); a message on no crossing edge fails.
// device: the CUDA device this rank uses (already made current by the caller with
// cudaSetDevice). Preallocates on it `capacity` send and `capacity` receive buffers of
// max_bytes, and connects every edge and both collective groups, so a step allocates
// nothing. Tags must stay below max_tag (the run's 2 * M * S). timeout_s bounds every wait.
// Returns NULL with one line in err (an MPI error, a first message that times out; ctl has
// checked the world size and the tags); a failing CUDA or NCCL call prints one line and exits
// (CUDA_CHECK). Like any NCCL set-up, its initialization and splits wait without a timeout.
Transport *transport_nccl_create(Transport *ctl, const void *comm, int P, int D, int S, const int *stage_rank,
                                 size_t max_bytes, int capacity, int max_tag, double timeout_s, int device, Error *err);

// This rank's GPU: its rank among the ranks on its node, mod the GPUs it sees (so it also
// works when each rank sees only its own, CUDA_VISIBLE_DEVICES per rank). NCCL refuses two
// ranks on one GPU, so the node's ranks compare the UUIDs of their picks: a clash is one line
// in err (-1). Collective over the ranks of *comm (NULL = MPI_COMM_WORLD) on each node.
int transport_nccl_pick_device(const void *comm, int *device, Error *err);
#endif
