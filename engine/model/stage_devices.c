// The device backends this build has: CMake compiles one only when its toolkit is found
// (PPTRAIN_HAVE_CUDA), as nvtop builds only the vendors it finds, so a build without it has
// no trace of it but the one line below that says so.
#include <assert.h>
#include <stddef.h>

#include "engine/model/stage_ops.h"
#ifdef PPTRAIN_HAVE_CUDA
#include "engine/model/model_cuda.h"
#endif

static const StageDevice *const built[] = {
#ifdef PPTRAIN_HAVE_CUDA
    &stage_cuda_device,
#endif
    NULL,
};

// The line of a build without the kind's backend.
static const char *const missing[] = {[DEVICE_CUDA] = "this pptrain was built without the CUDA toolkit"};

const StageDevice *stage_device_find(DeviceKind kind, Error *err) {
    assert(kind != DEVICE_CPU);   // CPU stages need no backend found: stage_create makes them
    for (int i = 0; built[i]; i++) {
        if (built[i]->kind != kind) continue;
        const char *why = built[i]->unavailable();
        if (!why) return built[i];
        error_set(err, "%s", why);
        return NULL;
    }
    error_set(err, "%s", missing[kind]);
    return NULL;
}
