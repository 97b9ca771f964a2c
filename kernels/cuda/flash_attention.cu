// kernels/cuda/flash_attention.cu: causal grouped-query flash attention (FlashAttention-2),
// forward and backward, with no (T, T) buffer: per head it keeps out and the row logsumexp
// (B, NH, T), and backward recomputes each tile's probabilities from them.
//
// Layouts (kernels_cuda.h): q, out, dout (B, T, NH, HD); k, v (B, T, NKV, HD); lse, dsum
// (B, NH, T). Query head h reads kv head h / g, g = NH / NKV.
//
// The math of one tile is kernels/cuda/flash_tile.h (shared with the emulator, which runs it
// in this file's tile order: tests/gpu_emu/flash_emu.c); the kernels here only move tiles into
// shared memory and share a tile's elements out over the block's threads. A block owns one tile
// of rows and walks the tiles it meets in a fixed order, so every sum has one order and a run
// repeats itself bitwise, with no atomics:
//   flash_forward_kernel  block (query tile, b * NH + h): key tiles 0, 1, ... up to the diagonal.
//   flash_decode_kernel   block h: generation's one query row against the cached keys, as forward.
//   flash_rowsum_kernel   D = rowsum(dout * out), one thread a row.
//   flash_dq_kernel       block (query tile, b * NH + h): dq += scale dS k, key tiles as forward.
//   flash_dkdv_kernel     block (key tile, b * NKV + kv): the g query heads of the kv head in
//                         order, each over the query tiles from the diagonal on; dk += scale dS^T q,
//                         dv += P^T dout. dq and dk/dv are split so each has one writer per row,
//                         at the price of computing the backward's scores twice.
// Shared tiles are (rows, HD + 1): the odd stride spreads a column's reads over the banks.
// fp32 throughout, on CUDA cores (see flash_tile.h: nothing is rounded to bf16).
#include <math.h>
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/flash_tile.h"

#define FLASH_THREADS 128

// A block's view of one (sequence, head): rows of a q-like or k-like tensor at stride ld.
struct FlashRows {
    const float *base;
    size_t ld;
    __device__ const float *row(int t) const { return base + (size_t)t * ld; }
};

__device__ static FlashRows head_rows(const float *x, int b, int h, int T, int H, int HD) {
    FlashRows r = {x + ((size_t)b * T * H + h) * HD, (size_t)H * HD};
    return r;
}

// rows x HD of src (row stride src.ld, from row t0) into a (rows, HD + 1) shared tile.
__device__ static void load_tile(float *tile, FlashRows src, int t0, int rows, int HD) {
    for (int i = threadIdx.x; i < rows * HD; i += blockDim.x)
        tile[(i / HD) * (HD + 1) + i % HD] = src.row(t0 + i / HD)[i % HD];
}

static size_t tile_floats(int rows, int HD) { return (size_t)rows * (HD + 1); }

// Shared memory of each kernel, in floats (the carving order of the kernel's first lines).
static size_t forward_smem(int HD) {
    return 2 * tile_floats(FLASH_BQ, HD) + 2 * tile_floats(FLASH_BK, HD) + FLASH_BQ * FLASH_BK + 3 * FLASH_BQ;
}
static size_t dq_smem(int HD) {
    return 3 * tile_floats(FLASH_BQ, HD) + 2 * tile_floats(FLASH_BK, HD) + 2 * FLASH_BQ * FLASH_BK + 2 * FLASH_BQ;
}
static size_t dkdv_smem(int HD) {
    return 2 * tile_floats(FLASH_BQ, HD) + 4 * tile_floats(FLASH_BK, HD) + 2 * FLASH_BQ * FLASH_BK + 2 * FLASH_BQ;
}

