// kernels/cuda/crossentropy_kernels.cuh: the kernels of crossentropy.cu (which launches them), in the
// subset of CUDA C++ that tests/gpu_emu/simt.h also gives a host compiler, so
// tests/gpu_emu/test_kernels_simt.cc runs this same source on CPU threads. Include after
// kernels/cuda/common.cuh on the GPU, after simt.h and device_math.cuh on the CPU.
#ifndef PPTRAIN_KERNELS_CUDA_CROSSENTROPY_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_CROSSENTROPY_KERNELS_CUH

// Speed. The shapes of a 125m step on an H200: a chunk of R = 524 rows of V = 32000 fp32
// logits (67 MB), and its bf16 dlogits (34 MB) written once, one block of 1024 threads a row.
// That is HBM-bound, and what bounds a kernel there is the bytes each SM keeps in flight
// (Little's law: ~4.8 TB/s x ~0.7 us of loaded latency, over 132 SMs, ~25 KB an SM). A 4-byte
// load a thread at a time, each feeding the running max's update, kept 2 blocks x 1024 threads
// x 4 B = 8 KB an SM in flight: ncu measured 71.5 us a launch, 2.3 TB/s. Now a thread loads
// float4s (16 bytes) and stores 4 values at once (fp32 a float4, bf16 a Bf16x4, 8 bytes), in
// one of two forms; crossentropy.cu launches the second wherever the row fits it:
//   the walk (crossentropy_rows_kernel): two float4s in flight before it folds either in (2048
//   x 32 B = 64 KB an SM), and the row read again for the dlogits (the chunk is larger than L2,
//   so from HBM): 67 x 2 + 34 = ~168 MB a launch, expected ~40 us at ~4.2 TB/s (reasoned, not
//   yet measured). 32 registers a thread (__launch_bounds__ holds it there) keep 2 blocks of
//   1024 on an SM. Any V.
//   held (crossentropy_rows_held_kernel<D, G>): a thread's G = 8 float4s all loaded at once
//   (1024 x 128 B = 128 KB an SM in flight) and kept in registers until the dlogits, so the row
//   is read once: 67 + 34 = ~101 MB a launch, 40% fewer bytes, so ~40% less time at the same
//   bandwidth (~24 us at ~4.2 TB/s): an estimate from the bytes, until a GPU times it. (fp32
//   dlogits in place: 201 -> 134 MB.) 64 registers (sm_80) or 62 (sm_90), no spills: 1 block
//   of 1024 an SM. Rows of V <= 4 x 8 x 1024 + 3 = 32771 at 1024 threads, and every V < 8192
//   (256 threads: at most 2047 float4s). Past that, GPT-2's 50257 say, a thread would hold 13
//   float4s, 52 registers of values alone where 1024 threads have 64 each: the walk.
// Both give the same bits (the same values a thread, folded in the same order, the same
// arithmetic: the helpers below); tests/gpu_emu/test_kernels_simt.cc holds them to it.
// Alignment. Row n starts at logits + n V floats (the chunk 256-byte aligned in the arena), on
// a 16-byte boundary only when V % 4 == 0 (GPT-2's 50257 is not). Its head, the 0..3 values
// before its first boundary, and its tail, the 0..3 after its last whole float4, are scalars:
// head value j thread j's, tail value i thread i's (a block has at least 32 threads, as
// block_sum needs); the body's float4 i is thread i % blockDim.x's. A fixed assignment and
// order, so the same bits every run. The dlogits take 4 values a store where their row shares
// the logits' alignment (in place always; bf16 when the rows before it in its buffer, times V,
// are a multiple of 4), else 4 stores of one.

// The register form's float4 groups a thread holds (crossentropy_rows_held_kernel's G): at 1024
// threads a row, rows of V <= 4 x 8 x 1024 + 3 = 32771 (the 125m model's and Llama-2's 32000).
#define CROSSENTROPY_HELD_GROUPS 8

// Whether crossentropy_rows_held_kernel<D, G> takes rows of V at `threads` a row: a row has at
// most V / 4 float4s (fewer where its head takes 1..3 values), G a thread.
static inline bool crossentropy_held_fits(int V, int threads, int G) { return V / 4 <= G * threads; }

// Values before p's first boundary of 4 values (4 x sizeof(T) bytes), at most V: 0..3.
template <typename T>
__device__ __forceinline__ int ce_head(const T *p, int V) {
    const unsigned b = 4 * sizeof(T), h = (unsigned)((b - (uintptr_t)p % b) % b / sizeof(T));
    return (int)h < V ? (int)h : V;
}

// Folds K values into a thread's running max mt and sum st = sum of e^(x - mt) (an online
// softmax): their max first, one rescale of st by e^(mt_old - mt) if it is new, then K terms.
// A first fold too: st is 0, and expf(-inf) 0.
template <int K>
__device__ __forceinline__ void ce_fold(float &mt, double &st, const float (&v)[K]) {
    float mk = v[0];
    for (int i = 1; i < K; i++) mk = fmaxf(mk, v[i]);
    if (mk > mt) {
        st *= (double)expf(mt - mk);
        mt = mk;
    }
    for (int i = 0; i < K; i++) st += (double)expf(v[i] - mt);
}

