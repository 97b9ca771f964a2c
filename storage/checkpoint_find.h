// storage/checkpoint_find: which checkpoint `--resume RUN|latest|DIR` means, proven intact.
#ifndef PPTRAIN_CHECKPOINT_FIND_H
#define PPTRAIN_CHECKPOINT_FIND_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/error.h"

// Resolves arg to a checkpoint folder whose every file exists with its recorded size and
// sha256:
//   "latest"  the newest run in the store (db_path) that has a complete checkpoint
//   "N"       run N's newest complete checkpoint (the store's manifest is checked)
//   DIR       a checkpoint folder (its checksums.sha256 seal and trainer_state.json manifest
//             are checked; a folder from before the seal has none: it is accepted and
//             *warning says so, otherwise warning->msg is "")
// The newest candidate is the one meant; when it is damaged or incomplete the error says what
// is wrong with it and names the newest good one (another of the run's checkpoints, or a
// sibling step-* folder), so the user can pass that instead. With fell_back (`export`,
// `sample`: "a run's newest intact checkpoint"), a run named by id or latest whose newest
// checkpoint is damaged or gone gives its newest good one instead, and fell_back->msg says
// which was passed over and why ("DIR is damaged (REASON)"; "" when none was); a folder named
// is still refused, and so is a run with no good checkpoint left. Without fell_back (`train
// --resume`, `check`) every damaged newest one is refused. *run_id: the run that wrote it
// (0 when unknown). Without `shards`, the shards are left out of "every file": a process of an
// mpirun job may see only its own node's folder, and checks each shard as it reads it
// (CKPT_OPEN_CHECK_ON_READ). Returns 0, or -1 with a one-line err.
int ckpt_find_resume(const char *arg, const char *db_path, bool shards, char *dir, size_t cap, int64_t *run_id,
                     Error *warning, Error *fell_back, Error *err);
#endif
