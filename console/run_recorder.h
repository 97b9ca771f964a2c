// Records a training run in the run store (storage/db): wired to the trainer's hooks by the
// console floor, since the engine never includes storage. Only rank 0 records.
#ifndef PPTRAIN_RUN_RECORDER_H
#define PPTRAIN_RUN_RECORDER_H
#include <stdint.h>

#include "engine/train_loop.h"
#include "storage/db.h"

typedef struct {
    char path[4096];        // the store's file ("" = do not record)
    Db *db;
    int64_t run;            // 0 until the run row exists
    bool write_failed;      // after one failed write, warn once and stop recording
    const size_t *slot_bytes;   // (stages) activation bytes of one microbatch, from RunInfo
    int64_t resumed_from;       // the run this one continues (0: a fresh run)
} RunRecorder;

// Opens (creating or migrating) the store and inserts the run as 'running'.
int recorder_begin(RunRecorder *r, const RunConfig *rc, const PipelineOptions *po, const RunInfo *info,
                   Error *err);
// Buffers one step with its per-stage rows (the store commits in batches).
void recorder_step(RunRecorder *r, const PipelineReport *pr);
// status: finished | failed | stopped; error: the failure's line or NULL. Closes the store.
void recorder_end(RunRecorder *r, const char *status, const char *error);
#endif
