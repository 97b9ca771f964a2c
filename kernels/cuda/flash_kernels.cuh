// kernels/cuda/flash_kernels.cuh: the CUDA kernels of flash attention, the text that
// kernels/cuda/flash_attention.cu launches (its header comment says what each computes).
// Written in the subset of CUDA C++ that tests/gpu_emu/simt.h also gives a C++ compiler (the
// grid's blocks one after another, a block's threads as host threads, __syncthreads a
// barrier), so tests/gpu_emu/test_flash_simt.cc runs this same source on the CPU and holds it
// bitwise to the emulator's tiles (tests/gpu_emu/flash_emu.c). Include after a header that
// gives that dialect: kernels/cuda/common.cuh on the GPU, simt.h on the CPU.
#ifndef PPTRAIN_KERNELS_CUDA_FLASH_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_FLASH_KERNELS_CUH
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kernels/cuda/flash_tile.h"
#include "kernels/cuda/rope_pair.cuh"

#define FLASH_THREADS 128
#define FLASH_SLD (FLASH_BK + 1)   // row stride of the shared score tiles S, P, dS

// The micro-tile layout below is for 32 x 32 tiles and 128 threads: 16 row pairs x 8 columns.
static_assert(FLASH_BQ == 32 && FLASH_BK == 32 && FLASH_THREADS == 128, "flash micro-tiles: 32 x 32, 128 threads");

// This thread's micro-tile: rows ty and ty + 16 of a 32-row tile; columns tx + 8 j (j < 4) of a
// 32-column chunk.
struct MicroTile {
    int row[2], col[4];
    __device__ MicroTile(int col0) {
        const int ty = threadIdx.x / 8, tx = threadIdx.x % 8;
        row[0] = ty, row[1] = ty + 16;
        for (int j = 0; j < 4; j++) col[j] = col0 + tx + 8 * j;
    }
    __device__ bool has(int i, int j, int rows, int cols) const { return row[i] < rows && col[j] < cols; }
};

// out[i][j] = sum over t < n, in index order, of A(mt.row[i], t) * B(mt.col[j], t), with
// A(r, t) = A[r * a_r + t * a_t] and B(c, t) = B[c * b_c + t * b_t]: one shared tile's rows (or
// columns) against another's. Rows past `rows` and columns past `cols` read the last valid
// one (their results are dropped), so every read stays inside the loaded tile.
__device__ __forceinline__ static void micro_dot(float out[2][4], const MicroTile &mt, int rows, int cols,
                                                 const float *A, int a_r, int a_t, const float *B, int b_c,
                                                 int b_t, int n) {
    const float *a[2], *b[4];
    for (int i = 0; i < 2; i++) a[i] = A + min(mt.row[i], rows - 1) * a_r;
    for (int j = 0; j < 4; j++) b[j] = B + min(mt.col[j], cols - 1) * b_c;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) out[i][j] = 0.0f;
    for (int t = 0; t < n; t++) {
        const float a0 = a[0][t * a_t], a1 = a[1][t * a_t];
        for (int j = 0; j < 4; j++) {
            const float bj = b[j][t * b_t];
            out[0][j] += a0 * bj;
            out[1][j] += a1 * bj;
        }
    }
}

// Attention's output as its caller keeps it: fp32, or in bf16 mode bf16 (a GEMM operand; the
// backward's D then reads the rounded values), rounded to nearest even.
__device__ __forceinline__ static void flash_store(float *p, float x) { *p = x; }
__device__ __forceinline__ static void flash_store(__nv_bfloat16 *p, float x) { *p = __float2bfloat16_rn(x); }
__device__ __forceinline__ static float flash_load(const float *p) { return *p; }
__device__ __forceinline__ static float flash_load(const __nv_bfloat16 *p) { return __bfloat162float(*p); }

// A block's view of one (sequence, head): rows of a q-like or k-like tensor at stride ld, of
// elements E: fp32, or bf16 (bf16 mode keeps q, k, v and attention's output gradient dout bf16).
template <typename E>
struct FlashRows {
    const E *base;
    size_t ld;
    __device__ const E *row(int t) const { return base + (size_t)t * ld; }
};

