// The CUDA context (stream, cuBLAS/cuBLASLt handles, workspace, scratch arena), device
// discovery that never aborts, and the one-line failure of the CHECK macros.
#include <stdio.h>
#include <stdlib.h>
#include "kernels/cuda/common.cuh"

// cuBLASLt workspace: 32 MiB, what NVIDIA recommends for Hopper (4 MiB suffice before it).
#define CUDA_LT_WORKSPACE_BYTES ((size_t)32 << 20)

static CudaLastWords last_words;
static void *last_words_arg;

extern "C" void cuda_check_on_fail(CudaLastWords fn, void *arg) {
    last_words = fn;
    last_words_arg = arg;
}

static int failing_rank = -1;

extern "C" void cuda_check_name_rank(int rank) { failing_rank = rank; }

extern "C" void cuda_check_fail(const char *library, const char *message, const char *name,
                                const char *call, const char *file, int line) {
    char who[32] = "";
    if (failing_rank >= 0) snprintf(who, sizeof who, "rank %d: ", failing_rank);
    fprintf(stderr, "pptrain: %s%s error: %s [%s] in %s at %s:%d\n", who, library,
            message ? message : "?", name ? name : "?", call, file, line);
    fflush(stderr);
    const CudaLastWords fn = last_words;
    last_words = NULL;   // a CHECK failing inside the last words exits here at once
    if (fn) fn(last_words_arg);
    exit(EXIT_FAILURE);
}

extern "C" int cuda_device_count(void) {
    int n = 0;
    // Without a driver this returns cudaErrorInsufficientDriver / cudaErrorNoDevice; clear
    // the sticky last-error so later checked calls do not report it.
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

// What cudaGetDeviceCount's failure means to someone at a shell, in plain words; the
// runtime's own name follows in parentheses for a search.
static const char *plain_reason(cudaError_t err) {
    switch (err) {
    case cudaErrorInsufficientDriver: return "no NVIDIA driver is loaded, or it is older than this CUDA runtime needs";
    case cudaErrorNoDevice: return "no NVIDIA GPU found";
    case cudaErrorDevicesUnavailable: return "every NVIDIA GPU is busy (exclusive mode) or unavailable";
    case cudaErrorInitializationError: return "the NVIDIA driver failed to initialize";
    case cudaErrorSystemDriverMismatch: return "the NVIDIA driver's user and kernel parts differ in version (reboot or reinstall it)";
    case cudaErrorCompatNotSupportedOnDevice: return "this GPU does not support the CUDA forward-compatibility package installed";
    default: return NULL;
    }
}

extern "C" const char *cuda_unavailable_reason(void) {
    static thread_local char reason[320];   // stage threads attach their GPUs at once
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        const char *plain = plain_reason(err);
        if (plain)
            snprintf(reason, sizeof reason, "%s (%s)", plain, cudaGetErrorName(err));
        else
            snprintf(reason, sizeof reason, "no CUDA device usable: %s (%s)", cudaGetErrorString(err),
                     cudaGetErrorName(err));
        return reason;
    }
    if (n == 0) {
        snprintf(reason, sizeof reason, "no CUDA device visible (check CUDA_VISIBLE_DEVICES)");
        return reason;
    }
    return NULL;
}

// A kernel that does nothing: whether the runtime finds code for it on a device says whether
// this build's fat binary holds code that device loads (SASS for its architecture, or PTX it
// can compile).
__global__ static void probe_kernel(void) {}

extern "C" const char *cuda_device_unsupported_reason(int device) {
    static thread_local char reason[320];   // stage threads attach their GPUs at once
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;   // cuda_ctx_create reports what is wrong with the device
    }
    cudaFuncAttributes attr;
    int current = 0;
    (void)cudaGetDevice(&current);
    const bool switched = current != device && cudaSetDevice(device) == cudaSuccess;
    const bool has_code = cudaFuncGetAttributes(&attr, probe_kernel) == cudaSuccess;
    (void)cudaGetLastError();
    if (switched) (void)cudaSetDevice(current);
    const CudaDeviceFacts facts = {device, prop.name, prop.major, prop.minor, has_code};
    return cuda_support_problem(reason, sizeof reason, &facts);
}

