// kernels/cuda/crossentropy_kernels.cuh: the kernels of crossentropy.cu (which launches them), in the
// subset of CUDA C++ that tests/gpu_emu/simt.h also gives a host compiler, so
// tests/gpu_emu/test_kernels_simt.cc runs this same source on CPU threads. Include after
// kernels/cuda/common.cuh on the GPU, after simt.h and device_math.cuh on the CPU.
#ifndef PPTRAIN_KERNELS_CUDA_CROSSENTROPY_KERNELS_CUH
#define PPTRAIN_KERNELS_CUDA_CROSSENTROPY_KERNELS_CUH

// One block per row. dlogits is D: fp32, which may alias logits (every read of the row's max,
// sum and x[target] completes before the block barrier inside block_sum, and only then is the
// row written; each later element is read, then written, by one thread), or bf16, each value
// rounded from the fp32 one (a separate buffer: a bf16 store would overlap fp32 values still
// unread).
template <typename D>
__global__ void crossentropy_rows_kernel(D *dlogits, double *row_loss, const float *logits,
                                         const int32_t *__restrict__ targets, int V,
                                         float scale) {
    const size_t n = blockIdx.x;
    const float *x = logits + n * V;
    D *d = dlogits ? dlogits + n * V : nullptr;
    const int target = targets[n];
    if (target < 0) {                                   // pad: no loss, zero gradient
        if (d)
            for (int j = threadIdx.x; j < V; j += blockDim.x) d[j] = from_f32<D>(0.0f);
        if (threadIdx.x == 0) row_loss[n] = 0.0;
        return;                                         // the whole block takes this branch
    }
    const float xt = x[target];
    // The row's max and its sum of exponentials in one read of the row (an online softmax): each
    // thread keeps a running max mt and sum st = sum of e^(x - mt) over its elements, a new max
    // rescaling st by e^(mt_old - mt); then the block's max m, and sum = sum of st e^(mt - m).
    // The dlogits below read the row once more: twice in all, where a pass for the max and one
    // for the sum made it three (the logits are R x V fp32, 67 MB a chunk at V 32000, larger
    // than an H100's L2). Each term is e^(x - mt) e^(mt - m), a product of two rounded
    // exponentials, where the CPU rounds e^(x - m) once: a few ulps of the sum, not bitwise.
    float mt = -INFINITY;
    double st = 0.0;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        const float xj = x[j];
        if (xj > mt) {   // the first element too: st is 0, and expf(-inf) 0
            st = st * (double)expf(mt - xj) + 1.0;
            mt = xj;
        } else {
            st += (double)expf(xj - mt);
        }
    }
    const float m = block_max(mt);
    double sum = block_sum(st * (double)expf(mt - m));   // a thread with no elements: 0 x 0
    if (threadIdx.x == 0) row_loss[n] = (double)m + log(sum) - (double)xt;
    if (d) {
        const float k = (float)((double)scale / sum);
        for (int j = threadIdx.x; j < V; j += blockDim.x) {
            float g = expf(x[j] - m) * k;
            d[j] = from_f32<D>(j == target ? g - scale : g);
        }
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
