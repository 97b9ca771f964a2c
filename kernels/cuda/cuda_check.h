// kernels/cuda: checked CUDA, cuBLAS(Lt) and NCCL calls. Every call of those libraries in
// pptrain goes through one of these macros: on failure the process prints ONE line on stderr
//   pptrain: CUDA error: <library's error string> [<error name>] in <call> at <file>:<line>
// and exits with status 1 (DESIGN.md "No hangs": one line, non-zero exit; the CUDA runtime's
// own exit handlers still run), after the last words a transport left (cuda_check_on_fail).
// C-callable: the engine (C) includes this header as well as the .cu files.
#ifndef PPTRAIN_KERNELS_CUDA_CHECK_H
#define PPTRAIN_KERNELS_CUDA_CHECK_H
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

// Prints the one line described above and exits(1). Never returns.
#if defined(__GNUC__)
__attribute__((noreturn))
#endif
void cuda_check_fail(const char *library, const char *message, const char *name,
                     const char *call, const char *file, int line);

// What cuda_check_fail runs once after its line and before the exit (NULL: nothing): a
// transport of several processes tells the other ranks (engine/transport/transport_nccl.c:
// its abort notice), so they stop at once and name this rank instead of waiting out
// --timeout. It must not wait long; a CHECK failing inside it exits at once.
typedef void (*CudaLastWords)(void *arg);
void cuda_check_on_fail(CudaLastWords fn, void *arg);

// Under several processes the one line starts with the rank that failed ("pptrain: rank 1:
// CUDA error: ..."), so that mpirun's merged output says whose it is. -1 (the default): no rank.
void cuda_check_name_rank(int rank);

#ifdef __cplusplus
}
#endif

// CUDA runtime calls (and cudaGetLastError() after kernel launches).
#define CUDA_CHECK(call)                                                                   \
    do {                                                                                   \
        cudaError_t cuda_check_err_ = (call);                                              \
        if (cuda_check_err_ != cudaSuccess)                                                \
            cuda_check_fail("CUDA", cudaGetErrorString(cuda_check_err_),                   \
                            cudaGetErrorName(cuda_check_err_), #call, __FILE__, __LINE__); \
    } while (0)

// After a kernel launch: launch-configuration errors surface here, at the launch site.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

// cuBLAS and cuBLASLt calls (both return cublasStatus_t). Needs <cublas_api.h> where used.
#define CUBLAS_CHECK(call)                                                               \
    do {                                                                                 \
        cublasStatus_t cublas_check_st_ = (call);                                        \
        if (cublas_check_st_ != CUBLAS_STATUS_SUCCESS)                                   \
            cuda_check_fail("cuBLAS", cublasGetStatusString(cublas_check_st_),           \
                            cublasGetStatusName(cublas_check_st_), #call, __FILE__,      \
                            __LINE__);                                                   \
    } while (0)

// NCCL calls (the engine's nccl transport). Needs <nccl.h> where used.
#define NCCL_CHECK(call)                                                                  \
    do {                                                                                  \
        ncclResult_t nccl_check_res_ = (call);                                            \
        if (nccl_check_res_ != ncclSuccess)                                               \
            cuda_check_fail("NCCL", ncclGetErrorString(nccl_check_res_), "ncclResult_t", \
                            #call, __FILE__, __LINE__);                                   \
    } while (0)

// Mutation testing of the GPU path's ordering. Every wait that correctness needs (a stream
// synchronize, an event wait) is written REQUIRED_WAIT(k, call), k its number (1, 2, ...). A
// test build with -DPPTRAIN_MUTATE_DROP_WAIT=k leaves out wait k, and the emulated parity tests
// must then fail (tests/gpu_emu/CMakeLists.txt): proof that the emulator sees a missing wait.
// Normal builds run every wait.
#ifndef PPTRAIN_MUTATE_DROP_WAIT
#define PPTRAIN_MUTATE_DROP_WAIT 0
#endif
#define REQUIRED_WAIT(k, call)                     \
    do {                                           \
        if ((k) != PPTRAIN_MUTATE_DROP_WAIT) call; \
    } while (0)

#endif
