// engine/rank_usage: CPU time and resident memory of a rank (see rank_usage.h).
#include "engine/rank_usage.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static double clock_s(clockid_t c) {
    struct timespec ts;
    // A team thread that has exited has no clock any more: it adds nothing.
    if (clock_gettime(c, &ts)) return 0.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double rank_cpu_s(const RankUsage *u) {
    if (u->whole_process) return clock_s(CLOCK_PROCESS_CPUTIME_ID);
    double sum = 0.0;
    for (int i = 0; i < u->n_clocks; i++)
        if (u->has_clock[i]) sum += clock_s(u->clocks[i]);
    return sum;
}

void rank_usage_attach(RankUsage *u, bool whole_process) {
    *u = (RankUsage){.whole_process = whole_process};
    if (!whole_process) {
        const int want = omp_get_max_threads();
        const int n = want < RANK_USAGE_MAX_THREADS ? want : RANK_USAGE_MAX_THREADS;
        int got = 0;
#pragma omp parallel num_threads(n)
        {
            const int t = omp_get_thread_num();
            clockid_t c;
            // Linux gives every thread a CPU clock; one it would not give counts as none.
            u->has_clock[t] = pthread_getcpuclockid(pthread_self(), &c) == 0;
            u->clocks[t] = c;
#pragma omp single
            got = omp_get_num_threads();
        }
        u->n_clocks = got;
    }
    u->last_cpu_s = rank_cpu_s(u);
}

double rank_usage_cpu_delta(RankUsage *u) {
    const double now = rank_cpu_s(u);
    const double d = now - u->last_cpu_s;
    u->last_cpu_s = now;
    return d > 0.0 ? d : 0.0;
}

double rank_usage_rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return NAN;
    long size = 0, resident = 0;
    const int got = fscanf(f, "%ld %ld", &size, &resident);
    fclose(f);
    return got == 2 ? (double)resident * (double)sysconf(_SC_PAGESIZE) : NAN;
}
