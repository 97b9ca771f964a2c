// kernels/cuda/rmsnorm_kernels.cuh: the kernels of rmsnorm.cu (which launches them), in the
// subset of CUDA C++ that tests/gpu_emu/simt.h also gives a host compiler, so
// tests/gpu_emu/test_kernels_simt.cc runs this same source on CPU threads. Include after
// kernels/cuda/common.cuh on the GPU, after simt.h and device_math.cuh on the CPU.
#ifndef PPTRAIN_KERNELS_CUDA_RMSNORM_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_RMSNORM_KERNELS_CUH

// ---- the row kernels: one warp a row, 8 rows a 256-thread block ----------------------------
// Memory-bound: the 125m step (N = 16 x 1024 rows, C = 768) moves 75 to 200 MB a launch. With a
// 4-byte load a lane per loop step, a warp had 128 bytes in flight per stream and an SM ~8-16 KB,
// where an H200's HBM wants ~20-30 KB an SM in flight (Little's law), so the kernels ran at
// ~2.8 TB/s of ~4.5. So a lane takes its columns in groups of 4, each one 16-byte load (fp32) or
// 8-byte load (bf16), and where the row fits (C <= 1024: V = rmsnorm_held_groups(C) groups a
// lane) holds them in registers: the whole row's loads are issued before any value is used,
// and the second pass does not read the row again. H200, 125m, bf16 forms (a device-to-device
// copy there runs at 3.7 TB/s): residual + forward (a kernel since replaced by the GEMM
// epilogue's add) 64.6 -> 47.6 us (3.7 TB/s; 48.5 walked again, V = 0; 60.9 element by element),
// backward input 75.3 -> 52.1 us (3.9 TB/s; 62.1 walked again, V = 0), forward 24.2 -> 22.0 us.
// The held backward takes 120-128 registers (2 blocks an SM), which its 7.5 KB a warp in flight
// (below) covers.
//
// Group j of a row is columns [4 j, 4 j + 4), lane j % 32's: lane l takes groups l, l + 32, ...
// in that order, and a group's 4 columns in order. Each lane sums its own in double, then
// warp_sum's fixed butterfly: a fixed order (deterministic). VEC (C % 4 == 0 and every pointer
// 16-byte aligned, the launcher checks) loads and stores a group at once; without it the same
// groups go element by element, the columns past C read as 0 (which adds +0, leaving a sum of
// squares, or a sum that is never -0, as it was) and not written. Held (V > 0) or walked again
// (V == 0, C > 1024), vector or not, the arithmetic and its order are the same, so every form
// gives the same bits, and the bf16 forms (template T, D) those of the fp32 forms rounded.
#define RMSNORM_ROWS_PER_BLOCK 8

// Groups of 4 columns a lane holds in registers for a row of C (C / 4 groups over 32 lanes,
// rounded up to 2, 4, 6 or 8: few instantiations), or 0 beyond 8 (C > 1024: the loop that reads
// the row again; 8 float4s a stream are 32 registers already). C = 768: 6.
static inline int rmsnorm_held_groups(int C) {
    const int per_lane = ((C + 3) / 4 + 31) / 32;
    return per_lane > 8 ? 0 : (per_lane + 1) / 2 * 2;
}

