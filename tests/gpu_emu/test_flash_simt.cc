// tests/gpu_emu/test_flash_simt.cc: the flash attention kernels' own source
// (kernels/cuda/flash_kernels.cuh) run on CPU threads (simt.h), held bitwise to the emulator's
// tiles (tests/gpu_emu/flash_emu.c, which the GPU tests hold to the CPU reference attention).
// The emulator runs flash_tile.h element by element; the kernels share a tile's elements out
// over 128 threads in register micro-tiles. Equal bits (both sides built without contracted
// multiply-adds) say the kernels compute every element, with the same operations in the same
// order, and nothing else: no lost or doubled micro-tile, no index off by one at a ragged tile
// edge (T not a multiple of 32, HD not one of 32), no read of shared memory before its write
// (NaN), no GQA head mix-up or share summed out of order. Shapes are small: every block is
// 128 host threads.
#include "tests/gpu_emu/simt.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/flash_mma_kernels.cuh"
#include "kernels/cuda/rope_kernels.cuh"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

extern "C" {
#include "tests/gpu_emu/flash_emu.h"
}

static std::vector<float> uniform(size_t n, uint32_t seed) {
    std::vector<float> v(n);
    for (float &x : v) {
        seed = seed * 1664525u + 1013904223u;
        x = (float)(seed >> 8) / 8388608.0f - 1.0f;
    }
    return v;
}

// x rounded to bf16: the bits the kernels read (bf16 mode's q, k, v), and their exact widening
// (what the emulator reads; its own rounding on load then changes nothing). The bits run on past
// x as NaN, as many again: a kernel that reads rows past T of the last sequence (a ragged tile
// copied whole) reads NaN, and a zero probability times NaN shows in its results.
struct Bf16Input {
    std::vector<__nv_bfloat16> bits;
    std::vector<float> wide;
};
static Bf16Input bf16_input(const std::vector<float> &x) {
    Bf16Input r{std::vector<__nv_bfloat16>(2 * x.size(), __nv_bfloat16{0x7fc1}), std::vector<float>(x.size())};
    for (size_t i = 0; i < x.size(); i++) {
        r.bits[i] = __float2bfloat16_rn(x[i]);
        r.wide[i] = __bfloat162float(r.bits[i]);
    }
    return r;
}

// dv as bf16 mode's backward puts it (FlashDv): written, rounded, into a packed operand whose
// rows run 8 columns past the block, a fill the kernels must leave alone.
struct PackedDv {
    static constexpr uint16_t fill = 0x7fc1;
    size_t width, ld;
    std::vector<__nv_bfloat16> bits;
    PackedDv(size_t rows, size_t width) : width(width), ld(width + 8), bits(rows * (width + 8), __nv_bfloat16{fill}) {}
    FlashDv sink() { return FlashDv{nullptr, bits.data(), ld}; }
    // The block widened; gap values that are not the fill count into *strays.
    std::vector<float> block(size_t *strays) const {
        std::vector<float> x(bits.size() / ld * width);
        *strays = 0;
        for (size_t i = 0; i < bits.size(); i++) {
            if (i % ld < width) x[i / ld * width + i % ld] = __bfloat162float(bits[i]);
            else *strays += bits[i].bits != fill;
        }
        return x;
    }
};

static int failures;

static void expect_bitwise(const char *shape, const char *what, const std::vector<float> &got,
                           const std::vector<float> &want) {
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); i++)   // a NaN is an element nobody wrote: the outputs start so
        differ += memcmp(&got[i], &want[i], sizeof(float)) != 0 || std::isnan(got[i]);
    printf("%-28s %-4s %s", shape, what, differ ? "FAIL" : "ok");
    if (differ) printf(" (%zu of %zu elements differ)", differ, got.size());
    printf("\n");
    failures += differ != 0;
}

