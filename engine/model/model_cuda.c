// engine/model/model_cuda: a stage on a CUDA GPU: the equations of model_stage.c (read it first:
// same order, same buffers, same accumulate-into contract) on the device twin of
// engine/model/model_cuda.h, with the kernels of kernels/cuda. The activation arena is carved by
// model_acts.c's own layout (stage_acts_layout) out of device memory, so every LayerActs pointer
// means what it means on the CPU, but for the head's logits, which a GPU slot never holds; it
// adds its messages (bf16 copies of the output and the input gradient) and its targets (ActsCuda).
//
// Nothing here waits for the device but the reads of the step's loss and norm and of the host
// mirror (model_cuda.h "Synchrony").
//
// The head: the fused classifier (kernels/cuda/classifier.cu) takes the loss and the final norm
// output's gradient dlnf in the forward, row chunk by row chunk, with no (N, V) tensor; the
// weight half runs it again for the head's weight gradient (the chunk's logits recomputed: one
// more N x V x C GEMM, so that a forward alone, as an evaluation runs it, touches no gradient).
//
// GEMM operands. In bf16 mode everything a GEMM reads (and attention's D) is kept bf16 in the
// slot, written so by the kernel that makes it (narrow_operands): ln1, ln2, h, atty, lnf, the
// packed q|k|v and gate|up gradients, and the residual gradients dout and dxmid (each layer's
// norm backward writes its fp32 gradient and the bf16 copy at once:
// cuda_residual_rmsnorm_backward), so no conversion pass runs between kernels. The gate|up
// GEMM stores gate and up bf16 too (only SwiGLU reads them, widening them), and the q|k|v GEMM
// stores q, k and v bf16 (RoPE rotates q and k in place in bf16; only attention reads them).
// Attention is flash attention (kernels/cuda/flash_attention.cu): a layer keeps its row
// logsumexp (LayerActs.lse), no (T, T) matrix. bf16 mode runs its tensor-core kernels on the
// bf16 q, k, v and output gradient (datty_16, also stored bf16 by its GEMM), fp32 mode the
// fp32 ones.
// Generation's KV cache keeps what attention reads: bf16 in bf16 mode.
// The scratch belongs to the stage, not to a slot: a stage runs one action at a time.
//
// Fused projections. A GPU stage's wq|wk|wv and wgate|wup lie back to back in its one weight
// allocation (and likewise their gradients and bf16 copies: same offsets; checked at attach),
// so each group is one weight (Q + 2 KV, C) and (2 I, C) while the optimizer, checkpoints and
// the norm still see every tensor by its own name and offset. Forward: one strided batched
// GEMM writes the projections' outputs straight into their own slot buffers (q, k, v as one
// batch when Q == KV, else q alone and k, v as one; gate and up as one). Backward: the output
// gradients are packed side by side into one operand (in bf16 mode the packing is the bf16
// conversion each operand needed anyway), then one GEMM gives dx and one gives dW for the group.
// Each residual add runs in the epilogue of the GEMM whose output it adds (the attention's
// output projection, the MLP's down projection): cuda_linear_forward_residual writes x + the
// product into the next residual buffer, rounded once as a separate add would round it, so the
// norm after it (the layer's second, the next layer's first, or the final norm) reads the sum
// alone and no pass reads the projection's output back.
#include "engine/model/model_cuda.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "engine/model/cuda_handoff.h"
#include "engine/model/model_acts.h"
#include "kernels/cuda/kernels_cuda.h"

typedef struct StageCuda StageCuda;
typedef struct ActsCuda ActsCuda;

// One forward's token and target rows on their way up: pinned, so the copies are queued, and
// free again once `staged` (recorded after them) completed.
typedef struct {
    int32_t *tokens, *targets;   // (scratch_rows) pinned
    cudaEvent_t staged;
} StagedRows;

struct StageCuda {
    CudaCtx *ctx;              // the stage's device, stream and cuBLAS handles
    int device;
    bool bf16;
    float *w, *g, *m, *v;      // (numel) fp32: master weights, gradients, AdamW moments
    cuda_bf16 *w16;            // (numel) bf16 working copy of w (bf16 mode), else NULL
    ParamViews dw, dg;         // named views into w and g
    double *totals;            // (2) device: the step's loss so far (last stage), the gradients' sum of squares
    double *totals_host;       // (2) pinned: where the step's one wait reads them
    bool norm_read;            // totals_host[1] is the sum of squares of g as it is now
    float *pack;               // fp32 mode: packed gradient operands (N x max(Q + 2 KV, 2 I))
    size_t pack_elems;
    size_t scratch_rows;       // rows the pinned staging rows hold
    StagedRows *staged;        // (n_staged) grown until one is always free (the host runs a step ahead at most)
    int n_staged;
    cudaEvent_t *marks;        // (n_marks) timing events: device time of the runtime's actions
    int n_marks;
    float *logits_row;         // (V) generation: one row's logits on their way to the host (last stage)
};

// A GPU slot's extras (StageActs.dev).
struct ActsCuda {
    int device;                // the stage's GPU
    void *out_msg;             // (N, C) where msg_out points: a bf16 copy of output, or output (fp32)
    void *din_msg;             // (N, C) where msg_din points: a bf16 copy of dinput, or dinput (fp32)
    int32_t *targets;          // (N) last stage: the microbatch's targets, for the weight half's head
    float loss_scale;          // last stage: the forward's, likewise
};

static const StageOps CUDA_OPS;

static StageCuda *cuda_of(const StageModel *s) {
    assert(s->ops == &CUDA_OPS);
    return s->dev;
}

static void *dev_alloc(size_t bytes) {
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

static void dev_free(void *p) {
    if (p) CUDA_CHECK(cudaFree(p));
}

// ---- pinned rows for tokens and targets -------------------------------------------------

static void free_staged_rows(StageCuda *c) {
    for (int i = 0; i < c->n_staged; i++) {
        CUDA_CHECK(cudaEventSynchronize(c->staged[i].staged));
        CUDA_CHECK(cudaEventDestroy(c->staged[i].staged));
        CUDA_CHECK(cudaFreeHost(c->staged[i].tokens));
        CUDA_CHECK(cudaFreeHost(c->staged[i].targets));
    }
    free(c->staged);
    c->staged = NULL;
    c->n_staged = 0;
}

// Pinned rows whose last copies have run (an event query: the host never waits), or new ones:
// the pool grows in the first step to what the host queues ahead of the GPU, at most a step.
static StagedRows *free_rows(StageCuda *c) {
    for (int i = 0; i < c->n_staged; i++) {
        const cudaError_t e = cudaEventQuery(c->staged[i].staged);
        if (e == cudaSuccess) return &c->staged[i];
        if (e != cudaErrorNotReady) CUDA_CHECK(e);
        (void)cudaGetLastError();   // not ready is no error
    }
    c->staged = check_alloc(realloc(c->staged, (size_t)(c->n_staged + 1) * sizeof *c->staged),
                            (size_t)(c->n_staged + 1) * sizeof *c->staged, __FILE__, __LINE__);
    StagedRows *r = &c->staged[c->n_staged++];
    CUDA_CHECK(cudaMallocHost((void **)&r->tokens, c->scratch_rows * sizeof(int32_t)));
    CUDA_CHECK(cudaMallocHost((void **)&r->targets, c->scratch_rows * sizeof(int32_t)));
    CUDA_CHECK(cudaEventCreateWithFlags(&r->staged, cudaEventDisableTiming));
    return r;
}

// ---- devices, attach, detach ----------------------------------------------------------

static int gpu_set_device(int device, Error *err) {
    const cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) return 0;
    error_set(err, "CUDA device %d: %s (%s)", device, cudaGetErrorString(e), cudaGetErrorName(e));
    return -1;
}

