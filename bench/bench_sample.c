// bench/bench_sample: what a sample costs at the console's default run (the tiny model on 4
// stages under 1F1B, 8 microbatches of 2 rows of 128 tokens: console/cmd/cmd_console.c), with
// each stage's KV cache (generate) against recomputing the prefix for every token
// (pipeline_logits, as generation ran before the cache), and the share of the run's time that
// sampling every N steps takes.
//   bench_sample [--tokens K] [--steps S] [--reps R]
// K new tokens after the default prompt "The " (BOS + 4 bytes; default 64), S timed training
// steps (default 30) after 3 untimed, R timed samples each way (default 5); medians. The
// share of sampling every N steps: one sample over (N steps + one sample).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/clock.h"
#include "engine/data/tokenizer.h"
#include "engine/generate.h"
#include "engine/pipeline.h"
#include "engine/sample.h"

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static RunConfig console_run(void) {
    RunConfig rc = run_config_defaults();
    rc.microbatches = 8;
    rc.batch = 16;
    rc.seq_len = 128;
    rc.optim.lr = 3e-3;
    rc.optim.warmup_steps = 20;
    return rc;
}

// Median seconds of one training step on random bytes.
static double step_seconds(Pipeline *p, const RunConfig *rc, int steps) {
    const size_t n = (size_t)rc->batch * rc->seq_len;
    int32_t *in = malloc(n * sizeof(int32_t)), *tg = malloc(n * sizeof(int32_t));
    double *t = malloc(sizeof(double) * (size_t)steps);
    uint64_t state = 7;
    Error err = {{0}};
    for (int s = -3; s < steps; s++) {
        for (size_t i = 0; i < n; i++) in[i] = tg[i] = (int32_t)(sample_splitmix64(&state) % 256);
        PipelineReport r;
        const double t0 = clock_now_s();
        if (pipeline_step(p, in, tg, s + 3, &r, &err)) {
            fprintf(stderr, "bench_sample: %s\n", err.msg);
            exit(1);
        }
        if (s >= 0) t[s] = clock_now_s() - t0;
    }
    const double m = median(t, steps);
    free(in);
    free(tg);
    free(t);
    return m;
}

// Seconds of one greedy sample of k tokens: recomputing the prefix, or with the KV cache.
static double sample_seconds(Pipeline *p, const RunConfig *rc, const int32_t *prompt, int n_prompt, int k,
                             bool recompute, int32_t *ids) {
    Error err = {{0}};
    const double t0 = clock_now_s();
    int rc_gen = 0;
    if (recompute) {
        int32_t *in = calloc((size_t)rc->seq_len, sizeof(int32_t));
        float *logits = malloc(sizeof(float) * (size_t)rc->model.vocab);
        memcpy(in, prompt, sizeof(int32_t) * (size_t)n_prompt);
        for (int i = 0, len = n_prompt; i < k && len <= rc->seq_len && rc_gen == 0; i++, len++) {
            rc_gen = pipeline_logits(p, in, len - 1, logits, &err);
            ids[i] = sample_argmax(logits, rc->model.vocab);
            if (len < rc->seq_len) in[len] = ids[i];
        }
        free(in);
        free(logits);
    } else {
        const GenerateOptions g = {.prompt = prompt, .n_prompt = n_prompt, .max_new = k, .eos = -1,
                                   .sample = {.greedy = true}};
        GenerateResult res;
        rc_gen = generate(p, rc, &g, NULL, NULL, ids, &res, &err);
    }
    if (rc_gen) {
        fprintf(stderr, "bench_sample: %s\n", err.msg);
        exit(1);
    }
    return clock_now_s() - t0;
}

int main(int argc, char **argv) {
    int k = 64, steps = 30, reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--tokens") == 0) k = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--steps") == 0) steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--reps") == 0) reps = atoi(argv[i + 1]);
    }
    if (k < 1 || steps < 1 || reps < 1 || argc % 2 == 0) {
        fprintf(stderr, "usage: bench_sample [--tokens K] [--steps S] [--reps R]\n");
        return 2;
    }
    RunConfig rc = console_run();
    PipelineOptions o = pipeline_options_defaults();
    o.ranks = 4;
    snprintf(o.schedule, sizeof o.schedule, "1f1b");
    Error err = {{0}};
    Pipeline *p = pipeline_create(&rc, &o, &err);
    if (!p) {
        fprintf(stderr, "bench_sample: %s\n", err.msg);
        return 1;
    }
    const double step = step_seconds(p, &rc, steps);
    const int32_t prompt[5] = {TOKEN_BOS, 'T', 'h', 'e', ' '};   // as train encodes "The "
    int32_t *cached_ids = malloc(sizeof(int32_t) * (size_t)k), *full_ids = malloc(sizeof(int32_t) * (size_t)k);
    double *tc = malloc(sizeof(double) * (size_t)reps), *tr = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        tr[r] = sample_seconds(p, &rc, prompt, 5, k, true, full_ids);
        tc[r] = sample_seconds(p, &rc, prompt, 5, k, false, cached_ids);
    }
    const double cached = median(tc, reps), full = median(tr, reps);
    printf("console default run: P=4 1f1b M=8 B=16 T=128, tiny model; %d new tokens after \"The \"\n", k);
    printf("step           %8.2f ms (median of %d)\n", 1e3 * step, steps);
    printf("sample, cache  %8.2f ms (median of %d)\n", 1e3 * cached, reps);
    printf("sample, prefix %8.2f ms recomputed, %.1fx the cached; greedy ids %s\n", 1e3 * full, full / cached,
           memcmp(cached_ids, full_ids, sizeof(int32_t) * (size_t)k) == 0 ? "equal" : "DIFFER");
    const int every[] = {10, 25, 50, 100, 250, 500};
    for (size_t i = 0; i < sizeof every / sizeof every[0]; i++)
        printf("every %3d steps: sampling %.2f%% of the run (cache), %.2f%% (recomputed)\n", every[i],
               100.0 * cached / (every[i] * step + cached), 100.0 * full / (every[i] * step + full));
    free(cached_ids);
    free(full_ids);
    free(tc);
    free(tr);
    pipeline_free(p);
    return 0;
}