// bf16_in: q, k and v come bf16, as bf16 mode hands them to these kernels at a head dim the
// tensor cores do not take (load_tile's widening form; the emulator reads them widened), and
// dv goes out packed in bf16, as bf16 mode's backward puts it.
// The packed dv against the emulator's (from 0) rounded, bitwise, and its gaps untouched.
static void expect_packed_dv(const char *shape, const PackedDv &dv16, const std::vector<float> &e_dv) {
    size_t strays = 0;
    const std::vector<float> got = dv16.block(&strays);
    std::vector<float> want(e_dv.size());
    for (size_t i = 0; i < want.size(); i++) want[i] = flash_bf16(e_dv[i]);
    expect_bitwise(shape, "dv (packed bf16)", got, want);
    printf("%-28s %-4s %s\n", shape, "dv gaps", strays ? "FAIL" : "ok");
    failures += strays != 0;
}

static void check_shape(int B, int T, int NH, int NKV, int HD, bool bf16_in) {
    char shape[64];
    snprintf(shape, sizeof shape, "%sB%d T%d NH%d NKV%d HD%d", bf16_in ? "bf16 in " : "", B, T, NH, NKV, HD);
    const size_t nq = (size_t)B * T * NH * HD, nk = (size_t)B * T * NKV * HD, nr = (size_t)B * NH * T;
    const Bf16Input q16 = bf16_input(uniform(nq, 1)), k16 = bf16_input(uniform(nk, 2)), v16 = bf16_input(uniform(nk, 3));
    const Bf16Input d16 = bf16_input(uniform(nq, 4));
    const std::vector<float> q = bf16_in ? q16.wide : uniform(nq, 1), k = bf16_in ? k16.wide : uniform(nk, 2),
                             v = bf16_in ? v16.wide : uniform(nk, 3), dout = bf16_in ? d16.wide : uniform(nq, 4);
    // The kernels' q, k, v and dout: the same values, as bf16 bits or as floats.
    const auto run = [&](auto kernel) {
        if (bf16_in) kernel(q16.bits.data(), k16.bits.data(), v16.bits.data(), d16.bits.data());
        else kernel(q.data(), k.data(), v.data(), dout.data());
    };
    // dq, dk, dv are written, not read: they start at NaN, which a read would carry into the
    // bitwise checks (with bf16 q, k, v dv is written packed, bf16 mode's form)
    const std::vector<float> dq0(nq, NAN), dk0(nk, NAN), dv0(nk, NAN);
    std::vector<float> out(nq), lse(nr), dq = dq0, dk = dk0, dv = dv0, dsum(nr);
    PackedDv dv16((size_t)B * T, (size_t)NKV * HD);
    const FlashDv dv_sink = bf16_in ? dv16.sink() : FlashDv{dv.data(), nullptr, (size_t)NKV * HD};
    std::vector<float> e_out(nq), e_lse(nr), e_dq = dq0, e_dk = dk0, e_dv = dv0, e_dsum(nr);
    flash_emu_forward(e_out.data(), e_lse.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, HD);
    flash_emu_backward(e_dq.data(), e_dk.data(), e_dv.data(), e_dsum.data(), dout.data(), q.data(), k.data(),
                       v.data(), e_out.data(), e_lse.data(), B, T, NH, NKV, HD);
    const float scale = flash_scale(HD);
    const dim3 qgrid{(unsigned)flash_tiles(T, FLASH_BQ), (unsigned)(B * NH), 1};
    const dim3 kgrid{(unsigned)flash_tiles(T, FLASH_BK), (unsigned)(B * NH), 1};
    run([&](auto qp, auto kp, auto vp, auto) {
        simt_launch(qgrid, FLASH_THREADS, forward_smem(HD), [&] {
            flash_forward_kernel(out.data(), lse.data(), qp, kp, vp, T, NH, NKV, HD, scale);
        });
    });
    expect_bitwise(shape, "out", out, e_out);
    expect_bitwise(shape, "lse", lse, e_lse);
    simt_launch(dim3{(unsigned)((nr + 255) / 256), 1, 1}, 256, 0, [&] {
        flash_rowsum_kernel<float>(dsum.data(), dout.data(), out.data(), B, T, NH, HD);
    });
    expect_bitwise(shape, "D", dsum, e_dsum);
    // Backward from the emulator's forward, so a forward difference cannot pass on.
    const bool grouped = NH > NKV;   // each query head's share, then their sum (as the launcher does)
    std::vector<float> dk_part(grouped ? nq : 0, NAN), dv_part(grouped ? nq : 0, NAN);
    run([&](auto qp, auto kp, auto vp, auto dp) {
        simt_launch(qgrid, FLASH_THREADS, dq_smem(HD), [&] {
            flash_dq_kernel(dq.data(), dp, qp, kp, vp, e_lse.data(), e_dsum.data(), T, NH, NKV, HD, scale);
        });
        simt_launch(kgrid, FLASH_THREADS, dkdv_smem(HD), [&] {
            flash_dkdv_kernel(dk.data(), dv_sink, dk_part.data(), dv_part.data(), dp, qp, kp, vp,
                              e_lse.data(), e_dsum.data(), T, NH, NKV, HD, scale);
        });
    });
    if (grouped)
        simt_launch(dim3{(unsigned)(((size_t)B * T * NKV * HD + 255) / 256), 1, 1}, 256, 0, [&] {
            flash_group_sum_kernel(dk.data(), dv_sink, dk_part.data(), dv_part.data(), (size_t)B * T, T, NH, NKV, HD,
                                   scale, FlashRopeOut{nullptr, nullptr, nullptr, 0});
        });
    expect_bitwise(shape, "dq", dq, e_dq);
    expect_bitwise(shape, "dk", dk, e_dk);
    if (bf16_in) expect_packed_dv(shape, dv16, e_dv);
    else expect_bitwise(shape, "dv", dv, e_dv);
}