// 4 dlogits at p: one store where p is on a boundary of 4 values (wide; fp32 a float4, bf16 a
// Bf16x4), else 4 (a buffer whose rows do not share the logits' alignment).
template <typename D>
__device__ __forceinline__ void ce_store4(D *p, const float4 &g, bool wide) {
    if (wide) return store_f32x4(p, 0, g);
    p[0] = from_f32<D>(g.x), p[1] = from_f32<D>(g.y), p[2] = from_f32<D>(g.z), p[3] = from_f32<D>(g.w);
}

// A pad row (target < 0): no loss, and where there are dlogits, zeros: d's own head, 4 values a
// store, tail. The whole block takes this branch (a row's target is the block's).
template <typename D>
__device__ __forceinline__ void ce_pad_row(D *d, double *loss, int V) {
    const int t = (int)threadIdx.x, B = (int)blockDim.x;
    if (d) {
        const int h = ce_head(d, V), nv = (V - h) / 4;
        if (t < h) d[t] = from_f32<D>(0.0f);
        for (int i = t; i < nv; i += B) ce_store4(d + h + 4 * i, float4{0.0f, 0.0f, 0.0f, 0.0f}, true);
        if (h + 4 * nv + t < V) d[h + 4 * nv + t] = from_f32<D>(0.0f);
    }
    if (t == 0) *loss = 0.0;
}

// A thread's float4 groups fold in pairs (8 values, ce_fold<8>), the last one alone where the
// thread has an odd count (ce_fold<4>).
__device__ __forceinline__ void ce_fold_pair(float &mt, double &st, const float4 &a, const float4 &b) {
    ce_fold<8>(mt, st, {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w});
}
__device__ __forceinline__ void ce_fold_one(float &mt, double &st, const float4 &a) {
    ce_fold<4>(mt, st, {a.x, a.y, a.z, a.w});
}

// What a row's dlogits take: value j's is scale (softmax - onehot) = e^(x_j - m) k, less scale
// at the target, with k = scale / sum.
struct CeGrad {
    float m, k, scale;
    int target;
    __device__ __forceinline__ float operator()(float xj, int j) const {
        const float g = expf(xj - m) * k;
        return j == target ? g - scale : g;
    }
    // The dlogits of values j..j+3 of the row (a) at d + j (ce_store4).
    template <typename D>
    __device__ __forceinline__ void store4(D *d, int j, const float4 &a, bool wide) const {
        const CeGrad &g = *this;
        ce_store4(d + j, float4{g(a.x, j), g(a.y, j + 1), g(a.z, j + 2), g(a.w, j + 3)}, wide);
    }
};

// The block's max m of the threads' mt, and sum = sum of their st e^(mt - m) (a thread with no
// values: 0 x 0); thread 0 writes the row's loss, m + log(sum) - x[target]; every thread gets
// what its dlogits take. Every thread of the block calls it (block_max and block_sum meet at
// barriers).
__device__ __forceinline__ CeGrad ce_row(float mt, double st, float xt, int target, float scale, double *loss) {
    const float m = block_max(mt);
    const double sum = block_sum(st * (double)expf(mt - m));
    if (threadIdx.x == 0) *loss = (double)m + log(sum) - (double)xt;
    return CeGrad{m, (float)((double)scale / sum), scale, target};
}

