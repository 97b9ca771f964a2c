// engine/pipeline: the pipeline- and data-parallel trainer. The L layers are cut into
// S = P*V stages, each a StageModel with its own AdamW state; every rank interprets its own
// action list of the lowered schedule (engine/runtime.h). It computes what reference_step
// computes on one device, up to float summation order (DESIGN.md, "Parity").
//
// World layout. A run has W = P x D ranks: world rank r is pipeline rank p = r % P of
// data-parallel replica d = r / P. Pipeline rank p holds the schedule's stages of rank p
// (stage_rank[s] == p), in every replica. Replica d takes rows [d*B/D, (d+1)*B/D) of the
// global batch of B rows and splits them into M microbatches of B/(D*M) rows (B % (D*M) == 0).
// Every microbatch's loss is scaled by 1 / (non-pad targets of the GLOBAL batch), so the sum
// of every replica's loss is the batch mean; the reported loss is that sum, in replica order.
//
// One step: zero grads, post the step's receives, run the actions; all-reduce each stage's
// gradients over its D replicas (skipped when D == 1); the global grad norm = sqrt of the sum,
// in pipeline-rank order, of replica 0's per-rank squared gradients (every stage counted
// once), identical on every rank; clip; AdamW on every rank's stages.
//
// Transports. local: the W ranks are threads of this process (created once per pipeline).
// nccl (GPU stages only): as mpi, one rank per process, with messages and the gradient
// all-reduce in device memory through NCCL (engine/transport/transport_nccl.h).
// mpi: this process is exactly one rank of an mpirun job over opts->mpi_comm (default
// MPI_COMM_WORLD) whose size must be P x D. pipeline_create initializes MPI (thread level
// MPI_THREAD_SERIALIZED: call the pipeline from one thread at a time) when nobody has, and
// then finalizes it at exit, unless a step failed (engine/transport/mpi_process.h). Each rank
// builds only its own stages (weights from (seed, name) are equal everywhere). The root (world
// rank 0, pipeline_is_root, PipelineReport.is_root) reports the run: only its report has
// telemetry; the others get the same loss, lr, norm and busy times, and should neither print
// nor record.
// Under MPI a SIGTERM or SIGINT (mpirun kills the survivors when a rank dies) prints one line
// "pptrain: rank R (stage S): peer lost (SIGTERM) while waiting at action K (RECV_B 2,mb 3)"
// and exits with 128 + the signal (mpi_process.h's last words); once a step has failed the
// line is left out, so the caller's own error line is the only one.
#ifndef PPTRAIN_PIPELINE_H
#define PPTRAIN_PIPELINE_H
#include <stdbool.h>
#include <stdint.h>

#include "engine/error.h"
#include "engine/model/model.h"
#include "engine/telemetry.h"
#include "engine/reference_step.h"
#include "engine/transport/transport_registry.h"

typedef struct {
    int ranks;               // P (a CSV schedule must have this many rows)
    int virtual_stages;      // V stages per rank; 0 = the schedule's default (1, or 2)
    char schedule[4096];     // a built-in name (engine/schedule/schedule.h) or the path of a .csv file
    char split[256];         // manual layers per stage, "3,3,2"; "" = partition_balance
    double timeout_s;        // longest wait for one message or collective (default 300)
    int dp;                  // D data-parallel replicas (default 1)
    TransportKind transport; // a row of engine/transport/transport_registry.h (TRANSPORT_KIND_LOCAL)
    const void *mpi_comm;    // MPI: points at the MPI_Comm of the run's ranks; NULL = MPI_COMM_WORLD
    bool recompute;          // --recompute all: activations re-materialized in the backward (CPU)
    // --device cpu|cuda (engine/model/model.h). DEVICE_CUDA: every stage on a GPU. Under the
    // local transport world rank r uses GPU r mod (visible GPUs), so one GPU carries a whole
    // multi-stage pipeline of threads, each stage on its own stream; under nccl, rank r uses
    // GPU (its rank on its node) mod (visible GPUs), and NCCL needs them distinct.
    DeviceKind device;
    bool gpu_fp32;           // --precision fp32: GPU stages in fp32 (default bf16, DESIGN.md "Numerics")
} PipelineOptions;

PipelineOptions pipeline_options_defaults(void);  // 1 rank, 1 replica, gpipe, balanced, local, 300 s
// Refuses, in one line, options no pipeline can run here: sizes, a device this build or
// machine lacks, what stages on a device cannot do yet, a batch the replicas and microbatches
// do not divide, a bad RunConfig. pipeline_create calls it first.
int pipeline_check_options(const RunConfig *rc, const PipelineOptions *o, Error *err);

