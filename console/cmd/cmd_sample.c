// console/cmd/cmd_sample: `pptrain sample RUN|latest|DIR|HF-FOLDER --prompt TEXT [options]`:
// text generated token by token on the pipeline (engine/generate.h), from a run's newest
// intact checkpoint, a checkpoint folder, or a Hugging Face folder, as `check --resume` and
// `check --init-from` find them (console/run_session.h). The layout flags of a run (--stages,
// --schedule, --transport, --timeout, ...) lay the model out; under mpirun every process
// runs the command and the root prints.
//
// Tokens: the folder's tokenizer.json (a checkpoint keeps its --init-from source's), else the
// resumed run's --tokenizer, else the byte tokenizer, whose prompt starts with BOS as every
// training document does. Greedy unless a sampling option (--temperature, --top-k, --top-p,
// --seed) is given; then temperature 1, every token, top-p 1 and seed 1 unless given.
#include "console/cmd/cmd_sample.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "console/cli.h"
#include "console/cli_options.h"
#include "console/run_options.h"
#include "console/run_session.h"
#include "engine/data/tokenizer.h"
#include "engine/data/tokenizer_hf.h"
#include "engine/generate.h"
#include "engine/schedule/schedule.h"
#include "engine/transport/mpi_process.h"
#include "storage/checkpoint.h"

typedef struct {
    const char *prompt;      // NULL until --prompt
    long tokens;             // new tokens at most (--tokens, default 64)
    double temperature, top_p;
    long top_k;
    uint64_t seed;
    bool sampling;           // a sampling option was given: not greedy
    bool json, help;
} SampleFlags;

static int set_prompt(void *o, const char *f, const char *v, Error *e) {
    (void)f, (void)e;
    ((SampleFlags *)o)->prompt = v;
    return 0;
}
static int set_tokens(void *o, const char *f, const char *v, Error *e) {
    return cli_parse_int(f, v, 1, 1 << 20, &((SampleFlags *)o)->tokens, e);
}
// The bounds that say what is wrong come after parsing (check_flags): parsed here as any float.
static int set_temperature(void *o, const char *f, const char *v, Error *e) {
    ((SampleFlags *)o)->sampling = true;
    return cli_parse_float(f, v, -1e30, 1e30, &((SampleFlags *)o)->temperature, e);
}
static int set_top_p(void *o, const char *f, const char *v, Error *e) {
    ((SampleFlags *)o)->sampling = true;
    return cli_parse_float(f, v, -1e30, 1e30, &((SampleFlags *)o)->top_p, e);
}
static int set_top_k(void *o, const char *f, const char *v, Error *e) {
    ((SampleFlags *)o)->sampling = true;
    return cli_parse_int(f, v, 0, 1L << 30, &((SampleFlags *)o)->top_k, e);
}
static int set_seed(void *o, const char *f, const char *v, Error *e) {
    ((SampleFlags *)o)->sampling = true;
    return cli_parse_u64(f, v, &((SampleFlags *)o)->seed, e);
}
static int set_json(void *o, const char *f, const char *v, Error *e) {
    (void)f, (void)v, (void)e;
    ((SampleFlags *)o)->json = true;
    return 0;
}
static int set_help(void *o, const char *f, const char *v, Error *e) {
    (void)f, (void)v, (void)e;
    ((SampleFlags *)o)->help = true;
    return 0;
}

static const CliOption OPTIONS[] = {
    {"--prompt", "TEXT", "the text to continue (required; not empty)", set_prompt, 0},
    {"--tokens", "N", "new tokens at most (default 64); generation also stops at the tokenizer's EOS", set_tokens, 0},
    {"--temperature", "T", "sample at temperature T > 0 (default 1 when sampling; no option: greedy)",
     set_temperature, 0},
    {"--top-k", "K", "sample from the K most probable tokens (default 0: all)", set_top_k, 0},
    {"--top-p", "P", "sample from the smallest set holding mass P, in (0, 1] (default 1)", set_top_p, 0},
    {"--seed", "S", "the sampler's seed (default 1): the same seed gives the same tokens", set_seed, 0},
    {"--json", NULL, "print one JSON object: prompt ids, new ids, text, seconds", set_json, 0},
    {"--help", NULL, "this help", set_help, 0},
};
#define N_OPTIONS (sizeof OPTIONS / sizeof OPTIONS[0])

static void usage(FILE *out) {
    fprintf(out, "usage: pptrain sample RUN|latest|CKPT_DIR|HF_FOLDER --prompt TEXT [options] [layout options]\n\n"
                 "  Continues TEXT with the model of a run's newest intact checkpoint (RUN, latest: the\n"
                 "  run store's), a checkpoint folder, or a Hugging Face folder (config.json +\n"
                 "  safetensors), one token at a time on the pipeline, printing the text as it comes.\n\n");
    cli_options_usage(out, OPTIONS, (int)N_OPTIONS, 28, NULL, NULL);
    fprintf(out, "\n  How the model is laid out (as a run lays it out, on its device), and the run store:\n");
    run_options_usage_sample(out);
}