// Group j of a row as fp32 (see above: VEC one load, else element by element, 0 past C).
template <bool VEC, typename D>
__device__ __forceinline__ float4 rmsnorm_load(const D *row, int j, int C) {
    if (VEC) return load_f32x4(row, (size_t)j);
    const int c = 4 * j;   // < C: the group exists
    return float4{to_f32(row[c]), c + 1 < C ? to_f32(row[c + 1]) : 0.0f, c + 2 < C ? to_f32(row[c + 2]) : 0.0f,
                  c + 3 < C ? to_f32(row[c + 3]) : 0.0f};
}
template <bool VEC, typename T>
__device__ __forceinline__ void rmsnorm_store(T *row, int j, int C, float4 v) {
    if (VEC) return store_f32x4(row, (size_t)j, v);
    const int c = 4 * j;
    row[c] = from_f32<T>(v.x);
    if (c + 1 < C) row[c + 1] = from_f32<T>(v.y);
    if (c + 2 < C) row[c + 2] = from_f32<T>(v.z);
    if (c + 3 < C) row[c + 3] = from_f32<T>(v.w);
}
__device__ __forceinline__ double rmsnorm_squares(double ss, float4 v) {
    ss += (double)v.x * v.x, ss += (double)v.y * v.y, ss += (double)v.z * v.z, ss += (double)v.w * v.w;
    return ss;
}
__device__ __forceinline__ float rmsnorm_rstd(double ss, int C, float eps) {
    return (float)(1.0 / sqrt(ss / C + (double)eps));
}
// x * r * weight, each column.
__device__ __forceinline__ float4 rmsnorm_scale(float4 x, float r, float4 w) {
    return float4{x.x * r * w.x, x.y * r * w.y, x.z * r * w.z, x.w * r * w.w};
}

// out is T: fp32, or bf16 rounded from the fp32 value (a GEMM operand in bf16 mode). Reads inp
// (N, C) fp32, writes out: V held groups, or 0 (read again); VEC as above.
template <typename T, int V, bool VEC>
__global__ void rmsnorm_forward_kernel(T *__restrict__ out, float *__restrict__ rstd,
                                       const float *__restrict__ inp,
                                       const float *__restrict__ weight, int N, int C,
                                       float eps) {
    const int row = blockIdx.x * RMSNORM_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return;                                 // whole warp leaves together
    const int G = (C + 3) / 4;
    const float *x = inp + (size_t)row * C;
    T *o = out + (size_t)row * C;
    double ss = 0.0;
    if constexpr (V > 0) {
        float4 v[V];
        for (int k = 0; k < V; k++) v[k] = lane + 32 * k < G ? rmsnorm_load<VEC>(x, lane + 32 * k, C) : float4{};
        for (int k = 0; k < V; k++)
            if (lane + 32 * k < G) ss = rmsnorm_squares(ss, v[k]);
        const float r = rmsnorm_rstd(warp_sum(ss), C, eps);
        if (lane == 0) rstd[row] = r;
        for (int k = 0; k < V; k++)
            if (lane + 32 * k < G)
                rmsnorm_store<VEC>(o, lane + 32 * k, C,
                                   rmsnorm_scale(v[k], r, rmsnorm_load<VEC>(weight, lane + 32 * k, C)));
    } else {
        for (int j = lane; j < G; j += 32) ss = rmsnorm_squares(ss, rmsnorm_load<VEC>(x, j, C));
        const float r = rmsnorm_rstd(warp_sum(ss), C, eps);
        if (lane == 0) rstd[row] = r;
        for (int j = lane; j < G; j += 32)
            rmsnorm_store<VEC>(o, j, C, rmsnorm_scale(rmsnorm_load<VEC>(x, j, C), r, rmsnorm_load<VEC>(weight, j, C)));
    }
}

// The backward's two steps on one group: wdx += dout * inp * weight (in double, the order the
// scalar kernel had), and the gradient from the row's a, b and w*dout: from + (a wd - b x).
__device__ __forceinline__ double rmsnorm_wdx(double wdx, float4 d, float4 x, float4 w) {
    wdx += (double)d.x * x.x * w.x, wdx += (double)d.y * x.y * w.y;
    wdx += (double)d.z * x.z * w.z, wdx += (double)d.w * x.w * w.w;
    return wdx;
}
__device__ __forceinline__ float4 rmsnorm_dx(float4 from, float a, float b, float4 wd, float4 x) {
    return float4{from.x + (a * wd.x - b * x.x), from.y + (a * wd.y - b * x.y), from.z + (a * wd.z - b * x.z),
                  from.w + (a * wd.w - b * x.w)};
}
__device__ __forceinline__ float4 rmsnorm_mul(float4 p, float4 q) {
    return float4{p.x * q.x, p.y * q.y, p.z * q.z, p.w * q.w};
}

