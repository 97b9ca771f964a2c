// console/tui/tui_term: curses on /dev/tty, stderr kept aside (see tui_term.h).
#define NCURSES_WIDECHAR 1
#include "console/tui/tui_term.h"

#include <curses.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "console/tui/pure/theme.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

bool tui_term_interrupted(void) {
    const bool was = interrupted != 0;
    interrupted = 0;
    return was;
}

void tui_stderr_capture(TuiTerm *t) {
    t->saved_stderr = -1;
    t->captured = tmpfile();
    if (!t->captured) return;
    fflush(stderr);
    t->saved_stderr = dup(STDERR_FILENO);
    if (t->saved_stderr < 0 || dup2(fileno(t->captured), STDERR_FILENO) < 0) {
        if (t->saved_stderr >= 0) close(t->saved_stderr);
        t->saved_stderr = -1;
        fclose(t->captured);
        t->captured = NULL;
    }
}

void tui_stderr_release(TuiTerm *t) {
    if (t->saved_stderr < 0) return;
    fflush(stderr);
    dup2(t->saved_stderr, STDERR_FILENO);
    close(t->saved_stderr);
    t->saved_stderr = -1;
    rewind(t->captured);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, t->captured)) > 0) fwrite(buf, 1, n, stderr);
    fclose(t->captured);
    t->captured = NULL;
}

static void take_foreground(TuiTerm *t) {
    const int fd = fileno(t->out);
    const pid_t fg = tcgetpgrp(fd), me = getpgrp();
    if (fg < 0 || fg == me) return;
    // A background process group may change the foreground only with SIGTTOU ignored.
    signal(SIGTTOU, SIG_IGN);
    if (tcsetpgrp(fd, me) == 0) {
        t->saved_fg = fg;
        t->took_fg = true;
    }
}

// Whether this process's parent is a foreground mpirun that forwards the controlling terminal
// to this process's stdin: stdin is a pipe, the parent's stdin is this process's controlling
// terminal (tcgetpgrp fails with ENOTTY on any other terminal), and the parent's process
// group is that terminal's foreground, so the parent reads every key typed. Under Open MPI the
// ranks on mpirun's own node are its children.
static bool keys_come_through_parent(void) {
    struct stat st;
    if (fstat(STDIN_FILENO, &st) || !S_ISFIFO(st.st_mode)) return false;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/0", (int)getppid());
    const int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return false;
    const pid_t fg = isatty(fd) ? tcgetpgrp(fd) : -1;
    close(fd);
    return fg > 0 && fg == getpgid(getppid());
}

bool tui_term_is_ctrl_c(int rc, wint_t key) { return rc == OK && key == 3; }

bool tui_term_poll_size(const TuiTerm *t) {
    struct winsize ws;
    if (!t->keys_from_stdin || ioctl(fileno(t->out), TIOCGWINSZ, &ws) || ws.ws_row == 0 || ws.ws_col == 0)
        return false;
    if (ws.ws_row == LINES && ws.ws_col == COLS) return false;
    resize_term(ws.ws_row, ws.ws_col);
    clearok(curscr, TRUE);   // the terminal reflowed what it showed: repaint all of it
    return true;
}

// Keys one at a time, no echo, function keys and clicks decoded, no cursor, Esc at once.
static void curses_modes(bool raw_keys) {
    typeahead(-1);   // a frame goes out in one write, not flushed to look for typeahead
    if (raw_keys) raw();   // Ctrl-C as a key: see tui_term.h
    else cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    set_escdelay(25);
    curs_set(0);
    mousemask(BUTTON1_CLICKED | BUTTON1_DOUBLE_CLICKED, NULL);
    mouseinterval(200);
    // ncurses 6.4 flushes after every cursor move until the screen has once been suspended
    // and resumed (mvcur's "not initialized yet" case): about 70 writes a frame instead of 1.
    endwin();
    refresh();
}

int tui_term_open(TuiTerm *t, bool ascii, bool under_mpirun, Error *err) {
    memset(t, 0, sizeof *t);
    t->saved_stderr = -1;
    setlocale(LC_ALL, "");
    setlocale(LC_NUMERIC, "C");   // numbers print and parse the same everywhere
    t->utf8 = !ascii && strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
    t->no_color = theme_no_color_requested(getenv("NO_COLOR"));
    t->keys_from_stdin = under_mpirun && keys_come_through_parent();
    t->in = t->keys_from_stdin ? fdopen(dup(STDIN_FILENO), "r") : fopen("/dev/tty", "r");
    t->out = fopen("/dev/tty", "w");
    if (!t->in || !t->out) {
        error_set(err, "the console needs a terminal: cannot open /dev/tty");
        if (t->in) fclose(t->in);
        if (t->out) fclose(t->out);
        return -1;
    }
    if (t->keys_from_stdin) signal(SIGTTOU, SIG_IGN);   // set the modes of a terminal in the background
    else if (under_mpirun) take_foreground(t);
    SCREEN *s = newterm(NULL, t->out, t->in);
    if (!s) {
        const char *term = getenv("TERM");
        error_set(err, "cannot start curses on this terminal (TERM=%s)", term ? term : "");
        if (t->took_fg) tcsetpgrp(fileno(t->out), t->saved_fg);
        fclose(t->in);
        fclose(t->out);
        return -1;
    }
    t->screen = s;
    set_term(s);
    curses_modes(t->keys_from_stdin);
    struct sigaction sa = {.sa_handler = on_sigint};
    sigaction(SIGINT, &sa, NULL);
    tui_stderr_capture(t);
    return 0;
}

void tui_term_close(TuiTerm *t) {
    if (!t->screen) return;
    signal(SIGINT, SIG_DFL);
    endwin();
    delscreen((SCREEN *)t->screen);
    t->screen = NULL;
    if (t->took_fg) tcsetpgrp(fileno(t->out), t->saved_fg);
    fclose(t->in);
    fclose(t->out);
    tui_stderr_release(t);
}
