// Strict command-line value parsing shared by every subcommand. A malformed value is a
// user error: the parser fills Error with "--flag: 'text' is not ..." and returns -1; the
// subcommand prints "pptrain: <msg>" and exits 2 (cli_fail).
#ifndef PPTRAIN_CLI_H
#define PPTRAIN_CLI_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/error.h"
#include "engine/pipeline.h"

// Whole-string integer in [min, max].
int cli_parse_int(const char *flag, const char *text, long min, long max, long *out, Error *err);
int cli_parse_u64(const char *flag, const char *text, uint64_t *out, Error *err);
// Whole-string finite float in [min, max].
int cli_parse_float(const char *flag, const char *text, double min, double max, double *out, Error *err);
// Comma-separated list of n_max or fewer floats (e.g. --cost 1,2,1). Returns count or -1.
int cli_parse_float_list(const char *flag, const char *text, double *out, int n_max, Error *err);

// For "--flag VALUE" loops: returns argv[++*i], or fills err ("--flag needs a value").
const char *cli_value(int argc, char **argv, int *i, Error *err);

// Prints "pptrain: <msg>" to stderr and returns 2 (the exit code for user errors).
int cli_fail(const Error *err);

// Under mpirun as several processes, a command that runs a whole job in each process would
// run it once per process: N runs recorded alike, N checkpoint folders, exit 0. transport:
// the command's --transport, which may be one that makes each process one rank of the job
// (mpi, nccl); NULL for a command without one, which runs in one process (tokenize, export).
// 0 when the command may go on (no mpirun, mpirun -np 1, or such a transport); else 2, the
// exit code, after one line on rank 0's stderr saying what to pass; the other ranks print
// nothing, so the user reads one line, not N, and first give rank 0 time to print it.
int cli_refuse_mpirun_copies(const char *command, const TransportKind *transport);

// Defined by the program's main.c, which is compiled once per program: true in pptrain_emu,
// whose GPUs are emulated on the CPU (tests/gpu_emu).
extern const bool cli_gpu_emulated;
// Where a run's stages compute, for headers: "cpu fp32", "cuda bf16", "cuda fp32 (emulated)".
void cli_device_text(DeviceKind device, bool gpu_fp32, char *buf, size_t size);

#endif
