// RMSNorm (Llama): out = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps).
// Row kernels use one warp per row (8 rows per 256-thread block); row sums are accumulated
// in double per lane as the CPU does, then combined by a fixed butterfly (deterministic).
#include "kernels/cuda/common.cuh"

#define RMSNORM_ROWS_PER_BLOCK 8
// dweight reduction: each block owns 32 columns x `chunk` rows (cuda_rmsnorm_chunk_rows: 128,
// doubled until the chunk count fits gridDim.y); 8 thread rows walk the chunk, then a second
// kernel adds the chunks' partial sums in chunk order.

// out is T: fp32, or bf16 rounded from the fp32 value (a GEMM operand in bf16 mode).
template <typename T>
__global__ void rmsnorm_forward_kernel(T *__restrict__ out, float *__restrict__ rstd,
                                       const float *__restrict__ inp,
                                       const float *__restrict__ weight, int N, int C,
                                       float eps) {
    int row = blockIdx.x * RMSNORM_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;                                 // whole warp leaves together
    const float *x = inp + (size_t)row * C;
    T *o = out + (size_t)row * C;
    double ss = 0.0;
    for (int c = lane; c < C; c += 32) ss += (double)x[c] * x[c];
    ss = warp_sum(ss);
    float r = (float)(1.0 / sqrt(ss / C + (double)eps));
    if (lane == 0) rstd[row] = r;
    for (int c = lane; c < C; c += 32) o[c] = from_f32<T>(x[c] * r * weight[c]);
}

// The residual add fused in front: sum = a + b, written, and normalized from the values just
// written (as cuda_residual_forward then cuda_rmsnorm_forward would, in the same order per row).
// sum may alias a or b: each element is read, then written, by the same lane.
template <typename T>
__global__ void residual_rmsnorm_forward_kernel(float *sum, T *__restrict__ out,
                                                float *__restrict__ rstd, const float *a,
                                                const float *b, const float *__restrict__ weight,
                                                int N, int C, float eps) {
    int row = blockIdx.x * RMSNORM_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;                                 // whole warp leaves together
    const size_t base = (size_t)row * C;
    double ss = 0.0;
    for (int c = lane; c < C; c += 32) {
        const float x = a[base + c] + b[base + c];
        sum[base + c] = x;
        ss += (double)x * x;
    }
    ss = warp_sum(ss);
    float r = (float)(1.0 / sqrt(ss / C + (double)eps));
    if (lane == 0) rstd[row] = r;
    for (int c = lane; c < C; c += 32) out[base + c] = from_f32<T>(sum[base + c] * r * weight[c]);
}

// dinp = resid + (rstd * (w*dout) - rstd^3 / C * inp * sum(w*dout*inp)), row by row: resid NULL
// adds to zero, resid == dinp accumulates (each element read, then written, by one lane). dinp16
// (may be NULL) gets the bf16 copy of the value written, rounded to nearest even.
__global__ void rmsnorm_backward_input_kernel(float *dinp, __nv_bfloat16 *__restrict__ dinp16, const float *resid,
                                              const float *__restrict__ dout, const float *__restrict__ inp,
                                              const float *__restrict__ weight, const float *__restrict__ rstd, int N,
                                              int C) {
    int row = blockIdx.x * RMSNORM_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    const size_t base = (size_t)row * C;
    const float *x = inp + base, *d = dout + base;
    double wdx = 0.0;
    for (int c = lane; c < C; c += 32) wdx += (double)d[c] * x[c] * weight[c];
    wdx = warp_sum(wdx);
    double r = rstd[row];
    float a = (float)r, b = (float)(r * r * r * wdx / C);
    for (int c = lane; c < C; c += 32) {
        const float from = resid ? resid[base + c] : 0.0f;
        const float g = from + (a * (weight[c] * d[c]) - b * x[c]);
        dinp[base + c] = g;
        if (dinp16) dinp16[base + c] = __float2bfloat16(g);
    }
}

// partial(chunks, C) = per-chunk sums of dout * (inp * rstd). Block (32, 8): x = column,
// y = row phase; grid (column blocks, chunks). Shared-memory combine over y in fixed order.
__global__ void rmsnorm_dweight_partial_kernel(double *__restrict__ partial,
                                               const float *__restrict__ dout,
                                               const float *__restrict__ inp,
                                               const float *__restrict__ rstd, int N, int C,
                                               int chunk) {
    __shared__ double sh[8][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    int r0 = blockIdx.y * chunk;
    int r1 = min(r0 + chunk, N);
    double acc = 0.0;
    if (c < C)
        for (int r = r0 + threadIdx.y; r < r1; r += 8) {
            size_t i = (size_t)r * C + c;
            acc += (double)dout[i] * (inp[i] * rstd[r]);
        }
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        double s = 0.0;
        for (int y = 0; y < 8; y++) s += sh[y][threadIdx.x];
        partial[(size_t)blockIdx.y * C + c] = s;
    }
}

