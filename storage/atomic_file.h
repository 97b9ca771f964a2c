// storage/atomic_file: the "nothing lost" rule of DESIGN.md, in one place, and the hashes that
// prove a checkpoint's files are what was written.
//
// A file is written to a temporary name next to its target, "<path>.<pid>.tmp", then fsynced,
// renamed over path, and the folder fsynced. Until the rename path holds the old complete file
// (or nothing); after it, the new complete file. A failure at any step (short write, disk full,
// fsync, rename) removes the temporary file, leaves path untouched and says which step failed.
//
//   AtomicFile *af = atomic_file_open(path, err);
//   atomic_file_append(af, bytes, n, err) ...   // buffered; the first failure sticks
//   atomic_file_commit(af, err);                // or atomic_file_abort(af)
//
// A process killed before the commit leaves its "<path>.<pid>.tmp": atomic_file_clean_stale
// removes those of processes that are gone.
#ifndef PPTRAIN_ATOMIC_FILE_H
#define PPTRAIN_ATOMIC_FILE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/error.h"

typedef struct AtomicFile AtomicFile;

// Creates the temporary file. NULL with err when it cannot.
AtomicFile *atomic_file_open(const char *path, Error *err);
// Appends n bytes. Returns 0, or -1 with err once a write failed (later appends fail at once and
// commit reports the first failure).
int atomic_file_append(AtomicFile *af, const void *data, size_t n, Error *err);
// Flushes, fsyncs, renames over the target, fsyncs the folder, and frees af. Returns 0, or -1 with
// err ("<path>: <step> failed: <why>"), the temporary file removed and the target untouched.
int atomic_file_commit(AtomicFile *af, Error *err);
// The same, and the sha256 (64 lowercase hex digits) and size of the bytes appended, hashed as
// they were appended: a checkpoint learns its files' hashes without reading them back.
// sha256 and bytes may be NULL; they are set only when it returns 0.
int atomic_file_commit_hashed(AtomicFile *af, char sha256[65], int64_t *bytes, Error *err);
// Drops the new contents: closes and removes the temporary file, frees af (NULL is fine).
void atomic_file_abort(AtomicFile *af);
// The whole of data[0..n) as path, through the interface above.
int atomic_write_file(const char *path, const void *data, size_t n, Error *err);

// Removes the temporary files under dir (not recursive) whose writer is no longer running: those
// named "<name>.<pid>.tmp" for a pid that no process has, and plain "<name>.tmp". Returns how
// many it removed.
int atomic_file_clean_stale(const char *dir);
// Whether name is one of this interface's temporary files.
bool atomic_file_is_temp(const char *name);

// The system calls the writer makes, replaceable so that a test can inject failures (a short
// write, ENOSPC, a crash before the rename). Production code never sets them.
typedef struct {
    ssize_t (*write)(int fd, const void *buf, size_t n);
    int (*fsync)(int fd);
    int (*rename)(const char *from, const char *to);
} AtomicFileSyscalls;
// Replaces the calls (NULL: the real ones back). Test-only.
void atomic_file_set_syscalls(const AtomicFileSyscalls *calls);

// fsyncs the folder that holds path, so a rename into it is durable.
int fsync_parent_dir(const char *path, Error *err);
// Moves the durable file from/NAME to to_dir/NAME (a rename: both on one filesystem). It is
// durable once to_dir is fsynced (fsync_parent_dir of a path in it), which the caller does
// after the last of a set: `pptrain tokenize` publishes its staged shards so.
int atomic_file_move_into(const char *from, const char *to_dir, Error *err);
// mkdir -p (mode 0755). Returns 0 when the folder exists afterwards.
int file_make_dirs(const char *path, Error *err);
// The SHA-256 (64 lowercase hex digits) and size of a file, via OpenSSL's EVP interface.
int file_sha256(const char *path, char hex[65], int64_t *bytes, Error *err);
// The SHA-256 of a buffer, as 64 lowercase hex digits.
void buffer_sha256(const void *data, size_t n, char hex[65]);
// The whole file as a NUL-terminated malloc'd string (at most max_bytes), or NULL with err.
char *file_read_text(const char *path, size_t max_bytes, Error *err);
// The same for a file that may hold NUL bytes (tokenizer.model): *n gets its size.
char *file_read_bytes(const char *path, size_t max_bytes, size_t *n, Error *err);
#endif
