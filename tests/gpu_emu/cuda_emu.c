// A CPU stand-in for the CUDA device, so the engine's GPU path (engine/model/model_cuda.c, the GPU
// parts of engine/pipeline.c, the local transport's device mailboxes, `check`, checkpoints)
// runs and is tested on a machine without a GPU. Linked instead of kernels/cuda and the CUDA
// runtime into `pptrain_emu` (CMakeLists.txt): it defines every kernels/cuda/kernels_cuda.h
// function and the few CUDA runtime calls the engine makes.
//
// What it proves and what it cannot. Each kernel runs the CPU kernel of kernels/cpu on the
// same buffers, and bf16 operands are rounded exactly as the GPU rounds them (nearest even),
// so the engine's numbers are those of a GPU up to summation order. It is strict where a GPU
// would fail: every buffer a kernel reads or writes must lie inside one live "device"
// allocation (cudaMalloc), copies must go the way their kind says, and a context's kernels
// must be launched from a thread whose current device is the context's (cudaSetDevice), as
// on a machine with several GPUs; a breach prints one line naming the call and aborts. It
// says nothing about the CUDA kernels themselves (tests/gpu/test_cuda_kernels does, on a
// GPU) nor about asynchrony: every call here completes before it returns.
// PPTRAIN_EMU_GPUS=N sets how many devices it pretends to have (default 1).
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cuda/kernels_cuda.h"
#include "tests/gpu_emu/emu.h"

// ---- device memory: a registry of live allocations ----------------------------------------

typedef struct {
    const char *base;
    size_t bytes;
    int device;
} Block;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static Block *blocks;
static size_t n_blocks, cap_blocks;
static _Thread_local int current_device;

__attribute__((noreturn)) static void breach(const char *call, const char *what) {
    fprintf(stderr, "pptrain (GPU emulation): %s: %s\n", call, what);
    abort();
}

static int emu_devices(void) {
    const char *v = getenv("PPTRAIN_EMU_GPUS");
    const int n = v ? atoi(v) : 1;
    return n > 0 ? n : 1;
}

// The block holding [p, p + bytes), or NULL.
static const Block *find_block(const void *p, size_t bytes) {
    const Block *found = NULL;
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < n_blocks && !found; i++) {
        const char *c = p;
        if (c >= blocks[i].base && c + bytes <= blocks[i].base + blocks[i].bytes) found = &blocks[i];
    }
    pthread_mutex_unlock(&registry_lock);
    return found;
}

static void need_device(const char *call, const void *p, size_t bytes) {
    if (bytes == 0) return;
    if (!p || !find_block(p, bytes)) breach(call, "a buffer is not (wholly) device memory");
}

cudaError_t cudaMalloc(void **p, size_t bytes) {
    *p = calloc(1, bytes ? bytes : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    pthread_mutex_lock(&registry_lock);
    if (n_blocks == cap_blocks) {
        cap_blocks = cap_blocks ? 2 * cap_blocks : 64;
        blocks = realloc(blocks, cap_blocks * sizeof *blocks);
        if (!blocks) abort();
    }
    blocks[n_blocks++] = (Block){.base = *p, .bytes = bytes ? bytes : 1, .device = current_device};
    pthread_mutex_unlock(&registry_lock);
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    pthread_mutex_lock(&registry_lock);
    size_t i = 0;
    while (i < n_blocks && blocks[i].base != p) i++;
    if (i == n_blocks) {
        pthread_mutex_unlock(&registry_lock);
        breach("cudaFree", "not a live device allocation");
    }
    blocks[i] = blocks[--n_blocks];
    pthread_mutex_unlock(&registry_lock);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= emu_devices()) return cudaErrorInvalidDevice;
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t stream) {
    (void)stream;
    const bool dst_dev = !bytes || find_block(dst, bytes), src_dev = !bytes || find_block(src, bytes);
    const bool ok = kind == cudaMemcpyDefault || (kind == cudaMemcpyHostToDevice && dst_dev && !src_dev) ||
                    (kind == cudaMemcpyDeviceToHost && !dst_dev && src_dev) ||
                    (kind == cudaMemcpyDeviceToDevice && dst_dev && src_dev);
    if (!ok) breach("cudaMemcpyAsync", "the buffers are not where the copy's kind says");
    if (bytes) memmove(dst, src, bytes);
    return cudaSuccess;
}

