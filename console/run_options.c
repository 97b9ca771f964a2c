// console/run_options: the run options of DESIGN.md's command line, as one table: each flag,
// its help line, and how it sets the RunConfig. `--help` prints the table; parsing walks it.
#include "console/run_options.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "console/cli.h"
#include "console/cli_options.h"
#include "engine/data/data.h"
#include "engine/model/stage_ops.h"
#include "engine/schedule/schedule.h"
#include "storage/db.h"

static int set_path(char *dst, size_t cap, const char *flag, const char *v, Error *err) {
    if (strlen(v) >= cap) {
        error_set(err, "%s: '%.40s...' is too long", flag, v);
        return -1;
    }
    snprintf(dst, cap, "%s", v);
    return 0;
}

// A value that names no file and does not look like a path is taken as a preset name, so a
// typo says "unknown preset" rather than "cannot open".
static int set_model(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    (void)flag;
    const bool looks_like_path = strchr(v, '/') || strstr(v, ".json") || access(v, F_OK) == 0;
    if (!looks_like_path) return model_config_preset(&ro->rc.model, v, err);
    return model_config_from_json(&ro->rc.model, v, err);
}

static int set_data(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    return set_path(ro->rc.data_path, sizeof ro->rc.data_path, flag, v, err);
    return 0;
}

static int set_tokenizer(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    return set_path(ro->rc.tokenizer_path, sizeof ro->rc.tokenizer_path, flag, v, err);
}

// The prompt of a run's samples: text the model continues, so it must say something.
static int set_sample_prompt(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    if (!v[0] || strlen(v) >= sizeof ro->rc.sample_prompt) {
        error_set(err, "%s: the prompt must be 1 to %zu bytes", flag, sizeof ro->rc.sample_prompt - 1);
        return -1;
    }
    snprintf(ro->rc.sample_prompt, sizeof ro->rc.sample_prompt, "%s", v);
    return 0;
}

static int set_val_data(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    return set_path(ro->rc.val_data_path, sizeof ro->rc.val_data_path, flag, v, err);
}

static int set_batching(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    if (strcmp(v, "pad") == 0) ro->rc.batching = BATCHING_PAD;
    else if (strcmp(v, "pack") == 0) ro->rc.batching = BATCHING_PACK;
    else {
        error_set(err, "%s: '%s' is not pad or pack", flag, v);
        return -1;
    }
    return 0;
}

static int set_int_field(int *field, const char *flag, const char *v, long min, long max, Error *err) {
    long x;
    if (cli_parse_int(flag, v, min, max, &x, err)) return -1;
    *field = (int)x;
    return 0;
}

static int set_double_field(double *field, const char *flag, const char *v, double min, double max, Error *err) {
    double x;
    if (cli_parse_float(flag, v, min, max, &x, err)) return -1;
    *field = x;
    return 0;
}

#define INT_SETTER(fn, field, min, max) \
    static int fn(void *opts, const char *flag, const char *v, Error *err) { \
        return set_int_field(&((RunOptions *)opts)->field, flag, v, min, max, err); \
    }
#define DOUBLE_SETTER(fn, field, min, max) \
    static int fn(void *opts, const char *flag, const char *v, Error *err) { \
        return set_double_field(&((RunOptions *)opts)->field, flag, v, min, max, err); \
    }