extern "C" CudaCtx *cuda_ctx_create(int device) {
    int n = cuda_device_count();
    if (device < 0 || device >= n) {
        const char *why = cuda_unavailable_reason();
        fprintf(stderr, "pptrain: CUDA device %d requested but %s\n", device,
                why ? why : "it does not exist");
        exit(EXIT_FAILURE);
    }
    CudaCtx *ctx = (CudaCtx *)calloc(1, sizeof *ctx);
    if (!ctx) {
        fprintf(stderr, "pptrain: out of host memory creating a CUDA context\n");
        exit(EXIT_FAILURE);
    }
    ctx->device = device;
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&ctx->cublas));
    CUBLAS_CHECK(cublasSetStream(ctx->cublas, ctx->stream));
    // fp32 GEMMs stay fp32: no TF32 (CUBLAS_COMPUTE_32F is passed explicitly as well).
    CUBLAS_CHECK(cublasSetMathMode(ctx->cublas, CUBLAS_DEFAULT_MATH));
    CUBLAS_CHECK(cublasLtCreate(&ctx->lt));
    ctx->lt_workspace_bytes = CUDA_LT_WORKSPACE_BYTES;
    CUDA_CHECK(cudaMalloc(&ctx->lt_workspace, ctx->lt_workspace_bytes));
    ctx->plans = gemm_plans_create(gemm_plan_bytes(), gemm_plan_release);
    CUDA_CHECK(cudaMallocHost((void **)&ctx->fetched, sizeof *ctx->fetched));
    return ctx;
}

extern "C" void cuda_ctx_destroy(CudaCtx *ctx) {
    if (!ctx) return;
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    if (ctx->arena) CUDA_CHECK(cudaFree(ctx->arena));
    CUDA_CHECK(cudaFree(ctx->lt_workspace));
    gemm_plans_destroy(ctx->plans);
    CUDA_CHECK(cudaFreeHost(ctx->fetched));
    CUBLAS_CHECK(cublasLtDestroy(ctx->lt));
    CUBLAS_CHECK(cublasDestroy(ctx->cublas));
    CUDA_CHECK(cudaStreamDestroy(ctx->stream));
    free(ctx);
}

extern "C" cudaStream_t cuda_ctx_stream(const CudaCtx *ctx) { return ctx->stream; }
extern "C" int cuda_ctx_device(const CudaCtx *ctx) { return ctx->device; }

extern "C" void cuda_ctx_synchronize(CudaCtx *ctx) {
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
}

// Into pinned memory, so the copy is queued like any other and the one wait is the sync.
extern "C" double cuda_fetch_double(CudaCtx *ctx, const double *dev_value) {
    CUDA_CHECK(cudaMemcpyAsync(ctx->fetched, dev_value, sizeof *ctx->fetched, cudaMemcpyDeviceToHost,
                               ctx->stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    return *ctx->fetched;
}

extern "C" void cuda_zero(CudaCtx *ctx, void *p, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, ctx->stream));
}

extern "C" void cuda_ctx_reserve(CudaCtx *ctx, size_t bytes) { (void)ctx_arena(ctx, bytes); }

void *ctx_arena(CudaCtx *ctx, size_t bytes) {
    if (bytes <= ctx->arena_bytes) return ctx->arena;
    // Grow by at least half again, so a run's first few shapes settle the size quickly.
    size_t want = ctx->arena_bytes + ctx->arena_bytes / 2;
    if (want < bytes) want = bytes;
    want = cuda_arena_round(want);
    if (ctx->arena) {
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));   // queued work may still read it
        CUDA_CHECK(cudaFree(ctx->arena));
        ctx->arena = NULL;
        ctx->arena_bytes = 0;
    }
    CUDA_CHECK(cudaMalloc(&ctx->arena, want));
    ctx->arena_bytes = want;
    return ctx->arena;
}