template <typename E>
__device__ static FlashRows<E> head_rows(const E *x, int b, int h, int T, int H, int HD) {
    FlashRows<E> r = {x + ((size_t)b * T * H + h) * HD, (size_t)H * HD};
    return r;
}

// rows x HD of src (row stride src.ld, from row t0) into a (rows, HD + 1) shared fp32 tile.
// Where each row's float4s can be read at once (HD a multiple of 4 dividing 4 x the block, so
// a thread keeps one column of float4s, and 16-byte aligned rows), a thread reads float4s and
// divides by HD once; otherwise one float at a time. The shared tile's odd row stride takes
// them one by one either way.
__device__ static void load_tile(float *tile, FlashRows<float> src, int t0, int rows, int HD) {
    const int vecs = HD / 4;   // float4s a row
    if (HD % 4 == 0 && (int)blockDim.x % vecs == 0 && src.ld % 4 == 0 && ((size_t)src.base & 15) == 0) {
        const int step = (int)blockDim.x / vecs, c = (int)threadIdx.x % vecs;
        for (int r = (int)threadIdx.x / vecs; r < rows; r += step) {
            const float4 x = reinterpret_cast<const float4 *>(src.row(t0 + r))[c];
            float *d = &tile[r * (HD + 1) + 4 * c];
            d[0] = x.x, d[1] = x.y, d[2] = x.z, d[3] = x.w;
        }
        return;
    }
    for (int i = threadIdx.x; i < rows * HD; i += blockDim.x)
        tile[(i / HD) * (HD + 1) + i % HD] = src.row(t0 + i / HD)[i % HD];
}

// The same from bf16 rows (bf16 mode's q, k, v, dout at a head dim the tensor cores do not take),
// widened exactly; one element at a time (these head dims are the fallback, not the fast path).
__device__ static void load_tile(float *tile, FlashRows<__nv_bfloat16> src, int t0, int rows, int HD) {
    for (int i = threadIdx.x; i < rows * HD; i += blockDim.x)
        tile[(i / HD) * (HD + 1) + i % HD] = flash_load(&src.row(t0 + i / HD)[i % HD]);
}

// The backward's outputs are written once each, never added to, so nothing zeroes them first;
// the value written is 0 + x, what adding into a zeroed buffer gave (a -0 sum stores +0).
__device__ static float flash_written(float x) { return 0.0f + x; }

// Where a backward puts dv: the fp32 dv (B, T, NKV, HD) (packed NULL, ld = NKV x HD); or bf16
// mode's packed q|k|v gradient, rounded to nearest even (packed at its dv column block, ld its
// row stride). Element (token row n, column kvh x HD + d) either way, written once.
struct FlashDv {
    float *wide;
    __nv_bfloat16 *packed;
    size_t ld;
    __device__ void put(size_t row, size_t col, float x) const {
        if (packed) packed[row * ld + col] = __float2bfloat16_rn(flash_written(x));
        else wide[row * ld + col] = flash_written(x);
    }
};

// Where a backward kernel may write dq or dk rotated back by RoPE (rope_pair_backward, as
// rope_backward_packed_kernel), rounded to bf16, into the packed q|k|v gradient: head h of token row n at
// dst[n * ld + h * HD], with the cos/sin tables (T, HD / 2) of rope_tables_kernel. dst NULL:
// the kernel writes the fp32 gradient instead, for RoPE's backward kernel to rotate.
struct FlashRopeOut {
    const float *cos_tab, *sin_tab;
    __nv_bfloat16 *dst;
    size_t ld;
};

// A query tile walks the key tiles up to its diagonal, so the last tiles are the longest: the
// grid's x runs over them from the last, and the GPU starts the long blocks first (the short
// ones then fill the gaps at the end). Which block computes a tile changes nothing in it.
__device__ static int heavy_first_tile(void) { return (int)(gridDim.x - 1 - blockIdx.x); }