static void gpu_upload(StageModel *s, const AdamWState *opt);

// The fused projections' weights lie back to back in the stage's parameters (model_params.c's
// order, with no bias between them): wk = wq + Q C, wv = wk + KV C, wup = wgate + I C.
static bool projections_adjacent(const StageModel *s) {
    const ModelConfig *m = &s->cfg;
    const size_t C = (size_t)m->hidden, Q = (size_t)m->heads * m->head_dim, KV = (size_t)m->kv_heads * m->head_dim;
    const size_t I = (size_t)m->intermediate;
    for (int l = 0; l < s->layer_end - s->layer_begin; l++) {
        const LayerParams *w = &s->w.layer[l];
        if (w->wk != w->wq + Q * C || w->wv != w->wk + KV * C || w->wup != w->wgate + I * C) return false;
    }
    return true;
}

static int gpu_attach(StageModel *s, int device, bool bf16, Error *err) {
    const char *why = cuda_unavailable_reason();
    if (why) {
        error_set(err, "%s", why);
        return -1;
    }
    if (s->head_copy_offset && !s->has_embed) {
        error_set(err, "--device cuda: tied word embeddings need the embedding and the head on one GPU stage "
                       "for now (CPU stages tie them across stages)");
        return -1;
    }
    if (device < 0 || device >= cuda_device_count()) {
        error_set(err, "CUDA device %d does not exist (%d visible)", device, cuda_device_count());
        return -1;
    }
    if ((why = cuda_device_unsupported_reason(device))) {
        error_set(err, "%s", why);
        return -1;
    }
    if (!projections_adjacent(s)) {
        error_set(err, "--device cuda: the layers' q|k|v or gate|up weights are not stored back to back "
                       "(a model with biases runs on CPU stages only)");
        return -1;
    }
    StageCuda *c = xcalloc(1, sizeof *c);
    c->ctx = cuda_ctx_create(device);   // makes the device current
    c->device = device;
    c->bf16 = bf16;
    const size_t bytes = s->numel * sizeof(float);
    c->w = dev_alloc(bytes);
    c->g = dev_alloc(bytes);
    c->m = dev_alloc(bytes);
    c->v = dev_alloc(bytes);
    if (bf16) c->w16 = dev_alloc(s->numel * sizeof(cuda_bf16));
    c->totals = dev_alloc(2 * sizeof(double));
    CUDA_CHECK(cudaMallocHost((void **)&c->totals_host, 2 * sizeof(double)));
    const int n_layers = s->layer_end - s->layer_begin;
    c->dw.layer = xcalloc((size_t)(n_layers ? n_layers : 1), sizeof(LayerParams));
    c->dg.layer = xcalloc((size_t)(n_layers ? n_layers : 1), sizeof(LayerParams));
    stage_carve_views(s, c->w, &c->dw);
    stage_carve_views(s, c->g, &c->dg);
    // Tied embeddings on one GPU stage: the head reads and accumulates into the embedding
    // itself (the host's head copy and its tie are the CPU stages' way).
    if (s->head_copy_offset) {
        c->dw.lm_head = c->dw.wte;
        c->dg.lm_head = c->dg.wte;
    }
    s->ops = &CUDA_OPS;
    s->dev = c;
    cuda_zero(c->ctx, c->g, bytes);
    cuda_zero(c->ctx, c->m, bytes);
    cuda_zero(c->ctx, c->v, bytes);
    cuda_zero(c->ctx, c->totals, 2 * sizeof(double));
    gpu_upload(s, NULL);
    return 0;
}

static void gpu_detach(StageModel *s) {
    StageCuda *c = cuda_of(s);
    CUDA_CHECK(cudaSetDevice(c->device));
    cuda_ctx_synchronize(c->ctx);
    dev_free(c->w);
    dev_free(c->g);
    dev_free(c->m);
    dev_free(c->v);
    dev_free(c->w16);
    dev_free(c->totals);
    CUDA_CHECK(cudaFreeHost(c->totals_host));
    dev_free(c->pack);
    dev_free(c->logits_row);
    free_staged_rows(c);
    for (int k = 0; k < c->n_marks; k++) CUDA_CHECK(cudaEventDestroy(c->marks[k]));
    free(c->marks);
    free(c->dw.layer);
    free(c->dg.layer);
    cuda_ctx_destroy(c->ctx);
    free(c);
    s->dev = NULL;
}

static void gpu_bind_thread(const StageModel *s) { CUDA_CHECK(cudaSetDevice(cuda_of(s)->device)); }

// ---- device time: timing events around the runtime's actions ----------------------------

// Marks 0..n-1 (set-up: events are made once, never in a step).
static void gpu_time_reserve(StageModel *s, int n) {
    StageCuda *c = cuda_of(s);
    if (n <= c->n_marks) return;
    CUDA_CHECK(cudaSetDevice(c->device));
    c->marks = check_alloc(realloc(c->marks, (size_t)n * sizeof *c->marks), (size_t)n * sizeof *c->marks, __FILE__,
                           __LINE__);
    for (int k = c->n_marks; k < n; k++) CUDA_CHECK(cudaEventCreate(&c->marks[k]));
    c->n_marks = n;
}

static void gpu_time_mark(StageModel *s, int k) {
    StageCuda *c = cuda_of(s);
    assert(k < c->n_marks);
    CUDA_CHECK(cudaEventRecord(c->marks[k], cuda_ctx_stream(c->ctx)));
}

// Not ready (the device has not got there) is no error, and no wait. cudaEventQuery asks
// first: NotReady is its documented answer, where from cudaEventElapsedTime it is an API
// error (compute-sanitizer reports it as one). Mark k follows base on the same stream, so k
// done means base done.
static bool gpu_time_since(const StageModel *s, int base, int k, double *seconds) {
    const StageCuda *c = cuda_of(s);
    const cudaError_t q = cudaEventQuery(c->marks[k]);
    if (q == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return false;
    }
    CUDA_CHECK(q);
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, c->marks[base], c->marks[k]));
    *seconds = ms * 1e-3;
    return true;
}

// ---- host mirror, optimizer --------------------------------------------------------------

static void copy_sync(StageCuda *c, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, cuda_ctx_stream(c->ctx)));
    cuda_ctx_synchronize(c->ctx);
}

// totals[1] = the gradients' sum of squares (in double, fixed order), then both totals into
// pinned memory: one wait.
static void read_totals(StageCuda *c, size_t numel) {
    cuda_zero(c->ctx, c->totals + 1, sizeof(double));
    cuda_grad_sum_squares(c->ctx, c->totals + 1, c->g, numel);
    CUDA_CHECK(cudaMemcpyAsync(c->totals_host, c->totals, 2 * sizeof(double), cudaMemcpyDeviceToHost,
                               cuda_ctx_stream(c->ctx)));
    cuda_ctx_synchronize(c->ctx);
    c->norm_read = true;
}

static void gpu_download(StageModel *s, bool grads, AdamWState *opt) {
    StageCuda *c = cuda_of(s);
    const size_t bytes = s->numel * sizeof(float);
    CUDA_CHECK(cudaSetDevice(c->device));
    copy_sync(c, s->weights, c->w, bytes, cudaMemcpyDeviceToHost);
    if (grads) copy_sync(c, s->grads, c->g, bytes, cudaMemcpyDeviceToHost);
    if (opt) {
        copy_sync(c, opt->m, c->m, bytes, cudaMemcpyDeviceToHost);
        copy_sync(c, opt->v, c->v, bytes, cudaMemcpyDeviceToHost);
    }
}

