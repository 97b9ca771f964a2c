// The schedule IR: construction, lowering to messages, validation and dependency-driven
// execution (shared by the validator's deadlock check and the simulator's timing).
#include "engine/schedule/schedule.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const TYPE_NAMES[ACT_COUNT] = {
    "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B",
};
// For error messages: "backward before its forward".
static const char *const TYPE_WORDS[ACT_COUNT] = {
    "forward", "backward", "input gradient", "weight gradient",
    "send of activations", "receive of activations", "send of gradients", "receive of gradients",
};

int schedule_stage_rank(StageMap map, int n_ranks, int n_stages, int stage) {
    assert(stage >= 0 && stage < n_stages);
    switch (map) {
    case STAGE_MAP_PLAIN: return stage;
    case STAGE_MAP_LOOP: return stage % n_ranks;
    case STAGE_MAP_V: return stage < n_ranks ? stage : n_stages - 1 - stage;  // S = 2P
    }
    return -1;
}

const char *schedule_type_name(ActionType t) { return TYPE_NAMES[t]; }

bool schedule_is_comm(ActionType t) { return t >= ACT_SEND_F && t < ACT_COUNT; }

char *schedule_format_action(Action a, char *buf, size_t size) {
    snprintf(buf, size, "%d%s%d", a.stage, TYPE_NAMES[a.type], a.mb);
    return buf;
}

Schedule *schedule_new(const char *name, int n_ranks, int n_stages, int n_microbatches, StageMap map) {
    assert(n_ranks >= 1 && n_stages >= 1 && n_microbatches >= 1);
    assert(map != STAGE_MAP_PLAIN || n_stages == n_ranks);
    assert(map != STAGE_MAP_V || n_stages == 2 * n_ranks);
    Schedule *s = xcalloc(1, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->n_ranks = n_ranks;
    s->n_stages = n_stages;
    s->n_microbatches = n_microbatches;
    s->stage_rank = xmalloc(sizeof(int) * (size_t)n_stages);
    for (int st = 0; st < n_stages; st++) s->stage_rank[st] = schedule_stage_rank(map, n_ranks, n_stages, st);
    s->ranks = xcalloc((size_t)n_ranks, sizeof *s->ranks);
    return s;
}

void schedule_push(Schedule *s, int rank, ActionType type, int stage, int mb) {
    schedule_push_action(s, rank, (Action){type, stage, mb, false});
}

void schedule_push_action(Schedule *s, int rank, Action a) {
    assert(rank >= 0 && rank < s->n_ranks);
    ScheduleList *l = &s->ranks[rank];
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->actions = check_alloc(realloc(l->actions, sizeof(Action) * (size_t)l->cap),
                                 sizeof(Action) * (size_t)l->cap, __FILE__, __LINE__);
    }
    l->actions[l->n++] = a;
}

Schedule *schedule_copy(const Schedule *s) {
    Schedule *c = schedule_new(s->name, s->n_ranks, s->n_stages, s->n_microbatches, STAGE_MAP_LOOP);
    memcpy(c->stage_rank, s->stage_rank, sizeof(int) * (size_t)s->n_stages);
    for (int r = 0; r < s->n_ranks; r++)
        for (int i = 0; i < s->ranks[r].n; i++) schedule_push_action(c, r, s->ranks[r].actions[i]);
    return c;
}

void schedule_free(Schedule *s) {
    if (!s) return;
    for (int r = 0; r < s->n_ranks; r++) free(s->ranks[r].actions);
    free(s->ranks);
    free(s->stage_rank);
    free(s);
}

bool schedule_equal(const Schedule *a, const Schedule *b) {
    if (a->n_ranks != b->n_ranks || a->n_stages != b->n_stages || a->n_microbatches != b->n_microbatches)
        return false;
    if (memcmp(a->stage_rank, b->stage_rank, sizeof(int) * (size_t)a->n_stages)) return false;
    for (int r = 0; r < a->n_ranks; r++) {
        if (a->ranks[r].n != b->ranks[r].n) return false;
        for (int i = 0; i < a->ranks[r].n; i++) {
            Action x = a->ranks[r].actions[i], y = b->ranks[r].actions[i];
            if (x.type != y.type || x.stage != y.stage || x.mb != y.mb || x.overlap_next != y.overlap_next) return false;
        }
    }
    return true;
}

