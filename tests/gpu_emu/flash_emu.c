// tests/gpu_emu/flash_emu.c: flash attention on the CPU in the GPU's tile order (flash_emu.h).
// Each loop nest below is one kernel of kernels/cuda/flash_kernels.cuh: its outer loops are
// the kernel's grid (one tile per block), its inner loops the elements the block's threads
// share out. Every element is computed by the same flash_tile.h call, on the same inputs, as
// on the GPU; tiles are visited in the order each GPU block visits them (keys increasing in
// forward and for dq; queries increasing, a head at a time, for dk and dv, whose group of
// heads is then summed in head order).
#include "tests/gpu_emu/flash_emu.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "kernels/cuda/flash_tile.h"

typedef struct {
    int B, T, NH, NKV, HD, g;
    float scale;
} Shape;

static Shape shape_of(int B, int T, int NH, int NKV, int HD) {
    return (Shape){.B = B, .T = T, .NH = NH, .NKV = NKV, .HD = HD, .g = NH / NKV,
                   .scale = (float)(1.0 / sqrt((double)HD))};
}

// Row t of head h of sequence b in a q-like (B, T, NH, HD) or k-like (B, T, NKV, HD) tensor,
// and the (B, NH, T) row statistics.
static size_t qrow(const Shape *s, int b, int t, int h) { return (((size_t)b * s->T + t) * s->NH + h) * s->HD; }
static size_t krow(const Shape *s, int b, int t, int h) { return (((size_t)b * s->T + t) * s->NKV + h) * s->HD; }
static size_t stat(const Shape *s, int b, int h, int t) { return ((size_t)b * s->NH + h) * s->T + t; }
// A gradient as the kernels write it (flash_written): 0 + x, what adding into zeros gave.
static float written(float x) { return 0.0f + x; }
static int min_int(int a, int b) { return a < b ? a : b; }

static void *scratch(size_t floats) {
    float *p = calloc(floats ? floats : 1, sizeof(float));
    if (!p) abort();
    return p;
}

// flash_forward_kernel: block (query tile qt, head h of sequence b).
static void forward_tile(const Shape *s, float *out, float *lse, const float *q, const float *k, const float *v, int b,
                         int h, int qt, float *S, float *acc) {
    const int q0 = qt * FLASH_BQ, nq = min_int(FLASH_BQ, s->T - q0), kvh = h / s->g, HD = s->HD;
    const long ldk = (long)s->NKV * HD;
    float m[FLASH_BQ], l[FLASH_BQ], alpha[FLASH_BQ];
    for (int r = 0; r < nq; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        for (int d = 0; d < HD; d++) acc[r * HD + d] = 0.0f;
    }
    const int key_tiles = (q0 + nq - 1) / FLASH_BK + 1;   // causal: none past the tile's last query
    for (int kt = 0; kt < key_tiles; kt++) {
        const int k0 = kt * FLASH_BK, nk = min_int(FLASH_BK, s->T - k0);
        for (int r = 0; r < nq; r++)
            for (int c = 0; c < nk; c++)
                S[r * FLASH_BK + c] = flash_score(q + qrow(s, b, q0 + r, h), k + krow(s, b, k0 + c, kvh), HD,
                                                  s->scale, q0 + r, k0 + c);
        for (int r = 0; r < nq; r++) alpha[r] = flash_softmax_update(&m[r], &l[r], &S[r * FLASH_BK], nk);
        for (int r = 0; r < nq; r++)
            for (int d = 0; d < HD; d++)
                acc[r * HD + d] = flash_acc_update(acc[r * HD + d], alpha[r], &S[r * FLASH_BK],
                                                   v + krow(s, b, k0, kvh) + d, ldk, nk);
    }
    for (int r = 0; r < nq; r++) {
        for (int d = 0; d < HD; d++) out[qrow(s, b, q0 + r, h) + d] = acc[r * HD + d] / l[r];
        lse[stat(s, b, h, q0 + r)] = flash_logsumexp(m[r], l[r]);
    }
}

