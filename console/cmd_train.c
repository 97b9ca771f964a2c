// `pptrain train`: a headless run that prints one line per step and a summary.
#include "console/cmd_train.h"

#include <stdio.h>

#include "console/cli.h"

static void print_start(void *ctx, const RunConfig *rc, const RunInfo *info) {
    (void)ctx;
    const ModelConfig *m = &rc->model;
    printf("pptrain train: model %s (%.2f M params: %d layers, hidden %d, heads %d/%d kv, vocab %d)\n",
           m->name, info->params / 1e6, m->layers, m->hidden, m->heads, m->kv_heads, m->vocab);
    printf("  data %s: %s, %llu %s, %llu tokens, %s batching\n", rc->data_path, info->data_kind,
           (unsigned long long)info->data_items, rc->batching == BATCHING_PAD ? "documents" : "windows",
           (unsigned long long)info->data_tokens, rc->batching == BATCHING_PAD ? "pad" : "pack");
    printf("  batch %d x seq %d, %d microbatch%s, %d steps, lr %g (warmup %d, min %g), seed %llu\n",
           rc->batch, rc->seq_len, rc->microbatches, rc->microbatches == 1 ? "" : "es", rc->steps,
           rc->optim.lr, rc->optim.warmup_steps, rc->optim.min_lr, (unsigned long long)rc->seed);
    printf("  activations %.1f MiB per microbatch\n", info->activation_bytes / 1048576.0);
    fflush(stdout);
}

static void print_step(void *ctx, const StepReport *r) {
    (void)ctx;
    printf("step %5d/%d | loss %.6f | lr %.3e | norm %.4f | %9.0f tok/s | %7.2f GFLOP/s | %8.1f ms\n",
           r->step, r->steps, r->loss, r->lr, r->grad_norm, r->tokens_per_s, r->gflops, r->step_ms);
    fflush(stdout);
}

static void print_end(void *ctx, const RunSummary *s) {
    (void)ctx;
    printf("done: %d steps in %.2f s | loss %.4f -> %.4f | median %.0f tok/s, %.2f GFLOP/s, %.1f ms/step\n",
           s->steps, s->wall_s, s->first_loss, s->last_loss, s->median_tokens_per_s, s->median_gflops,
           s->median_step_ms);
}

int cmd_train(int argc, char **argv) {
    RunConfig rc = run_config_defaults();
    Error err = {{0}};
    int rc_parse = run_options_parse(argc, argv, 2, &rc, &err);
    if (rc_parse == 1) {
        printf("usage: pptrain train [run options]\n\n");
        run_options_usage(stdout);
        return 0;
    }
    if (rc_parse) return cli_fail(&err);
    TrainerHooks hooks = {.on_start = print_start, .on_step = print_step, .on_end = print_end};
    if (trainer_run(&rc, &hooks, &err)) return cli_fail(&err);
    return 0;
}