// ---- streams and events ----------------------------------------------------------------------
// Kernels and copies complete when they are called, so a stream only holds what does not:
// the MPI requests that stand in for NCCL's operations (nccl_emu.c). An event marks how many
// of its stream's requests came before it; it has completed when those have.

struct CUstream_st {
    MPI_Request *reqs;   // (n) in enqueue order; MPI_REQUEST_NULL once complete
    size_t n, cap, done; // reqs[0, done) are complete
};

struct CUevent_st {
    cudaStream_t stream;
    size_t upto;         // completes with the stream's first upto requests
};

static bool special_stream(cudaStream_t s) { return s == NULL || s == cudaStreamPerThread || s == cudaStreamLegacy; }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
    (void)flags;
    *stream = calloc(1, sizeof **stream);
    return *stream ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    if (special_stream(stream)) return cudaSuccess;
    free(stream->reqs);
    free(stream);
    return cudaSuccess;
}

void emu_stream_push(cudaStream_t stream, MPI_Request req) {
    if (special_stream(stream)) breach("emu_stream_push", "an NCCL operation on a default stream");
    if (stream->n == stream->cap) {
        stream->cap = stream->cap ? 2 * stream->cap : 64;
        stream->reqs = realloc(stream->reqs, stream->cap * sizeof *stream->reqs);
        if (!stream->reqs) abort();
    }
    stream->reqs[stream->n++] = req;
}

// Have the stream's first upto requests completed? Tests them without waiting (wait: waits).
static bool stream_reached(cudaStream_t stream, size_t upto, bool wait) {
    if (special_stream(stream)) return true;
    while (stream->done < upto) {
        int flag = 1;
        MPI_Request *r = &stream->reqs[stream->done];
        if (wait) MPI_Wait(r, MPI_STATUS_IGNORE);
        else MPI_Test(r, &flag, MPI_STATUS_IGNORE);
        if (!flag) return false;
        stream->done++;
    }
    return true;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    if (!special_stream(stream)) stream_reached(stream, stream->n, true);
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
    (void)flags;
    *event = calloc(1, sizeof **event);
    return *event ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    free(event);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    event->stream = stream;
    event->upto = special_stream(stream) ? 0 : stream->n;
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
    return !event->stream || stream_reached(event->stream, event->upto, false) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaGetLastError(void) { return cudaSuccess; }

cudaError_t cudaGetDeviceCount(int *count) {
    *count = emu_devices();
    return cudaSuccess;
}

// The device's UUID is its index: processes on one machine that pick the same index share it,
// as they would share a real GPU.
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
    if (device < 0 || device >= emu_devices()) return cudaErrorInvalidDevice;
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "emulated GPU %d", device);
    prop->uuid.bytes[0] = (char)device;
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t stream) {
    (void)stream;
    need_device(__func__, p, bytes);
    memset(p, value, bytes);
    return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated CUDA error"; }

const char *cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated"; }

void cuda_check_fail(const char *library, const char *message, const char *name, const char *call, const char *file,
                     int line) {
    fprintf(stderr, "pptrain: %s error: %s [%s] in %s at %s:%d\n", library, message, name, call, file, line);
    exit(1);
}

// ---- contexts ------------------------------------------------------------------------------

struct CudaCtx {
    int device;
    cudaStream_t stream;
};

int cuda_device_count(void) { return emu_devices(); }

const char *cuda_unavailable_reason(void) { return NULL; }

CudaCtx *cuda_ctx_create(int device) {
    if (cudaSetDevice(device) != cudaSuccess) breach("cuda_ctx_create", "no such device");
    CudaCtx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) abort();
    ctx->device = device;
    cudaStreamCreateWithFlags(&ctx->stream, 0);
    return ctx;
}

void cuda_ctx_destroy(CudaCtx *ctx) {
    if (!ctx) return;
    cudaStreamDestroy(ctx->stream);
    free(ctx);
}