bool schedule_has_comm(const Schedule *s) {
    for (int r = 0; r < s->n_ranks; r++)
        for (int i = 0; i < s->ranks[r].n; i++)
            if (schedule_is_comm(s->ranks[r].actions[i].type)) return true;
    return false;
}

int schedule_total_actions(const Schedule *s) {
    int n = 0;
    for (int r = 0; r < s->n_ranks; r++) n += s->ranks[r].n;
    return n;
}

// ---- lowering -------------------------------------------------------------------------

// True when stage st and its neighbour st+dir exist and live on different ranks.
static bool crosses(const Schedule *s, int st, int dir) {
    int nb = st + dir;
    return nb >= 0 && nb < s->n_stages && s->stage_rank[nb] != s->stage_rank[st];
}

void schedule_lower(Schedule *s) {
    if (schedule_has_comm(s)) return;
    for (int r = 0; r < s->n_ranks; r++) {
        ScheduleList old = s->ranks[r];
        s->ranks[r] = (ScheduleList){0};
        for (int i = 0; i < old.n; i++) {
            Action a = old.actions[i];
            bool fwd = a.type == ACT_F, bwd = a.type == ACT_B || a.type == ACT_I;
            if (fwd && crosses(s, a.stage, -1)) schedule_push(s, r, ACT_RECV_F, a.stage, a.mb);
            if (bwd && crosses(s, a.stage, +1)) schedule_push(s, r, ACT_RECV_B, a.stage, a.mb);
            schedule_push_action(s, r, a);
            if (fwd && crosses(s, a.stage, +1)) schedule_push(s, r, ACT_SEND_F, a.stage, a.mb);
            if (bwd && crosses(s, a.stage, -1)) schedule_push(s, r, ACT_SEND_B, a.stage, a.mb);
        }
        free(old.actions);
    }
}

// ---- index: where each (type, stage, mb) sits ----------------------------------------

typedef struct {
    const Schedule *s;
    int total;
    int *offset;    // (P+1) global position of each rank's first action
    int *rank_of;   // (total)
    int *where;     // (ACT_COUNT * S * M) global position, -1 when absent
    bool lowered;
} Index;

static const Action *index_action(const Index *ix, int pos) {
    int r = ix->rank_of[pos];
    return &ix->s->ranks[r].actions[pos - ix->offset[r]];
}

static int *index_slot(const Index *ix, ActionType t, int stage, int mb) {
    const Schedule *s = ix->s;
    return &ix->where[((size_t)t * (size_t)s->n_stages + (size_t)stage) * (size_t)s->n_microbatches + (size_t)mb];
}

static int index_find(const Index *ix, ActionType t, int stage, int mb) {
    return *index_slot(ix, t, stage, mb);
}

static void index_free(Index *ix) {
    free(ix->offset);
    free(ix->rank_of);
    free(ix->where);
}

// Fills ix; with err, a duplicate action is an error (without, the first one wins).
static int index_build(Index *ix, const Schedule *s, Error *err) {
    ix->s = s;
    ix->total = schedule_total_actions(s);
    ix->lowered = schedule_has_comm(s);
    ix->offset = xmalloc(sizeof(int) * (size_t)(s->n_ranks + 1));
    ix->rank_of = xmalloc(sizeof(int) * (size_t)(ix->total ? ix->total : 1));
    size_t slots = (size_t)ACT_COUNT * (size_t)s->n_stages * (size_t)s->n_microbatches;
    ix->where = xmalloc(sizeof(int) * slots);
    memset(ix->where, 0xff, sizeof(int) * slots);  // all -1
    int pos = 0;
    for (int r = 0; r < s->n_ranks; r++) {
        ix->offset[r] = pos;
        for (int i = 0; i < s->ranks[r].n; i++, pos++) {
            Action a = s->ranks[r].actions[i];
            ix->rank_of[pos] = r;
            int *slot = index_slot(ix, a.type, a.stage, a.mb);
            if (*slot >= 0 && err) {
                char buf[48];
                int fr = ix->rank_of[*slot];
                error_set(err, "rank %d, action %d (%s): duplicate of rank %d, action %d", r, i,
                          schedule_format_action(a, buf, sizeof buf), fr, *slot - ix->offset[fr]);
                index_free(ix);
                return -1;
            }
            if (*slot < 0) *slot = pos;
        }
    }
    ix->offset[s->n_ranks] = pos;
    return 0;
}