// cuda_flash_attention_rope_backward_bf16's fusion: the dq kernel (and without grouped queries
// the dk/dv kernel, with them the group sum) rotating its rows back by RoPE and writing them bf16
// into the packed q|k|v gradient, against what the unfused calls write there
// (rope_backward_packed_kernel over the kernels' fp32 dq and dk, given here), bitwise, the gaps
// between blocks untouched, and no fp32 dk written.
static void check_rope_fused(int B, int T, int NH, int NKV, int HD, const Bf16Input &q16, const Bf16Input &k16,
                             const Bf16Input &v16, const Bf16Input &d16, const Bf16Input &o16,
                             const std::vector<float> &lse, const std::vector<float> &dq,
                             const std::vector<float> &dk) {
    char shape[80];
    snprintf(shape, sizeof shape, "rope B%d T%d NH%d NKV%d HD%d", B, T, NH, NKV, HD);
    const int half = HD / 2, Q = NH * HD, KV = NKV * HD, ld = Q + 2 * KV + 3, N = B * T;
    std::vector<float> cos_tab((size_t)T * half), sin_tab((size_t)T * half);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            const float angle = (float)t * powf(10000.0f, -2.0f * (float)i / (float)HD);
            cos_tab[(size_t)t * half + i] = cosf(angle), sin_tab[(size_t)t * half + i] = sinf(angle);
        }
    const __nv_bfloat16 fill{0x7fc1};
    std::vector<__nv_bfloat16> want((size_t)N * ld, fill), got((size_t)N * ld, fill);
    const dim3 rows{(unsigned)std::min(N, 4), 1, 1};
    simt_launch(rows, 64, 0, [&] {
        rope_backward_packed_kernel(want.data(), ld, dq.data(), cos_tab.data(), sin_tab.data(), N, T, NH, HD);
    });
    simt_launch(rows, 64, 0, [&] {
        rope_backward_packed_kernel(want.data() + Q, ld, dk.data(), cos_tab.data(), sin_tab.data(), N, T, NKV, HD);
    });
    const bool grouped = NH > NKV;
    const FlashRopeOut rq = {cos_tab.data(), sin_tab.data(), got.data(), (size_t)ld};
    const FlashRopeOut rk = {cos_tab.data(), sin_tab.data(), got.data() + Q, (size_t)ld};
    std::vector<float> dq_unused((size_t)N * Q, NAN), dk32((size_t)N * KV, NAN), dsum((size_t)B * NH * T, NAN);
    std::vector<float> dk_part(grouped ? (size_t)N * Q : 0, NAN), dv_part(grouped ? (size_t)N * Q : 0, NAN);
    PackedDv dv16((size_t)N, (size_t)KV);
    const dim3 grid{(unsigned)flash_tiles(T, FLASH_MMA_ROWS), (unsigned)(B * NH), 1};
    const float scale = flash_scale(HD);
    mma_dispatch(HD, [&](auto hd) {
        constexpr int D = decltype(hd)::value;
        simt_launch(grid, MMA_THREADS, mma_backward_smem(D), [&] {
            flash_mma_dq_kernel<D>(dq_unused.data(), dsum.data(), d16.bits.data(), q16.bits.data(), k16.bits.data(),
                                   v16.bits.data(), o16.bits.data(), lse.data(), T, NH, NKV, mma_scales(scale), rq);
        });
        simt_launch(grid, MMA_THREADS, mma_backward_smem(D), [&] {
            flash_mma_dkdv_kernel<D>(dk32.data(), dv16.sink(), dk_part.data(), dv_part.data(), d16.bits.data(),
                                     q16.bits.data(), k16.bits.data(), v16.bits.data(), lse.data(), dsum.data(), T, NH, NKV,
                                     mma_scales(scale), rk);
        });
    });
    if (grouped)   // as the fused call does: the group's sum rotated as it is summed
        simt_launch(dim3{(unsigned)std::min(N, 4), 1, 1}, 256, 0, [&] {
            flash_group_sum_kernel(dk32.data(), dv16.sink(), dk_part.data(), dv_part.data(), (size_t)N, T, NH, NKV, HD,
                                   scale, rk);
        });
    size_t dk_written = 0;
    for (float x : dk32) dk_written += !std::isnan(x);
    size_t differ = 0, q_nan = 0;
    for (size_t i = 0; i < got.size(); i++) {
        const size_t col = i % ld;
        if (col >= (size_t)(Q + KV)) continue;   // dv's block (PackedDv above) and the pad: never written here
        differ += got[i].bits != want[i].bits;
        q_nan += std::isnan(__bfloat162float(got[i]));
    }
    size_t pad = 0;
    for (size_t i = 0; i < got.size(); i++) pad += i % ld >= (size_t)(Q + KV) && got[i].bits != fill.bits;
    const bool ok = differ == 0 && q_nan == 0 && pad == 0 && dk_written == 0;
    printf("%-28s q|k rotated, packed %s (%zu of %zu differ, %zu NaN, %zu pad written, %zu fp32 dk written)\n", shape,
           ok ? "ok" : "FAIL", differ, (size_t)N * (Q + KV), q_nan, pad, dk_written);
    failures += !ok;
}

