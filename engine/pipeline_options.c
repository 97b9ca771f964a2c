// The pipeline's options (engine/pipeline.h): their defaults, and the checks that refuse, in
// one line each, what no pipeline can run: the flags' words are spelled here, so the errors
// say them as the user typed them.
#include <stdio.h>
#include <string.h>

#include "engine/model/stage_ops.h"
#include "engine/pipeline.h"

PipelineOptions pipeline_options_defaults(void) {
    PipelineOptions o;
    memset(&o, 0, sizeof o);
    o.ranks = 1;
    o.dp = 1;
    snprintf(o.schedule, sizeof o.schedule, "gpipe");
    o.timeout_s = TRANSPORT_DEFAULT_TIMEOUT_S;
    o.transport = TRANSPORT_KIND_LOCAL;
    return o;
}

// What GPU stages cannot do (yet), each in one line.
static int check_cuda_options(const RunConfig *rc, const PipelineOptions *o, Error *err) {
    Error why;
    if (!stage_device_find(DEVICE_CUDA, &why)) {
        error_set(err, "--device cuda: %s", why.msg);
        return -1;
    }
    if (o->recompute) {
        error_set(err, "--device cuda: --recompute all runs on CPU stages only (use --recompute none)");
        return -1;
    }
    if (rc->model.attention_bias || rc->model.mlp_bias) {
        error_set(err, "--device cuda: a model with %s runs on CPU stages only for now",
                  rc->model.attention_bias ? "attention_bias" : "mlp_bias");
        return -1;
    }
    const TransportInfo *t = transport_info(o->transport);
    if (t->multi_process && !t->device_collectives) {
        error_set(err, "--device cuda: under mpirun use --transport %s (%s moves host memory)",
                  transport_kind_name(TRANSPORT_KIND_NCCL), t->name);
        return -1;
    }
    if (!t->open) {
        error_set(err, "--device cuda: --transport %s: %s", t->name, t->missing);
        return -1;
    }
    return 0;
}

int pipeline_check_options(const RunConfig *rc, const PipelineOptions *o, Error *err) {
    if (o->ranks < 1 || o->dp < 1 || o->timeout_s <= 0) {
        error_set(err, "--stages and --dp must be at least 1 (got %d, %d) and the timeout positive (got %g s)",
                  o->ranks, o->dp, o->timeout_s);
        return -1;
    }
    if (o->device == DEVICE_CUDA && check_cuda_options(rc, o, err)) return -1;
    if (o->device != DEVICE_CUDA && transport_device_collectives(o->transport)) {
        error_set(err, "--transport %s moves GPU memory: it needs --device cuda", transport_kind_name(o->transport));
        return -1;
    }
    if (o->dp > 1 && rc->microbatches > 0 && rc->batch % (o->dp * rc->microbatches) != 0) {
        error_set(err, "--batch %d is not divisible by --dp %d x --microbatches %d", rc->batch, o->dp,
                  rc->microbatches);
        return -1;
    }
    return run_config_validate(rc, err);
}
