// The per-rank interpreter of a lowered schedule. Set-up walks the action list once to find
// where each (stage, microbatch) activation slot is first and last used, which gives the
// slot pools' sizes (the schedule's peak in-flight microbatches per stage) and the points
// where a step takes and frees slots; the step itself then allocates nothing.
#include "engine/runtime.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

// The slots of one local stage: slot k is acts[k] plus msg[k], the buffer a RECV_F or RECV_B
// fills and the following F or B/I reads.
typedef struct {
    StageModel *model;
    int n_slots;
    StageActs **acts;   // (n_slots)
    float **msg;        // (n_slots) each (rows*T*C)
    int *free_slots;    // (n_slots) stack of free slot indices
    int n_free;
} StagePool;

struct Runtime {
    const Schedule *sched;
    const ScheduleList *list;  // this rank's actions
    int rank, S, M, rows, T;
    size_t msg_floats;         // rows*T*C: one activation or gradient message
    Transport *tp;
    int *local;                // (S) index among this rank's stages, -1 for another rank's
    int n_local;
    StagePool *pool;           // (n_local)
    // A slot key is local * M + mb.
    int *slot_of;              // (n_local * M) slot held by a key, -1 when none
    int *acquire;              // (n actions) key taking a slot before the action, or -1
    int (*release)[2];         // (n actions) keys freeing their slot after the action, or -1
    double *mb_loss;           // (M) last stage: each microbatch's loss contribution
};

typedef struct {
    const int32_t *inputs, *targets;
    float loss_scale;
} StepData;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static bool same_rank(const Runtime *rt, int stage) {
    return stage >= 0 && stage < rt->S && rt->local[stage] >= 0;
}

static int key_of(const Runtime *rt, int stage, int mb) {
    return rt->local[stage] * rt->M + mb;
}

// Slot keys action a reads or writes: its own (stage, mb), plus the neighbour stage's on this
// rank whose output (F) or input gradient (B, I) it takes directly. Returns how many.
static int action_keys(const Runtime *rt, Action a, int keys[2]) {
    int n = 0;
    keys[n++] = key_of(rt, a.stage, a.mb);
    if (a.type == ACT_F && a.stage > 0 && same_rank(rt, a.stage - 1)) keys[n++] = key_of(rt, a.stage - 1, a.mb);
    if ((a.type == ACT_B || a.type == ACT_I) && same_rank(rt, a.stage + 1)) keys[n++] = key_of(rt, a.stage + 1, a.mb);
    return n;
}

// Fills acquire/release from each key's first and last use; returns each local stage's peak.
static void plan_slots(Runtime *rt, int *peak) {
    const int n = rt->list->n, n_keys = rt->n_local * rt->M;
    int *first = xmalloc(sizeof(int) * (size_t)n_keys), *last = xmalloc(sizeof(int) * (size_t)n_keys);
    for (int k = 0; k < n_keys; k++) first[k] = last[k] = -1;
    for (int i = 0; i < n; i++) {
        int keys[2], nk = action_keys(rt, rt->list->actions[i], keys);
        for (int j = 0; j < nk; j++) {
            if (first[keys[j]] < 0) first[keys[j]] = i;
            last[keys[j]] = i;
        }
    }
    for (int i = 0; i < n; i++) rt->acquire[i] = rt->release[i][0] = rt->release[i][1] = -1;
    for (int k = 0; k < n_keys; k++) {
        if (first[k] < 0) continue;
        rt->acquire[first[k]] = k;  // a key's first use is its own RECV_F or F: one per action
        int *r = rt->release[last[k]];
        r[r[0] < 0 ? 0 : 1] = k;
    }
    int *live = xcalloc((size_t)rt->n_local, sizeof(int));
    for (int i = 0; i < n; i++) {
        int k = rt->acquire[i];
        if (k >= 0 && ++live[k / rt->M] > peak[k / rt->M]) peak[k / rt->M] = live[k / rt->M];
        for (int j = 0; j < 2; j++)
            if (rt->release[i][j] >= 0) live[rt->release[i][j] / rt->M]--;
    }
    free(live);
    free(first);
    free(last);
}

static void pool_init(StagePool *p, StageModel *model, int n_slots, int rows, int T, size_t msg_floats) {
    p->model = model;
    p->n_slots = n_slots;
    p->acts = xmalloc(sizeof(StageActs *) * (size_t)(n_slots ? n_slots : 1));
    p->msg = xmalloc(sizeof(float *) * (size_t)(n_slots ? n_slots : 1));
    p->free_slots = xmalloc(sizeof(int) * (size_t)(n_slots ? n_slots : 1));
    for (int k = 0; k < n_slots; k++) {
        p->acts[k] = stage_acts_create(model, rows, T);
        p->msg[k] = xmalloc(sizeof(float) * msg_floats);
        p->free_slots[k] = n_slots - 1 - k;  // slot 0 on top
    }
    p->n_free = n_slots;
}