__global__ void flash_forward_kernel(float *__restrict__ out, float *__restrict__ lse,
                                     const float *__restrict__ q, const float *__restrict__ k,
                                     const float *__restrict__ v, int T, int NH, int NKV, int HD,
                                     float scale) {
    extern __shared__ float sh[];
    const int ld = HD + 1;
    float *Qs = sh, *acc = Qs + FLASH_BQ * ld, *Ks = acc + FLASH_BQ * ld, *Vs = Ks + FLASH_BK * ld;
    float *S = Vs + FLASH_BK * ld, *m = S + FLASH_BQ * FLASH_BK, *l = m + FLASH_BQ, *alpha = l + FLASH_BQ;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, kvh = h / (NH / NKV);
    const int q0 = blockIdx.x * FLASH_BQ, nq = min(FLASH_BQ, T - q0);
    const FlashRows qr = head_rows(q, b, h, T, NH, HD), kr = head_rows(k, b, kvh, T, NKV, HD),
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
        for (int i = threadIdx.x; i < nq * FLASH_BK; i += blockDim.x) {
            const int r = i / FLASH_BK, c = i % FLASH_BK;
            if (c < nk) S[i] = flash_score(&Qs[r * ld], &Ks[c * ld], HD, scale, q0 + r, k0 + c);
        }
        __syncthreads();
        for (int r = threadIdx.x; r < nq; r += blockDim.x)
            alpha[r] = flash_softmax_update(&m[r], &l[r], &S[r * FLASH_BK], nk);
        __syncthreads();
        for (int i = threadIdx.x; i < nq * HD; i += blockDim.x) {
            const int r = i / HD, d = i % HD;
            acc[r * ld + d] = flash_acc_update(acc[r * ld + d], alpha[r], &S[r * FLASH_BK], &Vs[d], ld, nk);
        }
    }
    __syncthreads();
    float *ob = out + ((size_t)b * T * NH + h) * HD;
    for (int i = threadIdx.x; i < nq * HD; i += blockDim.x) {
        const int r = i / HD, d = i % HD;
        ob[(size_t)(q0 + r) * NH * HD + d] = acc[r * ld + d] / l[r];
    }
    for (int r = threadIdx.x; r < nq; r += blockDim.x)
        lse[(size_t)bh * T + q0 + r] = flash_logsumexp(m[r], l[r]);
}

// Generation's decode: block h, the one query row (position n - 1) of head h against keys
// [0, n), key tiles in increasing order as flash_forward_kernel walks them for that row; the
// row's max, sum and alpha live in shared memory (one writer: thread 0). The keys past n - 1
// that the forward's last tile would mask add nothing there, so the row is the forward's.
__global__ void flash_decode_kernel(float *__restrict__ out, const float *__restrict__ q, const float *__restrict__ k,
                                    const float *__restrict__ v, int n, int NH, int NKV, int HD, float scale) {
    extern __shared__ float sh[];
    const int ld = HD + 1;
    float *Qs = sh, *acc = Qs + ld, *Ks = acc + ld, *Vs = Ks + FLASH_BK * ld, *S = Vs + FLASH_BK * ld;
    float *row = S + FLASH_BK;   // m, l, alpha
    const int h = blockIdx.x, kvh = h / (NH / NKV);
    const FlashRows qr = head_rows(q, 0, h, 1, NH, HD), kr = head_rows(k, 0, kvh, n, NKV, HD),
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
        if (threadIdx.x == 0) row[2] = flash_softmax_update(&row[0], &row[1], S, nk);
        __syncthreads();
        for (int d = threadIdx.x; d < HD; d += blockDim.x) acc[d] = flash_acc_update(acc[d], row[2], S, &Vs[d], ld, nk);
    }
    __syncthreads();
    for (int d = threadIdx.x; d < HD; d += blockDim.x) out[(size_t)h * HD + d] = acc[d] / row[1];
}

// dsum(B, NH, T) = rowsum(dout * out): row (b * NH + h) * T + t.
__global__ void flash_rowsum_kernel(float *__restrict__ dsum, const float *__restrict__ dout,
                                    const float *__restrict__ out, int B, int T, int NH, int HD) {
    const size_t rows = (size_t)B * NH * T;
    for (size_t row = (size_t)blockIdx.x * blockDim.x + threadIdx.x; row < rows;
         row += (size_t)gridDim.x * blockDim.x) {
        const int t = (int)(row % T), h = (int)(row / T % NH), b = (int)(row / ((size_t)T * NH));
        const size_t at = (((size_t)b * T + t) * NH + h) * HD;
        dsum[row] = flash_dot(dout + at, out + at, HD);
    }
}

// A backward tile: P = exp(s - L) and dS = P (dout . v - D) of the block's query rows
// (Qs, dOs, Ls, Ds: nq rows from q0) against its key rows (Ks, Vs: nk rows from k0).
__device__ static void backward_scores(float *P, float *dS, const float *Qs, const float *dOs, const float *Ks,
                                       const float *Vs, const float *Ls, const float *Ds, int q0, int nq,
                                       int k0, int nk, int HD, float scale) {
    const int ld = HD + 1;
    for (int i = threadIdx.x; i < nq * FLASH_BK; i += blockDim.x) {
        const int r = i / FLASH_BK, c = i % FLASH_BK;
        if (c >= nk) continue;
        const float p = flash_prob(flash_score(&Qs[r * ld], &Ks[c * ld], HD, scale, q0 + r, k0 + c), Ls[r]);
        P[i] = p;
        dS[i] = flash_dscore(p, flash_dot(&dOs[r * ld], &Vs[c * ld], HD), Ds[r]);
    }
}

