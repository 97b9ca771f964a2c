#include "console/run_recorder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/run_json.h"
#include "storage/db_journal.h"

// The writes that must land wait RECORDER_PATIENCE_WAITS ordinary busy waits for the lock.
static void recorder_patient(RunRecorder *r, bool patient) {
    db_set_patience(r->db, patient ? RECORDER_PATIENCE_WAITS * db_busy_timeout_ms(r->db) : 0);
}

// A write failed: a locked store keeps the rows for later (one warning per episode); any
// other failure ends recording, and the session stops the run.
static void recorder_failed(RunRecorder *r, const Error *err) {
    if (r->write_failed) return;
    if (db_busy(r->db)) {
        if (!r->busy)
            fprintf(stderr, "pptrain: warning: %s; the steps are kept and recorded once it frees\n", err->msg);
        r->busy = true;
        return;
    }
    r->write_failed = true;
    r->failure = *err;
}

int recorder_begin(RunRecorder *r, const RunConfig *rc, const PipelineOptions *po, const RunInfo *info,
                   Error *err) {
    if (!r->path[0]) return 0;
    r->db = db_open(r->path, true, err);
    if (!r->db) return -1;
    recorder_patient(r, true);
    // What earlier runs could not write (their store stayed locked) goes in first.
    int replayed = 0;
    Error journal_err;
    const int replay_rc = db_journal_replay(r->db, &replayed, &journal_err);
    db_journal_report(r->path, replay_rc, replayed, &journal_err);
    int marked = 0;
    if (db_mark_stale_runs(r->db, &marked, err)) return -1;
    char *config = run_json(rc, po);
    const DbRun row = {.schedule = po->schedule, .stages = po->ranks, .virtual_stages = info->n_stages / po->ranks,
                       .dp = po->dp, .microbatches = rc->microbatches, .batch = rc->batch, .seq_len = rc->seq_len,
                       .model = rc->model.name, .params = (int64_t)info->params, .lr = rc->optim.lr,
                       .seed = rc->seed, .transport = transport_kind_name(po->transport), .device = po->device == DEVICE_CUDA ? "cuda" : "cpu", .config_json = config,
                       .steps_planned = rc->steps, .resumed_from = r->resumed_from,
                       .host_cores = info->host_cores, .host_ranks = info->host_ranks};
    r->run = db_run_begin(r->db, &row, err);
    recorder_patient(r, false);
    r->slot_bytes = info->slot_bytes;
    free(config);
    return r->run > 0 ? 0 : -1;
}

void recorder_step(RunRecorder *r, const PipelineReport *pr) {
    if (!r->db || r->write_failed) return;
    const StepReport *s = &pr->step;
    const StepTelemetry *t = &pr->telemetry;
    const bool parts = pr->has_telemetry && t->parts.valid;
    const DbStep row = {.step = s->step, .loss = s->loss, .lr = s->lr, .grad_norm = s->grad_norm,
                        .tokens_per_s = s->tokens_per_s, .step_ms = s->step_ms, .gflops = s->gflops,
                        .bubble = pr->has_telemetry ? t->bubble : NAN,
                        .bubble_ideal = parts ? t->parts.ideal : NAN,
                        .bubble_imbalance = parts ? t->parts.imbalance : NAN,
                        .bubble_transfer = parts ? t->parts.transfer : NAN,
                        .bubble_contention = parts ? t->parts.contention : NAN};
    // One row per stage: its compute, communication and transfer, and its rank's idle and
    // wait time (shared by the stages the rank holds).
    DbStageStep stages[512];
    const int n = pr->has_telemetry ? (pr->n_stages < 512 ? pr->n_stages : 512) : 0;
    for (int k = 0; k < n; k++) {
        const int rank = t->stages[k].rank;
        stages[k] = (DbStageStep){.stage = k, .rank = rank, .busy_ms = t->stages[k].busy_ms,
                                  .between_ms = t->ranks[rank].idle_ms, .sendrecv_ms = t->stages[k].comm_ms,
                                  .peak_act_bytes = (int64_t)pr->peak_slots[k] * (int64_t)r->slot_bytes[k],
                                  .transfer_ms = t->stages[k].transfer_ms, .wait_ms = t->ranks[rank].wait_ms};
    }
    Error err;
    if (db_step_add(r->db, r->run, &row, stages, n, &err)) recorder_failed(r, &err);
    else if (!db_backlogged(r->db)) r->busy = false;   // caught up: a later lock warns again
}

