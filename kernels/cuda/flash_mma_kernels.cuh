// kernels/cuda/flash_mma_kernels.cuh: flash attention on tensor cores, the bf16 mode's kernels
// (kernels/cuda/flash_attention.cu launches them; flash_kernels.cuh holds the fp32 ones, whose
// walk over tiles these repeat). The products q k^T, P v, dout v^T, dS k, k q^T, v dout^T,
// P^T dout and dS^T q run as nvcuda::wmma 16 x 16 x 16 bf16 tiles with fp32 accumulators; the
// online softmax, the probabilities and the score gradients are fp32 on CUDA cores, between
// the products, through shared memory. flash_tile.h ("Tensor-core tiles") says what is
// rounded to bf16 and in what order each sum is taken; tests/gpu_emu/flash_emu.c computes the
// same numbers element by element, and tests/gpu_emu/test_flash_simt.cc runs this source on
// CPU threads (simt.h emulates wmma) and holds it bitwise to that.
//
// A block is 4 warps; a tile is 64 rows, warp w owning rows 16 w .. 16 w + 15 (query rows in
// forward and dq, key rows in dk/dv), so each warp's products, softmax rows and accumulators
// are its own and the warp syncs alone between them; the block syncs only around tile loads.
// Shared tiles: bf16 (64, HD + 8) operands, fp32 (64, 68) score tiles, bf16 (64, 72)
// probability tiles (the pads keep wmma's 32-byte alignment and spread rows over the banks).
// Rows past T load as zeros and their probabilities are masked to 0, so they add exact zeros.
// A warp's accumulators stay in registers across the whole walk (HD / 16 tiles each); the
// forward's rescale by alpha needs each accumulator element's row, which the hardware's
// fragment layout does not publish, so the block loads a tile of row numbers once
// (accumulator_rows) and reads every element's row from it.
#ifndef PPTRAIN_KERNELS_CUDA_FLASH_MMA_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_FLASH_MMA_KERNELS_CUH
#ifdef __CUDACC__
#include <mma.h>
#endif
#include "kernels/cuda/flash_kernels.cuh"

namespace wmma = nvcuda::wmma;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> MmaA;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> MmaB;    // (depth, col) rows
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> MmaBt;   // a tile's rows as columns
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> MmaAcc;

#define MMA_WARPS 4
#define MMA_THREADS (32 * MMA_WARPS)
#define MMA_SLD (FLASH_MMA_ROWS + 4)   // fp32 score tile row stride
#define MMA_PLD (FLASH_MMA_ROWS + 8)   // bf16 probability tile row stride
static_assert(FLASH_MMA_ROWS == 16 * MMA_WARPS && FLASH_MMA_ROWS == 2 * FLASH_MMA_HALF,
              "a tile is a warp's 16 rows each, a score row two lanes' halves");

// f(MmaHeadDim<HD>()) for the head dims the kernels are built for (flash_mma_takes), so a
// caller names the kernels' template argument once: f's `decltype(hd)::value`.
template <int N>
struct MmaHeadDim {
    static constexpr int value = N;
};
template <typename F>
static void mma_dispatch(int HD, F f) {
    switch (HD) {
    case 16: f(MmaHeadDim<16>()); break;
    case 32: f(MmaHeadDim<32>()); break;
    case 48: f(MmaHeadDim<48>()); break;
    case 64: f(MmaHeadDim<64>()); break;
    case 80: f(MmaHeadDim<80>()); break;
    case 96: f(MmaHeadDim<96>()); break;
    case 112: f(MmaHeadDim<112>()); break;
    case 128: f(MmaHeadDim<128>()); break;
    default: break;   // flash_mma_takes says no: the caller runs the fp32 kernels
    }
}
static_assert(FLASH_MMA_MAX_HD == 128, "mma_dispatch lists the multiples of 16 up to FLASH_MMA_MAX_HD");

