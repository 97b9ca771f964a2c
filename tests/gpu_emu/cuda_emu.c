// tests/gpu_emu/cuda_emu.c: a CPU stand-in for the CUDA runtime, so the engine's GPU path
// (engine/model/model_cuda.c, the GPU parts of engine/pipeline.c, the local transport's device
// mailboxes, the nccl transport, `check`, checkpoints) runs and is tested on a machine without a
// GPU. Linked instead of the CUDA runtime, kernels/cuda and NCCL into `pptrain_emu`
// (CMakeLists.txt), with kernels_emu.c (the kernels) and nccl_emu.c (NCCL over MPI).
//
// A lazy, adversarial GPU. Each stream is a queue: a kernel, a copy or a memset is queued with
// its arguments captured and runs only when something waits on it, that is
//   a stream or event synchronize, a device synchronize (cudaFree does one, as on a GPU),
//   an event query or a cudaStreamWaitEvent that needs it, and a copy to pageable host memory
//   (which returns only once the copy is done, so it waits for the stream);
// and an NCCL operation (emu.h: EmuOp) starts as soon as what comes before it in its stream
// can run, because the peer waits on it (a GPU would get there too). While the host waits,
// now and then (seeded: PPTRAIN_EMU_SEED, default 1) the head of another stream runs first, so
// streams that nothing orders interleave differently from run to run. So a missing wait or
// event (a kernel reading a buffer another stream has not written yet, a host reading a copy
// before it landed, a buffer reused while a send still reads it) shows as wrong numbers.
// Copies follow the CUDA rules of pageable and pinned host memory (cudaMallocHost,
// cudaHostAlloc): from pageable memory the bytes are taken when the call is made; to or from
// pinned memory when the copy runs.
// Memory is poisoned: cudaMalloc hands out NaN (0xff bytes), cudaFree fills the block with
// NaN before it frees it (kernels_emu.c poisons the context's arena as it is recycled).
// Strict where a GPU would fail: every buffer a kernel reads or writes must lie inside one
// live device allocation, copies must go the way their kind says, a context's kernels must be
// launched from a thread whose current device is the context's (cudaSetDevice), and an event
// records only on a stream of its own device; a breach prints one line naming the call and
// aborts.
// PPTRAIN_EMU_GPUS=N sets how many devices it pretends to have (default 1).
// Timing events carry the host clock of the moment their stream ran to them
// (cudaEventElapsedTime); PPTRAIN_EMU_KERNEL_US=N makes every kernel take N microseconds more.
// PPTRAIN_EMU_FAIL_CALL=N [PPTRAIN_EMU_FAIL_RANK=R] makes a CUDA call fail (injected_failure).
// PPTRAIN_EMU_COUNT_SYNCS=1 prints, at exit, four lines on stderr
//   pptrain (GPU emulation): N host syncs            (" (rank R)" added under mpirun)
// counting every call that made the host wait for device work not yet done (a stream or event
// synchronize, a copy to pageable memory, a cudaFree), summed over the process's threads, and
//   pptrain (GPU emulation): M GEMM plans built
// the misses of the contexts' GEMM plan caches (kernels/cuda/gemm_plans.h), each a cuBLASLt
// heuristic query on a GPU, and
//   pptrain (GPU emulation): K kernel calls
// the kernels/cuda calls that queued work (kernels_emu.c: one item each; on a GPU most are one
// launch, a few several: attention, the loss, an RMSNorm weight gradient), and
//   pptrain (GPU emulation): Z memsets
// the device memsets queued (cudaMemsetAsync of a nonzero size: cuda_zero), each a pass over
// its bytes on a GPU.
// Not emulated: the kernels themselves (tests/gpu/test_cuda_kernels runs those on a GPU).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cuda/cuda_check.h"
#include "tests/gpu_emu/emu.h"

void emu_breach(const char *call, const char *what) {
    fprintf(stderr, "pptrain (GPU emulation): %s: %s\n", call, what);
    abort();
}

static void *emu_malloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) emu_breach("malloc", "out of host memory");
    return p;
}

int emu_devices(void) {
    const char *v = getenv("PPTRAIN_EMU_GPUS");
    const int n = v ? atoi(v) : 1;
    return n > 0 ? n : 1;
}

void emu_poison(void *p, size_t bytes) { memset(p, 0xff, bytes); }

