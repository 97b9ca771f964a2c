// engine/model/stage_ops: where a stage computes, behind one table of functions, as transports
// are behind TransportOps (engine/transport/transport.h). Every StageModel points at the table
// of its backend (s->ops); the stage API of engine/model/model.h (stage_forward,
// stage_zero_grads, stage_update, ...) calls through it, so the runtime, the pipeline and the
// tests never ask where a stage lives.
//
// Backends. The CPU (engine/model/model_cpu.c) fills the table for every stage stage_create
// makes. A device backend moves a CPU-made stage onto its device and fills the table with its
// own (engine/model/model_cuda.c: stage_cuda_device.attach). A build has the device backends
// CMake compiled, as nvtop has its vendors: one without the CUDA toolkit neither compiles nor
// links model_cuda.c, and stage_device_find says so in one line.
//
// Contract (what the runtime and the pipeline rely on):
//   Memory. A stage's weights and grads are host arrays (model.h). On a device they are its
//     host mirror: the device holds the real ones, and download / upload move them. A message
//     (an activation or its gradient crossing a stage boundary) lives where msg_alloc puts it,
//     in the backend's format: fp32 on the CPU, bf16 or fp32 on a GPU; msg_bytes says how big.
//   Synchrony. A CPU entry point returns when its work is finished. A GPU backend's returns
//     once the work is queued on the stage's stream: a message passes between its stream and
//     a transport's by events (engine/model/cuda_handoff.h), and the host waits for the device
//     only for what it reads (the step's loss, the gradient norm, the host mirror), so a GPU
//     action's host timing is the time to queue it; its device time comes from the time_*
//     marks, read once the step's wait has passed them (engine/runtime.c).
//   Accumulation. backward_weight adds into the gradients; zero_grads clears them. Each stage
//     adds in microbatch order (engine/schedule/schedule_order.c), so CPU runs are bitwise
//     the single-device run (DESIGN.md "Parity").
//   Threads. One thread drives one stage at a time; bind_thread prepares a thread for a stage
//     (a GPU backend makes the stage's device current).
#ifndef PPTRAIN_STAGE_OPS_H
#define PPTRAIN_STAGE_OPS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/error.h"
#include "engine/model/model.h"
#include "engine/optim.h"
#include "engine/transport/transport_memory.h"

