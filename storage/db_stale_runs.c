// storage/db_stale_runs: the writer's repair of runs whose process died (db_mark_stale_runs,
// storage/db.h). It reads with the queries (db_query.c: which 'running' runs lost their
// process) and writes with the writer's statements (db.c), so it sits in a file above both and
// db.c never calls back into db_query.c.
#include <assert.h>
#include <sqlite3.h>
#include <stdio.h>

#include "storage/db.h"

static int db_mark_failed(Db *db, int64_t id, const char *host, int64_t pid, Error *err) {
    static const char SQL[] =
        "UPDATE runs SET status = 'failed', ended_at = coalesce(heartbeat_at, started_at), error = ?1 "
        "WHERE id = ?2 AND status = 'running'";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    char why[512];
    snprintf(why, sizeof why, "process %lld on %s ended without finishing the run (killed or crashed)",
             (long long)pid, host);
    int b = sqlite3_bind_text(stmt, 1, why, -1, SQLITE_TRANSIENT) | sqlite3_bind_int64(stmt, 2, id);
    return db_step_done(db, stmt, b, "marking a crashed run", err);
}

int db_mark_stale_runs(Db *db, int *n_marked, Error *err) {
    assert(db_is_writer(db));
    *n_marked = 0;
    DbRunInfo *runs = NULL;
    int n = 0;
    if (db_runs_list(db, &(DbRunFilter){.status = "crashed"}, &runs, &n, err)) return -1;
    int rc = 0;
    if (n > 0 && db_exec(db, "BEGIN IMMEDIATE", "marking crashed runs", err)) rc = -1;
    for (int i = 0; i < n && rc == 0; i++) rc = db_mark_failed(db, runs[i].id, runs[i].host, runs[i].pid, err);
    if (n > 0 && rc == 0 && db_exec(db, "COMMIT", "marking crashed runs", err)) rc = -1;
    if (n > 0 && rc) db_rollback(db);
    if (rc == 0) *n_marked = n;
    db_runs_free(runs, n);
    return rc;
}
