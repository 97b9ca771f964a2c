// engine/transport/transport_setup: what opening a transport for a run takes and gives, shared
// by the transport registry (transport_registry.h) and the rows' open functions in their own
// files (transport_nccl_open.h), so neither includes the other's header.
#ifndef PPTRAIN_TRANSPORT_SETUP_H
#define PPTRAIN_TRANSPORT_SETUP_H
#include <stddef.h>

#include "engine/error.h"
#include "engine/schedule/schedule.h"
#include "engine/transport/transport.h"

// What opening a transport for a run takes; every row reads the fields it needs.
typedef struct {
    const void *mpi_comm;          // an MPI_Comm by pointer (NULL = MPI_COMM_WORLD); multi-process rows
    int P, D;                      // pipeline ranks, data-parallel replicas: a world of P x D
    const Schedule *sched;         // validated and lowered: its stages, their ranks, its message order
    size_t msg_bytes;              // the largest message
    int capacity;                  // messages one rank may hold unconsumed (its receives per step)
    double timeout_s;              // longest wait of one receive or collective
    const TransportMemory *mem;    // local: where the mailboxes live (NULL: host memory)
    // Device-collective rows: makes this rank's GPU current (the stage backend's set_device).
    int (*set_device)(int gpu, Error *err);
} TransportSetup;

typedef struct {
    Transport *tp;   // the world transport
    int self;        // this process's world rank (0 when the ranks are threads of it)
    int gpu;         // the GPU the transport chose for this process; -1: it chose none
} TransportOpened;

typedef int (*TransportOpen)(const TransportSetup *setup, TransportOpened *out, Error *err);

#endif
