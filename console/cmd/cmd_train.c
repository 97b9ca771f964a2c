// `pptrain train`: a headless run that prints one line per step and a summary.
#include "console/cmd/cmd_train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>

#include "console/cli.h"
#include "console/cmd/cmd_console.h"
#include "console/run_options.h"
#include "console/run_session.h"
#include "engine/train_loop.h"
#include "kernels/cpu/blas_core.h"
#include "storage/token_manifest.h"
#include "storage/trace.h"

typedef struct {
    int n_stages, n_ranks;
    int peak_slots[256];          // per stage, from the latest step (first 256 stages)
    size_t slot_bytes[256];       // per stage: one microbatch's activations (RunInfo.slot_bytes)
    size_t arena_bytes[256];      // per stage: a GPU stage's scratch arena; 0 on the CPU
    bool gpu;                     // --device cuda
    double busy_ms[256];          // per rank, summed over the steps
    int steps;
    double bubble_sum;            // measured bubble summed over the steps
    const RunSession *session;    // the run's store row and checkpoints
    const char *trace_path;
    TraceWriter *trace;
    double trace_origin;          // the first step's first event, rank 0's clock
} TrainPrinter;

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static void print_stage_layers(const RunInfo *info) {
    printf("  layers per stage:");
    for (int s = 0; s < info->n_stages; s++) {
        if (info->stage_layers[s] < 0) printf(" ?");
        else printf(" %d", info->stage_layers[s]);
    }
    printf("\n");
}

// A GPU stage's context reserves a scratch arena once, beside its microbatches' activations
// (engine/model/model_cuda_arena.c): each stage's, as the device memory it takes.
static void print_stage_arenas(const PipelineOptions *po, const RunInfo *info) {
    if (po->device != DEVICE_CUDA || !info->arena_bytes) return;
    printf("  scratch arena per stage (MiB, reserved once beside the activations):");
    for (int s = 0; s < info->n_stages; s++) printf(" %.1f", info->arena_bytes[s] / 1048576.0);
    printf("\n");
}

static int print_start(void *ctx, const RunConfig *rc, const PipelineOptions *po, const RunInfo *info,
                       Error *err) {
    TrainPrinter *tp = ctx;
    if (tp->trace_path[0] && !(tp->trace = trace_open(tp->trace_path, err))) return -1;
    tp->n_stages = info->n_stages;
    tp->gpu = po->device == DEVICE_CUDA;
    for (int s = 0; s < info->n_stages && s < 256; s++) {
        tp->slot_bytes[s] = info->slot_bytes[s];
        tp->arena_bytes[s] = info->arena_bytes ? info->arena_bytes[s] : 0;
    }
    const ModelConfig *m = &rc->model;
    printf("pptrain train: model %s (%.2f M params: %d layers, hidden %d, heads %d/%d kv, vocab %d)\n",
           m->name, info->params / 1e6, m->layers, m->hidden, m->heads, m->kv_heads, m->vocab);
    printf("  data %s: %s, %llu %s, %llu tokens, %s batching\n", rc->data_path, info->data_kind,
           (unsigned long long)info->data_items, rc->batching == BATCHING_PAD ? "documents" : "windows",
           (unsigned long long)info->data_tokens, rc->batching == BATCHING_PAD ? "pad" : "pack");
    if (strcmp(info->data_kind, "text") == 0)   // shards are ids already: no tokenizer read them
        printf("  tokenizer %s: vocab %d, bos %d, eos %d, pad %d\n", info->tokenizer ? info->tokenizer : "bytes",
               info->tok_vocab, info->tok_bos, info->tok_eos, info->tok_pad);
    TokenManifest tm;
    Error unread;   // only for the banner: a manifest the run checked was read fine already
    if (strcmp(info->data_kind, "text") != 0 && token_manifest_read(rc->data_path, &tm, &unread) == 1)
        printf("  tokens from pptrain tokenize with %s: vocab %d, sha256 %.12s...\n", tm.tokenizer,
               tm.vocab, tm.sha256);
    printf("  batch %d x seq %d, %d microbatch%s, %d steps, lr %g (warmup %d, min %g), seed %llu\n",
           rc->batch, rc->seq_len, rc->microbatches, rc->microbatches == 1 ? "" : "es", rc->steps,
           rc->optim.lr, rc->optim.warmup_steps, rc->optim.min_lr, (unsigned long long)rc->seed);
    char device[48];
    cli_device_text(po->device, po->gpu_fp32, device, sizeof device);
    printf("  pipeline: %s, %d stage%s on %d rank%s x %d replica%s, %s transport, %s%s\n", po->schedule,
           info->n_stages, info->n_stages == 1 ? "" : "s", po->ranks, po->ranks == 1 ? "" : "s", po->dp,
           po->dp == 1 ? "" : "s", transport_kind_name(po->transport), device,
           po->recompute ? ", recompute all" : "");
    print_stage_layers(info);
    if (info->notice && info->notice[0]) printf("  note: %s\n", info->notice);
    if (po->device == DEVICE_CPU) {
        char core[512];
        printf("  products: %s\n", blas_core_describe(core, sizeof core));
        if (blas_core_check(core, sizeof core) == 1) printf("  note: %s\n", core);
    }
    if (info->val_held_out)
        printf("  %zu llm.c _val_ shard%s of %s held out of training%s\n", info->val_held_out,
               info->val_held_out == 1 ? "" : "s", rc->data_path, rc->val_data_path[0] ? "" : ": the validation set");
    if (info->val_source)
        printf("  validation: %d batch%s of %s every %d steps and after the last, forward only\n", info->val_batches,
               info->val_batches == 1 ? "" : "es", info->val_source, info->val_every);
    const RunSession *ss = tp->session;
    if (ss->ro.resume[0])
        printf("  resuming from %s at step %d (run %lld)\n", ss->source_dir, info->start_step, (long long)ss->resumed_from);
    else if (ss->ro.init_from[0])
        printf("  weights from %s\n", ss->source_dir);
    if (ss->ro.ckpt_dir[0]) {
        if (ss->ro.rc.ckpt_every > 0)
            printf("  checkpoints under %s every %d steps and at the end\n", ss->ro.ckpt_dir, ss->ro.rc.ckpt_every);
        else printf("  a checkpoint under %s at the end\n", ss->ro.ckpt_dir);
    }
    size_t most = 0;
    for (int s = 0; s < info->n_stages; s++) most = info->slot_bytes[s] > most ? info->slot_bytes[s] : most;
    printf("  activations: %.1f MiB per microbatch on the largest stage\n", most / 1048576.0);
    print_stage_arenas(po, info);
    const RunRecorder *rec = &tp->session->recorder;
    if (rec->run > 0) printf("  recording run %lld in %s\n", (long long)rec->run, rec->path);
    fflush(stdout);
    return 0;
}

