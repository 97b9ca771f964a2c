// The model unit a pipeline stage runs: parameter names and counts, initialization that
// depends only on (seed, name), config.json parsing, and the composition property the
// pipeline relies on: running layers [0, k) then [k, L) as two stages, passing the hidden
// state forward and its gradient back, computes what one stage with all layers computes.
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/init.h"
#include "engine/model/model.h"
#include "engine/run_json.h"
#include "engine/data/tokenizer.h"
#include "kernels/cpu/kernels.h"
#include "test_util.h"

static void check_presets(void) {
    Error err;
    ModelConfig cfg;
    CHECK(model_config_preset(&cfg, "tiny", &err) == 0, "tiny");
    CHECK(model_config_param_count(&cfg) == 329152, "tiny params %zu", model_config_param_count(&cfg));
    CHECK(cfg.layers >= 8 && model_config_param_count(&cfg) <= 1000000, "tiny: >= 8 layers, <= 1 M");
    StageModel *s = stage_create(&cfg, 0, cfg.layers, true, true, 1, &err);
    CHECK(s->numel == model_config_param_count(&cfg), "stage numel %zu", s->numel);
    CHECK(s->n_params == 2 + 9 * cfg.layers + 1, "tensor count %d", s->n_params);
    CHECK(strcmp(s->params[0].name, "model.embed_tokens.weight") == 0, "first %s", s->params[0].name);
    CHECK(stage_find_param(s, "model.layers.3.self_attn.q_proj.weight") != NULL, "q_proj name");
    CHECK(stage_find_param(s, "model.layers.7.mlp.down_proj.weight")->rows == cfg.hidden, "down_proj shape");
    CHECK(strcmp(s->params[s->n_params - 1].name, "lm_head.weight") == 0, "last is lm_head");
    const ParamInfo *norm = stage_find_param(s, "model.norm.weight");
    CHECK(norm && s->weights[norm->offset] == 1.0f, "norm weights start at 1");
    stage_free(s);
    CHECK(model_config_preset(&cfg, "small", &err) == 0, "small");
    const size_t small = model_config_param_count(&cfg);
    CHECK(small > 20000000 && small < 30000000, "small has about 25 M parameters: %zu", small);
    CHECK(model_config_preset(&cfg, "medium", &err) == -1 && strstr(err.msg, "medium"), "unknown preset");
}

// A tensor's initial values are the same in whichever stage it lands.
static void check_init_is_split_invariant(void) {
    Error err;
    ModelConfig cfg;
    model_config_preset(&cfg, "tiny", &err);
    StageModel *full = stage_create(&cfg, 0, cfg.layers, true, true, 7, &err);
    StageModel *mid = stage_create(&cfg, 3, 5, false, false, 7, &err);
    CHECK(mid->n_params == 18, "middle stage tensors %d", mid->n_params);
    int same = 0;
    for (int i = 0; i < mid->n_params; i++) {
        const ParamInfo *p = &mid->params[i], *q = stage_find_param(full, p->name);
        same += q && memcmp(mid->weights + p->offset, full->weights + q->offset, p->numel * 4) == 0;
    }
    CHECK(same == mid->n_params, "%d of %d tensors equal across splits", same, mid->n_params);
    StageModel *other_seed = stage_create(&cfg, 3, 5, false, false, 8, &err);
    CHECK(memcmp(other_seed->weights, mid->weights, 64) != 0, "seed changes the weights");
    stage_free(other_seed);
    // init_normal draws N(0, std^2): check the moments of a large tensor.
    const size_t n = 1 << 18;
    float *x = malloc(n * sizeof(float));
    init_normal(x, n, 3, "moments", 2.0f);
    double m1 = 0, m2 = 0;
    for (size_t i = 0; i < n; i++) {
        m1 += x[i];
        m2 += (double)x[i] * x[i];
    }
    m1 /= n;
    m2 = m2 / n - m1 * m1;
    CHECK(fabs(m1) < 0.02 && fabs(sqrt(m2) - 2.0) < 0.02, "mean %.4f std %.4f", m1, sqrt(m2));
    free(x);
    stage_free(mid);
    stage_free(full);
}

static void fill_batch(int32_t *tokens, int32_t *targets, int n, int vocab) {
    for (int i = 0; i < n; i++) {
        tokens[i] = (int32_t)((i * 37 + 11) % vocab);
        targets[i] = (i % 7 == 3) ? -1 : (int32_t)((i * 53 + 5) % vocab);
    }
}