static void gpu_upload(StageModel *s, const AdamWState *opt) {
    StageCuda *c = cuda_of(s);
    c->norm_read = false;
    const size_t bytes = s->numel * sizeof(float);
    CUDA_CHECK(cudaSetDevice(c->device));
    copy_sync(c, c->w, s->weights, bytes, cudaMemcpyHostToDevice);
    if (c->w16) cuda_f32_to_bf16(c->ctx, c->w16, c->w, s->numel);
    if (opt) {
        copy_sync(c, c->m, opt->m, bytes, cudaMemcpyHostToDevice);
        copy_sync(c, c->v, opt->v, bytes, cudaMemcpyHostToDevice);
    }
    cuda_ctx_synchronize(c->ctx);
}

// The replicas' gradient sum: on the device under a transport of device memory (nccl), else
// through the host mirror (the local transport adds host memory).
// Under nccl the all-reduce's stream takes g over from the stage's stream (cuda_handoff.h).
static float *gpu_reduce_begin(StageModel *s, bool device) {
    StageCuda *c = cuda_of(s);
    c->norm_read = false;   // the replicas' sum replaces g
    if (device) {
        cuda_handoff_release(c->g, cuda_ctx_stream(c->ctx));
        return c->g;
    }
    CUDA_CHECK(cudaSetDevice(c->device));
    copy_sync(c, s->grads, c->g, s->numel * sizeof(float), cudaMemcpyDeviceToHost);
    return s->grads;
}

static void gpu_reduce_end(StageModel *s, bool device) {
    StageCuda *c = cuda_of(s);
    if (device) {
        // The update reads the sum. (The transport's all-reduce has waited for it already: kept so
        // the order does not rest on that.)
        cuda_handoff_acquire(c->g, cuda_ctx_stream(c->ctx));
        return;
    }
    CUDA_CHECK(cudaSetDevice(c->device));
    copy_sync(c, c->g, s->grads, s->numel * sizeof(float), cudaMemcpyHostToDevice);
}

// Stream order: the backward passes that add into g come after it on the same stream.
static void gpu_zero_grads(StageModel *s) {
    StageCuda *c = cuda_of(s);
    c->norm_read = false;
    cuda_zero(c->ctx, c->g, s->numel * sizeof(float));
}

// The whole stage's sum, in double in a fixed order, in out[0] (stage_ops.h allows it): already
// read by the step's wait for its loss (gpu_step_loss) when the gradients have not changed since,
// else one wait of its own.
static void gpu_grad_sum_squares(const StageModel *s, double *out) {
    StageCuda *c = cuda_of(s);
    if (!c->norm_read) read_totals(c, s->numel);
    out[0] = c->totals_host[1];
    for (int i = 1; i < s->n_params; i++) out[i] = 0.0;
}

// The clip factor is applied as the update reads each gradient (cuda_adamw_update: the bits a
// scaling pass then the update would give, without that pass's read and write of every
// gradient), so g keeps its unscaled values, and a norm already read stays the norm of g. No
// one reads g after an update: the next step zeroes it first, the host mirror takes gradients
// only for `pptrain check` (which updates nothing), and the replica sum comes before the update.
static void gpu_update(StageModel *s, AdamWState *opt, const OptimConfig *o, double lr, float clip) {
    StageCuda *c = cuda_of(s);
    opt->t++;
    cuda_adamw_update(c->ctx, c->w, c->w16, c->g, clip, c->m, c->v, s->numel, opt->t, lr, o->beta1, o->beta2,
                      o->eps, o->weight_decay);
}

// ---- messages and slots ------------------------------------------------------------------

static size_t gpu_msg_elem_bytes(bool bf16) { return bf16 ? sizeof(cuda_bf16) : sizeof(float); }

static size_t gpu_msg_bytes(const StageModel *s, int B, int T) {
    return (size_t)B * T * s->cfg.hidden * gpu_msg_elem_bytes(cuda_of(s)->bf16);
}

static void *gpu_msg_alloc(const StageModel *s, size_t bytes) {
    CUDA_CHECK(cudaSetDevice(cuda_of(s)->device));
    return dev_alloc(bytes);
}

static void gpu_msg_free(const StageModel *s, void *msg) {
    CUDA_CHECK(cudaSetDevice(cuda_of(s)->device));
    cuda_handoff_forget(msg);
    dev_free(msg);
}

// Rank r's mailbox on its GPU (r mod the GPUs, as the pipeline places rank r's stages), so a
// message crosses GPUs at most once; the caller's current device is left as it was.
static void *mailbox_alloc(size_t bytes, int owner) {
    int was = 0;
    CUDA_CHECK(cudaGetDevice(&was));
    CUDA_CHECK(cudaSetDevice(owner % cuda_device_count()));
    void *p = dev_alloc(bytes);
    CUDA_CHECK(cudaSetDevice(was));
    return p;
}

// On the calling thread's own stream, ordered after the last access of either buffer and before
// the next (cuda_handoff.h): the host does not wait.
static void mailbox_copy(void *dst, const void *src, size_t bytes) {
    REQUIRED_WAIT(4, cuda_handoff_acquire(src, cudaStreamPerThread));
    REQUIRED_WAIT(5, cuda_handoff_acquire(dst, cudaStreamPerThread));
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cudaStreamPerThread));
    cuda_handoff_release(src, cudaStreamPerThread);
    cuda_handoff_release(dst, cudaStreamPerThread);
}

static void mailbox_free(void *p) {
    cuda_handoff_forget(p);
    dev_free(p);
}

static const TransportMemory CUDA_MAILBOX = {.alloc = mailbox_alloc, .free = mailbox_free, .copy = mailbox_copy};

// The stage's scratch must hold a slot of N rows: grown at slot creation (set-up), never in a
// step: the pinned token rows, and in fp32 mode the buffer the packed gradients need (N x
// max(Q + 2 KV, 2 I)). bf16 mode needs no more: everything a GEMM reads is bf16 in the slot
// (narrow_operands), the fused classifier makes its own bf16 logit gradients a chunk at a time,
// and attention reads the slot's own q, k and v.
static void ensure_scratch(const StageModel *s, size_t N) {
    StageCuda *c = cuda_of(s);
    const ModelConfig *m = &s->cfg;
    const size_t Q = (size_t)m->heads * m->head_dim, KV = (size_t)m->kv_heads * m->head_dim;
    const size_t packed_cols = Q + 2 * KV > 2 * (size_t)m->intermediate ? Q + 2 * KV : 2 * (size_t)m->intermediate;
    if (N > c->scratch_rows) {
        c->scratch_rows = N;
        free_staged_rows(c);    // too short now
    }
    if (!c->bf16 && N * packed_cols > c->pack_elems) {
        dev_free(c->pack);
        c->pack = dev_alloc(N * packed_cols * sizeof(float));
        c->pack_elems = N * packed_cols;
    }
}

// bf16 mode keeps the operand activations bf16 (stage_ops.h: narrow_operands).
static bool gpu_narrow_operands(const StageModel *s) { return cuda_of(s)->bf16; }

