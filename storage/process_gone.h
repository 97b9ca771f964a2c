// storage/process_gone: whether a process recorded by its pid (a run's writer in the store, a
// temporary file's "<name>.<pid>.tmp") has ended, so that what it left may be cleaned up.
//
// kill(pid, 0) alone is not enough: it succeeds on a zombie, a process that has exited but
// that no one has reaped. A rank of a killed mpirun job is reparented to PID 1, and it stays
// a zombie until PID 1 reaps it: at once under a real init, after 1.5 to 2 s on the machine
// the audit ran on (a container's first process that reaps now and then), never under one
// that does not reap. A resume started in that time took the killed run for a live one: its
// row stayed 'running', its 'writing' checkpoint was never closed and its temporary files
// were never removed. A zombie writes nothing more: it counts as gone.
#ifndef PPTRAIN_PROCESS_GONE_H
#define PPTRAIN_PROCESS_GONE_H
#include <stdbool.h>

// True when no process has this pid on this host, or only a zombie has it; pid <= 0 counts
// as gone (no writer was recorded). This process is never gone.
bool process_gone(long pid);
#endif