// The backward's weight-gradient term of one group, added to this lane's 4 sums of its columns
// (acc[0], acc[32], acc[64], acc[96]: its slots in shared memory, below): dout * (inp * rstd),
// widened to double where the product is taken (exact), as the CPU backend and
// rmsnorm_dweight_partial_kernel take it.
__device__ __forceinline__ void rmsnorm_dweight_add(double *acc, float4 d, float4 x, float r) {
    acc[0] += (double)d.x * (x.x * r), acc[32] += (double)d.y * (x.y * r);
    acc[64] += (double)d.z * (x.z * r), acc[96] += (double)d.w * (x.w * r);
}

// Rows a block of the backward takes with the weight gradient fused (WEIGHT below): 8 a warp.
#define RMSNORM_FUSED_ROWS 64
// Its dynamic shared memory: a double for each of a lane's 4 V columns, for 32 lanes x 8 warps.
static inline size_t rmsnorm_fused_smem_bytes(int V) {
    return (size_t)RMSNORM_ROWS_PER_BLOCK * 4 * V * 32 * sizeof(double);
}

// dinp = resid + (rstd * (w*dout) - rstd^3 / C * inp * sum(w*dout*inp)), row by row: resid NULL
// adds to zero, resid == dinp accumulates (each element read, then written, by one lane; the
// held form reads resid with the rest of the row, before the row's first store). dinp16 (may be
// NULL) gets the bf16 copy of the value written, rounded to nearest even. dout is D: fp32, or
// bf16 (bf16 mode stores the norm output's gradient so), widened. 125m bf16 mode: dout (25 MB),
// inp and resid (50 MB each) read, dinp (50 MB) and dinp16 (25 MB) written; held: a lane keeps
// w*dout, inp and resid, 3 x 6 float4s, and issues all 24 group loads (with the weight's, from
// L1) before its first use: 7.5 KB a warp from memory.
//
// A block takes 8 rows, a warp each; with WEIGHT (held rows only) RMSNORM_FUSED_ROWS, warp w
// rows w, w + 8, ..., and it also writes the weight gradient's partial sums of those rows,
// partial[blockIdx.x][C] (doubles), which rmsnorm_dweight_final_kernel adds: the sums read the
// dout and inp the input gradient has in registers, where a kernel of their own read them again
// (75 MB a 125m norm, about 22 us on an H200). A lane adds its columns' terms row by row into
// its own slots of shared memory (slot s of lane l of warp w at [(w 4 V + s) 32 + l]: a warp's
// 32 lanes hit 32 banks' pairs, and no slot is another thread's, so no sync until the block's
// rows are done); then column c of the partial row is its 8 warps' sums in warp order. So a
// column's partial is the sum, warp by warp, of rows in order: fixed, whatever the GPU.
template <typename D, int V, bool VEC, bool WEIGHT>
__global__ void rmsnorm_backward_input_kernel(float *dinp, __nv_bfloat16 *__restrict__ dinp16, const float *resid,
                                              const D *__restrict__ dout, const float *__restrict__ inp,
                                              const float *__restrict__ weight, const float *__restrict__ rstd,
                                              double *__restrict__ partial, int N, int C) {
    static_assert(!WEIGHT || (V > 0 && VEC), "the weight gradient is fused into the held vector form only");
    constexpr int ROWS = WEIGHT ? RMSNORM_FUSED_ROWS : RMSNORM_ROWS_PER_BLOCK;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int G = (C + 3) / 4, r1 = min(N, (int)blockIdx.x * ROWS + ROWS);
    DYNAMIC_SHARED_FLOATS(sh);
    double *sums = nullptr, *acc = nullptr;   // WEIGHT: the block's slots; this lane's slot s at acc[32 s]
    if constexpr (WEIGHT) {
        sums = reinterpret_cast<double *>(sh);
        acc = sums + (size_t)warp * 4 * V * 32 + lane;
        for (int s = 0; s < 4 * V; s++) acc[32 * s] = 0.0;
    }
    for (int row = (int)blockIdx.x * ROWS + warp; row < r1; row += RMSNORM_ROWS_PER_BLOCK) {   // whole warps
        const size_t base = (size_t)row * C;
        const float *x = inp + base;
        const D *d = dout + base;
        const double r = rstd[row];
        double wdx = 0.0;
        if constexpr (V > 0) {
            float4 wd[V], xv[V], from[V], w[V];
            for (int k = 0; k < V; k++) {
                const bool in = lane + 32 * k < G;
                wd[k] = in ? rmsnorm_load<VEC>(d, lane + 32 * k, C) : float4{};   // dout until the product below
                xv[k] = in ? rmsnorm_load<VEC>(x, lane + 32 * k, C) : float4{};
                w[k] = in ? rmsnorm_load<VEC>(weight, lane + 32 * k, C) : float4{};
                from[k] = in && resid ? rmsnorm_load<VEC>(resid + base, lane + 32 * k, C) : float4{};
            }
            for (int k = 0; k < V; k++)
                if (lane + 32 * k < G) {
                    if constexpr (WEIGHT) rmsnorm_dweight_add(acc + 32 * 4 * k, wd[k], xv[k], (float)r);
                    wdx = rmsnorm_wdx(wdx, wd[k], xv[k], w[k]);
                    wd[k] = rmsnorm_mul(w[k], wd[k]);
                }
            wdx = warp_sum(wdx);
            const float a = (float)r, b = (float)(r * r * r * wdx / C);
            for (int k = 0; k < V; k++)
                if (lane + 32 * k < G) {
                    const float4 g = rmsnorm_dx(from[k], a, b, wd[k], xv[k]);
                    rmsnorm_store<VEC>(dinp + base, lane + 32 * k, C, g);
                    if (dinp16) rmsnorm_store<VEC>(dinp16 + base, lane + 32 * k, C, g);
                }
        } else {
            for (int j = lane; j < G; j += 32)
                wdx = rmsnorm_wdx(wdx, rmsnorm_load<VEC>(d, j, C), rmsnorm_load<VEC>(x, j, C),
                                  rmsnorm_load<VEC>(weight, j, C));
            wdx = warp_sum(wdx);
            const float a = (float)r, b = (float)(r * r * r * wdx / C);
            for (int j = lane; j < G; j += 32) {
                const float4 from = resid ? rmsnorm_load<VEC>(resid + base, j, C) : float4{};
                const float4 wd = rmsnorm_mul(rmsnorm_load<VEC>(weight, j, C), rmsnorm_load<VEC>(d, j, C));
                const float4 g = rmsnorm_dx(from, a, b, wd, rmsnorm_load<VEC>(x, j, C));
                rmsnorm_store<VEC>(dinp + base, j, C, g);
                if (dinp16) rmsnorm_store<VEC>(dinp16 + base, j, C, g);
            }
        }
    }
    if constexpr (WEIGHT) {
        __syncthreads();
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            const int j = c / 4, slot = 4 * (j / 32) + c % 4;   // column c: group j's, lane j % 32's
            double s = 0.0;
            for (int w = 0; w < RMSNORM_ROWS_PER_BLOCK; w++) s += sums[((size_t)w * 4 * V + slot) * 32 + j % 32];
            partial[(size_t)blockIdx.x * C + c] = s;
        }
    }
}