void flash_emu_forward(float *out, float *lse, const float *q, const float *k, const float *v, int B, int T, int NH,
                       int NKV, int HD) {
    const Shape s = shape_of(B, T, NH, NKV, HD);
    float *S = scratch((size_t)FLASH_BQ * FLASH_BK), *acc = scratch((size_t)FLASH_BQ * HD);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int qt = 0; qt < flash_tiles(T, FLASH_BQ); qt++) forward_tile(&s, out, lse, q, k, v, b, h, qt, S, acc);
    free(S);
    free(acc);
}

// flash_decode_kernel: block h, the one query row of position n - 1 (B = 1, T = n for the keys).
void flash_emu_decode(float *out, const float *q, const float *k, const float *v, int n, int NH, int NKV, int HD) {
    const Shape s = shape_of(1, n, NH, NKV, HD);
    float S[FLASH_BK], *acc = scratch((size_t)HD);
    for (int h = 0; h < NH; h++) {
        const int kvh = h / s.g;
        const float *qh = q + (size_t)h * HD;
        float m = -INFINITY, l = 0.0f;
        for (int d = 0; d < HD; d++) acc[d] = 0.0f;
        for (int kt = 0; kt < flash_tiles(n, FLASH_BK); kt++) {
            const int k0 = kt * FLASH_BK, nk = min_int(FLASH_BK, n - k0);
            for (int c = 0; c < nk; c++)
                S[c] = flash_score(qh, k + krow(&s, 0, k0 + c, kvh), HD, s.scale, n - 1, k0 + c);
            const float alpha = flash_softmax_update(&m, &l, S, nk);
            for (int d = 0; d < HD; d++)
                acc[d] = flash_acc_update(acc[d], alpha, S, v + krow(&s, 0, k0, kvh) + d, (long)NKV * HD, nk);
        }
        for (int d = 0; d < HD; d++) out[(size_t)h * HD + d] = acc[d] / l;
    }
    free(acc);
}

// The probabilities P and score gradients dS (without the scale) of queries [q0, q0 + nq) of
// head h against keys [k0, k0 + nk) of its kv head, into (BQ, BK) tiles: what both backward
// kernels recompute per tile.
static void backward_scores(const Shape *s, float *P, float *dS, const float *dout, const float *q, const float *k,
                            const float *v, const float *lse, const float *dsum, int b, int h, int q0, int nq, int k0,
                            int nk) {
    const int kvh = h / s->g;
    for (int r = 0; r < nq; r++)
        for (int c = 0; c < nk; c++) {
            const size_t qi = qrow(s, b, q0 + r, h), kj = krow(s, b, k0 + c, kvh);
            const float sc = flash_score(q + qi, k + kj, s->HD, s->scale, q0 + r, k0 + c);
            const float p = flash_prob(sc, lse[stat(s, b, h, q0 + r)]);
            const float dp = flash_dot(dout + qi, v + kj, s->HD);
            P[r * FLASH_BK + c] = p;
            dS[r * FLASH_BK + c] = flash_dscore(p, dp, dsum[stat(s, b, h, q0 + r)]);
        }
}

// flash_dq_kernel: block (query tile qt, head h of sequence b); keys increasing.
static void dq_tile(const Shape *s, float *dq, const float *dout, const float *q, const float *k, const float *v,
                    const float *lse, const float *dsum, int b, int h, int qt, float *P, float *dS, float *acc) {
    const int q0 = qt * FLASH_BQ, nq = min_int(FLASH_BQ, s->T - q0), kvh = h / s->g, HD = s->HD;
    const long ldk = (long)s->NKV * HD;
    for (int i = 0; i < nq * HD; i++) acc[i] = 0.0f;
    const int key_tiles = (q0 + nq - 1) / FLASH_BK + 1;
    for (int kt = 0; kt < key_tiles; kt++) {
        const int k0 = kt * FLASH_BK, nk = min_int(FLASH_BK, s->T - k0);
        backward_scores(s, P, dS, dout, q, k, v, lse, dsum, b, h, q0, nq, k0, nk);
        for (int r = 0; r < nq; r++)
            for (int d = 0; d < HD; d++)
                acc[r * HD + d] += flash_strided_dot(&dS[r * FLASH_BK], 1, k + krow(s, b, k0, kvh) + d, ldk, nk);
    }
    for (int r = 0; r < nq; r++)
        for (int d = 0; d < HD; d++) dq[qrow(s, b, q0 + r, h) + d] = written(s->scale * acc[r * HD + d]);
}

