// kernels/cuda/flash_tile.h: the per-tile math of flash attention (kernels/cuda/flash_attention.cu),
// in plain C that nvcc compiles for the device and a C compiler for the host. The CUDA kernels
// are loops over tiles that call these functions; the GPU emulator (tests/gpu_emu/flash_emu.c)
// runs the same functions tile by tile in the kernels' order, so the emulated GPU computes
// with the algorithm the GPU runs, not with the CPU's two-pass reference (kernels/cpu).
//
// Flash attention (FlashAttention-2), causal, per (sequence b, query head h):
//   forward, query block by query block, key block by key block (keys in increasing order):
//     s_ij = scale * q_i . k_j  (-inf where j > i),  scale = 1 / sqrt(HD)
//     m_i' = max(m_i, max_j s_ij),  alpha = exp(m_i - m_i'),  p_ij = exp(s_ij - m_i')
//     l_i  = alpha * l_i + sum_j p_ij,   acc_i = alpha * acc_i + sum_j p_ij v_j
//   then out_i = acc_i / l_i, and only out and L_i = m_i + log l_i are kept: O(T) per head.
//   backward, with D_i = dout_i . out_i first, recomputes each tile's probabilities from L:
//     p_ij = exp(s_ij - L_i),  dp_ij = dout_i . v_j,  ds_ij = p_ij (dp_ij - D_i)
//     dq_i += scale * sum_j ds_ij k_j,  dk_j += scale * sum_i ds_ij q_i,  dv_j += sum_i p_ij dout_i
//
// The fp32 kernels (flash_kernels.cuh: fp32 mode, and head dims the tensor cores do not take)
// do all arithmetic in fp32, nothing rounded to bf16. Every sum here runs in one fixed order
// (index order), so a tile's results depend only on its inputs, not on how the GPU spreads the
// tile's elements over threads. The bf16 mode's tensor-core kernels take the same softmax steps
// in base 2 and round their products' operands: "Tensor-core tiles" at the end.
#ifndef PPTRAIN_KERNELS_CUDA_FLASH_TILE_H
#define PPTRAIN_KERNELS_CUDA_FLASH_TILE_H
#include <math.h>

#ifdef __CUDACC__
#define FLASH_FN static __host__ __device__ __forceinline__
#else
#define FLASH_FN static inline
#endif

#define FLASH_BQ 32          // query rows per tile
#define FLASH_BK 32          // key rows per tile
#define FLASH_MAX_HD 256     // head dims the kernels take (their shared tiles are sized by HD)

// The tiles a sequence of T positions splits into.
FLASH_FN int flash_tiles(int T, int rows) { return (T + rows - 1) / rows; }

// a(n) . b(n), index order.
FLASH_FN float flash_dot(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int d = 0; d < n; d++) s += a[d] * b[d];
    return s;
}

// sum over j < n of a[j * lda] * b[j * ldb], index order: a row or column of one tile
// against a row or column of another (row-major tiles, lda and ldb their row strides or 1).
FLASH_FN float flash_strided_dot(const float *a, long lda, const float *b, long ldb, int n) {
    float s = 0.0f;
    for (int j = 0; j < n; j++) s += a[j * lda] * b[j * ldb];
    return s;
}

// The causal score of query position qpos against key position kpos: -inf above the diagonal.
FLASH_FN float flash_score(const float *q, const float *k, int HD, float scale, int qpos, int kpos) {
    return kpos <= qpos ? scale * flash_dot(q, k, HD) : -INFINITY;
}

// The online softmax's steps for one query row against one key tile, as the forward kernel
// spreads them over its threads (the row's max and rescale factor, then every probability,
// then the row's sum); flash_softmax_update below is the same steps in one call.
// m' = max(m, max_j s_j).
FLASH_FN float flash_row_max(float m, const float *s, int n) {
    for (int j = 0; j < n; j++) m = fmaxf(m, s[j]);
    return m;
}
// The factor alpha = exp(m - m') that rescales the row's earlier sum and accumulator: 0 on the
// row's first tile (m = -inf), 1 while the row has seen only masked keys (m' = -inf).
FLASH_FN float flash_rescale(float m, float m_new) { return m_new == -INFINITY ? 1.0f : expf(m - m_new); }
// A probability p = exp(s - m'), 0 while the row has seen only masked keys.
FLASH_FN float flash_exp(float s, float m_new) { return m_new == -INFINITY ? 0.0f : expf(s - m_new); }
// sum_j p_j, index order.
FLASH_FN float flash_row_sum(const float *p, int n) {
    float sum = 0.0f;
    for (int j = 0; j < n; j++) sum += p[j];
    return sum;
}

