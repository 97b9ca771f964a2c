// engine/transport/transport_memory: where the local transport's mailboxes live, in a header
// of its own so a stage backend (engine/model/stage_ops.h, StageDevice.mailboxes) can name its
// memory without taking in the transports.
#ifndef PPTRAIN_TRANSPORT_MEMORY_H
#define PPTRAIN_TRANSPORT_MEMORY_H
#include <stddef.h>

// Where the local transport's mailboxes live and how message bytes move in and out of them:
// host memory and memcpy by default; device memory and a CUDA copy when the stages run on
// GPUs (stage_cuda_transport_memory, engine/model/model_cuda.h), so one GPU, or several, carry a
// multi-stage pipeline of threads. Collectives always work on host memory.
typedef struct {
    void *(*alloc)(size_t bytes, int owner);   // owner: the world rank whose mailbox it is
    void (*free)(void *p);
    void (*copy)(void *dst, const void *src, size_t bytes);  // complete when it returns
} TransportMemory;
#endif
