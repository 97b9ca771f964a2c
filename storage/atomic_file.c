#include "storage/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdbool.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fsync_parent_dir(const char *path, Error *err) {
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    const char *dir = dirname(copy);
    const int fd = open(dir, O_RDONLY | O_DIRECTORY);
    // Some filesystems cannot fsync a directory (EINVAL): nothing more can be done there.
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL)) {
        error_set(err, "%s: cannot fsync its folder %s: %s", path, dir, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

static int write_all(int fd, const void *data, size_t n) {
    const char *p = data;
    while (n > 0) {
        const ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w == 0) errno = EIO;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int atomic_write_file(const char *path, const void *data, size_t n, Error *err) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        error_set(err, "%s: cannot create: %s", tmp, strerror(errno));
        return -1;
    }
    const char *what = NULL;
    int why = 0;
    if (write_all(fd, data, n) != 0) what = "write", why = errno;
    else if (fsync(fd) != 0) what = "fsync", why = errno;
    if (close(fd) != 0 && !what) what = "close", why = errno;
    if (!what && rename(tmp, path) != 0) what = "rename", why = errno;
    if (what) {
        error_set(err, "%s: %s failed: %s", path, what, strerror(why));
        unlink(tmp);
        return -1;
    }
    return fsync_parent_dir(path, err);
}

int file_make_dirs(const char *path, Error *err) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) {
        error_set(err, "%.60s...: path too long", path);
        return -1;
    }
    for (char *c = p + 1;; c++) {
        const bool end = *c == '\0';
        if (*c == '/' || end) {
            *c = '\0';
            struct stat st;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                error_set(err, "%s: cannot create folder: %s", p, strerror(errno));
                return -1;
            }
            if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
                error_set(err, "%s: exists and is not a folder", p);
                return -1;
            }
            if (end) break;
            *c = '/';
        }
    }
    return 0;
}

int file_sha256(const char *path, char hex[65], int64_t *bytes, Error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        error_set(err, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
    static __thread unsigned char buf[1 << 16];
    int64_t total = 0;
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        ok = EVP_DigestUpdate(ctx, buf, n) == 1;
        total += (int64_t)n;
    }
    ok = ok && !ferror(f);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, md, &md_len) == 1 && md_len == 32;
    EVP_MD_CTX_free(ctx);
    fclose(f);
    if (!ok) {
        error_set(err, "%s: cannot read it to hash it", path);
        return -1;
    }
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    if (bytes) *bytes = total;
    return 0;
}

char *file_read_text(const char *path, size_t max_bytes, Error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        error_set(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && (size_t)n <= max_bytes && fseek(f, 0, SEEK_SET) == 0) {
        buf = xmalloc((size_t)n + 1);
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    fclose(f);
    if (!buf) error_set(err, "%s: cannot read it (or larger than %zu bytes)", path, max_bytes);
    return buf;
}
