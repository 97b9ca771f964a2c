// storage/model_identity: carrying generation_config.json and the tokenizer files along
// (model_identity.h says why and where).
#include "storage/model_identity.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/json_read.h"
#include "storage/atomic_file.h"

#define IDENTITY_MAX_BYTES (512u << 20)   // a large tokenizer.json is tens of MB

const char *const IDENTITY_FILES[IDENTITY_N_FILES] = {
    "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "tokenizer.model", "added_tokens.json", "chat_template.jinja"};

bool identity_is_file(const char *name) {
    for (int i = 0; i < IDENTITY_N_FILES; i++)
        if (strcmp(IDENTITY_FILES[i], name) == 0) return true;
    return false;
}

static bool is_json(const char *name) {
    const size_t n = strlen(name);
    return n > 5 && strcmp(name + n - 5, ".json") == 0;
}

// A file read whole (n bytes), refused when it is JSON that json_parse_object refuses.
static char *read_checked(const char *path, const char *name, size_t *n, Error *err) {
    char *data = file_read_bytes(path, IDENTITY_MAX_BYTES, n, err);
    if (!data || !is_json(name)) return data;
    cJSON *root = json_parse_object(data, *n, path, err);
    if (!root) {
        free(data);
        return NULL;
    }
    cJSON_Delete(root);
    return data;
}

// One file: read whole, checked when it is JSON, written and hashed as it is written.
static int copy_one(const char *src, const char *dst, const char *name, CkptFile *f, Error *err) {
    size_t n = 0;
    char *data = read_checked(src, name, &n, err);
    if (!data) return -1;
    AtomicFile *af = atomic_file_open(dst, err);
    int rc = af ? atomic_file_append(af, data, n, err) : -1;
    if (af && rc) atomic_file_abort(af);
    if (f) *f = (CkptFile){.stage = -1};
    if (f) snprintf(f->path, sizeof f->path, "%s", name);
    if (af && rc == 0) rc = atomic_file_commit_hashed(af, f ? f->sha256 : NULL, f ? &f->bytes : NULL, err);
    free(data);
    return rc;
}

int identity_check(const char *dir, Error *err) {
    for (int i = 0; i < IDENTITY_N_FILES; i++) {
        char path[4400];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, IDENTITY_FILES[i]);
        if (!is_json(IDENTITY_FILES[i]) || (stat(path, &sb) != 0 && errno == ENOENT)) continue;
        size_t n;
        char *data = read_checked(path, IDENTITY_FILES[i], &n, err);
        if (!data) return -1;
        free(data);
    }
    return 0;
}

int identity_copy(const char *src_dir, const char *dst_dir, CkptFile *files, int *n, Error *err) {
    if (!src_dir || !src_dir[0]) return 0;
    for (int i = 0; i < IDENTITY_N_FILES; i++) {
        char src[4400], dst[4400];
        struct stat sb;
        snprintf(src, sizeof src, "%s/%s", src_dir, IDENTITY_FILES[i]);
        snprintf(dst, sizeof dst, "%s/%s", dst_dir, IDENTITY_FILES[i]);
        if (stat(src, &sb) != 0 && errno == ENOENT) continue;
        if (copy_one(src, dst, IDENTITY_FILES[i], files ? &files[*n] : NULL, err)) return -1;
        if (files) (*n)++;
    }
    return 0;
}