INT_SETTER(set_steps, rc.steps, 1, 100000000)
INT_SETTER(set_val_every, rc.val_every, 1, 100000000)
INT_SETTER(set_val_batches, rc.val_batches, 1, 1000000)
INT_SETTER(set_sample_every, rc.sample_every, 0, 100000000)
INT_SETTER(set_sample_tokens, rc.sample_tokens, 1, 1 << 20)
INT_SETTER(set_batch, rc.batch, 1, 1 << 20)
INT_SETTER(set_seq, rc.seq_len, 1, 1 << 20)
INT_SETTER(set_microbatches, rc.microbatches, 1, 1 << 20)
INT_SETTER(set_warmup, rc.optim.warmup_steps, 0, 100000000)
DOUBLE_SETTER(set_lr, rc.optim.lr, 0.0, 10.0)
DOUBLE_SETTER(set_min_lr, rc.optim.min_lr, 0.0, 10.0)
DOUBLE_SETTER(set_beta1, rc.optim.beta1, 0.0, 0.999999)
DOUBLE_SETTER(set_beta2, rc.optim.beta2, 0.0, 0.999999999)
DOUBLE_SETTER(set_eps, rc.optim.eps, 0.0, 1.0)
DOUBLE_SETTER(set_wd, rc.optim.weight_decay, 0.0, 10.0)
DOUBLE_SETTER(set_clip, rc.optim.grad_clip, 0.0, 1e9)

static int set_seed(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    return cli_parse_u64(flag, v, &ro->rc.seed, err);
}

INT_SETTER(set_stages, pipe.ranks, 1, 4096)
INT_SETTER(set_virtual, pipe.virtual_stages, 1, 64)
DOUBLE_SETTER(set_timeout, pipe.timeout_s, 0.001, 1e7)

static int set_db(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    return set_path(ro->db_path, sizeof ro->db_path, flag, v, err);
}

INT_SETTER(set_dp, pipe.dp, 1, 4096)

static int set_transport(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    if (transport_kind_parse(v, &ro->pipe.transport) == 0) return 0;
    char names[128];
    transport_names_text(names, sizeof names, NULL);
    error_set(err, "%s: '%s' is not %s", flag, v, names);
    return -1;
}

static int set_recompute(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    if (strcmp(v, "none") == 0) ro->pipe.recompute = false;
    else if (strcmp(v, "all") == 0) ro->pipe.recompute = true;
    else {
        error_set(err, "%s: '%s' is not none or all", flag, v);
        return -1;
    }
    return 0;
}

static int set_trace(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    return set_path(ro->trace_path, sizeof ro->trace_path, flag, v, err);
}

// `--device cuda` says at once, in one line, why no GPU can be used (no driver, no device, a
// build without the toolkit); what GPU stages cannot do is checked with the other options
// (engine/pipeline.c).
static int set_device(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    if (strcmp(v, "cpu") == 0) {
        ro->pipe.device = DEVICE_CPU;
        return 0;
    }
    if (strcmp(v, "cuda") != 0) {
        error_set(err, "%s: '%s' is not cpu or cuda", flag, v);
        return -1;
    }
    Error why;
    if (!stage_device_find(DEVICE_CUDA, &why)) {
        error_set(err, "%s cuda: %s", flag, why.msg);
        return -1;
    }
    ro->pipe.device = DEVICE_CUDA;
    return 0;
}

static int set_precision(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    if (strcmp(v, "bf16") == 0) ro->pipe.gpu_fp32 = false;
    else if (strcmp(v, "fp32") == 0) ro->pipe.gpu_fp32 = true;
    else {
        error_set(err, "%s: '%s' is not bf16 or fp32", flag, v);
        return -1;
    }
    return 0;
}

static int set_ckpt_dir(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    return set_path(ro->ckpt_dir, sizeof ro->ckpt_dir, flag, v, err);
}

INT_SETTER(set_ckpt_every, rc.ckpt_every, 0, 100000000)

static int set_resume(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    return set_path(ro->resume, sizeof ro->resume, flag, v, err);
}

static int set_init_from(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    return set_path(ro->init_from, sizeof ro->init_from, flag, v, err);
}

static int set_schedule(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    return set_path(ro->pipe.schedule, sizeof ro->pipe.schedule, flag, v, err);
}

static int set_split(void *opts, const char *flag, const char *v, Error *err) {
    RunOptions *ro = opts;
    return set_path(ro->pipe.split, sizeof ro->pipe.split, flag, v, err);
}

