// Schedules as CSV, in torch.distributed.pipelining's format (its _dump_csv / _load_csv):
// row r lists rank r's actions, e.g. "0F0,0F1,,0B0" (empty cells are torch's idle slots).
//
// Both of torch's formats are read. "compute_only" lists F, B, I, W (and OVERLAP_F_B);
// "compute_comms" adds SEND_F/RECV_F/SEND_B/RECV_B and torch-only actions, read as follows:
//   UNSHARD, RESHARD           FSDP parameter gathering; pptrain does not shard: dropped.
//   REDUCE_GRAD, WAIT_REDUCE_GRAD  where torch may start / finish a stage's data-parallel
//                              gradient reduction; pptrain reduces after every action of the
//                              step has run (engine/pipeline.c), so they are accepted and dropped.
//   WAIT_SEND_F, WAIT_SEND_B   torch retiring a send; pptrain's sends are buffered: dropped.
//   WAIT_RECV_F, WAIT_RECV_B   where a receive is waited on (see place_receives).
//   (aXm;bYn)OVERLAP_F_B       its sub-actions, in order.
// pptrain's runtime posts every receive of a step when the step starts (rank_post_receives),
// so its RECV action is the wait. torch posts a receive where the RECV stands and waits where
// the data is consumed; place_receives therefore moves each RECV to that wait.
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/file_read.h"
#include "engine/schedule/schedule.h"

// Indices past these are refused so the validator's (types x S x M) table stays small.
#define CSV_MAX_STAGE 100000
#define CSV_MAX_MB 1000000
#define CSV_MAX_SLOTS 10000000LL
#define OVERLAP_MAX 64  // torch's DualPipeV overlaps 2

// Cell kinds past the ActionType values: torch actions that are not pptrain actions.
enum { CELL_DROP = ACT_COUNT, CELL_WAIT_RECV_F, CELL_WAIT_RECV_B };

typedef struct {
    Action a;   // a.type is an ActionType, or CELL_WAIT_RECV_* (CELL_DROP cells are not kept)
    int rank, line, col;
    int group;  // for the sub-actions of one OVERLAP_F_B, its column; otherwise -1
} Cell;

typedef struct {
    Cell *cells;
    int n, cap;
    int n_rows;
} Parsed;

static void parsed_push(Parsed *p, Cell c) {
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 256;
        p->cells = check_alloc(realloc(p->cells, sizeof(Cell) * (size_t)p->cap), sizeof(Cell) * (size_t)p->cap,
                               __FILE__, __LINE__);
    }
    p->cells[p->n++] = c;
}

// Whole-token parse of "<stage><TYPE><mb>". Returns NULL or the reason the token is bad.
static const char *parse_index(const char **p, const char *what_neg, const char *what_missing, long max, int *out) {
    if (**p == '-') return what_neg;
    if (!isdigit((unsigned char)**p)) return what_missing;
    long v = 0;
    for (; isdigit((unsigned char)**p); ++*p) {
        v = v * 10 + (**p - '0');
        if (v > max) return "index too large";
    }
    *out = (int)v;
    return NULL;
}

typedef struct {
    const char *name;
    int kind;         // ActionType or CELL_*
    bool mb_optional; // torch writes "0UNSHARD", "0REDUCE_GRAD" without a microbatch
} CellType;

// Longest names first where one is a prefix of another ("WAIT_SEND_F" before "W").
static const CellType CELL_TYPES[] = {
    {"WAIT_REDUCE_GRAD", CELL_DROP, true}, {"REDUCE_GRAD", CELL_DROP, true},
    {"UNSHARD", CELL_DROP, true},          {"RESHARD", CELL_DROP, true},
    {"WAIT_SEND_F", CELL_DROP, false},     {"WAIT_SEND_B", CELL_DROP, false},
    {"WAIT_RECV_F", CELL_WAIT_RECV_F, false}, {"WAIT_RECV_B", CELL_WAIT_RECV_B, false},
    {"SEND_F", ACT_SEND_F, false}, {"RECV_F", ACT_RECV_F, false},
    {"SEND_B", ACT_SEND_B, false}, {"RECV_B", ACT_RECV_B, false},
    {"F", ACT_F, false}, {"B", ACT_B, false}, {"I", ACT_I, false}, {"W", ACT_W, false},
};

static const char *parse_type(const char **p, const CellType **t) {
    for (size_t k = 0; k < sizeof CELL_TYPES / sizeof CELL_TYPES[0]; k++) {
        size_t n = strlen(CELL_TYPES[k].name);
        if (strncmp(*p, CELL_TYPES[k].name, n) == 0) {
            *p += n;
            *t = &CELL_TYPES[k];
            return NULL;
        }
    }
    return "unknown action type (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, torch's UNSHARD, RESHARD, "
           "REDUCE_GRAD, WAIT_*, OVERLAP_F_B)";
}

