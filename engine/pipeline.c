// The pipeline trainer: stages, schedule, transport and one runtime per rank. Every rank runs
// the same step (rank_step): actions, gradient all-reduce over its replicas, one world
// all-reduce of (squared gradients, loss, busy time) slots, clip, AdamW. Under the local
// transport the W ranks are threads living as long as the pipeline, released by the `start`
// barrier (the main thread has published the batch) and collected at `finished`; under MPI
// the process's one rank runs in the calling thread. Stages compute on the CPU or on a device
// backend (engine/model/stage_ops.h); the pipeline only calls the stage API, whichever it is.
#include "engine/pipeline.h"

#include <assert.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/clock.h"
#include "engine/hang_report.h"
#include "engine/model/stage_ops.h"
#include "engine/partition.h"
#include "engine/runtime.h"
#include "engine/transport/mpi_process.h"
#include "engine/rank_usage.h"
#include "engine/transport/node_threads.h"
#ifdef PPTRAIN_HAVE_NCCL
#endif
#include "engine/schedule/schedule.h"
#include "kernels/cpu/kernels.h"

// Generation's passes: the whole row, recomputed; the whole row keeping the prompt's keys and
// values (prefill); one token against them (decode).
typedef enum { GEN_FULL, GEN_PREFILL, GEN_DECODE } GenKind;

typedef struct {
    struct Pipeline *p;
    int world, pipe, replica;  // world rank = replica * P + pipe
    StageModel **stages;       // (S) this replica's stages; only this rank's are used
    AdamWState *opt;           // (S)
    Transport *view;           // the replica's window on the world transport
    Runtime *rt;
    Runtime *eval_rt;          // pipeline_eval's, made on this rank's thread by the first one
    Runtime *gen_rt;           // pipeline_logits', on gen_sched, one row; replica 0's with the logits tapped
    Runtime *dec_rt;           // pipeline_decode's, on gen_sched, one row of one token; tapped as gen_rt
    StageKV **kv;              // (S) generation's KV caches of this rank's stages (NULL elsewhere)
    RuntimeStatus status;
    Error err;
    double loss, busy_s;       // this rank's share of the step
    RankUsage usage;           // its CPU clocks (engine/rank_usage.h)
    float *tie_buf;            // (V*C) tied embeddings across ranks: this rank's part of E + H
    double *slots;             // (4W + n_tensors) world all-reduce: loss | busy | CPU seconds | resident
                               // bytes, a slot per rank each, then the squared gradient norm of each
                               // of the model's tensors (SLOT_* below)
    double norm, batch_loss;   // the step's totals, equal on every rank
} PipelineRank;

struct Pipeline {
    RunConfig rc;
    int P, D, W, S, M, rows, T;
    TransportKind kind;
    bool multiprocess;        // mpi or nccl: this process is one rank
    const StageDevice *dev;   // the stages' device backend; NULL: CPU stages
    char notice[256];         // "" or the line saying ranks outnumber this node's cores
    int host_ranks, host_cores;  // ranks on this node and the cores they may use (pipeline_host)
    int gpu;                  // nccl: this process's GPU
    int self;                 // world rank of this process (MPI), 0 under local
    int n_host;               // ranks hosted here: W (local) or 1 (MPI)
    int n_copies;             // replicas whose stages live here: D (local) or 1 (MPI)
    Schedule *sched;          // validated, lowered
    StageModel **stages;      // (n_copies * S), NULL where another process holds the stage
    AdamWState *opt;          // (n_copies * S)
    Transport *tp;            // the world transport
    PipelineRank *ranks;      // (n_host)
    pthread_t *threads;       // (n_host) local only
    pthread_barrier_t start, finished;
    // The step being run, written by the main thread before `start`.
    const int32_t *inputs, *targets;
    float loss_scale;
    double lr;
    bool update;              // false: pipeline_compute_grads
    bool eval;                // this round is pipeline_eval's forward-only pass
    Schedule *eval_sched;     // its schedule (schedule_forward_only), made by the first one
    bool gen;                 // this round is a generation pass (pipeline_logits, _prefill, _decode)
    GenKind gen_kind;         // which
    int32_t dec_tap;          // 0: the one position of pipeline_decode's one-token row
    Schedule *gen_sched;      // its schedule: forward only, one microbatch (of one row)
    int32_t gen_pos;          // its tapped position
    int32_t *gen_targets;     // (B*T) all -1: the last stage computes no loss that counts (run_step
                              // counts a training batch's targets; the pass reads the first T)
    float *gen_out;           // (V) the tapped logits, where replica 0's last stage runs
    int step;                 // 0-based, as published to the other ranks (progress.h)
    bool quit;
    bool broken;              // a step failed: the transport is aborted
    Error failure;            // when broken: the line that says why
    double *busy_ms, *cpu_pct, *rss_bytes;  // (W) report arrays
    int *peak_slots;          // (S)
    int *stage_layers;        // (S) decoder layers of each stage
    size_t msg_bytes;         // one message (stage_msg_bytes): fp32 on CPUs, bf16 on GPUs by default
    double *offsets;          // (W) clock offsets to rank 0
    // Events of the last step, root only: per rank a pointer into the runtime (local) or into
    // the gathered buffer (MPI).
    const ActionEvent **events;  // (W)
    int *n_events;               // (W)
    ActionEvent *event_buf;      // MPI root: (W * event_cap)
    int event_cap;               // most actions in one rank's list
    RuntimeOptions rt_opts;
    RankTelemetry *tele_ranks;   // (W)
    StageTelemetry *tele_stages; // (S)
};

// ---- set-up ------------------------------------------------------------------------------

// The schedule the registry resolves; a file must fit the run: its ranks and microbatches are
// the run's.
static Schedule *resolve_schedule(const PipelineOptions *o, int M, Error *err) {
    Schedule *s = schedule_resolve(o->schedule, o->ranks, M, o->virtual_stages, err);
    if (!s) return NULL;
    if (schedule_is_file(o->schedule) && (s->n_ranks != o->ranks || s->n_microbatches != M)) {
        error_set(err, "%s: the schedule has %d ranks and %d microbatches, the run %d ranks (--stages) and %d "
                       "microbatches", o->schedule, s->n_ranks, s->n_microbatches, o->ranks, M);
        schedule_free(s);
        return NULL;
    }
    return s;
}

// Built or loaded, then lowered and validated.
static Schedule *pipeline_schedule(const PipelineOptions *o, int M, Error *err) {
    Schedule *s = resolve_schedule(o, M, err);
    if (!s) return NULL;
    // Validated as written (errors name the user's actions), then run with weight gradients in
    // microbatch order (engine/schedule/schedule_order.c) and lowered.
    int bad = schedule_validate(s, err);
    if (!bad) {
        schedule_order_weight_grads(s);
        schedule_lower(s);
        bad = schedule_validate(s, err);
    }
    if (bad) {
        schedule_free(s);
        return NULL;
    }
    return s;
}

