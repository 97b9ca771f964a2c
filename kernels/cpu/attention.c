// Causal grouped-query attention on gemm_serial, one (sequence, head) pair per task.
// q, out: (B, T, NH, HD) and k, v: (B, T, NKV, HD) are read in place through leading
// dimensions (NH*HD, NKV*HD); att and scratch hold one (T, T) block per (b, h).
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/vecmath.h"

// Rows per sgemm: query rows [r0, r1) only see keys [0, r1), so the work above the diagonal
// is skipped block by block (about 5/8 of the full T x T at T = 4 blocks). 32 rows, measured
// on one core against 16, 64 and 128: fwd + bwd at tiny's shape (B2 T128 NH4 HD16) 270 us
// against 280, 285 and 330; at small's (B2 T256 NH8 HD64) as fast as 64, the rest slower.
#define ATTENTION_BLOCK 32
#define ATTENTION_LANES 8

// sum of a[j] * b[j] over fixed lanes, in double (deterministic, vectorizes).
static double attention_dot(const float *restrict a, const float *restrict b, int n) {
    double acc[ATTENTION_LANES] = {0};
    int j = 0;
    for (; j + ATTENTION_LANES <= n; j += ATTENTION_LANES)
        for (int l = 0; l < ATTENTION_LANES; l++) acc[l] += (double)a[j + l] * b[j + l];
    for (; j < n; j++) acc[0] += (double)a[j] * b[j];
    double s = 0.0;
    for (int l = 0; l < ATTENTION_LANES; l++) s += acc[l];
    return s;
}

// Rows [r0, r1) of the (T, T) scores -> causal softmax probabilities, zero above the diagonal.
// Row t holds t + 1 scores; loops that end there end at another point every row (a
// mispredicted exit each, and a scalar tail), which cost more than the row's own work at
// T = 128. When r1 is a multiple of the vector width, row t runs whole vectors instead, up
// to t + 1 rounded up to 8 (so its loops end at a new point only every 8 rows), the lanes
// above the diagonal masked (-inf for the max, 0 after exp). Lane l of the sum takes
// columns l, l + 8, ..., in order, and the lanes are added in order.
static void attention_softmax_rows(float *s, int r0, int r1, int T) {
    if (r1 % VEC_LANES != 0) {   // the block at the end of a sequence whose length is not
        for (int t = r0; t < r1; t++) {   // a multiple of 8: per-row loops
            float *restrict row = s + (size_t)t * T;
            float m = vec_max(row, t + 1);
            float inv = (float)(1.0 / vec_exp_sum(row, row, m, t + 1));
            for (int j = 0; j <= t; j++) row[j] *= inv;
            memset(row + t + 1, 0, (size_t)(T - 1 - t) * sizeof(float));
        }
        return;
    }
    const vec_i8 lane = {0, 1, 2, 3, 4, 5, 6, 7};
    const vec_f8 minus_inf = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    for (int t = r0; t < r1; t++) {
        float *restrict row = s + (size_t)t * T;
        const int w = (t + VEC_LANES) / VEC_LANES * VEC_LANES;   // t + 1 rounded up, <= r1
        vec_f8 mx = minus_inf;
        for (int j = 0; j < w; j += VEC_LANES) {
            vec_f8 v;
            memcpy(&v, row + j, sizeof v);
            v = vec_where(lane + j <= t, v, minus_inf);   // on or below the diagonal
            mx = vec_where(v > mx, v, mx);
        }
        float m = mx[0];
        for (int l = 1; l < VEC_LANES; l++) m = mx[l] > m ? mx[l] : m;
        vec_f8 sum = {0};
        for (int j = 0; j < w; j += VEC_LANES) {
            float e[VEC_LANES];
            for (int l = 0; l < VEC_LANES; l++) e[l] = vec_expf(row[j + l] - m);
            vec_f8 ev;
            memcpy(&ev, e, sizeof ev);
            ev = vec_where(lane + j <= t, ev, (vec_f8){0});
            memcpy(row + j, &ev, sizeof ev);
            sum += ev;
        }
        const float inv = (float)(1.0 / ((double)sum[0] + sum[1] + sum[2] + sum[3] + sum[4] + sum[5] + sum[6] + sum[7]));
        for (int j = 0; j < w; j++) row[j] *= inv;
        memset(row + w, 0, (size_t)(T - w) * sizeof(float));
    }
}

void attention_forward(float *out, float *att, const float *q, const float *k, const float *v,
                       int B, int T, int NH, int NKV, int HD) {
    int group = NH / NKV, ldq = NH * HD, ldk = NKV * HD;
    float scale = (float)(1.0 / sqrt((double)HD));
    #pragma omp parallel for schedule(static) if ((size_t)B * NH * T * T * HD >= KERNEL_PARALLEL_MIN_WORK)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        const float *qb = q + (size_t)b * T * ldq + (size_t)h * HD;
        const float *kb = k + (size_t)b * T * ldk + (size_t)(h / group) * HD;
        const float *vb = v + (size_t)b * T * ldk + (size_t)(h / group) * HD;
        float *ob = out + (size_t)b * T * ldq + (size_t)h * HD;
        float *p = att + (size_t)bh * T * T;
        for (int r0 = 0; r0 < T; r0 += ATTENTION_BLOCK) {
            int r1 = r0 + ATTENTION_BLOCK < T ? r0 + ATTENTION_BLOCK : T;
            // scores[r0:r1, 0:r1] = scale * q[r0:r1] @ k[0:r1]^T
            gemm_serial(false, true, r1 - r0, r1, HD, scale,
                        qb + (size_t)r0 * ldq, ldq, kb, ldk, 0.0f, p + (size_t)r0 * T, T);
            attention_softmax_rows(p, r0, r1, T);
            // out[r0:r1] = P[r0:r1, 0:r1] @ v[0:r1]
            gemm_serial(false, false, r1 - r0, HD, r1, 1.0f,
                        p + (size_t)r0 * T, T, vb, ldk, 0.0f, ob + (size_t)r0 * ldq, ldq);
        }
    }
}