// One action "<stage><TYPE><mb>" of the text [tok, end).
static const char *parse_action(const char *tok, const char *end, Action *a) {
    const char *p = tok, *why;
    const CellType *t = NULL;
    if ((why = parse_index(&p, "negative stage", "expected a stage number", CSV_MAX_STAGE, &a->stage))) return why;
    if ((why = parse_type(&p, &t))) return why;
    a->type = (ActionType)t->kind;
    a->mb = 0;
    if (!(t->mb_optional && p == end) &&
        (why = parse_index(&p, "negative microbatch", "missing microbatch", CSV_MAX_MB, &a->mb)))
        return why;
    return p != end ? "trailing characters" : NULL;
}

// Pushes the cell's action(s): torch's "(0F7;7B3)OVERLAP_F_B" runs 0F7 then 7B3, so it
// becomes those two cells; dropped torch actions push nothing.
static const char *push_cell(Parsed *p, const char *tok, Cell c) {
    const char *end = tok + strlen(tok);
    if (*tok != '(') {
        const char *why = parse_action(tok, end, &c.a);
        if (!why && (int)c.a.type != CELL_DROP) parsed_push(p, c);
        return why;
    }
    const char *close = strchr(tok, ')');
    if (!close) return "'(' without ')'";
    if (strcmp(close + 1, "OVERLAP_F_B") != 0) return "a group of actions must be '(...)OVERLAP_F_B'";
    if (close == tok + 1) return "OVERLAP_F_B without sub-actions";
    c.group = c.col;
    int n_sub = 0;
    for (const char *sub = tok + 1; sub < close; n_sub++) {
        if (n_sub == OVERLAP_MAX) return "OVERLAP_F_B with more than 64 sub-actions";
        const char *semi = memchr(sub, ';', (size_t)(close - sub));
        const char *sub_end = semi ? semi : close;
        while (sub < sub_end && (*sub == ' ' || *sub == '\t')) sub++;
        while (sub_end > sub && (sub_end[-1] == ' ' || sub_end[-1] == '\t')) sub_end--;
        const char *why = parse_action(sub, sub_end, &c.a);
        if (why) return why;
        if (c.a.type != ACT_F && c.a.type != ACT_B && c.a.type != ACT_I && c.a.type != ACT_W)
            return "OVERLAP_F_B may hold compute actions only (F, B, I, W)";
        parsed_push(p, c);
        sub = (semi ? semi : close) + 1;
    }
    return NULL;
}

// Parses one row (without its newline) into p. Returns 0 or -1 with err.
static int parse_row(Parsed *p, char *row, int line, const char *origin, Error *err) {
    char *cell = row;
    for (;;) {
        char *comma = strchr(cell, ',');
        if (comma) *comma = '\0';
        char *tok = cell;
        while (*tok == ' ' || *tok == '\t') tok++;
        char *end = tok + strlen(tok);
        while (end > tok && (end[-1] == ' ' || end[-1] == '\t')) *--end = '\0';
        if (*tok) {
            Cell c = {.rank = p->n_rows, .line = line, .col = (int)(tok - row) + 1, .group = -1};
            const char *why = push_cell(p, tok, c);
            if (why) {
                error_set(err, "%s:%d:%d: bad action '%.40s': %s", origin, line, c.col, tok, why);
                return -1;
            }
        }
        if (!comma) return 0;
        cell = comma + 1;
    }
}

static int parse_rows(Parsed *p, char *text, const char *origin, Error *err) {
    // Trailing blank lines are not ranks.
    size_t len = strlen(text);
    while (len && isspace((unsigned char)text[len - 1])) text[--len] = '\0';
    if (!len) {
        error_set(err, "%s: empty schedule (expected one row of actions per rank)", origin);
        return -1;
    }
    char *row = text;
    for (int line = 1; row; line++) {
        char *nl = strchr(row, '\n');
        if (nl) *nl = '\0';
        if (nl && nl > row && nl[-1] == '\r') nl[-1] = '\0';
        if (parse_row(p, row, line, origin, err)) return -1;
        p->n_rows++;
        row = nl ? nl + 1 : NULL;
    }
    return 0;
}

