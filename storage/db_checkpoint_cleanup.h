// storage/db_checkpoint_cleanup: the store's side of cleaning up after checkpoints that never
// completed (storage/checkpoint_cleanup.h does the files).
#ifndef PPTRAIN_DB_CHECKPOINT_CLEANUP_H
#define PPTRAIN_DB_CHECKPOINT_CLEANUP_H
#include "storage/db.h"

// Checkpoints still 'writing' whose run is no longer 'running' (it finished, failed or stopped
// without completing them; a crashed run counts once db_mark_stale_runs has marked it): they
// will never complete. Oldest first; free with db_checkpoints_free.
int db_checkpoints_abandoned(Db *db, DbCheckpointInfo **out, int *n, Error *err);
#endif
