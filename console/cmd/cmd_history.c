// `pptrain history`: browse the run store. list (a table of runs), show RUN (config, loss
// sparkline, per-stage utilization, checkpoints), compare A B ... (runs side by side, differing
// rows marked: history_compare.c), export RUN (steps as CSV or JSON), schema (the SQL of the
// store). --json everywhere. Reads only: the store is opened read-only and a missing one is
// never created.
#include "console/cmd/cmd_history.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "console/cli.h"
#include "console/cli_options.h"
#include "console/cmd/history_format.h"
#include "console/cmd/history_samples.h"
#include "console/run_ref.h"
#include "console/tui/pure/tui_bubble.h"
#include "storage/atomic_file.h"
#include "storage/db.h"

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

// ---- options ------------------------------------------------------------------------------

static int set_db(void *opts, const char *f, const char *v, Error *e) {
    HistoryOptions *o = opts;
    (void)f, (void)e;
    o->db_path = v;
    return 0;
}

static int set_schedule(void *opts, const char *f, const char *v, Error *e) {
    HistoryOptions *o = opts;
    (void)f, (void)e;
    o->schedule = v;
    return 0;
}

static int set_status(void *opts, const char *flag, const char *v, Error *err) {
    HistoryOptions *o = opts;
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
static int set_since(void *opts, const char *flag, const char *v, Error *err) {
    HistoryOptions *o = opts;
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

static int set_limit(void *opts, const char *flag, const char *v, Error *err) {
    HistoryOptions *o = opts;
    long x;
    if (cli_parse_int(flag, v, 1, 1000000, &x, err)) return -1;
    o->limit = (int)x;
    return 0;
}

static int set_out(void *opts, const char *f, const char *v, Error *e) {
    HistoryOptions *o = opts;
    (void)f, (void)e;
    o->out = v;
    return 0;
}

#define SWITCH(fn, field) \
    static int fn(void *o, const char *f, const char *v, Error *e) { \
        (void)f, (void)v, (void)e; \
        ((HistoryOptions *)o)->field = true; \
        return 0; \
    }
SWITCH(set_json, json)
SWITCH(set_csv, csv)
SWITCH(set_ascii, ascii)
SWITCH(set_help, help)

static const CliOption OPTIONS[] = {
    {"--db", "FILE", "the run store (default " DB_DEFAULT_PATH ")", set_db, VERB_READS},
    {"--schedule", "NAME", "list: only runs of this schedule", set_schedule, VERB_LIST},
    {"--status", "S", "list: only running, finished, failed, stopped or crashed runs", set_status, VERB_LIST},
    {"--since", "DATE", "list: only runs started at or after DATE (YYYY-MM-DD[THH:MM[:SS]], local)", set_since,
     VERB_LIST},
    {"--limit", "N", "list: the newest N runs", set_limit, VERB_LIST},
    {"--json", NULL, "print JSON instead of a table", set_json, VERB_READS},
    {"--csv", NULL, "export: steps as CSV", set_csv, VERB_EXPORT},
    {"--out", "FILE", "export: write FILE (atomically) instead of stdout", set_out, VERB_EXPORT},
    {"--ascii", NULL, "show: draw the sparkline in ASCII (automatic without a UTF-8 locale)", set_ascii, VERB_SHOW},
    {"--help", NULL, "this help", set_help, VERB_READS | VERB_SCHEMA},
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
    cli_options_usage(out, OPTIONS, (int)N_OPTIONS, 20, NULL, NULL);
}

static const HistoryVerbInfo *history_verb(HistoryVerb v) {
    for (size_t k = 0; k < N_VERBS; k++)
        if (VERBS[k].verb == v) return &VERBS[k];
    return &VERBS[0];
}

static int history_option(HistoryOptions *o, int argc, char **argv, int *i, Error *err) {
    const CliOption *opt = cli_option_find(OPTIONS, (int)N_OPTIONS, argv[*i]);
    if (!opt) {
        error_set(err, "history: unknown option '%s' (see pptrain history --help)", argv[*i]);
        return -1;
    }
    if (!(opt->scope & o->verb)) {
        error_set(err, "history %s: %s does not apply here (see pptrain history --help)", history_verb(o->verb)->name,
                  opt->flag);
        return -1;
    }
    return cli_option_take(opt, argc, argv, i, o, err);
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
            const CliOption *opt = cli_option_find(OPTIONS, (int)N_OPTIONS, flag);
            if (opt && opt->arg) i++;
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

// ---- list ---------------------------------------------------------------------------------------

static void list_table(const DbRunInfo *runs, int n) {
    printf("%5s  %-19s  %-8s  %-16s %3s %3s %3s %4s  %11s  %9s  %10s  %6s\n", "id", "started", "status", "schedule",
           "P", "V", "D", "M", "steps", "last loss", "med tok/s", "bubble");
    for (int i = 0; i < n; i++) {
        const DbRunInfo *r = &runs[i];
        char started[32], steps[32], loss[32], rate[32], bubble[32];
        history_local_time(r->started_at, started, sizeof started);
        history_fmt_steps(steps, sizeof steps, r);
        history_fmt_num(loss, sizeof loss, "%.4f", r->last_loss);
        history_fmt_num(rate, sizeof rate, "%.0f", r->median_tokens_per_s);
        history_fmt_num(bubble, sizeof bubble, "%.1f%%", 100 * r->mean_bubble);
        printf("%5lld  %-19s  %-8s  %-16.16s %3d %3d %3d %4d  %11s  %9s  %10s  %6s\n", (long long)r->id, started,
               history_status(r), r->schedule ? r->schedule : "-", r->stages, r->virtual_stages, r->dp,
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
        history_json_print(arr);
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
    history_local_time(r->started_at, started, sizeof started);
    history_local_time(r->ended_at, ended, sizeof ended);
    printf("run %lld  %s\n", (long long)r->id, history_status(r));
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
    history_fmt_steps(steps, sizeof steps, r);
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
    history_fmt_num(first, sizeof first, "%.4f", steps[0].loss);
    history_fmt_num(last, sizeof last, "%.4f", r->last_loss);
    history_fmt_num(min, sizeof min, "%.4f", steps[min_at].loss);
    history_fmt_num(rate, sizeof rate, "%.0f", r->median_tokens_per_s);
    history_fmt_num(bubble, sizeof bubble, "%.1f%%", 100 * r->mean_bubble);
    printf("  %d steps: first %s, last %s, min %s (step %d)\n", n, first, last, min, steps[min_at].step);
    show_sparkline(steps, n, ascii);
    printf("  median %s tok/s, mean bubble %s\n", rate, bubble);
}

// The validation passes: first, last and least, and every pass when there are few.
static void show_validation(const DbEval *ev, int n) {
    if (n == 0) return;   // a run without --val-data: nothing to say
    int min_at = 0;
    for (int i = 1; i < n; i++)
        if (isfinite(ev[i].val_loss) && !(ev[min_at].val_loss <= ev[i].val_loss)) min_at = i;
    char first[32], last[32], min[32];
    history_fmt_num(first, sizeof first, "%.4f", ev[0].val_loss);
    history_fmt_num(last, sizeof last, "%.4f", ev[n - 1].val_loss);
    history_fmt_num(min, sizeof min, "%.4f", ev[min_at].val_loss);
    printf("\nvalidation loss (%d batch%s a pass, forward only)\n", ev[n - 1].batches, ev[n - 1].batches == 1 ? "" : "es");
    printf("  %d pass%s: first %s (step %d), last %s (step %d), min %s (step %d)\n", n, n == 1 ? "" : "es", first,
           ev[0].step, last, ev[n - 1].step, min, ev[min_at].step);
    if (n > 12) return;
    printf("  step:");
    for (int i = 0; i < n; i++) printf(" %d=%.4f", ev[i].step, ev[i].val_loss);
    printf("\n");
}

// The samples of the model (train --sample-every), the last 12, each one line with control
// bytes, invalid UTF-8, quotes and backslashes escaped.
static void show_samples(const DbSample *sm, int n) {
    if (n == 0) return;
    printf("\nsamples (greedy, %d in the run%s)\n", n, n > 12 ? "; the last 12" : "");
    for (int i = n > 12 ? n - 12 : 0; i < n; i++) {
        printf("  step %d (%.2f s, %d tokens): ", sm[i].step, sm[i].seconds, sm[i].tokens);
        history_sample_print_quoted(sm[i].text);
        putchar('\n');
    }
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
    const TuiBubble b = history_run_bubble(r);
    char text[256], load[128];
    tui_bubble_text(&b, (int)sizeof text - 1, text, sizeof text);
    printf("  %s\n", text);
    history_host_load(r, load, sizeof load);
    if (load[0]) printf("  %s\n", load);
}

static void show_stages(const DbStageSummary *st, int n) {
    printf("\nstages\n");
    if (n == 0) {
        printf("  no stage timings recorded\n");
        return;
    }
    // A rank's step is busy + xfer + wait, as on the console's stage rows: wait is its share of
    // the bubble. The store's sendrecv_ms (time inside sends and receives, a blocked receive's
    // wait included) and between_ms (time outside every action) cut the same time another way;
    // they stay in --json, not beside xfer and wait (issue 29).
    printf("  %5s %5s %10s %10s %10s %7s %13s\n", "stage", "ranks", "busy ms", "xfer ms", "wait ms", "busy",
           "peak act MiB");
    for (int i = 0; i < n; i++) {
        char frac[16], xfer[16], wait[16];
        history_fmt_num(frac, sizeof frac, "%.1f%%", 100 * st[i].busy_frac);
        history_fmt_num(xfer, sizeof xfer, "%.2f", st[i].transfer_ms);
        history_fmt_num(wait, sizeof wait, "%.2f", st[i].wait_ms);
        printf("  %5d %5d %10.2f %10s %10s %7s %13.1f\n", st[i].stage, st[i].ranks, st[i].busy_ms, xfer, wait, frac,
               st[i].peak_act_bytes / 1048576.0);
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
        history_local_time(ck[i].created_at, created, sizeof created);
        printf("  %5lld %7d  %-9s %5d %10.1f  %-19s  %s%s%s\n", (long long)ck[i].id, ck[i].step, ck[i].status,
               ck[i].files, ck[i].bytes / 1048576.0, created, ck[i].dir, ck[i].error ? "  " : "",
               ck[i].error ? ck[i].error : "");
    }
}

static cJSON *show_json(const DbRunInfo *r, const DbEval *ev, int n_ev, const DbStageSummary *st, int n_st,
                        const DbCheckpointInfo *ck, int n_ck, const DbSample *sm, int n_sm,
                        const HistorySampling *sampling) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "run", history_run_json(r, true));
    history_samples_json(root, sm, n_sm, sampling);
    cJSON *evals = cJSON_AddArrayToObject(root, "evals");
    for (int i = 0; i < n_ev; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "step", ev[i].step);
        history_json_num(e, "val_loss", ev[i].val_loss);
        cJSON_AddNumberToObject(e, "batches", ev[i].batches);
        cJSON_AddItemToArray(evals, e);
    }
    cJSON *stages = cJSON_AddArrayToObject(root, "stages");
    for (int i = 0; i < n_st; i++) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddNumberToObject(s, "stage", st[i].stage);
        cJSON_AddNumberToObject(s, "ranks", st[i].ranks);
        history_json_num(s, "busy_ms", st[i].busy_ms);
        history_json_num(s, "between_ms", st[i].between_ms);
        history_json_num(s, "sendrecv_ms", st[i].sendrecv_ms);
        history_json_num(s, "busy_frac", st[i].busy_frac);
        history_json_int64(s, "peak_act_bytes", st[i].peak_act_bytes);
        history_json_num(s, "transfer_ms", st[i].transfer_ms);
        history_json_num(s, "wait_ms", st[i].wait_ms);
        cJSON_AddItemToArray(stages, s);
    }
    cJSON *cks = cJSON_AddArrayToObject(root, "checkpoints");
    for (int i = 0; i < n_ck; i++) {
        cJSON *c = cJSON_CreateObject();
        history_json_int64(c, "id", ck[i].id);
        cJSON_AddNumberToObject(c, "step", ck[i].step);
        history_json_str(c, "status", ck[i].status);
        history_json_str(c, "dir", ck[i].dir);
        history_json_str(c, "created_at", ck[i].created_at);
        history_json_int64(c, "bytes", ck[i].bytes);
        cJSON_AddNumberToObject(c, "files", ck[i].files);
        history_json_str(c, "error", ck[i].error);
        cJSON_AddItemToArray(cks, c);
    }
    return root;
}

static int history_show(Db *db, const HistoryOptions *o, Error *err) {
    DbRunInfo r;
    DbStep *steps = NULL;
    DbEval *ev = NULL;
    DbSample *sm = NULL;
    DbStageSummary *st = NULL;
    DbCheckpointInfo *ck = NULL;
    int n_steps = 0, n_ev = 0, n_sm = 0, n_st = 0, n_ck = 0, rc = -1;
    if (run_ref_load(db, o->runs[0], &r, err)) return -1;
    if (db_steps_read(db, r.id, 0, &steps, &n_steps, err) || db_evals_read(db, r.id, &ev, &n_ev, err) ||
        db_samples_read(db, r.id, &sm, &n_sm, err) ||
        db_stage_summary(db, r.id, &st, &n_st, err) || db_checkpoints_read(db, r.id, &ck, &n_ck, err))
        goto done;
    const HistorySampling sampling = history_sampling(steps, n_steps, sm, n_sm);
    if (o->json) {
        history_json_print(show_json(&r, ev, n_ev, st, n_st, ck, n_ck, sm, n_sm, &sampling));
    } else {
        show_header(&r);
        show_config(&r);
        show_loss(&r, steps, n_steps, o->ascii || !history_locale_utf8());
        show_validation(ev, n_ev);
        show_samples(sm, n_sm);
        history_sampling_print(&sampling);
        show_bubble(&r);
        show_stages(st, n_st);
        show_checkpoints(ck, n_ck);
    }
    rc = 0;
done:
    free(steps);
    free(ev);
    db_samples_free(sm, n_sm);
    free(st);
    db_checkpoints_free(ck, n_ck);
    db_run_info_clear(&r);
    return rc;
}

// ---- export ---------------------------------------------------------------------------------------

// A run's steps, each with its validation loss where a pass ran after it.
typedef struct {
    const DbStep *steps;
    int n;
    const DbEval *ev;   // in step order
    int n_ev;
} ExportRows;

// The validation loss recorded at step (NaN: none); *j walks ev alongside the steps.
static double val_at(const ExportRows *x, int *j, int step) {
    while (*j < x->n_ev && x->ev[*j].step < step) (*j)++;
    return *j < x->n_ev && x->ev[*j].step == step ? x->ev[*j].val_loss : NAN;
}

static void export_csv(FILE *out, const ExportRows *x) {
    fprintf(out, "step,loss,lr,grad_norm,tokens_per_s,step_ms,bubble,gflops,val_loss\n");
    for (int i = 0, j = 0; i < x->n; i++) {
        const DbStep *st = &x->steps[i];
        const double v[] = {st->loss, st->lr,     st->grad_norm, st->tokens_per_s, st->step_ms,
                            st->bubble, st->gflops, val_at(x, &j, st->step)};
        fprintf(out, "%d", st->step);
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
            if (isnan(v[k])) fputc(',', out);
            else fprintf(out, ",%.9g", v[k]);
        }
        fputc('\n', out);
    }
}

