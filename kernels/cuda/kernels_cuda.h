// kernels/cuda: the CUDA backend of every op of kernels/cpu/kernels.h, on DEVICE buffers.
//
// Same dimension letters, layouts, argument order and semantics as kernels/cpu/kernels.h
// (read it first): row-major contiguous tensors, linear weights in (OC, IC) layout with
// y = x @ W^T, and its contract for *_backward: parameter gradients, and the input gradients
// of RMSNorm and the embedding, ACCUMULATE (+=); the input gradients of the linear layer,
// RoPE, attention and SwiGLU are WRITTEN (each is the first write into its buffer, so nobody
// zeroes it first). Each declaration says which.
// Differences, all forced by the device:
//   * Every function takes a CudaCtx first: it carries the CUDA stream all work is queued
//     on (functions return before the work is done; stream order is the only ordering),
//     the cuBLAS and cuBLASLt handles and their workspace, and a scratch arena (a stage
//     reserves the largest piece one call takes: engine/model/model_cuda_arena.c).
//   * Scalars the CPU functions RETURN (the cross-entropy loss, a gradient sum of squares)
//     are instead accumulated (+=) into a device double, so a step never waits for the
//     host; cuda_fetch_double() reads one back (and waits).
//   * Reductions run in a fixed order for given shapes (no atomics): a GPU run repeats
//     itself bitwise; it matches the CPU up to float summation order.
//
// Numerics (DESIGN.md): GPU matmuls take bf16 operands with fp32 accumulation; master
// weights, AdamW moments, gradients, activations and every reduction stay fp32. So:
//   * the plain names (cuda_linear_forward, ...) are fp32 in and out (fp32 GEMMs, no TF32):
//     the reference path, for `pptrain check` and parity tests (flash attention's fp32 form
//     runs its products on CUDA cores);
//   * the *_bf16 names take bf16 GEMM operands (the bf16 working copy of the weights that
//     cuda_adamw_update writes; bf16 activations, written so by the kernel that makes them)
//     and accumulate in fp32 (cuBLAS(Lt) with CUBLAS_COMPUTE_32F), into fp32 outputs or,
//     for the *_to_bf16 forms, bf16 ones; flash attention's bf16 form takes bf16 q, k, v
//     and runs its products on tensor cores;
//   * cuda_f32_to_bf16 / cuda_bf16_to_f32 convert inter-stage messages.
// bf16 buffers are typed cuda_bf16 (the 16 raw bits, round-to-nearest-even from fp32), so C
// callers need no CUDA C++ type.
//
// Buffers never alias unless a comment says they may. Calls run on the calling thread's
// current device; cuda_ctx_create makes the context's device current.
// C-callable (extern "C"): engine C code includes this header. The library defines
// PPTRAIN_HAVE_CUDA for everything that links pptrain_kernels_cuda.
//
// Sizes without the toolkit. A C file that defines PPTRAIN_KERNELS_CUDA_SIZES_ONLY before
// including this header reads it without the CUDA runtime's headers (every build has it, the
// toolkit or not): it may call the static inline sizes (cuda_arena_round,
// cuda_flash_backward_arena_bytes, cuda_classifier_arena_bytes) and nothing else, so that
// an estimate made anywhere (engine/model/model_cuda_arena.c) is the number the kernels take.
#ifndef PPTRAIN_KERNELS_CUDA_H
#define PPTRAIN_KERNELS_CUDA_H
#include <stdbool.h>
#include <stddef.h>

// The context's scratch arena hands out pieces 256-byte aligned: a piece's size as carved.
// Callers that size a reservation (cuda_ctx_reserve) count their pieces with it.
static inline size_t cuda_arena_round(size_t bytes) { return (bytes + 255) & ~(size_t)255; }
#include <stdint.h>
#ifndef PPTRAIN_KERNELS_CUDA_SIZES_ONLY
#include <cuda_runtime_api.h>
#include "kernels/cuda/cuda_check.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t cuda_bf16;          // bfloat16 bits: 1 sign, 8 exponent, 7 mantissa

