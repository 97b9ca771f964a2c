// Between the two halves of the emulated GPU (cuda_emu.c, nccl_emu.c): an emulated NCCL
// operation is an MPI request that completes in its stream's order.
#ifndef PPTRAIN_GPU_EMU_H
#define PPTRAIN_GPU_EMU_H
#include <cuda_runtime_api.h>
#include <mpi.h>

// Appends req to the stream: events recorded after it complete only once it has.
void emu_stream_push(cudaStream_t stream, MPI_Request req);
#endif
