// Summarizes one step's action events (engine/telemetry.h): per-rank busy / comm / idle, per
// stage busy / comm, the step's wall time on rank 0's clock and the measured bubble; then
// telemetry_attribute (engine/telemetry_bubble.c) splits the non-busy time by cause.
#include "engine/telemetry.h"

#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>

#include "engine/schedule/schedule.h"

static bool is_compute(int type) {
    return type == ACT_F || type == ACT_B || type == ACT_I || type == ACT_W;
}

// First start and last end over every rank's events, each shifted by its rank's offset onto
// rank 0's clock. Returns false when there are no events at all.
static bool step_span(int n_ranks, const ActionEvent *const *events, const int *n_events, const double *offsets,
                      double *first, double *last) {
    bool any = false;
    for (int r = 0; r < n_ranks; r++)
        for (int i = 0; i < n_events[r]; i++) {
            const double off = offsets ? offsets[r] : 0.0;
            const double s = events[r][i].start + off, e = events[r][i].end + off;
            if (!any || s < *first) *first = s;
            if (!any || e > *last) *last = e;
            any = true;
        }
    return any;
}

void telemetry_summarize(int n_ranks, int n_stages, const int *stage_rank, const ActionEvent *const *events,
                         const int *n_events, const double *offsets, StepTelemetry *out) {
    out->n_ranks = n_ranks;
    out->n_stages = n_stages;
    for (int s = 0; s < n_stages; s++)
        out->stages[s] = (StageTelemetry){.busy_ms = 0.0, .comm_ms = 0.0, .transfer_ms = 0.0, .rank = stage_rank[s]};
    double first = 0.0, last = 0.0;
    out->step_ms = step_span(n_ranks, events, n_events, offsets, &first, &last) ? (last - first) * 1e3 : 0.0;
    double busy_total = 0.0;
    for (int r = 0; r < n_ranks; r++) {
        RankTelemetry *rt = &out->ranks[r];
        *rt = (RankTelemetry){.events = n_events[r]};
        for (int i = 0; i < n_events[r]; i++) {
            const ActionEvent *e = &events[r][i];
            const double ms = (e->end - e->start) * 1e3;
            const bool compute = is_compute(e->type);
            *(compute ? &rt->busy_ms : &rt->comm_ms) += ms;
            if (e->stage >= 0 && e->stage < n_stages) *(compute ? &out->stages[e->stage].busy_ms
                                                                : &out->stages[e->stage].comm_ms) += ms;
        }
        // Never negative, even when a rank's events overlap through clock jitter.
        const double idle = out->step_ms - rt->busy_ms - rt->comm_ms;
        rt->idle_ms = idle > 0.0 ? idle : 0.0;
        busy_total += rt->busy_ms;
    }
    // A step with no measured time has no bubble to speak of.
    out->bubble = out->step_ms > 0.0 && n_ranks > 0 ? 1.0 - busy_total / (n_ranks * out->step_ms) : 0.0;
    telemetry_attribute(n_ranks, n_stages, stage_rank, events, n_events, offsets, out);
    // A stage's figures are one replica's: under data parallelism every replica runs each
    // stage, and their sum would read as a stage D times as slow (plan --from-run predicted a
    // dp run's step at twice its measurement).
    int P = 0;
    for (int s = 0; s < n_stages; s++) P = stage_rank[s] + 1 > P ? stage_rank[s] + 1 : P;
    const int D = P > 0 && n_ranks % P == 0 ? n_ranks / P : 1;
    for (int s = 0; s < n_stages && D > 1; s++) {
        out->stages[s].busy_ms /= D;
        out->stages[s].comm_ms /= D;
        out->stages[s].transfer_ms /= D;
    }
}

int telemetry_host_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    return CPU_COUNT(&set);
}

int telemetry_host_ranks(bool one_process, int world) {
    if (one_process) return world;
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int n = local ? atoi(local) : 0;
    return n > 0 ? n : 0;
}
