// tests/gpu_emu/kernels_emu.c: every function of kernels/cuda/kernels_cuda.h on the emulated GPU
// (cuda_emu.c). Each call checks its buffers now (device memory, the context's device current)
// and queues the CPU kernel of kernels/cpu on its context's stream with its arguments captured:
// it runs when something waits on the stream, and reads the buffers as they are then.
//
// Numbers. The CPU kernels are the reference, so the engine's numbers are a GPU's up to
// summation order, and bf16 is rounded where kernels/cuda rounds (nearest even): GEMM operands
// are bf16 as given. Attention is the exception to "the CPU kernels": it runs flash attention's
// own tiles (flash_emu.c), in fp32 as flash_attention.cu does, so the engine's emulated numbers
// are those of the GPU's algorithm.
//
// The arena. A context keeps kernels/cuda's scratch arena (common.cuh): the kernels that use
// it there (the loss, the embedding's sort, the norms' partial sums) take the
// same bytes here, 256-byte rounded, and the arena is NaN after each of them (the next call
// recycles it). It grows as context.cu grows it (stream synchronized, the old block freed);
// but once cuda_ctx_reserve has been called, a call that needs more than is reserved is a
// breach: a caller reserves so that no step grows it (kernels_cuda.h). Not counted: cub's
// temporary storage of the embedding's sort, which only the GPU knows.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <library_types.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cuda/flash_tile.h"
#include "kernels/cuda/gemm_plans.h"
#include "kernels/cuda/kernels_cuda.h"
#include "tests/gpu_emu/flash_emu.h"
#include "tests/gpu_emu/emu.h"

#define F(n) ((size_t)(n) * sizeof(float))

// ---- contexts ------------------------------------------------------------------------------

struct CudaCtx {
    int device;
    cudaStream_t stream;
    void *arena;           // device scratch (arena_bytes), NaN between uses
    size_t arena_bytes;
    bool reserved;         // cuda_ctx_reserve was called: the arena may no longer grow
    double *fetched;       // pinned: where cuda_fetch_double's copy lands (as context.cu)
    GemmPlans *plans;      // gemm.cu's plan cache, over the same keys (no plan inside: nothing to build)
};

int cuda_device_count(void) { return emu_devices(); }

const char *cuda_unavailable_reason(void) { return NULL; }

// PPTRAIN_EMU_CC=MAJOR.MINOR: the compute capability the emulated GPUs pretend to have (default
// 9.0, an H100), as a build for 8.0 and 9.0 (CMake's default) would see it: code loads on 8.x
// and newer.
const char *cuda_device_unsupported_reason(int device) {
    static _Thread_local char reason[320];   // stage threads attach their GPUs at once
    const char *cc = getenv("PPTRAIN_EMU_CC");
    int major = 9, minor = 0;
    if (cc && sscanf(cc, "%d.%d", &major, &minor) != 2) emu_breach(__func__, "PPTRAIN_EMU_CC is not MAJOR.MINOR");
    const CudaDeviceFacts facts = {device, "emulated GPU", major, minor, major >= 8};
    return cuda_support_problem(reason, sizeof reason, &facts);
}

CudaCtx *cuda_ctx_create(int device) {
    if (cudaSetDevice(device) != cudaSuccess) emu_breach("cuda_ctx_create", "no such device");
    CudaCtx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) emu_breach("cuda_ctx_create", "out of host memory");
    ctx->device = device;
    cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking);
    cudaMallocHost((void **)&ctx->fetched, sizeof *ctx->fetched);
    ctx->plans = gemm_plans_create(1, NULL);
    return ctx;
}

void cuda_ctx_destroy(CudaCtx *ctx) {
    if (!ctx) return;
    cudaStreamSynchronize(ctx->stream);
    if (ctx->arena) cudaFree(ctx->arena);
    cudaFreeHost(ctx->fetched);
    gemm_plans_destroy(ctx->plans);
    cudaStreamDestroy(ctx->stream);
    free(ctx);
}

// A context's work is launched from a thread whose current device is the context's.
static void launch(const CudaCtx *ctx, const char *call) {
    if (ctx->device != emu_current_device()) emu_breach(call, "launched from a thread whose current device is another");
}

cudaStream_t cuda_ctx_stream(const CudaCtx *ctx) { return ctx->stream; }

int cuda_ctx_device(const CudaCtx *ctx) { return ctx->device; }

void cuda_ctx_synchronize(CudaCtx *ctx) { cudaStreamSynchronize(ctx->stream); }

// context.cu's ctx_arena: grows by at least half again, 256-byte rounded.
static void *arena_grow(CudaCtx *ctx, size_t bytes) {
    if (bytes <= ctx->arena_bytes) return ctx->arena;
    size_t want = ctx->arena_bytes + ctx->arena_bytes / 2;
    if (want < bytes) want = bytes;
    want = cuda_arena_round(want);
    if (ctx->arena) {
        cudaStreamSynchronize(ctx->stream);
        cudaFree(ctx->arena);
    }
    cudaMalloc(&ctx->arena, want);
    ctx->arena_bytes = want;
    return ctx->arena;
}

void cuda_ctx_reserve(CudaCtx *ctx, size_t bytes) {
    arena_grow(ctx, bytes);
    ctx->reserved = true;
}

// The arena for one call of `call` that needs `bytes` (see the file's comment).
static void *arena_for(CudaCtx *ctx, const char *call, size_t bytes) {
    if (ctx->reserved && bytes > ctx->arena_bytes) emu_breach(call, "needs more of the context's arena than cuda_ctx_reserve reserved");
    return arena_grow(ctx, bytes);
}

// gemm.cu's gemm_rm_into as it plans (at the call, not when the work runs): the key it builds
// for these arguments (align_c: C's alignment, or the smaller of C's and D's where they differ,
// gemm_pair_alignment), looked up in the context's cache; a miss is the heuristic query a GPU
// makes, counted (emu_count_gemm_plan).
static void plan_gemm(CudaCtx *ctx, bool ta, bool tb, int M, int N, int K, const void *A, int lda, const void *B,
                      int ldb, bool bf16, uint32_t align_c, int ldc) {
    if (M <= 0 || N <= 0 || K <= 0) return;   // gemm_rm: no cuBLASLt GEMM, no plan
    const GemmKey key = {.m = M, .n = N, .k = K, .ta = ta, .tb = tb, .lda = lda, .ldb = ldb, .ldc = ldc,
                         .ab_type = bf16 ? CUDA_R_16BF : CUDA_R_32F, .c_type = CUDA_R_32F,
                         .epilogue = 1 /* CUBLASLT_EPILOGUE_DEFAULT */, .align_a = gemm_ptr_alignment(A),
                         .align_b = gemm_ptr_alignment(B), .align_c = align_c};
    bool is_new = false;
    gemm_plans_find(ctx->plans, &key, &is_new);
    if (is_new) emu_count_gemm_plan();
}

// ---- host reads and zeroing ------------------------------------------------------------------

double cuda_fetch_double(CudaCtx *ctx, const double *dev_value) {
    launch(ctx, __func__);
    emu_need_device(__func__, dev_value, sizeof(double));
    cudaMemcpyAsync(ctx->fetched, dev_value, sizeof *ctx->fetched, cudaMemcpyDeviceToHost, ctx->stream);
    cudaStreamSynchronize(ctx->stream);   // pinned: the copy lands when it runs
    return *ctx->fetched;
}

void cuda_zero(CudaCtx *ctx, void *p, size_t bytes) {
    launch(ctx, __func__);
    if (bytes) cudaMemsetAsync(p, 0, bytes, ctx->stream);
}

// ---- conversions -----------------------------------------------------------------------------

// dst(n) = src rounded to bf16 as the kernels round (nearest even): every bf16 the emulated
// kernels write goes through here or emu_to_bf16.
static void round_into(cuda_bf16 *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = emu_to_bf16(src[i]);
}

typedef struct {
    void *dst;
    const void *src;
    size_t n;
} ConvertArgs;

static void run_to_bf16(void *p) {
    const ConvertArgs *a = p;
    round_into(a->dst, a->src, a->n);
}

static void run_from_bf16(void *p) {
    const ConvertArgs *a = p;
    float *dst = a->dst;
    const cuda_bf16 *src = a->src;
    for (size_t i = 0; i < a->n; i++) dst[i] = emu_from_bf16(src[i]);
}

void cuda_f32_to_bf16(CudaCtx *ctx, cuda_bf16 *dst, const float *src, size_t n) {
    launch(ctx, __func__);
    emu_need_device(__func__, dst, n * sizeof *dst);
    emu_need_device(__func__, src, n * sizeof *src);
    const ConvertArgs a = {dst, src, n};
    emu_enqueue(ctx->stream, run_to_bf16, &a, sizeof a);
}