// Infers the stage -> rank map from which row holds each stage.
static int infer_map(const Parsed *p, int n_stages, int *stage_rank, const char *origin, Error *err) {
    int *first = xmalloc(sizeof(int) * (size_t)n_stages);
    for (int st = 0; st < n_stages; st++) stage_rank[st] = first[st] = -1;
    int rc = 0;
    for (int k = 0; k < p->n && !rc; k++) {
        const Cell *c = &p->cells[k];
        int st = c->a.stage;
        if (stage_rank[st] < 0) {
            stage_rank[st] = c->rank;
            first[st] = k;
        } else if (stage_rank[st] != c->rank) {
            const Cell *f = &p->cells[first[st]];
            error_set(err, "%s:%d:%d: stage %d is on rank %d here but on rank %d at line %d, column %d", origin,
                      c->line, c->col, st, c->rank, f->rank, f->line, f->col);
            rc = -1;
        }
    }
    for (int st = 0; st < n_stages && !rc; st++)
        if (stage_rank[st] < 0) {
            error_set(err, "%s: stage %d appears on no rank (stages 0..%d are used)", origin, st, n_stages - 1);
            rc = -1;
        }
    free(first);
    return rc;
}

// ---- sends of an OVERLAP_F_B: right after the sub-action that produced them -------------
//
// torch runs "(0F3;3B1)OVERLAP_F_B" as one action and sends both results after it
// ("...,0SEND_F3,3SEND_B1"). pptrain runs the two sub-actions one after the other, so each
// send moves up to just after its own sub-action, as pptrain's lowering of the compute-only
// form places it (sends are buffered: sending earlier never delays anything).

static bool produces(Action compute, Action send) {
    if (compute.stage != send.stage || compute.mb != send.mb) return false;
    if (send.type == ACT_SEND_F) return compute.type == ACT_F;
    return send.type == ACT_SEND_B && (compute.type == ACT_B || compute.type == ACT_I);
}

static int first_producer(const Parsed *p, int lo, int hi, Action send) {
    for (int j = lo; j < hi; j++)
        if (produces(p->cells[j].a, send)) return j;
    return -1;
}

// The end of the run of sends that directly follows the group [lo, from) on its row and
// that its sub-actions produced.
static int group_sends_end(const Parsed *p, int lo, int from) {
    int k = from;
    for (; k < p->n && p->cells[k].rank == p->cells[lo].rank; k++) {
        bool ours = false;
        for (int j = lo; j < from && !ours; j++) ours = produces(p->cells[j].a, p->cells[k].a);
        if (!ours) break;
    }
    return k;
}

// Moves each send that follows an OVERLAP_F_B group to just after its own sub-action.
static void place_group_sends(Parsed *p) {
    Cell *tmp = NULL;
    int tmp_cap = 0;
    for (int lo = 0; lo < p->n;) {
        int g = p->cells[lo].group, hi = lo + 1;
        if (g < 0) {
            lo++;
            continue;
        }
        while (hi < p->n && p->cells[hi].group == g && p->cells[hi].rank == p->cells[lo].rank) hi++;
        int sends_end = group_sends_end(p, lo, hi);
        int n = sends_end - lo, out = 0;
        if (n > tmp_cap) tmp = check_alloc(realloc(tmp, sizeof(Cell) * (size_t)(tmp_cap = n)), sizeof(Cell) * (size_t)n,
                                          __FILE__, __LINE__);
        for (int j = lo; j < hi; j++) {
            tmp[out++] = p->cells[j];
            for (int k = hi; k < sends_end; k++)  // each send once, after its first producer
                if (produces(p->cells[j].a, p->cells[k].a) && first_producer(p, lo, hi, p->cells[k].a) == j)
                    tmp[out++] = p->cells[k];
        }
        memcpy(&p->cells[lo], tmp, sizeof(Cell) * (size_t)out);  // out == n
        lo = sends_end;
    }
    free(tmp);
}

// ---- receives: posted where they stand, waited on where torch waits --------------------

// Where a pending receive of (RECV_F or RECV_B, stage, mb) sits in the row, -1 when none.
typedef struct {
    int *where;   // (2 x S x M)
    int S, M;
} Pending;

static int *pending_slot(Pending *pd, bool grad, int stage, int mb) {
    return &pd->where[((size_t)grad * (size_t)pd->S + (size_t)stage) * (size_t)pd->M + (size_t)mb];
}

// The slot a cell waits on, or NULL: WAIT_RECV_* names it; F consumes RECV_F of its
// (stage, mb), B and I consume RECV_B.
static int *consumed_slot(Pending *pd, Action a) {
    switch ((int)a.type) {
    case CELL_WAIT_RECV_F:
    case ACT_F: return pending_slot(pd, false, a.stage, a.mb);
    case CELL_WAIT_RECV_B:
    case ACT_B:
    case ACT_I: return pending_slot(pd, true, a.stage, a.mb);
    default: return NULL;
    }
}

