// The built-in schedule generators: pure functions of (P ranks, M microbatches, V stages per
// rank) that emit compute actions only (schedule_lower adds the messages); the registry
// (engine/schedule/schedule_registry.c) names them and checks their arguments. Each follows the
// torch.distributed.pipelining class of the same name, so a CSV dumped by either side lists
// the same actions in the same order (torch's idle slots are simply left out).
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "engine/schedule/schedule_gen.h"

// GPipe (torch ScheduleGPipe): every forward, then every backward, microbatches in order.
// Peak activations: M on every stage.
Schedule *schedule_gen_gpipe(int P, int M, int V, Error *err) {
    (void)V, (void)err;
    Schedule *s = schedule_new("gpipe", P, P, M, STAGE_MAP_PLAIN);
    for (int r = 0; r < P; r++) {
        for (int mb = 0; mb < M; mb++) schedule_push(s, r, ACT_F, r, mb);
        for (int mb = 0; mb < M; mb++) schedule_push(s, r, ACT_B, r, mb);
    }
    return s;
}

// 1F1B (torch Schedule1F1B): P-1-r warm-up forwards, then one forward and one backward in
// turn, then the remaining backwards. Rank r holds at most P-r microbatches.
Schedule *schedule_gen_1f1b(int P, int M, int V, Error *err) {
    (void)V, (void)err;
    Schedule *s = schedule_new("1f1b", P, P, M, STAGE_MAP_PLAIN);
    for (int r = 0; r < P; r++) {
        int warmup = P - 1 - r < M ? P - 1 - r : M;
        for (int mb = 0; mb < warmup; mb++) schedule_push(s, r, ACT_F, r, mb);
        for (int k = 0; k < M - warmup; k++) {
            schedule_push(s, r, ACT_F, r, warmup + k);
            schedule_push(s, r, ACT_B, r, k);
        }
        for (int mb = M - warmup; mb < M; mb++) schedule_push(s, r, ACT_B, r, mb);
    }
    return s;
}

// Looped BFS (torch ScheduleLoopedBFS): rank r holds stages r, r+P, ...; it runs every
// microbatch forward through its first stage, then its next stage, ...; then the backwards
// in reverse stage order, microbatches last to first.
Schedule *schedule_gen_looped_bfs(int P, int M, int V, Error *err) {
    (void)err;
    Schedule *s = schedule_new("looped-bfs", P, P * V, M, STAGE_MAP_LOOP);
    for (int r = 0; r < P; r++) {
        for (int v = 0; v < V; v++)
            for (int mb = 0; mb < M; mb++) schedule_push(s, r, ACT_F, v * P + r, mb);
        for (int v = V - 1; v >= 0; v--)
            for (int mb = M - 1; mb >= 0; mb--) schedule_push(s, r, ACT_B, v * P + r, mb);
    }
    return s;
}

// ---- interleaved 1F1B and ZB-H1: torch's _get_1f1b_rank_ops ----------------------------------
//
// Rank r runs V*M forwards and V*M backwards as "ops": op k < warmup is a forward alone;
// warmup <= k < V*M is a forward then a backward; the rest are backwards alone. Forwards
// visit the rank's local stages in rounds of mpr microbatches (depth first: all of a round on
// local stage 0, then the same round on local stage 1, ...); backwards visit them in reverse.
// With zero_bubble the backward is I, and W of the k-th backward is emitted after op
// warmup + k + delay, filling the bubbles that wait for gradients.
typedef struct {
    int P, V, M, rank;
    int mpr;          // microbatches per round
    int warmup;       // forward-only ops
    bool zero_bubble;
    int delay;        // ops a W trails its I (zero_bubble)
    int *next_f, *next_b, *next_w;  // (S) next microbatch of each action kind per stage
} RankOps;

static int ops_fwd_stage(const RankOps *o, int op) {
    return ((op / o->mpr) % o->V) * o->P + o->rank;
}

static int ops_bwd_stage(const RankOps *o, int op) {
    return (o->V - 1 - ((op - o->warmup) / o->mpr) % o->V) * o->P + o->rank;
}

static void ops_push(Schedule *s, const RankOps *o, ActionType t, int stage, int *counter) {
    schedule_push(s, o->rank, t, stage, counter[stage]++);
}