// Appends the step's events to the trace; a failed write ends tracing with one warning.
static void trace_step(TrainPrinter *tp, const Pipeline *p, const PipelineReport *pr) {
    const ActionEvent *const *events;
    const int *n_events;
    const int W = pipeline_events(p, &events, &n_events);
    const double *offsets = pipeline_clock_offsets(p);
    int stage_rank[4096];
    for (int s = 0; s < pr->n_stages && s < 4096; s++) stage_rank[s] = pr->telemetry.stages[s].rank;
    if (tp->steps == 0) {
        tp->trace_origin = 1e300;
        for (int r = 0; r < W; r++)
            if (n_events[r] && events[r][0].start + offsets[r] < tp->trace_origin)
                tp->trace_origin = events[r][0].start + offsets[r];
    }
    if (trace_add_step(tp->trace, pr->step.step, W, pr->n_stages, stage_rank, events, n_events, offsets,
                       tp->trace_origin)) {
        Error err;
        trace_close(tp->trace, &err);
        fprintf(stderr, "pptrain: warning: %s; tracing stopped\n", err.msg);
        tp->trace = NULL;
    }
}

static void print_step(void *ctx, const Pipeline *p, const PipelineReport *pr) {
    TrainPrinter *tp = ctx;
    const StepReport *r = &pr->step;
    if (tp->trace && pr->has_telemetry) trace_step(tp, p, pr);
    printf("step %5d/%d | loss %.6f | lr %.3e | norm %.4f | %9.0f tok/s | %7.2f GFLOP/s | %8.1f ms",
           r->step, r->steps, r->loss, r->lr, r->grad_norm, r->tokens_per_s, r->gflops, r->step_ms);
    if (pr->has_telemetry && pr->n_ranks > 1) printf(" | bubble %4.1f%%", 100.0 * pr->telemetry.bubble);
    printf("\n");
    tp->bubble_sum += pr->has_telemetry ? pr->telemetry.bubble : 0.0;
    fflush(stdout);
    tp->n_ranks = pr->n_ranks < 256 ? pr->n_ranks : 256;
    for (int s = 0; s < pr->n_stages && s < 256; s++) tp->peak_slots[s] = pr->peak_slots[s];
    for (int q = 0; q < tp->n_ranks; q++) tp->busy_ms[q] += pr->busy_ms[q];
    tp->steps++;
    (void)p;
}

static void print_checkpoint(void *ctx, const char *dir, int step, int64_t bytes, int files) {
    (void)ctx;
    printf("checkpoint step %d: %s (%d files, %.2f MiB)\n", step, dir, files, bytes / 1048576.0);
    fflush(stdout);
}

static bool stop_asked(void *ctx) {
    (void)ctx;
    return stop_requested != 0;
}

