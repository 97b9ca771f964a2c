// Plans from measured costs: the per-stage simulator, the cost fit, the layout search over the
// registry, and the run store's stage costs (storage/db_stage_costs) with its refusals.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/schedule/plan_search.h"
#include "engine/schedule/schedule.h"
#include "engine/schedule/simulate.h"
#include "storage/db_stage_costs.h"
#include "tests/unit/test_util.h"

#define TOL 1e-9

// Equal stage costs through sim_run_stages time every registry row as sim_run does.
static void test_stages_equal(void) {
    for (const ScheduleInfo *info = SCHEDULE_REGISTRY; info < SCHEDULE_REGISTRY + SCHEDULE_COUNT; info++) {
        Error err;
        Schedule *s = schedule_build(info->name, 3, 6, 0, &err);
        CHECK(s != NULL, "%s: %s", info->name, s ? "" : err.msg);
        if (!s) continue;
        const SimCosts c = {1.0, 2.0, 0.75, 0.25};
        SimCosts *per = malloc(sizeof(SimCosts) * (size_t)s->n_stages);
        for (int k = 0; k < s->n_stages; k++) per[k] = c;
        SimResult a, b;
        CHECK(sim_run(s, c, &a, &err) == 0 && sim_run_stages(s, per, &b, &err) == 0, "%s runs", info->name);
        CHECK(a.makespan == b.makespan && a.bubble == b.bubble, "%s: %g/%g vs %g/%g", info->name, a.makespan, a.bubble,
              b.makespan, b.bubble);
        sim_free(&a);
        sim_free(&b);
        free(per);
        schedule_free(s);
    }
}

// GPipe, 2 ranks, 1 microbatch, the second stage 3x the first: F 1, F 3, B 6, B 2.
static void test_stages_uneven(void) {
    Error err;
    Schedule *s = schedule_build("gpipe", 2, 1, 1, &err);
    const SimCosts per[2] = {{1, 2, -1, 0}, {3, 6, -1, 0}};
    SimResult r;
    CHECK(s && sim_run_stages(s, per, &r, &err) == 0, "uneven gpipe runs");
    CHECK_NEAR(r.makespan, 12.0, TOL, "makespan 1 + 3 + 6 + 2");
    CHECK_NEAR(r.bubble, 0.5, TOL, "bubble 1 - 12 / 24");
    sim_free(&r);
    const SimCosts bad[2] = {{1, 2, -1, 0}, {0, 6, -1, 0}};
    CHECK(sim_run_stages(s, bad, &r, &err) == -1 && strstr(err.msg, "stage 1"), "bad stage cost named: %s", err.msg);
    schedule_free(s);
}

// The fit spreads the measured total over the layers, the embedding and the head at the
// model's ratios; a stage without a time is refused.
static void test_fit(void) {
    const double busy[2] = {10.0, 14.0};
    const PartitionCosts pc = {.layer = 2.0, .embed = 0.5, .head = 3.0};
    PlanCosts c = {0};
    Error err;
    CHECK(plan_costs_fit(busy, 2, 8, pc, &c, &err) == 0, "fit");
    CHECK_NEAR(8 * c.layer_ms + c.embed_ms + c.head_ms, 24.0, TOL, "the fit keeps the measured total");
    CHECK_NEAR(c.embed_ms / c.layer_ms, 0.25, TOL, "embedding at the model's ratio");
    CHECK_NEAR(c.head_ms / c.layer_ms, 1.5, TOL, "head at the model's ratio");
    const double none[2] = {10.0, 0.0};
    CHECK(plan_costs_fit(none, 2, 8, pc, &c, &err) == -1 && strstr(err.msg, "stage 1"), "%s", err.msg);
}

// Equal measured stages: the measured-layout prediction is the textbook 1F1B.
static void test_predict_measured(void) {
    const double stage_ms[4] = {3, 3, 3, 3};
    PlanLayout l;
    Error err;
    CHECK(plan_predict_measured("1f1b", 4, 1, 8, stage_ms, 0.5, &l, &err) == 0, "predicts");
    CHECK_NEAR(l.bubble, 3.0 / 11.0, TOL, "1f1b P4 M8 at equal stages");
    CHECK_NEAR(l.step_ms, 11 * 3.0 / 8, TOL, "(M+P-1) microbatch-times of F+B");
    CHECK(plan_predict_measured("2f2b", 4, 1, 8, stage_ms, 0.5, &l, &err) == -1, "unknown schedule refused");
}

static bool listed(const PlanLayout *l, int n, const char *schedule) {
    for (int i = 0; i < n; i++)
        if (strcmp(l[i].schedule, schedule) == 0) return true;
    return false;
}