static size_t tile_floats(int rows, int HD) { return (size_t)rows * (HD + 1); }

// Shared memory of each kernel, in floats (the carving order of the kernel's first lines).
static size_t forward_smem(int HD) {
    return 2 * tile_floats(FLASH_BQ, HD) + 2 * tile_floats(FLASH_BK, HD) + FLASH_BQ * FLASH_SLD + 4 * FLASH_BQ;
}
static size_t dq_smem(int HD) {
    return 3 * tile_floats(FLASH_BQ, HD) + 2 * tile_floats(FLASH_BK, HD) + FLASH_BQ * FLASH_SLD + 2 * FLASH_BQ;
}
static size_t dkdv_smem(int HD) {
    return 2 * tile_floats(FLASH_BQ, HD) + 4 * tile_floats(FLASH_BK, HD) + 2 * FLASH_BQ * FLASH_SLD + 2 * FLASH_BQ;
}
static size_t decode_smem(int HD) {   // q, acc; a key and a value tile; a score row; m, l, alpha, m'
    return 2 * tile_floats(1, HD) + 2 * tile_floats(FLASH_BK, HD) + FLASH_BK + 4;
}

template <typename OutT, typename InT>
__global__ void flash_forward_kernel(OutT *__restrict__ out, float *__restrict__ lse, const InT *__restrict__ q,
                                     const InT *__restrict__ k, const InT *__restrict__ v, int T, int NH, int NKV,
                                     int HD, float scale) {
    DYNAMIC_SHARED_FLOATS(sh);
    const int ld = HD + 1;
    float *Qs = sh, *acc = Qs + FLASH_BQ * ld, *Ks = acc + FLASH_BQ * ld, *Vs = Ks + FLASH_BK * ld;
    float *S = Vs + FLASH_BK * ld, *m = S + FLASH_BQ * FLASH_SLD, *l = m + FLASH_BQ, *alpha = l + FLASH_BQ;
    float *m_new = alpha + FLASH_BQ;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, kvh = h / (NH / NKV);
    const int q0 = heavy_first_tile() * FLASH_BQ, nq = min(FLASH_BQ, T - q0);
    const FlashRows<InT> qr = head_rows(q, b, h, T, NH, HD), kr = head_rows(k, b, kvh, T, NKV, HD),
                         vr = head_rows(v, b, kvh, T, NKV, HD);
    load_tile(Qs, qr, q0, nq, HD);
    for (int i = threadIdx.x; i < nq * ld; i += blockDim.x) acc[i] = 0.0f;
    for (int r = threadIdx.x; r < nq; r += blockDim.x) m[r] = -INFINITY, l[r] = 0.0f;
    const int key_tiles = (q0 + nq - 1) / FLASH_BK + 1;   // causal: none past the last query
    for (int kt = 0; kt < key_tiles; kt++) {
        const int k0 = kt * FLASH_BK, nk = min(FLASH_BK, T - k0);
        __syncthreads();                                   // the previous tile's readers are done
        load_tile(Ks, kr, k0, nk, HD);
        load_tile(Vs, vr, k0, nk, HD);
        __syncthreads();
        {   // S = scale q k^T (flash_score), -inf above the diagonal
            const MicroTile mt(0);
            float o[2][4];
            micro_dot(o, mt, nq, nk, Qs, ld, 1, Ks, ld, 1, HD);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 4; j++)
                    if (mt.has(i, j, nq, nk))
                        S[mt.row[i] * FLASH_SLD + mt.col[j]] =
                            k0 + mt.col[j] <= q0 + mt.row[i] ? scale * o[i][j] : -INFINITY;
        }
        __syncthreads();
        // flash_softmax_update in three steps: a thread a row for the max, every thread for
        // the probabilities of its micro-tile, a thread a row for the sum (no wait after it:
        // P v below reads the probabilities and alpha, not l or m).
        for (int r = threadIdx.x; r < nq; r += blockDim.x) {
            m_new[r] = flash_row_max(m[r], &S[r * FLASH_SLD], nk);
            alpha[r] = flash_rescale(m[r], m_new[r]);
        }
        __syncthreads();
        {
            const MicroTile mt(0);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 4; j++)
                    if (mt.has(i, j, nq, nk)) {
                        float *p = &S[mt.row[i] * FLASH_SLD + mt.col[j]];
                        *p = flash_exp(*p, m_new[mt.row[i]]);
                    }
        }
        __syncthreads();
        for (int r = threadIdx.x; r < nq; r += blockDim.x)
            if (m_new[r] != -INFINITY) {
                l[r] = l[r] * alpha[r] + flash_row_sum(&S[r * FLASH_SLD], nk);
                m[r] = m_new[r];
            }
        for (int d0 = 0; d0 < HD; d0 += 32) {   // acc = alpha acc + P v (flash_acc_update)
            const MicroTile mt(d0);
            float o[2][4];
            micro_dot(o, mt, nq, HD, S, FLASH_SLD, 1, Vs, 1, ld, nk);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 4; j++)
                    if (mt.has(i, j, nq, HD)) {
                        float *a = &acc[mt.row[i] * ld + mt.col[j]];
                        *a = *a * alpha[mt.row[i]] + o[i][j];
                    }
        }
    }
    __syncthreads();
    OutT *ob = out + ((size_t)b * T * NH + h) * HD;
    for (int i = threadIdx.x; i < nq * HD; i += blockDim.x) {
        const int r = i / HD, d = i % HD;
        flash_store(&ob[(size_t)(q0 + r) * NH * HD + d], acc[r * ld + d] / l[r]);
    }
    for (int r = threadIdx.x; r < nq; r += blockDim.x)
        lse[(size_t)bh * T + q0 + r] = flash_logsumexp(m[r], l[r]);
}

