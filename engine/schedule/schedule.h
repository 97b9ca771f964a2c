// engine/schedule: a pipeline schedule as data (DESIGN.md, "Schedules are data").
//
// A Schedule is one ordered list of actions per rank. Each action names a global (virtual)
// stage and a microbatch. Generators emit compute actions only (F, B, I, W); lowering adds
// the messages between ranks; the validator proves a schedule complete and deadlock-free;
// the runtime interprets one rank's list; the simulator (engine/schedule/simulate.h) times it.
//
// Dependencies (the only ones there are):
//   F(s,mb)        needs F(s-1,mb)                      (activations from the stage before)
//   B(s,mb)/I(s,mb) needs F(s,mb) and, unless s is last, B or I of (s+1,mb) (output grads)
//   W(s,mb)        needs I(s,mb)
// When the two stages of a dependency live on different ranks, the lowered form carries it as
// a message: SEND_F/RECV_F for activations, SEND_B/RECV_B for gradients. Sends never block
// (buffered by the transport); receives block.
#ifndef PPTRAIN_SCHEDULE_H
#define PPTRAIN_SCHEDULE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "engine/error.h"

typedef enum {
    ACT_F,       // forward (stage 0 embeds, the last stage also computes the loss)
    ACT_B,       // full backward: input and weight gradients together
    ACT_I,       // backward, input gradient only (zero-bubble split)
    ACT_W,       // backward, weight gradient only
    ACT_SEND_F,  // stage -> stage+1: activations of mb        (stage = sender)
    ACT_RECV_F,  // stage-1 -> stage: activations of mb        (stage = receiver)
    ACT_SEND_B,  // stage -> stage-1: input gradient of mb      (stage = sender)
    ACT_RECV_B,  // stage+1 -> stage: output gradient of mb     (stage = receiver)
    ACT_COUNT
} ActionType;

typedef struct {
    ActionType type;
    int stage;   // global virtual stage, 0..n_stages-1
    int mb;      // microbatch, 0..n_microbatches-1
    // Overlapped with the next compute action of its rank: the two are one torch
    // OVERLAP_F_B, "(0F3;3B1)OVERLAP_F_B" (dualpipe-v's forward of one chunk with the other's
    // backward). Messages may stand between them. The runtime and the simulator run the pair
    // as its sub-actions one after the other (a CPU rank has one stream); the CSV writer keeps
    // the pair, so torch's loader overlaps it again.
    bool overlap_next;
} Action;

typedef struct {
    Action *actions;  // (n) in execution order
    int n, cap;
} ScheduleList;

typedef struct {
    char name[256];       // generator name, or the CSV path it was loaded from
    int n_ranks;          // P
    int n_stages;         // S (= P*V for the built-in multi-stage schedules)
    int n_microbatches;   // M
    int *stage_rank;      // (S) rank that owns each stage
    ScheduleList *ranks;  // (P)
} Schedule;

// Which rank owns stage s: PLAIN s (S = P); LOOP s % P (interleaved, looped BFS);
// V rank r holds stages r and 2P-1-r (zb-v, S = 2P).
typedef enum { STAGE_MAP_PLAIN, STAGE_MAP_LOOP, STAGE_MAP_V } StageMap;
int schedule_stage_rank(StageMap map, int n_ranks, int n_stages, int stage);

// ---- the registry (engine/schedule/schedule_registry.c) ------------------------------------
// Every built-in schedule is one row: a generator and what the rest of pptrain needs to know
// about it. --help, errors, `plan`, the console's setup list, the README's table and the tests
// all read this table, so a new schedule is a generator and a row, nothing else.
typedef Schedule *(*ScheduleGenerator)(int n_ranks, int n_microbatches, int n_virtual, Error *err);
typedef struct {
    const char *name;             // what --schedule takes
    ScheduleGenerator build;      // called by schedule_build with checked P, M, V
    int default_virtual;          // V when none is asked for
    bool virtual_fixed;           // V must be default_virtual
    int min_m_per_stage;          // M must be at least this x P x V (dualpipe-v: 1); 0: any M
    // Textbook bubble at F=1 B=2 (F=I=W=1 for split backwards), equal stages, no latency;
    // the simulator matches it exactly for M a multiple of P and at least 2P (test_schedule).
    double (*ideal_bubble)(int n_ranks, int n_microbatches, int n_virtual);
    const char *ideal_formula;    // the same, as text: "(P-1)/(M+P-1)"
    const char *description;      // one line for `plan --list` and the README
} ScheduleInfo;
extern const ScheduleInfo SCHEDULE_REGISTRY[];
extern const int SCHEDULE_COUNT;

