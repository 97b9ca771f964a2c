// Chrome trace event JSON, written with fprintf: every string in it is ours (action type
// names, "rank r", "stage s"), so nothing needs escaping. Layout:
//   {"displayTimeUnit":"ms","traceEvents":[
//   {"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"rank 0"}},
//   {"name":"F mb0","cat":"F","ph":"X","ts":12.345,"dur":678.901,"pid":0,"tid":0,"args":{...}},
//   ...]}
#include "storage/trace.h"
#include "storage/atomic_file.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/schedule/schedule.h"

struct TraceWriter {
    AtomicFile *file;   // PATH, written through "nothing lost" (storage/atomic_file.h)
    bool any_event;     // a comma goes before the next event
    bool named;         // the track metadata is written
    bool failed;        // an append failed; why says so
    Error why;
};

TraceWriter *trace_open(const char *path, Error *err) {
    AtomicFile *file = atomic_file_open(path, err);
    if (!file) return NULL;
    TraceWriter *tw = xcalloc(1, sizeof *tw);
    tw->file = file;
    if (atomic_file_append(file, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 39, &tw->why)) tw->failed = true;
    return tw;
}

// printf into the file; an event is a few hundred bytes at most.
__attribute__((format(printf, 2, 3))) static void put(TraceWriter *tw, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    const size_t len = n < 0 ? 0 : (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    if (!tw->failed && atomic_file_append(tw->file, line, len, &tw->why)) tw->failed = true;
}

// Starts the next element of traceEvents.
static void next_event(TraceWriter *tw) {
    put(tw, "%s", tw->any_event ? ",\n" : "\n");
    tw->any_event = true;
}

static void write_meta(TraceWriter *tw, const char *what, int pid, int tid, const char *arg, int value) {
    next_event(tw);
    put(tw, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{", what, pid, tid);
    if (strcmp(arg, "sort_index") == 0) put(tw, "\"sort_index\":%d}}", value);
    else put(tw, "\"name\":\"%s %d\"}}", arg, value);
}

// "rank r" processes and "stage s" threads, both in index order.
static void write_tracks(TraceWriter *tw, int n_ranks, int n_stages, const int *stage_rank) {
    for (int r = 0; r < n_ranks; r++) {
        write_meta(tw, "process_name", r, 0, "rank", r);
        write_meta(tw, "process_sort_index", r, 0, "sort_index", r);
    }
    for (int s = 0; s < n_stages; s++) {
        write_meta(tw, "thread_name", stage_rank[s], s, "stage", s);
        write_meta(tw, "thread_sort_index", stage_rank[s], s, "sort_index", s);
    }
    tw->named = true;
}

static void write_event(TraceWriter *tw, int step, int rank, const ActionEvent *e, double t0) {
    const char *type = e->type < ACT_COUNT ? schedule_type_name((ActionType)e->type) : "?";
    next_event(tw);
    put(tw,
        "{\"name\":\"%s mb%d\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,"
        "\"args\":{\"step\":%d,\"mb\":%d,\"stage\":%d}}",
        type, e->mb, type, (e->start - t0) * 1e6, (e->end - e->start) * 1e6, rank, e->stage, step, e->mb, e->stage);
}

int trace_add_step(TraceWriter *tw, int step, int n_ranks, int n_stages, const int *stage_rank,
                   const ActionEvent *const *events, const int *n_events, const double *offsets, double t_origin) {
    if (tw->failed) return -1;
    if (!tw->named) write_tracks(tw, n_ranks, n_stages, stage_rank);
    for (int r = 0; r < n_ranks; r++)
        for (int i = 0; i < n_events[r]; i++)
            write_event(tw, step, r, &events[r][i], t_origin - (offsets ? offsets[r] : 0.0));
    if (tw->failed) return -1;
    return 0;
}

void trace_discard(TraceWriter *tw) {
    if (!tw) return;
    atomic_file_abort(tw->file);
    free(tw);
}

int trace_close(TraceWriter *tw, Error *err) {
    put(tw, "\n]}\n");
    int rc;
    if (tw->failed) {
        *err = tw->why;
        atomic_file_abort(tw->file);
        rc = -1;
    } else rc = atomic_file_commit(tw->file, err);
    free(tw);
    return rc;
}
