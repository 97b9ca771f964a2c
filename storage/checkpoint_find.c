#include "storage/checkpoint_find.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "storage/checkpoint.h"
#include "storage/checkpoint_seal.h"
#include "storage/db.h"

// Whether dir is a folder; if not, err says so in words a user acts on: a folder deleted or
// moved since the store recorded it is gone, not damaged, and a file is not a checkpoint.
static bool folder_present(const char *dir, Error *err) {
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return true;
    if (stat(dir, &st) == 0) error_set(err, "%s is a file, not a checkpoint folder", dir);
    else if (errno == ENOENT) error_set(err, "%s does not exist (deleted or moved?)", dir);
    else error_set(err, "%s: %s", dir, strerror(errno));
    return false;
}

// A folder's seal and its own manifest, and that trainer_state.json is there at all.
// *unsealed: it has no checksums.sha256 (written before pptrain sealed checkpoints).
static int verify_folder(const char *dir, bool shards, int *step, bool *unsealed, Error *err) {
    if (!folder_present(dir, err)) return -1;
    const int seal = shards ? ckpt_seal_verify(dir, err) : ckpt_seal_verify_small(dir, err);
    if (seal < 0) return -1;
    if (unsealed) *unsealed = seal == 1;
    CkptState st;
    if (ckpt_read_state(dir, &st, err)) return -1;
    const int rc = ckpt_verify_files(dir, st.files, st.n_files, shards, err);
    if (step) *step = st.step;
    ckpt_state_clear(&st);
    return rc;
}

// The store's manifest of one checkpoint (trainer_state.json included).
static int verify_recorded(Db *db, const DbCheckpointInfo *ck, bool shards, Error *err) {
    if (!folder_present(ck->dir, err)) return -1;
    DbCheckpointFile *files;
    int n;
    if (db_checkpoint_files_read(db, ck->id, &files, &n, err)) return -1;
    CkptFile *cf = xcalloc((size_t)(n > 0 ? n : 1), sizeof *cf);
    for (int i = 0; i < n; i++) {
        snprintf(cf[i].path, sizeof cf[i].path, "%s", files[i].path);
        snprintf(cf[i].sha256, sizeof cf[i].sha256, "%s", files[i].sha256);
        cf[i].bytes = files[i].bytes;
        cf[i].stage = files[i].stage;
    }
    int rc = n == 0 ? -1 : ckpt_verify_files(ck->dir, cf, n, shards, err);
    if (n == 0) error_set(err, "%s: the store lists no files for it", ck->dir);
    free(cf);
    free(files);
    return rc;
}

// What fell_back says of the run's newest checkpoint, passed over for an older good one: why
// came from verifying it, and a reason that starts with the folder's name loses that prefix.
static void passed_over(const char *dir, const Error *why, Error *fell_back) {
    Error ignored;
    if (!folder_present(dir, &ignored)) {   // "DIR does not exist (deleted or moved?)" says it all
        *fell_back = *why;
        return;
    }
    const size_t n = strlen(dir);
    const char *reason = strncmp(why->msg, dir, n) == 0 && strncmp(why->msg + n, ": ", 2) == 0 ? why->msg + n + 2
                                                                                                 : why->msg;
    error_set(fell_back, "%s is damaged (%s)", dir, reason);
}

static int from_run(Db *db, int64_t run, bool shards, char *dir, size_t cap, Error *fell_back, Error *err) {
    DbCheckpointInfo *cks;
    int n;
    if (db_checkpoints_read(db, run, &cks, &n, err)) return -1;
    int newest = -1, good = -1;
    Error why = {{0}};
    for (int i = n - 1; i >= 0 && good < 0; i--) {
        if (strcmp(cks[i].status, "complete") != 0) continue;
        Error e;
        if (verify_recorded(db, &cks[i], shards, &e) == 0) good = i;
        else if (newest < 0) why = e;
        if (newest < 0) newest = i;
    }
    int rc = -1;
    if (newest < 0) error_set(err, "run %lld has no complete checkpoint", (long long)run);
    else if (good == newest || (good >= 0 && fell_back)) {
        if (good != newest) passed_over(cks[newest].dir, &why, fell_back);
        snprintf(dir, cap, "%s", cks[good].dir);
        rc = 0;
    } else {
        Error ignored;
        const char *state = folder_present(cks[newest].dir, &ignored) ? "is damaged" : "is gone";
        if (good >= 0)
            error_set(err, "checkpoint %s (run %lld, step %d) %s: %s; the newest good one is %s (step %d): "
                           "resume it with --resume %s",
                      cks[newest].dir, (long long)run, cks[newest].step, state, why.msg, cks[good].dir,
                      cks[good].step, cks[good].dir);
        else
            error_set(err, "checkpoint %s (run %lld, step %d) %s: %s; the run has no good checkpoint", cks[newest].dir,
                      (long long)run, cks[newest].step, state, why.msg);
    }
    db_checkpoints_free(cks, n);
    return rc;
}