// Does this process hold copy c of stage s? Local: every stage of every replica; MPI: the
// stages of its own pipeline rank.
static bool holds(const Pipeline *p, int s) {
    return !p->multiprocess || p->sched->stage_rank[s] == p->self % p->P;
}

// Stages on a device: world rank r's stages go to device r mod (visible devices) under
// local, to this process's GPU under nccl.
static int attach_device(const Pipeline *p, const PipelineOptions *o, StageModel *sm, int world, Error *err) {
    const int device = p->multiprocess ? p->gpu : world % p->dev->device_count();
    return p->dev->attach(sm, device, !o->gpu_fp32, err);
}

// Stage s holds layers [first(s), first(s) + counts[s]); the embedding on 0, the head on S-1.
static int build_stages(Pipeline *p, const PipelineOptions *o, Error *err) {
    const int L = p->rc.model.layers;
    int *counts = p->stage_layers = xcalloc((size_t)p->S, sizeof(int));
    int rc = o->split[0] ? partition_parse_split(o->split, L, p->S, counts, err)
                         : partition_balance_model(&p->rc.model, p->T, p->S, counts, err);
    p->stages = xcalloc((size_t)(p->n_copies * p->S), sizeof(StageModel *));
    p->opt = xcalloc((size_t)(p->n_copies * p->S), sizeof(AdamWState));
    for (int c = 0; c < p->n_copies && rc == 0; c++)
        for (int s = 0; s < p->S && rc == 0; s++) {
            if (!holds(p, s)) continue;
            const int begin = partition_first_layer(counts, s), k = c * p->S + s;
            p->stages[k] = stage_create(&p->rc.model, begin, begin + counts[s], s == 0, s == p->S - 1, p->rc.seed, err);
            if (!p->stages[k]) rc = -1;
            else p->opt[k] = adamw_state_create(p->stages[k]->numel);
            if (rc == 0 && p->dev) rc = attach_device(p, o, p->stages[k], c * p->P + p->sched->stage_rank[s], err);
            if (rc == 0) p->msg_bytes = stage_msg_bytes(p->stages[k], p->rows, p->T);   // equal for every stage
        }
    return rc;
}

// Most messages one rank receives or sends in a step: enough transport buffers for any order.
static int max_messages(const Schedule *s) {
    int most = 0;
    for (int r = 0; r < s->n_ranks; r++) {
        int in = 0, out = 0;
        for (int i = 0; i < s->ranks[r].n; i++) {
            ActionType t = s->ranks[r].actions[i].type;
            in += t == ACT_RECV_F || t == ACT_RECV_B;
            out += t == ACT_SEND_F || t == ACT_SEND_B;
        }
        if (in > most) most = in;
        if (out > most) most = out;
    }
    return most;
}

static int longest_list(const Schedule *s) {
    int most = 0;
    for (int r = 0; r < s->n_ranks; r++)
        if (s->ranks[r].n > most) most = s->ranks[r].n;
    return most;
}

static int create_transport(Pipeline *p, const PipelineOptions *o, Error *err) {
    // One message (stage_msg_bytes, before the stages exist): fp32 on the CPU; on a device,
    // the backend's low-precision format unless fp32.
    const size_t elem = p->dev ? p->dev->msg_elem_bytes(!o->gpu_fp32) : sizeof(float);
    const TransportSetup setup = {.mpi_comm = o->mpi_comm, .P = p->P, .D = p->D, .sched = p->sched,
                                  .msg_bytes = (size_t)p->rows * p->T * p->rc.model.hidden * elem,
                                  .capacity = max_messages(p->sched), .timeout_s = o->timeout_s,
                                  .mem = p->dev ? p->dev->mailboxes : NULL,
                                  .set_device = p->dev ? p->dev->set_device : NULL};
    TransportOpened opened;
    if (transport_open(p->kind, &setup, &opened, err)) return -1;
    p->tp = opened.tp;
    p->self = opened.self;
    if (opened.gpu >= 0) p->gpu = opened.gpu;
    return 0;
}

// The all-reduce's sections, each W slots long but the last (SLOT_NORM: one per tensor).
enum { SLOT_LOSS, SLOT_BUSY, SLOT_CPU, SLOT_RSS, SLOT_NORM };

static size_t n_slots(const Pipeline *p) {
    return SLOT_NORM * (size_t)p->W + (size_t)model_param_tensors(&p->rc.model);
}

// Tied embeddings whose embedding and head live on different pipeline ranks (rank_tie_embeddings).
static bool tie_across_ranks(const Pipeline *p) {
    return p->rc.model.tie_word_embeddings && p->sched->stage_rank[0] != p->sched->stage_rank[p->S - 1];
}

// World rank `world` hosted at index i of p->ranks: its replica's stages, view and runtime.
static void init_rank(Pipeline *p, PipelineRank *pr, int world) {
    const int copy = p->multiprocess ? 0 : world / p->P;
    *pr = (PipelineRank){.p = p, .world = world, .pipe = world % p->P, .replica = world / p->P,
                         .stages = p->stages + copy * p->S, .opt = p->opt + copy * p->S};
    pr->view = transport_view_create(p->tp, pr->replica * p->P, p->P);
    pr->rt = runtime_create_opts(p->sched, pr->pipe, pr->stages, p->rows, p->T, pr->view, &p->rt_opts);
    pr->slots = xcalloc(n_slots(p), sizeof(double));
    if (tie_across_ranks(p)) pr->tie_buf = xmalloc((size_t)p->rc.model.vocab * p->rc.model.hidden * sizeof(float));
}

// Peak slots of every stage, from replica 0's runtimes (a world all-reduce under MPI).
static int gather_peak_slots(Pipeline *p, Error *err) {
    double *peak = xcalloc((size_t)p->S, sizeof(double));
    for (int i = 0; i < p->n_host; i++)
        if (p->ranks[i].replica == 0)
            for (int s = 0; s < p->S; s++) peak[s] += runtime_peak_slots(p->ranks[i].rt, s);
    TransportStatus st = p->multiprocess
                             ? transport_allreduce_f64(p->tp, p->self, GROUP_WORLD, peak, (size_t)p->S, err)
                             : TRANSPORT_OK;
    for (int s = 0; s < p->S; s++) p->peak_slots[s] = (int)peak[s];
    free(peak);
    return st == TRANSPORT_OK ? 0 : -1;
}

static void *pipeline_rank_main(void *arg);

