// tests/unit/test_sample: sampling (engine/sample) is pure and seeded (greedy, temperature,
// top-k, top-p), and generation on the pipeline (engine/generate) gives the same greedy ids on
// every layout, stops at EOS or after N tokens, reads logits that later (padding) positions
// cannot change, and with its KV cache gives the logits and greedy ids of the recomputed prefix;
// samples during training are timed apart from the steps.
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/clock.h"
#include "engine/generate.h"
#include "engine/sample.h"
#include "engine/train_loop.h"
#include "test_util.h"

// ---- the sampler ------------------------------------------------------------------------------

static void test_argmax(void) {
    const float tie[5] = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
    CHECK(sample_argmax(tie, 5) == 1, "the lowest id among equal maxima, as torch.argmax");
    Sampler *s = sampler_create(5);
    const SampleOptions greedy = {.greedy = true};
    uint64_t state = 7;
    CHECK(sample_next(s, tie, &greedy, &state) == 1 && state == 7, "greedy draws nothing");
    // top-k 1 and a tiny top-p keep only the most probable token, whatever the draw.
    const SampleOptions k1 = {.temperature = 1.0, .top_k = 1, .top_p = 1.0};
    const SampleOptions p0 = {.temperature = 1.0, .top_k = 0, .top_p = 1e-9};
    for (int i = 0; i < 50; i++) {
        CHECK(sample_next(s, tie, &k1, &state) == 1, "top-k 1 is greedy");
        CHECK(sample_next(s, tie, &p0, &state) == 1, "a tiny top-p is greedy");
    }
    sampler_free(s);
}

// Frequencies over many draws against softmax(logits / t) restricted as top-k / top-p say.
static void draw_counts(const float *logits, int V, const SampleOptions *o, uint64_t seed, int n, int *count) {
    Sampler *s = sampler_create(V);
    memset(count, 0, sizeof(int) * (size_t)V);
    for (int i = 0; i < n; i++) count[sample_next(s, logits, o, &seed)]++;
    sampler_free(s);
}

static void test_distribution(void) {
    enum { V = 6, N = 200000 };
    const float logits[V] = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, 1.0f};
    int count[V];
    const double t = 0.7;
    double p[V], sum = 0;
    for (int i = 0; i < V; i++) sum += p[i] = exp(logits[i] / t);
    const SampleOptions plain = {.temperature = t, .top_p = 1.0};
    draw_counts(logits, V, &plain, 42, N, count);
    for (int i = 0; i < V; i++) CHECK_NEAR(count[i] / (double)N, p[i] / sum, 0.006, "temperature 0.7 frequency");
    // top-k 3: ids 0, 1 and 5 (1 and 5 tie: both kept, as the lower id is kept first).
    const SampleOptions k3 = {.temperature = 1.0, .top_k = 3, .top_p = 1.0};
    draw_counts(logits, V, &k3, 43, N, count);
    CHECK(count[2] == 0 && count[3] == 0 && count[4] == 0, "top-k 3 keeps three tokens");
    const double k3sum = exp(2.0) + 2 * exp(1.0);
    CHECK_NEAR(count[0] / (double)N, exp(2.0) / k3sum, 0.006, "top-k renormalizes");
    // top-p 0.5 at t = 1: p(0) = 0.466 < 0.5, then id 1 (0.172, the lower of the tied pair)
    // brings the mass to 0.64: ids 0 and 1 only.
    const SampleOptions p5 = {.temperature = 1.0, .top_p = 0.5};
    draw_counts(logits, V, &p5, 44, N, count);
    CHECK(count[0] + count[1] == N && count[1] > 0, "top-p 0.5 keeps ids 0 and 1");
    CHECK_NEAR(count[0] / (double)N, exp(2.0) / (exp(2.0) + exp(1.0)), 0.006, "top-p renormalizes");
}