// partial(chunks, C) = per-chunk sums of dout * (inp * rstd) (dout D: fp32, or bf16 widened).
// Block of 256 threads, RMSNORM_DWEIGHT_THREADS: x = thread % 32 takes columns [4 x, 4 x + 4) of
// the block's RMSNORM_DWEIGHT_COLS (group blockIdx.x * 32 + x, as the row kernels' groups: one
// 16-byte inp load and one 8-byte bf16 dout load where VEC), y = thread / 32 the row phase;
// grid (column blocks, chunks). Each column's sum keeps the order it had with a column a
// thread (rows r0 + y, r0 + y + 8, ..., then the 8 phases in order), so vectors change no bit.
// dweight reduction: each block owns 128 columns x `chunk` rows (cuda_rmsnorm_chunk_rows: 128,
// doubled until the chunk count fits gridDim.y); 8 thread rows walk the chunk, then a second
// kernel adds the chunks' partial sums in chunk order.
// 125m: 75 MB read (bf16 dout, fp32 inp), 6 x 128 = 768 blocks, each thread 16 rows of 24 bytes.
// That grid is about one wave, so what limits it is how many blocks an SM holds: at nvcc's 44
// registers 5 (660 on 132 SMs, and a second wave of 108), at 40 (the launch bound) 6, all 768 at
// once. H200: 26.7 us at 44 registers, 22.0 us bounded (the scalar kernel 27.4 us); loading more
// rows a batch (8 or 16 a thread) cost registers, blocks an SM, and time (30 to 54 us).
#define RMSNORM_DWEIGHT_THREADS 256
#define RMSNORM_DWEIGHT_COLS 128
#define RMSNORM_DWEIGHT_BLOCKS_PER_SM 6
template <typename D, bool VEC>
__global__ void __launch_bounds__(RMSNORM_DWEIGHT_THREADS, RMSNORM_DWEIGHT_BLOCKS_PER_SM)
rmsnorm_dweight_partial_kernel(double *__restrict__ partial, const D *__restrict__ dout, const float *__restrict__ inp,
                               const float *__restrict__ rstd, int N, int C, int chunk) {
    __shared__ double sh[8][RMSNORM_DWEIGHT_COLS];
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const int j = blockIdx.x * 32 + tx;
    const int r0 = blockIdx.y * chunk, r1 = min(r0 + chunk, N);
    double acc0 = 0.0, acc1 = 0.0, acc2 = 0.0, acc3 = 0.0;
    if (4 * j < C)
        for (int r = r0 + ty; r < r1; r += 8) {
            const float4 g = rmsnorm_load<VEC>(dout + (size_t)r * C, j, C),
                         x = rmsnorm_load<VEC>(inp + (size_t)r * C, j, C);
            const float s = rstd[r];
            acc0 += (double)g.x * (x.x * s), acc1 += (double)g.y * (x.y * s);
            acc2 += (double)g.z * (x.z * s), acc3 += (double)g.w * (x.w * s);
        }
    sh[ty][4 * tx] = acc0, sh[ty][4 * tx + 1] = acc1, sh[ty][4 * tx + 2] = acc2, sh[ty][4 * tx + 3] = acc3;
    __syncthreads();
    const int t = threadIdx.x, c = blockIdx.x * RMSNORM_DWEIGHT_COLS + t;   // thread t: column t, phases in order
    if (t < RMSNORM_DWEIGHT_COLS && c < C) {
        double s = 0.0;
        for (int y = 0; y < 8; y++) s += sh[y][t];
        partial[(size_t)blockIdx.y * C + c] = s;
    }
}

