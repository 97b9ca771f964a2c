// storage/process_gone: whether a process recorded by its pid (a run's writer in the store, a
// temporary file's "<name>.<pid>.tmp") has ended, so that what it left may be cleaned up.
//
// kill(pid, 0) alone is not enough: it succeeds on a zombie, a process that has exited but
// that no one has reaped. A rank of a killed mpirun job is reparented to PID 1, and where
// PID 1 does not reap orphans (a container's init that is not an init) it stays a zombie
// until the machine restarts: its run then looked 'running' forever, its 'writing'
// checkpoint was never closed and its temporary files were never removed. A zombie writes
// nothing more: it counts as gone.
#ifndef PPTRAIN_PROCESS_GONE_H
#define PPTRAIN_PROCESS_GONE_H
#include <stdbool.h>

// True when no process has this pid on this host, or only a zombie has it; pid <= 0 counts
// as gone (no writer was recorded). This process is never gone.
bool process_gone(long pid);
#endif
