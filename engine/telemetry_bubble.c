// engine/telemetry_bubble: where a step's non-busy time went (engine/telemetry.h). Each rank's
// non-busy time splits into transfer (its messages' copies) and wait; the step is replayed
// three times at its own measured costs, every RECV after the SEND of its message (and, in
// the transfer replay, after its link's wire time), to split the bubble into ideal,
// imbalance, transfer and contention.
#include <math.h>
#include <stdlib.h>

#include "engine/error.h"
#include "engine/schedule/schedule.h"
#include "engine/telemetry.h"

enum { N_COMPUTE = 4 };   // F, B, I, W: ActionType 0..3

// One step's events, flattened rank after rank, with the message each SEND or RECV moves.
typedef struct {
    int W, S, M, P;           // world ranks, stages, microbatches (largest mb + 1), pipeline ranks
    int N;                    // events
    const ActionEvent **ev;   // (N)
    int *rank_first;          // (W + 1) rank r's events are [rank_first[r], rank_first[r + 1])
    int *msg;                 // (N) the message's index in [0, 2 * D * S * M), or -1
    int n_msgs;
    double copy_ms;           // one message's copy: the step's fastest SEND (0 without any)
    double *wire_ms;          // (n_msgs) its link's wire time (link_wire), 0 for a message not sent
} Step;

static bool is_compute(int type) { return type < N_COMPUTE; }
static bool is_send(int type) { return type == ACT_SEND_F || type == ACT_SEND_B; }
static bool is_recv(int type) { return type == ACT_RECV_F || type == ACT_RECV_B; }
static double ms(const ActionEvent *e) { return (e->end - e->start) * 1e3; }

// (replica, activation or gradient, sending stage, microbatch) -> index; -1 for a compute
// action or a stage or microbatch out of range.
static int msg_index(const Step *st, int replica, const ActionEvent *e) {
    int kind, sender;
    switch (e->type) {
    case ACT_SEND_F: kind = 0, sender = e->stage; break;
    case ACT_RECV_F: kind = 0, sender = e->stage - 1; break;
    case ACT_SEND_B: kind = 1, sender = e->stage; break;
    case ACT_RECV_B: kind = 1, sender = e->stage + 1; break;
    default: return -1;
    }
    if (sender < 0 || sender >= st->S || e->mb < 0 || e->mb >= st->M) return -1;
    return ((replica * 2 + kind) * st->S + sender) * st->M + e->mb;
}

static void step_init(Step *st, int W, int S, const int *stage_rank, const ActionEvent *const *events,
                      const int *n_events) {
    *st = (Step){.W = W, .S = S, .M = 1, .P = 1};
    for (int s = 0; s < S; s++) st->P = stage_rank[s] + 1 > st->P ? stage_rank[s] + 1 : st->P;
    st->rank_first = xmalloc(sizeof(int) * (size_t)(W + 1));
    for (int r = 0; r < W; r++) {
        st->rank_first[r] = st->N;
        st->N += n_events[r];
        for (int i = 0; i < n_events[r]; i++) st->M = events[r][i].mb + 1 > st->M ? events[r][i].mb + 1 : st->M;
    }
    st->rank_first[W] = st->N;
    const int D = (W + st->P - 1) / st->P;
    st->n_msgs = 2 * D * S * st->M;
    st->ev = xmalloc(sizeof(ActionEvent *) * (size_t)(st->N ? st->N : 1));
    st->msg = xmalloc(sizeof(int) * (size_t)(st->N ? st->N : 1));
    st->copy_ms = INFINITY;
    for (int r = 0; r < W; r++)
        for (int i = 0; i < n_events[r]; i++) {
            const int at = st->rank_first[r] + i;
            st->ev[at] = &events[r][i];
            st->msg[at] = msg_index(st, r / st->P, &events[r][i]);
            if (is_send(events[r][i].type)) st->copy_ms = fmin(st->copy_ms, ms(&events[r][i]));
        }
    if (isinf(st->copy_ms)) st->copy_ms = 0.0;
}

static void step_free(Step *st) {
    free(st->wire_ms);
    free(st->rank_first);
    free(st->ev);
    free(st->msg);
}

