// console/run_session: one training run as every face runs it. The session wires the engine's
// hooks to the run store (console/run_recorder), to checkpoints (storage/checkpoint_ranks) and to
// --resume / --init-from, then calls the face's own hooks (the headless printer of
// `pptrain train`, the live console) after its own. Every face that starts a run goes through
// here, so a run started from the console lands in the store exactly like a headless one.
#ifndef PPTRAIN_RUN_SESSION_H
#define PPTRAIN_RUN_SESSION_H
#include <stdint.h>

#include "console/run_options.h"
#include "console/run_recorder.h"
#include "engine/train_loop.h"

typedef struct {
    RunOptions ro;          // what to run (the session may fill rc from a checkpoint on --resume)
    TrainHooks view;        // the face's hooks; any may be NULL. Called on the root process only.
    // Filled as the run goes; the view's hooks may read them.
    RunRecorder recorder;   // recorder.run: the run store's row id (0 when not recording)
    int64_t resumed_from;   // the checkpoint id resumed from, 0 for a fresh run
    int start_step;         // steps already done before this run (a resumed run starts there)
    int64_t last_ckpt_id;   // the newest checkpoint this run wrote in the store, 0 when none
    char last_ckpt_dir[4096];
    char source_dir[4096];  // the checkpoint resumed, or the folder --init-from read ("" = none)
    uint32_t run_tag;       // random, drawn at the run's start: its checkpoint folder's name
    // Checkpoints written whole that the store holds no complete row for (it stayed locked):
    // kept in the store's journal at the end (storage/db_journal.h). The newest 8.
    char unrecorded[8][4096];
    int n_unrecorded;
    // Called on the root after each checkpoint is complete (view.ctx as ctx); may be NULL.
    void (*on_checkpoint)(void *ctx, const char *dir, int step, int64_t bytes, int files);
    struct Checkpoint *source;   // the open --resume / --init-from folder (NULL: none)
    // `check`: a --resume checkpoint gives its weights and run, not a position to go on from
    // (so a finished run's last checkpoint can be checked).
    bool weights_only;
    // `sample`: --resume RUN|latest takes the run's newest intact checkpoint when its newest is
    // damaged or gone, and fell_back says which was passed over and why ("" when none was; the
    // face tells the user). Otherwise that run is refused, naming the good one (storage/checkpoint_find.h).
    bool newest_intact;
    // The console's look at a --resume before its form opens (the options, not the run): the
    // shards are left to the run that follows, which checks every one of them as it starts.
    bool options_only;
    Error fell_back;
} RunSession;

// Resolves --resume (the newest intact checkpoint, its run config merged with the options the
// user gave: layout, steps, data path) or --init-from (the folder's config.json is the model).
// run_session calls it; a face may call it first to show what will run. Idempotent.
// Returns 0, or -1 with a one-line user error (exit 2).
int run_session_prepare(RunSession *s, Error *err);
// One line, -1, when ro gives a flag a resumed run keeps from its checkpoint (--batch, --seq,
// --model, the optimizer's, ...: run_session_prepare refuses them the same way); else 0.
int run_session_check_kept(const RunOptions *ro, Error *err);
// Closes the source folder run_session_prepare opened (run_session does it at its end).
void run_session_release(RunSession *s);
// Runs s->ro to the end (or until the view's should_stop says stop: a final checkpoint is
// written when --ckpt-dir is set). The run's row ends finished, stopped or failed.
// Returns 0, or -1 with a one-line err.
int run_session(RunSession *s, RunSummary *summary, Error *err);
#endif
