// Telemetry: telemetry_summarize on hand-made events (exact numbers, clock offsets), the
// split of non-busy time into transfer and wait and of the bubble into its parts (worked by
// hand below), the Chrome trace writer read back with cJSON, and the events a real 2-rank
// runtime records.
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/model/model.h"
#include "engine/runtime.h"
#include "engine/schedule/schedule.h"
#include "engine/telemetry.h"
#include "engine/transport/transport.h"
#include "storage/trace.h"
#include "test_util.h"

// One microbatch through two stages. Rank 1's clock reads 10 s ahead of rank 0's. Times are
// multiples of 1/4 s, so every sum below is exact. A message takes 1/4 s to copy in (SEND)
// and 1/4 s to copy out (the end of its RECV).
//   rank 0:  F [0,1]  SEND_F [1,1.25]  RECV_B [1.25,3.5]  B [3.5,4.5]
//   rank 1:  RECV_F [0,1.5]  F [1.5,2.5]  B [2.5,3]  SEND_B [3,3.25]   (rank-0 clock)
static const ActionEvent RANK0[] = {
    {0.0, 1.0, 0, 0, ACT_F, 0}, {1.0, 1.25, 0, 0, ACT_SEND_F, 0},
    {1.25, 3.5, 0, 0, ACT_RECV_B, 0}, {3.5, 4.5, 0, 0, ACT_B, 0},
};
static const ActionEvent RANK1[] = {
    {10.0, 11.5, 0, 1, ACT_RECV_F, 0}, {11.5, 12.5, 0, 1, ACT_F, 0},
    {12.5, 13.0, 0, 1, ACT_B, 0}, {13.0, 13.25, 0, 1, ACT_SEND_B, 0},
};

