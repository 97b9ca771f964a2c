// kernels/cuda/mma_sync.cuh: the warp-level tensor-core instructions the bf16 flash attention
// kernels (flash_mma_kernels.cuh) are built from, as PTX: mma.sync m16n8k16 (bf16 operands,
// fp32 accumulators), ldmatrix x4, plain and transposed, and cp.async (sm_80 and later).
//
// Unlike nvcuda::wmma, whose fragments' layout is unpublished, these instructions' per-lane
// register layouts are part of the PTX ISA ("Matrix Fragments for mma.m16n8k16 with floating
// point type", "ldmatrix"), so a kernel may compute on an accumulator element knowing its row
// and column: the softmax runs on the score accumulators in registers, and the probabilities
// become the next product's A operand without going through shared memory (as
// FlashAttention-2). With lane = 4 g + t (g = lane / 4, t = lane % 4):
//   A (16 x 16, row-major):  reg 0 = (g, 2t | 2t+1), reg 1 = (g+8, 2t | 2t+1),
//                            reg 2 = (g, 2t+8 | 2t+9), reg 3 = (g+8, 2t+8 | 2t+9)
//   B (16 x 8, depth x col): reg 0 = (2t | 2t+1, g), reg 1 = (2t+8 | 2t+9, g)
//   C, D (16 x 8, fp32):     c[0] = (g, 2t), c[1] = (g, 2t+1), c[2] = (g+8, 2t), c[3] = (g+8, 2t+1)
// A register holds two bf16s, the first in its low 16 bits. So two 16 x 8 accumulators side by
// side (columns 0-7, 8-15), rounded and paired, are the A operand of a 16 x 16 x 16 product
// whose depth is their columns: mma_a_slot says where each pair goes.
//
// tests/gpu_emu/simt.h gives the same functions to a host compiler, built on these layouts, so
// tests/gpu_emu/test_flash_simt.cc runs the kernels on CPU threads.
#ifndef PPTRAIN_KERNELS_CUDA_MMA_SYNC_CUH
#define PPTRAIN_KERNELS_CUDA_MMA_SYNC_CUH
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
// d = a b + c: a the 16 x 16 A operand, (b0, b1) the 16 x 8 B operand, c and d 16 x 8 fp32.
__device__ __forceinline__ static void mma_bf16_16816(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1,
                                                      const float c[4]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// Four 8 x 8 bf16 matrices from shared memory: lane l gives the address of row l % 8 of matrix
// l / 8 (16 bytes, 16-byte aligned); r[j] gets matrix j's (row g, columns 2t | 2t+1).
__device__ __forceinline__ static void ldmatrix_x4(uint32_t r[4], const __nv_bfloat16 *row) {
    const unsigned addr = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
// The same, transposed: r[j] gets matrix j's (rows 2t | 2t+1, column g).
__device__ __forceinline__ static void ldmatrix_x4_trans(uint32_t r[4], const __nv_bfloat16 *row) {
    const unsigned addr = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// 16 bytes from global to shared memory without passing through registers (cp.async, sm_80):
// the copy runs while the thread goes on, in the group the next cp_async_commit closes, and
// lands by the time cp_async_wait<N> returns for all but this thread's newest N groups. Other
// threads see it after that wait and a __syncthreads.
__device__ __forceinline__ static void cp_async16(void *smem, const void *gmem) {
    const unsigned addr = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(addr), "l"(gmem));
}
__device__ __forceinline__ static void cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ static void cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
#endif

// Two floats rounded to bf16 (nearest even) in one register, lo in the low 16 bits: on the GPU
// one cvt.rn.bf16x2.f32 (its first source goes to the high half), which nvcc did not always
// make of two roundings and a shift.
__device__ __forceinline__ static uint32_t pack_bf16x2(float lo, float hi) {
#ifdef __CUDA_ARCH__
    uint32_t two;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(two) : "f"(hi), "f"(lo));
    return two;
#else
    const __nv_bfloat16 l = __float2bfloat16_rn(lo), h = __float2bfloat16_rn(hi);
    uint16_t lb, hb;
    memcpy(&lb, &l, sizeof lb);
    memcpy(&hb, &h, sizeof hb);
    return (uint32_t)lb | (uint32_t)hb << 16;
#endif
}

// A warp's (16, N) accumulators, rounded to bf16, as the A operands of a product whose depth is
// their columns: operand k (k < N / 16) takes column blocks 2k (columns 0-7 of its depth) and
// 2k + 1 (8-15). The pair a lane holds in block j, row g + 8 h (h = e / 2: elements 2h, 2h + 1,
// packed by pack_bf16x2), is register h + 2 (j % 2) of operand j / 2 (the A layout above).
__device__ __forceinline__ static uint32_t &mma_a_slot(uint32_t (*a)[4], int j, int h) {
    return a[j / 2][h + 2 * (j % 2)];
}

// The ldmatrix x4 row address this lane gives for the 16 x 16 block of a bf16 tile (row stride
// ld elements) at (r0, c0): matrices (rows r0.., cols c0..), (r0+8.., c0..), (r0.., c0+8..),
// (r0+8.., c0+8..). Plain, that block is an A operand (rows x depth). Transposed, with the
// tile's rows as the depth, it is the B operands of two 8-column products: columns c0..c0+7
// in r[0], r[1] and c0+8..c0+15 in r[2], r[3].
__device__ __forceinline__ static const __nv_bfloat16 *ldmatrix_block_row(const __nv_bfloat16 *tile, int ld, int r0,
                                                                          int c0) {
    const int lane = threadIdx.x % 32;
    return tile + (size_t)(r0 + lane % 8 + 8 * (lane / 8 % 2)) * ld + c0 + 8 * (lane / 16);
}
// For a tile whose rows are the B operand's columns (keys against their depth, as a score
// product's k): matrices (rows r0.., cols c0..), (r0.., c0+8..), (r0+8.., c0..), (r0+8..,
// c0+8..), so plain ldmatrix gives the B operands of two 8-column products of depth 16:
// columns r0..r0+7 in r[0], r[1] and r0+8..r0+15 in r[2], r[3].
__device__ __forceinline__ static const __nv_bfloat16 *ldmatrix_bt_row(const __nv_bfloat16 *tile, int ld, int r0,
                                                                       int c0) {
    const int lane = threadIdx.x % 32;
    return tile + (size_t)(r0 + lane % 8 + 8 * (lane / 16)) * ld + c0 + 8 * (lane / 8 % 2);
}
#endif
