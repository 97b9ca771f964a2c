// kernels/cuda/flash_mma_kernels.cuh: flash attention on tensor cores, the bf16 mode's kernels
// (kernels/cuda/flash_attention.cu launches them; flash_kernels.cuh holds the fp32 ones, whose
// walk over tiles these repeat). Every product (q k^T, P v, dout v^T, dS k, k q^T, v dout^T,
// P^T dout, dS^T q) runs as mma.sync m16n8k16 with bf16 operands and fp32 accumulators
// (mma_sync.cuh), FlashAttention-2's way: the scores stay in their accumulators, the softmax
// runs on them in registers (each element's row and column known from the published layout),
// and the rounded probabilities and score gradients become the next product's A operand
// without touching shared memory. flash_tile.h ("Tensor-core tiles") says what is rounded to
// bf16 and in what order each sum is taken; tests/gpu_emu/flash_emu.c computes the same numbers
// element by element, and tests/gpu_emu/test_flash_simt.cc runs this source on CPU threads
// (simt.h emulates mma.sync and ldmatrix on those layouts) and holds it bitwise to that.
//
// A block is 4 warps; a tile is 64 rows, warp w owning rows 16 w .. 16 w + 15 (query rows in
// forward and dq, key rows in dk/dv), so each warp's products, softmax rows and accumulators
// are its own; the block syncs only around tile loads. Shared memory holds only the bf16
// (64, HD + 8) operand tiles (the pad puts ldmatrix's 8 rows of 16 bytes in 8 different bank
// groups) and, for dk/dv, the query tile's row statistics. Lane 4 g + t holds rows g and g + 8
// of its warp's 16 and columns 2t, 2t + 1 of every 8: a score row's 64 columns are its quad's 4
// lanes' 16 each, and the row's max and sum meet over the quad by two shuffles. Rows past T
// load as zeros and their probabilities are masked to 0, so they add exact zeros.
#ifndef PPTRAIN_KERNELS_CUDA_FLASH_MMA_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_FLASH_MMA_KERNELS_CUH
#include "kernels/cuda/flash_kernels.cuh"
#include "kernels/cuda/mma_sync.cuh"

#define MMA_WARPS 4
#define MMA_THREADS (32 * MMA_WARPS)
#define MMA_FULL 0xffffffffu
static_assert(FLASH_MMA_ROWS == 16 * MMA_WARPS && FLASH_MMA_ROWS == 64,
              "a tile is a warp's 16 rows each, 8 column blocks");

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

// Shared memory, carved in 32-byte pieces from the block's floats (ldmatrix reads 16-byte rows).
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
static constexpr size_t mma_pieces(size_t floats) { return (floats + 7) / 8 * 8; }
static constexpr size_t mma_operand_floats(int HD) { return mma_pieces((size_t)FLASH_MMA_ROWS * (HD + 8) / 2); }
// Every kernel keeps its own tile(s) and walks the others tile by tile, double-buffered: while
// it computes on one buffer, cp.async fills the other with the next tile (mma_walk_tiles).
static constexpr size_t mma_forward_smem(int HD) { return 5 * mma_operand_floats(HD); }   // Q; K V twice
static constexpr size_t mma_backward_smem(int HD) {   // mma_backward_tiles: 2 own, 2 x 2 walked, 2 x (L, D)
    return 6 * mma_operand_floats(HD) + mma_pieces(4 * FLASH_MMA_ROWS);
}

// The backward kernels' shared memory, one layout for both (mma_backward_smem counts it): the
// block's own two tiles (q and dout for dq; k and v for dk/dv), the walked two (k and v; q and
// dout) in 2 buffers, and dk/dv's walked query tile's statistics L and D in 2 buffers.
struct MmaBackwardTiles {
    __nv_bfloat16 *own[2], *walked;
    float *stats;
    size_t operand;   // a tile's elements
    // Walked tile `which` (0: k or q; 1: v or dout) in buffer `buffer`.
    __device__ __nv_bfloat16 *walk(int buffer, int which) const {
        return walked + (size_t)(2 * buffer + which) * operand;
    }
    __device__ float *L(int buffer) const { return stats + 2 * FLASH_MMA_ROWS * buffer; }
    __device__ float *D(int buffer) const { return L(buffer) + FLASH_MMA_ROWS; }
};
template <int HD>
__device__ static MmaBackwardTiles mma_backward_tiles(float *sh) {
    MmaCarve carve = {sh, 0};
    MmaBackwardTiles t;
    t.operand = (size_t)FLASH_MMA_ROWS * (HD + 8);   // 64 (HD + 8) bf16s: a multiple of 16 bytes
    t.own[0] = carve.bf16s(t.operand), t.own[1] = carve.bf16s(t.operand);
    t.walked = carve.bf16s(4 * t.operand);
    t.stats = carve.floats(4 * FLASH_MMA_ROWS);
    return t;
}

