#include "engine/train_loop.h"
#include "engine/clock.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/data/tokenizer.h"
#include "engine/data/tokenizer_hf.h"
#include "engine/generate.h"

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    if (n <= 0) return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static Dataset *checked_vocab(Dataset *ds, const RunConfig *rc, const char *path, Error *err) {
    if (ds && dataset_max_token(ds) >= rc->model.vocab) {
        error_set(err, "%s: token id %d is outside the model's vocabulary (%d)", path, (int)dataset_max_token(ds),
                  rc->model.vocab);
        dataset_close(ds);
        return NULL;
    }
    return ds;
}

// Text under the byte tokenizer only trains a model whose vocabulary is the byte tokenizer's:
// with any other, the ids would silently mean bytes to a model that reads them as its own.
static Dataset *open_data(const RunConfig *rc, const TextEncoding *te, Error *err) {
    Dataset *ds = checked_vocab(dataset_open_text(rc->data_path, rc->batching, rc->seq_len, rc->seed, DATA_TRAIN, te,
                                                  err), rc, rc->data_path, err);
    if (ds && !te && strcmp(dataset_kind(ds), "text") == 0 && rc->model.vocab != BYTE_VOCAB_SIZE) {
        error_set(err, "%s is text and the model's vocabulary is %d, not the byte tokenizer's %d: pass --tokenizer "
                  "tokenizer.json (or --tokenizer auto with --init-from)", rc->data_path, rc->model.vocab,
                  BYTE_VOCAB_SIZE);
        dataset_close(ds);
        return NULL;
    }
    return ds;
}

// --tokenizer: loaded, held to the model's vocabulary, and an encoder per OpenMP thread.
static HfTokenizer *open_tokenizer(const RunConfig *rc, TextEncoding *te, Error *err) {
    *te = (TextEncoding){0};
    if (!rc->tokenizer_path[0]) return NULL;
    Error why;
    HfTokenizer *t = hf_tokenizer_load(rc->tokenizer_path, &why);
    if (!t) {
        error_set(err, "--tokenizer: %s", why.msg);
        return NULL;
    }
    if (hf_tokenizer_vocab(t) > rc->model.vocab) {
        error_set(err, "--tokenizer %s has %d ids, more than the model's vocabulary (%d)", rc->tokenizer_path,
                  hf_tokenizer_vocab(t), rc->model.vocab);
        hf_tokenizer_free(t);
        return NULL;
    }
    text_encoding_init(te, t, omp_get_max_threads());
    return t;
}

int train_data_open(const RunConfig *rc, TrainData *d, Error *err) {
    *d = (TrainData){0};
    d->tok = open_tokenizer(rc, &d->te, err);
    if (rc->tokenizer_path[0] && !d->tok) return -1;
    d->ds = open_data(rc, d->tok ? &d->te : NULL, err);
    if (!d->ds) {
        train_data_close(d);
        return -1;
    }
    return 0;
}

void train_data_close(TrainData *d) {
    dataset_close(d->ds);
    if (d->tok) text_encoding_free(&d->te);
    hf_tokenizer_free(d->tok);
    *d = (TrainData){0};
}

static void describe_tokenizer(const HfTokenizer *t, const TextEncoding *te, RunInfo *info) {
    info->tokenizer = t ? hf_tokenizer_name(t) : NULL;
    info->tok_vocab = t ? hf_tokenizer_vocab(t) : BYTE_VOCAB_SIZE;
    info->tok_bos = t ? hf_tokenizer_bos(t) : TOKEN_BOS;
    info->tok_eos = t ? te->eos : TOKEN_EOS;
    info->tok_pad = t ? te->pad : TOKEN_PAD;
}