// flash_dkdv_kernel: block (key tile kt, query head h of sequence b), the query tiles that see
// the key tile, increasing, into head h's share (row-major (BK, HD) at share + j * BK * HD for
// the group's j-th head); then flash_group_sum_kernel (or, with one head a group, the block
// itself) writes dk and dv from the group's shares, summed in head order.
static void dkdv_tile(const Shape *s, float *dk, float *dv, const float *dout, const float *q, const float *k,
                      const float *v, const float *lse, const float *dsum, int b, int kvh, int kt, float *P, float *dS,
                      float *dk_share, float *dv_share) {
    const int k0 = kt * FLASH_BK, nk = min_int(FLASH_BK, s->T - k0), HD = s->HD;
    const long ldq = (long)s->NH * HD, tile = (long)FLASH_BK * HD;
    for (int j = 0; j < s->g; j++) {
        const int h = kvh * s->g + j;
        float *dk_acc = dk_share + j * tile, *dv_acc = dv_share + j * tile;
        for (int i = 0; i < nk * HD; i++) dk_acc[i] = dv_acc[i] = 0.0f;
        for (int qt = k0 / FLASH_BQ; qt < flash_tiles(s->T, FLASH_BQ); qt++) {
            const int q0 = qt * FLASH_BQ, nq = min_int(FLASH_BQ, s->T - q0);
            backward_scores(s, P, dS, dout, q, k, v, lse, dsum, b, h, q0, nq, k0, nk);
            for (int c = 0; c < nk; c++)
                for (int d = 0; d < HD; d++) {
                    dk_acc[c * HD + d] += flash_strided_dot(&dS[c], FLASH_BK, q + qrow(s, b, q0, h) + d, ldq, nq);
                    dv_acc[c * HD + d] += flash_strided_dot(&P[c], FLASH_BK, dout + qrow(s, b, q0, h) + d, ldq, nq);
                }
        }
    }
    for (int c = 0; c < nk; c++)
        for (int d = 0; d < HD; d++) {
            dk[krow(s, b, k0 + c, kvh) + d] = written(s->scale * flash_group_sum(&dk_share[c * HD + d], tile, s->g));
            dv[krow(s, b, k0 + c, kvh) + d] = written(flash_group_sum(&dv_share[c * HD + d], tile, s->g));
        }
}

void flash_emu_backward(float *dq, float *dk, float *dv, float *dsum, const float *dout, const float *q,
                        const float *k, const float *v, const float *out, const float *lse, int B, int T, int NH,
                        int NKV, int HD) {
    const Shape s = shape_of(B, T, NH, NKV, HD);
    for (int b = 0; b < B; b++)   // flash_rowsum_kernel: D = rowsum(dout * out), one row a thread
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++)
                dsum[stat(&s, b, h, t)] = flash_dot(dout + qrow(&s, b, t, h), out + qrow(&s, b, t, h), HD);
    float *P = scratch((size_t)FLASH_BQ * FLASH_BK), *dS = scratch((size_t)FLASH_BQ * FLASH_BK);
    float *dq_acc = scratch((size_t)FLASH_BQ * HD);
    float *dk_share = scratch((size_t)s.g * FLASH_BK * HD), *dv_share = scratch((size_t)s.g * FLASH_BK * HD);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int qt = 0; qt < flash_tiles(T, FLASH_BQ); qt++)
                dq_tile(&s, dq, dout, q, k, v, lse, dsum, b, h, qt, P, dS, dq_acc);
    for (int b = 0; b < B; b++)
        for (int kvh = 0; kvh < NKV; kvh++)
            for (int kt = 0; kt < flash_tiles(T, FLASH_BK); kt++)
                dkdv_tile(&s, dk, dv, dout, q, k, v, lse, dsum, b, kvh, kt, P, dS, dk_share, dv_share);
    free(P);
    free(dS);
    free(dq_acc);
    free(dk_share);
    free(dv_share);
}