// 64 x HD of src from row t0 into a bf16 (64, HD + 8) tile, by cp.async (the rows in flight in
// the group the caller's next cp_async_commit closes); rows past `rows` are zeroed at once.
// q, k, v and dout come bf16 (the slot keeps them so), 8 values a 16-byte copy (HD is a
// multiple of 16, so their rows are 16-byte aligned, and so are the tile's: (HD + 8) bf16s).
// Each of the block's MMA_THREADS threads (every mma kernel runs with that many) takes HD / 16
// of the tile's 16-byte copies, unrolled. Where a row's copies divide the block (HD 16, 32, 64,
// 128), a thread keeps one column c of rows r0, r0 + R, ... (R = MMA_THREADS / (HD / 8) rows a
// pass), their addresses one 64-bit product from the tile's first row: written as src.row(t0 +
// r) for each, the addresses took about a sixth of the tile loop's instructions. Otherwise
// (HD 48, 80, 96, 112) each copy finds its row and column.
template <int HD>
__device__ static void load_tile_async(__nv_bfloat16 *tile, FlashRows<__nv_bfloat16> src, int t0, int rows) {
    constexpr int vecs = HD / 8, copies = FLASH_MMA_ROWS * vecs / MMA_THREADS;
    static_assert(FLASH_MMA_ROWS * vecs % MMA_THREADS == 0, "every thread takes as many copies");
    if constexpr (MMA_THREADS % vecs == 0) {
        constexpr int R = MMA_THREADS / vecs;
        const int r0 = (int)threadIdx.x / vecs, c = (int)threadIdx.x % vecs;
        const __nv_bfloat16 *from = src.row(t0 + r0) + 8 * c;
        const size_t pass = (size_t)R * src.ld;   // elements between a thread's rows
        __nv_bfloat16 *to = tile + r0 * (HD + 8) + 8 * c;
#ifdef FLASH_MMA_SASS_FULL_TILES   // bench/sass_loops.py: the code a full tile runs, alone
        rows = FLASH_MMA_ROWS;
#endif
        if (rows == FLASH_MMA_ROWS) {   // every tile but a ragged last one: no row to test
            for (int k = 0; k < copies; k++) cp_async16(to + k * R * (HD + 8), from + k * pass);
            return;
        }
        for (int k = 0; k < copies; k++) {
            if (r0 + k * R < rows) cp_async16(to + k * R * (HD + 8), from + k * pass);
            else *reinterpret_cast<uint4 *>(to + k * R * (HD + 8)) = uint4{0u, 0u, 0u, 0u};   // 8 bf16 zeros
        }
    } else {
        for (int k = 0; k < copies; k++) {
            const int i = (int)threadIdx.x + k * MMA_THREADS, r = i / vecs, c = i % vecs;
            __nv_bfloat16 *dst = &tile[r * (HD + 8) + 8 * c];
            if (r < rows) cp_async16(dst, reinterpret_cast<const uint4 *>(src.row(t0 + r)) + c);
            else *reinterpret_cast<uint4 *>(dst) = uint4{0u, 0u, 0u, 0u};   // the bits of 8 bf16 zeros
        }
    }
}

// Whether a tile is on the diagonal, at compile time (mma_walk_tiles passes it to compute).
template <bool B>
struct MmaOnDiagonal {
    static constexpr bool value = B;
};

