// A run's complete configuration as one JSON object: what `history show` prints and what a
// checkpoint records, so a run can be understood (and resumed) from the store alone.
#ifndef PPTRAIN_RUN_JSON_H
#define PPTRAIN_RUN_JSON_H
#include "engine/pipeline.h"
#include "engine/run_config.h"

// A malloc'd JSON string (the caller frees it).
char *run_json(const RunConfig *rc, const PipelineOptions *po);
// The inverse, for resuming: fills *rc (model, optimizer, data, batching, batch, seq_len,
// microbatches, steps, seed) and the layout fields of *po (schedule, stages, virtual, split,
// timeout) from run_json's text; `where` names the source in errors. Returns 0, or -1 with err.
int run_json_parse(const char *text, const char *where, RunConfig *rc, PipelineOptions *po, Error *err);
#endif