// Shared memory, carved in 32-byte pieces (wmma's alignment) from the block's floats.
struct MmaCarve {
    float *base;
    size_t used;   // floats
    __device__ float *floats(size_t n) {
        float *p = base + used;
        used += (n + 7) / 8 * 8;
        return p;
    }
    __device__ __nv_bfloat16 *bf16s(size_t n) { return reinterpret_cast<__nv_bfloat16 *>(floats((n + 1) / 2)); }
};
// The same carving counted on the host: a kernel's shared bytes.
static size_t mma_pieces(size_t floats) { return (floats + 7) / 8 * 8; }
static size_t mma_operand_floats(int HD) { return mma_pieces((size_t)FLASH_MMA_ROWS * (HD + 8) / 2); }
static size_t mma_forward_smem(int HD) {   // Q K V, S, P, row numbers, m l alpha, two lanes' max and sum
    return 3 * mma_operand_floats(HD) + mma_pieces(FLASH_MMA_ROWS * MMA_SLD) + mma_pieces(FLASH_MMA_ROWS * MMA_PLD / 2) +
           mma_pieces(256) + 3 * mma_pieces(FLASH_MMA_ROWS) + 2 * mma_pieces(2 * FLASH_MMA_ROWS);
}
static size_t mma_backward_smem(int HD) {   // mma_backward_tiles: 4 operands, 2 score and 2 probability tiles, L, D
    return 4 * mma_operand_floats(HD) + 2 * mma_pieces(FLASH_MMA_ROWS * MMA_SLD) +
           2 * mma_pieces(FLASH_MMA_ROWS * MMA_PLD / 2) + 2 * mma_pieces(FLASH_MMA_ROWS);
}

// The backward kernels' shared memory, one layout for both (mma_backward_smem counts it): the
// four bf16 operand tiles, two fp32 score tiles, two bf16 probability tiles, the rows' L and D.
struct MmaBackwardTiles {
    __nv_bfloat16 *Q, *dO, *K, *V;
    float *S, *dP;           // (64, MMA_SLD)
    __nv_bfloat16 *P, *dS;   // (64, MMA_PLD)
    float *L, *D;            // (64)
};
template <int HD>
__device__ static MmaBackwardTiles mma_backward_tiles(float *sh) {
    MmaCarve carve = {sh, 0};
    const size_t operand = (size_t)FLASH_MMA_ROWS * (HD + 8);
    MmaBackwardTiles t;
    t.Q = carve.bf16s(operand), t.dO = carve.bf16s(operand), t.K = carve.bf16s(operand), t.V = carve.bf16s(operand);
    t.S = carve.floats(FLASH_MMA_ROWS * MMA_SLD), t.dP = carve.floats(FLASH_MMA_ROWS * MMA_SLD);
    t.P = carve.bf16s(FLASH_MMA_ROWS * MMA_PLD), t.dS = carve.bf16s(FLASH_MMA_ROWS * MMA_PLD);
    t.L = carve.floats(FLASH_MMA_ROWS), t.D = carve.floats(FLASH_MMA_ROWS);
    return t;
}

// 64 x HD of src from row t0 into a bf16 (64, HD + 8) tile; rows past `rows` are zeros. q, k,
// v and dout come bf16 (the slot keeps them so) and are copied, 8 values a 16-byte read (HD is
// a multiple of 16, so their rows are 16-byte aligned, and so are the tile's: (HD + 8) bf16s).
template <int HD>
__device__ static void load_tile_bf16(__nv_bfloat16 *tile, FlashRows<__nv_bfloat16> src, int t0, int rows) {
    constexpr int vecs = HD / 8;
    for (int i = threadIdx.x; i < FLASH_MMA_ROWS * vecs; i += blockDim.x) {
        const int r = i / vecs, c = i % vecs;
        uint4 x = {0u, 0u, 0u, 0u};   // the bits of 8 bf16 zeros
        if (r < rows) x = reinterpret_cast<const uint4 *>(src.row(t0 + r))[c];
        *reinterpret_cast<uint4 *>(&tile[r * (HD + 8) + 8 * c]) = x;
    }
}

// 64 row statistics from stats + t0 (rows past `rows`: 0, so padded rows stay finite).
__device__ static void load_stats(float *dst, const float *stats, int t0, int rows) {
    for (int r = threadIdx.x; r < FLASH_MMA_ROWS; r += blockDim.x) dst[r] = r < rows ? stats[t0 + r] : 0.0f;
}

