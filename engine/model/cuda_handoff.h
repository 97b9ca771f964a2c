// engine/model/cuda_handoff: device buffers handed from one CUDA stream to another with no host
// wait. A message between stages is written on one stream (a stage's), read on another (a
// transport's copy stream, a mailbox copy's, the next stage's), then written again: each of
// those accesses is bracketed
//     cuda_handoff_acquire(buf, stream);   the stream waits for the last access released on buf
//     ... queue the reads or writes of buf on stream ...
//     cuda_handoff_release(buf, stream);   that work is now the last access of buf
// so the GPU orders the accesses of a buffer as the host made the calls (read after write,
// write after read), by one event per buffer and cudaStreamWaitEvent. The host thread order of
// the calls is the caller's to guarantee (a message is sent after the forward that wrote it
// returned, and so on), as it already is for the host buffers of the CPU stages.
// Used by engine/model/model_cuda.c and engine/transport/transport_nccl.c; thread-safe.
#ifndef PPTRAIN_CUDA_HANDOFF_H
#define PPTRAIN_CUDA_HANDOFF_H
#include <cuda_runtime_api.h>

void cuda_handoff_acquire(const void *buf, cudaStream_t stream);
void cuda_handoff_release(const void *buf, cudaStream_t stream);
// buf is freed: its event goes (a later buffer at the same address starts unordered).
void cuda_handoff_forget(const void *buf);
#endif
