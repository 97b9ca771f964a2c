// engine/rank_usage: what one rank costs its host, the way htop shows a process: CPU time
// and resident memory, read from the kernel for the rank's own threads.
//
// A rank of an mpirun job is a whole process: its CPU time is the process's
// (CLOCK_PROCESS_CPUTIME_ID: every thread, OpenMP and Open MPI's included) and its memory the
// process's resident set (/proc/self/statm). A rank of the local transport is a thread: its
// CPU time is that thread's plus its OpenMP team's (each team thread's CPU clock, found once
// by rank_usage_attach), and its memory is shared with the other ranks, so the resident set
// is the process's, the same on every rank.
#ifndef PPTRAIN_RANK_USAGE_H
#define PPTRAIN_RANK_USAGE_H
#include <stdbool.h>
#include <time.h>

#define RANK_USAGE_MAX_THREADS 256

typedef struct {
    bool whole_process;                        // an mpirun rank: the process is the rank
    int n_clocks;                              // team threads found by rank_usage_attach
    clockid_t clocks[RANK_USAGE_MAX_THREADS];  // their CPU-time clocks
    bool has_clock[RANK_USAGE_MAX_THREADS];
    double last_cpu_s;                         // rank_usage_cpu_delta's previous reading
} RankUsage;

// Run on the rank's thread after its OpenMP thread count is set: records the CPU clock of
// every thread of its team (OpenMP keeps a team's threads for the next parallel region of
// the same thread, so these are the threads its kernels run on). whole_process: see above.
void rank_usage_attach(RankUsage *u, bool whole_process);

// CPU seconds the rank used since the previous call (or since rank_usage_attach).
double rank_usage_cpu_delta(RankUsage *u);

// The process's resident set in bytes; NaN where /proc cannot be read.
double rank_usage_rss_bytes(void);
#endif
