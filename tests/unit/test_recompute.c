// Recompute (--recompute all): every built-in schedule computes bitwise the same loss and
// gradients with and without re-materialization (the backward re-runs the same kernels on the
// same inputs), and holds far less activation memory (runtime_peak_bytes).
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/model/model.h"
#include "engine/partition.h"
#include "engine/runtime.h"
#include "engine/schedule/schedule.h"
#include "engine/transport/transport.h"
#include "test_util.h"

enum { ROWS = 2 };  // sequences per microbatch

// P runtimes over a local transport, one thread per rank for each step (as engine/pipeline.c).
typedef struct {
    Schedule *sched;
    StageModel **stages;  // (S)
    Transport *tp;
    Runtime **rt;         // (P)
    int P, S, M, T;
} Rig;

typedef struct {
    Runtime *rt;
    const int32_t *inputs, *targets;
    float loss_scale;
    RuntimeStats stats;
    RuntimeStatus status;
    Error err;
} RankJob;

static int max_receives(const Schedule *s) {
    int most = 0;
    for (int r = 0; r < s->n_ranks; r++) {
        int n = 0;
        for (int i = 0; i < s->ranks[r].n; i++)
            n += s->ranks[r].actions[i].type == ACT_RECV_F || s->ranks[r].actions[i].type == ACT_RECV_B;
        most = n > most ? n : most;
    }
    return most;
}

// name on P ranks, V stages each, M microbatches of ROWS x T tokens; NULL when the generator
// refuses the shape.
static Rig *rig_create(const char *name, int P, int V, int M, int T, bool recompute) {
    Error err;
    Schedule *sched = schedule_build(name, P, M, V, &err);
    if (!sched) return NULL;
    schedule_lower(sched);
    CHECK(schedule_validate(sched, &err) == 0, "%s: %s", name, err.msg);
    ModelConfig cfg;
    model_config_preset(&cfg, "tiny", &err);
    Rig *g = xcalloc(1, sizeof *g);
    *g = (Rig){.sched = sched, .P = P, .S = sched->n_stages, .M = M, .T = T};
    int counts[16];
    CHECK(partition_balance(cfg.layers, g->S, counts, &err) == 0, "%s", err.msg);
    g->stages = xcalloc((size_t)g->S, sizeof(StageModel *));
    for (int s = 0; s < g->S; s++) {
        const int begin = partition_first_layer(counts, s);
        g->stages[s] = stage_create(&cfg, begin, begin + counts[s], s == 0, s == g->S - 1, 1234, &err);
    }
    g->tp = transport_local_create(P, (size_t)ROWS * T * cfg.hidden * sizeof(float), max_receives(sched), 30.0);
    const RuntimeOptions opts = {.recompute = recompute};
    g->rt = xcalloc((size_t)P, sizeof(Runtime *));
    for (int r = 0; r < P; r++) g->rt[r] = runtime_create_opts(sched, r, g->stages, ROWS, T, g->tp, &opts);
    return g;
}

static void rig_free(Rig *g) {
    for (int r = 0; r < g->P; r++) runtime_free(g->rt[r]);
    for (int s = 0; s < g->S; s++) stage_free(g->stages[s]);
    transport_free(g->tp);
    schedule_free(g->sched);
    free(g->rt);
    free(g->stages);
    free(g);
}

static void *rank_main(void *arg) {
    RankJob *j = arg;
    j->status = runtime_step(j->rt, j->inputs, j->targets, j->loss_scale, &j->stats, &j->err);
    return NULL;
}

