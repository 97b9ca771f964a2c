#ifndef PPTRAIN_CMD_CONSOLE_H
#define PPTRAIN_CMD_CONSOLE_H
// `pptrain console [console options] [run options]` (and `pptrain` alone): the curses console
// with a run ready to start. Returns the process exit code.
int cmd_console(int argc, char **argv);
// `pptrain train --tui [run options]`: train's run, started at once in the console, with train's
// defaults and rules (--data required, no checkpoints unless --ckpt-dir), not the console's;
// argv[first..] holds the options, --tui taken out.
int cmd_console_train(int argc, char **argv, int first);
#endif