// ---- context.cu ------------------------------------------------------------------------
// Visible CUDA devices; 0 when there is no driver or no device (never aborts, never prints).
int cuda_device_count(void);
// NULL when at least one device is usable, otherwise one line (no newline) saying why not in
// plain words, e.g. "no NVIDIA driver is loaded, or it is older than this CUDA runtime needs
// (cudaErrorInsufficientDriver)", for `--device cuda` to print and exit 2. Thread-local storage.
const char *cuda_unavailable_reason(void);

// Whether this build's kernels run on GPU `device` (which exists): NULL if they do, else one
// line saying why not in plain words (compute capability under CUDA_MIN_MAJOR.0, or a build
// without code the device can load, and what to do). Thread-local storage.
const char *cuda_device_unsupported_reason(int device);
// What that is decided from (kernels/cuda/device_support.c, plain C: the emulator fills it in
// too), and the decision: NULL, or the line written into buf.
#define CUDA_MIN_MAJOR 8
typedef struct {
    int device;
    const char *name;   // the runtime's device name
    int major, minor;   // compute capability
    int has_code;       // a kernel of this build loads on the device
} CudaDeviceFacts;
const char *cuda_support_problem(char *buf, size_t size, const CudaDeviceFacts *f);

typedef struct CudaCtx CudaCtx;
// Makes `device` current, creates a non-blocking stream, cuBLAS and cuBLASLt handles bound
// to it and a 32 MiB cuBLASLt workspace. Aborts (one line) on failure: check
// cuda_unavailable_reason() first.
CudaCtx *cuda_ctx_create(int device);
// Waits for the stream, then frees everything (NULL is fine).
void cuda_ctx_destroy(CudaCtx *ctx);
#ifndef PPTRAIN_KERNELS_CUDA_SIZES_ONLY
cudaStream_t cuda_ctx_stream(const CudaCtx *ctx);
#endif
int cuda_ctx_device(const CudaCtx *ctx);
// Waits until all work queued on the context's stream is done.
void cuda_ctx_synchronize(CudaCtx *ctx);
// Waits for the stream, then returns *dev_value (a device double, e.g. a loss accumulator).
double cuda_fetch_double(CudaCtx *ctx, const double *dev_value);
// Grows the context's scratch arena (what the embedding sort, the loss, the norms'
// partial sums use) to at least `bytes` now. Growing frees the old arena, and cudaFree waits
// for the whole device: a caller whose GPU runs kernels that wait on other ranks (NCCL
// receives) reserves the arena at set-up so no step ever grows it.
void cuda_ctx_reserve(CudaCtx *ctx, size_t bytes);
// bytes of device memory at p = 0, queued on the stream.
void cuda_zero(CudaCtx *ctx, void *p, size_t bytes);

// ---- convert.cu --------------------------------------------------------------------------
// dst(n) = bf16(src), round to nearest even (NaN stays NaN).
void cuda_f32_to_bf16(CudaCtx *ctx, cuda_bf16 *dst, const float *src, size_t n);
// dst(n) = float(src), exact.
void cuda_bf16_to_f32(CudaCtx *ctx, float *dst, const cuda_bf16 *src, size_t n);

// dst(rows, ld)[:, 0:cols] = src(rows, cols) (dst points at the block's first column): column
// blocks packed side by side into one GEMM operand (N, sum of cols), fp32 mode's (bf16 mode's
// kernels write their packed operands themselves).
void cuda_pack_cols(CudaCtx *ctx, float *dst, int ld, const float *src, int rows, int cols);

// ---- embedding.cu ------------------------------------------------------------------------
// out(N, C) = wte[tokens[n]]; tokens (device, N) in [0, V).
void cuda_embedding_forward(CudaCtx *ctx, float *out, const int32_t *tokens, const float *wte,
                            int N, int C);
