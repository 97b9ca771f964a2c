// tests/unit/test_hf_config: config.json as published, the model's token ids kept, and the one
// JSON door (engine/json_read.h) refusing duplicate keys in every file pptrain reads:
//  - configs as transformers 4.x / 5.x and published Llamas write them load (metadata keys,
//    math keys at the value pptrain implements); any other value of a math key is refused;
//  - bos/eos/pad ids round-trip through config.json and the run config, an int eos stays an
//    int, a list stays a list, absent stays absent; presets keep the byte tokenizer's ids;
//  - a duplicate key, at any depth, in a config, a trainer state or an index is refused by
//    name and file, where cJSON alone would read the first and Python the last;
//  - a tied config beside an lm_head.weight equal to the embedding stays tied; beside a
//    different one it is untied (as transformers does), said in ckpt_note, and the head read;
//  - a tensor the model does not use (a layer beyond config.json's, a bias it turns off, a name
//    of no Llama) is refused, named with its file and why; the rotary inv_freq loads.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/data/tokenizer.h"
#include "engine/json_read.h"
#include "engine/model/model.h"
#include "engine/run_json.h"
#include "storage/atomic_file.h"
#include "storage/checkpoint.h"
#include "storage/safetensors.h"
#include "test_util.h"

#define DIMS "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2, " \
             "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 300"