static void test_summarize_exact(void) {
    const ActionEvent *events[2] = {RANK0, RANK1};
    const int n[2] = {4, 4}, stage_rank[2] = {0, 1};
    const double offsets[2] = {0.0, -10.0};
    RankTelemetry ranks[2];
    StageTelemetry stages[2];
    StepTelemetry t = {.ranks = ranks, .stages = stages};
    telemetry_summarize(2, 2, stage_rank, events, n, offsets, &t);
    CHECK(t.n_ranks == 2 && t.n_stages == 2, "shape");
    CHECK(t.step_ms == 4500.0, "step %.17g ms", t.step_ms);
    CHECK(ranks[0].busy_ms == 2000.0 && ranks[0].comm_ms == 2500.0 && ranks[0].idle_ms == 0.0,
          "rank 0: busy %g comm %g idle %g", ranks[0].busy_ms, ranks[0].comm_ms, ranks[0].idle_ms);
    CHECK(ranks[1].busy_ms == 1500.0 && ranks[1].comm_ms == 1750.0 && ranks[1].idle_ms == 1250.0,
          "rank 1: busy %g comm %g idle %g", ranks[1].busy_ms, ranks[1].comm_ms, ranks[1].idle_ms);
    CHECK(ranks[0].events == 4 && ranks[1].events == 4, "event counts");
    CHECK(t.bubble == 1.0 - 3500.0 / 9000.0, "bubble %.17g", t.bubble);
    CHECK(stages[0].busy_ms == 2000.0 && stages[0].comm_ms == 2500.0 && stages[0].rank == 0, "stage 0");
    CHECK(stages[1].busy_ms == 1500.0 && stages[1].comm_ms == 1750.0 && stages[1].rank == 1, "stage 1");
    // Transfer: a copy in and a copy out per rank (250 ms each); the rest of the non-busy
    // time is waiting.
    CHECK(ranks[0].transfer_ms == 500.0 && ranks[0].wait_ms == 2000.0, "rank 0: transfer %g wait %g",
          ranks[0].transfer_ms, ranks[0].wait_ms);
    CHECK(ranks[1].transfer_ms == 500.0 && ranks[1].wait_ms == 2500.0, "rank 1: transfer %g wait %g",
          ranks[1].transfer_ms, ranks[1].wait_ms);
    CHECK(stages[0].transfer_ms == 500.0 && stages[1].transfer_ms == 500.0, "stage transfer");
    // Replays: F 1 s on both stages; B 1 s and 0.5 s (mean 0.75). Messages free: rank 1 starts
    // F at 1, B ends at 2.75, rank 0's B ends at 3.5: 1 - 3.5 / (2 x 3.5) = 0.5, the same with
    // each stage's own B. With the four copies the replay is the measured 4.5 s.
    const BubbleParts *b = &t.parts;
    CHECK(b->valid && b->ideal == 0.5 && b->imbalance == 0.0 && b->transfer == t.bubble - 0.5 &&
              b->contention == 0.0,
          "parts: ideal %.17g imbalance %.17g transfer %.17g contention %.17g", b->ideal, b->imbalance, b->transfer,
          b->contention);
    // Two replicas of the same two stages (world ranks 2 and 3 are replica 1, the same events):
    // a stage's figures are one replica's, the mean, not the sum (plan --from-run read a
    // summed stage as D times slower).
    {
        const ActionEvent *ev4[4] = {RANK0, RANK1, RANK0, RANK1};
        const int n4[4] = {4, 4, 4, 4};
        const double off4[4] = {0.0, -10.0, 0.0, -10.0};
        RankTelemetry ranks4[4];
        StageTelemetry stages4[2];
        StepTelemetry t4 = {.ranks = ranks4, .stages = stages4};
        telemetry_summarize(4, 2, stage_rank, ev4, n4, off4, &t4);
        CHECK(stages4[0].busy_ms == 2000.0 && stages4[0].comm_ms == 2500.0 && stages4[0].transfer_ms == 500.0 &&
                  stages4[1].busy_ms == 1500.0 && stages4[1].comm_ms == 1750.0 && stages4[1].transfer_ms == 500.0,
              "D=2: stage 0 busy %g comm %g transfer %g, stage 1 busy %g", stages4[0].busy_ms, stages4[0].comm_ms,
              stages4[0].transfer_ms, stages4[1].busy_ms);
        CHECK(t4.bubble == t.bubble && ranks4[2].busy_ms == 2000.0, "D=2: bubble %.17g", t4.bubble);
    }
    // Without the offset rank 1 seems to end 9 s after rank 0: the wall time says so.
    telemetry_summarize(2, 2, stage_rank, events, n, NULL, &t);
    CHECK(t.step_ms == 13250.0 && ranks[1].idle_ms == 10000.0, "no offsets: step %g ms", t.step_ms);
    // Nothing recorded: no wall time, no bubble.
    const int none[2] = {0, 0};
    telemetry_summarize(2, 2, stage_rank, events, none, offsets, &t);
    CHECK(t.step_ms == 0.0 && t.bubble == 0.0 && ranks[0].busy_ms == 0.0 && !t.parts.valid, "empty step");
}