// The tensor-core kernels (flash_mma_kernels.cuh, on simt.h's mma.sync and ldmatrix) against
// the emulator's bf16 tiles (flash_emu_forward_bf16 / _backward_bf16; the kernel's out is bf16,
// the emulator's fp32 out rounded), bitwise, as above: both run the emulator's model of an mma,
// so equal bits say the kernels put every operand value where the published fragment layouts
// want it, read each accumulator element as its own row and column (the mask, the row's
// statistics, alpha), meet a row's max over the right lanes, sum a row as the forward's
// mma_row_sums does (16 at a time against ones), keep each warp's rows apart, and pad and mask
// ragged tiles to exact zeros.
// q_gain scales q: at 1 (uniform in [-1, 1]) a row's bf16 probabilities span a few binades and
// every fp32 sum of them is exact in any order; at 32 they span dozens, so a sum taken in
// another order than mma_row_sums' (the forward's l) changes bits.
static void check_mma_shape(int B, int T, int NH, int NKV, int HD, float q_gain = 1.0f) {
    char shape[64];
    snprintf(shape, sizeof shape, "mma B%d T%d NH%d NKV%d HD%d%s", B, T, NH, NKV, HD, q_gain != 1.0f ? " sharp" : "");
    const size_t nq = (size_t)B * T * NH * HD, nk = (size_t)B * T * NKV * HD, nr = (size_t)B * NH * T;
    // q, k, v and dout bf16 as bf16 mode keeps them (the emulator reads them widened)
    std::vector<float> q_in = uniform(nq, 11);
    for (float &x : q_in) x *= q_gain;
    const Bf16Input q16 = bf16_input(q_in), k16 = bf16_input(uniform(nk, 12)),
                    v16 = bf16_input(uniform(nk, 13));
    const Bf16Input d16 = bf16_input(uniform(nq, 14));
    const std::vector<float> &q = q16.wide, &k = k16.wide, &v = v16.wide, &dout = d16.wide;
    const std::vector<float> dq0(nq, NAN), dk0(nk, NAN);   // written, not read (NaN would show); dv packed
    std::vector<__nv_bfloat16> out16(nq);
    std::vector<float> out(nq), lse(nr), dq = dq0, dk = dk0;
    PackedDv dv16((size_t)B * T, (size_t)NKV * HD);
    std::vector<float> e_out(nq), e_lse(nr), e_dq = dq0, e_dk = dk0, e_dv(nk), e_dsum(nr);
    flash_emu_forward_bf16(e_out.data(), e_lse.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, HD);
    const Bf16Input o16 = bf16_input(e_out);   // out as bf16 mode stores it, what D is taken from
    flash_emu_backward_bf16(e_dq.data(), e_dk.data(), e_dv.data(), e_dsum.data(), dout.data(), q.data(), k.data(),
                            v.data(), o16.wide.data(), e_lse.data(), B, T, NH, NKV, HD);
    std::vector<float> dsum(nr, NAN);   // the dq kernel's D
    const float scale = flash_scale(HD);
    const dim3 grid{(unsigned)flash_tiles(T, FLASH_MMA_ROWS), (unsigned)(B * NH), 1};
    const bool grouped = NH > NKV;
    std::vector<float> dk_part(grouped ? nq : 0, NAN), dv_part(grouped ? nq : 0, NAN);
    const FlashRopeOut no_rope = {nullptr, nullptr, nullptr, 0};
    mma_dispatch(HD, [&](auto hd) {
        constexpr int D = decltype(hd)::value;
        simt_launch(grid, MMA_THREADS, mma_forward_smem(D), [&] {
            flash_mma_forward_kernel<D>(out16.data(), lse.data(), q16.bits.data(), k16.bits.data(), v16.bits.data(), T,
                                        NH, NKV, mma_scales(scale));
        });
        // Backward from the emulator's forward, so a forward difference cannot pass on; the dk/dv
        // kernel reads the D the dq kernel wrote, as the launcher runs them.
        simt_launch(grid, MMA_THREADS, mma_backward_smem(D), [&] {
            flash_mma_dq_kernel<D>(dq.data(), dsum.data(), d16.bits.data(), q16.bits.data(), k16.bits.data(),
                                   v16.bits.data(), o16.bits.data(), e_lse.data(), T, NH, NKV, mma_scales(scale),
                                   no_rope);
        });
        simt_launch(grid, MMA_THREADS, mma_backward_smem(D), [&] {
            flash_mma_dkdv_kernel<D>(dk.data(), dv16.sink(), dk_part.data(), dv_part.data(), d16.bits.data(),
                                     q16.bits.data(), k16.bits.data(), v16.bits.data(), e_lse.data(), dsum.data(),
                                     T, NH, NKV, mma_scales(scale), no_rope);
        });
    });
    if (grouped)
        simt_launch(dim3{(unsigned)(((size_t)B * T * NKV * HD + 255) / 256), 1, 1}, 256, 0, [&] {
            flash_group_sum_kernel(dk.data(), dv16.sink(), dk_part.data(), dv_part.data(), (size_t)B * T, T, NH, NKV,
                                   HD, scale, no_rope);
        });
    for (size_t i = 0; i < nq; i++) out[i] = __bfloat162float(out16[i]);
    expect_bitwise(shape, "out (bf16)", out, o16.wide);
    expect_bitwise(shape, "lse", lse, e_lse);
    expect_bitwise(shape, "D (the dq kernel's)", dsum, e_dsum);
    expect_bitwise(shape, "dq", dq, e_dq);
    expect_bitwise(shape, "dk", dk, e_dk);
    expect_packed_dv(shape, dv16, e_dv);
    check_rope_fused(B, T, NH, NKV, HD, q16, k16, v16, d16, o16, e_lse, dq, dk);
}

