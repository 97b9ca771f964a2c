#include "storage/checkpoint_spread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/atomic_file.h"
#include "storage/checkpoint.h"
#include "storage/checkpoint_seal.h"

#define SMALL_MAX_BYTES (64u << 20)   // an index of a few thousand tensors is ~0.5 MB

// In the order a copy is completed: trainer_state.json last.
static const char *const SMALL_FILES[] = {CKPT_INDEX_FILE, CKPT_CONFIG_FILE, CKPT_SEAL_FILE, CKPT_STATE_FILE};
#define N_SMALL (sizeof SMALL_FILES / sizeof SMALL_FILES[0])

char *ckpt_spread_pack(const char *dir, size_t *n, Error *err) {
    char *pack = NULL;
    size_t len = 0;
    for (size_t i = 0; i < N_SMALL; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, SMALL_FILES[i]);
        char *text = file_read_text(path, SMALL_MAX_BYTES, err);
        if (!text) {
            free(pack);
            return NULL;
        }
        const size_t bytes = strlen(text), head = strlen(SMALL_FILES[i]) + 32;
        pack = check_alloc(realloc(pack, len + head + bytes + 1), len + head + bytes + 1, __FILE__, __LINE__);
        len += (size_t)snprintf(pack + len, head, "%s\n%zu\n", SMALL_FILES[i], bytes);
        memcpy(pack + len, text, bytes + 1);
        len += bytes;
        free(text);
    }
    *n = len;
    return pack;
}

// Whether path holds exactly data[0..n).
static bool holds(const char *path, const char *data, size_t n) {
    Error ignored;
    char *have = file_read_text(path, SMALL_MAX_BYTES, &ignored);
    const bool same = have && strlen(have) == n && memcmp(have, data, n) == 0;
    free(have);
    return same;
}

int ckpt_spread_place(const char *dir, const char *pack, size_t n, int *written, Error *err) {
    *written = 0;
    size_t at = 0;
    for (size_t i = 0; i < N_SMALL; i++) {
        const size_t name_len = strlen(SMALL_FILES[i]);
        char *end = NULL;
        const bool named = at + name_len + 1 < n && memcmp(pack + at, SMALL_FILES[i], name_len) == 0 &&
                           pack[at + name_len] == '\n';
        const unsigned long long bytes = named ? strtoull(pack + at + name_len + 1, &end, 10) : 0;
        if (!named || !end || *end != '\n' || bytes > n - (size_t)(end + 1 - pack)) {
            error_set(err, "%s: the root's checkpoint files arrived malformed (at %s)", dir, SMALL_FILES[i]);
            return -1;
        }
        const char *data = end + 1;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, SMALL_FILES[i]);
        if (!holds(path, data, (size_t)bytes)) {
            if (atomic_write_file(path, data, (size_t)bytes, err)) return -1;
            (*written)++;
        }
        at = (size_t)(data - pack) + (size_t)bytes;
    }
    return 0;
}
