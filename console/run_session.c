#include "console/run_session.h"

#include <string.h>

// The session's hooks: its own work first (record, checkpoint), then the view's.
static int session_on_start(void *ctx, const RunConfig *rc, const PipelineOptions *po, const RunInfo *info,
                            Error *err) {
    RunSession *s = ctx;
    if (recorder_begin(&s->recorder, rc, po, info, err)) return -1;
    return s->view.on_start ? s->view.on_start(s->view.ctx, rc, po, info, err) : 0;
}

static void session_on_step(void *ctx, const Pipeline *p, const PipelineReport *r) {
    RunSession *s = ctx;
    recorder_step(&s->recorder, r);
    if (s->view.on_step) s->view.on_step(s->view.ctx, p, r);
}

static bool session_should_stop(void *ctx) {
    RunSession *s = ctx;
    return s->view.should_stop && s->view.should_stop(s->view.ctx);
}

static void session_on_end(void *ctx, const RunSummary *sum) {
    RunSession *s = ctx;
    if (s->view.on_end) s->view.on_end(s->view.ctx, sum);
}

int run_session(RunSession *s, RunSummary *summary, Error *err) {
    snprintf(s->recorder.path, sizeof s->recorder.path, "%s", s->ro.db_path);
    const TrainHooks hooks = {.ctx = s, .on_start = session_on_start, .on_step = session_on_step,
                              .should_stop = session_should_stop, .on_end = session_on_end};
    RunSummary local;
    RunSummary *sum = summary ? summary : &local;
    memset(sum, 0, sizeof *sum);
    const int result = train_run(&s->ro.rc, &s->ro.pipe, &hooks, sum, err);
    recorder_end(&s->recorder, result ? "failed" : sum->stopped ? "stopped" : "finished", result ? err->msg : NULL);
    return result;
}