// Two stages chained by hand match one stage holding every layer.
static void check_composition(int split) {
    Error err;
    ModelConfig cfg;
    model_config_preset(&cfg, "tiny", &err);
    enum { B = 2, T = 24 };
    int32_t tokens[B * T], targets[B * T];
    fill_batch(tokens, targets, B * T, cfg.vocab);
    StageModel *full = stage_create(&cfg, 0, cfg.layers, true, true, 5, &err);
    StageModel *s0 = stage_create(&cfg, 0, split, true, false, 5, &err);
    StageModel *s1 = stage_create(&cfg, split, cfg.layers, false, true, 5, &err);
    StageActs *af = stage_acts_create(full, B, T), *a0 = stage_acts_create(s0, B, T);
    StageActs *a1 = stage_acts_create(s1, B, T);
    const double loss_full = stage_forward(full, af, tokens, NULL, targets, 0.01f);
    stage_backward(full, af, NULL);
    stage_forward(s0, a0, tokens, NULL, NULL, 0.0f);
    const double loss_split = stage_forward(s1, a1, NULL, stage_acts_output(a0), targets, 0.01f);
    // Zero-bubble order: input half of the last stage, then the first stage, then the weights.
    stage_backward_input(s1, a1, NULL);
    stage_backward(s0, a0, stage_acts_dinput(a1));
    stage_backward_weight(s1, a1);
    CHECK(loss_full == loss_split, "split %d: loss %.12g vs %.12g (bitwise)", split, loss_split, loss_full);
    double worst = 0;
    for (int k = 0; k < 2; k++) {
        const StageModel *part = k ? s1 : s0;
        for (int i = 0; i < part->n_params; i++) {
            const ParamInfo *p = &part->params[i], *q = stage_find_param(full, p->name);
            const double d = rel_norm_diff(part->grads + p->offset, full->grads + q->offset, p->numel);
            if (d > worst) worst = d;
        }
    }
    CHECK(worst == 0.0, "split %d: gradients differ from one stage by %.3g", split, worst);
    stage_acts_free(af);
    stage_acts_free(a0);
    stage_acts_free(a1);
    stage_free(full);
    stage_free(s0);
    stage_free(s1);
}

// The whole stage (all ops together) against a central difference of its own loss along
// each tensor's gradient direction d = g/|g|: (L(w + h d) - L(w - h d)) / 2h -> |g|. Moving a
// whole tensor makes the signal large next to the fp32 rounding of the loss.
// With biases (attention_bias, mlp_bias), each is first given values, since they start at 0.
// Tied: the embedding's gradient after stage_tie_grads (E + H) moves the embedding and the
// head copy together, as they are one matrix.
static void check_stage_gradient_by_differences(bool biases, bool tied) {
    Error err;
    ModelConfig cfg;
    model_config_preset(&cfg, "tiny", &err);
    cfg.layers = 2;
    cfg.attention_bias = cfg.mlp_bias = biases;
    cfg.tie_word_embeddings = tied;
    enum { B = 2, T = 9 };
    int32_t tokens[B * T], targets[B * T];
    fill_batch(tokens, targets, B * T, cfg.vocab);
    StageModel *s = stage_create(&cfg, 0, cfg.layers, true, true, 9, &err);
    int n_biases = 0;
    for (int k = 0; k < s->n_params; k++) {
        const ParamInfo *p = &s->params[k];
        if (!strstr(p->name, ".bias")) continue;
        n_biases++;
        for (size_t i = 0; i < p->numel; i++) s->weights[p->offset + i] = 0.05f * (float)((i * 7 + k) % 11) - 0.25f;
    }
    CHECK(n_biases == (biases ? 2 * 7 : 0), "%d bias tensors", n_biases);
    StageActs *a = stage_acts_create(s, B, T);
    stage_forward(s, a, tokens, NULL, targets, 1.0f);
    stage_backward(s, a, NULL);
    stage_tie_grads(s);
    const ParamInfo copy = stage_head_copy_info(s);
    CHECK((copy.numel != 0) == tied, "a head copy exactly when tied");
    float *saved = malloc(s->numel * sizeof(float));
    memcpy(saved, s->weights, s->numel * sizeof(float));
    for (int k = 0; k < s->n_params; k++) {
        const ParamInfo *p = &s->params[k];
        const float *g = s->grads + p->offset;
        double gnorm = 0;
        for (size_t i = 0; i < p->numel; i++) gnorm += (double)g[i] * g[i];
        gnorm = sqrt(gnorm);
        const double h = 1e-2;
        double loss[2];
        for (int side = 0; side < 2; side++) {
            const double sign = side ? -1.0 : 1.0;
            const bool both = copy.numel && p->offset == 0;   // the embedding is the first tensor
            for (size_t i = 0; i < p->numel; i++) {
                s->weights[p->offset + i] = (float)(saved[p->offset + i] + sign * h * g[i] / gnorm);
                if (both) s->weights[copy.offset + i] = s->weights[p->offset + i];
            }
            loss[side] = stage_forward(s, a, tokens, NULL, targets, 1.0f);
        }
        memcpy(s->weights, saved, s->numel * sizeof(float));
        // Each loss carries fp32 rounding of about FLT_EPSILON x |L|, which the difference
        // divides by 2h: 3e-5 at L = 5.6, h = 1e-2, the floor under which no gradient can be
        // told from its difference. The smallest here is a k_proj bias's, 2e-4 (a bias added
        // to every key of a row cancels in its softmax, but for RoPE's rotation); its
        // difference is off by 6e-6 with oneDNN's AVX2 kernels, by less with its AVX ones.
        const double fd = (loss[0] - loss[1]) / (2 * h), noise = FLT_EPSILON * fabs(loss[0]) / (2 * h);
        CHECK(fabs(fd - gnorm) <= 1e-2 * gnorm + noise, "%s: |g| %.6g vs central difference %.6g",
              p->name, gnorm, fd);
    }
    free(saved);
    stage_acts_free(a);
    stage_free(s);
}

