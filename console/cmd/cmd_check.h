#ifndef PPTRAIN_CMD_CHECK_H
#define PPTRAIN_CMD_CHECK_H
// `pptrain check [run options]`: one batch pipelined vs on a single device. Exit code 0 when
// within tolerance, 1 above it, 2 for a user error.
int cmd_check(int argc, char **argv);
#endif