void cuda_bf16_to_f32(CudaCtx *ctx, float *dst, const cuda_bf16 *src, size_t n) {
    launch(ctx, __func__);
    emu_need_device(__func__, dst, n * sizeof *dst);
    emu_need_device(__func__, src, n * sizeof *src);
    const ConvertArgs a = {dst, src, n};
    emu_enqueue(ctx->stream, run_from_bf16, &a, sizeof a);
}

typedef struct {
    float *dst;
    const float *src;
    int ld, rows, cols;
} PackArgs;

static void run_pack_cols(void *p) {
    const PackArgs *a = p;
    for (int r = 0; r < a->rows; r++) memcpy(a->dst + (size_t)r * a->ld, a->src + (size_t)r * a->cols, F(a->cols));
}

void cuda_pack_cols(CudaCtx *ctx, float *dst, int ld, const float *src, int rows, int cols) {
    launch(ctx, __func__);
    if (rows <= 0 || cols <= 0) return;
    if (cols > ld) emu_breach(__func__, "a block wider than the packed row");
    emu_need_device(__func__, src, F((size_t)rows * cols));
    emu_need_device(__func__, dst, F((size_t)(rows - 1) * ld + cols));
    const PackArgs a = {dst, src, ld, rows, cols};
    emu_enqueue(ctx->stream, run_pack_cols, &a, sizeof a);
}

// A host fp32 copy of a device bf16 operand (freed by the caller), made when the work runs.
static float *widen(const cuda_bf16 *src, size_t n) {
    float *f = malloc((n ? n : 1) * sizeof *f);
    if (!f) emu_breach("widen", "out of host memory");
    for (size_t i = 0; i < n; i++) f[i] = emu_from_bf16(src[i]);
    return f;
}

// The CUDA kernels add into their gradients; the CPU kernels for rope, attention and
// swiglu overwrite theirs. These run a CPU kernel into a temporary and add it in.
static float *temp(size_t n) {
    float *t = malloc((n ? n : 1) * sizeof(float));
    if (!t) emu_breach("a kernel's temporary", "out of host memory");
    return t;
}

// A written output (not read: no zeroing comes first), from the temporary t, which is freed.
static void write_free(float *dst, float *t, size_t n) {
    memcpy(dst, t, n * sizeof *t);
    free(t);
}

// ---- embedding, rmsnorm, residual, swiglu --------------------------------------------------

typedef struct {
    float *out, *dwte;
    const float *dout, *wte;
    const int32_t *tokens;
    int N, C;
    void *arena;
    size_t arena_bytes;
} EmbeddingArgs;

static void run_embedding_forward(void *p) {
    const EmbeddingArgs *a = p;
    embedding_forward(a->out, a->tokens, a->wte, a->N, a->C);
}

static void run_embedding_backward(void *p) {
    const EmbeddingArgs *a = p;
    embedding_backward(a->dwte, a->dout, a->tokens, a->N, a->C);
    emu_poison(a->arena, a->arena_bytes);
}

void cuda_embedding_forward(CudaCtx *ctx, float *out, const int32_t *tokens, const float *wte, int N, int C) {
    launch(ctx, __func__);
    emu_need_device(__func__, out, F((size_t)N * C));
    emu_need_device(__func__, tokens, (size_t)N * sizeof *tokens);
    emu_need_device(__func__, wte, F(C));
    const EmbeddingArgs a = {.out = out, .wte = wte, .tokens = tokens, .N = N, .C = C};
    emu_enqueue(ctx->stream, run_embedding_forward, &a, sizeof a);
}

void cuda_embedding_backward(CudaCtx *ctx, float *dwte, const float *dout, const int32_t *tokens, int N, int C) {
    launch(ctx, __func__);
    emu_need_device(__func__, dwte, F(C));
    emu_need_device(__func__, dout, F((size_t)N * C));
    emu_need_device(__func__, tokens, (size_t)N * sizeof *tokens);
    if (N <= 0 || C <= 0) return;
    const size_t bytes = 3 * cuda_arena_round((size_t)N * sizeof(int32_t));   // rows_in, keys_out, rows_out
    EmbeddingArgs a = {.dwte = dwte, .dout = dout, .tokens = tokens, .N = N, .C = C, .arena_bytes = bytes};
    a.arena = arena_for(ctx, __func__, bytes);
    emu_enqueue(ctx->stream, run_embedding_backward, &a, sizeof a);
}

// A kernel's fp32 result, rounded into its bf16 output as the kernels' from_f32 rounds (the
// *_bf16 forms whose output is a GEMM operand): n values of t, then t is freed.
static void round_free(cuda_bf16 *dst, float *t, size_t n) {
    round_into(dst, t, n);
    free(t);
}

typedef struct {
    float *out, *rstd, *dinp, *dweight;
    cuda_bf16 *out16;            // the bf16 forms' output (out NULL); the backward's bf16 copy
    const float *a;              // the backward's resid
    const float *inp, *weight, *dout, *rstd_in;
    const cuda_bf16 *dout16;     // the backward's bf16 forms: dout in bf16 (dout NULL), widened
    int N, C;
    float eps;
    void *arena;
    size_t arena_bytes;
} RmsnormArgs;

// The backward's dout as fp32: a->dout, or a->dout16 widened into *owned (free it after).
static const float *rmsnorm_dout(const RmsnormArgs *a, float **owned) {
    *owned = a->dout16 ? widen(a->dout16, (size_t)a->N * a->C) : NULL;
    return a->dout16 ? *owned : a->dout;
}

static void run_rmsnorm_forward(void *p) {
    const RmsnormArgs *a = p;
    const size_t n = (size_t)a->N * a->C;
    float *out = a->out16 ? temp(n) : a->out;
    rmsnorm_forward(out, a->rstd, a->inp, a->weight, a->N, a->C, a->eps);
    if (a->out16) round_free(a->out16, out, n);
}

// dinp (if any) = resid (a; NULL: zero; a == dinp: dinp as it is), then the accumulating
// backward, then the bf16 copy: the fused kernel's numbers (the sum's order is the same: resid
// + the norm's term); and with dweight the weight gradient, whose sums the GPU takes in another
// fixed order of doubles (kernels_cuda.h).
static void run_rmsnorm_backward(void *p) {
    const RmsnormArgs *a = p;
    const size_t n = (size_t)a->N * a->C;
    if (a->dinp && !a->a) memset(a->dinp, 0, F(n));
    else if (a->dinp && a->a != a->dinp) memcpy(a->dinp, a->a, F(n));
    float *owned;
    rmsnorm_backward(a->dinp, a->dweight, rmsnorm_dout(a, &owned), a->inp, a->weight, a->rstd_in, a->N, a->C);
    free(owned);
    if (a->out16) round_into(a->out16, a->dinp, n);
    if (a->arena) emu_poison(a->arena, a->arena_bytes);
}

static void rmsnorm_forward_as(CudaCtx *ctx, const char *call, RmsnormArgs a) {
    launch(ctx, call);
    const size_t NC = (size_t)a.N * a.C;
    if (a.out16) emu_need_device(call, a.out16, NC * sizeof(cuda_bf16));
    else emu_need_device(call, a.out, F(NC));
    emu_need_device(call, a.rstd, F(a.N));
    emu_need_device(call, a.weight, F(a.C));
    emu_need_device(call, a.inp, F(NC));
    emu_enqueue(ctx->stream, run_rmsnorm_forward, &a, sizeof a);
}

void cuda_rmsnorm_forward(CudaCtx *ctx, float *out, float *rstd, const float *inp, const float *weight, int N, int C,
                          float eps) {
    rmsnorm_forward_as(ctx, __func__,
                       (RmsnormArgs){.out = out, .rstd = rstd, .inp = inp, .weight = weight, .N = N, .C = C, .eps = eps});
}

void cuda_rmsnorm_forward_bf16(CudaCtx *ctx, cuda_bf16 *out, float *rstd, const float *inp, const float *weight, int N,
                               int C, float eps) {
    rmsnorm_forward_as(ctx, __func__,
                       (RmsnormArgs){.out16 = out, .rstd = rstd, .inp = inp, .weight = weight, .N = N, .C = C, .eps = eps});
}

// The backward's dout (fp32, or bf16 in the _bf16 forms) must be the device's.
static void need_rmsnorm_dout(const char *call, const RmsnormArgs *a) {
    const size_t NC = (size_t)a->N * a->C;
    if (a->dout16) emu_need_device(call, a->dout16, NC * sizeof(cuda_bf16));
    else emu_need_device(call, a->dout, F(NC));
}