struct StageOps {
    // A full StageActs for B x T on the stage's device (a light one is CPU-only: model.h), and
    // its release. A StageActs remembers the table that made it.
    StageActs *(*acts_create)(const StageModel *s, int B, int T);
    void (*acts_free)(StageActs *a);
    // The equations (engine/model/model_stage.c), as stage_forward, stage_backward_input and
    // stage_backward_weight document them.
    double (*forward)(StageModel *s, StageActs *a, const int32_t *tokens, const void *input, const int32_t *targets,
                      float loss_scale);
    // NULL: forward returns each microbatch's loss. A backend that keeps the losses on its
    // device (a GPU: no host wait per microbatch) returns 0 from forward and their sum, in
    // forward order, here: once per step, after the step's last forward (stage_step_loss).
    double (*step_loss)(StageModel *s);
    void (*backward_input)(StageModel *s, StageActs *a, const void *dout);
    void (*backward_weight)(StageModel *s, StageActs *a);
    // The head's loss and gradients come without (N, V) logits (a GPU's fused classifier,
    // kernels/cuda/classifier.cu): a StageActs of this backend carves no logits.
    bool head_without_logits;
    // Messages: the bytes of one of B*T rows, and a buffer on the stage's device.
    size_t (*msg_bytes)(const StageModel *s, int B, int T);
    void *(*msg_alloc)(const StageModel *s, size_t bytes);
    void (*msg_free)(const StageModel *s, void *msg);
    // Gradients and the optimizer.
    void (*zero_grads)(StageModel *s);
    // out[n_params]: each tensor's sum of squared gradients, in double. A backend that sums on
    // its device in an order of its own may give the stage's whole sum in out[0], zeros after.
    void (*grad_sum_squares)(const StageModel *s, double *out);
    // Applies one AdamW update (opt->t + 1) to the gradients scaled by clip (< 1 clips). The
    // gradients are unspecified after it until zero_grads: the CPU scales them in place first, a
    // GPU applies the factor as it reads them and leaves them unscaled.
    void (*update)(StageModel *s, AdamWState *opt, const OptimConfig *o, double lr, float clip);
    // The numel floats a gradient all-reduce over replicas sums in place: device memory when
    // `device` (a transport whose collectives take device memory: nccl), else host memory
    // brought up to date first. reduce_end hands the sum back (NULL: nothing to hand back).
    float *(*reduce_begin)(StageModel *s, bool device);
    void (*reduce_end)(StageModel *s, bool device);
    // The host mirror (NULL where the host arrays are the real ones): device -> host of the
    // weights, of the gradients when `grads` and of opt's moments when opt; host -> device of
    // the weights and of opt's moments when opt.
    void (*download)(StageModel *s, bool grads, AdamWState *opt);
    void (*upload)(StageModel *s, const AdamWState *opt);
    // Device time (NULL where an entry point returns with its work done, so the host's clock
    // times it: the CPU). time_reserve makes marks 0..n-1; time_mark(k) records mark k on the
    // stage's stream after the work queued so far; time_since gives mark k's device time in
    // seconds after mark `base`, or false when the device has not run to both yet (the host
    // never waits for it: read after the step's wait).
    void (*time_reserve)(StageModel *s, int n);
    void (*time_mark)(StageModel *s, int k);
    bool (*time_since)(const StageModel *s, int base, int k, double *seconds);
    void (*bind_thread)(const StageModel *s);   // NULL: any thread will do
    void (*detach)(StageModel *s);              // frees the backend's part; NULL: none
    // Generation (engine/model/model_decode.c; NULL: the CPU's, on the host arrays): a KV
    // cache for T positions on the stage's device and its release; the keep of positions
    // [0, n) of a prefill's (B = 1, T) keys and values; one token's forward at pos (acts of
    // B = T = 1), as stage_decode; and the logits of row `row` of a forward's or a decode's
    // final norm output, on the host (a backend whose head makes no logits computes them here).
    void *(*kv_create)(const StageModel *s, int T);
    void (*kv_free)(void *kv);
    void (*kv_fill)(const StageModel *s, void *kv, const StageActs *a, int n);
    void (*decode)(StageModel *s, void *kv, StageActs *a, const int32_t *token, const void *input, int pos);
    void (*logits_row)(const StageModel *s, const StageActs *a, int row, float *out);
    // Attention keeps (B, NH, T) row statistics instead of (B, NH, T, T) probabilities and
    // score gradients (flash attention; engine/model/model_acts.h lays a slot out by it).
    bool flash_attention;
    // The norms' weight gradients come with the backward's input half (the kernel that makes a
    // norm's input gradient adds them), so the norms' output gradients dln1 and dln2 are not kept
    // for the weight half: one buffer a slot serves every norm (engine/model/model_acts.h).
    bool norm_grads_in_input;
    // Whether the stage keeps its GEMM operand activations (the norms' outputs ln1, ln2, lnf,
    // the MLP's hidden h, the attention output atty) as bf16, written so by the kernels that
    // make them (engine/model/model_acts.h: the *_16 buffers in their place). NULL: never (the CPU).
    bool (*narrow_operands)(const StageModel *s);
};

// A device backend: what places stages on its devices. attach makes a CPU-made stage compute
// on device `device` (its weights uploaded, its moments zero) in bf16 (`low_precision`) or
// fp32, and points s->ops at the backend's table; -1 with one line in err.
typedef struct {
    DeviceKind kind;
    const char *(*unavailable)(void);        // NULL when a device is usable, else one line why not
    int (*device_count)(void);               // visible devices
    int (*set_device)(int device, Error *err);   // current on the calling thread; -1 with err
    int (*attach)(StageModel *s, int device, bool low_precision, Error *err);
    size_t (*msg_elem_bytes)(bool low_precision);   // one message element, before any stage exists
    // Where the local transport keeps its mailboxes when the stages are on these devices.
    const TransportMemory *mailboxes;
} StageDevice;

// The backend of `kind` (not DEVICE_CPU) in this build, if one of its devices is usable;
// otherwise NULL with one line in err: a build without it, no driver, no device.
const StageDevice *stage_device_find(DeviceKind kind, Error *err);
#endif