// Position of the backward piece of (stage, mb) that carries the input gradient: B or I.
static int index_grad(const Index *ix, int stage, int mb) {
    int b = index_find(ix, ACT_B, stage, mb);
    return b >= 0 ? b : index_find(ix, ACT_I, stage, mb);
}

// Positions a must wait for (-1 for one that is missing). A compute-only schedule names the
// producing compute directly, even on another rank; a lowered one names the local RECV.
static int index_deps(const Index *ix, Action a, int need[2]) {
    const Schedule *s = ix->s;
    int st = a.stage, mb = a.mb, n = 0;
    switch (a.type) {
    case ACT_F:
        if (st > 0)
            need[n++] = ix->lowered && crosses(s, st, -1) ? index_find(ix, ACT_RECV_F, st, mb)
                                                         : index_find(ix, ACT_F, st - 1, mb);
        break;
    case ACT_B:
    case ACT_I:
        need[n++] = index_find(ix, ACT_F, st, mb);
        if (st < s->n_stages - 1)
            need[n++] = ix->lowered && crosses(s, st, +1) ? index_find(ix, ACT_RECV_B, st, mb)
                                                         : index_grad(ix, st + 1, mb);
        break;
    case ACT_W: need[n++] = index_find(ix, ACT_I, st, mb); break;
    case ACT_SEND_F: need[n++] = index_find(ix, ACT_F, st, mb); break;
    case ACT_RECV_F: need[n++] = index_find(ix, ACT_SEND_F, st - 1, mb); break;
    case ACT_SEND_B: need[n++] = index_grad(ix, st, mb); break;
    case ACT_RECV_B: need[n++] = index_find(ix, ACT_SEND_B, st + 1, mb); break;
    case ACT_COUNT: assert(0);
    }
    return n;
}

// ---- validation -------------------------------------------------------------------------

static int fail_at(Error *err, int rank, int i, Action a, const char *what) {
    char buf[48];
    error_set(err, "rank %d, action %d (%s): %s", rank, i, schedule_format_action(a, buf, sizeof buf), what);
    return -1;
}

static int check_shape(const Schedule *s, Error *err) {
    if (s->n_ranks < 1 || s->n_stages < 1 || s->n_microbatches < 1) {
        error_set(err, "schedule %s: %d ranks, %d stages, %d microbatches (each must be >= 1)",
                  s->name, s->n_ranks, s->n_stages, s->n_microbatches);
        return -1;
    }
    for (int st = 0; st < s->n_stages; st++)
        if (s->stage_rank[st] < 0 || s->stage_rank[st] >= s->n_ranks) {
            error_set(err, "schedule %s: stage %d is mapped to rank %d of %d", s->name, st,
                      s->stage_rank[st], s->n_ranks);
            return -1;
        }
    return 0;
}

// A message action must stand for a dependency between stages on different ranks.
static const char *comm_problem(const Schedule *s, Action a) {
    switch (a.type) {
    case ACT_SEND_F:
    case ACT_RECV_B:
        if (a.stage == s->n_stages - 1) return "the last stage has no next stage";
        return crosses(s, a.stage, +1) ? NULL : "the next stage is on the same rank; no message";
    case ACT_RECV_F:
    case ACT_SEND_B:
        if (a.stage == 0) return "stage 0 has no previous stage";
        return crosses(s, a.stage, -1) ? NULL : "the previous stage is on the same rank; no message";
    default: return NULL;
    }
}

// An overlapped pair (Action.overlap_next) joins compute actions only, and its first needs a
// compute action after it on the rank.
static int check_overlaps(const Schedule *s, int r, Error *err) {
    int open = -1;  // the last compute action, while it waits for its partner
    for (int i = 0; i < s->ranks[r].n; i++) {
        Action a = s->ranks[r].actions[i];
        if (schedule_is_comm(a.type) && a.overlap_next) return fail_at(err, r, i, a, "a message cannot be overlapped");
        if (!schedule_is_comm(a.type)) open = a.overlap_next ? i : -1;
    }
    return open >= 0 ? fail_at(err, r, open, s->ranks[r].actions[open], "overlapped with no compute action after it")
                     : 0;
}

