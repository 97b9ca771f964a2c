// tests/gpu_emu/simt.h: the part of CUDA C++ that kernels/cuda/flash_kernels.cuh and the other
// *_kernels.cuh headers are written in, for a host C++ compiler, so a test can run a kernel's
// own source on the CPU:
//   simt_launch(grid, threads, shared_floats, body) runs the grid's blocks one after another;
//   each block's threads are host threads that meet at a barrier for __syncthreads() (each
//   warp of 32 at its own for __syncwarp()), and its dynamic shared memory is a fresh buffer
//   of all-ones bytes, NaN as a float and as a bf16 (a read before a write shows); warp
//   shuffles (__shfl_xor_sync) and static __shared__ arrays;
//   __nv_bfloat16 and nvcuda::wmma's bf16 16 x 16 x 16 tiles (below) for the tensor-core kernels.
// What it cannot show: races inside a phase (threads here interleave as the OS likes, not as a
// warp does), and anything about speed. Include before the kernels' header.
#ifndef PPTRAIN_TESTS_GPU_EMU_SIMT_H
#define PPTRAIN_TESTS_GPU_EMU_SIMT_H
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <thread>
#include <type_traits>
#include <vector>

#include "kernels/cuda/flash_tile.h"

using std::max;
using std::min;

struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
inline thread_local float *simt_shared;
inline std::barrier<> *simt_barrier;
inline thread_local std::barrier<> *simt_warp_barrier;
inline thread_local double *simt_warp_exchange;   // the warp's 32 slots for __shfl_xor_sync

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __syncthreads() simt_barrier->arrive_and_wait()
#define __syncwarp() simt_warp_barrier->arrive_and_wait()
#define DYNAMIC_SHARED_FLOATS(name) float *name = simt_shared
// A kernel's static __shared__ array: one for the whole program, which is one block's as long
// as blocks run one after another (simt_launch's do); not reset between blocks (nor is a GPU's).
#define __shared__ static

// v of lane (this lane ^ o) of the warp: each lane posts its value, the warp meets, each reads
// its partner's, the warp meets again (so the slots can be reused). float and double values
// pass through a double exactly.

template <typename T>
inline T __shfl_xor_sync(unsigned, T v, int o) {
    const unsigned lane = threadIdx.x % 32;
    simt_warp_exchange[lane] = (double)v;
    __syncwarp();
    const T r = (T)simt_warp_exchange[lane ^ (unsigned)o];
    __syncwarp();
    return r;
}

template <typename Body>
static void simt_launch(dim3 grid, unsigned threads, size_t shared_floats, Body body) {
    gridDim = grid;
    blockDim = dim3{threads, 1, 1};
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            std::vector<float> shared(shared_floats);
            if (shared_floats) memset(shared.data(), 0xff, shared_floats * sizeof(float));
            std::barrier<> barrier((std::ptrdiff_t)threads);
            simt_barrier = &barrier;
            std::deque<std::barrier<>> warps;   // a warp's barrier: its 32 threads, or the rest
            for (unsigned w = 0; w < (threads + 31) / 32; w++)
                warps.emplace_back((std::ptrdiff_t)std::min(32u, threads - 32 * w));
            std::vector<double> exchange(32 * warps.size());
            std::vector<std::thread> team;
            for (unsigned t = 0; t < threads; t++)
                team.emplace_back([&, t] {
                    threadIdx = dim3{t, 0, 0};
                    blockIdx = dim3{bx, by, 0};
                    simt_shared = shared.data();
                    simt_warp_barrier = &warps[t / 32];
                    simt_warp_exchange = exchange.data() + 32 * (t / 32);
                    body();
                });
            for (std::thread &th : team) th.join();
        }
}

// bfloat16: the 16 high bits of a float, rounded to nearest even (flash_tile.h's flash_bf16).
struct __nv_bfloat16 {
    uint16_t bits;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    f = flash_bf16(f);
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return __nv_bfloat16{(uint16_t)(u >> 16)};
}
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
// fp32 multiply, rounded to nearest, never contracted into a multiply-add (as on the GPU).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __bfloat162float(__nv_bfloat16 b) {
    const uint32_t u = (uint32_t)b.bits << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// nvcuda::wmma for 16 x 16 x 16 tiles of bf16 operands and fp32 accumulators. On the GPU a
// fragment is spread over the warp's 32 lanes in an unpublished layout; here every thread holds
// the whole tile, element (i, j) at x[16 i + j] (a: rows i of the product, depth j; b: depth
// i, column j), so code that touches x[e] only through a layout it asked the hardware for
// (an accumulator loaded from a tile of known values) runs the same. Each thread computes the
// whole product (mma_sync: flash_mma_step per element, the emulator's model); a store writes
// from lane 0 alone, so another lane that reads it before a __syncwarp() reads old bytes.
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "simt.h emulates 16 x 16 x 16 tiles only");
    static constexpr int num_elements = 256;
    float x[256];
};

inline void fill_fragment(fragment<accumulator, 16, 16, 16, float> &f, float v) {
    for (float &e : f.x) e = v;
}
// Operand tiles from bf16 memory with leading dimension ldm, in the fragment's own layout.
template <typename Use, typename Layout>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, __nv_bfloat16, Layout> &f, const __nv_bfloat16 *p,
                             unsigned ldm) {
    // x(i, j) is (row, depth) of a and (depth, column) of b; row_major stores a row's elements
    // side by side (p[i * ldm + j]), col_major a column's (p[j * ldm + i]).
    constexpr bool row = std::is_same_v<Layout, row_major>;
    static_assert(std::is_same_v<Use, matrix_a> || std::is_same_v<Use, matrix_b>, "operands are matrix_a or matrix_b");
    static_assert(row || std::is_same_v<Layout, col_major>, "operand layouts are row_major or col_major");
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) f.x[16 * i + j] = __bfloat162float(row ? p[i * ldm + j] : p[j * ldm + i]);
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p, unsigned ldm,
                             layout_t layout) {
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) f.x[16 * i + j] = layout == mem_row_major ? p[i * ldm + j] : p[j * ldm + i];
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm,
                              layout_t layout) {
    if (threadIdx.x % 32 != 0) return;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) (layout == mem_row_major ? p[i * ldm + j] : p[j * ldm + i]) = f.x[16 * i + j];
}
// d = c + a b: element (i, j) is flash_mma_step(c(i, j), row i of a, column j of b).
template <typename LayoutA, typename LayoutB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                     const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA> &a,
                     const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB> &b,
                     const fragment<accumulator, 16, 16, 16, float> &c) {
    float out[256];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) out[16 * i + j] = flash_mma_step(c.x[16 * i + j], &a.x[16 * i], 1, &b.x[j], 16);
    memcpy(d.x, out, sizeof out);
}
}  // namespace wmma
}  // namespace nvcuda
#endif
