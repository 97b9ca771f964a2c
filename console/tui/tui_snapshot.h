// console/tui/tui_snapshot: what the live screen shows (TuiView), and how a training run fills it
// without ever waiting for the screen (TuiSnapshot).
//
// Two threads, one rule: the engine's thread never waits for drawing. The run's hooks
// (called on the engine's thread, root process only) update a private staging view, then
// try to publish it into the shared view under a mutex with pthread_mutex_trylock; when the
// UI thread holds the mutex the step is published with the next one (nothing is lost: the
// staging view keeps every loss point). The UI thread copies the shared view out under the
// mutex (a few KiB: only the filled parts of the arrays) and draws from its own copy.
//
// Pause and stop are atomics the engine reads between steps (should_stop): a paused run
// waits there on a condition variable until resume or stop.
#ifndef PPTRAIN_TUI_SNAPSHOT_H
#define PPTRAIN_TUI_SNAPSHOT_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "console/run_options.h"
#include "console/tui/pure/tui_bubble.h"
#include "console/tui/pure/tui_chart.h"
#include "engine/train_loop.h"

#define TUI_MAX_RANKS 256     // pipeline ranks the live screen keeps (rows and lanes)
#define TUI_MAX_STAGES 1024
#define TUI_MAX_EVENTS 16384  // timeline actions of one step, all lanes together

typedef enum {
    TUI_RUN_NONE,       // nothing started yet
    TUI_RUN_STARTING,   // data and pipeline being set up
    TUI_RUN_RUNNING,
    TUI_RUN_PAUSED,
    TUI_RUN_STOPPING,   // stop asked: the step in flight, then the checkpoint
    TUI_RUN_FINISHED,
    TUI_RUN_STOPPED,
    TUI_RUN_FAILED,
} TuiRunState;

const char *tui_run_state_name(TuiRunState s);
bool tui_run_state_live(TuiRunState s);   // STARTING .. STOPPING

#define TUI_VAL_CAP 512
#define TUI_SAMPLE_TEXT 1024  // bytes of a sample's text the live screen keeps

typedef struct {
    char layers[32];            // "0-1", "2,5-6", "?"
    // The latest step (watch: means over the run), busy + transfer + wait = the step's time:
    double busy_ms;             // computing (F, B, I, W)
    double transfer_ms;         // copying messages; NaN: not recorded (a store before version 3)
    double wait_ms;             // waiting for a peer, or done early: the rank's share of the bubble
    double peak_bytes;          // peak activation memory; NaN: unknown
    // As htop shows a process (engine/rank_usage.h), NaN: unknown (watch, a store's runs):
    double cpu_pct;             // CPU time over the step's wall time, % of one core
    double rss_bytes;           // resident memory; ranks that are threads: their process's
} TuiRankRow;

typedef struct {
    TuiRunState state;
    bool read_only;             // `pptrain watch`: no controls
    char message[512];          // the failure's line, or a note
    int64_t run_id;             // in the run store; 0: not recorded
    char schedule[256], model[128], transport[8];
    char device[40];            // "cpu fp32", "cuda bf16", "cuda bf16 (emulated)"
    char blas_warning[48];      // CPU runs: "kernels AVX (CPU: AVX2)" when ONEDNN_MAX_CPU_ISA holds
                                // the products below the CPU (kernels/cpu/blas_core.h); or ""
    int P, V, D, M, B, T, steps_planned;
    double params, lr_peak;
    // The latest step.
    int step;                   // 1-based, counted from the run's first step (resumed runs too)
    double loss, lr, grad_norm, tokens_per_s, gflops, step_ms;
    int steps_done;             // steps this process ran (the rate for the ETA)
    double run_s;               // wall seconds since this process's first step began
    bool has_bubble;
    double bubble, bubble_mean; // measured: the latest step, the run's mean
    double bubble_ideal;        // the schedule's, simulated at F=1 B=2 (W=1); NaN: unknown
    bool has_parts;
    TuiBubble parts;            // the bubble and its parts (watch: the run's means)
    int host_cores, host_ranks; // 0: unknown; ranks > cores: CPU oversubscription
    int n_ranks;                // rows and lanes (P)
    TuiRankRow rank[TUI_MAX_RANKS];
    // Validation losses (--val-data) at val_step[0..n_val), steps increasing; when the arrays
    // fill, every other one is dropped (the chart draws a line through them).
    int n_val;
    int val_step[TUI_VAL_CAP];
    float val_loss[TUI_VAL_CAP];
    // Samples of the model (train --sample-every): the run's interval (0: none), the latest
    // sample's step (0: none yet) and text as the model wrote it (raw bytes, cut at
    // TUI_SAMPLE_TEXT - 1: escaped only when drawn, console/tui/pure/tui_sample.h), and the
    // samples so far with their seconds, part of run_s and of no step's step_ms.
    int sample_every, sample_step, n_samples;
    double sample_s;
    char sample_text[TUI_SAMPLE_TEXT];
    // The latest step's timeline, replica 0: lane r's events are ev[ev_off[r] .. ev_off[r+1]).
    int timeline_step;
    bool timeline_planned;      // the schedule's simulated timeline (watch), not a measured one
    double span_ms;             // first action's start to last action's end
    int ev_off[TUI_MAX_RANKS + 1];
    TuiEvent ev[TUI_MAX_EVENTS];
    TuiSeries loss_series;
    unsigned version;           // bumped by every publish
} TuiView;

