// Shared by the parity tests (test_pipeline.c, test_mpi_parity.c): the tiny run they train,
// its deterministic batches, the single-device reference every layout must reproduce, and a
// schedule that deadlocks on purpose.
#ifndef PPTRAIN_PARITY_UTIL_H
#define PPTRAIN_PARITY_UTIL_H
#include <omp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/pipeline.h"
#include "engine/schedule/schedule.h"
#include "engine/reference_step.h"

// A stall names its layout instead of running into whoever's time limit: every wait of a
// parity layout gives up after PARITY_TIMEOUT_S (the pipeline's hang report then fails the
// layout's check), and a layout still running after PARITY_LAYOUT_LIMIT_S (stuck outside a
// wait, in compute or a library) is named on stderr and aborts the test. A layout takes well
// under a second (5 steps of a narrow tiny at T 16; a few under ASan on a loaded machine), so neither
// fires unless something is stuck.
enum { PARITY_TIMEOUT_S = 30, PARITY_LAYOUT_LIMIT_S = 120 };

static const char *volatile parity_watched;

static void parity_watchdog_fire(int sig) {
    (void)sig;
    static const char head[] = "parity layout still running after the watchdog's limit: ";
    const char *what = parity_watched ? parity_watched : "?";
    if (write(2, head, sizeof head - 1) > 0 && write(2, what, strlen(what)) > 0) (void)!write(2, "\n", 1);
    abort();
}

// Arms the watchdog for the layout called what (which must outlive parity_unwatch).
static inline void parity_watch(const char *what) {
    parity_watched = what;
    signal(SIGALRM, parity_watchdog_fire);
    alarm(PARITY_LAYOUT_LIMIT_S);
}

static inline void parity_unwatch(void) {
    alarm(0);
    parity_watched = NULL;
}

// A layout of the layout sweeps (test_tied.c, test_eval.c, test_pipeline.c's head-only splits): schedule, P ranks, V stages per
// rank, D replicas, M microbatches, recompute.
typedef struct {
    const char *schedule;
    int P, V, D, M;
    bool recompute;
} ParityLayout;

static inline PipelineOptions parity_layout_options(const ParityLayout *l) {
    PipelineOptions o = pipeline_options_defaults();
    snprintf(o.schedule, sizeof o.schedule, "%s", l->schedule);
    o.ranks = l->P;
    o.virtual_stages = l->V;
    o.dp = l->D;
    o.recompute = l->recompute;
    o.timeout_s = PARITY_TIMEOUT_S;
    return o;
}

// "what zb-v P=2 V=2 D=1 M=4 recompute=0", for the checks' messages.
static inline void parity_layout_name(char *buf, size_t size, const char *what, const ParityLayout *l) {
    snprintf(buf, size, "%s %s P=%d V=%d D=%d M=%d recompute=%d", what, l->schedule, l->P, l->V, l->D, l->M,
             l->recompute);
}

enum { PARITY_T = 16, PARITY_STEPS = 5, PARITY_MAX_M = 8, PARITY_ROWS = 2 };


// The tiny preset at half its width (hidden 32, intermediate 64, head dim 8: 8 layers still,
// 4 query heads on 2 kv heads), M microbatches of PARITY_ROWS rows of PARITY_T tokens. Parity
// is bit-equality between layouts, which width does not touch; the narrower model cuts the
// parity grid's arithmetic about 4x (test_pipeline run bare: 30 s -> 13 s on a 2-core VM).
static inline RunConfig parity_run(int M) {
    RunConfig rc = run_config_defaults();
    rc.model.hidden = 32, rc.model.intermediate = 64, rc.model.head_dim = 8;
    rc.batch = PARITY_ROWS * M;
    rc.seq_len = PARITY_T;
    rc.microbatches = M;
    rc.steps = PARITY_STEPS;
    rc.optim.total_steps = PARITY_STEPS;
    return rc;
}

