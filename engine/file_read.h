// engine/file_read: the one way pptrain reads a whole small file into memory (a config.json, a
// tokenizer.json, a schedule CSV, a checkpoint's JSON, a manifest), with errors a user acts on:
//   "x.json: no such file"                      (and every other open failure, by its errno)
//   "x.csv is a folder, not a file"
//   "x.json: 190.7 MiB, more than a config.json may hold (16 MiB)"
//   "x.json: read failed: Input/output error"
// Regular files are sized first; pipes and other streams are read to their end, up to the
// limit. The buffer is NUL-terminated (n excludes the NUL) and may hold NUL bytes itself.
#ifndef PPTRAIN_FILE_READ_H
#define PPTRAIN_FILE_READ_H
#include <stddef.h>

#include "engine/error.h"

// The whole file (malloc'd; free it), or NULL with one line in err. `what` names the kind of
// file for the size error ("a config.json"); NULL says "this file". n may be NULL.
char *file_read_all(const char *path, size_t max_bytes, const char *what, size_t *n, Error *err);
#endif
