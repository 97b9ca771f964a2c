// The per-rank interpreter of a lowered schedule. Set-up walks the action list once to find
// where each (stage, microbatch) activation slot is first and last used, which gives the
// slot pools' sizes (the schedule's peak in-flight microbatches per stage) and the points
// where a step takes and frees slots, and under recompute the size of each stage's workspace
// pool; the step itself then allocates nothing.
#include "engine/runtime.h"
#include "engine/clock.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// A stack of free indices 0..n-1 (slots or workspaces).
typedef struct {
    int *free;          // (n)
    int n_free;
} FreeStack;

// The slots of one local stage: slot k is acts[k] plus msg[k], the buffer a RECV_F or RECV_B
// fills and the following F or B/I reads. Under recompute acts[k] is light and ws[] holds the
// full workspaces the compute actions borrow.
typedef struct {
    StageModel *model;
    int n_slots, n_ws;
    StageActs **acts;   // (n_slots)
    void **msg;         // (n_slots) each one message (stage_msg_bytes) on the stage's device
    FreeStack slots;
    StageActs **ws;     // (n_ws) recompute only
    FreeStack wss;
} StagePool;

struct Runtime {
    const Schedule *sched;
    const ScheduleList *list;  // this rank's actions
    int rank, S, M, rows, T;
    bool recompute;
    bool post_one_ahead;       // RuntimeOptions.post_one_ahead
    int next_post;             // post_one_ahead: the next RECV action whose receive is not posted, or n
    size_t msg_bytes;          // one activation or gradient message (stage_msg_bytes)
    Transport *tp;
    int *local;                // (S) index among this rank's stages, -1 for another rank's
    int n_local;
    StagePool *pool;           // (n_local)
    // A slot key is local * M + mb.
    int *slot_of;              // (n_local * M) slot held by a key, -1 when none
    int *acquire;              // (n actions) key taking a slot before the action, or -1
    int (*release)[2];         // (n actions) keys freeing their slot after the action, or -1
    int *ws_of;                // (n_local * M) recompute: workspace a key holds from I to W, or -1
    double *mb_loss;           // (M) last stage: each microbatch's loss contribution
    const int32_t *tap_pos;    // (M * rows) generation: the position whose logits each row gives, or -1
    float *tap_out;            // (M * rows, V) where they go; NULL: no tap (runtime_tap_logits)
    StageKV *const *kv;        // (S) generation's caches, or NULL (runtime_use_kv)
    const int32_t *kv_pos;     // the position the prefill keeps up to, or the decoded token's
    bool kv_decode;            // F is stage_decode of one token (else a prefill when kv is set)
    ActionEvent *events;       // (n actions) the last step's, in execution order
    int n_events;
    bool *device_timed;        // (n_local) the stage queues its work: its compute actions are marked
    bool *device_settled;      // (n_local) its events of the last step are device time already
};

typedef struct {
    const int32_t *inputs, *targets;
    float loss_scale;
} StepData;

static bool same_rank(const Runtime *rt, int stage) {
    return stage >= 0 && stage < rt->S && rt->local[stage] >= 0;
}

static int key_of(const Runtime *rt, int stage, int mb) {
    return rt->local[stage] * rt->M + mb;
}

