// engine/transport/transport_nccl_open: how the transport registry opens the nccl transport
// for a run (its row's open function; built only with NCCL).
#ifndef PPTRAIN_TRANSPORT_NCCL_OPEN_H
#define PPTRAIN_TRANSPORT_NCCL_OPEN_H
#include "engine/transport/transport_setup.h"

// An MPI transport first (it says which rank this process is and carries the ranks'
// agreement), then this rank's GPU picked and made current, then NCCL over both (the nccl
// transport owns the MPI one from there). -1 with one line in err.
int transport_nccl_open(const TransportSetup *setup, TransportOpened *out, Error *err);
#endif