static StageActs *gpu_acts_create(const StageModel *s, int B, int T) {
    StageCuda *c = cuda_of(s);
    CUDA_CHECK(cudaSetDevice(c->device));
    StageActs *a = xcalloc(1, sizeof *a);
    *a = stage_acts_shape(s, B, T, false);
    a->ops = &CUDA_OPS;
    a->layer = xcalloc((size_t)(a->n_layers ? a->n_layers : 1), sizeof(LayerActs));
    a->arena_bytes = stage_acts_layout(s, a, NULL);
    a->arena = dev_alloc(a->arena_bytes);
    stage_acts_layout(s, a, a->arena);
    cuda_zero(c->ctx, a->arena, a->arena_bytes);
    float inv_freq[ROPE_MAX_HEAD_DIM / 2];
    model_rope_inv_freq(&s->cfg, inv_freq);
    cuda_rope_tables(c->ctx, a->cos_tab, a->sin_tab, T, s->cfg.head_dim, inv_freq);
    ActsCuda *ac = xcalloc(1, sizeof *ac);
    a->dev = ac;
    ac->device = c->device;
    const size_t NC = (size_t)a->N * a->C;
    ac->out_msg = c->bf16 ? dev_alloc(NC * sizeof(cuda_bf16)) : (void *)a->output;
    ac->din_msg = c->bf16 ? dev_alloc(NC * sizeof(cuda_bf16)) : (void *)a->dinput;
    a->msg_out = ac->out_msg;
    a->msg_din = ac->din_msg;
    if (s->has_head) ac->targets = dev_alloc((size_t)a->N * sizeof(int32_t));
    ensure_scratch(s, (size_t)a->N);
    // Reserved with the slot (engine/model/model_cuda_arena.c says of what), so no step grows it:
    // cudaFree in a step would wait for the whole GPU, NCCL's posted receives included.
    cuda_ctx_reserve(c->ctx, stage_cuda_arena_bytes(s, B, T, c->bf16));
    cuda_ctx_synchronize(c->ctx);
    return a;
}

static void gpu_acts_free(StageActs *a) {
    ActsCuda *ac = a->dev;
    CUDA_CHECK(cudaSetDevice(ac->device));   // the slot's memory is on its stage's GPU
    cuda_handoff_forget(ac->out_msg);
    cuda_handoff_forget(ac->din_msg);
    if (ac->out_msg != (void *)a->output) dev_free(ac->out_msg);
    if (ac->din_msg != (void *)a->dinput) dev_free(ac->din_msg);
    dev_free(ac->targets);

    dev_free(a->arena);
    free(ac);
    free(a->layer);
    free(a);
}

// ---- GEMMs in either precision -----------------------------------------------------------

// An operand (a norm's output, the MLP's hidden, the attention output, a residual gradient) as
// its GEMMs read it: the slot keeps it bf16 in bf16 mode (narrow_operands: written so where it
// is made), fp32 in fp32 mode.
static const void *kept_operand(const StageCuda *c, const float *wide, const uint16_t *narrow) {
    return c->bf16 ? (const void *)narrow : (const void *)wide;
}

// out = rmsnorm(x) into an operand activation (wide or narrow as kept_operand reads it).
static void norm_into(StageCuda *c, float *wide, uint16_t *narrow, float *rstd, const float *x, const float *weight,
                      int N, int C, float eps) {
    if (c->bf16) cuda_rmsnorm_forward_bf16(c->ctx, narrow, rstd, x, weight, N, C, eps);
    else cuda_rmsnorm_forward(c->ctx, wide, rstd, x, weight, N, C, eps);
}

// h = silu(gate) * up into the operand hidden (bf16 mode: from the bf16 gate and up).
static void swiglu_into(StageCuda *c, LayerActs *la, int N, int I) {
    if (c->bf16) cuda_swiglu_forward_bf16(c->ctx, la->h_16, la->gate_16, la->up_16, N, I);
    else cuda_swiglu_forward(c->ctx, la->h, la->gate, la->up, N, I);
}

// The bf16 working copy of device weight W (a view into c->w).
static const cuda_bf16 *w16_of(const StageCuda *c, const float *W) { return c->w16 + (W - c->w); }

// out(N, OC) = in(N, IC) @ W^T
static void lin_fwd(StageCuda *c, float *out, const void *in, const float *W, int N, int IC, int OC) {
    if (c->bf16) cuda_linear_forward_bf16(c->ctx, out, in, w16_of(c, W), N, IC, OC);
    else cuda_linear_forward(c->ctx, out, in, W, N, IC, OC);
}

// out(N, OC) = resid(N, OC) + in(N, IC) @ W^T: a residual add, in the GEMM's epilogue.
static void lin_fwd_residual(StageCuda *c, float *out, const float *resid, const void *in, const float *W, int N,
                             int IC, int OC) {
    if (c->bf16) cuda_linear_forward_residual_bf16(c->ctx, out, resid, in, w16_of(c, W), N, IC, OC);
    else cuda_linear_forward_residual(c->ctx, out, resid, in, W, N, IC, OC);
}

// dW(OC, IC) += dout(N, OC)^T @ in(N, IC)
static void lin_bwd_w(StageCuda *c, float *dW, const void *dout, const void *in, int N, int IC, int OC) {
    if (c->bf16) cuda_linear_backward_weight_bf16(c->ctx, dW, dout, in, N, IC, OC);
    else cuda_linear_backward_weight(c->ctx, dW, dout, in, N, IC, OC);
}

// A slot activation that only its own kernel reads (q, k, v, gate, up) as the projection writes
// it: bf16 in bf16 mode, fp32 in fp32 mode.
static void *projected(const StageCuda *c, float *wide, uint16_t *narrow) {
    return c->bf16 ? (void *)narrow : (void *)wide;
}

// batch projections of one input whose weights lie back to back, W_b = W + b * OC * IC, into
// outputs out + b * out_stride (N, OC) each (projected: bf16 in bf16 mode): one GEMM.
static void proj_fwd(StageCuda *c, void *out, size_t out_stride, const void *in, const float *W, int batch, int N,
                     int IC, int OC) {
    const size_t W_stride = (size_t)OC * IC;
    if (c->bf16)
        cuda_linear_forward_shared_to_bf16(c->ctx, out, out_stride, in, w16_of(c, W), W_stride, batch, N, IC, OC);
    else cuda_linear_forward_shared(c->ctx, out, out_stride, in, W, W_stride, batch, N, IC, OC);
}

// RoPE in place on q or k (projected: bf16 in bf16 mode) of B x T rows of H heads.
static void rope_in_place(StageCuda *c, void *x, const float *cos_tab, const float *sin_tab, int B, int T, int H,
                          int HD) {
    if (c->bf16) cuda_rope_forward_bf16(c->ctx, x, cos_tab, sin_tab, B, T, H, HD);
    else cuda_rope_forward(c->ctx, x, x, cos_tab, sin_tab, B, T, H, HD);
}

// fp32 mode: the column blocks src[i] (N, cols[i]), i < n, copied side by side into the pack
// buffer as one GEMM operand (N, sum of cols). (bf16 mode keeps them packed in the slot.)
static const void *packed(StageCuda *c, int N, int n, const float *const src[], const int cols[]) {
    int ld = 0;
    for (int i = 0; i < n; i++) ld += cols[i];
    assert(!c->bf16 && (size_t)N * ld <= c->pack_elems);
    for (int i = 0, col = 0; i < n; col += cols[i++]) cuda_pack_cols(c->ctx, c->pack + col, ld, src[i], N, cols[i]);
    return c->pack;
}

// The gradients of q|k|v and of gate|up as one GEMM operand each, (N, Q + 2 KV) and (N, 2 I):
// in bf16 mode the slot keeps them so (layer_backward_input writes them there), in fp32 mode
// they are packed into the stage's buffer.
static const void *packed_dqkv(StageCuda *c, const LayerActs *la, StageDims d) {
    if (c->bf16) return la->dqkv_16;
    return packed(c, d.N, 3, (const float *const[]){la->dq, la->dk, la->dv}, (const int[]){d.Q, d.KV, d.KV});
}
static const void *packed_dgate_up(StageCuda *c, const LayerActs *la, StageDims d) {
    if (c->bf16) return la->dgate_up_16;
    return packed(c, d.N, 2, (const float *const[]){la->dgate, la->dup}, (const int[]){d.I, d.I});
}

