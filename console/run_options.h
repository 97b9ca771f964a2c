// console/run_options: the run options of the command line (train, check and the console's
// setup screen parse the same table, console/run_options.c) and what they set.
#ifndef PPTRAIN_RUN_OPTIONS_H
#define PPTRAIN_RUN_OPTIONS_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/error.h"
#include "engine/pipeline.h"
#include "engine/run_config.h"

// Everything a run option sets: the run itself and how it is laid out across ranks.
typedef struct {
    RunConfig rc;
    PipelineOptions pipe;
    char db_path[4096];     // the run store ("" = do not record)
    char trace_path[4096];  // a Chrome trace of every step ("" = none)
    char ckpt_dir[4096];    // checkpoints go under DIR/run-<id>-<tag>/step-<n>/ ("" = none)
    char resume[4096];      // --resume RUN|latest|CKPT_DIR ("" = a fresh run)
    char init_from[4096];   // --init-from HF_FOLDER: weights to start from ("" = (seed, name))
    uint64_t given;         // which options the command line set (run_options_given)
} RunOptions;

RunOptions run_options_defaults(void);

// Parses run options (shared by train, check and the console). Returns 0, 1 when --help was
// asked for, or -1 with err set.
int run_options_parse(int argc, char **argv, int first, RunOptions *ro, Error *err);
void run_options_usage(FILE *out);
// The same for `check`, which takes only the options it uses: one that only a training run
// uses (--steps, --ckpt-dir, --val-*, the optimizer's, ...) is an error, and --help lists none.
int run_options_parse_check(int argc, char **argv, int first, RunOptions *ro, Error *err);
void run_options_usage_check(FILE *out);
// The same for `sample`, which takes only the flags that lay the model out across ranks
// (--stages, --schedule, --split, --virtual, --transport, --timeout) and --db; no --data.
int run_options_parse_sample(int argc, char **argv, int first, RunOptions *ro, Error *err);
void run_options_usage_sample(FILE *out);
// --val-every or --val-batches given with no validation set (no --val-data, and --data sets no
// llm.c _val_ shards aside): -1 with err. run_options_parse checks it; run_session checks it
// again on --resume, once the checkpoint's data and validation set are merged in.
int run_options_check_val(const RunOptions *ro, Error *err);
// A CSV schedule (--schedule FILE.csv) brings its own P, M and V: P and M fill --stages and
// --microbatches where those were not given, and a --virtual given must be its V (-1 with err).
// run_options_parse applies it to train's and check's flags; run_session again on --resume, once
// the checkpoint's options (its schedule, maybe a CSV) are merged; sample to its own flags.
int run_options_shape_from_csv(RunOptions *ro, Error *err);
// Whether the command line set this flag ("--stages"): a resumed run keeps its checkpoint's
// values except where the user gave new ones.
bool run_options_given(const RunOptions *ro, const char *flag);
// Marks a flag given, as if the command line had set it (the console's form, for a value the user
// changed there).
void run_options_set_given(RunOptions *ro, const char *flag);
#endif