// out(16, 16) = sum over the depth HD of A's 16 rows against B's 16 rows (both bf16 (rows,
// HD + 8) tiles): A B^T, the scores of query rows against key rows or the like.
template <int HD>
__device__ static void mma_rows_dot(MmaAcc &out, const __nv_bfloat16 *A, const __nv_bfloat16 *B) {
    wmma::fill_fragment(out, 0.0f);
    for (int c = 0; c < HD / 16; c++) {
        MmaA a;
        MmaBt b;
        wmma::load_matrix_sync(a, A + 16 * c, HD + 8);
        wmma::load_matrix_sync(b, B + 16 * c, HD + 8);
        wmma::mma_sync(out, a, b, out);
    }
}

// The warp's 16 rows of a (64, 64) fp32 tile: S[16 w + i][16 j + c] = (A_w B_j^T) for the 4
// column blocks j: A's rows 16 w.., B's rows 16 j.. (bf16 operand tiles).
template <int HD>
__device__ static void mma_scores(float *S, const __nv_bfloat16 *A, const __nv_bfloat16 *B, int warp) {
    for (int j = 0; j < MMA_WARPS; j++) {
        MmaAcc s;
        mma_rows_dot<HD>(s, A + 16 * warp * (HD + 8), B + 16 * j * (HD + 8));
        wmma::store_matrix_sync(S + 16 * warp * MMA_SLD + 16 * j, s, MMA_SLD, wmma::mem_row_major);
    }
}

// acc[c] += P_w X[:, 16 c ..] for every column block c: the warp's 16 rows of a bf16 (64, 72)
// probability-like tile against the 64 rows of a bf16 operand tile X, 16 of its rows a step.
template <int HD>
__device__ static void mma_accumulate(MmaAcc *acc, const __nv_bfloat16 *P, const __nv_bfloat16 *X, int warp) {
    for (int c = 0; c < HD / 16; c++)
        for (int j = 0; j < MMA_WARPS; j++) {
            MmaA a;
            MmaB b;
            wmma::load_matrix_sync(a, P + 16 * warp * MMA_PLD + 16 * j, MMA_PLD);
            wmma::load_matrix_sync(b, X + 16 * j * (HD + 8) + 16 * c, HD + 8);
            wmma::mma_sync(acc[c], a, b, acc[c]);
        }
}

// Writes the warp's 16 x HD accumulator rows out, 64 columns at a time through its rows of the
// fp32 tile S: emit(row in the tile, column, value) for every element.
template <int HD, typename Emit>
__device__ static void mma_emit_rows(const MmaAcc *acc, float *S, int warp, Emit emit) {
    const int lane = threadIdx.x % 32;
    for (int c0 = 0; c0 < HD / 16; c0 += 4) {
        const int blocks = min(4, HD / 16 - c0);
        __syncwarp();   // the warp's earlier readers of S are done
        for (int c = 0; c < blocks; c++)
            wmma::store_matrix_sync(S + 16 * warp * MMA_SLD + 16 * c, acc[c0 + c], MMA_SLD, wmma::mem_row_major);
        __syncwarp();
        for (int i = lane; i < 16 * 16 * blocks; i += 32) {
            const int r = 16 * warp + i / (16 * blocks), col = i % (16 * blocks);
            emit(r, 16 * c0 + col, S[r * MMA_SLD + col]);
        }
    }
}

// The block's table of each accumulator element's row (within its 16 x 16 tile): `rows` is
// loaded from a tile whose elements are their row numbers, so rows.x[e] is element e's row in
// the hardware's layout. Block-wide (a __syncthreads inside).
__device__ static void accumulator_rows(MmaAcc &rows, float *table) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) table[i] = (float)(i / 16);
    __syncthreads();
    wmma::load_matrix_sync(rows, table, 16, wmma::mem_row_major);
}