// dweight(C) += the sum of partial's `chunks` rows, column by column. Block of 256 threads,
// RMSNORM_FINAL_THREADS, over 32 columns: x = thread % 32 the column, y = thread / 32 the phase,
// which sums rows y, y + 8, ... in order; then the 8 phases' sums in phase order. A fixed order
// (deterministic), and 8 times the threads of a column a thread walking every row: 125m's fused
// backward leaves 256 rows, which one thread a column took in about 16 dependent round trips of
// the loads it could batch, each 32 loads here (the 128 rows of the kernel above took 8.3 us on
// an H200, a column a thread).
#define RMSNORM_FINAL_THREADS 256
__global__ void __launch_bounds__(RMSNORM_FINAL_THREADS)
rmsnorm_dweight_final_kernel(float *__restrict__ dweight, const double *__restrict__ partial, int chunks, int C) {
    __shared__ double sh[RMSNORM_FINAL_THREADS / 32][32];
    const int x = threadIdx.x % 32, y = threadIdx.x / 32, c = blockIdx.x * 32 + x;
    double s = 0.0;
    if (c < C)
        for (int k = y; k < chunks; k += RMSNORM_FINAL_THREADS / 32) s += partial[(size_t)k * C + c];
    sh[y][x] = s;
    __syncthreads();
    if (y == 0 && c < C) {
        double t = 0.0;
        for (int p = 0; p < RMSNORM_FINAL_THREADS / 32; p++) t += sh[p][x];
        dweight[c] += (float)t;
    }
}

#endif
