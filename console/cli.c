#include "console/cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/transport/mpi_process.h"

int cli_parse_int(const char *flag, const char *text, long min, long max, long *out, Error *err) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0') {
        error_set(err, "%s: '%s' is not an integer", flag, text);
        return -1;
    }
    if (v < min || v > max) {
        error_set(err, "%s: %ld is out of range [%ld, %ld]", flag, v, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_u64(const char *flag, const char *text, uint64_t *out, Error *err) {
    char *end = NULL;
    errno = 0;
    if (text[0] == '-') {
        error_set(err, "%s: '%s' is not a non-negative integer", flag, text);
        return -1;
    }
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || *end != '\0') {
        error_set(err, "%s: '%s' is not a non-negative integer", flag, text);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

int cli_parse_float(const char *flag, const char *text, double min, double max, double *out, Error *err) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end != '\0' || !isfinite(v)) {
        error_set(err, "%s: '%s' is not a number", flag, text);
        return -1;
    }
    if (v < min || v > max) {
        error_set(err, "%s: %g is out of range [%g, %g]", flag, v, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

// Splits text at commas into a scratch copy and parses each field as a float.
int cli_parse_float_list(const char *flag, const char *text, double *out, int n_max, Error *err) {
    char buf[512];
    if (strlen(text) >= sizeof buf || text[0] == '\0') {
        error_set(err, "%s: '%s' is not a comma-separated list", flag, text);
        return -1;
    }
    strcpy(buf, text);
    int n = 0;
    char *save = NULL;
    for (char *field = strtok_r(buf, ",", &save); field; field = strtok_r(NULL, ",", &save)) {
        if (n == n_max) {
            error_set(err, "%s: more than %d values in '%s'", flag, n_max, text);
            return -1;
        }
        if (cli_parse_float(flag, field, -1e30, 1e30, &out[n], err)) return -1;
        n++;
    }
    if (n == 0 || text[strlen(text) - 1] == ',' || strstr(text, ",,")) {
        error_set(err, "%s: '%s' has an empty field", flag, text);
        return -1;
    }
    return n;
}

const char *cli_value(int argc, char **argv, int *i, Error *err) {
    if (*i + 1 >= argc) {
        error_set(err, "%s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int cli_fail(const Error *err) {
    fprintf(stderr, "pptrain: %s\n", err->msg);
    return 2;
}

void cli_device_text(DeviceKind device, bool gpu_fp32, char *buf, size_t size) {
    if (device != DEVICE_CUDA) snprintf(buf, size, "cpu fp32");
    else snprintf(buf, size, "cuda %s%s", gpu_fp32 ? "fp32" : "bf16", cli_gpu_emulated ? " (emulated)" : "");
}

// The world's size mpirun started: from the launcher's environment, or, where it names none
// (a PMIx launcher alone), from MPI, which such a launcher's processes can start.
static int launched_world_size(void) {
    const int named = mpi_process_launch_size();
    if (named > 0) return named;
    Error err = {0};
    return mpi_process_init(&err) == 0 ? mpi_process_size() : 1;
}

int cli_refuse_mpirun_copies(const char *command, const TransportKind *transport) {
    if (transport && transport_multi_process(*transport)) return 0;
    const int world = launched_world_size();
    if (world <= 1) return 0;
    if (mpi_process_launch_rank() != 0) {
        mpi_process_wait_for_root();
        return 2;
    }
    if (!transport) {
        fprintf(stderr, "pptrain: started by mpirun as %d processes, but %s runs in one: run it without mpirun\n",
                world, command);
        return 2;
    }
    // The transports that make each process a rank, from the registry: "mpi, or nccl on GPUs".
    char fix[256] = "";
    size_t len = 0;
    for (int i = 0; i < TRANSPORT_COUNT && len < sizeof fix; i++) {
        const TransportInfo *t = &TRANSPORT_REGISTRY[i];
        if (t->multi_process && t->open)
            len += (size_t)snprintf(fix + len, sizeof fix - len, "%s%s%s", len ? ", or " : "", t->name,
                                    t->device_collectives ? " on GPUs" : "");
    }
    fprintf(stderr, "pptrain: started by mpirun as %d processes, but --transport is %s (threads of one process): "
                    "pass --transport %s\n", world, transport_kind_name(*transport), fix);
    return 2;
}