// The validation set: --val-data (a folder of llm.c shards: its _val_ shards, when it has
// some; anything else whole), else the _val_ shards the training folder set aside, else none
// (*ok stays true). *source: the path it reads.
static Dataset *open_val(const RunConfig *rc, const TextEncoding *te, const Dataset *train, const char **source,
                         bool *ok, Error *err) {
    *ok = true;
    *source = NULL;
    const bool own = rc->val_data_path[0] != 0;
    if (!own && dataset_held_out(train) == 0) return NULL;
    const char *path = own ? rc->val_data_path : rc->data_path;
    Error why;
    Dataset *ds = own ? dataset_open_text(path, rc->batching, rc->seq_len, rc->seed, DATA_VAL, te, &why) : NULL;
    if (!ds) ds = dataset_open_text(path, rc->batching, rc->seq_len, rc->seed, own ? DATA_ALL : DATA_VAL, te, err);
    ds = checked_vocab(ds, rc, path, err);
    *ok = ds != NULL;
    *source = ds ? path : NULL;
    return ds;
}

static int val_every(const RunConfig *rc) {
    return rc->val_every > 0 ? rc->val_every : rc->steps / 10 > 1 ? rc->steps / 10 : 1;
}

// What the run will do, for the banner: layers, activation bytes and (GPU stages) scratch arena
// bytes per stage; bytes holds 2 x S: the slots' bytes, then the arenas'.
static void describe_run(const RunConfig *rc, const PipelineOptions *po, const Pipeline *p, const Dataset *ds, int *layers,
                         size_t *bytes, RunInfo *info) {
    const int S = pipeline_n_stages(p);
    const int rows = rc->batch / (rc->microbatches * (po->dp > 0 ? po->dp : 1));
    int first_layer = 0;
    for (int s = 0; s < S; s++) {
        layers[s] = pipeline_stage_layers(p, s);
        // The sizes depend only on the stage's shape, so a shell (no weights) answers for
        // stages held by other processes too. Under recompute a microbatch keeps the light set;
        // on a GPU, attention keeps row statistics, not (T, T) matrices (flash attention).
        const StageModel shell = {.cfg = rc->model, .layer_begin = first_layer, .layer_end = first_layer + layers[s],
                                  .has_embed = s == 0, .has_head = s == S - 1};
        bytes[s] = po->recompute ? stage_acts_light_bytes(&shell, rows, rc->seq_len)
                                 : stage_acts_bytes_on(&shell, rows, rc->seq_len, po->device, !po->gpu_fp32);
        // A GPU stage's context reserves its scratch arena once, whatever the microbatches in
        // flight (engine/model/model_cuda_arena.c: the very number model_cuda.c reserves).
        bytes[S + s] = po->device == DEVICE_CUDA ? stage_cuda_arena_bytes(&shell, rows, rc->seq_len, !po->gpu_fp32) : 0;
        first_layer += layers[s];
    }
    *info = (RunInfo){.data_kind = dataset_kind(ds), .data_items = dataset_items(ds),
                      .data_tokens = dataset_tokens(ds), .params = model_config_param_count(&rc->model),
                      .n_stages = S, .stage_layers = layers, .slot_bytes = bytes, .arena_bytes = bytes + S,
                      .notice = pipeline_notice(p)};
    pipeline_host(p, &info->host_ranks, &info->host_cores);
}

typedef struct {
    double *tokens_per_s, *gflops, *step_ms;   // (steps)
} StepSeries;

static void summarize(const StepSeries *ser, int steps, RunSummary *sum) {
    // The first step pays for page faults and cold caches: leave it out when there are more.
    const int skip = steps > 1 ? 1 : 0;
    sum->median_tokens_per_s = median(ser->tokens_per_s + skip, steps - skip);
    sum->median_gflops = median(ser->gflops + skip, steps - skip);
    sum->median_step_ms = median(ser->step_ms + skip, steps - skip);
}

// Every process calls this with its own verdict; all of them get the same answer (under
// local there is one process and the answer is its own).
static bool anyone(Pipeline *p, bool mine) { return pipeline_world_max(p, mine ? 1.0 : 0.0) > 0.0; }

// Runs the checkpoint hook on every process; a failure anywhere fails the run everywhere.
static int save_checkpoint(const CheckpointHooks *ckpt, Pipeline *p, const TrainPosition *pos, Error *err) {
    Error mine = {{0}};
    const int rc = ckpt->save(ckpt->ctx, p, pos, &mine);
    if (!anyone(p, rc != 0)) return 0;
    if (rc) *err = mine;
    else error_set(err, "checkpoint at step %d failed on another rank (see its error line)", pos->step);
    return -1;
}

