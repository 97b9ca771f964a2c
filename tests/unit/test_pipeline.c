// The pipeline trainer against the single-device trainer (DESIGN.md, "Parity"): every
// built-in schedule over several rank and microbatch counts trains the tiny model 5 steps
// to the same losses and weights; data parallelism (D = 2 replicas at the same global batch)
// too; plus CSV schedules, the timeout/abort path, telemetry, the check API and bad input.
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/pipeline.h"
#include "engine/runtime.h"
#include "engine/schedule/schedule.h"
#include "engine/transport/transport.h"
#include "kernels/cpu/kernels.h"
#include "parity_util.h"
#include "test_util.h"


static int n_configs;

// Every tensor bit for bit (DESIGN.md "Parity": a layout computes what one device computes).
static void check_weights(const Pipeline *p, const StageModel *ref, const char *what) {
    for (int i = 0; i < ref->n_params; i++) {
        const ParamInfo *pi = &ref->params[i], *got_info = NULL;
        const float *got = pipeline_weights(p, pi->name, &got_info);
        CHECK(got && got_info->numel == pi->numel, "%s: %s missing", what, pi->name);
        if (!got) continue;
        CHECK(parity_same_bits(got, ref->weights + pi->offset, pi->numel), "%s: %s differs (relative norm %.3g)",
              what, pi->name, rel_norm_diff(got, ref->weights + pi->offset, pi->numel));
    }
}

// Trains 5 steps under opts and compares with the single-device run of the same batches: D
// replicas of M microbatches each, the same shape. Losses and weights must be the same bits.
static void check_parity(const PipelineOptions *opts, int M) {
    char what[4500];
    snprintf(what, sizeof what, "%s P=%d V=%d D=%d M=%d recompute=%d split=%s", opts->schedule, opts->ranks,
             opts->virtual_stages, opts->dp, M, opts->recompute, opts->split[0] ? opts->split : "default");
    const ParityReference *ref = parity_reference(M, opts->dp);
    parity_watch(what);
    RunConfig rc = parity_run(M * opts->dp);
    rc.microbatches = M;
    Error err = {{0}};
    Pipeline *p = pipeline_create(&rc, opts, &err);
    CHECK(p != NULL, "%s: %s", what, err.msg);
    if (!p) {
        parity_unwatch();
        return;
    }
    int32_t inputs[PARITY_ROWS * PARITY_MAX_M * PARITY_MAX_D * PARITY_T];
    int32_t targets[PARITY_ROWS * PARITY_MAX_M * PARITY_MAX_D * PARITY_T];
    for (int step = 0; step < PARITY_STEPS; step++) {
        parity_batch(step, rc.batch, rc.model.vocab, inputs, targets);
        PipelineReport r;
        int rcode = pipeline_step(p, inputs, targets, step, &r, &err);
        CHECK(rcode == 0, "%s step %d: %s", what, step, err.msg);
        if (rcode) break;
        CHECK(r.step.loss == ref->loss[step], "%s step %d: loss %.17g vs single-device %.17g", what, step,
              r.step.loss, ref->loss[step]);
    }
    check_weights(p, ref->model, what);
    pipeline_free(p);
    parity_unwatch();
    n_configs++;
}

static PipelineOptions options(const char *schedule, int P, int V) {
    PipelineOptions o = pipeline_options_defaults();
    snprintf(o.schedule, sizeof o.schedule, "%s", schedule);
    o.ranks = P;
    o.virtual_stages = V;
    o.timeout_s = PARITY_TIMEOUT_S;
    return o;
}

// Every schedule in the registry at P ranks (P*V <= 8 stages of the tiny model), M = P, 2P
// and P+1 microbatches (dualpipe-v from 2P: parity_microbatches), D = 1 and 2 replicas, with
// and without recompute.
static void test_parity_grid(int P) {
    for (const ScheduleInfo *info = SCHEDULE_REGISTRY; info < SCHEDULE_REGISTRY + SCHEDULE_COUNT; info++)
            for (int D = 1; D <= 2; D++)
                for (int recompute = 0; recompute <= 1; recompute++) {
                    PipelineOptions o = options(info->name, P, info->default_virtual);
                    o.dp = D;
                    o.recompute = recompute;
                    int Ms[3];
                    for (int k = 0, n = parity_microbatches(info->name, P, Ms); k < n; k++) check_parity(&o, Ms[k]);
                }
}

// D = 3 and 4 replicas: the replicas' gradients add up in replica order on every layout.
static void test_many_replicas(void) {
    PipelineOptions o = options("1f1b", 2, 1);
    o.dp = 3;
    check_parity(&o, 2);
    o = options("zb-v", 1, 2);
    o.dp = 4;
    check_parity(&o, 2);
}

