#include "storage/checkpoint_spread.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "storage/atomic_file.h"
#include "storage/checkpoint.h"
#include "storage/checkpoint_seal.h"
#include "storage/model_identity.h"

#define SMALL_MAX_BYTES (512u << 20)   // an index of a few thousand tensors is ~0.5 MB; a tokenizer.json tens of MB

// In the order a copy is completed: trainer_state.json last. Between the config and the seal,
// the identity files (storage/model_identity.h) the root's folder has: each is optional.
#define N_SMALL (4 + IDENTITY_N_FILES)
static const char *small_file(size_t i) {
    static const char *const head[] = {CKPT_INDEX_FILE, CKPT_CONFIG_FILE}, *const tail[] = {CKPT_SEAL_FILE, CKPT_STATE_FILE};
    return i < 2 ? head[i] : i < 2 + IDENTITY_N_FILES ? IDENTITY_FILES[i - 2] : tail[i - 2 - IDENTITY_N_FILES];
}
static bool small_optional(size_t i) { return i >= 2 && i < 2 + IDENTITY_N_FILES; }

char *ckpt_spread_pack(const char *dir, size_t *n, Error *err) {
    char *pack = NULL;
    size_t len = 0;
    for (size_t i = 0; i < N_SMALL; i++) {
        char path[4400];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, small_file(i));
        if (small_optional(i) && stat(path, &sb) != 0 && errno == ENOENT) continue;
        size_t bytes = 0;
        char *data = file_read_bytes(path, SMALL_MAX_BYTES, &bytes, err);   // tokenizer.model is binary
        if (!data) {
            free(pack);
            return NULL;
        }
        const size_t head = strlen(small_file(i)) + 32;
        pack = check_alloc(realloc(pack, len + head + bytes + 1), len + head + bytes + 1, __FILE__, __LINE__);
        len += (size_t)snprintf(pack + len, head, "%s\n%zu\n", small_file(i), bytes);
        memcpy(pack + len, data, bytes);
        len += bytes;
        pack[len] = '\0';
        free(data);
    }
    *n = len;
    return pack;
}

// Whether path holds exactly data[0..n).
static bool holds(const char *path, const char *data, size_t n) {
    Error ignored;
    size_t have_n = 0;
    char *have = file_read_bytes(path, SMALL_MAX_BYTES, &have_n, &ignored);
    const bool same = have && have_n == n && memcmp(have, data, n) == 0;
    free(have);
    return same;
}

// The i-th packed file (small_file(i)) at *at: its bytes at *data, *bytes long; *at moves past
// it. An optional file the pack does not hold there: *data NULL, *at unmoved. -1 with err when
// the pack is malformed there.
static int unpack(const char *dir, const char *pack, size_t n, size_t *at, size_t i, const char **data, size_t *bytes,
                  Error *err) {
    const char *name = small_file(i);
    const size_t name_len = strlen(name);
    char *end = NULL;
    const bool named = *at + name_len + 1 < n && memcmp(pack + *at, name, name_len) == 0 && pack[*at + name_len] == '\n';
    *data = NULL;
    if (!named && small_optional(i)) return 0;
    const unsigned long long len = named ? strtoull(pack + *at + name_len + 1, &end, 10) : 0;
    if (!named || !end || end >= pack + n || *end != '\n' || len > n - (size_t)(end + 1 - pack)) {
        error_set(err, "%s: the root's checkpoint files arrived malformed (at %s)", dir, name);
        return -1;
    }
    *data = end + 1;
    *bytes = (size_t)len;
    *at = (size_t)(*data - pack) + *bytes;
    return 0;
}

