#ifndef PPTRAIN_CMD_TRAIN_H
#define PPTRAIN_CMD_TRAIN_H
#include <stdio.h>

#include "engine/pipeline.h"
#include "engine/trainer.h"

// Everything a run option sets: the run itself and how it is laid out across ranks.
typedef struct {
    RunConfig rc;
    PipelineOptions pipe;
    char db_path[4096];     // the run store ("" = do not record)
    char trace_path[4096];  // a Chrome trace of every step ("" = none)
} RunOptions;

RunOptions run_options_defaults(void);

// `pptrain train [run options]`: a headless run. Returns the process exit code.
int cmd_train(int argc, char **argv);
// Parses run options (shared by train, check and the console). Returns 0, 1 when --help was
// asked for, or -1 with err set.
int run_options_parse(int argc, char **argv, int first, RunOptions *ro, Error *err);
void run_options_usage(FILE *out);
#endif
