// storage/process_gone: a recorded process that has ended, zombies included (process_gone.h).
#include "storage/process_gone.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

// The state letter of /proc/PID/stat ("PID (COMM) S ..."; COMM may hold spaces and
// parentheses, so the state follows the last ')'); '\0' when it cannot be read.
static char proc_state(long pid) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return '\0';
    const size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    const char *close = strrchr(line, ')');
    return close && close[1] == ' ' ? close[2] : '\0';
}

bool process_gone(long pid) {
    if (pid <= 0) return true;
    if (pid == (long)getpid()) return false;
    if (kill((pid_t)pid, 0) != 0) return errno == ESRCH;   // EPERM: another user's live process
    const char state = proc_state(pid);
    return state == 'Z' || state == 'X';
}