// A context's work is launched from a thread whose current device is the context's.
static void launch(const CudaCtx *ctx, const char *call) {
    if (ctx->device != current_device) breach(call, "launched from a thread whose current device is another");
}

cudaStream_t cuda_ctx_stream(const CudaCtx *ctx) { return ctx->stream; }

int cuda_ctx_device(const CudaCtx *ctx) { return ctx->device; }

void cuda_ctx_synchronize(CudaCtx *ctx) { (void)ctx; }

void cuda_ctx_reserve(CudaCtx *ctx, size_t bytes) { (void)ctx, (void)bytes; }

double cuda_fetch_double(CudaCtx *ctx, const double *dev_value) {
    launch(ctx, __func__);
    need_device(__func__, dev_value, sizeof(double));
    return *dev_value;
}

void cuda_zero(CudaCtx *ctx, void *p, size_t bytes) {
    launch(ctx, __func__);
    need_device(__func__, p, bytes);
    if (bytes) memset(p, 0, bytes);
}

// ---- bf16 ----------------------------------------------------------------------------------

static cuda_bf16 to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (cuda_bf16)((u >> 16) | 0x40);   // NaN stays NaN
    u += 0x7fffu + ((u >> 16) & 1u);                                               // nearest even
    return (cuda_bf16)(u >> 16);
}

static float from_bf16(cuda_bf16 b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void cuda_f32_to_bf16(CudaCtx *ctx, cuda_bf16 *dst, const float *src, size_t n) {
    launch(ctx, __func__);
    need_device(__func__, dst, n * sizeof *dst);
    need_device(__func__, src, n * sizeof *src);
    for (size_t i = 0; i < n; i++) dst[i] = to_bf16(src[i]);
}

void cuda_bf16_to_f32(CudaCtx *ctx, float *dst, const cuda_bf16 *src, size_t n) {
    launch(ctx, __func__);
    need_device(__func__, dst, n * sizeof *dst);
    need_device(__func__, src, n * sizeof *src);
    for (size_t i = 0; i < n; i++) dst[i] = from_bf16(src[i]);
}

// A host fp32 copy of a device bf16 operand (freed by the caller).
static float *widen(const char *call, const cuda_bf16 *src, size_t n) {
    need_device(call, src, n * sizeof *src);
    float *f = malloc((n ? n : 1) * sizeof *f);
    if (!f) abort();
    for (size_t i = 0; i < n; i++) f[i] = from_bf16(src[i]);
    return f;
}

// ---- the ops: the CPU kernels on device buffers --------------------------------------------

#define F(n) ((size_t)(n) * sizeof(float))

void cuda_embedding_forward(CudaCtx *ctx, float *out, const int32_t *tokens, const float *wte, int N, int C) {
    launch(ctx, __func__);
    need_device(__func__, out, F((size_t)N * C));
    need_device(__func__, tokens, (size_t)N * sizeof *tokens);
    need_device(__func__, wte, F(C));
    embedding_forward(out, tokens, wte, N, C);
}

void cuda_embedding_backward(CudaCtx *ctx, float *dwte, const float *dout, const int32_t *tokens, int N, int C) {
    launch(ctx, __func__);
    need_device(__func__, dwte, F(C));
    need_device(__func__, dout, F((size_t)N * C));
    need_device(__func__, tokens, (size_t)N * sizeof *tokens);
    embedding_backward(dwte, dout, tokens, N, C);
}

void cuda_rmsnorm_forward(CudaCtx *ctx, float *out, float *rstd, const float *inp, const float *weight, int N, int C,
                          float eps) {
    launch(ctx, __func__);
    need_device(__func__, out, F((size_t)N * C));
    need_device(__func__, rstd, F(N));
    need_device(__func__, inp, F((size_t)N * C));
    need_device(__func__, weight, F(C));
    rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
}

void cuda_rmsnorm_backward(CudaCtx *ctx, float *dinp, float *dweight, const float *dout, const float *inp,
                           const float *weight, const float *rstd, int N, int C) {
    launch(ctx, __func__);
    if (dinp) need_device(__func__, dinp, F((size_t)N * C));
    if (dweight) need_device(__func__, dweight, F(C));
    need_device(__func__, dout, F((size_t)N * C));
    need_device(__func__, inp, F((size_t)N * C));
    need_device(__func__, weight, F(C));
    need_device(__func__, rstd, F(N));
    rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
}

static void need_linear(const char *call, const void *a, size_t a_bytes, const void *b, size_t b_bytes,
                        const void *c, size_t c_bytes) {
    need_device(call, a, a_bytes);
    need_device(call, b, b_bytes);
    need_device(call, c, c_bytes);
}

// The CUDA kernels add into their gradients; the CPU kernels for rope, attention and
// swiglu overwrite theirs. These run a CPU kernel into a temporary and add it in.
static float *emu_temp(const char *call, size_t n) {
    float *t = malloc(n * sizeof(float));
    if (!t) {
        fprintf(stderr, "cuda_emu: %s: out of memory\n", call);
        abort();
    }
    return t;
}

static void emu_add_free(float *dst, float *t, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] += t[i];
    free(t);
}