// ---- the lock, the seed and the count ----------------------------------------------------
// One lock guards every queue and the memory registry; queued work runs under it, so the
// device runs one item at a time (kernels still use OpenMP inside).

static pthread_mutex_t gpu_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t rng_state;
static unsigned long host_syncs;
static unsigned long gemm_plans_built;   // atomic: stages build theirs on their own threads
static unsigned long kernels_queued;     // atomic: emu_enqueue's calls, one a kernels/cuda call
static unsigned long memsets_queued;     // atomic: cudaMemsetAsync's of a nonzero size

void emu_count_gemm_plan(void) { __atomic_fetch_add(&gemm_plans_built, 1, __ATOMIC_RELAXED); }

// At exit: "pptrain (GPU emulation): N host syncs", then "... M GEMM plans built", "... K
// kernel calls" and "... Z memsets", each with " (rank R)" under mpirun.
static void print_syncs(void) {
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    fprintf(stderr, "pptrain (GPU emulation): %lu host syncs%s%s%s\n", host_syncs, rank ? " (rank " : "",
            rank ? rank : "", rank ? ")" : "");
    fprintf(stderr, "pptrain (GPU emulation): %lu GEMM plans built%s%s%s\n",
            __atomic_load_n(&gemm_plans_built, __ATOMIC_RELAXED), rank ? " (rank " : "", rank ? rank : "",
            rank ? ")" : "");
    fprintf(stderr, "pptrain (GPU emulation): %lu kernel calls%s%s%s\n",
            __atomic_load_n(&kernels_queued, __ATOMIC_RELAXED), rank ? " (rank " : "", rank ? rank : "",
            rank ? ")" : "");
    fprintf(stderr, "pptrain (GPU emulation): %lu memsets%s%s%s\n", __atomic_load_n(&memsets_queued, __ATOMIC_RELAXED),
            rank ? " (rank " : "", rank ? rank : "", rank ? ")" : "");
}

// Reads PPTRAIN_EMU_SEED and PPTRAIN_EMU_COUNT_SYNCS once, before main.
__attribute__((constructor)) static void emu_start(void) {
    const char *seed = getenv("PPTRAIN_EMU_SEED");
    rng_state = 0x9e3779b97f4a7c15ull ^ (seed ? strtoull(seed, NULL, 10) : 1);
    if (!rng_state) rng_state = 1;
    const char *count = getenv("PPTRAIN_EMU_COUNT_SYNCS");
    if (count && atoi(count) == 1) atexit(print_syncs);
}

// xorshift64 (lock held).
static uint64_t rng_next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

// ---- memory: a registry of live allocations ----------------------------------------------

typedef struct {
    char *base;
    size_t bytes;
    int device;   // -1: pinned host memory
} Block;

static Block *blocks;
static size_t n_blocks, cap_blocks;
static _Thread_local int current_device;
static _Thread_local cudaError_t last_error;

int emu_current_device(void) { return current_device; }

static cudaError_t fail(cudaError_t e) {
    last_error = e;
    return e;
}

// PPTRAIN_EMU_FAIL_CALL=N (with PPTRAIN_EMU_FAIL_RANK=R: only on MPI rank R): the Nth call of
// cudaMemcpyAsync or cudaEventRecord in this process fails with cudaErrorLaunchFailure, as a
// GPU reports a kernel's fault at the next call, and so does every later one (the error is
// sticky on a GPU). For the tests of what a failing CUDA call does to the other ranks.
static bool injected_failure(void) {
    static long at = -1;
    static _Atomic long calls;
    if (at < 0) {
        const char *n = getenv("PPTRAIN_EMU_FAIL_CALL"), *r = getenv("PPTRAIN_EMU_FAIL_RANK");
        const char *mine = getenv("OMPI_COMM_WORLD_RANK");
        at = n && atol(n) > 0 && (!r || (mine && atoi(mine) == atoi(r))) ? atol(n) : 0;
    }
    return at > 0 && ++calls >= at;
}

// The block holding [p, p + bytes) (lock held), or NULL.
static const Block *find_block(const void *p, size_t bytes) {
    const char *c = p;
    for (size_t i = 0; i < n_blocks; i++)
        if (c >= blocks[i].base && c + bytes <= blocks[i].base + blocks[i].bytes) return &blocks[i];
    return NULL;
}

static bool is_device(const void *p, size_t bytes) {
    const Block *b = find_block(p, bytes ? bytes : 1);
    return b && b->device >= 0;
}

