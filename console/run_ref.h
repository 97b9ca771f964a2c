// console/run_ref: a run as the user names it ("12" or "latest"), for `pptrain history`, `plan
// --from-run` and the console's setup screen alike.
#ifndef PPTRAIN_RUN_REF_H
#define PPTRAIN_RUN_REF_H
#include <stdint.h>

#include "engine/error.h"
#include "storage/db.h"

// RUN as the user wrote it: an id, or 'latest'. -1 with err ("'abc' is not a run id").
int run_ref_id(Db *db, const char *text, int64_t *id, Error *err);
// The same, and the run's row read (db_run_info_clear frees it).
int run_ref_load(Db *db, const char *text, DbRunInfo *r, Error *err);
#endif
