#include "storage/db_checkpoint_cleanup.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static char *column_text(sqlite3_stmt *stmt, int col) {
    const char *s = (const char *)sqlite3_column_text(stmt, col);
    if (!s) return NULL;
    const size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

int db_checkpoints_abandoned(Db *db, DbCheckpointInfo **out, int *n, Error *err) {
    static const char SQL[] =
        "SELECT c.id, c.step, c.dir, c.created_at, c.status FROM checkpoints c JOIN runs r ON r.id = c.run_id "
        "WHERE c.status = 'writing' AND r.status != 'running' ORDER BY c.id";
    *out = NULL;
    *n = 0;
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int rc, cap = 0;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            *out =
                check_alloc(realloc(*out, (size_t)cap * sizeof **out), (size_t)cap * sizeof **out, __FILE__, __LINE__);
        }
        char *dir = column_text(stmt, 2);
        (*out)[(*n)++] = (DbCheckpointInfo){.id = sqlite3_column_int64(stmt, 0),
                                            .step = sqlite3_column_int(stmt, 1),
                                            .dir = db_checkpoint_dir(db, dir),
                                            .created_at = column_text(stmt, 3),
                                            .status = column_text(stmt, 4)};
        free(dir);
    }
    if (rc != SQLITE_DONE) db_fail(db, err, "reading unfinished checkpoints");
    sqlite3_reset(stmt);
    if (rc == SQLITE_DONE) return 0;
    db_checkpoints_free(*out, *n);
    *out = NULL;
    *n = 0;
    return -1;
}