// Emits the backward of op (B, or I then the W that is due).
static void ops_backward(Schedule *s, RankOps *o, int op, int *w_done) {
    ops_push(s, o, o->zero_bubble ? ACT_I : ACT_B, ops_bwd_stage(o, op), o->next_b);
    if (o->zero_bubble && op - o->warmup >= o->delay) {
        ops_push(s, o, ACT_W, ops_bwd_stage(o, o->warmup + *w_done), o->next_w);
        ++*w_done;
    }
}

static void ops_emit(Schedule *s, RankOps *o) {
    int total = o->V * o->M, w_done = 0;
    for (int op = 0; op < total + o->warmup; op++) {
        if (op < total) ops_push(s, o, ACT_F, ops_fwd_stage(o, op), o->next_f);
        if (op >= o->warmup) ops_backward(s, o, op, &w_done);
    }
    for (; o->zero_bubble && w_done < total; w_done++)
        ops_push(s, o, ACT_W, ops_bwd_stage(o, o->warmup + w_done), o->next_w);
}

// Runs ops_emit for every rank. warmup_hops: 2 for interleaved 1F1B (a forward and a backward
// per hop before the first gradient returns), 1 for zero bubble (torch's multiply_factor).
static void build_rank_ops(Schedule *s, int P, int M, int V, int warmup_hops, bool zero_bubble) {
    int rounds = M / P > 1 ? M / P : 1;
    int *counters = xcalloc(3 * (size_t)(P * V), sizeof(int));
    for (int r = 0; r < P; r++) {
        memset(counters, 0, 3 * sizeof(int) * (size_t)(P * V));
        RankOps o = {P, V, M, r, M / rounds, 0, zero_bubble, r, counters, counters + P * V, counters + 2 * P * V};
        o.warmup = (V - 1) * o.mpr + warmup_hops * (P - 1 - r);
        if (o.warmup > V * M) o.warmup = V * M;
        ops_emit(s, &o);
    }
    free(counters);
}

// The interleaved schedules run M in rounds of P microbatches, and torch requires M to be a
// multiple of the number of rounds max(1, M / P); false with err naming the schedule otherwise.
static bool whole_rounds(const char *name, int P, int M, Error *err) {
    const int rounds = M / P > 1 ? M / P : 1;
    if (M % rounds == 0) return true;
    error_set(err, "%s needs the microbatches to be a multiple of max(1, M / P) = %d "
                   "(got M = %d, P = %d; any multiple of P works)", name, rounds, M, P);
    return false;
}

// Interleaved 1F1B (Narayanan et al. 2021; torch ScheduleInterleaved1F1B): V stages per
// rank, stage s on rank s % P. Like torch it needs M to be a multiple of the number of rounds
// max(1, M / P); M % P == 0 is the paper's form.
Schedule *schedule_gen_interleaved_1f1b(int P, int M, int V, Error *err) {
    if (!whole_rounds("interleaved-1f1b", P, M, err)) return NULL;
    Schedule *s = schedule_new("interleaved-1f1b", P, P * V, M, STAGE_MAP_LOOP);
    build_rank_ops(s, P, M, V, 2, false);
    return s;
}

// Interleaved zero bubble (torch ScheduleInterleavedZeroBubble with V stages per rank; ZB-H1
// is its V = 1): interleaved 1F1B's rounds and stage map (stage s on rank s % P), one op of
// warm-up per hop instead of two, the backward split into I and W, rank r's W's trailing
// their I's by r ops. M must be a multiple of the rounds max(1, M / P), as torch requires.
Schedule *schedule_gen_interleaved_zb(int P, int M, int V, Error *err) {
    if (!whole_rounds("interleaved-zb", P, M, err)) return NULL;
    Schedule *s = schedule_new("interleaved-zb", P, P * V, M, STAGE_MAP_LOOP);
    build_rank_ops(s, P, M, V, 1, true);
    return s;
}

// ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism"; torch's zero-bubble ops with one
// stage per rank): 1F1B's warm-up, backward split into I and W, rank r holding back its W's
// by r ops so they fill the cooldown bubbles. Bubble (P-1)(F+I-W) instead of 1F1B's
// (P-1)(F+I+W); rank r holds at most P microbatches, as 1F1B's rank 0 does.
Schedule *schedule_gen_zb_h1(int P, int M, int V, Error *err) {
    (void)V, (void)err;
    Schedule *s = schedule_new("zb-h1", P, P, M, STAGE_MAP_PLAIN);
    build_rank_ops(s, P, M, 1, 1, true);
    return s;
}