static int check_actions(const Schedule *s, Error *err) {
    for (int r = 0; r < s->n_ranks; r++) {
        if (check_overlaps(s, r, err)) return -1;
        for (int i = 0; i < s->ranks[r].n; i++) {
            Action a = s->ranks[r].actions[i];
            char what[96];
            if ((unsigned)a.type >= ACT_COUNT)
                return fail_at(err, r, i, (Action){ACT_F, a.stage, a.mb, false}, "bad action type");
            if (a.stage < 0 || a.stage >= s->n_stages || a.mb < 0 || a.mb >= s->n_microbatches) {
                snprintf(what, sizeof what, "outside %d stages x %d microbatches", s->n_stages, s->n_microbatches);
                return fail_at(err, r, i, a, what);
            }
            if (s->stage_rank[a.stage] != r) {
                snprintf(what, sizeof what, "stage %d belongs to rank %d", a.stage, s->stage_rank[a.stage]);
                return fail_at(err, r, i, a, what);
            }
            const char *bad = comm_problem(s, a);
            if (bad) return fail_at(err, r, i, a, bad);
        }
    }
    return 0;
}

static int fail_pos(const Index *ix, int pos, Error *err, const char *what) {
    int r = ix->rank_of[pos];
    return fail_at(err, r, pos - ix->offset[r], *index_action(ix, pos), what);
}

// One F per (stage, mb) and either one B or an I with its W.
static int check_complete(const Index *ix, Error *err) {
    const Schedule *s = ix->s;
    for (int st = 0; st < s->n_stages; st++)
        for (int mb = 0; mb < s->n_microbatches; mb++) {
            int f = index_find(ix, ACT_F, st, mb), b = index_find(ix, ACT_B, st, mb);
            int in = index_find(ix, ACT_I, st, mb), w = index_find(ix, ACT_W, st, mb);
            if (f < 0) {
                error_set(err, "stage %d, microbatch %d has no forward (F) on rank %d", st, mb, s->stage_rank[st]);
                return -1;
            }
            if (b >= 0 && (in >= 0 || w >= 0))
                return fail_pos(ix, in >= 0 ? in : w, err, "split backward (I/W) beside a full backward (B)");
            if (b < 0 && in < 0 && w < 0) {
                error_set(err, "stage %d, microbatch %d has no backward (B, or I and W) on rank %d", st, mb,
                          s->stage_rank[st]);
                return -1;
            }
            if (in >= 0 && w < 0) return fail_pos(ix, in, err, "input gradient without its weight gradient (W)");
            if (w >= 0 && in < 0) return fail_pos(ix, w, err, "weight gradient without its input gradient (I)");
        }
    return 0;
}

static int missing_message(const Schedule *s, int st, int mb, ActionType t, Error *err) {
    error_set(err, "stage %d, microbatch %d: no %s on rank %d (the schedule has messages, so it needs all of them)",
              st, mb, TYPE_NAMES[t], s->stage_rank[st]);
    return -1;
}

// A lowered schedule must carry every message between ranks (check_actions already refused
// the ones that stand for no dependency).
static int check_messages(const Index *ix, Error *err) {
    const Schedule *s = ix->s;
    if (!ix->lowered) return 0;
    for (int st = 0; st + 1 < s->n_stages; st++) {
        if (!crosses(s, st, +1)) continue;
        for (int mb = 0; mb < s->n_microbatches; mb++) {
            if (index_find(ix, ACT_SEND_F, st, mb) < 0) return missing_message(s, st, mb, ACT_SEND_F, err);
            if (index_find(ix, ACT_RECV_F, st + 1, mb) < 0) return missing_message(s, st + 1, mb, ACT_RECV_F, err);
            if (index_find(ix, ACT_SEND_B, st + 1, mb) < 0) return missing_message(s, st + 1, mb, ACT_SEND_B, err);
            if (index_find(ix, ACT_RECV_B, st, mb) < 0) return missing_message(s, st, mb, ACT_RECV_B, err);
        }
    }
    return 0;
}