// A kept step's timeline, for looking back (the live screen's left and right keys): lanes as
// in TuiView. About 260 KiB: the UI holds one.
typedef struct {
    int step;                   // 0: none
    double span_ms;
    int n_lanes;
    int ev_off[TUI_MAX_RANKS + 1];
    TuiEvent ev[TUI_MAX_EVENTS];
} TuiTimeline;

// Memory for the timelines of earlier steps, kept for the run: at 128 events a step (the
// default 4-stage run) every step of a 65 536-step run; at 16 384, the last 128.
#define TUI_HISTORY_BYTES (32 << 20)

void tui_view_reset(TuiView *v);
// Fills the identity fields (schedule, P, V, D, M, B, T, model, lr, steps) from a run's
// configuration.
void tui_view_identity(TuiView *v, const RunConfig *rc, const PipelineOptions *po);
// A validation pass onto the chart's sparse series (val_step, val_loss), which keeps every
// other pass when full.
void tui_view_push_val(TuiView *v, int step, double val_loss);
// ETA in seconds from the run's pace; NaN before the first step.
double tui_view_eta(const TuiView *v);

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t resume_cv;   // a paused should_stop waits here
    TuiView shared;             // under mu
    TuiView staging;            // the engine's thread only
    atomic_bool pause, stop;
    bool publish_pending;       // engine thread only: a publish was skipped (mutex busy)
    // Engine-thread state for the current run.
    int n_stages;
    int stage_layers[TUI_MAX_STAGES];
    double slot_bytes[TUI_MAX_STAGES];
    double bubble_sum;
    double t_first;             // monotonic seconds at on_start
    double paused_s;            // seconds spent paused since then: no part of run_s, so not of the ETA
    const int64_t *run_id;      // the session's run-store id (RunSession.recorder.run)
    double pause_limit_s;       // > 0 (MPI): a paused run still steps once per this long, so
                                // the other processes' waits never reach --timeout
    // Every published step's timeline, kept for the run (under mu): a ring of ring_cap steps
    // of at most ring_ev_per events on ring_lanes lanes, allocated at the first step within
    // TUI_HISTORY_BYTES. A step whose publish found the mutex taken and was then overtaken
    // by the next one is not kept (rare: the UI holds it for a copy of a few KiB).
    TuiEvent *ring_ev;          // (ring_cap * ring_ev_per)
    int *ring_off;              // (ring_cap * (ring_lanes + 1))
    int *ring_step;             // (ring_cap)
    double *ring_span;          // (ring_cap)
    int ring_cap, ring_ev_per, ring_lanes;
    int ring_n, ring_next;      // steps kept; the slot the next one goes to
} TuiSnapshot;

void tui_snapshot_init(TuiSnapshot *l);
void tui_snapshot_destroy(TuiSnapshot *l);

// Hooks for RunSession.view; ctx is the TuiSnapshot.
TrainHooks tui_snapshot_hooks(TuiSnapshot *l);

// Called by the run's thread around run_session: begin resets the view for a new run
// (state STARTING, identity from ro, ideal bubble); end sets the final state and message.
void tui_snapshot_begin(TuiSnapshot *l, const RunOptions *ro, const int64_t *run_id, double bubble_ideal);
void tui_snapshot_end(TuiSnapshot *l, TuiRunState state, const char *message, int64_t run_id);

// UI thread: copies the shared view into *out when its version differs from out->version.
// Returns true when it copied.
bool tui_snapshot_take(TuiSnapshot *l, TuiView *out);

// UI thread: the kept steps (0 when none), with the oldest and newest step numbers.
int tui_snapshot_kept(TuiSnapshot *l, int *oldest, int *newest);
// UI thread: copies the newest kept timeline at or before `step` (the oldest kept when none
// is) into *out. Returns false when no step is kept.
bool tui_snapshot_timeline(TuiSnapshot *l, int step, TuiTimeline *out);

void tui_snapshot_set_pause(TuiSnapshot *l, bool paused);
void tui_snapshot_request_stop(TuiSnapshot *l);
#endif
