#ifndef PPTRAIN_CMD_CONSOLE_H
#define PPTRAIN_CMD_CONSOLE_H
// `pptrain console [console options] [run options]` (and `pptrain` alone): the curses console
// with a run ready to start. Returns the process exit code.
int cmd_console(int argc, char **argv);
#endif
