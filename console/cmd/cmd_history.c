// `pptrain history`: browse the run store. list (a table of runs), show RUN (config, loss
// sparkline, per-stage utilization, checkpoints), compare A B ... (runs side by side, differing
// rows marked), export RUN (steps as CSV or JSON), schema (the SQL of the store). --json
// everywhere. Reads only: the store is opened read-only and a missing one is never created.
#include "console/cmd/cmd_history.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "console/cli.h"
#include "console/tui/pure/tui_bubble.h"
#include "storage/atomic_file.h"
#include "storage/db.h"

#define HISTORY_MAX_RUNS 16
#define HISTORY_SPARK_WIDTH 60

typedef enum { VERB_LIST = 1, VERB_SHOW = 2, VERB_COMPARE = 4, VERB_EXPORT = 8, VERB_SCHEMA = 16 } HistoryVerb;
#define VERB_READS (VERB_LIST | VERB_SHOW | VERB_COMPARE | VERB_EXPORT)

typedef struct {
    HistoryVerb verb;
    const char *db_path, *schedule, *status, *out;
    char since[32];                  // ISO-8601 UTC; "" when not given
    int limit;
    bool json, csv, ascii, help;
    const char *runs[HISTORY_MAX_RUNS];
    int n_runs;
} HistoryOptions;

typedef struct {
    const char *flag;
    const char *arg;                 // NULL for a switch
    unsigned verbs;                  // where it applies
    const char *help;
    int (*set)(HistoryOptions *o, const char *flag, const char *value, Error *err);
} HistoryOption;

// ---- options ------------------------------------------------------------------------------

static int set_db(HistoryOptions *o, const char *f, const char *v, Error *e) {
    (void)f, (void)e;
    o->db_path = v;
    return 0;
}

static int set_schedule(HistoryOptions *o, const char *f, const char *v, Error *e) {
    (void)f, (void)e;
    o->schedule = v;
    return 0;
}

static int set_status(HistoryOptions *o, const char *flag, const char *v, Error *err) {
    static const char *const STATUSES[] = {"running", "finished", "failed", "stopped", "crashed"};
    for (size_t i = 0; i < sizeof STATUSES / sizeof STATUSES[0]; i++) {
        if (strcmp(v, STATUSES[i]) == 0) {
            o->status = STATUSES[i];
            return 0;
        }
    }
    error_set(err, "%s: '%s' is not running, finished, failed, stopped or crashed", flag, v);
    return -1;
}

