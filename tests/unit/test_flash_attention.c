// tests/unit/test_flash_attention.c: flash attention as the GPU computes it (the tile functions
// of kernels/cuda/flash_tile.h in the GPU's tile order: tests/gpu_emu/flash_emu.c) against the
// CPU reference attention (kernels/cpu attention_forward / attention_backward), forward and
// backward, over T in {1, 7, 64, 257} (one tile, a part tile, two tiles, nine with a 1-row
// last one), HD in {16, 24, 32, 64, 80, 128, 256} (the presets', Hugging Face configs' and
// the kernels' largest) and GQA NH/NKV in {4/4, 8/2}; generation's one-query decode equal to
// the forward's row bitwise; and the bytes a GPU
// stage's microbatch slot keeps for attention: O(T) per head, not O(T^2).
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/model/model.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cuda/flash_tile.h"
#include "tests/gpu_emu/flash_emu.h"
#include "tests/unit/test_util.h"

#define B 2

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static float *frand(size_t n) {   // splitmix64 -> [-1, 1)
    float *x = malloc((n ? n : 1) * sizeof *x);
    assert(x);
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        x[i] = (float)(-1.0 + 2.0 * (double)(z >> 11) * 0x1.0p-53);
    }
    return x;
}

static float *fzero(size_t n) {
    float *x = calloc(n ? n : 1, sizeof *x);
    assert(x);
    return x;
}

// n quiet NaNs: the start of an output the kernels must write without reading.
static float *fnan(size_t n) {
    float *x = fzero(n);
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    return x;
}

// max |got - want| over n values, and max |want|.
static double max_diff(const float *got, const float *want, size_t n, double *scale_out) {
    double d = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - want[i]);
        d = e > d || isnan(e) ? e : d;
        m = fabs(want[i]) > m ? fabs(want[i]) : m;
    }
    *scale_out = m;
    return d;
}

static double worst_ratio;   // the largest error / bound seen, for the log

static void check_close(const char *what, const float *got, const float *want, size_t n, double tol, int T, int HD,
                        int NH, int NKV) {
    double m;
    const double d = max_diff(got, want, n, &m);
    const double bound = tol * (m > 1.0 ? m : 1.0);
    if (d / bound > worst_ratio) worst_ratio = d / bound;
    CHECK(d <= bound, "%s T=%d HD=%d NH=%d NKV=%d: max error %.3g > bound %.3g (max |ref| %.3g)", what, T, HD, NH,
          NKV, d, bound, m);
}

// The CPU reference attention (two-pass softmax over the full (T, T) scores) of one shape:
// out, its probabilities att, and the gradients (overwritten) for dout.
typedef struct {
    float *out, *att, *scratch, *dq, *dk, *dv;
} Reference;

static Reference reference_attention(const float *q, const float *k, const float *v, const float *dout, int T, int HD,
                                     int NH, int NKV) {
    const size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD, natt = (size_t)B * NH * T * T;
    Reference r = {fzero(nq), fzero(natt), fzero(natt), fzero(nq), fzero(nkv), fzero(nkv)};
    attention_forward(r.out, r.att, q, k, v, B, T, NH, NKV, HD);
    attention_backward(r.dq, r.dk, r.dv, r.scratch, dout, q, k, v, r.att, B, T, NH, NKV, HD);
    return r;
}