// Generation's decode: block h, the one query row (position n - 1) of head h against keys
// [0, n), key tiles in increasing order as flash_forward_kernel walks them for that row; the
// row's max, sum, alpha and new max live in shared memory. flash_softmax_update's steps, spread:
// thread 0 takes the tile's max (a max has no order) and, after the block's threads have each
// exponentiated their scores, the sum in index order; so the row is flash_softmax_update's bit
// for bit, and the 32 exponentials of a tile run side by side, not one after another on one
// thread. The keys past n - 1 that the forward's last tile would mask add nothing there, so the
// row is the forward's.
template <typename OutT, typename InT>
__global__ void flash_decode_kernel(OutT *__restrict__ out, const InT *__restrict__ q, const InT *__restrict__ k,
                                    const InT *__restrict__ v, int n, int NH, int NKV, int HD, float scale) {
    DYNAMIC_SHARED_FLOATS(sh);
    const int ld = HD + 1;
    float *Qs = sh, *acc = Qs + ld, *Ks = acc + ld, *Vs = Ks + FLASH_BK * ld, *S = Vs + FLASH_BK * ld;
    float *row = S + FLASH_BK;   // m, l, alpha, m'
    const int h = blockIdx.x, kvh = h / (NH / NKV);
    const FlashRows<InT> qr = head_rows(q, 0, h, 1, NH, HD), kr = head_rows(k, 0, kvh, n, NKV, HD),
                         vr = head_rows(v, 0, kvh, n, NKV, HD);
    load_tile(Qs, qr, 0, 1, HD);
    for (int d = threadIdx.x; d < HD; d += blockDim.x) acc[d] = 0.0f;
    if (threadIdx.x == 0) row[0] = -INFINITY, row[1] = 0.0f;
    for (int kt = 0; kt < flash_tiles(n, FLASH_BK); kt++) {
        const int k0 = kt * FLASH_BK, nk = min(FLASH_BK, n - k0);
        __syncthreads();   // the previous tile's readers are done
        load_tile(Ks, kr, k0, nk, HD);
        load_tile(Vs, vr, k0, nk, HD);
        __syncthreads();
        for (int c = threadIdx.x; c < nk; c += blockDim.x)
            S[c] = flash_score(Qs, &Ks[c * ld], HD, scale, n - 1, k0 + c);
        __syncthreads();
        if (threadIdx.x == 0) row[3] = flash_row_max(row[0], S, nk), row[2] = flash_rescale(row[0], row[3]);
        __syncthreads();
        for (int c = threadIdx.x; c < nk; c += blockDim.x) S[c] = flash_exp(S[c], row[3]);
        __syncthreads();
        if (threadIdx.x == 0 && row[3] != -INFINITY) row[1] = row[1] * row[2] + flash_row_sum(S, nk), row[0] = row[3];
        __syncthreads();
        for (int d = threadIdx.x; d < HD; d += blockDim.x) acc[d] = flash_acc_update(acc[d], row[2], S, &Vs[d], ld, nk);
    }
    __syncthreads();
    for (int d = threadIdx.x; d < HD; d += blockDim.x) flash_store(&out[(size_t)h * HD + d], acc[d] / row[1]);
}