// Every backward form: cuda_rmsnorm_backward (dinp accumulates: a = dinp; or dinp NULL) and
// the residual forms (dinp written from a, its bf16 copy out16).
static void rmsnorm_backward_as(CudaCtx *ctx, const char *call, RmsnormArgs a) {
    launch(ctx, call);
    const size_t NC = (size_t)a.N * a.C;
    if (a.dinp) emu_need_device(call, a.dinp, F(NC));
    if (a.out16) emu_need_device(call, a.out16, NC * sizeof(cuda_bf16));
    if (a.a) emu_need_device(call, a.a, F(NC));
    if (a.dweight) emu_need_device(call, a.dweight, F(a.C));
    need_rmsnorm_dout(call, &a);
    emu_need_device(call, a.inp, F(NC));
    if (a.weight) emu_need_device(call, a.weight, F(a.C));
    emu_need_device(call, a.rstd_in, F(a.N));
    if (a.N <= 0 || a.C <= 0) return;
    if (a.dweight) {
        a.arena_bytes = cuda_rmsnorm_arena_bytes(a.N, a.C);
        a.arena = arena_for(ctx, call, a.arena_bytes);
    }
    emu_enqueue(ctx->stream, run_rmsnorm_backward, &a, sizeof a);
}

void cuda_rmsnorm_backward(CudaCtx *ctx, float *dinp, float *dweight, const float *dout, const float *inp,
                           const float *weight, const float *rstd, int N, int C) {
    rmsnorm_backward_as(ctx, __func__,
                        (RmsnormArgs){.dinp = dinp, .dweight = dweight, .a = dinp, .dout = dout, .inp = inp,
                                      .weight = weight, .rstd_in = rstd, .N = N, .C = C});
}

void cuda_residual_rmsnorm_backward(CudaCtx *ctx, float *dinp, cuda_bf16 *dinp16, float *dweight, const float *resid,
                                    const float *dout, const float *inp, const float *weight, const float *rstd, int N,
                                    int C) {
    rmsnorm_backward_as(ctx, __func__,
                        (RmsnormArgs){.dinp = dinp, .out16 = dinp16, .dweight = dweight, .a = resid, .dout = dout,
                                      .inp = inp, .weight = weight, .rstd_in = rstd, .N = N, .C = C});
}

void cuda_residual_rmsnorm_backward_bf16(CudaCtx *ctx, float *dinp, cuda_bf16 *dinp16, float *dweight,
                                         const float *resid, const cuda_bf16 *dout, const float *inp,
                                         const float *weight, const float *rstd, int N, int C) {
    rmsnorm_backward_as(ctx, __func__,
                        (RmsnormArgs){.dinp = dinp, .out16 = dinp16, .dweight = dweight, .a = resid, .dout16 = dout,
                                      .inp = inp, .weight = weight, .rstd_in = rstd, .N = N, .C = C});
}

typedef struct {
    float *out, *dgate, *dup;
    cuda_bf16 *out16;            // the bf16 forms: swiglu forward's out, backward's packed dgate|dup; the sum's copy
    int ld;                      // the packed backward's row stride
    const float *a, *b, *dout;
    const cuda_bf16 *a16, *b16;  // swiglu's bf16 forms: gate and up as the GEMM stored them (a, b NULL)
    const cuda_bf16 *dout16;     // swiglu backward's bf16 form: dout as its GEMM stored it (dout NULL)
    size_t n;
    int N, FF;
} EltwiseArgs;

// SwiGLU's gate and up as fp32: the bf16 forms' widened into *tg, *tu (freed by the caller),
// else the fp32 buffers as they are (*tg, *tu NULL).
static void swiglu_inputs(const EltwiseArgs *e, const float **gate, const float **up, float **tg, float **tu) {
    const size_t n = (size_t)e->N * e->FF;
    *tg = e->a16 ? widen(e->a16, n) : NULL;
    *tu = e->b16 ? widen(e->b16, n) : NULL;
    *gate = e->a16 ? *tg : e->a;
    *up = e->b16 ? *tu : e->b;
}


static void run_swiglu_forward(void *p) {
    const EltwiseArgs *e = p;
    const size_t n = (size_t)e->N * e->FF;
    float *out = e->out16 ? temp(n) : e->out, *tg, *tu;
    const float *gate, *up;
    swiglu_inputs(e, &gate, &up, &tg, &tu);
    swiglu_forward(out, gate, up, e->N, e->FF);
    if (e->out16) round_free(e->out16, out, n);
    free(tg);
    free(tu);
}

static void run_swiglu_backward(void *p) {
    const EltwiseArgs *e = p;
    const size_t n = (size_t)e->N * e->FF;
    float *tg = temp(n), *tu = temp(n), *wg, *wu;
    const float *gate, *up;
    swiglu_inputs(e, &gate, &up, &wg, &wu);
    float *wd = e->dout16 ? widen(e->dout16, n) : NULL;
    swiglu_backward(tg, tu, e->dout16 ? wd : e->dout, gate, up, e->N, e->FF);
    free(wg);
    free(wu);
    free(wd);
    if (!e->out16) {
        write_free(e->dgate, tg, n);
        write_free(e->dup, tu, n);
        return;
    }
    for (size_t r = 0; r < (size_t)e->N; r++)   // the bf16 form: written side by side, rounded
        for (size_t j = 0; j < (size_t)e->FF; j++) {
            e->out16[r * e->ld + j] = emu_to_bf16(tg[r * e->FF + j]);
            e->out16[r * e->ld + e->FF + j] = emu_to_bf16(tu[r * e->FF + j]);
        }
    free(tg);
    free(tu);
}


static void swiglu_forward_as(CudaCtx *ctx, const char *call, EltwiseArgs e) {
    launch(ctx, call);
    const size_t n = (size_t)e.N * e.FF;
    if (e.out16) emu_need_device(call, e.out16, n * sizeof(cuda_bf16));
    else emu_need_device(call, e.out, F(n));
    if (e.a16) emu_need_device(call, e.a16, n * sizeof(cuda_bf16));
    else emu_need_device(call, e.a, F(n));
    if (e.b16) emu_need_device(call, e.b16, n * sizeof(cuda_bf16));
    else emu_need_device(call, e.b, F(n));
    emu_enqueue(ctx->stream, run_swiglu_forward, &e, sizeof e);
}

void cuda_swiglu_forward(CudaCtx *ctx, float *out, const float *gate, const float *up, int N, int FF) {
    swiglu_forward_as(ctx, __func__, (EltwiseArgs){.out = out, .a = gate, .b = up, .N = N, .FF = FF});
}

void cuda_swiglu_forward_bf16(CudaCtx *ctx, cuda_bf16 *out, const cuda_bf16 *gate, const cuda_bf16 *up, int N,
                              int FF) {
    swiglu_forward_as(ctx, __func__, (EltwiseArgs){.out16 = out, .a16 = gate, .b16 = up, .N = N, .FF = FF});
}

void cuda_swiglu_backward(CudaCtx *ctx, float *dgate, float *dup, const float *dout, const float *gate,
                          const float *up, int N, int FF) {
    launch(ctx, __func__);
    const size_t n = F((size_t)N * FF);
    emu_need_device(__func__, dgate, n);
    emu_need_device(__func__, dup, n);
    emu_need_device(__func__, dout, n);
    emu_need_device(__func__, gate, n);
    emu_need_device(__func__, up, n);
    const EltwiseArgs e = {.dgate = dgate, .dup = dup, .dout = dout, .a = gate, .b = up, .N = N, .FF = FF};
    emu_enqueue(ctx->stream, run_swiglu_backward, &e, sizeof e);
}

void cuda_swiglu_backward_bf16(CudaCtx *ctx, cuda_bf16 *dgate_up, int ld, const cuda_bf16 *dout, const cuda_bf16 *gate,
                               const cuda_bf16 *up, int N, int FF) {
    launch(ctx, __func__);
    const size_t n = (size_t)N * FF;
    if (ld < 2 * FF) emu_breach(__func__, "a row stride narrower than gate and up side by side");
    if (N > 0) emu_need_device(__func__, dgate_up, ((size_t)(N - 1) * ld + 2 * (size_t)FF) * sizeof(cuda_bf16));
    emu_need_device(__func__, dout, n * sizeof(cuda_bf16));
    emu_need_device(__func__, gate, n * sizeof(cuda_bf16));
    emu_need_device(__func__, up, n * sizeof(cuda_bf16));
    const EltwiseArgs e = {.out16 = dgate_up, .ld = ld, .dout16 = dout, .a16 = gate, .b16 = up, .N = N, .FF = FF};
    emu_enqueue(ctx->stream, run_swiglu_backward, &e, sizeof e);
}

