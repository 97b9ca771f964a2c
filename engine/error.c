#include "engine/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void error_set(Error *e, const char *fmt, ...) {
    if (!e) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    for (char *c = e->msg; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
}

void *check_alloc(void *p, size_t bytes, const char *file, int line) {
    if (!p && bytes) {
        fprintf(stderr, "pptrain: out of memory allocating %zu bytes at %s:%d "
                        "(try a smaller --batch, --seq or model)\n", bytes, file, line);
        exit(1);
    }
    return p;
}
