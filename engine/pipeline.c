// The pipeline trainer: stages, schedule, transport and one runtime per rank, driven by P rank
// threads that live as long as the pipeline. A step is three barriers: `start` (the main
// thread has published the batch), `computed` (every rank ran its actions and summed its
// squared gradients), `finished` (every rank clipped and stepped AdamW on its stages).
#include "engine/pipeline.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/partition.h"
#include "engine/runtime.h"
#include "engine/schedule.h"
#include "engine/transport.h"
#include "kernels/cpu/kernels.h"

typedef struct {
    struct Pipeline *p;
    int rank;
    RuntimeStatus status;
    Error err;
    double sumsq;   // sum of squared gradients over the rank's stages
    double loss;
    double busy_s;
} PipelineRank;

struct Pipeline {
    RunConfig rc;
    int P, S, M, rows, T;
    Schedule *sched;          // validated, lowered
    StageModel **stages;      // (S)
    AdamWState *opt;          // (S)
    Transport *tp;
    Runtime **rt;             // (P)
    PipelineRank *ranks;      // (P)
    pthread_t *threads;       // (P)
    pthread_barrier_t start, computed, finished;
    // The step being run, written by the main thread before `start`.
    const int32_t *inputs, *targets;
    float loss_scale;
    double lr;
    bool quit;
    bool broken;              // a step failed: the transport is aborted
    double *busy_ms;          // (P) report arrays
    int *peak_slots;          // (S)
};

