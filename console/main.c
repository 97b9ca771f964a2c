// pptrain: the command-line entry point. Dispatches to one subcommand per file (cmd_*.c).
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "console/cli.h"
#include "console/cmd/cmd_check.h"
#include "console/cmd/cmd_export.h"
#include "console/cmd/cmd_console.h"
#include "console/cmd/cmd_history.h"
#include "console/cmd/cmd_plan.h"
#include "console/cmd/cmd_sample.h"
#include "console/cmd/cmd_tokenize.h"
#include "console/cmd/cmd_train.h"
#include "console/cmd/cmd_watch.h"
#include "console/version.h"
#include "kernels/cpu/blas_core.h"

// pptrain_emu's main.c is compiled with PPTRAIN_GPU_EMULATED=1 (CMakeLists.txt).
#ifndef PPTRAIN_GPU_EMULATED
#define PPTRAIN_GPU_EMULATED 0
#endif
const bool cli_gpu_emulated = PPTRAIN_GPU_EMULATED;

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} Command;

static const Command COMMANDS[] = {
    {"console", cmd_console, "the curses console (also what pptrain alone opens)"},
    {"train", cmd_train, "a headless training run"},
    {"check", cmd_check, "one batch pipelined vs single-device: loss and gradient differences"},
    {"plan", cmd_plan, "simulate a schedule: timeline, bubble, peak activations; --from-run RUN: the next layout"},
    {"history", cmd_history, "query the run store: list, show, compare, export"},
    {"sample", cmd_sample, "text from a run's checkpoint or a Hugging Face folder, generated on the pipeline"},
    {"export", cmd_export, "a checkpoint as a plain Hugging Face folder (model.safetensors, config.json)"},
    {"tokenize", cmd_tokenize, "text -> llm.c token shards with a Hugging Face tokenizer.json"},
    {"watch", cmd_watch, "the live console, read-only, for a run another process is writing"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: pptrain [COMMAND] [options]   (pptrain COMMAND --help for its options;\n"
                 "       pptrain alone opens the console; pptrain --version)\n\n");
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        fprintf(out, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].help);
}

// OpenMP threads that wait for work spin for about 3 ms before they sleep: libgomp's default,
// read from OMP_WAIT_POLICY and GOMP_SPINCOUNT when it loads, before main can set either. On
// cores that other processes keep busy, those spins take the time slices the working threads
// need (docs/benchmarks.md, "Threads on a shared machine": beside a busy loop on a 2-core machine the
// one-stage example of docs/usage.md took 5.0-6.8x its one-thread time with two spinning threads,
// 0.28-0.54x with two that sleep when they wait). So unless the user chose a policy, pptrain
// runs itself again with OMP_WAIT_POLICY=PASSIVE, before anything else has happened; every
// mpirun rank does the same. Where /proc/self/exe cannot be run, it carries on as it is.
static void sleep_when_waiting(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);
}

// The flags of any command that take no value. A command's name right after one of these is the
// command; right after any other flag it is that flag's value: `pptrain --db runs.db history
// list` and `pptrain --json history list` run history, `pptrain --data train` opens the console
// on a folder named train.
static const char *const SWITCHES[] = {"--ascii", "--bf16", "--csv", "--dump-csv", "--help", "-h",
                                       "--json", "--list", "--start", "--with-comm"};

static const Command *find_command(const char *name) {
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (strcmp(name, COMMANDS[i].name) == 0) return &COMMANDS[i];
    return NULL;
}

static bool is_switch(const char *flag) {
    for (size_t i = 0; i < sizeof SWITCHES / sizeof SWITCHES[0]; i++)
        if (strcmp(flag, SWITCHES[i]) == 0) return true;
    return false;
}

// Options before the command (`pptrain --db X history list`): the command's index, or 0 when
// the first word that is not a flag's value names no command (the console's options alone).
static int command_after_options(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') continue;
        if (argv[i - 1][0] == '-' && i > 1 && !is_switch(argv[i - 1])) continue;   // a flag's value
        return find_command(argv[i]) ? i : 0;
    }
    return 0;
}

// argv with the command moved to the front: PROG COMMAND OPTIONS-BEFORE-IT REST.
static void command_first(int argc, char **argv, int at) {
    char *cmd = argv[at];
    memmove(&argv[2], &argv[1], sizeof(char *) * (size_t)(at - 1));
    argv[1] = cmd;
    (void)argc;
}

int main(int argc, char **argv) {
    sleep_when_waiting(argv);
    // A file over the size limit (ulimit -f) fails its write with EFBIG and one error line,
    // instead of killing the process mid-checkpoint.
    signal(SIGXFSZ, SIG_IGN);
    // GPU runs (engine/model/model_cuda.h, transport_nccl.h): posted NCCL receives spin on the GPU
    // during a step, so nothing in a step may wait for the whole device. CUDA loads kernels
    // lazily by default, and a first launch may synchronize the context; NCCL may connect
    // collective algorithms at their first use. Both happen at start-up instead, unless the
    // user's environment says otherwise (before any CUDA call: --device is parsed later).
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
    setenv("NCCL_RUNTIME_CONNECT", "0", 0);
    // A GPU runs each stream's work in one of CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8
    // by default); more streams than queues share them, and work of one waits behind another's:
    // an NCCL send behind a receive spinning on its peer. A zb-v middle rank at P=4 has about 8
    // link streams besides its compute and copy streams, so the most the driver allows (32).
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        if (argc > 2) {
            fprintf(stderr, "pptrain: %s takes nothing after it ('%s')\n", argv[1], argv[2]);
            return 2;
        }
        version_print(stdout);
        return 0;
    }
    // A cap on the CPU kernels that this CPU cannot run is the user's to fix (blas_core.h);
    // one it can run is noted in the run's banner and the console's header.
    char blas[512];
    if (blas_core_check(blas, sizeof blas) == 2) {
        fprintf(stderr, "pptrain: %s\n", blas);
        return 2;
    }
    // Options before a command go after it; options only, or nothing: the console.
    if (argc >= 2 && argv[1][0] == '-') {
        const int at = command_after_options(argc, argv);
        if (at > 1) command_first(argc, argv, at);
    }
    if (argc < 2 || (argv[1][0] == '-' && strcmp(argv[1], "--help") && strcmp(argv[1], "-h")))
        return cmd_console(argc, argv);
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    const Command *c = find_command(argv[1]);
    if (c) return c->run(argc, argv);
    fprintf(stderr, "pptrain: unknown command '%s' (see pptrain --help)\n", argv[1]);
    return 2;
}
