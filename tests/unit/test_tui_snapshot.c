// tests/unit/test_tui_snapshot.c: the tests of console/tui/tui_snapshot, driven through its
// TrainHooks as the engine drives them (no pipeline, no terminal): the pace that the live
// screen's ETA comes from leaves out the time a run spent paused, so a run resumed after a
// long pause is not predicted to take that pause again for every step left.
#include <pthread.h>
#include <time.h>

#include "console/tui/tui_snapshot.h"
#include "tests/unit/test_util.h"

const bool cli_gpu_emulated = false;   // console/main.c's, which this test does not link

static void nap(double s) {
    const struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

static void *resume_later(void *arg) {
    nap(0.4);
    tui_snapshot_set_pause(arg, false);
    return NULL;
}

static void step(const TrainHooks *h, int n, int planned) {
    PipelineReport r = {0};
    r.step.step = n;
    r.step.steps = planned;
    r.step.loss = 5.0;
    h->on_step(h->ctx, NULL, &r);
}

static void test_pause_is_not_pace(void) {
    TuiSnapshot l;
    tui_snapshot_init(&l);
    const TrainHooks h = tui_snapshot_hooks(&l);
    RunConfig rc = run_config_defaults();
    PipelineOptions po = {.ranks = 1};
    const int layers[1] = {2};
    const size_t slot[1] = {4096}, arena[1] = {0};
    RunInfo info = {.n_stages = 1, .stage_layers = layers, .slot_bytes = slot, .arena_bytes = arena};
    Error err;
    CHECK(h.on_start(h.ctx, &rc, &po, &info, &err) == 0, "on_start");
    step(&h, 1, 100);
    CHECK(!h.should_stop(h.ctx), "a running run goes on");
    tui_snapshot_set_pause(&l, true);
    pthread_t t;
    pthread_create(&t, NULL, resume_later, &l);
    CHECK(!h.should_stop(h.ctx), "a paused run goes on once resumed");   // waits about 0.4 s
    pthread_join(t, NULL);
    CHECK(l.paused_s >= 0.35, "the pause was counted: %.3f s", l.paused_s);
    step(&h, 2, 100);
    // Two steps that took microseconds: the run's pace is theirs, not the 0.4 s between them.
    CHECK(l.staging.run_s < 0.2, "run_s %.3f s leaves the pause out", l.staging.run_s);
    const double eta = tui_view_eta(&l.staging);
    CHECK(eta < 98 * 0.1, "ETA %.2f s: 98 steps at the steps' pace, not at the pause's", eta);
    tui_snapshot_destroy(&l);
}

int main(void) {
    test_pause_is_not_pace();
    return test_finish();
}
