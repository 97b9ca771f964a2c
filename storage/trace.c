// Chrome trace event JSON, written with fprintf: every string in it is ours (action type
// names, "rank r", "stage s"), so nothing needs escaping. Layout:
//   {"displayTimeUnit":"ms","traceEvents":[
//   {"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"rank 0"}},
//   {"name":"F mb0","cat":"F","ph":"X","ts":12.345,"dur":678.901,"pid":0,"tid":0,"args":{...}},
//   ...]}
#include "storage/trace.h"
#include "storage/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/schedule/schedule.h"

struct TraceWriter {
    FILE *f;
    char *path, *tmp;     // PATH and PATH.tmp
    bool any_event;       // a comma goes before the next event
    bool named;           // the track metadata is written
    bool failed;          // a write failed; errno_at_failure says why
    int errno_at_failure;
};

TraceWriter *trace_open(const char *path, Error *err) {
    const size_t n = strlen(path);
    TraceWriter *tw = xcalloc(1, sizeof *tw);
    tw->path = xmalloc(n + 1);
    memcpy(tw->path, path, n + 1);
    tw->tmp = xmalloc(n + 5);
    snprintf(tw->tmp, n + 5, "%s.tmp", path);
    tw->f = fopen(tw->tmp, "w");
    if (!tw->f) {
        error_set(err, "%s: cannot create the trace: %s", tw->tmp, strerror(errno));
        free(tw->path);
        free(tw->tmp);
        free(tw);
        return NULL;
    }
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", tw->f);
    return tw;
}

// Starts the next element of traceEvents.
static void next_event(TraceWriter *tw) {
    fputs(tw->any_event ? ",\n" : "\n", tw->f);
    tw->any_event = true;
}

static void write_meta(TraceWriter *tw, const char *what, int pid, int tid, const char *arg, int value) {
    next_event(tw);
    fprintf(tw->f, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{", what, pid, tid);
    if (strcmp(arg, "sort_index") == 0) fprintf(tw->f, "\"sort_index\":%d}}", value);
    else fprintf(tw->f, "\"name\":\"%s %d\"}}", arg, value);
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
    fprintf(tw->f,
            "{\"name\":\"%s mb%d\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,"
            "\"args\":{\"step\":%d,\"mb\":%d,\"stage\":%d}}",
            type, e->mb, type, (e->start - t0) * 1e6, (e->end - e->start) * 1e6, rank, e->stage, step, e->mb,
            e->stage);
}

int trace_add_step(TraceWriter *tw, int step, int n_ranks, int n_stages, const int *stage_rank,
                   const ActionEvent *const *events, const int *n_events, const double *offsets, double t_origin) {
    if (tw->failed) return -1;
    if (!tw->named) write_tracks(tw, n_ranks, n_stages, stage_rank);
    for (int r = 0; r < n_ranks; r++)
        for (int i = 0; i < n_events[r]; i++)
            write_event(tw, step, r, &events[r][i], t_origin - (offsets ? offsets[r] : 0.0));
    if (ferror(tw->f)) {
        tw->failed = true;
        tw->errno_at_failure = errno;
        return -1;
    }
    return 0;
}

static void trace_free(TraceWriter *tw) {
    free(tw->path);
    free(tw->tmp);
    free(tw);
}

void trace_discard(TraceWriter *tw) {
    if (!tw) return;
    fclose(tw->f);
    unlink(tw->tmp);
    trace_free(tw);
}

int trace_close(TraceWriter *tw, Error *err) {
    fputs("\n]}\n", tw->f);
    const char *what = NULL;   // the step that failed
    int why = 0;               // its errno
    if (tw->failed) what = "write", why = tw->errno_at_failure;
    else if (fflush(tw->f) != 0 || ferror(tw->f)) what = "write", why = errno;
    else if (fsync(fileno(tw->f)) != 0) what = "fsync", why = errno;
    if (fclose(tw->f) != 0 && !what) what = "close", why = errno;
    if (!what && rename(tw->tmp, tw->path) != 0) what = "rename", why = errno;
    if (what) {
        error_set(err, "%s: trace %s failed: %s", tw->path, what, strerror(why));
        unlink(tw->tmp);
    }
    // The directory entry of the rename is durable only once the directory is fsynced.
    const int rc = what || fsync_parent_dir(tw->path, err) ? -1 : 0;
    trace_free(tw);
    return rc;
}