static int cell_error(const Cell *c, const char *origin, const char *what, Error *err) {
    char buf[48];
    const char *name = (int)c->a.type == CELL_WAIT_RECV_F   ? "WAIT_RECV_F"
                       : (int)c->a.type == CELL_WAIT_RECV_B ? "WAIT_RECV_B"
                                                            : schedule_type_name(c->a.type);
    snprintf(buf, sizeof buf, "%d%s%d", c->a.stage, name, c->a.mb);
    error_set(err, "%s:%d:%d: %s: %s", origin, c->line, c->col, buf, what);
    return -1;
}

// For one rank's cells [lo, hi): arrives[k] = the RECV cell that moves to just before cell k
// (its WAIT_RECV, else the first compute after it that consumes it), -1 for none. A RECV
// that nothing consumes after it stays where it is (the validator then names the problem).
static int match_receives(const Parsed *p, int lo, int hi, Pending *pd, int *arrives, const char *origin,
                          Error *err) {
    int rc = 0;
    for (int k = lo; k < hi && !rc; k++) {
        const Cell *c = &p->cells[k];
        arrives[k] = -1;
        if (c->a.type == ACT_RECV_F || c->a.type == ACT_RECV_B) {
            int *slot = pending_slot(pd, c->a.type == ACT_RECV_B, c->a.stage, c->a.mb);
            if (*slot >= 0) rc = cell_error(c, origin, "received again before the first receive was consumed", err);
            *slot = k;
            continue;
        }
        int *slot = consumed_slot(pd, c->a);
        if (slot && *slot >= 0) {
            arrives[k] = *slot;
            *slot = -1;
        } else if ((int)c->a.type >= CELL_WAIT_RECV_F) {
            rc = cell_error(c, origin, "waits for a receive that is not posted before it (or was consumed already)",
                            err);
        }
    }
    for (int k = lo; k < hi; k++) {  // leave the table all -1 for the next rank
        const Cell *c = &p->cells[k];
        if (c->a.type == ACT_RECV_F || c->a.type == ACT_RECV_B)
            *pending_slot(pd, c->a.type == ACT_RECV_B, c->a.stage, c->a.mb) = -1;
    }
    return rc;
}

// Rewrites each rank's cells so every RECV stands where torch waits for it (see the top of
// this file), and drops the WAIT_RECV markers. A file without receives is left as it is.
static int place_receives(Parsed *p, int S, int M, const char *origin, Error *err) {
    bool any = false;
    for (int k = 0; k < p->n && !any; k++)
        any = p->cells[k].a.type == ACT_RECV_F || p->cells[k].a.type == ACT_RECV_B ||
              (int)p->cells[k].a.type >= CELL_WAIT_RECV_F;
    if (!any) return 0;
    Pending pd = {xmalloc(sizeof(int) * 2 * (size_t)S * (size_t)M), S, M};
    memset(pd.where, 0xff, sizeof(int) * 2 * (size_t)S * (size_t)M);  // all -1
    int *arrives = xmalloc(sizeof(int) * (size_t)p->n);
    bool *moved = xcalloc((size_t)p->n, sizeof(bool));
    Cell *out = xmalloc(sizeof(Cell) * (size_t)p->n);
    int n_out = 0, rc = 0;
    for (int lo = 0, hi; lo < p->n && !rc; lo = hi) {
        for (hi = lo; hi < p->n && p->cells[hi].rank == p->cells[lo].rank; hi++) {}
        rc = match_receives(p, lo, hi, &pd, arrives, origin, err);
        for (int k = lo; k < hi && !rc; k++)
            if (arrives[k] >= 0) moved[arrives[k]] = true;
        for (int k = lo; k < hi && !rc; k++) {
            if (arrives[k] >= 0) out[n_out++] = p->cells[arrives[k]];
            if (!moved[k] && (int)p->cells[k].a.type < CELL_DROP) out[n_out++] = p->cells[k];
        }
    }
    if (!rc) {
        free(p->cells);
        p->cells = out;
        p->n = n_out;
        p->cap = p->n;  // n_out <= the old n; nothing is pushed after this
        out = NULL;
    }
    free(out);
    free(moved);
    free(arrives);
    free(pd.where);
    return rc;
}

// Whether cell k is an OVERLAP_F_B sub-action with another after it: the next compute cell of
// its row (messages may have moved in between) belongs to the same group.
static bool overlaps_next(const Parsed *p, int k) {
    const Cell *c = &p->cells[k];
    if (c->group < 0) return false;
    int j = k + 1;
    while (j < p->n && p->cells[j].rank == c->rank && schedule_is_comm(p->cells[j].a.type)) j++;
    return j < p->n && p->cells[j].rank == c->rank && p->cells[j].group == c->group;
}