// s + the products of a 16-byte run of elements E (4 floats or 8 bf16s) of a and b, widened,
// added one by one in index order: flash_dot's steps, whatever the loads' width.
template <typename E>
__device__ __forceinline__ static float flash_dot16(float s, const uint4 &a, const uint4 &b) {
    constexpr int V = (int)(sizeof(uint4) / sizeof(E));
    E x[V], y[V];   // memcpy, not a cast: the bytes as E without breaking C++'s aliasing rules
    memcpy(x, &a, sizeof a);
    memcpy(y, &b, sizeof b);
    for (int i = 0; i < V; i++) s += flash_load(&x[i]) * flash_load(&y[i]);
    return s;
}

// rowsum(a * o) over one row of n 16-byte pieces of E each (both rows 16-byte aligned), in index
// order (flash_dot's), up to 4 loads of each in flight before their products: D's sum, as
// flash_rowsum_kernel takes it and the tensor-core dq kernel (flash_mma_dq_kernel) too.
template <typename E>
__device__ __forceinline__ static float flash_row_dot16(const E *a_row, const E *o_row, int n) {
    const uint4 *a = reinterpret_cast<const uint4 *>(a_row), *o = reinterpret_cast<const uint4 *>(o_row);
    float s = 0.0f;
    for (int c = 0; c < n; c += 4) {
        uint4 av[4] = {}, ov[4] = {};   // (those past n are never read; the host compiler cannot tell)
        for (int j = 0; j < 4; j++)
            if (c + j < n) av[j] = a[c + j], ov[j] = o[c + j];
        for (int j = 0; j < 4; j++)
            if (c + j < n) s = flash_dot16<E>(s, av[j], ov[j]);
    }
    return s;
}

// dsum(B, NH, T) = rowsum(dout * out): row (b * NH + h) * T + t, one thread a row, each row
// summed in index order (flash_dot's, with dout and out widened from bf16 in bf16 mode), so
// dsum is written coalesced. A row's elements are read 16 bytes at a time (HD x the element
// a multiple of 16 bytes and both tensors 16-byte aligned, as the engine's are), up to 4 loads
// of each tensor in flight before their products: one element a load left each thread waiting
// on one load after another (an H200 took 0.04 ms for the 25 MB of 125m's layer in fp32,
// 0.6 TB/s). Any other shape reads an element at a time; the sum is the same either way.
template <typename T_>
__global__ void flash_rowsum_kernel(float *__restrict__ dsum, const T_ *__restrict__ dout, const T_ *__restrict__ out,
                                    int B, int T, int NH, int HD) {
    constexpr int V = (int)(sizeof(uint4) / sizeof(T_));   // elements a 16-byte load
    const size_t rows = (size_t)B * NH * T;
    const bool wide = HD % V == 0 && ((uintptr_t)dout | (uintptr_t)out) % sizeof(uint4) == 0;
    for (size_t row = (size_t)blockIdx.x * blockDim.x + threadIdx.x; row < rows;
         row += (size_t)gridDim.x * blockDim.x) {
        const int t = (int)(row % T), h = (int)(row / T % NH), b = (int)(row / ((size_t)T * NH));
        const size_t at = (((size_t)b * T + t) * NH + h) * HD;
        float s = 0.0f;
        if (wide) s = flash_row_dot16<T_>(dout + at, out + at, HD / V);
        else
            for (int d = 0; d < HD; d++) s += flash_load(dout + at + d) * flash_load(out + at + d);
        dsum[row] = s;
    }
}