// Every registry row is offered, best first, each layout sound; the best beats the measured one.
static void test_search(void) {
    PlanCosts c = {.n_ranks = 2,
                   .n_layers = 8,
                   .batch = 16,
                   .max_microbatches = 16,
                   .layer_ms = 2.0,
                   .embed_ms = 0.1,
                   .head_ms = 3.0,
                   .w_share = 0.5};
    PlanLayout *l;
    int n;
    Error err;
    CHECK(plan_search(&c, &l, &n, &err) == 0 && n > SCHEDULE_COUNT, "search: %d layouts", n);
    for (const ScheduleInfo *info = SCHEDULE_REGISTRY; info < SCHEDULE_REGISTRY + SCHEDULE_COUNT; info++)
        CHECK(listed(l, n, info->name), "%s offered", info->name);
    for (int i = 0; i < n; i++) {
        int layers = 0;
        for (int k = 0; k < l[i].S; k++) layers += l[i].split[k];
        CHECK(layers == 8 && l[i].S == 2 * l[i].V && 16 % l[i].M == 0, "layout %d sound", i);
        CHECK(i == 0 || l[i].step_ms >= l[i - 1].step_ms * (1 - 1e-9), "best first at %d", i);
    }
    const int split[2] = {4, 4};
    PlanLayout base;
    CHECK(plan_predict(&c, "1f1b", 1, 1, split, &base, &err) == 0 && l[0].step_ms <= base.step_ms, "best %g <= %g",
          l[0].step_ms, base.step_ms);
    free(base.split);
    plan_layouts_free(l, n);
    c.n_ranks = 9;
    CHECK(plan_search(&c, &l, &n, &err) == -1 && strstr(err.msg, "layers"), "more ranks than layers: %s", err.msg);
}

// A heavy head (6 layers' worth): the stage-balanced split 3,3,3,1 loads zb-v's rank 0 (first
// and last stage, 10 layers' worth against 6); the search moves layers off it and predicts a
// shorter step than the balanced split's.
static void test_refined_split(void) {
    const PlanCosts c = {.n_ranks = 2,
                         .n_layers = 10,
                         .batch = 16,
                         .max_microbatches = 16,
                         .layer_ms = 2.0,
                         .embed_ms = 0.0,
                         .head_ms = 12.0,
                         .w_share = 0.5};
    int balanced[4];
    Error err;
    PlanLayout base, *l;
    int n;
    CHECK(partition_balance_costs(10, 4, 2.0, 0.0, 12.0, balanced, &err) == 0 &&
              plan_predict(&c, "zb-v", 2, 16, balanced, &base, &err) == 0,
          "zb-v balanced");
    CHECK(plan_search(&c, &l, &n, &err) == 0, "search");
    const PlanLayout *zbv = NULL;
    for (int i = 0; i < n && !zbv; i++)
        if (!strcmp(l[i].schedule, "zb-v") && l[i].M == 16) zbv = &l[i];
    CHECK(zbv && zbv->step_ms < base.step_ms * 0.95, "zb-v M=16: refined %g vs balanced %g (%d,%d,%d,%d)",
          zbv ? zbv->step_ms : 0.0, base.step_ms, balanced[0], balanced[1], balanced[2], balanced[3]);
    free(base.split);
    plan_layouts_free(l, n);
}

// A store with one run of 3 steps (the first slow) and one without steps.
static Db *make_store(const char *path) {
    Error err;
    Db *db = db_open(path, true, &err);
    CHECK(db != NULL, "%s", err.msg);
    const DbRun run = {.schedule = "1f1b",
                       .stages = 2,
                       .virtual_stages = 1,
                       .dp = 1,
                       .microbatches = 4,
                       .batch = 8,
                       .seq_len = 32,
                       .model = "tiny",
                       .transport = "local",
                       .device = "cpu",
                       .steps_planned = 3};
    const int64_t id = db_run_begin(db, &run, &err);
    for (int step = 1; step <= 3; step++) {
        const double slow = step == 1 ? 10.0 : 1.0;
        const DbStep st = {.step = step,
                           .step_ms = 20.0 * slow + step,
                           .bubble = 0.1 * step,
                           .bubble_ideal = NAN,
                           .bubble_imbalance = NAN,
                           .bubble_transfer = NAN,
                           .bubble_contention = NAN};
        const DbStageStep stages[2] = {{.stage = 0, .rank = 0, .busy_ms = 8.0 * slow + step},
                                       {.stage = 1, .rank = 1, .busy_ms = 12.0 * slow}};
        CHECK(db_step_add(db, id, &st, stages, 2, &err) == 0, "%s", err.msg);
    }
    CHECK(db_run_end(db, id, "finished", NULL, &err) == 0 && db_run_begin(db, &run, &err) == 2, "second run");
    return db;
}

static void test_store(void) {
    char path[] = "/tmp/pptrain-plan-search-XXXXXX";
    const int fd = mkstemp(path);
    close(fd);
    unlink(path);
    Db *db = make_store(path);
    DbStageCosts m;
    Error err;
    CHECK(db_stage_costs(db, 1, &m, &err) == 0, "run 1: %s", err.msg);
    CHECK(m.steps == 2 && m.n_stages == 2, "steps 2 and 3 count: %d steps, %d stages", m.steps, m.n_stages);
    if (m.n_stages == 2) {
        CHECK_NEAR(m.busy_ms[0], 10.5, TOL, "stage 0 mean busy, step 1 left out");
        CHECK_NEAR(m.busy_ms[1], 12.0, TOL, "stage 1 mean busy");
    }
    CHECK_NEAR(m.step_ms, 22.5, TOL, "mean step");
    CHECK_NEAR(m.bubble, 0.25, TOL, "mean bubble");
    db_stage_costs_free(&m);
    CHECK(db_stage_costs(db, 2, &m, &err) == -1 && strstr(err.msg, "no measured steps"), "%s", err.msg);
    CHECK(db_stage_costs(db, 7, &m, &err) == -1 && strstr(err.msg, "no run 7"), "%s", err.msg);
    db_close(db);
    char side[64];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
}

int main(void) {
    test_stages_equal();
    test_stages_uneven();
    test_fit();
    test_predict_measured();
    test_search();
    test_refined_split();
    test_store();
    return test_finish();
}
