// engine/transport/node_threads: the OpenMP threads each rank of an mpirun job takes, so the
// ranks on one node share its cores instead of each starting one thread per core.
#ifndef PPTRAIN_NODE_THREADS_H
#define PPTRAIN_NODE_THREADS_H
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    int threads;          // OpenMP threads this rank runs its kernels with
    int node_ranks;       // ranks of the job on this rank's node
    int node_cores;       // cores those ranks may use (the union of their affinity masks)
    bool explicit_env;    // OMP_NUM_THREADS was set: honoured as it is
    bool oversubscribed;  // node_ranks x threads > node_cores
} NodeThreads;

// The pure rule: OMP_NUM_THREADS when set (omp_env non-empty), else node_cores / node_ranks
// (at least 1, at most own_cores, the cores of this rank's own affinity mask).
NodeThreads node_threads_plan(int node_ranks, int node_cores, int own_cores, const char *omp_env);
// Collective over *comm (an MPI_Comm, passed by pointer so this header needs no mpi.h; NULL =
// MPI_COMM_WORLD): learns the node's ranks and cores, applies the plan with
// omp_set_num_threads, and returns it.
NodeThreads node_threads_apply(const void *comm);
// One line for the user when the node is oversubscribed (0 and nothing written otherwise):
// "4 ranks x 1 thread share 2 cores on this node: ...". Returns snprintf's count.
int node_threads_describe(const NodeThreads *t, char *buf, size_t size);
#endif