int ckpt_spread_place(const char *dir, const char *pack, size_t n, Error *err) {
    size_t at = 0;
    const char *data;
    size_t bytes;
    for (size_t i = 0; i < N_SMALL; i++)   // the whole pack is checked before a file is written
        if (unpack(dir, pack, n, &at, i, &data, &bytes, err)) return -1;
    if (at != n) {
        error_set(err, "%s: the root's checkpoint files arrived malformed (bytes after %s)", dir, CKPT_STATE_FILE);
        return -1;
    }
    at = 0;
    for (size_t i = 0; i < N_SMALL; i++) {
        unpack(dir, pack, n, &at, i, &data, &bytes, err);
        if (!data) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, small_file(i));
        if (!holds(path, data, bytes) && atomic_write_file(path, data, bytes, err)) return -1;
    }
    return 0;
}

// Whether dir holds the manifest's file f, with its size and sha256.
static bool holds_file(const char *dir, const CkptFile *f) {
    char path[4400];
    struct stat sb;
    Error ignored;
    snprintf(path, sizeof path, "%s/%s", dir, f->path);
    return stat(path, &sb) == 0 && (int64_t)sb.st_size == f->bytes && ckpt_verify_files(dir, f, 1, true, &ignored) == 0;
}

// Whether dir/name is the very file replica 0 wrote: its record ("file NAME BYTES SHA256 STAGE
// INODE MTIME") matches the file's size, inode and mtime. Then this process sees replica 0's
// folder (a shared filesystem) and need not read the file to know it is there.
static bool is_recorded_file(const char *dir, const char *name, const char *records) {
    char head[300];
    snprintf(head, sizeof head, "file %s ", name);
    const char *line = records;
    while (line && strncmp(line, head, strlen(head)) != 0) {
        line = strchr(line, '\n');
        if (line) line++;
    }
    long long bytes, sec;
    unsigned long long ino;
    long nsec;
    char path[4400];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return line && sscanf(line + strlen(head), "%lld %*s %*d %llu %lld.%ld", &bytes, &ino, &sec, &nsec) == 4 &&
           stat(path, &sb) == 0 && (long long)sb.st_size == bytes && (unsigned long long)sb.st_ino == ino &&
           (long long)sb.st_mtim.tv_sec == sec && (long)sb.st_mtim.tv_nsec == nsec;
}

static const CkptFile *manifest_entry(const CkptState *st, const char *name) {
    for (int i = 0; i < st->n_files; i++)
        if (strcmp(st->files[i].path, name) == 0) return &st->files[i];
    return NULL;
}

int ckpt_spread_replica_shards(const char *dir, const Pipeline *p, const char *pack, size_t n, const char *records,
                               Error *err) {
    if (pipeline_replica(p) == 0) return 0;
    size_t at = 0, bytes = 0;
    const char *data = NULL;
    for (size_t i = 0; i < N_SMALL; i++)
        if (unpack(dir, pack, n, &at, i, &data, &bytes, err)) return -1;
    char *text = xmalloc(bytes + 1);   // the state is packed last
    memcpy(text, data, bytes);
    text[bytes] = '\0';
    CkptState st;
    int rc = ckpt_state_parse(text, CKPT_STATE_FILE, &st, err);
    free(text);
    for (int s = 0; s < pipeline_n_stages(p) && rc == 0; s++) {
        if (!pipeline_stage(p, s)) continue;
        for (int k = 0; k < 2 && rc == 0; k++) {
            char name[128];
            ckpt_shard_name(name, sizeof name, k ? "optimizer" : "model", s, pipeline_n_stages(p));
            const CkptFile *want = manifest_entry(&st, name);
            if (!want) {
                error_set(err, "%s: the manifest has no %s", dir, name);
                rc = -1;
                break;
            }
            // Replica 0's own file (a shared folder), or an earlier replica's copy on this node.
            if (is_recorded_file(dir, name, records) || holds_file(dir, want)) continue;
            CkptFile mine;
            rc = ckpt_write_stage_file(dir, p, s, k == 1, &mine, err);
            if (rc == 0 && strcmp(mine.sha256, want->sha256) != 0) {
                error_set(err, "%s: %s: replica %d's copy differs from replica 0's (the replicas diverged)", dir, name,
                          pipeline_replica(p));
                rc = -1;
            }
        }
    }
    ckpt_state_clear(&st);
    return rc;
}