static void start_threads(Pipeline *p) {
    pthread_barrier_init(&p->start, NULL, (unsigned)p->W + 1);
    pthread_barrier_init(&p->finished, NULL, (unsigned)p->W + 1);
    p->threads = xcalloc((size_t)p->W, sizeof(pthread_t));
    for (int r = 0; r < p->W; r++)
        // Like an allocation failure, a thread that cannot start ends the process.
        if (pthread_create(&p->threads[r], NULL, pipeline_rank_main, &p->ranks[r])) {
            fprintf(stderr, "pptrain: cannot start the thread of rank %d\n", r);
            exit(1);
        }
}

static int recv_tag(const Schedule *s, Action a, int *from) {
    const bool fwd = a.type == ACT_RECV_F;
    const int sender = fwd ? a.stage - 1 : a.stage + 1;
    *from = s->stage_rank[sender];
    return transport_tag(fwd ? MSG_ACT : MSG_GRAD, sender, a.mb, s->n_stages);
}

// What this process's rank says when mpirun stops it: for each tag it receives, the action,
// as the runtime names it (" at action K (RECV_B 2,mb 3)").
static MpiLastWords last_words(const Pipeline *p) {
    const Schedule *s = p->sched;
    MpiLastWords w = {.world = p->self, .first_stage = -1, .n_tags = 2 * s->n_microbatches * s->n_stages};
    w.at = xcalloc((size_t)w.n_tags, sizeof *w.at);
    w.stage = xcalloc((size_t)w.n_tags, sizeof(int));
    const ScheduleList *l = &s->ranks[p->self % p->P];
    for (int i = 0; i < l->n; i++) {
        const Action a = l->actions[i];
        if (w.first_stage < 0) w.first_stage = a.stage;
        if (a.type != ACT_RECV_F && a.type != ACT_RECV_B) continue;
        int from;
        const int tag = recv_tag(s, a, &from);
        snprintf(w.at[tag], sizeof w.at[tag], " at action %d (%s %d,mb %d)", i, schedule_type_name(a.type), a.stage,
                 a.mb);
        w.stage[tag] = a.stage;
    }
    return w;
}

// Ranks, report arrays, clock offsets; MPI: last words on a signal; local: the rank threads.
static int start_ranks(Pipeline *p, Error *err) {
    p->n_host = p->multiprocess ? 1 : p->W;
    p->ranks = xcalloc((size_t)p->n_host, sizeof(PipelineRank));
    for (int i = 0; i < p->n_host; i++) init_rank(p, &p->ranks[i], p->multiprocess ? p->self : i);
    if (p->multiprocess) rank_usage_attach(&p->ranks[0].usage, true);
    p->busy_ms = xcalloc((size_t)p->W, sizeof(double));
    p->cpu_pct = xcalloc((size_t)p->W, sizeof(double));
    p->rss_bytes = xcalloc((size_t)p->W, sizeof(double));
    p->peak_slots = xcalloc((size_t)p->S, sizeof(int));
    p->offsets = xcalloc((size_t)p->W, sizeof(double));
    p->events = xcalloc((size_t)p->W, sizeof(ActionEvent *));
    p->n_events = xcalloc((size_t)p->W, sizeof(int));
    p->tele_ranks = xcalloc((size_t)p->W, sizeof(RankTelemetry));
    p->tele_stages = xcalloc((size_t)p->S, sizeof(StageTelemetry));
    p->event_cap = longest_list(p->sched);
    if (!p->multiprocess) {
        start_threads(p);
        return gather_peak_slots(p, err);
    }
    if (p->self == 0) p->event_buf = xcalloc((size_t)p->W * (size_t)p->event_cap, sizeof(ActionEvent));
    if (transport_clock_offsets(p->tp, p->self, p->offsets, err) != TRANSPORT_OK) return -1;
    if (gather_peak_slots(p, err)) return -1;
    mpi_process_watch(p->tp, last_words(p));
    return 0;
}

// Ranks as threads share this process's OpenMP threads (pipeline_rank_main): say so when they
// outnumber its cores.
static void describe_local_threads(Pipeline *p) {
    const int per_rank = omp_get_max_threads() / p->W;
    const NodeThreads t = {.threads = per_rank > 1 ? per_rank : 1, .node_ranks = p->W,
                           .node_cores = telemetry_host_cores(),
                           .oversubscribed = (long)(per_rank > 1 ? per_rank : 1) * p->W > telemetry_host_cores()};
    node_threads_describe(&t, p->notice, sizeof p->notice);
}

const char *pipeline_notice(const Pipeline *p) { return p->notice; }

void pipeline_host(const Pipeline *p, int *ranks, int *cores) {
    *ranks = p->host_ranks;
    *cores = p->host_cores;
}

Pipeline *pipeline_create(const RunConfig *rc, const PipelineOptions *o, Error *err) {
    if (pipeline_check_options(rc, o, err)) return NULL;
    const StageDevice *dev = o->device == DEVICE_CPU ? NULL : stage_device_find(o->device, err);
    if (o->device != DEVICE_CPU && !dev) return NULL;
    const bool multiprocess = transport_multi_process(o->transport);
    if (multiprocess && mpi_process_init(err)) return NULL;
    // Each rank of an mpirun job takes its share of its node's cores (engine/transport/node_threads.h).
    const NodeThreads threads = multiprocess ? node_threads_apply(o->mpi_comm) : (NodeThreads){0};
    Schedule *sched = pipeline_schedule(o, rc->microbatches, err);
    if (!sched) return NULL;
    Pipeline *p = xcalloc(1, sizeof *p);
    const int P = sched->n_ranks, D = o->dp;
    *p = (Pipeline){.rc = *rc, .P = P, .D = D, .W = P * D, .S = sched->n_stages, .M = sched->n_microbatches,
                    .rows = rc->batch / (D * rc->microbatches), .T = rc->seq_len, .kind = o->transport,
                    .multiprocess = multiprocess, .dev = dev, .n_copies = multiprocess ? 1 : D, .sched = sched,
                    .rt_opts = {.recompute = o->recompute, .post_one_ahead = transport_post_one_ahead(o->transport)}};
    if (p->multiprocess) node_threads_describe(&threads, p->notice, sizeof p->notice);
    else describe_local_threads(p);
    // mpirun binds each rank to its own cores: the node's are the union (node_threads), not this
    // rank's mask.
    p->host_ranks = p->multiprocess ? threads.node_ranks : p->W;
    p->host_cores = p->multiprocess ? threads.node_cores : telemetry_host_cores();
    // The transport first: under MPI it says which rank this process is, hence which stages.
    if (create_transport(p, o, err) || build_stages(p, o, err) || start_ranks(p, err)) {
        pipeline_free(p);
        return NULL;
    }
    return p;
}

