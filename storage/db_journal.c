// storage/db_journal: what a run could not write into its store, replayed by the next writer
// (see db_journal.h).
#include "storage/db_journal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "engine/json_read.h"
#include "storage/atomic_file.h"
#include "storage/checkpoint.h"

#define JOURNAL_FORMAT "pptrain-store-journal"
#define JOURNAL_MAX_BYTES (1 << 20)

// The journal's folder and the prefix of its files' names: "DIR", "STORE.journal-".
static void journal_place(const char *db_path, char *dir, size_t dir_cap, char *prefix, size_t prefix_cap) {
    const char *slash = strrchr(db_path, '/');
    if (!slash) snprintf(dir, dir_cap, ".");
    else if (slash == db_path) snprintf(dir, dir_cap, "/");
    else snprintf(dir, dir_cap, "%.*s", (int)(slash - db_path), db_path);
    snprintf(prefix, prefix_cap, "%s.journal-", slash ? slash + 1 : db_path);
}

static void now_iso(char out[32]) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    const size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03dZ", (int)(tv.tv_usec / 1000));
}

int db_journal_write(const char *db_path, int64_t run, const char *status, const char *error_or_null,
                     const char *const *ckpt_dirs, int n, Error *err) {
    char ended[32], path[PATH_MAX + 64];
    now_iso(ended);
    snprintf(path, sizeof path, "%s.journal-%lld.json", db_path, (long long)run);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", JOURNAL_FORMAT);
    cJSON_AddNumberToObject(root, "run_id", (double)run);
    cJSON_AddStringToObject(root, "status", status);
    if (error_or_null) cJSON_AddStringToObject(root, "error", error_or_null);
    else cJSON_AddNullToObject(root, "error");
    cJSON_AddStringToObject(root, "ended_at", ended);
    cJSON *dirs = cJSON_AddArrayToObject(root, "checkpoints");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(dirs, cJSON_CreateString(ckpt_dirs[i]));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    const int rc = text ? atomic_write_file(path, text, strlen(text), err) : -1;
    if (!text) error_set(err, "%s: out of memory", path);
    free(text);
    return rc;
}

// A complete row for the checkpoint in dir, from its manifest: every file it lists and
// trainer_state.json itself, with their sha256. A complete row already there: nothing to do;
// an unfinished one ('writing', 'failed': its begin was taken, its end was not) is filled in.
static int replay_checkpoint(Db *db, int64_t run, const char *dir, Error *err) {
    bool complete;
    int64_t id = db_checkpoint_find(db, run, dir, &complete, err);
    if (id < 0 || complete) return id < 0 ? -1 : 0;
    CkptState st;
    char state_path[PATH_MAX + 64];
    CkptFile state = {.stage = -1};
    snprintf(state.path, sizeof state.path, "%s", CKPT_STATE_FILE);
    snprintf(state_path, sizeof state_path, "%s/%s", dir, CKPT_STATE_FILE);
    Error gone;
    if (ckpt_read_state(dir, &st, &gone)) return 0;   // the folder is not there to record any more
    int rc = file_sha256(state_path, state.sha256, &state.bytes, err);
    if (rc == 0 && id == 0) rc = (id = db_checkpoint_begin(db, run, st.step, dir, err)) > 0 ? 0 : -1;
    if (rc == 0) rc = db_checkpoint_files_clear(db, id, err);
    for (int i = 0; i < st.n_files && rc == 0; i++)
        rc = db_checkpoint_file_add(db, id, st.files[i].path, st.files[i].bytes, st.files[i].sha256,
                                    st.files[i].stage, err);
    if (rc == 0) rc = db_checkpoint_file_add(db, id, state.path, state.bytes, state.sha256, -1, err);
    if (rc == 0) rc = db_checkpoint_complete(db, id, err);
    ckpt_state_clear(&st);
    return rc;
}

static int replay_locked(Db *db, const char *path, Error *err);