// ---- The tensor-core kernels (kernels/cuda/flash_mma_kernels.cuh), bf16 mode ---------------
// Tiles of FLASH_MMA_ROWS, operands rounded to bf16 into zero-padded (64, HD) copies as the
// kernels load them, every product summed by flash_mma_dot / flash_mma_step (16 terms a step)
// in the kernels' order, softmax rows summed as the forward kernel sums them, by an mma against
// ones (mma_row_sums: flash_mma_dot of the row and a 1),
// the softmax in base 2 on the raw scores (flash_mma_exp and its neighbours, flash_tile.h).
#define MR FLASH_MMA_ROWS

// rows [t0, t0 + n) of head h of a q-like (stride NH) or k-like (NKV) tensor, rounded to bf16,
// into a (64, HD) tile; rows past n are zeros.
static void bf16_tile(float *tile, const float *x, const Shape *s, int b, int h, int H, int t0, int n) {
    for (int r = 0; r < MR; r++)
        for (int d = 0; d < s->HD; d++)
            tile[r * s->HD + d] =
                r < n ? flash_bf16(x[(((size_t)b * s->T + t0 + r) * H + h) * s->HD + d]) : 0.0f;
}

// flash_mma_forward_kernel: block (query tile qt, head h of sequence b).
static void mma_forward_tile(const Shape *s, float *out, float *lse, const float *q, const float *k, const float *v,
                             int b, int h, int qt, float *Q, float *K, float *V, float *acc) {
    const int q0 = qt * MR, nq = min_int(MR, s->T - q0), kvh = h / s->g, HD = s->HD;
    const float c2 = flash_mma_log2_scale(s->scale);
    const float one = 1.0f;
    float m[MR], l[MR], S[MR], P[MR];
    bf16_tile(Q, q, s, b, h, s->NH, q0, nq);
    for (int r = 0; r < nq; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        for (int d = 0; d < HD; d++) acc[r * HD + d] = 0.0f;
    }
    for (int kt = 0; kt <= (q0 + nq - 1) / MR; kt++) {
        const int k0 = kt * MR;
        bf16_tile(K, k, s, b, kvh, s->NKV, k0, min_int(MR, s->T - k0));
        bf16_tile(V, v, s, b, kvh, s->NKV, k0, min_int(MR, s->T - k0));
        for (int r = 0; r < nq; r++) {
            for (int c = 0; c < MR; c++) {
                const float dot = flash_mma_dot(0.0f, &Q[r * HD], 1, &K[c * HD], 1, HD);
                S[c] = k0 + c <= q0 + r ? dot : -INFINITY;
            }
            const float m_new = flash_row_max(m[r], S, MR), mc = flash_mma_max_c(m_new, c2);
            for (int c = 0; c < MR; c++) P[c] = flash_bf16(flash_mma_exp(S[c], mc, c2));
            const float alpha = flash_mma_rescale(m[r], m_new, c2);
            l[r] = flash_mma_dot(l[r] * alpha, P, 1, &one, 0, MR);
            m[r] = m_new;
            for (int d = 0; d < HD; d++)
                acc[r * HD + d] = flash_mma_dot(acc[r * HD + d] * alpha, P, 1, &V[d], HD, MR);
        }
    }
    for (int r = 0; r < nq; r++) {
        for (int d = 0; d < HD; d++) out[qrow(s, b, q0 + r, h) + d] = acc[r * HD + d] / l[r];
        lse[stat(s, b, h, q0 + r)] = flash_mma_logsumexp(m[r], l[r], s->scale);
    }
}