// The walk over tiles first .. last - 1, double-buffered: load(tile, buffer) starts a tile's
// copies (load_tile_async, and any plain stores), compute(tile, buffer, on_diagonal) uses it.
// The next tile's copies are in flight while a tile is computed on; a tile is waited for
// (cp_async_wait<1>: all but the newest group, the next tile's) and the block syncs before it is
// read, and the block syncs again after, before the next iteration refills that buffer. Copies
// the caller started before (its own tiles) and did not commit go in the first tile's group.
// The tile `diagonal` (the block's own position: the first tile, or the last) gets
// on_diagonal = MmaOnDiagonal<true>() and every other MmaOnDiagonal<false>(), so compute is
// built twice and the loop holds only the second: tiles off the diagonal run without the causal
// mask's compares and selects and without the branches around column blocks that
// mma_diagonal_blocks may skip. Off the diagonal the mask keeps every element and no block is
// skipped, so both forms compute the same bits. start() runs once the first tile's copies are
// in flight, before the first wait: work of the block's own (the dq kernel's D) that overlaps
// them, and whose shared-memory stores the first tile's __syncthreads publishes.
template <typename Load, typename Compute, typename Start>
__device__ __forceinline__ static void mma_walk_tiles(int first, int last, int diagonal, Load load, Compute compute,
                                                      Start start) {
    load(first, 0);
    cp_async_commit();
    start();
    const auto step = [&](int tile, auto on_diagonal) {
        const int buffer = (tile - first) & 1;
        if (tile + 1 < last) load(tile + 1, buffer ^ 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        compute(tile, buffer, on_diagonal);
        __syncthreads();
    };
    int tile = first;
    if (tile < last && tile == diagonal) step(tile++, MmaOnDiagonal<true>());   // dk/dv: the first
    for (; tile < last && tile != diagonal; tile++) step(tile, MmaOnDiagonal<false>());
    if (tile < last && tile == diagonal) step(tile, MmaOnDiagonal<true>());     // forward, dq: the last
}
template <typename Load, typename Compute>
__device__ __forceinline__ static void mma_walk_tiles(int first, int last, int diagonal, Load load, Compute compute) {
    mma_walk_tiles(first, last, diagonal, load, compute, [] {});
}

// The kernels' scale and the base-2 softmax's (flash_mma_log2_scale), passed as a kernel
// parameter, so both are read from the constant bank where used: worked out in the kernel, the
// second took a register, and the dk/dv kernel at head dim 64 spilled.
struct MmaScales {
    float scale, c2;
};
static inline MmaScales mma_scales(float scale) { return MmaScales{scale, flash_mma_log2_scale(scale)}; }

// 64 row statistics from stats + t0 (rows past `rows`: 0), a thread a row.
__device__ static void load_stats(float *dst, const float *stats, int t0, int rows) {
    static_assert(FLASH_MMA_ROWS <= MMA_THREADS, "a thread a row");
    const int r = threadIdx.x;
    if (r < FLASH_MMA_ROWS) dst[r] = r < rows ? stats[t0 + r] : 0.0f;
}
// The same for the logsumexps, each as the base-2 softmax takes it (flash_mma_lse2).
__device__ static void load_lse2(float *dst, const float *lse, int t0, int rows) {
    const int r = threadIdx.x;
    if (r < FLASH_MMA_ROWS) dst[r] = r < rows ? flash_mma_lse2(lse[t0 + r]) : 0.0f;
}

// This lane's place in its warp's accumulators: element e of column block j is row
// r0 + g + 8 (e / 2), column 8 j + 2 t + e % 2.
struct MmaLane {
    int r0, g, t;
    __device__ MmaLane() : r0(16 * (int)(threadIdx.x / 32)), g((int)(threadIdx.x % 32) / 4), t((int)threadIdx.x % 4) {}
    __device__ int row(int e) const { return r0 + g + 8 * (e / 2); }
    __device__ int col(int j, int e) const { return 8 * j + 2 * t + e % 2; }
};

// acc[j] (j < N / 8) = rows r0 .. r0 + 15 of A against rows n0 + 8 j .. n0 + 8 j + 7 of Bt, both
// bf16 (64, HD + 8) tiles, over the depth HD 16 at a time in order: (16, N) scores A Bt^T.
// Only column blocks [jb, je) are computed (even bounds), the rest left 0: on a diagonal tile a
// warp's rows see some blocks only masked (mma_diagonal_blocks).
template <int HD, int N>
__device__ static void mma_scores(float (*acc)[4], const __nv_bfloat16 *A, int r0, const __nv_bfloat16 *Bt, int n0,
                                  int jb = 0, int je = N / 8) {
    for (int j = 0; j < N / 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    for (int c = 0; c < HD; c += 16) {
        uint32_t a[4];
        ldmatrix_x4(a, ldmatrix_block_row(A, HD + 8, r0, c));
        for (int j = 0; j < N / 8; j += 2) {   // unrolled: acc's indices stay constants (registers)
            if (j < jb || j >= je) continue;
            uint32_t b[4];
            ldmatrix_x4(b, ldmatrix_bt_row(Bt, HD + 8, n0 + 8 * j, c));
            mma_bf16_16816(acc[j], a, b[0], b[1], acc[j]);
            mma_bf16_16816(acc[j + 1], a, b[2], b[3], acc[j + 1]);
        }
    }
}

// acc[c] (c < HD / 8) += p X: p the warp's (16, N) probabilities or score gradients as bf16 A
// operands (pa[k]: column blocks 2k, 2k + 1, mma_a_slot), X's rows x0 .. x0 + N - 1 (a bf16
// (64, HD + 8) tile) the depth, 16 of it a step in order. Column blocks of p outside [kb, ke)
// (even bounds) must be all zeros, and are skipped: their steps would add +0 (a step's 16
// products sum from +0), which changes no accumulator. The kernels round and pack p where they
// make it (one conversion a pair, where rounding each to a float and packing again took five).
template <int HD, int N>
__device__ static void mma_accumulate(float (*acc)[4], const uint32_t (*pa)[4], const __nv_bfloat16 *X, int x0,
                                      int kb = 0, int ke = N / 8) {
    for (int k = 0; k < N / 8; k += 2) {   // unrolled: pa's indices stay constants (registers)
        if (k < kb || k >= ke) continue;
        for (int c = 0; c < HD / 8; c += 2) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, ldmatrix_block_row(X, HD + 8, x0 + 8 * k, 8 * c));
            mma_bf16_16816(acc[c], pa[k / 2], b[0], b[1], acc[c]);
            mma_bf16_16816(acc[c + 1], pa[k / 2], b[2], b[3], acc[c + 1]);
        }
    }
}