// YYYY-MM-DD[(T| )HH:MM[:SS]] in local time, or with a trailing Z in UTC.
static int set_since(HistoryOptions *o, const char *flag, const char *v, Error *err) {
    struct tm tm = {0}, want;
    int len = 0, n = sscanf(v, "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &len);
    const char *rest = v + len;
    if (n == 3 && (*rest == 'T' || *rest == ' ')) {
        int len2 = 0;
        if (sscanf(rest + 1, "%2d:%2d%n:%2d%n", &tm.tm_hour, &tm.tm_min, &len2, &tm.tm_sec, &len2) >= 2)
            rest += 1 + len2;
        else n = 0;
    }
    bool utc = *rest == 'Z';
    if (n != 3 || v[0] < '0' || v[0] > '9' || rest[utc] != '\0' || len != 10) goto bad;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_isdst = -1;
    want = tm;
    time_t t = utc ? timegm(&tm) : mktime(&tm);
    // mktime normalizes 2024-02-30 to March 1: a changed field means the date does not exist.
    if (t == (time_t)-1 || tm.tm_year != want.tm_year || tm.tm_mon != want.tm_mon || tm.tm_mday != want.tm_mday ||
        tm.tm_hour != want.tm_hour || tm.tm_min != want.tm_min || tm.tm_sec != want.tm_sec)
        goto bad;
    struct tm g;
    gmtime_r(&t, &g);
    strftime(o->since, sizeof o->since, "%Y-%m-%dT%H:%M:%S.000Z", &g);
    return 0;
bad:
    error_set(err, "%s: '%s' is not a date (YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS], local time; Z for UTC)", flag, v);
    return -1;
}

static int set_limit(HistoryOptions *o, const char *flag, const char *v, Error *err) {
    long x;
    if (cli_parse_int(flag, v, 1, 1000000, &x, err)) return -1;
    o->limit = (int)x;
    return 0;
}

static int set_out(HistoryOptions *o, const char *f, const char *v, Error *e) {
    (void)f, (void)e;
    o->out = v;
    return 0;
}

#define SWITCH(fn, field) \
    static int fn(HistoryOptions *o, const char *f, const char *v, Error *e) { \
        (void)f, (void)v, (void)e; \
        o->field = true; \
        return 0; \
    }
SWITCH(set_json, json)
SWITCH(set_csv, csv)
SWITCH(set_ascii, ascii)
SWITCH(set_help, help)

static const HistoryOption OPTIONS[] = {
    {"--db", "FILE", VERB_READS, "the run store (default " DB_DEFAULT_PATH ")", set_db},
    {"--schedule", "NAME", VERB_LIST, "list: only runs of this schedule", set_schedule},
    {"--status", "S", VERB_LIST, "list: only running, finished, failed, stopped or crashed runs", set_status},
    {"--since", "DATE", VERB_LIST, "list: only runs started at or after DATE (YYYY-MM-DD[THH:MM[:SS]], local)",
     set_since},
    {"--limit", "N", VERB_LIST, "list: the newest N runs", set_limit},
    {"--json", NULL, VERB_READS, "print JSON instead of a table", set_json},
    {"--csv", NULL, VERB_EXPORT, "export: steps as CSV", set_csv},
    {"--out", "FILE", VERB_EXPORT, "export: write FILE (atomically) instead of stdout", set_out},
    {"--ascii", NULL, VERB_SHOW, "show: draw the sparkline in ASCII (automatic without a UTF-8 locale)", set_ascii},
    {"--help", NULL, VERB_READS | VERB_SCHEMA, "this help", set_help},
};
#define N_OPTIONS (sizeof OPTIONS / sizeof OPTIONS[0])

typedef struct {
    const char *name;
    HistoryVerb verb;
    int min_runs, max_runs;
    const char *usage;
} HistoryVerbInfo;

static const HistoryVerbInfo VERBS[] = {
    {"list", VERB_LIST, 0, 0, "list                 runs, newest first: P stages, V virtual, D data-parallel, "
                              "M microbatches"},
    {"show", VERB_SHOW, 1, 1, "show RUN             one run: config, loss sparkline, stage utilization, checkpoints"},
    {"compare", VERB_COMPARE, 2, HISTORY_MAX_RUNS, "compare A B [C...]   runs side by side; * marks rows that differ"},
    {"export", VERB_EXPORT, 1, 1, "export RUN           the run's steps (--csv or --json)"},
    {"schema", VERB_SCHEMA, 0, 0, "schema               the store's SQL schema, for sqlite3 and your own tools"},
};
#define N_VERBS (sizeof VERBS / sizeof VERBS[0])

static void history_usage(FILE *out) {
    fprintf(out, "usage: pptrain history [list|show RUN|compare A B ...|export RUN|schema] [options]\n"
                 "RUN is a run id or 'latest'. A run still marked running whose process (on this host) is gone\n"
                 "shows as crashed.\n\n");
    for (size_t k = 0; k < N_VERBS; k++) fprintf(out, "  %s\n", VERBS[k].usage);
    fprintf(out, "\n");
    for (size_t k = 0; k < N_OPTIONS; k++) {
        char head[64];
        snprintf(head, sizeof head, "%s%s%s", OPTIONS[k].flag, OPTIONS[k].arg ? " " : "",
                 OPTIONS[k].arg ? OPTIONS[k].arg : "");
        fprintf(out, "  %-20s %s\n", head, OPTIONS[k].help);
    }
}

static const HistoryVerbInfo *history_verb(HistoryVerb v) {
    for (size_t k = 0; k < N_VERBS; k++)
        if (VERBS[k].verb == v) return &VERBS[k];
    return &VERBS[0];
}

static int history_option(HistoryOptions *o, int argc, char **argv, int *i, Error *err) {
    const HistoryOption *opt = NULL;
    for (size_t k = 0; k < N_OPTIONS && !opt; k++)
        if (strcmp(argv[*i], OPTIONS[k].flag) == 0) opt = &OPTIONS[k];
    if (!opt) {
        error_set(err, "history: unknown option '%s' (see pptrain history --help)", argv[*i]);
        return -1;
    }
    if (!(opt->verbs & o->verb)) {
        error_set(err, "history %s: %s does not apply here (see pptrain history --help)", history_verb(o->verb)->name,
                  opt->flag);
        return -1;
    }
    const char *value = NULL;
    if (opt->arg && !(value = cli_value(argc, argv, i, err))) return -1;
    return opt->set(o, opt->flag, value, err);
}

static int history_check(const HistoryOptions *o, Error *err) {
    const HistoryVerbInfo *v = history_verb(o->verb);
    if (o->n_runs < v->min_runs) {
        error_set(err, "history %s: needs %s (a run id or 'latest')", v->name,
                  v->min_runs == 1 ? "a RUN" : "at least two runs");
        return -1;
    }
    if (o->verb == VERB_EXPORT && o->csv == o->json) {
        error_set(err, o->csv ? "history export: --csv and --json both given; choose one"
                              : "history export: choose --csv or --json");
        return -1;
    }
    return 0;
}

static bool is_flag(const char *a) { return a[0] == '-' && a[1] != '\0'; }

// The verb: the first argument that is neither a flag nor a flag's value (default list), so
// flags go before or after it. Returns its index in argv (0: none), or -1 with err.
static int history_find_verb(int argc, char **argv, HistoryOptions *o, Error *err) {
    for (int i = 2; i < argc; i++) {
        if (is_flag(argv[i])) {
            const char *flag = argv[i];
            for (size_t k = 0; k < N_OPTIONS; k++)
                if (strcmp(flag, OPTIONS[k].flag) == 0 && OPTIONS[k].arg) i++;
            continue;
        }
        size_t k = 0;
        while (k < N_VERBS && strcmp(argv[i], VERBS[k].name) != 0) k++;
        if (k == N_VERBS) {
            error_set(err, "history: unknown subcommand '%s' (list, show, compare, export, schema)", argv[i]);
            return -1;
        }
        o->verb = VERBS[k].verb;
        return i;
    }
    return 0;
}

// argv[1] is "history"; the verb may come anywhere among the flags.
static int history_parse(int argc, char **argv, HistoryOptions *o, Error *err) {
    *o = (HistoryOptions){.verb = VERB_LIST, .db_path = DB_DEFAULT_PATH};
    const int verb_at = history_find_verb(argc, argv, o, err);
    if (verb_at < 0) return -1;
    const HistoryVerbInfo *v = history_verb(o->verb);
    for (int i = 2; i < argc; i++) {
        if (i == verb_at) continue;
        if (is_flag(argv[i])) {
            if (history_option(o, argc, argv, &i, err)) return -1;
        } else if (o->n_runs < v->max_runs) {
            o->runs[o->n_runs++] = argv[i];
        } else {
            error_set(err, "history %s: unexpected argument '%s'", v->name, argv[i]);
            return -1;
        }
    }
    return o->help ? 0 : history_check(o, err);
}

// ---- formatting ------------------------------------------------------------------------------

// "2025-03-01T14:02:07.123Z" as local "2025-03-01 15:02:07"; the stored text if it does not parse.
static void local_time(const char *iso, char *buf, size_t size) {
    struct tm tm = {0};
    if (!iso) {
        snprintf(buf, size, "-");
        return;
    }
    if (sscanf(iso, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
               &tm.tm_sec) != 6) {
        snprintf(buf, size, "%s", iso);
        return;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    struct tm local;
    localtime_r(&t, &local);
    strftime(buf, size, "%Y-%m-%d %H:%M:%S", &local);
}

static const char *shown_status(const DbRunInfo *r) {
    return r->crashed ? "crashed" : r->status ? r->status : "?";
}

static void fmt_num(char *buf, size_t size, const char *fmt, double v) {
    if (isnan(v)) snprintf(buf, size, "-");
    else snprintf(buf, size, fmt, v);
}

static void fmt_steps(char *buf, size_t size, const DbRunInfo *r) {
    if (r->steps_planned > 0) snprintf(buf, size, "%d/%d", r->last_step, r->steps_planned);
    else snprintf(buf, size, "%d", r->last_step);
}

static bool locale_is_utf8(void) {
    char *old = setlocale(LC_CTYPE, NULL);
    char saved[64];
    snprintf(saved, sizeof saved, "%s", old ? old : "C");
    setlocale(LC_CTYPE, "");
    bool utf8 = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
    setlocale(LC_CTYPE, saved);
    return utf8;
}

// ---- JSON -------------------------------------------------------------------------------------

static void json_num(cJSON *obj, const char *key, double v) {
    if (isnan(v) || isinf(v)) cJSON_AddNullToObject(obj, key);
    else cJSON_AddNumberToObject(obj, key, v);
}

static void json_str(cJSON *obj, const char *key, const char *s) {
    if (s) cJSON_AddStringToObject(obj, key, s);
    else cJSON_AddNullToObject(obj, key);
}

// Exact 64-bit integers (cJSON numbers are doubles).
static void json_int64(cJSON *obj, const char *key, long long v) {
    char text[32];
    snprintf(text, sizeof text, "%lld", v);
    cJSON_AddRawToObject(obj, key, text);
}

static cJSON *history_run_json(const DbRunInfo *r, bool with_config) {
    cJSON *o = cJSON_CreateObject();
    json_int64(o, "id", r->id);
    json_str(o, "started_at", r->started_at);
    json_str(o, "ended_at", r->ended_at);
    json_str(o, "status", shown_status(r));
    json_str(o, "error", r->error);
    json_str(o, "schedule", r->schedule);
    const struct { const char *key; int v; } ints[] = {
        {"stages", r->stages}, {"virtual", r->virtual_stages}, {"dp", r->dp}, {"microbatches", r->microbatches},
        {"batch", r->batch}, {"seq_len", r->seq_len}, {"steps_planned", r->steps_planned},
        {"steps_done", r->steps_done}, {"last_step", r->last_step}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) cJSON_AddNumberToObject(o, ints[i].key, ints[i].v);
    json_str(o, "model", r->model);
    json_int64(o, "params", r->params);
    json_num(o, "lr", r->lr);
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)r->seed);
    cJSON_AddRawToObject(o, "seed", seed);
    json_str(o, "transport", r->transport);
    json_str(o, "device", r->device);
    if (r->resumed_from) json_int64(o, "resumed_from", r->resumed_from);
    else cJSON_AddNullToObject(o, "resumed_from");
    json_num(o, "last_loss", r->last_loss);
    json_num(o, "min_loss", r->min_loss);
    json_num(o, "median_tokens_per_s", r->median_tokens_per_s);
    json_num(o, "mean_bubble", r->mean_bubble);
    cJSON *parts = cJSON_AddObjectToObject(o, "mean_bubble_parts");
    json_num(parts, "ideal", r->mean_ideal);
    json_num(parts, "imbalance", r->mean_imbalance);
    json_num(parts, "transfer", r->mean_transfer);
    json_num(parts, "contention", r->mean_contention);
    if (r->host_cores > 0) cJSON_AddNumberToObject(o, "host_cores", r->host_cores);
    else cJSON_AddNullToObject(o, "host_cores");
    if (r->host_ranks > 0) cJSON_AddNumberToObject(o, "host_ranks", r->host_ranks);
    else cJSON_AddNullToObject(o, "host_ranks");
    json_str(o, "host", r->host);
    if (r->pid) json_int64(o, "pid", r->pid);
    else cJSON_AddNullToObject(o, "pid");
    if (with_config) {
        cJSON *config = r->config_json ? cJSON_Parse(r->config_json) : NULL;
        cJSON_AddItemToObject(o, "config", config ? config : cJSON_CreateNull());
    }
    return o;
}