// dwte(V, C) += scatter of dout(N, C) by token. Deterministic: rows are stably sorted by
// token (cub radix sort), then each (token, column) sums its rows in row order.
void cuda_embedding_backward(CudaCtx *ctx, float *dwte, const float *dout,
                             const int32_t *tokens, int N, int C);

// ---- rmsnorm.cu --------------------------------------------------------------------------
// out = inp * rstd * weight, rstd(N) = 1/sqrt(mean(inp^2) + eps) (saved for backward).
void cuda_rmsnorm_forward(CudaCtx *ctx, float *out, float *rstd, const float *inp,
                          const float *weight, int N, int C, float eps);
// The same with out in bf16, rounded to nearest even from the fp32 value the form above stores:
// a GEMM operand written where it is made (bf16 mode), with no conversion pass after it. (The
// residual add before a norm runs in the epilogue of the GEMM that makes its term:
// cuda_linear_forward_residual.)
void cuda_rmsnorm_forward_bf16(CudaCtx *ctx, cuda_bf16 *out, float *rstd, const float *inp, const float *weight, int N,
                               int C, float eps);
// dinp(N, C) += d/dinp; dweight(C) += sum_n dout * inp * rstd. Either may be NULL.
void cuda_rmsnorm_backward(CudaCtx *ctx, float *dinp, float *dweight, const float *dout,
                           const float *inp, const float *weight, const float *rstd,
                           int N, int C);
// The backward's residual add fused with its norm's input gradient: dinp(N, C) = resid + d/dinp
// (overwrites; resid NULL: zero, resid == dinp: cuda_rmsnorm_backward's accumulation), the same
// numbers as a copy of resid then cuda_rmsnorm_backward. dinp16 (may be NULL) gets the value's
// bf16 copy, rounded to nearest even: the gradient as a GEMM operand, with no conversion pass.
// dweight (may be NULL): dweight(C) += sum_n dout * inp * rstd as well, from the rows the input
// gradient reads (so a GPU stage's norm weights get their gradient in the input half). Its rows
// are summed in double, in chunks of rows whose C sums each go to the arena
// (cuda_rmsnorm_arena_bytes), then the chunks are added, all in a fixed order: chunks of
// CUDA_RMSNORM_FUSED_ROWS where the input gradient's kernel holds its rows and adds them
// (cuda_rmsnorm_fused: C % 4 == 0 and C <= 1024, with 16-byte aligned rows), else chunks of
// cuda_rmsnorm_chunk_rows (128, doubled until at most 65535 chunks, the grid's y limit) by
// kernels of their own after the input gradient.
#define CUDA_RMSNORM_FUSED_ROWS 64
static inline bool cuda_rmsnorm_fused(int C) { return C % 4 == 0 && C <= 1024; }
static inline int cuda_rmsnorm_chunk_rows(int N) {
    int chunk = 128;
    while ((N + chunk - 1) / chunk > 65535) chunk *= 2;
    return chunk;
}
static inline size_t cuda_rmsnorm_arena_bytes(int N, int C) {   // the fused form's, where it may run: more chunks
    if (N <= 0 || C <= 0) return 0;
    const int chunk = cuda_rmsnorm_fused(C) ? CUDA_RMSNORM_FUSED_ROWS : cuda_rmsnorm_chunk_rows(N);
    return cuda_arena_round((size_t)((N + chunk - 1) / chunk) * (size_t)C * sizeof(double));
}
void cuda_residual_rmsnorm_backward(CudaCtx *ctx, float *dinp, cuda_bf16 *dinp16, float *dweight, const float *resid,
                                    const float *dout, const float *inp, const float *weight, const float *rstd, int N,
                                    int C);
// bf16 mode's form, with the norm output's gradient dout (N, C) in bf16 (as the input-gradient
// GEMM of the projections after the norm stores it), widened exactly.
void cuda_residual_rmsnorm_backward_bf16(CudaCtx *ctx, float *dinp, cuda_bf16 *dinp16, float *dweight,
                                         const float *resid, const cuda_bf16 *dout, const float *inp,
                                         const float *weight, const float *rstd, int N, int C);

