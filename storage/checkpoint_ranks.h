// storage/checkpoint_ranks: one checkpoint written by every process of a run as one act (the
// engine's save hook calls it on every process at once, engine/train_loop.h). In order:
//   1. the folder's name, agreed: only the root's run id and tag count;
//   2. every process looks at the folder first: one that holds a manifest already belongs to
//      another run, and nothing is written over it;
//   3. every process writes its stages' shards, hashed as written (storage/checkpoint.h);
//   4. their records are gathered to the root, which writes the manifest from them alone;
//   5. the copies are spread where the other processes read (storage/checkpoint_spread.h).
// After each part the processes agree (the transport's max over every process): a failure on
// any one fails the checkpoint on all of them, with the failing process's own line and a line
// naming it on the others, and what was written is discarded. The run store is the caller's:
// it records the manifest's files from *st and ckpt_ranks_state_record.
#ifndef PPTRAIN_CHECKPOINT_RANKS_H
#define PPTRAIN_CHECKPOINT_RANKS_H
#include <stddef.h>
#include <stdint.h>

#include "storage/checkpoint.h"

// The step folder every process agrees on: CKPT_DIR/run-<run>-<tag>/step-<step>, or
// CKPT_DIR/run-<tag>/step-<step> for a run without a store (run 0). Every store numbers its
// runs from 1, so the id alone would let the run 1 of two stores share a folder; the tag, 32
// random bits the root drew at the run's start, tells them apart. run and tag: the root's
// (the others' are ignored). *agreed_run: the root's run. Returns the length snprintf wanted
// (>= cap: the path does not fit).
int ckpt_ranks_folder(Pipeline *p, const char *ckpt_dir, int64_t run, uint32_t tag, int step, char *dir, size_t cap,
                      int64_t *agreed_run);

typedef struct {
    const char *dir;                // the step folder (ckpt_ranks_folder)
    const RunConfig *rc;            // the run and its layout, for the manifest (the root's count)
    const PipelineOptions *po;
    const TrainPosition *pos;       // the step and data cursor the checkpoint resumes from
    int64_t run_id;                 // the run's row (0: not recorded), agreed
    const char *identity_src;       // the run's source folder ("" or NULL: none), whose identity
                                    // files the checkpoint carries (storage/model_identity.h)
} CkptRanksSave;

// Every process, at once. Returns 0 with *st (the root: the manifest's files, free with
// ckpt_state_clear; the others: empty), or -1 with err on every process (nothing of the
// checkpoint stays, unless the folder was another run's: then it is left as it was).
int ckpt_ranks_save(Pipeline *p, const CkptRanksSave *req, CkptState *st, Error *err);

// The root, after ckpt_ranks_save: trainer_state.json's record (hashed now: the manifest
// lists every other file) and the bytes of the whole checkpoint. Returns 0, or -1 with err.
int ckpt_ranks_state_record(const char *dir, const CkptState *st, CkptFile *state, int64_t *bytes, Error *err);
#endif
