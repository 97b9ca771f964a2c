// RunConfig's defaults and its cross-field checks.
#include "engine/run_config.h"

#include <string.h>

RunConfig run_config_defaults(void) {
    RunConfig rc;
    memset(&rc, 0, sizeof rc);
    Error unused;
    model_config_preset(&rc.model, "tiny", &unused);
    rc.optim = optim_defaults();
    rc.batching = BATCHING_PAD;
    rc.batch = 8;
    rc.seq_len = 64;
    rc.microbatches = 1;
    rc.steps = 20;
    rc.seed = 1337;
    rc.val_batches = 4;
    return rc;
}

int run_config_validate(const RunConfig *rc, Error *err) {
    if (model_config_validate(&rc->model, err)) return -1;
    if (rc->batch % rc->microbatches != 0) {
        error_set(err, "--batch %d is not divisible by --microbatches %d", rc->batch, rc->microbatches);
        return -1;
    }
    if (rc->seq_len > rc->model.max_positions) {
        error_set(err, "--seq %d exceeds the model's max_position_embeddings (%d)",
                  rc->seq_len, rc->model.max_positions);
        return -1;
    }
    if (rc->optim.warmup_steps > rc->steps) {
        error_set(err, "--warmup %d exceeds --steps %d", rc->optim.warmup_steps, rc->steps);
        return -1;
    }
    return 0;
}

