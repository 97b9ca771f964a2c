// tests/unit/test_rank_usage.c: the tests of engine/rank_usage.
// engine/rank_usage: the CPU a rank's team used and the process's resident memory, against
// what the test itself spent and allocated.
#include "engine/rank_usage.h"
#include "test_util.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Spins every thread of a team of `threads` for `seconds` of its own CPU time.
static void burn(int threads, double seconds) {
#pragma omp parallel num_threads(threads)
    {
        const double t0 = now_s(CLOCK_THREAD_CPUTIME_ID);
        volatile double x = 1.0;
        while (now_s(CLOCK_THREAD_CPUTIME_ID) - t0 < seconds) x = x * 1.0000001 + 1e-9;
    }
}

// A team of two threads burning 0.2 s each: the rank used 0.4 s of CPU. The lower bound is
// what the threads measured on their own clocks; the upper allows the loop's last turn and
// the team's start-up, on a machine of any speed and load (CPU time does not grow with load).
static void team_cpu_counts_every_thread(void) {
    omp_set_num_threads(2);
    RankUsage u;
    rank_usage_attach(&u, false);
    CHECK(u.n_clocks == 2, "team of %d clocks, want 2", u.n_clocks);
    burn(2, 0.2);
    const double used = rank_usage_cpu_delta(&u);
    CHECK(used >= 0.4 && used < 0.6, "team used %.3f s of CPU, want 0.4 to 0.6", used);
    // Nothing burnt since: the next delta is small.
    const double idle = rank_usage_cpu_delta(&u);
    CHECK(idle < 0.05, "idle team used %.3f s", idle);
}

// A whole-process rank counts every thread of the process.
static void process_cpu(void) {
    RankUsage u;
    rank_usage_attach(&u, true);
    burn(2, 0.1);
    const double used = rank_usage_cpu_delta(&u);
    CHECK(used >= 0.2 && used < 0.4, "process used %.3f s of CPU, want 0.2 to 0.4", used);
}

// 64 MiB written grows the resident set by about that much.
static void rss_follows_memory(void) {
    const double before = rank_usage_rss_bytes();
    const size_t n = 64u << 20;
    char *block = malloc(n);
    memset(block, 1, n);
    const double after = rank_usage_rss_bytes();
    CHECK(before > 0 && after - before >= 0.9 * (double)n, "rss %.0f -> %.0f after %zu bytes", before, after, n);
    free(block);
}

int main(void) {
    team_cpu_counts_every_thread();
    process_cpu();
    rss_follows_memory();
    return test_finish();
}