// ---- one rank's step -----------------------------------------------------------------------

static bool rank_has(const PipelineRank *pr, int s) { return pr->p->sched->stage_rank[s] == pr->pipe; }

static void rank_zero_grads(PipelineRank *pr) {
    for (int s = 0; s < pr->p->S; s++)
        if (rank_has(pr, s)) stage_zero_grads(pr->stages[s]);
}

// A collective or post failed: one line naming the rank, and every other rank is stopped.
static void rank_failed(PipelineRank *pr, TransportStatus st, const Error *why, const char *where) {
    const Pipeline *p = pr->p;
    int stage = 0;
    while (stage < p->S - 1 && !rank_has(pr, stage)) stage++;
    error_set(&pr->err, "rank %d (stage %d): %s %s", pr->world, stage, why->msg, where);
    pr->status = st == TRANSPORT_ABORTED ? RUNTIME_ABORTED : RUNTIME_FAILED;
    transport_abort(p->tp);
}

// Announces the step's receives, so MPI receives into its buffers as soon as data arrives.
// Not over nccl, where the runtime posts them one at a time (RuntimeOptions.post_one_ahead).
static int rank_post_receives(PipelineRank *pr) {
    const Pipeline *p = pr->p;
    if (p->rt_opts.post_one_ahead) return 0;   // the runtime posts them, one at a time
    const ScheduleList *l = &p->sched->ranks[pr->pipe];
    const size_t bytes = p->msg_bytes;   // what the sender sends: NCCL needs the two sizes equal
    for (int i = 0; i < l->n; i++) {
        const Action a = l->actions[i];
        if (a.type != ACT_RECV_F && a.type != ACT_RECV_B) continue;
        int from;
        const int tag = recv_tag(p->sched, a, &from);
        Error why;
        TransportStatus st = transport_post(pr->view, pr->pipe, from, tag, bytes, &why);
        if (st != TRANSPORT_OK) {
            rank_failed(pr, st, &why, "posting the step's receives");
            return -1;
        }
    }
    return 0;
}

static int rank_run_actions(PipelineRank *pr) {
    Pipeline *p = pr->p;
    // Replica d's rows of the global batch.
    const size_t off = (size_t)pr->replica * p->M * p->rows * p->T;
    RuntimeStats st;
    pr->status = runtime_step(pr->rt, p->inputs + off, p->targets + off, p->loss_scale, &st, &pr->err);
    pr->loss = st.loss;
    pr->busy_s = st.busy_s;
    if (pr->status != RUNTIME_OK && p->D > 1) {
        Error why = pr->err;
        error_set(&pr->err, "replica %d: %s", pr->replica, why.msg);
    }
    return pr->status == RUNTIME_OK ? 0 : -1;
}

// Sums each local stage's gradients over the D replicas that hold it: in device memory under
// nccl, whose collectives add device memory; elsewhere in host memory, which a stage on a
// device fills from it and takes back (stage_reduce_begin / _end).
static int rank_reduce_grads(PipelineRank *pr) {
    const Pipeline *p = pr->p;
    if (p->D == 1) return 0;
    const bool device = transport_device_collectives(p->kind);
    transport_mark(pr->view, pr->pipe, PROGRESS_GRADS);
    for (int s = 0; s < p->S; s++) {
        if (!rank_has(pr, s)) continue;
        StageModel *sm = pr->stages[s];
        float *grads = stage_reduce_begin(sm, device);
        Error why;
        TransportStatus st = transport_allreduce_f32(pr->view, pr->pipe, GROUP_REPLICAS, grads, sm->numel, &why);
        if (st == TRANSPORT_OK) stage_reduce_end(sm, device);
        if (st != TRANSPORT_OK) {
            rank_failed(pr, st, &why, "(the gradient all-reduce over replicas)");
            return -1;
        }
    }
    return 0;
}

// One world all-reduce where each rank fills only its own slots, so every sum is exact and
// every rank then adds them up in the same fixed order: the loss over all ranks in world (=
// replica) order, the squared norm over the model's tensors in their global order (replica 0
// fills them, each stage's tensors at stage_param_base) as reference_grad_norm adds them on one
// device. A stage on a device may give one sum for all its tensors, at its first tensor's slot.
static void fill_norm_slots(PipelineRank *pr, double *norm_slots) {
    const Pipeline *p = pr->p;
    for (int s = 0; s < p->S && pr->replica == 0; s++) {
        if (!rank_has(pr, s)) continue;
        const StageModel *sm = pr->stages[s];
        stage_grad_sum_squares(sm, norm_slots + stage_param_base(sm));
    }
}

static int rank_reduce_totals(PipelineRank *pr) {
    const Pipeline *p = pr->p;
    const int W = p->W;
    const size_t n = n_slots(p);
    memset(pr->slots, 0, sizeof(double) * n);
    fill_norm_slots(pr, pr->slots + SLOT_NORM * W);
    // The norm's wait has the device past the step's actions: a GPU stage's busy time is
    // device time from here (runtime_device_times).
    pr->busy_s = runtime_device_times(pr->rt);
    pr->slots[SLOT_LOSS * W + pr->world] = pr->loss;
    pr->slots[SLOT_BUSY * W + pr->world] = pr->busy_s;
    pr->slots[SLOT_CPU * W + pr->world] = rank_usage_cpu_delta(&pr->usage);
    pr->slots[SLOT_RSS * W + pr->world] = rank_usage_rss_bytes();
    transport_mark(pr->view, pr->pipe, PROGRESS_NORM);
    Error why;
    TransportStatus st = transport_allreduce_f64(pr->view, pr->pipe, GROUP_WORLD, pr->slots, n, &why);
    if (st != TRANSPORT_OK) {
        rank_failed(pr, st, &why, "(the norm and loss all-reduce)");
        return -1;
    }
    double norm2 = 0.0, loss = 0.0;
    for (size_t i = SLOT_NORM * (size_t)W; i < n; i++) norm2 += pr->slots[i];
    for (int r = 0; r < W; r++) loss += pr->slots[SLOT_LOSS * W + r];
    pr->norm = sqrt(norm2);
    pr->batch_loss = loss;
    return 0;
}

// Clip (as torch.nn.utils.clip_grad_norm_) and AdamW on the rank's stages.
static void rank_update(PipelineRank *pr) {
    Pipeline *p = pr->p;
    const OptimConfig *oc = &p->rc.optim;
    const float clip = oc->grad_clip > 0 ? grad_clip_factor(pr->norm, (float)oc->grad_clip) : 1.0f;
    for (int s = 0; s < p->S; s++)
        if (rank_has(pr, s)) stage_update(pr->stages[s], &pr->opt[s], oc, p->lr, clip);
}

