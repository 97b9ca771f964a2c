#include "storage/checkpoint_seal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "storage/atomic_file.h"

#define SEAL_MAX_BYTES (1u << 20)   // ~13,000 lines: far more files than any checkpoint has

// "<sha256>  <name>\n", sha256sum's text-mode line.
static void put_line(char **text, size_t *len, size_t *cap, const char *sha256, const char *name) {
    const size_t need = 64 + 2 + strlen(name) + 2;
    if (*len + need > *cap) {
        *cap = (*len + need) * 2;
        *text = check_alloc(realloc(*text, *cap), *cap, __FILE__, __LINE__);
    }
    *len += (size_t)snprintf(*text + *len, *cap - *len, "%s  %s\n", sha256, name);
}

int ckpt_seal_write(const char *dir, const CkptFile *files, int n, const char state_sha256[65], Error *err) {
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (int i = 0; i < n; i++) put_line(&text, &len, &cap, files[i].sha256, files[i].path);
    put_line(&text, &len, &cap, state_sha256, CKPT_STATE_FILE);
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_SEAL_FILE);
    const int rc = atomic_write_file(path, text, len, err);
    free(text);
    return rc;
}

static bool is_hex64(const char *s) {
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

// One line, NUL-terminated in place: its sha256 and name, checked for form.
static int parse_line(const char *dir, char *line, int lineno, const char **sha256, const char **name, Error *err) {
    if (strlen(line) < 67 || !is_hex64(line) || line[64] != ' ' || line[65] != ' ' || strchr(line + 66, '/')) {
        error_set(err, "%s: %s: line %d is not \"<sha256>  <file name>\"", dir, CKPT_SEAL_FILE, lineno);
        return -1;
    }
    line[64] = '\0';
    *sha256 = line;
    *name = line + 66;
    return 0;
}

static int check_file(const char *dir, const char *name, const char *want, Error *err) {
    char path[4400], got[65];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        error_set(err, "%s: %s is missing (%s lists it)", dir, name, CKPT_SEAL_FILE);
        return -1;
    }
    if (file_sha256(path, got, NULL, err)) return -1;
    if (strcmp(got, want) != 0) {
        error_set(err, "%s: %s: sha256 does not match %s", dir, name, CKPT_SEAL_FILE);
        return -1;
    }
    return 0;
}

// Every line's file; the state must be among them (a seal without it guards nothing).
static int check_lines(const char *dir, char *text, bool shards, Error *err) {
    bool state_listed = false;
    int lineno = 0;
    for (char *line = text, *next; *line; line = next) {
        char *nl = strchr(line, '\n');
        next = nl ? nl + 1 : line + strlen(line);
        if (nl) *nl = '\0';
        const char *sha256, *name;
        if (parse_line(dir, line, ++lineno, &sha256, &name, err)) return -1;
        if ((shards || !ckpt_is_shard(name)) && check_file(dir, name, sha256, err)) return -1;
        state_listed |= strcmp(name, CKPT_STATE_FILE) == 0;
    }
    if (!state_listed) error_set(err, "%s: %s does not list %s", dir, CKPT_SEAL_FILE, CKPT_STATE_FILE);
    return state_listed ? 0 : -1;
}

static int seal_verify(const char *dir, bool shards, Error *err) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_SEAL_FILE);
    struct stat sb;
    if (stat(path, &sb) != 0 && errno == ENOENT) return 1;
    char *text = file_read_text(path, SEAL_MAX_BYTES, err);
    if (!text) return -1;
    const int rc = check_lines(dir, text, shards, err);
    free(text);
    return rc;
}

int ckpt_seal_verify(const char *dir, Error *err) { return seal_verify(dir, true, err); }
int ckpt_seal_verify_small(const char *dir, Error *err) { return seal_verify(dir, false, err); }