static const CliOption RUN_OPTIONS[] = {
    {"--model", "tiny|small|125m|CONFIG.json", "model preset or a Hugging Face Llama config.json (tiny)", set_model, 0},
    {"--data", "PATH", "text file, folder of text, llm.c .bin shard or folder of shards (required)", set_data, 0},
    {"--tokenizer", "FILE|DIR|auto", "encode text with a Hugging Face tokenizer.json (or a folder's); auto: the --init-from folder's", set_tokenizer, 0},
    {"--batching", "pad|pack", "one document per row, or a packed token stream (pad)", set_batching, 0},
    {"--val-data", "PATH", "validation text or shards, forward only on the pipeline (a shard folder's _val_ files)", set_val_data, 0},
    {"--val-every", "N", "steps between validations, and after the last (steps / 10)", set_val_every, 0},
    {"--val-batches", "K", "batches per validation, the same K each time (4)", set_val_batches, 0},
    {"--sample-every", "N", "a greedy sample of the model every N steps, and after the last, timed apart from the steps (0: none; train's default, the console's 25)", set_sample_every, 0},
    {"--sample-tokens", "K", "new tokens per sample, at most; no more than the sequence holds (64)", set_sample_tokens, 0},
    {"--sample-prompt", "TEXT", "the text samples continue ('The ')", set_sample_prompt, 0},
    {"--steps", "N", "optimizer steps (20)", set_steps, 0},
    {"--batch", "B", "sequences per step (8)", set_batch, 0},
    {"--seq", "T", "tokens per sequence (64)", set_seq, 0},
    {"--microbatches", "M", "microbatches per step; divides B (1)", set_microbatches, 0},
    {"--seed", "S", "parameter init and data order (1337)", set_seed, 0},
    {"--lr", "X", "peak learning rate (1e-3)", set_lr, 0},
    {"--min-lr", "X", "learning rate at the end of the cosine (0)", set_min_lr, 0},
    {"--warmup", "N", "linear warmup steps from 0.1 x lr (0)", set_warmup, 0},
    {"--beta1", "X", "AdamW beta1 (0.9)", set_beta1, 0},
    {"--beta2", "X", "AdamW beta2 (0.99)", set_beta2, 0},
    {"--eps", "X", "AdamW epsilon (1e-8)", set_eps, 0},
    {"--weight-decay", "X", "AdamW decoupled weight decay (0.1)", set_wd, 0},
    {"--grad-clip", "X", "clip the global gradient norm to X; 0 = off (1.0)", set_clip, 0},
    {"--stages", "P", "pipeline ranks: the layers are cut into P stages (1)", set_stages, 0},
    {"--schedule", "NAME|FILE.csv", NULL, set_schedule, 0},  // help: option_help, from the registry
    {"--virtual", "V", NULL, set_virtual, 0},
    {"--split", "N,N,...", "layers per stage by hand, e.g. 3,3,2, or 4,4,0 for a head-only last stage (default: balanced by cost)", set_split, 0},
    {"--timeout", "SECONDS", "longest wait for one message before every rank stops (300)", set_timeout, 0},
    {"--dp", "D", "data-parallel replicas: world = stages x D ranks (1)", set_dp, 0},
    {"--transport", "NAME", "ranks as threads of this process, or one rank each under mpirun: MPI, or NCCL between GPUs (local)", set_transport, 0},
    {"--recompute", "none|all", "all: keep only each stage's input and recompute activations in the backward (none)", set_recompute, 0},
    {"--trace", "FILE.json", "write every action of every step as a Chrome trace (Perfetto)", set_trace, 0},
    {"--device", "cpu|cuda", "where stages run; cuda: rank r on GPU r mod GPUs (cpu)", set_device, 0},
    {"--precision", "bf16|fp32", "GPU stages: bf16 GEMMs and messages, fp32 master weights; or fp32 throughout (bf16)", set_precision, 0},
    {"--ckpt-dir", "DIR", "write checkpoints (HF safetensors + optimizer + trainer state) under DIR", set_ckpt_dir, 0},
    {"--ckpt-every", "N", "checkpoint every N steps as well as at the end and on a stop (0)", set_ckpt_every, 0},
    {"--resume", "RUN|latest|DIR", "continue a run from its newest complete checkpoint (or a checkpoint folder)", set_resume, 0},
    {"--init-from", "FOLDER", "start from the weights of a Hugging Face Llama folder (safetensors)", set_init_from, 0},
    {"--db", "FILE", "the run store this run is recorded in; '' = none (pptrain.db)", set_db, 0},
};
#define N_RUN_OPTIONS (int)(sizeof RUN_OPTIONS / sizeof RUN_OPTIONS[0])
_Static_assert(sizeof RUN_OPTIONS / sizeof RUN_OPTIONS[0] <= 64, "RunOptions.given has one bit per option");