static void test_manual_split(void) {
    PipelineOptions o = options("1f1b", 3, 1);
    snprintf(o.split, sizeof o.split, "1,5,2");
    check_parity(&o, 4);
    // A head-only last stage (the default split for a head heavier than a layer, e.g. 125m at
    // P 4): no decoder layer, the final norm, LM head and loss; its input gradient is the
    // residual's. Plain, interleaved and zb-v's V (the empty stage on rank 0), with replicas
    // and recompute.
    const struct { ParityLayout layout; const char *split; } head_only[] = {
        {{"1f1b", 3, 1, 1, 4, false}, "4,4,0"},         {{"zb-h1", 2, 1, 2, 4, false}, "8,0"},
        {{"interleaved-1f1b", 2, 2, 1, 4, false}, "2,2,4,0"}, {{"zb-v", 2, 2, 1, 4, true}, "3,3,2,0"},
        {{"gpipe", 4, 1, 1, 4, true}, "2,3,3,0"},
    };
    for (size_t k = 0; k < sizeof head_only / sizeof head_only[0]; k++) {
        o = parity_layout_options(&head_only[k].layout);
        snprintf(o.split, sizeof o.split, "%s", head_only[k].split);
        check_parity(&o, head_only[k].layout.M);
    }
}

// A built-in written to CSV (compute-only and lowered) and loaded back trains the same.
static void test_csv_schedule(void) {
    Error err;
    for (int with_comm = 0; with_comm <= 1; with_comm++) {
        Schedule *s = schedule_build("zb-h1", 2, 4, 1, &err);
        char path[] = "/tmp/test_pipeline_XXXXXX.csv";
        int fd = mkstemps(path, 4);
        FILE *f = fdopen(fd, "w");
        CHECK(schedule_write_csv(s, f, with_comm) == 0, "write csv");
        fclose(f);
        schedule_free(s);
        PipelineOptions o = options(path, 2, 0);
        check_parity(&o, 4);
        // The file's shape must be the run's.
        RunConfig rc = parity_run(2);
        CHECK(pipeline_create(&rc, &o, &err) == NULL && strstr(err.msg, "microbatches"), "M mismatch: %s", err.msg);
        unlink(path);
    }
}

static void test_bad_input(void) {
    Error err = {{0}};
    RunConfig rc = parity_run(2);
    rc.batch = 5;
    PipelineOptions o = options("1f1b", 2, 1);
    CHECK(pipeline_create(&rc, &o, &err) == NULL && strstr(err.msg, "not divisible"), "B %% M: %s", err.msg);
    rc = parity_run(2);
    o = options("zb-v", 8, 2);  // 16 stages of 8 layers
    CHECK(pipeline_create(&rc, &o, &err) == NULL, "too many stages");
    o = options("no-such", 2, 1);
    CHECK(pipeline_create(&rc, &o, &err) == NULL && strstr(err.msg, "unknown schedule"), "name: %s", err.msg);
}

// Peak activation slots follow the schedule: GPipe keeps all M, 1F1B stage s keeps P - s.
static void test_peak_slots(void) {
    RunConfig rc = parity_run(4);
    Error err;
    const char *names[] = {"gpipe", "1f1b"};
    const int want[2][2] = {{4, 4}, {2, 1}};
    for (int i = 0; i < 2; i++) {
        PipelineOptions o = options(names[i], 2, 1);
        Pipeline *p = pipeline_create(&rc, &o, &err);
        int32_t inputs[8 * PARITY_T], targets[8 * PARITY_T];
        parity_batch(0, 8, rc.model.vocab, inputs, targets);
        PipelineReport r;
        CHECK(p && pipeline_step(p, inputs, targets, 0, &r, &err) == 0, "%s: %s", names[i], err.msg);
        for (int s = 0; p && s < 2; s++)
            CHECK(r.peak_slots[s] == want[i][s], "%s stage %d: %d slots, want %d", names[i], s, r.peak_slots[s],
                  want[i][s]);
        CHECK(p && r.busy_ms[0] > 0 && r.busy_ms[1] > 0, "busy time recorded");
        pipeline_free(p);
    }
}

