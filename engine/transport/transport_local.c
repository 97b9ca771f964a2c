// The local transport: P x D ranks as threads of one process. Each rank owns a mailbox (mutex +
// condition variable on CLOCK_MONOTONIC) holding a fixed pool of message buffers: a send
// takes a free buffer of the receiver's mailbox and copies the bytes in; a recv finds the
// (from, tag) message, copies it out and returns the buffer to the pool. Collectives meet at
// a rendezvous per group (a barrier with timeout and abort): the members publish their
// buffers, each member reduces its own slice of elements over all of them in group-rank order
// and writes the sum back to every member, and a second barrier keeps the buffers alive until
// everyone is done. Deterministic, nothing allocated per call.
// Also here: the view, a replica's window onto a world transport (ranks shifted by an offset).
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/transport/transport.h"

typedef struct LocalMsg {
    struct LocalMsg *next;
    int from, tag;
    size_t bytes;
    unsigned char *data;  // (max_bytes)
} LocalMsg;

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t arrived;
    LocalMsg *pending;    // received, not yet consumed (arrival order)
    LocalMsg *free_list;
    LocalMsg *pool;       // (capacity)
    unsigned char *bytes; // (capacity * max_bytes)
    bool aborted;
} Mailbox;

// A reusable barrier for the n members of one group, plus what they publish to each other.
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int n, arrived;
    unsigned long generation;  // bumps each time all n have arrived
    bool aborted;
    void **bufs;               // (n) each member's buffer of this call
    size_t *lens;              // (n) its element count (or byte count for a gather)
} Rendezvous;

typedef struct {
    Transport base;
    size_t max_bytes;
    TransportMemory mem;      // where mailbox bytes live, how they move
    int capacity;
    Mailbox *box;           // (n_ranks)
    Rendezvous *replicas;   // (P) the D ranks of pipeline rank p
    Rendezvous world;       // all ranks
} LocalTransport;

int transport_tag(MsgKind kind, int stage, int mb, int n_stages) {
    return (mb * n_stages + stage) * 2 + (int)kind;
}

static TransportStatus transport_local_send(Transport *t, int from, int to, int tag, const void *data, size_t bytes,
                                            Error *err) {
    LocalTransport *lt = (LocalTransport *)t;
    Mailbox *mb = &lt->box[to];
    if (bytes > lt->max_bytes) {
        error_set(err, "message of %zu bytes exceeds the transport's %zu", bytes, lt->max_bytes);
        return TRANSPORT_FAILED;
    }
    pthread_mutex_lock(&mb->lock);
    TransportStatus st = TRANSPORT_OK;
    if (mb->aborted) {
        error_set(err, "aborted (another rank failed) while sending");
        st = TRANSPORT_ABORTED;
    } else if (!mb->free_list) {
        error_set(err, "rank %d's mailbox is full (%d messages) while sending", to, lt->capacity);
        st = TRANSPORT_FAILED;
    } else {
        LocalMsg *m = mb->free_list;
        mb->free_list = m->next;
        *m = (LocalMsg){.next = NULL, .from = from, .tag = tag, .bytes = bytes, .data = m->data};
        lt->mem.copy(m->data, data, bytes);
        LocalMsg **tail = &mb->pending;
        while (*tail) tail = &(*tail)->next;
        *tail = m;
        pthread_cond_broadcast(&mb->arrived);
    }
    pthread_mutex_unlock(&mb->lock);
    return st;
}

// Unlinks and returns the pending message (from, tag), or NULL. Caller holds the lock.
static LocalMsg *mailbox_take(Mailbox *mb, int from, int tag) {
    for (LocalMsg **p = &mb->pending; *p; p = &(*p)->next)
        if ((*p)->from == from && (*p)->tag == tag) {
            LocalMsg *m = *p;
            *p = m->next;
            return m;
        }
    return NULL;
}