// ---- linear: fp32, or bf16 operands with fp32 accumulation -----------------------------------

typedef enum { LIN_FORWARD, LIN_BACKWARD_INPUT, LIN_BACKWARD_WEIGHT } LinearKind;

typedef struct {
    LinearKind kind;
    bool bf16;          // x and w are bf16 (widened when the work runs)
    float *y;           // forward: out(N, OC); backward input: dinp(N, IC); backward weight: dW(OC, IC)
    const void *x, *w;  // forward: inp, W; backward input: dout, W; backward weight: dout, inp
    size_t nx, nw;      // their element counts
    int N, IC, OC;
    cuda_bf16 *y16;     // backward input's _to_bf16 form: dinp written, rounded (y NULL)
    const float *resid; // forward's _residual form: out = resid + the product (resid may be out)
} LinearArgs;

static void run_linear(void *p) {
    const LinearArgs *a = p;
    float *x = a->bf16 ? widen(a->x, a->nx) : NULL, *w = a->bf16 ? widen(a->w, a->nw) : NULL;
    const float *xs = a->bf16 ? x : a->x, *ws = a->bf16 ? w : a->w;
    switch (a->kind) {
    case LIN_FORWARD:
        if (a->resid) {   // the product, then the epilogue's add: one rounding, as written and added
            const size_t no = (size_t)a->N * a->OC;
            float *t = temp(no);
            linear_forward(t, xs, ws, a->N, a->IC, a->OC);
            for (size_t i = 0; i < no; i++) a->y[i] = t[i] + a->resid[i];
            free(t);
        } else {
            linear_forward(a->y, xs, ws, a->N, a->IC, a->OC);
        }
        break;
    case LIN_BACKWARD_INPUT:
        if (a->y16) {
            float *t = temp((size_t)a->N * a->IC);
            linear_backward_input(t, xs, ws, a->N, a->IC, a->OC, false);
            round_free(a->y16, t, (size_t)a->N * a->IC);
        } else {
            linear_backward_input(a->y, xs, ws, a->N, a->IC, a->OC, false);   // written, as beta 0
        }
        break;
    case LIN_BACKWARD_WEIGHT: linear_backward_weight(a->y, xs, ws, a->N, a->IC, a->OC); break;
    }
    free(x);
    free(w);
}

static void linear_into(CudaCtx *ctx, const char *call, LinearKind kind, bool bf16, float *y, const float *resid,
                        const void *x, const void *w, int N, int IC, int OC) {
    launch(ctx, call);
    const size_t NI = (size_t)N * IC, NO = (size_t)N * OC, OI = (size_t)OC * IC, esz = bf16 ? 2 : 4;
    const size_t ny = kind == LIN_FORWARD ? NO : kind == LIN_BACKWARD_INPUT ? NI : OI;
    const size_t nx = kind == LIN_FORWARD ? NI : NO, nw = kind == LIN_BACKWARD_WEIGHT ? NI : OI;
    emu_need_device(call, y, F(ny));
    emu_need_device(call, x, nx * esz);
    emu_need_device(call, w, nw * esz);
    // linear.cu's gemm_rm calls (see there)
    if (resid) emu_need_device(call, resid, F(ny));
    const uint32_t align_c = resid ? gemm_pair_alignment(resid, y) : gemm_ptr_alignment(y);
    if (kind == LIN_FORWARD) plan_gemm(ctx, false, true, N, OC, IC, x, IC, w, IC, bf16, align_c, OC);
    if (kind == LIN_BACKWARD_INPUT) plan_gemm(ctx, false, false, N, IC, OC, x, OC, w, IC, bf16, align_c, IC);
    if (kind == LIN_BACKWARD_WEIGHT) plan_gemm(ctx, true, false, OC, IC, N, x, OC, w, IC, bf16, align_c, IC);
    const LinearArgs a = {kind, bf16, y, x, w, nx, nw, N, IC, OC, NULL, resid};
    emu_enqueue(ctx->stream, run_linear, &a, sizeof a);
}

static void linear(CudaCtx *ctx, const char *call, LinearKind kind, bool bf16, float *y, const void *x, const void *w,
                   int N, int IC, int OC) {
    linear_into(ctx, call, kind, bf16, y, NULL, x, w, N, IC, OC);
}

typedef struct {
    float *out;
    const void *inp, *W;
    size_t out_stride, W_stride;
    int batch, N, IC, OC;
    bool bf16;
    cuda_bf16 *out16;   // the _to_bf16 form's outputs (out NULL): each fp32 result rounded
} SharedArgs;

static void run_linear_shared(void *p) {
    const SharedArgs *a = p;
    const size_t esz = a->bf16 ? 2 : 4, nw = (size_t)a->OC * a->IC;
    float *x = a->bf16 ? widen(a->inp, (size_t)a->N * a->IC) : NULL;
    for (int b = 0; b < a->batch; b++) {
        const void *Wb = (const char *)a->W + b * a->W_stride * esz;
        float *w = a->bf16 ? widen(Wb, nw) : NULL;
        const size_t no = (size_t)a->N * a->OC;
        float *y = a->out16 ? temp(no) : a->out + b * a->out_stride;
        linear_forward(y, a->bf16 ? x : a->inp, a->bf16 ? w : Wb, a->N, a->IC, a->OC);
        if (a->out16) round_free(a->out16 + b * a->out_stride, y, no);
        free(w);
    }
    free(x);
}

// linear.cu's one strided batched GEMM (cuBLAS, no cuBLASLt plan).
static void linear_shared(CudaCtx *ctx, const char *call, SharedArgs a) {
    launch(ctx, call);
    if (a.batch <= 0 || a.N <= 0 || a.OC <= 0) return;
    const size_t esz = a.bf16 ? 2 : 4, no = (size_t)a.N * a.OC;
    if (a.batch > 1 && a.out_stride < no) emu_breach(call, "the batch's outputs overlap");
    if (a.out16) emu_need_device(call, a.out16, ((a.batch - 1) * a.out_stride + no) * sizeof(cuda_bf16));
    else emu_need_device(call, a.out, F((a.batch - 1) * a.out_stride + no));
    emu_need_device(call, a.inp, (size_t)a.N * a.IC * esz);
    emu_need_device(call, a.W, ((a.batch - 1) * a.W_stride + (size_t)a.OC * a.IC) * esz);
    emu_enqueue(ctx->stream, run_linear_shared, &a, sizeof a);
}

void cuda_linear_forward_shared(CudaCtx *ctx, float *out, size_t out_stride, const float *inp, const float *W,
                                size_t W_stride, int batch, int N, int IC, int OC) {
    linear_shared(ctx, __func__, (SharedArgs){out, inp, W, out_stride, W_stride, batch, N, IC, OC, false, NULL});
}

void cuda_linear_forward_shared_bf16(CudaCtx *ctx, float *out, size_t out_stride, const cuda_bf16 *inp,
                                     const cuda_bf16 *W, size_t W_stride, int batch, int N, int IC, int OC) {
    linear_shared(ctx, __func__, (SharedArgs){out, inp, W, out_stride, W_stride, batch, N, IC, OC, true, NULL});
}

void cuda_linear_forward_shared_to_bf16(CudaCtx *ctx, cuda_bf16 *out, size_t out_stride, const cuda_bf16 *inp,
                                        const cuda_bf16 *W, size_t W_stride, int batch, int N, int IC, int OC) {
    linear_shared(ctx, __func__, (SharedArgs){NULL, inp, W, out_stride, W_stride, batch, N, IC, OC, true, out});
}

void cuda_linear_forward(CudaCtx *ctx, float *out, const float *inp, const float *W, int N, int IC, int OC) {
    linear(ctx, __func__, LIN_FORWARD, false, out, inp, W, N, IC, OC);
}

void cuda_linear_forward_residual(CudaCtx *ctx, float *out, const float *resid, const float *inp, const float *W, int N,
                                  int IC, int OC) {
    linear_into(ctx, __func__, LIN_FORWARD, false, out, resid, inp, W, N, IC, OC);
}

void cuda_linear_backward_input(CudaCtx *ctx, float *dinp, const float *dout, const float *W, int N, int IC, int OC) {
    linear(ctx, __func__, LIN_BACKWARD_INPUT, false, dinp, dout, W, N, IC, OC);
}

void cuda_linear_backward_weight(CudaCtx *ctx, float *dW, const float *dout, const float *inp, int N, int IC,
                                 int OC) {
    linear(ctx, __func__, LIN_BACKWARD_WEIGHT, false, dW, dout, inp, N, IC, OC);
}

