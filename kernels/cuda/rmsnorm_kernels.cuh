// kernels/cuda/rmsnorm_kernels.cuh: the kernels of rmsnorm.cu (which launches them), in the
// subset of CUDA C++ that tests/gpu_emu/simt.h also gives a host compiler, so
// tests/gpu_emu/test_kernels_simt.cc runs this same source on CPU threads. Include after
// kernels/cuda/common.cuh on the GPU, after simt.h and device_math.cuh on the CPU.
#ifndef PPTRAIN_KERNELS_CUDA_RMSNORM_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_RMSNORM_KERNELS_CUH

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
// (may be NULL) gets the bf16 copy of the value written, rounded to nearest even. dout is D:
// fp32, or bf16 (bf16 mode stores the norm output's gradient so), widened.
template <typename D>
__global__ void rmsnorm_backward_input_kernel(float *dinp, __nv_bfloat16 *__restrict__ dinp16, const float *resid,
                                              const D *__restrict__ dout, const float *__restrict__ inp,
                                              const float *__restrict__ weight, const float *__restrict__ rstd, int N,
                                              int C) {
    int row = blockIdx.x * RMSNORM_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    const size_t base = (size_t)row * C;
    const float *x = inp + base;
    const D *d = dout + base;
    double wdx = 0.0;
    for (int c = lane; c < C; c += 32) wdx += (double)to_f32(d[c]) * x[c] * weight[c];
    wdx = warp_sum(wdx);
    double r = rstd[row];
    float a = (float)r, b = (float)(r * r * r * wdx / C);
    for (int c = lane; c < C; c += 32) {
        const float from = resid ? resid[base + c] : 0.0f;
        const float g = from + (a * (weight[c] * to_f32(d[c])) - b * x[c]);
        dinp[base + c] = g;
        if (dinp16) dinp16[base + c] = __float2bfloat16(g);
    }
}

// partial(chunks, C) = per-chunk sums of dout * (inp * rstd) (dout D: fp32, or bf16 widened).
// Block of 256 threads, RMSNORM_DWEIGHT_THREADS: x = thread % 32 the column, y = thread / 32
// the row phase; grid (column blocks, chunks). Shared-memory combine over y in fixed order.
#define RMSNORM_DWEIGHT_THREADS 256
template <typename D>
__global__ void rmsnorm_dweight_partial_kernel(double *__restrict__ partial, const D *__restrict__ dout,
                                               const float *__restrict__ inp, const float *__restrict__ rstd, int N,
                                               int C, int chunk) {
    __shared__ double sh[8][33];
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    int c = blockIdx.x * 32 + tx;
    int r0 = blockIdx.y * chunk;
    int r1 = min(r0 + chunk, N);
    double acc = 0.0;
    if (c < C)
        for (int r = r0 + ty; r < r1; r += 8) {
            size_t i = (size_t)r * C + c;
            acc += (double)to_f32(dout[i]) * (inp[i] * rstd[r]);
        }
    sh[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && c < C) {
        double s = 0.0;
        for (int y = 0; y < 8; y++) s += sh[y][tx];
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

#endif