typedef struct {
    StepReport step;          // loss, lr, grad_norm (before clipping), step_ms, tokens_per_s
    bool is_root;             // this process reports the run (prints, records): pipeline_is_root
    int n_ranks, n_stages;    // W = P x D ranks, S stages
    int n_replicas;           // D
    const double *busy_ms;    // (n_ranks) compute time of each world rank this step
    // (n_ranks) as htop shows each rank (engine/rank_usage.h): CPU time over the step's wall
    // time in percent (100 = one core busy; CPU used since the rank's previous step), and
    // resident bytes (NaN: unknown). Ranks that are threads of one process share its memory:
    // rss_per_rank is false and every entry is the process's.
    const double *cpu_pct, *rss_bytes;
    bool rss_per_rank;
    const int *peak_slots;    // (n_stages) activation slots (microbatches in flight) per stage
    // Per-rank (W) and per-stage (S) busy / comm / idle and the measured bubble, from every
    // rank's action events on rank 0's clock (telemetry_summarize); a stage's numbers add up
    // its copies on every replica. Root only: elsewhere has_telemetry is false, all zero.
    bool has_telemetry;
    StepTelemetry telemetry;
} PipelineReport;             // arrays owned by the pipeline, valid until its next step

typedef struct Pipeline Pipeline;

// Partitions, builds this process's stages, builds or loads the schedule for rc->microbatches,
// validates and lowers it, creates the transport (MPI: initializes MPI if needed, checks the
// world size, measures clock offsets), starts the rank threads (local). Returns NULL with a
// one-line err for a bad option, split, schedule or world.
Pipeline *pipeline_create(const RunConfig *rc, const PipelineOptions *opts, Error *err);
// One optimizer step (0-based `step`) over the global batch of rc->batch rows of rc->seq_len
// tokens: inputs, targets (B*T), target -1 = pad; every rank passes the same batch. Returns
// 0, or -1 with a one-line err naming the rank, stage, action and microbatch that failed;
// after a failure the pipeline only frees (and under MPI the process should exit non-zero).
int pipeline_step(Pipeline *p, const int32_t *inputs, const int32_t *targets, int step, PipelineReport *out,
                  Error *err);
// For `pptrain check`: the step's actions and the gradient all-reduce, no clip and no update;
// the gradients stay in the stages (pipeline_stage(p, s)->grads). *loss: the batch loss.
int pipeline_compute_grads(Pipeline *p, const int32_t *inputs, const int32_t *targets, double *loss, Error *err);
// Validation: a batch shaped as a training step's, forward only on the same ranks and
// stages (engine/schedule/schedule_forward.c), under any schedule and transport; weights,
// gradients and optimizer untouched. *loss: the mean over the batch's targets, the number a
// step reports as its loss, equal on every rank. Collective; 0 or -1 as pipeline_step.
int pipeline_eval(Pipeline *p, const int32_t *inputs, const int32_t *targets, double *loss, Error *err);
// Generation (engine/generate.h): a forward-only pass of ONE sequence of T tokens (tokens,
// (T)) on the same ranks and stages, one microbatch of one row whatever the training batch,
// and at the root the last stage's logits (V) at position pos. Every replica runs it (replica
// 0's logits are read). Weights untouched. On GPU stages the last stage computes that one
// row's logits (its head keeps none) and copies them to the host. Collective; 0 or -1 as
// pipeline_step.
int pipeline_logits(Pipeline *p, const int32_t *tokens, int pos, float *logits, Error *err);
// The same with a KV cache per stage (engine/model/model.h, StageKV), as generate runs it.
// pipeline_prefill: the pass of the whole row (tokens (T), the prompt in [0, n)), every stage
// keeping the keys and values of positions [0, n); the logits at n - 1. pipeline_decode: the
// one token at position pos (>= n, each position once, in order after the prefill), every
// stage attending to the cache and adding the token's keys and values to it; the logits at
// pos. A prefill starts a new sequence. CPU or GPU stages (a GPU stage's cache is in device
// memory: engine/model/model_cuda.c); collective; 0 or -1 as pipeline_step.
int pipeline_prefill(Pipeline *p, const int32_t *tokens, int n, float *logits, Error *err);
int pipeline_decode(Pipeline *p, int32_t token, int pos, float *logits, Error *err);
// Stops the threads and frees everything.
void pipeline_free(Pipeline *p);

