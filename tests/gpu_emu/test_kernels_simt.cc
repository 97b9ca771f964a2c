// tests/gpu_emu/test_kernels_simt.cc: the elementwise CUDA kernels' own source
// (kernels/cuda/{rmsnorm,rope,swiglu,crossentropy,embedding,adamw,gradnorm,convert}_kernels.cuh)
// run on CPU threads (simt.h), as test_flash_simt runs attention's. Without a GPU nothing else executes these
// lines: the emulator stands in for each kernels/cuda call with the CPU backend's kernel.
//
// Two kinds of check:
//   * against the CPU backend (kernels/cpu), norm-relative, at fp32 bounds: the kernels sum in
//     their own order (a warp's lanes, then a butterfly), so bits may differ, but an index off
//     by one, a lost row or a wrong stride is an O(1) error;
//   * the bf16 forms bitwise against their fp32 forms' outputs rounded to nearest even (the
//     same source run on the widened inputs): the contract each bf16 form states in
//     kernels_cuda.h. Packed outputs must leave their gaps (a NaN fill) untouched.
// Written outputs start at NaN, so a kernel that reads one (adds to it) or skips an element
// fails. Shapes are ragged (rows not a multiple of a block's, widths not of a warp's), and the
// grid-stride kernels get fewer threads than elements.
#include "tests/gpu_emu/simt.h"   // first: the CUDA dialect the kernels below are written in

#include "kernels/cuda/device_math.cuh"   // then the helpers they share

#include "kernels/cuda/adamw_kernels.cuh"
#include "kernels/cuda/convert_kernels.cuh"
#include "kernels/cuda/crossentropy_kernels.cuh"
#include "kernels/cuda/embedding_kernels.cuh"
#include "kernels/cuda/gradnorm_kernels.cuh"
#include "kernels/cuda/rmsnorm_kernels.cuh"
#include "kernels/cuda/rope_kernels.cuh"
#include "kernels/cuda/swiglu_kernels.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <type_traits>
#include <vector>

extern "C" {
#include "kernels/cpu/kernels.h"
#define PPTRAIN_KERNELS_CUDA_SIZES_ONLY   // the launch sizes (cuda_grad_sum_squares_blocks), not the toolkit
#include "kernels/cuda/kernels_cuda.h"
}

using Floats = std::vector<float>;
using Bf16s = std::vector<__nv_bfloat16>;

static int failures;

static Floats uniform(size_t n, uint32_t seed, float amp = 1.0f) {
    Floats v(n);
    for (float &x : v) {
        seed = seed * 1664525u + 1013904223u;
        x = amp * ((float)(seed >> 8) / 8388608.0f - 1.0f);
    }
    return v;
}
static Bf16s to_bf16(const Floats &x) {
    Bf16s r(x.size());
    for (size_t i = 0; i < x.size(); i++) r[i] = __float2bfloat16_rn(x[i]);
    return r;
}
static Floats widen(const Bf16s &x) {
    Floats r(x.size());
    for (size_t i = 0; i < x.size(); i++) r[i] = __bfloat162float(x[i]);
    return r;
}
static const __nv_bfloat16 nan16 = {0x7fc1};

static void report(const char *what, bool ok, const char *detail) {
    printf("%-58s %s%s\n", what, ok ? "ok" : "FAIL", detail);
    failures += !ok;
}
// |got - want| / max(|want|, 1e-30) in the 2-norm; NaN anywhere fails.
static void expect_close(const char *what, const Floats &got, const Floats &want, double tol) {
    double d = 0.0, w = 0.0;
    bool nan = false;
    for (size_t i = 0; i < got.size(); i++) {
        nan |= std::isnan(got[i]);
        d += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        w += (double)want[i] * want[i];
    }
    const double err = std::sqrt(d) / std::max(std::sqrt(w), 1e-30);
    char detail[64];
    snprintf(detail, sizeof detail, " (rel err %.2e, bound %.0e)", err, tol);
    report(what, !nan && err <= tol, detail);
}
static void expect_bitwise(const char *what, const Floats &got, const Floats &want) {
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); i++)
        differ += memcmp(&got[i], &want[i], sizeof(float)) != 0 || std::isnan(got[i]);
    char detail[64];
    snprintf(detail, sizeof detail, differ ? " (%zu of %zu differ)" : "", differ, got.size());
    report(what, differ == 0, detail);
}
// got (bf16) == want (fp32) rounded, bit for bit.
static void expect_rounded(const char *what, const Bf16s &got, const Floats &want) {
    expect_bitwise(what, widen(got), widen(to_bf16(want)));
}
// A packed (rows, ld) bf16 buffer: columns [col0, col0 + width) of each row are want's row
// (rows, width) rounded; every other column still the NaN fill.
static void expect_packed(const char *what, const Bf16s &got, size_t ld, size_t col0, const Floats &want,
                          size_t width) {
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); i++) {
        const size_t r = i / ld, c = i % ld;
        if (c >= col0 && c < col0 + width) bad += got[i].bits != __float2bfloat16_rn(want[r * width + c - col0]).bits;
        else bad += got[i].bits != nan16.bits;
    }
    char detail[64];
    snprintf(detail, sizeof detail, bad ? " (%zu of %zu wrong)" : "", bad, got.size());
    report(what, bad == 0, detail);
}

template <typename Body> static void run(unsigned blocks, unsigned threads, Body body) {
    simt_launch(dim3{blocks, 1, 1}, threads, 0, body);
}

// ---- rmsnorm_kernels.cuh ------------------------------------------------------------------
// Calls go(form, V, VEC) (std::integral_constants) for each form of the row kernels rmsnorm.cu
// launches for rows of C: element by element (any C, and any pointer), and where C % 4 == 0 the
// vector forms: the row walked again (V = 0: C > 1024), and held in registers where
// rmsnorm_held_groups takes it.
template <typename Go> static void rmsnorm_forms(int C, Go go) {
    go("elements", std::integral_constant<int, 0>(), std::false_type());
    if (C % 4) return;
    go("vectors", std::integral_constant<int, 0>(), std::true_type());
    switch (rmsnorm_held_groups(C)) {
    case 2: return go("held 2", std::integral_constant<int, 2>(), std::true_type());
    case 4: return go("held 4", std::integral_constant<int, 4>(), std::true_type());
    case 6: return go("held 6", std::integral_constant<int, 6>(), std::true_type());
    case 8: return go("held 8", std::integral_constant<int, 8>(), std::true_type());
    }
}
// The vector forms' loads want 16-byte aligned rows (malloc's are, on a 64-bit host): a test
// buffer that is not fails, rather than running them misaligned.
static bool aligned16(std::initializer_list<const void *> ptrs) {
    for (const void *p : ptrs)
        if ((uintptr_t)p % 16) return false;
    return true;
}
static void append(Floats &all, const Floats &x) { all.insert(all.end(), x.begin(), x.end()); }