PipelineOptions pipeline_options_defaults(void) {
    PipelineOptions o;
    memset(&o, 0, sizeof o);
    o.ranks = 1;
    snprintf(o.schedule, sizeof o.schedule, "gpipe");
    o.timeout_s = TRANSPORT_DEFAULT_TIMEOUT_S;
    return o;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// ---- set-up ------------------------------------------------------------------------------

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

// The schedule file must fit the run: its ranks and microbatches are the run's.
static Schedule *load_schedule_file(const PipelineOptions *o, int M, Error *err) {
    Schedule *s = schedule_load_csv(o->schedule, err);
    if (!s) return NULL;
    if (s->n_ranks != o->ranks || s->n_microbatches != M) {
        error_set(err, "%s: the schedule has %d ranks and %d microbatches, the run %d ranks (--stages) and %d "
                       "microbatches", o->schedule, s->n_ranks, s->n_microbatches, o->ranks, M);
        schedule_free(s);
        return NULL;
    }
    return s;
}

// Built or loaded, then lowered and validated.
static Schedule *pipeline_schedule(const PipelineOptions *o, int M, Error *err) {
    Schedule *s = !schedule_is_builtin(o->schedule) && ends_with(o->schedule, ".csv")
                      ? load_schedule_file(o, M, err)
                      : schedule_build(o->schedule, o->ranks, M, o->virtual_stages, err);
    if (!s) return NULL;
    schedule_lower(s);
    if (schedule_validate(s, err)) {
        schedule_free(s);
        return NULL;
    }
    return s;
}

// Stage s holds layers [first(s), first(s) + counts[s]); the embedding on 0, the head on S-1.
static int build_stages(Pipeline *p, const PipelineOptions *o, Error *err) {
    const int L = p->rc.model.layers;
    int *counts = xmalloc(sizeof(int) * (size_t)p->S);
    int rc = o->split[0] ? partition_parse_split(o->split, L, p->S, counts, err)
                         : partition_balance(L, p->S, counts, err);
    p->stages = xcalloc((size_t)p->S, sizeof(StageModel *));
    p->opt = xcalloc((size_t)p->S, sizeof(AdamWState));
    for (int s = 0; s < p->S && rc == 0; s++) {
        const int begin = partition_first_layer(counts, s);
        p->stages[s] = stage_create(&p->rc.model, begin, begin + counts[s], s == 0, s == p->S - 1, p->rc.seed, err);
        if (!p->stages[s]) rc = -1;
        else p->opt[s] = adamw_state_create(p->stages[s]->numel);
    }
    free(counts);
    return rc;
}

// Most messages one rank receives in a step: enough mailbox buffers for any order.
static int max_receives(const Schedule *s) {
    int most = 0;
    for (int r = 0; r < s->n_ranks; r++) {
        int n = 0;
        for (int i = 0; i < s->ranks[r].n; i++) {
            ActionType t = s->ranks[r].actions[i].type;
            n += t == ACT_RECV_F || t == ACT_RECV_B;
        }
        if (n > most) most = n;
    }
    return most;
}

static void *pipeline_rank_main(void *arg);

static void start_ranks(Pipeline *p) {
    pthread_barrier_init(&p->start, NULL, (unsigned)p->P + 1);
    pthread_barrier_init(&p->computed, NULL, (unsigned)p->P);
    pthread_barrier_init(&p->finished, NULL, (unsigned)p->P + 1);
    p->ranks = xcalloc((size_t)p->P, sizeof(PipelineRank));
    p->threads = xcalloc((size_t)p->P, sizeof(pthread_t));
    for (int r = 0; r < p->P; r++) {
        p->ranks[r] = (PipelineRank){.p = p, .rank = r};
        // Like an allocation failure, a thread that cannot start ends the process.
        if (pthread_create(&p->threads[r], NULL, pipeline_rank_main, &p->ranks[r])) {
            fprintf(stderr, "pptrain: cannot start the thread of rank %d\n", r);
            exit(1);
        }
    }
}

Pipeline *pipeline_create(const RunConfig *rc, const PipelineOptions *o, Error *err) {
    if (run_config_validate(rc, err)) return NULL;
    if (o->ranks < 1 || o->timeout_s <= 0) {
        error_set(err, "--stages must be at least 1 (got %d) and the timeout positive (got %g s)", o->ranks,
                  o->timeout_s);
        return NULL;
    }
    Schedule *sched = pipeline_schedule(o, rc->microbatches, err);
    if (!sched) return NULL;
    Pipeline *p = xcalloc(1, sizeof *p);
    *p = (Pipeline){.rc = *rc, .P = sched->n_ranks, .S = sched->n_stages, .M = sched->n_microbatches,
                    .rows = rc->batch / rc->microbatches, .T = rc->seq_len, .sched = sched};
    if (build_stages(p, o, err)) {
        pipeline_free(p);
        return NULL;
    }
    const size_t msg_bytes = (size_t)p->rows * p->T * rc->model.hidden * sizeof(float);
    p->tp = transport_local_create(p->P, msg_bytes, max_receives(sched), o->timeout_s);
    p->rt = xcalloc((size_t)p->P, sizeof(Runtime *));
    for (int r = 0; r < p->P; r++) p->rt[r] = runtime_create(sched, r, p->stages, p->rows, p->T, p->tp);
    p->busy_ms = xcalloc((size_t)p->P, sizeof(double));
    p->peak_slots = xcalloc((size_t)p->S, sizeof(int));
    for (int s = 0; s < p->S; s++) p->peak_slots[s] = runtime_peak_slots(p->rt[sched->stage_rank[s]], s);
    start_ranks(p);
    return p;
}

// ---- the rank threads ----------------------------------------------------------------------

static bool all_ranks_ok(const Pipeline *p) {
    for (int r = 0; r < p->P; r++)
        if (p->ranks[r].status != RUNTIME_OK) return false;
    return true;
}

// sqrt of the squared gradients summed in rank order: the same value on every rank.
static double global_grad_norm(const Pipeline *p) {
    double sum = 0.0;
    for (int r = 0; r < p->P; r++) sum += p->ranks[r].sumsq;
    return sqrt(sum);
}

static void rank_run_actions(PipelineRank *pr) {
    Pipeline *p = pr->p;
    for (int s = 0; s < p->S; s++)
        if (p->sched->stage_rank[s] == pr->rank) stage_zero_grads(p->stages[s]);
    RuntimeStats st;
    pr->status = runtime_step(p->rt[pr->rank], p->inputs, p->targets, p->loss_scale, &st, &pr->err);
    pr->loss = st.loss;
    pr->busy_s = st.busy_s;
    pr->sumsq = 0.0;
    for (int s = 0; s < p->S; s++)
        if (p->sched->stage_rank[s] == pr->rank)
            pr->sumsq += grad_sum_squares(p->stages[s]->grads, p->stages[s]->numel);
}

// Clip (as torch.nn.utils.clip_grad_norm_) and AdamW on the rank's stages.
static void rank_update(PipelineRank *pr, double norm) {
    Pipeline *p = pr->p;
    const OptimConfig *oc = &p->rc.optim;
    const float clip = oc->grad_clip > 0 ? grad_clip_factor(norm, (float)oc->grad_clip) : 1.0f;
    for (int s = 0; s < p->S; s++) {
        if (p->sched->stage_rank[s] != pr->rank) continue;
        StageModel *sm = p->stages[s];
        if (clip < 1.0f) grad_scale(sm->grads, sm->numel, clip);
        adamw_state_step(&p->opt[s], sm->weights, sm->grads, oc, p->lr);
    }
}

static void *pipeline_rank_main(void *arg) {
    PipelineRank *pr = arg;
    Pipeline *p = pr->p;
    // The ranks share the cores: each rank's kernels get an equal part of the OpenMP threads.
    const int threads = omp_get_max_threads() / p->P;
    omp_set_num_threads(threads > 1 ? threads : 1);
    for (;;) {
        pthread_barrier_wait(&p->start);
        if (p->quit) return NULL;
        rank_run_actions(pr);
        pthread_barrier_wait(&p->computed);
        if (all_ranks_ok(p)) rank_update(pr, global_grad_norm(p));
        pthread_barrier_wait(&p->finished);
    }
}

// ---- steps ---------------------------------------------------------------------------------

static int count_targets(const int32_t *targets, size_t n) {
    int c = 0;
    for (size_t i = 0; i < n; i++) c += targets[i] >= 0;
    return c;
}

// The root cause: the first rank that failed on its own, else the first that was stopped.
static const Error *first_failure(const Pipeline *p) {
    for (int r = 0; r < p->P; r++)
        if (p->ranks[r].status == RUNTIME_FAILED) return &p->ranks[r].err;
    for (int r = 0; r < p->P; r++)
        if (p->ranks[r].status != RUNTIME_OK) return &p->ranks[r].err;
    return NULL;
}

static void fill_report(const Pipeline *p, int step, double seconds, PipelineReport *out) {
    const size_t tokens = (size_t)p->rc.batch * p->T;
    double loss = 0.0;
    for (int r = 0; r < p->P; r++) {
        loss += p->ranks[r].loss;
        p->busy_ms[r] = p->ranks[r].busy_s * 1e3;
    }
    out->step = (StepReport){.step = step + 1, .steps = p->rc.steps, .loss = loss, .lr = p->lr,
                             .grad_norm = global_grad_norm(p), .step_ms = seconds * 1e3,
                             .tokens_per_s = tokens / seconds,
                             .gflops = model_flops_per_token(&p->rc.model, p->T) * tokens / seconds * 1e-9};
    out->n_ranks = p->P;
    out->n_stages = p->S;
    out->busy_ms = p->busy_ms;
    out->peak_slots = p->peak_slots;
}

int pipeline_step(Pipeline *p, const int32_t *inputs, const int32_t *targets, int step, PipelineReport *out,
                  Error *err) {
    if (p->broken) {
        error_set(err, "the pipeline stopped after an earlier failure");
        return -1;
    }
    const double t0 = now_s();
    const int n_targets = count_targets(targets, (size_t)p->rc.batch * p->T);
    p->inputs = inputs;
    p->targets = targets;
    p->loss_scale = n_targets ? 1.0f / (float)n_targets : 0.0f;
    p->lr = optim_lr_at(&p->rc.optim, step);
    pthread_barrier_wait(&p->start);
    pthread_barrier_wait(&p->finished);
    const Error *fail = first_failure(p);
    if (fail) {
        p->broken = true;
        *err = *fail;
        return -1;
    }
    fill_report(p, step, now_s() - t0, out);
    return 0;
}

void pipeline_free(Pipeline *p) {
    if (!p) return;
    if (p->threads) {
        p->quit = true;
        pthread_barrier_wait(&p->start);
        for (int r = 0; r < p->P; r++) pthread_join(p->threads[r], NULL);
        pthread_barrier_destroy(&p->start);
        pthread_barrier_destroy(&p->computed);
        pthread_barrier_destroy(&p->finished);
    }
    for (int r = 0; p->rt && r < p->P; r++) runtime_free(p->rt[r]);
    transport_free(p->tp);
    for (int s = 0; p->stages && s < p->S; s++) {
        if (p->stages[s]) adamw_state_free(&p->opt[s]);
        stage_free(p->stages[s]);
    }
    free(p->rt);
    free(p->stages);
    free(p->opt);
    free(p->ranks);
    free(p->threads);
    free(p->busy_ms);
    free(p->peak_slots);
    schedule_free(p->sched);
    free(p);
}

int pipeline_n_stages(const Pipeline *p) { return p->S; }

const StageModel *pipeline_stage(const Pipeline *p, int stage) { return p->stages[stage]; }

const float *pipeline_weights(const Pipeline *p, const char *name, const ParamInfo **info) {
    for (int s = 0; s < p->S; s++) {
        const ParamInfo *pi = stage_find_param(p->stages[s], name);
        if (!pi) continue;
        if (info) *info = pi;
        return p->stages[s]->weights + pi->offset;
    }
    return NULL;
}
