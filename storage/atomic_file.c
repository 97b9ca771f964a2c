#include "storage/atomic_file.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/file_read.h"
#include "storage/process_gone.h"

#define APPEND_BUFFER (1u << 16)   // small appends (trace events, headers) gather here
#define MAX_WRITE (1u << 30)       // one write(2) at most; Linux caps a call near 2 GiB

static AtomicFileSyscalls sys = {write, fsync, rename};

void atomic_file_set_syscalls(const AtomicFileSyscalls *calls) {
    sys = calls ? *calls : (AtomicFileSyscalls){write, fsync, rename};
}

struct AtomicFile {
    int fd;
    char *path, *tmp;     // the target and "<target>.<pid>.tmp"
    unsigned char *buf;   // (APPEND_BUFFER) bytes not yet written
    size_t len;
    const char *failed_step;   // the first step that failed ("write", ...), NULL while none
    int failed_errno;
    EVP_MD_CTX *sha;      // the sha256 of every byte appended: the file's hash without reading it back
    int64_t bytes;        // appended so far
};

int atomic_file_move_into(const char *from, const char *to_dir, Error *err) {
    char copy[4096], to[8192];
    snprintf(copy, sizeof copy, "%s", from);
    snprintf(to, sizeof to, "%s/%s", to_dir, basename(copy));
    if (sys.rename(from, to) != 0) {
        error_set(err, "%s: rename into %s failed: %s", from, to_dir, strerror(errno));
        return -1;
    }
    return 0;
}

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

