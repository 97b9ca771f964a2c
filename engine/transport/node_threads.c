// How many OpenMP threads each rank of an mpirun job takes (engine/transport/node_threads.h).
//
// Every process starts with as many OpenMP threads as its node has cores, so P ranks on one
// node run P x cores threads that spin against each other: measured on a 2-core machine,
// mpirun -np 4 ran 45x slower than with OMP_NUM_THREADS=1, and nothing said why. Each rank
// now learns how many ranks share its node (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED) and
// how many cores it may use (its affinity mask, which mpirun's binding narrows), and takes
// its share. An OMP_NUM_THREADS the user set is honoured as it is.
#include "engine/transport/node_threads.h"

#include <mpi.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

// Cores this process may run on: its affinity mask, else the online CPUs.
static int usable_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

// The union of the node's ranks' affinity masks, counted: the cores the node's ranks share.
static int node_cores(MPI_Comm node) {
    cpu_set_t mine, all;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0 || CPU_COUNT(&mine) == 0) return usable_cores();
    MPI_Allreduce(&mine, &all, (int)sizeof mine, MPI_BYTE, MPI_BOR, node);
    return CPU_COUNT(&all);
}

NodeThreads node_threads_plan(int node_ranks, int node_cores, int own_cores, const char *omp_env) {
    NodeThreads t = {.node_ranks = node_ranks, .node_cores = node_cores};
    if (omp_env && *omp_env) {
        const int n = atoi(omp_env);
        t.threads = n > 0 ? n : 1;
        t.explicit_env = true;
    } else {
        const int share = node_cores / (node_ranks > 0 ? node_ranks : 1);
        t.threads = share < 1 ? 1 : share > own_cores ? own_cores : share;
    }
    t.oversubscribed = (long)t.threads * node_ranks > node_cores;
    return t;
}

NodeThreads node_threads_apply(const void *comm) {
    const MPI_Comm world = comm ? *(const MPI_Comm *)comm : MPI_COMM_WORLD;
    MPI_Comm node;
    int rank = 0, node_ranks = 1;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_ranks);
    const int cores = node_cores(node);
    MPI_Comm_free(&node);
    NodeThreads t = node_threads_plan(node_ranks, cores, usable_cores(), getenv("OMP_NUM_THREADS"));
    omp_set_num_threads(t.threads);
    return t;
}

int node_threads_describe(const NodeThreads *t, char *buf, size_t size) {
    if (!t->oversubscribed) return 0;
    return snprintf(buf, size,
                    "%d ranks x %d thread%s share %d core%s on this node: they take turns, so steps are slower "
                    "and the bubble larger than the schedule's%s",
                    t->node_ranks, t->threads, t->threads == 1 ? "" : "s", t->node_cores, t->node_cores == 1 ? "" : "s",
                    t->explicit_env ? " (OMP_NUM_THREADS as set)" : "");
}
