// Schedules as CSV, in torch.distributed.pipelining's format (its _dump_csv / _load_csv):
// row r lists rank r's actions, e.g. "0F0,0F1,,0B0" (empty cells are torch's idle slots).
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/schedule/schedule.h"

// Indices past these are refused so the validator's (types x S x M) table stays small.
#define CSV_MAX_STAGE 100000
#define CSV_MAX_MB 1000000
#define CSV_MAX_SLOTS 10000000LL

typedef struct {
    Action a;
    int rank, line, col;
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

static const char *parse_type(const char **p, ActionType *t) {
    // Longest names first so "SEND_F" is not read as "S...".
    static const struct { const char *name; ActionType t; } TYPES[] = {
        {"SEND_F", ACT_SEND_F}, {"RECV_F", ACT_RECV_F}, {"SEND_B", ACT_SEND_B}, {"RECV_B", ACT_RECV_B},
        {"F", ACT_F}, {"B", ACT_B}, {"I", ACT_I}, {"W", ACT_W},
    };
    static const char *const TORCH_ONLY[] = {"UNSHARD", "RESHARD", "REDUCE_GRAD", "OVERLAP_F_B"};
    for (size_t k = 0; k < sizeof TORCH_ONLY / sizeof TORCH_ONLY[0]; k++)
        if (strncmp(*p, TORCH_ONLY[k], strlen(TORCH_ONLY[k])) == 0) return "action type not supported by pptrain";
    for (size_t k = 0; k < sizeof TYPES / sizeof TYPES[0]; k++) {
        size_t n = strlen(TYPES[k].name);
        if (strncmp(*p, TYPES[k].name, n) == 0) {
            *p += n;
            *t = TYPES[k].t;
            return NULL;
        }
    }
    return "unknown action type (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B)";
}

static const char *parse_action(const char *tok, Action *a) {
    const char *p = tok, *why;
    if ((why = parse_index(&p, "negative stage", "expected a stage number", CSV_MAX_STAGE, &a->stage))) return why;
    if ((why = parse_type(&p, &a->type))) return why;
    if ((why = parse_index(&p, "negative microbatch", "missing microbatch", CSV_MAX_MB, &a->mb))) return why;
    return *p ? "trailing characters" : NULL;
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
            Cell c = {.rank = p->n_rows, .line = line, .col = (int)(tok - row) + 1};
            const char *why = parse_action(tok, &c.a);
            if (why) {
                error_set(err, "%s:%d:%d: bad action '%.40s': %s", origin, line, c.col, tok, why);
                return -1;
            }
            parsed_push(p, c);
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

static Schedule *build_from_cells(const Parsed *p, const char *origin, Error *err) {
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
    Schedule *s = schedule_new(origin, p->n_rows, n_stages, n_mb, STAGE_MAP_LOOP);
    if (infer_map(p, n_stages, s->stage_rank, origin, err)) {
        schedule_free(s);
        return NULL;
    }
    for (int k = 0; k < p->n; k++) {
        const Cell *c = &p->cells[k];
        schedule_push(s, c->rank, c->a.type, c->a.stage, c->a.mb);
    }
    return s;
}

Schedule *schedule_parse_csv(const char *text, const char *origin, Error *err) {
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
    schedule_lower(s);  // no-op when the file already lists its messages
    return s;
}

Schedule *schedule_load_csv(const char *path, Error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        error_set(err, "%s: cannot open schedule: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap);
    for (size_t got; (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            cap *= 2;
            buf = check_alloc(realloc(buf, cap), cap, __FILE__, __LINE__);
        }
    }
    int read_error = ferror(f);
    fclose(f);
    buf[n] = '\0';
    Schedule *s = NULL;
    if (read_error)
        error_set(err, "%s: read error", path);
    else if (strlen(buf) != n)
        error_set(err, "%s: not a text file (NUL byte at offset %zu)", path, strlen(buf));
    else
        s = schedule_parse_csv(buf, path, err);
    free(buf);
    return s;
}

int schedule_write_csv(const Schedule *s, FILE *out, bool with_comm) {
    Schedule *lowered = NULL;
    if (with_comm && !schedule_has_comm(s)) {
        lowered = schedule_copy(s);
        schedule_lower(lowered);
        s = lowered;
    }
    for (int r = 0; r < s->n_ranks; r++) {
        const char *sep = "";
        for (int i = 0; i < s->ranks[r].n; i++) {
            Action a = s->ranks[r].actions[i];
            if (!with_comm && schedule_is_comm(a.type)) continue;
            char buf[48];
            fprintf(out, "%s%s", sep, schedule_format_action(a, buf, sizeof buf));
            sep = ",";
        }
        fputc('\n', out);
    }
    schedule_free(lowered);
    return ferror(out) ? -1 : 0;
}
