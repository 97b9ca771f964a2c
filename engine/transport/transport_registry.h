// engine/transport/transport_registry: the one table of transports, as the stage-device table
// is of device backends (engine/model/stage_devices.c). A row says what the rest of pptrain
// needs to know of a transport: its --transport name, whether each rank is a process of its
// own (an mpirun job) or a thread of this one, whether its collectives take device memory, and
// how to open it. --help, the parser's errors, the run store's name and the pipeline's choices
// all read the table, so a new transport is its file, its row here and a CMake line.
#ifndef PPTRAIN_TRANSPORT_REGISTRY_H
#define PPTRAIN_TRANSPORT_REGISTRY_H
#include <stdbool.h>
#include <stddef.h>

#include "engine/error.h"
#include "engine/transport/transport_setup.h"

// A row's index in TRANSPORT_REGISTRY (what PipelineOptions.transport and the tests hold).
typedef enum {
    TRANSPORT_KIND_LOCAL = 0,  // ranks as threads of this process
    TRANSPORT_KIND_MPI = 1,    // this process is one rank of an mpirun job
    TRANSPORT_KIND_NCCL = 2,   // one rank of an mpirun job, one GPU each, NCCL between them
} TransportKind;

typedef struct {
    const char *name;          // what --transport takes
    bool multi_process;        // each rank a process of an mpirun job (MPI is initialized for it)
    bool device_collectives;   // messages and the float all-reduce take device memory (--device cuda)
    // A posted receive holds a GPU stream until its message comes (NCCL: a kernel spinning on
    // the GPU, and NCCL does not promise progress to concurrent communicators), so the runtime
    // posts one receive at a time, the next one, not all of a step's at its start.
    bool post_one_ahead;
    TransportOpen open;        // NULL where this build lacks it
    const char *missing;       // then why: "this pptrain was built without NCCL"
} TransportInfo;
extern const TransportInfo TRANSPORT_REGISTRY[];
extern const int TRANSPORT_COUNT;

const TransportInfo *transport_info(TransportKind kind);
// "local", "mpi", "nccl"; and back (-1 for another word).
const char *transport_kind_name(TransportKind kind);
int transport_kind_parse(const char *name, TransportKind *kind);
// The names in table order, joined by sep ("local|mpi|nccl"; ", " and a last " or " read
// "local, mpi or nccl" when sep is NULL).
void transport_names_text(char *buf, size_t size, const char *sep);
static inline bool transport_multi_process(TransportKind kind) { return transport_info(kind)->multi_process; }
static inline bool transport_device_collectives(TransportKind kind) {
    return transport_info(kind)->device_collectives;
}
static inline bool transport_post_one_ahead(TransportKind kind) { return transport_info(kind)->post_one_ahead; }

// Opens the row's transport. -1 with one line in err ("--transport nccl: this pptrain was
// built without NCCL", or the row's own failure).
int transport_open(TransportKind kind, const TransportSetup *setup, TransportOpened *out, Error *err);
#endif
