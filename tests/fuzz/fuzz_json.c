// libFuzzer target: the JSON readers of the checkpoint path on arbitrary text: a Hugging Face
// config.json (engine/model/model_config), a run config (engine/run_json) and a checkpoint's
// trainer_state.json (storage/checkpoint), and the door they share (engine/json_read: the
// duplicate-key walk, on the raw bytes without a terminating NUL). Each must refuse or accept
// without crashing, reading out of bounds or leaking (ASan + UBSan + LeakSanitizer).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/json_read.h"
#include "engine/run_json.h"
#include "storage/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Error door;
    cJSON_Delete(json_parse_object((const char *)data, size, "fuzz", &door));
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    Error err;
    ModelConfig m;
    model_config_from_json_text(&m, text, "fuzz", &err);
    RunConfig rc = run_config_defaults();
    PipelineOptions po = pipeline_options_defaults();
    run_json_parse(text, "fuzz", &rc, &po, &err);
    CkptState st;
    if (ckpt_state_parse(text, "fuzz", &st, &err) == 0) ckpt_state_clear(&st);
    free(text);
    return 0;
}