// A message (bf16 or fp32, device) into an fp32 buffer of n values, after whatever stream
// wrote it (a transport's, a mailbox copy's, a stage's on this rank) and before it is rewritten;
// in bf16 mode also, when narrow is set, kept as it came (a bf16 GEMM operand: the message's
// own bits, so no rounding).
static void from_msg(StageCuda *c, float *dst, uint16_t *narrow, const void *msg, size_t n) {
    const cudaStream_t st = cuda_ctx_stream(c->ctx);
    REQUIRED_WAIT(3, cuda_handoff_acquire(msg, st));
    if (c->bf16) cuda_bf16_to_f32(c->ctx, dst, msg, n);
    else CUDA_CHECK(cudaMemcpyAsync(dst, msg, n * sizeof(float), cudaMemcpyDeviceToDevice, st));
    if (c->bf16 && narrow)
        CUDA_CHECK(cudaMemcpyAsync(narrow, msg, n * sizeof(cuda_bf16), cudaMemcpyDeviceToDevice, st));
    cuda_handoff_release(msg, st);
}

// fp32 -> message (bf16 mode; in fp32 mode the message is the buffer itself). Only a stage
// with no layers converts: the last layer's residual add writes the message with its sum
// (output_copy).
static void to_msg(StageCuda *c, void *msg, const float *src, size_t n) {
    if (c->bf16) cuda_f32_to_bf16(c->ctx, msg, src, n);
}

// Where layer l's output gets its bf16 copy as it is written: the output message, for the
// last layer of a stage with no head in bf16 mode; else NULL.
static uint16_t *output_copy(const StageCuda *c, const StageModel *s, const StageActs *a, int l) {
    if (!c->bf16 || s->has_head || l + 1 < a->n_layers) return NULL;
    return ((const ActsCuda *)a->dev)->out_msg;
}

static void copy_bytes(StageCuda *c, void *dst, const void *src, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_ctx_stream(c->ctx)));
}

// ---- forward -----------------------------------------------------------------------------

// The RMSNorm a layer's last residual add computes on the way (the next layer's first norm, or
// the head's final norm): weight, and where its output and rstd go; weight NULL: none follows.
typedef struct {
    const float *weight;
    float *out, *rstd;
    uint16_t *out16;   // bf16 mode: the output as a bf16 GEMM operand (out NULL)
} NextNorm;

// q, k, v = ln1 @ wq^T, wk^T, wv^T (bf16 mode: stored bf16, as RoPE and attention read them):
// one batch of three when their shapes and their slot buffers' spacing agree (Q == KV), else q
// alone and k, v as one batch.
static void qkv_forward(StageCuda *c, const LayerParams *w, LayerActs *la, const void *ln1, StageDims d) {
    const ptrdiff_t qk = c->bf16 ? la->k_16 - la->q_16 : la->k - la->q;
    const ptrdiff_t kv = c->bf16 ? la->v_16 - la->k_16 : la->v - la->k;
    void *q = projected(c, la->q, la->q_16), *k = projected(c, la->k, la->k_16);
    if (d.Q == d.KV && qk == kv) {
        proj_fwd(c, q, (size_t)kv, ln1, w->wq, 3, d.N, d.C, d.Q);
        return;
    }
    proj_fwd(c, q, 0, ln1, w->wq, 1, d.N, d.C, d.Q);
    proj_fwd(c, k, (size_t)kv, ln1, w->wk, 2, d.N, d.C, d.KV);
}

// gate, up = ln2 @ wgate^T, wup^T: one batch of two (bf16 mode: stored bf16, as SwiGLU reads them).
static void gate_up_forward(StageCuda *c, const LayerParams *w, LayerActs *la, int N, int C, int I) {
    const size_t stride = c->bf16 ? (size_t)(la->up_16 - la->gate_16) : (size_t)(la->up - la->gate);
    proj_fwd(c, projected(c, la->gate, la->gate_16), stride, kept_operand(c, la->ln2, la->ln2_16), w->wgate, 2, N, C,
             I);
}

// A layer's second half for its N rows, after attention: xmid = x + the output projection, its
// norm, the MLP, out = xmid + the down projection, then the norm that follows (next) or, where
// none does, out's bf16 copy into out16 (bf16 mode: the output message; NULL: none). The
// training forward and generation's one-row decode both end their layers here.
static void layer_after_attention(StageCuda *c, const LayerParams *w, LayerActs *la, const float *x, float *out,
                                  uint16_t *out16, int N, StageDims d, float eps, NextNorm next) {
    lin_fwd_residual(c, la->xmid, x, kept_operand(c, la->atty, la->atty_16), w->wo, N, d.Q, d.C);
    norm_into(c, la->ln2, la->ln2_16, la->rstd2, la->xmid, w->ln2, N, d.C, eps);
    gate_up_forward(c, w, la, N, d.C, d.I);
    swiglu_into(c, la, N, d.I);
    lin_fwd_residual(c, out, la->xmid, kept_operand(c, la->h, la->h_16), w->wdown, N, d.I, d.C);
    if (next.weight) norm_into(c, next.out, next.out16, next.rstd, out, next.weight, N, d.C, eps);
    else if (out16) cuda_f32_to_bf16(c->ctx, out16, out, (size_t)N * d.C);
}

// la->ln1 and la->rstd1 are the caller's (the previous layer's norm after its residual, or
// gpu_forward). out16: where out's bf16 copy goes when no norm follows, or NULL.
static void layer_forward(StageCuda *c, const LayerParams *w, LayerActs *la, const float *x, float *out,
                          uint16_t *out16, const StageActs *a, StageDims d, float eps, NextNorm next) {
    qkv_forward(c, w, la, kept_operand(c, la->ln1, la->ln1_16), d);
    rope_in_place(c, projected(c, la->q, la->q_16), a->cos_tab, a->sin_tab, d.B, d.T, d.NH, d.HD);
    rope_in_place(c, projected(c, la->k, la->k_16), a->cos_tab, a->sin_tab, d.B, d.T, d.NKV, d.HD);
    if (c->bf16)
        cuda_flash_attention_forward_bf16(c->ctx, la->atty_16, la->lse, la->q_16, la->k_16, la->v_16, d.B, d.T, d.NH,
                                          d.NKV, d.HD);
    else
        cuda_flash_attention_forward(c->ctx, la->atty, la->lse, la->q, la->k, la->v, d.B, d.T, d.NH, d.NKV, d.HD);
    layer_after_attention(c, w, la, x, out, out16, d.N, d, eps, next);
}

