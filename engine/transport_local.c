// The local transport: P ranks as threads of one process. Each rank owns a mailbox (mutex +
// condition variable on CLOCK_MONOTONIC) holding a fixed pool of message buffers: a send
// takes a free buffer of the receiver's mailbox and copies the bytes in; a recv finds the
// (from, tag) message, copies it out and returns the buffer to the pool.
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/transport.h"

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

typedef struct {
    Transport base;
    size_t max_bytes;
    int capacity;
    Mailbox *box;         // (n_ranks)
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
        memcpy(m->data, data, bytes);
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

static TransportStatus transport_local_recv(Transport *t, int self, int from, int tag, void *data, size_t bytes,
                                            Error *err) {
    LocalTransport *lt = (LocalTransport *)t;
    Mailbox *mb = &lt->box[self];
    const struct timespec deadline = deadline_after(t->timeout_s);
    TransportStatus st = TRANSPORT_OK;
    pthread_mutex_lock(&mb->lock);
    LocalMsg *m = NULL;
    while (!mb->aborted && !(m = mailbox_take(mb, from, tag))) {
        if (pthread_cond_timedwait(&mb->arrived, &mb->lock, &deadline) == ETIMEDOUT &&
            !(m = mailbox_take(mb, from, tag)))
            break;
    }
    if (m && m->bytes != bytes) {
        error_set(err, "message from rank %d has %zu bytes, expected %zu", from, m->bytes, bytes);
        st = TRANSPORT_FAILED;
    } else if (m) {
        memcpy(data, m->data, bytes);
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

static void transport_local_abort(Transport *t) {
    LocalTransport *lt = (LocalTransport *)t;
    for (int r = 0; r < t->n_ranks; r++) {
        Mailbox *mb = &lt->box[r];
        pthread_mutex_lock(&mb->lock);
        mb->aborted = true;
        pthread_cond_broadcast(&mb->arrived);
        pthread_mutex_unlock(&mb->lock);
    }
}

static void transport_local_free(Transport *t) {
    LocalTransport *lt = (LocalTransport *)t;
    for (int r = 0; r < t->n_ranks; r++) {
        Mailbox *mb = &lt->box[r];
        pthread_mutex_destroy(&mb->lock);
        pthread_cond_destroy(&mb->arrived);
        free(mb->pool);
        free(mb->bytes);
    }
    free(lt->box);
    free(lt);
}

static const TransportOps LOCAL_OPS = {
    .send = transport_local_send,
    .recv = transport_local_recv,
    .abort = transport_local_abort,
    .free = transport_local_free,
};

static void mailbox_init(Mailbox *mb, size_t max_bytes, int capacity) {
    pthread_mutex_init(&mb->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&mb->arrived, &attr);
    pthread_condattr_destroy(&attr);
    mb->pool = xcalloc((size_t)capacity, sizeof(LocalMsg));
    mb->bytes = xmalloc((size_t)capacity * max_bytes);
    for (int i = 0; i < capacity; i++) {
        mb->pool[i].data = mb->bytes + (size_t)i * max_bytes;
        mb->pool[i].next = mb->free_list;
        mb->free_list = &mb->pool[i];
    }
}

Transport *transport_local_create(int n_ranks, size_t max_bytes, int capacity, double timeout_s) {
    LocalTransport *lt = xcalloc(1, sizeof *lt);
    lt->base = (Transport){.ops = &LOCAL_OPS, .n_ranks = n_ranks, .timeout_s = timeout_s};
    lt->max_bytes = max_bytes;
    lt->capacity = capacity > 0 ? capacity : 1;
    lt->box = xcalloc((size_t)n_ranks, sizeof(Mailbox));
    for (int r = 0; r < n_ranks; r++) mailbox_init(&lt->box[r], max_bytes ? max_bytes : 1, lt->capacity);
    return &lt->base;
}