// SmolLM2's published config.json (transformers 4.40), dimensions shrunk, with the two keys
// transformers 5.24's save_pretrained adds to it.
static const char SMOL[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0,"
    " \"bos_token_id\": 0, \"eos_token_id\": 0, \"hidden_act\": \"silu\", " DIMS ","
    " \"initializer_range\": 0.041666666666666664, \"is_llama_config\": true, \"max_position_embeddings\": 8192,"
    " \"model_type\": \"llama\", \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, \"rope_interleaved\": false,"
    " \"rope_scaling\": null, \"rope_theta\": 100000, \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
    " \"transformers_version\": \"4.40.1\", \"use_cache\": true, \"_model_name_or_path\": \"smol\","
    " \"unk_token_id\": 0}";

// What transformers 5.24's LlamaConfig.to_dict() holds beyond the math (PretrainedConfig's
// attributes), plus 4.x's generation defaults and a top-level partial_rotary_factor of 1.
static const char V5_FULL[] =
    "{" DIMS ", \"transformers_version\": \"5.24.0\", \"architectures\": null, \"output_hidden_states\": false,"
    " \"return_dict\": true, \"dtype\": null, \"chunk_size_feed_forward\": 0, \"is_encoder_decoder\": false,"
    " \"id2label\": {\"0\": \"LABEL_0\", \"1\": \"LABEL_1\"}, \"label2id\": {\"LABEL_0\": 0, \"LABEL_1\": 1},"
    " \"problem_type\": null, \"_name_or_path\": \"\", \"output_attentions\": false, \"pad_token_id\": null,"
    " \"is_decoder\": false, \"add_cross_attention\": false, \"tie_encoder_decoder\": false,"
    " \"pruned_heads\": {}, \"cross_attention_hidden_size\": null, \"max_length\": 20, \"do_sample\": false,"
    " \"num_beams\": 1, \"temperature\": 1.0, \"top_k\": 50, \"top_p\": 1.0, \"torchscript\": false,"
    " \"partial_rotary_factor\": 1.0, \"rope_parameters\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}}";

static void configs_as_published(void) {
    ModelConfig cfg;
    Error err = {{0}};
    CHECK(model_config_from_json_text(&cfg, SMOL, "smol.json", &err) == 0 && cfg.tie_word_embeddings &&
              cfg.rope_theta == 100000.0f && cfg.has_bos && cfg.bos_id == 0 && cfg.n_eos == 1 && !cfg.has_pad,
          "SmolLM's config: %s", err.msg);
    CHECK(model_config_from_json_text(&cfg, V5_FULL, "v5.json", &err) == 0 && !cfg.has_pad,
          "transformers 5's full to_dict: %s", err.msg);
    struct { const char *json, *want; } bad[] = {
        {"{" DIMS ", \"rope_interleaved\": true}", "rope_interleaved must be false"},
        {"{" DIMS ", \"partial_rotary_factor\": 0.5}", "partial_rotary_factor must be 1"},
        {"{" DIMS ", \"is_encoder_decoder\": true}", "is_encoder_decoder must be false"},
        {"{" DIMS ", \"add_cross_attention\": true}", "add_cross_attention must be false"},
        {"{" DIMS ", \"pruned_heads\": {\"0\": [1]}}", "pruned_heads must be empty"},
        {"{" DIMS ", \"cross_attention_hidden_size\": 64}", "cross_attention_hidden_size must be null"},
        {"{" DIMS ", \"eos_token_id\": [1, \"2\"]}", "eos_token_id\" must be an integer or a list"},
        {"{" DIMS ", \"bos_token_id\": 1.5}", "\"bos_token_id\" must be an integer"},
        {"{" DIMS ", \"hidden_size\": 128}", "duplicate key: \"hidden_size\" twice"},
        {"{" DIMS ", \"rope_parameters\": {\"rope_theta\": 1.0, \"rope_theta\": 2.0}}",
         "\"rope_theta\" twice in \"rope_parameters\""},
        {"{" DIMS ", \"use_sliding_window\": false}", "key \"use_sliding_window\" is not one pptrain implements"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = '\0';
        CHECK(model_config_from_json_text(&cfg, bad[i].json, "cfg.json", &err) == -1 && strstr(err.msg, bad[i].want) &&
                  strstr(err.msg, "cfg.json"), "case %zu: '%s' should mention '%s'", i, err.msg, bad[i].want);
    }
}

// Reads json, writes it back as config.json and reads that: the ids must survive both.
static void ids_round_trip(const char *json, const char *want_text, const char *unwanted) {
    ModelConfig cfg, back;
    Error err = {{0}};
    CHECK(model_config_from_json_text(&cfg, json, "ids.json", &err) == 0, "%s", err.msg);
    char *text = model_config_to_hf_json(&cfg, "float32");
    char compact[4096];
    size_t w = 0;
    for (const char *c = text; *c && w + 1 < sizeof compact; c++)
        if (*c != ' ' && *c != '\t' && *c != '\n') compact[w++] = *c;
    compact[w] = '\0';
    CHECK(strstr(compact, want_text) != NULL, "written: '%s' lacks '%s'", compact, want_text);
    CHECK(!unwanted || !strstr(compact, unwanted), "written: '%s' has '%s'", compact, unwanted);
    CHECK(model_config_from_json_text(&back, text, "back.json", &err) == 0 && back.has_bos == cfg.has_bos &&
              back.bos_id == cfg.bos_id && back.n_eos == cfg.n_eos && back.eos_is_list == cfg.eos_is_list &&
              memcmp(back.eos_ids, cfg.eos_ids, sizeof cfg.eos_ids) == 0 && back.has_pad == cfg.has_pad &&
              back.pad_id == cfg.pad_id, "read back: %s", err.msg);
    // The run config (trainer_state.json, the store) keeps them too: --resume writes them again.
    RunConfig rc = run_config_defaults(), rc_back = run_config_defaults();
    PipelineOptions po = pipeline_options_defaults(), po_back = pipeline_options_defaults();
    rc.model = cfg;
    char *stored = run_json(&rc, &po);
    CHECK(run_json_parse(stored, "run.json", &rc_back, &po_back, &err) == 0 && rc_back.model.n_eos == cfg.n_eos &&
              memcmp(rc_back.model.eos_ids, cfg.eos_ids, sizeof cfg.eos_ids) == 0 &&
              rc_back.model.bos_id == cfg.bos_id && rc_back.model.has_pad == cfg.has_pad,
          "run config: %s", err.msg);
    free(stored);
    free(text);
}

static void token_ids(void) {
    // Llama 3.1's ids: bos 128000, three eos, and a pad.
    ids_round_trip("{" DIMS ", \"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009],"
                   " \"pad_token_id\": 128004}",
                   "\"bos_token_id\":128000,\"eos_token_id\":[128001,128008,128009],\"pad_token_id\":128004", NULL);
    ids_round_trip("{" DIMS ", \"bos_token_id\": 1, \"eos_token_id\": 2}", "\"bos_token_id\":1,\"eos_token_id\":2,",
                   "pad_token_id");
    ids_round_trip("{" DIMS "}", "\"vocab_size\":300", "token_id");   // none: none written
    ids_round_trip("{" DIMS ", \"eos_token_id\": [7]}", "\"eos_token_id\":[7]", "bos_token_id");
    ModelConfig tiny;
    Error err;
    CHECK(model_config_preset(&tiny, "tiny", &err) == 0 && tiny.has_bos && tiny.bos_id == TOKEN_BOS &&
              tiny.n_eos == 1 && tiny.eos_ids[0] == TOKEN_EOS && !tiny.eos_is_list && !tiny.has_pad,
          "a preset keeps the byte tokenizer's ids");
    char *text = model_config_to_hf_json(&tiny, "float32");
    CHECK(strstr(text, "\"bos_token_id\":\t256") && strstr(text, "\"eos_token_id\":\t257") &&
              !strstr(text, "pad_token_id"), "a preset's config.json: %s", text);
    free(text);
}

static void json_door(void) {
    Error err = {{0}};
    struct { const char *json, *want; } bad[] = {
        {"{\"a\": 1, \"b\": 2, \"a\": 3}", "duplicate key: \"a\" twice ("},
        {"{\"x\": [{\"k\": 1}, {\"k\": 1, \"k\": 2}]}", "\"k\" twice in \"x\""},
        {"{\"weight_map\": {\"w\": \"a\", \"v\": \"b\", \"w\": \"c\"}}", "\"w\" twice in \"weight_map\""},
        {"{\"a\": 1} x", "not a JSON object (a syntax error"},
        {"{\"a\": ", "not a JSON object (a syntax error"},
        {"[1, 2]", "not a JSON object"},
        {"", "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = '\0';
        cJSON *root = json_parse_object(bad[i].json, strlen(bad[i].json), "f.json", &err);
        CHECK(!root && strstr(err.msg, bad[i].want) && strncmp(err.msg, "f.json: ", 8) == 0,
              "case %zu: '%s' should mention '%s'", i, err.msg, bad[i].want);
        cJSON_Delete(root);
    }
    // Many keys (an index of thousands of tensors), all different: accepted; one repeated: found.
    enum { N = 3000 };
    char *big = malloc(N * 24 + 64);
    size_t w = (size_t)sprintf(big, "{");
    for (int i = 0; i < N; i++) w += (size_t)sprintf(big + w, "%s\"t%d\": %d", i ? ", " : "", i, i);
    sprintf(big + w, "}");
    cJSON *ok = json_parse_object(big, strlen(big), "big.json", &err);
    CHECK(ok != NULL, "3000 distinct keys: %s", err.msg);
    cJSON_Delete(ok);
    sprintf(big + w, ", \"t1234\": 0}");
    CHECK(!json_parse_object(big, strlen(big), "big.json", &err) && strstr(err.msg, "\"t1234\" twice"), "%s", err.msg);
    free(big);
    // A trainer state with "step" twice (Python would resume from the last).
    CkptState st;
    const char state[] = "{\"format\": \"pptrain-checkpoint\", \"step\": 4, \"step\": 9}";
    CHECK(ckpt_state_parse(state, "trainer_state.json", &st, &err) == -1 && strstr(err.msg, "\"step\" twice") &&
              strstr(err.msg, "trainer_state.json"), "%s", err.msg);
}

// An HF folder whose index names a tensor twice: refused when opened, naming the index.
static void duplicate_in_index(void) {
    char dir[] = "/tmp/pptrain_hf_config_XXXXXX";
    if (!mkdtemp(dir)) return;
    char path[256];
    Error err = {{0}};
    snprintf(path, sizeof path, "%s/config.json", dir);
    atomic_write_file(path, "{" DIMS "}", strlen("{" DIMS "}"), &err);
    const char index[] = "{\"metadata\": {}, \"weight_map\": {\"model.norm.weight\": \"a.safetensors\","
                         " \"model.norm.weight\": \"b.safetensors\"}}";
    snprintf(path, sizeof path, "%s/" CKPT_INDEX_FILE, dir);
    atomic_write_file(path, index, strlen(index), &err);
    Checkpoint *c = ckpt_open(dir, false, CKPT_OPEN_VERIFY, &err);
    CHECK(!c && strstr(err.msg, "\"model.norm.weight\" twice") && strstr(err.msg, CKPT_INDEX_FILE), "%s", err.msg);
    ckpt_close(c);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

// dir/model.safetensors of an untied model whose lm_head is the embedding, plus `delta` at
// its element 5, beside a config.json that ties them.
static void write_tied_folder(const char *dir, float delta) {
    ModelConfig cfg;
    Error err = {{0}};
    char path[256];
    const char tied[] = "{" DIMS ", \"tie_word_embeddings\": true}";
    model_config_from_json_text(&cfg, "{" DIMS "}", "untied", &err);
    StageModel *sm = stage_create(&cfg, 0, cfg.layers, true, true, 7, &err);
    memcpy(sm->w.lm_head, sm->w.wte, (size_t)cfg.vocab * cfg.hidden * sizeof(float));
    sm->w.lm_head[5] += delta;
    const CkptParamSet weights = {sm->weights, ""};
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(ckpt_write_params(path, sm, &weights, 1, false, NULL, NULL, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/config.json", dir);
    atomic_write_file(path, tied, strlen(tied), &err);
    stage_free(sm);
}

static void tied_with_own_head(void) {
    char dir[] = "/tmp/pptrain_hf_tied_XXXXXX";
    if (!mkdtemp(dir)) return;
    Error err = {{0}};
    write_tied_folder(dir, 0.0f);
    Checkpoint *c = ckpt_open(dir, false, CKPT_OPEN_VERIFY, &err);
    CHECK(c && ckpt_model(c)->tie_word_embeddings && !ckpt_note(c)[0], "an equal lm_head stays tied: %s", err.msg);
    ckpt_close(c);
    write_tied_folder(dir, 0.25f);
    c = ckpt_open(dir, false, CKPT_OPEN_VERIFY, &err);
    CHECK(c && !ckpt_model(c)->tie_word_embeddings && strstr(ckpt_note(c), "untied"),
          "a different lm_head unties: %s", c ? ckpt_note(c) : err.msg);
    StageModel *sm = c ? ckpt_load_model(c, &err) : NULL;
    CHECK(sm && stage_find_param(sm, "lm_head.weight") && sm->w.lm_head != sm->w.wte &&
              sm->w.lm_head[5] == sm->w.wte[5] + 0.25f, "the untied head is the folder's lm_head: %s", err.msg);
    stage_free(sm);
    ckpt_close(c);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

// dir/model.safetensors of the 2-layer untied model of DIMS (its tensors in HF order, after
// n_extra zero vectors of 4 floats named `extra`), beside a config.json of `config`.
static void write_extra_folder(const char *dir, const char *config, int n_extra, const char *const *extra) {
    ModelConfig cfg;
    Error err = {{0}};
    char path[256];
    model_config_from_json_text(&cfg, "{" DIMS "}", "two", &err);
    StageModel *sm = stage_create(&cfg, 0, cfg.layers, true, true, 7, &err);
    const int n = n_extra + sm->n_params;
    SafetensorsWriteTensor *t = calloc((size_t)n, sizeof *t);
    int64_t (*shapes)[2] = calloc((size_t)n, sizeof *shapes);
    static const float zeros[4];
    for (int i = 0; i < n; i++) {
        const ParamInfo *p = i < n_extra ? NULL : &sm->params[i - n_extra];
        shapes[i][0] = p ? p->rows : 4;
        shapes[i][1] = p ? p->cols : 0;
        t[i] = (SafetensorsWriteTensor){p ? p->name : extra[i], ST_F32, p && p->cols ? 2 : 1, shapes[i],
                                        p ? (const void *)(sm->weights + p->offset) : zeros};
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(safetensors_write(path, n, t, 0, NULL, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/config.json", dir);
    atomic_write_file(path, config, strlen(config), &err);
    free(shapes);
    free(t);
    stage_free(sm);
}

// A tensor the model does not use is refused when the folder is opened, named with its file and
// why; the rotary inv_freq older transformers saved is not such a tensor.
static void unused_tensors(void) {
    char dir[] = "/tmp/pptrain_hf_unused_XXXXXX";
    if (!mkdtemp(dir)) return;
    Error err = {{0}};
    const char one_layer[] = "{\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 1, "
                             "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 300}";
    write_extra_folder(dir, one_layer, 0, NULL);
    Checkpoint *c = ckpt_open(dir, false, CKPT_OPEN_VERIFY, &err);
    CHECK(!c && strstr(err.msg, "/model.safetensors: tensor 'model.layers.1.self_attn.q_proj.weight' and 8 more are "
                                "not used: config.json says 1 layer") && strstr(err.msg, dir),
          "a second layer under a config of one: %s", err.msg);
    ckpt_close(c);
    struct { const char *extra, *why; } bad[] = {
        {"model.extra.weight", "tensor 'model.extra.weight' is not used: not a tensor of a Llama model"},
        {"model.layers.1.mlp.up_proj.bias", "tensor 'model.layers.1.mlp.up_proj.bias' is not used: config.json says "
                                            "mlp_bias false"},
        {"model.layers.0.self_attn.o_proj.bias", "config.json says attention_bias false"},
        {"model.layers.2.post_attention_layernorm.weight", "config.json says 2 layers"},
        {"model.layers.2.self_attn.rotary_emb.inv_freq", "config.json says 2 layers"},
        {"model.layers.01.mlp.up_proj.bias", "not a tensor of a Llama model"},
        {"model.layers.0.mlp.experts", "not a tensor of a Llama model"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_extra_folder(dir, "{" DIMS "}", 1, &bad[i].extra);
        c = ckpt_open(dir, false, CKPT_OPEN_VERIFY, &err);
        CHECK(!c && strstr(err.msg, bad[i].why), "%s: %s", bad[i].extra, c ? "opened" : err.msg);
        ckpt_close(c);
    }
    const char *rotary[] = {"model.layers.0.self_attn.rotary_emb.inv_freq",
                            "model.layers.1.self_attn.rotary_emb.inv_freq", "model.rotary_emb.inv_freq"};
    write_extra_folder(dir, "{" DIMS "}", 3, rotary);
    c = ckpt_open(dir, false, CKPT_OPEN_VERIFY, &err);
    StageModel *sm = c ? ckpt_load_model(c, &err) : NULL;
    CHECK(sm != NULL, "the rotary inv_freq of older transformers loads: %s", err.msg);
    stage_free(sm);
    ckpt_close(c);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void) {
    unused_tensors();
    tied_with_own_head();
    configs_as_published();
    token_ids();
    json_door();
    duplicate_in_index();
    return test_finish();
}