void cuda_linear_forward_bf16(CudaCtx *ctx, float *out, const cuda_bf16 *inp, const cuda_bf16 *W, int N, int IC,
                              int OC) {
    linear(ctx, __func__, LIN_FORWARD, true, out, inp, W, N, IC, OC);
}

void cuda_linear_forward_residual_bf16(CudaCtx *ctx, float *out, const float *resid, const cuda_bf16 *inp,
                                       const cuda_bf16 *W, int N, int IC, int OC) {
    linear_into(ctx, __func__, LIN_FORWARD, true, out, resid, inp, W, N, IC, OC);
}

void cuda_linear_backward_input_bf16(CudaCtx *ctx, float *dinp, const cuda_bf16 *dout, const cuda_bf16 *W, int N,
                                     int IC, int OC) {
    linear(ctx, __func__, LIN_BACKWARD_INPUT, true, dinp, dout, W, N, IC, OC);
}

void cuda_linear_backward_weight_bf16(CudaCtx *ctx, float *dW, const cuda_bf16 *dout, const cuda_bf16 *inp, int N,
                                      int IC, int OC) {
    linear(ctx, __func__, LIN_BACKWARD_WEIGHT, true, dW, dout, inp, N, IC, OC);
}

// linear.cu's strided cuBLAS GEMM storing bf16 (a batch of one: no cuBLASLt plan).
void cuda_linear_backward_input_to_bf16(CudaCtx *ctx, cuda_bf16 *dinp, const cuda_bf16 *dout, const cuda_bf16 *W, int N,
                                        int IC, int OC) {
    launch(ctx, __func__);
    if (N <= 0 || IC <= 0) return;
    const size_t NO = (size_t)N * OC, OI = (size_t)OC * IC;
    emu_need_device(__func__, dinp, (size_t)N * IC * sizeof(cuda_bf16));
    emu_need_device(__func__, dout, NO * sizeof(cuda_bf16));
    emu_need_device(__func__, W, OI * sizeof(cuda_bf16));
    const LinearArgs a = {.kind = LIN_BACKWARD_INPUT, .bf16 = true, .x = dout, .w = W, .nx = NO, .nw = OI, .N = N,
                          .IC = IC, .OC = OC, .y16 = dinp};
    emu_enqueue(ctx->stream, run_linear, &a, sizeof a);
}

// ---- rope ------------------------------------------------------------------------------------

typedef struct {
    float *out, *sin_out;   // rope_tables: cos_tab, sin_tab
    cuda_bf16 *out16;       // rope_forward's bf16 form: x, in place; rope_backward's: the packed operand, stride ld
    int ld;
    const float *x, *cos_tab, *sin_tab;
    int B, T, H, HD;
    float inv_freq[512];   // rope_tables: the host's values, by value as rope.cu (HD <= 1024)
} RopeArgs;

static void run_rope_tables(void *p) {
    RopeArgs *a = p;
    rope_tables(a->out, a->sin_out, a->T, a->HD, a->inv_freq);
}

static void run_rope_forward(void *p) {
    const RopeArgs *a = p;
    rope_forward(a->out, a->x, a->cos_tab, a->sin_tab, a->B, a->T, a->H, a->HD);
}

static void run_rope_forward_bf16(void *p) {
    const RopeArgs *a = p;
    const size_t n = (size_t)a->B * a->T * a->H * a->HD;
    if (n == 0) return;
    float *x = widen(a->out16, n), *t = temp(n);
    rope_forward(t, x, a->cos_tab, a->sin_tab, a->B, a->T, a->H, a->HD);
    free(x);
    round_free(a->out16, t, n);
}

static void run_rope_backward(void *p) {
    const RopeArgs *a = p;
    const size_t n = (size_t)a->B * a->T * a->H * a->HD;
    float *t = temp(n);
    rope_backward(t, a->x, a->cos_tab, a->sin_tab, a->B, a->T, a->H, a->HD);
    if (!a->out16) {
        write_free(a->out, t, n);
        return;
    }
    const size_t rows = (size_t)a->B * a->T, width = (size_t)a->H * a->HD;   // the bf16 form: written, packed
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < width; j++) a->out16[r * a->ld + j] = emu_to_bf16(t[r * width + j]);
    free(t);
}

void cuda_rope_tables(CudaCtx *ctx, float *cos_tab, float *sin_tab, int T, int HD, const float *inv_freq) {
    launch(ctx, __func__);
    emu_need_device(__func__, cos_tab, F((size_t)T * HD / 2));
    emu_need_device(__func__, sin_tab, F((size_t)T * HD / 2));
    if (HD > 1024 || HD % 2) emu_breach(__func__, "head_dim odd or above 1024");
    RopeArgs a = {.out = cos_tab, .sin_out = sin_tab, .T = T, .HD = HD};
    memcpy(a.inv_freq, inv_freq, F(HD / 2));
    emu_enqueue(ctx->stream, run_rope_tables, &a, sizeof a);
}

static void rope(CudaCtx *ctx, const char *call, void (*run)(void *), float *out, const float *x, const float *cos_tab,
                 const float *sin_tab, int B, int T, int H, int HD) {
    launch(ctx, call);
    emu_need_device(call, out, F((size_t)B * T * H * HD));
    emu_need_device(call, x, F((size_t)B * T * H * HD));
    emu_need_device(call, cos_tab, F((size_t)T * HD / 2));
    emu_need_device(call, sin_tab, F((size_t)T * HD / 2));
    const RopeArgs a = {.out = out, .x = x, .cos_tab = cos_tab, .sin_tab = sin_tab, .B = B, .T = T, .H = H, .HD = HD};
    emu_enqueue(ctx->stream, run, &a, sizeof a);
}

void cuda_rope_forward(CudaCtx *ctx, float *out, const float *x, const float *cos_tab, const float *sin_tab, int B,
                       int T, int H, int HD) {
    rope(ctx, __func__, run_rope_forward, out, x, cos_tab, sin_tab, B, T, H, HD);
}

void cuda_rope_forward_bf16(CudaCtx *ctx, cuda_bf16 *x, const float *cos_tab, const float *sin_tab, int B, int T, int H,
                            int HD) {
    launch(ctx, __func__);
    emu_need_device(__func__, x, (size_t)B * T * H * HD * sizeof(cuda_bf16));
    emu_need_device(__func__, cos_tab, F((size_t)T * HD / 2));
    emu_need_device(__func__, sin_tab, F((size_t)T * HD / 2));
    const RopeArgs a = {.out16 = x, .cos_tab = cos_tab, .sin_tab = sin_tab, .B = B, .T = T, .H = H, .HD = HD};
    emu_enqueue(ctx->stream, run_rope_forward_bf16, &a, sizeof a);
}

void cuda_rope_backward(CudaCtx *ctx, float *dx, const float *dout, const float *cos_tab, const float *sin_tab, int B,
                        int T, int H, int HD) {
    rope(ctx, __func__, run_rope_backward, dx, dout, cos_tab, sin_tab, B, T, H, HD);
}

void cuda_rope_backward_bf16(CudaCtx *ctx, cuda_bf16 *dx, int ld, const float *dout, const float *cos_tab,
                             const float *sin_tab, int B, int T, int H, int HD) {
    launch(ctx, __func__);
    const size_t rows = (size_t)B * T;
    if (ld < H * HD) emu_breach(__func__, "a row stride narrower than the heads it packs");
    if (rows) emu_need_device(__func__, dx, ((rows - 1) * ld + (size_t)H * HD) * sizeof(cuda_bf16));
    emu_need_device(__func__, dout, F(rows * H * HD));
    emu_need_device(__func__, cos_tab, F((size_t)T * HD / 2));
    emu_need_device(__func__, sin_tab, F((size_t)T * HD / 2));
    const RopeArgs a = {.out16 = dx, .ld = ld, .x = dout, .cos_tab = cos_tab, .sin_tab = sin_tab, .B = B, .T = T,
                        .H = H, .HD = HD};
    emu_enqueue(ctx->stream, run_rope_backward, &a, sizeof a);
}

// ---- attention -------------------------------------------------------------------------------
// Flash attention runs as on the GPU: flash_attention.cu's kernels, tile by tile, through the
// same tile functions (flash_emu.c), not the CPU's two-pass reference; the bf16 forms as the
// tensor-core kernels round (flash_emu_*_bf16).