// One forward/backward of the whole batch from zeroed gradients; returns the loss.
static double rig_step(Rig *g, const int32_t *inputs, const int32_t *targets, float loss_scale) {
    for (int s = 0; s < g->S; s++) stage_zero_grads(g->stages[s]);
    RankJob jobs[8];
    pthread_t th[8];
    for (int r = 0; r < g->P; r++) {
        jobs[r] = (RankJob){.rt = g->rt[r], .inputs = inputs, .targets = targets, .loss_scale = loss_scale};
        pthread_create(&th[r], NULL, rank_main, &jobs[r]);
    }
    double loss = 0.0;
    for (int r = 0; r < g->P; r++) {
        pthread_join(th[r], NULL);
        CHECK(jobs[r].status == RUNTIME_OK, "%s rank %d: %s", g->sched->name, r, jobs[r].err.msg);
        loss += jobs[r].stats.loss;
    }
    return loss;
}

static size_t rig_peak_bytes(const Rig *g) {
    size_t bytes = 0;
    for (int s = 0; s < g->S; s++) bytes += runtime_peak_bytes(g->rt[g->sched->stage_rank[s]], s);
    return bytes;
}

// Deterministic tokens; about one target in six is a pad (-1). Returns 1 / (non-pad targets).
static float make_batch(int n, int vocab, int32_t *inputs, int32_t *targets) {
    uint32_t x = 88172645u;
    int count = 0;
    for (int i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        inputs[i] = (int32_t)(x % (uint32_t)vocab);
        targets[i] = (x >> 8) % 6 == 0 ? -1 : (int32_t)((x >> 12) % (uint32_t)vocab);
        count += targets[i] >= 0;
    }
    return 1.0f / (float)count;
}

// Recompute on and off: bitwise the same loss and gradients. Returns the memory ratio.
static double check_schedule(const char *name, int P, int V, int M, int T) {
    Rig *off = rig_create(name, P, V, M, T, false), *on = rig_create(name, P, V, M, T, true);
    CHECK(off && on, "%s P=%d V=%d M=%d refused", name, P, V, M);
    if (!off || !on) return 0.0;
    const int n = M * ROWS * T;
    int32_t *inputs = xmalloc(sizeof(int32_t) * (size_t)n), *targets = xmalloc(sizeof(int32_t) * (size_t)n);
    const float scale = make_batch(n, off->stages[0]->cfg.vocab, inputs, targets);
    const double loss_off = rig_step(off, inputs, targets, scale), loss_on = rig_step(on, inputs, targets, scale);
    CHECK(loss_on == loss_off && loss_on > 0, "%s P=%d M=%d: loss %.17g with recompute, %.17g without", name, P, M,
          loss_on, loss_off);
    for (int s = 0; s < off->S; s++) {
        const StageModel *a = off->stages[s], *b = on->stages[s];
        CHECK(memcmp(a->grads, b->grads, a->numel * sizeof(float)) == 0, "%s P=%d M=%d stage %d: grads differ", name,
              P, M, s);
    }
    // A second step reuses the slots and workspaces: still the same.
    CHECK(rig_step(on, inputs, targets, scale) == loss_off, "%s: second step", name);
    const size_t bytes_off = rig_peak_bytes(off), bytes_on = rig_peak_bytes(on);
    CHECK(bytes_on < bytes_off, "%s P=%d M=%d: %zu bytes with recompute, %zu without", name, P, M, bytes_on,
          bytes_off);
    printf("%-17s P=%d V=%d M=%d T=%-3d activation bytes %9zu -> %8zu (%.1fx less)\n", name, P, V, M, T, bytes_off,
           bytes_on, (double)bytes_off / (double)bytes_on);
    free(inputs);
    free(targets);
    const double ratio = (double)bytes_off / (double)bytes_on;
    rig_free(off);
    rig_free(on);
    return ratio;
}

static void test_every_schedule(void) {
    for (const ScheduleInfo *s = SCHEDULE_REGISTRY; s < SCHEDULE_REGISTRY + SCHEDULE_COUNT; s++)
        for (int P = 2; P <= 4; P += 2) check_schedule(s->name, P, s->default_virtual, 2 * P, 16);
}

