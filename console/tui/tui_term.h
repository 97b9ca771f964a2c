// console/tui_term: the console's terminal. curses runs on /dev/tty (not stdin/stdout: under
// mpirun those are pipes to mpirun), through newterm(), in the locale's character set;
// whatever the process writes to stderr meanwhile is kept in a temporary file and replayed
// after the screen is restored, so a warning never scribbles over the console.
//
// Under mpirun rank 0 is not the terminal's foreground process group (mpirun is); it takes
// the foreground for the console's lifetime and gives it back at the end.
#ifndef PPTRAIN_TUI_TERM_H
#define PPTRAIN_TUI_TERM_H
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "engine/error.h"

typedef struct {
    FILE *in, *out;         // /dev/tty
    void *screen;           // SCREEN *
    bool utf8;              // the locale's codeset is UTF-8 (and --ascii was not given)
    bool no_color;          // NO_COLOR is set and not empty
    pid_t saved_fg;         // the foreground process group before, when we took it
    bool took_fg;
    int saved_stderr;       // -1: stderr not captured
    FILE *captured;         // what stderr received while the console ran
} TuiTerm;

// Locale, stderr capture, /dev/tty, newterm and the input modes (cbreak, no echo, keypad,
// mouse clicks, invisible cursor). take_foreground: become the terminal's foreground process
// group (MPI rank 0). Returns 0, or -1 with err (nothing is left changed).
int tui_term_open(TuiTerm *t, bool ascii, bool take_foreground, Error *err);
// Restores the terminal, gives the foreground back, replays the captured stderr.
void tui_term_close(TuiTerm *t);

// Keeps stderr in a temporary file until tui_stderr_release (also for ranks without a
// terminal, whose stderr mpirun would copy onto rank 0's console).
void tui_stderr_capture(TuiTerm *t);
void tui_stderr_release(TuiTerm *t);

// Set by SIGINT (Ctrl-C) while the console runs: the UI treats it as its quit key.
bool tui_term_interrupted(void);
#endif
