// console/cmd/history_samples: samples in `history show` and `history compare`
// (console/cmd/history_samples.h).
#include "console/cmd/history_samples.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/tui/pure/tui_sample.h"

void history_sample_print_quoted(const char *text) {
    const size_t n = tui_sample_escape(text, NULL, 0) + 1;
    char *esc = xmalloc(n);
    tui_sample_escape(text, esc, n);
    putchar('"');
    for (const char *c = esc; *c; c++) {
        if (*c == '"') putchar('\\');
        putchar(*c);
    }
    putchar('"');
    free(esc);
}

HistorySampling history_sampling(const DbStep *steps, int n_steps, const DbSample *sm, int n_sm) {
    HistorySampling s = {.samples = n_sm};
    for (int i = 0; i < n_sm; i++) s.seconds += isfinite(sm[i].seconds) ? sm[i].seconds : 0.0;
    for (int i = 0; i < n_steps; i++) s.step_seconds += isfinite(steps[i].step_ms) ? steps[i].step_ms / 1e3 : 0.0;
    const double total = s.seconds + s.step_seconds;
    s.share = total > 0.0 ? s.seconds / total : NAN;
    return s;
}

void history_sampling_print(const HistorySampling *s) {
    if (s->samples == 0) return;
    char share[32];
    history_fmt_num(share, sizeof share, "%.1f%%", 100.0 * s->share);
    printf("  sampling: %d sample%s in %.2f s, %s of the time in steps and samples (in no step's time or bubble)\n",
           s->samples, s->samples == 1 ? "" : "s", s->seconds, share);
}

// The text as valid UTF-8, in a new string.
static char *utf8_copy(const char *text) {
    const size_t n = tui_sample_utf8(text, NULL, 0) + 1;
    char *out = xmalloc(n);
    tui_sample_utf8(text, out, n);
    return out;
}

void history_samples_json(cJSON *obj, const DbSample *sm, int n, const HistorySampling *s) {
    cJSON *share = cJSON_AddObjectToObject(obj, "sampling");
    cJSON_AddNumberToObject(share, "samples", s->samples);
    history_json_num(share, "seconds", s->seconds);
    history_json_num(share, "share", s->share);
    cJSON *arr = cJSON_AddArrayToObject(obj, "samples");
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "step", sm[i].step);
        cJSON_AddNumberToObject(e, "tokens", sm[i].tokens);
        history_json_num(e, "seconds", sm[i].seconds);
        char *text = utf8_copy(sm[i].text);
        cJSON_AddStringToObject(e, "text", text);
        free(text);
        cJSON_AddItemToArray(arr, e);
    }
}

int history_sample_sets_add(Db *db, int64_t run, HistorySampleSets *s, Error *err) {
    assert(s->n_runs < HISTORY_MAX_RUNS);
    if (db_samples_read(db, run, &s->sm[s->n_runs], &s->n_sm[s->n_runs], err)) return -1;
    s->n_runs++;
    return 0;
}

void history_sample_sets_free(HistorySampleSets *s) {
    for (int j = 0; j < s->n_runs; j++) db_samples_free(s->sm[j], s->n_sm[j]);
    memset(s, 0, sizeof *s);
}

// The sample of run j at this step, or NULL (samples are in step order).
static const DbSample *sample_at(const HistorySampleSets *s, int j, int step) {
    for (int i = 0; i < s->n_sm[j]; i++)
        if (s->sm[j][i].step == step) return &s->sm[j][i];
    return NULL;
}

// Run 0's samples whose step every other run sampled too: the shared steps, in order.
static bool shared_step(const HistorySampleSets *s, int i) {
    for (int j = 1; j < s->n_runs; j++)
        if (!sample_at(s, j, s->sm[0][i].step)) return false;
    return s->n_runs > 0;
}

void history_samples_compare_print(const DbRunInfo *runs, const HistorySampleSets *s) {
    bool any = false;
    for (int i = 0; s->n_runs > 0 && i < s->n_sm[0]; i++) {
        if (!shared_step(s, i)) continue;
        const int step = s->sm[0][i].step;
        if (!any) printf("\nsamples at the steps every run sampled (greedy)\n");
        any = true;
        printf("  step %d\n", step);
        for (int j = 0; j < s->n_runs; j++) {
            printf("    run %-6lld ", (long long)runs[j].id);
            history_sample_print_quoted(sample_at(s, j, step)->text);
            putchar('\n');
        }
    }
}

cJSON *history_samples_compare_json(const HistorySampleSets *s) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; s->n_runs > 0 && i < s->n_sm[0]; i++) {
        if (!shared_step(s, i)) continue;
        const int step = s->sm[0][i].step;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "step", step);
        cJSON *texts = cJSON_AddArrayToObject(e, "texts");
        for (int j = 0; j < s->n_runs; j++) {
            char *text = utf8_copy(sample_at(s, j, step)->text);
            cJSON_AddItemToArray(texts, cJSON_CreateString(text));
            free(text);
        }
        cJSON_AddItemToArray(arr, e);
    }
    return arr;
}