static bool is_pinned(const void *p, size_t bytes) {
    const Block *b = find_block(p, bytes ? bytes : 1);
    return b && b->device < 0;
}

void emu_need_device(const char *call, const void *p, size_t bytes) {
    if (bytes == 0) return;
    pthread_mutex_lock(&gpu_lock);
    const bool ok = p && is_device(p, bytes);
    pthread_mutex_unlock(&gpu_lock);
    if (!ok) emu_breach(call, "a buffer is not (wholly) device memory");
}

static void add_block(void *p, size_t bytes, int device) {
    pthread_mutex_lock(&gpu_lock);
    if (n_blocks == cap_blocks) {
        cap_blocks = cap_blocks ? 2 * cap_blocks : 64;
        blocks = realloc(blocks, cap_blocks * sizeof *blocks);
        if (!blocks) emu_breach("cudaMalloc", "out of host memory");
    }
    blocks[n_blocks++] = (Block){.base = p, .bytes = bytes ? bytes : 1, .device = device};
    pthread_mutex_unlock(&gpu_lock);
}

// Removes the block starting at p (pinned or not, as asked); its device in *device.
static bool remove_block(void *p, bool pinned, int *device) {
    pthread_mutex_lock(&gpu_lock);
    size_t i = 0;
    while (i < n_blocks && !(blocks[i].base == p && (blocks[i].device < 0) == pinned)) i++;
    const bool found = i < n_blocks;
    if (found) {
        *device = blocks[i].device;
        blocks[i] = blocks[--n_blocks];
    }
    pthread_mutex_unlock(&gpu_lock);
    return found;
}

cudaError_t cudaMalloc(void **p, size_t bytes) {
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return fail(cudaErrorMemoryAllocation);
    emu_poison(*p, bytes);   // cudaMalloc's memory is not zeroed: what reads it first gets NaN
    add_block(*p, bytes, current_device);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t bytes) {
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return fail(cudaErrorMemoryAllocation);
    emu_poison(*p, bytes);
    add_block(*p, bytes, -1);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags) {
    (void)flags;
    return cudaMallocHost(p, bytes);
}

// ---- streams: queues of work ---------------------------------------------------------------

typedef enum { ITEM_RUN, ITEM_OP, ITEM_WAIT } ItemKind;

typedef struct Item {
    struct Item *next;
    ItemKind kind;
    void (*run)(void *args);        // ITEM_RUN
    bool kernel;                    // ITEM_RUN: a kernel (emu_enqueue), not a copy or a stamp
    EmuOp op;                       // ITEM_OP
    cudaStream_t on;                // ITEM_WAIT: until on's first `upto` items are done
    uint64_t upto;
    void *args;
} Item;

struct CUstream_st {
    Item *head, *tail;      // pending, in order
    uint64_t queued, done;  // items ever queued; items done (the first `done` of them)
    size_t ops;             // ITEM_OP items pending
    int device;
};

struct CUevent_st {
    cudaStream_t stream;    // NULL: never recorded (complete)
    uint64_t upto;          // complete once stream->done >= upto
    int device;             // the current device at creation: it records only there
    bool timing;            // created without cudaEventDisableTiming
    uint64_t records;       // how often recorded: a stamp of an older record is stale
    double at;              // timing: the host clock (seconds) when the stream reached the last record
};

static cudaStream_t *live;          // every stream that may hold work
static size_t n_live, cap_live;
static cudaStream_t *retired;       // destroyed, drained: kept so events and waits on them resolve
static size_t n_retired, cap_retired;
static struct CUstream_st legacy_stream;   // the NULL / legacy default stream
static bool legacy_live;                   // it is in live[] (from its first use)
static pthread_key_t per_thread_key;
static pthread_once_t per_thread_once = PTHREAD_ONCE_INIT;

static void push_stream(cudaStream_t **list, size_t *n, size_t *cap, cudaStream_t s) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        *list = realloc(*list, *cap * sizeof **list);
        if (!*list) emu_breach("cudaStreamCreate", "out of host memory");
    }
    (*list)[(*n)++] = s;
}

// (lock held)
static cudaStream_t new_stream(void) {
    cudaStream_t s = calloc(1, sizeof *s);
    if (!s) emu_breach("cudaStreamCreate", "out of host memory");
    s->device = current_device;
    push_stream(&live, &n_live, &cap_live, s);
    return s;
}

static void drain_and_retire(cudaStream_t s);

static void per_thread_exit(void *s) { drain_and_retire(s); }