static Schedule *build_from_cells(Parsed *p, const char *origin, Error *err) {
    int n_stages = 0, n_mb = 0;
    for (int k = 0; k < p->n; k++) {
        if (p->cells[k].a.stage >= n_stages) n_stages = p->cells[k].a.stage + 1;
        if (p->cells[k].a.mb >= n_mb) n_mb = p->cells[k].a.mb + 1;
    }
    if (p->n == 0) {
        error_set(err, "%s: no actions", origin);
        return NULL;
    }
    if ((long long)n_stages * n_mb > CSV_MAX_SLOTS) {
        error_set(err, "%s: %d stages x %d microbatches is more than 10^7 actions", origin, n_stages, n_mb);
        return NULL;
    }
    place_group_sends(p);
    if (place_receives(p, n_stages, n_mb, origin, err)) return NULL;
    Schedule *s = schedule_new(origin, p->n_rows, n_stages, n_mb, STAGE_MAP_LOOP);
    if (infer_map(p, n_stages, s->stage_rank, origin, err)) {
        schedule_free(s);
        return NULL;
    }
    for (int k = 0; k < p->n; k++) {
        Action a = p->cells[k].a;
        a.overlap_next = overlaps_next(p, k);
        schedule_push_action(s, p->cells[k].rank, a);
    }
    return s;
}

// The file's compute actions alone, messages dropped.
static Schedule *compute_only(const Schedule *s) {
    Schedule *c = schedule_copy(s);
    for (int r = 0; r < c->n_ranks; r++) {
        ScheduleList *l = &c->ranks[r];
        int kept = 0;
        for (int i = 0; i < l->n; i++)
            if (!schedule_is_comm(l->actions[i].type)) l->actions[kept++] = l->actions[i];
        l->n = kept;
    }
    return c;
}

// What runs: weight gradients put in microbatch order (schedule_order.c) before the messages
// are placed, as for a built-in. Ordering can keep a timeline whole (looped BFS's reversed
// backward takes the microbatches in forward order, same bubble, same peak) only while no
// message has to move with it, so a file whose messages sit where pptrain's (and torch's)
// lowering puts them is ordered as its compute actions and lowered again; a file that places
// its messages its own way keeps them, and its order is fixed when it runs.
static Schedule *ordered_and_lowered(Schedule *s) {
    Schedule *bare = compute_only(s);
    bool standard = !schedule_has_comm(s);
    if (!standard) {
        Schedule *relowered = schedule_copy(bare);
        schedule_lower(relowered);
        standard = schedule_equal(relowered, s);
        schedule_free(relowered);
    }
    if (!standard) {
        schedule_free(bare);
        return s;
    }
    schedule_free(s);
    schedule_order_weight_grads(bare);
    schedule_lower(bare);
    return bare;
}

Schedule *schedule_parse_csv(const char *text, const char *origin, Error *err) {
    // A UTF-8 byte order mark (Excel's "CSV UTF-8" writes one) is not part of the first cell.
    if (strncmp(text, "\xef\xbb\xbf", 3) == 0) text += 3;
    char *copy = strdup(text);
    check_alloc(copy, strlen(text) + 1, __FILE__, __LINE__);
    Parsed p = {0};
    Schedule *s = NULL;
    if (parse_rows(&p, copy, origin, err) == 0) s = build_from_cells(&p, origin, err);
    free(p.cells);
    free(copy);
    if (!s) return NULL;
    Error verr;
    if (schedule_validate(s, &verr)) {
        error_set(err, "%s: %s", origin, verr.msg);
        schedule_free(s);
        return NULL;
    }
    return ordered_and_lowered(s);
}

// A schedule of 64 ranks x 1024 microbatches is about 2 MB of CSV; 256 MB refuses a wrong file.
Schedule *schedule_load_csv(const char *path, Error *err) {
    size_t n;
    Error why;
    char *buf = file_read_all(path, (size_t)1 << 28, "a schedule CSV", &n, &why);
    if (!buf) {
        error_set(err, "--schedule: %s", why.msg);
        return NULL;
    }
    Schedule *s = NULL;
    if (strlen(buf) != n)
        error_set(err, "%s: not a text file (NUL byte at offset %zu)", path, strlen(buf));
    else
        s = schedule_parse_csv(buf, path, err);
    free(buf);
    return s;
}

