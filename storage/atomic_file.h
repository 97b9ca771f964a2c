// storage/atomic_file: the "nothing lost" rule of DESIGN.md for small files, and the hashes
// that prove a checkpoint's files are what was written.
//   atomic_write_file: write "<path>.tmp", fsync it, rename it over path, fsync the folder.
//   A failure (disk full, permissions) leaves neither path nor path.tmp behind.
#ifndef PPTRAIN_ATOMIC_FILE_H
#define PPTRAIN_ATOMIC_FILE_H
#include <stddef.h>
#include <stdint.h>

#include "engine/error.h"

int atomic_write_file(const char *path, const void *data, size_t n, Error *err);
// fsyncs the folder that holds path, so a rename into it is durable.
int fsync_parent_dir(const char *path, Error *err);
// mkdir -p (mode 0755). Returns 0 when the folder exists afterwards.
int file_make_dirs(const char *path, Error *err);
// The SHA-256 (64 lowercase hex digits) and size of a file, via OpenSSL's EVP interface.
int file_sha256(const char *path, char hex[65], int64_t *bytes, Error *err);
// The whole file as a NUL-terminated malloc'd string (at most max_bytes), or NULL with err.
char *file_read_text(const char *path, size_t max_bytes, Error *err);
#endif
