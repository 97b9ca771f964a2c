// engine/model_cuda: a pipeline stage whose compute runs on a CUDA GPU (DESIGN.md "Numerics").
//
// The StageModel stays what it is on the CPU: the stage's description (ParamInfo, HF names,
// offsets) and a host copy of its weights and gradients. stage_cuda_attach gives it a device
// twin with the same flat layout:
//   w, g (numel fp32)        master weights and gradients
//   m, v (numel fp32)        the AdamW moments (the host AdamWState keeps t and a mirror)
//   w16  (numel bf16)        the GEMM working copy, rewritten by every AdamW update (bf16 mode)
// and from then on stage_forward / stage_backward_* / stage_zero_grads of engine/model/model.h run
// here, on the stage's own CUDA stream. The host arrays are brought up to date only by
// stage_cuda_download (checkpoints, `pptrain check`) and pushed by stage_cuda_upload (resume).
//
// Precision. bf16 (training): GEMM operands bf16 (weights from w16, activations converted
// right before each GEMM into a per-stage scratch), fp32 accumulation and fp32 results;
// norms, softmax, RoPE, SwiGLU, residuals, the loss and every reduction fp32; inter-stage
// messages bf16. fp32 (`pptrain check`, parity tests): the same kernels' fp32 versions and
// fp32 messages, so a GPU pipeline can be held to the CPU's tolerances.
//
// Synchrony. Every entry point that runs compute returns when the GPU has finished it (one
// cudaStreamSynchronize on the stage's own stream, never a device-wide one): the runtime's
// action timings are then the GPU's, and a message buffer is complete when a send reads it.
// Several stages may share a GPU (threads of one process, each stage on its own stream).
//
// Recompute (light StageActs) is CPU-only. Every CUDA/cuBLAS call is checked (one line with
// file:line, exit 1: kernels/cuda/cuda_check.h). In a build without the CUDA toolkit the
// entry points still link: stage_cuda_attach fails with one line, the rest are unreachable.
#ifndef PPTRAIN_MODEL_CUDA_H
#define PPTRAIN_MODEL_CUDA_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/error.h"
#include "engine/model/model.h"
#include "engine/optim.h"
#include "engine/transport/transport.h"

// Whether this build has the CUDA backend, and when it does whether a GPU is usable: NULL
// when one is, else one line saying why not (for `--device cuda` to print and exit 2).
const char *stage_cuda_unavailable(void);
// Visible CUDA devices (0 without the backend or a driver).
int stage_cuda_device_count(void);
// Makes `device` current on the calling thread; -1 with err when it cannot be used.
int stage_cuda_set_device(int device, Error *err);

// Moves the stage's compute to CUDA device `device` in bf16 (true) or fp32 mode: allocates
// and uploads the device twin from s->weights (moments zero). -1 with err when this build has
// no CUDA backend or the device cannot be used.
int stage_cuda_attach(StageModel *s, int device, bool bf16, Error *err);
// Frees the device twin (no-op for a CPU stage). stage_free calls it.
void stage_cuda_detach(StageModel *s);
// Makes the stage's device current on the calling thread (each rank thread, once).
void stage_cuda_bind_thread(const StageModel *s);

// Device -> host: s->weights, and s->grads when `grads`, and opt->m / opt->v when opt.
void stage_cuda_download(StageModel *s, bool grads, AdamWState *opt);
// Host -> device: weights (and their bf16 copy), and moments when opt.
void stage_cuda_upload(StageModel *s, const AdamWState *opt);

void stage_cuda_zero_grads(StageModel *s);
// Only the gradients, device -> host and back (the local transport's data-parallel sum).
void stage_cuda_grads_to_host(StageModel *s);
void stage_cuda_grads_from_host(StageModel *s);
// The stage's device gradient buffer (numel floats): what NCCL all-reduces over replicas.
float *stage_cuda_grads(StageModel *s);
// Sum of squared gradients, in double in a fixed order (as grad_sum_squares on the host).
double stage_cuda_grad_sum_squares(StageModel *s);
// Scales the gradients by clip (< 1 clips, as grad_scale) and applies one AdamW update with
// opt->t incremented, as adamw_state_step; rewrites the bf16 working copy.
void stage_cuda_update(StageModel *s, AdamWState *opt, const OptimConfig *o, double lr, float clip);

// Messages: 2 (bf16) or 4 (fp32) bytes per element, in device memory.
size_t stage_cuda_msg_elem_bytes(const StageModel *s);
void *stage_cuda_msg_alloc(const StageModel *s, size_t bytes);
void stage_cuda_msg_free(const StageModel *s, void *msg);
// Device memory for the local transport's mailboxes (allocated on the current device; every
// copy goes through unified addressing, so it also crosses GPUs) and a copy that is complete
// when it returns (the calling thread's own stream, cudaStreamPerThread, then synchronized).
const TransportMemory *stage_cuda_transport_memory(void);

// The engine/model/model.h entry points for a GPU stage (model_acts.c and model_stage.c dispatch).
StageActs *stage_cuda_acts_create(const StageModel *s, int B, int T);
void stage_cuda_acts_free(StageActs *a);
const void *stage_cuda_acts_output(const StageActs *a);
const void *stage_cuda_acts_dinput(const StageActs *a);
double stage_cuda_forward(StageModel *s, StageActs *a, const int32_t *tokens, const void *input,
                          const int32_t *targets, float loss_scale);
void stage_cuda_backward_input(StageModel *s, StageActs *a, const void *dout);
void stage_cuda_backward_weight(StageModel *s, StageActs *a);
#endif