// A backward tile: P = exp(s - L) (when P is wanted) and dS = P (dout . v - D) of the block's
// query rows (Qs, dOs, Ls, Ds: nq rows from q0) against its key rows (Ks, Vs: nk rows from k0),
// into (BQ, FLASH_SLD) tiles: flash_score, flash_prob, flash_dot and flash_dscore per element.
__device__ static void backward_scores(float *P, float *dS, const float *Qs, const float *dOs, const float *Ks,
                                       const float *Vs, const float *Ls, const float *Ds, int q0, int nq,
                                       int k0, int nk, int HD, float scale) {
    const int ld = HD + 1;
    const MicroTile mt(0);
    float sc[2][4], dp[2][4];
    micro_dot(sc, mt, nq, nk, Qs, ld, 1, Ks, ld, 1, HD);
    micro_dot(dp, mt, nq, nk, dOs, ld, 1, Vs, ld, 1, HD);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            if (!mt.has(i, j, nq, nk)) continue;
            const int r = mt.row[i], c = mt.col[j];
            const float p = flash_prob(k0 + c <= q0 + r ? scale * sc[i][j] : -INFINITY, Ls[r]);
            if (P) P[r * FLASH_SLD + c] = p;
            dS[r * FLASH_SLD + c] = flash_dscore(p, dp[i][j], Ds[r]);
        }
}

template <typename InT>
__global__ void flash_dq_kernel(float *__restrict__ dq, const InT *__restrict__ dout,
                                const InT *__restrict__ q, const InT *__restrict__ k,
                                const InT *__restrict__ v, const float *__restrict__ lse,
                                const float *__restrict__ dsum, int T, int NH, int NKV, int HD,
                                float scale) {
    DYNAMIC_SHARED_FLOATS(sh);
    const int ld = HD + 1;
    float *Qs = sh, *dOs = Qs + FLASH_BQ * ld, *acc = dOs + FLASH_BQ * ld, *Ks = acc + FLASH_BQ * ld;
    float *Vs = Ks + FLASH_BK * ld, *dS = Vs + FLASH_BK * ld;
    float *Ls = dS + FLASH_BQ * FLASH_SLD, *Ds = Ls + FLASH_BQ;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, kvh = h / (NH / NKV);
    const int q0 = heavy_first_tile() * FLASH_BQ, nq = min(FLASH_BQ, T - q0);
    load_tile(Qs, head_rows(q, b, h, T, NH, HD), q0, nq, HD);
    load_tile(dOs, head_rows(dout, b, h, T, NH, HD), q0, nq, HD);
    for (int i = threadIdx.x; i < nq * ld; i += blockDim.x) acc[i] = 0.0f;
    for (int r = threadIdx.x; r < nq; r += blockDim.x) {
        Ls[r] = lse[(size_t)bh * T + q0 + r];
        Ds[r] = dsum[(size_t)bh * T + q0 + r];
    }
    const FlashRows<InT> kr = head_rows(k, b, kvh, T, NKV, HD), vr = head_rows(v, b, kvh, T, NKV, HD);
    const int key_tiles = (q0 + nq - 1) / FLASH_BK + 1;
    for (int kt = 0; kt < key_tiles; kt++) {
        const int k0 = kt * FLASH_BK, nk = min(FLASH_BK, T - k0);
        __syncthreads();
        load_tile(Ks, kr, k0, nk, HD);
        load_tile(Vs, vr, k0, nk, HD);
        __syncthreads();
        backward_scores(NULL, dS, Qs, dOs, Ks, Vs, Ls, Ds, q0, nq, k0, nk, HD, scale);
        __syncthreads();
        for (int d0 = 0; d0 < HD; d0 += 32) {   // acc += dS k
            const MicroTile mt(d0);
            float o[2][4];
            micro_dot(o, mt, nq, HD, dS, FLASH_SLD, 1, Ks, 1, ld, nk);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 4; j++)
                    if (mt.has(i, j, nq, HD)) acc[mt.row[i] * ld + mt.col[j]] += o[i][j];
        }
    }
    __syncthreads();
    float *db = dq + ((size_t)b * T * NH + h) * HD;
    for (int i = threadIdx.x; i < nq * HD; i += blockDim.x) {
        const int r = i / HD, d = i % HD;
        db[(size_t)(q0 + r) * NH * HD + d] = flash_written(scale * acc[r * ld + d]);
    }
}