// ---- writing torch's compute_comms form ---------------------------------------------------
//
// torch's _load_csv(format="compute_comms") runs a file as written: it posts each receive
// where its RECV stands, and wants one WAIT_SEND_F / WAIT_SEND_B after each send. The writer
// therefore lowers the compute order the way torch's own lowering does with its defaults
// (schedules.py: _add_unshard_reshard, _add_reduce_grad, _add_send_recv, _add_wait_send), so
// the file pptrain writes is the one torch writes for the same compute order.

enum {
    OUT_UNSHARD = ACT_COUNT, OUT_RESHARD, OUT_REDUCE_GRAD, OUT_WAIT_REDUCE_GRAD, OUT_WAIT_SEND_F, OUT_WAIT_SEND_B,
    OUT_COUNT
};
static const char *const OUT_NAMES[OUT_COUNT - ACT_COUNT] = {"UNSHARD",          "RESHARD",     "REDUCE_GRAD",
                                                             "WAIT_REDUCE_GRAD", "WAIT_SEND_F", "WAIT_SEND_B"};

typedef struct {
    Action *a;   // a[k].type is an ActionType or OUT_*
    int n, cap;
} OutList;

static void out_push_action(OutList *l, Action a) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->a = check_alloc(realloc(l->a, sizeof(Action) * (size_t)l->cap), sizeof(Action) * (size_t)l->cap,
                           __FILE__, __LINE__);
    }
    l->a[l->n++] = a;
}

static void out_push(OutList *l, int type, int stage, int mb) {
    out_push_action(l, (Action){(ActionType)type, stage, mb, false});
}

// torch's _add_unshard_reshard with its defaults (max_active_stages 3, lookahead "full"):
// before each compute action, RESHARD the stages that are not among the next 3 distinct
// stages this rank computes, then UNSHARD those of them not yet unsharded; RESHARD the rest at
// the end. (FSDP's parameter gathering: no-ops for torch stages without FSDP, and for pptrain.)
enum { FSDP_ACTIVE = 3 };

typedef struct {
    int st[FSDP_ACTIVE];
    int n;
} StageSet;   // distinct stages in order

static bool set_has(const StageSet *set, int stage) {
    for (int k = 0; k < set->n; k++)
        if (set->st[k] == stage) return true;
    return false;
}

// next[i]: the first FSDP_ACTIVE distinct stages among the compute actions i.. of the row.
static StageSet *next_stages(const Action *a, int n) {
    StageSet *next = xcalloc((size_t)n + 1, sizeof(StageSet));
    for (int i = n - 1; i >= 0; i--) {
        next[i].st[next[i].n++] = a[i].stage;
        for (int k = 0; k < next[i + 1].n && next[i].n < FSDP_ACTIVE; k++)
            if (next[i + 1].st[k] != a[i].stage) next[i].st[next[i].n++] = next[i + 1].st[k];
    }
    return next;
}

static void fsdp_before(OutList *l, StageSet *active, const StageSet *resident) {
    StageSet kept = {{0}, 0};
    for (int k = 0; k < active->n; k++) {
        if (set_has(resident, active->st[k])) kept.st[kept.n++] = active->st[k];
        else out_push(l, OUT_RESHARD, active->st[k], -1);
    }
    for (int k = 0; k < resident->n; k++)
        if (!set_has(&kept, resident->st[k])) {
            out_push(l, OUT_UNSHARD, resident->st[k], -1);
            kept.st[kept.n++] = resident->st[k];
        }
    *active = kept;
}

// torch's lowering of one rank's compute actions before its messages: FSDP's UNSHARD /
// RESHARD as above, and (_add_reduce_grad) "sREDUCE_GRAD,sWAIT_REDUCE_GRAD" after the M-th
// B or W of stage s, where that stage's gradients are complete. An overlapped pair is one
// action to torch: FSDP's step comes before it and the reductions after it (its stages are
// among the next 3 whenever a rank holds at most 3 stages, as dualpipe-v's ranks hold 2).
static OutList torch_compute_row(const Schedule *s, int r, int *backwards_seen) {
    OutList l = {0};
    Action *compute = xmalloc(sizeof(Action) * (size_t)(s->ranks[r].n + 1));
    int n = 0, n_reduce = 0;
    int *reduce = xmalloc(sizeof(int) * (size_t)(s->ranks[r].n + 1));  // stages to reduce after this pair
    for (int i = 0; i < s->ranks[r].n; i++)
        if (!schedule_is_comm(s->ranks[r].actions[i].type)) compute[n++] = s->ranks[r].actions[i];
    StageSet *next = next_stages(compute, n), active = {{0}, 0};
    for (int i = 0; i < n; i++) {
        Action a = compute[i];
        if (i == 0 || !compute[i - 1].overlap_next) fsdp_before(&l, &active, &next[i]);
        out_push_action(&l, a);
        if ((a.type == ACT_B || a.type == ACT_W) && ++backwards_seen[a.stage] == s->n_microbatches)
            reduce[n_reduce++] = a.stage;
        if (a.overlap_next) continue;
        for (int k = 0; k < n_reduce; k++) {
            out_push(&l, OUT_REDUCE_GRAD, reduce[k], -1);
            out_push(&l, OUT_WAIT_REDUCE_GRAD, reduce[k], -1);
        }
        n_reduce = 0;
    }
    for (int k = 0; k < active.n; k++) out_push(&l, OUT_RESHARD, active.st[k], -1);
    free(reduce);
    free(next);
    free(compute);
    return l;
}

