// console/cmd/history_compare: `pptrain history compare A B ...`: runs side by side, one row per
// field, '*' on the rows that differ: the runs' shape and results always, and every other
// configuration field where two runs that recorded one disagree.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/cmd/history_format.h"
#include "console/cmd/history_samples.h"
#include "console/run_ref.h"

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
            else if (k == 8) history_fmt_num(c, COMPARE_CELL, "%g", r->lr);
            else if (k == 9) snprintf(c, COMPARE_CELL, "%llu", (unsigned long long)r->seed);
            else history_fmt_steps(c, COMPARE_CELL, r);
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
    enum { PEAK, LAST, MIN, VAL_LAST, VAL_MIN, RATE, BUBBLE, PARTS, N_ROWS = PARTS + 4 };
    static const char *const LABELS[N_ROWS] = {"peak act", "final loss", "min loss", "final val loss",
                                               "min val loss", "median tok/s", "mean bubble", "  ideal",
                                               "  imbalance", "  transfer", "  contention"};
    static const char *const KEYS[N_ROWS] = {"peak_act_bytes", "last_loss", "min_loss", "last_val_loss",
                                             "min_val_loss", "median_tokens_per_s", "mean_bubble", "bubble_ideal",
                                             "bubble_imbalance", "bubble_transfer", "bubble_contention"};
    CompareRow *row[N_ROWS];
    for (int k = 0; k < N_ROWS; k++) row[k] = compare_row(t, LABELS[k], KEYS[k]);
    for (int j = 0; j < t->n_runs && row[N_ROWS - 1]; j++) {
        const DbRunInfo *r = &runs[j];
        if (peak[j] > 0) snprintf(row[PEAK]->cell[j], COMPARE_CELL, "%.1f MiB", peak[j] / 1048576.0);
        else snprintf(row[PEAK]->cell[j], COMPARE_CELL, "-");
        history_fmt_num(row[LAST]->cell[j], COMPARE_CELL, "%.4f", r->last_loss);
        history_fmt_num(row[MIN]->cell[j], COMPARE_CELL, "%.4f", r->min_loss);
        // The val loss at the step it was taken: runs that validated at other steps differ.
        if (r->evals > 0 && isfinite(r->last_val_loss))
            snprintf(row[VAL_LAST]->cell[j], COMPARE_CELL, "%.4f (step %d)", r->last_val_loss, r->last_val_step);
        else snprintf(row[VAL_LAST]->cell[j], COMPARE_CELL, "-");
        history_fmt_num(row[VAL_MIN]->cell[j], COMPARE_CELL, "%.4f", r->min_val_loss);
        history_fmt_num(row[RATE]->cell[j], COMPARE_CELL, "%.0f", r->median_tokens_per_s);
        history_fmt_num(row[BUBBLE]->cell[j], COMPARE_CELL, "%.1f%%", 100 * r->mean_bubble);
        const TuiBubble b = history_run_bubble(r);
        const bool known = isfinite(r->mean_ideal) && isfinite(r->mean_bubble);
        long tenths[5];
        tui_bubble_tenths(&b, tenths);
        for (int k = 0; k < 4; k++) {
            if (known) tui_fmt_tenths(tenths[1 + k], row[PARTS + k]->cell[j], COMPARE_CELL);
            else snprintf(row[PARTS + k]->cell[j], COMPARE_CELL, "-");
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

static void compare_json(const DbRunInfo *runs, const int64_t *peak, const CompareTable *t, cJSON *samples) {
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(root, "runs");
    for (int j = 0; j < t->n_runs; j++) {
        cJSON *o = history_run_json(&runs[j], true);
        if (peak[j] > 0) history_json_int64(o, "peak_act_bytes", peak[j]);
        else cJSON_AddNullToObject(o, "peak_act_bytes");
        cJSON_AddItemToArray(arr, o);
    }
    cJSON *diff = cJSON_AddArrayToObject(root, "differ");
    for (int i = 0; i < t->n_rows; i++)
        if (t->row[i].differs) cJSON_AddItemToArray(diff, cJSON_CreateString(t->row[i].key));
    cJSON_AddItemToObject(root, "samples", samples);
    history_json_print(root);
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

int history_compare(Db *db, const char *const *ids, int n_ids, bool json, Error *err) {
    DbRunInfo runs[HISTORY_MAX_RUNS];
    int64_t peak[HISTORY_MAX_RUNS];
    int n = 0, rc = 0;
    while (n < n_ids && n < HISTORY_MAX_RUNS && rc == 0)
        if ((rc = run_ref_load(db, ids[n], &runs[n], err)) == 0) n++;
    HistorySampleSets samples = {0};
    for (int j = 0; j < n && rc == 0; j++) rc = run_peak(db, runs[j].id, &peak[j], err);
    for (int j = 0; j < n && rc == 0; j++) rc = history_sample_sets_add(db, runs[j].id, &samples, err);
    if (rc == 0) {
        CompareTable *t = xcalloc(1, sizeof *t);
        t->n_runs = n;
        compare_shape(t, runs);
        mark_differs(t, 0);
        compare_config(t, runs);
        const int results = t->n_rows;
        compare_results(t, runs, peak);
        mark_differs(t, results);
        if (json) compare_json(runs, peak, t, history_samples_compare_json(&samples));
        else compare_print(runs, t);
        if (!json) history_samples_compare_print(runs, &samples);
        free(t);
    }
    history_sample_sets_free(&samples);
    for (int j = 0; j < n; j++) db_run_info_clear(&runs[j]);
    return rc;
}