void flash_emu_forward_bf16(float *out, float *lse, const float *q, const float *k, const float *v, int B, int T,
                            int NH, int NKV, int HD) {
    if (!flash_mma_takes(HD)) {
        flash_emu_forward(out, lse, q, k, v, B, T, NH, NKV, HD);
        return;
    }
    const Shape s = shape_of(B, T, NH, NKV, HD);
    float *Q = scratch((size_t)MR * HD), *K = scratch((size_t)MR * HD), *V = scratch((size_t)MR * HD);
    float *acc = scratch((size_t)MR * HD);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int qt = 0; qt < flash_tiles(T, MR); qt++) mma_forward_tile(&s, out, lse, q, k, v, b, h, qt, Q, K, V, acc);
    free(Q);
    free(K);
    free(V);
    free(acc);
}

// One backward element: p = flash_mma_prob(s or -inf, L2) and dS = flash_dscore(p, dp, D), from
// the (query, key) pair's two mma dots over the bf16 rows (L2 = flash_mma_lse2(L), as the
// kernels load it); *p_out gets p.
static float mma_dscore(const Shape *s, bool seen, const float *qrow_, const float *krow_, const float *dorow,
                        const float *vrow, float L2, float D, float *p_out) {
    const float sc = flash_mma_dot(0.0f, qrow_, 1, krow_, 1, s->HD), dp = flash_mma_dot(0.0f, dorow, 1, vrow, 1, s->HD);
    const float p = flash_mma_prob(seen ? sc : -INFINITY, L2, flash_mma_log2_scale(s->scale));
    *p_out = p;
    return flash_dscore(p, dp, D);
}

// flash_mma_dq_kernel: block (query tile qt, head h of sequence b).
static void mma_dq_tile(const Shape *s, float *dq, const float *dout, const float *q, const float *k, const float *v,
                        const float *lse, const float *dsum, int b, int h, int qt, float *Q, float *dO, float *K,
                        float *V, float *acc) {
    const int q0 = qt * MR, nq = min_int(MR, s->T - q0), kvh = h / s->g, HD = s->HD;
    float dS[MR], p;
    bf16_tile(Q, q, s, b, h, s->NH, q0, nq);
    bf16_tile(dO, dout, s, b, h, s->NH, q0, nq);
    for (int i = 0; i < nq * HD; i++) acc[i] = 0.0f;
    for (int kt = 0; kt <= (q0 + nq - 1) / MR; kt++) {
        const int k0 = kt * MR;
        bf16_tile(K, k, s, b, kvh, s->NKV, k0, min_int(MR, s->T - k0));
        bf16_tile(V, v, s, b, kvh, s->NKV, k0, min_int(MR, s->T - k0));
        for (int r = 0; r < nq; r++) {
            const float L = flash_mma_lse2(lse[stat(s, b, h, q0 + r)]), D = dsum[stat(s, b, h, q0 + r)];
            for (int c = 0; c < MR; c++)
                dS[c] = flash_bf16(mma_dscore(s, k0 + c <= q0 + r, &Q[r * HD], &K[c * HD], &dO[r * HD], &V[c * HD], L, D, &p));
            for (int d = 0; d < HD; d++) acc[r * HD + d] = flash_mma_dot(acc[r * HD + d], dS, 1, &K[d], HD, MR);
        }
    }
    for (int r = 0; r < nq; r++)
        for (int d = 0; d < HD; d++) dq[qrow(s, b, q0 + r, h) + d] = written(s->scale * acc[r * HD + d]);
}

