// kernels/cuda/device_math.cuh: the device-side helpers every elementwise kernel shares: the
// fp32 <-> storage-type conversions and the warp and block reductions. Written in the subset
// of CUDA C++ that tests/gpu_emu/simt.h also gives a host compiler (as flash_kernels.cuh), so
// tests/gpu_emu/test_kernels_simt.cc runs the kernels that use them on CPU threads. Include
// after kernels/cuda/common.cuh's CUDA headers on the GPU (common.cuh includes it), after
// simt.h on the CPU.
#ifndef PPTRAIN_KERNELS_CUDA_DEVICE_MATH_CUH
#define PPTRAIN_KERNELS_CUDA_DEVICE_MATH_CUH
#include <math.h>

#ifndef DYNAMIC_SHARED_FLOATS   // the block's dynamic shared memory as floats (simt.h: a buffer)
#define DYNAMIC_SHARED_FLOATS(name) extern __shared__ float name[]
#endif

// An fp32 result stored as T: float as it is, bf16 rounded to nearest even (NaN stays NaN), as
// cuda_f32_to_bf16 rounds. Kernels whose output is a GEMM operand in bf16 mode take T.
template <typename T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
// A stored value as fp32: float as it is, bf16 widened (exact). Kernels that read bf16 mode's
// bf16-stored GEMM outputs take their input type this way.
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

// 8 bf16s, 16 bytes: one vector load or store (LDG.E.128), where a bf16 at a time moves 2
// bytes an instruction and a memory-bound kernel issues 8 times as many. For 16-byte aligned
// rows only (bf16_vectors).
struct alignas(16) Bf16x8 {
    __nv_bfloat16 v[8];
};
// 4 bf16s, 8 bytes: one LDG.E.64 or STG.E.64, for rows whose vectors are 8-byte aligned but
// not 16 (a rotation's half-row of 32 values at head dim 64 starts every 64 bytes, its quads
// every 8), or the bf16 values of one float4 of fp32 ones (crossentropy's dlogits).
struct alignas(8) Bf16x4 {
    __nv_bfloat16 v[4];
};

// Elements [4 j, 4 j + 4) of p as fp32, one load: float4 (16 bytes) for float, Bf16x4 (8 bytes)
// widened for bf16; and their store from fp32, bf16 rounded to nearest even as from_f32: where
// a kernel walks fp32 and bf16 rows in step, 4 columns a load from each. p 16-byte (float) or
// 8-byte (bf16) aligned.
__device__ __forceinline__ float4 load_f32x4(const float *p, size_t j) {
    return reinterpret_cast<const float4 *>(p)[j];
}
__device__ __forceinline__ float4 load_f32x4(const __nv_bfloat16 *p, size_t j) {
    const Bf16x4 v = reinterpret_cast<const Bf16x4 *>(p)[j];
    return float4{to_f32(v.v[0]), to_f32(v.v[1]), to_f32(v.v[2]), to_f32(v.v[3])};
}
__device__ __forceinline__ void store_f32x4(float *p, size_t j, float4 v) { reinterpret_cast<float4 *>(p)[j] = v; }
__device__ __forceinline__ void store_f32x4(__nv_bfloat16 *p, size_t j, float4 v) {
    Bf16x4 o;
    o.v[0] = from_f32<__nv_bfloat16>(v.x), o.v[1] = from_f32<__nv_bfloat16>(v.y);
    o.v[2] = from_f32<__nv_bfloat16>(v.z), o.v[3] = from_f32<__nv_bfloat16>(v.w);
    reinterpret_cast<Bf16x4 *>(p)[j] = o;
}

// ---- device reductions -------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum (or max) over the whole block, returned to every thread. blockDim.x a multiple of 32,
// at most 1024. Fixed order for a given blockDim (deterministic). Contains __syncthreads:
// every thread of the block must call it.
template <typename T>
__device__ T block_sum(T v) {
    __shared__ T sh[32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        T w = lane < nw ? sh[lane] : T(0);
        w = warp_sum(w);
        if (lane == 0) sh[0] = w;
    }
    __syncthreads();
    T r = sh[0];
    __syncthreads();                  // sh may be reused by the next call
    return r;
}
__device__ inline float block_max(float v) {
    __shared__ float sh[32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        float w = lane < nw ? sh[lane] : -INFINITY;
        w = warp_max(w);
        if (lane == 0) sh[0] = w;
    }
    __syncthreads();
    float r = sh[0];
    __syncthreads();
    return r;
}

#endif