// l += the row sums of the (16, N) probabilities in pa (mma_a_slot's operands), by one mma a
// depth step against a B operand of ones: l, a 16 x 8 accumulator, gets each row's sum in all
// 8 columns, so a lane holds its rows' sums (l[0] row g, l[2] row g + 8) with no shuffle, and
// the sum is of the rounded probabilities P v takes, summed as the tensor core sums them: 16 at a
// time, each 16 added to the running sum (flash_mma_dot's order on the emulator). Summed on
// the FP32 pipe instead, a forward tile took 64 more instructions (unpacking the bf16 pairs,
// 32 adds, the quad's shuffles) where this takes 4 HMMAs. Only depth blocks [kb, ke) are added,
// as mma_accumulate: the others' probabilities are zeros.
template <int N>
__device__ static void mma_row_sums(float l[4], const uint32_t (*pa)[4], int kb = 0, int ke = N / 8) {
    constexpr uint32_t ones = 0x3f803f80u;   // two bf16 1.0s
    for (int k = 0; k < N / 8; k += 2) {
        if (k < kb || k >= ke) continue;
        mma_bf16_16816(l, pa[k / 2], ones, ones, l);
    }
}

// On a diagonal tile (query tile = key tile, both 64 rows from the same position), the column
// blocks of 8 a warp's 16 rows see any unmasked element in. Queries against keys (forward,
// dq): key blocks up to the warp's last row, [0, 2 w + 2). Keys against queries (dk/dv): query
// blocks from the warp's first row, [2 w, 8). Every other block's elements are masked: their
// probabilities and score gradients are exact zeros, so neither their scores nor their
// products are computed. Off the diagonal every block is seen: [0, 8).
struct MmaBlocks {
    int begin, end;
};
template <bool Diagonal>
__device__ static MmaBlocks mma_diagonal_blocks(bool keys_rows, int r0) {
    if (!Diagonal) return MmaBlocks{0, 8};
    return keys_rows ? MmaBlocks{r0 / 8, 8} : MmaBlocks{0, r0 / 8 + 2};
}

// emit(row in the tile, column, value) for every element of this lane's (16, HD) accumulators.
template <int HD, typename Emit>
__device__ static void mma_emit(const float (*acc)[4], const MmaLane &ln, Emit emit) {
    for (int c = 0; c < HD / 8; c++)
        for (int e = 0; e < 4; e++) emit(ln.row(e), ln.col(c, e), acc[c][e]);
}

// The warp's (16, HD) gradient rows x = scale * acc of tile rows from t0 (positions t0 + row of
// sequence b, rows past `rows` dropped) through RoPE's backward: a lane holds columns i and
// i + HD / 2 of its rows in accumulator blocks c and c + HD / 16, so each rotation pair is one
// lane's, and the fp32 gradient never goes to memory.
template <int HD>
__device__ static void mma_emit_rope(const float (*acc)[4], const MmaLane &ln, float scale, const FlashRopeOut &rope,
                                     int b, int T, int t0, int rows, int head) {
    constexpr int half = HD / 2, hc = HD / 16;
    for (int c = 0; c < hc; c++)
        for (int e = 0; e < 4; e++) {
            const int row = ln.row(e), i = ln.col(c, e);
            if (row >= rows) continue;
            const size_t tab = (size_t)(t0 + row) * half + i;
            const RopePair g = rope_pair_backward(flash_written(scale * acc[c][e]),
                                                  flash_written(scale * acc[c + hc][e]), rope.cos_tab[tab],
                                                  rope.sin_tab[tab]);
            __nv_bfloat16 *x = rope.dst + ((size_t)b * T + t0 + row) * rope.ld + (size_t)head * HD;
            x[i] = __float2bfloat16_rn(g.lo);
            x[i + half] = __float2bfloat16_rn(g.hi);
        }
}