// The lines that name schedules or transports read their registries (engine/schedule/schedule.h,
// engine/transport/transport_registry.h).
static void run_text(const CliOption *o, char *arg, size_t arg_size, char *help, size_t help_size) {
    if (o->set == set_transport) transport_names_text(arg, arg_size, "|");
    if (o->set == set_schedule) schedule_option_help(help, help_size);
    else if (o->set == set_virtual) schedule_virtual_help(help, help_size);
}

// The options `check` has no use for: it runs one batch forward and backward from the run's
// weights, with no optimizer step, no checkpoint, no validation and no trace (--db stays: it
// finds the run --resume names). Accepting them silently would let a user believe they shaped
// the check.
static const char *const CHECK_UNUSED[] = {
    "--steps", "--val-data", "--val-every", "--val-batches", "--lr", "--min-lr", "--warmup", "--beta1", "--beta2",
    "--eps", "--weight-decay", "--grad-clip", "--trace", "--ckpt-dir", "--ckpt-every", "--sample-every",
    "--sample-tokens", "--sample-prompt", NULL};

static bool unused_by_check(const char *flag) {
    for (const char *const *u = CHECK_UNUSED; *u; u++)
        if (strcmp(*u, flag) == 0) return true;
    return false;
}

// Where check reads a flag otherwise than a run does, its help says so.
static const char *const CHECK_HELP[][2] = {
    {"--resume", "check the weights of a run's newest complete checkpoint (or a checkpoint folder)"},
    {"--init-from", "check the weights of a Hugging Face Llama folder (safetensors)"},
    {"--db", "the run store where --resume finds RUN or latest (pptrain.db)"}};

static void check_text(const CliOption *o, char *arg, size_t arg_size, char *help, size_t help_size) {
    run_text(o, arg, arg_size, help, help_size);
    for (size_t k = 0; k < sizeof CHECK_HELP / sizeof CHECK_HELP[0]; k++)
        if (strcmp(CHECK_HELP[k][0], o->flag) == 0) snprintf(help, help_size, "%s", CHECK_HELP[k][1]);
}

static bool used_by_check(const CliOption *o) { return !unused_by_check(o->flag); }

void run_options_usage(FILE *out) { cli_options_usage(out, RUN_OPTIONS, N_RUN_OPTIONS, 36, NULL, run_text); }
void run_options_usage_check(FILE *out) {
    cli_options_usage(out, RUN_OPTIONS, N_RUN_OPTIONS, 36, used_by_check, check_text);
}

int run_options_parse_check(int argc, char **argv, int first, RunOptions *ro, Error *err) {
    for (int i = first; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
        if (unused_by_check(argv[i])) {
            error_set(err, "check does not use %s (it runs one batch, with no optimizer step, checkpoint, validation "
                           "or trace; see pptrain check --help)", argv[i]);
            return -1;
        }
    }
    return run_options_parse(argc, argv, first, ro, err);
}

// `sample` lays the model out as a run does and reads nothing else of a run: no data, no
// batch or sequence (the prompt decides them), no optimizer, checkpoints or trace. The device
// and precision are a run's own unless given (console/run_session.c).
static const char *const SAMPLE_USED[] = {"--stages", "--schedule",  "--split",   "--virtual", "--transport",
                                          "--device", "--precision", "--timeout", "--db",      NULL};