// The row kernels on N rows of C, each form against the CPU backend; the bf16 forms against the
// fp32 forms' outputs, bit for bit; and every form's outputs against the element form's, bit for
// bit (the same arithmetic in the same order, rmsnorm_kernels.cuh's contract).
static void check_rmsnorm_rows(int N, int C) {
    const float eps = 1e-5f;
    const size_t n = (size_t)N * C;
    const Floats x = uniform(n, 1, 2.0f), w = uniform(C, 2), b = uniform(n, 3), dout = uniform(n, 4);
    const unsigned blocks = (N + RMSNORM_ROWS_PER_BLOCK - 1) / RMSNORM_ROWS_PER_BLOCK,
                   threads = 32 * RMSNORM_ROWS_PER_BLOCK;
    Floats want(n), want_rstd(N);
    rmsnorm_forward(want.data(), want_rstd.data(), x.data(), w.data(), N, C, eps);
    Floats term(n, 0.0f), want_d = b;
    rmsnorm_backward(term.data(), NULL, dout.data(), x.data(), w.data(), want_rstd.data(), N, C);
    rmsnorm_backward(want_d.data(), NULL, dout.data(), x.data(), w.data(), want_rstd.data(), N, C);
    const Bf16s d16 = to_bf16(dout);
    const Floats dw16 = widen(d16);
    Floats first;   // the element form's outputs, end to end
    rmsnorm_forms(C, [&](const char *form, auto held, auto vec) {
        constexpr int V = decltype(held)::value;
        constexpr bool VEC = decltype(vec)::value;
        char what[96];
        const auto name = [&](const char *check) {
            snprintf(what, sizeof what, "rmsnorm C=%d %s: %s", C, form, check);
            return what;
        };
        Floats out(n, NAN), rstd(N, NAN);
        Bf16s out16(n, nan16);
        Floats rstd16(N, NAN);
        run(blocks, threads,
            [&] { rmsnorm_forward_kernel<float, V, VEC>(out.data(), rstd.data(), x.data(), w.data(), N, C, eps); });
        expect_close(name("forward out"), out, want, 1e-6);
        expect_close(name("forward rstd"), rstd, want_rstd, 1e-6);
        run(blocks, threads, [&] {
            rmsnorm_forward_kernel<__nv_bfloat16, V, VEC>(out16.data(), rstd16.data(), x.data(), w.data(), N, C, eps);
        });
        expect_rounded(name("forward bf16: fp32's out rounded"), out16, out);
        expect_bitwise(name("forward bf16: rstd"), rstd16, rstd);

        // Input gradient: resid + the norm's term, written with its bf16 copy; resid NULL; resid
        // == dinp (accumulates); bf16 mode's dout, fp32's on the widened values bit for bit.
        Floats dinp(n, NAN), alone(n, NAN), acc = b, ref(n, NAN), got(n, NAN);
        Bf16s dinp16(n, nan16);
        run(blocks, threads, [&] {
            rmsnorm_backward_input_kernel<float, V, VEC, false>(dinp.data(), dinp16.data(), b.data(), dout.data(),
                                                                x.data(), w.data(), rstd.data(), nullptr, N, C);
        });
        expect_close(name("backward: dinp = resid + term"), dinp, want_d, 1e-5);
        expect_rounded(name("backward: dinp's bf16 copy"), dinp16, dinp);
        run(blocks, threads, [&] {
            rmsnorm_backward_input_kernel<float, V, VEC, false>(alone.data(), nullptr, nullptr, dout.data(), x.data(),
                                                                w.data(), rstd.data(), nullptr, N, C);
        });
        expect_close(name("backward: resid NULL, the term"), alone, term, 1e-5);
        run(blocks, threads, [&] {
            rmsnorm_backward_input_kernel<float, V, VEC, false>(acc.data(), nullptr, acc.data(), dout.data(), x.data(),
                                                                w.data(), rstd.data(), nullptr, N, C);
        });
        expect_close(name("backward: resid == dinp accumulates"), acc, want_d, 1e-5);
        run(blocks, threads, [&] {
            rmsnorm_backward_input_kernel<float, V, VEC, false>(ref.data(), nullptr, b.data(), dw16.data(), x.data(),
                                                                w.data(), rstd.data(), nullptr, N, C);
        });
        run(blocks, threads, [&] {
            rmsnorm_backward_input_kernel<__nv_bfloat16, V, VEC, false>(got.data(), nullptr, b.data(), d16.data(),
                                                                        x.data(), w.data(), rstd.data(), nullptr, N, C);
        });
        expect_bitwise(name("backward, bf16 dout: fp32's on the widened"), got, ref);

        Floats all;
        for (const Floats *f : {&out, &rstd, &dinp, &alone, &acc, &got}) append(all, *f);
        for (const Bf16s *f : {&out16, &dinp16}) append(all, widen(*f));
        if (first.empty()) first = all;
        else expect_bitwise(name("every output, the element form's bits"), all, first);
        if (VEC)
            report(name("test buffers 16-byte aligned"),
                   aligned16({x.data(), w.data(), b.data(), dout.data(), d16.data(), out.data(), out16.data(),
                              dinp.data(), dinp16.data(), acc.data(), dw16.data(), ref.data(), got.data(),
                              alone.data()}),
                   "");
    });
}

// dweight(C) += the sum of partial's chunk rows: rmsnorm_dweight_final_kernel as rmsnorm.cu launches it.
static void dweight_final(Floats &dweight, const std::vector<double> &partial, int chunks, int C) {
    run((C + 31) / 32, RMSNORM_FINAL_THREADS,
        [&] { rmsnorm_dweight_final_kernel(dweight.data(), partial.data(), chunks, C); });
}

