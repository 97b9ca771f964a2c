// tests/gpu_emu/flash_emu.c: flash attention on the CPU in the GPU's tile order (flash_emu.h).
// Each loop nest below is one kernel of kernels/cuda/flash_kernels.cuh: its outer loops are
// the kernel's grid (one tile per block), its inner loops the elements the block's threads
// share out. Every element is computed by the same flash_tile.h call, on the same inputs, as
// on the GPU; tiles are visited in the order each GPU block visits them (keys increasing in
// forward and for dq; queries increasing, a head at a time, for dk and dv, whose group of
// heads is then summed in head order).
#include "tests/gpu_emu/flash_emu.h"

#include <math.h>
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
        for (int d = 0; d < HD; d++) dq[qrow(s, b, q0 + r, h) + d] += s->scale * acc[r * HD + d];
}

// flash_dkdv_kernel: block (key tile kt, query head h of sequence b), the query tiles that see
// the key tile, increasing, into head h's share (row-major (BK, HD) at share + j * BK * HD for
// the group's j-th head); then flash_group_sum_kernel (or, with one head a group, the block
// itself) adds the group's shares in head order to dk and dv.
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
            dk[krow(s, b, k0 + c, kvh) + d] += s->scale * flash_group_sum(&dk_share[c * HD + d], tile, s->g);
            dv[krow(s, b, k0 + c, kvh) + d] += flash_group_sum(&dv_share[c * HD + d], tile, s->g);
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
