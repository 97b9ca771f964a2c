// console/cmd/cmd_train: `pptrain train [run options]` (console/run_options.h).
#ifndef PPTRAIN_CMD_TRAIN_H
#define PPTRAIN_CMD_TRAIN_H

// `pptrain train [run options]`: a headless run. Returns the process exit code.
int cmd_train(int argc, char **argv);
#endif