// Loops over short writes and EINTR; a write that makes no progress is an I/O error.
static int write_all(int fd, const void *data, size_t n) {
    const char *p = data;
    while (n > 0) {
        const ssize_t w = sys.write(fd, p, n > MAX_WRITE ? MAX_WRITE : n);
        if (w < 0 && errno == EINTR) continue;
        if (w == 0) errno = EIO;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static char *copy_string(const char *s) {
    const size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

// The error names the user's path, never the temporary name, and says when its folder is missing.
static void report_open_failure(const char *path, int errnum, Error *err) {
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    const char *dir = dirname(copy);
    struct stat st;
    if (errnum == ENOENT && stat(dir, &st) != 0)
        error_set(err, "%s: cannot write: %s (its folder %s does not exist)", path, strerror(errnum), dir);
    else if (errnum == ENOTDIR)
        error_set(err, "%s: cannot write: %s (%s is not a folder)", path, strerror(errnum), dir);
    else
        error_set(err, "%s: cannot write: %s", path, strerror(errnum));
}

AtomicFile *atomic_file_open(const char *path, Error *err) {
    const size_t cap = strlen(path) + 32;
    char *tmp = xmalloc(cap);
    snprintf(tmp, cap, "%s.%ld.tmp", path, (long)getpid());
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        report_open_failure(path, errno, err);
        free(tmp);
        return NULL;
    }
    AtomicFile *af = xcalloc(1, sizeof *af);
    *af = (AtomicFile){.fd = fd, .path = copy_string(path), .tmp = tmp, .buf = xmalloc(APPEND_BUFFER),
                       .sha = EVP_MD_CTX_new()};
    if (!af->sha || EVP_DigestInit_ex(af->sha, EVP_sha256(), NULL) != 1) check_alloc(NULL, 1, __FILE__, __LINE__);
    return af;
}

static void free_file(AtomicFile *af) {
    EVP_MD_CTX_free(af->sha);
    free(af->path);
    free(af->tmp);
    free(af->buf);
    free(af);
}

// Records the first failure (errno at the time) and puts it in err.
static int fail_at(AtomicFile *af, const char *step, Error *err) {
    if (!af->failed_step) af->failed_step = step, af->failed_errno = errno;
    error_set(err, "%s: %s failed: %s", af->path, af->failed_step, strerror(af->failed_errno));
    return -1;
}

static int flush_buffer(AtomicFile *af, Error *err) {
    if (af->len && write_all(af->fd, af->buf, af->len) != 0) return fail_at(af, "write", err);
    af->len = 0;
    return 0;
}

static int append(AtomicFile *af, const void *data, size_t n, Error *err) {
    if (af->len + n <= APPEND_BUFFER) {
        if (n) memcpy(af->buf + af->len, data, n);
        af->len += n;
        return 0;
    }
    if (flush_buffer(af, err)) return -1;
    if (n <= APPEND_BUFFER) return append(af, data, n, err);
    return write_all(af->fd, data, n) == 0 ? 0 : fail_at(af, "write", err);
}

int atomic_file_append(AtomicFile *af, const void *data, size_t n, Error *err) {
    if (af->failed_step) return fail_at(af, af->failed_step, err);
    if (n && EVP_DigestUpdate(af->sha, data, n) != 1) {
        errno = EIO;
        return fail_at(af, "sha256", err);
    }
    af->bytes += (int64_t)n;
    return append(af, data, n, err);
}

void atomic_file_abort(AtomicFile *af) {
    if (!af) return;
    close(af->fd);
    unlink(af->tmp);
    free_file(af);
}

// "Nothing lost": the new bytes are durable before the rename makes them the target, and the
// rename is durable before this returns. Any failure before the rename leaves the target as it
// was and no temporary file.
static void hex_of(const unsigned char md[32], char hex[65]) {
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

int atomic_file_commit_hashed(AtomicFile *af, char sha256[65], int64_t *bytes, Error *err) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    if (!af->failed_step && (EVP_DigestFinal_ex(af->sha, md, &md_len) != 1 || md_len != 32)) {
        errno = EIO;
        fail_at(af, "sha256", err);
    }
    const bool hashed = !af->failed_step;
    const int64_t n = af->bytes;
    if (atomic_file_commit(af, err)) return -1;
    if (sha256 && hashed) hex_of(md, sha256);
    if (bytes) *bytes = n;
    return 0;
}

int atomic_file_commit(AtomicFile *af, Error *err) {
    if (!af->failed_step) flush_buffer(af, err);
    if (!af->failed_step && sys.fsync(af->fd) != 0) fail_at(af, "fsync", err);
    if (close(af->fd) != 0 && !af->failed_step) fail_at(af, "close", err);
    if (!af->failed_step && sys.rename(af->tmp, af->path) != 0) fail_at(af, "rename", err);
    if (af->failed_step) {
        fail_at(af, af->failed_step, err);
        unlink(af->tmp);
        free_file(af);
        return -1;
    }
    const int rc = fsync_parent_dir(af->path, err);
    free_file(af);
    return rc;
}

int atomic_write_file(const char *path, const void *data, size_t n, Error *err) {
    AtomicFile *af = atomic_file_open(path, err);
    if (!af) return -1;
    if (atomic_file_append(af, data, n, err)) {
        atomic_file_abort(af);
        return -1;
    }
    return atomic_file_commit(af, err);
}

// The writer's pid in "<name>.<pid>.tmp"; 0 for a plain "<name>.tmp", -1 for no temporary file.
static long temp_owner(const char *name) {
    const size_t n = strlen(name);
    if (n < 5 || strcmp(name + n - 4, ".tmp") != 0) return -1;
    const char *end = name + n - 4, *dot = end;
    while (dot > name && dot[-1] >= '0' && dot[-1] <= '9') dot--;
    if (dot == end || dot == name || dot[-1] != '.') return 0;
    return strtol(dot, NULL, 10);
}

bool atomic_file_is_temp(const char *name) { return temp_owner(name) >= 0; }

int atomic_file_clean_stale(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    const struct dirent *e;
    while ((e = readdir(d))) {
        const long pid = temp_owner(e->d_name);
        if (pid < 0 || pid == (long)getpid() || !process_gone(pid)) continue;
        char path[4600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        removed += unlink(path) == 0;
    }
    closedir(d);
    return removed;
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
    hex_of(md, hex);
    if (bytes) *bytes = total;
    return 0;
}

void buffer_sha256(const void *data, size_t n, char hex[65]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    const int ok = EVP_Digest(data, n, md, &md_len, EVP_sha256(), NULL);
    assert(ok == 1 && md_len == 32);
    (void)ok;
    hex_of(md, hex);
}

char *file_read_text(const char *path, size_t max_bytes, Error *err) {
    size_t n;
    return file_read_bytes(path, max_bytes, &n, err);
}

char *file_read_bytes(const char *path, size_t max_bytes, size_t *n_out, Error *err) {
    return file_read_all(path, max_bytes, NULL, n_out, err);
}