// The part of SEND or RECV event i that moved bytes, in ms. Every message of a run has the
// same size (a microbatch's activations or their gradient: rows x T x hidden), and a SEND
// copies it into the receiver's buffer without waiting, a RECV copies it out: each moves the
// bytes once, at the speed of the step's fastest SEND. What a SEND takes beyond that is time
// without a core or a lock; what a RECV takes beyond it is waiting for the peer.
static double transfer_ms(const Step *st, int i) {
    const ActionEvent *e = st->ev[i];
    return is_send(e->type) || is_recv(e->type) ? fmin(ms(e), st->copy_ms) : 0.0;
}

// Each message's wire time: between processes a message is on the wire after its SEND ends
// (the SEND only queues it), and a RECV that waited for it ends one copy after it lands.
// Per link (sender rank -> receiver rank), the least of (RECV end - SEND end - copy) over the
// step's messages is the wire time: a receiver that came late makes that difference longer,
// never shorter, and on each link some receiver usually waits. Ends are put on rank
// 0's clock with offsets; an offset's error moves time between a link and its reverse, so
// each is clamped at 0. Without offsets (threads of one process) there is no wire: all 0.
static void link_wire(Step *st, const double *offsets) {
    st->wire_ms = xcalloc((size_t)(st->n_msgs ? st->n_msgs : 1), sizeof(double));
    if (!offsets) return;
    double *send_end = xmalloc(sizeof(double) * (size_t)(st->n_msgs ? st->n_msgs : 1));
    int *sender = xmalloc(sizeof(int) * (size_t)(st->n_msgs ? st->n_msgs : 1));
    double *least = xmalloc(sizeof(double) * (size_t)st->W * (size_t)st->W);   // (W, W) sender, receiver
    for (int k = 0; k < st->n_msgs; k++) sender[k] = -1;
    for (int i = 0; i < st->W * st->W; i++) least[i] = INFINITY;
    for (int r = 0; r < st->W; r++)
        for (int i = st->rank_first[r]; i < st->rank_first[r + 1]; i++)
            if (is_send(st->ev[i]->type) && st->msg[i] >= 0)
                sender[st->msg[i]] = r, send_end[st->msg[i]] = st->ev[i]->end + offsets[r];
    for (int r = 0; r < st->W; r++)
        for (int i = st->rank_first[r]; i < st->rank_first[r + 1]; i++) {
            const int k = st->msg[i];
            if (!is_recv(st->ev[i]->type) || k < 0 || sender[k] < 0) continue;
            const double lat = (st->ev[i]->end + offsets[r] - send_end[k]) * 1e3 - transfer_ms(st, i);
            double *l = &least[sender[k] * st->W + r];
            *l = fmin(*l, lat);
        }
    for (int r = 0; r < st->W; r++)
        for (int i = st->rank_first[r]; i < st->rank_first[r + 1]; i++) {
            const int k = st->msg[i];
            if (is_recv(st->ev[i]->type) && k >= 0 && sender[k] >= 0 && isfinite(least[sender[k] * st->W + r]))
                st->wire_ms[k] = fmax(0.0, least[sender[k] * st->W + r]);
        }
    free(send_end);
    free(sender);
    free(least);
}

// Every rank's events in order, each as early as its rank is free and, for a RECV, its SEND
// has ended and its wire time passed (dur[i]: event i's duration, ms; wire: NULL, messages
// land as they are sent). Returns the makespan, or NaN when a receive never gets its send.
// ready (n_msgs), next (W) and clock (W) are scratch.
static double replay(const Step *st, const double *dur, const double *wire, double *ready, int *next, double *clock) {
    for (int k = 0; k < st->n_msgs; k++) ready[k] = NAN;
    for (int r = 0; r < st->W; r++) next[r] = st->rank_first[r], clock[r] = 0.0;
    int done = 0;
    for (bool progress = true; progress;) {
        progress = false;
        for (int r = 0; r < st->W; r++)
            for (; next[r] < st->rank_first[r + 1]; next[r]++, done++, progress = true) {
                const int i = next[r], k = st->msg[i], type = st->ev[i]->type;
                if (is_recv(type) && k >= 0 && isnan(ready[k])) break;
                const double start = is_recv(type) && k >= 0 ? fmax(clock[r], ready[k]) : clock[r];
                clock[r] = start + dur[i];
                if (is_send(type) && k >= 0) ready[k] = clock[r] + (wire ? wire[k] : 0.0);
            }
    }
    double makespan = 0.0;
    for (int r = 0; r < st->W; r++) makespan = fmax(makespan, clock[r]);
    return done == st->N ? makespan : NAN;
}