// The message a compute action sends to another rank: SEND_F after F, SEND_B after B or I,
// when the neighbour stage lives elsewhere. Returns false when it sends none.
static bool sends_message(const Schedule *s, Action a, ActionType *send) {
    int to = a.type == ACT_F ? a.stage + 1 : a.stage - 1;
    if (a.type != ACT_F && a.type != ACT_B && a.type != ACT_I) return false;
    if (to < 0 || to >= s->n_stages || s->stage_rank[to] == s->stage_rank[a.stage]) return false;
    *send = a.type == ACT_F ? ACT_SEND_F : ACT_SEND_B;
    return true;
}

static bool *done_slot(bool *done, const Schedule *s, int type, int stage, int mb) {
    return &done[((size_t)type * (size_t)s->n_stages + (size_t)stage) * (size_t)s->n_microbatches + (size_t)mb];
}

// torch's _ready_to_schedule: whether rank r has the input of a: its receive, or (same rank)
// the neighbour stage's compute.
static bool torch_ready(const Schedule *s, bool *done, Action a) {
    if ((int)a.type >= ACT_COUNT) return true;
    if (a.type == ACT_F && a.stage > 0) {
        bool local = s->stage_rank[a.stage - 1] == s->stage_rank[a.stage];
        return *done_slot(done, s, ACT_RECV_F, a.stage, a.mb) ||
               (local && *done_slot(done, s, ACT_F, a.stage - 1, a.mb));
    }
    if ((a.type == ACT_B || a.type == ACT_I) && a.stage < s->n_stages - 1) {
        bool local = s->stage_rank[a.stage + 1] == s->stage_rank[a.stage];
        return *done_slot(done, s, ACT_RECV_B, a.stage, a.mb) ||
               (local && (*done_slot(done, s, ACT_B, a.stage + 1, a.mb) || *done_slot(done, s, ACT_I, a.stage + 1, a.mb)));
    }
    return true;
}

// torch's _add_send_recv: in rounds over the ranks, each rank appends its next action once
// its input is there; a compute that sends appends its SEND, and the RECV goes to the
// receiving rank's list at that moment (so receives are posted as early as torch posts them).
static int torch_send_recv(const Schedule *s, OutList *in, OutList *out) {
    bool *done = xcalloc((size_t)ACT_COUNT * (size_t)s->n_stages * (size_t)s->n_microbatches, sizeof(bool));
    int *next = xcalloc((size_t)s->n_ranks, sizeof(int));
    int rc = 0;
    for (bool left = true; left && !rc;) {
        bool progress = false;
        left = false;
        for (int r = 0; r < s->n_ranks; r++) {
            if (next[r] == in[r].n) continue;
            // The next action, or an overlapped pair [next, last] as one: all its parts ready.
            int last = next[r];
            while (in[r].a[last].overlap_next && last + 1 < in[r].n) last++;
            bool ready = true;
            for (int k = next[r]; k <= last; k++) ready = ready && torch_ready(s, done, in[r].a[k]);
            if (!ready) {
                left = true;
                continue;
            }
            for (int k = next[r]; k <= last; k++) {
                Action a = in[r].a[k];
                out_push_action(&out[r], a);
                if ((int)a.type < ACT_COUNT) *done_slot(done, s, a.type, a.stage, a.mb) = true;
            }
            for (int k = next[r]; k <= last; k++) {
                Action a = in[r].a[k];
                ActionType send;
                if (!sends_message(s, a, &send)) continue;
                bool fwd = send == ACT_SEND_F;
                int to = fwd ? a.stage + 1 : a.stage - 1;
                out_push(&out[r], send, a.stage, a.mb);
                out_push(&out[s->stage_rank[to]], fwd ? ACT_RECV_F : ACT_RECV_B, to, a.mb);
                *done_slot(done, s, fwd ? ACT_RECV_F : ACT_RECV_B, to, a.mb) = true;
            }
            progress = true;
            next[r] = last + 1;
            left |= next[r] < in[r].n;
        }
        if (left && !progress) rc = -1;  // cannot happen for a validated schedule
    }
    free(next);
    free(done);
    return rc;
}