// attention_backward added into dq, dk, dv (see emu_temp).
static void emu_attention_backward_add(const char *call, float *dq, float *dk, float *dv, float *scratch,
                                       const float *dout, const float *q, const float *k, const float *v,
                                       const float *att, int B, int T, int NH, int NKV, int HD) {
    const size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD;
    float *tq = emu_temp(call, nq), *tk = emu_temp(call, nkv), *tv = emu_temp(call, nkv);
    attention_backward(tq, tk, tv, scratch, dout, q, k, v, att, B, T, NH, NKV, HD);
    emu_add_free(dq, tq, nq);
    emu_add_free(dk, tk, nkv);
    emu_add_free(dv, tv, nkv);
}

void cuda_linear_forward(CudaCtx *ctx, float *out, const float *inp, const float *W, int N, int IC, int OC) {
    launch(ctx, __func__);
    need_linear(__func__, out, F((size_t)N * OC), inp, F((size_t)N * IC), W, F((size_t)OC * IC));
    linear_forward(out, inp, W, N, IC, OC);
}

void cuda_linear_backward_input(CudaCtx *ctx, float *dinp, const float *dout, const float *W, int N, int IC, int OC) {
    launch(ctx, __func__);
    need_linear(__func__, dinp, F((size_t)N * IC), dout, F((size_t)N * OC), W, F((size_t)OC * IC));
    linear_backward_input(dinp, dout, W, N, IC, OC, true);
}

void cuda_linear_backward_weight(CudaCtx *ctx, float *dW, const float *dout, const float *inp, int N, int IC,
                                 int OC) {
    launch(ctx, __func__);
    need_linear(__func__, dW, F((size_t)OC * IC), dout, F((size_t)N * OC), inp, F((size_t)N * IC));
    linear_backward_weight(dW, dout, inp, N, IC, OC);
}

void cuda_linear_forward_bf16(CudaCtx *ctx, float *out, const cuda_bf16 *inp, const cuda_bf16 *W, int N, int IC,
                              int OC) {
    launch(ctx, __func__);
    need_device(__func__, out, F((size_t)N * OC));
    float *x = widen(__func__, inp, (size_t)N * IC), *w = widen(__func__, W, (size_t)OC * IC);
    linear_forward(out, x, w, N, IC, OC);
    free(x);
    free(w);
}

void cuda_linear_backward_input_bf16(CudaCtx *ctx, float *dinp, const cuda_bf16 *dout, const cuda_bf16 *W, int N,
                                     int IC, int OC) {
    launch(ctx, __func__);
    need_device(__func__, dinp, F((size_t)N * IC));
    float *d = widen(__func__, dout, (size_t)N * OC), *w = widen(__func__, W, (size_t)OC * IC);
    linear_backward_input(dinp, d, w, N, IC, OC, true);
    free(d);
    free(w);
}

void cuda_linear_backward_weight_bf16(CudaCtx *ctx, float *dW, const cuda_bf16 *dout, const cuda_bf16 *inp, int N,
                                      int IC, int OC) {
    launch(ctx, __func__);
    need_device(__func__, dW, F((size_t)OC * IC));
    float *d = widen(__func__, dout, (size_t)N * OC), *x = widen(__func__, inp, (size_t)N * IC);
    linear_backward_weight(dW, d, x, N, IC, OC);
    free(d);
    free(x);
}