// Takes sample's own flags, and the source (argv[2], before any flag), out of argv; the rest
// stay for the run-option parser, which knows which of its flags take a value.
static int parse_flags(int *argc, char **argv, SampleFlags *f, const char **what, Error *err) {
    *f = (SampleFlags){.tokens = 64, .temperature = 1.0, .top_p = 1.0, .seed = 1};
    int out = 2, i = 2;
    if (i < *argc && argv[i][0] != '-') *what = argv[i++];
    for (; i < *argc; i++) {
        const CliOption *opt = cli_option_find(OPTIONS, (int)N_OPTIONS, argv[i]);
        if (!opt) argv[out++] = argv[i];
        else if (cli_option_take(opt, *argc, argv, &i, f, err)) return -1;
    }
    *argc = out;
    return 0;
}

// The prompt is refused empty here, before any tokenizer: a Hugging Face one would make it BOS
// alone, and the byte tokenizer's refusal must be every tokenizer's.
static int check_flags(const SampleFlags *f, const char *what, Error *err) {
    if (!what) error_set(err, "sample needs RUN|latest|CKPT_DIR|HF_FOLDER (see pptrain sample --help)");
    else if (!f->prompt) error_set(err, "sample needs --prompt TEXT (see pptrain sample --help)");
    else if (!f->prompt[0]) error_set(err, "--prompt is empty: the model needs text to continue");
    else if (f->sampling && !(f->temperature > 0))
        error_set(err, "--temperature %g: sampling needs a temperature > 0 (leave the sampling options out for "
                       "greedy)", f->temperature);
    else if (!(f->top_p > 0 && f->top_p <= 1)) error_set(err, "--top-p %g is outside (0, 1]", f->top_p);
    else return 0;
    return -1;
}

// A Hugging Face folder (config.json, no trainer_state.json) starts like --init-from; anything
// else (a run id, latest, a checkpoint folder) like --resume.
static void choose_source(RunOptions *ro, const char *what) {
    char config[4200], state[4200];
    snprintf(config, sizeof config, "%s/config.json", what);
    snprintf(state, sizeof state, "%s/trainer_state.json", what);
    const bool hf = access(config, R_OK) == 0 && access(state, F_OK) != 0;
    snprintf(hf ? ro->init_from : ro->resume, sizeof ro->resume, "%s", what);
}

// ---- tokens ------------------------------------------------------------------------------------

typedef struct {
    HfTokenizer *hf;         // NULL: the byte tokenizer
    int32_t eos;             // -1: none
} SampleTokens;

static int open_tokens(const RunSession *s, SampleTokens *t, Error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", s->source_dir);
    const char *use = access(path, R_OK) == 0 ? path : s->ro.rc.tokenizer_path[0] ? s->ro.rc.tokenizer_path : NULL;
    *t = (SampleTokens){.eos = TOKEN_EOS};
    if (!use) return 0;
    if (!(t->hf = hf_tokenizer_load(use, err))) return -1;
    const ModelConfig *m = &s->ro.rc.model;
    t->eos = hf_tokenizer_eos(t->hf) >= 0 ? hf_tokenizer_eos(t->hf) : m->n_eos ? m->eos_ids[0] : -1;
    return 0;
}

// The prompt's ids (malloc'd); -1 with err when the tokenizer cannot take it.
static int encode_prompt(const SampleTokens *t, const char *text, int32_t **ids, int *n, Error *err) {
    const size_t len = strlen(text);
    if (!t->hf) {   // BOS, then a token per byte
        *ids = xmalloc(sizeof(int32_t) * (len + 1));
        (*ids)[0] = TOKEN_BOS;
        *n = 1 + (int)tokenizer_encode(text, len, *ids + 1);
        return len ? 0 : -1;
    }
    HfEncoder *e = hf_encoder_new(t->hf);
    HfIds v = {0};
    const int rc = hf_encode(e, text, len, 1, &v, err);
    hf_encoder_free(e);
    *ids = v.id;
    *n = (int)v.n;
    return rc;
}

// The text of ids: the tokenizer's decoding (malloc'd, NUL-terminated).
static char *decode_ids(const SampleTokens *t, const int32_t *ids, int n) {
    if (!t->hf) {
        char *out = xmalloc((size_t)n + 1);
        tokenizer_decode(ids, (size_t)n, out, (size_t)n + 1);
        return out;
    }
    char *out = NULL;
    size_t len = 0;
    Error ignored;
    if (hf_decode(t->hf, ids, (size_t)n, &out, &len, &ignored)) return calloc(1, 1);
    return out;
}