// Mean duration (ms) of each compute type, over all stages (by_stage false) or per stage.
static void mean_costs(const Step *st, bool by_stage, double *mean /* (S * N_COMPUTE) */) {
    const int n = st->S * N_COMPUTE;
    double *sum = xcalloc((size_t)n, sizeof(double));
    int *count = xcalloc((size_t)n, sizeof(int));
    for (int i = 0; i < st->N; i++) {
        const ActionEvent *e = st->ev[i];
        if (!is_compute(e->type) || e->stage < 0 || e->stage >= st->S) continue;
        const int at = (by_stage ? e->stage : 0) * N_COMPUTE + e->type;
        sum[at] += ms(e);
        count[at]++;
    }
    for (int j = 0; j < n; j++) mean[j] = count[j] ? sum[j] / count[j] : 0.0;
    free(sum);
    free(count);
}

// Durations for one replay: compute actions at the mean costs, messages at `comm` (NULL: free).
static void fill_durations(const Step *st, const double *mean, bool by_stage, const double *comm, double *dur) {
    for (int i = 0; i < st->N; i++) {
        const ActionEvent *e = st->ev[i];
        const bool known = is_compute(e->type) && e->stage >= 0 && e->stage < st->S;
        if (known) dur[i] = mean[(by_stage ? e->stage : 0) * N_COMPUTE + e->type];
        else dur[i] = is_compute(e->type) ? ms(e) : comm ? comm[i] : 0.0;
    }
}

// The three replays' bubbles at the measured busy total: ideal, + imbalance, + transfer.
static void replay_parts(const Step *st, const double *xfer, double busy, BubbleParts *parts) {
    double *mean = xmalloc(sizeof(double) * (size_t)st->S * N_COMPUTE);
    double *dur = xmalloc(sizeof(double) * (size_t)(st->N ? st->N : 1));
    double *ready = xmalloc(sizeof(double) * (size_t)st->n_msgs), *clock = xmalloc(sizeof(double) * (size_t)st->W);
    int *next = xmalloc(sizeof(int) * (size_t)st->W);
    double bubble[3];
    for (int pass = 0; pass < 3; pass++) {
        const bool by_stage = pass > 0;
        mean_costs(st, by_stage, mean);
        fill_durations(st, mean, by_stage, pass == 2 ? xfer : NULL, dur);
        const double span = replay(st, dur, pass == 2 ? st->wire_ms : NULL, ready, next, clock);
        bubble[pass] = span > 0 ? 1.0 - busy / (st->W * span) : NAN;
    }
    parts->valid = isfinite(bubble[0]) && isfinite(bubble[1]) && isfinite(bubble[2]);
    parts->ideal = bubble[0];
    parts->imbalance = bubble[1] - bubble[0];
    parts->transfer = bubble[2] - bubble[1];
    free(mean);
    free(dur);
    free(ready);
    free(clock);
    free(next);
}

void telemetry_attribute(int n_ranks, int n_stages, const int *stage_rank, const ActionEvent *const *events,
                         const int *n_events, const double *offsets, StepTelemetry *out) {
    out->parts = (BubbleParts){.valid = false};
    if (n_ranks <= 0 || n_stages <= 0) return;
    Step st;
    step_init(&st, n_ranks, n_stages, stage_rank, events, n_events);
    double *xfer = xmalloc(sizeof(double) * (size_t)(st.N ? st.N : 1));
    double busy = 0.0;
    for (int r = 0; r < n_ranks; r++) {
        RankTelemetry *rt = &out->ranks[r];
        rt->transfer_ms = 0.0;
        for (int i = st.rank_first[r]; i < st.rank_first[r + 1]; i++) {
            rt->transfer_ms += xfer[i] = transfer_ms(&st, i);
            const int s = st.ev[i]->stage;
            if (s >= 0 && s < n_stages) out->stages[s].transfer_ms += xfer[i];
        }
        rt->wait_ms = fmax(0.0, out->step_ms - rt->busy_ms - rt->transfer_ms);
        busy += rt->busy_ms;
    }
    if (st.N > 0 && out->step_ms > 0) {
        link_wire(&st, offsets);
        replay_parts(&st, xfer, busy, &out->parts);
        out->parts.contention = out->bubble - out->parts.ideal - out->parts.imbalance - out->parts.transfer;
    }
    free(xfer);
    step_free(&st);
}