// dweight(C) += sum over chunks of partial, in chunk order.
__global__ void rmsnorm_dweight_final_kernel(float *__restrict__ dweight,
                                             const double *__restrict__ partial, int chunks,
                                             int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double s = 0.0;
    for (int k = 0; k < chunks; k++) s += partial[(size_t)k * C + c];
    dweight[c] += (float)s;
}

template <typename T>
static void rmsnorm_forward(CudaCtx *ctx, T *out, float *rstd, const float *inp, const float *weight, int N, int C,
                            float eps) {
    if (N <= 0) return;
    int blocks = (N + RMSNORM_ROWS_PER_BLOCK - 1) / RMSNORM_ROWS_PER_BLOCK;
    rmsnorm_forward_kernel<T><<<blocks, 32 * RMSNORM_ROWS_PER_BLOCK, 0, ctx->stream>>>(out, rstd, inp, weight, N, C,
                                                                                      eps);
    CUDA_CHECK_LAUNCH();
}

void cuda_rmsnorm_forward(CudaCtx *ctx, float *out, float *rstd, const float *inp,
                          const float *weight, int N, int C, float eps) {
    rmsnorm_forward(ctx, out, rstd, inp, weight, N, C, eps);
}

void cuda_rmsnorm_forward_bf16(CudaCtx *ctx, cuda_bf16 *out, float *rstd, const float *inp, const float *weight, int N,
                               int C, float eps) {
    rmsnorm_forward(ctx, (__nv_bfloat16 *)out, rstd, inp, weight, N, C, eps);
}

template <typename T>
static void residual_rmsnorm_forward(CudaCtx *ctx, float *sum, T *out, float *rstd, const float *a, const float *b,
                                     const float *weight, int N, int C, float eps) {
    if (N <= 0) return;
    int blocks = (N + RMSNORM_ROWS_PER_BLOCK - 1) / RMSNORM_ROWS_PER_BLOCK;
    residual_rmsnorm_forward_kernel<T><<<blocks, 32 * RMSNORM_ROWS_PER_BLOCK, 0, ctx->stream>>>(sum, out, rstd, a, b,
                                                                                               weight, N, C, eps);
    CUDA_CHECK_LAUNCH();
}

void cuda_residual_rmsnorm_forward(CudaCtx *ctx, float *sum, float *out, float *rstd,
                                   const float *a, const float *b, const float *weight, int N,
                                   int C, float eps) {
    residual_rmsnorm_forward(ctx, sum, out, rstd, a, b, weight, N, C, eps);
}

void cuda_residual_rmsnorm_forward_bf16(CudaCtx *ctx, float *sum, cuda_bf16 *out, float *rstd, const float *a,
                                        const float *b, const float *weight, int N, int C, float eps) {
    residual_rmsnorm_forward(ctx, sum, (__nv_bfloat16 *)out, rstd, a, b, weight, N, C, eps);
}

static void rmsnorm_backward_input(CudaCtx *ctx, float *dinp, __nv_bfloat16 *dinp16, const float *resid,
                                   const float *dout, const float *inp, const float *weight, const float *rstd, int N,
                                   int C) {
    const int blocks = (N + RMSNORM_ROWS_PER_BLOCK - 1) / RMSNORM_ROWS_PER_BLOCK;
    rmsnorm_backward_input_kernel<<<blocks, 32 * RMSNORM_ROWS_PER_BLOCK, 0, ctx->stream>>>(dinp, dinp16, resid, dout,
                                                                                         inp, weight, rstd, N, C);
    CUDA_CHECK_LAUNCH();
}

void cuda_rmsnorm_backward(CudaCtx *ctx, float *dinp, float *dweight, const float *dout,
                           const float *inp, const float *weight, const float *rstd, int N,
                           int C) {
    if (N <= 0 || C <= 0) return;
    if (dinp) rmsnorm_backward_input(ctx, dinp, NULL, dinp, dout, inp, weight, rstd, N, C);
    if (dweight) {
        const int chunk = cuda_rmsnorm_chunk_rows(N), chunks = (N + chunk - 1) / chunk;
        double *partial = (double *)ctx_arena(ctx, cuda_rmsnorm_arena_bytes(N, C));
        dim3 grid((unsigned)((C + 31) / 32), (unsigned)chunks);
        rmsnorm_dweight_partial_kernel<<<grid, dim3(32, 8), 0, ctx->stream>>>(partial, dout, inp,
                                                                               rstd, N, C, chunk);
        CUDA_CHECK_LAUNCH();
        rmsnorm_dweight_final_kernel<<<(C + 255) / 256, 256, 0, ctx->stream>>>(dweight, partial,
                                                                              chunks, C);
        CUDA_CHECK_LAUNCH();
    }
}

void cuda_residual_rmsnorm_backward(CudaCtx *ctx, float *dinp, cuda_bf16 *dinp16, const float *resid,
                                    const float *dout, const float *inp, const float *weight, const float *rstd, int N,
                                    int C) {
    if (N <= 0 || C <= 0) return;
    rmsnorm_backward_input(ctx, dinp, (__nv_bfloat16 *)dinp16, resid, dout, inp, weight, rstd, N, C);
}