template <int HD>
__global__ void flash_mma_forward_kernel(__nv_bfloat16 *__restrict__ out, float *__restrict__ lse,
                                         const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                                         const __nv_bfloat16 *__restrict__ v, int T, int NH, int NKV, float scale) {
    DYNAMIC_SHARED_FLOATS(sh);
    MmaCarve carve = {sh, 0};
    const size_t operand = (size_t)FLASH_MMA_ROWS * (HD + 8);
    __nv_bfloat16 *Qs = carve.bf16s(operand), *Ks = carve.bf16s(operand), *Vs = carve.bf16s(operand);
    float *S = carve.floats(FLASH_MMA_ROWS * MMA_SLD);
    __nv_bfloat16 *P = carve.bf16s(FLASH_MMA_ROWS * MMA_PLD);
    float *table = carve.floats(256), *m = carve.floats(FLASH_MMA_ROWS), *l = carve.floats(FLASH_MMA_ROWS);
    float *alpha = carve.floats(FLASH_MMA_ROWS), *half_max = carve.floats(2 * FLASH_MMA_ROWS);
    float *half_sum = carve.floats(2 * FLASH_MMA_ROWS);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int r = 16 * warp + lane / 2, half = lane % 2, c0 = FLASH_MMA_HALF * half;   // this lane's half row
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, kvh = h / (NH / NKV);
    const int q0 = heavy_first_tile() * FLASH_MMA_ROWS, nq = min(FLASH_MMA_ROWS, T - q0);
    const FlashRows<__nv_bfloat16> kr = head_rows(k, b, kvh, T, NKV, HD), vr = head_rows(v, b, kvh, T, NKV, HD);
    load_tile_bf16<HD>(Qs, head_rows(q, b, h, T, NH, HD), q0, nq);
    for (int i = threadIdx.x; i < FLASH_MMA_ROWS; i += blockDim.x) m[i] = -INFINITY, l[i] = 0.0f;
    MmaAcc rows, acc[HD / 16];
    accumulator_rows(rows, table);
    for (int c = 0; c < HD / 16; c++) wmma::fill_fragment(acc[c], 0.0f);
    const int key_tiles = (q0 + nq - 1) / FLASH_MMA_ROWS + 1;   // causal: none past the last query
    for (int kt = 0; kt < key_tiles; kt++) {
        const int k0 = kt * FLASH_MMA_ROWS, nk = min(FLASH_MMA_ROWS, T - k0);
        __syncthreads();   // the previous tile's readers are done
        load_tile_bf16<HD>(Ks, kr, k0, nk);
        load_tile_bf16<HD>(Vs, vr, k0, nk);
        __syncthreads();
        mma_scores<HD>(S, Qs, Ks, warp);
        __syncwarp();
        // The online softmax of row r, this lane's half: scaled and masked scores, the half's max;
        // then the row's max (both halves), its probabilities rounded to bf16, the half's sum of
        // those; then one lane updates the row's m, l and alpha. Keys past T are above the
        // diagonal of every row before T.
        float *s = &S[r * MMA_SLD + c0];
        for (int c = 0; c < FLASH_MMA_HALF; c++) s[c] = k0 + c0 + c <= q0 + r ? scale * s[c] : -INFINITY;
        half_max[2 * r + half] = flash_row_max(-INFINITY, s, FLASH_MMA_HALF);
        __syncwarp();
        const float m_new = fmaxf(fmaxf(m[r], half_max[2 * r]), half_max[2 * r + 1]);
        for (int c = 0; c < FLASH_MMA_HALF; c++) {
            const __nv_bfloat16 p = __float2bfloat16_rn(flash_exp(s[c], m_new));
            P[r * MMA_PLD + c0 + c] = p;
            s[c] = __bfloat162float(p);
        }
        half_sum[2 * r + half] = flash_row_sum(s, FLASH_MMA_HALF);
        __syncwarp();
        if (half == 0) {
            alpha[r] = flash_rescale(m[r], m_new);
            if (m_new != -INFINITY) {
                l[r] = l[r] * alpha[r] + (half_sum[2 * r] + half_sum[2 * r + 1]);
                m[r] = m_new;
            }
        }
        __syncwarp();
        for (int c = 0; c < HD / 16; c++)   // acc = alpha acc, then + P v
            for (int e = 0; e < acc[c].num_elements; e++) acc[c].x[e] *= alpha[16 * warp + (int)rows.x[e]];
        mma_accumulate<HD>(acc, P, Vs, warp);
    }
    __nv_bfloat16 *ob = out + ((size_t)b * T * NH + h) * HD;   // bf16: the o projection's operand
    mma_emit_rows<HD>(acc, S, warp, [&](int row, int d, float x) {
        if (row < nq) flash_store(&ob[(size_t)(q0 + row) * NH * HD + d], x / l[row]);
    });
    if (half == 0 && r < nq) lse[(size_t)bh * T + q0 + r] = flash_logsumexp(m[r], l[r]);
}