static void json_print(cJSON *root) {
    char *text = cJSON_PrintUnformatted(root);
    check_alloc(text, 1, __FILE__, __LINE__);
    puts(text);
    free(text);
    cJSON_Delete(root);
}

// ---- list ---------------------------------------------------------------------------------------

static void list_table(const DbRunInfo *runs, int n) {
    printf("%5s  %-19s  %-8s  %-16s %3s %3s %3s %4s  %11s  %9s  %10s  %6s\n", "id", "started", "status", "schedule",
           "P", "V", "D", "M", "steps", "last loss", "med tok/s", "bubble");
    for (int i = 0; i < n; i++) {
        const DbRunInfo *r = &runs[i];
        char started[32], steps[32], loss[32], rate[32], bubble[32];
        local_time(r->started_at, started, sizeof started);
        fmt_steps(steps, sizeof steps, r);
        fmt_num(loss, sizeof loss, "%.4f", r->last_loss);
        fmt_num(rate, sizeof rate, "%.0f", r->median_tokens_per_s);
        fmt_num(bubble, sizeof bubble, "%.1f%%", 100 * r->mean_bubble);
        printf("%5lld  %-19s  %-8s  %-16.16s %3d %3d %3d %4d  %11s  %9s  %10s  %6s\n", (long long)r->id, started,
               shown_status(r), r->schedule ? r->schedule : "-", r->stages, r->virtual_stages, r->dp,
               r->microbatches, steps, loss, rate, bubble);
    }
}