// Generation's decode (flash_decode_kernel: one query row against n cached keys, its tiles'
// softmax spread over the block) against flash_emu_decode, bitwise: fp32, and bf16 q, k, v
// (widened on load) with the out rounded.
static void check_decode(int n, int NH, int NKV, int HD) {
    char shape[64];
    snprintf(shape, sizeof shape, "decode n%d NH%d NKV%d HD%d", n, NH, NKV, HD);
    const Bf16Input q16 = bf16_input(uniform((size_t)NH * HD, 31)), k16 = bf16_input(uniform((size_t)n * NKV * HD, 32)),
                    v16 = bf16_input(uniform((size_t)n * NKV * HD, 33));
    std::vector<float> want((size_t)NH * HD), got((size_t)NH * HD, NAN);
    flash_emu_decode(want.data(), q16.wide.data(), k16.wide.data(), v16.wide.data(), n, NH, NKV, HD);
    const float scale = flash_scale(HD);
    simt_launch(dim3{(unsigned)NH, 1, 1}, FLASH_THREADS, decode_smem(HD), [&] {
        flash_decode_kernel<float, float>(got.data(), q16.wide.data(), k16.wide.data(), v16.wide.data(), n, NH, NKV,
                                          HD, scale);
    });
    expect_bitwise(shape, "out", got, want);
    std::vector<__nv_bfloat16> got16((size_t)NH * HD, __nv_bfloat16{0x7fc1});
    simt_launch(dim3{(unsigned)NH, 1, 1}, FLASH_THREADS, decode_smem(HD), [&] {
        flash_decode_kernel<__nv_bfloat16, __nv_bfloat16>(got16.data(), q16.bits.data(), k16.bits.data(),
                                                          v16.bits.data(), n, NH, NKV, HD, scale);
    });
    for (size_t i = 0; i < got.size(); i++) got[i] = __bfloat162float(got16[i]), want[i] = flash_bf16(want[i]);
    expect_bitwise(shape, "out (bf16)", got, want);
}

