// Checkpoints written by today's transformers, one per config variant users bring
// (tests/reference/hf_variants.py made tests/fixtures/hf_variants/ with save_pretrained, and
// transformers' float64 logits and loss beside each): pptrain reads each folder as --init-from
// does and computes the same logits (relative norm <= 1e-5) and loss (<= 1e-6). A variant
// pptrain does not implement is refused in one line naming its key, never read as another
// model. The bounds: fp32 against float64 through 2 layers of 32-wide matmuls, about 1e2
// roundings of 6e-8 at worst (measured worst: see the test's output).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cpu/kernels.h"
#include "storage/checkpoint.h"
#include "storage/safetensors.h"
#include "test_util.h"

#define FIXTURES PPTRAIN_SOURCE_DIR "/tests/fixtures/hf_variants"

static double worst_logits, worst_loss;

// The loss and logits (B*T, V) of the whole model for tokens and targets (B*T).
static double forward(StageModel *sm, const int32_t *tokens, const int32_t *targets, int B, int T, float *logits) {
    StageActs *acts = stage_acts_create(sm, B, T);
    stage_acts_keep_logits(acts, true);
    int n_targets = 0;
    for (int i = 0; i < B * T; i++) n_targets += targets[i] >= 0;
    const double loss = stage_forward(sm, acts, tokens, NULL, targets, 1.0f / (float)n_targets);
    memcpy(logits, stage_acts_logits(acts), (size_t)B * T * sm->cfg.vocab * sizeof(float));
    stage_acts_free(acts);
    return loss;
}

static void check_variant(const char *name) {
    char dir[512], ref_path[600];
    snprintf(dir, sizeof dir, "%s/%s", FIXTURES, name);
    snprintf(ref_path, sizeof ref_path, "%s/reference.safetensors", dir);
    Error err = {{0}};
    SafetensorsFile *ref = safetensors_open(ref_path, &err);
    CHECK(ref != NULL, "%s", err.msg);
    if (!ref) return;
    const SafetensorsTensor *tok = safetensors_find(ref, "tokens"), *tgt = safetensors_find(ref, "targets");
    const SafetensorsTensor *lg = safetensors_find(ref, "logits"), *ls = safetensors_find(ref, "loss");
    CHECK(tok && tgt && lg && ls && tok->ndim == 2, "%s: reference tensors", name);
    Checkpoint *c = tok ? ckpt_open(dir, false, CKPT_OPEN_VERIFY, &err) : NULL;
    StageModel *sm = c ? ckpt_load_model(c, &err) : NULL;
    ckpt_close(c);
    CHECK(sm != NULL, "%s: %s", name, err.msg);
    if (sm) {
        const int B = (int)tok->shape[0], T = (int)tok->shape[1];
        float *want = malloc(lg->numel * sizeof(float)), *got = malloc(lg->numel * sizeof(float));
        safetensors_to_f32(lg, want, lg->numel, &err);
        double want_loss;
        memcpy(&want_loss, ls->data, sizeof want_loss);
        const double loss = forward(sm, tok->data, tgt->data, B, T, got);
        const double d_logits = rel_norm_diff(got, want, lg->numel), d_loss = fabs(loss - want_loss) / want_loss;
        printf("  %-20s logits %.2e  loss %.2e\n", name, d_logits, d_loss);
        CHECK(d_logits <= 1e-5, "%s: logits differ from transformers' by %.3g", name, d_logits);
        CHECK(d_loss <= 1e-6, "%s: loss %.9f vs transformers' %.9f", name, loss, want_loss);
        worst_logits = fmax(worst_logits, d_logits);
        worst_loss = fmax(worst_loss, d_loss);
        free(want);
        free(got);
        stage_free(sm);
    }
    safetensors_close(ref);
}

// A config pptrain does not implement: the plain variant's weights beside a config.json whose
// `key` is replaced by `value` (JSON text). Refused, the key named, never read as another model.
static void check_refused(const char *key, const char *value) {
    char dir[] = "/tmp/pptrain_hfv_XXXXXX", path[600], src[600];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(src, sizeof src, "%s/plain/model.safetensors", FIXTURES);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(symlink(src, path) == 0, "symlink %s", path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 259, \"%s\": %s}\n",
            key, value);
    fclose(f);
    Error err = {{0}};
    Checkpoint *c = ckpt_open(dir, false, CKPT_OPEN_VERIFY, &err);
    StageModel *sm = c ? ckpt_load_model(c, &err) : NULL;
    ckpt_close(c);
    CHECK(sm == NULL && strstr(err.msg, key) && !strchr(err.msg, '\n'), "%s %s: refused naming it: '%s'", key, value,
          err.msg);
    stage_free(sm);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    printf("against transformers' float64 logits and loss:\n");
    const char *variants[] = {"plain", "theta5000", "theta500000_legacy", "llama3", "head_dim", "tied",
                              "attention_bias", "mlp_bias"};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) check_variant(variants[i]);
    check_refused("hidden_act", "\"gelu\"");
    check_refused("rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4.0}");
    check_refused("attention_bias", "1");
    check_refused("sliding_window", "4096");
    printf("worst: logits %.2e, loss %.2e\n", worst_logits, worst_loss);
    return test_finish();
}