static void per_thread_key_make(void) { pthread_key_create(&per_thread_key, per_thread_exit); }

// The stream behind a handle: the legacy stream, the calling thread's own, or s itself.
// (lock held)
static cudaStream_t resolve(cudaStream_t s) {
    if (s == NULL || s == cudaStreamLegacy) {
        if (!legacy_live) push_stream(&live, &n_live, &cap_live, &legacy_stream);
        legacy_live = true;
        return &legacy_stream;
    }
    if (s != cudaStreamPerThread) return s;
    pthread_once(&per_thread_once, per_thread_key_make);
    cudaStream_t mine = pthread_getspecific(per_thread_key);
    if (!mine) {
        mine = new_stream();
        pthread_setspecific(per_thread_key, mine);
    }
    return mine;
}

static void enqueue_item(cudaStream_t stream, Item it, const void *args, size_t bytes) {
    Item *item = emu_malloc(sizeof *item);
    *item = it;
    item->args = NULL;
    if (bytes) {
        item->args = emu_malloc(bytes);
        memcpy(item->args, args, bytes);
    }
    pthread_mutex_lock(&gpu_lock);
    cudaStream_t s = resolve(stream);
    bool known = false;
    for (size_t i = 0; i < n_live && !known; i++) known = live[i] == s;
    if (!known) emu_breach("a stream operation", "the stream was destroyed");
    if (s->tail) s->tail->next = item;
    else s->head = item;
    s->tail = item;
    s->queued++;
    if (it.kind == ITEM_OP) s->ops++;
    pthread_mutex_unlock(&gpu_lock);
}

void emu_enqueue(cudaStream_t stream, void (*run)(void *args), const void *args, size_t bytes) {
    __atomic_fetch_add(&kernels_queued, 1, __ATOMIC_RELAXED);
    enqueue_item(stream, (Item){.kind = ITEM_RUN, .run = run, .kernel = true}, args, bytes);
}

// A copy, a memset or an event's stamp: work that is not a kernel (no PPTRAIN_EMU_KERNEL_US).
static void enqueue_work(cudaStream_t stream, void (*run)(void *args), const void *args, size_t bytes) {
    enqueue_item(stream, (Item){.kind = ITEM_RUN, .run = run}, args, bytes);
}

// PPTRAIN_EMU_KERNEL_US: how long each kernel takes to run, in microseconds (default 0), so a
// test can tell device time (events: cudaEventElapsedTime) from the time to queue the work.
static unsigned kernel_us(void) {
    static int us = -1;
    if (us < 0) {
        const char *v = getenv("PPTRAIN_EMU_KERNEL_US");
        us = v && atoi(v) > 0 ? atoi(v) : 0;
    }
    return (unsigned)us;
}

static void progress(void);

// An operation starts at once if its stream allows (progress).
void emu_enqueue_op(cudaStream_t stream, EmuOp op, const void *args, size_t bytes) {
    enqueue_item(stream, (Item){.kind = ITEM_OP, .op = op}, args, bytes);
    pthread_mutex_lock(&gpu_lock);
    progress();
    pthread_mutex_unlock(&gpu_lock);
}

static void pop(cudaStream_t s) {
    Item *it = s->head;
    s->head = it->next;
    if (!s->head) s->tail = NULL;
    s->done++;
    if (it->kind == ITEM_OP) s->ops--;
    free(it->args);
    free(it);
}

static bool advance(cudaStream_t s, uint64_t upto, int depth);

// Runs one item at the head of s if it can complete now (lock held).
static bool step_head(cudaStream_t s, int depth) {
    Item *it = s->head;
    switch (it->kind) {
    case ITEM_RUN:
        it->run(it->args);
        if (it->kernel && kernel_us()) usleep(kernel_us());
        break;
    case ITEM_WAIT:
        if (!advance(it->on, it->upto, depth + 1)) return false;
        break;
    case ITEM_OP:
        if (it->op.aborted && *it->op.aborted) it->op.step(it->args, true);
        else if (!it->op.step(it->args, false)) return false;
        break;
    }
    pop(s);
    return true;
}

// Now and then the GPU runs the head of another stream first, if it is a kernel or a copy
// (lock held): streams that nothing orders interleave by the seed.
static void maybe_run_other(cudaStream_t s) {
    if (n_live < 2 || rng_next() % 8) return;
    cudaStream_t t = live[rng_next() % n_live];
    if (t != s && t->head && t->head->kind == ITEM_RUN) step_head(t, 0);
}

