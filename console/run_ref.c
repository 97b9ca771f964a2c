// console/run_ref: a run as the user names it on the command line or in the console ("12" or
// "latest"), read from the run store.
#include "console/run_ref.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int run_ref_id(Db *db, const char *text, int64_t *id, Error *err) {
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

int run_ref_load(Db *db, const char *text, DbRunInfo *r, Error *err) {
    int64_t id;
    if (run_ref_id(db, text, &id, err)) return -1;
    return db_run_get(db, id, r, err);
}