// Slot keys action a reads or writes: its own (stage, mb), plus the neighbour stage's on this
// rank whose output (F) or input gradient (B, I) it takes directly. Returns how many. Under
// recompute a W reads only its workspace, so a light slot is freed after its I (or SEND_B).
static int action_keys(const Runtime *rt, Action a, int keys[2]) {
    int n = 0;
    if (rt->recompute && a.type == ACT_W) return 0;
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

// Recompute: each local stage's workspace peak. F and B borrow one for their own duration, I
// keeps it until the W of its microbatch, so a compute action needs one more than the
// microbatches then held between I and W.
static void plan_workspaces(const Runtime *rt, int *peak) {
    int *held = xcalloc((size_t)rt->n_local, sizeof(int));
    for (int i = 0; i < rt->list->n; i++) {
        const Action a = rt->list->actions[i];
        const int l = rt->local[a.stage];
        if (a.type == ACT_W) held[l]--;
        if (a.type != ACT_F && a.type != ACT_B && a.type != ACT_I) continue;
        if (held[l] + 1 > peak[l]) peak[l] = held[l] + 1;
        if (a.type == ACT_I) held[l]++;
    }
    free(held);
}

static void stack_init(FreeStack *st, int n) {
    st->free = xmalloc(sizeof(int) * (size_t)(n ? n : 1));
    for (int k = 0; k < n; k++) st->free[k] = n - 1 - k;  // index 0 on top
    st->n_free = n;
}

static int stack_pop(FreeStack *st) {
    assert(st->n_free > 0);  // the plan sized the pool for its peak
    return st->free[--st->n_free];
}

static void stack_push(FreeStack *st, int k) { st->free[st->n_free++] = k; }

// Whether this rank's list runs a backward (B, I or W) of the stage: without one (an evaluation's
// or a sample's schedule) its slots are forward-only (stage_acts_set_forward_only).
static bool list_trains(const ScheduleList *l, int stage) {
    for (int i = 0; i < l->n; i++) {
        const Action a = l->actions[i];
        if (a.stage == stage && (a.type == ACT_B || a.type == ACT_I || a.type == ACT_W)) return true;
    }
    return false;
}

static void pool_init(StagePool *p, StageModel *model, int n_slots, int n_ws, bool light, bool forward_only, int rows,
                      int T, size_t msg_bytes) {
    p->model = model;
    p->n_slots = n_slots;
    p->n_ws = n_ws;
    p->acts = xmalloc(sizeof(StageActs *) * (size_t)(n_slots ? n_slots : 1));
    p->msg = xmalloc(sizeof(void *) * (size_t)(n_slots ? n_slots : 1));
    for (int k = 0; k < n_slots; k++) {
        p->acts[k] = light ? stage_acts_create_light(model, rows, T) : stage_acts_create(model, rows, T);
        stage_acts_set_forward_only(p->acts[k], forward_only);
        p->msg[k] = stage_msg_alloc(model, msg_bytes);
    }
    p->ws = xmalloc(sizeof(StageActs *) * (size_t)(n_ws ? n_ws : 1));
    for (int k = 0; k < n_ws; k++) p->ws[k] = stage_acts_create(model, rows, T);
    stack_init(&p->slots, n_slots);
    stack_init(&p->wss, n_ws);
}

static void pool_free(StagePool *p) {
    for (int k = 0; k < p->n_slots; k++) {
        stage_acts_free(p->acts[k]);
        stage_msg_free(p->model, p->msg[k]);
    }
    for (int k = 0; k < p->n_ws; k++) stage_acts_free(p->ws[k]);
    free(p->acts);
    free(p->msg);
    free(p->ws);
    free(p->slots.free);
    free(p->wss.free);
}

Runtime *runtime_create(const Schedule *sched, int rank, StageModel *const *stages, int rows, int T,
                        Transport *tp) {
    return runtime_create_opts(sched, rank, stages, rows, T, tp, NULL);
}

Runtime *runtime_create_opts(const Schedule *sched, int rank, StageModel *const *stages, int rows, int T,
                             Transport *tp, const RuntimeOptions *opts) {
    Runtime *rt = xcalloc(1, sizeof *rt);
    *rt = (Runtime){.sched = sched, .list = &sched->ranks[rank], .rank = rank, .S = sched->n_stages,
                    .M = sched->n_microbatches, .rows = rows, .T = T, .tp = tp,
                    .recompute = opts && opts->recompute, .post_one_ahead = opts && opts->post_one_ahead};
    rt->local = xmalloc(sizeof(int) * (size_t)rt->S);
    for (int s = 0; s < rt->S; s++) rt->local[s] = sched->stage_rank[s] == rank ? rt->n_local++ : -1;
    const int n = rt->list->n, n_keys = rt->n_local * rt->M;
    rt->slot_of = xmalloc(sizeof(int) * (size_t)(n_keys ? n_keys : 1));
    rt->ws_of = xmalloc(sizeof(int) * (size_t)(n_keys ? n_keys : 1));
    for (int k = 0; k < n_keys; k++) rt->slot_of[k] = rt->ws_of[k] = -1;
    rt->events = xcalloc((size_t)(n ? n : 1), sizeof(ActionEvent));
    rt->acquire = xmalloc(sizeof(int) * (size_t)(n ? n : 1));
    rt->release = xmalloc(sizeof(int[2]) * (size_t)(n ? n : 1));
    rt->mb_loss = xcalloc((size_t)rt->M, sizeof(double));
    int *peak = xcalloc((size_t)(rt->n_local ? rt->n_local : 1), sizeof(int));
    int *peak_ws = xcalloc((size_t)(rt->n_local ? rt->n_local : 1), sizeof(int));
    plan_slots(rt, peak);
    if (rt->recompute) plan_workspaces(rt, peak_ws);
    rt->pool = xcalloc((size_t)(rt->n_local ? rt->n_local : 1), sizeof(StagePool));
    for (int s = 0; s < rt->S; s++) {
        const int l = rt->local[s];
        if (l < 0) continue;
        rt->msg_bytes = stage_msg_bytes(stages[s], rows, T);
        pool_init(&rt->pool[l], stages[s], peak[l], peak_ws[l], rt->recompute, !list_trains(rt->list, s), rows, T,
                  rt->msg_bytes);
    }
    free(peak);
    free(peak_ws);
    // Marks 2i and 2i + 1 bracket action i on its stage's stream (runtime_device_times).
    rt->device_timed = xcalloc((size_t)(rt->n_local ? rt->n_local : 1), sizeof(bool));
    rt->device_settled = xcalloc((size_t)(rt->n_local ? rt->n_local : 1), sizeof(bool));
    for (int l = 0; l < rt->n_local; l++) {
        rt->device_timed[l] = stage_device_timed(rt->pool[l].model);
        if (rt->device_timed[l]) stage_time_reserve(rt->pool[l].model, 2 * n);
    }
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
    free(rt->ws_of);
    free(rt->mb_loss);
    free(rt->events);
    free(rt->device_timed);
    free(rt->device_settled);
    free(rt);
}

int runtime_peak_slots(const Runtime *rt, int stage) {
    return rt->local[stage] >= 0 ? rt->pool[rt->local[stage]].n_slots : 0;
}

int runtime_peak_workspaces(const Runtime *rt, int stage) {
    return rt->local[stage] >= 0 ? rt->pool[rt->local[stage]].n_ws : 0;
}

size_t runtime_peak_bytes(const Runtime *rt, int stage) {
    if (rt->local[stage] < 0) return 0;
    const StagePool *p = &rt->pool[rt->local[stage]];
    const size_t full = stage_acts_bytes(p->model, rt->rows, rt->T);
    const size_t slot = (rt->recompute ? stage_acts_light_bytes(p->model, rt->rows, rt->T) : full) +
                        rt->msg_bytes;
    return (size_t)p->n_slots * slot + (size_t)p->n_ws * full;
}

void runtime_tap_logits(Runtime *rt, const int32_t *pos, float *out) {
    const int last = rt->S - 1;
    if (!same_rank(rt, last)) return;
    const StagePool *p = &rt->pool[rt->local[last]];
    for (int k = 0; k < p->n_slots; k++) stage_acts_keep_logits(p->acts[k], true);
    rt->tap_pos = pos;
    rt->tap_out = out;
}

void runtime_use_kv(Runtime *rt, StageKV *const *kv, const int32_t *pos, bool decode) {
    assert(!decode || (rt->rows == 1 && rt->T == 1));
    rt->kv = kv;
    rt->kv_pos = pos;
    rt->kv_decode = decode;
}

const ActionEvent *runtime_events(const Runtime *rt, int *n) {
    *n = rt->n_events;
    return rt->events;
}

// ---- one step ---------------------------------------------------------------------------

static StagePool *pool_of(const Runtime *rt, int stage) { return &rt->pool[rt->local[stage]]; }

static int slot_index(const Runtime *rt, int stage, int mb) { return rt->slot_of[key_of(rt, stage, mb)]; }

static StageActs *acts_of(const Runtime *rt, int stage, int mb) {
    return pool_of(rt, stage)->acts[slot_index(rt, stage, mb)];
}

static void *msg_of(const Runtime *rt, int stage, int mb) {
    return pool_of(rt, stage)->msg[slot_index(rt, stage, mb)];
}

static void slot_take(Runtime *rt, int key) {
    rt->slot_of[key] = stack_pop(&rt->pool[key / rt->M].slots);
}

static void slot_give_back(Runtime *rt, int key) {
    stack_push(&rt->pool[key / rt->M].slots, rt->slot_of[key]);
    rt->slot_of[key] = -1;
}

// Recompute: the workspace (stage, mb) borrows; held under its key until ws_give_back.
static StageActs *ws_take(Runtime *rt, int stage, int mb) {
    const int key = key_of(rt, stage, mb);
    StagePool *p = pool_of(rt, stage);
    rt->ws_of[key] = stack_pop(&p->wss);
    return p->ws[rt->ws_of[key]];
}

static void ws_give_back(Runtime *rt, int key) {
    stack_push(&rt->pool[key / rt->M].wss, rt->ws_of[key]);
    rt->ws_of[key] = -1;
}

static StageActs *ws_held(const Runtime *rt, int stage, int mb) {
    return pool_of(rt, stage)->ws[rt->ws_of[key_of(rt, stage, mb)]];
}

// Generation: the microbatch's rows' logits at their tapped positions, out of (rows * T, V).
static void tap_copy(const Runtime *rt, const StageModel *m, const StageActs *acts, int mb) {
    const size_t V = (size_t)m->cfg.vocab;
    for (int r = 0; r < rt->rows; r++) {
        const int row = mb * rt->rows + r, pos = rt->tap_pos[row];
        if (pos >= 0) stage_logits_row(m, acts, r * rt->T + pos, rt->tap_out + (size_t)row * V);
    }
}

// F: stage 0 embeds the microbatch's tokens; later stages read the stage below's output,
// directly when it is on this rank, else from the slot's message; the last stage adds the loss.
static void run_forward(Runtime *rt, Action a, const StepData *d) {
    const size_t off = (size_t)a.mb * rt->rows * rt->T;
    const int32_t *tokens = a.stage == 0 ? d->inputs + off : NULL;
    const void *input = NULL;
    if (a.stage > 0) input = same_rank(rt, a.stage - 1) ? stage_acts_output(acts_of(rt, a.stage - 1, a.mb))
                                                        : msg_of(rt, a.stage, a.mb);
    const bool last = a.stage == rt->S - 1;
    const int32_t *targets = last ? d->targets + off : NULL;
    StageModel *m = pool_of(rt, a.stage)->model;
    double loss;
    if (rt->recompute) {  // the forward runs in a borrowed workspace; the slot keeps its boundary
        loss = stage_forward_light(m, acts_of(rt, a.stage, a.mb), ws_take(rt, a.stage, a.mb), tokens, input,
                                   targets, d->loss_scale);
        ws_give_back(rt, key_of(rt, a.stage, a.mb));
    } else if (rt->kv && rt->kv_decode) {   // one token against the cache: no loss
        stage_decode(m, rt->kv[a.stage], acts_of(rt, a.stage, a.mb), tokens, input, *rt->kv_pos);
        loss = 0.0;
    } else {
        loss = stage_forward(m, acts_of(rt, a.stage, a.mb), tokens, input, targets, d->loss_scale);
        if (rt->kv) stage_kv_fill(rt->kv[a.stage], acts_of(rt, a.stage, a.mb), *rt->kv_pos + 1);
    }
    if (last) rt->mb_loss[a.mb] = loss;
    if (last && rt->tap_out) tap_copy(rt, m, acts_of(rt, a.stage, a.mb), a.mb);
}

// B or I: the output gradient comes from the stage above (directly when on this rank, else
// the slot's message); the last stage's forward already made its own.
static const void *backward_dout(const Runtime *rt, Action a) {
    if (a.stage == rt->S - 1) return NULL;
    return same_rank(rt, a.stage + 1) ? stage_acts_dinput(acts_of(rt, a.stage + 1, a.mb)) : msg_of(rt, a.stage, a.mb);
}

static TransportStatus run_comm(Runtime *rt, Action a, Error *err) {
    const int *owner = rt->sched->stage_rank;
    const size_t bytes = rt->msg_bytes;
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

// The first RECV action at or after i, or the list's length.
static int recv_from(const Runtime *rt, int i) {
    while (i < rt->list->n && rt->list->actions[i].type != ACT_RECV_F && rt->list->actions[i].type != ACT_RECV_B) i++;
    return i;
}

// post_one_ahead, before action i: the next receive is posted as soon as every receive before
// it has completed (at most one posted and not yet taken), so it lands while action i and
// those up to it run. A RECV whose receive is not posted yet posts it itself (transport_recv).
static TransportStatus post_next(Runtime *rt, int i, Error *err) {
    if (rt->next_post >= rt->list->n || recv_from(rt, i) != rt->next_post) return TRANSPORT_OK;
    const Action a = rt->list->actions[rt->next_post];
    rt->next_post = recv_from(rt, rt->next_post + 1);
    const int *owner = rt->sched->stage_rank;
    const int from_stage = a.type == ACT_RECV_F ? a.stage - 1 : a.stage + 1;
    const int tag = transport_tag(a.type == ACT_RECV_F ? MSG_ACT : MSG_GRAD, from_stage, a.mb, rt->S);
    return transport_post(rt->tp, rt->rank, owner[from_stage], tag, rt->msg_bytes, err);
}

// Recompute: B and I first run the forward again in a workspace from the light slot; B gives
// the workspace back at once, I keeps it for the W of the same microbatch.
static void run_backward_recompute(Runtime *rt, Action a) {
    StageModel *m = pool_of(rt, a.stage)->model;
    switch (a.type) {  // (a W has no slot any more: its light slot went back after the I)
    case ACT_B:
        stage_backward_light(m, acts_of(rt, a.stage, a.mb), ws_take(rt, a.stage, a.mb), backward_dout(rt, a));
        ws_give_back(rt, key_of(rt, a.stage, a.mb));
        break;
    case ACT_I:
        stage_backward_input_light(m, acts_of(rt, a.stage, a.mb), ws_take(rt, a.stage, a.mb), backward_dout(rt, a));
        break;
    case ACT_W:
        stage_backward_weight(m, ws_held(rt, a.stage, a.mb));
        ws_give_back(rt, key_of(rt, a.stage, a.mb));
        break;
    default: break;
    }
}

static void run_compute(Runtime *rt, Action a, const StepData *d) {
    StageModel *m = pool_of(rt, a.stage)->model;
    if (a.type == ACT_F) run_forward(rt, a, d);
    else if (rt->recompute) run_backward_recompute(rt, a);
    else if (a.type == ACT_B) stage_backward(m, acts_of(rt, a.stage, a.mb), backward_dout(rt, a));
    else if (a.type == ACT_I) stage_backward_input(m, acts_of(rt, a.stage, a.mb), backward_dout(rt, a));
    else if (a.type == ACT_W) stage_backward_weight(m, acts_of(rt, a.stage, a.mb));
}

// Runs one action and records its event; its duration goes to busy_s or comm_s. A compute
// action of a stage that queues its work is bracketed by marks 2i, 2i + 1 on its stream.
static TransportStatus run_action(Runtime *rt, Action a, const StepData *d, RuntimeStats *stats, Error *err) {
    const int i = rt->n_events++;
    ActionEvent *ev = &rt->events[i];
    *ev = (ActionEvent){.start = clock_now_s(), .mb = a.mb, .stage = (int16_t)a.stage, .type = (uint8_t)a.type};
    TransportStatus st = TRANSPORT_OK;
    if (schedule_is_comm(a.type)) {
        st = run_comm(rt, a, err);
    } else {
        StageModel *m = pool_of(rt, a.stage)->model;
        const bool marked = rt->device_timed[rt->local[a.stage]];
        if (marked) stage_time_mark(m, 2 * i);
        run_compute(rt, a, d);
        if (marked) stage_time_mark(m, 2 * i + 1);
    }
    ev->end = clock_now_s();
    if (schedule_is_comm(a.type)) stats->comm_s += ev->end - ev->start;
    else stats->busy_s += ev->end - ev->start;
    return st;
}

// Frees every slot and workspace still held (after a failed step), so the next step starts clean.
static void release_all(Runtime *rt) {
    for (int k = 0; k < rt->n_local * rt->M; k++) {
        if (rt->slot_of[k] >= 0) slot_give_back(rt, k);
        if (rt->ws_of[k] >= 0) ws_give_back(rt, k);
    }
}

// Local stage l's compute events of the last step as device time, if the device has run them
// all (else false, nothing changed). Device times are relative to the stage's first mark;
// offset is the least shift that starts no action before the host queued it.
static bool settle_stage(Runtime *rt, int l) {
    const StageModel *m = rt->pool[l].model;
    int base = -1;
    double offset = 0.0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < rt->n_events; i++) {
            ActionEvent *ev = &rt->events[i];
            if (schedule_is_comm(ev->type) || rt->local[ev->stage] != l) continue;
            if (base < 0) base = 2 * i;
            double t0, t1;
            if (!stage_time_since(m, base, 2 * i, &t0) || !stage_time_since(m, base, 2 * i + 1, &t1)) return false;
            if (pass == 0 && (i == base / 2 || ev->start - t0 > offset)) offset = ev->start - t0;
            if (pass == 1) {
                ev->start = offset + t0;
                ev->end = offset + t1;
            }
        }
    }
    return true;
}