// The row named name; NULL for anything else (a CSV path, a typo).
const ScheduleInfo *schedule_find(const char *name);
bool schedule_is_builtin(const char *name);
// The row's default V; 1 for a name that is not built in.
int schedule_default_virtual(const char *name);
// True for a built-in schedule that takes any V (interleaved-1f1b, looped-bfs, interleaved-zb).
bool schedule_virtual_free(const char *name);
// The fewest microbatches the row takes at P ranks and V stages per rank (V = 0: its default);
// 1 for a name that is not built in.
int schedule_min_microbatches(const char *name, int n_ranks, int n_virtual);
// "gpipe, 1f1b, ..." in table order into buf; multi_stage_only: only rows whose default V > 1.
void schedule_names_text(char *buf, size_t size, bool multi_stage_only);

// The help lines of --schedule and --virtual, the same for every command: "gpipe, 1f1b, ...,
// or a CSV file in torch's format (default 1f1b)" and "stages per rank for interleaved-1f1b,
// ... (default 2; 1 for the others)".
void schedule_option_help(char *buf, size_t size);
void schedule_virtual_help(char *buf, size_t size);

// --schedule NAME|FILE.csv: true when name is no row of the table and ends in ".csv", so it
// is read as a file (engine/schedule/schedule_csv.c) rather than built.
bool schedule_is_file(const char *name);
// The one place a --schedule value becomes a schedule: a CSV file loaded (it brings its own
// ranks, microbatches and stages; P, M and V are not read, and each caller checks its own
// flags against the file's shape), or a row built as schedule_build does. NULL with err.
Schedule *schedule_resolve(const char *name, int n_ranks, int n_microbatches, int n_virtual, Error *err);
// Microbatches of activations held at the schedule's peak, in whole-model units (stages split
// the layers evenly), for the run's memory estimate (engine/schedule/schedule_peak.c): the mean
// over stages of each stage's most in flight when one process holds every stage (one_process),
// else the same mean over the stages of the rank that holds the most. M, the most there can be,
// when the schedule cannot be resolved (the pipeline then says why).
double schedule_peak_in_flight(const char *name, int n_ranks, int n_microbatches, int n_virtual, bool one_process);

// Builds the compute-only schedule (name, P ranks, M microbatches, V stages per rank;
// V = 0 means the row's default). Returns NULL and fills err for an unknown name (the message
// lists the table's names) or arguments the generator refuses (V other than the row's fixed V,
// M below the row's minimum, interleaved-1f1b and interleaved-zb with M not a multiple of
// max(1, M / P) as torch requires).
Schedule *schedule_build(const char *name, int n_ranks, int n_microbatches, int n_virtual, Error *err);

// An empty schedule with the given shape; stage_rank filled from map.
Schedule *schedule_new(const char *name, int n_ranks, int n_stages, int n_microbatches, StageMap map);
void schedule_push(Schedule *s, int rank, ActionType type, int stage, int mb);
// Pushes a (with its overlap_next).
void schedule_push_action(Schedule *s, int rank, Action a);
Schedule *schedule_copy(const Schedule *s);
// The forward-only schedule of an evaluation on train's ranks and placement, lowered
// (engine/schedule/schedule_forward.c): F only, so the validator's completeness rules
// (every F has its backward) do not apply to it.
Schedule *schedule_forward_only(const Schedule *train);
// The same on M microbatches instead of train's (generation: one, engine/pipeline.h).
Schedule *schedule_forward_only_m(const Schedule *train, int M);
void schedule_free(Schedule *s);
bool schedule_equal(const Schedule *a, const Schedule *b);  // same shape, map and lists (overlaps too)

bool schedule_is_comm(ActionType t);
bool schedule_has_comm(const Schedule *s);
// Writes an action the torch way ("1F3", "0SEND_F3") into buf; returns buf.
char *schedule_format_action(Action a, char *buf, size_t size);
const char *schedule_type_name(ActionType t);  // "F", "SEND_F", ...