// D = rowsum(dout * out) (flash_rowsum_kernel) in both of its read paths against flash_dot on
// the widened values, bitwise: 16-byte loads where HD x the element is a multiple of 16 and
// the tensors are 16-byte aligned, one element at a time otherwise (odd_start shifts both
// tensors one element off their 16-byte alignment). E: float, or __nv_bfloat16 (bf16 mode).
template <typename E>
static void check_rowsum(int B, int T, int NH, int HD, bool odd_start) {
    char shape[80];
    snprintf(shape, sizeof shape, "D%s%s B%d T%d NH%d HD%d", sizeof(E) == 2 ? " bf16" : "", odd_start ? " odd" : "",
             B, T, NH, HD);
    const size_t n = (size_t)B * T * NH * HD, rows = (size_t)B * NH * T, skip = odd_start ? 1 : 0;
    const Bf16Input d16 = bf16_input(uniform(n, 21)), o16 = bf16_input(uniform(n, 22));
    std::vector<E> dout(n + skip), out(n + skip);
    for (size_t i = 0; i < n; i++) {
        if constexpr (sizeof(E) == 2) dout[skip + i] = d16.bits[i], out[skip + i] = o16.bits[i];
        else dout[skip + i] = d16.wide[i], out[skip + i] = o16.wide[i];
    }
    std::vector<float> got(rows, NAN), want(rows);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const size_t at = (((size_t)b * T + t) * NH + h) * HD;
                want[((size_t)b * NH + h) * T + t] = flash_dot(&d16.wide[at], &o16.wide[at], HD);
            }
    simt_launch(dim3{(unsigned)((rows + 255) / 256), 1, 1}, 256, 0, [&] {
        flash_rowsum_kernel<E>(got.data(), dout.data() + skip, out.data() + skip, B, T, NH, HD);
    });
    expect_bitwise(shape, "", got, want);
}