// The microbatch counts a parity grid runs a schedule with on P ranks (its default V): P, 2P
// and P + 1 (not a multiple of P), or from the row's minimum on where it needs more (dualpipe-v:
// 2P, 4P, 2P + 1), each at most PARITY_MAX_M and once. Fills Ms; returns how many (1 to 3).
static inline int parity_microbatches(const char *schedule, int P, int Ms[3]) {
    const int M_min = schedule_min_microbatches(schedule, P, 0), lo = M_min > P ? M_min : P;
    const int want[3] = {lo, 2 * lo, lo + 1};
    int n = 0;
    for (int k = 0; k < 3; k++) {
        bool seen = want[k] > PARITY_MAX_M;
        for (int j = 0; j < n; j++) seen = seen || Ms[j] == want[k];
        if (!seen) Ms[n++] = want[k];
    }
    return n;
}

// Deterministic tokens of (step, position); about one target in six is a pad (-1).
static inline void parity_batch(int step, int rows, int vocab, int32_t *inputs, int32_t *targets) {
    uint32_t x = 2463534242u + 977u * (uint32_t)step;
    for (int i = 0; i < rows * PARITY_T; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        inputs[i] = (int32_t)(x % (uint32_t)vocab);
        targets[i] = (x >> 8) % 6 == 0 ? -1 : (int32_t)((x >> 12) % (uint32_t)vocab);
    }
}

// The single-device run of a D-replica layout with M microbatches per replica: its losses and
// final weights (built once per (M, D)), computed with PARITY_REFERENCE_THREADS OpenMP threads,
// a count no pipeline rank of the tests runs with, so every comparison also crosses thread
// counts.
enum { PARITY_MAX_D = 4, PARITY_REFERENCE_THREADS = 3 };
typedef struct {
    StageModel *model;
    double loss[PARITY_STEPS];
} ParityReference;

static ParityReference parity_references[PARITY_MAX_M + 1][PARITY_MAX_D + 1];

static inline const ParityReference *parity_reference(int M, int D) {
    ParityReference *ref = &parity_references[M][D];
    if (ref->model) return ref;
    RunConfig rc = parity_run(M * D);
    rc.microbatches = M;
    Error err;
    ref->model = stage_create(&rc.model, 0, rc.model.layers, true, true, rc.seed, &err);
    StageActs *acts = stage_acts_create(ref->model, PARITY_ROWS, PARITY_T);
    AdamWState opt = adamw_state_create(ref->model->numel);
    int32_t inputs[PARITY_ROWS * PARITY_MAX_M * PARITY_MAX_D * PARITY_T];
    int32_t targets[PARITY_ROWS * PARITY_MAX_M * PARITY_MAX_D * PARITY_T];
    const int threads = omp_get_max_threads();
    omp_set_num_threads(PARITY_REFERENCE_THREADS);
    for (int step = 0; step < PARITY_STEPS; step++) {
        parity_batch(step, rc.batch, rc.model.vocab, inputs, targets);
        ref->loss[step] = reference_step(ref->model, acts, &opt, &rc, D, inputs, targets, step).loss;
    }
    omp_set_num_threads(threads);
    adamw_state_free(&opt);
    stage_acts_free(acts);
    return ref;
}

static inline void parity_references_free(void) {
    for (int m = 0; m <= PARITY_MAX_M; m++)
        for (int d = 0; d <= PARITY_MAX_D; d++) stage_free(parity_references[m][d].model);
}

// Whether n floats are the same bits (the parity tests' one comparison).
static inline bool parity_same_bits(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

// gpipe on 2 ranks, 2 microbatches, lowered, without rank 0's "0SEND_F1": a
// schedule that waits forever, for the timeout and dead-peer tests.
static inline Schedule *schedule_missing_send(void) {
    Error err;
    Schedule *full = schedule_build("gpipe", 2, 2, 1, &err);
    schedule_lower(full);
    Schedule *s = schedule_new("broken", 2, 2, 2, STAGE_MAP_PLAIN);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < full->ranks[r].n; i++) {
            Action a = full->ranks[r].actions[i];
            if (!(a.type == ACT_SEND_F && a.mb == 1)) schedule_push(s, r, a.type, a.stage, a.mb);
        }
    schedule_free(full);
    return s;
}

#endif