__global__ void flash_dq_kernel(float *__restrict__ dq, const float *__restrict__ dout,
                                const float *__restrict__ q, const float *__restrict__ k,
                                const float *__restrict__ v, const float *__restrict__ lse,
                                const float *__restrict__ dsum, int T, int NH, int NKV, int HD,
                                float scale) {
    extern __shared__ float sh[];
    const int ld = HD + 1;
    float *Qs = sh, *dOs = Qs + FLASH_BQ * ld, *acc = dOs + FLASH_BQ * ld, *Ks = acc + FLASH_BQ * ld;
    float *Vs = Ks + FLASH_BK * ld, *P = Vs + FLASH_BK * ld, *dS = P + FLASH_BQ * FLASH_BK;
    float *Ls = dS + FLASH_BQ * FLASH_BK, *Ds = Ls + FLASH_BQ;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, kvh = h / (NH / NKV);
    const int q0 = blockIdx.x * FLASH_BQ, nq = min(FLASH_BQ, T - q0);
    load_tile(Qs, head_rows(q, b, h, T, NH, HD), q0, nq, HD);
    load_tile(dOs, head_rows(dout, b, h, T, NH, HD), q0, nq, HD);
    for (int i = threadIdx.x; i < nq * ld; i += blockDim.x) acc[i] = 0.0f;
    for (int r = threadIdx.x; r < nq; r += blockDim.x) {
        Ls[r] = lse[(size_t)bh * T + q0 + r];
        Ds[r] = dsum[(size_t)bh * T + q0 + r];
    }
    const FlashRows kr = head_rows(k, b, kvh, T, NKV, HD), vr = head_rows(v, b, kvh, T, NKV, HD);
    const int key_tiles = (q0 + nq - 1) / FLASH_BK + 1;
    for (int kt = 0; kt < key_tiles; kt++) {
        const int k0 = kt * FLASH_BK, nk = min(FLASH_BK, T - k0);
        __syncthreads();
        load_tile(Ks, kr, k0, nk, HD);
        load_tile(Vs, vr, k0, nk, HD);
        __syncthreads();
        backward_scores(P, dS, Qs, dOs, Ks, Vs, Ls, Ds, q0, nq, k0, nk, HD, scale);
        __syncthreads();
        for (int i = threadIdx.x; i < nq * HD; i += blockDim.x) {
            const int r = i / HD, d = i % HD;
            acc[r * ld + d] += flash_strided_dot(&dS[r * FLASH_BK], 1, &Ks[d], ld, nk);
        }
    }
    __syncthreads();
    float *db = dq + ((size_t)b * T * NH + h) * HD;
    for (int i = threadIdx.x; i < nq * HD; i += blockDim.x) {
        const int r = i / HD, d = i % HD;
        db[(size_t)(q0 + r) * NH * HD + d] += scale * acc[r * ld + d];
    }
}

__global__ void flash_dkdv_kernel(float *__restrict__ dk, float *__restrict__ dv,
                                  const float *__restrict__ dout, const float *__restrict__ q,
                                  const float *__restrict__ k, const float *__restrict__ v,
                                  const float *__restrict__ lse, const float *__restrict__ dsum,
                                  int T, int NH, int NKV, int HD, float scale) {
    extern __shared__ float sh[];
    const int ld = HD + 1, g = NH / NKV;
    float *Ks = sh, *Vs = Ks + FLASH_BK * ld, *dk_acc = Vs + FLASH_BK * ld, *dv_acc = dk_acc + FLASH_BK * ld;
    float *Qs = dv_acc + FLASH_BK * ld, *dOs = Qs + FLASH_BQ * ld, *P = dOs + FLASH_BQ * ld;
    float *dS = P + FLASH_BQ * FLASH_BK, *Ls = dS + FLASH_BQ * FLASH_BK, *Ds = Ls + FLASH_BQ;
    const int b = blockIdx.y / NKV, kvh = blockIdx.y % NKV;
    const int k0 = blockIdx.x * FLASH_BK, nk = min(FLASH_BK, T - k0);
    load_tile(Ks, head_rows(k, b, kvh, T, NKV, HD), k0, nk, HD);
    load_tile(Vs, head_rows(v, b, kvh, T, NKV, HD), k0, nk, HD);
    for (int i = threadIdx.x; i < nk * ld; i += blockDim.x) dk_acc[i] = dv_acc[i] = 0.0f;
    for (int j = 0; j < g; j++) {
        const int h = kvh * g + j;
        const size_t bh = (size_t)b * NH + h;
        const FlashRows qr = head_rows(q, b, h, T, NH, HD), orr = head_rows(dout, b, h, T, NH, HD);
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
            for (int i = threadIdx.x; i < nk * HD; i += blockDim.x) {
                const int c = i / HD, d = i % HD;
                dk_acc[c * ld + d] += flash_strided_dot(&dS[c], FLASH_BK, &Qs[d], ld, nq);
                dv_acc[c * ld + d] += flash_strided_dot(&P[c], FLASH_BK, &dOs[d], ld, nq);
            }
        }
    }
    __syncthreads();
    float *dkb = dk + ((size_t)b * T * NKV + kvh) * HD, *dvb = dv + ((size_t)b * T * NKV + kvh) * HD;
    for (int i = threadIdx.x; i < nk * HD; i += blockDim.x) {
        const int c = i / HD, d = i % HD;
        const size_t at = (size_t)(k0 + c) * NKV * HD + d;
        dkb[at] += scale * dk_acc[c * ld + d];
        dvb[at] += dv_acc[c * ld + d];
    }
}

