// Abort notices and the small helpers of the MPI-based transports (engine/transport/mpi_notices.h).
#include "engine/transport/mpi_notices.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

enum { TAG_NOTICE = 0 };

int abort_notices_init(AbortNotices *n, MPI_Comm from, Error *err) {
    *n = (AbortNotices){0};
    int rc = MPI_Comm_dup(from, &n->comm);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(n->comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(n->comm, &n->rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(n->comm, &n->size);
    if (rc != MPI_SUCCESS) {
        mpi_call_failed(rc, "creating the abort notices' communicator", err);
        return -1;
    }
    n->from = -1;
    n->payload = n->rank;
    n->reqs = xmalloc(sizeof(MPI_Request) * (size_t)n->size);
    for (int r = 0; r < n->size; r++) n->reqs[r] = MPI_REQUEST_NULL;
    return 0;
}

bool abort_notices_poll(AbortNotices *n) {
    if (n->aborted) return true;
    int flag = 0;
    MPI_Status st;
    // A failing probe cannot tell us anything; the caller's own checks and deadline still end the wait.
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_NOTICE, n->comm, &flag, &st) == MPI_SUCCESS && flag) {
        int payload;  // the notice has arrived, so this receive returns at once
        (void)MPI_Recv(&payload, 1, MPI_INT, st.MPI_SOURCE, TAG_NOTICE, n->comm, MPI_STATUS_IGNORE);
        n->aborted = true;
        n->from = st.MPI_SOURCE;
    }
    return n->aborted;
}

void abort_notices_send(AbortNotices *n) {
    if (n->aborted) return;  // already stopped, by this rank or a notice: no echo
    n->aborted = true;
    for (int r = 0; r < n->size; r++)
        if (r != n->rank) MPI_Isend(&n->payload, 1, MPI_INT, r, TAG_NOTICE, n->comm, &n->reqs[r]);
}

void abort_notices_flush(AbortNotices *n, double seconds) {
    const double deadline = notices_now_s() + seconds;
    long ns = 1000;
    for (;;) {
        int all = 1;
        for (int r = 0; r < n->size; r++) {
            int done = 1;
            if (n->reqs[r] != MPI_REQUEST_NULL && MPI_Test(&n->reqs[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
            all = all && done;
        }
        if (all || notices_now_s() > deadline) return;
        notices_backoff(&ns);
    }
}

void abort_notices_free(AbortNotices *n) {
    if (n->aborted) return;
    MPI_Comm_free(&n->comm);
    free(n->reqs);
    n->reqs = NULL;
}

TransportStatus mpi_call_failed(int code, const char *call, Error *err) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", code);
    error_set(err, "%s failed: %s", call, text);
    return TRANSPORT_FAILED;
}

double notices_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// The kernel stretches a sleeping thread's wake-up by its timer slack (50 us by default), so a
// 1 us nanosleep takes about 55: every message a waiting rank received was seen up to that
// late. A slack of 1 ns makes the short pauses short; set once per waiting thread.
static _Thread_local bool exact_sleep;

void notices_backoff(long *ns) {
    if (!exact_sleep) {
        prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
        exact_sleep = true;
    }
    const struct timespec ts = {0, *ns};
    nanosleep(&ts, NULL);
    if (*ns < NOTICES_POLL_SHORT_NS) *ns = *ns * 2 < NOTICES_POLL_SHORT_NS ? *ns * 2 : NOTICES_POLL_SHORT_NS;
    else if (*ns < NOTICES_POLL_LONG_NS) *ns += 1000;
}