// Tied embeddings split across ranks: the first stage's rank holds E (the embedding's
// gradient), the last stage's H (the head copy's), each summed over replicas already. One
// world all-reduce in which replica 0's two holders give E and H and everyone else zeros gives
// every holder E + H (adding zeros is exact, so any order of the sum gives these bits, the
// bits stage_tie_grads makes on one stage). Megatron all-reduces the same matrix between the
// first and last stage.
static int rank_tie_embeddings(PipelineRank *pr) {
    Pipeline *p = pr->p;
    if (!p->rc.model.tie_word_embeddings || p->dev) return 0;   // GPU stages share one matrix
    if (!tie_across_ranks(p)) {   // one rank holds both: one stage (P = 1), or zb-v's first and last
        if (!rank_has(pr, 0)) return 0;
        if (p->S == 1) {
            stage_tie_grads(pr->stages[0]);
            return 0;
        }
        float *e = stage_tied_grad(pr->stages[0]);
        const float *h = stage_tied_grad(pr->stages[p->S - 1]);
        const size_t n = (size_t)p->rc.model.vocab * p->rc.model.hidden;
        for (size_t i = 0; i < n; i++) e[i] += h[i];
        stage_tie_set(pr->stages[p->S - 1], e);
        return 0;
    }
    const size_t n = (size_t)p->rc.model.vocab * p->rc.model.hidden;
    memset(pr->tie_buf, 0, n * sizeof(float));
    for (int s = 0; s < p->S && pr->replica == 0; s++)
        if ((s == 0 || s == p->S - 1) && rank_has(pr, s))
            memcpy(pr->tie_buf, stage_tied_grad(pr->stages[s]), n * sizeof(float));
    Error why;
    TransportStatus st = transport_allreduce_f32(pr->view, pr->pipe, GROUP_WORLD, pr->tie_buf, n, &why);
    if (st != TRANSPORT_OK) {
        rank_failed(pr, st, &why, "(the tied embeddings' all-reduce)");
        return -1;
    }
    for (int s = 0; s < p->S; s++)
        if ((s == 0 || s == p->S - 1) && rank_has(pr, s)) stage_tie_set(pr->stages[s], pr->tie_buf);
    return 0;
}

static void rank_step(PipelineRank *pr) {
    pr->status = RUNTIME_OK;
    transport_mark_step(pr->view, pr->pipe, pr->p->step);
    rank_zero_grads(pr);
    if (rank_post_receives(pr) || rank_run_actions(pr) || rank_reduce_grads(pr) || rank_tie_embeddings(pr) ||
        rank_reduce_totals(pr))
        return;
    if (pr->p->update) rank_update(pr);
    transport_mark(pr->view, pr->pipe, PROGRESS_IDLE);
}

// Forward only over the same microbatches; the loss summed over every rank as in a step.
static void rank_eval(PipelineRank *pr) {
    Pipeline *p = pr->p;
    pr->status = RUNTIME_OK;
    if (!pr->eval_rt) pr->eval_rt = runtime_create(p->eval_sched, pr->pipe, pr->stages, p->rows, p->T, pr->view);
    const size_t off = (size_t)pr->replica * p->M * p->rows * p->T;
    RuntimeStats st;
    pr->status = runtime_step(pr->eval_rt, p->inputs + off, p->targets + off, p->loss_scale, &st, &pr->err);
    if (pr->status != RUNTIME_OK) return;
    const int W = p->W;
    memset(pr->slots, 0, sizeof(double) * (size_t)W);
    pr->slots[pr->world] = st.loss;
    Error why;
    TransportStatus ts = transport_allreduce_f64(pr->view, pr->pipe, GROUP_WORLD, pr->slots, (size_t)W, &why);
    if (ts != TRANSPORT_OK) {
        rank_failed(pr, ts, &why, "(the validation loss all-reduce)");
        return;
    }
    double loss = 0.0;
    for (int r = 0; r < W; r++) loss += pr->slots[r];
    pr->batch_loss = loss;
    transport_mark(pr->view, pr->pipe, PROGRESS_IDLE);
}

// The runtime of a generation pass of this kind, made by the first one, with the KV caches
// of this rank's stages (made by the first prefill) and replica 0's last stage tapped.
static Runtime *rank_gen_runtime(PipelineRank *pr) {
    Pipeline *p = pr->p;
    const bool decode = p->gen_kind == GEN_DECODE;
    if (p->gen_kind != GEN_FULL && !pr->kv) {
        pr->kv = xcalloc((size_t)p->S, sizeof(StageKV *));
        for (int s = 0; s < p->S; s++)
            if (rank_has(pr, s)) pr->kv[s] = stage_kv_create(pr->stages[s], p->T);
    }
    Runtime **rt = decode ? &pr->dec_rt : &pr->gen_rt;
    if (!*rt) {
        *rt = runtime_create(p->gen_sched, pr->pipe, pr->stages, 1, decode ? 1 : p->T, pr->view);
        if (pr->replica == 0) runtime_tap_logits(*rt, decode ? &p->dec_tap : &p->gen_pos, p->gen_out);
    }
    runtime_use_kv(*rt, p->gen_kind == GEN_FULL ? NULL : pr->kv, &p->gen_pos, decode);
    return *rt;
}

// Generation: one row forward only; replica 0's last stage taps its logits into gen_out.
static void rank_logits(PipelineRank *pr) {
    Pipeline *p = pr->p;
    pr->status = RUNTIME_OK;
    RuntimeStats st;
    pr->status = runtime_step(rank_gen_runtime(pr), p->inputs, p->targets, 0.0f, &st, &pr->err);
    if (pr->status == RUNTIME_OK) transport_mark(pr->view, pr->pipe, PROGRESS_IDLE);
}

static void rank_work(PipelineRank *pr) {
    if (pr->p->gen) rank_logits(pr);
    else if (pr->p->eval) rank_eval(pr);
    else rank_step(pr);
}