static int history_list(Db *db, const HistoryOptions *o, Error *err) {
    DbRunFilter filter = {.schedule = o->schedule, .status = o->status, .since = o->since[0] ? o->since : NULL,
                          .limit = o->limit};
    DbRunInfo *runs;
    int n;
    if (db_runs_list(db, &filter, &runs, &n, err)) return -1;
    if (o->json) {
        cJSON *arr = cJSON_CreateArray();
        for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, history_run_json(&runs[i], false));
        json_print(arr);
    } else if (n == 0) {
        bool filtered = o->schedule || o->status || o->since[0];
        if (filtered) printf("no runs in %s match\n", db_path(db));
        else printf("no runs in %s yet (pptrain train --db %s records one)\n", db_path(db), db_path(db));
    } else {
        list_table(runs, n);
    }
    db_runs_free(runs, n);
    return 0;
}

// ---- runs by id ------------------------------------------------------------------------------

static int history_run_id(Db *db, const char *text, int64_t *id, Error *err) {
    if (strcmp(text, "latest") == 0) {
        *id = db_run_latest(db, err);
        if (*id == 0) error_set(err, "%s: no runs yet, so no latest run", db_path(db));
        return *id > 0 ? 0 : -1;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end != '\0' || v <= 0) {
        error_set(err, "history: '%s' is not a run id (a positive number or 'latest')", text);
        return -1;
    }
    *id = v;
    return 0;
}

static int history_load_run(Db *db, const char *text, DbRunInfo *r, Error *err) {
    int64_t id;
    if (history_run_id(db, text, &id, err)) return -1;
    return db_run_get(db, id, r, err);
}

// ---- show -----------------------------------------------------------------------------------------

// Buckets of consecutive steps, each drawn at its mean loss's height.
static void show_sparkline(const DbStep *steps, int n, bool ascii) {
    static const char *const BLOCKS[8] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    static const char LEVELS[8] = {'_', '.', '-', '~', '=', '+', '*', '#'};
    int width = n < HISTORY_SPARK_WIDTH ? n : HISTORY_SPARK_WIDTH;
    double mean[HISTORY_SPARK_WIDTH], lo = INFINITY, hi = -INFINITY;
    for (int b = 0; b < width; b++) {
        double sum = 0;
        int count = 0;
        for (int i = (int)((long)b * n / width); i < (int)((long)(b + 1) * n / width); i++)
            if (isfinite(steps[i].loss)) sum += steps[i].loss, count++;
        mean[b] = count ? sum / count : NAN;
        if (count) lo = fmin(lo, mean[b]), hi = fmax(hi, mean[b]);
    }
    printf("  ");
    for (int b = 0; b < width; b++) {
        int level = isnan(mean[b]) ? -1 : hi > lo ? (int)lround(7 * (mean[b] - lo) / (hi - lo)) : 0;
        if (level < 0) putchar(' ');
        else if (ascii) putchar(LEVELS[level]);
        else fputs(BLOCKS[level], stdout);
    }
    printf("   %.4g .. %.4g\n", lo, hi);
}

// " (2m53s)" between two stored timestamps; "" when either does not parse.
static const char *show_duration(const char *from, const char *to) {
    static char buf[48];
    struct tm a = {0}, b = {0};
    double ms_a = 0, ms_b = 0;
    const char *fmt = "%4d-%2d-%2dT%2d:%2d:%2d.%lf";
    buf[0] = '\0';
    if (sscanf(from, fmt, &a.tm_year, &a.tm_mon, &a.tm_mday, &a.tm_hour, &a.tm_min, &a.tm_sec, &ms_a) != 7 ||
        sscanf(to, fmt, &b.tm_year, &b.tm_mon, &b.tm_mday, &b.tm_hour, &b.tm_min, &b.tm_sec, &ms_b) != 7)
        return buf;
    double s = difftime(timegm(&b), timegm(&a)) + (ms_b - ms_a) / 1000.0;
    long whole = lround(s);
    if (s < 60) snprintf(buf, sizeof buf, " (%.1f s)", s);
    else if (whole < 3600) snprintf(buf, sizeof buf, " (%ldm%02lds)", whole / 60, whole % 60);
    else snprintf(buf, sizeof buf, " (%ldh%02ldm)", whole / 3600, whole / 60 % 60);
    return buf;
}

static void show_header(const DbRunInfo *r) {
    char started[32], ended[32];
    local_time(r->started_at, started, sizeof started);
    local_time(r->ended_at, ended, sizeof ended);
    printf("run %lld  %s\n", (long long)r->id, shown_status(r));
    printf("  started   %s\n", started);
    if (r->ended_at) printf("  ended     %s%s\n", ended, show_duration(r->started_at, r->ended_at));
    if (r->error) printf("  error     %s\n", r->error);
    if (r->resumed_from) printf("  resumed   from run %lld\n", (long long)r->resumed_from);
    if (r->host) printf("  writer    pid %lld on %s\n", (long long)r->pid, r->host);
}

// An object as indented "key: value" lines; scalars and arrays of scalars on one line.
static void show_json_tree(const cJSON *obj, int indent) {
    const cJSON *item;
    cJSON_ArrayForEach(item, obj) {
        printf("%*s%s:", indent, "", item->string ? item->string : "-");
        if (cJSON_IsObject(item)) {
            putchar('\n');
            show_json_tree(item, indent + 2);
            continue;
        }
        char *text = cJSON_IsString(item) ? NULL : cJSON_PrintUnformatted(item);
        printf(" %s\n", text ? text : item->valuestring);
        free(text);
    }
}

