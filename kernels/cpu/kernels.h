// kernels/cpu: forward and backward of every op of a Llama decoder, fp32, on raw buffers.
//
// Dimension letters (as in llm.c):
//   N  = rows = B*T tokens of a microbatch      C  = hidden size
//   B  = sequences, T = sequence length          FF = intermediate (MLP) size
//   NH = query heads, NKV = key/value heads, HD = head dim (NH % NKV == 0)
//   V  = vocabulary size, IC/OC = a linear layer's in/out features
// All tensors are row-major and contiguous unless a leading dimension says otherwise.
// Linear weights use the PyTorch/Hugging Face layout (OC, IC): y = x @ W^T.
//
// Contract for *_backward: gradients of PARAMETERS are ACCUMULATED (+=) into the buffers
// given (microbatch accumulation is free; the caller zeroes them once per step), and so are
// the input gradients of rmsnorm and embedding (residual branches). The input gradients of
// linear_backward_input (unless accumulate), rope, attention and swiglu are OVERWRITTEN: each
// is the first write into its buffer, so nobody zeroes it first. Each declaration says which.
// Buffers never alias unless a comment says they may.
//
// Parallel loops run on the calling thread alone when their work is under
// KERNEL_PARALLEL_MIN_WORK (floats touched, or multiply-adds for attention): forking and
// joining an OpenMP team costs microseconds, more than such a loop (tiny's rows at T = 16
// ran 3x slower on 2 threads than on 1). Every kernel's bits are the same at any thread
// count, so the choice changes only time.
#define KERNEL_PARALLEL_MIN_WORK 65536
// No function here allocates on the heap: scratch space is passed in by the caller.
#ifndef PPTRAIN_KERNELS_CPU_H
#define PPTRAIN_KERNELS_CPU_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// ---- embedding.c -------------------------------------------------------------------------
// out(N, C) = wte[tokens[n]]; tokens in [0, V).
void embedding_forward(float *out, const int32_t *tokens, const float *wte, int N, int C);
// dwte(V, C) += scatter of dout(N, C) by token.
void embedding_backward(float *dwte, const float *dout, const int32_t *tokens, int N, int C);

// ---- rmsnorm.c ---------------------------------------------------------------------------
// out = inp * rstd * weight, rstd(N) = 1/sqrt(mean(inp^2) + eps) (saved for backward).
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight,
                     int N, int C, float eps);
// dinp(N, C) += d/dinp; dweight(C) += sum_n dout * inp * rstd. Either output may be NULL
// (the zero-bubble split computes the input gradient and the weight gradient apart).
void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                      const float *weight, const float *rstd, int N, int C);

// ---- gemm.c ------------------------------------------------------------------------------
// C(M, N) = alpha * op(A) @ op(B) + beta * C, row-major, op = transpose when ta / tb, with
// leading dimensions lda, ldb, ldc as BLAS takes them. gemm_serial: one product on the calling
// thread (oneDNN's sgemm, kernels/cpu/blas_core.h), its bits a function of the shape alone.
void gemm_serial(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc);
// gemm_fixed: the same product on all the OpenMP threads, its bits still the shape's alone: C
// is cut into gemm_tile_count(M, N, K) tiles of whole rows or whole columns (a function of the
// shape alone), each one gemm_serial, spread over the OpenMP threads.
void gemm_fixed(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                int ldb, float beta, float *C, int ldc);
int gemm_tile_count(int M, int N, int K);

// ---- linear.c (gemm_fixed) ---------------------------------------------------------------
// out(N, OC) = inp(N, IC) @ W(OC, IC)^T        (overwrites out)
void linear_forward(float *out, const float *inp, const float *W, int N, int IC, int OC);
// dinp(N, IC) = dout(N, OC) @ W(OC, IC), or += with accumulate (the first of several
// products that add into one gradient overwrites, so nobody zeroes it first)
void linear_backward_input(float *dinp, const float *dout, const float *W, int N, int IC, int OC, bool accumulate);
// dW(OC, IC) += dout(N, OC)^T @ inp(N, IC)
void linear_backward_weight(float *dW, const float *dout, const float *inp, int N, int IC, int OC);
// A Linear's bias: out(N, OC) += b(OC) on every row; db(OC) += the column sums of dout(N, OC),
// rows in order (bits independent of the thread count).
void bias_forward(float *out, const float *b, int N, int OC);
void bias_backward(float *db, const float *dout, int N, int OC);

