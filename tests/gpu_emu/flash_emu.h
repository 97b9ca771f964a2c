// tests/gpu_emu/flash_emu.h: flash attention on the CPU, tile by tile in the order of
// kernels/cuda/flash_attention.cu, with the tile functions of kernels/cuda/flash_tile.h. The
// emulated GPU (kernels_emu.c) runs these for cuda_flash_attention_forward / _backward, and
// tests/unit/test_flash_attention.c holds them to the CPU reference attention.
//
// Shapes as kernels/cuda/kernels_cuda.h: q, out, dout (B, T, NH, HD); k, v (B, T, NKV, HD);
// lse and dsum (B, NH, T). HD <= FLASH_MAX_HD, NH a multiple of NKV.
#ifndef PPTRAIN_TESTS_GPU_EMU_FLASH_EMU_H
#define PPTRAIN_TESTS_GPU_EMU_FLASH_EMU_H

// out (overwritten) and the row logsumexp lse (overwritten, kept for backward).
void flash_emu_forward(float *out, float *lse, const float *q, const float *k, const float *v, int B, int T, int NH,
                       int NKV, int HD);
// Generation's decode (cuda_flash_decode): q(NH, HD) of position n - 1 against k, v(n, NKV, HD).
void flash_emu_decode(float *out, const float *q, const float *k, const float *v, int n, int NH, int NKV, int HD);
// dq, dk, dv = gradients, written as the kernels write them (0 + x: not read); dsum
// (overwritten) receives D = rowsum(dout * out).
void flash_emu_backward(float *dq, float *dk, float *dv, float *dsum, const float *dout, const float *q,
                        const float *k, const float *v, const float *out, const float *lse, int B, int T, int NH,
                        int NKV, int HD);
// The bf16 mode's tensor-core kernels (flash_mma_kernels.cuh; flash_tile.h "Tensor-core tiles"
// says what they round): the same contracts, q, k and v being bf16 values (bf16 mode keeps them
// bf16; the GPU forms take them so) widened. Head dims the tensor cores do not take
// (flash_mma_takes) run the fp32 kernels on those values, as the GPU launcher does.
void flash_emu_forward_bf16(float *out, float *lse, const float *q, const float *k, const float *v, int B, int T,
                            int NH, int NKV, int HD);
void flash_emu_backward_bf16(float *dq, float *dk, float *dv, float *dsum, const float *dout, const float *q,
                             const float *k, const float *v, const float *out, const float *lse, int B, int T, int NH,
                             int NKV, int HD);
#endif