// Block (key tile, b * NH + h): query head h's share of its kv head's dk and dv for the key
// tile, over the query tiles from the diagonal on. One query head a block (not the g heads of
// the group in turn) gives the GPU g times the blocks and cuts the longest block (key tile 0)
// to 1/g. With g = 1 the block writes dk and dv itself; with g > 1 it stores its share to
// dk_part and dv_part (B, T, NH, HD), and flash_group_sum_kernel sums the g shares in head order.
template <typename InT>
__global__ void flash_dkdv_kernel(float *__restrict__ dk, FlashDv dv, float *__restrict__ dk_part,
                                  float *__restrict__ dv_part, const InT *__restrict__ dout,
                                  const InT *__restrict__ q, const InT *__restrict__ k,
                                  const InT *__restrict__ v, const float *__restrict__ lse,
                                  const float *__restrict__ dsum, int T, int NH, int NKV, int HD, float scale) {
    DYNAMIC_SHARED_FLOATS(sh);
    const int ld = HD + 1, g = NH / NKV;
    float *Ks = sh, *Vs = Ks + FLASH_BK * ld, *dk_acc = Vs + FLASH_BK * ld, *dv_acc = dk_acc + FLASH_BK * ld;
    float *Qs = dv_acc + FLASH_BK * ld, *dOs = Qs + FLASH_BQ * ld, *P = dOs + FLASH_BQ * ld;
    float *dS = P + FLASH_BQ * FLASH_SLD, *Ls = dS + FLASH_BQ * FLASH_SLD, *Ds = Ls + FLASH_BQ;
    const int b = blockIdx.y / NH, h = blockIdx.y % NH, kvh = h / g;
    const size_t bh = blockIdx.y;
    const int k0 = blockIdx.x * FLASH_BK, nk = min(FLASH_BK, T - k0);
    load_tile(Ks, head_rows(k, b, kvh, T, NKV, HD), k0, nk, HD);
    load_tile(Vs, head_rows(v, b, kvh, T, NKV, HD), k0, nk, HD);
    for (int i = threadIdx.x; i < nk * ld; i += blockDim.x) dk_acc[i] = dv_acc[i] = 0.0f;
    const FlashRows<InT> qr = head_rows(q, b, h, T, NH, HD), orr = head_rows(dout, b, h, T, NH, HD);
    for (int qt = k0 / FLASH_BQ; qt < flash_tiles(T, FLASH_BQ); qt++) {
        const int q0 = qt * FLASH_BQ, nq = min(FLASH_BQ, T - q0);
        __syncthreads();
        load_tile(Qs, qr, q0, nq, HD);
        load_tile(dOs, orr, q0, nq, HD);
        for (int r = threadIdx.x; r < nq; r += blockDim.x) {
            Ls[r] = lse[bh * T + q0 + r];
            Ds[r] = dsum[bh * T + q0 + r];
        }
        __syncthreads();
        backward_scores(P, dS, Qs, dOs, Ks, Vs, Ls, Ds, q0, nq, k0, nk, HD, scale);
        __syncthreads();
        for (int d0 = 0; d0 < HD; d0 += 32) {   // dk += dS^T q, dv += P^T dout (rows: keys)
            const MicroTile mt(d0);
            float ok[2][4], ov[2][4];
            micro_dot(ok, mt, nk, HD, dS, 1, FLASH_SLD, Qs, 1, ld, nq);
            micro_dot(ov, mt, nk, HD, P, 1, FLASH_SLD, dOs, 1, ld, nq);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 4; j++)
                    if (mt.has(i, j, nk, HD)) {
                        dk_acc[mt.row[i] * ld + mt.col[j]] += ok[i][j];
                        dv_acc[mt.row[i] * ld + mt.col[j]] += ov[i][j];
                    }
        }
    }
    __syncthreads();
    if (g == 1) {
        float *dkb = dk + ((size_t)b * T * NKV + kvh) * HD;
        for (int i = threadIdx.x; i < nk * HD; i += blockDim.x) {
            const int c = i / HD, d = i % HD;
            dkb[(size_t)(k0 + c) * NKV * HD + d] = flash_written(scale * dk_acc[c * ld + d]);
            dv.put((size_t)b * T + k0 + c, (size_t)kvh * HD + d, dv_acc[c * ld + d]);
        }
        return;
    }
    float *dkp = dk_part + ((size_t)b * T * NH + h) * HD, *dvp = dv_part + ((size_t)b * T * NH + h) * HD;
    for (int i = threadIdx.x; i < nk * HD; i += blockDim.x) {
        const int c = i / HD, d = i % HD;
        const size_t at = (size_t)(k0 + c) * NH * HD + d;
        dkp[at] = dk_acc[c * ld + d];
        dvp[at] = dv_acc[c * ld + d];
    }
}

