// storage/checkpoint_spread: a checkpoint's small files where every process can read them,
// without assuming the processes share a filesystem.
//
// Under mpirun each process writes its own stages' shards into its own --ckpt-dir, which may
// be one shared folder or a node-local one per node. The root writes the index, config.json,
// checksums.sha256 and trainer_state.json from the processes' records (checkpoint.h), packs
// them, and the pipeline broadcasts the pack; each other process then places them in its own
// copy of the folder, unless it already holds the same bytes there (it sees the root's, on a
// shared filesystem: then nothing is written). Processes place in turn, one after another, so
// two that share a folder the root does not see never rename onto the same path at once.
// trainer_state.json is placed last: a copy is complete exactly when it has it. The replicas
// (--dp) of a node that replica 0 does not share a folder with write their own stages' shards
// the same way, so that they too resume from their own folder.
#ifndef PPTRAIN_CHECKPOINT_SPREAD_H
#define PPTRAIN_CHECKPOINT_SPREAD_H
#include <stddef.h>

#include "engine/error.h"
#include "engine/pipeline.h"

// The small files of dir, packed ("NAME\nBYTES\n" and the bytes, per file, the state last).
// NULL with err when one cannot be read.
char *ckpt_spread_pack(const char *dir, size_t *n, Error *err);
// Writes each packed file into dir where dir does not already hold exactly those bytes.
// Returns 0, or -1 with err (a malformed pack, a failed write).
int ckpt_spread_place(const char *dir, const char *pack, size_t n, Error *err);
// A process of replica d > 0 (which writes no shards of its own, its stages being replica 0's
// bit for bit): its stages' shards into dir where dir lacks the manifest's file (a node-local
// folder replica 0 does not write into), so a replica resumes from its own folder too.
// records: every process's (ckpt_write_shards), whose inode and mtime tell replica 0's own
// file without reading it; a file that is not it is hashed before it counts as there. Each
// copy written must hash to the manifest's sha256. Returns 0, or -1 with err.
int ckpt_spread_replica_shards(const char *dir, const Pipeline *p, const char *pack, size_t n, const char *records,
                               Error *err);
#endif