static void test_dp_bad_input(void) {
    Error err = {{0}};
    RunConfig rc = parity_run(2);
    rc.batch = 6;
    PipelineOptions o = options("1f1b", 2, 1);
    o.dp = 2;
    CHECK(pipeline_create(&rc, &o, &err) == NULL &&
              strcmp(err.msg, "--batch 6 is not divisible by --dp 2 x --microbatches 2") == 0,
          "B %% (D*M): %s", err.msg);
    o.dp = 0;
    CHECK(pipeline_create(&rc, &o, &err) == NULL && strstr(err.msg, "--dp"), "dp 0: %s", err.msg);
}

// Telemetry covers every rank's actions; check support: gradients without an update equal
// the single device's, and the queries answer for a local run.
static void test_telemetry_and_check_api(void) {
    RunConfig rc = parity_run(4);
    Error err;
    PipelineOptions o = options("1f1b", 2, 1);
    o.dp = 2;
    Pipeline *p = pipeline_create(&rc, &o, &err);
    CHECK(p != NULL, "create: %s", err.msg);
    if (!p) return;
    int32_t inputs[8 * PARITY_T], targets[8 * PARITY_T];
    parity_batch(0, 8, rc.model.vocab, inputs, targets);
    // The single device's gradients of the same batch, split as the 2 replicas split it.
    StageModel *ref = stage_create(&rc.model, 0, rc.model.layers, true, true, rc.seed, &err);
    StageActs *acts = stage_acts_create(ref, 1, PARITY_T);
    const double ref_loss = reference_forward_backward(ref, acts, &rc, 2, inputs, targets);
    double loss = 0.0;
    CHECK(pipeline_compute_grads(p, inputs, targets, &loss, &err) == 0, "compute grads: %s", err.msg);
    CHECK(loss == ref_loss, "loss %.17g vs %.17g", loss, ref_loss);
    for (int s = 0; s < pipeline_n_stages(p); s++) {
        const StageModel *sm = pipeline_stage(p, s);
        CHECK(pipeline_hosts_stage(p, s) && sm, "stage %d hosted", s);
        for (int i = 0; sm && i < sm->n_params; i++) {
            const ParamInfo *pi = stage_find_param(ref, sm->params[i].name);
            CHECK(parity_same_bits(sm->grads + sm->params[i].offset, ref->grads + pi->offset, pi->numel),
                  "gradient of %s differs", pi->name);
        }
    }
    CHECK(pipeline_is_root(p) && pipeline_world_rank(p) == 0 && pipeline_world_max(p, 2.5) == 2.5, "queries");
    CHECK(!pipeline_hosts_stage(p, 2) && pipeline_stage(p, -1) == NULL, "no such stage");
    PipelineReport r;
    CHECK(pipeline_step(p, inputs, targets, 0, &r, &err) == 0, "step: %s", err.msg);
    CHECK(r.n_ranks == 4 && r.n_replicas == 2 && r.has_telemetry && r.telemetry.n_ranks == 4, "report shape");
    const ActionEvent *const *events;
    const int *n_events;
    CHECK(pipeline_events(p, &events, &n_events) == 4, "events of 4 ranks");
    for (int w = 0; w < 4; w++) {
        CHECK(n_events[w] > 0 && r.telemetry.ranks[w].events == n_events[w] && r.telemetry.ranks[w].busy_ms > 0,
              "rank %d: %d events", w, n_events[w]);
        CHECK(pipeline_clock_offsets(p)[w] == 0.0, "local clocks agree");
    }
    CHECK(r.telemetry.bubble > -1e-9 && r.telemetry.bubble < 1.0, "bubble %g", r.telemetry.bubble);
    stage_acts_free(acts);
    stage_free(ref);
    pipeline_free(p);
}

// The local collectives sum in group order, on every member, and refuse mismatched sizes.
typedef struct {
    Transport *tp;
    int self;
    TransportStatus st;
    double f64[3];
    float f32[5];
} CollRank;

static void *coll_rank(void *arg) {
    CollRank *c = arg;
    Error err;
    for (int i = 0; i < 5; i++) c->f32[i] = (float)(c->self * 10 + i);
    for (int i = 0; i < 3; i++) c->f64[i] = c->self + 0.5 * i;
    c->st = transport_allreduce_f32(c->tp, c->self, GROUP_REPLICAS, c->f32, 5, &err);
    if (c->st == TRANSPORT_OK) c->st = transport_allreduce_f64(c->tp, c->self, GROUP_WORLD, c->f64, 3, &err);
    return NULL;
}

