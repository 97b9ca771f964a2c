// tests/gpu_emu/emu.h: between the parts of the emulated GPU. cuda_emu.c is the CUDA runtime
// (device and pinned memory, streams as queues of work, events, copies), kernels_emu.c the
// kernels of kernels/cuda/kernels_cuda.h, nccl_emu.c NCCL over MPI. Every kernel and every
// NCCL operation is an item queued on a stream with its arguments captured; it runs later,
// when something waits on it (cuda_emu.c says when).
#ifndef PPTRAIN_GPU_EMU_H
#define PPTRAIN_GPU_EMU_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

// Prints "pptrain (GPU emulation): CALL: WHAT" and aborts: what a GPU would fail on.
__attribute__((noreturn)) void emu_breach(const char *call, const char *what);

// Aborts (a breach) unless [p, p + bytes) lies wholly inside one live device allocation.
void emu_need_device(const char *call, const void *p, size_t bytes);
// The calling thread's current device (cudaSetDevice).
int emu_current_device(void);
// Devices emulated: PPTRAIN_EMU_GPUS (default 1).
int emu_devices(void);

// Queues run(args) on stream: args (bytes) are copied now, run later in the stream's order;
// the copy is freed after the run.
void emu_enqueue(cudaStream_t stream, void (*run)(void *args), const void *args, size_t bytes);

// An operation that takes time outside this process (an NCCL send, receive or all-reduce):
// when the stream reaches it, step(args, false) is called until it returns true (false: not
// finished yet, the stream stays behind it). The first call starts it. On an aborted
// communicator, step(args, true) is called once instead and the operation is dropped.
typedef struct {
    bool (*step)(void *args, bool drop);
    const bool *aborted;  // the operation's communicator was aborted (may be NULL)
} EmuOp;
void emu_enqueue_op(cudaStream_t stream, EmuOp op, const void *args, size_t bytes);

// A GEMM plan built (kernels/cuda/gemm_plans.h: a cuBLASLt heuristic query on a GPU), counted
// for PPTRAIN_EMU_COUNT_SYNCS's report (cuda_emu.c).
void emu_count_gemm_plan(void);

// Fills bytes at p with NaN (0xff bytes: a NaN float, double and bf16; -1 as an integer).
void emu_poison(void *p, size_t bytes);

// bf16 rounding as the GPU's __float2bfloat16 (nearest even, NaN stays NaN), and back.
uint16_t emu_to_bf16(float f);
float emu_from_bf16(uint16_t b);
#endif
