// engine/transport/transport_registry: the table of transports (transport_registry.h) and how
// each row opens its transport for a run.
#include "engine/transport/transport_registry.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#ifdef PPTRAIN_HAVE_NCCL
#include "engine/transport/transport_nccl_open.h"
#endif

// Ranks as threads of this process: every rank's mailbox is here, so this process is rank 0's.
static int open_local(const TransportSetup *s, TransportOpened *out, Error *err) {
    (void)err;
    out->tp = transport_local_create_mem(s->P, s->D, s->msg_bytes, s->capacity, s->timeout_s, s->mem);
    out->self = 0;
    return 0;
}

// This process as one rank of an mpirun job; tags stay below 2 x M x S (transport_tag).
static int open_mpi(const TransportSetup *s, TransportOpened *out, Error *err) {
    const int max_tag = 2 * s->sched->n_microbatches * s->sched->n_stages;
    out->tp = transport_mpi_create(s->mpi_comm, s->P, s->D, s->msg_bytes, s->capacity, max_tag, s->timeout_s, err);
    if (!out->tp) return -1;
    out->self = transport_mpi_rank(out->tp);
    return 0;
}

#ifdef PPTRAIN_HAVE_NCCL
#define OPEN_NCCL transport_nccl_open
#else
#define OPEN_NCCL NULL
#endif

const TransportInfo TRANSPORT_REGISTRY[] = {
    [TRANSPORT_KIND_LOCAL] = {"local", false, false, false, open_local, NULL},
    [TRANSPORT_KIND_MPI] = {"mpi", true, false, false, open_mpi, NULL},
    [TRANSPORT_KIND_NCCL] = {"nccl", true, true, true, OPEN_NCCL, "this pptrain was built without NCCL"},
};
const int TRANSPORT_COUNT = (int)(sizeof TRANSPORT_REGISTRY / sizeof TRANSPORT_REGISTRY[0]);

const TransportInfo *transport_info(TransportKind kind) {
    assert((int)kind >= 0 && (int)kind < TRANSPORT_COUNT);
    return &TRANSPORT_REGISTRY[kind];
}

const char *transport_kind_name(TransportKind kind) { return transport_info(kind)->name; }

int transport_kind_parse(const char *name, TransportKind *kind) {
    for (int i = 0; i < TRANSPORT_COUNT; i++)
        if (strcmp(name, TRANSPORT_REGISTRY[i].name) == 0) {
            *kind = (TransportKind)i;
            return 0;
        }
    return -1;
}

void transport_names_text(char *buf, size_t size, const char *sep) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < TRANSPORT_COUNT && len < size; i++) {
        const char *before = i == 0 ? "" : sep ? sep : i == TRANSPORT_COUNT - 1 ? " or " : ", ";
        len += (size_t)snprintf(buf + len, size - len, "%s%s", before, TRANSPORT_REGISTRY[i].name);
    }
}

int transport_open(TransportKind kind, const TransportSetup *setup, TransportOpened *out, Error *err) {
    const TransportInfo *info = transport_info(kind);
    *out = (TransportOpened){.tp = NULL, .self = 0, .gpu = -1};
    if (!info->open) {
        error_set(err, "--transport %s: %s", info->name, info->missing);
        return -1;
    }
    return info->open(setup, out, err);
}