// The newest run (by id) with a complete checkpoint.
static int64_t latest_run(Db *db, Error *err) {
    DbRunInfo *runs;
    int n;
    const DbRunFilter all = {0};
    if (db_runs_list(db, &all, &runs, &n, err)) return -1;
    int64_t found = 0;
    for (int i = 0; i < n && !found; i++) {
        DbCheckpointInfo *cks;
        int m;
        if (db_checkpoints_read(db, runs[i].id, &cks, &m, err)) {
            found = -1;
            break;
        }
        for (int k = 0; k < m; k++) found = strcmp(cks[k].status, "complete") == 0 ? runs[i].id : found;
        db_checkpoints_free(cks, m);
    }
    db_runs_free(runs, n);
    if (found == 0) error_set(err, "--resume latest: no run in %s has a complete checkpoint", db_path(db));
    return found;
}

// The newest good sibling of a damaged folder: DIR/../step-* folders that verify.
static bool newest_good_sibling(const char *dir, bool shards, char *out, size_t cap, int *out_step) {
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    while (slash && slash[1] == '\0' && slash != parent) {   // a trailing slash
        *slash = '\0';
        slash = strrchr(parent, '/');
    }
    char self[4096];  // the damaged folder's own name, skipped
    snprintf(self, sizeof self, "%s", slash ? slash + 1 : parent);
    if (slash) *slash = '\0';
    else snprintf(parent, sizeof parent, ".");
    DIR *d = opendir(parent);
    if (!d) return false;
    int best = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "step-", 5) != 0) continue;
        char cand[4400];
        snprintf(cand, sizeof cand, "%s/%s", parent, e->d_name);
        int step;
        Error ignored;
        if (strcmp(self, e->d_name) == 0 || verify_folder(cand, shards, &step, NULL, &ignored) || step <= best) continue;
        if ((size_t)snprintf(out, cap, "%s", cand) < cap) best = step;
    }
    closedir(d);
    if (out_step) *out_step = best;
    return best >= 0;
}

static int from_folder(const char *arg, bool shards, char *dir, size_t cap, int64_t *run_id, Error *warning,
                       Error *err) {
    Error why;
    bool unsealed = false;
    if (!folder_present(arg, &why)) {   // a typo is not a damaged checkpoint
        error_set(err, "%s; give a run id, latest, or a checkpoint folder", why.msg);
        return -1;
    }
    if (verify_folder(arg, shards, NULL, &unsealed, &why) == 0) {
        if (unsealed)
            error_set(warning, "%s has no %s (an older pptrain wrote it): its %s is trusted unchecked", arg,
                      CKPT_SEAL_FILE, CKPT_STATE_FILE);
        CkptState st;
        if (ckpt_read_state(arg, &st, err)) return -1;
        *run_id = st.run_id;
        ckpt_state_clear(&st);
        snprintf(dir, cap, "%s", arg);
        return 0;
    }
    char good[4096];
    int step;
    if (newest_good_sibling(arg, shards, good, sizeof good, &step))
        error_set(err, "checkpoint %s is damaged: %s; the newest good one is %s (step %d): resume it with --resume %s",
                  arg, why.msg, good, step, good);
    else error_set(err, "%s is not a complete checkpoint: %s", arg, why.msg);
    return -1;
}

static bool all_digits(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

int ckpt_find_resume(const char *arg, const char *db_file, bool shards, char *dir, size_t cap, int64_t *run_id,
                     Error *warning, Error *fell_back, Error *err) {
    *run_id = 0;
    warning->msg[0] = '\0';
    if (fell_back) fell_back->msg[0] = '\0';
    const bool by_run = strcmp(arg, "latest") == 0 || all_digits(arg);
    if (!by_run) return from_folder(arg, shards, dir, cap, run_id, warning, err);
    if (!db_file[0]) {
        error_set(err, "--resume %s needs the run store (--db FILE), or give a checkpoint folder", arg);
        return -1;
    }
    Db *db = db_open(db_file, false, err);
    if (!db) return -1;
    int64_t run = strcmp(arg, "latest") == 0 ? latest_run(db, err) : strtoll(arg, NULL, 10);
    int rc = -1;
    if (run > 0) {
        DbRunInfo info;
        if (db_run_get(db, run, &info, err) == 0) {
            db_run_info_clear(&info);
            rc = from_run(db, run, shards, dir, cap, fell_back, err);
            *run_id = run;
        }
    }
    db_close(db);
    return rc;
}