// Runs s's items until its first `upto` are done, or one cannot complete yet (an NCCL
// operation in flight, or a wait on one). True when reached (lock held).
static bool advance(cudaStream_t s, uint64_t upto, int depth) {
    if (depth > 64) emu_breach("a stream wait", "waits on events form a cycle");
    while (s->done < upto) {
        if (!s->head) emu_breach("a stream wait", "waits for work never queued");
        if (s->head->kind == ITEM_RUN) maybe_run_other(s);
        if (!step_head(s, depth)) return false;
    }
    return true;
}

// Every stream's NCCL operations start, or finish, as soon as what precedes them in their
// stream allows: a peer waits on them, and a GPU would get there (lock held). Behind an
// operation in flight, the operations that follow it (with only satisfiable event waits
// between) start too: MPI keeps their order, and they complete in stream order. Streams are
// visited from a seeded start.
static void progress(void) {
    if (!n_live) return;
    const size_t first = (size_t)(rng_next() % n_live);
    for (size_t k = 0; k < n_live; k++) {
        cudaStream_t s = live[(first + k) % n_live];
        if (!s->ops) continue;
        uint64_t upto = s->done + 1;
        for (const Item *it = s->head; it->kind != ITEM_OP; it = it->next) upto++;
        advance(s, upto, 0);
        for (Item *it = s->head; it; it = it->next) {
            if (it->kind == ITEM_RUN || (it->kind == ITEM_WAIT && !advance(it->on, it->upto, 1))) break;
            if (it->kind == ITEM_OP && !(it->op.aborted && *it->op.aborted)) it->op.step(it->args, false);
        }
    }
}

// The host waits for s's first `upto` items: a host sync, counted when `counted` and the device
// is not there yet (waiting for work already done costs a GPU nothing).
static void host_wait(cudaStream_t s, uint64_t upto, bool counted) {
    pthread_mutex_lock(&gpu_lock);
    if (counted && s->done < upto) host_syncs++;
    for (;;) {
        progress();
        if (advance(s, upto, 0)) break;
        pthread_mutex_unlock(&gpu_lock);
        usleep(20);
        pthread_mutex_lock(&gpu_lock);
    }
    pthread_mutex_unlock(&gpu_lock);
}

static void drain_and_retire(cudaStream_t s) {
    pthread_mutex_lock(&gpu_lock);
    const uint64_t upto = s->queued;
    pthread_mutex_unlock(&gpu_lock);
    host_wait(s, upto, false);
    pthread_mutex_lock(&gpu_lock);
    for (size_t i = 0; i < n_live; i++)
        if (live[i] == s) live[i] = live[--n_live];
    push_stream(&retired, &n_retired, &cap_retired, s);
    pthread_mutex_unlock(&gpu_lock);
}

// Waits for all work queued so far on device's streams (a host sync, counted as host_wait's).
static void device_wait(int device) {
    pthread_mutex_lock(&gpu_lock);
    size_t n = 0;
    bool behind = false;
    cudaStream_t *mine = emu_malloc((n_live ? n_live : 1) * sizeof *mine);
    uint64_t *upto = emu_malloc((n_live ? n_live : 1) * sizeof *upto);
    for (size_t i = 0; i < n_live; i++)
        if (live[i]->device == device || live[i] == &legacy_stream) {
            mine[n] = live[i];
            upto[n++] = live[i]->queued;
            behind = behind || live[i]->done < live[i]->queued;
        }
    if (behind) host_syncs++;
    pthread_mutex_unlock(&gpu_lock);
    for (size_t i = 0; i < n; i++) host_wait(mine[i], upto[i], false);
    free(mine);
    free(upto);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
    (void)flags;
    pthread_mutex_lock(&gpu_lock);
    *stream = new_stream();
    pthread_mutex_unlock(&gpu_lock);
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    if (stream == NULL || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return cudaSuccess;
    drain_and_retire(stream);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    pthread_mutex_lock(&gpu_lock);
    cudaStream_t s = resolve(stream);
    const uint64_t upto = s->queued;
    pthread_mutex_unlock(&gpu_lock);
    host_wait(s, upto, true);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    device_wait(current_device);
    return cudaSuccess;
}

// ---- events ------------------------------------------------------------------------------

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
    *event = calloc(1, sizeof **event);
    if (!*event) return fail(cudaErrorMemoryAllocation);
    (*event)->device = current_device;
    (*event)->timing = !(flags & cudaEventDisableTiming);
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, 0); }

