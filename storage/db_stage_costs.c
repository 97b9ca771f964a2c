// storage/db_stage_costs: a run's measured stage costs (db_stage_costs.h), in one read snapshot.
#include "storage/db_stage_costs.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

// The step after which steps count: the first step when the run has more than one, else 0.
static int first_counted(Db *db, int64_t run, int *skip, Error *err) {
    static const char SQL[] = "SELECT count(*), coalesce(min(step), 0) FROM steps WHERE run_id = ?";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int rc = sqlite3_bind_int64(stmt, 1, run);
    if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
    if (rc != SQLITE_ROW) return db_fail(db, err, "counting steps");
    const int count = sqlite3_column_int(stmt, 0), first = sqlite3_column_int(stmt, 1);
    sqlite3_reset(stmt);
    if (count == 0) {
        error_set(err, "run %lld has no measured steps to plan from", (long long)run);
        return -1;
    }
    *skip = count > 1 ? first : first - 1;
    return 0;
}

static int read_steps(Db *db, int64_t run, int skip, DbStageCosts *out, Error *err) {
    static const char SQL[] = "SELECT count(*), avg(step_ms), avg(bubble) FROM steps WHERE run_id = ? AND step > ?";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int rc = sqlite3_bind_int64(stmt, 1, run) | sqlite3_bind_int(stmt, 2, skip);
    if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
    if (rc != SQLITE_ROW) return db_fail(db, err, "reading step times");
    out->steps = sqlite3_column_int(stmt, 0);
    out->step_ms = sqlite3_column_double(stmt, 1);
    out->bubble = sqlite3_column_type(stmt, 2) == SQLITE_NULL ? NAN : sqlite3_column_double(stmt, 2);
    sqlite3_reset(stmt);
    return 0;
}

static int read_stages(Db *db, int64_t run, int skip, DbStageCosts *out, Error *err) {
    static const char SQL[] = "SELECT stage, avg(busy_ms) FROM stage_steps WHERE run_id = ? AND step > ? "
                              "GROUP BY stage ORDER BY stage";
    sqlite3_stmt *stmt = db_stmt(db, SQL, err);
    if (!stmt) return -1;
    int rc = sqlite3_bind_int64(stmt, 1, run) | sqlite3_bind_int(stmt, 2, skip), cap = 0;
    while (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        if (sqlite3_column_int(stmt, 0) != out->n_stages) {
            sqlite3_reset(stmt);
            error_set(err, "run %lld: stage %d has no timings", (long long)run, out->n_stages);
            return -1;
        }
        if (out->n_stages == cap) {
            cap = cap ? 2 * cap : 8;
            out->busy_ms = check_alloc(realloc(out->busy_ms, sizeof(double) * (size_t)cap),
                                       sizeof(double) * (size_t)cap, __FILE__, __LINE__);
        }
        out->busy_ms[out->n_stages++] = sqlite3_column_double(stmt, 1);
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE) return db_fail(db, err, "reading stage timings");
    sqlite3_reset(stmt);
    if (out->n_stages == 0) {
        error_set(err, "run %lld has no stage timings to plan from", (long long)run);
        return -1;
    }
    return 0;
}

int db_stage_costs(Db *db, int64_t run, DbStageCosts *out, Error *err) {
    memset(out, 0, sizeof *out);
    DbRunInfo info;
    if (db_run_get(db, run, &info, err)) return -1;
    db_run_info_clear(&info);
    if (db_read_begin(db, err)) return -1;
    int skip = 0;
    const int rc = first_counted(db, run, &skip, err) || read_steps(db, run, skip, out, err) ||
                   read_stages(db, run, skip, out, err);
    db_read_end(db);
    if (rc) db_stage_costs_free(out);
    return rc ? -1 : 0;
}

void db_stage_costs_free(DbStageCosts *c) {
    free(c->busy_ms);
    memset(c, 0, sizeof *c);
}