// The step's compute time: a device-timed stage's events hold the host's queueing times
// until runtime_device_times settles them.
static double events_busy(const Runtime *rt) {
    double busy = 0.0;
    for (int i = 0; i < rt->n_events; i++)
        if (!schedule_is_comm(rt->events[i].type)) busy += rt->events[i].end - rt->events[i].start;
    return busy;
}

double runtime_device_times(Runtime *rt) {
    for (int l = 0; l < rt->n_local; l++)
        if (rt->device_timed[l] && !rt->device_settled[l]) rt->device_settled[l] = settle_stage(rt, l);
    return events_busy(rt);
}

RuntimeStatus runtime_step(Runtime *rt, const int32_t *inputs, const int32_t *targets, float loss_scale,
                           RuntimeStats *stats, Error *err) {
    const StepData d = {inputs, targets, loss_scale};
    *stats = (RuntimeStats){0};
    rt->n_events = 0;
    for (int l = 0; l < rt->n_local; l++) rt->device_settled[l] = false;
    rt->next_post = rt->post_one_ahead ? recv_from(rt, 0) : rt->list->n;
    memset(rt->mb_loss, 0, sizeof(double) * (size_t)rt->M);
    for (int i = 0; i < rt->list->n; i++) {
        const Action a = rt->list->actions[i];
        transport_mark(rt->tp, rt->rank, i);  // where the others see this rank (progress.h)
        if (rt->acquire[i] >= 0) slot_take(rt, rt->acquire[i]);
        Error why;
        TransportStatus st = post_next(rt, i, &why);
        if (st == TRANSPORT_OK) st = run_action(rt, a, &d, stats, &why);
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
    // Microbatch order, as the single-device trainer sums them; then what a device kept.
    for (int mb = 0; mb < rt->M; mb++) stats->loss += rt->mb_loss[mb];
    if (rt->local[rt->S - 1] >= 0) stats->loss += stage_step_loss(pool_of(rt, rt->S - 1)->model);
    // Device-timed stages settle after the step's wait for its loss and norm (pipeline.c
    // rank_reduce_totals): asking the device here would find their marks not yet reached.
    stats->busy_s = events_busy(rt);
    return RUNTIME_OK;
}