// ---- printing as it comes --------------------------------------------------------------------

typedef struct {
    const SampleTokens *tokens;
    int32_t *ids;            // (max_new) the new ids so far
    int n;
    size_t printed;          // bytes of their decoding already written
} Stream;

// Decodes every new id so far and writes what was not written yet. A tokenizer decodes a
// character split over tokens as U+FFFD until its last byte comes, so text that ends in
// U+FFFD waits for the next token.
static void print_token(void *ctx, int32_t id) {
    Stream *s = ctx;
    s->ids[s->n++] = id;
    char *text = decode_ids(s->tokens, s->ids, s->n);
    const size_t len = strlen(text);
    const bool pending = s->tokens->hf && len >= 3 && memcmp(text + len - 3, "\xEF\xBF\xBD", 3) == 0;
    if (!pending && len > s->printed) {
        fwrite(text + s->printed, 1, len - s->printed, stdout);
        fflush(stdout);
        s->printed = len;
    }
    free(text);
}

// Bytes of the valid UTF-8 character at s[0..n), or 0 when none starts there (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF).
static size_t utf8_char(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    const size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    const unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    for (size_t i = 1; i < len; i++)
        if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xBF)) return 0;
    return len;
}

// JSON strings are UTF-8, and a model's bytes need not be: each byte that starts no valid
// character becomes U+FFFD (malloc'd).
static char *utf8_lossy(const char *text) {
    const size_t n = strlen(text);
    char *out = xmalloc(3 * n + 1), *w = out;
    for (size_t i = 0; i < n;) {
        const size_t len = utf8_char((const unsigned char *)text + i, n - i);
        if (len) memcpy(w, text + i, len), w += len, i += len;
        else memcpy(w, "\xEF\xBF\xBD", 3), w += 3, i++;
    }
    *w = '\0';
    return out;
}

