// storage/checkpoint_seal: checksums.sha256, the file that seals a checkpoint folder. It lists
// the sha256 of every other file of the checkpoint, trainer_state.json included, in the format
// of coreutils' sha256sum ("<64 hex>  <name>" per line), so that
//   cd DIR && sha256sum -c checksums.sha256
// checks a folder by hand. trainer_state.json already lists the shards' hashes, but nothing
// guarded the state itself: a one-digit edit of its step, adam_step or data cursor resumed
// silently with other losses. The seal is written just before trainer_state.json (whose hash is
// taken from the text about to be written), so a folder is still complete exactly when it has
// trainer_state.json.
//
// Folders written before the seal existed have no checksums.sha256: ckpt_seal_verify says so
// (returns 1) and the caller decides (--resume DIR accepts them with a warning line).
#ifndef PPTRAIN_CHECKPOINT_SEAL_H
#define PPTRAIN_CHECKPOINT_SEAL_H
#include "engine/error.h"
#include "storage/checkpoint_file.h"

#define CKPT_SEAL_FILE "checksums.sha256"

// DIR/checksums.sha256 from files[0..n) (their recorded sha256) and the sha256 of
// trainer_state.json, atomically. Returns 0, or -1 with err.
int ckpt_seal_write(const char *dir, const CkptFile *files, int n, const char state_sha256[65], Error *err);
// 0: every file the seal lists (trainer_state.json among them) has its sha256. 1: DIR has no
// seal. -1: err names the first file that differs or is missing, or the line that is malformed
// ("DIR: trainer_state.json: sha256 does not match checksums.sha256").
int ckpt_seal_verify(const char *dir, Error *err);
// The same for every file but the shards (ckpt_is_shard): they are checked as they are read.
int ckpt_seal_verify_small(const char *dir, Error *err);
#endif
