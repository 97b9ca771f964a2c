// llm.c token shards (.bin): a 1024-byte header of 256 little-endian int32 —
// [0] magic, [1] version, [2] token count — then the tokens, little-endian:
//   magic 20240520, version 1: uint16 tokens (GPT-2 vocabulary);
//   magic 20240801, version 7: uint32 tokens (Llama 3 vocabulary).
// A folder of shards is one stream, the shards concatenated in sorted path order. Refused:
// a file shorter than the header, a wrong magic or version, a shard with no tokens, a body
// shorter than the count (truncated), bytes after the counted tokens (a count that does not
// match the body means a broken writer or a wrong header: guessing which would train on
// garbage), a token above INT32_MAX, and a folder mixing uint16 and uint32 shards (they come
// from different tokenizers).
#include "engine/data/data_source.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/data/tokenizer.h"

enum {
    SHARD_HEADER_BYTES = 1024,
    SHARD_MAGIC_U16 = 20240520,
    SHARD_MAGIC_U32 = 20240801,
};

typedef struct {
    int width;          // bytes per token
    uint64_t count;     // tokens
} ShardInfo;

static int32_t le32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

static int read_at(int fd, void *buf, size_t n, off_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, off + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) errno = 0;   // end of file: the caller reports a short file
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

// Validates the header of the shard open on fd against the file's size.
static int check_header(const char *path, int fd, ShardInfo *info, Error *err) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
        error_set(err, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size == 0) {
        error_set(err, "%s: empty file", path);
        return -1;
    }
    if (size < SHARD_HEADER_BYTES) {
        error_set(err, "%s: %llu bytes, shorter than the %d-byte llm.c shard header", path,
                  (unsigned long long)size, SHARD_HEADER_BYTES);
        return -1;
    }
    unsigned char h[12];
    if (read_at(fd, h, sizeof h, 0) != 0) {
        error_set(err, "%s: cannot read the shard header: %s", path, strerror(errno));
        return -1;
    }
    int32_t magic = le32(h), version = le32(h + 4), count = le32(h + 8);
    if (magic == SHARD_MAGIC_U16 && version == 1) info->width = 2;
    else if (magic == SHARD_MAGIC_U32 && version == 7) info->width = 4;
    else if (magic == SHARD_MAGIC_U16 || magic == SHARD_MAGIC_U32) {
        error_set(err, "%s: unknown llm.c shard version %d for magic %d (expected %d)", path,
                  version, magic, magic == SHARD_MAGIC_U16 ? 1 : 7);
        return -1;
    } else {
        error_set(err, "%s: wrong magic %d: not an llm.c token shard (expected %d or %d)",
                  path, magic, SHARD_MAGIC_U16, SHARD_MAGIC_U32);
        return -1;
    }
    if (count <= 0) {
        error_set(err, "%s: header declares %d tokens: an empty or broken shard", path, count);
        return -1;
    }
    info->count = (uint64_t)count;
    uint64_t want = info->count * (uint64_t)info->width, body = size - SHARD_HEADER_BYTES;
    if (body < want) {
        error_set(err, "%s: truncated: header declares %llu tokens (%llu bytes) but the body "
                  "has %llu bytes", path, (unsigned long long)info->count,
                  (unsigned long long)want, (unsigned long long)body);
        return -1;
    }
    if (body > want) {
        error_set(err, "%s: %llu bytes after the %llu tokens the header declares (a wrong "
                  "count or a corrupt file)", path, (unsigned long long)(body - want),
                  (unsigned long long)info->count);
        return -1;
    }
    return 0;
}

