// engine/transport: point-to-point messages between pipeline ranks, behind one small table of
// functions so `local` (ranks as threads of one process), `mpi` and `nccl` are interchangeable.
//
// Contract (what the runtime relies on):
//   send  copies the bytes out before it returns and never waits for the receiver (buffered).
//   recv  blocks until the message (from, tag) arrives, at most timeout_s seconds; it never
//         hangs: on a timeout, or once any rank called abort, it returns an error.
//   abort wakes every rank's pending and future recv with TRANSPORT_ABORTED, so one failing
//         rank stops all of them promptly.
// A tag names one message of a step: (kind, sending stage, microbatch), see transport_tag.
#ifndef PPTRAIN_TRANSPORT_H
#define PPTRAIN_TRANSPORT_H
#include <stddef.h>

#include "engine/error.h"

typedef enum {
    TRANSPORT_OK = 0,
    TRANSPORT_FAILED = -1,   // this rank's own failure (timeout, bad size, full mailbox)
    TRANSPORT_ABORTED = -2,  // another rank aborted the transport
} TransportStatus;

typedef enum { MSG_ACT = 0, MSG_GRAD = 1 } MsgKind;  // activations forward, gradients back

// Unique within a step for S stages: ((mb * S) + stage) * 2 + kind, stage = the sender's.
int transport_tag(MsgKind kind, int stage, int mb, int n_stages);

typedef struct Transport Transport;

typedef struct {
    // Rank `from` sends bytes to rank `to`. err: one line, without rank/action context.
    TransportStatus (*send)(Transport *t, int from, int to, int tag, const void *data, size_t bytes, Error *err);
    // Rank `self` receives exactly `bytes` of (from, tag) into data.
    TransportStatus (*recv)(Transport *t, int self, int from, int tag, void *data, size_t bytes, Error *err);
    void (*abort)(Transport *t);
    void (*free)(Transport *t);
} TransportOps;

struct Transport {
    const TransportOps *ops;
    int n_ranks;
    double timeout_s;  // longest wait of one recv (default 300)
};

#define TRANSPORT_DEFAULT_TIMEOUT_S 300.0

// Ranks as threads of one process. Each rank's mailbox preallocates `capacity` messages of at
// most max_bytes each (no allocation per message); capacity must cover the messages a rank
// can have received but not yet consumed (its RECV actions per step is always enough).
Transport *transport_local_create(int n_ranks, size_t max_bytes, int capacity, double timeout_s);

static inline TransportStatus transport_send(Transport *t, int from, int to, int tag, const void *data,
                                             size_t bytes, Error *err) {
    return t->ops->send(t, from, to, tag, data, bytes, err);
}
static inline TransportStatus transport_recv(Transport *t, int self, int from, int tag, void *data, size_t bytes,
                                             Error *err) {
    return t->ops->recv(t, self, from, tag, data, bytes, err);
}
static inline void transport_abort(Transport *t) { t->ops->abort(t); }
static inline void transport_free(Transport *t) {
    if (t) t->ops->free(t);
}
#endif