// dk (B, T, NKV, HD) and dv (FlashDv) written: the g query heads' shares (B, T, NH, HD), summed
// in head order (flash_group_sum), dk's times the scale. Blocks take token rows (position
// row % T) in turn and a block's threads the row's NKV x HD elements (one 32-bit division an
// element, for its head). With rk.dst, dk is not written: each rotation pair (columns i and
// i + HD / 2 of a kv head) is summed, rotated back by RoPE and written bf16 into the packed
// gradient, the bits rope_backward_packed_kernel would make of the fp32 dk.
__global__ void flash_group_sum_kernel(float *__restrict__ dk, FlashDv dv,
                                       const float *__restrict__ dk_part, const float *__restrict__ dv_part,
                                       size_t rows, int T, int NH, int NKV, int HD, float scale, FlashRopeOut rk) {
    const int g = NH / NKV, width = NKV * HD, half = HD / 2;
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        for (int c = threadIdx.x; c < width; c += blockDim.x) {
            const int kvh = c / HD, d = c - kvh * HD;
            const size_t first = (row * NH + (size_t)kvh * g) * HD + d;   // head kvh * g of the row, column d
            if (!rk.dst) dk[row * width + c] = flash_written(scale * flash_group_sum(dk_part + first, HD, g));
            dv.put(row, (size_t)c, flash_group_sum(dv_part + first, HD, g));
        }
        if (!rk.dst) continue;
        const size_t tab = (size_t)(row % (size_t)T) * half;
        for (int j = threadIdx.x; j < NKV * half; j += blockDim.x) {
            const int kvh = j / half, i = j - kvh * half;
            const size_t first = (row * NH + (size_t)kvh * g) * HD + i;
            const RopePair p = rope_pair_backward(flash_written(scale * flash_group_sum(dk_part + first, HD, g)),
                                                  flash_written(scale * flash_group_sum(dk_part + first + half, HD, g)),
                                                  rk.cos_tab[tab + i], rk.sin_tab[tab + i]);
            __nv_bfloat16 *x = rk.dst + row * rk.ld + (size_t)kvh * HD;
            x[i] = __float2bfloat16_rn(p.lo);
            x[i + half] = __float2bfloat16_rn(p.hi);
        }
    }
}

static float flash_scale(int HD) { return (float)(1.0 / sqrt((double)HD)); }
#endif
