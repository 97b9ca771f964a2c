// The pipeline over MPI, one process per rank, against the single-device trainer.
//
// Run plainly (by ctest) this program launches itself under mpirun three times and checks
// how each ended:
//   parity   4 ranks: every schedule over P = 2..4 ranks (sub-worlds carved out of the 4 with
//            MPI_Comm_split), M = P, 2P and P + 1, 5 steps of the tiny model, plus D = 2 replicas on
//            P = 2; every rank compares the loss and its own stages' weights by name with
//            reference_step computed in the same process. Exit 0.
//   timeout  2 ranks run a schedule whose rank 0 never sends microbatch 1's activations, with
//            a 1 s timeout: each rank prints one line naming itself, its stage and action, and
//            exits non-zero within seconds.
//   kill     2 ranks train; rank 1 raises SIGKILL in step 2; mpirun then SIGTERMs rank 0, whose
//            handler prints one line "peer lost (SIGTERM) while waiting at action ...".
// Under mpirun (OMPI_COMM_WORLD_SIZE is set) argv[1] names the mode.
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/pipeline.h"
#include "engine/runtime.h"
#include "engine/schedule/schedule.h"
#include "engine/transport/transport.h"
#include "kernels/cpu/kernels.h"
#include "parity_util.h"
#include "test_util.h"


static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// ---- under mpirun: parity ------------------------------------------------------------------

static int n_configs;

// This rank's stages against the reference, by HF name, bit for bit.
static void check_weights(Pipeline *p, const StageModel *ref, const char *what) {
    for (int s = 0; s < pipeline_n_stages(p); s++) {
        const StageModel *sm = pipeline_stage(p, s);
        for (int i = 0; sm && i < sm->n_params; i++) {
            const ParamInfo *pi = stage_find_param(ref, sm->params[i].name);
            CHECK(parity_same_bits(sm->weights + sm->params[i].offset, ref->weights + pi->offset, pi->numel),
                  "%s rank %d: %s differs (relative norm %.3g)", what, pipeline_world_rank(p), pi->name,
                  rel_norm_diff(sm->weights + sm->params[i].offset, ref->weights + pi->offset, pi->numel));
        }
    }
}

// The root sees every rank's events; one host's ranks share CLOCK_MONOTONIC, so a measured
// offset is the estimate's own error, at most half the best of its round trips. A round trip
// between oversubscribed ranks (4 on 2 cores, beside other tests under ctest -j) can include
// a scheduler time slice or two: 11.9 ms was seen at a load average of 7. The bound is 0.1 s:
// well above that, and far below what a wrong clock (CLOCK_REALTIME against MONOTONIC,
// seconds against milliseconds) would give.
static void check_telemetry(const Pipeline *p, const PipelineReport *r, int W, const char *what) {
    CHECK(r->has_telemetry && r->telemetry.n_ranks == W && r->telemetry.step_ms > 0, "%s telemetry", what);
    const ActionEvent *const *events;
    const int *n_events;
    CHECK(pipeline_events(p, &events, &n_events) == W, "%s: events of %d ranks", what, W);
    for (int w = 0; w < W; w++) {
        CHECK(n_events[w] > 0 && r->telemetry.ranks[w].events == n_events[w] && events[w][0].end >= events[w][0].start,
              "%s rank %d: %d events", what, w, n_events[w]);
        CHECK(fabs(pipeline_clock_offsets(p)[w]) < 0.1, "%s rank %d clock offset %g s", what, w,
              pipeline_clock_offsets(p)[w]);
    }
}

// PARITY_STEPS steps on the first P*D ranks of the world, the others wait.
static void check_parity(const char *schedule, int P, int V, int D, int M, bool recompute) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, rank < P * D ? 0 : MPI_UNDEFINED, rank, &comm);
    if (comm == MPI_COMM_NULL) return;
    char what[128];
    snprintf(what, sizeof what, "%s P=%d V=%d D=%d M=%d recompute=%d", schedule, P, V, D, M, recompute);
    const ParityReference *ref = parity_reference(M, D);
    RunConfig rc = parity_run(M * D);
    rc.microbatches = M;
    PipelineOptions o = pipeline_options_defaults();
    snprintf(o.schedule, sizeof o.schedule, "%s", schedule);
    o.ranks = P;
    o.virtual_stages = V;
    o.dp = D;
    o.recompute = recompute;
    o.timeout_s = 20;  // a bug fails the test instead of hanging it
    o.transport = TRANSPORT_KIND_MPI;
    o.mpi_comm = &comm;
    Error err = {{0}};
    Pipeline *p = pipeline_create(&rc, &o, &err);
    CHECK(p != NULL, "%s: %s", what, err.msg);
    int32_t inputs[PARITY_ROWS * PARITY_MAX_M * PARITY_MAX_D * PARITY_T];
    int32_t targets[PARITY_ROWS * PARITY_MAX_M * PARITY_MAX_D * PARITY_T];
    for (int step = 0; p && step < PARITY_STEPS; step++) {
        parity_batch(step, rc.batch, rc.model.vocab, inputs, targets);
        PipelineReport r;
        const int rcode = pipeline_step(p, inputs, targets, step, &r, &err);
        CHECK(rcode == 0, "%s step %d: %s", what, step, err.msg);
        if (rcode) exit(1);  // the other ranks are stopped too: end this run
        CHECK(r.step.loss == ref->loss[step], "%s step %d: loss %.17g vs %.17g", what, step, r.step.loss,
              ref->loss[step]);
        if (pipeline_is_root(p)) check_telemetry(p, &r, P * D, what);
    }
    if (p) check_weights(p, ref->model, what);
    pipeline_free(p);
    MPI_Comm_free(&comm);
    n_configs++;
}

