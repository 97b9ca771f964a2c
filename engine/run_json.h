// A run's complete configuration as one JSON object: what `history show` prints and what a
// checkpoint records, so a run can be understood (and resumed) from the store alone.
#ifndef PPTRAIN_RUN_JSON_H
#define PPTRAIN_RUN_JSON_H
#include "engine/pipeline.h"
#include "engine/trainer.h"

// A malloc'd JSON string (the caller frees it).
char *run_json(const RunConfig *rc, const PipelineOptions *po);
#endif
