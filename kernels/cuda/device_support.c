// kernels/cuda/device_support.c: whether this build's GPU kernels run on a given device, and if
// not, the one line a user reads. Plain C, shared by the real backend (context.cu asks the
// runtime for the device's facts) and the emulator (tests/gpu_emu/kernels_emu.c pretends them:
// PPTRAIN_EMU_CC), so the refusal a test sees is the one a GPU machine prints.
//
// The floor is compute capability 8.0: bf16 mode's attention is built from mma.sync with bf16
// operands (kernels/cuda/mma_sync.cuh) and the GEMMs take bf16 operands, both of which need
// Ampere or newer. Above the floor a build may still hold no code the device can load (built
// with -DCMAKE_CUDA_ARCHITECTURES=90 and run on an A100): that is the build's fault, and the
// line says how to rebuild.
#include <stdio.h>

#define PPTRAIN_KERNELS_CUDA_SIZES_ONLY   // plain C: no toolkit needed
#include "kernels/cuda/kernels_cuda.h"

const char *cuda_support_problem(char *buf, size_t size, const CudaDeviceFacts *f) {
    if (f->major < CUDA_MIN_MAJOR) {
        snprintf(buf, size,
                 "GPU %d (%s) has compute capability %d.%d; pptrain's GPU kernels need %d.0 or newer (bf16 tensor "
                 "cores: A100, RTX 30xx, L4, H100 and later): use --device cpu",
                 f->device, f->name, f->major, f->minor, CUDA_MIN_MAJOR);
        return buf;
    }
    if (!f->has_code) {
        snprintf(buf, size,
                 "this build of pptrain holds no GPU code for GPU %d (%s, compute capability %d.%d): rebuild with "
                 "cmake -DCMAKE_CUDA_ARCHITECTURES=%d%d",
                 f->device, f->name, f->major, f->minor, f->major, f->minor);
        return buf;
    }
    return NULL;
}