// One query row's online-softmax step against one key tile: s(n) scores in, probabilities
// exp(s - m') out (in place); the running max m and sum l are updated, and the factor alpha
// by which the row's earlier accumulator must be rescaled is returned. A row that has seen
// only masked keys so far (m' = -inf) keeps m = -inf and l = 0 and gets p = 0 and alpha = 1.
FLASH_FN float flash_softmax_update(float *m, float *l, float *s, int n) {
    const float m_new = flash_row_max(*m, s, n), alpha = flash_rescale(*m, m_new);
    for (int j = 0; j < n; j++) s[j] = flash_exp(s[j], m_new);
    if (m_new != -INFINITY) {
        *l = *l * alpha + flash_row_sum(s, n);
        *m = m_new;
    }
    return alpha;
}

// One element of a row's accumulator after a tile: alpha * acc + sum_j p[j] v[j][d], with
// vcol = &v[0][d] of the (n, ld) value tile.
FLASH_FN float flash_acc_update(float acc, float alpha, const float *p, const float *vcol, long ld, int n) {
    return acc * alpha + flash_strided_dot(p, 1, vcol, ld, n);
}

// The row's logsumexp of its scores, what backward recomputes the probabilities from.
FLASH_FN float flash_logsumexp(float m, float l) { return m + logf(l); }

// Backward: the probability of a score recomputed from its row's logsumexp (0 where masked).
FLASH_FN float flash_prob(float s, float lse) { return s == -INFINITY ? 0.0f : expf(s - lse); }

// Backward: the score gradient (without the scale) from p, dp = dout_i . v_j and D_i.
FLASH_FN float flash_dscore(float p, float dp, float D) { return p * (dp - D); }

// dk and dv of a kv head from its g query heads' shares x[0], x[stride], ...: summed in head
// order (the GPU computes each share in its own block).
FLASH_FN float flash_group_sum(const float *x, long stride, int g) {
    float sum = x[0];
    for (int j = 1; j < g; j++) sum += x[j * stride];
    return sum;
}


// ---- Tensor-core tiles (kernels/cuda/flash_mma_kernels.cuh: bf16 mode) ---------------------
// The bf16 kernels run the products on tensor cores: q, k, v and dout come bf16 (bf16 mode
// stores them so), and the probabilities are rounded to bf16 before P v and P^T dout and the
// score gradients before dS k and dS^T q; every product accumulates in fp32, and the softmax and
// everything else stays fp32 (the steps above, in base 2: flash_mma_exp below). Tiles are 64
// rows (4 warps of 16) by 64, and a product is summed 16 terms at a time (one mma of depth 16),
// each 16 added to the running sum. The emulator's model of one mma is the 16 products summed in
// index order from +0, then added to the accumulator; the tensor core's own order inside the 16
// is unpublished, so the GPU agrees with the emulator to rounding, not bitwise. A softmax row of
// a 64-key tile is 4 lanes' (mma.sync's layout: lane t of the row's quad holds columns 8 j + 2 t
// and 8 j + 2 t + 1).
#define FLASH_MMA_ROWS 64     // query rows and key rows per tile
#define FLASH_MMA_DEPTH 16    // products one mma sums
#define FLASH_MMA_MAX_HD 128  // head dims the mma kernels take: multiples of 16 up to this

// Whether the tensor-core kernels take head dim HD (the others run the fp32 kernels).
FLASH_FN int flash_mma_takes(int HD) { return HD > 0 && HD % FLASH_MMA_DEPTH == 0 && HD <= FLASH_MMA_MAX_HD; }

// Whether cuda_flash_attention_rope_backward_bf16's kernels rotate dq and dk back by RoPE
// themselves: wherever the tensor-core kernels run. dq, and dk without grouped queries, in the
// kernels' registers (a block holds whole rows of its head); dk with grouped queries in the group
// sum after them (a kv head's dk is the sum of its query heads' shares). At the other head dims
// RoPE's own kernel rotates both.
FLASH_FN int flash_rope_fused(int HD) { return flash_mma_takes(HD); }