// Dynamic shared memory above 48 KiB must be asked for per kernel (HD 128: about 70 KiB
// forward, 105 KiB for dk/dv; HD 256 needs more than an A100's 163 KiB for dk/dv).
template <typename Kernel>
static void allow_smem(Kernel kernel, size_t bytes) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

static float flash_scale(int HD) { return (float)(1.0 / sqrt((double)HD)); }

void cuda_flash_attention_forward(CudaCtx *ctx, float *out, float *lse, const float *q,
                                  const float *k, const float *v, int B, int T, int NH, int NKV,
                                  int HD) {
    if (B <= 0 || T <= 0 || NH <= 0) return;
    const size_t smem = forward_smem(HD) * sizeof(float);
    allow_smem(flash_forward_kernel, smem);
    const dim3 grid((unsigned)flash_tiles(T, FLASH_BQ), (unsigned)(B * NH));
    flash_forward_kernel<<<grid, FLASH_THREADS, smem, ctx->stream>>>(out, lse, q, k, v, T, NH, NKV, HD,
                                                                     flash_scale(HD));
    CUDA_CHECK_LAUNCH();
}

void cuda_flash_decode(CudaCtx *ctx, float *out, const float *q, const float *k, const float *v, int n, int NH, int NKV,
                       int HD) {
    if (n <= 0 || NH <= 0) return;
    const size_t smem = (2 * tile_floats(1, HD) + 2 * tile_floats(FLASH_BK, HD) + FLASH_BK + 3) * sizeof(float);
    allow_smem(flash_decode_kernel, smem);
    flash_decode_kernel<<<(unsigned)NH, FLASH_THREADS, smem, ctx->stream>>>(out, q, k, v, n, NH, NKV, HD,
                                                                            flash_scale(HD));
    CUDA_CHECK_LAUNCH();
}

void cuda_flash_attention_backward(CudaCtx *ctx, float *dq, float *dk, float *dv, float *dsum,
                                   const float *dout, const float *q, const float *k,
                                   const float *v, const float *out, const float *lse, int B, int T,
                                   int NH, int NKV, int HD) {
    if (B <= 0 || T <= 0 || NH <= 0) return;
    const size_t rows = (size_t)B * NH * T;
    flash_rowsum_kernel<<<grid_for(rows, 256), 256, 0, ctx->stream>>>(dsum, dout, out, B, T, NH, HD);
    CUDA_CHECK_LAUNCH();
    const float scale = flash_scale(HD);
    const size_t dq_bytes = dq_smem(HD) * sizeof(float), dkdv_bytes = dkdv_smem(HD) * sizeof(float);
    allow_smem(flash_dq_kernel, dq_bytes);
    allow_smem(flash_dkdv_kernel, dkdv_bytes);
    const dim3 qgrid((unsigned)flash_tiles(T, FLASH_BQ), (unsigned)(B * NH));
    flash_dq_kernel<<<qgrid, FLASH_THREADS, dq_bytes, ctx->stream>>>(dq, dout, q, k, v, lse, dsum, T, NH, NKV,
                                                                     HD, scale);
    CUDA_CHECK_LAUNCH();
    const dim3 kgrid((unsigned)flash_tiles(T, FLASH_BK), (unsigned)(B * NKV));
    flash_dkdv_kernel<<<kgrid, FLASH_THREADS, dkdv_bytes, ctx->stream>>>(dk, dv, dout, q, k, v, lse, dsum, T,
                                                                         NH, NKV, HD, scale);
    CUDA_CHECK_LAUNCH();
}