// GPipe keeps every microbatch in flight: recompute keeps 8 light slots and one workspace per
// stage instead of 8 full slots.
static void test_gpipe_memory(void) {
    const double r16 = check_schedule("gpipe", 2, 1, 8, 16);
    CHECK(r16 > 4.0, "gpipe M=8 T=16: only %.2fx less memory", r16);
    const double r64 = check_schedule("gpipe", 2, 1, 8, 64);
    CHECK(r64 > 5.0, "gpipe M=8 T=64: only %.2fx less memory", r64);
}

// The model API alone: the whole model as one stage, forward + backward through a light
// StageActs and a workspace (the workspace reused between them, as the runtime does) against
// the plain full StageActs.
static void test_stage_light(void) {
    Error err;
    ModelConfig cfg;
    model_config_preset(&cfg, "tiny", &err);
    enum { T = 16, N = ROWS * T };
    StageModel *a = stage_create(&cfg, 0, cfg.layers, true, true, 5, &err);
    StageModel *b = stage_create(&cfg, 0, cfg.layers, true, true, 5, &err);
    StageActs *full = stage_acts_create(a, ROWS, T), *light = stage_acts_create_light(b, ROWS, T);
    StageActs *ws = stage_acts_create(b, ROWS, T);
    CHECK(stage_acts_is_light(light) && !stage_acts_is_light(full), "forms");
    int32_t inputs[N], targets[N];
    const float scale = make_batch(N, cfg.vocab, inputs, targets);
    const double la = stage_forward(a, full, inputs, NULL, targets, scale);
    const double lb = stage_forward_light(b, light, ws, inputs, NULL, targets, scale);
    // Something else runs in the workspace between the forward and the backward.
    int32_t other[N];
    for (int i = 0; i < N; i++) other[i] = (inputs[i] + 1) % cfg.vocab;
    stage_forward(b, ws, other, NULL, targets, 0.5f);
    stage_backward(a, full, NULL);
    stage_backward_light(b, light, ws, NULL);
    CHECK(la == lb, "loss %.17g vs %.17g", la, lb);
    CHECK(memcmp(a->grads, b->grads, a->numel * sizeof(float)) == 0, "grads bitwise equal");
    const size_t fb = stage_acts_bytes(a, ROWS, T), lbytes = stage_acts_light_bytes(a, ROWS, T);
    CHECK(lbytes * 50 < fb, "light %zu bytes vs full %zu", lbytes, fb);
    printf("one stage of %d layers, %d x %d tokens: full StageActs %zu bytes, light %zu\n", cfg.layers, ROWS, T, fb,
           lbytes);
    stage_acts_free(full);
    stage_acts_free(light);
    stage_acts_free(ws);
    stage_free(a);
    stage_free(b);
}

// The workspace pool follows the schedule: 1 for unsplit backwards, more for zero-bubble ones
// that hold microbatches between I and W.
static void test_workspaces(void) {
    Rig *g = rig_create("gpipe", 2, 1, 4, 16, true);
    CHECK(runtime_peak_workspaces(g->rt[0], 0) == 1 && runtime_peak_workspaces(g->rt[1], 1) == 1, "gpipe: 1");
    CHECK(runtime_peak_slots(g->rt[0], 0) == 4, "gpipe: 4 light slots");
    rig_free(g);
    g = rig_create("zb-h1", 4, 1, 8, 16, true);
    int most = 0;
    for (int s = 0; s < 4; s++) {
        const int w = runtime_peak_workspaces(g->rt[s], s);
        CHECK(w >= 1, "zb-h1 stage %d: %d workspaces", s, w);
        most = w > most ? w : most;
    }
    CHECK(most > 1, "zb-h1 holds microbatches between I and W (most %d)", most);
    rig_free(g);
    g = rig_create("gpipe", 2, 1, 4, 16, false);
    CHECK(runtime_peak_workspaces(g->rt[0], 0) == 0, "no workspaces without recompute");
    CHECK(runtime_peak_bytes(g->rt[0], 1) == 0, "stage of another rank");
    rig_free(g);
}

int main(void) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    test_stage_light();
    test_workspaces();
    test_every_schedule();
    test_gpipe_memory();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.2f s\n", (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
    return test_finish();
}