static void show_config(const DbRunInfo *r) {
    char steps[32];
    fmt_steps(steps, sizeof steps, r);
    printf("\nconfig\n");
    printf("  schedule %s   P %d  V %d  D %d  M %d\n", r->schedule ? r->schedule : "-", r->stages,
           r->virtual_stages, r->dp, r->microbatches);
    printf("  model %s (%.2f M params)   batch %d x seq %d   lr %g   seed %llu\n", r->model ? r->model : "-",
           r->params / 1e6, r->batch, r->seq_len, r->lr, (unsigned long long)r->seed);
    printf("  transport %s   device %s   steps %s\n", r->transport ? r->transport : "-",
           r->device ? r->device : "-", steps);
    cJSON *config = r->config_json ? cJSON_Parse(r->config_json) : NULL;
    if (config) printf("  full configuration:\n");
    if (config) show_json_tree(config, 4);
    cJSON_Delete(config);
}

static void show_loss(const DbRunInfo *r, const DbStep *steps, int n, bool ascii) {
    printf("\nloss\n");
    if (n == 0) {
        printf("  no steps recorded\n");
        return;
    }
    int min_at = 0;
    for (int i = 1; i < n; i++)
        if (isfinite(steps[i].loss) && !(steps[min_at].loss <= steps[i].loss)) min_at = i;
    char first[32], last[32], min[32], rate[32], bubble[32];
    fmt_num(first, sizeof first, "%.4f", steps[0].loss);
    fmt_num(last, sizeof last, "%.4f", r->last_loss);
    fmt_num(min, sizeof min, "%.4f", steps[min_at].loss);
    fmt_num(rate, sizeof rate, "%.0f", r->median_tokens_per_s);
    fmt_num(bubble, sizeof bubble, "%.1f%%", 100 * r->mean_bubble);
    printf("  %d steps: first %s, last %s, min %s (step %d)\n", n, first, last, min, steps[min_at].step);
    show_sparkline(steps, n, ascii);
    printf("  median %s tok/s, mean bubble %s\n", rate, bubble);
}

// "4 rank threads on 2 cores: CPU oversubscription", or "" when the store does not say.
static void host_load(const DbRunInfo *r, char *buf, size_t size) {
    buf[0] = '\0';
    if (r->host_cores <= 0 || r->host_ranks <= 0) return;
    const bool threads = r->transport && strcmp(r->transport, "local") == 0;
    snprintf(buf, size, "%d rank %s on %d core%s%s", r->host_ranks, threads ? "threads" : "processes", r->host_cores,
             r->host_cores == 1 ? "" : "s", r->host_ranks > r->host_cores ? ": CPU oversubscription" : "");
}

static TuiBubble run_bubble(const DbRunInfo *r) {
    return (TuiBubble){r->mean_bubble, r->mean_ideal, r->mean_imbalance, r->mean_transfer, r->mean_contention,
                       r->host_cores > 0 && r->host_ranks > r->host_cores};
}

// The mean measured bubble and its parts, in points (docs/console.md, "The bubble").
static void show_bubble(const DbRunInfo *r) {
    printf("\nbubble (means over the steps; points of ranks x step time)\n");
    if (isnan(r->mean_bubble)) {
        printf("  not measured (one rank, or no steps)\n");
        return;
    }
    if (isnan(r->mean_ideal)) {
        printf("  %.1f%% measured (its parts were not recorded: a store older than version 3)\n",
               100 * r->mean_bubble);
        return;
    }
    const TuiBubble b = run_bubble(r);
    char text[256], load[128];
    tui_bubble_text(&b, (int)sizeof text - 1, text, sizeof text);
    printf("  %s\n", text);
    host_load(r, load, sizeof load);
    if (load[0]) printf("  %s\n", load);
}

static void show_stages(const DbStageSummary *st, int n) {
    printf("\nstages\n");
    if (n == 0) {
        printf("  no stage timings recorded\n");
        return;
    }
    printf("  %5s %5s %10s %10s %10s %7s %13s %10s %10s\n", "stage", "ranks", "busy ms", "idle ms", "comm ms", "busy",
           "peak act MiB", "xfer ms", "wait ms");
    for (int i = 0; i < n; i++) {
        char frac[16], xfer[16], wait[16];
        fmt_num(frac, sizeof frac, "%.1f%%", 100 * st[i].busy_frac);
        fmt_num(xfer, sizeof xfer, "%.2f", st[i].transfer_ms);
        fmt_num(wait, sizeof wait, "%.2f", st[i].wait_ms);
        printf("  %5d %5d %10.2f %10.2f %10.2f %7s %13.1f %10s %10s\n", st[i].stage, st[i].ranks, st[i].busy_ms,
               st[i].idle_ms, st[i].comm_ms, frac, st[i].peak_act_bytes / 1048576.0, xfer, wait);
    }
}

static void show_checkpoints(const DbCheckpointInfo *ck, int n) {
    printf("\ncheckpoints\n");
    if (n == 0) {
        printf("  none\n");
        return;
    }
    printf("  %5s %7s  %-9s %5s %10s  %-19s  %s\n", "id", "step", "status", "files", "MiB", "created", "dir");
    for (int i = 0; i < n; i++) {
        char created[32];
        local_time(ck[i].created_at, created, sizeof created);
        printf("  %5lld %7d  %-9s %5d %10.1f  %-19s  %s%s%s\n", (long long)ck[i].id, ck[i].step, ck[i].status,
               ck[i].files, ck[i].bytes / 1048576.0, created, ck[i].dir, ck[i].error ? "  " : "",
               ck[i].error ? ck[i].error : "");
    }
}

