// console/version: `pptrain --version` (see version.h).
#include "console/version.h"

#include <cjson/cJSON.h>
#include <curses.h>
#include <openssl/crypto.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "console/cli.h"
#include "engine/transport/mpi_process.h"
#include "kernels/cpu/blas_core.h"

#ifndef PPTRAIN_VERSION
#error "CMakeLists.txt defines PPTRAIN_VERSION"
#endif

static void print_gpu(FILE *out) {
#if defined(PPTRAIN_HAVE_CUDA)
    fprintf(out, "  GPU stages: CUDA %s%s", PPTRAIN_CUDA_VERSION,
#if defined(PPTRAIN_HAVE_NCCL)
            ", NCCL"
#else
            ", no NCCL (--transport nccl unavailable)"
#endif
    );
    fprintf(out, "%s\n", cli_gpu_emulated ? "; emulated on the CPU (pptrain_emu, for tests)" : "");
#else
    fprintf(out, "  GPU stages: none (built without the CUDA toolkit)\n");
#endif
}

void version_print(FILE *out) {
    fprintf(out, "pptrain %s\n", PPTRAIN_VERSION);
    print_gpu(out);
    char mpi[256];
    mpi_process_library_version(mpi, sizeof mpi);
    fprintf(out, "  %s, SQLite %s, %s, cJSON %s, %s\n", mpi, sqlite3_libversion(),
            curses_version(), cJSON_Version(), OpenSSL_version(OPENSSL_VERSION));
    char core[512];
    fprintf(out, "  CPU products: %s\n", blas_core_describe(core, sizeof core));
    // main sets OMP_WAIT_POLICY=PASSIVE unless the user chose (console/main.c).
    const char *wait = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    if (spin) fprintf(out, "  OpenMP waiting threads: GOMP_SPINCOUNT=%s%s%s\n", spin, wait ? ", OMP_WAIT_POLICY=" : "",
                      wait ? wait : "");
    else if (wait) fprintf(out, "  OpenMP waiting threads: OMP_WAIT_POLICY=%s\n", wait);
    else fprintf(out, "  OpenMP waiting threads: libgomp's default (they spin about 3 ms, then sleep)\n");
}
