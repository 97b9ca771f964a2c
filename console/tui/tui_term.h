// console/tui/tui_term: the console's terminal. curses runs on /dev/tty (not stdin/stdout: under
// mpirun those are pipes to mpirun), through newterm(), in the locale's character set;
// whatever the process writes to stderr meanwhile is kept in a temporary file and replayed
// after the screen is restored, so a warning never scribbles over the console.
//
// Under mpirun rank 0 is not the terminal's foreground process group: mpirun is, and mpirun
// reads the terminal to forward it to rank 0's stdin. Two readers of one terminal fight: had
// rank 0 taken the foreground, mpirun's next read (a key pressed) would stop it with SIGTTIN,
// the shell would take the terminal back, and rank 0's next read would stop rank 0 too, while
// the other ranks spin. So when mpirun forwards this terminal, rank 0 leaves the foreground to
// mpirun and reads its keys from stdin, the pipe mpirun fills; the terminal is put in raw mode
// so keys arrive one at a time and Ctrl-C arrives as a key (byte 3), not as mpirun's SIGINT.
// It still draws on /dev/tty, with SIGTTOU ignored so a background process may set its modes,
// and polls the window size, since SIGWINCH goes to the foreground (mpirun) alone. Only when
// mpirun does not read the terminal (`--stdin none`, `< /dev/null`) does rank 0 take the
// foreground for the console's lifetime, giving it back at the end.
#ifndef PPTRAIN_TUI_TERM_H
#define PPTRAIN_TUI_TERM_H
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include <wchar.h>

#include "engine/error.h"

typedef struct {
    FILE *in, *out;         // /dev/tty
    void *screen;           // SCREEN *
    bool utf8;              // the locale's codeset is UTF-8 (and --ascii was not given)
    bool no_color;          // NO_COLOR is set and not empty
    pid_t saved_fg;         // the foreground process group before, when we took it
    bool took_fg;
    bool keys_from_stdin;   // keys come through mpirun's forwarding of this terminal
    int saved_stderr;       // -1: stderr not captured
    FILE *captured;         // what stderr received while the console ran
} TuiTerm;

// Locale, stderr capture, /dev/tty, newterm and the input modes (cbreak, no echo, keypad,
// mouse clicks, invisible cursor). under_mpirun: MPI rank 0, which reads its keys from stdin
// when mpirun forwards the terminal there and otherwise becomes the terminal's foreground
// process group. Returns 0, or -1 with err (nothing is left changed).
int tui_term_open(TuiTerm *t, bool ascii, bool under_mpirun, Error *err);
// Restores the terminal, gives the foreground back, replays the captured stderr.
void tui_term_close(TuiTerm *t);

// Keeps stderr in a temporary file until tui_stderr_release (also for ranks without a
// terminal, whose stderr mpirun would copy onto rank 0's console).
void tui_stderr_capture(TuiTerm *t);
void tui_stderr_release(TuiTerm *t);

// Set by SIGINT (Ctrl-C) while the console runs: the UI treats it as its quit key.
bool tui_term_interrupted(void);

// Whether key (from get_wch) is Ctrl-C read as a key (raw mode, keys from mpirun).
bool tui_term_is_ctrl_c(int rc, wint_t key);

// Resizes curses to the terminal's window size when it changed without a SIGWINCH reaching
// this process (keys from mpirun); true when it did.
bool tui_term_poll_size(const TuiTerm *t);
#endif