// ---- rope.c ------------------------------------------------------------------------------
// Rotary inverse frequencies inv_freq(HD/2), Hugging Face convention: 1 / theta^(2i/HD) in
// fp32; with llama3 (NULL: none) rescaled as Llama 3.1's RoPE does (rope_type "llama3": long
// wavelengths divided by factor, short ones kept, the band between interpolated), op for op as
// transformers computes it.
typedef struct {
    float factor, low_freq_factor, high_freq_factor;
    int original_max_positions;
} RopeLlama3;
void rope_inv_freq(float *inv_freq, int HD, float theta, const RopeLlama3 *llama3);
// cos/sin(T, HD/2) hold cos/sin of the fp32 angle (float)t * inv_freq[i].
void rope_tables(float *cos_tab, float *sin_tab, int T, int HD, const float *inv_freq);
// x(B, T, H, HD) -> out(B, T, H, HD), half-split pairs (i, i + HD/2):
//   out[i]        = x[i] * cos - x[i+HD/2] * sin
//   out[i+HD/2]   = x[i+HD/2] * cos + x[i] * sin
// Position of row (b, t) is t. out may alias x.
void rope_forward(float *out, const float *x, const float *cos_tab, const float *sin_tab,
                  int B, int T, int H, int HD);
// dx = R^T dout (the inverse rotation; overwrites dx). dx must not alias dout.
void rope_backward(float *dx, const float *dout, const float *cos_tab, const float *sin_tab,
                   int B, int T, int H, int HD);

// ---- attention.c -------------------------------------------------------------------------
// Causal grouped-query attention. q(B, T, NH, HD), k and v (B, T, NKV, HD); query head h
// reads kv head h / (NH / NKV). att(B, NH, T, T) receives the softmax probabilities
// (row t valid for columns 0..t, zero above) and is kept for backward.
// out(B, T, NH, HD) = softmax(q k^T / sqrt(HD) + causal mask) v     (overwrites out)
void attention_forward(float *out, float *att, const float *q, const float *k, const float *v,
                       int B, int T, int NH, int NKV, int HD);
// dq, dk, dv = gradients (overwritten). scratch: B*NH*T*T floats (dscores), caller-owned.
void attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                        const float *q, const float *k, const float *v, const float *att,
                        int B, int T, int NH, int NKV, int HD);

// ---- swiglu.c ----------------------------------------------------------------------------
// out(N, FF) = silu(gate) * up, silu(x) = x * sigmoid(x).   (overwrites out)
void swiglu_forward(float *out, const float *gate, const float *up, int N, int FF);
// dgate, dup (N, FF) = gradients (overwritten).
void swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                     const float *up, int N, int FF);

// ---- residual.c --------------------------------------------------------------------------
// out(n) = a + b. out may alias a or b.
void residual_forward(float *out, const float *a, const float *b, size_t n);

// ---- crossentropy.c ----------------------------------------------------------------------
// Fused softmax + cross-entropy over logits(N, V) with targets(N); a negative target is a
// pad and contributes nothing. Returns scale * sum over non-pad rows of -log p[target]
// (computed in double). With scale = 1 / (non-pad targets of the whole batch), summing the
// returns of all microbatches gives the batch mean whatever the microbatch count.
// When dlogits is non-NULL it is OVERWRITTEN with d(returned loss)/dlogits
// = scale * (softmax - onehot), zero on pad rows. dlogits may alias logits.
double crossentropy_forward_backward(float *dlogits, const float *logits, const int32_t *targets,
                                     int N, int V, float scale);

// ---- adamw.c -----------------------------------------------------------------------------
// One AdamW step over n parameters, exactly torch.optim.AdamW's update (decoupled decay):
//   p -= lr * wd * p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)        t = 1, 2, ...
// Hyperparameters arrive as doubles (as torch receives Python floats) and are rounded the
// way torch rounds them for fp32 tensors.
void adamw_update(float *params, const float *grads, float *m, float *v, size_t n, int t,
                  double lr, double beta1, double beta2, double eps, double weight_decay);

// ---- gradnorm.c --------------------------------------------------------------------------
// sum of g^2 over n values, accumulated in double in fixed segments: the bits depend on n
// alone, not on the thread count. The global norm adds these per tensor, in the model's
// tensor order (engine/model/model.h, stage_grad_sum_squares).
double grad_sum_squares(const float *g, size_t n);
// g *= s (gradient clipping).
void grad_scale(float *g, size_t n, float s);
// torch.nn.utils.clip_grad_norm_'s factor: min(1, max_norm / (total_norm + 1e-6)).
float grad_clip_factor(double total_norm, float max_norm);
// ||a - b|| / ||b|| over n values in double (||a - b|| when b is all zero): how parity and
// reference tests, and `pptrain check`, compare tensors.
double rel_norm_diff(const float *a, const float *b, size_t n);

#endif
