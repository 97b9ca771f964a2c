// tests/gpu_emu/simt.h: the part of CUDA C++ that kernels/cuda/flash_kernels.cuh is written in,
// for a host C++ compiler, so a test can run a kernel's own source on the CPU:
//   simt_launch(grid, threads, shared_floats, body) runs the grid's blocks one after another;
//   each block's threads are host threads that meet at a barrier for __syncthreads(), and
//   its dynamic shared memory is a fresh buffer of NaNs (a read before a write shows).
// What it cannot show: races inside a phase (threads here interleave as the OS likes, not as a
// warp does), and anything about speed. Include before the kernels' header.
#ifndef PPTRAIN_TESTS_GPU_EMU_SIMT_H
#define PPTRAIN_TESTS_GPU_EMU_SIMT_H
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <thread>
#include <vector>

using std::max;
using std::min;

struct alignas(16) float4 {
    float x, y, z, w;
};
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
inline thread_local float *simt_shared;
inline std::barrier<> *simt_barrier;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __syncthreads() simt_barrier->arrive_and_wait()
#define DYNAMIC_SHARED_FLOATS(name) float *name = simt_shared

template <typename Body>
static void simt_launch(dim3 grid, unsigned threads, size_t shared_floats, Body body) {
    gridDim = grid;
    blockDim = dim3{threads, 1, 1};
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            std::vector<float> shared(shared_floats, NAN);
            std::barrier<> barrier((std::ptrdiff_t)threads);
            simt_barrier = &barrier;
            std::vector<std::thread> team;
            for (unsigned t = 0; t < threads; t++)
                team.emplace_back([&, t] {
                    threadIdx = dim3{t, 0, 0};
                    blockIdx = dim3{bx, by, 0};
                    simt_shared = shared.data();
                    body();
                });
            for (std::thread &th : team) th.join();
        }
}
#endif