// Rows [r0, r1) of dP (in ds) -> dS / scale = P * (dP - rowsum(P * dP)), zero above the
// diagonal up to column r1 (the extent the dq sgemm reads).
static void attention_dsoftmax_rows(float *ds, const float *p, int r0, int r1, int T) {
    if (r1 % VEC_LANES != 0) {   // per-row loops, as in attention_softmax_rows
        for (int t = r0; t < r1; t++) {
            float *restrict drow = ds + (size_t)t * T;
            const float *restrict prow = p + (size_t)t * T;
            float dot = (float)attention_dot(prow, drow, t + 1);
            for (int j = 0; j <= t; j++) drow[j] = prow[j] * (drow[j] - dot);
            memset(drow + t + 1, 0, (size_t)(r1 - 1 - t) * sizeof(float));
        }
        return;
    }
    // Row t runs whole vectors up to t + 1 rounded up to 8, as the forward: P is zero above
    // the diagonal, so those columns add nothing to the dot and come out zero (dP is finite
    // there: dout v^T); the rest of the row up to r1, which the dq product reads, is zeroed.
    for (int t = r0; t < r1; t++) {
        float *restrict drow = ds + (size_t)t * T;
        const float *restrict prow = p + (size_t)t * T;
        const int w = (t + VEC_LANES) / VEC_LANES * VEC_LANES;
        vec_f8 acc = {0};
        for (int j = 0; j < w; j += VEC_LANES) {
            vec_f8 a, b;
            memcpy(&a, prow + j, sizeof a);
            memcpy(&b, drow + j, sizeof b);
            acc += a * b;
        }
        const float dot = (float)((double)acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7]);
        for (int j = 0; j < w; j++) drow[j] = prow[j] * (drow[j] - dot);
        memset(drow + w, 0, (size_t)(r1 - w) * sizeof(float));
    }
}

// One query head: dq = scale dS k (each row block written once), then its kv head's
// dk (+)= scale dS^T q, dv (+)= P^T dout: the group's first head writes (kv_beta 0), the
// others add (kv_beta 1).
static void attention_backward_head(float *dqb, float *dkb, float *dvb, float *ds,
                                    const float *doutb, const float *qb, const float *kb,
                                    const float *vb, const float *p, int T, int HD, int ldq,
                                    int ldk, float scale, float kv_beta) {
    for (int r0 = 0; r0 < T; r0 += ATTENTION_BLOCK) {
        int r1 = r0 + ATTENTION_BLOCK < T ? r0 + ATTENTION_BLOCK : T;
        // dP[r0:r1, 0:r1] = dout[r0:r1] @ v[0:r1]^T
        gemm_serial(false, true, r1 - r0, r1, HD, 1.0f,
                    doutb + (size_t)r0 * ldq, ldq, vb, ldk, 0.0f, ds + (size_t)r0 * T, T);
        attention_dsoftmax_rows(ds, p, r0, r1, T);
        gemm_serial(false, false, r1 - r0, HD, r1, scale,
                    ds + (size_t)r0 * T, T, kb, ldk, 0.0f, dqb + (size_t)r0 * ldq, ldq);
    }
    // Key rows [c0, c1) are seen by query rows [c0, T) only.
    for (int c0 = 0; c0 < T; c0 += ATTENTION_BLOCK) {
        int c1 = c0 + ATTENTION_BLOCK < T ? c0 + ATTENTION_BLOCK : T;
        size_t corner = (size_t)c0 * T + c0;
        gemm_serial(true, false, c1 - c0, HD, T - c0, scale,
                    ds + corner, T, qb + (size_t)c0 * ldq, ldq, kv_beta, dkb + (size_t)c0 * ldk, ldk);
        gemm_serial(true, false, c1 - c0, HD, T - c0, 1.0f,
                    p + corner, T, doutb + (size_t)c0 * ldq, ldq, kv_beta, dvb + (size_t)c0 * ldk, ldk);
    }
}

void attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                        const float *q, const float *k, const float *v, const float *att,
                        int B, int T, int NH, int NKV, int HD) {
    int group = NH / NKV, ldq = NH * HD, ldk = NKV * HD;
    float scale = (float)(1.0 / sqrt((double)HD));
    // One task per (b, kv head): its query heads run in order, so dk/dv accumulate race-free
    // and in a fixed order.
    #pragma omp parallel for schedule(static) if ((size_t)B * NH * T * T * HD >= KERNEL_PARALLEL_MIN_WORK)
    for (int bkv = 0; bkv < B * NKV; bkv++) {
        int b = bkv / NKV, kh = bkv % NKV;
        size_t kvoff = (size_t)b * T * ldk + (size_t)kh * HD;
        for (int h = kh * group; h < (kh + 1) * group; h++) {
            size_t qoff = (size_t)b * T * ldq + (size_t)h * HD;
            size_t bh = (size_t)b * NH + h;
            attention_backward_head(dq + qoff, dk + kvoff, dv + kvoff, scratch + bh * T * T,
                                    dout + qoff, q + qoff, k + kvoff, v + kvoff,
                                    att + bh * T * T, T, HD, ldq, ldk, scale, h == kh * group ? 0.0f : 1.0f);
        }
    }
}