// The weight gradient on N rows of C: per-chunk partial sums (chunks of 4 rows, the last
// partial; column blocks of RMSNORM_DWEIGHT_COLS, the last partial where C is not a multiple),
// then their sum in chunk order, += dweight. Element by element and (C % 4 == 0) in vectors:
// each column's sum keeps its order, so the two agree bit for bit.
static void check_rmsnorm_dweight(int N, int C) {
    const size_t n = (size_t)N * C;
    const Floats x = uniform(n, 1, 2.0f), w = uniform(C, 2), dout = uniform(n, 4), dw0 = uniform(C, 13);
    Floats rstd(N), scratch(n);
    rmsnorm_forward(scratch.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
    const int chunk = 4, chunks = (N + chunk - 1) / chunk;
    const dim3 grid{(unsigned)((C + RMSNORM_DWEIGHT_COLS - 1) / RMSNORM_DWEIGHT_COLS), (unsigned)chunks, 1};
    Floats want_w = dw0;
    rmsnorm_backward(NULL, want_w.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
    const Bf16s d16 = to_bf16(dout);
    const Floats dw16 = widen(d16);
    Floats first;
    const auto form = [&](const char *how, auto vec) {
        constexpr bool VEC = decltype(vec)::value;
        char what[96];
        const auto name = [&](const char *check) {
            snprintf(what, sizeof what, "rmsnorm dweight C=%d %s: %s", C, how, check);
            return what;
        };
        Floats got_w = dw0, got_w16 = dw0, ref_w = dw0;
        std::vector<double> partial((size_t)chunks * C, NAN);
        simt_launch(grid, RMSNORM_DWEIGHT_THREADS, 0, [&] {
            rmsnorm_dweight_partial_kernel<float, VEC>(partial.data(), dout.data(), x.data(), rstd.data(), N, C, chunk);
        });
        dweight_final(got_w, partial, chunks, C);
        expect_close(name("+= the gradient"), got_w, want_w, 1e-6);
        std::fill(partial.begin(), partial.end(), NAN);
        simt_launch(grid, RMSNORM_DWEIGHT_THREADS, 0, [&] {
            rmsnorm_dweight_partial_kernel<__nv_bfloat16, VEC>(partial.data(), d16.data(), x.data(), rstd.data(), N, C,
                                                               chunk);
        });
        dweight_final(got_w16, partial, chunks, C);
        std::fill(partial.begin(), partial.end(), NAN);
        simt_launch(grid, RMSNORM_DWEIGHT_THREADS, 0, [&] {
            rmsnorm_dweight_partial_kernel<float, VEC>(partial.data(), dw16.data(), x.data(), rstd.data(), N, C, chunk);
        });
        dweight_final(ref_w, partial, chunks, C);
        expect_bitwise(name("bf16 dout: fp32's on the widened"), got_w16, ref_w);
        Floats all = got_w;
        append(all, got_w16);
        if (first.empty()) first = all;
        else expect_bitwise(name("the element form's bits"), all, first);
        if (VEC) report(name("test buffers 16-byte aligned"), aligned16({x.data(), dout.data(), d16.data()}), "");
    };
    form("elements", std::false_type());
    if (C % 4 == 0) form("vectors", std::true_type());
}

// The backward with the weight gradient fused in (WEIGHT: the held forms), on N rows of C: blocks
// of RMSNORM_FUSED_ROWS rows write their partial sums, then rmsnorm_dweight_final_kernel adds
// them. The input gradient and its bf16 copy are the unfused kernel's, bit for bit. The partial
// sums (doubles, where a changed order shows in the last bits) are, bit for bit, a host model of
// the order kernels_cuda.h fixes: in each chunk, warp w's rows w, w + 8, ... from 0.0, then the
// 8 warps in order. The weight gradient is the CPU backend's within rounding (its one sum of the
// rows in order). bf16 dout gives fp32's on the widened values, bit for bit.
static void check_rmsnorm_fused(int N, int C) {
    const size_t n = (size_t)N * C;
    const Floats x = uniform(n, 5, 2.0f), w = uniform(C, 6), b = uniform(n, 7), dout = uniform(n, 8),
                 dw0 = uniform(C, 9);
    Floats rstd(N), scratch(n);
    rmsnorm_forward(scratch.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
    Floats want_w = dw0;
    rmsnorm_backward(NULL, want_w.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
    const int chunks = (N + RMSNORM_FUSED_ROWS - 1) / RMSNORM_FUSED_ROWS, warps = RMSNORM_ROWS_PER_BLOCK;
    std::vector<double> model((size_t)chunks * C);
    for (int k = 0; k < chunks; k++)
        for (int c = 0; c < C; c++) {
            const int r1 = std::min(N, (k + 1) * RMSNORM_FUSED_ROWS);
            double chunk = 0.0;
            for (int wp = 0; wp < warps; wp++) {
                double rows = 0.0;
                for (int r = k * RMSNORM_FUSED_ROWS + wp; r < r1; r += warps)
                    rows += (double)dout[(size_t)r * C + c] * (x[(size_t)r * C + c] * rstd[r]);
                chunk += rows;
            }
            model[(size_t)k * C + c] = chunk;
        }
    const Bf16s d16 = to_bf16(dout);
    const Floats dw16 = widen(d16);
    const unsigned threads = 32 * RMSNORM_ROWS_PER_BLOCK;
    rmsnorm_forms(C, [&](const char *form, auto held, auto vec) {
        constexpr int V = decltype(held)::value;
        if constexpr (V > 0 && decltype(vec)::value) {
            char what[96];
            const auto name = [&](const char *check) {
                snprintf(what, sizeof what, "rmsnorm fused N=%d C=%d %s: %s", N, C, form, check);
                return what;
            };
            const size_t smem_floats = rmsnorm_fused_smem_bytes(V) / sizeof(float);
            std::vector<double> partial;
            // fused(dinp, dinp16, dweight, dout): the fused kernel into `partial`, then the final sum
            const auto fused = [&](Floats &dinp, Bf16s *dinp16, Floats &dweight, const auto &d) {
                partial.assign((size_t)chunks * C, NAN);
                simt_launch(dim3{(unsigned)chunks, 1, 1}, threads, smem_floats, [&] {
                    rmsnorm_backward_input_kernel<std::decay_t<decltype(d[0])>, V, true, true>(
                        dinp.data(), dinp16 ? dinp16->data() : nullptr, b.data(), d.data(), x.data(), w.data(),
                        rstd.data(), partial.data(), N, C);
                });
                dweight_final(dweight, partial, chunks, C);
            };
            Floats dinp(n, NAN), ref(n, NAN), got_w = dw0;
            Bf16s dinp16(n, nan16), ref16(n, nan16);
            fused(dinp, &dinp16, got_w, dout);
            run((N + RMSNORM_ROWS_PER_BLOCK - 1) / RMSNORM_ROWS_PER_BLOCK, threads, [&] {
                rmsnorm_backward_input_kernel<float, V, true, false>(ref.data(), ref16.data(), b.data(), dout.data(),
                                                                     x.data(), w.data(), rstd.data(), nullptr, N, C);
            });
            expect_bitwise(name("dinp, the unfused kernel's bits"), dinp, ref);
            expect_bitwise(name("dinp's bf16 copy, the unfused kernel's"), widen(dinp16), widen(ref16));
            report(name("partial sums, the model's order bit for bit"),
                   memcmp(partial.data(), model.data(), model.size() * sizeof(double)) == 0, "");
            expect_close(name("dweight +=, the CPU's"), got_w, want_w, 1e-6);
            Floats got16(n, NAN), ref_d(n, NAN), got16_w = dw0, ref_w = dw0;
            fused(got16, nullptr, got16_w, d16);
            fused(ref_d, nullptr, ref_w, dw16);
            expect_bitwise(name("bf16 dout: fp32's dinp on the widened"), got16, ref_d);
            expect_bitwise(name("bf16 dout: fp32's dweight on the widened"), got16_w, ref_w);
        }
    });
}

// rmsnorm_dweight_final_kernel's grouping, seen through one float: chunk 0 = 2^53, chunk 1 = 1,
// chunk 8 = -2^53. Phase 0 (chunks 0, 8) cancels to 0 and phase 1 holds the 1, so dweight gains
// 1; the chunks in plain order would lose the 1 (2^53 + 1 rounds to 2^53, ties to even) and
// gain 0.
static void check_rmsnorm_final_order(void) {
    const int chunks = 12, C = 1;
    const double big = 9007199254740992.0;   // 2^53: big + 1 rounds back to big
    std::vector<double> partial(chunks * C, 0.0);
    partial[0] = big, partial[8] = -big, partial[1] = 1.0;
    Floats dweight = {0.5f};
    dweight_final(dweight, partial, chunks, C);
    report("rmsnorm dweight final: phases y, y + 8, ..., then in order", dweight[0] == 1.5f, "");
}

// 13 rows: 2 blocks of 8 rows, the second partial. Widths: 69, 70, 71 (not multiples of 4:
// elements only, the last group of 1, 2 or 3 columns, so each of its guards is the one that
// stops); 72 (18 groups, lanes 18-31 idle; held 2); 768 (the 125m width: 6 groups a lane, held
// 6); 1000 (250 groups: 8 a lane for lanes 0-25, 7 for the rest; held 8). The weight gradient:
// 70, 200 (2 column blocks, the second of 72), 768 (6 full). The fused backward: 589 rows, 10
// chunks of 64 (the last of 13 rows: warps 0-4 take 2, 5-7 take 1), so the final's 8 phases
// take 2 chunks or 1; held 2, 6 and 8; and 5 rows, where warps 5-7 take none.
static void test_rmsnorm(void) {
    for (int C : {69, 70, 71, 72, 768, 1000}) check_rmsnorm_rows(13, C);
    for (int C : {70, 200, 768}) check_rmsnorm_dweight(13, C);
    for (int C : {72, 768, 1000}) check_rmsnorm_fused(589, C);
    check_rmsnorm_fused(5, 72);
    check_rmsnorm_final_order();
    // rmsnorm.cu fuses the weight gradient where cuda_rmsnorm_fused says (and the rows are
    // vectors), and launches it only for held forms: the two must agree on every width.
    int disagree = 0;
    for (int C = 1; C <= 4096; C++) disagree += cuda_rmsnorm_fused(C) != (C % 4 == 0 && rmsnorm_held_groups(C) > 0);
    report("rmsnorm: cuda_rmsnorm_fused = a held vector form, C 1 .. 4096", disagree == 0, "");
}

// ---- swiglu_kernels.cuh -------------------------------------------------------------------
// n bf16s 16-byte aligned, as Bf16x8's loads want them (a std::vector's data need not be).
struct Bf16Buffer {
    std::vector<Bf16x8> vecs;
    explicit Bf16Buffer(size_t n) : vecs((n + 7) / 8) {
        for (Bf16x8 &v : vecs)
            for (__nv_bfloat16 &x : v.v) x = nan16;
    }
    __nv_bfloat16 *data() { return vecs[0].v; }
};

// swiglu_backward_packed_kernel over N rows of FF into rows of ld (16-byte aligned), against the
// fp32 gradients rdg and rdu of the widened inputs rounded, each block checked with the other's
// columns refilled: together, every column of every row, and the gaps untouched.
static void check_swiglu_packed(const char *how, int N, int FF, int ld, const Bf16s &d16, const Bf16s &g16,
                                const Bf16s &u16, const Floats &rdg, const Floats &rdu, bool vectors) {
    const size_t cells = (size_t)N * ld;
    Bf16Buffer out(cells), d(d16.size()), g(g16.size()), u(u16.size());
    std::copy(d16.begin(), d16.end(), d.data()), std::copy(g16.begin(), g16.end(), g.data());
    std::copy(u16.begin(), u16.end(), u.data());
    run(2, 32, [&] {   // N rows over 2 blocks of 32 threads: rows in turn, a row's columns in turn
        swiglu_backward_packed_kernel(out.data(), ld, d.data(), g.data(), u.data(), N, FF, vectors);
    });
    Bf16s packed_g(out.data(), out.data() + cells), packed_u = packed_g;
    for (size_t r = 0; r < (size_t)N; r++)
        for (int c = 0; c < FF; c++) packed_g[r * ld + FF + c] = nan16, packed_u[r * ld + c] = nan16;
    char what[96];
    snprintf(what, sizeof what, "swiglu backward packed%s: dgate block, gaps untouched", how);
    expect_packed(what, packed_g, ld, 0, rdg, FF);
    snprintf(what, sizeof what, "swiglu backward packed%s: dup block, gaps untouched", how);
    expect_packed(what, packed_u, ld, FF, rdu, FF);
}

static void test_swiglu(void) {
    const int N = 5, FF = 70;
    const size_t n = (size_t)N * FF;   // 350 elements over 2 blocks of 64 threads: grid-stride
    const Floats gate = uniform(n, 5, 4.0f), up = uniform(n, 6, 2.0f), dout = uniform(n, 7);
    Floats out(n, NAN), want(n), dg(n, NAN), du(n, NAN), want_dg(n), want_du(n);
    swiglu_forward(want.data(), gate.data(), up.data(), N, FF);
    swiglu_backward(want_dg.data(), want_du.data(), dout.data(), gate.data(), up.data(), N, FF);
    run(2, 64, [&] { swiglu_forward_kernel<float, float>(out.data(), gate.data(), up.data(), n); });
    expect_close("swiglu forward", out, want, 1e-6);
    run(2, 64, [&] { swiglu_backward_kernel(dg.data(), du.data(), dout.data(), gate.data(), up.data(), n); });
    expect_close("swiglu backward: dgate (written)", dg, want_dg, 1e-6);
    expect_close("swiglu backward: dup (written)", du, want_du, 1e-6);

    // bf16 forms: gate, up, dout bf16 (as their GEMMs store them); the fp32 forms on the widened
    // values, rounded, are their results.
    const Bf16s g16 = to_bf16(gate), u16 = to_bf16(up), d16 = to_bf16(dout);
    const Floats gw = widen(g16), uw = widen(u16), dw = widen(d16);
    Floats ref(n), rdg(n), rdu(n);
    run(2, 64, [&] { swiglu_forward_kernel<float, float>(ref.data(), gw.data(), uw.data(), n); });
    run(2, 64, [&] { swiglu_backward_kernel(rdg.data(), rdu.data(), dw.data(), gw.data(), uw.data(), n); });
    Bf16s h16(n, nan16);
    run(2, 64, [&] { swiglu_forward_kernel<__nv_bfloat16, __nv_bfloat16>(h16.data(), g16.data(), u16.data(), n); });
    expect_rounded("swiglu forward bf16: fp32's rounded", h16, ref);
    // 16-byte vectors: 350 = 43 x 8 + 6, so the last 6 one at a time (from a 16-byte aligned
    // copy: a vector's struct puts the data where the GPU's arena would)
    Bf16Buffer v_out(n), v_g(n), v_u(n);
    std::copy(g16.begin(), g16.end(), v_g.data()), std::copy(u16.begin(), u16.end(), v_u.data());
    run(2, 16, [&] { swiglu_forward_bf16x8_kernel(v_out.data(), v_g.data(), v_u.data(), n); });
    expect_rounded("swiglu forward bf16, 8 a load: fp32's rounded", Bf16s(v_out.data(), v_out.data() + n), ref);
    check_swiglu_packed("", N, FF, 2 * FF + 3, d16, g16, u16, rdg, rdu, false);
    // and the packed backward by vectors: 72 columns (9 vectors) a row, rows 8 apart past them
    const int FV = 72;
    const size_t nv = (size_t)N * FV;
    const Bf16s gv = to_bf16(uniform(nv, 15, 4.0f)), uv = to_bf16(uniform(nv, 16, 2.0f)), dv = to_bf16(uniform(nv, 17));
    Floats rdgv(nv), rduv(nv);
    run(2, 64, [&] { swiglu_backward_kernel(rdgv.data(), rduv.data(), widen(dv).data(), widen(gv).data(),
                                            widen(uv).data(), nv); });
    check_swiglu_packed(", 8 a load", N, FV, 2 * FV + 8, dv, gv, uv, rdgv, rduv, true);
}

// ---- rope_kernels.cuh ---------------------------------------------------------------------
// The four-pairs-a-thread form against the pair-a-thread one, bitwise (the same expressions):
// `quads` 4-pair groups a half-head, rows over 3 blocks of 8 threads (fewer than a row's quads
// when H x quads > 8, so threads take them in turn).
static void rope_forward_bf16x4(const Floats &cos_tab, const Floats &sin_tab, int B, int T, int H, int HD,
                                int quads) {
    const int N = B * T;
    Bf16s want = to_bf16(uniform((size_t)N * H * HD, 30 + quads));
    Bf16s got = want;
    run(3, 8, [&] { rope_forward_bf16_kernel(want.data(), cos_tab.data(), sin_tab.data(), N, T, H, HD); });
    run(3, 8, [&] { rope_forward_bf16x4_kernel(got.data(), cos_tab.data(), sin_tab.data(), N, T, H, HD); });
    char name[96];
    snprintf(name, sizeof name, "rope forward bf16, 4 pairs a thread (%d a half-head): as 1", quads);
    expect_bitwise(name, widen(got), widen(want));
}
static void test_rope(void) {
    // 10 token rows of 12 pairs over 3 blocks of 8 threads: blocks take rows in turn, threads
    // a row's pairs in turn
    const int B = 2, T = 5, N = B * T, H = 3, HD = 8, half = HD / 2;
    const size_t n = (size_t)B * T * H * HD, nt = (size_t)T * half;
    float inv_freq[half];
    rope_inv_freq(inv_freq, HD, 10000.0f, NULL);
    Floats cos_tab(nt), sin_tab(nt), gcos(nt, NAN), gsin(nt, NAN);
    rope_tables(cos_tab.data(), sin_tab.data(), T, HD, inv_freq);
    RopeInvFreq f{};
    for (int i = 0; i < half; i++) f.v[i] = inv_freq[i];
    run(1, 16, [&] { rope_tables_kernel(gcos.data(), gsin.data(), T, half, f); });
    expect_close("rope tables: cos", gcos, cos_tab, 1e-7);
    expect_close("rope tables: sin", gsin, sin_tab, 1e-7);

    const Floats x = uniform(n, 8), dout = uniform(n, 9);
    Floats out(n, NAN), want(n), dx(n, NAN), want_dx(n);
    rope_forward(want.data(), x.data(), cos_tab.data(), sin_tab.data(), B, T, H, HD);
    rope_backward(want_dx.data(), dout.data(), cos_tab.data(), sin_tab.data(), B, T, H, HD);
    run(3, 8, [&] { rope_forward_kernel(out.data(), x.data(), cos_tab.data(), sin_tab.data(), N, T, H, HD); });
    expect_close("rope forward", out, want, 1e-6);
    Floats inplace = x;
    run(3, 8,
        [&] { rope_forward_kernel(inplace.data(), inplace.data(), cos_tab.data(), sin_tab.data(), N, T, H, HD); });
    expect_bitwise("rope forward in place: as out-of-place", inplace, out);
    run(3, 8, [&] { rope_backward_kernel(dx.data(), dout.data(), cos_tab.data(), sin_tab.data(), N, T, H, HD); });
    expect_close("rope backward: dx (written)", dx, want_dx, 1e-6);

    // bf16 forms: x rotated in place in bf16; the gradient packed into (rows, ld) at column 3.
    Bf16s x16 = to_bf16(x);
    const Floats xw = widen(x16);
    Floats ref(n);
    run(3, 8, [&] { rope_forward_kernel(ref.data(), xw.data(), cos_tab.data(), sin_tab.data(), N, T, H, HD); });
    run(3, 8, [&] { rope_forward_bf16_kernel(x16.data(), cos_tab.data(), sin_tab.data(), N, T, H, HD); });
    expect_rounded("rope forward bf16 in place: fp32's on widened x, rounded", x16, ref);
    rope_forward_bf16x4(cos_tab, sin_tab, B, T, H, HD, 1);   // one quad a head
    const int ld = H * HD + 5;
    Bf16s packed((size_t)B * T * ld, nan16);
    run(3, 8, [&] {
        rope_backward_packed_kernel(packed.data() + 3, ld, dout.data(), cos_tab.data(), sin_tab.data(), N, T, H, HD);
    });
    expect_packed("rope backward packed: fp32's rounded, gaps untouched", packed, ld, 3, dx, (size_t)H * HD);

    // head dim 24: 3 quads a half-head, 9 a row of 3 heads
    const int HD3 = 24, half3 = HD3 / 2;
    float inv3[half3];
    rope_inv_freq(inv3, HD3, 10000.0f, NULL);
    Floats cos3((size_t)T * half3), sin3((size_t)T * half3);
    rope_tables(cos3.data(), sin3.data(), T, HD3, inv3);
    rope_forward_bf16x4(cos3, sin3, B, T, H, HD3, 3);
}

// ---- crossentropy_kernels.cuh -------------------------------------------------------------
// The element of v `phase` (0..3) past its first boundary of 4 elements (16 bytes of floats, 8 of
// bf16s); v has 4 elements to spare. Row n of V from there starts phase + n V elements past a
// boundary, so where V % 4 != 0 the rows take every head (the 0..3 values before the kernel's
// first float4).
template <typename T> static T *at_phase(std::vector<T> &v, size_t phase) {
    const size_t b = 4 * sizeof(T), k = (b - (uintptr_t)v.data() % b) % b / sizeof(T);
    return v.data() + k + phase;
}

// The rows kernel in its two forms (crossentropy.cu launches the register form where the row
// fits, crossentropy_held_fits, else the walk) on N rows of V, `threads` a row.
enum CeForm { CE_WALK, CE_HELD };
static const char *const ce_form_names[] = {"walk", "held"};
template <typename D>
static void ce_rows(CeForm form, int N, unsigned threads, D *d, double *row_loss, const float *x,
                    const int32_t *targets, int V, float scale) {
    if (form == CE_HELD)
        run(N, threads,
            [&] { crossentropy_rows_held_kernel<D, CROSSENTROPY_HELD_GROUPS>(d, row_loss, x, targets, V, scale); });
    else run(N, threads, [&] { crossentropy_rows_kernel<D>(d, row_loss, x, targets, V, scale); });
}

// A form's outputs on the same rows: dlogits in place (fp32, in the logits), into a separate
// fp32 buffer and a bf16 one, and the row losses of each.
struct CeOut {
    Floats in_place, d32;
    Bf16s d16;
    std::vector<double> loss_in_place, loss32, loss16;
};

// The rows kernel of `form` on N = 8 rows of V logits, `threads` a row, the logits `xp` elements
// past a 16-byte boundary and the separate outputs `dp`: fp32 in place (as the fused classifier
// runs it) against the CPU kernel, with the loss it sums; fp32 into a separate buffer and bf16
// bitwise against the in-place values (rounded). Targets: a row's first value, its last, a pad
// (row 2), and values beside them (clamped to the row, where V < 4), on rows of every head where
// V % 4 != 0; row 6 increasing, so a thread's running max (the online softmax) moves at every
// fold; row 4 for the order of the folds (below).
static CeOut check_crossentropy_form(CeForm form, int V, unsigned threads, size_t xp, size_t dp) {
    const int N = 8;
    const size_t n = (size_t)N * V;
    const float scale = 0.25f;
    std::vector<int32_t> targets = {0, V - 1, -1, V - 2, 1, V / 2, 2, V - 3};
    for (int32_t &t : targets) t = std::min(t, V - 1);
    Floats x_buf(n + 4), logits_buf(n + 4), d32_buf(n + 4, NAN), want(n);
    float *x = at_phase(x_buf, xp), *logits = at_phase(logits_buf, xp), *d32 = at_phase(d32_buf, dp);
    const Floats init = uniform(n, 12 + (uint32_t)V, 3.0f);
    std::copy(init.begin(), init.end(), x);
    for (int j = 0; j < V; j++) x[(size_t)6 * V + j] = (float)j * 0.01f;
    // Row 4 shows the order of a thread's folds, where thread 0 has a pair of float4s, a (values
    // h .. h + 3) and b (h + 4 threads .. + 3): a.x = 0, the max and the row's target; b's four
    // values -37, whose terms e^-37 are each 0.38 of the last place of a sum in [1, 2); the rest
    // in (-34, -22]. Folded a then b, thread 0's sum is past 1 when b's terms come, and each is
    // lost; b first, they make 1.5 places before the 1 comes and rounds them to 1 or 2: another
    // sum, and the row's loss, log(sum) (x[target] = m = 0, the sum 1 + ~1e-8), another value.
    float *r4 = x + (size_t)4 * V;
    const int h4 = ce_head(r4, V);
    if ((V - h4) / 4 > (int)threads) {
        for (int j = 0; j < V; j++) r4[j] = -22.0f - 2.0f * (3.0f + init[(size_t)4 * V + j]);
        for (int i = 0; i < 4; i++) r4[h4 + 4 * (int)threads + i] = -37.0f;
        r4[h4] = 0.0f;
        targets[4] = h4;
    }
    std::copy(x, x + n, logits);   // overwritten in place; x stays for the separate outputs
    const double want_loss = crossentropy_forward_backward(want.data(), x, targets.data(), N, V, scale);
    const char *f = ce_form_names[form];
    char what[96], detail[80];

    CeOut out;
    std::vector<double> &row_loss = out.loss_in_place, loss = {0.5};   // += onto a running total
    row_loss.assign(N, NAN);
    ce_rows(form, N, threads, logits, row_loss.data(), logits, targets.data(), V, scale);
    const Floats &d = out.in_place = Floats(logits, logits + n);
    snprintf(what, sizeof what, "cross-entropy %s V %d, %u threads, at +%zu: dlogits in place", f, V, threads, xp);
    expect_close(what, d, want, 1e-6);
    run(1, 64, [&] { crossentropy_sum_kernel(loss.data(), row_loss.data(), N, scale); });
    const double err = std::fabs(loss[0] - 0.5 - want_loss) / std::max(std::fabs(want_loss), 1e-30);
    snprintf(what, sizeof what, "cross-entropy %s V %d: loss += scale x the row losses", f, V);
    snprintf(detail, sizeof detail, " (rel err %.2e, bound 1e-6)", err);
    report(what, err <= 1e-6, detail);

    // The same kernel on the same logits: the same sums, so each value's bits; only the stores
    // differ (4 at once where the buffer's rows share the logits' alignment, else one by one).
    out.loss32.assign(N, NAN);
    ce_rows(form, N, threads, d32, out.loss32.data(), x, targets.data(), V, scale);
    out.d32 = Floats(d32, d32 + n);
    snprintf(what, sizeof what, "cross-entropy %s V %d: fp32 dlogits at +%zu, bitwise", f, V, dp);
    expect_bitwise(what, out.d32, d);
    Bf16s d16_buf(n + 4, nan16);
    __nv_bfloat16 *d16 = at_phase(d16_buf, dp);
    out.loss16.assign(N, NAN);
    ce_rows(form, N, threads, d16, out.loss16.data(), x, targets.data(), V, scale);
    out.d16 = Bf16s(d16, d16 + n);
    snprintf(what, sizeof what, "cross-entropy %s V %d: bf16 dlogits at +%zu, fp32's rounded", f, V, dp);
    expect_rounded(what, out.d16, d);
    const bool same = memcmp(out.loss16.data(), row_loss.data(), N * sizeof(double)) == 0 &&
                      memcmp(out.loss32.data(), row_loss.data(), N * sizeof(double)) == 0;
    snprintf(what, sizeof what, "cross-entropy %s V %d: the row losses of all three, bitwise", f, V);
    report(what, same, "");
    // Nothing outside the rows written: the 4 spare elements around them still NaN (i - k >= n
    // before the rows too, where the unsigned difference wraps).
    const size_t k32 = (size_t)(d32 - d32_buf.data()), k16 = (size_t)(d16 - d16_buf.data());
    size_t outside = 0;
    for (size_t i = 0; i < n + 4; i++)
        outside += (i - k32 >= n && !std::isnan(d32_buf[i])) + (i - k16 >= n && d16_buf[i].bits != nan16.bits);
    snprintf(what, sizeof what, "cross-entropy %s V %d: nothing written outside the rows", f, V);
    report(what, outside == 0, "");
    return out;
}

// Both forms where the register form takes the row (crossentropy_held_fits at G =
// CROSSENTROPY_HELD_GROUPS), each checked as above, and the register form's every output
// bitwise the walk's: the same values a thread, folded in the same order.
static void check_crossentropy(int V, unsigned threads, size_t xp, size_t dp) {
    const CeOut walk = check_crossentropy_form(CE_WALK, V, threads, xp, dp);
    if (!crossentropy_held_fits(V, (int)threads, CROSSENTROPY_HELD_GROUPS)) return;
    const CeOut held = check_crossentropy_form(CE_HELD, V, threads, xp, dp);
    char what[96];
    snprintf(what, sizeof what, "cross-entropy V %d: held == walk, dlogits in place", V);
    expect_bitwise(what, held.in_place, walk.in_place);
    snprintf(what, sizeof what, "cross-entropy V %d: held == walk, fp32 dlogits at +%zu", V, dp);
    expect_bitwise(what, held.d32, walk.d32);
    size_t differ = 0;
    for (size_t i = 0; i < walk.d16.size(); i++) differ += held.d16[i].bits != walk.d16[i].bits;
    snprintf(what, sizeof what, "cross-entropy V %d: held == walk, bf16 dlogits at +%zu", V, dp);
    report(what, differ == 0, differ ? " (bf16 values differ)" : "");
    const size_t bytes = walk.loss32.size() * sizeof(double);
    const bool same = memcmp(held.loss_in_place.data(), walk.loss_in_place.data(), bytes) == 0 &&
                      memcmp(held.loss32.data(), walk.loss32.data(), bytes) == 0 &&
                      memcmp(held.loss16.data(), walk.loss16.data(), bytes) == 0;
    snprintf(what, sizeof what, "cross-entropy V %d: held == walk, the row losses", V);
    report(what, same, "");
}

static void test_crossentropy(void) {
    // Where the launcher takes the register form (G = 8 float4s a thread): a row of V has at most
    // V / 4 float4s, so V <= 32 threads + 3.
    const bool fits = crossentropy_held_fits(2051, 64, 8) && !crossentropy_held_fits(2052, 64, 8) &&
                      crossentropy_held_fits(32000, 1024, 8) && crossentropy_held_fits(32771, 1024, 8) &&
                      !crossentropy_held_fits(32772, 1024, 8) && !crossentropy_held_fits(50257, 1024, 8) &&
                      crossentropy_held_fits(8191, 256, 8) && crossentropy_held_fits(1, 64, 8);
    report("cross-entropy: the register form takes V <= 32 x threads + 3", fits && CROSSENTROPY_HELD_GROUPS == 8, "");
    // 64 threads a row: 2 warps. V % 4 == 0 (every row on a 16-byte boundary: 75 float4s, threads
    // 0..10 a pair, the rest one) and not (301..303: heads and tails of 1..3 values).
    for (int V = 300; V <= 303; V++) check_crossentropy(V, 64, 0, 0);
    // Several float4s a thread: 1283 = 4 x (64 x 5) + 3, two pairs and one alone; 3073 over 256
    // threads (as crossentropy.cu launches V < 8192) a pair and one alone. The logits off a
    // boundary, and the outputs at another phase than theirs (their stores one value at a time).
    check_crossentropy(1283, 64, 1, 0);
    check_crossentropy(3073, 256, 3, 2);
    check_crossentropy(302, 64, 2, 1);
    // The register form's limits at 64 threads: 8 float4s a thread in every row (2048, and 2051
    // with heads of 1..3 values: (2051 - h) / 4 = 512 = 8 x 64 for every h), and threads of 8
    // (four pairs) beside threads of 7 (three pairs and one alone): 1844 at +1 is 460 float4s, 7 x
    // 64 + 12; 1845 at +2 every head. 2052 is past the register form: the walk alone.
    check_crossentropy(2048, 64, 0, 0);
    check_crossentropy(2051, 64, 1, 3);
    check_crossentropy(1844, 64, 1, 1);
    check_crossentropy(1845, 64, 2, 0);
    check_crossentropy(2052, 64, 0, 0);
    // Rows narrower than the block (40 values, 64 threads: 54 threads hold no float4), and
    // narrower than a float4 (3, 2 and 1 values, no float4: a head, a tail, or both).
    check_crossentropy(40, 64, 0, 0);
    check_crossentropy(3, 64, 1, 1);
    check_crossentropy(2, 64, 3, 0);
    check_crossentropy(1, 64, 2, 2);
}

// ---- embedding_kernels.cuh ----------------------------------------------------------------
// The runs kernel as it was, a position at a time (block i, column c: the same adds in the same
// order), for every block and column: what the batched walk must give bit for bit.
static void embedding_runs_in_order(Floats &dwte, const Floats &dout, const std::vector<int32_t> &keys,
                                    const std::vector<int32_t> &rows, int N, int C) {
    for (int i = 0; i < N; i++) {
        const int tok = keys[i];
        if (i > 0 && keys[i - 1] == tok) continue;
        for (int c = 0; c < C; c++) {
            float acc = 0.0f;
            for (int j = i; j < N && keys[j] == tok; j++) acc += dout[(size_t)rows[j] * C + c];
            dwte[(size_t)tok * C + c] += acc;
        }
    }
}

// Tokens run[t] times each (0: never), in an order shuffled by seed, stably sorted as
// embedding.cu sorts them: keys and the rows they came from. The runs kernel at `threads` a
// block against embedding_runs_in_order, bitwise, on dout values of 31 magnitudes (so that
// another order of a run's adds would show in the bits), C not a multiple of threads.
static void check_embedding_runs(const char *what, const std::vector<int> &run_of, int C, unsigned threads,
                                 uint32_t seed) {
    std::vector<int32_t> tokens;
    for (size_t t = 0; t < run_of.size(); t++) tokens.insert(tokens.end(), (size_t)run_of[t], (int32_t)t);
    const int N = (int)tokens.size(), V = (int)run_of.size();
    for (int n = N - 1; n > 0; n--) {
        seed = seed * 1664525u + 1013904223u;
        std::swap(tokens[(size_t)n], tokens[(seed >> 8) % (uint32_t)(n + 1)]);
    }
    std::vector<int32_t> rows(N), keys(N);
    for (int n = 0; n < N; n++) rows[n] = n;
    std::stable_sort(rows.begin(), rows.end(), [&](int32_t a, int32_t b) { return tokens[a] < tokens[b]; });
    for (int n = 0; n < N; n++) keys[n] = tokens[rows[n]];
    Floats dout = uniform((size_t)N * C, seed);
    for (size_t i = 0; i < dout.size(); i++) dout[i] = std::ldexp(dout[i], (int)(i * 5 % 31) - 15);
    const Floats dwte0 = uniform((size_t)V * C, seed + 1);
    Floats got = dwte0, want = dwte0;
    embedding_runs_in_order(want, dout, keys, rows, N, C);
    simt_launch(dim3{(unsigned)N, (unsigned)((C + threads - 1) / threads), 1}, threads, 0, [&] {
        embedding_backward_runs_kernel(got.data(), dout.data(), keys.data(), rows.data(), N, C);
    });
    expect_bitwise(what, got, want);
}

static void test_embedding(void) {
    // 37 rows of 72 columns from a 11-token table: tokens repeat (runs of several rows, not
    // adjacent), the first and last ids appear, id 5 never does.
    const int N = 37, C = 72, V = 11, unused = 5;
    std::vector<int32_t> tokens(N);
    for (int n = 0; n < N; n++) {
        const int t = (n * 7 + n / 5) % (V - 1);
        tokens[n] = t >= unused ? t + 1 : t;
    }
    tokens[0] = 0;
    tokens[N - 1] = V - 1;
    const Floats wte = uniform((size_t)V * C, 41), dout = uniform((size_t)N * C, 42);
    Floats out((size_t)N * C, NAN), want((size_t)N * C);
    embedding_forward(want.data(), tokens.data(), wte.data(), N, C);
    // 5 blocks and 32 threads: fewer than the rows and the columns
    run(5, 32, [&] { embedding_forward_kernel(out.data(), tokens.data(), wte.data(), N, C); });
    expect_bitwise("embedding forward: the rows copied (5 blocks, 32 threads)", out, want);

    // The backward as embedding.cu runs it: iota, a stable sort of (token, row) (cub's there,
    // std::stable_sort here), then one block a sorted position and column block.
    std::vector<int32_t> rows(N, -1);
    run(2, 8, [&] { iota_kernel(rows.data(), N); });
    bool iota = true;
    for (int n = 0; n < N; n++) iota &= rows[n] == n;
    report("embedding backward: iota (2 blocks, 8 threads)", iota, "");
    std::stable_sort(rows.begin(), rows.end(), [&](int32_t a, int32_t b) { return tokens[a] < tokens[b]; });
    std::vector<int32_t> keys(N);
    for (int n = 0; n < N; n++) keys[n] = tokens[rows[n]];
    const Floats dwte0 = uniform((size_t)V * C, 43);
    Floats dwte = dwte0, want_dwte = dwte0;
    embedding_backward(want_dwte.data(), dout.data(), tokens.data(), N, C);
    const unsigned block = 32;
    simt_launch(dim3{(unsigned)N, (unsigned)((C + block - 1) / block), 1}, block, 0, [&] {
        embedding_backward_runs_kernel(dwte.data(), dout.data(), keys.data(), rows.data(), N, C);
    });
    // Each token's run is summed, then added (the CPU adds row by row): close, not bitwise; a
    // lost row or a run cut short is an O(1) error. The id never used keeps its row exactly.
    Floats d(dwte.size()), w(dwte.size());
    for (size_t i = 0; i < dwte.size(); i++) d[i] = dwte[i] - dwte0[i], w[i] = want_dwte[i] - dwte0[i];
    expect_close("embedding backward: dwte += each token's rows", d, w, 1e-6);
    bool kept = std::find(tokens.begin(), tokens.end(), unused) == tokens.end();
    for (int c = 0; kept && c < C; c++) kept = dwte[(size_t)unused * C + c] == dwte0[(size_t)unused * C + c];
    report("embedding backward: an unused id's row untouched", kept, "");

    // Runs of 1, of the batch's length and one either side, twice and thrice it, of blockDim.x
    // and one more (every probe of the first round equal), of blockDim.x^2 and one more, and of
    // 2950 (the byte-level space's: past 32^2, so at 32 threads the search's step grows twice),
    // an id never used (5), the last run ending at N; 24 columns at 32 threads: 8 threads
    // past C take part in the search only.
    const int B = EMBEDDING_RUN_BATCH;
    check_embedding_runs("embedding backward: runs of 1 to 2950 (32 threads) bitwise",
                         {1, 2950, B - 1, B, B + 1, 0, 1, 2 * B, 3 * B + 1, 1, 32, 33, 1024, 1025, 1, 100}, 24, 32,
                         91);
    check_embedding_runs("embedding backward: runs of 1 to 700 (64 threads) bitwise",
                         {3, 1, 700, B - 1, B + 1, 64, 65, 1, 2 * B - 1, 1, 129}, 70, 64, 92);
}

// ---- adamw_kernels.cuh --------------------------------------------------------------------
// Params, first and second moments (v >= 0) before the first step.
struct AdamwState {
    Floats p, m, v;
};
static AdamwState adamw_start(size_t n) {
    AdamwState s{uniform(n, 51), uniform(n, 52, 0.01f), uniform(n, 53, 0.001f)};
    for (float &x : s.v) x = std::fabs(x);
    return s;
}
// Three steps (t = 1, 2 and 9: the bias corrections change) on 1000 values with weight decay,
// 3 blocks of 64 threads: bitwise adamw_update's params and moments (same operations, same
// order, nothing contracted here), and the bf16 copy the rounded params.
static void test_adamw(void) {
    const size_t n = 1000;
    const double lr = 3e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, wd = 0.1;
    AdamwState k = adamw_start(n), c = k;   // the kernel's and the CPU's
    Bf16s p16(n, nan16);
    bool same = true, rounded = true;
    for (int t : {1, 2, 9}) {
        const Floats g = uniform(n, 60 + (uint32_t)t, 0.5f);
        adamw_update(c.p.data(), g.data(), c.m.data(), c.v.data(), n, t, lr, beta1, beta2, eps, wd);
        const AdamwScalars sc = adamw_scalars(t, lr, beta1, beta2, eps, wd);
        run(3, 64, [&] { adamw_kernel(k.p.data(), p16.data(), g.data(), 1.0f, k.m.data(), k.v.data(), n, sc); });
        const size_t bytes = n * sizeof(float);
        same &= memcmp(k.p.data(), c.p.data(), bytes) == 0 && memcmp(k.m.data(), c.m.data(), bytes) == 0 &&
                memcmp(k.v.data(), c.v.data(), bytes) == 0;
        for (size_t i = 0; i < n; i++) rounded &= p16[i].bits == __float2bfloat16_rn(c.p[i]).bits;
    }
    report("adamw: params, m and v bitwise adamw_update's (3 steps)", same, "");
    report("adamw: the bf16 copy is the params rounded", rounded, "");
    // Without a bf16 copy (fp32 mode) the same fp32 update.
    AdamwState q = adamw_start(n), want = q;
    const Floats g = uniform(n, 61, 0.5f);
    adamw_update(want.p.data(), g.data(), want.m.data(), want.v.data(), n, 1, lr, beta1, beta2, eps, wd);
    const AdamwScalars sc = adamw_scalars(1, lr, beta1, beta2, eps, wd);
    run(2, 32, [&] { adamw_kernel(q.p.data(), nullptr, g.data(), 1.0f, q.m.data(), q.v.data(), n, sc); });
    expect_bitwise("adamw: no bf16 copy, the same params", q.p, want.p);

    // The clip factor taken as the gradients are read (clip 0.37): bitwise a pass of g *= clip
    // (as the scaling kernel the update replaced did it) then the update with no factor, and
    // grad_scale then adamw_update on the CPU; the gradients themselves not written.
    const float clip = 0.37f;
    AdamwState fused = adamw_start(n), split = fused, cpu = fused;
    Bf16s f16(n, nan16), s16(n, nan16);
    const Floats g0 = uniform(n, 62, 0.5f);
    Floats g_fused = g0, g_split = g0, g_cpu = g0;
    for (int t : {1, 2}) {
        const AdamwScalars st = adamw_scalars(t, lr, beta1, beta2, eps, wd);
        run(3, 64, [&] {
            adamw_kernel(fused.p.data(), f16.data(), g_fused.data(), clip, fused.m.data(), fused.v.data(), n, st);
        });
        Floats scaled = g_split;
        for (float &x : scaled) x *= clip;
        run(3, 64, [&] {
            adamw_kernel(split.p.data(), s16.data(), scaled.data(), 1.0f, split.m.data(), split.v.data(), n, st);
        });
        Floats cpu_scaled = g_cpu;
        grad_scale(cpu_scaled.data(), n, clip);
        adamw_update(cpu.p.data(), cpu_scaled.data(), cpu.m.data(), cpu.v.data(), n, t, lr, beta1, beta2, eps, wd);
    }
    expect_bitwise("adamw clip 0.37: params bitwise g *= clip then adamw", fused.p, split.p);
    expect_bitwise("adamw clip 0.37: m bitwise g *= clip then adamw", fused.m, split.m);
    expect_bitwise("adamw clip 0.37: v bitwise g *= clip then adamw", fused.v, split.v);
    expect_bitwise("adamw clip 0.37: bf16 copy bitwise", widen(f16), widen(s16));
    expect_bitwise("adamw clip 0.37: params bitwise grad_scale then adamw_update", fused.p, cpu.p);
    expect_bitwise("adamw clip 0.37: the gradients left unscaled", g_fused, g0);
}

// ---- gradnorm_kernels.cuh -----------------------------------------------------------------
// sumsq_partial_kernel as it was before its vector loop, a value a thread at a time: the order
// of the adds the kernel keeps (thread t of block b: g[b B + t + k S] for k = 0, 1, ..., then
// block_sum), so its partials are these bits.
__global__ void sumsq_partial_values(double *partial, const float *g, size_t n) {
    double acc = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        acc += (double)g[i] * g[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// The partials of blocks x threads over g[offset, offset + n) bitwise sumsq_partial_values's.
static void check_sumsq_order(const char *what, const Floats &g, size_t offset, size_t n, unsigned blocks,
                              unsigned threads) {
    std::vector<double> got(blocks, NAN), want(blocks, NAN);
    run(blocks, threads, [&] { sumsq_partial_kernel(got.data(), g.data() + offset, n); });
    run(blocks, threads, [&] { sumsq_partial_values(want.data(), g.data() + offset, n); });
    size_t differ = 0;
    for (unsigned b = 0; b < blocks; b++) differ += memcmp(&got[b], &want[b], sizeof(double)) != 0;
    char detail[64];
    snprintf(detail, sizeof detail, differ ? " (%zu of %u differ)" : "", differ, blocks);
    report(what, differ == 0, detail);
}

// The sum of squares as cuda_grad_sum_squares runs it (cuda_grad_sum_squares_blocks blocks of
// GRADNORM_BLOCK, then one block over the partials, added to what *sumsq held) against
// grad_sum_squares: another order, so close (1e-12: a lost or doubled value is about 1e-4 of
// the total here). The vector loop's partials bitwise the value-a-thread order's, on values of
// 41 magnitudes (2^-20 to 2^20), so that another order of the adds would show in the bits:
// whole batches of GRADNORM_STEPS steps and the longest rest (7 steps and 77 values: the rest
// loop's; a batch taken there would read past n), whole batches alone, 64 threads (16 float4s a
// step), and g one float past 16-byte alignment (the value-a-thread loop throughout).
// Then scale and clip, bitwise g times grad_scale's and grad_clip_factor's.
static void test_gradnorm(void) {
    const size_t n = 5 * 1024 + 37;   // 6 blocks, the last one ragged
    const Floats g = uniform(n, 71);
    const int blocks = cuda_grad_sum_squares_blocks(n);
    std::vector<double> partial((size_t)blocks, NAN);
    double sumsq = 2.5;   // a previous tensor's share
    run((unsigned)blocks, GRADNORM_BLOCK, [&] { sumsq_partial_kernel(partial.data(), g.data(), n); });
    run(1, GRADNORM_BLOCK, [&] { sumsq_final_kernel(&sumsq, partial.data(), blocks); });
    const double want = 2.5 + grad_sum_squares(g.data(), n);
    const double err = std::fabs(sumsq - want) / want;
    char detail[64];
    snprintf(detail, sizeof detail, " (%d blocks, rel err %.1e)", blocks, err);
    report("gradnorm: sum of squares, added to *sumsq", err <= 1e-12, detail);
    // Fewer blocks than values need (the 1024-block cap of a large tensor): the grid strides.
    std::vector<double> few(2, NAN);
    double strided = 0.0;
    run(2, 64, [&] { sumsq_partial_kernel(few.data(), g.data(), n); });
    run(1, 32, [&] { sumsq_final_kernel(&strided, few.data(), 2); });
    const double err2 = std::fabs(strided - (want - 2.5)) / (want - 2.5);
    snprintf(detail, sizeof detail, " (rel err %.1e)", err2);
    report("gradnorm: sum of squares, 2 blocks of 64 striding", err2 <= 1e-12, detail);
    Floats wide = uniform(3 * 256 * GRADNORM_STEPS * 6, 72);
    for (size_t i = 0; i < wide.size(); i++) wide[i] = std::ldexp(wide[i], (int)(i * 7 % 41) - 20);
    const size_t batch = 3 * 256 * GRADNORM_STEPS;   // 3 blocks of 256: the values of one batch
    check_sumsq_order("gradnorm: 5 batches, 7 steps and 77 values, bitwise", wide, 0, 5 * batch + 7 * 768 + 77, 3,
                      256);
    check_sumsq_order("gradnorm: 2 whole batches, no rest, bitwise", wide, 0, 2 * batch, 3, 256);
    check_sumsq_order("gradnorm: 2 blocks of 64, ragged, bitwise", wide, 0, 20011, 2, 64);
    check_sumsq_order("gradnorm: g not 16-byte aligned, bitwise", wide, 1, 20011, 2, 64);
    // More partials than the final block's threads (1024 of a large tensor, 256 threads).
    std::vector<double> many(100);
    double many_sum = 0.0, many_want = 0.0;
    for (size_t i = 0; i < many.size(); i++) many[i] = 1.0 + (double)i * i, many_want += many[i];
    run(1, 32, [&] { sumsq_final_kernel(&many_sum, many.data(), (int)many.size()); });
    report("gradnorm: 100 partials summed by 32 threads", many_sum == many_want, "");
}

// ---- convert_kernels.cuh ------------------------------------------------------------------
// fp32 -> bf16 against round to nearest even written out here on the bits: ties both ways, a
// carry into the exponent, the largest float (rounds to infinity), subnormals, signed zeros,
// infinities and NaN (the canonical NaN 0x7fff, whatever its sign and payload, as the GPU's
// cvt.rn.bf16.f32 gives); then back (exact), and the column packing.
static uint16_t bf16_bits_rne(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static void test_convert(void) {
    Floats x = uniform(777, 81, 100.0f);
    const uint32_t edges[] = {0x3f808000u, 0x3f818000u, 0x3f80c000u, 0x3f807fffu, 0x3fffc000u, 0x7f7fffffu,
                              0x00000001u, 0x00418000u, 0x80000000u, 0x00000000u, 0x7f800000u, 0xff800000u,
                              0x7fc00000u, 0xffa00001u, 0xc0ff8000u};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) x[i * 37] = from_bits(edges[i]);
    Bf16s b(x.size(), nan16);
    run(3, 64, [&] { f32_to_bf16_kernel(b.data(), x.data(), x.size()); });
    size_t bad = 0;
    for (size_t i = 0; i < x.size(); i++) bad += b[i].bits != bf16_bits_rne(x[i]);
    char detail[64];
    snprintf(detail, sizeof detail, bad ? " (%zu of %zu wrong)" : "", bad, x.size());
    report("convert: fp32 -> bf16 rounds to nearest even (edges too)", bad == 0, detail);

    Floats back(x.size(), NAN);
    run(2, 32, [&] { bf16_to_f32_kernel(back.data(), b.data(), b.size()); });
    bad = 0;
    for (size_t i = 0; i < x.size(); i++) {
        uint32_t u;
        memcpy(&u, &back[i], sizeof u);
        bad += u != (uint32_t)b[i].bits << 16;
    }
    snprintf(detail, sizeof detail, bad ? " (%zu of %zu wrong)" : "", bad, x.size());
    report("convert: bf16 -> fp32 widens exactly", bad == 0, detail);

    // 7 rows of 13 columns into a buffer 20 wide at column 4 (as a fused operand's second block).
    const int rows = 7, cols = 13, ld = 20, col0 = 4;
    const Floats src = uniform((size_t)rows * cols, 82);
    Floats dst((size_t)rows * ld, NAN);
    run(2, 32, [&] { pack_cols_kernel(dst.data() + col0, ld, src.data(), cols, (size_t)rows * cols); });
    bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < ld; c++) {
            const float got = dst[(size_t)r * ld + c];
            if (c >= col0 && c < col0 + cols) bad += memcmp(&got, &src[(size_t)r * cols + c - col0], sizeof got) != 0;
            else bad += !std::isnan(got);
        }
    snprintf(detail, sizeof detail, bad ? " (%d wrong)" : "", (int)bad);
    report("convert: pack columns 4..16 of 20, the rest untouched", bad == 0, detail);
}

int main(void) {
    test_rmsnorm();
    test_swiglu();
    test_rope();
    test_crossentropy();
    test_embedding();
    test_adamw();
    test_gradnorm();
    test_convert();
    printf("test_kernels_simt: %d failed\n", failures);
    return failures != 0;
}