// A dependency on the same rank must come earlier in that rank's list.
static int check_order(const Index *ix, Error *err) {
    for (int pos = 0; pos < ix->total; pos++) {
        Action a = *index_action(ix, pos);
        int need[2], n = index_deps(ix, a, need);
        for (int k = 0; k < n; k++) {
            int d = need[k];
            assert(d >= 0);  // check_complete and check_messages ran first
            if (ix->rank_of[d] != ix->rank_of[pos] || d < pos) continue;
            Action da = *index_action(ix, d);
            char what[128];
            if (da.stage == a.stage)
                snprintf(what, sizeof what, "%s before its %s", TYPE_WORDS[a.type], TYPE_WORDS[da.type]);
            else
                snprintf(what, sizeof what, "%s before the %s of stage %d", TYPE_WORDS[a.type], TYPE_WORDS[da.type],
                         da.stage);
            return fail_pos(ix, pos, err, what);
        }
    }
    return 0;
}

static int check_runs(const Schedule *s, Error *err) {
    double dur[ACT_COUNT];
    for (int t = 0; t < ACT_COUNT; t++) dur[t] = schedule_is_comm((ActionType)t) ? 0.0 : 1.0;
    int total = schedule_total_actions(s);
    double *start = xmalloc(sizeof(double) * (size_t)(total ? total : 1));
    double *end = xmalloc(sizeof(double) * (size_t)(total ? total : 1));
    int rc = schedule_execute(s, dur, 0.0, start, end, err);
    free(start);
    free(end);
    return rc;
}

int schedule_validate(const Schedule *s, Error *err) {
    if (check_shape(s, err) || check_actions(s, err)) return -1;
    Index ix;
    if (index_build(&ix, s, err)) return -1;
    int rc = check_complete(&ix, err) || check_messages(&ix, err) || check_order(&ix, err);
    index_free(&ix);
    if (rc) return -1;
    return check_runs(s, err);
}

// ---- execution ----------------------------------------------------------------------------

// One line naming, for each stuck rank, the action it waits at and what that action waits for.
static void report_deadlock(const Index *ix, const int *next, const bool *done, Error *err) {
    const Schedule *s = ix->s;
    char msg[sizeof err->msg];
    int len = snprintf(msg, sizeof msg, "deadlock, no rank can progress:");
    for (int r = 0; r < s->n_ranks && len < (int)sizeof msg; r++) {
        if (next[r] == s->ranks[r].n) continue;
        int pos = ix->offset[r] + next[r];
        Action a = *index_action(ix, pos);
        int need[2], n = index_deps(ix, a, need), k = 0;
        while (k < n && need[k] >= 0 && done[need[k]]) k++;
        assert(k < n);
        char ab[48], db[48] = "an action the schedule lacks";
        int d = need[k], d_rank = d >= 0 ? ix->rank_of[d] : s->stage_rank[a.stage];
        if (d >= 0) schedule_format_action(*index_action(ix, d), db, sizeof db);
        len += snprintf(msg + len, sizeof msg - (size_t)len, " rank %d waits at action %d (%s) for %s on rank %d;", r,
                        next[r], schedule_format_action(a, ab, sizeof ab), db, d_rank);
    }
    if (len < (int)sizeof msg) msg[len - 1] = '\0';  // drop the last ';'
    error_set(err, "%s", msg);
}

// Durations: action a takes dur[a.stage * stride + a.type] (stride 0: one row for every stage).
typedef struct {
    const double *dur;
    int stride;
    double latency;
} Durations;

// Runs as many of rank r's next actions as have their dependencies done. Returns how many.
static int advance_rank(const Index *ix, int r, const Durations *d, int *next, double *clock, bool *done,
                        double *start, double *end) {
    const ScheduleList *l = &ix->s->ranks[r];
    int moved = 0;
    for (; next[r] < l->n; next[r]++, moved++) {
        int pos = ix->offset[r] + next[r];
        Action a = l->actions[next[r]];
        int need[2], n = index_deps(ix, a, need);
        double t = clock[r];
        bool ready = true;
        for (int k = 0; k < n && ready; k++) {
            int dep = need[k];
            ready = dep >= 0 && done[dep];
            if (ready) t = fmax(t, end[dep] + (ix->rank_of[dep] != r ? d->latency : 0.0));
        }
        if (!ready) break;
        start[pos] = t;
        end[pos] = t + d->dur[a.stage * d->stride + a.type];
        clock[r] = end[pos];
        done[pos] = true;
    }
    return moved;
}

