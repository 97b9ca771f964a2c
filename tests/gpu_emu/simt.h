// tests/gpu_emu/simt.h: the part of CUDA C++ that kernels/cuda/flash_kernels.cuh and the other
// *_kernels.cuh headers are written in, for a host C++ compiler, so a test can run a kernel's
// own source on the CPU:
//   simt_launch(grid, threads, shared_floats, body) runs the grid's blocks one after another;
//   each block's threads are host threads that meet at a barrier for __syncthreads() (each
//   warp of 32 at its own for __syncwarp()), and its dynamic shared memory is a fresh buffer
//   of all-ones bytes, NaN as a float and as a bf16 (a read before a write shows); warp
//   shuffles (__shfl_xor_sync) and static __shared__ arrays;
//   __nv_bfloat16, and mma.sync and ldmatrix (below) for the tensor-core kernels.
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
inline thread_local uint64_t *simt_warp_words;    // the warp's 2 x 32 x 16 slots for mma and ldmatrix
inline thread_local unsigned simt_warp_posts;     // this lane's mma and ldmatrix calls so far

// cp.async: each thread's copies wait in its groups and land only when cp_async_wait lets
// them (all but the newest N groups), so a kernel that reads a tile before waiting for it (or
// before the __syncthreads after) reads what was there: NaN, or the tile before.
struct SimtCopy {
    void *dst;
    const void *src;
    unsigned group;
};
inline thread_local std::vector<SimtCopy> simt_copies;   // this thread's, oldest first
inline thread_local unsigned simt_groups;                // groups committed so far
inline void cp_async16(void *smem, const void *gmem) { simt_copies.push_back(SimtCopy{smem, gmem, simt_groups}); }
inline void cp_async_commit(void) { simt_groups++; }

// This lane's 16 slots for its next mma or ldmatrix, and the slots of lane l for the same call
// (simt_lane_slots): the warp's calls alternate between two sets of slots, so one meeting per
// call is enough. A lane reaches call n + 2's writes only after the meeting of call n + 1,
// which every lane reaches only after reading call n's.
inline uint64_t *simt_post_slots(void) {
    return simt_warp_words + 32 * 16 * (simt_warp_posts++ % 2) + 16 * (threadIdx.x % 32);
}
inline const uint64_t *simt_lane_slots(const uint64_t *mine, int l) { return mine - 16 * (threadIdx.x % 32) + 16 * l; }

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
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
            std::vector<uint64_t> words(2 * 32 * 16 * warps.size());
            std::vector<std::thread> team;
            for (unsigned t = 0; t < threads; t++)
                team.emplace_back([&, t] {
                    threadIdx = dim3{t, 0, 0};
                    blockIdx = dim3{bx, by, 0};
                    simt_shared = shared.data();
                    simt_warp_barrier = &warps[t / 32];
                    simt_warp_exchange = exchange.data() + 32 * (t / 32);
                    simt_warp_words = words.data() + 2 * 32 * 16 * (t / 32);
                    simt_warp_posts = 0;
                    simt_copies.clear();
                    simt_groups = 0;
                    body();
                });
            for (std::thread &th : team) th.join();
        }
}

// bfloat16: the 16 high bits of a float, rounded to nearest even (flash_tile.h's flash_bf16).
struct __nv_bfloat16 {
    uint16_t bits;
};
// A NaN becomes the canonical NaN 0x7fff, as cvt.rn.bf16.f32 and cuda_bf16.hpp's host path make it.
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    if (f != f) return __nv_bfloat16{0x7fff};
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

