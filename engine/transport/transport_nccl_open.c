// engine/transport/transport_nccl_open: the nccl row's open function (transport_nccl_open.h):
// the set-up every rank must agree on before NCCL's own initialization, which has no timeout.
#include "engine/transport/transport_nccl_open.h"

#include "engine/transport/transport_nccl.h"

// Every rank's verdict on its own set-up (failed: 1), agreed over the world through ctl's
// collective (which has a timeout) before NCCL's collective initialization (which has none):
// a rank that failed would leave the others waiting there.
static int agree(Transport *ctl, int self, int failed, Error *err) {
    double any = failed;
    Error why;
    if (transport_allreduce_f64(ctl, self, GROUP_WORLD, &any, 1, &why) != TRANSPORT_OK) {
        if (!failed) error_set(err, "--transport nccl: the ranks could not agree on their set-up: %s", why.msg);
        return -1;
    }
    if (any > 0 && !failed) error_set(err, "--transport nccl: another rank could not use its GPU (see its error line)");
    return any > 0 ? -1 : 0;
}

// The nccl transport carries its host collectives on an MPI transport, made first: it says
// which rank this process is and carries the agreement before NCCL exists. Each edge's
// messages must arrive in the order they are sent (schedule_check_fifo): NCCL has no tags.
int transport_nccl_open(const TransportSetup *s, TransportOpened *out, Error *err) {
    const Schedule *sched = s->sched;
    const int max_tag = 2 * sched->n_microbatches * sched->n_stages;
    Transport *ctl = transport_mpi_create(s->mpi_comm, s->P, s->D, 64, 1, max_tag, s->timeout_s, err);   // no messages
    if (!ctl) return -1;
    out->self = transport_mpi_rank(ctl);
    const int failed = schedule_check_fifo(sched, err) || transport_nccl_pick_device(s->mpi_comm, &out->gpu, err) ||
                       s->set_device(out->gpu, err);
    if (agree(ctl, out->self, failed, err)) {
        transport_free(ctl);
        return -1;
    }
    out->tp = transport_nccl_create(ctl, s->mpi_comm, s->P, s->D, sched->n_stages, sched->stage_rank, s->msg_bytes,
                                    s->capacity, max_tag, s->timeout_s, out->gpu, err);
    return out->tp ? 0 : -1;
}