// ---- linear.cu (cuBLASLt) ----------------------------------------------------------------
// fp32 operands, fp32 accumulation (no TF32).
// out(N, OC) = inp(N, IC) @ W(OC, IC)^T        (overwrites out)
void cuda_linear_forward(CudaCtx *ctx, float *out, const float *inp, const float *W,
                         int N, int IC, int OC);
// out(N, OC) = resid(N, OC) + inp @ W^T, the add in the GEMM's epilogue (each element rounded
// once, as the product written and then added would be: the same bits). out and resid are
// separate buffers (or the same); the forward's residual adds, which no kernel then reads back.
void cuda_linear_forward_residual(CudaCtx *ctx, float *out, const float *resid, const float *inp, const float *W, int N,
                                  int IC, int OC);
// dinp(N, IC) = dout(N, OC) @ W(OC, IC)        (overwrites dinp, which is not read: no zeroing first)
void cuda_linear_backward_input(CudaCtx *ctx, float *dinp, const float *dout, const float *W,
                                int N, int IC, int OC);
// dW(OC, IC) += dout(N, OC)^T @ inp(N, IC)
void cuda_linear_backward_weight(CudaCtx *ctx, float *dW, const float *dout, const float *inp,
                                 int N, int IC, int OC);
// batch projections of one input in one GEMM (fused q|k|v, gate|up over weights stored back
// to back): out + b * out_stride (N, OC) = inp(N, IC) @ (W + b * W_stride)(OC, IC)^T for
// b < batch (strides in elements; the outputs must not overlap).
void cuda_linear_forward_shared(CudaCtx *ctx, float *out, size_t out_stride, const float *inp,
                                const float *W, size_t W_stride, int batch, int N, int IC,
                                int OC);
void cuda_linear_forward_shared_bf16(CudaCtx *ctx, float *out, size_t out_stride,
                                     const cuda_bf16 *inp, const cuda_bf16 *W, size_t W_stride,
                                     int batch, int N, int IC, int OC);
// ... and with the outputs stored bf16 too: each fp32 accumulator rounded to nearest even as
// it is stored (bf16 mode's gate|up, which only SwiGLU reads).
void cuda_linear_forward_shared_to_bf16(CudaCtx *ctx, cuda_bf16 *out, size_t out_stride, const cuda_bf16 *inp,
                                        const cuda_bf16 *W, size_t W_stride, int batch, int N, int IC, int OC);
// The same three with bf16 operands, fp32 accumulation, fp32 results (overwrite, overwrite, +=).
// bf16 mode's engine calls the forward and the weight form; its input gradients are stored bf16
// (the _to_bf16 form below), which test_cuda_kernels holds to this fp32-result one.
void cuda_linear_forward_bf16(CudaCtx *ctx, float *out, const cuda_bf16 *inp,
                              const cuda_bf16 *W, int N, int IC, int OC);
void cuda_linear_forward_residual_bf16(CudaCtx *ctx, float *out, const float *resid, const cuda_bf16 *inp,
                                       const cuda_bf16 *W, int N, int IC, int OC);
void cuda_linear_backward_input_bf16(CudaCtx *ctx, float *dinp, const cuda_bf16 *dout,
                                     const cuda_bf16 *W, int N, int IC, int OC);
void cuda_linear_backward_weight_bf16(CudaCtx *ctx, float *dW, const cuda_bf16 *dout,
                                      const cuda_bf16 *inp, int N, int IC, int OC);
// dinp(N, IC) = dout(N, OC) @ W, WRITTEN and rounded to bf16 (not added: bf16 mode's attention
// output gradient and the MLP hidden's, each read only by one kernel, attention's backward and
// SwiGLU's): one cuBLAS GEMM storing bf16.
void cuda_linear_backward_input_to_bf16(CudaCtx *ctx, cuda_bf16 *dinp, const cuda_bf16 *dout, const cuda_bf16 *W, int N,
                                        int IC, int OC);

