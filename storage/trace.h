// storage/trace: the step timelines as a Chrome trace event JSON file, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open (DESIGN.md, "Formats users already have").
//
// One complete event ("ph":"X", "ts"/"dur" in microseconds from t_origin) per action, named
// like "F mb3" or "RECV_B mb2", cat = the action type, pid = rank, tid = stage (so each stage
// is a track under its rank), args {step, mb, stage}; metadata events name the tracks
// "rank r" and "stage s". Written through storage/atomic_file (a temporary file next to PATH,
// fsynced and renamed to PATH on close): a file at PATH is always complete.
#ifndef PPTRAIN_TRACE_H
#define PPTRAIN_TRACE_H
#include "engine/error.h"
#include "engine/telemetry.h"

typedef struct TraceWriter TraceWriter;

// Creates the temporary file. Returns NULL with a one-line err when it cannot.
TraceWriter *trace_open(const char *path, Error *err);
// Appends one step: events[r][0..n_events[r]) are rank r's (engine/telemetry.h), offsets[r]
// puts rank r's clock on rank 0's (NULL: all 0), t_origin (rank 0's clock, seconds) is the
// trace's time 0 (the run's first step start, so steps line up one after another). stage_rank
// (n_stages) names each stage's rank, for the track metadata written with the first step.
// Returns 0, or -1 once a write failed (trace_close then says why).
int trace_add_step(TraceWriter *tw, int step, int n_ranks, int n_stages, const int *stage_rank,
                   const ActionEvent *const *events, const int *n_events, const double *offsets, double t_origin);
// Finishes the JSON, commits it to PATH (atomic_file_commit) and frees tw. Returns 0, or -1 with
// err (the temporary file removed, PATH untouched).
int trace_close(TraceWriter *tw, Error *err);
// Drops the trace: removes the temporary file, PATH untouched (a failed run).
void trace_discard(TraceWriter *tw);
#endif