// GPipe, 2 microbatches, stage 1 twice as slow as stage 0 (F = B = 1 s on rank 0, 2 s on
// rank 1), messages instantaneous:
//   rank 0:  F0 [0,1]  F1 [1,2]  RECV_B1 [2,7]  B1 [7,8]  RECV_B0 [8,9]  B0 [9,10]
//   rank 1:  RECV_F0 [0,1]  F0 [1,3]  F1 [3,5]  B1 [5,7]  B0 [7,9]
// Busy 4 + 8 = 12 s in 2 x 10: bubble 0.4. At the mean costs (1.5 s everywhere) the replay
// takes 9 s: ideal 1 - 12/18 = 1/3; each stage's own costs give the measured 10 s: imbalance
// 0.4 - 1/3. With rank 1's F1 a second late (everything after it too) the step takes 11 s:
// bubble 1 - 12/22, and the replays still say 10 s, so contention = 1 - 12/22 - 0.4.
#define EV(t0, t1, mb, stage, type) {t0, t1, mb, stage, type, 0}
static void gpipe_events(double late, ActionEvent *r0, ActionEvent *r1) {
    const ActionEvent a[] = {EV(0, 1, 0, 0, ACT_F), EV(1, 1, 0, 0, ACT_SEND_F), EV(1, 2, 1, 0, ACT_F),
                             EV(2, 2, 1, 0, ACT_SEND_F), EV(2, 7 + late, 1, 0, ACT_RECV_B),
                             EV(7 + late, 8 + late, 1, 0, ACT_B), EV(8 + late, 9 + late, 0, 0, ACT_RECV_B),
                             EV(9 + late, 10 + late, 0, 0, ACT_B)};
    const ActionEvent b[] = {EV(0, 1, 0, 1, ACT_RECV_F), EV(1, 3, 0, 1, ACT_F), EV(3, 3, 1, 1, ACT_RECV_F),
                             EV(3 + late, 5 + late, 1, 1, ACT_F), EV(5 + late, 7 + late, 1, 1, ACT_B),
                             EV(7 + late, 7 + late, 1, 1, ACT_SEND_B), EV(7 + late, 9 + late, 0, 1, ACT_B),
                             EV(9 + late, 9 + late, 0, 1, ACT_SEND_B)};
    memcpy(r0, a, sizeof a);
    memcpy(r1, b, sizeof b);
}

static void test_bubble_parts(void) {
    ActionEvent r0[8], r1[8];
    const ActionEvent *events[2] = {r0, r1};
    const int n[2] = {8, 8}, stage_rank[2] = {0, 1};
    RankTelemetry ranks[2];
    StageTelemetry stages[2];
    StepTelemetry t = {.ranks = ranks, .stages = stages};
    for (int late = 0; late <= 1; late++) {
        gpipe_events(late, r0, r1);
        telemetry_summarize(2, 2, stage_rank, events, n, NULL, &t);
        const BubbleParts *b = &t.parts;
        const double want_bubble = 1.0 - 12.0 / (2 * (10.0 + late));
        CHECK_NEAR(t.bubble, want_bubble, 1e-15, "bubble");
        CHECK(b->valid, "late %d: the step replays", late);
        CHECK_NEAR(b->ideal, 1.0 / 3.0, 1e-12, "ideal at the mean costs");
        CHECK_NEAR(b->imbalance, 0.4 - 1.0 / 3.0, 1e-12, "imbalance");
        CHECK_NEAR(b->transfer, 0.0, 1e-12, "transfer");
        CHECK_NEAR(b->contention, want_bubble - 0.4, 1e-12, "contention");
        CHECK_NEAR(b->ideal + b->imbalance + b->transfer + b->contention, t.bubble, 1e-15, "the parts add up");
        CHECK(ranks[0].transfer_ms == 0.0 && ranks[0].wait_ms == (6.0 + late) * 1e3, "rank 0 waits %g ms",
              ranks[0].wait_ms);
    }
    // A receive whose send is not in the step cannot be replayed: no parts, no crash.
    gpipe_events(0, r0, r1);
    r0[1].type = ACT_F;
    telemetry_summarize(2, 2, stage_rank, events, n, NULL, &t);
    CHECK(!t.parts.valid, "a receive without its send");
}