static struct timespec deadline_after(double seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double whole = (double)(long long)seconds;
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += (long)((seconds - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

// pthread_cond_timedwait in slices of at most 100 ms, beating `self`'s progress slot between
// them (a waiting rank shows it is alive, engine/transport/progress.h). ETIMEDOUT only at the
// deadline itself.
static int timedwait_beating(pthread_cond_t *cond, pthread_mutex_t *lock, const struct timespec *deadline,
                             ProgressBoard *board, int self) {
    struct timespec slice = deadline_after(0.1);
    const bool last = slice.tv_sec > deadline->tv_sec ||
                      (slice.tv_sec == deadline->tv_sec && slice.tv_nsec >= deadline->tv_nsec);
    const int rc = pthread_cond_timedwait(cond, lock, last ? deadline : &slice);
    progress_beat(board, self);
    return rc == ETIMEDOUT && !last ? 0 : rc;
}

static TransportStatus transport_local_recv(Transport *t, int self, int from, int tag, void *data, size_t bytes,
                                            Error *err) {
    LocalTransport *lt = (LocalTransport *)t;
    Mailbox *mb = &lt->box[self];
    const struct timespec deadline = deadline_after(t->timeout_s);
    TransportStatus st = TRANSPORT_OK;
    progress_wait_begin(t->board, self, from);
    pthread_mutex_lock(&mb->lock);
    LocalMsg *m = NULL;
    while (!mb->aborted && !(m = mailbox_take(mb, from, tag))) {
        if (timedwait_beating(&mb->arrived, &mb->lock, &deadline, t->board, self) == ETIMEDOUT &&
            !(m = mailbox_take(mb, from, tag)))
            break;
    }
    progress_wait_end(t->board, self);
    if (m && m->bytes != bytes) {
        error_set(err, "message from rank %d has %zu bytes, expected %zu", from, m->bytes, bytes);
        st = TRANSPORT_FAILED;
    } else if (m) {
        lt->mem.copy(data, m->data, bytes);
    } else if (mb->aborted) {
        error_set(err, "aborted (another rank failed) while waiting");
        st = TRANSPORT_ABORTED;
    } else {
        error_set(err, "timed out after %g s waiting", t->timeout_s);
        st = TRANSPORT_FAILED;
    }
    if (m) {
        m->next = mb->free_list;
        mb->free_list = m;
    }
    pthread_mutex_unlock(&mb->lock);
    return st;
}

// ---- collectives ---------------------------------------------------------------------------

static void rendezvous_init(Rendezvous *rv, int n) {
    pthread_mutex_init(&rv->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&rv->changed, &attr);
    pthread_condattr_destroy(&attr);
    rv->n = n;
    rv->bufs = xcalloc((size_t)n, sizeof(void *));
    rv->lens = xcalloc((size_t)n, sizeof(size_t));
}

static void rendezvous_destroy(Rendezvous *rv) {
    pthread_mutex_destroy(&rv->lock);
    pthread_cond_destroy(&rv->changed);
    free(rv->bufs);
    free(rv->lens);
}

static void rendezvous_abort(Rendezvous *rv) {
    pthread_mutex_lock(&rv->lock);
    rv->aborted = true;
    pthread_cond_broadcast(&rv->changed);
    pthread_mutex_unlock(&rv->lock);
}

// Member `idx` (world rank self) publishes (buf, len) (buf NULL: keeps what it published) and
// waits for all n.
static TransportStatus rendezvous_wait(Rendezvous *rv, int idx, void *buf, size_t len, Transport *t, int self,
                                       Error *err) {
    const double timeout_s = t->timeout_s;
    const struct timespec deadline = deadline_after(timeout_s);
    TransportStatus st = TRANSPORT_OK;
    progress_wait_begin(t->board, self, PROGRESS_GROUP);
    pthread_mutex_lock(&rv->lock);
    if (buf) {
        rv->bufs[idx] = buf;
        rv->lens[idx] = len;
    }
    const unsigned long gen = rv->generation;
    if (!rv->aborted && ++rv->arrived == rv->n) {
        rv->arrived = 0;
        rv->generation++;
        pthread_cond_broadcast(&rv->changed);
    }
    while (!rv->aborted && rv->generation == gen)
        if (timedwait_beating(&rv->changed, &rv->lock, &deadline, t->board, self) == ETIMEDOUT &&
            rv->generation == gen) {
            error_set(err, "timed out after %g s in a collective", timeout_s);
            st = TRANSPORT_FAILED;
            break;
        }
    if (st == TRANSPORT_OK && rv->generation == gen) {
        error_set(err, "aborted (another rank failed) in a collective");
        st = TRANSPORT_ABORTED;
    }
    pthread_mutex_unlock(&rv->lock);
    progress_wait_end(t->board, self);
    return st;
}

// The group's rendezvous and self's index in it (group-rank order: replica order, world order).
static Rendezvous *group_of(LocalTransport *lt, TransportGroup g, int self, int *idx) {
    if (g == GROUP_WORLD) {
        *idx = self;
        return &lt->world;
    }
    *idx = self / lt->base.n_pipe;
    return &lt->replicas[self % lt->base.n_pipe];
}

static bool lens_agree(const Rendezvous *rv, Error *err) {
    for (int k = 1; k < rv->n; k++)
        if (rv->lens[k] != rv->lens[0]) {
            error_set(err, "collective members disagree on its size (%zu vs %zu elements)", rv->lens[k], rv->lens[0]);
            return false;
        }
    return true;
}

// Member idx of n sums elements [idx*len/n, (idx+1)*len/n) over every member, in member order,
// and writes the sum to every member's buffer: the slices are disjoint, so no one races.
#define DEFINE_REDUCE_SLICE(NAME, TYPE)                                                 \
    static void NAME(Rendezvous *rv, int idx) {                                         \
        const size_t len = rv->lens[0];                                                 \
        const size_t lo = len * (size_t)idx / (size_t)rv->n;                            \
        const size_t hi = len * (size_t)(idx + 1) / (size_t)rv->n;                      \
        TYPE *const *b = (TYPE *const *)rv->bufs;                                       \
        for (size_t j = lo; j < hi; j++) {                                              \
            TYPE s = b[0][j];                                                           \
            for (int k = 1; k < rv->n; k++) s += b[k][j];                               \
            for (int k = 0; k < rv->n; k++) b[k][j] = s;                                \
        }                                                                               \
    }
DEFINE_REDUCE_SLICE(reduce_slice_f32, float)
DEFINE_REDUCE_SLICE(reduce_slice_f64, double)

static TransportStatus local_allreduce(Transport *t, int self, TransportGroup g, void *buf, size_t n,
                                       void (*reduce)(Rendezvous *, int), Error *err) {
    int idx;
    Rendezvous *rv = group_of((LocalTransport *)t, g, self, &idx);
    if (rv->n == 1) return TRANSPORT_OK;
    TransportStatus st = rendezvous_wait(rv, idx, buf, n, t, self, err);
    if (st != TRANSPORT_OK) return st;
    const bool ok = lens_agree(rv, err);  // every member sees the same verdict
    if (ok) reduce(rv, idx);
    st = rendezvous_wait(rv, idx, NULL, 0, t, self, err);
    return ok ? st : TRANSPORT_FAILED;
}

static TransportStatus transport_local_allreduce_f32(Transport *t, int self, TransportGroup g, float *buf, size_t n,
                                                     Error *err) {
    return local_allreduce(t, self, g, buf, n, reduce_slice_f32, err);
}

static TransportStatus transport_local_allreduce_f64(Transport *t, int self, TransportGroup g, double *buf,
                                                     size_t n, Error *err) {
    return local_allreduce(t, self, g, buf, n, reduce_slice_f64, err);
}

// Threads of one process share one clock.
static TransportStatus transport_local_clock_offsets(Transport *t, int self, double *offsets, Error *err) {
    (void)self, (void)err;
    for (int r = 0; r < t->n_ranks; r++) offsets[r] = 0.0;
    return TRANSPORT_OK;
}

static TransportStatus transport_local_gather_bytes(Transport *t, int self, const void *mine, size_t bytes, void *all,
                                                    size_t cap, size_t *counts, Error *err) {
    Rendezvous *rv = &((LocalTransport *)t)->world;
    if (bytes > cap) {
        error_set(err, "rank %d gathers %zu bytes, more than the %zu each may", self, bytes, cap);
        return TRANSPORT_FAILED;
    }
    TransportStatus st = rendezvous_wait(rv, self, (void *)mine, bytes, t, self, err);
    if (st != TRANSPORT_OK) return st;
    if (self == 0)
        for (int r = 0; r < rv->n; r++) {
            memcpy((unsigned char *)all + (size_t)r * cap, rv->bufs[r], rv->lens[r]);
            counts[r] = rv->lens[r];
        }
    return rendezvous_wait(rv, self, NULL, 0, t, self, err);
}

static void transport_local_abort(Transport *t) {
    LocalTransport *lt = (LocalTransport *)t;
    progress_end(t->board);  // freezes every slot as the failure found it
    for (int r = 0; r < t->n_ranks; r++) {
        Mailbox *mb = &lt->box[r];
        pthread_mutex_lock(&mb->lock);
        mb->aborted = true;
        pthread_cond_broadcast(&mb->arrived);
        pthread_mutex_unlock(&mb->lock);
    }
    for (int p = 0; p < t->n_pipe; p++) rendezvous_abort(&lt->replicas[p]);
    rendezvous_abort(&lt->world);
}

static void transport_local_free(Transport *t) {
    LocalTransport *lt = (LocalTransport *)t;
    for (int r = 0; r < t->n_ranks; r++) {
        Mailbox *mb = &lt->box[r];
        pthread_mutex_destroy(&mb->lock);
        pthread_cond_destroy(&mb->arrived);
        free(mb->pool);
        lt->mem.free(mb->bytes);
    }
    for (int p = 0; p < t->n_pipe; p++) rendezvous_destroy(&lt->replicas[p]);
    rendezvous_destroy(&lt->world);
    free(lt->replicas);
    free(lt->box);
    progress_board_free(t->board);
    free(lt);
}

static const TransportOps LOCAL_OPS = {
    .send = transport_local_send,
    .recv = transport_local_recv,
    .allreduce_f32 = transport_local_allreduce_f32,
    .allreduce_f64 = transport_local_allreduce_f64,
    .clock_offsets = transport_local_clock_offsets,
    .gather_bytes = transport_local_gather_bytes,
    .abort = transport_local_abort,
    .free = transport_local_free,
};

static void mailbox_init(Mailbox *mb, size_t max_bytes, int capacity, const TransportMemory *mem, int owner) {
    pthread_mutex_init(&mb->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&mb->arrived, &attr);
    pthread_condattr_destroy(&attr);
    mb->pool = xcalloc((size_t)capacity, sizeof(LocalMsg));
    mb->bytes = mem->alloc((size_t)capacity * max_bytes, owner);
    for (int i = 0; i < capacity; i++) {
        mb->pool[i].data = mb->bytes + (size_t)i * max_bytes;
        mb->pool[i].next = mb->free_list;
        mb->free_list = &mb->pool[i];
    }
}

static void *host_alloc(size_t bytes, int owner) {
    (void)owner;
    return xmalloc(bytes);
}

static void host_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

static const TransportMemory HOST_MEMORY = {.alloc = host_alloc, .free = free, .copy = host_copy};

Transport *transport_local_create_world(int P, int D, size_t max_bytes, int capacity, double timeout_s) {
    return transport_local_create_mem(P, D, max_bytes, capacity, timeout_s, NULL);
}

Transport *transport_local_create_mem(int P, int D, size_t max_bytes, int capacity, double timeout_s,
                                      const TransportMemory *mem) {
    const int n_ranks = P * D;
    LocalTransport *lt = xcalloc(1, sizeof *lt);
    lt->mem = mem ? *mem : HOST_MEMORY;
    lt->base = (Transport){.ops = &LOCAL_OPS, .n_ranks = n_ranks, .n_pipe = P, .timeout_s = timeout_s};
    lt->max_bytes = max_bytes;
    lt->capacity = capacity > 0 ? capacity : 1;
    lt->box = xcalloc((size_t)n_ranks, sizeof(Mailbox));
    for (int r = 0; r < n_ranks; r++) mailbox_init(&lt->box[r], max_bytes ? max_bytes : 1, lt->capacity, &lt->mem, r);
    lt->replicas = xcalloc((size_t)P, sizeof(Rendezvous));
    for (int p = 0; p < P; p++) rendezvous_init(&lt->replicas[p], D);
    rendezvous_init(&lt->world, n_ranks);
    lt->base.board = progress_board_create(n_ranks);
    return &lt->base;
}

Transport *transport_local_create(int n_ranks, size_t max_bytes, int capacity, double timeout_s) {
    return transport_local_create_world(n_ranks, 1, max_bytes, capacity, timeout_s);
}

// ---- the view: rank i of the view is rank offset + i of the world ---------------------------

typedef struct {
    Transport base;
    Transport *world;
    int offset;
} ViewTransport;

static ViewTransport *as_view(Transport *t) { return (ViewTransport *)t; }

static TransportStatus view_send(Transport *t, int from, int to, int tag, const void *data, size_t bytes,
                                 Error *err) {
    ViewTransport *v = as_view(t);
    return transport_send(v->world, from + v->offset, to + v->offset, tag, data, bytes, err);
}

static TransportStatus view_post(Transport *t, int self, int from, int tag, size_t bytes, Error *err) {
    ViewTransport *v = as_view(t);
    return transport_post(v->world, self + v->offset, from + v->offset, tag, bytes, err);
}

static TransportStatus view_recv(Transport *t, int self, int from, int tag, void *data, size_t bytes, Error *err) {
    ViewTransport *v = as_view(t);
    return transport_recv(v->world, self + v->offset, from + v->offset, tag, data, bytes, err);
}

static TransportStatus view_allreduce_f32(Transport *t, int self, TransportGroup g, float *buf, size_t n,
                                          Error *err) {
    ViewTransport *v = as_view(t);
    return transport_allreduce_f32(v->world, self + v->offset, g, buf, n, err);
}

static TransportStatus view_allreduce_f64(Transport *t, int self, TransportGroup g, double *buf, size_t n,
                                          Error *err) {
    ViewTransport *v = as_view(t);
    return transport_allreduce_f64(v->world, self + v->offset, g, buf, n, err);
}

static TransportStatus view_clock_offsets(Transport *t, int self, double *offsets, Error *err) {
    ViewTransport *v = as_view(t);
    return transport_clock_offsets(v->world, self + v->offset, offsets, err);
}

static TransportStatus view_gather_bytes(Transport *t, int self, const void *mine, size_t bytes, void *all,
                                         size_t cap, size_t *counts, Error *err) {
    ViewTransport *v = as_view(t);
    return transport_gather_bytes(v->world, self + v->offset, mine, bytes, all, cap, counts, err);
}

static void view_abort(Transport *t) { transport_abort(as_view(t)->world); }

static void view_free(Transport *t) { free(t); }

static const TransportOps VIEW_OPS = {
    .send = view_send,
    .post = view_post,
    .recv = view_recv,
    .allreduce_f32 = view_allreduce_f32,
    .allreduce_f64 = view_allreduce_f64,
    .clock_offsets = view_clock_offsets,
    .gather_bytes = view_gather_bytes,
    .abort = view_abort,
    .free = view_free,
};

Transport *transport_view_create(Transport *world, int offset, int n_ranks) {
    ViewTransport *v = xcalloc(1, sizeof *v);
    v->base = (Transport){.ops = &VIEW_OPS, .n_ranks = n_ranks, .n_pipe = world->n_pipe,
                          .timeout_s = world->timeout_s, .board = world->board,
                          .board_offset = world->board_offset + offset};
    v->world = world;
    v->offset = offset;
    return &v->base;
}
