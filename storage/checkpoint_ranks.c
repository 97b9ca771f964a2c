// storage/checkpoint_ranks: one checkpoint written by every process of a run as one act
// (checkpoint_ranks.h).
#include "storage/checkpoint_ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "storage/atomic_file.h"
#include "storage/checkpoint_cleanup.h"
#include "storage/checkpoint_spread.h"

int ckpt_ranks_folder(Pipeline *p, const char *ckpt_dir, int64_t run, uint32_t tag, int step, char *dir, size_t cap,
                      int64_t *agreed_run) {
    const bool root = pipeline_is_root(p);
    const int64_t r = (int64_t)pipeline_world_max(p, root ? (double)run : 0.0);
    const unsigned t = (unsigned)pipeline_world_max(p, root ? (double)tag : 0.0);
    *agreed_run = r;
    return r > 0 ? snprintf(dir, cap, "%s/run-%lld-%08x/step-%06d", ckpt_dir, (long long)r, t, step)
                 : snprintf(dir, cap, "%s/run-%08x/step-%06d", ckpt_dir, t, step);
}

// Every process's verdict on a part of the checkpoint; the failing process keeps its own line.
static int agree(Pipeline *p, int rc, const char *dir, const char *who, Error *err) {
    if (pipeline_world_max(p, rc ? 1.0 : 0.0) == 0.0) return 0;
    if (rc == 0) error_set(err, "checkpoint %s: %s failed (see its error line)", dir, who);
    return -1;
}

// A folder that already holds a checkpoint's manifest belongs to another run (a run never
// writes one step twice, and its folder's name is its own): nothing is written over it.
static int refuse_taken_folder(const char *dir, Error *err) {
    char state[4200];
    struct stat st;
    snprintf(state, sizeof state, "%s/%s", dir, CKPT_STATE_FILE);
    if (stat(state, &st) != 0) return 0;
    error_set(err, "checkpoint %s: the folder already holds another run's checkpoint; nothing was written over it", dir);
    return -1;
}

static int adam_step_of(const Pipeline *p) {
    for (int k = 0; k < pipeline_n_stages(p); k++)
        if (pipeline_stage_optimizer(p, k)) return pipeline_stage_optimizer(p, k)->t;
    return 0;
}

// After the root's manifest: the replicas' shards where replica 0's are not seen, one replica
// at a time (two replicas of a stage may share a node's folder; different stages never write
// one path), then the root's small files into every other process's folder, one process at a
// time (checkpoint_spread.h). Only the root's copies are read: the records tell a replica
// whether it sees replica 0's very file.
static int spread_copies(Pipeline *p, const char *dir, const char *root_records, Error *err) {
    const int me = pipeline_world_rank(p), ranks = (int)pipeline_world_max(p, (double)me) + 1;
    if (ranks == 1) return 0;   // one process (local): its folder is the only one
    const bool root = pipeline_is_root(p);
    const int replica = pipeline_replica(p), replicas = (int)pipeline_world_max(p, (double)replica) + 1;
    char *pack = NULL, *records = root ? (char *)root_records : NULL;
    size_t n = 0, records_len = root ? strlen(root_records) : 0;
    int rc = root && !(pack = ckpt_spread_pack(dir, &n, err)) ? -1 : 0;
    rc = agree(p, rc, dir, "rank 0 reading back its files", err);
    if (rc == 0 && (pipeline_bcast_bytes(p, &pack, &n, "the checkpoint's files", err) ||
                    pipeline_bcast_bytes(p, &records, &records_len, "the checkpoint's records", err)))
        rc = -1;
    char who[64];
    for (int d = 1; d < replicas && rc == 0; d++) {
        if (replica == d) rc = ckpt_spread_replica_shards(dir, p, pack, n, records, err);
        snprintf(who, sizeof who, "replica %d's copy of its shards", d);
        rc = agree(p, rc, dir, who, err);
    }
    for (int turn = 1; turn < ranks && rc == 0; turn++) {
        if (turn == me) rc = ckpt_spread_place(dir, pack, n, err);
        snprintf(who, sizeof who, "rank %d's copy of the small files", turn);
        rc = agree(p, rc, dir, who, err);
    }
    free(pack);
    if (!root) free(records);
    return rc;
}

int ckpt_ranks_save(Pipeline *p, const CkptRanksSave *req, CkptState *st, Error *err) {
    const char *dir = req->dir;
    *st = (CkptState){0};
    pipeline_sync_to_host(p, false);   // GPU stages: their weights and moments into the host arrays
    // Before anything is written: a failure from here on discards the folder's files.
    if (agree(p, refuse_taken_folder(dir, err), dir, "another rank's look at its folder", err)) return -1;
    char *records = NULL, *all = NULL;
    size_t all_len = 0;
    int rc = file_make_dirs(dir, err) || ckpt_write_shards(dir, p, &records, err) ? -1 : 0;
    rc = agree(p, rc, dir, "another rank's writing of its shards", err);
    if (rc == 0) rc = pipeline_gather_bytes(p, records, strlen(records), &all, &all_len, "the checkpoint's records", err);
    free(records);
    const bool gathered = rc == 0;   // on every process alike
    if (gathered && pipeline_is_root(p))
        rc = ckpt_write_manifest(dir, all, req->rc, req->po, pipeline_n_stages(p), req->pos, adam_step_of(p),
                                 req->run_id, req->identity_src, st, err);
    if (gathered) rc = agree(p, rc, dir, "rank 0's manifest", err);
    if (rc == 0) rc = spread_copies(p, dir, all, err);
    free(all);
    if (rc == 0) return 0;
    ckpt_discard(dir);   // every rank has stopped writing: nothing of it stays
    ckpt_state_clear(st);
    return -1;
}

int ckpt_ranks_state_record(const char *dir, const CkptState *st, CkptFile *state, int64_t *bytes, Error *err) {
    char path[4600];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_STATE_FILE);
    memset(state, 0, sizeof *state);
    snprintf(state->path, sizeof state->path, "%s", CKPT_STATE_FILE);
    state->stage = -1;
    if (file_sha256(path, state->sha256, &state->bytes, err)) return -1;
    *bytes = state->bytes;
    for (int i = 0; i < st->n_files; i++) *bytes += st->files[i].bytes;
    return 0;
}