// The microbatch's token rows (first stage) and target rows (last stage) go up through pinned
// buffers, queued: from pageable memory each copy would be staged by the driver first.
static void stage_rows(StageCuda *c, StageActs *a, const int32_t *tokens, const int32_t *targets) {
    ActsCuda *ac = a->dev;
    if (!tokens && !targets) return;
    const cudaStream_t st = cuda_ctx_stream(c->ctx);
    const size_t bytes = (size_t)a->N * sizeof(int32_t);
    StagedRows *r = free_rows(c);
    if (tokens) memcpy(r->tokens, tokens, bytes);
    if (targets) memcpy(r->targets, targets, bytes);
    if (tokens) CUDA_CHECK(cudaMemcpyAsync(a->tokens, r->tokens, bytes, cudaMemcpyHostToDevice, st));
    if (targets) CUDA_CHECK(cudaMemcpyAsync(ac->targets, r->targets, bytes, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaEventRecord(r->staged, st));
}

// The fused classifier over the final norm's output: the loss (+= *loss), dlnf (written into
// dx) and the head's weight gradient (+= dW), each when non-NULL, with the slot's targets and
// loss scale.
static void head(StageCuda *c, const StageActs *a, double *loss, float *dx, float *dW, StageDims d) {
    const ActsCuda *ac = a->dev;
    const void *x = kept_operand(c, a->lnf, a->lnf_16);
    if (c->bf16)
        cuda_classifier_bf16(c->ctx, loss, dx, dW, x, w16_of(c, c->dw.lm_head), ac->targets, d.N, d.C, d.V,
                             ac->loss_scale);
    else
        cuda_classifier(c->ctx, loss, dx, dW, x, c->dw.lm_head, ac->targets, d.N, d.C, d.V, ac->loss_scale);
}

// Queued, not waited for: the output message is handed to its readers by cuda_handoff; the last
// stage adds its loss to the step's on the device (gpu_step_loss reads it).
static double gpu_forward(StageModel *s, StageActs *a, const int32_t *tokens, const void *input,
                          const int32_t *targets, float loss_scale) {
    StageCuda *c = cuda_of(s);
    ActsCuda *ac = a->dev;
    const StageDims d = stage_dims(s, a);
    const size_t NC = (size_t)d.N * d.C;
    const cudaStream_t st = cuda_ctx_stream(c->ctx);
    stage_rows(c, a, s->has_embed ? tokens : NULL, s->has_head ? targets : NULL);
    // The output message (in fp32 the output itself) is rewritten below: after its last reader.
    // (In training the slot's backward already came after that read; not so in an eval round.)
    if (!s->has_head) cuda_handoff_acquire(ac->out_msg, st);
    if (s->has_embed) cuda_embedding_forward(c->ctx, acts_resid_at(a, 0), a->tokens, c->dw.wte, d.N, d.C);
    else from_msg(c, acts_resid_at(a, 0), NULL, input, NC);
    // The first norm of a stream (layer 0's, or the head's with no layer before it) runs alone;
    // every later one with the residual add before it.
    const float eps = s->cfg.rms_eps;
    if (a->n_layers > 0)
        norm_into(c, a->layer[0].ln1, a->layer[0].ln1_16, a->layer[0].rstd1, acts_resid_at(a, 0), c->dw.layer[0].ln1,
                  d.N, d.C, eps);
    else if (s->has_head)
        norm_into(c, a->lnf, a->lnf_16, a->rstdf, acts_resid_at(a, 0), c->dw.norm, d.N, d.C, eps);
    for (int l = 0; l < a->n_layers; l++) {
        NextNorm next = {0};
        if (l + 1 < a->n_layers) {
            LayerActs *nl = &a->layer[l + 1];
            next = (NextNorm){c->dw.layer[l + 1].ln1, nl->ln1, nl->rstd1, nl->ln1_16};
        } else if (s->has_head) {
            next = (NextNorm){c->dw.norm, a->lnf, a->rstdf, a->lnf_16};
        }
        layer_forward(c, &c->dw.layer[l], &a->layer[l], acts_resid_at(a, l), acts_resid_at(a, l + 1),
                      output_copy(c, s, a, l), a, d, eps, next);
    }
    if (!s->has_head) {
        if (a->n_layers == 0) to_msg(c, ac->out_msg, a->output, NC);
        cuda_handoff_release(ac->out_msg, st);
        return 0.0;
    }
    ac->loss_scale = loss_scale;
    // Training: the head's whole gradient from this one pass over the chunks' logits: dlnf (read
    // by both halves of the final norm's backward) and the head's weight gradient, added now,
    // so the weight half does not compute the (N, V) logits a second time (a GEMM of N V C
    // multiply-adds, 1 of the head's 4 before). An evaluation or a sample: the loss alone.
    if (a->forward_only) head(c, a, c->totals, NULL, NULL, d);
    else head(c, a, c->totals, a->dlnf, c->dg.lm_head, d);
    return 0.0;   // the loss stays on the device: gpu_step_loss
}

// The step's one wait on the last stage's rank: its loss and, the gradients being complete by
// then, their sum of squares (what gpu_grad_sum_squares gives unless a replica sum changes them
// first); the loss accumulator then starts again at zero.
static double gpu_step_loss(StageModel *s) {
    StageCuda *c = cuda_of(s);
    read_totals(c, s->numel);
    cuda_zero(c->ctx, c->totals, sizeof(double));
    return c->totals_host[0];
}

// ---- backward ----------------------------------------------------------------------------

// Where the bf16 copy of residual gradient row l goes as its fp32 value is written (bf16 mode):
// layer l - 1's dout_16, or for row 0 (the stage's dinput) the input-gradient message itself;
// NULL in fp32 mode, and for a first stage's row 0 (the embedding's gradient reads fp32).
static uint16_t *dresid_copy(const StageCuda *c, const StageModel *s, const StageActs *a, int l) {
    if (!c->bf16) return NULL;
    if (l > 0) return a->layer[l - 1].dout_16;
    return s->has_embed ? NULL : ((const ActsCuda *)a->dev)->din_msg;
}

// Input gradients through a linear layer are written by their GEMM in both modes (no zeroing
// first): fp32 mode's with cuda_linear_backward_input, bf16 mode's stored bf16 by
// cuda_linear_backward_input_to_bf16 (each has one reader, or the weight half reads it as a
// bf16 operand), so bf16 mode makes no fp32-result input-gradient GEMM.

// A norm's input gradient through the projections after it: their input-gradient GEMM (the
// packed gradient dproj (N, OC) of the OC = all their outputs, weights W back to back) into the
// norm output's gradient dln (N, C) (bf16 mode: stored bf16, dln16), then dx = resid + the
// norm's term (dx16: its bf16 copy, or NULL), and the norm's weight gradient dweight += its
// term in the same kernel, which has the rows it reads in registers (kernels_cuda.h). So a GPU
// stage's norm weights get their gradient in the input half, the C values each that a
// zero-bubble split could move to the weight half, for a pass over 3 bytes an element less.
static void norm_input_grad(StageCuda *c, float *dln, uint16_t *dln16, const void *dproj, const float *W, int OC,
                            float *dx, uint16_t *dx16, float *dweight, const float *resid, const float *inp,
                            const float *weight, const float *rstd, StageDims d) {
    if (c->bf16) {
        cuda_linear_backward_input_to_bf16(c->ctx, dln16, dproj, w16_of(c, W), d.N, d.C, OC);
        cuda_residual_rmsnorm_backward_bf16(c->ctx, dx, dx16, dweight, resid, dln16, inp, weight, rstd, d.N, d.C);
    } else {
        cuda_linear_backward_input(c->ctx, dln, dproj, W, d.N, d.C, OC);
        cuda_residual_rmsnorm_backward(c->ctx, dx, dx16, dweight, resid, dln, inp, weight, rstd, d.N, d.C);
    }
}

// dx (dx16: its bf16 copy, or NULL) from the layer's output gradient dout (bf16 mode: read by
// the GEMMs as la->dout_16). Every activation gradient here is written by the call that makes
// it (kernels_cuda.h's contract), so none is zeroed first.
// g: the layer's gradients, where its norms' weight gradients go (norm_input_grad).
static void layer_backward_input(StageCuda *c, const LayerParams *w, LayerParams *g, LayerActs *la, const float *x,
                                 const float *dout, float *dx, uint16_t *dx16, StageActs *a, StageDims d) {
    // MLP branch
    if (c->bf16) {   // dh stored bf16 (only SwiGLU reads it); dgate | dup written into the packed bf16 operand
        cuda_linear_backward_input_to_bf16(c->ctx, a->dh_16, la->dout_16, w16_of(c, w->wdown), d.N, d.I, d.C);
        cuda_swiglu_backward_bf16(c->ctx, la->dgate_up_16, 2 * d.I, a->dh_16, la->gate_16, la->up_16, d.N, d.I);
    } else {
        cuda_linear_backward_input(c->ctx, a->dh, dout, w->wdown, d.N, d.I, d.C);
        cuda_swiglu_backward(c->ctx, la->dgate, la->dup, a->dh, la->gate, la->up, d.N, d.I);
    }
    float *dxmid = c->bf16 ? a->dxmid : la->dxmid;   // bf16: a slot-wide buffer, kept as dxmid_16
    norm_input_grad(c, la->dln2, la->dln2_16, packed_dgate_up(c, la, d), w->wgate, 2 * d.I, dxmid,
                    c->bf16 ? la->dxmid_16 : NULL, g->ln2, dout, la->xmid, w->ln2, la->rstd2, d);   // gate|up at once
    // Attention branch
    if (c->bf16) {
        // The attention output's gradient stored bf16 (only attention reads it); then dq, dk and
        // dv side by side in the packed bf16 operand, dq and dk through RoPE's backward (in the
        // attention kernels' registers where they can: drot_q and drot_k take the rest).
        cuda_linear_backward_input_to_bf16(c->ctx, a->datty_16, la->dxmid_16, w16_of(c, w->wo), d.N, d.Q, d.C);
        cuda_flash_attention_rope_backward_bf16(c->ctx, la->dqkv_16, d.Q + 2 * d.KV, a->drot_q, a->drot_k, a->dsum,
                                                a->datty_16, la->q_16, la->k_16, la->v_16, la->atty_16, la->lse,
                                                a->cos_tab, a->sin_tab, d.B, d.T, d.NH, d.NKV, d.HD);
    } else {
        cuda_linear_backward_input(c->ctx, a->datty, dxmid, w->wo, d.N, d.Q, d.C);
        cuda_flash_attention_backward(c->ctx, a->drot_q, a->drot_k, la->dv, a->dsum, a->datty, la->q, la->k, la->v,
                                      la->atty, la->lse, d.B, d.T, d.NH, d.NKV, d.HD);
        cuda_rope_backward(c->ctx, la->dq, a->drot_q, a->cos_tab, a->sin_tab, d.B, d.T, d.NH, d.HD);
        cuda_rope_backward(c->ctx, la->dk, a->drot_k, a->cos_tab, a->sin_tab, d.B, d.T, d.NKV, d.HD);
    }
    norm_input_grad(c, la->dln1, la->dln1_16, packed_dqkv(c, la, d), w->wq, d.Q + 2 * d.KV, dx, dx16, g->ln1, dxmid,
                    x, w->ln1, la->rstd1, d);   // q|k|v at once
}

// Queued, not waited for: the input-gradient message is handed over as forward's output is. In
// bf16 mode whatever writes the stage's dinput writes the message with it (dresid_copy).
static void gpu_backward_input(StageModel *s, StageActs *a, const void *dout) {
    StageCuda *c = cuda_of(s);
    ActsCuda *ac = a->dev;
    const StageDims d = stage_dims(s, a);
    const size_t NC = (size_t)d.N * d.C;
    const int top = a->n_layers;
    c->norm_read = false;   // the norms' weight gradients change here (norm_input_grad)
    if (!s->has_embed) cuda_handoff_acquire(ac->din_msg, cuda_ctx_stream(c->ctx));   // after its last reader
    if (s->has_head)   // dlnf: the forward's (the fused classifier); the final norm's weight gradient with it
        cuda_residual_rmsnorm_backward(c->ctx, acts_dresid_at(a, top), dresid_copy(c, s, a, top), c->dg.norm, NULL,
                                       a->dlnf, acts_resid_at(a, top), c->dw.norm, a->rstdf, d.N, d.C);
    else
        from_msg(c, acts_dresid_at(a, top), dresid_copy(c, s, a, top), dout, NC);
    for (int l = top - 1; l >= 0; l--)
        layer_backward_input(c, &c->dw.layer[l], &c->dg.layer[l], &a->layer[l], acts_resid_at(a, l),
                             acts_dresid_at(a, l + 1), acts_dresid_at(a, l), dresid_copy(c, s, a, l), a, d);
    if (!s->has_embed) cuda_handoff_release(ac->din_msg, cuda_ctx_stream(c->ctx));
}

// dout: the layer's output gradient in fp32 mode (bf16 mode reads la->dout_16). The norms'
// weight gradients came with the input half (norm_input_grad).
static void layer_backward_weight(StageCuda *c, LayerParams *g, const LayerActs *la, const float *dout, StageDims d) {
    lin_bwd_w(c, g->wdown, kept_operand(c, dout, la->dout_16), kept_operand(c, la->h, la->h_16), d.N, d.I, d.C);
    lin_bwd_w(c, g->wgate, packed_dgate_up(c, la, d), kept_operand(c, la->ln2, la->ln2_16), d.N, d.C, 2 * d.I);
    lin_bwd_w(c, g->wo, kept_operand(c, la->dxmid, la->dxmid_16), kept_operand(c, la->atty, la->atty_16), d.N, d.Q,
              d.C);
    lin_bwd_w(c, g->wq, packed_dqkv(c, la, d), kept_operand(c, la->ln1, la->ln1_16), d.N, d.C, d.Q + 2 * d.KV);
}

static void gpu_backward_weight(StageModel *s, StageActs *a) {
    StageCuda *c = cuda_of(s);
    c->norm_read = false;
    const StageDims d = stage_dims(s, a);
    for (int l = a->n_layers - 1; l >= 0; l--)
        layer_backward_weight(c, &c->dg.layer[l], &a->layer[l], acts_dresid_at(a, l + 1), d);
    if (s->has_embed) cuda_embedding_backward(c->ctx, c->dg.wte, acts_dresid_at(a, 0), a->tokens, d.N, d.C);
}

// ---- the tables ----------------------------------------------------------------------------

// ---- generation ---------------------------------------------------------------------------
// model_decode.c's equations for one token on the device, against a KV cache in device memory:
// the prefill is gpu_forward of one row (B = 1) and gpu_kv_fill keeps its rotated keys and
// values; each later token is N = 1 through the kernels of the training forward (RoPE at
// position pos through the tables' row pos, the norms unfused), its k and v projected straight
// into the cache, and attention of its one query by cuda_flash_decode (flash_tile.h's tile
// functions, as the training forward runs them). The fused classifier makes no logits, so the
// last stage's tapped row gets a plain 1 x V GEMM and one copy to the host (gpu_logits_row).

typedef struct {
    int device, T, KV, half;
    size_t elem;                // bytes a cached value: 4, or 2 in bf16 mode (the slot's q, k, v are bf16)
    void *k, *v;                // (n_layers, T, KV) rotated keys and values of positions [0, T)
    float *cos_tab, *sin_tab;   // (T, half) rotary tables of every position
} KvCuda;

static void *gpu_kv_create(const StageModel *s, int T) {
    StageCuda *c = cuda_of(s);
    CUDA_CHECK(cudaSetDevice(c->device));
    const ModelConfig *m = &s->cfg;
    const int L = s->layer_end - s->layer_begin;
    KvCuda *kv = xcalloc(1, sizeof *kv);
    *kv = (KvCuda){.device = c->device, .T = T, .KV = m->kv_heads * m->head_dim, .half = m->head_dim / 2,
                   .elem = c->bf16 ? sizeof(cuda_bf16) : sizeof(float)};
    const size_t cache = (size_t)(L ? L : 1) * T * kv->KV * kv->elem;
    kv->k = dev_alloc(cache);
    kv->v = dev_alloc(cache);
    kv->cos_tab = dev_alloc((size_t)T * kv->half * sizeof(float));
    kv->sin_tab = dev_alloc((size_t)T * kv->half * sizeof(float));
    float inv_freq[ROPE_MAX_HEAD_DIM / 2];
    model_rope_inv_freq(m, inv_freq);
    cuda_rope_tables(c->ctx, kv->cos_tab, kv->sin_tab, T, m->head_dim, inv_freq);
    cuda_ctx_synchronize(c->ctx);
    return kv;
}

static void gpu_kv_free(void *p) {
    KvCuda *kv = p;
    CUDA_CHECK(cudaSetDevice(kv->device));
    dev_free(kv->k);
    dev_free(kv->v);
    dev_free(kv->cos_tab);
    dev_free(kv->sin_tab);
    free(kv);
}

static void *kv_at(const KvCuda *kv, void *cache, int l, int pos) {
    return (char *)cache + ((size_t)l * kv->T + pos) * kv->KV * kv->elem;
}

// Positions [0, n) of a prefill's keys and values (a slot of B = 1, T = kv->T), queued.
static void gpu_kv_fill(const StageModel *s, void *p, const StageActs *a, int n) {
    StageCuda *c = cuda_of(s);
    KvCuda *kv = p;
    assert(a->B == 1 && a->T == kv->T && n <= kv->T);
    const size_t bytes = (size_t)n * kv->KV * kv->elem;
    for (int l = 0; l < a->n_layers; l++) {
        LayerActs *la = &a->layer[l];
        copy_bytes(c, kv_at(kv, kv->k, l, 0), projected(c, la->k, la->k_16), bytes);
        copy_bytes(c, kv_at(kv, kv->v, l, 0), projected(c, la->v, la->v_16), bytes);
    }
}

// layer_forward for the one row at position pos (model_decode.c's layer_decode).
static void layer_decode(StageCuda *c, const LayerParams *w, LayerActs *la, const float *x, float *out,
                         uint16_t *out16, KvCuda *kv, int l, int pos, StageDims d, float eps) {
    void *q = projected(c, la->q, la->q_16), *k = kv_at(kv, kv->k, l, pos), *v = kv_at(kv, kv->v, l, pos);
    const float *cos_at = kv->cos_tab + (size_t)pos * kv->half, *sin_at = kv->sin_tab + (size_t)pos * kv->half;
    norm_into(c, la->ln1, la->ln1_16, la->rstd1, x, w->ln1, 1, d.C, eps);
    const void *ln1 = kept_operand(c, la->ln1, la->ln1_16);
    proj_fwd(c, q, 0, ln1, w->wq, 1, 1, d.C, d.Q);   // k and v straight into the cache
    proj_fwd(c, k, 0, ln1, w->wk, 1, 1, d.C, d.KV);
    proj_fwd(c, v, 0, ln1, w->wv, 1, 1, d.C, d.KV);
    rope_in_place(c, q, cos_at, sin_at, 1, 1, d.NH, d.HD);
    rope_in_place(c, k, cos_at, sin_at, 1, 1, d.NKV, d.HD);
    if (c->bf16)
        cuda_flash_decode_bf16(c->ctx, la->atty_16, la->q_16, kv_at(kv, kv->k, l, 0), kv_at(kv, kv->v, l, 0), pos + 1,
                               d.NH, d.NKV, d.HD);
    else
        cuda_flash_decode(c->ctx, la->atty, la->q, kv_at(kv, kv->k, l, 0), kv_at(kv, kv->v, l, 0), pos + 1, d.NH, d.NKV,
                          d.HD);
    layer_after_attention(c, w, la, x, out, out16, 1, d, eps, (NextNorm){0});
}

// One token at pos (a slot of B = T = 1), queued; the output message handed on as gpu_forward
// hands it; the last stage ends at the final norm's output (its logits: gpu_logits_row).
static void gpu_decode(StageModel *s, void *p, StageActs *a, const int32_t *token, const void *input, int pos) {
    StageCuda *c = cuda_of(s);
    ActsCuda *ac = a->dev;
    KvCuda *kv = p;
    assert(a->N == 1 && pos >= 0 && pos < kv->T);
    const StageDims d = stage_dims(s, a);
    const cudaStream_t st = cuda_ctx_stream(c->ctx);
    stage_rows(c, a, s->has_embed ? token : NULL, NULL);
    if (!s->has_head) cuda_handoff_acquire(ac->out_msg, st);
    if (s->has_embed) cuda_embedding_forward(c->ctx, acts_resid_at(a, 0), a->tokens, c->dw.wte, 1, d.C);
    else from_msg(c, acts_resid_at(a, 0), NULL, input, (size_t)d.C);
    const float eps = s->cfg.rms_eps;
    for (int l = 0; l < a->n_layers; l++)
        layer_decode(c, &c->dw.layer[l], &a->layer[l], acts_resid_at(a, l), acts_resid_at(a, l + 1),
                     output_copy(c, s, a, l), kv, l, pos, d, eps);
    if (!s->has_head) {
        if (a->n_layers == 0) to_msg(c, ac->out_msg, a->output, (size_t)d.C);
        cuda_handoff_release(ac->out_msg, st);
        return;
    }
    norm_into(c, a->lnf, a->lnf_16, a->rstdf, acts_resid_at(a, a->n_layers), c->dw.norm, 1, d.C, eps);
}

// out(V) on the host = row `row` of the final norm's output (a forward's or a decode's) @ lm_head^T.
static void gpu_logits_row(const StageModel *s, const StageActs *a, int row, float *out) {
    StageCuda *c = cuda_of(s);
    const int C = s->cfg.hidden, V = s->cfg.vocab;
    assert(s->has_head && row >= 0 && row < a->N);
    if (!c->logits_row) c->logits_row = dev_alloc((size_t)V * sizeof(float));
    const void *x = c->bf16 ? (const void *)(a->lnf_16 + (size_t)row * C) : (const void *)(a->lnf + (size_t)row * C);
    lin_fwd(c, c->logits_row, x, c->dw.lm_head, 1, C, V);
    copy_sync(c, out, c->logits_row, (size_t)V * sizeof(float), cudaMemcpyDeviceToHost);
}

static const StageOps CUDA_OPS = {
    .head_without_logits = true,
    .acts_create = gpu_acts_create,
    .acts_free = gpu_acts_free,
    .forward = gpu_forward,
    .step_loss = gpu_step_loss,
    .backward_input = gpu_backward_input,
    .backward_weight = gpu_backward_weight,
    .msg_bytes = gpu_msg_bytes,
    .msg_alloc = gpu_msg_alloc,
    .msg_free = gpu_msg_free,
    .zero_grads = gpu_zero_grads,
    .grad_sum_squares = gpu_grad_sum_squares,
    .update = gpu_update,
    .reduce_begin = gpu_reduce_begin,
    .reduce_end = gpu_reduce_end,
    .download = gpu_download,
    .upload = gpu_upload,
    .time_reserve = gpu_time_reserve,
    .time_mark = gpu_time_mark,
    .time_since = gpu_time_since,
    .bind_thread = gpu_bind_thread,
    .detach = gpu_detach,
    .flash_attention = true,
    .norm_grads_in_input = true,
    .narrow_operands = gpu_narrow_operands,
    .kv_create = gpu_kv_create,
    .kv_free = gpu_kv_free,
    .kv_fill = gpu_kv_fill,
    .decode = gpu_decode,
    .logits_row = gpu_logits_row,
};

const StageDevice stage_cuda_device = {
    .kind = DEVICE_CUDA,
    .unavailable = cuda_unavailable_reason,
    .device_count = cuda_device_count,
    .set_device = gpu_set_device,
    .attach = gpu_attach,
    .msg_elem_bytes = gpu_msg_elem_bytes,
    .mailboxes = &CUDA_MAILBOX,
};
