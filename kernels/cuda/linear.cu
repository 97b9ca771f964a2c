// Linear layer y = x @ W^T with W in (OC, IC) layout (kernels/cpu/linear.c), on cuBLASLt.
// Row-major GEMM shapes (see gemm.cu for the column-major mapping):
//   forward          out(N, OC)  = inp(N, IC) @ W(OC, IC)^T     ta = 0, tb = 1, beta = 0
//   ... + residual   out(N, OC)  = resid(N, OC) + inp @ W^T     the same, beta = 1, C = resid
//   backward input   dinp(N, IC)  = dout(N, OC) @ W(OC, IC)     ta = 0, tb = 0, beta = 0
//   backward weight  dW(OC, IC) += dout(N, OC)^T @ inp(N, IC)   ta = 1, tb = 0, beta = 1
// The input gradient is written, not added: each has one writer (its layer's backward), so no
// zeroing pass comes first (with beta 0 cuBLAS does not read dinp at all). The weight gradient
// accumulates over microbatches.
// The fp32 and bf16 versions differ only in the operands' type; results are fp32 but for the
// _to_bf16 forms (bf16 mode's q|k|v and gate|up, and the attention output's gradient: stored
// bf16, each read only by one kernel).
#include "kernels/cuda/common.cuh"

static void linear_fwd(CudaCtx *ctx, float *out, const void *inp, const void *W, int N, int IC,
                       int OC, cudaDataType_t t) {
    gemm_rm(ctx, false, true, N, OC, IC, 1.0f, inp, IC, W, IC, t, 0.0f, out, OC);
}
static void linear_fwd_residual(CudaCtx *ctx, float *out, const float *resid, const void *inp, const void *W, int N,
                                int IC, int OC, cudaDataType_t t) {
    gemm_rm_into(ctx, false, true, N, OC, IC, 1.0f, inp, IC, W, IC, t, 1.0f, resid, out, OC);
}
static void linear_bwd_inp(CudaCtx *ctx, float *dinp, const void *dout, const void *W, int N,
                           int IC, int OC, cudaDataType_t t) {
    gemm_rm(ctx, false, false, N, IC, OC, 1.0f, dout, OC, W, IC, t, 0.0f, dinp, IC);
}
static void linear_bwd_w(CudaCtx *ctx, float *dW, const void *dout, const void *inp, int N,
                         int IC, int OC, cudaDataType_t t) {
    gemm_rm(ctx, true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, t, 1.0f, dW, IC);
}

// batch forwards sharing inp: out + b * out_stride = inp @ (W + b * W_stride)^T, one strided
// batched GEMM (cuBLAS, which takes a batch stride of 0 for the shared input), each output
// written in place (no split afterwards).
static void linear_fwd_shared(CudaCtx *ctx, void *out, cudaDataType_t out_type, size_t out_stride, const void *inp,
                              const void *W, size_t W_stride, int batch, int N, int IC, int OC,
                              cudaDataType_t t) {
    gemm_rm_strided(ctx, false, true, N, OC, IC, 1.0f, inp, IC, 0, W, IC, (long long)W_stride, t,
                    0.0f, out, out_type, OC, (long long)out_stride, batch);
}

void cuda_linear_forward_shared(CudaCtx *ctx, float *out, size_t out_stride, const float *inp,
                                const float *W, size_t W_stride, int batch, int N, int IC,
                                int OC) {
    linear_fwd_shared(ctx, out, CUDA_R_32F, out_stride, inp, W, W_stride, batch, N, IC, OC, CUDA_R_32F);
}

void cuda_linear_forward_shared_bf16(CudaCtx *ctx, float *out, size_t out_stride,
                                     const cuda_bf16 *inp, const cuda_bf16 *W, size_t W_stride,
                                     int batch, int N, int IC, int OC) {
    linear_fwd_shared(ctx, out, CUDA_R_32F, out_stride, inp, W, W_stride, batch, N, IC, OC, CUDA_R_16BF);
}

void cuda_linear_forward_shared_to_bf16(CudaCtx *ctx, cuda_bf16 *out, size_t out_stride, const cuda_bf16 *inp,
                                        const cuda_bf16 *W, size_t W_stride, int batch, int N, int IC, int OC) {
    linear_fwd_shared(ctx, out, CUDA_R_16BF, out_stride, inp, W, W_stride, batch, N, IC, OC, CUDA_R_16BF);
}

void cuda_linear_forward(CudaCtx *ctx, float *out, const float *inp, const float *W, int N,
                         int IC, int OC) {
    linear_fwd(ctx, out, inp, W, N, IC, OC, CUDA_R_32F);
}
void cuda_linear_forward_residual(CudaCtx *ctx, float *out, const float *resid, const float *inp, const float *W, int N,
                                  int IC, int OC) {
    linear_fwd_residual(ctx, out, resid, inp, W, N, IC, OC, CUDA_R_32F);
}
void cuda_linear_backward_input(CudaCtx *ctx, float *dinp, const float *dout, const float *W,
                                int N, int IC, int OC) {
    linear_bwd_inp(ctx, dinp, dout, W, N, IC, OC, CUDA_R_32F);
}
void cuda_linear_backward_weight(CudaCtx *ctx, float *dW, const float *dout, const float *inp,
                                 int N, int IC, int OC) {
    linear_bwd_w(ctx, dW, dout, inp, N, IC, OC, CUDA_R_32F);
}

void cuda_linear_forward_bf16(CudaCtx *ctx, float *out, const cuda_bf16 *inp,
                              const cuda_bf16 *W, int N, int IC, int OC) {
    linear_fwd(ctx, out, inp, W, N, IC, OC, CUDA_R_16BF);
}
void cuda_linear_forward_residual_bf16(CudaCtx *ctx, float *out, const float *resid, const cuda_bf16 *inp,
                                       const cuda_bf16 *W, int N, int IC, int OC) {
    linear_fwd_residual(ctx, out, resid, inp, W, N, IC, OC, CUDA_R_16BF);
}
void cuda_linear_backward_input_bf16(CudaCtx *ctx, float *dinp, const cuda_bf16 *dout,
                                     const cuda_bf16 *W, int N, int IC, int OC) {
    linear_bwd_inp(ctx, dinp, dout, W, N, IC, OC, CUDA_R_16BF);
}
void cuda_linear_backward_weight_bf16(CudaCtx *ctx, float *dW, const cuda_bf16 *dout,
                                      const cuda_bf16 *inp, int N, int IC, int OC) {
    linear_bwd_w(ctx, dW, dout, inp, N, IC, OC, CUDA_R_16BF);
}

// The input gradient stored bf16 (beta 0): a batch of one on the strided cuBLAS path, which
// takes a bf16 result as the gate|up forward does.
void cuda_linear_backward_input_to_bf16(CudaCtx *ctx, cuda_bf16 *dinp, const cuda_bf16 *dout, const cuda_bf16 *W, int N,
                                        int IC, int OC) {
    gemm_rm_strided(ctx, false, false, N, IC, OC, 1.0f, dout, OC, 0, W, IC, 0, CUDA_R_16BF, 0.0f, dinp, CUDA_R_16BF, IC,
                    0, 1);
}
