// console/cmd/history_format: what the verbs of `pptrain history` print alike (cmd_history.c,
// history_compare.c).
#ifndef PPTRAIN_HISTORY_FORMAT_H
#define PPTRAIN_HISTORY_FORMAT_H
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "console/tui/pure/tui_bubble.h"
#include "storage/db.h"

#define HISTORY_MAX_RUNS 16   // runs one command names

// "2025-03-01T14:02:07.123Z" as local "2025-03-01 15:02:07"; the stored text if it does not parse.
void history_local_time(const char *iso, char *buf, size_t size);
// The status as shown: "crashed" for a 'running' run whose process is gone.
const char *history_status(const DbRunInfo *r);
// v with fmt, or "-" when NaN.
void history_fmt_num(char *buf, size_t size, const char *fmt, double v);
// "120/500", or "120" when the run planned none.
void history_fmt_steps(char *buf, size_t size, const DbRunInfo *r);
bool history_locale_utf8(void);

// JSON: NaN and infinities as null, strings or null, 64-bit integers exactly.
void history_json_num(cJSON *obj, const char *key, double v);
void history_json_str(cJSON *obj, const char *key, const char *s);
void history_json_int64(cJSON *obj, const char *key, long long v);
// A run as a JSON object (with its configuration object when asked).
cJSON *history_run_json(const DbRunInfo *r, bool with_config);
// Prints root unformatted on one line and frees it.
void history_json_print(cJSON *root);

// "4 rank threads on 2 cores: CPU oversubscription", or "" when the store does not say.
void history_host_load(const DbRunInfo *r, char *buf, size_t size);
// The run's mean bubble and its parts (ideal, imbalance, transfer, contention).
TuiBubble history_run_bubble(const DbRunInfo *r);

// `history compare`: the runs named by ids side by side (json: one object). 0, or -1 with err.
int history_compare(Db *db, const char *const *ids, int n_ids, bool json, Error *err);
#endif