// One block per row. dlogits is D: fp32, which may alias logits (every read of the row's max,
// sum and x[target] completes before the block barrier inside block_sum, and only then is the
// row written; each later value is read, then written, by one thread: a float4 by the thread
// that read it, head and tail values by theirs), or bf16, each value rounded from the fp32 one
// (a separate buffer: a bf16 store would overlap fp32 values still unread).
template <typename D>
__global__ void __launch_bounds__(1024, 2)
    crossentropy_rows_kernel(D *dlogits, double *row_loss, const float *logits, const int32_t *__restrict__ targets,
                             int V, float scale) {
    const size_t n = blockIdx.x;
    const float *x = logits + n * V;
    D *d = dlogits ? dlogits + n * V : nullptr;
    const int target = targets[n], t = (int)threadIdx.x, B = (int)blockDim.x;
    if (target < 0) return ce_pad_row(d, row_loss + n, V);   // pad: no loss, zero gradient
    const float xt = x[target];
    // x = head [0, h), float4s xv[0, nv) from h, tail [h + 4 nv, V).
    const int h = ce_head(x, V), nv = (V - h) / 4, tail = h + 4 * nv;
    const float4 *xv = reinterpret_cast<const float4 *>(x + h);
    // The row's max and its sum of exponentials in one read of the row (an online softmax): each
    // thread keeps a running max mt and sum st (ce_fold); then the block's max m, and sum = sum of
    // st e^(mt - m). The dlogits below read the row once more: twice in all, where a pass for the
    // max and one for the sum made it three (the logits are R x V fp32, 67 MB a chunk at V 32000,
    // larger than an H100's L2). Each term is e^(x - mt) e^(mt - m), a product of two rounded
    // exponentials, where the CPU rounds e^(x - m) once: a few ulps of the sum, not bitwise.
    float mt = -INFINITY;
    double st = 0.0;
    if (t < h) ce_fold<1>(mt, st, {x[t]});
    for (int i = t; i < nv; i += 2 * B) {               // two float4s in flight, then their folds
        const float4 a = xv[i];
        if (i + B < nv) ce_fold_pair(mt, st, a, xv[i + B]);
        else ce_fold_one(mt, st, a);
    }
    if (tail + t < V) ce_fold<1>(mt, st, {x[tail + t]});
    const CeGrad g = ce_row(mt, st, xt, target, scale, row_loss + n);
    if (d) {
        const bool wide = (uintptr_t)(d + h) % (4 * sizeof(D)) == 0;   // fp32 in place: always
        if (t < h) d[t] = from_f32<D>(g(x[t], t));
        for (int i = t; i < nv; i += 2 * B) {           // both float4s read before either is written
            const int j = h + 4 * i;
            const float4 a = xv[i];
            if (i + B < nv) {
                const float4 b = xv[i + B];
                g.store4(d, j, a, wide);
                g.store4(d, j + 4 * B, b, wide);
            } else {
                g.store4(d, j, a, wide);
            }
        }
        if (tail + t < V) d[tail + t] = from_f32<D>(g(x[tail + t], tail + t));
    }
}

// The register form: as crossentropy_rows_kernel, but each thread holds its row's values (its
// float4s t, t + B, ..., t + (G - 1) B where they exist, and its head and tail values) in
// registers from the one read to the dlogits, so the row is read once. Every load is issued
// before the first fold; then the same folds in the same order (head, the pairs (t, t + B),
// (t + 2 B, t + 3 B), ..., the last alone where the count is odd, tail) and the same dlogits, so
// every value and row loss has crossentropy_rows_kernel's bits. G is even (the pairs), and every
// row's float4s fit G a thread (crossentropy_held_fits; the launcher checks). fp32 dlogits may
// alias logits as there: each value is written only after the block barriers, by the thread
// that read it.
template <typename D, int G>
__global__ void __launch_bounds__(1024, 1)
    crossentropy_rows_held_kernel(D *dlogits, double *row_loss, const float *logits,
                                  const int32_t *__restrict__ targets, int V, float scale) {
    static_assert(G > 0 && G % 2 == 0, "a thread's groups fold in pairs");
    const size_t n = blockIdx.x;
    const float *x = logits + n * V;
    D *d = dlogits ? dlogits + n * V : nullptr;
    const int target = targets[n], t = (int)threadIdx.x, B = (int)blockDim.x;
    if (target < 0) return ce_pad_row(d, row_loss + n, V);   // pad: no loss, zero gradient
    const int h = ce_head(x, V), nv = (V - h) / 4, tail = h + 4 * nv;
    const float4 *xv = reinterpret_cast<const float4 *>(x + h);
    const float xt = x[target], xh = t < h ? x[t] : 0.0f, xl = tail + t < V ? x[tail + t] : 0.0f;
    float4 v[G];   // float4 t + g B in v[g]
    for (int g = 0; g < G; g++) v[g] = t + g * B < nv ? xv[t + g * B] : float4{};
    float mt = -INFINITY;
    double st = 0.0;
    if (t < h) ce_fold<1>(mt, st, {xh});
    for (int g = 0; g < G; g += 2)
        if (t + g * B < nv) {
            if (t + (g + 1) * B < nv) ce_fold_pair(mt, st, v[g], v[g + 1]);
            else ce_fold_one(mt, st, v[g]);
        }
    if (tail + t < V) ce_fold<1>(mt, st, {xl});
    const CeGrad cg = ce_row(mt, st, xt, target, scale, row_loss + n);
    if (d) {
        const bool wide = (uintptr_t)(d + h) % (4 * sizeof(D)) == 0;   // fp32 in place: always
        if (t < h) d[t] = from_f32<D>(cg(xh, t));
        for (int g = 0; g < G; g++)
            if (t + g * B < nv) cg.store4(d, h + 4 * (t + g * B), v[g], wide);
        if (tail + t < V) d[tail + t] = from_f32<D>(cg(xl, tail + t));
    }
}

// *loss += scale * sum of row_loss(N): one block, strided partials then a fixed tree.
__global__ void crossentropy_sum_kernel(double *loss, const double *__restrict__ row_loss,
                                        int N, float scale) {
    double s = 0.0;
    for (int i = threadIdx.x; i < N; i += blockDim.x) s += row_loss[i];
    s = block_sum(s);
    if (threadIdx.x == 0) *loss += (double)scale * s;
}

#endif