// A world of the wrong size is refused with the sizes in the message.
static void check_world_size(void) {
    RunConfig rc = parity_run(4);
    PipelineOptions o = pipeline_options_defaults();
    o.ranks = 3;
    o.transport = TRANSPORT_KIND_MPI;
    Error err;
    CHECK(pipeline_create(&rc, &o, &err) == NULL &&
              strcmp(err.msg, "mpirun started 4 ranks but --stages 3 x --dp 1 needs 3") == 0,
          "world size: %s", err.msg);
}

static int run_parity(void) {
    const double t0 = now_s();
    check_world_size();
    // Every schedule in the registry at its default V. D = 1 on 2..4 ranks (2 for a schedule
    // that fixes V > 1, zb-v and dualpipe-v: their 2P stages), M = P, 2P and P + 1 (not a
    // multiple of P; dualpipe-v from 2P: parity_microbatches) with recompute on 2P; D = 2 on
    // 4 ranks (P = 2), the first and last of those M, recompute on the last.
    for (const ScheduleInfo *s = SCHEDULE_REGISTRY; s < SCHEDULE_REGISTRY + SCHEDULE_COUNT; s++) {
        const int V = s->default_virtual, P_max = s->virtual_fixed && V > 1 ? 2 : 4;
        int Ms[3], n;
        for (int P = 2; P <= P_max; P++) {
            n = parity_microbatches(s->name, P, Ms);
            for (int k = 0; k < n; k++) check_parity(s->name, P, V, 1, Ms[k], k == 1);
        }
        n = parity_microbatches(s->name, 2, Ms);
        check_parity(s->name, 2, V, 2, Ms[0], false);
        check_parity(s->name, 2, V, 2, Ms[n - 1], true);
    }
    check_parity("1f1b", 1, 1, 2, 2, false);  // D = 2 replicas of one stage on 2 ranks
    check_parity("1f1b", 1, 1, 3, 2, false);  // D = 3 and 4: the replicas' sum in replica order
    check_parity("gpipe", 1, 1, 4, 3, false);
    int rank, failed = test_failed_count, any = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("mpi parity: %d configurations bitwise equal to one device, %.1f s\n", n_configs, now_s() - t0);
    parity_references_free();
    return any ? 1 : 0;
}

// ---- under mpirun: timeout, kill ------------------------------------------------------------

// Prints the rank's one line and exits non-zero, as pptrain does.
static int run_timeout(void) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    RunConfig rc = parity_run(2);
    Error err;
    Schedule *s = schedule_missing_send();
    StageModel *stages[2] = {NULL, NULL};
    stages[rank] = stage_create(&rc.model, rank * 4, rank * 4 + 4, rank == 0, rank == 1, rc.seed, &err);
    Transport *tp = transport_mpi_create(NULL, 2, 1, (size_t)PARITY_ROWS * PARITY_T * rc.model.hidden * sizeof(float), 4, 8, 1.0,
                                         &err);
    if (!tp) {
        fprintf(stderr, "pptrain: %s\n", err.msg);
        return 3;
    }
    Runtime *rt = runtime_create(s, rank, stages, PARITY_ROWS, PARITY_T, tp);
    int32_t inputs[2 * PARITY_ROWS * PARITY_T], targets[2 * PARITY_ROWS * PARITY_T];
    parity_batch(0, 2 * PARITY_ROWS, rc.model.vocab, inputs, targets);
    RuntimeStats st;
    const double t0 = now_s();
    if (runtime_step(rt, inputs, targets, 0.01f, &st, &err) == RUNTIME_OK) return 0;
    fprintf(stderr, "pptrain: %s (after %.1f s)\n", err.msg, now_s() - t0);
    fflush(stderr);
    _exit(1);  // requests are pending: no MPI_Finalize, as pptrain after a failure
}