// Inserts SEND/RECV for every dependency whose stages sit on different ranks: each RECV
// right before the compute that needs it, each SEND right after the compute that produced it.
// Since sends are buffered, the lowered schedule runs exactly when the compute-only one does.
// No-op when s already has comm actions.
void schedule_lower(Schedule *s);

// Weight gradients in microbatch order (engine/schedule/schedule_order.c): a stage's gradient adds its
// microbatches' contributions in the order its B / W actions run, and one device adds them
// in microbatch order, so every layout must too (DESIGN.md "Parity"). schedule_weight_order_ok
// says whether every stage's B / W actions already come in increasing microbatch order;
// schedule_order_weight_grads rewrites a valid schedule so they do (compute-only: the stage's
// backward actions take its microbatches in increasing order where that stays valid;
// otherwise early B actions run as I and their W waits for its turn). Returns 1 when it
// changed s, 0 when s was already in order. The pipeline and the simulator run this form.
bool schedule_weight_order_ok(const Schedule *s);
int schedule_order_weight_grads(Schedule *s);

// Checks shape, ownership (each action on the rank owning its stage), completeness (one F per
// (stage, mb) and either one B or one I and one W), local order (F before B/I, I before W, a
// RECV before its consumer, a SEND after its producer), messages (a lowered schedule has
// exactly the messages it needs) and runs it to prove no deadlock. Returns 0, or -1 with a
// one-line err such as "rank 1, action 5 (1B3): backward before its forward".
int schedule_validate(const Schedule *s, Error *err);

// For transports without tags: NCCL matches the k-th send with the k-th receive of a channel,
// and the nccl transport gives every edge of the stage graph (stage s's activations to s+1,
// its gradients to s-1, across ranks) a channel of its own. Checks that on every edge a
// lowered schedule receives the microbatches in the order it sends them. Every built-in
// schedule does; a CSV schedule may not. Returns 0, or -1 with one line naming the mismatch.
int schedule_check_fifo(const Schedule *s, Error *err);

// Runs every rank's list in order, each action starting when its rank is free and its
// dependencies have ended (plus latency when a dependency is on another rank). dur[type] is
// each action type's duration. start/end: (total actions) in rank-major order (rank 0's list,
// then rank 1's, ...). Meant for a schedule that passed the validator's completeness checks
// (a missing dependency just never arrives). Returns 0, or -1 with err naming where every
// stuck rank waits when no rank can progress (deadlock).
int schedule_execute(const Schedule *s, const double dur[ACT_COUNT], double latency,
                     double *start, double *end, Error *err);
// schedule_execute with a duration per stage: dur (S x ACT_COUNT), stage st's type t taking
// dur[st * ACT_COUNT + t] (stages of unequal cost: a measured run, an uneven split).
int schedule_execute_stages(const Schedule *s, const double *dur, double latency, double *start, double *end,
                            Error *err);
int schedule_total_actions(const Schedule *s);

// CSV in torch.distributed.pipelining's format: one row per rank, comma-separated cells
// like "0F3" (stage 0, forward, microbatch 3), "1I2", "1W2", "0SEND_F3", "1RECV_B2"; empty
// cells are allowed and skipped. P is the row count, S and M the largest stage and microbatch
// plus one, the stage map whichever rank holds each stage. A file without comm actions is
// lowered. A leading UTF-8 byte order mark is skipped. Errors carry origin:line:column of
// the bad cell, or the validator's message.
// torch's compute_comms actions are read too (engine/schedule/schedule_csv.c): UNSHARD,
// RESHARD, REDUCE_GRAD and WAIT_* are accepted as no-ops, OVERLAP_F_B runs its sub-actions,
// and each RECV is placed where torch waits for it (its consumer, or a WAIT_RECV).
Schedule *schedule_parse_csv(const char *text, const char *origin, Error *err);
Schedule *schedule_load_csv(const char *path, Error *err);
// Writes s as CSV: compute actions only, or with_comm torch's compute_comms form of its
// compute order, as torch's own lowering writes it (loads in torch's _load_csv). Returns 0,
// or -1 on a write error.
int schedule_write_csv(const Schedule *s, FILE *out, bool with_comm);
#endif