// ---- rope.cu -----------------------------------------------------------------------------
// cos/sin(T, HD/2) tables, bit-for-bit the recipe of rope_tables from the host's
// inv_freq(HD/2) (rope_inv_freq): fp32 angle t * inv_freq, cos/sin of that angle in double
// rounded once. HD even, HD <= 1024.
void cuda_rope_tables(CudaCtx *ctx, float *cos_tab, float *sin_tab, int T, int HD,
                      const float *inv_freq);
// x(B, T, H, HD) -> out, Hugging Face half-split pairs (i, i + HD/2); out may alias x.
void cuda_rope_forward(CudaCtx *ctx, float *out, const float *x, const float *cos_tab,
                       const float *sin_tab, int B, int T, int H, int HD);
// bf16 mode's form, in place on x(B, T, H, HD) in bf16 (q or k as their GEMM stores them): each
// pair widened, rotated in fp32 as above, rounded to nearest even.
void cuda_rope_forward_bf16(CudaCtx *ctx, cuda_bf16 *x, const float *cos_tab, const float *sin_tab, int B, int T, int H,
                            int HD);
// dx = R^T dout (written). dx must not alias dout.
// The _bf16 form (bf16 mode) writes R^T dout, rounded to bf16, into a packed GEMM operand: head
// h of token row n at dx + n * ld + h * HD (the q or k column block of the packed q|k|v gradient).
void cuda_rope_backward_bf16(CudaCtx *ctx, cuda_bf16 *dx, int ld, const float *dout, const float *cos_tab,
                             const float *sin_tab, int B, int T, int H, int HD);
void cuda_rope_backward(CudaCtx *ctx, float *dx, const float *dout, const float *cos_tab,
                        const float *sin_tab, int B, int T, int H, int HD);

// ---- flash_attention.cu ------------------------------------------------------------------
// Causal grouped-query attention as attention_forward/attention_backward compute it (q(B, T,
// NH, HD), k, v(B, T, NKV, HD), query head h reads kv head h / (NH / NKV)), by flash attention:
// tiled with an online softmax, fp32 throughout, no (T, T) buffer. Forward overwrites
// out(B, T, NH, HD) and keeps lse(B, NH, T), each query row's logsumexp of its scaled scores,
// for backward in place of the probabilities. HD <= 256 (flash_tile.h: FLASH_MAX_HD).
void cuda_flash_attention_forward(CudaCtx *ctx, float *out, float *lse, const float *q,
                                  const float *k, const float *v, int B, int T, int NH, int NKV,
                                  int HD);
// Generation's decode: the one query of position n - 1, q(NH, HD), against the n cached
// positions k, v(n, NKV, HD) [0, n), into out(NH, HD) (overwritten): the forward kernel's
// tile loop for one query row, by the same flash_tile.h functions, keys in increasing order.
void cuda_flash_decode(CudaCtx *ctx, float *out, const float *q, const float *k, const float *v, int n, int NH, int NKV,
                       int HD);
// bf16 mode's form: q and the cache's k, v bf16 (as the slot and the cache keep them), widened
// exactly; out bf16 (the o projection's operand), rounded to nearest even.
void cuda_flash_decode_bf16(CudaCtx *ctx, cuda_bf16 *out, const cuda_bf16 *q, const cuda_bf16 *k, const cuda_bf16 *v,
                            int n, int NH, int NKV, int HD);
// dq, dk, dv = gradients, from forward's out and lse: WRITTEN, each element once (not read, so
// not zeroed first; the value is 0 + x, what adding into zeros gave). dsum(B, NH, T) is caller-owned scratch
// (overwritten with rowsum(dout * out)). With grouped queries (NH > NKV) each query head's dk
// and dv go first to the context's arena, cuda_flash_backward_arena_bytes(B * T, NH, NKV, HD)
// of it (two (B, T, NH, HD) fp32 tensors), then sum over the group in head order.
static inline size_t cuda_flash_backward_arena_bytes(size_t rows, int NH, int NKV, int HD) {
    return NH > NKV ? 2 * cuda_arena_round(rows * (size_t)NH * (size_t)HD * sizeof(float)) : 0;
}
void cuda_flash_attention_backward(CudaCtx *ctx, float *dq, float *dk, float *dv, float *dsum,
                                   const float *dout, const float *q, const float *k,
                                   const float *v, const float *out, const float *lse, int B, int T,
                                   int NH, int NKV, int HD);