// dq = scale dS k: block (query tile, b * NH + h), warp w its 16 query rows, key tiles as
// forward. Per key tile: S = q k^T and dP = dout v^T (tensor cores), then per element p =
// flash_prob(scale s or -inf, L), dS = flash_dscore(p, dp, D) rounded to bf16, then dS k.
template <int HD>
__global__ void flash_mma_dq_kernel(float *__restrict__ dq, const __nv_bfloat16 *__restrict__ dout,
                                    const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                                    const __nv_bfloat16 *__restrict__ v, const float *__restrict__ lse, const float *__restrict__ dsum, int T, int NH,
                                    int NKV, float scale) {
    DYNAMIC_SHARED_FLOATS(sh);
    const MmaBackwardTiles t = mma_backward_tiles<HD>(sh);   // (P unused here)
    __nv_bfloat16 *Qs = t.Q, *dOs = t.dO, *Ks = t.K, *Vs = t.V, *dS = t.dS;
    float *S = t.S, *dP = t.dP, *Ls = t.L, *Ds = t.D;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int r = 16 * warp + lane / 2, c0 = FLASH_MMA_HALF * (lane % 2);
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, kvh = h / (NH / NKV);
    const int q0 = heavy_first_tile() * FLASH_MMA_ROWS, nq = min(FLASH_MMA_ROWS, T - q0);
    load_tile_bf16<HD>(Qs, head_rows(q, b, h, T, NH, HD), q0, nq);
    load_tile_bf16<HD>(dOs, head_rows(dout, b, h, T, NH, HD), q0, nq);
    load_stats(Ls, lse + (size_t)bh * T, q0, nq);
    load_stats(Ds, dsum + (size_t)bh * T, q0, nq);
    const FlashRows<__nv_bfloat16> kr = head_rows(k, b, kvh, T, NKV, HD), vr = head_rows(v, b, kvh, T, NKV, HD);
    MmaAcc acc[HD / 16];
    for (int c = 0; c < HD / 16; c++) wmma::fill_fragment(acc[c], 0.0f);
    const int key_tiles = (q0 + nq - 1) / FLASH_MMA_ROWS + 1;
    for (int kt = 0; kt < key_tiles; kt++) {
        const int k0 = kt * FLASH_MMA_ROWS, nk = min(FLASH_MMA_ROWS, T - k0);
        __syncthreads();
        load_tile_bf16<HD>(Ks, kr, k0, nk);
        load_tile_bf16<HD>(Vs, vr, k0, nk);
        __syncthreads();
        mma_scores<HD>(S, Qs, Ks, warp);
        mma_scores<HD>(dP, dOs, Vs, warp);
        __syncwarp();
        for (int c = c0; c < c0 + FLASH_MMA_HALF; c++) {
            const float p = flash_prob(k0 + c <= q0 + r ? scale * S[r * MMA_SLD + c] : -INFINITY, Ls[r]);
            dS[r * MMA_PLD + c] = __float2bfloat16_rn(flash_dscore(p, dP[r * MMA_SLD + c], Ds[r]));
        }
        __syncwarp();
        mma_accumulate<HD>(acc, dS, Ks, warp);
    }
    float *db = dq + ((size_t)b * T * NH + h) * HD;
    mma_emit_rows<HD>(acc, S, warp, [&](int row, int d, float x) {
        if (row < nq) db[(size_t)(q0 + row) * NH * HD + d] = flash_written(scale * x);
    });
}