static const char *write_file(const char *dir, const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static void check_config_json(void) {
    char dir[] = "/tmp/pptrain_model_XXXXXX";
    if (!mkdtemp(dir)) return;
    Error err;
    ModelConfig cfg;
    const char *ok = write_file(dir, "ok.json",
        "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 48,"
        " \"intermediate_size\": 96, \"num_hidden_layers\": 3, \"num_attention_heads\": 6,"
        " \"num_key_value_heads\": 2, \"vocab_size\": 300, \"max_position_embeddings\": 128,"
        " \"rope_theta\": 500000.0, \"rms_norm_eps\": 1e-06, \"tie_word_embeddings\": true}");
    CHECK(model_config_from_json(&cfg, ok, &err) == 0, "%s", err.msg);
    CHECK(cfg.hidden == 48 && cfg.head_dim == 8 && cfg.kv_heads == 2 && cfg.vocab == 300 &&
          cfg.tie_word_embeddings && cfg.rope_theta == 500000.0f && cfg.rms_eps == 1e-6f, "fields read");
    // Tied: the head reads a copy of the embedding that no tensor name shows (head_copy_offset).
    StageModel *s = stage_create(&cfg, 0, 3, true, true, 1, &err);
    CHECK(s && s->head_copy_offset && s->w.lm_head == s->weights + s->head_copy_offset &&
              !stage_find_param(s, "lm_head.weight"), "tied head reads its copy");
    CHECK(s->head_copy_offset == model_config_param_count(&cfg), "tied count %zu vs %zu", s->head_copy_offset,
          model_config_param_count(&cfg));
    StageModel *last = stage_create(&cfg, 2, 3, false, true, 1, &err);
    CHECK(last && last->head_copy_offset &&
              memcmp(last->weights + last->head_copy_offset, s->w.wte, (size_t)cfg.vocab * cfg.hidden * 4) == 0,
          "a last stage's head copy starts as the embedding: %s", err.msg);
    stage_free(last);
    stage_free(s);
    struct { const char *json, *want; } bad[] = {
        {"{\"hidden_size\": 64, \"intermediate_size\": 8, \"num_hidden_layers\": 2, \"num_attention_heads\": 5, \"vocab_size\": 10}",
         "not divisible by num_attention_heads"},
        {"{\"hidden_size\": 64, \"intermediate_size\": 8, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 3, \"vocab_size\": 10}",
         "not divisible by num_key_value_heads"},
        {"{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 10}",
         "missing \"intermediate_size\""},
        {"{\"hidden_size\": 64, \"intermediate_size\": 8, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": null}",
         "missing \"vocab_size\" (it is null)"},
        {"{\"hidden_size\": \"64\", \"intermediate_size\": 8, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 10}",
         "\"hidden_size\" must be an integer"},
        {"{\"hidden_size\": 64, \"intermediate_size\": 8, \"num_hidden_layers\": 0, \"num_attention_heads\": 4, \"vocab_size\": 10}",
         "num_hidden_layers must be positive"},
        {"{\"model_type\": \"gpt2\", \"hidden_size\": 64}", "model_type must be \"llama\""},
        {"{\"hidden_size\": 64, \"intermediate_size\": 8, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 10, \"rope_scaling\": {\"type\": \"yarn\"}}",
         "rope_scaling rope_type \"yarn\" is not implemented"},
        {"{\"hidden_size\": 64, \"intermediate_size\": 8, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 10, \"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2.0}}",
         "rope_parameters rope_type \"linear\" is not implemented"},
        {"{\"hidden_size\": 64, \"intermediate_size\": 8, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 10, \"rope_parameters\": {\"rope_type\": \"default\", \"factor\": 2.0}}",
         "rope_parameters key \"factor\" is not one pptrain implements"},
        {"{\"hidden_size\": 64, \"intermediate_size\": 8, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 10, \"rope_parameters\": {\"rope_type\": \"llama3\", \"factor\": 8.0}}",
         "is missing \"low_freq_factor\""},
        {"{\"hidden_size\": 64, \"intermediate_size\": 8, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 10, \"sliding_window\": 128}",
         "key \"sliding_window\" is not one pptrain implements"},
        {"{\"hidden_size\": 64, \"intermediate_size\": 8, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 10, \"attention_dropout\": 0.1}",
         "attention_dropout must be 0"},
        {"{\"hidden_size\": 64, \"intermediate_size\": 8, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 10, \"pretraining_tp\": 2}",
         "pretraining_tp must be 1"},
        {"[1, 2]", "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *path = write_file(dir, "bad.json", bad[i].json);
        err.msg[0] = '\0';
        CHECK(model_config_from_json(&cfg, path, &err) == -1 && strstr(err.msg, bad[i].want) &&
              strstr(err.msg, "bad.json"), "case %zu: '%s' should mention '%s'", i, err.msg, bad[i].want);
    }
    // transformers 5 writes RoPE under rope_parameters; a Llama 3.1 config gets its scaling; the
    // export writes both spellings and reads back the same.
    const char *v5 = write_file(dir, "v5.json",
        "{\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
        " \"vocab_size\": 259, \"transformers_version\": \"5.23.0\", \"dtype\": \"float32\","
        " \"rope_parameters\": {\"rope_theta\": 5000.0, \"rope_type\": \"default\"}}");
    CHECK(model_config_from_json(&cfg, v5, &err) == 0 && cfg.rope_theta == 5000.0f && cfg.rope_type == ROPE_DEFAULT,
          "rope_parameters' theta: %s %g", err.msg, cfg.rope_theta);
    const char *l3 = write_file(dir, "l3.json",
        "{\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
        " \"vocab_size\": 259, \"max_position_embeddings\": 256, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0,"
        " \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64},"
        " \"rope_theta\": 500000.0}");
    CHECK(model_config_from_json(&cfg, l3, &err) == 0 && cfg.rope_type == ROPE_LLAMA3 && cfg.rope_theta == 500000.0f &&
              cfg.rope_llama3.factor == 8.0f && cfg.rope_llama3.original_max_positions == 64,
          "llama3 read: %s", err.msg);
    char *exported = model_config_to_hf_json(&cfg, "float32");
    ModelConfig back;
    CHECK(model_config_from_json_text(&back, exported, "export", &err) == 0 && back.rope_type == ROPE_LLAMA3 &&
              back.rope_theta == cfg.rope_theta && memcmp(&back.rope_llama3, &cfg.rope_llama3, sizeof back.rope_llama3) == 0,
          "llama3 round trip: %s", err.msg);
    CHECK(strstr(exported, "\"rope_parameters\"") && strstr(exported, "\"rope_scaling\""), "both spellings exported");
    free(exported);
    // A run's stored config (what --resume reads) keeps the scaling too.
    RunConfig rc = run_config_defaults(), rc_back = run_config_defaults();
    rc.model = cfg;
    PipelineOptions po = pipeline_options_defaults(), po_back = pipeline_options_defaults();
    char *stored = run_json(&rc, &po);
    CHECK(run_json_parse(stored, "run.json", &rc_back, &po_back, &err) == 0 && rc_back.model.rope_type == ROPE_LLAMA3 &&
              memcmp(&rc_back.model.rope_llama3, &cfg.rope_llama3, sizeof cfg.rope_llama3) == 0 &&
              strcmp(rc_back.model.name, cfg.name) == 0,
          "run config round trip: %s", err.msg);
    free(stored);
    CHECK(model_config_from_json(&cfg, "/nonexistent/config.json", &err) == -1 &&
          strstr(err.msg, "no such file"), "missing file: %s", err.msg);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

int main(void) {
    check_presets();
    check_init_is_split_invariant();
    check_composition(1);
    check_composition(4);
    check_composition(7);
    check_stage_gradient_by_differences(false, false);
    check_stage_gradient_by_differences(true, false);
    check_stage_gradient_by_differences(false, true);
    check_config_json();
    return test_finish();
}
