// engine/train_loop: the run loop. Opens the data, builds the pipeline (one stage on one
// rank is the single-device case: the same interpreter runs every layout), runs the steps
// and reports each one through hooks. Under MPI every process runs the loop (each reads the
// same batches), and only the root process's hooks are called. The engine never prints or writes files itself: the
// console floor wires the hooks to the terminal and the run store.
#ifndef PPTRAIN_TRAIN_LOOP_H
#define PPTRAIN_TRAIN_LOOP_H
#include "engine/pipeline.h"
#include "engine/run_config.h"

typedef struct {
    const char *data_kind;
    uint64_t data_items, data_tokens;
    // The tokenizer text was encoded with: its tokenizer.json (NULL: the byte tokenizer), its
    // vocabulary and bos/eos/pad ids (-1: none; pad: the filler pad batching uses).
    const char *tokenizer;
    int32_t tok_vocab, tok_bos, tok_eos, tok_pad;
    size_t params;
    int n_stages;
    const int *stage_layers;      // (n_stages) decoder layers of each stage; -1 when the stage
                                  // lives in another process (MPI)
    const size_t *slot_bytes;     // (n_stages) activation bytes one microbatch keeps there (the
                                  // light set under recompute; every stage, wherever it lives)
    const size_t *arena_bytes;    // (n_stages) the scratch arena a GPU stage's context reserves
                                  // once, beside its slots (stage_cuda_arena_bytes); 0 on the CPU
    int start_step;               // steps done before this run (a resumed run); 0 for a fresh one
    const char *notice;           // pipeline_notice: "" or the line saying ranks outnumber cores
    int host_ranks, host_cores;   // pipeline_host: ranks on this node, the cores they share
    // Validation: its source (NULL: none), batches per evaluation and steps between them;
    // val_held_out: the _val_ shards the training folder set aside (they are the source when
    // --val-data is not given).
    const char *val_source;
    int val_batches, val_every;
    size_t val_held_out;
} RunInfo;

typedef struct {
    int steps;              // steps run by this process (a resumed run counts from its start) (fewer than planned when stopped)
    bool stopped;           // should_stop ended the run early
    double first_loss, last_loss;
    double val_loss;        // the last evaluation's; NaN when none ran
    double median_tokens_per_s, median_gflops, median_step_ms;
    double wall_s;
    int samples;            // samples generated (RunConfig.sample_every)
    double sample_s;        // their time: part of wall_s, never of a step's time
} RunSummary;

typedef struct {
    void *ctx;
    // After the data and the pipeline are set up, before the first step; returning -1 (with
    // err set) ends the run before it starts.
    int (*on_start)(void *ctx, const RunConfig *rc, const PipelineOptions *po, const RunInfo *info, Error *err);
    void (*on_step)(void *ctx, const Pipeline *p, const PipelineReport *r);
    // After an evaluation (RunInfo.val_*): step = optimizer steps done; loss = the mean of the
    // val batches' losses (each a mean over its targets, as a step's loss).
    void (*on_eval)(void *ctx, int step, double val_loss);
    // After a sample (RunConfig.sample_*): step = optimizer steps done; the new ids (n) and
    // their text (the run's tokenizer's decoding, raw bytes), and the seconds it took.
    void (*on_sample)(void *ctx, int step, const int32_t *ids, int n, const char *text, double seconds);
    // Asked between steps: true ends the run early (SIGINT, the console's stop key).
    bool (*should_stop)(void *ctx);
    void (*on_end)(void *ctx, const RunSummary *s);
} TrainHooks;

// Where a run stands between steps: besides the weights and moments, what a checkpoint keeps.
// The data order depends only on (seed, cursor) and the lr only on the step, so this and the
// tensors are the whole state: a run restored from them continues bitwise as it would have.
typedef struct {
    int step;               // optimizer steps done: the next step's 0-based index
    DataCursor cursor;      // where the next batch starts
    bool final;             // the run's last checkpoint: its end, or a stop
} TrainPosition;

// Checkpointing, wired by the console floor to storage/checkpoint (the engine writes no files).
// Unlike TrainHooks these are called on EVERY process (each writes or reads the stages it
// holds); a failure anywhere fails the run everywhere.
typedef struct {
    void *ctx;
    // Before the first step: fill the pipeline (pipeline_load) and *pos (it starts at step 0
    // with the dataset's initial cursor). NULL: a fresh run from (seed, name).
    int (*restore)(void *ctx, Pipeline *p, TrainPosition *pos, Error *err);
    // After a step when pos->step is a multiple of `every`, and once more at the end of the run
    // or after a stop (pos->final) unless that step was just saved. NULL: no checkpoints.
    int (*save)(void *ctx, Pipeline *p, const TrainPosition *pos, Error *err);
    int every;              // 0: only the final checkpoint
} CheckpointHooks;

// Runs rc->steps steps (fewer when should_stop says so); *summary, when given, says how it
// went. Returns 0, or -1 with a one-line err: a user error (data, config, schedule) before
// the first step, or a failed rank (timeout, dead peer) during one.
// A restored run runs steps [pos.step, rc->steps). ckpt may be NULL.
int train_run(const RunConfig *rc, const PipelineOptions *po, const TrainHooks *hooks, const CheckpointHooks *ckpt,
              RunSummary *summary, Error *err);
// The run's training data as train_run opens it: --tokenizer loaded and held to the model's
// vocabulary, text encoded with it (refused without it when the vocabulary is not the byte
// tokenizer's), every id held to the vocabulary. `pptrain check` reads its batch through here,
// so it checks what a run would train on. Returns 0, or -1 with a one-line err.
typedef struct {
    Dataset *ds;
    HfTokenizer *tok;       // NULL: the byte tokenizer
    TextEncoding te;
} TrainData;
int train_data_open(const RunConfig *rc, TrainData *d, Error *err);
void train_data_close(TrainData *d);
#endif