// torch's _add_wait_send: a forward send is retired right after the local backward (B or I)
// of its stage and microbatch (after the whole pair, for a part of an overlapped pair), every
// other send at the end of the row, in send order.
static void torch_wait_send(const Schedule *s, const OutList *in, OutList *out) {
    bool *pending = xcalloc(2 * (size_t)s->n_stages * (size_t)s->n_microbatches, sizeof(bool));
#define PENDING(grad, st, mb) pending[((size_t)(grad) * (size_t)s->n_stages + (size_t)(st)) * (size_t)s->n_microbatches + (size_t)(mb)]
    for (int k = 0, first = 0; k < in->n; k++) {
        Action a = in->a[k];
        out_push_action(out, a);
        if (a.type == ACT_SEND_F || a.type == ACT_SEND_B) PENDING(a.type == ACT_SEND_B, a.stage, a.mb) = true;
        if (k == 0 || !in->a[k - 1].overlap_next) first = k;  // the pair (or action) [first, k]
        if (a.overlap_next) continue;
        for (int j = first; j <= k; j++) {
            Action part = in->a[j];
            if ((part.type == ACT_B || part.type == ACT_I) && PENDING(0, part.stage, part.mb)) {
                out_push(out, OUT_WAIT_SEND_F, part.stage, part.mb);
                PENDING(0, part.stage, part.mb) = false;
            }
        }
    }
    for (int k = 0; k < in->n; k++) {
        Action a = in->a[k];
        if ((a.type == ACT_SEND_F || a.type == ACT_SEND_B) && PENDING(a.type == ACT_SEND_B, a.stage, a.mb))
            out_push(out, a.type == ACT_SEND_F ? OUT_WAIT_SEND_F : OUT_WAIT_SEND_B, a.stage, a.mb);
    }
#undef PENDING
    free(pending);
}

// One cell per action; the parts of an overlapped pair in one cell, "(0F3;3B1)OVERLAP_F_B".
static void write_row(FILE *out, const OutList *l) {
    for (int k = 0; k < l->n; k++) {
        Action a = l->a[k];
        const bool opens = a.overlap_next && (k == 0 || !l->a[k - 1].overlap_next);
        const bool in_pair = k > 0 && l->a[k - 1].overlap_next;
        const char *name = (int)a.type < ACT_COUNT ? schedule_type_name(a.type) : OUT_NAMES[a.type - ACT_COUNT];
        fprintf(out, "%s%s%d%s", in_pair ? ";" : k ? "," : "", opens ? "(" : "", a.stage, name);
        if (a.mb >= 0) fprintf(out, "%d", a.mb);
        if (in_pair && !a.overlap_next) fputs(")OVERLAP_F_B", out);
    }
    fputc('\n', out);
}

static int write_torch_comms(const Schedule *s, FILE *out) {
    OutList *compute = xcalloc((size_t)s->n_ranks, sizeof(OutList));
    OutList *comms = xcalloc((size_t)s->n_ranks, sizeof(OutList));
    int *backwards_seen = xcalloc((size_t)s->n_stages, sizeof(int));
    for (int r = 0; r < s->n_ranks; r++) compute[r] = torch_compute_row(s, r, backwards_seen);
    int rc = torch_send_recv(s, compute, comms);
    for (int r = 0; r < s->n_ranks && !rc; r++) {
        OutList waited = {0};
        torch_wait_send(s, &comms[r], &waited);
        write_row(out, &waited);
        free(waited.a);
    }
    for (int r = 0; r < s->n_ranks; r++) {
        free(compute[r].a);
        free(comms[r].a);
    }
    free(compute);
    free(comms);
    free(backwards_seen);
    return rc || ferror(out) ? -1 : 0;
}

int schedule_write_csv(const Schedule *s, FILE *out, bool with_comm) {
    if (with_comm) return write_torch_comms(s, out);
    for (int r = 0; r < s->n_ranks; r++) {
        OutList compute = {0};
        for (int i = 0; i < s->ranks[r].n; i++)
            if (!schedule_is_comm(s->ranks[r].actions[i].type)) out_push_action(&compute, s->ranks[r].actions[i]);
        write_row(out, &compute);
        free(compute.a);
    }
    return ferror(out) ? -1 : 0;
}