// The warp-level tensor-core instructions the mma kernels use (kernels/cuda/mma_sync.cuh gives
// them as PTX on the GPU): mma.sync m16n8k16 with bf16 operands and fp32 accumulators, and
// ldmatrix x4 (plain and .trans). Their per-lane register layouts are the ones the PTX ISA
// publishes ("Matrix Fragments for mma.m16n8k16", "ldmatrix"); with lane = 4 g + t:
//   A (16 x 16, row-major):  reg 0 = (g, 2t | 2t+1), reg 1 = (g+8, 2t | 2t+1),
//                            reg 2 = (g, 2t+8 | 2t+9), reg 3 = (g+8, 2t+8 | 2t+9)
//   B (16 x 8, depth x col): reg 0 = (2t | 2t+1, g), reg 1 = (2t+8 | 2t+9, g)
//   C, D (16 x 8, fp32):     (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)
// (a register's two bf16s: the first in its low 16 bits). Each lane posts its registers, the
// warp meets, and each lane rebuilds the whole operands from the posts and computes its own
// outputs: an element is flash_mma_step over its row of A and column of B, the emulator's model
// of an mma. A kernel that puts a value where the published layout does not computes a
// different product here, as it would on the GPU. (That these are the hardware's layouts is
// the PTX ISA's word, which only a GPU run of test_cuda_kernels checks.)
inline uint32_t simt_pair(const __nv_bfloat16 *p) { return (uint32_t)p[0].bits | (uint32_t)p[1].bits << 16; }
inline float simt_half(uint32_t r, int hi) { return __bfloat162float(__nv_bfloat16{(uint16_t)(hi ? r >> 16 : r)}); }

inline void mma_bf16_16816(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1, const float c[4]) {
    uint64_t *post = simt_post_slots();
    for (int i = 0; i < 4; i++) post[i] = a[i];
    post[4] = b0, post[5] = b1;
    __syncwarp();
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        const uint64_t *from = simt_lane_slots(post, l);
        const int g = l / 4, t = l % 4;
        for (int hi = 0; hi < 2; hi++) {
            A[g][2 * t + hi] = simt_half((uint32_t)from[0], hi);
            A[g + 8][2 * t + hi] = simt_half((uint32_t)from[1], hi);
            A[g][2 * t + 8 + hi] = simt_half((uint32_t)from[2], hi);
            A[g + 8][2 * t + 8 + hi] = simt_half((uint32_t)from[3], hi);
            B[2 * t + hi][g] = simt_half((uint32_t)from[4], hi);
            B[2 * t + 8 + hi][g] = simt_half((uint32_t)from[5], hi);
        }
    }
    const int g = (int)(threadIdx.x % 32) / 4, t = (int)threadIdx.x % 4;
    const float c_in[4] = {c[0], c[1], c[2], c[3]};   // d may be c
    for (int e = 0; e < 4; e++) {
        const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
        d[e] = flash_mma_step(c_in[e], &A[row][0], 1, &B[0][col], 8);
    }
}

// ldmatrix x4: lane l gives the address of row l % 8 of 8 x 8 matrix l / 8 (8 bf16s, 16 bytes);
// register j gets matrix j's (row g, columns 2t | 2t+1), or with trans its (rows 2t | 2t+1,
// column g).
inline void simt_ldmatrix_x4(uint32_t r[4], const __nv_bfloat16 *row, bool trans) {
    uint64_t *post = simt_post_slots();
    post[0] = (uint64_t)(uintptr_t)row;
    __syncwarp();
    const int g = (int)(threadIdx.x % 32) / 4, t = (int)threadIdx.x % 4;
    for (int j = 0; j < 4; j++) {
        const auto at = [&](int l) { return (const __nv_bfloat16 *)(uintptr_t)simt_lane_slots(post, 8 * j + l)[0]; };
        if (trans) r[j] = (uint32_t)at(2 * t)[g].bits | (uint32_t)at(2 * t + 1)[g].bits << 16;
        else r[j] = simt_pair(at(g) + 2 * t);
    }
}
// cp.async's wait (the copies' record is above, with simt_launch's thread state): lands this
// thread's copies of all but its newest N committed groups.
template <int N>
inline void cp_async_wait(void) {
    size_t i = 0;
    for (; i < simt_copies.size() && simt_copies[i].group + N < simt_groups; i++)
        memcpy(simt_copies[i].dst, simt_copies[i].src, 16);
    simt_copies.erase(simt_copies.begin(), simt_copies.begin() + (std::ptrdiff_t)i);
}

inline void ldmatrix_x4(uint32_t r[4], const __nv_bfloat16 *row) { simt_ldmatrix_x4(r, row, false); }
inline void ldmatrix_x4_trans(uint32_t r[4], const __nv_bfloat16 *row) { simt_ldmatrix_x4(r, row, true); }
#endif