static void export_json(FILE *out, const ExportRows *x) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0, j = 0; i < x->n; i++) {
        const DbStep *st = &x->steps[i];
        cJSON *s = cJSON_CreateObject();
        cJSON_AddNumberToObject(s, "step", st->step);
        history_json_num(s, "loss", st->loss);
        history_json_num(s, "lr", st->lr);
        history_json_num(s, "grad_norm", st->grad_norm);
        history_json_num(s, "tokens_per_s", st->tokens_per_s);
        history_json_num(s, "step_ms", st->step_ms);
        history_json_num(s, "bubble", st->bubble);
        history_json_num(s, "gflops", st->gflops);
        const double val = val_at(x, &j, st->step);
        if (!isnan(val)) history_json_num(s, "val_loss", val);   // only the steps a pass followed
        cJSON_AddItemToArray(arr, s);
    }
    char *text = cJSON_PrintUnformatted(arr);
    check_alloc(text, 1, __FILE__, __LINE__);
    fprintf(out, "%s\n", text);
    free(text);
    cJSON_Delete(arr);
}

static void export_write(FILE *out, const ExportRows *x, bool csv) {
    if (csv) export_csv(out, x);
    else export_json(out, x);
}

// The whole export in memory, then written atomically (storage/atomic_file).
static int export_atomic(const char *path, const ExportRows *x, bool csv, Error *err) {
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        error_set(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    export_write(out, x, csv);
    fclose(out);
    const int rc = atomic_write_file(path, text, len, err);
    free(text);
    return rc;
}

static int history_export(Db *db, const HistoryOptions *o, Error *err) {
    int64_t id;
    DbRunInfo r;
    if (run_ref_id(db, o->runs[0], &id, err) || db_run_get(db, id, &r, err)) return -1;
    db_run_info_clear(&r);
    DbStep *steps;
    DbEval *ev;
    int n, n_ev;
    if (db_steps_read(db, id, 0, &steps, &n, err)) return -1;
    if (db_evals_read(db, id, &ev, &n_ev, err)) {
        free(steps);
        return -1;
    }
    const ExportRows x = {steps, n, ev, n_ev};
    int rc = 0;
    if (o->out) rc = export_atomic(o->out, &x, o->csv, err);
    else export_write(stdout, &x, o->csv);
    free(steps);
    free(ev);
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
             : o.verb == VERB_COMPARE ? history_compare(db, o.runs, o.n_runs, o.json, &err)
                                      : history_export(db, &o, &err);
    db_close(db);
    return rc ? cli_fail(&err) : 0;
}