static cJSON *show_json(const DbRunInfo *r, const DbStageSummary *st, int n_st, const DbCheckpointInfo *ck,
                        int n_ck) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "run", history_run_json(r, true));
    cJSON *stages = cJSON_AddArrayToObject(root, "stages");
    for (int i = 0; i < n_st; i++) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddNumberToObject(s, "stage", st[i].stage);
        cJSON_AddNumberToObject(s, "ranks", st[i].ranks);
        json_num(s, "busy_ms", st[i].busy_ms);
        json_num(s, "idle_ms", st[i].idle_ms);
        json_num(s, "comm_ms", st[i].comm_ms);
        json_num(s, "busy_frac", st[i].busy_frac);
        json_int64(s, "peak_act_bytes", st[i].peak_act_bytes);
        json_num(s, "transfer_ms", st[i].transfer_ms);
        json_num(s, "wait_ms", st[i].wait_ms);
        cJSON_AddItemToArray(stages, s);
    }
    cJSON *cks = cJSON_AddArrayToObject(root, "checkpoints");
    for (int i = 0; i < n_ck; i++) {
        cJSON *c = cJSON_CreateObject();
        json_int64(c, "id", ck[i].id);
        cJSON_AddNumberToObject(c, "step", ck[i].step);
        json_str(c, "status", ck[i].status);
        json_str(c, "dir", ck[i].dir);
        json_str(c, "created_at", ck[i].created_at);
        json_int64(c, "bytes", ck[i].bytes);
        cJSON_AddNumberToObject(c, "files", ck[i].files);
        json_str(c, "error", ck[i].error);
        cJSON_AddItemToArray(cks, c);
    }
    return root;
}

static int history_show(Db *db, const HistoryOptions *o, Error *err) {
    DbRunInfo r;
    DbStep *steps = NULL;
    DbStageSummary *st = NULL;
    DbCheckpointInfo *ck = NULL;
    int n_steps = 0, n_st = 0, n_ck = 0, rc = -1;
    if (history_load_run(db, o->runs[0], &r, err)) return -1;
    if (db_steps_read(db, r.id, 0, &steps, &n_steps, err) || db_stage_summary(db, r.id, &st, &n_st, err) ||
        db_checkpoints_read(db, r.id, &ck, &n_ck, err))
        goto done;
    if (o->json) {
        json_print(show_json(&r, st, n_st, ck, n_ck));
    } else {
        show_header(&r);
        show_config(&r);
        show_loss(&r, steps, n_steps, o->ascii || !locale_is_utf8());
        show_bubble(&r);
        show_stages(st, n_st);
        show_checkpoints(ck, n_ck);
    }
    rc = 0;
done:
    free(steps);
    free(st);
    db_checkpoints_free(ck, n_ck);
    db_run_info_clear(&r);
    return rc;
}

// ---- compare --------------------------------------------------------------------------------------
// One row per field: the run's shape and results always, and every other configuration field
// (recompute, transport, precision, data, model dimensions, ...) where two runs differ. A row
// differs when its cells print differently.

#define COMPARE_MAX_ROWS 128
#define COMPARE_CELL 128

#define COMPARE_PATH 160

typedef struct {
    char label[COMPARE_PATH];
    char key[COMPARE_PATH + 8];                   // the JSON name in "differ"
    char cell[HISTORY_MAX_RUNS][COMPARE_CELL];
    bool differs;
} CompareRow;

typedef struct {
    int n_runs, n_rows;
    CompareRow row[COMPARE_MAX_ROWS];
} CompareTable;

static CompareRow *compare_row(CompareTable *t, const char *label, const char *key) {
    if (t->n_rows == COMPARE_MAX_ROWS) return NULL;
    CompareRow *r = &t->row[t->n_rows++];
    memset(r, 0, sizeof *r);
    snprintf(r->label, sizeof r->label, "%s", label);
    snprintf(r->key, sizeof r->key, "%s", key);
    return r;
}

// The shape rows: what `list` shows of a run, from the runs table.
static void compare_shape(CompareTable *t, const DbRunInfo *runs) {
    static const char *const LABELS[] = {"schedule", "P", "V", "D", "M", "batch", "seq", "model", "lr", "seed",
                                         "steps"};
    static const char *const KEYS[] = {"schedule", "stages", "virtual", "dp", "microbatches", "batch", "seq_len",
                                       "model", "lr", "seed", "steps"};
    for (size_t k = 0; k < sizeof LABELS / sizeof LABELS[0]; k++) {
        CompareRow *row = compare_row(t, LABELS[k], KEYS[k]);
        for (int j = 0; j < t->n_runs; j++) {
            const DbRunInfo *r = &runs[j];
            char *c = row->cell[j];
            const int ints[] = {r->stages, r->virtual_stages, r->dp, r->microbatches, r->batch, r->seq_len};
            if (k == 0) snprintf(c, COMPARE_CELL, "%s", r->schedule ? r->schedule : "-");
            else if (k <= 6) snprintf(c, COMPARE_CELL, "%d", ints[k - 1]);
            else if (k == 7) snprintf(c, COMPARE_CELL, "%s", r->model ? r->model : "-");
            else if (k == 8) fmt_num(c, COMPARE_CELL, "%g", r->lr);
            else if (k == 9) snprintf(c, COMPARE_CELL, "%llu", (unsigned long long)r->seed);
            else fmt_steps(c, COMPARE_CELL, r);
        }
    }
}

// Configuration fields the shape rows already show.
static bool config_covered(const char *path) {
    static const char *const COVERED[] = {"pipeline.schedule", "pipeline.stages", "pipeline.virtual", "pipeline.dp",
                                          "microbatches", "batch", "seq_len", "model.name", "optimizer.lr", "seed",
                                          "steps"};
    for (size_t k = 0; k < sizeof COVERED / sizeof COVERED[0]; k++)
        if (strcmp(path, COVERED[k]) == 0) return true;
    return false;
}