// A NaN or infinite loss or gradient norm has already reached the weights (the update ran):
// the run stops here, before any checkpoint could save them. Every process gets the same loss
// and norm (the norm is one all-reduced sum over every stage), so all stop at the same step.
static int check_finite(const StepReport *s, Error *err) {
    if (isfinite(s->loss) && isfinite(s->grad_norm)) return 0;
    error_set(err, "step %d: non-finite %s (loss %g, gradient norm %g over all stages); the run stopped and these "
                   "weights are not saved (a lower --lr, or a larger --eps, may help)", s->step,
              isfinite(s->loss) ? "gradient norm" : isfinite(s->grad_norm) ? "loss" : "loss and gradient norm",
              s->loss, s->grad_norm);
    return -1;
}

typedef struct {
    const RunConfig *rc;
    Pipeline *p;
    Dataset *ds;
    Dataset *val;                     // NULL: no validation
    const TrainHooks *hooks;          // the root's hooks, NULL elsewhere
    const CheckpointHooks *ckpt;      // every process's, or NULL
    bool mpi;                         // the stop decision must be shared with the other processes
    const HfTokenizer *tok;           // the run's tokenizer (NULL: bytes), for samples
    int32_t eos;                      // where a sample stops (-1: never)
} Loop;

// The same val_batches batches every time (the set's first ones in its seed's order), each
// forward only on the pipeline; their mean loss. Every process runs it.
static int evaluate(const Loop *lp, int32_t *inputs, int32_t *targets, double *loss, Error *err) {
    const RunConfig *rc = lp->rc;
    const int K = rc->val_batches > 0 ? rc->val_batches : 1;
    dataset_set_cursor(lp->val, (DataCursor){0, 0});
    double sum = 0.0;
    for (int k = 0; k < K; k++) {
        dataset_next_batch(lp->val, rc->batch, inputs, targets);
        double batch_loss;
        if (pipeline_eval(lp->p, inputs, targets, &batch_loss, err)) return -1;
        sum += batch_loss;
    }
    *loss = sum / K;
    return 0;
}

static bool eval_due(const Loop *lp, const TrainPosition *pos) {
    return lp->val && (pos->step % val_every(lp->rc) == 0 || pos->step == lp->rc->steps);
}

static bool sample_due(const Loop *lp, const TrainPosition *pos) {
    const int every = lp->rc->sample_every;
    return every > 0 && (pos->step % every == 0 || pos->step == lp->rc->steps);
}

// The prompt as `pptrain sample` encodes it: the tokenizer's ids with its specials (BOS), or
// BOS and a byte a token; cut to the sequence's length. *n = 0 when there is nothing to say.
static int32_t *sample_prompt(const Loop *lp, int *n) {
    const char *text = lp->rc->sample_prompt;
    const size_t len = strlen(text);
    int32_t *ids = NULL;
    if (lp->tok) {
        HfEncoder *e = hf_encoder_new(lp->tok);
        HfIds v = {0};
        Error ignored;
        const int rc = hf_encode(e, text, len, 1, &v, &ignored);
        hf_encoder_free(e);
        ids = v.id;
        *n = rc ? 0 : (int)v.n;
    } else {
        ids = xmalloc(sizeof(int32_t) * (len + 1));
        ids[0] = TOKEN_BOS;
        *n = 1 + (int)tokenizer_encode(text, len, ids + 1);
    }
    if (*n > lp->rc->seq_len) *n = lp->rc->seq_len;
    for (int i = 0; i < *n; i++)
        if (ids[i] >= lp->rc->model.vocab) *n = 0;
    return ids;
}

static char *sample_text(const Loop *lp, const int32_t *ids, int n) {
    if (lp->tok) {
        char *out = NULL;
        size_t len = 0;
        Error ignored;
        if (hf_decode(lp->tok, ids, (size_t)n, &out, &len, &ignored) == 0) return out;
        return calloc(1, 1);
    }
    char *out = xmalloc((size_t)n + 1);
    tokenizer_decode(ids, (size_t)n, out, (size_t)n + 1);
    return out;
}