// Block (key tile, b * NH + h), warp w its 16 key rows: query head h's share of dk and dv over
// the query tiles from the diagonal on, as flash_dkdv_kernel (the same g = 1 / g > 1 split and
// flash_group_sum_kernel after it). Per query tile: S^T = k q^T and dP^T = v dout^T, then per
// element p (masked also past T: query rows there are padding), P^T and dS^T rounded to bf16,
// then dv += P^T dout and dk += dS^T q.
template <int HD>
__global__ void flash_mma_dkdv_kernel(float *__restrict__ dk, FlashDv dv, float *__restrict__ dk_part,
                                      float *__restrict__ dv_part, const __nv_bfloat16 *__restrict__ dout,
                                      const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                                      const __nv_bfloat16 *__restrict__ v, const float *__restrict__ lse,
                                      const float *__restrict__ dsum, int T, int NH, int NKV, float scale) {
    DYNAMIC_SHARED_FLOATS(sh);
    const MmaBackwardTiles t = mma_backward_tiles<HD>(sh);   // S, dP, P, dS as their transposes here
    __nv_bfloat16 *Qs = t.Q, *dOs = t.dO, *Ks = t.K, *Vs = t.V, *Pt = t.P, *dSt = t.dS;
    float *St = t.S, *dPt = t.dP, *Ls = t.L, *Ds = t.D;
    const int g = NH / NKV, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int r = 16 * warp + lane / 2, c0 = FLASH_MMA_HALF * (lane % 2);   // key row, query half
    const int b = blockIdx.y / NH, h = blockIdx.y % NH, kvh = h / g;
    const size_t bh = blockIdx.y;
    const int k0 = blockIdx.x * FLASH_MMA_ROWS, nk = min(FLASH_MMA_ROWS, T - k0);
    load_tile_bf16<HD>(Ks, head_rows(k, b, kvh, T, NKV, HD), k0, nk);
    load_tile_bf16<HD>(Vs, head_rows(v, b, kvh, T, NKV, HD), k0, nk);
    const FlashRows<__nv_bfloat16> qr = head_rows(q, b, h, T, NH, HD), orr = head_rows(dout, b, h, T, NH, HD);
    MmaAcc dk_acc[HD / 16], dv_acc[HD / 16];
    for (int c = 0; c < HD / 16; c++) wmma::fill_fragment(dk_acc[c], 0.0f), wmma::fill_fragment(dv_acc[c], 0.0f);
    for (int qt = k0 / FLASH_MMA_ROWS; qt < flash_tiles(T, FLASH_MMA_ROWS); qt++) {
        const int q0 = qt * FLASH_MMA_ROWS, nq = min(FLASH_MMA_ROWS, T - q0);
        __syncthreads();
        load_tile_bf16<HD>(Qs, qr, q0, nq);
        load_tile_bf16<HD>(dOs, orr, q0, nq);
        load_stats(Ls, lse + bh * T, q0, nq);
        load_stats(Ds, dsum + bh * T, q0, nq);
        __syncthreads();
        mma_scores<HD>(St, Ks, Qs, warp);
        mma_scores<HD>(dPt, Vs, dOs, warp);
        __syncwarp();
        for (int c = c0; c < c0 + FLASH_MMA_HALF; c++) {
            const bool seen = c < nq && k0 + r <= q0 + c;
            const float p = flash_prob(seen ? scale * St[r * MMA_SLD + c] : -INFINITY, Ls[c]);
            Pt[r * MMA_PLD + c] = __float2bfloat16_rn(p);
            dSt[r * MMA_PLD + c] = __float2bfloat16_rn(flash_dscore(p, dPt[r * MMA_SLD + c], Ds[c]));
        }
        __syncwarp();
        mma_accumulate<HD>(dv_acc, Pt, dOs, warp);
        mma_accumulate<HD>(dk_acc, dSt, Qs, warp);
    }
    if (g == 1) {
        float *dkb = dk + ((size_t)b * T * NKV + kvh) * HD;
        mma_emit_rows<HD>(dk_acc, St, warp, [&](int row, int d, float x) {
            if (row < nk) dkb[(size_t)(k0 + row) * NKV * HD + d] = flash_written(scale * x);
        });
        mma_emit_rows<HD>(dv_acc, St, warp, [&](int row, int d, float x) {
            if (row < nk) dv.put((size_t)b * T + k0 + row, (size_t)kvh * HD + d, x);
        });
        return;
    }
    float *dkp = dk_part + ((size_t)b * T * NH + h) * HD, *dvp = dv_part + ((size_t)b * T * NH + h) * HD;
    mma_emit_rows<HD>(dk_acc, St, warp, [&](int row, int d, float x) {
        if (row < nk) dkp[(size_t)(k0 + row) * NH * HD + d] = x;
    });
    mma_emit_rows<HD>(dv_acc, St, warp, [&](int row, int d, float x) {
        if (row < nk) dvp[(size_t)(k0 + row) * NH * HD + d] = x;
    });
}
#endif