// The row of a configuration field (found or added): "recompute" for pipeline.recompute,
// the dotted path for the rest.
static CompareRow *config_row(CompareTable *t, int first_config_row, const char *path) {
    char key[COMPARE_PATH + 8];
    snprintf(key, sizeof key, "config.%s", path);
    for (int i = first_config_row; i < t->n_rows; i++)
        if (strcmp(t->row[i].key, key) == 0) return &t->row[i];
    const bool pipe = strncmp(path, "pipeline.", 9) == 0;
    CompareRow *row = compare_row(t, pipe ? path + 9 : path, key);
    for (int j = 0; row && j < t->n_runs; j++) snprintf(row->cell[j], COMPARE_CELL, "-");
    return row;
}

// Every leaf of run j's configuration object, as text, into its row.
static void config_leaves(CompareTable *t, int first, int j, const cJSON *obj, const char *prefix) {
    const cJSON *item;
    cJSON_ArrayForEach(item, obj) {
        char path[COMPARE_PATH];
        snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", item->string ? item->string : "?");
        if (cJSON_IsObject(item)) {
            config_leaves(t, first, j, item, path);
            continue;
        }
        if (config_covered(path)) continue;
        CompareRow *row = config_row(t, first, path);
        if (!row) return;
        char *text = cJSON_IsString(item) ? NULL : cJSON_PrintUnformatted(item);
        snprintf(row->cell[j], COMPARE_CELL, "%s", text ? text : item->valuestring);
        free(text);
    }
}

// Configuration rows where runs that recorded a configuration disagree (a run without one,
// from an older store, shows '?' and differs from nobody).
static void compare_config(CompareTable *t, const DbRunInfo *runs) {
    const int first = t->n_rows;
    bool has[HISTORY_MAX_RUNS];
    for (int j = 0; j < t->n_runs; j++) {
        cJSON *config = runs[j].config_json ? cJSON_Parse(runs[j].config_json) : NULL;
        has[j] = cJSON_IsObject(config);
        if (has[j]) config_leaves(t, first, j, config, "");
        cJSON_Delete(config);
    }
    int kept = first;
    for (int i = first; i < t->n_rows; i++) {
        CompareRow *row = &t->row[i];
        int ref = -1;
        bool differs = false;
        for (int j = 0; j < t->n_runs; j++) {
            if (!has[j]) {
                snprintf(row->cell[j], COMPARE_CELL, "?");
                continue;
            }
            if (ref < 0) ref = j;
            else differs |= strcmp(row->cell[j], row->cell[ref]) != 0;
        }
        row->differs = differs;
        if (differs) t->row[kept++] = *row;
    }
    t->n_rows = kept;
}

static void mark_differs(CompareTable *t, int from) {
    for (int i = from; i < t->n_rows; i++)
        for (int j = 1; j < t->n_runs; j++) t->row[i].differs |= strcmp(t->row[i].cell[j], t->row[i].cell[0]) != 0;
}

// The results rows: peak activation memory, losses, speed, the bubble and its parts (each
// run's parts rounded to add up to its bubble).
static void compare_results(CompareTable *t, const DbRunInfo *runs, const int64_t *peak) {
    static const char *const LABELS[] = {"peak act", "final loss", "min loss", "median tok/s", "mean bubble",
                                         "  ideal", "  imbalance", "  transfer", "  contention"};
    static const char *const KEYS[] = {"peak_act_bytes", "last_loss", "min_loss", "median_tokens_per_s", "mean_bubble",
                                       "bubble_ideal", "bubble_imbalance", "bubble_transfer", "bubble_contention"};
    CompareRow *row[9];
    for (int k = 0; k < 9; k++) row[k] = compare_row(t, LABELS[k], KEYS[k]);
    for (int j = 0; j < t->n_runs && row[8]; j++) {
        const DbRunInfo *r = &runs[j];
        if (peak[j] > 0) snprintf(row[0]->cell[j], COMPARE_CELL, "%.1f MiB", peak[j] / 1048576.0);
        else snprintf(row[0]->cell[j], COMPARE_CELL, "-");
        fmt_num(row[1]->cell[j], COMPARE_CELL, "%.4f", r->last_loss);
        fmt_num(row[2]->cell[j], COMPARE_CELL, "%.4f", r->min_loss);
        fmt_num(row[3]->cell[j], COMPARE_CELL, "%.0f", r->median_tokens_per_s);
        fmt_num(row[4]->cell[j], COMPARE_CELL, "%.1f%%", 100 * r->mean_bubble);
        const TuiBubble b = run_bubble(r);
        long tenths[5];
        tui_bubble_tenths(&b, tenths);
        for (int k = 0; k < 4; k++) {
            if (isnan(r->mean_ideal) || isnan(r->mean_bubble)) snprintf(row[5 + k]->cell[j], COMPARE_CELL, "-");
            else tui_fmt_tenths(tenths[1 + k], row[5 + k]->cell[j], COMPARE_CELL);
        }
    }
}

// One column per run, as wide as its widest cell; the last column unpadded.
static void compare_print(const DbRunInfo *runs, const CompareTable *t) {
    char heads[HISTORY_MAX_RUNS][32];
    int width[HISTORY_MAX_RUNS], label_w = 13;
    for (int i = 0; i < t->n_rows; i++) label_w = fmax(label_w, (int)strlen(t->row[i].label));
    for (int j = 0; j < t->n_runs; j++) {
        width[j] = snprintf(heads[j], sizeof heads[j], "run %lld", (long long)runs[j].id);
        for (int i = 0; i < t->n_rows; i++) width[j] = fmax(width[j], (int)strlen(t->row[i].cell[j]));
    }
    printf("  %-*s", label_w, "");
    for (int j = 0; j < t->n_runs; j++) printf("  %-*s", j + 1 < t->n_runs ? width[j] : 0, heads[j]);
    putchar('\n');
    for (int i = 0; i < t->n_rows; i++) {
        printf("%c %-*s", t->row[i].differs ? '*' : ' ', label_w, t->row[i].label);
        for (int j = 0; j < t->n_runs; j++) printf("  %-*s", j + 1 < t->n_runs ? width[j] : 0, t->row[i].cell[j]);
        putchar('\n');
    }
}