// A greedy sample on the training pipeline (every process runs it), timed on its own: the
// step times never include it. A prompt the model cannot read is skipped (nothing to say).
static int take_sample(const Loop *lp, int step, RunSummary *sum, Error *err) {
    const double t0 = clock_now_s();
    int n_prompt = 0;
    int32_t *prompt = sample_prompt(lp, &n_prompt);
    int32_t *ids = xmalloc(sizeof(int32_t) * (size_t)(lp->rc->sample_tokens > 0 ? lp->rc->sample_tokens : 1));
    const GenerateOptions g = {.prompt = prompt, .n_prompt = n_prompt, .max_new = lp->rc->sample_tokens,
                               .eos = lp->eos, .sample = {.greedy = true}};
    GenerateResult res = {0};
    const int rc = n_prompt > 0 ? generate(lp->p, lp->rc, &g, NULL, NULL, ids, &res, err) : 0;
    const double seconds = clock_now_s() - t0;
    if (rc == 0 && n_prompt > 0) {
        sum->samples++;
        sum->sample_s += seconds;
        if (lp->hooks && lp->hooks->on_sample) {
            char *text = sample_text(lp, ids, res.n);
            lp->hooks->on_sample(lp->hooks->ctx, step, ids, res.n, text, seconds);
            free(text);
        }
    }
    free(ids);
    free(prompt);
    return rc;
}

static int run_steps(const Loop *lp, TrainPosition *pos, RunSummary *sum, Error *err) {
    const RunConfig *rc = lp->rc;
    const TrainHooks *hooks = lp->hooks;
    const size_t batch_tokens = (size_t)rc->batch * rc->seq_len;
    int32_t *inputs = xmalloc(batch_tokens * sizeof(int32_t));
    int32_t *targets = xmalloc(batch_tokens * sizeof(int32_t));
    const int planned = rc->steps - pos->step > 0 ? rc->steps - pos->step : 0;
    StepSeries ser = {.tokens_per_s = xmalloc((planned + 1) * sizeof(double)),
                      .gflops = xmalloc((planned + 1) * sizeof(double)),
                      .step_ms = xmalloc((planned + 1) * sizeof(double))};
    int result = 0, saved_at = -1;
    const double t_run = clock_now_s();
    for (int n = 0; pos->step < rc->steps; n++) {
        if (n > 0) {
            bool stop = hooks && hooks->should_stop && hooks->should_stop(hooks->ctx);
            if (lp->mpi) stop = anyone(lp->p, stop);
            // A failed agreement is not a stop request: the run failed (and says where).
            if ((result = pipeline_failed(lp->p, err))) break;
            if (stop) {
                sum->stopped = true;
                break;
            }
        }
        dataset_next_batch(lp->ds, rc->batch, inputs, targets);
        PipelineReport r;
        if ((result = pipeline_step(lp->p, inputs, targets, pos->step, &r, err))) break;
        pos->step++;
        pos->cursor = dataset_get_cursor(lp->ds);
        ser.tokens_per_s[n] = r.step.tokens_per_s;
        ser.gflops[n] = r.step.gflops;
        ser.step_ms[n] = r.step.step_ms;
        if (n == 0) sum->first_loss = r.step.loss;
        sum->last_loss = r.step.loss;
        sum->steps = n + 1;
        if (hooks && hooks->on_step) hooks->on_step(hooks->ctx, lp->p, &r);
        if ((result = check_finite(&r.step, err))) break;   // no checkpoint of these weights
        if (eval_due(lp, pos)) {
            if ((result = evaluate(lp, inputs, targets, &sum->val_loss, err))) break;
            if (hooks && hooks->on_eval) hooks->on_eval(hooks->ctx, pos->step, sum->val_loss);
        }
        if (sample_due(lp, pos) && (result = take_sample(lp, pos->step, sum, err))) break;
        if (lp->ckpt && lp->ckpt->save && lp->ckpt->every > 0 && pos->step % lp->ckpt->every == 0 &&
            pos->step < rc->steps) {
            if ((result = save_checkpoint(lp->ckpt, lp->p, pos, err))) break;
            saved_at = pos->step;
        }
    }
    if (result == 0 && lp->ckpt && lp->ckpt->save && saved_at != pos->step && sum->steps > 0) {
        pos->final = true;
        result = save_checkpoint(lp->ckpt, lp->p, pos, err);
    }
    sum->wall_s = clock_now_s() - t_run;
    summarize(&ser, sum->steps, sum);
    free(ser.tokens_per_s);
    free(ser.gflops);
    free(ser.step_ms);
    free(inputs);
    free(targets);
    return result;
}