static void print_eval(void *ctx, int step, double val_loss) {
    (void)ctx;
    printf("val  %5d | val loss %.6f\n", step, val_loss);
    fflush(stdout);
}

// One line: the step, the time the sample took, and its text with control bytes, quotes and
// backslashes escaped (\n, \xNN), so a sample is one line of the run's output whatever the
// model writes. Bytes >= 0x80 pass: a terminal shows UTF-8, and a model's broken UTF-8 at worst
// shows as replacement characters.
static void print_sample(void *ctx, int step, const int32_t *ids, int n, const char *text, double seconds) {
    (void)ctx, (void)ids;
    printf("sample %4d | %.2f s | %d tokens | \"", step, seconds, n);
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '\n') printf("\\n");
        else if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else if (*c < 0x20 || *c == 0x7f) printf("\\x%02x", *c);
        else putchar(*c);
    }
    printf("\"\n");
    fflush(stdout);
}

static void print_end(void *ctx, const RunSummary *s) {
    TrainPrinter *tp = ctx;
    if (s->stopped) printf("stopped by signal after %d steps\n", s->steps);
    printf("done: %d steps in %.2f s | loss %.4f -> %.4f | median %.0f tok/s, %.2f GFLOP/s, %.1f ms/step\n",
           s->steps, s->wall_s, s->first_loss, s->last_loss, s->median_tokens_per_s, s->median_gflops,
           s->median_step_ms);
    if (!isnan(s->val_loss)) printf("  validation loss %.4f\n", s->val_loss);
    if (s->samples)
        printf("  samples: %d in %.2f s, %.1f%% of the run's time (outside every step's time)\n", s->samples,
               s->sample_s, 100.0 * s->sample_s / (s->wall_s > 0 ? s->wall_s : 1));
    printf("  peak stashed activations (microbatches) per stage:");
    for (int k = 0; k < tp->n_stages && k < 256; k++) printf(" %d", tp->peak_slots[k]);
    if (tp->gpu) {   // the device memory they took, with the arena each stage's context reserved
        printf("\n  GPU memory per stage, those activations + scratch arena (MiB):");
        for (int k = 0; k < tp->n_stages && k < 256; k++)
            printf(" %.1f", ((double)tp->peak_slots[k] * (double)tp->slot_bytes[k] + (double)tp->arena_bytes[k]) / 1048576.0);
    }
    printf("\n  mean busy ms per rank and step:");
    for (int q = 0; q < tp->n_ranks; q++) printf(" %.1f", tp->busy_ms[q] / (tp->steps ? tp->steps : 1));
    printf("\n");
    if (tp->n_ranks > 1) printf("  mean measured bubble: %.1f%%\n", 100.0 * tp->bubble_sum / (tp->steps ? tp->steps : 1));
    if (tp->trace) {
        Error err;
        if (trace_close(tp->trace, &err)) fprintf(stderr, "pptrain: warning: %s\n", err.msg);
        else printf("  trace: %s (open it in https://ui.perfetto.dev)\n", tp->trace_path);
        tp->trace = NULL;
    }
}

// `pptrain train --tui ...`: the same run, with train's flags and defaults, watched live.
static int train_in_console(int argc, char **argv) {
    char **args = xcalloc((size_t)argc + 1, sizeof(char *));
    int n = 0;
    args[n++] = argv[0];
    args[n++] = argv[1];
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--tui") != 0) args[n++] = argv[i];
    const int rc = cmd_console_train(n, args, 2);
    free(args);
    return rc;
}

int cmd_train(int argc, char **argv) {
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--tui") == 0) return train_in_console(argc, argv);
    RunOptions ro = run_options_defaults();
    Error err = {{0}};
    int rc_parse = run_options_parse(argc, argv, 2, &ro, &err);
    if (rc_parse == 1) {
        printf("usage: pptrain train [run options] [--tui]   (--tui: the same run in the live console)\n\n");
        run_options_usage(stdout);
        return 0;
    }
    if (rc_parse) return cli_fail(&err);
    const int refused = cli_refuse_mpirun_copies("train", &ro.pipe.transport);
    if (refused) return refused;
    static RunSession session;    // large (paths): not on the stack
    TrainPrinter printer;
    memset(&printer, 0, sizeof printer);
    printer.session = &session;
    printer.trace_path = ro.trace_path;
    session.ro = ro;
    session.view = (TrainHooks){.ctx = &printer, .on_start = print_start, .on_step = print_step,
                                .on_eval = print_eval, .on_sample = print_sample, .should_stop = stop_asked, .on_end = print_end};
    session.on_checkpoint = print_checkpoint;
    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    RunSummary summary;
    const int result = run_session(&session, &summary, &err);
    if (printer.trace) trace_discard(printer.trace);
    return result ? cli_fail(&err) : 0;
}