// The bf16 mode's attention: the same contracts (and the same arena for grouped queries), on
// tensor cores, with q, k and v bf16 (as their GEMM and RoPE store them) and out in bf16 (the
// o projection's operand, rounded to nearest even from the fp32 out), and the output gradient
// dout bf16 too (as cuda_linear_backward_input_to_bf16 stores it; the backward's D =
// rowsum(dout * out) reads the bf16 values widened). The probabilities and score gradients are
// rounded to bf16 before their products; every product accumulates in fp32 and the softmax
// stays fp32 (flash_tile.h, "Tensor-core tiles").
// Head dims that are not a multiple of 16 up to 128 (flash_mma_takes) run the fp32 kernels on
// the widened q, k, v and dout, out still bf16. The backward writes dq and dk in fp32 (for RoPE's
// backward) and dv rounded to bf16 into the packed q|k|v gradient operand: token row n's kv
// head h at dv[n * dv_ld + h * HD] (dv pointing at the operand's dv column block).
void cuda_flash_attention_forward_bf16(CudaCtx *ctx, cuda_bf16 *out, float *lse, const cuda_bf16 *q, const cuda_bf16 *k,
                                       const cuda_bf16 *v, int B, int T, int NH, int NKV, int HD);
void cuda_flash_attention_backward_bf16(CudaCtx *ctx, float *dq, float *dk, cuda_bf16 *dv, int dv_ld, float *dsum,
                                        const cuda_bf16 *dout, const cuda_bf16 *q, const cuda_bf16 *k, const cuda_bf16 *v,
                                        const cuda_bf16 *out, const float *lse, int B, int T, int NH, int NKV,
                                        int HD);
// The engine's form: attention's backward and then RoPE's (cuda_rope_backward_bf16), into the
// packed q|k|v gradient operand dqkv (token row n at dqkv[n * ld]: q's NH x HD columns, k's
// NKV x HD, v's NKV x HD), the same values as the three calls. Where the tensor-core kernels
// hold a whole head's gradient row, they rotate it in registers and write it bf16, so dq and
// dk skip their fp32 round trip and RoPE's own pass: dq at head dims flash_mma_takes, dk when
// also NH == NKV (with grouped queries dk is summed after the kernel). dq and dk (fp32, (B, T,
// NH or NKV, HD)) take the rest.
void cuda_flash_attention_rope_backward_bf16(CudaCtx *ctx, cuda_bf16 *dqkv, int ld, float *dq, float *dk, float *dsum,
                                             const cuda_bf16 *dout, const cuda_bf16 *q, const cuda_bf16 *k,
                                             const cuda_bf16 *v, const cuda_bf16 *out, const float *lse,
                                             const float *cos_tab, const float *sin_tab, int B, int T, int NH, int NKV,
                                             int HD);

// ---- swiglu.cu ---------------------------------------------------------------------------
// out(N, FF) = silu(gate) * up     (overwrites out)
void cuda_swiglu_forward(CudaCtx *ctx, float *out, const float *gate, const float *up,
                         int N, int FF);
// bf16 mode's form: gate and up come bf16 (as cuda_linear_forward_shared_to_bf16 stores them),
// widened exactly, and out is bf16, rounded to nearest even from the fp32 value (the down
// projection's operand).
void cuda_swiglu_forward_bf16(CudaCtx *ctx, cuda_bf16 *out, const cuda_bf16 *gate, const cuda_bf16 *up, int N,
                              int FF);