// Where sample reads a flag otherwise than a run does, its help says so.
static const char *const SAMPLE_HELP[][2] = {
    {"--schedule", "the forward-only order's stage placement: a built-in name or a CSV file (default gpipe)"},
    {"--db", "the run store where RUN or latest is found (pptrain.db)"},
    {"--device", "where stages run (default: the run's; cpu for a folder of Hugging Face weights)"},
    {"--precision", "GPU stages: bf16 or fp32 throughout (default: the run's; bf16 for Hugging Face weights)"}};

static void sample_text(const CliOption *o, char *arg, size_t arg_size, char *help, size_t help_size) {
    run_text(o, arg, arg_size, help, help_size);
    for (size_t k = 0; k < sizeof SAMPLE_HELP / sizeof SAMPLE_HELP[0]; k++)
        if (strcmp(o->flag, SAMPLE_HELP[k][0]) == 0) snprintf(help, help_size, "%s", SAMPLE_HELP[k][1]);
}

static bool used_by_sample(const CliOption *o) {
    for (const char *const *u = SAMPLE_USED; *u; u++)
        if (strcmp(*u, o->flag) == 0) return true;
    return false;
}

void run_options_usage_sample(FILE *out) {
    cli_options_usage(out, RUN_OPTIONS, N_RUN_OPTIONS, 28, used_by_sample, sample_text);
}

int run_options_parse_sample(int argc, char **argv, int first, RunOptions *ro, Error *err) {
    for (int i = first; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
        const CliOption *opt = cli_option_find(RUN_OPTIONS, N_RUN_OPTIONS, argv[i]);
        if (!opt || !used_by_sample(opt)) {
            error_set(err, "sample: %s option '%s' (see pptrain sample --help)", opt ? "no use for the" : "unknown",
                      argv[i]);
            return -1;
        }
        ro->given |= 1ull << (opt - RUN_OPTIONS);
        if (cli_option_take(opt, argc, argv, &i, ro, err)) return -1;
    }
    return 0;
}

bool run_options_given(const RunOptions *ro, const char *flag) {
    for (int k = 0; k < N_RUN_OPTIONS; k++)
        if (strcmp(flag, RUN_OPTIONS[k].flag) == 0) return (ro->given >> k) & 1;
    return false;
}

void run_options_set_given(RunOptions *ro, const char *flag) {
    for (int k = 0; k < N_RUN_OPTIONS; k++)
        if (strcmp(flag, RUN_OPTIONS[k].flag) == 0) ro->given |= 1ull << k;
}

RunOptions run_options_defaults(void) {
    RunOptions ro = {.rc = run_config_defaults(), .pipe = pipeline_options_defaults()};
    snprintf(ro.pipe.schedule, sizeof ro.pipe.schedule, "1f1b");
    snprintf(ro.db_path, sizeof ro.db_path, "%s", DB_DEFAULT_PATH);
    return ro;
}

// A CSV schedule brings its own P (rows), M and V, as plan takes them: P and M fill --stages and
// --microbatches when those were not given (when they were, the pipeline checks they agree);
// a --virtual given must be the file's (its stages over its ranks), as a built-in schedule with
// a fixed V refuses another.
int run_options_shape_from_csv(RunOptions *ro, Error *err) {
    if (!schedule_is_file(ro->pipe.schedule)) return 0;
    const bool virtual_given = run_options_given(ro, "--virtual");
    if (run_options_given(ro, "--stages") && run_options_given(ro, "--microbatches") && !virtual_given) return 0;
    Schedule *s = schedule_resolve(ro->pipe.schedule, 0, 0, 0, err);
    if (!s) return -1;
    if (virtual_given && ro->pipe.virtual_stages * s->n_ranks != s->n_stages) {
        error_set(err, "--virtual %d, but %s has %d stages on %d ranks", ro->pipe.virtual_stages, s->name,
                  s->n_stages, s->n_ranks);
        schedule_free(s);
        return -1;
    }
    if (!run_options_given(ro, "--stages")) ro->pipe.ranks = s->n_ranks;
    if (!run_options_given(ro, "--microbatches")) ro->rc.microbatches = s->n_microbatches;
    schedule_free(s);
    return 0;
}