int pipeline_n_stages(const Pipeline *p);
// Decoder layers of stage s, whichever process holds it.
int pipeline_stage_layers(const Pipeline *p, int stage);
// Stage s as this process holds it (replica 0's under local), NULL when another process does.
const StageModel *pipeline_stage(const Pipeline *p, int stage);
bool pipeline_hosts_stage(const Pipeline *p, int stage);
// The weights of the parameter with this HF name, whichever local stage holds it (NULL if
// none here); *info, when asked for, its shape.
const float *pipeline_weights(const Pipeline *p, const char *name, const ParamInfo **info);

// Replica 0's AdamW state of stage s as this process holds it, NULL when another process does.
const AdamWState *pipeline_stage_optimizer(const Pipeline *p, int stage);
// GPU stages: copies this process's replica-0 stages' weights and AdamW moments (and
// gradients when `grads`) from their GPUs into the host arrays pipeline_stage,
// pipeline_weights and pipeline_stage_optimizer read. Call between steps, before reading
// them (a checkpoint, `pptrain check`). A no-op for CPU stages, whose host arrays are the real ones.
void pipeline_sync_to_host(Pipeline *p, bool grads);
// The data-parallel replica this process's stages belong to: 0 under local (which holds every
// replica, replica 0 answering for them), world rank / P under MPI. A checkpoint is written by
// replica 0's processes only: the replicas are equal after every step.
int pipeline_replica(const Pipeline *p);

// Restoring a run. A TensorSource fills dst (info->numel floats, shaped info->rows x
// info->cols) with the tensor of this HF name in this role, or returns -1 with a one-line err
// (missing, wrong shape). storage/checkpoint implements it over a folder of safetensors shards,
// so a checkpoint written under any layout loads under any other: it is keyed by name.
typedef enum { TENSOR_WEIGHT = 0, TENSOR_EXP_AVG, TENSOR_EXP_AVG_SQ } TensorRole;
typedef int (*TensorSource)(void *ctx, const char *name, TensorRole role, const ParamInfo *info, float *dst,
                            Error *err);
// Fills every stage this process holds (every replica's copy) from src: the weights, and when
// `moments` the AdamW first and second moments with the update count set to adam_t (without,
// the moments stay zero: a fresh optimizer). Call between steps (before the first). Returns 0,
// or -1 with err.
int pipeline_load(Pipeline *p, TensorSource src, void *ctx, bool moments, int adam_t, Error *err);

// True where the run's report lives: always under local, world rank 0 under MPI.
bool pipeline_is_root(const Pipeline *p);
// "" or one line for the user when the run's rank threads outnumber the cores they share (this
// node's, under mpirun; this process's, under local): each rank's OpenMP threads are its share
// of the cores (engine/transport/node_threads.h), and then they take turns.
const char *pipeline_notice(const Pipeline *p);
// The ranks on this process's node (local: the world, all threads here) and the cores they
// may use together (mpirun: the union of their affinity masks, which binding narrows per rank).
void pipeline_host(const Pipeline *p, int *ranks, int *cores);
int pipeline_world_rank(const Pipeline *p);  // this process's rank (0 under local)
// The largest `local` over every rank (a collective under MPI: every rank calls it); +inf if
// the ranks could not agree (a failed transport).
double pipeline_world_max(Pipeline *p, double local);
// Every process's n bytes at the root, concatenated in rank order: *all (malloc'd, NUL after
// the *len bytes) at the root, NULL elsewhere; under local, this process's own bytes. A
// collective (every process calls it). 0, or -1 with err (the pipeline is then broken), whose
// line names the bytes as `what` says ("the checkpoint's records").
int pipeline_gather_bytes(Pipeline *p, const void *mine, size_t n, char **all, size_t *len, const char *what,
                          Error *err);
// The root's *n bytes at *data to every other process, as a malloc'd copy (NUL after them) in
// *data and *n; the root's stay as they are; nothing to do under local. A collective. 0, or -1
// with err.
int pipeline_bcast_bytes(Pipeline *p, char **data, size_t *n, const char *what, Error *err);
// -1 with the run's first failure in err (this process's one line) once a step, a gather or a
// pipeline_world_max failed; else 0.
int pipeline_failed(const Pipeline *p, Error *err);
// (W) what to add to each rank's CLOCK_MONOTONIC seconds to get rank 0's: zeros under local;
// under MPI estimated at create from the shortest of a few ping-pongs with rank 0.
const double *pipeline_clock_offsets(const Pipeline *p);
// The last step's action events of every rank (root only; elsewhere *n_ranks = 0):
// (*events)[r][0..(*n_events)[r]) on rank r's clock. Arrays owned by the pipeline.
int pipeline_events(const Pipeline *p, const ActionEvent *const **events, const int **n_events);
#endif
