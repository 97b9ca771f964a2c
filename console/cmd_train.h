#ifndef PPTRAIN_CMD_TRAIN_H
#define PPTRAIN_CMD_TRAIN_H
#include <stdio.h>

#include "engine/trainer.h"

// `pptrain train [run options]`: a headless run. Returns the process exit code.
int cmd_train(int argc, char **argv);
// Parses run options (shared by train and, later, check and the console). Returns 0, 1 when
// --help was printed, or -1 with err set.
int run_options_parse(int argc, char **argv, int first, RunConfig *rc, Error *err);
void run_options_usage(FILE *out);
#endif
