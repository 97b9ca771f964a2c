// storage/checkpoint_cleanup: what checkpoints that never completed leave behind, removed.
//   - A checkpoint that failed (a full disk, a rank that could not write) is discarded at once:
//     its shards, index, config and temporary files would otherwise keep the disk full.
//   - A process killed mid-checkpoint leaves temporary files ("<name>.<pid>.tmp"); on start,
//     those of processes that are gone are removed from every incomplete checkpoint folder
//     (no trainer_state.json) under the checkpoint dir.
//   - With a run store, a checkpoint still 'writing' whose run has ended will never complete:
//     on start its row is marked failed and its files are discarded (when it lies under the
//     --ckpt-dir and trainer_state.json did not make it whole on disk).
#ifndef PPTRAIN_CHECKPOINT_CLEANUP_H
#define PPTRAIN_CHECKPOINT_CLEANUP_H
#include "storage/db.h"

// Removes the checkpoint files in dir (trainer_state.json first, so that a half-removed folder
// never looks complete; then the seal, shards, index, config and temporary files), then the
// folder when it is empty. Files that are not a checkpoint's are left. Returns files removed.
int ckpt_discard(const char *dir);
// Temporary files of gone processes in the incomplete folders ckpt_dir/step-* and
// ckpt_dir/run-*/step-*. Returns how many it removed.
int ckpt_clean_incomplete(const char *ckpt_dir);
// The store's abandoned checkpoints (storage/db_checkpoint_cleanup.h): rows marked failed; the
// files of those under ckpt_dir (the run's --ckpt-dir; "" for none) discarded, elsewhere only
// the temporary files of gone writers. A folder that has trainer_state.json is left whole.
// *n_cleaned: rows marked. Returns 0, or -1 with err (the store could not be read or written).
int ckpt_clean_abandoned(Db *db, const char *ckpt_dir, int *n_cleaned, Error *err);
#endif