// dgate, dup (N, FF) = gradients (written). The _bf16 form (bf16 mode: dout, gate and up bf16,
// widened; dout as cuda_linear_backward_input_to_bf16 stores it) writes them, rounded to bf16, side by
// side into the packed gate|up gradient dgate_up (N, ld): columns [0, FF) and [FF, 2 FF).
void cuda_swiglu_backward_bf16(CudaCtx *ctx, cuda_bf16 *dgate_up, int ld, const cuda_bf16 *dout, const cuda_bf16 *gate,
                               const cuda_bf16 *up, int N, int FF);
void cuda_swiglu_backward(CudaCtx *ctx, float *dgate, float *dup, const float *dout,
                          const float *gate, const float *up, int N, int FF);

// ---- crossentropy.cu ---------------------------------------------------------------------
// Fused softmax + cross-entropy over logits(N, V) (the LM head's output) with targets(N)
// (device); a negative target is a pad and contributes nothing. As
// crossentropy_forward_backward, except that the value it returns,
//   scale * sum over non-pad rows of -log p[target]     (per row in double),
// is ADDED to *loss (a device double; zero it once per step; NULL: not computed). With
// scale = 1 / (non-pad targets of the whole batch), after all microbatches *loss is the
// batch mean. When dlogits is non-NULL it is OVERWRITTEN with scale * (softmax - onehot),
// zero on pad rows. dlogits may alias logits.
void cuda_crossentropy_forward_backward(CudaCtx *ctx, float *dlogits, double *loss,
                                        const float *logits, const int32_t *targets, int N,
                                        int V, float scale);

// ---- classifier.cu -----------------------------------------------------------------------
// The LM head and its loss fused: logits = x(N, C) @ W(V, C)^T row chunk by row chunk, never
// all N rows at once, so no (N, V) tensor exists. Per chunk of R = cuda_classifier_chunk_rows
// rows (in order): the chunk's fp32 logits in the context's arena, its rows' losses (as
// cuda_crossentropy_forward_backward: pads contribute nothing), and when dx or dW is non-NULL
// dlogits = scale * (softmax - onehot) in place; then, per group of G rows
// (cuda_classifier_group_rows: a chunk in fp32, CUDA_CLASSIFIER_GROUP_CHUNKS chunks in bf16),
//   dx(N, C) = dlogits @ W   (the group's rows; written)  dW(V, C) += dlogits^T @ x
// *loss += scale * (sum of the N row losses) at the end (NULL: not computed). Each of loss,
// dx, dW may be NULL. cuda_classifier_arena_bytes(N, V, bf16) (below) is what the call takes
// of the arena (reserve it: cuda_ctx_reserve). The bf16 form takes bf16 x and W and rounds each
// chunk's dlogits to bf16 into its group's buffer for the two gradient GEMMs, as every bf16
// GEMM operand (the loss kernel writes them so: no conversion pass).
int cuda_classifier_chunk_rows(int N, int V);
// The GPU's own chunking, in plain C for every build (an estimate, the stage's reservation:
// engine/model/model_cuda_arena.c): the chunk's fp32 logits take at most
// CUDA_CLASSIFIER_CHUNK_BYTES, 64 MiB (1.3 % of the 3.3 GB the full (16 x 1024, 50257) logits
// would take, and still R = 332 rows at V = 50257, wide enough for each chunk's GEMM to run at
// full rate). R is a multiple of 4 where it can be: a bf16 group's dlogits hold its chunks back
// to back, so chunk k's rows start k R V values in, and the loss kernel stores 4 of them at once
// only where a row shares its logits' 16-byte alignment (at V = 50257 an odd R left 3 chunks of
// 4 to single stores). classifier.cu's cuda_classifier_chunk_rows returns the first; the GPU
// emulator (tests/gpu_emu) runs smaller chunks but takes the GPU's arena.
#define CUDA_CLASSIFIER_CHUNK_BYTES ((size_t)64 << 20)
static inline int cuda_classifier_gpu_chunk_rows(int N, int V) {
    size_t rows = CUDA_CLASSIFIER_CHUNK_BYTES / ((size_t)(V > 0 ? V : 1) * sizeof(float));
    if (rows >= 4) rows -= rows % 4;
    if (rows < 1) rows = 1;
    return N > 0 && rows > (size_t)N ? N : (int)rows;
}
// The rows of one pair of gradient GEMMs (dx, dW; classifier.cu says why): a chunk's in fp32,
// CUDA_CLASSIFIER_GROUP_CHUNKS chunks' in bf16, whose dlogits are bf16 (at most N).
#define CUDA_CLASSIFIER_GROUP_CHUNKS 4
static inline int cuda_classifier_rows_of_group(int N, int chunk_rows, bool bf16) {
    const long g = (long)chunk_rows * (bf16 ? CUDA_CLASSIFIER_GROUP_CHUNKS : 1);
    return g > N ? N : (int)g;
}
static inline int cuda_classifier_group_rows(int N, int V, bool bf16) {
    return cuda_classifier_rows_of_group(N, cuda_classifier_chunk_rows(N, V), bf16);
}
// Row losses (N doubles), the chunk's logits (R x V floats), in bf16 mode the group's dlogits
// (G x V bf16s).
static inline size_t cuda_classifier_arena_bytes(int N, int V, bool bf16) {
    if (N <= 0) return 0;
    const int R = cuda_classifier_gpu_chunk_rows(N, V);
    return cuda_arena_round((size_t)N * sizeof(double)) + cuda_arena_round((size_t)R * V * sizeof(float)) +
           (bf16 ? cuda_arena_round((size_t)cuda_classifier_rows_of_group(N, R, true) * V * sizeof(cuda_bf16)) : 0);
}
void cuda_classifier(CudaCtx *ctx, double *loss, float *dx, float *dW, const float *x,
                     const float *W, const int32_t *targets, int N, int C, int V, float scale);