static void pool_free(StagePool *p) {
    for (int k = 0; k < p->n_slots; k++) {
        stage_acts_free(p->acts[k]);
        free(p->msg[k]);
    }
    free(p->acts);
    free(p->msg);
    free(p->free_slots);
}

Runtime *runtime_create(const Schedule *sched, int rank, StageModel *const *stages, int rows, int T,
                        Transport *tp) {
    Runtime *rt = xcalloc(1, sizeof *rt);
    *rt = (Runtime){.sched = sched, .list = &sched->ranks[rank], .rank = rank, .S = sched->n_stages,
                    .M = sched->n_microbatches, .rows = rows, .T = T, .tp = tp};
    rt->local = xmalloc(sizeof(int) * (size_t)rt->S);
    for (int s = 0; s < rt->S; s++) rt->local[s] = sched->stage_rank[s] == rank ? rt->n_local++ : -1;
    const int n = rt->list->n, n_keys = rt->n_local * rt->M;
    rt->slot_of = xmalloc(sizeof(int) * (size_t)(n_keys ? n_keys : 1));
    for (int k = 0; k < n_keys; k++) rt->slot_of[k] = -1;
    rt->acquire = xmalloc(sizeof(int) * (size_t)(n ? n : 1));
    rt->release = xmalloc(sizeof(int[2]) * (size_t)(n ? n : 1));
    rt->mb_loss = xcalloc((size_t)rt->M, sizeof(double));
    int *peak = xcalloc((size_t)(rt->n_local ? rt->n_local : 1), sizeof(int));
    plan_slots(rt, peak);
    rt->pool = xcalloc((size_t)(rt->n_local ? rt->n_local : 1), sizeof(StagePool));
    for (int s = 0; s < rt->S; s++) {
        if (rt->local[s] < 0) continue;
        rt->msg_floats = (size_t)rows * T * stages[s]->cfg.hidden;
        pool_init(&rt->pool[rt->local[s]], stages[s], peak[rt->local[s]], rows, T, rt->msg_floats);
    }
    free(peak);
    return rt;
}

void runtime_free(Runtime *rt) {
    if (!rt) return;
    for (int l = 0; l < rt->n_local; l++) pool_free(&rt->pool[l]);
    free(rt->pool);
    free(rt->local);
    free(rt->slot_of);
    free(rt->acquire);
    free(rt->release);
    free(rt->mb_loss);
    free(rt);
}

int runtime_peak_slots(const Runtime *rt, int stage) {
    return rt->local[stage] >= 0 ? rt->pool[rt->local[stage]].n_slots : 0;
}

// ---- one step ---------------------------------------------------------------------------

static StagePool *pool_of(const Runtime *rt, int stage) { return &rt->pool[rt->local[stage]]; }

static int slot_index(const Runtime *rt, int stage, int mb) { return rt->slot_of[key_of(rt, stage, mb)]; }

static StageActs *acts_of(const Runtime *rt, int stage, int mb) {
    return pool_of(rt, stage)->acts[slot_index(rt, stage, mb)];
}

static float *msg_of(const Runtime *rt, int stage, int mb) {
    return pool_of(rt, stage)->msg[slot_index(rt, stage, mb)];
}

static void slot_take(Runtime *rt, int key) {
    StagePool *p = &rt->pool[key / rt->M];
    rt->slot_of[key] = p->free_slots[--p->n_free];  // the plan sized the pool for its peak
}

static void slot_give_back(Runtime *rt, int key) {
    StagePool *p = &rt->pool[key / rt->M];
    p->free_slots[p->n_free++] = rt->slot_of[key];
    rt->slot_of[key] = -1;
}

// F: stage 0 embeds the microbatch's tokens; later stages read the stage below's output,
// directly when it is on this rank, else from the slot's message; the last stage adds the loss.
static void run_forward(Runtime *rt, Action a, const StepData *d) {
    const size_t off = (size_t)a.mb * rt->rows * rt->T;
    const int32_t *tokens = a.stage == 0 ? d->inputs + off : NULL;
    const float *input = NULL;
    if (a.stage > 0) input = same_rank(rt, a.stage - 1) ? stage_acts_output(acts_of(rt, a.stage - 1, a.mb))
                                                        : msg_of(rt, a.stage, a.mb);
    const bool last = a.stage == rt->S - 1;
    double loss = stage_forward(pool_of(rt, a.stage)->model, acts_of(rt, a.stage, a.mb), tokens, input,
                                last ? d->targets + off : NULL, d->loss_scale);
    if (last) rt->mb_loss[a.mb] = loss;
}