static void test_seeded(void) {
    enum { V = 50, N = 64 };
    float logits[V];
    for (int i = 0; i < V; i++) logits[i] = (float)sin(i * 1.7);
    const SampleOptions o = {.temperature = 1.0, .top_k = 20, .top_p = 0.9};
    int32_t a[N], b[N], c[N];
    Sampler *s = sampler_create(V);
    uint64_t sa = 5, sb = 5, sc = 6;
    for (int i = 0; i < N; i++) a[i] = sample_next(s, logits, &o, &sa);
    for (int i = 0; i < N; i++) b[i] = sample_next(s, logits, &o, &sb);
    for (int i = 0; i < N; i++) c[i] = sample_next(s, logits, &o, &sc);
    CHECK(memcmp(a, b, sizeof a) == 0, "the same seed draws the same tokens");
    CHECK(memcmp(a, c, sizeof a) != 0, "another seed draws other tokens");
    uint64_t z = 0;
    CHECK(sample_splitmix64(&z) == 0xE220A8397B1DCDAFull, "splitmix64's first value from 0");
    sampler_free(s);
}

// ---- generation on the pipeline ----------------------------------------------------------------

enum { GEN_T = 24, GEN_NEW = 16 };

static RunConfig gen_run(int rows) {
    RunConfig rc = run_config_defaults();
    rc.seq_len = GEN_T;
    rc.batch = rows;
    rc.microbatches = rows;
    return rc;
}

// Greedy ids for the prompt on P ranks x D replicas (schedule gpipe); 0 new ids on failure.
static int greedy_ids(int P, int D, int M, int32_t eos, int max_new, int32_t *out) {
    RunConfig rc = gen_run(M * D);
    rc.microbatches = M;
    PipelineOptions o = pipeline_options_defaults();
    o.ranks = P;
    o.dp = D;
    Error err = {{0}};
    Pipeline *p = pipeline_create(&rc, &o, &err);
    CHECK(p != NULL, "P=%d D=%d M=%d: %s", P, D, M, err.msg);
    if (!p) return 0;
    const int32_t prompt[5] = {'T', 'h', 'e', ' ', 'q'};
    const GenerateOptions g = {.prompt = prompt, .n_prompt = 5, .max_new = max_new, .eos = eos,
                               .sample = {.greedy = true}};
    GenerateResult res;
    const int rc_gen = generate(p, &rc, &g, NULL, NULL, out, &res, &err);
    CHECK(rc_gen == 0, "P=%d D=%d M=%d: %s", P, D, M, err.msg);
    pipeline_free(p);
    return rc_gen ? 0 : res.n;
}