static int execute(const Schedule *s, const Durations *d, double *start, double *end, Error *err) {
    Index ix;
    index_build(&ix, s, NULL);
    int *next = xcalloc((size_t)s->n_ranks, sizeof(int));
    double *clock = xcalloc((size_t)s->n_ranks, sizeof(double));
    bool *done = xcalloc((size_t)(ix.total ? ix.total : 1), sizeof(bool));
    int finished = 0, rc = 0;
    // Start times depend only on the dependency graph, not on the sweep order: each action
    // starts at the max of its rank's clock and its dependencies' ends.
    while (finished < ix.total) {
        int moved = 0;
        for (int r = 0; r < s->n_ranks; r++) moved += advance_rank(&ix, r, d, next, clock, done, start, end);
        if (!moved) {
            report_deadlock(&ix, next, done, err);
            rc = -1;
            break;
        }
        finished += moved;
    }
    free(next);
    free(clock);
    free(done);
    index_free(&ix);
    return rc;
}

int schedule_execute(const Schedule *s, const double dur[ACT_COUNT], double latency, double *start, double *end,
                     Error *err) {
    const Durations d = {dur, 0, latency};
    return execute(s, &d, start, end, err);
}

int schedule_execute_stages(const Schedule *s, const double *dur, double latency, double *start, double *end,
                            Error *err) {
    const Durations d = {dur, ACT_COUNT, latency};
    return execute(s, &d, start, end, err);
}

// ---- message order per edge (transports without tags) -------------------------------------

typedef struct {
    int mb;
    int index;   // position in its rank's list
} EdgeMsg;

// The messages of one edge (sending stage `from`, kind grad) that rank `self` sends (send) or
// receives (!send), in list order.
static int edge_messages(const Schedule *s, int self, int from, bool grad, bool send, EdgeMsg *out) {
    int n = 0;
    const ScheduleList *l = &s->ranks[self];
    for (int i = 0; i < l->n; i++) {
        const Action a = l->actions[i];
        const bool match = send ? (a.type == (grad ? ACT_SEND_B : ACT_SEND_F) && a.stage == from)
                                : (a.type == (grad ? ACT_RECV_B : ACT_RECV_F) && a.stage == (grad ? from - 1 : from + 1));
        if (match) out[n++] = (EdgeMsg){.mb = a.mb, .index = i};
    }
    return n;
}

int schedule_check_fifo(const Schedule *s, Error *err) {
    int longest = 1;
    for (int r = 0; r < s->n_ranks; r++)
        if (s->ranks[r].n > longest) longest = s->ranks[r].n;
    EdgeMsg *sent = xcalloc((size_t)longest, sizeof(EdgeMsg)), *got = xcalloc((size_t)longest, sizeof(EdgeMsg));
    int rc = 0;
    for (int from = 0; from < s->n_stages && rc == 0; from++)
        for (int grad = 0; grad < 2 && rc == 0; grad++) {
            const int to = grad ? from - 1 : from + 1;
            if (to < 0 || to >= s->n_stages || s->stage_rank[to] == s->stage_rank[from]) continue;
            const int a = s->stage_rank[from], b = s->stage_rank[to];
            const int ns = edge_messages(s, a, from, grad, true, sent), nr = edge_messages(s, b, from, grad, false, got);
            for (int k = 0; k < ns && k < nr && rc == 0; k++) {
                if (sent[k].mb == got[k].mb) continue;
                char x[48], y[48];
                error_set(err, "stage %d sends its %s to stage %d in another order than stage %d receives them: "
                               "rank %d's action %d (%s) is message %d, rank %d's receive %d is action %d (%s); "
                               "NCCL matches messages in order, so reorder the receives (or run with --transport "
                               "local or mpi)",
                          from, grad ? "gradients" : "activations", to, to, a, sent[k].index,
                          schedule_format_action(s->ranks[a].actions[sent[k].index], x, sizeof x), k + 1, b, k + 1,
                          got[k].index, schedule_format_action(s->ranks[b].actions[got[k].index], y, sizeof y));
                rc = -1;
            }
        }
    free(sent);
    free(got);
    return rc;
}