// x rounded to the nearest bfloat16 (ties to even), as a float; NaN stays NaN.
FLASH_FN float flash_bf16(float x) {
    union { float f; unsigned int u; } b;
    b.f = x;
    if ((b.u & 0x7fffffffu) > 0x7f800000u) return x;
    b.u += 0x7fffu + ((b.u >> 16) & 1u);
    b.u &= 0xffff0000u;
    return b.f;
}

// The tensor-core kernels' softmax runs in base 2 with the scale folded in, as FlashAttention-2
// does: the scores stay as the mma made them (s, unscaled) and a row's max m is taken over those,
// so each probability costs one multiply-add and one exp2 (a single MUFU.EX2 on the GPU), where
// expf of a scaled score took about 10 instructions of the FP32 pipe besides its EX2. With
// c = scale log2(e):  p = 2^(s c - m c),  alpha = 2^((m - m') c),  and the row's kept
// logsumexp L = m scale + log(l) stays the natural one; the backward recomputes
// p = 2^(s c - L log2(e)) (flash_mma_prob, from L2 = flash_mma_lse2(L) taken once a row).
// In exact arithmetic these are the fp32 kernels' probabilities; in fp32 they differ by a few
// units in the last place, far under the bf16 rounding they feed.
#define FLASH_LOG2E 1.44269504088896341f
FLASH_FN float flash_mma_log2_scale(float scale) { return scale * FLASH_LOG2E; }
// 2^x: on the GPU one MUFU.EX2 (ex2.approx.ftz, about 2 units in the last place; a result under
// 2^-126, a probability nothing can see, flushes to 0, which spares exp2f's rescaling of
// subnormals), on the host exp2f.
#ifdef __CUDA_ARCH__
FLASH_FN float flash_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
#else
FLASH_FN float flash_exp2(float x) { return exp2f(x); }
#endif
// The row's max m' times c, as flash_mma_exp takes it: 0 while the row has seen only masked
// keys (m' = -inf; its scores are all -inf, so its probabilities come out 2^-inf = 0), which
// spares flash_mma_exp a compare and select per element (one a row here).
FLASH_FN float flash_mma_max_c(float m_new, float c) { return m_new == -INFINITY ? 0.0f : m_new * c; }
// p = 2^(s c - m c) for a raw score s (-inf where masked), mc = flash_mma_max_c(m', c).
FLASH_FN float flash_mma_exp(float s, float mc, float c) { return flash_exp2(fmaf(s, c, -mc)); }
// alpha = 2^((m - m') c): 0 on the row's first tile (m = -inf), 1 while m' = -inf.
FLASH_FN float flash_mma_rescale(float m, float m_new, float c) {
    return m_new == -INFINITY ? 1.0f : flash_exp2((m - m_new) * c);
}
// The row's natural logsumexp from its raw max and its sum.
FLASH_FN float flash_mma_logsumexp(float m, float l, float scale) { return m * scale + logf(l); }
// L log2(e): what the backward's probabilities are taken against.
FLASH_FN float flash_mma_lse2(float lse) { return lse * FLASH_LOG2E; }
// Backward: p = 2^(s c - L2) for a raw score s (0 where masked, s = -inf: 2^-inf is +0 on
// both sides, as long as L2 is not -inf, and a logsumexp is never: every row, padding
// included, sees key 0, and padded rows take L2 = 0). Unguarded, so the kernels' element loops
// have no compare and no branch around it.
FLASH_FN float flash_mma_prob(float s, float lse2, float c) { return flash_exp2(fmaf(s, c, -lse2)); }

// acc + (sum over k < 16 of a[k * lda] * b[k * ldb], in index order from +0): one mma step of
// one element, as the emulator models it.
FLASH_FN float flash_mma_step(float acc, const float *a, long lda, const float *b, long ldb) {
    float t = 0.0f;
    for (int j = 0; j < FLASH_MMA_DEPTH; j++) t += a[j * lda] * b[j * ldb];
    return acc + t;
}

// acc after n / 16 mma steps (n a multiple of 16): a dot product as the mma kernels sum it.
FLASH_FN float flash_mma_dot(float acc, const float *a, long lda, const float *b, long ldb, int n) {
    for (int j = 0; j < n; j += FLASH_MMA_DEPTH) acc = flash_mma_step(acc, a + j * lda, lda, b + j * ldb, ldb);
    return acc;
}

#endif