// ZB-V (Qi et al. 2023, section 6; torch ScheduleZBVZeroBubble): 2P stages in a V, rank r
// holding stages r (chunk 0) and 2P-1-r (chunk 1). Built for max(M, 2P-1) microbatches,
// then the actions of microbatches >= M are dropped, as torch does.
typedef struct {
    Schedule *s;
    int rank, M;
    int stage[2];  // the rank's chunk 0 and chunk 1 stages
    int f[2], b[2], w[2];
} ZbvRank;

static void zbv_push(ZbvRank *z, ActionType t, int chunk, int *counter) {
    int mb = counter[chunk]++;
    if (mb < z->M) schedule_push(z->s, z->rank, t, z->stage[chunk], mb);
}

static void zbv_warmup(ZbvRank *z, int P) {
    for (int k = 0; k < 2 * (P - z->rank) - 1; k++) zbv_push(z, ACT_F, 0, z->f);
    for (int k = 0; k < z->rank; k++) {
        zbv_push(z, ACT_F, 1, z->f);
        zbv_push(z, ACT_F, 0, z->f);
    }
    for (int k = 0; k < P - z->rank; k++) {
        zbv_push(z, ACT_F, 1, z->f);
        zbv_push(z, ACT_I, 1, z->b);
        zbv_push(z, ACT_W, 1, z->w);
    }
}

static void zbv_steady(ZbvRank *z, int n_micro) {
    while (z->f[1] < z->f[0] || z->f[0] < n_micro) {
        if (z->f[0] < n_micro) zbv_push(z, ACT_F, 0, z->f);
        zbv_push(z, ACT_I, 0, z->b);
        zbv_push(z, ACT_W, 0, z->w);
        zbv_push(z, ACT_F, 1, z->f);
        zbv_push(z, ACT_I, 1, z->b);
        zbv_push(z, ACT_W, 1, z->w);
    }
}

static void zbv_cooldown(ZbvRank *z, int P) {
    for (int k = 0; k < z->rank; k++) {
        zbv_push(z, ACT_I, 0, z->b);
        zbv_push(z, ACT_I, 1, z->b);
    }
    for (int k = 0; k < P - z->rank; k++) {
        zbv_push(z, ACT_I, 0, z->b);
        zbv_push(z, ACT_W, 0, z->w);
    }
    while (z->w[1] < z->b[1]) zbv_push(z, ACT_W, 1, z->w);
    while (z->w[0] < z->b[0]) zbv_push(z, ACT_W, 0, z->w);
}

Schedule *schedule_gen_zb_v(int P, int M, int V, Error *err) {
    (void)V, (void)err;
    Schedule *s = schedule_new("zb-v", P, 2 * P, M, STAGE_MAP_V);
    int n_micro = M > 2 * P - 1 ? M : 2 * P - 1;
    for (int r = 0; r < P; r++) {
        ZbvRank z = {s, r, M, {r, 2 * P - 1 - r}, {0, 0}, {0, 0}, {0, 0}};
        zbv_warmup(&z, P);
        zbv_steady(&z, n_micro);
        zbv_cooldown(&z, P);
    }
    return s;
}

// ---- DualPipeV (DeepSeek-V3 report, 2024; torch ScheduleDualPipeV) ---------------------------
//
// zb-v's stage map (rank r holds chunk 0 = stage r and chunk 1 = stage 2P-1-r). In the main
// phase each rank pairs one chunk's forward with the other chunk's full backward, which torch
// runs as one action, "(0F3;3B1)OVERLAP_F_B", so that one's compute hides the other's
// messages. pptrain holds the pair as its two sub-actions, forward first, the forward marked
// overlap_next, exactly as it reads torch's CSV (schedule_csv.c) and writes it back; the
// runtime runs the F and then the B: a CPU rank has one stream. Backwards are split (I now, W later, oldest first) only while the pipe fills and
// drains, where the W's fill the gaps. Needs M >= 2P (the registry refuses fewer, as torch
// does). The phases below are torch's steps 1-8, rank r of P.
typedef struct {
    Schedule *s;
    int rank;
    int stage[2];                         // the rank's chunk 0 and chunk 1 stages
    int f[2], b[2];                       // next microbatch of each chunk's F / backward (B or I)
    int *w_stage, *w_mb, w_head, w_tail;  // (2M) I's whose W is still due, oldest first
} DualRank;

