// engine/model/model_cuda: the GPU backend of a stage (engine/model/stage_ops.h) on CUDA
// (DESIGN.md "Numerics"). Built only when CMake finds the CUDA toolkit; a build without it
// neither compiles nor links this backend (engine/model/stage_devices.c).
//
// The StageModel stays what it is on the CPU: the stage's description (ParamInfo, HF names,
// offsets) and a host copy of its weights and gradients. stage_cuda_device.attach gives it a
// device twin with the same flat layout:
//   w, g (numel fp32)        master weights and gradients
//   m, v (numel fp32)        the AdamW moments (the host AdamWState keeps t and a mirror)
//   w16  (numel bf16)        the GEMM working copy, rewritten by every AdamW update (bf16 mode)
// and points s->ops at this backend's table: from then on the stage API of
// engine/model/model.h runs here, on the stage's own CUDA stream. The host arrays are brought up
// to date only by stage_download (checkpoints, `pptrain check`) and pushed by stage_upload
// (resume).
//
// Precision. bf16 (training): GEMM operands bf16 (weights from w16, activations converted
// right before each GEMM into a per-stage scratch), fp32 accumulation and fp32 results;
// norms, softmax, RoPE, SwiGLU, residuals, the loss and every reduction fp32; inter-stage
// messages bf16. fp32 (`pptrain check`, parity tests): the same kernels' fp32 versions and
// fp32 messages, so a GPU pipeline can be held to the CPU's tolerances.
//
// Synchrony. An entry point that runs compute returns once the work is queued on the stage's own
// stream. A message (and, under nccl, the gradients the replicas sum) passes between that
// stream and a transport's, a mailbox copy's or another stage's by events
// (engine/model/cuda_handoff.h); tokens and targets go up through pinned buffers. The host
// waits for the device only where it reads a result: once a step per stage for the gradient
// norm, which on the last stage also brings the step's loss (stage_step_loss reads both, and
// grad_sum_squares then takes the norm from there), and for the host mirror. So a rank with
// one stage waits once a step; tests/gpu_emu/emu_syncs.sh holds those counts. Action timings
// are device time: timing events the runtime records around each action (time_mark),
// read after that wait (engine/runtime.c runtime_device_times).
// Several stages may share a GPU (threads of one process, each stage on its own stream).
//
// The gradient norm is summed on the device over the whole stage (grad_sum_squares gives it in
// out[0]). The local transport's mailboxes live in device memory (allocated on their owner's
// GPU; every copy goes through unified addressing, so it also crosses GPUs) and a copy is
// queued on the calling thread's own stream (cudaStreamPerThread), ordered by the buffers'
// events like any other access. Recompute (light StageActs) is CPU-only. Every CUDA/cuBLAS call is checked
// (one line with file:line, exit 1: kernels/cuda/cuda_check.h).
#ifndef PPTRAIN_MODEL_CUDA_H
#define PPTRAIN_MODEL_CUDA_H
#include "engine/model/stage_ops.h"

// DEVICE_CUDA: unavailable says why no GPU can be used (no driver, no device), attach moves a
// stage to a GPU in bf16 or fp32, messages are 2 (bf16) or 4 (fp32) bytes an element.
extern const StageDevice stage_cuda_device;
#endif
