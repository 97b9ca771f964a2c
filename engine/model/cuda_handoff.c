// engine/model/cuda_handoff: one CUDA event per handed-over buffer (cuda_handoff.h), recorded by
// each release and waited for by each acquire. A table, searched linearly: a run hands over a
// few messages per activation slot and stage, and the transports' buffers.
#include "engine/model/cuda_handoff.h"

#include <pthread.h>
#include <stdlib.h>

#include "engine/error.h"
#include "kernels/cuda/cuda_check.h"

typedef struct {
    const void *buf;
    cudaEvent_t last;   // recorded after the last released access
    int device;         // where `last` was created (an event is recorded on its own device)
} Handoff;

static pthread_mutex_t handoff_lock = PTHREAD_MUTEX_INITIALIZER;
static Handoff *table;
static size_t n_table, cap_table;

// buf's entry (lock held), or NULL.
static Handoff *find(const void *buf) {
    for (size_t i = 0; i < n_table; i++)
        if (table[i].buf == buf) return &table[i];
    return NULL;
}

void cuda_handoff_acquire(const void *buf, cudaStream_t stream) {
    pthread_mutex_lock(&handoff_lock);
    const Handoff *h = find(buf);
    if (h) CUDA_CHECK(cudaStreamWaitEvent(stream, h->last, 0));
    pthread_mutex_unlock(&handoff_lock);
}

// The stream is on the calling thread's current device (the engine launches nothing else).
void cuda_handoff_release(const void *buf, cudaStream_t stream) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    pthread_mutex_lock(&handoff_lock);
    Handoff *h = find(buf);
    if (!h) {
        if (n_table == cap_table) {
            cap_table = cap_table ? 2 * cap_table : 64;
            table = check_alloc(realloc(table, cap_table * sizeof *table), cap_table * sizeof *table, __FILE__,
                                __LINE__);
        }
        h = &table[n_table++];
        *h = (Handoff){.buf = buf, .device = device};
        CUDA_CHECK(cudaEventCreateWithFlags(&h->last, cudaEventDisableTiming));
    } else if (h->device != device) {   // waits already queued on the old event keep it
        CUDA_CHECK(cudaEventDestroy(h->last));
        CUDA_CHECK(cudaEventCreateWithFlags(&h->last, cudaEventDisableTiming));
        h->device = device;
    }
    CUDA_CHECK(cudaEventRecord(h->last, stream));
    pthread_mutex_unlock(&handoff_lock);
}

void cuda_handoff_forget(const void *buf) {
    pthread_mutex_lock(&handoff_lock);
    Handoff *h = find(buf);
    if (h) {
        CUDA_CHECK(cudaEventDestroy(h->last));
        *h = table[--n_table];
    }
    pthread_mutex_unlock(&handoff_lock);
}
