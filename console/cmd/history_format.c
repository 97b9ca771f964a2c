// console/cmd/history_format: what `pptrain history`'s verbs print alike: times, statuses,
// numbers that may be missing, a run as JSON, the host's load
// and the bubble's parts of a run (cmd_history.c, history_compare.c).
#include "console/cmd/history_format.h"

#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// ---- formatting ------------------------------------------------------------------------------

// "2025-03-01T14:02:07.123Z" as local "2025-03-01 15:02:07"; the stored text if it does not parse.
void history_local_time(const char *iso, char *buf, size_t size) {
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

const char *history_status(const DbRunInfo *r) {
    return r->crashed ? "crashed" : r->status ? r->status : "?";
}

void history_fmt_num(char *buf, size_t size, const char *fmt, double v) {
    if (isnan(v)) snprintf(buf, size, "-");
    else snprintf(buf, size, fmt, v);
}

void history_fmt_steps(char *buf, size_t size, const DbRunInfo *r) {
    if (r->steps_planned > 0) snprintf(buf, size, "%d/%d", r->last_step, r->steps_planned);
    else snprintf(buf, size, "%d", r->last_step);
}

bool history_locale_utf8(void) {
    char *old = setlocale(LC_CTYPE, NULL);
    char saved[64];
    snprintf(saved, sizeof saved, "%s", old ? old : "C");
    setlocale(LC_CTYPE, "");
    bool utf8 = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
    setlocale(LC_CTYPE, saved);
    return utf8;
}

// ---- JSON -------------------------------------------------------------------------------------

void history_json_num(cJSON *obj, const char *key, double v) {
    if (isnan(v) || isinf(v)) cJSON_AddNullToObject(obj, key);
    else cJSON_AddNumberToObject(obj, key, v);
}

void history_json_str(cJSON *obj, const char *key, const char *s) {
    if (s) cJSON_AddStringToObject(obj, key, s);
    else cJSON_AddNullToObject(obj, key);
}

// Exact 64-bit integers (cJSON numbers are doubles).
void history_json_int64(cJSON *obj, const char *key, long long v) {
    char text[32];
    snprintf(text, sizeof text, "%lld", v);
    cJSON_AddRawToObject(obj, key, text);
}

cJSON *history_run_json(const DbRunInfo *r, bool with_config) {
    cJSON *o = cJSON_CreateObject();
    history_json_int64(o, "id", r->id);
    history_json_str(o, "started_at", r->started_at);
    history_json_str(o, "ended_at", r->ended_at);
    history_json_str(o, "status", history_status(r));
    history_json_str(o, "error", r->error);
    history_json_str(o, "schedule", r->schedule);
    const struct { const char *key; int v; } ints[] = {
        {"stages", r->stages}, {"virtual", r->virtual_stages}, {"dp", r->dp}, {"microbatches", r->microbatches},
        {"batch", r->batch}, {"seq_len", r->seq_len}, {"steps_planned", r->steps_planned},
        {"steps_done", r->steps_done}, {"last_step", r->last_step}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) cJSON_AddNumberToObject(o, ints[i].key, ints[i].v);
    history_json_str(o, "model", r->model);
    history_json_int64(o, "params", r->params);
    history_json_num(o, "lr", r->lr);
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)r->seed);
    cJSON_AddRawToObject(o, "seed", seed);
    history_json_str(o, "transport", r->transport);
    history_json_str(o, "device", r->device);
    if (r->resumed_from) history_json_int64(o, "resumed_from", r->resumed_from);
    else cJSON_AddNullToObject(o, "resumed_from");
    history_json_num(o, "last_loss", r->last_loss);
    history_json_num(o, "min_loss", r->min_loss);
    cJSON_AddNumberToObject(o, "evals", r->evals);
    if (r->evals > 0) cJSON_AddNumberToObject(o, "last_val_step", r->last_val_step);
    else cJSON_AddNullToObject(o, "last_val_step");
    history_json_num(o, "last_val_loss", r->last_val_loss);
    history_json_num(o, "min_val_loss", r->min_val_loss);
    history_json_num(o, "median_tokens_per_s", r->median_tokens_per_s);
    history_json_num(o, "mean_bubble", r->mean_bubble);
    cJSON *parts = cJSON_AddObjectToObject(o, "mean_bubble_parts");
    history_json_num(parts, "ideal", r->mean_ideal);
    history_json_num(parts, "imbalance", r->mean_imbalance);
    history_json_num(parts, "transfer", r->mean_transfer);
    history_json_num(parts, "contention", r->mean_contention);
    if (r->host_cores > 0) cJSON_AddNumberToObject(o, "host_cores", r->host_cores);
    else cJSON_AddNullToObject(o, "host_cores");
    if (r->host_ranks > 0) cJSON_AddNumberToObject(o, "host_ranks", r->host_ranks);
    else cJSON_AddNullToObject(o, "host_ranks");
    history_json_str(o, "host", r->host);
    if (r->pid) history_json_int64(o, "pid", r->pid);
    else cJSON_AddNullToObject(o, "pid");
    if (with_config) {
        cJSON *config = r->config_json ? cJSON_Parse(r->config_json) : NULL;
        cJSON_AddItemToObject(o, "config", config ? config : cJSON_CreateNull());
    }
    return o;
}

void history_json_print(cJSON *root) {
    char *text = cJSON_PrintUnformatted(root);
    check_alloc(text, 1, __FILE__, __LINE__);
    puts(text);
    free(text);
    cJSON_Delete(root);
}

// "4 rank threads on 2 cores: CPU oversubscription", or "" when the store does not say.
void history_host_load(const DbRunInfo *r, char *buf, size_t size) {
    buf[0] = '\0';
    if (r->host_cores <= 0 || r->host_ranks <= 0) return;
    const bool threads = r->transport && strcmp(r->transport, "local") == 0;
    snprintf(buf, size, "%d rank %s on %d core%s%s", r->host_ranks, threads ? "threads" : "processes", r->host_cores,
             r->host_cores == 1 ? "" : "s", r->host_ranks > r->host_cores ? ": CPU oversubscription" : "");
}

TuiBubble history_run_bubble(const DbRunInfo *r) {
    return (TuiBubble){r->mean_bubble, r->mean_ideal, r->mean_imbalance, r->mean_transfer, r->mean_contention};
}