// One journal, in one write transaction: its checkpoints, then the run's end (a run no longer
// 'running' has its end already), then the file goes. Every process of an mpirun job may
// replay at once: the first to take the lock records it; the others find the file gone, or
// every row already there.
static int replay_one(Db *db, const char *path, Error *err) {
    if (db_write_begin(db, err)) return -1;
    if (access(path, F_OK) != 0) {   // another process replayed it while this one waited
        db_write_rollback(db);
        return 0;
    }
    const int rc = replay_locked(db, path, err);
    if (rc || db_write_commit(db, err)) {
        db_write_rollback(db);
        return -1;
    }
    if (unlink(path) != 0 && access(path, F_OK) == 0) {
        error_set(err, "%s: replayed, but cannot remove it", path);
        return -1;
    }
    return 0;
}

static int replay_locked(Db *db, const char *path, Error *err) {
    char *text = file_read_text(path, JOURNAL_MAX_BYTES, err);
    if (!text) return -1;
    cJSON *root = json_parse_object(text, strlen(text), path, err);
    free(text);
    if (!root) return -1;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(root, "run_id");
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(root, "status");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON *ended = cJSON_GetObjectItemCaseSensitive(root, "ended_at");
    const cJSON *dirs = cJSON_GetObjectItemCaseSensitive(root, "checkpoints");
    int rc = 0;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, JOURNAL_FORMAT) || !cJSON_IsNumber(run) ||
        run->valuedouble < 1 || !cJSON_IsString(status) || !cJSON_IsString(ended) || !cJSON_IsArray(dirs)) {
        error_set(err, "%s: not a pptrain store journal; left as it is", path);
        rc = -1;
    }
    const int64_t id = rc == 0 ? (int64_t)run->valuedouble : 0;
    for (const cJSON *d = rc == 0 ? dirs->child : NULL; d && rc == 0; d = d->next)
        if (cJSON_IsString(d)) rc = replay_checkpoint(db, id, d->valuestring, err);
    if (rc == 0) {
        Error end_err;
        const char *why = cJSON_IsString(error) ? error->valuestring : NULL;
        if (db_run_end_at(db, id, status->valuestring, why, ended->valuestring, &end_err) && db_busy(db)) {
            *err = end_err;
            rc = -1;
        }
    }
    cJSON_Delete(root);
    return rc;
}

// Whether a journal lies beside db_path.
static bool has_journal(const char *db_path) {
    char dir[PATH_MAX], prefix[PATH_MAX];
    journal_place(db_path, dir, sizeof dir, prefix, sizeof prefix);
    DIR *d = opendir(dir);
    bool found = false;
    const struct dirent *e;
    while (d && !found && (e = readdir(d)))
        found = strncmp(e->d_name, prefix, strlen(prefix)) == 0 && strstr(e->d_name, ".json") != NULL;
    if (d) closedir(d);
    return found;
}

void db_journal_report(const char *db_path, int rc, int n_replayed, const Error *err) {
    if (rc) fprintf(stderr, "pptrain: warning: %s; it stays for a later run\n", err->msg);
    else if (n_replayed)
        fprintf(stderr, "pptrain: note: %s: recorded %d earlier run%s end and checkpoints kept while it was locked\n",
                db_path, n_replayed, n_replayed == 1 ? "'s" : "s'");
}

int db_journal_replay_path(const char *db_path, int *n_replayed, Error *err) {
    *n_replayed = 0;
    if (!has_journal(db_path)) return 0;
    Db *db = db_open(db_path, true, err);
    if (!db) return -1;
    const int rc = db_journal_replay(db, n_replayed, err);
    db_close(db);
    return rc;
}

int db_journal_replay(Db *db, int *n_replayed, Error *err) {
    char dir[PATH_MAX], prefix[PATH_MAX], path[2 * PATH_MAX + 2];
    *n_replayed = 0;
    journal_place(db_path(db), dir, sizeof dir, prefix, sizeof prefix);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int rc = 0;
    const struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        const size_t n = strlen(e->d_name), k = strlen(prefix);
        if (n <= k + 5 || strncmp(e->d_name, prefix, k) || strcmp(e->d_name + n - 5, ".json")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        rc = replay_one(db, path, err);
        if (rc == 0) ++*n_replayed;
    }
    closedir(d);
    return rc;
}