// A flag given without the one it needs would be accepted and do nothing: each is refused in one
// line that names what it needs. Only flags the user gave count, never a default (the console's
// --sample-every 25 and --ckpt-dir are values, so they satisfy these as given ones do).
// Samples are this command line's own, on --resume too (a checkpoint keeps none); a resumed run
// writes its checkpoints where the run it continues did (run_session.c), so --ckpt-every alone is
// enough there, and validation is checked against the checkpoint's data once it is merged
// (run_options_check_val).
static int refuse_inert(const RunOptions *ro, Error *err) {
    const bool resume = ro->resume[0] != 0;
    if (run_options_given(ro, "--ckpt-every") && ro->rc.ckpt_every > 0 && !ro->ckpt_dir[0] && !resume) {
        error_set(err, "--ckpt-every %d needs --ckpt-dir DIR: without it no checkpoint is written", ro->rc.ckpt_every);
        return -1;
    }
    if (ro->rc.sample_every == 0 && run_options_given(ro, "--sample-prompt")) {
        error_set(err, "--sample-prompt needs --sample-every N: without it no sample is taken (train's default is "
                       "none)");
        return -1;
    }
    if (ro->rc.sample_every == 0 && run_options_given(ro, "--sample-tokens")) {
        error_set(err, "--sample-tokens %d needs --sample-every N: without it no sample is taken (train's default is "
                       "none)", ro->rc.sample_tokens);
        return -1;
    }
    return 0;
}

int run_options_check_val(const RunOptions *ro, Error *err) {
    const bool every = run_options_given(ro, "--val-every");
    if (!every && !run_options_given(ro, "--val-batches")) return 0;
    if (ro->rc.val_data_path[0] || data_held_out_count(ro->rc.data_path) > 0) return 0;
    error_set(err, "%s %d needs --val-data PATH (or --data, a folder with llm.c _val_ shards): without it nothing is "
                   "validated", every ? "--val-every" : "--val-batches", every ? ro->rc.val_every : ro->rc.val_batches);
    return -1;
}

int run_options_parse(int argc, char **argv, int first, RunOptions *ro, Error *err) {
    bool have_data = false;
    for (int i = first; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
        const CliOption *opt = cli_option_find(RUN_OPTIONS, N_RUN_OPTIONS, argv[i]);
        if (!opt) {
            error_set(err, "unknown option '%s' (see --help)", argv[i]);
            return -1;
        }
        ro->given |= 1ull << (opt - RUN_OPTIONS);
        if (cli_option_take(opt, argc, argv, &i, ro, err)) return -1;
        have_data |= opt->set == set_data;
    }
    if (run_options_given(ro, "--precision") && !ro->pipe.gpu_fp32 && ro->pipe.device != DEVICE_CUDA &&
        !ro->resume[0]) {
        error_set(err, "--precision bf16 is for GPU stages (--device cuda); CPU stages compute in fp32");
        return -1;
    }
    if (refuse_inert(ro, err)) return -1;
    if (ro->resume[0]) {   // the run config comes from the checkpoint: run_session checks it
        ro->rc.optim.total_steps = ro->rc.steps;
        return 0;
    }
    if (!have_data) {
        error_set(err, "--data PATH is required (a text file or folder, or llm.c .bin shards)");
        return -1;
    }
    ro->rc.optim.total_steps = ro->rc.steps;
    // A default warmup longer than the run (the console's 20 under --steps 5) shrinks to a
    // tenth of it: the user never asked for it. One the user gave is held to --steps.
    if (!run_options_given(ro, "--warmup") && ro->rc.optim.warmup_steps > ro->rc.steps)
        ro->rc.optim.warmup_steps = ro->rc.steps / 10;
    if (run_options_shape_from_csv(ro, err) || run_options_check_val(ro, err)) return -1;
    return run_config_validate(&ro->rc, err);
}