// A message on a wire (between hosts): rank 0 runs F [0,1] and sends at 1; rank 1's receive
// ends at 1 + w, when the bytes land. Busy 1 + 1 in 2 x (2 + w). Messages free, the replay
// takes 2 s (ideal 0.5, no imbalance); with the link's wire time w it takes the measured
// 2 + w, so the transfer part holds all of the rest and contention none. Rank 1's clock may
// run 10 s behind rank 0's: its offset puts it back.
static void test_bubble_wire(void) {
    const double w = 0.5;
    for (int skew = 0; skew <= 10; skew += 10) {
        const ActionEvent r0[] = {EV(0, 1, 0, 0, ACT_F), EV(1, 1, 0, 0, ACT_SEND_F)};
        const ActionEvent r1[] = {EV(0 - skew, 1 + w - skew, 0, 1, ACT_RECV_F),
                                  EV(1 + w - skew, 2 + w - skew, 0, 1, ACT_F)};
        const ActionEvent *events[2] = {r0, r1};
        const int n[2] = {2, 2}, stage_rank[2] = {0, 1};
        const double offsets[2] = {0, skew};
        RankTelemetry ranks[2];
        StageTelemetry stages[2];
        StepTelemetry t = {.ranks = ranks, .stages = stages};
        telemetry_summarize(2, 2, stage_rank, events, n, offsets, &t);
        const BubbleParts *b = &t.parts;
        CHECK_NEAR(t.bubble, 1.0 - 2.0 / (2 * (2 + w)), 1e-12, "wire: bubble");
        CHECK_NEAR(b->ideal, 0.5, 1e-12, "wire: ideal");
        CHECK_NEAR(b->transfer, 1.0 - 2.0 / (2 * (2 + w)) - 0.5, 1e-12, "wire: the wire time is transfer");
        CHECK_NEAR(b->contention, 0.0, 1e-12, "wire: no contention");
    }
}

// ---- trace ---------------------------------------------------------------------------------

static int count_named(const cJSON *list, const char *ph, const char *name) {
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        const cJSON *p = cJSON_GetObjectItem(e, "ph"), *nm = cJSON_GetObjectItem(e, "name");
        n += cJSON_IsString(p) && strcmp(p->valuestring, ph) == 0 &&
             (!name || (cJSON_IsString(nm) && strcmp(nm->valuestring, name) == 0));
    }
    return n;
}

static cJSON *read_json(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    static char buf[1 << 20];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return cJSON_Parse(buf);
}

