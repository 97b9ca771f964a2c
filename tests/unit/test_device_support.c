// tests/unit/test_device_support.c: which GPUs the CUDA kernels run on (cuda_support_problem,
// kernels/cuda/device_support.c), the decision and the one line a user reads, for the devices
// people bring: a T4 and a V100 (under the 8.0 floor: refused, pointing at --device cpu), an
// A100, an RTX 4090 and an H100 with a default build (run), and an A100 with a build for 9.0
// only (refused, naming the cmake flag that fixes it). Needs no GPU and no toolkit.
#include <stdio.h>
#include <string.h>

#define PPTRAIN_KERNELS_CUDA_SIZES_ONLY
#include "kernels/cuda/kernels_cuda.h"
#include "tests/unit/test_util.h"

// The line for one device, or "" when it runs.
static const char *verdict(const char *name, int major, int minor, int has_code) {
    static char buf[320];
    const CudaDeviceFacts f = {1, name, major, minor, has_code};
    const char *why = cuda_support_problem(buf, sizeof buf, &f);
    return why ? why : "";
}

int main(void) {
    const char *t4 = verdict("Tesla T4", 7, 5, 1);
    CHECK(strstr(t4, "GPU 1 (Tesla T4) has compute capability 7.5") != NULL, "T4: %s", t4);
    CHECK(strstr(t4, "need 8.0 or newer") && strstr(t4, "use --device cpu"), "T4: %s", t4);
    CHECK(strchr(t4, '\n') == NULL, "one line: %s", t4);
    const char *v100 = verdict("Tesla V100-SXM2-16GB", 7, 0, 0);   // no code either: the floor speaks first
    CHECK(strstr(v100, "compute capability 7.0") && strstr(v100, "--device cpu"), "V100: %s", v100);
    CHECK(*verdict("NVIDIA A100-SXM4-80GB", 8, 0, 1) == '\0', "A100 runs");
    CHECK(*verdict("NVIDIA GeForce RTX 4090", 8, 9, 1) == '\0', "RTX 4090 runs (sm_80 code loads on 8.9)");
    CHECK(*verdict("NVIDIA H100 80GB HBM3", 9, 0, 1) == '\0', "H100 runs");
    const char *a100 = verdict("NVIDIA A100-SXM4-80GB", 8, 0, 0);
    CHECK(strstr(a100, "holds no GPU code for GPU 1 (NVIDIA A100-SXM4-80GB, compute capability 8.0)") != NULL,
              "A100, build for 9.0 only: %s", a100);
    CHECK(strstr(a100, "cmake -DCMAKE_CUDA_ARCHITECTURES=80") != NULL, "A100 rebuild hint: %s", a100);
    return test_finish();
}
