#include "console/run_recorder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/run_json.h"

int recorder_begin(RunRecorder *r, const RunConfig *rc, const PipelineOptions *po, const RunInfo *info,
                   Error *err) {
    if (!r->path[0]) return 0;
    r->db = db_open(r->path, true, err);
    if (!r->db) return -1;
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
    r->slot_bytes = info->slot_bytes;
    free(config);
    return r->run > 0 ? 0 : -1;
}

static void recorder_warn(RunRecorder *r, const Error *err) {
    fprintf(stderr, "pptrain: warning: %s; the run goes on without recording\n", err->msg);
    r->write_failed = true;
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
                                  .idle_ms = t->ranks[rank].idle_ms, .comm_ms = t->stages[k].comm_ms,
                                  .peak_act_bytes = (int64_t)pr->peak_slots[k] * (int64_t)r->slot_bytes[k],
                                  .transfer_ms = t->stages[k].transfer_ms, .wait_ms = t->ranks[rank].wait_ms};
    }
    Error err;
    if (db_step_add(r->db, r->run, &row, stages, n, &err)) recorder_warn(r, &err);
}

void recorder_end(RunRecorder *r, const char *status, const char *error) {
    if (!r->db) return;
    Error err;
    if (r->run > 0 && db_run_end(r->db, r->run, status, error, &err))
        fprintf(stderr, "pptrain: warning: %s\n", err.msg);
    db_close(r->db);
    r->db = NULL;
}