// Restores the pipeline and the position on every process; a failure anywhere fails all.
static int restore(const CheckpointHooks *ckpt, Pipeline *p, Dataset *ds, TrainPosition *pos, Error *err) {
    *pos = (TrainPosition){.step = 0, .cursor = dataset_get_cursor(ds)};
    if (!ckpt || !ckpt->restore) return 0;
    Error mine = {{0}};
    const int rc = ckpt->restore(ckpt->ctx, p, pos, &mine);
    if (anyone(p, rc != 0)) {
        if (rc) *err = mine;
        else error_set(err, "restoring the run failed on another rank (see its error line)");
        return -1;
    }
    dataset_set_cursor(ds, pos->cursor);
    return 0;
}

int train_run(const RunConfig *rc, const PipelineOptions *po, const TrainHooks *hooks, const CheckpointHooks *ckpt,
              RunSummary *summary, Error *err) {
    if (run_config_validate(rc, err)) return -1;
    TextEncoding te;
    HfTokenizer *tok = open_tokenizer(rc, &te, err);
    if (rc->tokenizer_path[0] && !tok) return -1;
    Dataset *ds = open_data(rc, tok ? &te : NULL, err);
    Pipeline *p = ds ? pipeline_create(rc, po, err) : NULL;
    const char *val_source;
    bool val_ok = false;
    Dataset *val = p ? open_val(rc, tok ? &te : NULL, ds, &val_source, &val_ok, err) : NULL;
    if (!val_ok) {
        pipeline_free(p);
        dataset_close(ds);
        text_encoding_free(&te);
        hf_tokenizer_free(tok);
        return -1;
    }
    TrainPosition pos;
    RunSummary sum = {.val_loss = NAN};
    int result = restore(ckpt, p, ds, &pos, err);
    const int S = pipeline_n_stages(p);
    int *layers = xmalloc(S * sizeof(int));
    size_t *bytes = xmalloc(2 * S * sizeof(size_t));   // describe_run: slots, then arenas
    RunInfo info;
    describe_run(rc, po, p, ds, layers, bytes, &info);
    describe_tokenizer(tok, &te, &info);
    info.start_step = pos.step;
    info.val_source = val_source;
    info.val_batches = rc->val_batches > 0 ? rc->val_batches : 1;
    info.val_every = val_every(rc);
    info.val_held_out = dataset_held_out(ds);
    const bool root = pipeline_is_root(p);
    const TrainHooks *root_hooks = root ? hooks : NULL;
    if (result == 0 && root_hooks && root_hooks->on_start) result = root_hooks->on_start(hooks->ctx, rc, po, &info, err);
    // Only the root runs on_start (opens the store, ...): when it fails there, the other
    // processes must not step into a run the root has left.
    if (anyone(p, result != 0) && result == 0) {
        error_set(err, "the run could not start on rank 0 (see its error line)");
        result = -1;
    }
    const Loop loop = {.rc = rc, .p = p, .ds = ds, .val = val, .hooks = root_hooks, .ckpt = ckpt,
                       .mpi = transport_multi_process(po->transport), .tok = tok,
                       .eos = info.tok_eos < rc->model.vocab ? info.tok_eos : -1};
    if (result == 0) result = run_steps(&loop, &pos, &sum, err);
    if (result == 0 && root_hooks && root_hooks->on_end) root_hooks->on_end(hooks->ctx, &sum);
    if (summary) *summary = sum;
    free(layers);
    free(bytes);
    pipeline_free(p);
    dataset_close(ds);
    dataset_close(val);
    text_encoding_free(&te);
    hf_tokenizer_free(tok);
    return result;
}