// Whether id is among ids[0..n).
static bool memchr_id(const int32_t *ids, int n, int32_t id) {
    for (int i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

static void test_layouts(void) {
    int32_t one[GEN_NEW], other[GEN_NEW];
    const int n = greedy_ids(1, 1, 1, -1, GEN_NEW, one);
    CHECK(n == GEN_NEW, "16 new tokens without EOS: %d", n);
    const int layouts[][3] = {{4, 1, 1}, {2, 1, 2}, {2, 2, 2}, {3, 1, 1}};
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        const int m = greedy_ids(layouts[i][0], layouts[i][1], layouts[i][2], -1, GEN_NEW, other);
        CHECK(m == n && memcmp(one, other, sizeof one) == 0, "P=%d D=%d M=%d: greedy ids differ from one stage's",
              layouts[i][0], layouts[i][1], layouts[i][2]);
    }
    // EOS: an id, as EOS, ends generation at its first appearance (and is returned).
    int k = GEN_NEW - 1;
    while (k > 0 && memchr_id(one, k, one[k])) k--;
    const int m = greedy_ids(2, 1, 1, one[k], GEN_NEW, other);
    CHECK(m == k + 1 && other[k] == one[k], "EOS %d stops at its first place %d: %d tokens", one[k], k, m);
    // N: the room of T. A 5-token prompt in T = 24 has room for 20 new ids, not more.
    int32_t many[40];
    CHECK(greedy_ids(1, 1, 1, -1, 40, many) == GEN_T + 1 - 5, "generation ends at the end of T");
    CHECK(memcmp(many, one, sizeof one) == 0, "a longer generation starts as the shorter");
}

// The logits at position t are the bits of the same sequence whatever follows it.
static void test_padding(void) {
    RunConfig rc = gen_run(1);
    PipelineOptions o = pipeline_options_defaults();
    o.ranks = 2;
    Error err = {{0}};
    Pipeline *p = pipeline_create(&rc, &o, &err);
    CHECK(p != NULL, "%s", err.msg);
    if (!p) return;
    const int V = rc.model.vocab;
    int32_t in[GEN_T];
    for (int i = 0; i < GEN_T; i++) in[i] = (i * 37) % 250;
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
    const int pos = 9;
    CHECK(pipeline_logits(p, in, pos, a, &err) == 0, "%s", err.msg);
    for (int i = pos + 1; i < GEN_T; i++) in[i] = 0;
    CHECK(pipeline_logits(p, in, pos, b, &err) == 0, "%s", err.msg);
    CHECK(memcmp(a, b, sizeof(float) * V) == 0, "later positions changed the logits at position 9");
    in[pos] = (in[pos] + 1) % 250;
    CHECK(pipeline_logits(p, in, pos, b, &err) == 0 && memcmp(a, b, sizeof(float) * V) != 0,
          "the token at position 9 changes its logits");
    free(a);
    free(b);
    pipeline_free(p);
}

// Recomputing the prefix each token (pipeline_logits) is the reference the KV cache is held
// to: up to float summation order the same logits at every position, and the same greedy ids.
static int recomputed_greedy(Pipeline *p, const int32_t *prompt, int n_prompt, int max_new, int32_t *out,
                             float *logits, int V) {
    int32_t in[GEN_T] = {0};
    memcpy(in, prompt, sizeof(int32_t) * (size_t)n_prompt);
    Error err = {{0}};
    int len = n_prompt, n = 0;
    while (n < max_new && len <= GEN_T) {
        CHECK(pipeline_logits(p, in, len - 1, logits, &err) == 0, "%s", err.msg);
        out[n] = sample_argmax(logits, V);
        if (len < GEN_T) in[len] = out[n];
        n++, len++;
    }
    return n;
}

// The cached logits against the recomputed ones at each position, as the largest difference
// over the logits' spread.
static double cached_logits_gap(Pipeline *p, const int32_t *prompt, int n_prompt, const int32_t *ids, int n,
                                int V) {
    int32_t in[GEN_T] = {0};
    memcpy(in, prompt, sizeof(int32_t) * (size_t)n_prompt);
    for (int i = 0; i + n_prompt < GEN_T && i < n; i++) in[n_prompt + i] = ids[i];
    float *cached = malloc(sizeof(float) * V), *full = malloc(sizeof(float) * V);
    Error err = {{0}};
    double worst = 0.0;
    CHECK(pipeline_prefill(p, in, n_prompt, cached, &err) == 0, "%s", err.msg);
    for (int pos = n_prompt - 1; pos < GEN_T; pos++) {
        if (pos >= n_prompt) CHECK(pipeline_decode(p, in[pos], pos, cached, &err) == 0, "%s", err.msg);
        CHECK(pipeline_logits(p, in, pos, full, &err) == 0, "%s", err.msg);
        float lo = full[0], hi = full[0];
        double gap = 0.0;
        for (int v = 0; v < V; v++) {
            lo = full[v] < lo ? full[v] : lo;
            hi = full[v] > hi ? full[v] : hi;
            gap = fabs((double)cached[v] - full[v]) > gap ? fabs((double)cached[v] - full[v]) : gap;
        }
        if (gap / (hi - lo) > worst) worst = gap / (hi - lo);
    }
    free(cached);
    free(full);
    return worst;
}

static void test_cache_matches_recompute(void) {
    const int layouts[][2] = {{1, 1}, {3, 1}, {2, 2}};
    const int32_t prompt[5] = {'T', 'h', 'e', ' ', 'q'};
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        RunConfig rc = gen_run(layouts[i][1]);
        rc.microbatches = 1;
        PipelineOptions o = pipeline_options_defaults();
        o.ranks = layouts[i][0];
        o.dp = layouts[i][1];
        Error err = {{0}};
        Pipeline *p = pipeline_create(&rc, &o, &err);
        CHECK(p != NULL, "%s", err.msg);
        if (!p) continue;
        const int V = rc.model.vocab, room = GEN_T + 1 - 5;
        float *logits = malloc(sizeof(float) * V);
        int32_t want[GEN_T], got[GEN_T];
        const int n_want = recomputed_greedy(p, prompt, 5, room, want, logits, V);
        const GenerateOptions g = {.prompt = prompt, .n_prompt = 5, .max_new = room, .eos = -1,
                                   .sample = {.greedy = true}};
        GenerateResult res;
        // Twice: a second prefill starts the sequence again, whatever the cache held.
        for (int round = 0; round < 2; round++) {
            CHECK(generate(p, &rc, &g, NULL, NULL, got, &res, &err) == 0, "%s", err.msg);
            CHECK(res.n == n_want && memcmp(got, want, sizeof(int32_t) * (size_t)n_want) == 0,
                  "P=%d D=%d round %d: cached greedy ids differ from the recomputed prefix's", layouts[i][0],
                  layouts[i][1], round);
        }
        const double gap = cached_logits_gap(p, prompt, 5, want, n_want, V);
        CHECK(gap < 1e-5, "P=%d D=%d: cached logits %.3g of their spread from the recomputed", layouts[i][0],
              layouts[i][1], gap);
        free(logits);
        pipeline_free(p);
    }
}