void cuda_rope_tables(CudaCtx *ctx, float *cos_tab, float *sin_tab, int T, int HD, const float *inv_freq) {
    launch(ctx, __func__);
    need_device(__func__, cos_tab, F((size_t)T * HD / 2));
    need_device(__func__, sin_tab, F((size_t)T * HD / 2));
    rope_tables(cos_tab, sin_tab, T, HD, inv_freq);
}

void cuda_rope_forward(CudaCtx *ctx, float *out, const float *x, const float *cos_tab, const float *sin_tab, int B,
                       int T, int H, int HD) {
    launch(ctx, __func__);
    need_linear(__func__, out, F((size_t)B * T * H * HD), x, F((size_t)B * T * H * HD), cos_tab, F((size_t)T * HD / 2));
    need_device(__func__, sin_tab, F((size_t)T * HD / 2));
    rope_forward(out, x, cos_tab, sin_tab, B, T, H, HD);
}

void cuda_rope_backward(CudaCtx *ctx, float *dx, const float *dout, const float *cos_tab, const float *sin_tab, int B,
                        int T, int H, int HD) {
    launch(ctx, __func__);
    need_linear(__func__, dx, F((size_t)B * T * H * HD), dout, F((size_t)B * T * H * HD), cos_tab,
                F((size_t)T * HD / 2));
    need_device(__func__, sin_tab, F((size_t)T * HD / 2));
    const size_t n = (size_t)B * T * H * HD;
    float *t = emu_temp(__func__, n);
    rope_backward(t, dout, cos_tab, sin_tab, B, T, H, HD);
    emu_add_free(dx, t, n);
}

void cuda_attention_forward(CudaCtx *ctx, float *out, float *att, const float *q, const float *k, const float *v,
                            int B, int T, int NH, int NKV, int HD) {
    launch(ctx, __func__);
    need_linear(__func__, out, F((size_t)B * T * NH * HD), att, F((size_t)B * NH * T * T), q, F((size_t)B * T * NH * HD));
    need_linear(__func__, k, F((size_t)B * T * NKV * HD), v, F((size_t)B * T * NKV * HD), out, 0);
    attention_forward(out, att, q, k, v, B, T, NH, NKV, HD);
}

void cuda_attention_backward(CudaCtx *ctx, float *dq, float *dk, float *dv, float *scratch, const float *dout,
                             const float *q, const float *k, const float *v, const float *att, int B, int T, int NH,
                             int NKV, int HD) {
    launch(ctx, __func__);
    const size_t nq = F((size_t)B * T * NH * HD), nkv = F((size_t)B * T * NKV * HD), na = F((size_t)B * NH * T * T);
    need_linear(__func__, dq, nq, dk, nkv, dv, nkv);
    need_linear(__func__, scratch, na, dout, nq, q, nq);
    need_linear(__func__, k, nkv, v, nkv, att, na);
    emu_attention_backward_add(__func__, dq, dk, dv, scratch, dout, q, k, v, att, B, T, NH, NKV, HD);
}

void cuda_attention_forward_bf16(CudaCtx *ctx, float *out, float *att, const cuda_bf16 *q, const cuda_bf16 *k,
                                 const cuda_bf16 *v, int B, int T, int NH, int NKV, int HD) {
    launch(ctx, __func__);
    need_linear(__func__, out, F((size_t)B * T * NH * HD), att, F((size_t)B * NH * T * T), out, 0);
    float *fq = widen(__func__, q, (size_t)B * T * NH * HD), *fk = widen(__func__, k, (size_t)B * T * NKV * HD),
          *fv = widen(__func__, v, (size_t)B * T * NKV * HD);
    attention_forward(out, att, fq, fk, fv, B, T, NH, NKV, HD);
    free(fq);
    free(fk);
    free(fv);
}