// Blocks an SM should hold at once, for __launch_bounds__: up to head dim 64 the kernels need
// about 128 registers a thread, and 4 blocks of 128 threads fit 64 K registers at 128 each;
// ptxas would otherwise take 129 and leave room for 3. Above 64, whatever ptxas needs.
#define MMA_MIN_BLOCKS(HD) ((HD) <= 64 ? 4 : 1)
// ... and their shared memory must let them: an H100 SM's 228 KiB, less the 1 KiB the runtime
// keeps a block, holds 4 blocks of each kernel at head dim 64 (with a tile more, the backward would not).
static_assert(4 * (mma_forward_smem(64) * sizeof(float) + 1024) <= 228 * 1024 &&
                  4 * (mma_backward_smem(64) * sizeof(float) + 1024) <= 228 * 1024,
              "4 blocks of each tensor-core attention kernel fit an H100 SM at head dim 64");

template <int HD>
__global__ void __launch_bounds__(MMA_THREADS, MMA_MIN_BLOCKS(HD))
flash_mma_forward_kernel(__nv_bfloat16 *__restrict__ out, float *__restrict__ lse,
                         const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                         const __nv_bfloat16 *__restrict__ v, int T, int NH, int NKV, MmaScales sc) {
    DYNAMIC_SHARED_FLOATS(sh);
    MmaCarve carve = {sh, 0};
    const size_t operand = (size_t)FLASH_MMA_ROWS * (HD + 8);
    __nv_bfloat16 *Qs = carve.bf16s(operand), *KVs = carve.bf16s(4 * operand);   // K, V in 2 buffers
    const MmaLane ln;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, kvh = h / (NH / NKV);
    const int q0 = heavy_first_tile() * FLASH_MMA_ROWS, nq = min(FLASH_MMA_ROWS, T - q0);
    const FlashRows<__nv_bfloat16> kr = head_rows(k, b, kvh, T, NKV, HD), vr = head_rows(v, b, kvh, T, NKV, HD);
    load_tile_async<HD>(Qs, head_rows(q, b, h, T, NH, HD), q0, nq);
    float m[2] = {-INFINITY, -INFINITY};   // rows g and g + 8: the quad's copies agree
    float l[4] = {0.0f, 0.0f, 0.0f, 0.0f};   // their sums, l[0] and l[2] (mma_row_sums: columns alike)
    float acc[HD / 8][4];
    for (int c = 0; c < HD / 8; c++) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.0f;
    const int key_tiles = (q0 + nq - 1) / FLASH_MMA_ROWS + 1;   // causal: none past the last query
    const auto load = [&](int kt, int buffer) {
        const int k0 = kt * FLASH_MMA_ROWS;
        load_tile_async<HD>(KVs + 2 * buffer * operand, kr, k0, min(FLASH_MMA_ROWS, T - k0));
        load_tile_async<HD>(KVs + (2 * buffer + 1) * operand, vr, k0, min(FLASH_MMA_ROWS, T - k0));
    };
    mma_walk_tiles(0, key_tiles, q0 / FLASH_MMA_ROWS, load, [&](int kt, int buffer, auto on_diagonal) {
        constexpr bool diagonal = decltype(on_diagonal)::value;
        const int k0 = kt * FLASH_MMA_ROWS;
        const __nv_bfloat16 *Ks = KVs + 2 * buffer * operand, *Vs = Ks + operand;
        float s[8][4];
        uint32_t pa[4][4];   // the probabilities, rounded, as P v's A operands
        const MmaBlocks seen = mma_diagonal_blocks<diagonal>(false, ln.r0);
        mma_scores<HD, 64>(s, Qs, ln.r0, Ks, 0, seen.begin, seen.end);
        // The online softmax of this lane's two rows: masked raw scores and their max over the
        // quad; probabilities 2^(s c - m c) rounded to bf16; then m, and l and acc by alpha; then
        // P v, and l + the rounded probabilities (mma_row_sums). Keys past T are above the
        // diagonal of every row before T. A row that has seen only masked keys (m' = -inf: none
        // does, key 0 is every row's) would keep alpha 1 and add zeros.
        for (int i = 0; i < 2; i++) {
            const int qpos = q0 + ln.row(2 * i);
            float mx = -INFINITY;
            for (int j = 0; j < 8; j++)
                for (int e = 2 * i; e < 2 * i + 2; e++) {
                    if (diagonal) s[j][e] = k0 + ln.col(j, e) <= qpos ? s[j][e] : -INFINITY;
                    mx = fmaxf(mx, s[j][e]);
                }
            mx = fmaxf(mx, __shfl_xor_sync(MMA_FULL, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(MMA_FULL, mx, 2));
            const float m_new = fmaxf(m[i], mx), alpha = flash_mma_rescale(m[i], m_new, sc.c2);
            const float mc = flash_mma_max_c(m_new, sc.c2);
            for (int j = 0; j < 8; j++)
                mma_a_slot(pa, j, i) = pack_bf16x2(flash_mma_exp(s[j][2 * i], mc, sc.c2),
                                                   flash_mma_exp(s[j][2 * i + 1], mc, sc.c2));
            m[i] = m_new;
            l[2 * i] *= alpha, l[2 * i + 1] *= alpha;
            for (int c = 0; c < HD / 8; c++) acc[c][2 * i] *= alpha, acc[c][2 * i + 1] *= alpha;
        }
        mma_accumulate<HD, 64>(acc, pa, Vs, 0, seen.begin, seen.end);
        mma_row_sums<64>(l, pa, seen.begin, seen.end);
    });
    __nv_bfloat16 *ob = out + ((size_t)b * T * NH + h) * HD;   // bf16: the o projection's operand
    for (int c = 0; c < HD / 8; c++)   // (mma_emit's walk, with each element's l by its index)
        for (int e = 0; e < 4; e++)
            if (ln.row(e) < nq)
                flash_store(&ob[(size_t)(q0 + ln.row(e)) * NH * HD + ln.col(c, e)], acc[c][e] / l[e & 2]);
    for (int i = 0; i < 2; i++) {
        const int row = ln.row(2 * i);
        if (ln.t == 0 && row < nq) lse[(size_t)bh * T + q0 + row] = flash_mma_logsumexp(m[i], l[2 * i], sc.scale);
    }
}

// dq = scale dS k: block (query tile, b * NH + h), warp w its 16 query rows, key tiles as
// forward. First D = rowsum(dout * out) of the tile's rows, a thread a row, as
// flash_rowsum_kernel sums it (flash_row_dot16: the same bits), from the rows in global memory
// while the first key tile's copies fly; it goes to the tile's Ds and to dsum, where the dk/dv
// kernel after this one reads it (the pass of its own that D took, 21.8 us a 125m layer on an
// H200, is gone). Per key tile: S = q k^T and dP = dout v^T in accumulators, then per element
// p = flash_mma_prob(s or -inf, L2), dS = flash_dscore(p, dp, D) rounded to bf16, then dS k.
// dq goes to dq in fp32, or with rq.dst through RoPE's backward into the packed gradient.
template <int HD>
__global__ void __launch_bounds__(MMA_THREADS, MMA_MIN_BLOCKS(HD))
flash_mma_dq_kernel(float *__restrict__ dq, float *__restrict__ dsum, const __nv_bfloat16 *__restrict__ dout,
                    const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
                    const __nv_bfloat16 *__restrict__ v, const __nv_bfloat16 *__restrict__ out,
                    const float *__restrict__ lse, int T, int NH, int NKV, MmaScales sc, FlashRopeOut rq) {
    DYNAMIC_SHARED_FLOATS(sh);
    const MmaBackwardTiles t = mma_backward_tiles<HD>(sh);   // L and D: the query tile's own
    const MmaLane ln;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, kvh = h / (NH / NKV);
    const int q0 = heavy_first_tile() * FLASH_MMA_ROWS, nq = min(FLASH_MMA_ROWS, T - q0);
    const __nv_bfloat16 *Qs = t.own[0], *dOs = t.own[1];
    load_tile_async<HD>(t.own[0], head_rows(q, b, h, T, NH, HD), q0, nq);
    load_tile_async<HD>(t.own[1], head_rows(dout, b, h, T, NH, HD), q0, nq);
    float *Ls = t.L(0), *Ds = t.D(0);   // the query tile's statistics
    load_lse2(Ls, lse + (size_t)bh * T, q0, nq);
    const auto rowsum = [&] {   // D of the tile's rows (0 past T), a thread a row
        const int r = threadIdx.x;
        if (r >= FLASH_MMA_ROWS) return;
        float D = 0.0f;
        if (r < nq) {
            const size_t at = ((size_t)b * T * NH + h) * HD + (size_t)(q0 + r) * NH * HD;
            D = flash_row_dot16<__nv_bfloat16>(dout + at, out + at, HD / 8);
            dsum[(size_t)bh * T + q0 + r] = D;
        }
        Ds[r] = D;
    };
    const FlashRows<__nv_bfloat16> kr = head_rows(k, b, kvh, T, NKV, HD), vr = head_rows(v, b, kvh, T, NKV, HD);
    float acc[HD / 8][4];
    for (int c = 0; c < HD / 8; c++) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.0f;
    const int key_tiles = (q0 + nq - 1) / FLASH_MMA_ROWS + 1;
    const auto load = [&](int kt, int buffer) {
        const int k0 = kt * FLASH_MMA_ROWS;
        load_tile_async<HD>(t.walk(buffer, 0), kr, k0, min(FLASH_MMA_ROWS, T - k0));
        load_tile_async<HD>(t.walk(buffer, 1), vr, k0, min(FLASH_MMA_ROWS, T - k0));
    };
    mma_walk_tiles(0, key_tiles, q0 / FLASH_MMA_ROWS, load, [&](int kt, int buffer, auto on_diagonal) {
        constexpr bool diagonal = decltype(on_diagonal)::value;
        const int k0 = kt * FLASH_MMA_ROWS;
        const __nv_bfloat16 *Ks = t.walk(buffer, 0), *Vs = t.walk(buffer, 1);
        float s[8][4], dp[8][4];
        const MmaBlocks seen = mma_diagonal_blocks<diagonal>(false, ln.r0);
        mma_scores<HD, 64>(s, Qs, ln.r0, Ks, 0, seen.begin, seen.end);
        mma_scores<HD, 64>(dp, dOs, ln.r0, Vs, 0, seen.begin, seen.end);
        uint32_t pa[4][4];   // dS rounded, as dS k's A operands
        for (int j = 0; j < 8; j++)
            for (int h = 0; h < 2; h++) {   // rows g + 8 h: elements 2 h, 2 h + 1
                const int row = ln.row(2 * h);
                float ds[2];
                for (int e = 2 * h; e < 2 * h + 2; e++) {
                    const bool unmasked = !diagonal || k0 + ln.col(j, e) <= q0 + row;
                    const float p = flash_mma_prob(unmasked ? s[j][e] : -INFINITY, Ls[row], sc.c2);
                    ds[e - 2 * h] = flash_dscore(p, dp[j][e], Ds[row]);
                }
                mma_a_slot(pa, j, h) = pack_bf16x2(ds[0], ds[1]);
            }
        mma_accumulate<HD, 64>(acc, pa, Ks, 0, seen.begin, seen.end);
    }, rowsum);
    if (rq.dst) {
        mma_emit_rope<HD>(acc, ln, sc.scale, rq, b, T, q0, nq, h);
        return;
    }
    float *db = dq + ((size_t)b * T * NH + h) * HD;
    mma_emit<HD>(acc, ln, [&](int row, int d, float x) {
        if (row < nq) db[(size_t)(q0 + row) * NH * HD + d] = flash_written(sc.scale * x);
    });
}

// Block (key tile, b * NH + h), warp w its 16 key rows: query head h's share of dk and dv over
// the query tiles from the diagonal on, as flash_dkdv_kernel (the same g = 1 / g > 1 split and
// flash_group_sum_kernel after it). Per query tile, in two halves of 32 query columns (so the
// score accumulators take 32 registers, not 64, beside dk's and dv's): S^T = k q^T and dP^T =
// v dout^T, then per element p (query rows past T need no mask: their q and dout rows are
// zeros, so their dP and D are 0, their dS exact zeros, and P dout adds zeros), P^T and
// dS^T rounded to bf16, then dv += P^T dout and dk += dS^T q. The halves keep each sum's order:
// the query tile's 64 rows 16 at a time, in order. Without grouped queries dk goes to dk in
// fp32, or with rk.dst through RoPE's backward into the packed gradient.
template <int HD>
__global__ void __launch_bounds__(MMA_THREADS, MMA_MIN_BLOCKS(HD))
flash_mma_dkdv_kernel(float *__restrict__ dk, FlashDv dv, float *__restrict__ dk_part, float *__restrict__ dv_part,
                      const __nv_bfloat16 *__restrict__ dout, const __nv_bfloat16 *__restrict__ q,
                      const __nv_bfloat16 *__restrict__ k, const __nv_bfloat16 *__restrict__ v,
                      const float *__restrict__ lse, const float *__restrict__ dsum, int T, int NH, int NKV,
                      MmaScales sc, FlashRopeOut rk) {
    DYNAMIC_SHARED_FLOATS(sh);
    const MmaBackwardTiles t = mma_backward_tiles<HD>(sh);
    const MmaLane ln;   // rows: keys; columns: queries
    const int g = NH / NKV, b = blockIdx.y / NH, h = blockIdx.y % NH, kvh = h / g;
    const size_t bh = blockIdx.y;
    const int k0 = blockIdx.x * FLASH_MMA_ROWS, nk = min(FLASH_MMA_ROWS, T - k0);
    const __nv_bfloat16 *Ks = t.own[0], *Vs = t.own[1];
    load_tile_async<HD>(t.own[0], head_rows(k, b, kvh, T, NKV, HD), k0, nk);
    load_tile_async<HD>(t.own[1], head_rows(v, b, kvh, T, NKV, HD), k0, nk);
    const FlashRows<__nv_bfloat16> qr = head_rows(q, b, h, T, NH, HD), orr = head_rows(dout, b, h, T, NH, HD);
    float dk_acc[HD / 8][4], dv_acc[HD / 8][4];
    for (int c = 0; c < HD / 8; c++)
        for (int e = 0; e < 4; e++) dk_acc[c][e] = dv_acc[c][e] = 0.0f;
    const auto load = [&](int qt, int buffer) {
        const int q0 = qt * FLASH_MMA_ROWS, nq = min(FLASH_MMA_ROWS, T - q0);
        load_tile_async<HD>(t.walk(buffer, 0), qr, q0, nq);
        load_tile_async<HD>(t.walk(buffer, 1), orr, q0, nq);
        load_lse2(t.L(buffer), lse + bh * T, q0, nq);
        load_stats(t.D(buffer), dsum + bh * T, q0, nq);
    };
    mma_walk_tiles(k0 / FLASH_MMA_ROWS, flash_tiles(T, FLASH_MMA_ROWS), k0 / FLASH_MMA_ROWS, load,
                   [&](int qt, int buffer, auto on_diagonal) {
        constexpr bool diagonal = decltype(on_diagonal)::value;
        const int q0 = qt * FLASH_MMA_ROWS;
        const __nv_bfloat16 *Qs = t.walk(buffer, 0), *dOs = t.walk(buffer, 1);
        const float *Ls = t.L(buffer), *Ds = t.D(buffer);
        const MmaBlocks seen = mma_diagonal_blocks<diagonal>(true, ln.r0);
        for (int half = 0; half < 2; half++) {
            const int c0 = 32 * half, jb = min(max(seen.begin - 4 * half, 0), 4);   // this half's first seen block
            if (jb == 4) continue;   // every column of the half masked for the warp's rows
            float st[4][4], dpt[4][4];
            mma_scores<HD, 32>(st, Ks, ln.r0, Qs, c0, jb);
            mma_scores<HD, 32>(dpt, Vs, ln.r0, dOs, c0, jb);
            uint32_t pt[2][4], dst[2][4];   // P^T and dS^T rounded, as the A operands of dv's and dk's products
            for (int j = 0; j < 4; j++)
                for (int h = 0; h < 2; h++) {   // key rows g + 8 h: elements 2 h, 2 h + 1
                    float p2[2], ds[2];
                    for (int e = 2 * h; e < 2 * h + 2; e++) {
                        const int c = c0 + ln.col(j, e);
                        const bool unmasked = !diagonal || k0 + ln.row(e) <= q0 + c;
                        p2[e - 2 * h] = flash_mma_prob(unmasked ? st[j][e] : -INFINITY, Ls[c], sc.c2);
                        ds[e - 2 * h] = flash_dscore(p2[e - 2 * h], dpt[j][e], Ds[c]);
                    }
                    mma_a_slot(pt, j, h) = pack_bf16x2(p2[0], p2[1]);
                    mma_a_slot(dst, j, h) = pack_bf16x2(ds[0], ds[1]);
                }
            mma_accumulate<HD, 32>(dv_acc, pt, dOs, c0, jb);
            mma_accumulate<HD, 32>(dk_acc, dst, Qs, c0, jb);
        }
    });
    if (g == 1) {
        float *dkb = dk + ((size_t)b * T * NKV + kvh) * HD;
        if (rk.dst) mma_emit_rope<HD>(dk_acc, ln, sc.scale, rk, b, T, k0, nk, kvh);
        else
            mma_emit<HD>(dk_acc, ln, [&](int row, int d, float x) {
                if (row < nk) dkb[(size_t)(k0 + row) * NKV * HD + d] = flash_written(sc.scale * x);
            });
        mma_emit<HD>(dv_acc, ln, [&](int row, int d, float x) {
            if (row < nk) dv.put((size_t)b * T + k0 + row, (size_t)kvh * HD + d, x);
        });
        return;
    }
    float *dkp = dk_part + ((size_t)b * T * NH + h) * HD, *dvp = dv_part + ((size_t)b * T * NH + h) * HD;
    mma_emit<HD>(dk_acc, ln, [&](int row, int d, float x) {
        if (row < nk) dkp[(size_t)(k0 + row) * NH * HD + d] = x;
    });
    mma_emit<HD>(dv_acc, ln, [&](int row, int d, float x) {
        if (row < nk) dvp[(size_t)(k0 + row) * NH * HD + d] = x;
    });
}
#endif