void cuda_classifier_bf16(CudaCtx *ctx, double *loss, float *dx, float *dW, const cuda_bf16 *x,
                          const cuda_bf16 *W, const int32_t *targets, int N, int C, int V,
                          float scale);

// ---- adamw.cu ----------------------------------------------------------------------------
// adamw_update on fp32 master params and moments, the same fp32 arithmetic term for term, on
// the gradients scaled by clip (the clip factor; 1 when not clipping): what grad_scale then
// adamw_update make on the CPU, with grads only read (they keep their unscaled values: no pass
// of its own rewrites them). When params_bf16 is non-NULL it also receives bf16(params) (the
// GEMM working copy).
void cuda_adamw_update(CudaCtx *ctx, float *params, cuda_bf16 *params_bf16, const float *grads,
                       float clip, float *m, float *v, size_t n, int t, double lr, double beta1,
                       double beta2, double eps, double weight_decay);

// ---- gradnorm.cu -------------------------------------------------------------------------
// *sumsq (device double) += sum of g^2 over n values, accumulated in double, fixed order.
// Call once per tensor; the total is what grad_sum_squares returns summed over tensors. Blocks
// of 256 threads take 4 values a thread, at most 1024 blocks (cuda_grad_sum_squares_blocks:
// it depends on n only, so the order is fixed), each block's partial sum a double in the arena.
static inline int cuda_grad_sum_squares_blocks(size_t n) {
    const size_t want = n / (256 * 4) + (n % (256 * 4) != 0);   // (no overflow at SIZE_MAX)
    return (int)(want < 1024 ? (want ? want : 1) : 1024);
}
static inline size_t cuda_grad_sum_squares_arena_bytes(size_t n) {
    return n ? cuda_arena_round((size_t)cuda_grad_sum_squares_blocks(n) * sizeof(double)) : 0;
}
void cuda_grad_sum_squares(CudaCtx *ctx, double *sumsq, const float *g, size_t n);
// (A step's clip has no pass of its own: cuda_adamw_update applies the factor as it reads g.)

#ifdef __cplusplus
}
#endif
#endif
