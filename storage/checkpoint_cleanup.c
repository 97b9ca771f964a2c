#include "storage/checkpoint_cleanup.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/atomic_file.h"
#include "storage/checkpoint.h"
#include "storage/checkpoint_seal.h"
#include "storage/db_checkpoint_cleanup.h"

static bool has_suffix(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

// The files a checkpoint writes (checkpoint.h), and the temporary files on the way to them.
static bool is_checkpoint_file(const char *name) {
    const bool shard =
        (strncmp(name, "model-", 6) == 0 || strncmp(name, "optimizer-", 10) == 0) && has_suffix(name, ".safetensors");
    return shard || strcmp(name, CKPT_INDEX_FILE) == 0 || strcmp(name, CKPT_CONFIG_FILE) == 0 ||
           strcmp(name, CKPT_SEAL_FILE) == 0 || strcmp(name, CKPT_STATE_FILE) == 0 || atomic_file_is_temp(name);
}

// dir/name into path[4400]; false when it does not fit (then nothing is touched).
static bool join(char *path, const char *dir, const char *name) {
    return snprintf(path, 4400, "%s/%s", dir, name) < 4400;
}

static bool folder_has(const char *dir, const char *name) {
    char path[4400];
    struct stat sb;
    return join(path, dir, name) && stat(path, &sb) == 0;
}

static int remove_in(const char *dir, const char *name) {
    char path[4400];
    return join(path, dir, name) && unlink(path) == 0;
}

int ckpt_discard(const char *dir) {
    int removed = remove_in(dir, CKPT_STATE_FILE);
    DIR *d = opendir(dir);
    if (!d) return removed;
    const struct dirent *e;
    while ((e = readdir(d)))
        if (is_checkpoint_file(e->d_name)) removed += remove_in(dir, e->d_name);
    closedir(d);
    rmdir(dir);   // only when nothing else is there
    return removed;
}

// Calls visit(folder) for every sub-folder of dir whose name starts with prefix.
static int each_folder(const char *dir, const char *prefix, int (*visit)(const char *folder)) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int total = 0;
    const struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        char path[4400];
        struct stat sb;
        if (join(path, dir, e->d_name) && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) total += visit(path);
    }
    closedir(d);
    return total;
}

// An incomplete step folder loses its gone writers' temporary files, and then itself when
// that left it empty. A folder that was empty already stays: a live writer may have just
// made it and not yet opened its first file.
static int clean_step_folder(const char *folder) {
    if (folder_has(folder, CKPT_STATE_FILE)) return 0;
    const int removed = atomic_file_clean_stale(folder);
    if (removed > 0) rmdir(folder);   // only when nothing else is there
    return removed;
}

// A run folder whose step folders are all gone goes too (rmdir: only when empty), so a
// killed run leaves no empty run-*/step-* behind.
static int clean_run_folder(const char *folder) {
    const int removed = each_folder(folder, "step-", clean_step_folder);
    rmdir(folder);
    return removed;
}

int ckpt_clean_incomplete(const char *ckpt_dir) {
    return each_folder(ckpt_dir, "step-", clean_step_folder) + each_folder(ckpt_dir, "run-", clean_run_folder);
}

// dir lies under ckpt_dir (as the store recorded it: the same spelling a run under this
// --ckpt-dir writes). Outside it, a relative dir may name another place now: only temporary files
// of gone writers are removed there.
static bool under(const char *dir, const char *ckpt_dir) {
    const size_t n = strlen(ckpt_dir);
    return n > 0 && strncmp(dir, ckpt_dir, n) == 0 && dir[n] == '/';
}

int ckpt_clean_abandoned(Db *db, const char *ckpt_dir, int *n_cleaned, Error *err) {
    DbCheckpointInfo *cks;
    int n;
    *n_cleaned = 0;
    if (db_checkpoints_abandoned(db, &cks, &n, err)) return -1;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (folder_has(cks[i].dir, CKPT_STATE_FILE)) continue;
        if (under(cks[i].dir, ckpt_dir)) ckpt_discard(cks[i].dir);
        else atomic_file_clean_stale(cks[i].dir);
    }
    for (int i = 0; i < n && rc == 0; i++) {
        rc = db_checkpoint_fail(db, cks[i].id, "abandoned: its run ended before the checkpoint was complete", err);
        *n_cleaned += rc == 0;
    }
    db_checkpoints_free(cks, n);
    return rc;
}