// flash_mma_dkdv_kernel: block (key tile kt, query head h), head h's share into share (64, HD).
static void mma_dkdv_share(const Shape *s, float *dk_share, float *dv_share, const float *dout, const float *q,
                           const float *k, const float *v, const float *lse, const float *dsum, int b, int h, int kt,
                           float *Q, float *dO, float *K, float *V) {
    const int k0 = kt * MR, nk = min_int(MR, s->T - k0), kvh = h / s->g, HD = s->HD;
    float P[MR], dS[MR], L[MR], D[MR];
    bf16_tile(K, k, s, b, kvh, s->NKV, k0, nk);
    bf16_tile(V, v, s, b, kvh, s->NKV, k0, nk);
    for (int i = 0; i < nk * HD; i++) dk_share[i] = dv_share[i] = 0.0f;
    for (int qt = k0 / MR; qt < flash_tiles(s->T, MR); qt++) {
        const int q0 = qt * MR, nq = min_int(MR, s->T - q0);
        bf16_tile(Q, q, s, b, h, s->NH, q0, nq);
        bf16_tile(dO, dout, s, b, h, s->NH, q0, nq);
        for (int c = 0; c < MR; c++) {   // padded query rows: statistics 0, as the kernel loads them
            L[c] = c < nq ? flash_mma_lse2(lse[stat(s, b, h, q0 + c)]) : 0.0f;
            D[c] = c < nq ? dsum[stat(s, b, h, q0 + c)] : 0.0f;
        }
        for (int r = 0; r < nk; r++) {
            for (int c = 0; c < MR; c++) {
                float p;
                dS[c] = flash_bf16(
                    mma_dscore(s, c < nq && k0 + r <= q0 + c, &K[r * HD], &Q[c * HD], &V[r * HD], &dO[c * HD], L[c], D[c], &p));
                P[c] = flash_bf16(p);
            }
            for (int d = 0; d < HD; d++) {
                dv_share[r * HD + d] = flash_mma_dot(dv_share[r * HD + d], P, 1, &dO[d], HD, MR);
                dk_share[r * HD + d] = flash_mma_dot(dk_share[r * HD + d], dS, 1, &Q[d], HD, MR);
            }
        }
    }
}

void flash_emu_backward_bf16(float *dq, float *dk, float *dv, float *dsum, const float *dout, const float *q,
                             const float *k, const float *v, const float *out, const float *lse, int B, int T, int NH,
                             int NKV, int HD) {
    if (!flash_mma_takes(HD)) {
        flash_emu_backward(dq, dk, dv, dsum, dout, q, k, v, out, lse, B, T, NH, NKV, HD);
        return;
    }
    const Shape s = shape_of(B, T, NH, NKV, HD);
    for (int b = 0; b < B; b++)   // flash_rowsum_kernel, fp32 as in the fp32 kernels
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++)
                dsum[stat(&s, b, h, t)] = flash_dot(dout + qrow(&s, b, t, h), out + qrow(&s, b, t, h), HD);
    const size_t tile = (size_t)MR * HD;
    float *Q = scratch(tile), *dO = scratch(tile), *K = scratch(tile), *V = scratch(tile), *acc = scratch(tile);
    float *dk_share = scratch(s.g * tile), *dv_share = scratch(s.g * tile);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int qt = 0; qt < flash_tiles(T, MR); qt++)
                mma_dq_tile(&s, dq, dout, q, k, v, lse, dsum, b, h, qt, Q, dO, K, V, acc);
    for (int b = 0; b < B; b++)
        for (int kvh = 0; kvh < NKV; kvh++)
            for (int kt = 0; kt < flash_tiles(T, MR); kt++) {
                const int k0 = kt * MR, nk = min_int(MR, T - k0);
                for (int j = 0; j < s.g; j++)
                    mma_dkdv_share(&s, dk_share + j * tile, dv_share + j * tile, dout, q, k, v, lse, dsum, b,
                                   kvh * s.g + j, kt, Q, dO, K, V);
                for (int r = 0; r < nk; r++)   // g = 1: the block writes its own; else flash_group_sum_kernel
                    for (int d = 0; d < HD; d++) {
                        const size_t at = krow(&s, b, k0 + r, kvh) + d;
                        dk[at] = written(s.scale * flash_group_sum(&dk_share[r * HD + d], (long)tile, s.g));
                        dv[at] = written(flash_group_sum(&dv_share[r * HD + d], (long)tile, s.g));
                    }
            }
    free(Q);
    free(dO);
    free(K);
    free(V);
    free(acc);
    free(dk_share);
    free(dv_share);
}