// B or I: the output gradient comes from the stage above (directly when on this rank, else
// the slot's message); the last stage's forward already made its own.
static const float *backward_dout(const Runtime *rt, Action a) {
    if (a.stage == rt->S - 1) return NULL;
    return same_rank(rt, a.stage + 1) ? stage_acts_dinput(acts_of(rt, a.stage + 1, a.mb)) : msg_of(rt, a.stage, a.mb);
}

static TransportStatus run_comm(Runtime *rt, Action a, Error *err) {
    const int *owner = rt->sched->stage_rank;
    const size_t bytes = rt->msg_floats * sizeof(float);
    switch (a.type) {
    case ACT_SEND_F:
        return transport_send(rt->tp, rt->rank, owner[a.stage + 1], transport_tag(MSG_ACT, a.stage, a.mb, rt->S),
                              stage_acts_output(acts_of(rt, a.stage, a.mb)), bytes, err);
    case ACT_RECV_F:
        return transport_recv(rt->tp, rt->rank, owner[a.stage - 1], transport_tag(MSG_ACT, a.stage - 1, a.mb, rt->S),
                              msg_of(rt, a.stage, a.mb), bytes, err);
    case ACT_SEND_B:
        return transport_send(rt->tp, rt->rank, owner[a.stage - 1], transport_tag(MSG_GRAD, a.stage, a.mb, rt->S),
                              stage_acts_dinput(acts_of(rt, a.stage, a.mb)), bytes, err);
    case ACT_RECV_B:
        return transport_recv(rt->tp, rt->rank, owner[a.stage + 1], transport_tag(MSG_GRAD, a.stage + 1, a.mb, rt->S),
                              msg_of(rt, a.stage, a.mb), bytes, err);
    default: return TRANSPORT_OK;
    }
}

// Runs one action; compute time is added to *busy_s.
static TransportStatus run_action(Runtime *rt, Action a, const StepData *d, double *busy_s, Error *err) {
    if (schedule_is_comm(a.type)) return run_comm(rt, a, err);
    const double t0 = now_s();
    StageModel *m = pool_of(rt, a.stage)->model;
    switch (a.type) {
    case ACT_F: run_forward(rt, a, d); break;
    case ACT_B: stage_backward(m, acts_of(rt, a.stage, a.mb), backward_dout(rt, a)); break;
    case ACT_I: stage_backward_input(m, acts_of(rt, a.stage, a.mb), backward_dout(rt, a)); break;
    case ACT_W: stage_backward_weight(m, acts_of(rt, a.stage, a.mb)); break;
    default: break;
    }
    *busy_s += now_s() - t0;
    return TRANSPORT_OK;
}

// Frees every slot still held (after a failed step), so the next step starts clean.
static void release_all(Runtime *rt) {
    for (int k = 0; k < rt->n_local * rt->M; k++)
        if (rt->slot_of[k] >= 0) slot_give_back(rt, k);
}

RuntimeStatus runtime_step(Runtime *rt, const int32_t *inputs, const int32_t *targets, float loss_scale,
                           RuntimeStats *stats, Error *err) {
    const StepData d = {inputs, targets, loss_scale};
    *stats = (RuntimeStats){0};
    memset(rt->mb_loss, 0, sizeof(double) * (size_t)rt->M);
    for (int i = 0; i < rt->list->n; i++) {
        const Action a = rt->list->actions[i];
        if (rt->acquire[i] >= 0) slot_take(rt, rt->acquire[i]);
        Error why;
        TransportStatus st = run_action(rt, a, &d, &stats->busy_s, &why);
        if (st != TRANSPORT_OK) {
            error_set(err, "rank %d (stage %d): %s at action %d (%s %d,mb %d)", rt->rank, a.stage, why.msg, i,
                      schedule_type_name(a.type), a.stage, a.mb);
            transport_abort(rt->tp);
            release_all(rt);
            return st == TRANSPORT_ABORTED ? RUNTIME_ABORTED : RUNTIME_FAILED;
        }
        for (int j = 0; j < 2; j++)
            if (rt->release[i][j] >= 0) slot_give_back(rt, rt->release[i][j]);
    }
    // Microbatch order, as the single-device trainer sums them.
    for (int mb = 0; mb < rt->M; mb++) stats->loss += rt->mb_loss[mb];
    return RUNTIME_OK;
}
