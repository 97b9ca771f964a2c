// Hugging Face interop, against transformers (tests/reference/hf_interop.py made the fixture
// by loading a pptrain checkpoint folder with LlamaForCausalLM.from_pretrained):
//  - the committed checkpoint is the one transformers loaded (sha256 in the fixture metadata);
//  - pptrain reading that folder (index + 4 shards) computes transformers' logits to 1e-5;
//  - `pptrain export` of it (storage/hf_export) writes a single-file folder that reads back
//    bitwise in F32, and within bf16 rounding in BF16, with a config.json that parses back.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cpu/kernels.h"
#include "storage/atomic_file.h"
#include "storage/checkpoint.h"
#include "storage/hf_export.h"
#include "storage/safetensors.h"
#include "test_util.h"

#define FIXTURE PPTRAIN_SOURCE_DIR "/tests/fixtures/hf_interop"

// Logits (B*T, V) of the whole model in sm for tokens (B*T).
static float *logits_of(StageModel *sm, const int32_t *tokens, int B, int T) {
    StageActs *acts = stage_acts_create(sm, B, T);
    stage_acts_keep_logits(acts, true);
    int32_t *targets = malloc((size_t)B * T * sizeof(int32_t));
    for (int i = 0; i < B * T; i++) targets[i] = -1;   // no loss: the logits stay as computed
    stage_forward(sm, acts, tokens, NULL, targets, 1.0f);
    const size_t n = (size_t)B * T * sm->cfg.vocab;
    float *out = malloc(n * sizeof(float));
    memcpy(out, stage_acts_logits(acts), n * sizeof(float));
    stage_acts_free(acts);
    free(targets);
    return out;
}

static StageModel *load(const char *dir, Error *err) {
    Checkpoint *c = ckpt_open(dir, false, CKPT_OPEN_VERIFY, err);
    if (!c) return NULL;
    StageModel *sm = ckpt_load_model(c, err);
    ckpt_close(c);
    return sm;
}

static void check_fixture_files(const SafetensorsFile *fx) {
    int checked = 0;
    for (int i = 0; i < safetensors_metadata_count(fx); i++) {
        const char *key = safetensors_metadata_key(fx, i);
        if (strncmp(key, "sha256:", 7) != 0) continue;
        char path[4096], hex[65];
        snprintf(path, sizeof path, "%s/checkpoint/%s", FIXTURE, key + 7);
        Error err;
        int64_t bytes;
        CHECK(file_sha256(path, hex, &bytes, &err) == 0 && strcmp(hex, safetensors_metadata_value(fx, i)) == 0,
              "%s is not the file transformers loaded", path);
        checked++;
    }
    CHECK(checked == 6, "the fixture lists %d files, expected 4 shards + index + config", checked);
}

int main(void) {
    Error err = {{0}};
    SafetensorsFile *fx = safetensors_open(FIXTURE "/logits.safetensors", &err);
    CHECK(fx != NULL, "%s", err.msg);
    if (!fx) return test_finish();
    check_fixture_files(fx);
    const SafetensorsTensor *tok = safetensors_find(fx, "tokens"), *ref = safetensors_find(fx, "logits");
    CHECK(tok && ref && tok->ndim == 2 && tok->dtype == ST_I32, "fixture tensors");
    if (!tok || !ref) return test_finish();
    const int B = (int)tok->shape[0], T = (int)tok->shape[1];
    const int32_t *tokens = tok->data;
    float *hf = malloc(ref->numel * sizeof(float));
    safetensors_to_f32(ref, hf, ref->numel, &err);

    // pptrain reads the sharded checkpoint folder that transformers read.
    StageModel *sm = load(FIXTURE "/checkpoint", &err);
    CHECK(sm != NULL, "%s", err.msg);
    if (!sm) return test_finish();
    CHECK((size_t)B * T * sm->cfg.vocab == ref->numel, "logits shape");
    float *ours = logits_of(sm, tokens, B, T);
    const double diff = rel_norm_diff(ours, hf, ref->numel);
    printf("pptrain vs transformers logits on the checkpoint: |a-b|/|b| = %.3g\n", diff);
    CHECK(diff <= 1e-5, "logits differ from transformers by %.3g", diff);

    // Export (F32) reads back bitwise; BF16 within its rounding.
    char tmpl[] = "/tmp/pptrain-hf-XXXXXX";
    const char *dir = mkdtemp(tmpl);
    char f32_dir[256], bf16_dir[256];
    snprintf(f32_dir, sizeof f32_dir, "%s/f32", dir);
    snprintf(bf16_dir, sizeof bf16_dir, "%s/bf16", dir);
    HfExportInfo info;
    CHECK(hf_export(FIXTURE "/checkpoint", f32_dir, false, &info, &err) == 0, "%s", err.msg);
    CHECK(info.params == 329152 && info.tensors == 75, "export counts %lld params, %d tensors", (long long)info.params,
          info.tensors);
    CHECK(hf_export(FIXTURE "/checkpoint", f32_dir, false, &info, &err) != 0 && strstr(err.msg, "already exists"),
          "a second export into the same folder is refused: %s", err.msg);
    CHECK(hf_export(FIXTURE "/checkpoint", bf16_dir, true, &info, &err) == 0, "%s", err.msg);
    StageModel *f32 = load(f32_dir, &err), *bf16 = load(bf16_dir, &err);
    CHECK(f32 && bf16, "reading the exports back: %s", err.msg);
    if (f32 && bf16) {
        CHECK(f32->numel == sm->numel && memcmp(f32->weights, sm->weights, sm->numel * sizeof(float)) == 0,
              "F32 export is bitwise the checkpoint");
        CHECK(f32->cfg.hidden == sm->cfg.hidden && f32->cfg.rms_eps == sm->cfg.rms_eps &&
              f32->cfg.rope_theta == sm->cfg.rope_theta && f32->cfg.kv_heads == sm->cfg.kv_heads,
              "config.json of the export parses back to the same model");
        const double w = rel_norm_diff(bf16->weights, sm->weights, sm->numel);
        CHECK(w > 0 && w < 4e-3, "BF16 export is the weights rounded to bf16 (%.3g)", w);
        float *lb = logits_of(bf16, tokens, B, T);
        const double d = rel_norm_diff(lb, hf, ref->numel);
        printf("BF16 export vs transformers (F32): %.3g\n", d);
        CHECK(d < 1e-2, "BF16 export logits within 1e-2 (%.3g)", d);
        free(lb);
    }
    // A shard the index names but that is missing is one clear error.
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/broken && cp %s/checkpoint/*.json %s/checkpoint/model-0000[123]* %s/broken/", dir,
             FIXTURE, FIXTURE, dir);
    CHECK(system(cmd) == 0, "copying the fixture");
    char broken[300];
    snprintf(broken, sizeof broken, "%s/broken", dir);
    CHECK(load(broken, &err) == NULL && strstr(err.msg, "model-00004-of-00004.safetensors"),
          "an index naming a missing shard names it: %s", err.msg);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    stage_free(f32);
    stage_free(bf16);
    stage_free(sm);
    free(ours);
    free(hf);
    safetensors_close(fx);
    return test_finish();
}