// ---- sampling during training -------------------------------------------------------------

// What the hooks saw: when each step was reported and its step_ms, and each sample's seconds
// (indexed by the steps done when it ran).
enum { TIMED_STEPS = 6 };
typedef struct {
    double reported_at[TIMED_STEPS + 1], step_ms[TIMED_STEPS + 1], sample_s[TIMED_STEPS + 1];
    int steps, samples;
} SampleTimes;

static void timed_step(void *ctx, const Pipeline *p, const PipelineReport *r) {
    (void)p;
    SampleTimes *t = ctx;
    t->steps++;
    t->reported_at[t->steps] = clock_now_s();
    t->step_ms[t->steps] = r->step.step_ms;
}

static void timed_sample(void *ctx, int step, const int32_t *ids, int n, const char *text, double seconds) {
    (void)ids, (void)n, (void)text;
    SampleTimes *t = ctx;
    t->samples++;
    if (step >= 1 && step <= TIMED_STEPS) t->sample_s[step] = seconds;
}

// Sampling time is its own share: between two steps' reports lie the later step's step_ms
// and the earlier one's sample, disjoint, so their sum cannot exceed the gap; a sample timed
// inside a step would be counted twice and overshoot by its own length. The run's summary
// adds the samples up apart from the steps.
static void test_sampling_time_apart(void) {
    RunConfig rc = gen_run(2);
    snprintf(rc.data_path, sizeof rc.data_path, "%s/tests/fixtures/text", PPTRAIN_SOURCE_DIR);
    rc.steps = TIMED_STEPS;
    rc.optim.warmup_steps = 1;
    rc.sample_every = 1;
    rc.sample_tokens = GEN_T;
    PipelineOptions o = pipeline_options_defaults();
    o.ranks = 2;
    SampleTimes t = {0};
    const TrainHooks hooks = {.ctx = &t, .on_step = timed_step, .on_sample = timed_sample};
    RunSummary sum;
    Error err = {{0}};
    CHECK(train_run(&rc, &o, &hooks, NULL, &sum, &err) == 0, "%s", err.msg);
    CHECK(t.steps == TIMED_STEPS && t.samples == TIMED_STEPS && sum.samples == TIMED_STEPS,
          "a sample after every step: %d steps, %d samples", t.steps, t.samples);
    double total = 0.0, steps_s = 0.0;
    for (int k = 1; k <= TIMED_STEPS; k++) {
        total += t.sample_s[k];
        steps_s += t.step_ms[k] / 1e3;
        CHECK(t.sample_s[k] > 0.0, "sample after step %d took %g s", k, t.sample_s[k]);
        if (k < 2) continue;
        const double gap = t.reported_at[k] - t.reported_at[k - 1];
        CHECK(t.step_ms[k] / 1e3 + t.sample_s[k - 1] <= gap + 1e-4,
              "step %d: step_ms %.2f ms + the sample before it %.2f ms exceed the %.2f ms between the reports", k,
              t.step_ms[k], 1e3 * t.sample_s[k - 1], 1e3 * gap);
    }
    CHECK(fabs(sum.sample_s - total) < 1e-9 && steps_s + sum.sample_s <= sum.wall_s + 1e-4,
          "summary: samples %.4f s (hooks %.4f s), steps %.4f s, wall %.4f s", sum.sample_s, total, steps_s, sum.wall_s);
}

int main(void) {
    test_argmax();
    test_distribution();
    test_seeded();
    test_layouts();
    test_padding();
    test_cache_matches_recompute();
    test_sampling_time_apart();
    return test_finish();
}
