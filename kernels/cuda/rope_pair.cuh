// kernels/cuda/rope_pair.cuh: RoPE's backward for one rotation pair, the expressions every
// kernel that rotates a gradient back uses (rope_kernels.cuh's backward kernels, and the
// tensor-core attention kernels' fused epilogue in flash_mma_kernels.cuh), so their results are
// the same bits by construction. In the CUDA subset tests/gpu_emu/simt.h gives a host compiler.
#ifndef PPTRAIN_KERNELS_CUDA_ROPE_PAIR_CUH
#define PPTRAIN_KERNELS_CUDA_ROPE_PAIR_CUH

// R^T (g0, g1) for the pair (index i, index i + HD / 2) of angle with cosine c and sine s: the
// gradient of the rotation's input from its output's gradient (a rotation by -angle).
struct RopePair {
    float lo, hi;
};
__device__ __forceinline__ static RopePair rope_pair_backward(float g0, float g1, float c, float s) {
    return RopePair{g0 * c + g1 * s, g1 * c - g0 * s};
}

#endif