int main(void) {
    // D's two read paths: 16-byte runs (HD 24 and 128 in fp32, 64 and 48 in bf16: 6, 32, 8 and
    // 6 runs a row, in whole and partial groups of 4 loads); one element at a time (HD 6, and
    // shapes one element off alignment).
    check_rowsum<float>(2, 33, 3, 24, false);
    check_rowsum<float>(1, 5, 2, 128, false);
    check_rowsum<__nv_bfloat16>(2, 33, 3, 64, false);
    check_rowsum<__nv_bfloat16>(1, 7, 4, 48, false);
    check_rowsum<float>(1, 9, 2, 6, false);
    check_rowsum<__nv_bfloat16>(1, 9, 2, 6, false);
    check_rowsum<float>(2, 33, 3, 24, true);
    check_rowsum<__nv_bfloat16>(2, 33, 3, 64, true);
    // B T NH NKV HD: whole tiles; ragged T with one kv head for 4; a lone ragged tile and HD past
    // one 32-column chunk; T 1; several tiles, 3 heads a group; HD 128 (four chunks).
    const int shapes[][5] = {{2, 64, 4, 2, 16}, {1, 70, 4, 1, 24}, {1, 33, 2, 2, 40},
                             {1, 1, 4, 2, 64},  {2, 45, 6, 2, 64}, {1, 40, 2, 1, 128}};
    for (const auto &s : shapes) check_shape(s[0], s[1], s[2], s[3], s[4], false);
    // bf16 q, k, v through the same kernels: a head dim the tensor cores do not take, ragged,
    // grouped; and one they do take (the widening load at float4-friendly HD).
    check_shape(1, 70, 4, 1, 24, true);
    check_shape(2, 45, 6, 2, 64, true);
    // Tensor cores: two sequences of one whole tile, two heads a group (RoPE's table row is the
    // position, not the token row); ragged T over two tiles with one kv head for 4; T 1; three
    // tiles, 3 heads a group, HD 48 (three 16-column blocks, not a power of two); HD 128 (two
    // passes of the output through the score tile), ragged; a last tile one row short of whole
    // (load_tile_async's zero fill, not its whole-tile copies, for it).
    const int mma_shapes[][5] = {{2, 64, 4, 2, 16}, {1, 70, 4, 1, 32}, {1, 1, 2, 1, 64},
                                 {1, 150, 3, 1, 48}, {1, 80, 2, 2, 128}, {1, 127, 2, 1, 64}};
    for (const auto &s : mma_shapes) check_mma_shape(s[0], s[1], s[2], s[3], s[4]);
    check_mma_shape(1, 130, 2, 1, 64, 32.0f);   // probabilities over many binades: the sums' order shows
    // Decode: one key; a ragged last tile over 3; 3 query heads a group, HD 128.
    check_decode(1, 2, 1, 16);
    check_decode(70, 4, 2, 24);
    check_decode(40, 3, 1, 128);
    printf("test_flash_simt: %d failed\n", failures);
    return failures != 0;
}