static void test_local_collectives(void) {
    enum { P = 3, D = 2, W = P * D };
    Transport *tp = transport_local_create_world(P, D, 64, 2, 5.0);
    CollRank c[W];
    pthread_t th[W];
    for (int r = 0; r < W; r++) {
        c[r] = (CollRank){.tp = tp, .self = r};
        pthread_create(&th[r], NULL, coll_rank, &c[r]);
    }
    for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < W; r++) {
        CHECK(c[r].st == TRANSPORT_OK, "rank %d status %d", r, c[r].st);
        const int p = r % P;  // replicas of p: p and p + P
        CHECK(c[r].f32[1] == (float)(p * 10 + 1 + (p + P) * 10 + 1), "rank %d f32 %g", r, c[r].f32[1]);
        CHECK(c[r].f64[2] == 15.0 + 6.0, "rank %d f64 %g", r, c[r].f64[2]);
    }
    transport_free(tp);
}

// The local transport's mailboxes live where TransportMemory says and every message byte
// moves through its copy (how GPU stages share a GPU: device mailboxes, CUDA copies).
static int mem_allocs, mem_frees, mem_copies;
static int mem_owner_sum;
static void *counting_alloc(size_t bytes, int owner) {
    mem_allocs++;
    mem_owner_sum += owner;
    return xmalloc(bytes);
}
static void counting_free(void *p) {
    mem_frees += p != NULL;
    free(p);
}
static void counting_copy(void *dst, const void *src, size_t bytes) {
    mem_copies++;
    memcpy(dst, src, bytes);
}

static void test_local_mailbox_memory(void) {
    static const TransportMemory mem = {.alloc = counting_alloc, .free = counting_free, .copy = counting_copy};
    Transport *tp = transport_local_create_mem(2, 1, 16, 2, 5.0, &mem);
    CHECK(mem_allocs == 2 && mem_owner_sum == 0 + 1 && mem_copies == 0,
          "one mailbox per rank from the hooks, each for its owner: %d allocs", mem_allocs);
    const float out[4] = {1.5f, -2.0f, 3.25f, 0.0f};
    float in[4] = {0};
    Error err;
    CHECK(transport_send(tp, 0, 1, 7, out, sizeof out, &err) == TRANSPORT_OK, "send: %s", err.msg);
    CHECK(transport_recv(tp, 1, 0, 7, in, sizeof in, &err) == TRANSPORT_OK, "recv: %s", err.msg);
    CHECK(memcmp(in, out, sizeof out) == 0 && mem_copies == 2, "the bytes arrive through the copy hook (%d copies)",
          mem_copies);
    transport_free(tp);
    CHECK(mem_frees == 2, "mailboxes freed through the hook: %d", mem_frees);
}

// ---- timeout / abort: rank 0 never sends microbatch 1's activations -----------------------

typedef struct {
    Runtime *rt;
    const int32_t *inputs, *targets;
    RuntimeStatus status;
    Error err;
    double seconds;
    double delay_s;   // sleep before the step
} RankRun;