// Every X event matches its ActionEvent: name, cat, pid, tid, ts and dur (microseconds from
// t_origin, rank 1 shifted by its offset), args.
static void check_x_events(const cJSON *list, const ActionEvent *const *events, const int *n, const double *off,
                           double t_origin) {
    const cJSON *e;
    int r = 0, i = 0, step = 0;
    cJSON_ArrayForEach(e, list) {
        if (strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X") != 0) continue;
        if (i == n[r]) r++, i = 0;
        if (r == 2) r = 0, step++;
        const ActionEvent *a = &events[r][i++];
        const cJSON *ts = cJSON_GetObjectItem(e, "ts"), *dur = cJSON_GetObjectItem(e, "dur");
        const cJSON *pid = cJSON_GetObjectItem(e, "pid"), *tid = cJSON_GetObjectItem(e, "tid");
        const cJSON *args = cJSON_GetObjectItem(e, "args");
        CHECK(cJSON_IsNumber(ts) && cJSON_IsNumber(dur) && cJSON_IsNumber(pid) && cJSON_IsNumber(tid) && args,
              "X event fields");
        if (!cJSON_IsNumber(ts) || !cJSON_IsNumber(dur) || !args) continue;
        char name[32];
        snprintf(name, sizeof name, "%s mb%d", schedule_type_name(a->type), a->mb);
        CHECK(strcmp(cJSON_GetObjectItem(e, "name")->valuestring, name) == 0, "name %s, want %s",
              cJSON_GetObjectItem(e, "name")->valuestring, name);
        CHECK(strcmp(cJSON_GetObjectItem(e, "cat")->valuestring, schedule_type_name(a->type)) == 0, "cat");
        CHECK(pid->valueint == r && tid->valueint == a->stage, "pid %d tid %d", pid->valueint, tid->valueint);
        CHECK_NEAR(ts->valuedouble, (a->start + off[r] - t_origin) * 1e6, 1e-3, "ts");
        CHECK_NEAR(dur->valuedouble, (a->end - a->start) * 1e6, 1e-3, "dur");
        const int got_step = cJSON_GetObjectItem(args, "step")->valueint;
        const int got_mb = cJSON_GetObjectItem(args, "mb")->valueint;
        const int got_stage = cJSON_GetObjectItem(args, "stage")->valueint;
        CHECK(got_step == step && got_mb == a->mb && got_stage == a->stage, "args %d %d %d", got_step, got_mb,
              got_stage);
    }
}

static void test_trace_roundtrip(void) {
    char dir[] = "/tmp/test_telemetry_XXXXXX", path[64], tmp[80];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/trace.json", dir);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    const ActionEvent *events[2] = {RANK0, RANK1};
    const int n[2] = {4, 4}, stage_rank[2] = {0, 1};
    const double offsets[2] = {0.0, -10.0};
    Error err = {{0}};
    TraceWriter *tw = trace_open(path, &err);
    CHECK(tw != NULL, "open: %s", err.msg);
    if (!tw) return;
    CHECK(trace_add_step(tw, 0, 2, 2, stage_rank, events, n, offsets, -0.5) == 0, "step 0");
    CHECK(trace_add_step(tw, 1, 2, 2, stage_rank, events, n, offsets, -0.5) == 0, "step 1");
    CHECK(access(path, F_OK) != 0 && access(tmp, F_OK) == 0, "only PATH.tmp while writing");
    CHECK(trace_close(tw, &err) == 0, "close: %s", err.msg);
    CHECK(access(tmp, F_OK) != 0, "PATH.tmp renamed");
    cJSON *root = read_json(path);
    CHECK(root != NULL, "the trace parses as JSON");
    const cJSON *list = cJSON_GetObjectItem(root, "traceEvents");
    CHECK(cJSON_IsArray(list), "traceEvents array");
    CHECK(count_named(list, "X", NULL) == 16, "16 X events, got %d", count_named(list, "X", NULL));
    CHECK(count_named(list, "M", "process_name") == 2 && count_named(list, "M", "thread_name") == 2, "track names");
    check_x_events(list, events, n, offsets, -0.5);
    cJSON_Delete(root);
    unlink(path);
    rmdir(dir);
    // A directory that does not exist: one line naming the file.
    CHECK(trace_open("/nonexistent-dir/trace.json", &err) == NULL && strstr(err.msg, "/nonexistent-dir/trace.json"),
          "bad path: %s", err.msg);
}

// ---- a real runtime: gpipe on 2 ranks (threads over the local transport) --------------------

enum { T = 16, ROWS = 2, M = 4 };

typedef struct {
    Runtime *rt;
    const int32_t *inputs, *targets;
    RuntimeStats stats;
    RuntimeStatus status;
    Error err;
} RankJob;

static void *rank_main(void *arg) {
    RankJob *j = arg;
    j->status = runtime_step(j->rt, j->inputs, j->targets, 1.0f / (M * ROWS * T), &j->stats, &j->err);
    return NULL;
}

// Rank r's events are one per action of its list, in its order, each within [start, end] and
// not overlapping the next; RuntimeStats agree with them.
static void check_rank_events(const Schedule *s, int r, const Runtime *rt, const RuntimeStats *st) {
    int n;
    const ActionEvent *e = runtime_events(rt, &n);
    CHECK(n == s->ranks[r].n, "rank %d: %d events for %d actions", r, n, s->ranks[r].n);
    double busy = 0.0, comm = 0.0;
    for (int i = 0; i < n && i < s->ranks[r].n; i++) {
        const Action a = s->ranks[r].actions[i];
        CHECK(e[i].type == a.type && e[i].stage == a.stage && e[i].mb == a.mb, "rank %d event %d is its action", r, i);
        CHECK(e[i].start <= e[i].end, "rank %d event %d: ends before it starts", r, i);
        CHECK(i == 0 || e[i - 1].end <= e[i].start, "rank %d event %d overlaps the one before", r, i);
        *(schedule_is_comm(a.type) ? &comm : &busy) += e[i].end - e[i].start;
    }
    CHECK(busy > 0 && busy == st->busy_s && comm == st->comm_s, "rank %d: busy %.9g (stats %.9g), comm %.9g (%.9g)", r,
          busy, st->busy_s, comm, st->comm_s);
}

static void run_gpipe(bool recompute) {
    Error err;
    ModelConfig cfg;
    model_config_preset(&cfg, "tiny", &err);
    Schedule *s = schedule_build("gpipe", 2, M, 1, &err);
    schedule_lower(s);
    StageModel *stages[2] = {stage_create(&cfg, 0, 4, true, false, 7, &err),
                             stage_create(&cfg, 4, 8, false, true, 7, &err)};
    Transport *tp = transport_local_create(2, (size_t)ROWS * T * cfg.hidden * sizeof(float), 2 * M, 30.0);
    int32_t inputs[M * ROWS * T], targets[M * ROWS * T];
    for (int i = 0; i < M * ROWS * T; i++) inputs[i] = (i * 7) % cfg.vocab, targets[i] = (i * 13 + 1) % cfg.vocab;
    const RuntimeOptions opts = {.recompute = recompute};
    RankJob jobs[2];
    pthread_t th[2];
    for (int step = 0; step < 2; step++) {  // the second step reuses the event buffers
        for (int r = 0; r < 2; r++) {
            if (step == 0) jobs[r].rt = runtime_create_opts(s, r, stages, ROWS, T, tp, &opts);
            jobs[r] = (RankJob){.rt = jobs[r].rt, .inputs = inputs, .targets = targets};
            pthread_create(&th[r], NULL, rank_main, &jobs[r]);
        }
        for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
        for (int r = 0; r < 2; r++) {
            CHECK(jobs[r].status == RUNTIME_OK, "rank %d: %s", r, jobs[r].err.msg);
            check_rank_events(s, r, jobs[r].rt, &jobs[r].stats);
        }
    }
    const ActionEvent *events[2];
    int n[2];
    for (int r = 0; r < 2; r++) events[r] = runtime_events(jobs[r].rt, &n[r]);
    RankTelemetry ranks[2];
    StageTelemetry st[2];
    StepTelemetry t = {.ranks = ranks, .stages = st};
    const double offsets[2] = {0, 0};
    telemetry_summarize(2, 2, s->stage_rank, events, n, offsets, &t);
    CHECK(t.step_ms > 0 && t.bubble >= 0.0 && t.bubble < 1.0, "recompute %d: step %.3f ms, bubble %.3f", recompute,
          t.step_ms, t.bubble);
    for (int r = 0; r < 2; r++)
        CHECK(ranks[r].busy_ms > 0 && ranks[r].idle_ms >= 0 && st[r].rank == r && st[r].busy_ms == ranks[r].busy_ms,
              "rank %d: busy %.3f idle %.3f", r, ranks[r].busy_ms, ranks[r].idle_ms);
    // Real events: the parts add up to the measured bubble; transfer and wait to the non-busy time.
    const BubbleParts *b = &t.parts;
    CHECK(b->valid && fabs(b->ideal + b->imbalance + b->transfer + b->contention - t.bubble) < 1e-12 &&
              b->ideal >= 0 && b->transfer >= -1e-12,
          "parts %.4f %.4f %.4f %.4f of %.4f", b->ideal, b->imbalance, b->transfer, b->contention, t.bubble);
    for (int r = 0; r < 2; r++)
        CHECK(ranks[r].transfer_ms >= 0 && ranks[r].transfer_ms <= ranks[r].comm_ms + 1e-9 &&
                  fabs(ranks[r].transfer_ms + ranks[r].wait_ms + ranks[r].busy_ms - t.step_ms) < 1e-6,
              "rank %d: transfer %.4f wait %.4f", r, ranks[r].transfer_ms, ranks[r].wait_ms);
    printf("gpipe P=2 M=%d recompute=%d: step %.2f ms, busy %.2f / %.2f ms, bubble %.3f\n", M, recompute, t.step_ms,
           ranks[0].busy_ms, ranks[1].busy_ms, t.bubble);
    for (int r = 0; r < 2; r++) {
        runtime_free(jobs[r].rt);
        stage_free(stages[r]);
    }
    transport_free(tp);
    schedule_free(s);
}

int main(void) {
    test_summarize_exact();
    test_bubble_parts();
    test_bubble_wire();
    test_trace_roundtrip();
    run_gpipe(false);
    run_gpipe(true);
    return test_finish();
}
