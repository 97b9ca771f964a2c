// engine/file_read: whole small files into memory (see file_read.h).
#include "engine/file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdint.h>
#include <unistd.h>

static void too_large(const char *path, double bytes, size_t max_bytes, const char *what, Error *err) {
    error_set(err, "%s: %.1f MiB, more than %s may hold (%.0f MiB)", path, bytes / (1 << 20),
              what ? what : "this file", (double)max_bytes / (1 << 20));
}

char *file_read_all(const char *path, size_t max_bytes, const char *what, size_t *n_out, Error *err) {
    if (n_out) *n_out = 0;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        if (errno == ENOENT) error_set(err, "%s: no such file", path);
        else error_set(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0) {
        error_set(err, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        error_set(err, "%s is a folder, not a file", path);
        close(fd);
        return NULL;
    }
    if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size > max_bytes) {
        too_large(path, (double)st.st_size, max_bytes, what, err);
        close(fd);
        return NULL;
    }
    // Sized for a regular file; a stream grows the buffer as it comes, one byte past the limit
    // at most, so that too large is told from exactly the limit.
    size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 1 << 16, n = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (n + 1 == cap) {
            if (n > max_bytes) break;
            cap = cap * 2 < max_bytes + 2 ? cap * 2 : max_bytes + 2;
            buf = check_alloc(realloc(buf, cap), cap, __FILE__, __LINE__);
        }
        const ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            error_set(err, "%s: read failed: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return NULL;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    if (n > max_bytes) {   // a stream, or a file that grew while it was read
        too_large(path, (double)n, max_bytes, what, err);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (n_out) *n_out = n;
    return buf;
}