static void *run_rank(void *arg) {
    RankRun *rr = arg;
    if (rr->delay_s > 0) nanosleep(&(struct timespec){0, (long)(rr->delay_s * 1e9)}, NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    RuntimeStats st;
    rr->status = runtime_step(rr->rt, rr->inputs, rr->targets, 0.01f, &st, &rr->err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    rr->seconds = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    return NULL;
}

static void test_timeout_aborts_every_rank(void) {
    RunConfig rc = parity_run(2);
    Error err;
    Schedule *s = schedule_missing_send();
    CHECK(schedule_validate(s, &err) != 0, "the validator refuses it too");
    StageModel *stages[2] = {stage_create(&rc.model, 0, 4, true, false, rc.seed, &err),
                             stage_create(&rc.model, 4, 8, false, true, rc.seed, &err)};
    Transport *tp = transport_local_create(2, (size_t)2 * PARITY_T * rc.model.hidden * sizeof(float), 4, 1.0);
    int32_t inputs[4 * PARITY_T], targets[4 * PARITY_T];
    parity_batch(0, 4, rc.model.vocab, inputs, targets);
    RankRun runs[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        // Rank 1 starts 0.4 s late, so rank 0 has waited longest and times out first: were both
        // waits to start together, both could time out before either saw the other's abort.
        runs[r] = (RankRun){.rt = runtime_create(s, r, stages, 2, PARITY_T, tp), .inputs = inputs, .targets = targets,
                            .delay_s = 0.4 * r};
        pthread_create(&th[r], NULL, run_rank, &runs[r]);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    // Both ranks wait; the one that waited first times out, the other is stopped by its abort.
    const char *at[2] = {"at action 3 (RECV_B 0,mb 0)", "at action 2 (RECV_F 1,mb 1)"};
    const int root = runs[0].status == RUNTIME_FAILED ? 0 : 1;
    CHECK(runs[root].status == RUNTIME_FAILED && runs[1 - root].status == RUNTIME_ABORTED, "statuses %d %d",
          runs[0].status, runs[1].status);
    char want[256];
    snprintf(want, sizeof want, "rank %d (stage %d): timed out after 1 s waiting %s", root, root, at[root]);
    CHECK(strcmp(runs[root].err.msg, want) == 0, "root: %s", runs[root].err.msg);
    snprintf(want, sizeof want, "rank %d (stage %d): aborted (another rank failed) while waiting %s", 1 - root,
             1 - root, at[1 - root]);
    CHECK(strcmp(runs[1 - root].err.msg, want) == 0, "stopped: %s", runs[1 - root].err.msg);
    for (int r = 0; r < 2; r++) {
        // Each rank returns by the root's timeout (1 s) plus its own start delay (0.4 s for rank
        // 1), plus the abort's wake-up; 1 s more is slack for a loaded (sanitizer) machine.
        CHECK(runs[r].seconds < 1.0 + 0.4 + 1.0, "rank %d returned after %.2f s", r, runs[r].seconds);
        CHECK(!strchr(runs[r].err.msg, '\n'), "one line");
        runtime_free(runs[r].rt);
        stage_free(stages[r]);
    }
    transport_free(tp);
    schedule_free(s);
}

// The grid is the long part (about 350 layouts), so ctest runs it as one entry per P
// (tests/CMakeLists.txt), beside one entry for everything else; under ctest -j they run side by
// side, and none runs long enough to meet a harness's time limit on a loaded machine.
//   test_pipeline              everything, the parts side by side in child processes
//   test_pipeline units        everything but the grid
//   test_pipeline grid P       the grid at P ranks (1..4)
// With no arguments: every part at once, one child process each, as ctest -j runs them, so a
// run by hand takes the longest part's time on a machine with the cores (the parts, one after
// the other, took about 33 s on an idle 2-core VM and about 60 s beside two busy loops; with
// the narrower parity model, 2026-11-26, all five at once took 12.9 s there).
// Each part's output is line-buffered, so a run cut short by a time limit still shows how far
// each part got.
// Exit status: the first failing part's, else 0.
static int run_parts_in_parallel(char **argv) {
    static char *const parts[][3] = {{"units", NULL, NULL}, {"grid", "1", NULL}, {"grid", "2", NULL},
                                     {"grid", "3", NULL}, {"grid", "4", NULL}};
    enum { N_PARTS = sizeof parts / sizeof parts[0] };
    pid_t pid[N_PARTS];
    for (int k = 0; k < N_PARTS; k++) {
        fflush(NULL);
        if ((pid[k] = fork()) == 0) {
            char *args[] = {argv[0], parts[k][0], parts[k][1], NULL};
            execv("/proc/self/exe", args);
            _exit(127);
        }
        if (pid[k] < 0) return 1;
    }
    int rc = 0;
    for (int k = 0; k < N_PARTS; k++) {
        int status = 0;
        waitpid(pid[k], &status, 0);
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (code && !rc) rc = code;
        if (code) fprintf(stderr, "test_pipeline %s%s%s: exit %d\n", parts[k][0], parts[k][1] ? " " : "",
                          parts[k][1] ? parts[k][1] : "", code);
    }
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 1) return run_parts_in_parallel(argv);
    setvbuf(stdout, NULL, _IOLBF, 0);   // a part cut short still shows its progress
    bool units = true;
    int grid_from = 1, grid_to = 4;
    if (argc == 2 && strcmp(argv[1], "units") == 0) {
        grid_to = 0;
    } else if (argc == 3 && strcmp(argv[1], "grid") == 0) {
        units = false;
        grid_from = grid_to = atoi(argv[2]);
    } else if (argc != 1) {
        grid_from = 0;
    }
    if (grid_from < 1 || grid_from > 4) {
        fprintf(stderr, "usage: test_pipeline [units | grid P]  (P in 1..4)\n");
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (units) {
        test_bad_input();
        test_dp_bad_input();
        test_local_collectives();
        test_local_mailbox_memory();
        test_telemetry_and_check_api();
        test_timeout_aborts_every_rank();
        test_peak_slots();
        test_csv_schedule();
        test_manual_split();
        test_many_replicas();
    }
    for (int P = grid_from; P <= grid_to; P++) test_parity_grid(P);
    if (!units) CHECK(n_configs > 0, "the grid at P=%d holds no layout", grid_from);
    parity_references_free();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%d layouts bitwise equal to one device (losses and weights), %.1f s\n", n_configs,
           (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
    return test_finish();
}