static int host_is_little_endian(void) {
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

static void from_little_endian(void *tok, uint64_t n, int width) {
    if (host_is_little_endian()) return;
    unsigned char *p = tok;
    for (uint64_t i = 0; i < n; i++, p += width)
        for (int a = 0, b = width - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

int data_check_shard(const char *path, Error *err) {
    const int fd = open(path, O_RDONLY);
    if (fd < 0) {
        error_set(err, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    ShardInfo info;
    const int rc = check_header(path, fd, &info, err);
    close(fd);
    return rc;
}

// Opens every shard, checks its header and the tokens' width; *total = tokens in all.
static int check_all(const FileList *files, int *width, uint64_t *total, Error *err) {
    *total = 0;
    for (size_t i = 0; i < files->n; i++) {
        const char *path = files->path[i];
        int fd = open(path, O_RDONLY);
        if (fd < 0) {
            error_set(err, "%s: cannot read: %s", path, strerror(errno));
            return -1;
        }
        ShardInfo info;
        int rc = check_header(path, fd, &info, err);
        close(fd);
        if (rc != 0) return -1;
        if (i > 0 && info.width != *width) {
            error_set(err, "%s: uint%d tokens, but %s holds uint%d: the shards come from "
                      "different tokenizers", path, 8 * info.width, files->path[0], 8 * *width);
            return -1;
        }
        *width = info.width;
        *total += info.count;
    }
    return 0;
}

// Largest token in tok[0..n); -1 with *bad set to the index of a token above INT32_MAX.
static int64_t max_token(const void *tok, uint64_t n, int width, uint64_t *bad) {
    int64_t max = 0;
    for (uint64_t i = 0; i < n; i++) {
        int64_t t = width == 2 ? ((const uint16_t *)tok)[i] : ((const uint32_t *)tok)[i];
        if (t > INT32_MAX) {
            *bad = i;
            return -1;
        }
        if (t > max) max = t;
    }
    return max;
}

// Reads the tokens of one shard into dst (room for `room` tokens); *count = tokens read.
// The header is checked again: a shard rewritten since check_all is caught, not misread.
static int read_shard(const char *path, int width, unsigned char *dst, uint64_t room,
                      uint64_t *count, Error *err) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        error_set(err, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    ShardInfo info;
    int rc = check_header(path, fd, &info, err);
    if (rc == 0 && (info.width != width || info.count > room)) {
        error_set(err, "%s: changed while being read", path);
        rc = -1;
    }
    if (rc == 0 && read_at(fd, dst, (size_t)(info.count * (uint64_t)width),
                           SHARD_HEADER_BYTES) != 0) {
        error_set(err, "%s: cannot read the tokens: %s", path,
                  errno ? strerror(errno) : "file shrank while reading");
        rc = -1;
    }
    close(fd);
    *count = info.count;
    return rc;
}

int data_load_shards(const FileList *files, TokenStream *out, Error *err) {
    *out = (TokenStream){0};
    out->pad = TOKEN_PAD;   // unused: shards are refused in pad mode
    int width = 0;
    uint64_t total;
    if (check_all(files, &width, &total, err) != 0) return -1;
    unsigned char *tok = xmalloc((size_t)(total * (uint64_t)width));
    uint64_t at = 0;
    int32_t max = 0;
    for (size_t i = 0; i < files->n; i++) {
        unsigned char *dst = tok + at * (uint64_t)width;
        uint64_t count = 0, bad = 0;
        if (read_shard(files->path[i], width, dst, total - at, &count, err) != 0) {
            free(tok);
            return -1;
        }
        from_little_endian(dst, count, width);
        int64_t m = max_token(dst, count, width, &bad);
        if (m < 0) {
            error_set(err, "%s: token %llu is %u, above the largest id %d", files->path[i],
                      (unsigned long long)bad, (unsigned)((const uint32_t *)dst)[bad],
                      INT32_MAX);
            free(tok);
            return -1;
        }
        if (m > max) max = (int32_t)m;
        at += count;
    }
    out->tok = tok;
    out->width = width;
    out->n = total;
    out->max_token = max;
    out->kind = width == 2 ? "llm.c shard (uint16)" : "llm.c shard (uint32)";
    return 0;
}