// The bf16 forms take q, k and v in bf16 and keep out in bf16 (the GPU's tensor-core kernels
// round it as they write it, and D = rowsum(dout * out) reads the rounded values): the emulated
// tiles read q, k, v widened (their rounding on load then changes nothing) and compute fp32,
// the result is rounded here, and the backward reads it widened.
typedef struct {
    float *out, *lse;                 // forward (out NULL in the bf16 form)
    cuda_bf16 *out16;                 // forward, the bf16 form
    float *dq, *dk, *dv, *dsum;       // backward
    const void *q, *k, *v, *dout;     // fp32, or bf16 in the bf16 forms
    const float *out_in, *lse_in;
    const cuda_bf16 *out16_in;        // backward, the bf16 form (out_in NULL)
    cuda_bf16 *dv16;                  // backward, the bf16 form: dv written into the packed operand (dv NULL)
    int dv_ld;                        // ... its row stride
    int B, T, NH, NKV, HD;
    bool bf16;
} AttentionArgs;

// q, k and v as the emulated tiles read them: fp32 as given, or bf16 widened into copies that
// free_qkv releases.
typedef struct {
    const float *q, *k, *v;
    float *owned[3];
} QkvF32;

static QkvF32 qkv_f32(const void *q, const void *k, const void *v, size_t nq, size_t nkv, bool bf16) {
    if (!bf16) return (QkvF32){q, k, v, {NULL, NULL, NULL}};
    float *wq = widen(q, nq), *wk = widen(k, nkv), *wv = widen(v, nkv);
    return (QkvF32){wq, wk, wv, {wq, wk, wv}};
}

static void free_qkv(QkvF32 *x) {
    for (int i = 0; i < 3; i++) free(x->owned[i]);
}

static QkvF32 attention_qkv(const AttentionArgs *a) {
    const size_t rows = (size_t)a->B * a->T;
    return qkv_f32(a->q, a->k, a->v, rows * a->NH * a->HD, rows * a->NKV * a->HD, a->bf16);
}

static void run_attention_forward(void *p) {
    const AttentionArgs *a = p;
    const size_t nq = (size_t)a->B * a->T * a->NH * a->HD;
    QkvF32 x = attention_qkv(a);
    float *out = a->bf16 ? temp(nq) : a->out;
    (a->bf16 ? flash_emu_forward_bf16 : flash_emu_forward)(out, a->lse, x.q, x.k, x.v, a->B, a->T, a->NH, a->NKV,
                                                           a->HD);
    if (a->bf16) round_free(a->out16, out, nq);
    free_qkv(&x);
}

static void run_attention_backward(void *p) {
    const AttentionArgs *a = p;
    const size_t nq = (size_t)a->B * a->T * a->NH * a->HD;
    const size_t rows = (size_t)a->B * a->T, width = (size_t)a->NKV * a->HD;
    QkvF32 x = attention_qkv(a);
    float *out16 = a->bf16 ? widen(a->out16_in, nq) : NULL, *dout16 = a->bf16 ? widen(a->dout, nq) : NULL;
    const float *out = a->bf16 ? out16 : a->out_in, *dout = a->bf16 ? dout16 : (const float *)a->dout;
    float *dv = a->dv16 ? calloc(rows * width, sizeof(float)) : a->dv;   // the bf16 form: 0 + dv, rounded below
    if (!dv) emu_breach("attention backward", "out of host memory");
    (a->bf16 ? flash_emu_backward_bf16 : flash_emu_backward)(a->dq, a->dk, dv, a->dsum, dout, x.q, x.k, x.v, out,
                                                             a->lse_in, a->B, a->T, a->NH, a->NKV, a->HD);
    for (size_t r = 0; a->dv16 && r < rows; r++) round_into(a->dv16 + r * a->dv_ld, dv + r * width, width);
    if (a->dv16) free(dv);
    free(out16);
    free(dout16);
    free_qkv(&x);
}

// Checks every buffer (device memory of its size) and the shape flash_attention.cu takes, queues
// run (NULL: the caller queues).
static void attention(CudaCtx *ctx, const char *call, AttentionArgs a, void (*run)(void *)) {
    launch(ctx, call);
    const size_t nq = (size_t)a.B * a.T * a.NH * a.HD, nkv = (size_t)a.B * a.T * a.NKV * a.HD;
    const size_t nr = (size_t)a.B * a.NH * a.T, elem = a.bf16 ? sizeof(cuda_bf16) : sizeof(float);
    const size_t out_bytes = nq * elem;
    if (a.HD > FLASH_MAX_HD || a.NKV <= 0 || a.NH % a.NKV != 0) emu_breach(call, "a shape flash attention does not take");
    emu_need_device(call, a.q, nq * elem);
    emu_need_device(call, a.k, nkv * elem);
    emu_need_device(call, a.v, nkv * elem);
    if (a.lse) {
        emu_need_device(call, a.bf16 ? (const void *)a.out16 : (const void *)a.out, out_bytes);
        emu_need_device(call, a.lse, F(nr));
    } else {
        emu_need_device(call, a.dout, nq * elem);
        emu_need_device(call, a.bf16 ? (const void *)a.out16_in : (const void *)a.out_in, out_bytes);
        emu_need_device(call, a.lse_in, F(nr));
        emu_need_device(call, a.dsum, F(nr));
        emu_need_device(call, a.dq, F(nq));
        emu_need_device(call, a.dk, F(nkv));
        if (!a.dv16) {
            emu_need_device(call, a.dv, F(nkv));
        } else {
            const size_t rows = (size_t)a.B * a.T, width = (size_t)a.NKV * a.HD;
            if ((size_t)a.dv_ld < width) emu_breach(call, "a row stride narrower than the dv it packs");
            if (rows) emu_need_device(call, a.dv16, ((rows - 1) * a.dv_ld + width) * sizeof(cuda_bf16));
        }
    }
    if (nr == 0 || !run) return;
    emu_enqueue(ctx->stream, run, &a, sizeof a);
}

typedef struct {
    float *out;
    cuda_bf16 *out16;      // the bf16 form (out NULL), whose q, k, v are bf16 too
    const void *q, *k, *v;
    int n, NH, NKV, HD;
} DecodeArgs;

static void run_flash_decode(void *p) {
    const DecodeArgs *a = p;
    const size_t n = (size_t)a->NH * a->HD;
    QkvF32 x = qkv_f32(a->q, a->k, a->v, n, (size_t)a->n * a->NKV * a->HD, a->out16 != NULL);
    float *out = a->out16 ? temp(n) : a->out;
    flash_emu_decode(out, x.q, x.k, x.v, a->n, a->NH, a->NKV, a->HD);
    if (a->out16) round_free(a->out16, out, n);
    free_qkv(&x);
}

static void flash_decode_as(CudaCtx *ctx, const char *call, DecodeArgs a) {
    launch(ctx, call);
    const size_t nq = (size_t)a.NH * a.HD, nkv = (size_t)a.n * a.NKV * a.HD;
    const size_t elem = a.out16 ? sizeof(cuda_bf16) : sizeof(float);
    if (a.HD > FLASH_MAX_HD || a.NKV <= 0 || a.NH % a.NKV != 0) emu_breach(call, "a shape flash attention does not take");
    emu_need_device(call, a.out16 ? (const void *)a.out16 : (const void *)a.out, nq * elem);
    emu_need_device(call, a.q, nq * elem);
    emu_need_device(call, a.k, nkv * elem);
    emu_need_device(call, a.v, nkv * elem);
    if (a.n <= 0 || a.NH <= 0) return;
    emu_enqueue(ctx->stream, run_flash_decode, &a, sizeof a);
}

void cuda_flash_decode(CudaCtx *ctx, float *out, const float *q, const float *k, const float *v, int n, int NH, int NKV,
                       int HD) {
    flash_decode_as(ctx, __func__, (DecodeArgs){.out = out, .q = q, .k = k, .v = v, .n = n, .NH = NH, .NKV = NKV, .HD = HD});
}

void cuda_flash_decode_bf16(CudaCtx *ctx, cuda_bf16 *out, const cuda_bf16 *q, const cuda_bf16 *k, const cuda_bf16 *v,
                            int n, int NH, int NKV, int HD) {
    flash_decode_as(ctx, __func__,
                    (DecodeArgs){.out16 = out, .q = q, .k = k, .v = v, .n = n, .NH = NH, .NKV = NKV, .HD = HD});
}

void cuda_flash_attention_forward(CudaCtx *ctx, float *out, float *lse, const float *q, const float *k,
                                  const float *v, int B, int T, int NH, int NKV, int HD) {
    attention(ctx, __func__,
              (AttentionArgs){.out = out, .lse = lse, .q = q, .k = k, .v = v, .B = B, .T = T, .NH = NH, .NKV = NKV,
                              .HD = HD},
              run_attention_forward);
}