static void print_json(const SampleTokens *t, const int32_t *prompt, int n_prompt, const int32_t *ids,
                       const GenerateResult *res) {
    cJSON *o = cJSON_CreateObject(), *p = cJSON_AddArrayToObject(o, "prompt_ids"), *a = cJSON_AddArrayToObject(o, "ids");
    for (int i = 0; i < n_prompt; i++) cJSON_AddItemToArray(p, cJSON_CreateNumber(prompt[i]));
    for (int i = 0; i < res->n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    char *bytes = decode_ids(t, ids, res->n), *text = utf8_lossy(bytes);
    free(bytes);
    cJSON_AddStringToObject(o, "text", text);
    cJSON_AddBoolToObject(o, "eos", res->n > 0 && ids[res->n - 1] == t->eos);
    cJSON_AddNumberToObject(o, "seconds", res->seconds);
    char *json = cJSON_PrintUnformatted(o);
    printf("%s\n", json);
    free(json);
    free(text);
    cJSON_Delete(o);
}

// ---- the command -------------------------------------------------------------------------------

// One replica, one row, one microbatch of T = prompt + new tokens (at most the model's
// positions): every token is one forward pass of T positions, so T is kept no longer than
// the generation needs. The training run's schedule may need more microbatches than one:
// gpipe unless --schedule is given. A run trained on GPUs samples on GPU stages (its device
// and precision come with it; engine/model/model_cuda.c's decode).
// A schedule CSV given brings its own ranks, as for train; it must be written for the one
// microbatch a generation runs (a training run's CSV has its own M), which the refusal says how
// to write.
static int generation_layout(RunOptions *ro, int n_prompt, long tokens, Error *err) {
    RunConfig *rc = &ro->rc;
    rc->batch = rc->microbatches = 1;
    const long T = n_prompt + tokens - 1;
    rc->seq_len = (int)(T < rc->model.max_positions ? T : rc->model.max_positions);
    ro->pipe.dp = 1;
    ro->pipe.recompute = false;
    if (!run_options_given(ro, "--schedule")) {
        snprintf(ro->pipe.schedule, sizeof ro->pipe.schedule, "gpipe");
        ro->pipe.virtual_stages = 0;
        return 0;
    }
    if (!schedule_is_file(ro->pipe.schedule)) return 0;
    if (run_options_shape_from_csv(ro, err)) return -1;   // its ranks and V; M too (sample has no --microbatches)
    if (rc->microbatches != 1) {
        error_set(err, "--schedule %s runs %d microbatches, and a sample runs 1: write one with pptrain plan --stages "
                       "%d --microbatches 1 --dump-csv > FILE (or leave --schedule out)", ro->pipe.schedule,
                  rc->microbatches, ro->pipe.ranks);
        return -1;
    }
    return 0;
}

static int check_prompt(const RunConfig *rc, const int32_t *ids, int n, Error *err) {
    if (n > rc->model.max_positions) {
        error_set(err, "--prompt is %d tokens, longer than the model's max_position_embeddings (%d)", n,
                  rc->model.max_positions);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= rc->model.vocab) {
            error_set(err, "--prompt: token id %d is outside the model's vocabulary (%d)", (int)ids[i],
                      rc->model.vocab);
            return -1;
        }
    return 0;
}

static int sample_body(RunSession *session, const SampleFlags *f, const SampleTokens *t, Error *err) {
    RunOptions *ro = &session->ro;
    int32_t *prompt = NULL;
    int n_prompt = 0;
    if (encode_prompt(t, f->prompt, &prompt, &n_prompt, err) || n_prompt == 0) {
        if (n_prompt == 0 || !t->hf) error_set(err, "--prompt is empty: the model needs text to continue");
        free(prompt);
        return -1;
    }
    Pipeline *p = NULL;
    int32_t *ids = xmalloc(sizeof(int32_t) * (size_t)f->tokens);
    int rc = check_prompt(&ro->rc, prompt, n_prompt, err);
    if (rc == 0) rc = generation_layout(ro, n_prompt, f->tokens, err);
    if (rc == 0) {
        p = pipeline_create(&ro->rc, &ro->pipe, err);
        if (!p && ro->pipe.device == DEVICE_CUDA && !run_options_given(ro, "--device")) {
            // The device is the run's, not the user's: say so, and how to sample elsewhere.
            Error why = *err;
            error_set(err, "%s (the run's device; --device cpu samples on CPU stages)", why.msg);
        }
        rc = p && pipeline_load(p, ckpt_tensor_source, session->source, false, 0, err) == 0 ? 0 : -1;
    }
    const GenerateOptions g = {.prompt = prompt, .n_prompt = n_prompt, .max_new = (int)f->tokens, .eos = t->eos,
                               .seed = f->seed,
                               .sample = {.greedy = !f->sampling, .temperature = f->temperature,
                                          .top_k = (int)f->top_k, .top_p = f->top_p}};
    Stream stream = {.tokens = t, .ids = xmalloc(sizeof(int32_t) * (size_t)f->tokens)};
    GenerateResult res = {0};
    const bool root = p && pipeline_is_root(p);
    if (rc == 0 && root && !f->json) {
        char *text = decode_ids(t, prompt, n_prompt);
        fputs(text, stdout);
        free(text);
    }
    if (rc == 0) rc = generate(p, &ro->rc, &g, f->json ? NULL : print_token, &stream, ids, &res, err);
    if (rc == 0 && root && f->json) print_json(t, prompt, n_prompt, ids, &res);
    if (rc == 0 && root && !f->json) {
        printf("\n");
        fflush(stdout);   // the text before the numbers where both go to one terminal or file
        fprintf(stderr, "pptrain sample: %d tokens in %.2f s (%.1f tokens/s), %d stages, %s\n", res.n, res.seconds,
                res.n / (res.seconds > 0 ? res.seconds : 1), pipeline_n_stages(p),
                f->sampling ? "sampled" : "greedy");
    }
    pipeline_free(p);
    free(stream.ids);
    free(ids);
    free(prompt);
    return rc;
}

int cmd_sample(int argc, char **argv) {
    static RunSession session;   // large (paths); one per process
    RunOptions *ro = &session.ro;
    *ro = run_options_defaults();
    Error err = {{0}};
    SampleFlags f;
    const char *what = NULL;
    if (parse_flags(&argc, argv, &f, &what, &err)) return cli_fail(&err);
    if (f.help) {
        usage(stdout);
        return 0;
    }
    const int parsed = run_options_parse_sample(argc, argv, 2, ro, &err);
    if (parsed == 1) {
        usage(stdout);
        return 0;
    }
    if (parsed || check_flags(&f, what, &err)) return cli_fail(&err);
    const int refused = cli_refuse_mpirun_copies("sample", &ro->pipe.transport);
    if (refused) return refused;
    choose_source(ro, what);
    session.weights_only = session.newest_intact = true;
    SampleTokens t = {0};
    int rc = run_session_prepare(&session, &err) ? -1 : 0;
    if (rc == 0 && session.fell_back.msg[0] && mpi_process_launch_rank() == 0)   // every process found the same
        fprintf(stderr, "pptrain: note: %s; sampling from %s\n", session.fell_back.msg, session.source_dir);
    if (rc == 0 && open_tokens(&session, &t, &err)) rc = -1;
    if (rc == 0) rc = sample_body(&session, &f, &t, &err);
    hf_tokenizer_free(t.hf);
    run_session_release(&session);
    return rc ? cli_fail(&err) : 0;
}