// A timing event's record still queued holds a stamp that points at it: the stream runs to it
// first (not a host sync a GPU would make: it frees the event once the record has passed).
cudaError_t cudaEventDestroy(cudaEvent_t event) {
    if (event && event->timing && event->stream) host_wait(event->stream, event->upto, false);
    free(event);
    return cudaSuccess;
}

typedef struct {
    cudaEvent_t event;
    uint64_t record;    // the record that queued this stamp
} StampArgs;

static double host_clock_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// The stream reached a timing event's record: the device time of the event is now.
static void run_stamp(void *p) {
    const StampArgs *a = p;
    if (a->event->records == a->record) a->event->at = host_clock_s();
}

// An event records only on a stream of its own device (the per-thread stream: the current
// device's), as on a machine with several GPUs. A timing event queues a stamp: the host clock
// when the stream gets there is its time (cudaEventElapsedTime).
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    if (injected_failure()) return fail(cudaErrorLaunchFailure);
    pthread_mutex_lock(&gpu_lock);
    const int on = stream == cudaStreamPerThread ? current_device : resolve(stream)->device;
    if (stream != NULL && stream != cudaStreamLegacy && on != event->device)
        emu_breach("cudaEventRecord", "the event and the stream are on different devices");
    cudaStream_t s = resolve(stream);
    const uint64_t record = ++event->records;
    pthread_mutex_unlock(&gpu_lock);
    if (event->timing) {
        const StampArgs a = {event, record};
        enqueue_work(s, run_stamp, &a, sizeof a);
    }
    pthread_mutex_lock(&gpu_lock);
    event->stream = s;
    event->upto = s->queued;
    pthread_mutex_unlock(&gpu_lock);
    return cudaSuccess;
}

// As a GPU: both events timing ones and recorded (else an invalid handle), and both reached
// by their streams; the emulated GPU runs nothing for it, so an event no wait has brought the
// stream to yet is not ready (cudaErrorNotReady, not sticky): the time is read after the
// step's wait, never instead of it.
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    if (!start->timing || !end->timing || !start->stream || !end->stream) return fail(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&gpu_lock);
    const bool done = start->stream->done >= start->upto && end->stream->done >= end->upto;
    pthread_mutex_unlock(&gpu_lock);
    if (!done) return cudaErrorNotReady;
    *ms = (float)((end->at - start->at) * 1e3);
    return cudaSuccess;
}

// Not an error, and not sticky: the transports poll with it.
cudaError_t cudaEventQuery(cudaEvent_t event) {
    pthread_mutex_lock(&gpu_lock);
    progress();
    const bool done = !event->stream || advance(event->stream, event->upto, 0);
    pthread_mutex_unlock(&gpu_lock);
    return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    if (event->stream) host_wait(event->stream, event->upto, true);
    return cudaSuccess;
}

// Later work on stream waits for the work the event's last record covers (none: no wait).
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    (void)flags;
    if (!event->stream) return cudaSuccess;
    enqueue_item(stream, (Item){.kind = ITEM_WAIT, .on = event->stream, .upto = event->upto}, NULL, 0);
    return cudaSuccess;
}

// ---- freeing: a device sync, then NaN -------------------------------------------------------

cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    int device = 0;
    pthread_mutex_lock(&gpu_lock);
    const Block *b = find_block(p, 1);
    const bool ok = b && b->base == p && b->device >= 0;
    if (ok) device = b->device;
    pthread_mutex_unlock(&gpu_lock);
    if (!ok) emu_breach("cudaFree", "not a live device allocation");
    device_wait(device);   // cudaFree synchronizes the device: queued work may still use p
    size_t bytes = 0;
    pthread_mutex_lock(&gpu_lock);
    bytes = find_block(p, 1)->bytes;
    pthread_mutex_unlock(&gpu_lock);
    emu_poison(p, bytes);
    remove_block(p, false, &device);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p) {
    if (!p) return cudaSuccess;
    int device = -1;
    if (!remove_block(p, true, &device)) emu_breach("cudaFreeHost", "not a live pinned allocation");
    free(p);
    return cudaSuccess;
}

// ---- copies and memset ---------------------------------------------------------------------

typedef struct {
    void *dst;
    const void *src;   // NULL: the bytes follow this struct (taken from pageable memory)
    size_t bytes;
} CopyArgs;