void cuda_flash_attention_forward_bf16(CudaCtx *ctx, cuda_bf16 *out, float *lse, const cuda_bf16 *q, const cuda_bf16 *k,
                                       const cuda_bf16 *v, int B, int T, int NH, int NKV, int HD) {
    attention(ctx, __func__,
              (AttentionArgs){.out16 = out, .lse = lse, .q = q, .k = k, .v = v, .B = B, .T = T, .NH = NH, .NKV = NKV,
                              .HD = HD, .bf16 = true},
              run_attention_forward);
}

// Grouped queries take their heads' shares of dk and dv from the arena (flash_attention.cu);
// the emulated tiles keep theirs in flash_emu.c's scratch, so only the size is checked.
// run: run_attention_backward, or NULL where the caller queues its own (the fused form).
static void attention_backward_as(CudaCtx *ctx, const char *call, AttentionArgs a, void (*run)(void *)) {
    if (a.B > 0 && a.T > 0 && a.NKV > 0 && a.NH > a.NKV)
        (void)arena_for(ctx, call, cuda_flash_backward_arena_bytes((size_t)a.B * a.T, a.NH, a.NKV, a.HD));
    attention(ctx, call, a, run);
}

void cuda_flash_attention_backward(CudaCtx *ctx, float *dq, float *dk, float *dv, float *dsum, const float *dout,
                                   const float *q, const float *k, const float *v, const float *out,
                                   const float *lse, int B, int T, int NH, int NKV, int HD) {
    attention_backward_as(ctx, __func__,
                          (AttentionArgs){.dq = dq, .dk = dk, .dv = dv, .dsum = dsum, .dout = dout, .q = q, .k = k,
                                          .v = v, .out_in = out, .lse_in = lse, .B = B, .T = T, .NH = NH, .NKV = NKV,
                                          .HD = HD},
                          run_attention_backward);
}

void cuda_flash_attention_backward_bf16(CudaCtx *ctx, float *dq, float *dk, cuda_bf16 *dv, int dv_ld, float *dsum,
                                        const cuda_bf16 *dout, const cuda_bf16 *q, const cuda_bf16 *k, const cuda_bf16 *v,
                                        const cuda_bf16 *out, const float *lse, int B, int T, int NH, int NKV,
                                        int HD) {
    attention_backward_as(ctx, __func__,
                          (AttentionArgs){.dq = dq, .dk = dk, .dv16 = dv, .dv_ld = dv_ld, .dsum = dsum, .dout = dout, .q = q, .k = k,
                                          .v = v, .out16_in = out, .lse_in = lse, .B = B, .T = T, .NH = NH,
                                          .NKV = NKV, .HD = HD, .bf16 = true},
                          run_attention_backward);
}

// The fused form (flash_attention.cu): one call runs attention's backward and then, where the
// GPU's kernels rotate dq and dk themselves (head dims flash_rope_fused: the tensor-core kernels'
// registers, or the group sum), RoPE's backward into the packed gradient, as one queued kernel
// call; elsewhere both go through cuda_rope_backward_bf16 as separate calls, as on the GPU.
// Its values are the unfused calls': rope_backward of the emulated fp32 dq and dk, rounded.
typedef struct {
    AttentionArgs attention;
    RopeArgs q, k;
    bool fused;
} AttentionRopeArgs;

static void run_attention_rope_backward(void *p) {
    AttentionRopeArgs *a = p;
    run_attention_backward(&a->attention);
    if (!a->fused) return;
    run_rope_backward(&a->q);
    run_rope_backward(&a->k);
}

void cuda_flash_attention_rope_backward_bf16(CudaCtx *ctx, cuda_bf16 *dqkv, int ld, float *dq, float *dk, float *dsum,
                                             const cuda_bf16 *dout, const cuda_bf16 *q, const cuda_bf16 *k,
                                             const cuda_bf16 *v, const cuda_bf16 *out, const float *lse,
                                             const float *cos_tab, const float *sin_tab, int B, int T, int NH, int NKV,
                                             int HD) {
    const char *call = __func__;
    const size_t Q = (size_t)NH * HD, KV = (size_t)NKV * HD, rows = (size_t)B * T;
    if ((size_t)ld < Q + 2 * KV) emu_breach(call, "a row stride narrower than the q|k|v gradient it packs");
    if (rows) emu_need_device(call, dqkv, ((rows - 1) * ld + Q + 2 * KV) * sizeof(cuda_bf16));
    emu_need_device(call, cos_tab, F((size_t)T * HD / 2));
    emu_need_device(call, sin_tab, F((size_t)T * HD / 2));
    AttentionRopeArgs a = {
        .attention = {.dq = dq, .dk = dk, .dv16 = dqkv + Q + KV, .dv_ld = ld, .dsum = dsum, .dout = dout, .q = q,
                      .k = k, .v = v, .out16_in = out, .lse_in = lse, .B = B, .T = T, .NH = NH, .NKV = NKV, .HD = HD,
                      .bf16 = true},
        .q = {.out16 = dqkv, .ld = ld, .x = dq, .cos_tab = cos_tab, .sin_tab = sin_tab, .B = B, .T = T, .H = NH,
              .HD = HD},
        .k = {.out16 = dqkv + Q, .ld = ld, .x = dk, .cos_tab = cos_tab, .sin_tab = sin_tab, .B = B, .T = T, .H = NKV,
              .HD = HD},
        .fused = flash_rope_fused(HD),
    };
    attention_backward_as(ctx, call, a.attention, NULL);   // the arena, the buffers and the shape
    if (rows && NH > 0) emu_enqueue(ctx->stream, run_attention_rope_backward, &a, sizeof a);
    if (a.fused) return;
    cuda_rope_backward_bf16(ctx, dqkv, ld, dq, cos_tab, sin_tab, B, T, NH, HD);
    cuda_rope_backward_bf16(ctx, dqkv + Q, ld, dk, cos_tab, sin_tab, B, T, NKV, HD);
}

// ---- the loss, the optimizer, the norm -------------------------------------------------------

typedef struct {
    float *dlogits;
    double *loss;
    const float *logits;
    const int32_t *targets;
    int N, V;
    float scale;
    void *arena;         // crossentropy.cu's per-row losses (N doubles)
    size_t arena_bytes;
} LossArgs;

static void run_crossentropy(void *p) {
    const LossArgs *a = p;
    const double l = crossentropy_forward_backward(a->dlogits, a->logits, a->targets, a->N, a->V, a->scale);
    if (a->loss) *a->loss += l;
    emu_poison(a->arena, a->arena_bytes);
}

void cuda_crossentropy_forward_backward(CudaCtx *ctx, float *dlogits, double *loss, const float *logits,
                                        const int32_t *targets, int N, int V, float scale) {
    launch(ctx, __func__);
    emu_need_device(__func__, logits, F((size_t)N * V));
    emu_need_device(__func__, targets, (size_t)N * sizeof *targets);
    if (dlogits) emu_need_device(__func__, dlogits, F((size_t)N * V));
    if (loss) emu_need_device(__func__, loss, sizeof *loss);
    if (N <= 0) return;
    LossArgs a = {dlogits, loss, logits, targets, N, V, scale, NULL, (size_t)N * sizeof(double)};
    a.arena = arena_for(ctx, __func__, a.arena_bytes);
    emu_enqueue(ctx->stream, run_crossentropy, &a, sizeof a);
}

// The fused classifier (classifier.cu): the same chunk loop, each chunk's logits in the arena,
// run by the CPU kernels. The emulator's chunks are small (EMU_CLASSIFIER_CHUNK_BYTES of logits,
// 15 rows at the tiny model's vocabulary), so the tests' microbatches take several chunks and a
// ragged last one, where the GPU's 64 MiB would take their rows in one. The arena it takes is
// the GPU's (cuda_classifier_arena_bytes, kernels_cuda.h), as every kernel here takes what its
// kernels/cuda twin takes, so a reserve short of it is a breach.
#define EMU_CLASSIFIER_CHUNK_BYTES ((size_t)16 << 10)

int cuda_classifier_chunk_rows(int N, int V) {
    size_t rows = EMU_CLASSIFIER_CHUNK_BYTES / ((size_t)(V > 0 ? V : 1) * sizeof(float));
    if (rows < 1) rows = 1;
    return N > 0 && rows > (size_t)N ? N : (int)rows;
}

typedef struct {
    double *loss;
    float *dx, *dW;
    const void *x, *W;    // fp32, or bf16 (widened when the work runs)
    const int32_t *targets;
    int N, C, V;
    float scale;
    bool bf16;
    void *arena;          // the row losses, the chunk's logits (and the group's bf16 dlogits), as classifier.cu carves it
    size_t arena_bytes;
} ClassifierArgs;

