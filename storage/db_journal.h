// storage/db_journal: what a run could not write into its store, kept beside the store until a
// later writer can.
//
// A run whose store stays locked past the recorder's patience (another process holding it
// for minutes) stops after a final checkpoint with exit 2 and one line naming that checkpoint.
// The store then holds neither the run's end nor that checkpoint: the row would say `running`,
// the next writer would mark it failed with a reason of its own, and `--resume latest` would
// resume an older step than the line named. So the run writes a journal beside the store,
// STORE.journal-RUN.json (atomic), with its end (status, error line, time) and the folders of
// its checkpoints the store has no complete row for. The next writer replays it before
// anything else: each folder's manifest (its trainer_state.json, sha256 of every file) becomes
// a complete checkpoint row, then the run's end is written, then the journal is removed.
// Replaying twice changes nothing.
#ifndef PPTRAIN_DB_JOURNAL_H
#define PPTRAIN_DB_JOURNAL_H
#include <stdint.h>

#include "engine/error.h"
#include "storage/db.h"

// Writes db_path's journal for run: its end, and the n checkpoint folders (absolute) the
// store did not take. Returns 0, or -1 with err.
int db_journal_write(const char *db_path, int64_t run, const char *status, const char *error_or_null,
                     const char *const *ckpt_dirs, int n, Error *err);

// Replays and removes every journal beside db_path into db (the writer). *n_replayed: how
// many. A journal that cannot be replayed yet (the store still locked) stays, with err set.
// Returns 0, or -1 with err.
int db_journal_replay(Db *db, int *n_replayed, Error *err);
// The same from a path: opens the store as its writer only when a journal lies beside it.
int db_journal_replay_path(const char *db_path, int *n_replayed, Error *err);
// One stderr line on a replay's outcome: a note when it recorded journals, a warning when
// one stays; nothing otherwise. rc, n_replayed and err as a replay left them.
void db_journal_report(const char *db_path, int rc, int n_replayed, const Error *err);
#endif