static void dual_push(DualRank *d, ActionType t, int chunk) {
    int *counter = t == ACT_F ? d->f : d->b;
    int mb = counter[chunk]++;
    schedule_push(d->s, d->rank, t, d->stage[chunk], mb);
    if (t == ACT_I) {
        d->w_stage[d->w_tail] = d->stage[chunk];
        d->w_mb[d->w_tail++] = mb;
    }
}

// torch's add_overlap_f_b: chunk f_chunk's forward overlapped with chunk b_chunk's full backward.
static void dual_overlap(DualRank *d, int f_chunk, int b_chunk) {
    dual_push(d, ACT_F, f_chunk);
    ScheduleList *l = &d->s->ranks[d->rank];
    l->actions[l->n - 1].overlap_next = true;
    dual_push(d, ACT_B, b_chunk);
}

static void dual_weight(DualRank *d) {
    if (d->w_head == d->w_tail) return;
    schedule_push(d->s, d->rank, ACT_W, d->w_stage[d->w_head], d->w_mb[d->w_head]);
    d->w_head++;
}

static void dual_rank(DualRank *d, int P, int M) {
    const int r = d->rank;
    // Fill: chunk 0 forwards, then both chunks' forwards in turn, then chunk 1's first
    // backwards split, each W right after its I.
    for (int k = 0; k < 2 * (P - r - 1); k++) dual_push(d, ACT_F, 0);
    for (int k = 0; k < r + 1; k++) {
        dual_push(d, ACT_F, 0);
        dual_push(d, ACT_F, 1);
    }
    for (int k = 0; k < P - r - 1; k++) {
        dual_push(d, ACT_I, 1);
        dual_weight(d);
        dual_push(d, ACT_F, 1);
    }
    // The main phase: (F0;B1) then (F1;B0). torch does not overlap the first pair on the last
    // rank: its F0 and B1 run apart.
    // Then chunk 1's forwards run out: B1, (F1;B0).
    for (int k = 0; k < M - 2 * P + r + 1; k++) {
        if (k == 0 && r == P - 1) {
            dual_push(d, ACT_F, 0);
            dual_push(d, ACT_B, 1);
        } else {
            dual_overlap(d, 0, 1);
        }
        dual_overlap(d, 1, 0);
    }
    for (int k = 0; k < P - r - 1; k++) {
        dual_push(d, ACT_B, 1);
        dual_overlap(d, 1, 0);
    }
    // The last r+1 backward pairs switch to I (W later) half-way: before chunk 1's on odd
    // ranks, between the two chunks on even ones.
    bool split = false;
    for (int k = 0; k < r + 1; k++) {
        if (k == (r + 1) / 2 && r % 2 == 1) split = true;
        dual_push(d, split ? ACT_I : ACT_B, 1);
        if (k == (r + 1) / 2 && r % 2 == 0) split = true;
        dual_push(d, split ? ACT_I : ACT_B, 0);
    }
    // Drain: chunk 0's last backwards, each after a pending W; then the W's left.
    for (int k = 0; k < P - r - 1; k++) {
        dual_weight(d);
        dual_push(d, split ? ACT_I : ACT_B, 0);
    }
    while (d->w_head < d->w_tail) dual_weight(d);
}

Schedule *schedule_gen_dualpipe_v(int P, int M, int V, Error *err) {
    (void)V, (void)err;
    assert(M >= 2 * P);  // the registry's minimum
    Schedule *s = schedule_new("dualpipe-v", P, 2 * P, M, STAGE_MAP_V);
    int *queue = xmalloc(sizeof(int) * 4 * (size_t)M);
    for (int r = 0; r < P; r++) {
        DualRank d = {s, r, {r, 2 * P - 1 - r}, {0, 0}, {0, 0}, queue, queue + 2 * M, 0, 0};
        dual_rank(&d, P, M);
        assert(d.f[0] == M && d.f[1] == M && d.b[0] == M && d.b[1] == M);
    }
    free(queue);
    return s;
}