static void reference_free(Reference *r) {
    float *all[] = {r->out, r->att, r->scratch, r->dq, r->dk, r->dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

static float *rounded(const float *x, size_t n) {
    float *y = fzero(n);
    for (size_t i = 0; i < n; i++) y[i] = flash_bf16(x[i]);
    return y;
}

// The bf16 mode's tensor-core attention (flash_emu_*_bf16: flash_mma_kernels.cuh's numbers)
// against the reference run on the bf16-rounded inputs, so what is left is what the kernels
// round inside: the probabilities before P v and P^T dout, and the score gradients before dS k
// and dS^T q (bf16 unit roundoff ub = 2^-8), plus fp32 order. First-order bounds:
//  * p = exp(s - lse) with lse from the rounded probabilities' sum (each off by ub, relative):
//    e_pb = e_p + ub. out = sum p~ v / sum p~ weighs each v by p~ / l~, off by 2 ub relative,
//    and out is kept in bf16 (one more ub): |out error| <= 3 ub + e_p + e_sum + u (|v| <= 1),
//    normalized as above; dv = sum p~ dout likewise by 2 (ub + e_pb) + e_sum.
//  * dS_ij = p (dP - D): D = dout . out is off by dD = HD (ub + tol_out) (flash reads fp32 dout
//    and its own out), p by e_pb relative, and dS is rounded (ub). So per element
//    |dS error| <= ub |dS_ij| + p_ij (e_pb |dP_ij - D_i| + dD + HD^2 u), and dq_i, dk_j get
//    scale times those summed against |k~_j|, |q~_i|, plus 64 u of their terms for fp32 order.
// These are computed per element from the reference's own P, dP and D (in double).
static void check_bf16(int T, int HD, int NH, int NKV, const float *q, const float *k, const float *v,
                       const float *dout) {
    const size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD, nrow = (size_t)B * NH * T;
    float *rq = rounded(q, nq), *rk = rounded(k, nkv), *rv = rounded(v, nkv), *rdo = rounded(dout, nq);
    Reference ref = reference_attention(rq, rk, rv, rdo, T, HD, NH, NKV);
    const float *out = ref.out, *att = ref.att, *dq = ref.dq, *dk = ref.dk, *dv = ref.dv;
    float *fout = fzero(nq), *lse = fzero(nrow), *dsum = fzero(nrow);
    float *fdq = fnan(nq), *fdk = fnan(nkv), *fdv = fnan(nkv);   // written, not read: NaN would show
    flash_emu_forward_bf16(fout, lse, q, k, v, B, T, NH, NKV, HD);
    for (size_t i = 0; i < nq; i++) fout[i] = flash_bf16(fout[i]);   // the engine keeps out in bf16
    flash_emu_backward_bf16(fdq, fdk, fdv, dsum, dout, q, k, v, fout, lse, B, T, NH, NKV, HD);
    const double u = 0x1p-24, ub = 0x1p-8, hd = HD, scale = 1.0 / sqrt(hd);
    const double n_tiles = flash_tiles(T, FLASH_MMA_ROWS);
    const double e_p = 2.0 * hd * sqrt(hd) * u + 2.0 * u, e_sum = (FLASH_MMA_ROWS + 3.0 * n_tiles + T) * u;
    const double e_pb = e_p + ub, tol_out = 3.0 * ub + e_p + e_sum + u;
    check_close("bf16 out", fout, out, nq, tol_out, T, HD, NH, NKV);
    check_close("bf16 dv", fdv, dv, nkv, 2.0 * (ub + e_pb) + e_sum, T, HD, NH, NKV);
    // dq and dk, element by element against their own bounds.
    double *bq = calloc(nq, sizeof *bq), *bk = calloc(nkv, sizeof *bk);
    assert(bq && bk);
    const int g = NH / NKV;
    const double dD = hd * (ub + tol_out);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const float *qi = rq + (((size_t)b * T + i) * NH + h) * HD, *doi = rdo + (((size_t)b * T + i) * NH + h) * HD;
                const float *oi = out + (((size_t)b * T + i) * NH + h) * HD;
                double D = 0.0;
                for (int d = 0; d < HD; d++) D += (double)doi[d] * oi[d];
                for (int j = 0; j <= i; j++) {
                    const size_t kj = (((size_t)b * T + j) * NKV + h / g) * HD;
                    const double p = att[(((size_t)b * NH + h) * T + i) * T + j];
                    double dP = 0.0;
                    for (int d = 0; d < HD; d++) dP += (double)doi[d] * rv[kj + d];
                    const double ds = p * (dP - D);
                    const double e = ub * fabs(ds) + p * (e_pb * fabs(dP - D) + dD + hd * hd * u) + 64.0 * u * fabs(ds);
                    for (int d = 0; d < HD; d++) {
                        bq[(((size_t)b * T + i) * NH + h) * HD + d] += scale * e * fabs(rk[kj + d]);
                        bk[kj + d] += scale * e * fabs(qi[d]);
                    }
                }
            }
    double worst_q = 0.0, worst_k = 0.0;
    for (size_t i = 0; i < nq; i++) worst_q = fmax(worst_q, fabs((double)fdq[i] - dq[i]) / (bq[i] + 1e-6));
    for (size_t i = 0; i < nkv; i++) worst_k = fmax(worst_k, fabs((double)fdk[i] - dk[i]) / (bk[i] + 1e-6));
    worst_ratio = fmax(worst_ratio, fmax(worst_q, worst_k));
    CHECK(worst_q <= 1.0, "bf16 dq T=%d HD=%d NH=%d NKV=%d: error / its bound %.3g", T, HD, NH, NKV, worst_q);
    CHECK(worst_k <= 1.0, "bf16 dk T=%d HD=%d NH=%d NKV=%d: error / its bound %.3g", T, HD, NH, NKV, worst_k);
    free(bq);
    free(bk);
    reference_free(&ref);
    float *all[] = {rq, rk, rv, rdo, fout, lse, dsum, fdq, fdk, fdv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

static void test_shape(int T, int HD, int NH, int NKV) {
    const size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD, nrow = (size_t)B * NH * T;
    float *q = frand(nq), *k = frand(nkv), *v = frand(nkv), *dout = frand(nq);
    Reference ref = reference_attention(q, k, v, dout, T, HD, NH, NKV);
    const float *out = ref.out, *att = ref.att, *dq = ref.dq, *dk = ref.dk, *dv = ref.dv;
    // Flash: the gradients are written, not added: their buffers start at NaN, which a read
    // would carry into the checks.
    float *fout = fzero(nq), *lse = fzero(nrow), *dsum = fzero(nrow);
    float *fdq = fnan(nq), *fdk = fnan(nkv), *fdv = fnan(nkv);
    flash_emu_forward(fout, lse, q, k, v, B, T, NH, NKV, HD);
    flash_emu_backward(fdq, fdk, fdv, dsum, dout, q, k, v, fout, lse, B, T, NH, NKV, HD);

    // Tolerance: fp32 unit roundoff u = 2^-24, inputs in [-1, 1], first-order error bounds.
    //  * Scores: flash's fp32 dot of HD terms (|q_d k_d| <= 1) is off by at most HD * u * HD * scale
    //    (= HD^1.5 u); the reference's dot (in double) by u. A row's max moves by the same, so a
    //    probability's relative error is at most e_p = 2 HD^1.5 u + 2u (the exp).
    //  * Sums: flash sums a row in tiles of BK with one rescale (an exp and a multiply, 3u) per
    //    key tile; the reference sums up to T terms in one pass. Relative: e_sum = (BK + 3 n_tiles + T) u.
    //  * out = sum_j p_j v_j / l with |v| <= 1: |error| <= (e_p + e_sum + u), normalized by max(1, max|out|).
    //  * Backward: dP = dout . v and D = dout . out are dots of HD terms of size <= 1 (|out| <= 1),
    //    each off by HD * HD * u absolute, |dP - D| <= 2 HD; dS = P (dP - D) is then off by
    //    P (2 HD^2 u + 2 HD e_p) and dq, dk, dv (sums of P-weighted terms, as out) by that times
    //    scale (dq, dk) plus e_sum of their size; dv is out's sum transposed: e_p + e_sum.
    // So the worst case is e_grad = 2 HD^2 u + 2 HD (e_p + e_sum), normalized by max(1, max|ref|).
    // What dropping the running sum's rescale by exp(m_old - m_new) costs is O(1) (l counts earlier
    // tiles at their old scale) at T = 64 and 257, far above these.
    const double u = 0x1p-24, hd = HD, n_tiles = flash_tiles(T, FLASH_BK);
    const double e_p = 2.0 * hd * sqrt(hd) * u + 2.0 * u, e_sum = (FLASH_BK + 3.0 * n_tiles + T) * u;
    const double tol_out = e_p + e_sum + u, tol_grad = 2.0 * hd * hd * u + 2.0 * hd * (e_p + e_sum);
    check_close("out", fout, out, nq, tol_out, T, HD, NH, NKV);
    check_close("dq", fdq, dq, nq, tol_grad, T, HD, NH, NKV);
    check_close("dk", fdk, dk, nkv, tol_grad, T, HD, NH, NKV);
    check_close("dv", fdv, dv, nkv, tol_out * 2.0, T, HD, NH, NKV);
    // lse is what backward reads instead of the (T, T) probabilities: exp(s - lse) must give them.
    double worst = 0.0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *qi = q + (((size_t)b * T + t) * NH + h) * HD;
                const float *k0 = k + ((size_t)b * T * NKV + h / (NH / NKV)) * HD;   // key position 0
                const float s0 = (float)(1.0 / sqrt(hd)) * flash_dot(qi, k0, HD);
                const float p0 = flash_prob(s0, lse[((size_t)b * NH + h) * T + t]);
                const double e = fabs((double)p0 - att[(((size_t)b * NH + h) * T + t) * T]);
                worst = e > worst ? e : worst;
            }
    CHECK(worst <= e_p + e_sum, "lse T=%d HD=%d: P[t][0] from lse off by %.3g", T, HD, worst);
    // Generation's decode (cuda_flash_decode): the query of position n - 1 against the n keys
    // of sequence 0 is the forward's row n - 1 bitwise (same tile functions, same key order;
    // the keys the forward's tile masks past n - 1 add exact zeros).
    float *dec = fzero((size_t)NH * HD);
    const int ns[] = {1, T / 2 + 1, T};
    for (int i = 0; i < 3; i++) {
        const int n = ns[i];
        flash_emu_decode(dec, q + (size_t)(n - 1) * NH * HD, k, v, n, NH, NKV, HD);
        CHECK(memcmp(dec, fout + (size_t)(n - 1) * NH * HD, (size_t)NH * HD * sizeof(float)) == 0,
              "decode T=%d HD=%d NH=%d NKV=%d: position %d differs from the forward's row", T, HD, NH, NKV, n - 1);
    }
    free(dec);
    if (flash_mma_takes(HD)) check_bf16(T, HD, NH, NKV, q, k, v, dout);
    reference_free(&ref);
    float *all[] = {q, k, v, dout, fout, lse, dsum, fdq, fdk, fdv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

// What a microbatch slot keeps (stage_acts_bytes_on: the banner's per-stage bytes, and the
// runtime's peak through stage_acts_bytes): on a GPU attention keeps (B, NH, T) row statistics
// per layer (lse) and once per slot (dsum) where the CPU keeps (B, NH, T, T) matrices (att,
// datt), each carved 64-byte aligned; so the slot is linear in T on the GPU. A GPU stage's norms
// take their weight gradients in the backward's input half, so it keeps one norm output
// gradient (N, C) a slot where the CPU keeps dln1 and dln2 a layer for its weight half.
static size_t carved(size_t floats) { return (floats * sizeof(float) + 63) & ~(size_t)63; }

static void test_slot_bytes(void) {
    Error err;
    ModelConfig cfg;
    CHECK(model_config_preset(&cfg, "small", &err) == 0, "preset small: %s", err.msg);
    const StageModel shell = {.cfg = cfg, .layer_begin = 0, .layer_end = cfg.layers, .has_embed = true, .has_head = true};
    const int rows = 4, T = 512;
    const size_t cpu = stage_acts_bytes_on(&shell, rows, T, DEVICE_CPU, false);
    const size_t gpu = stage_acts_bytes_on(&shell, rows, T, DEVICE_CUDA, false);
    const size_t square = carved((size_t)rows * cfg.heads * T * T), line = carved((size_t)rows * cfg.heads * T);
    // Without the head, attention and the norms' output gradients are the whole difference; with
    // it, a GPU stage also keeps no (N, V) logits (the fused classifier, kernels/cuda/classifier.cu).
    StageModel body = shell;
    body.has_head = false;
    const size_t cpu_body = stage_acts_bytes_on(&body, rows, T, DEVICE_CPU, false);
    const size_t gpu_body = stage_acts_bytes_on(&body, rows, T, DEVICE_CUDA, false);
    const size_t dln = carved((size_t)rows * T * cfg.hidden);
    CHECK(cpu_body - gpu_body == (size_t)(cfg.layers + 1) * (square - line) + (size_t)(2 * cfg.layers - 1) * dln,
          "CPU %zu - GPU %zu bytes != %d x (%zu - %zu) + %d x %zu", cpu_body, gpu_body, cfg.layers + 1, square, line,
          2 * cfg.layers - 1, dln);
    const size_t logits = carved((size_t)rows * T * cfg.vocab);
    CHECK(cpu - gpu >= (cpu_body - gpu_body) + logits, "with the head: CPU %zu - GPU %zu bytes, not %zu more for the logits",
          cpu, gpu, logits);
    CHECK(stage_acts_bytes(&shell, rows, T) == cpu, "a shell without a backend counts as the CPU");
    // Linear in T on the GPU (alignment only rounds up), not on the CPU.
    const size_t gpu2 = stage_acts_bytes_on(&shell, rows, 2 * T, DEVICE_CUDA, false);
    const size_t cpu2 = stage_acts_bytes_on(&shell, rows, 2 * T, DEVICE_CPU, false);
    CHECK(gpu2 <= 2 * gpu, "GPU slot at 2T %zu bytes > twice %zu", gpu2, gpu);
    CHECK(cpu2 > 2 * cpu, "CPU slot at 2T %zu bytes, twice T's %zu", cpu2, cpu);
    // In bf16 a GPU slot keeps its GEMM operand activations as bf16 (narrow_operands): per layer
    // ln1 and ln2 (N, C), h (N, I) and the attention output (N, Q), and the head's lnf (N, C),
    // at 2 bytes a value, not 4; and the gradients the weight half reads, packed: q|k|v's
    // (N, Q + 2 KV) and gate|up's (N, 2 I) in bf16 where fp32 dq (N, Q), dk and dv (N, KV),
    // dgate and dup (N, I) were (attention's backward writes dv there itself). The
    // residual gradients the GEMMs read are kept as bf16 copies too, the layer's output gradient
    // and dxmid (N, C) each, where fp32 dxmid was; so the fp32 ones need only be what the input
    // half walks down: dresid one row (each layer writes its input gradient over its output
    // gradient once it has read it), not layers + 1, and dxmid one (N, C) buffer a slot.
    // And gate and up (N, I) each are stored bf16 by their GEMM, and so are q (N, Q), k and v
    // (N, KV) by theirs, and the slot's attention output gradient (N, Q) and MLP hidden gradient
    // (N, I) by theirs, and the slot's norm output gradient (N, C) by theirs.
    const size_t N = (size_t)rows * T, C = (size_t)cfg.hidden, I = (size_t)cfg.intermediate;
    const size_t Q = (size_t)cfg.heads * cfg.head_dim, KV = (size_t)cfg.kv_heads * cfg.head_dim;
    const size_t half_c = carved(N * C) - carved(N * C / 2), half_i = carved(N * I) - carved(N * I / 2);
    const size_t half_q = carved(N * Q) - carved(N * Q / 2), half_kv = carved(N * KV) - carved(N * KV / 2);
    const size_t grads = carved(N * Q) + 2 * carved(N * KV) + 2 * carved(N * I) - carved(N * (Q + 2 * KV) / 2) -
                         carved(N * I);
    const size_t dresid = carved(N * C) - 2 * carved(N * C / 2);   // per layer: fp32 dxmid -> dout_16 + dxmid_16
    const size_t saved = (size_t)cfg.layers * (2 * half_c + 3 * half_i + 2 * half_q + 2 * half_kv + grads + dresid) +
                         2 * half_c + half_q + half_i + (size_t)cfg.layers * carved(N * C) - carved(N * C);
    const size_t gpu16 = stage_acts_bytes_on(&shell, rows, T, DEVICE_CUDA, true);
    CHECK(gpu - gpu16 == saved, "bf16: %zu fewer bytes, want %zu", gpu - gpu16, saved);
    CHECK(stage_acts_bytes_on(&shell, rows, T, DEVICE_CPU, true) == cpu, "a CPU stage keeps fp32 whatever the precision");
    printf("%s preset, %d x %d tokens: a slot keeps %.1f MiB on the CPU, %.1f MiB on a GPU (%.1f MiB in bf16)\n",
           cfg.name, rows, T, cpu / 1048576.0, gpu / 1048576.0, gpu16 / 1048576.0);
}

// The base-2 softmax's edges, which no causal row reaches (every row sees key 0 first) and the
// kernels therefore never show: a row that has seen only masked keys gets probabilities 0, not
// NaN (2^(-inf c + inf)), and alpha 1; a masked score's backward probability is 0 whatever the
// row's logsumexp.
static void test_softmax_edges(void) {
    const float c = flash_mma_log2_scale(0.125f), mc = flash_mma_max_c(-INFINITY, c);
    CHECK(flash_mma_exp(-INFINITY, mc, c) == 0.0f, "all-masked row: p = %g, not 0", flash_mma_exp(-INFINITY, mc, c));
    CHECK(flash_mma_max_c(3.0f, c) == 3.0f * c, "m' c of a seen row: %g", flash_mma_max_c(3.0f, c));
    CHECK(flash_mma_exp(3.0f, flash_mma_max_c(3.0f, c), c) == 1.0f, "the row's max: p != 1");
    CHECK(flash_mma_rescale(-INFINITY, -INFINITY, c) == 1.0f, "all-masked row: alpha != 1");
    CHECK(flash_mma_rescale(-INFINITY, 2.0f, c) == 0.0f, "first seen tile: alpha != 0");
    const float lse2s[] = {0.0f, -30.0f, 30.0f, INFINITY};
    for (size_t i = 0; i < sizeof lse2s / sizeof lse2s[0]; i++)
        CHECK(flash_mma_prob(-INFINITY, lse2s[i], c) == 0.0f, "masked score against L2 %g: p = %g", lse2s[i],
              flash_mma_prob(-INFINITY, lse2s[i], c));
}

int main(void) {
    test_slot_bytes();
    test_softmax_edges();
    const int Ts[] = {1, 7, 64, 257}, HDs[] = {16, 24, 32, 64, 80, 128, FLASH_MAX_HD}, heads[][2] = {{4, 4}, {8, 2}};
    for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; t++)
        for (size_t h = 0; h < sizeof HDs / sizeof HDs[0]; h++)
            for (size_t g = 0; g < 2; g++) test_shape(Ts[t], HDs[h], heads[g][0], heads[g][1]);
    printf("largest error / bound (fp32 and bf16 tiles): %.3g\n", worst_ratio);
    return test_finish();
}
