#ifndef PPTRAIN_CMD_PLAN_H
#define PPTRAIN_CMD_PLAN_H

// `pptrain plan [schedule options]`: builds or loads a schedule, simulates it and prints the
// per-rank timeline, bubble, makespan, peak activations and message count (or --json, or
// --dump-csv). argv[1] is "plan". Returns the process exit code (0, or 2 for bad input).
int cmd_plan(int argc, char **argv);
#endif