static void run_copy(void *p) {
    CopyArgs *a = p;
    memmove(a->dst, a->src ? a->src : (const void *)(a + 1), a->bytes);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t stream) {
    if (injected_failure()) return fail(cudaErrorLaunchFailure);
    if (!bytes) return cudaSuccess;
    pthread_mutex_lock(&gpu_lock);
    const bool dst_dev = is_device(dst, bytes), src_dev = is_device(src, bytes);
    const bool dst_pageable = !dst_dev && !is_pinned(dst, bytes), src_pageable = !src_dev && !is_pinned(src, bytes);
    cudaStream_t s = resolve(stream);
    pthread_mutex_unlock(&gpu_lock);
    const bool ok = (kind == cudaMemcpyDefault && (dst_dev || src_dev)) ||
                    (kind == cudaMemcpyHostToDevice && dst_dev && !src_dev) ||
                    (kind == cudaMemcpyDeviceToHost && !dst_dev && src_dev) ||
                    (kind == cudaMemcpyDeviceToDevice && dst_dev && src_dev);
    if (!ok) emu_breach("cudaMemcpyAsync", "the buffers are not where the copy's kind says");
    if (src_pageable) {   // the bytes are staged now: the caller may reuse src at once
        CopyArgs *a = emu_malloc(sizeof *a + bytes);
        *a = (CopyArgs){.dst = dst, .src = NULL, .bytes = bytes};
        memcpy(a + 1, src, bytes);
        enqueue_work(s, run_copy, a, sizeof *a + bytes);
        free(a);
        return cudaSuccess;
    }
    const CopyArgs a = {.dst = dst, .src = src, .bytes = bytes};
    enqueue_work(s, run_copy, &a, sizeof a);
    if (dst_pageable) {   // returns once the copy is done: the host waits for the stream
        pthread_mutex_lock(&gpu_lock);
        const uint64_t upto = s->queued;
        pthread_mutex_unlock(&gpu_lock);
        host_wait(s, upto, true);
    }
    return cudaSuccess;
}

typedef struct {
    void *p;
    int value;
    size_t bytes;
} MemsetArgs;

static void run_memset(void *p) {
    MemsetArgs *a = p;
    memset(a->p, a->value, a->bytes);
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t stream) {
    emu_need_device(__func__, p, bytes);
    const MemsetArgs a = {p, value, bytes};
    if (bytes) {
        __atomic_fetch_add(&memsets_queued, 1, __ATOMIC_RELAXED);
        enqueue_work(stream, run_memset, &a, sizeof a);
    }
    return cudaSuccess;
}

// ---- devices and errors ------------------------------------------------------------------

cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= emu_devices()) return fail(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count) {
    *count = emu_devices();
    return cudaSuccess;
}

// The device's UUID is its index: processes on one machine that pick the same index share it,
// as they would share a real GPU.
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
    if (device < 0 || device >= emu_devices()) return fail(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "emulated GPU %d", device);
    prop->uuid.bytes[0] = (char)device;
    return cudaSuccess;
}

// The last error of this thread's calls, then cleared (as the runtime's).
cudaError_t cudaGetLastError(void) {
    const cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    default: return "emulated CUDA error";
    }
}

const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    default: return "cudaErrorEmulated";
    }
}

static CudaLastWords last_words;
static void *last_words_arg;

void cuda_check_on_fail(CudaLastWords fn, void *arg) {
    last_words = fn;
    last_words_arg = arg;
}

static int failing_rank = -1;

void cuda_check_name_rank(int rank) { failing_rank = rank; }

// As kernels/cuda/context.cu's: the line (with the rank, once named), the last words once, the exit.
void cuda_check_fail(const char *library, const char *message, const char *name, const char *call, const char *file,
                     int line) {
    char who[32] = "";
    if (failing_rank >= 0) snprintf(who, sizeof who, "rank %d: ", failing_rank);
    fprintf(stderr, "pptrain: %s%s error: %s [%s] in %s at %s:%d\n", who, library, message, name, call, file, line);
    fflush(stderr);
    const CudaLastWords fn = last_words;
    last_words = NULL;
    if (fn) fn(last_words_arg);
    exit(1);
}

// ---- bf16 ----------------------------------------------------------------------------------

uint16_t emu_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);   // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);                                             // nearest even
    return (uint16_t)(u >> 16);
}

float emu_from_bf16(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
