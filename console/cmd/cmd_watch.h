#ifndef PPTRAIN_CMD_WATCH_H
#define PPTRAIN_CMD_WATCH_H
// `pptrain watch [--db FILE] [RUN]`: the live screen, read-only, for a run another process is
// writing, refreshed from the run store once a second. Returns the process exit code.
int cmd_watch(int argc, char **argv);
#endif