static void run_classifier(void *p) {
    const ClassifierArgs *a = p;
    const int R = cuda_classifier_chunk_rows(a->N, a->V), G = cuda_classifier_group_rows(a->N, a->V, a->bf16);
    const bool grad = a->dx || a->dW;
    float *xw = a->bf16 ? widen(a->x, (size_t)a->N * a->C) : NULL;
    float *Ww = a->bf16 ? widen(a->W, (size_t)a->V * a->C) : NULL;
    const float *x = a->bf16 ? xw : a->x, *W = a->bf16 ? Ww : a->W;
    float *logits = (float *)((char *)a->arena + cuda_arena_round((size_t)a->N * sizeof(double)));
    // the group's dlogits, widened (classifier.cu keeps them in the arena: bf16, or in fp32
    // mode the one chunk's logits, overwritten)
    float *dl = grad ? malloc(sizeof(float) * (size_t)G * a->V) : NULL;
    if (grad && !dl) abort();
    double loss = 0.0;
    for (int g0 = 0; g0 < a->N; g0 += G) {
        const int grows = a->N - g0 < G ? a->N - g0 : G;
        for (int r0 = g0; r0 < g0 + grows; r0 += R) {
            const int rows = g0 + grows - r0 < R ? g0 + grows - r0 : R;
            float *d = grad ? dl + (size_t)(r0 - g0) * a->V : NULL;
            linear_forward(logits, x + (size_t)r0 * a->C, W, rows, a->C, a->V);
            loss += crossentropy_forward_backward(d, logits, a->targets + r0, rows, a->V, a->scale);
            if (d && a->bf16)   // classifier.cu's loss kernel writes the dlogits rounded, for the two GEMMs
                for (size_t i = 0; i < (size_t)rows * a->V; i++) d[i] = emu_from_bf16(emu_to_bf16(d[i]));
        }
        if (!grad) continue;
        if (a->dx) linear_backward_input(a->dx + (size_t)g0 * a->C, dl, W, grows, a->C, a->V, false);   // written
        if (a->dW) linear_backward_weight(a->dW, dl, x + (size_t)g0 * a->C, grows, a->C, a->V);
    }
    if (a->loss) *a->loss += loss;
    emu_poison(a->arena, a->arena_bytes);
    free(dl);
    free(xw);
    free(Ww);
}

static void classifier(CudaCtx *ctx, const char *call, ClassifierArgs a) {
    launch(ctx, call);
    const size_t esz = a.bf16 ? 2 : 4;
    emu_need_device(call, a.x, (size_t)a.N * a.C * esz);
    emu_need_device(call, a.W, (size_t)a.V * a.C * esz);
    emu_need_device(call, a.targets, (size_t)a.N * sizeof *a.targets);
    if (a.loss) emu_need_device(call, a.loss, sizeof *a.loss);
    if (a.dx) emu_need_device(call, a.dx, F((size_t)a.N * a.C));
    if (a.dW) emu_need_device(call, a.dW, F((size_t)a.V * a.C));
    if (a.N <= 0) return;
    a.arena_bytes = cuda_classifier_arena_bytes(a.N, a.V, a.bf16);
    a.arena = arena_for(ctx, call, a.arena_bytes);
    // classifier.cu's GEMMs: each chunk's logits (after the row losses in the arena), then each
    // group's two gradient GEMMs
    const int R = cuda_classifier_chunk_rows(a.N, a.V), G = cuda_classifier_group_rows(a.N, a.V, a.bf16);
    const float *logits = (const float *)((char *)a.arena + cuda_arena_round((size_t)a.N * sizeof(double)));
    const void *dl = a.bf16 ? (const char *)logits + cuda_arena_round(F((size_t)R * a.V)) : (const void *)logits;
    for (int g0 = 0; g0 < a.N; g0 += G) {
        const int grows = a.N - g0 < G ? a.N - g0 : G;
        for (int r0 = g0; r0 < g0 + grows; r0 += R) {
            const int rows = g0 + grows - r0 < R ? g0 + grows - r0 : R;
            plan_gemm(ctx, false, true, rows, a.V, a.C, (const char *)a.x + (size_t)r0 * a.C * esz, a.C, a.W, a.C,
                      a.bf16, gemm_ptr_alignment(logits), a.V);
        }
        const void *xg = (const char *)a.x + (size_t)g0 * a.C * esz;
        if (a.dx) plan_gemm(ctx, false, false, grows, a.C, a.V, dl, a.V, a.W, a.C, a.bf16,
                            gemm_ptr_alignment(a.dx + (size_t)g0 * a.C), a.C);
        if (a.dW) plan_gemm(ctx, true, false, a.V, a.C, grows, dl, a.V, xg, a.C, a.bf16, gemm_ptr_alignment(a.dW), a.C);
    }
    emu_enqueue(ctx->stream, run_classifier, &a, sizeof a);
}

void cuda_classifier(CudaCtx *ctx, double *loss, float *dx, float *dW, const float *x, const float *W,
                     const int32_t *targets, int N, int C, int V, float scale) {
    classifier(ctx, __func__,
               (ClassifierArgs){.loss = loss, .dx = dx, .dW = dW, .x = x, .W = W, .targets = targets, .N = N, .C = C,
                                .V = V, .scale = scale});
}

void cuda_classifier_bf16(CudaCtx *ctx, double *loss, float *dx, float *dW, const cuda_bf16 *x, const cuda_bf16 *W,
                          const int32_t *targets, int N, int C, int V, float scale) {
    classifier(ctx, __func__,
               (ClassifierArgs){.loss = loss, .dx = dx, .dW = dW, .x = x, .W = W, .targets = targets, .N = N, .C = C,
                                .V = V, .scale = scale, .bf16 = true});
}

typedef struct {
    float *params, *m, *v;
    cuda_bf16 *params_bf16;
    const float *grads;
    float clip;
    size_t n;
    int t;
    double lr, beta1, beta2, eps, weight_decay;
} AdamwArgs;

// A clip factor below 1 scales a copy (grad_scale's bits, which the kernel's multiply gives):
// the device gradients keep their values, as the GPU's kernel only reads them.
static void run_adamw(void *p) {
    const AdamwArgs *a = p;
    float *scaled = NULL;
    if (a->clip != 1.0f) {
        scaled = temp(a->n);
        memcpy(scaled, a->grads, F(a->n));
        grad_scale(scaled, a->n, a->clip);
    }
    adamw_update(a->params, scaled ? scaled : a->grads, a->m, a->v, a->n, a->t, a->lr, a->beta1, a->beta2, a->eps,
                 a->weight_decay);
    free(scaled);
    if (a->params_bf16) round_into(a->params_bf16, a->params, a->n);
}

void cuda_adamw_update(CudaCtx *ctx, float *params, cuda_bf16 *params_bf16, const float *grads, float clip, float *m,
                       float *v, size_t n, int t, double lr, double beta1, double beta2, double eps,
                       double weight_decay) {
    launch(ctx, __func__);
    emu_need_device(__func__, params, F(n));
    emu_need_device(__func__, grads, F(n));
    emu_need_device(__func__, m, F(n));
    emu_need_device(__func__, v, F(n));
    if (params_bf16) emu_need_device(__func__, params_bf16, n * sizeof *params_bf16);
    const AdamwArgs a = {params, m, v, params_bf16, grads, clip, n, t, lr, beta1, beta2, eps, weight_decay};
    emu_enqueue(ctx->stream, run_adamw, &a, sizeof a);
}

typedef struct {
    float *g;
    double *sumsq;          // += the sum of squares
    size_t n;
    void *arena;            // gradnorm.cu's per-block partial sums
    size_t arena_bytes;
} GradArgs;

static void run_grad_sum_squares(void *p) {
    const GradArgs *a = p;
    *a->sumsq += grad_sum_squares(a->g, a->n);
    emu_poison(a->arena, a->arena_bytes);
}

void cuda_grad_sum_squares(CudaCtx *ctx, double *sumsq, const float *g, size_t n) {
    launch(ctx, __func__);
    emu_need_device(__func__, sumsq, sizeof *sumsq);
    emu_need_device(__func__, g, F(n));
    if (n == 0) return;
    GradArgs a = {.g = (float *)g, .sumsq = sumsq, .n = n, .arena_bytes = cuda_grad_sum_squares_arena_bytes(n)};
    a.arena = arena_for(ctx, __func__, a.arena_bytes);
    emu_enqueue(ctx->stream, run_grad_sum_squares, &a, sizeof a);
}
