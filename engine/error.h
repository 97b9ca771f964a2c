// A user-caused error: one line that says what is wrong and where. Functions that parse
// outside input (flags, files, configs, schedules) fill one and return -1; the console prints
// "pptrain: <msg>" and exits with code 2. Internal invariants use assert instead.
#ifndef PPTRAIN_ERROR_H
#define PPTRAIN_ERROR_H
#include <stddef.h>

typedef struct {
    char msg[512];
} Error;

// printf-style; keeps the message to one line (newlines become spaces).
void error_set(Error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Aborts with file:line and a hint when an allocation fails (the step never allocates;
// this guards run set-up). Returns p.
void *check_alloc(void *p, size_t bytes, const char *file, int line);
#define xmalloc(bytes) check_alloc(malloc(bytes), (bytes), __FILE__, __LINE__)
#define xcalloc(count, size) check_alloc(calloc((count), (size)), (size_t)(count) * (size), __FILE__, __LINE__)
#endif