void recorder_eval(RunRecorder *r, int step, double val_loss, int batches) {
    if (!r->db || r->write_failed) return;
    const DbEval row = {.step = step, .val_loss = val_loss, .batches = batches};
    Error err;
    if (db_eval_add(r->db, r->run, &row, &err)) recorder_failed(r, &err);
    else if (!db_backlogged(r->db)) r->busy = false;
}

void recorder_sample(RunRecorder *r, int step, int tokens, const char *text, double seconds) {
    if (!r->db || r->write_failed) return;
    const DbSample row = {.step = step, .tokens = tokens, .seconds = seconds, .text = (char *)text};  // copied by db_sample_add
    Error err;
    if (db_sample_add(r->db, r->run, &row, &err)) recorder_failed(r, &err);
    else if (!db_backlogged(r->db)) r->busy = false;
}

int recorder_end(RunRecorder *r, const char *status, const char *error, Error *err) {
    if (!r->db) return 0;
    int rc = 0;
    if (r->run > 0) {
        recorder_patient(r, true);
        // A store that failed cannot take the buffered steps; the row can still say 'failed'.
        if (r->write_failed) db_discard_pending(r->db);
        rc = db_run_end(r->db, r->run, status, error, err);
        if (rc && db_busy(r->db)) r->locked_out = true;
        if (rc) db_discard_pending(r->db);   // nothing to flush on close: the failure is err
    }
    db_close(r->db);
    r->db = NULL;
    return rc;
}

// ---- checkpoints: recorded patiently; a store that cannot take them fails the recorder --------

static bool recording(const RunRecorder *r) {
    return r->db && r->run > 0 && !r->write_failed;
}

// After a checkpoint write: back to the ordinary wait. A failure fails the recorder, a lock
// still held after the long wait too: the store is as good as unwritable.
static int checkpoint_written(RunRecorder *r, int rc, const Error *err) {
    recorder_patient(r, false);
    if (rc && !r->write_failed) {
        r->write_failed = true;
        r->failure = *err;
        r->locked_out = db_busy(r->db);
    }
    return rc ? -1 : 0;
}

int64_t recorder_checkpoint_begin(RunRecorder *r, int step, const char *dir) {
    if (!recording(r)) return -1;
    Error err;
    recorder_patient(r, true);
    const int64_t id = db_checkpoint_begin(r->db, r->run, step, dir, &err);
    checkpoint_written(r, id > 0 ? 0 : -1, &err);
    if (id > 0 && !db_backlogged(r->db)) r->busy = false;   // the begin flushed the buffered steps
    return id > 0 ? id : -1;
}

int recorder_checkpoint_file(RunRecorder *r, int64_t id, const char *path, int64_t bytes, const char *sha256,
                             int stage) {
    if (!recording(r) || id <= 0) return -1;
    Error err;
    recorder_patient(r, true);
    return checkpoint_written(r, db_checkpoint_file_add(r->db, id, path, bytes, sha256, stage, &err), &err);
}

int recorder_checkpoint_complete(RunRecorder *r, int64_t id) {
    if (!recording(r) || id <= 0) return -1;
    Error err;
    recorder_patient(r, true);
    return checkpoint_written(r, db_checkpoint_complete(r->db, id, &err), &err);
}

void recorder_checkpoint_fail(RunRecorder *r, int64_t id, const char *why) {
    if (!recording(r) || id <= 0) return;
    Error err;
    recorder_patient(r, true);
    checkpoint_written(r, db_checkpoint_fail(r->db, id, why, &err), &err);
}