static void compare_json(const DbRunInfo *runs, const int64_t *peak, const CompareTable *t) {
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(root, "runs");
    for (int j = 0; j < t->n_runs; j++) {
        cJSON *o = history_run_json(&runs[j], true);
        if (peak[j] > 0) json_int64(o, "peak_act_bytes", peak[j]);
        else cJSON_AddNullToObject(o, "peak_act_bytes");
        cJSON_AddItemToArray(arr, o);
    }
    cJSON *diff = cJSON_AddArrayToObject(root, "differ");
    for (int i = 0; i < t->n_rows; i++)
        if (t->row[i].differs) cJSON_AddItemToArray(diff, cJSON_CreateString(t->row[i].key));
    json_print(root);
}

// The largest activation memory any stage of the run reported (0: none recorded).
static int run_peak(Db *db, int64_t id, int64_t *peak, Error *err) {
    DbStageSummary *st = NULL;
    int n = 0;
    *peak = 0;
    if (db_stage_summary(db, id, &st, &n, err)) return -1;
    for (int k = 0; k < n; k++) *peak = st[k].peak_act_bytes > *peak ? st[k].peak_act_bytes : *peak;
    free(st);
    return 0;
}

static int history_compare(Db *db, const HistoryOptions *o, Error *err) {
    DbRunInfo runs[HISTORY_MAX_RUNS];
    int64_t peak[HISTORY_MAX_RUNS];
    int n = 0, rc = 0;
    while (n < o->n_runs && rc == 0)
        if ((rc = history_load_run(db, o->runs[n], &runs[n], err)) == 0) n++;
    for (int j = 0; j < n && rc == 0; j++) rc = run_peak(db, runs[j].id, &peak[j], err);
    if (rc == 0) {
        CompareTable *t = xcalloc(1, sizeof *t);
        t->n_runs = n;
        compare_shape(t, runs);
        mark_differs(t, 0);
        compare_config(t, runs);
        const int results = t->n_rows;
        compare_results(t, runs, peak);
        mark_differs(t, results);
        if (o->json) compare_json(runs, peak, t);
        else compare_print(runs, t);
        free(t);
    }
    for (int j = 0; j < n; j++) db_run_info_clear(&runs[j]);
    return rc;
}

// ---- export ---------------------------------------------------------------------------------------

static void export_csv(FILE *out, const DbStep *steps, int n) {
    fprintf(out, "step,loss,lr,grad_norm,tokens_per_s,step_ms,bubble,gflops\n");
    for (int i = 0; i < n; i++) {
        const double v[] = {steps[i].loss, steps[i].lr, steps[i].grad_norm, steps[i].tokens_per_s,
                            steps[i].step_ms, steps[i].bubble, steps[i].gflops};
        fprintf(out, "%d", steps[i].step);
        for (int k = 0; k < 7; k++) {
            if (isnan(v[k])) fputc(',', out);
            else fprintf(out, ",%.9g", v[k]);
        }
        fputc('\n', out);
    }
}

static void export_json(FILE *out, const DbStep *steps, int n) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddNumberToObject(s, "step", steps[i].step);
        json_num(s, "loss", steps[i].loss);
        json_num(s, "lr", steps[i].lr);
        json_num(s, "grad_norm", steps[i].grad_norm);
        json_num(s, "tokens_per_s", steps[i].tokens_per_s);
        json_num(s, "step_ms", steps[i].step_ms);
        json_num(s, "bubble", steps[i].bubble);
        json_num(s, "gflops", steps[i].gflops);
        cJSON_AddItemToArray(arr, s);
    }
    char *text = cJSON_PrintUnformatted(arr);
    check_alloc(text, 1, __FILE__, __LINE__);
    fprintf(out, "%s\n", text);
    free(text);
    cJSON_Delete(arr);
}

static void export_write(FILE *out, const DbStep *steps, int n, bool csv) {
    if (csv) export_csv(out, steps, n);
    else export_json(out, steps, n);
}

// The whole export in memory, then written atomically (storage/atomic_file).
static int export_atomic(const char *path, const DbStep *steps, int n, bool csv, Error *err) {
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        error_set(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    export_write(out, steps, n, csv);
    fclose(out);
    const int rc = atomic_write_file(path, text, len, err);
    free(text);
    return rc;
}

static int history_export(Db *db, const HistoryOptions *o, Error *err) {
    int64_t id;
    DbRunInfo r;
    if (history_run_id(db, o->runs[0], &id, err) || db_run_get(db, id, &r, err)) return -1;
    db_run_info_clear(&r);
    DbStep *steps;
    int n;
    if (db_steps_read(db, id, 0, &steps, &n, err)) return -1;
    int rc = 0;
    if (o->out) rc = export_atomic(o->out, steps, n, o->csv, err);
    else export_write(stdout, steps, n, o->csv);
    free(steps);
    return rc;
}

// ---- entry ----------------------------------------------------------------------------------------

int cmd_history(int argc, char **argv) {
    HistoryOptions o;
    Error err = {{0}};
    if (history_parse(argc, argv, &o, &err)) return cli_fail(&err);
    if (o.help) {
        history_usage(stdout);
        return 0;
    }
    if (o.verb == VERB_SCHEMA) {
        db_schema_write(stdout);
        return 0;
    }
    Db *db = db_open(o.db_path, false, &err);
    if (!db) return cli_fail(&err);
    int rc = o.verb == VERB_LIST      ? history_list(db, &o, &err)
             : o.verb == VERB_SHOW    ? history_show(db, &o, &err)
             : o.verb == VERB_COMPARE ? history_compare(db, &o, &err)
                                      : history_export(db, &o, &err);
    db_close(db);
    return rc ? cli_fail(&err) : 0;
}