static int run_kill(void) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    RunConfig rc = parity_run(4);
    rc.steps = rc.optim.total_steps = 100;
    PipelineOptions o = pipeline_options_defaults();
    snprintf(o.schedule, sizeof o.schedule, "1f1b");
    o.ranks = 2;
    o.transport = TRANSPORT_KIND_MPI;
    o.timeout_s = 30;
    Error err;
    Pipeline *p = pipeline_create(&rc, &o, &err);
    if (!p) {
        fprintf(stderr, "pptrain: %s\n", err.msg);
        return 3;
    }
    int32_t inputs[PARITY_ROWS * 4 * PARITY_T], targets[PARITY_ROWS * 4 * PARITY_T];
    for (int step = 0; step < 100; step++) {
        if (rank == 1 && step == 2) raise(SIGKILL);
        parity_batch(step, rc.batch, rc.model.vocab, inputs, targets);
        PipelineReport r;
        if (pipeline_step(p, inputs, targets, step, &r, &err)) {
            fprintf(stderr, "pptrain: %s\n", err.msg);
            _exit(1);
        }
    }
    pipeline_free(p);
    return 0;  // not reached: rank 1 is killed, rank 0 then SIGTERMed
}

static int child_main(const char *mode) {
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    int code = strcmp(mode, "parity") == 0    ? run_parity()
               : strcmp(mode, "timeout") == 0 ? run_timeout()
               : strcmp(mode, "kill") == 0    ? run_kill()
                                              : 2;
    MPI_Finalize();
    return code;
}

// ---- the parent: launch, time and judge the three mpiruns ------------------------------------

typedef struct {
    int status;    // waitpid status
    double seconds;
    char out[65536];
} Launch;

static void read_file(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
}

// mpirun -np n ... self mode, stdout+stderr into out; killed after limit_s.
static void launch(const char *self, int n, const char *mode, int limit_s, Launch *l) {
    char np[16], log[] = "/tmp/test_mpi_parity_XXXXXX";
    snprintf(np, sizeof np, "%d", n);
    const int fd = mkstemp(log);
    const double t0 = now_s();
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        setpgid(0, 0);
        // Under ASan the ranks skip leak checking: Open MPI abandons allocations at
        // MPI_Finalize in components it has already unloaded (unsymbolizable, so they cannot
        // be suppressed by library). The shared engine code is leak-checked by test_pipeline.
        const char *asan = getenv("ASAN_OPTIONS");
        char opts[1024];
        snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", asan ? asan : "", asan && *asan ? ":" : "");
        setenv("ASAN_OPTIONS", opts, 1);
        execlp("mpirun", "mpirun", "-np", np, "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader",
               "-x", "OMP_NUM_THREADS=1", "-x", "OPENBLAS_NUM_THREADS=1", self, mode, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (now_s() - t0 > limit_s) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
        }
        usleep(20000);
    }
    l->status = status;
    l->seconds = now_s() - t0;
    close(fd);
    read_file(log, l->out, sizeof l->out);
    unlink(log);
}

static int count(const char *text, const char *needle) {
    int c = 0;
    for (const char *s = strstr(text, needle); s; s = strstr(s + 1, needle)) c++;
    return c;
}

static bool exited_nonzero(const Launch *l) { return !WIFEXITED(l->status) || WEXITSTATUS(l->status) != 0; }

static void parent_main(const char *self) {
    Launch *l = malloc(sizeof *l);
    launch(self, 4, "parity", 120, l);
    const char *summary = strstr(l->out, "mpi parity:");
    printf("%.*s(%.1f s with launch)\n", summary ? (int)strcspn(summary, "\n") + 1 : 0, summary ? summary : "",
           l->seconds);
    CHECK(WIFEXITED(l->status) && WEXITSTATUS(l->status) == 0 && summary, "parity run failed:\n%s", l->out);

    launch(self, 2, "timeout", 30, l);
    CHECK(exited_nonzero(l) && l->seconds < 15, "timeout run: status %d after %.1f s", l->status, l->seconds);
    CHECK(count(l->out, "pptrain: rank ") == 2 &&
              count(l->out, "timed out after 1 s waiting at action ") + count(l->out, "aborted (another rank") == 2 &&
              count(l->out, "timed out after 1 s waiting at action ") >= 1,
          "timeout lines:\n%s", l->out);
    CHECK(strstr(l->out, "pptrain: rank 0 (stage 0): ") && strstr(l->out, "pptrain: rank 1 (stage 1): "),
          "both ranks named:\n%s", l->out);
    printf("timeout: %.1f s\n", l->seconds);

    launch(self, 2, "kill", 60, l);
    CHECK(exited_nonzero(l) && l->seconds < 30, "kill run: status %d after %.1f s", l->status, l->seconds);
    // Rank 0's one line names the lost rank (engine/hang_report.h).
    CHECK(count(l->out, "pptrain: rank 1 (stage 1) died ") == 1 &&
              count(l->out, "rank 0 (stage 0): stopped by SIGTERM from mpirun ") == 1 && count(l->out, "pptrain: ") == 1,
          "kill lines:\n%s", l->out);
    printf("kill: %.1f s, %s", l->seconds, strstr(l->out, "pptrain: ") ? strstr(l->out, "pptrain: ") : "no line\n");
    free(l);
}

int main(int argc, char **argv) {
    if (getenv("OMPI_COMM_WORLD_SIZE")) return child_main(argc > 1 ? argv[1] : "");
    (void)argc;
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    parent_main(n > 0 ? self : argv[0]);
    return test_finish();
}