void cuda_attention_backward_bf16(CudaCtx *ctx, float *dq, float *dk, float *dv, float *scratch,
                                  const cuda_bf16 *dout, const cuda_bf16 *q, const cuda_bf16 *k, const cuda_bf16 *v,
                                  const float *att, int B, int T, int NH, int NKV, int HD) {
    launch(ctx, __func__);
    const size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD, na = (size_t)B * NH * T * T;
    need_linear(__func__, dq, F(nq), dk, F(nkv), dv, F(nkv));
    need_linear(__func__, scratch, F(na), att, F(na), att, 0);
    float *fd = widen(__func__, dout, nq), *fq = widen(__func__, q, nq), *fk = widen(__func__, k, nkv),
          *fv = widen(__func__, v, nkv);
    emu_attention_backward_add(__func__, dq, dk, dv, scratch, fd, fq, fk, fv, att, B, T, NH, NKV, HD);
    free(fd);
    free(fq);
    free(fk);
    free(fv);
}

void cuda_swiglu_forward(CudaCtx *ctx, float *out, const float *gate, const float *up, int N, int FF) {
    launch(ctx, __func__);
    need_linear(__func__, out, F((size_t)N * FF), gate, F((size_t)N * FF), up, F((size_t)N * FF));
    swiglu_forward(out, gate, up, N, FF);
}

void cuda_swiglu_backward(CudaCtx *ctx, float *dgate, float *dup, const float *dout, const float *gate,
                          const float *up, int N, int FF) {
    launch(ctx, __func__);
    const size_t n = F((size_t)N * FF);
    need_linear(__func__, dgate, n, dup, n, dout, n);
    need_linear(__func__, gate, n, up, n, up, 0);
    float *tg = emu_temp(__func__, (size_t)N * FF), *tu = emu_temp(__func__, (size_t)N * FF);
    swiglu_backward(tg, tu, dout, gate, up, N, FF);
    emu_add_free(dgate, tg, (size_t)N * FF);
    emu_add_free(dup, tu, (size_t)N * FF);
}

void cuda_residual_forward(CudaCtx *ctx, float *out, const float *a, const float *b, size_t n) {
    launch(ctx, __func__);
    need_linear(__func__, out, F(n), a, F(n), b, F(n));
    residual_forward(out, a, b, n);
}

void cuda_crossentropy_forward_backward(CudaCtx *ctx, float *dlogits, double *loss, const float *logits,
                                        const int32_t *targets, int N, int V, float scale) {
    launch(ctx, __func__);
    need_device(__func__, logits, F((size_t)N * V));
    need_device(__func__, targets, (size_t)N * sizeof *targets);
    if (dlogits) need_device(__func__, dlogits, F((size_t)N * V));
    if (loss) need_device(__func__, loss, sizeof *loss);
    const double l = crossentropy_forward_backward(dlogits, logits, targets, N, V, scale);
    if (loss) *loss += l;
}

void cuda_adamw_update(CudaCtx *ctx, float *params, cuda_bf16 *params_bf16, const float *grads, float *m, float *v,
                       size_t n, int t, double lr, double beta1, double beta2, double eps, double weight_decay) {
    launch(ctx, __func__);
    need_linear(__func__, params, F(n), grads, F(n), m, F(n));
    need_device(__func__, v, F(n));
    adamw_update(params, grads, m, v, n, t, lr, beta1, beta2, eps, weight_decay);
    if (!params_bf16) return;
    need_device(__func__, params_bf16, n * sizeof *params_bf16);
    for (size_t i = 0; i < n; i++) params_bf16[i] = to_bf16(params[i]);
}

void cuda_grad_sum_squares(CudaCtx *ctx, double *sumsq, const float *g, size_t n) {
    launch(ctx, __func__);
    need_device(__func__, sumsq, sizeof *sumsq);
    need_device(__func__, g, F(n));
    *sumsq += grad_sum_squares(g, n);
}

void cuda_grad_scale(CudaCtx *ctx, float *g, size_t n, float s) {
    launch(ctx, __func__);
    need_device(__func__, g, F(n));
    grad_scale(g, n, s);
}

void cuda_grad_clip(CudaCtx *ctx, float *g, size_t n, const double *sumsq, float max_norm) {
    launch(ctx, __func__);
    need_device(__func__, g, F(n));
    need_device(__func__, sumsq, sizeof *sumsq);
    grad_scale(g, n, grad_clip_factor(sqrt(*sumsq), max_norm));
}