static void *pipeline_rank_main(void *arg) {
    PipelineRank *pr = arg;
    Pipeline *p = pr->p;
    // The ranks share the cores: each rank's kernels get an equal part of the OpenMP threads.
    const int threads = omp_get_max_threads() / p->W;
    omp_set_num_threads(threads > 1 ? threads : 1);
    rank_usage_attach(&pr->usage, false);
    // Stages on a device: this thread launches on its stages' device (a rank's stages share one).
    for (int s = 0; s < p->S; s++)
        if (rank_has(pr, s)) {
            stage_bind_thread(pr->stages[s]);
            break;
        }
    for (;;) {
        pthread_barrier_wait(&p->start);
        if (p->quit) return NULL;
        rank_work(pr);
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
    for (int i = 0; i < p->n_host; i++)
        if (p->ranks[i].status == RUNTIME_FAILED) return &p->ranks[i].err;
    for (int i = 0; i < p->n_host; i++)
        if (p->ranks[i].status != RUNTIME_OK) return &p->ranks[i].err;
    return NULL;
}

static void say_now_and_only(const Error *err) {
    fprintf(stderr, "pptrain: %s\n", err->msg);
    const int null_fd = open("/dev/null", O_WRONLY);
    if (null_fd >= 0) dup2(null_fd, STDERR_FILENO), close(null_fd);
}

// The first failure of the run: every rank is stopped, and err, this process's one line, gains
// the rank that stopped making progress, read from every rank's progress slot (hang_report.h).
static void pipeline_broke(Pipeline *p, Error *err) {
    p->broken = true;
    if (p->multiprocess) mpi_process_failed();
    transport_abort(p->tp);
    const ProgressCulprit culprit = transport_culprit(p->tp);
    hang_report(p->gen ? p->gen_sched : p->eval ? p->eval_sched : p->sched, p->P, p->self, &culprit, err);
    p->failure = *err;
    // mpirun's SIGTERM comes with a SIGKILL a second later, which can land while rank 0 still
    // records the failed run: its line goes out now, and is the last (stderr then goes nowhere,
    // so the console's copy of it is not a second line).
    if (p->multiprocess && p->self == 0 && mpi_process_signal_name()) say_now_and_only(err);
}

// "rank 1 (stage 1): <why> <where>", for a failure outside the ranks' steps (MPI: one rank here).
static void own_failure(const Pipeline *p, const Error *why, const char *where, Error *err) {
    const PipelineRank *pr = &p->ranks[0];
    int stage = 0;
    while (stage < p->S - 1 && !rank_has(pr, stage)) stage++;
    error_set(err, "rank %d (stage %d): %s %s", pr->world, stage, why->msg, where);
}

// Runs every hosted rank through one step; 0, or -1 with the root cause in err.
static int run_step(Pipeline *p, const int32_t *inputs, const int32_t *targets, bool update, Error *err) {
    if (p->broken) {
        error_set(err, "the pipeline stopped after an earlier failure");
        return -1;
    }
    const int n_targets = count_targets(targets, (size_t)p->rc.batch * p->T);
    p->inputs = inputs;
    p->targets = targets;
    p->loss_scale = n_targets ? 1.0f / (float)n_targets : 0.0f;
    p->update = update;
    if (!p->multiprocess) {
        pthread_barrier_wait(&p->start);
        pthread_barrier_wait(&p->finished);
    } else {
        rank_work(&p->ranks[0]);
    }
    const Error *fail = first_failure(p);
    if (!fail) return 0;
    *err = *fail;
    pipeline_broke(p, err);
    return -1;
}

// Every rank's events of the step at the root: pointers (local) or a gather (MPI).
static int collect_events(Pipeline *p, Error *err) {
    if (!p->multiprocess) {
        for (int r = 0; r < p->W; r++) p->events[r] = runtime_events(p->ranks[r].rt, &p->n_events[r]);
        return 0;
    }
    int n = 0;
    const ActionEvent *mine = runtime_events(p->ranks[0].rt, &n);
    const size_t cap = (size_t)p->event_cap * sizeof(ActionEvent);
    size_t *counts = p->self == 0 ? xcalloc((size_t)p->W, sizeof(size_t)) : NULL;
    TransportStatus st = transport_gather_bytes(p->tp, p->self, mine, (size_t)n * sizeof(ActionEvent), p->event_buf,
                                                cap, counts, err);
    for (int r = 0; counts && r < p->W; r++) {
        p->events[r] = p->event_buf + (size_t)r * p->event_cap;
        p->n_events[r] = (int)(counts[r] / sizeof(ActionEvent));
    }
    free(counts);
    return st == TRANSPORT_OK ? 0 : -1;
}

// Over all W ranks (the bubble counts every replica); a stage's busy and comm time add up its
// copies on every replica, and its rank is the pipeline rank that holds it.
static void fill_telemetry(Pipeline *p, PipelineReport *out) {
    out->telemetry = (StepTelemetry){.ranks = p->tele_ranks, .stages = p->tele_stages};
    // Threads of one process share a clock, and their messages never leave memory: no offsets,
    // so no wire time (telemetry.h).
    telemetry_summarize(p->W, p->S, p->sched->stage_rank, (const ActionEvent *const *)p->events, p->n_events,
                        p->multiprocess ? p->offsets : NULL, &out->telemetry);
    out->has_telemetry = true;
}

static void fill_report(const Pipeline *p, int step, double seconds, PipelineReport *out) {
    const PipelineRank *pr = &p->ranks[0];
    const size_t tokens = (size_t)p->rc.batch * p->T;
    const int W = p->W;
    for (int r = 0; r < W; r++) {
        p->busy_ms[r] = pr->slots[SLOT_BUSY * W + r] * 1e3;
        p->cpu_pct[r] = pr->slots[SLOT_CPU * W + r] / seconds * 100.0;
        p->rss_bytes[r] = pr->slots[SLOT_RSS * W + r];
    }
    *out = (PipelineReport){.is_root = p->self == 0, .n_ranks = W, .n_stages = p->S, .n_replicas = p->D,
                            .busy_ms = p->busy_ms, .cpu_pct = p->cpu_pct, .rss_bytes = p->rss_bytes,
                            .rss_per_rank = p->multiprocess, .peak_slots = p->peak_slots};
    out->step = (StepReport){.step = step + 1, .steps = p->rc.steps, .loss = pr->batch_loss, .lr = p->lr,
                             .grad_norm = pr->norm, .step_ms = seconds * 1e3, .tokens_per_s = tokens / seconds,
                             .gflops = model_flops_per_token(&p->rc.model, p->T) * tokens / seconds * 1e-9};
}

int pipeline_step(Pipeline *p, const int32_t *inputs, const int32_t *targets, int step, PipelineReport *out,
                  Error *err) {
    const double t0 = clock_now_s();
    mpi_process_set_step(step);
    p->step = step;
    p->lr = optim_lr_at(&p->rc.optim, step);
    if (run_step(p, inputs, targets, true, err)) return -1;
    fill_report(p, step, clock_now_s() - t0, out);
    Error why;
    if (collect_events(p, &why)) {
        own_failure(p, &why, "(the telemetry gather)", err);
        pipeline_broke(p, err);
        return -1;
    }
    if (pipeline_is_root(p)) fill_telemetry(p, out);
    return 0;
}

int pipeline_eval(Pipeline *p, const int32_t *inputs, const int32_t *targets, double *loss, Error *err) {
    if (!p->eval_sched) p->eval_sched = schedule_forward_only(p->sched);
    p->eval = true;
    const int rc = run_step(p, inputs, targets, false, err);
    p->eval = false;
    if (rc) return -1;
    *loss = p->ranks[0].batch_loss;
    return 0;
}

// Under MPI the logits come from the process of replica 0's last stage.
static int gather_logits(Pipeline *p, Error *err) {
    const size_t bytes = (size_t)p->rc.model.vocab * sizeof(float);
    const bool mine = p->self < p->P && pipeline_hosts_stage(p, p->S - 1);
    char *all = NULL;
    size_t len = 0;
    if (pipeline_gather_bytes(p, p->gen_out, mine ? bytes : 0, &all, &len, "the generated token's logits", err)) return -1;
    if (p->self == 0) {
        assert(len == bytes);
        memcpy(p->gen_out, all, len);
    }
    free(all);
    return 0;
}

// A generation pass of this kind: tokens (T, or the one token of a decode), the position tapped.
static int gen_pass(Pipeline *p, GenKind kind, const int32_t *tokens, int pos, float *logits, Error *err) {
    assert(pos >= 0 && pos < p->T);
    const size_t V = (size_t)p->rc.model.vocab;
    if (!p->gen_sched) {
        p->gen_sched = schedule_forward_only_m(p->sched, 1);
        p->gen_out = xcalloc(V, sizeof(float));
        const size_t n = (size_t)p->rc.batch * p->T;
        p->gen_targets = xmalloc(n * sizeof(int32_t));
        for (size_t i = 0; i < n; i++) p->gen_targets[i] = -1;
    }
    p->gen_pos = pos;
    p->gen_kind = kind;
    p->gen = true;
    const int rc = run_step(p, tokens, p->gen_targets, false, err);
    p->gen = false;
    if (rc || (p->multiprocess && gather_logits(p, err))) return -1;
    if (pipeline_is_root(p)) memcpy(logits, p->gen_out, V * sizeof(float));
    return 0;
}

int pipeline_logits(Pipeline *p, const int32_t *tokens, int pos, float *logits, Error *err) {
    return gen_pass(p, GEN_FULL, tokens, pos, logits, err);
}

int pipeline_prefill(Pipeline *p, const int32_t *tokens, int n, float *logits, Error *err) {
    assert(n >= 1);
    return gen_pass(p, GEN_PREFILL, tokens, n - 1, logits, err);
}

int pipeline_decode(Pipeline *p, int32_t token, int pos, float *logits, Error *err) {
    return gen_pass(p, GEN_DECODE, &token, pos, logits, err);
}

int pipeline_compute_grads(Pipeline *p, const int32_t *inputs, const int32_t *targets, double *loss, Error *err) {
    if (run_step(p, inputs, targets, false, err)) return -1;
    *loss = p->ranks[0].batch_loss;
    return 0;
}

static void stop_threads(Pipeline *p) {
    p->quit = true;
    pthread_barrier_wait(&p->start);
    for (int r = 0; r < p->W; r++) pthread_join(p->threads[r], NULL);
    pthread_barrier_destroy(&p->start);
    pthread_barrier_destroy(&p->finished);
}

static void free_ranks(Pipeline *p) {
    for (int i = 0; p->ranks && i < p->n_host; i++) {
        runtime_free(p->ranks[i].rt);
        runtime_free(p->ranks[i].eval_rt);
        runtime_free(p->ranks[i].gen_rt);
        runtime_free(p->ranks[i].dec_rt);
        for (int s = 0; p->ranks[i].kv && s < p->S; s++) stage_kv_free(p->ranks[i].kv[s]);
        free(p->ranks[i].kv);
        transport_free(p->ranks[i].view);
        free(p->ranks[i].slots);
        free(p->ranks[i].tie_buf);
    }
    free(p->ranks);
}

void pipeline_free(Pipeline *p) {
    if (!p) return;
    if (p->threads) stop_threads(p);
    if (p->multiprocess) mpi_process_unwatch(p->tp);
    // The transport before the ranks' slots: after a failed nccl step its posted receives
    // still spin on the GPU until it aborts them, and freeing device memory waits for the
    // whole GPU. The ranks' views only borrow it and are freed without touching it.
    transport_free(p->tp);
    free_ranks(p);
    for (int k = 0; p->stages && k < p->n_copies * p->S; k++) {
        if (p->stages[k]) adamw_state_free(&p->opt[k]);
        stage_free(p->stages[k]);
    }
    free(p->stages);
    free(p->opt);
    free(p->threads);
    free(p->busy_ms);
    free(p->cpu_pct);
    free(p->rss_bytes);
    free(p->peak_slots);
    free(p->stage_layers);
    free(p->offsets);
    free(p->events);
    free(p->n_events);
    free(p->event_buf);
    free(p->tele_ranks);
    free(p->tele_stages);
    schedule_free(p->sched);
    schedule_free(p->eval_sched);
    schedule_free(p->gen_sched);
    free(p->gen_targets);
    free(p->gen_out);
    free(p);
}

// ---- queries -------------------------------------------------------------------------------

int pipeline_stage_layers(const Pipeline *p, int stage) { return p->stage_layers[stage]; }

int pipeline_n_stages(const Pipeline *p) { return p->S; }

const StageModel *pipeline_stage(const Pipeline *p, int stage) {
    return stage >= 0 && stage < p->S ? p->stages[stage] : NULL;
}

bool pipeline_hosts_stage(const Pipeline *p, int stage) { return pipeline_stage(p, stage) != NULL; }

const float *pipeline_weights(const Pipeline *p, const char *name, const ParamInfo **info) {
    for (int s = 0; s < p->S; s++) {
        const ParamInfo *pi = p->stages[s] ? stage_find_param(p->stages[s], name) : NULL;
        if (!pi) continue;
        if (info) *info = pi;
        return p->stages[s]->weights + pi->offset;
    }
    return NULL;
}

const AdamWState *pipeline_stage_optimizer(const Pipeline *p, int stage) {
    return stage >= 0 && stage < p->S && p->stages[stage] ? &p->opt[stage] : NULL;
}

int pipeline_replica(const Pipeline *p) { return p->multiprocess ? p->self / p->P : 0; }

void pipeline_sync_to_host(Pipeline *p, bool grads) {
    for (int s = 0; s < p->S; s++)
        if (p->stages[s]) stage_download(p->stages[s], grads, &p->opt[s]);
}

int pipeline_load(Pipeline *p, TensorSource src, void *ctx, bool moments, int adam_t, Error *err) {
    for (int s = 0; s < p->S; s++) {
        StageModel *sm = p->stages[s];   // copy 0 is read from src; the other copies copy it
        if (!sm) continue;
        AdamWState *st = &p->opt[s];
        for (int i = 0; i < sm->n_params; i++) {
            const ParamInfo *pi = &sm->params[i];
            if (src(ctx, pi->name, TENSOR_WEIGHT, pi, sm->weights + pi->offset, err)) return -1;
            if (moments && (src(ctx, pi->name, TENSOR_EXP_AVG, pi, st->m + pi->offset, err) ||
                            src(ctx, pi->name, TENSOR_EXP_AVG_SQ, pi, st->v + pi->offset, err)))
                return -1;
        }
        // The tied head copy is the embedding, its AdamW moments the embedding's.
        const ParamInfo copy = stage_head_copy_info(sm);
        if (copy.numel && (src(ctx, copy.name, TENSOR_WEIGHT, &copy, sm->weights + copy.offset, err) ||
                           (moments && (src(ctx, copy.name, TENSOR_EXP_AVG, &copy, st->m + copy.offset, err) ||
                                        src(ctx, copy.name, TENSOR_EXP_AVG_SQ, &copy, st->v + copy.offset, err)))))
            return -1;
        if (!moments) {
            memset(st->m, 0, st->n * sizeof(float));
            memset(st->v, 0, st->n * sizeof(float));
        }
        st->t = moments ? adam_t : 0;
        stage_upload(sm, st);
        for (int c = 1; c < p->n_copies; c++) {
            const int k = c * p->S + s;
            memcpy(p->stages[k]->weights, sm->weights, sm->numel * sizeof(float));
            memcpy(p->opt[k].m, st->m, st->n * sizeof(float));
            memcpy(p->opt[k].v, st->v, st->n * sizeof(float));
            p->opt[k].t = st->t;
            stage_upload(p->stages[k], &p->opt[k]);
        }
    }
    return 0;
}

bool pipeline_is_root(const Pipeline *p) { return p->self == 0; }

int pipeline_failed(const Pipeline *p, Error *err) {
    if (!p->broken) return 0;
    *err = p->failure;
    return -1;
}

int pipeline_world_rank(const Pipeline *p) { return p->self; }

double pipeline_world_max(Pipeline *p, double local) {
    if (!p->multiprocess) return local;
    // A slot per rank: the sum only moves each value into place, then the max is local.
    double *v = p->ranks[0].slots;
    memset(v, 0, sizeof(double) * (size_t)p->W);
    v[p->self] = local;
    Error why;
    if (p->broken) return INFINITY;
    if (transport_allreduce_f64(p->tp, p->self, GROUP_WORLD, v, (size_t)p->W, &why) != TRANSPORT_OK) {
        Error line;
        own_failure(p, &why, "(the agreement between steps)", &line);
        pipeline_broke(p, &line);
        return INFINITY;
    }
    double most = v[0];
    for (int r = 1; r < p->W; r++)
        if (v[r] > most || isnan(v[r])) most = v[r];
    return most;
}

// A collective's failure: the pipeline is broken, err says where.
static int collective_failed(Pipeline *p, const Error *why, const char *where, Error *err) {
    own_failure(p, why, where, err);
    pipeline_broke(p, err);
    return -1;
}

int pipeline_gather_bytes(Pipeline *p, const void *mine, size_t n, char **all, size_t *len, const char *what,
                          Error *err) {
    *all = NULL;
    *len = 0;
    if (!p->multiprocess) {
        *all = memcpy(xmalloc(n + 1), mine, n);
        (*all)[n] = '\0';
        *len = n;
        return 0;
    }
    const double most = pipeline_world_max(p, (double)n);
    if (!isfinite(most)) return pipeline_failed(p, err);
    const size_t cap = (size_t)most > 0 ? (size_t)most : 1;
    const bool root = p->self == 0;
    char *buf = root ? xmalloc(cap * (size_t)p->W) : NULL;
    size_t *counts = root ? xcalloc((size_t)p->W, sizeof(size_t)) : NULL;
    Error why;
    if (transport_gather_bytes(p->tp, p->self, mine, n, buf, cap, counts, &why) != TRANSPORT_OK) {
        free(buf);
        free(counts);
        char where[160];
        snprintf(where, sizeof where, "(gathering %s)", what);
        return collective_failed(p, &why, where, err);
    }
    if (root) {   // in place: every rank's bytes moved down to follow the previous rank's
        for (int r = 0; r < p->W; r++) {
            memmove(buf + *len, buf + (size_t)r * cap, counts[r]);
            *len += counts[r];
        }
        *all = check_alloc(realloc(buf, *len + 1), *len + 1, __FILE__, __LINE__);
        (*all)[*len] = '\0';
    }
    free(counts);
    return 0;
}

// The transport has no broadcast: a sum over the world where every rank but the root adds
// zeros moves the root's bytes to everyone exactly (4 bytes per double: integers below 2^32,
// summed with zeros in any order, are exact).
int pipeline_bcast_bytes(Pipeline *p, char **data, size_t *n, const char *what, Error *err) {
    if (!p->multiprocess) return 0;
    const bool root = p->self == 0;
    const double most = pipeline_world_max(p, root ? (double)*n : 0.0);
    if (!isfinite(most)) return pipeline_failed(p, err);
    const size_t len = (size_t)most, words = (len + 3) / 4;
    double *v = xcalloc(words + 1, sizeof(double));
    for (size_t i = 0; root && i < len; i++) v[i / 4] += (double)((uint32_t)(unsigned char)(*data)[i] << (8 * (i % 4)));
    Error why;
    if (transport_allreduce_f64(p->tp, p->self, GROUP_WORLD, v, words + 1, &why) != TRANSPORT_OK) {
        free(v);
        char where[160];
        snprintf(where, sizeof where, "(sharing %s)", what);
        return collective_failed(p, &why, where, err);
    }
    if (!root) {
        *data = xmalloc(len + 1);
        for (size_t i = 0; i < len; i++) (*data)[i] = (char)(((uint32_t)v[i / 4] >> (8 * (i % 4))) & 0xff);
        (*data)[len] = '\0';
        *n = len;
    }
    free(v);
    return 0;
}

const double *pipeline_clock_offsets(const Pipeline *p) { return p->offsets; }

int pipeline_events(const Pipeline *p, const ActionEvent *const **events, const int **n_events) {
    const bool have = pipeline_is_root(p);
    *events = have ? p->events : NULL;
    *n_events = have ? p->n_events : NULL;
    return have ? p->W : 0;
}
