// Balanced contiguous layer split, in two passes. (1) Layers cost the same, so a stage's cost
// is n * layer_cost + extra (embedding on stage 0, head on the last): for a bound T each stage
// holds at most cap(T) layers, T is feasible when the caps reach L, and the optimal T is the
// smallest feasible value of the form n * layer_cost + extra (binary search over those).
// (2) A dynamic program picks, among the splits within T, the most even one.
// Every stage holds at least one layer, except that the last may hold none when the head
// alone costs more than a layer: a head with a large vocabulary (125m: 32000 tokens, about
// four layers) is then best a stage of its own (125m at P 4: 4,4,4,0 instead of 3,4,4,1).
#include "engine/partition.h"

#include <assert.h>
#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct {
    int L, S;
    double layer, embed, head;
} Model;

double partition_stage_cost(int stage, int n_stages, int n, double layer_cost, double embed_cost, double head_cost) {
    return n * layer_cost + (stage == 0 ? embed_cost : 0.0) + (stage == n_stages - 1 ? head_cost : 0.0);
}

// The fewest layers stage k may hold: 0 for a last stage whose head outweighs a layer, else 1.
static int min_layers(const Model *m, int k) {
    return k == m->S - 1 && m->S > 1 && m->head > m->layer ? 0 : 1;
}

static double extra(const Model *m, int stage) {
    return partition_stage_cost(stage, m->S, 0, m->layer, m->embed, m->head);
}

// Most layers stage k can hold without costing more than t (the 1e-9 absorbs rounding in t,
// which is itself some n * layer + extra).
static int capacity(const Model *m, int k, double t) {
    double n = floor((t - extra(m, k)) / m->layer + 1e-9);
    return n < 0 ? 0 : n > m->L ? m->L : (int)n;
}

static bool feasible(const Model *m, double t) {
    long total = 0;
    for (int k = 0; k < m->S; k++) {
        int c = capacity(m, k, t);
        if (c < min_layers(m, k)) return false;
        total += c;
    }
    return total >= m->L;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The smallest achievable bound on the most expensive stage.
static double optimal_bound(const Model *m) {
    double extras[4] = {extra(m, 0), extra(m, m->S - 1), 0.0, 0.0};
    int n_extras = m->S > 2 ? 3 : 2;  // middle stages (extra 0) exist only when S > 2
    size_t n = (size_t)n_extras * (size_t)(m->L + 1);  // 0..L layers (0: a head-only last stage)
    double *cand = xmalloc(sizeof(double) * n);
    for (int e = 0; e < n_extras; e++)
        for (int k = 0; k <= m->L; k++) cand[(size_t)e * (size_t)(m->L + 1) + (size_t)k] = k * m->layer + extras[e];
    qsort(cand, n, sizeof(double), cmp_double);
    size_t lo = 0, hi = n - 1;  // cand[hi] (all layers on one stage) is always feasible
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (feasible(m, cand[mid])) hi = mid;
        else lo = mid + 1;
    }
    double t = cand[lo];
    free(cand);
    return t;
}

// Among splits whose stages all cost at most t, the one with the smallest sum of squared
// stage costs (the most even), then the lexicographically smallest counts. sq[k][i] is the
// least sum of squares for stages k..S-1 holding layers i..L-1 (HUGE_VAL: impossible).
static void split_evenly(const Model *m, double t, int *counts) {
    const int L = m->L, S = m->S;
    double *sq = xmalloc(sizeof(double) * (size_t)(S + 1) * (size_t)(L + 1));
#define SQ(k, i) sq[(size_t)(k) * (size_t)(L + 1) + (size_t)(i)]
    for (int i = 0; i <= L; i++) SQ(S, i) = i == L ? 0.0 : HUGE_VAL;
    for (int k = S - 1; k >= 0; k--) {
        int cap = capacity(m, k, t);
        for (int i = 0; i <= L; i++) {
            double best = HUGE_VAL;
            for (int n = min_layers(m, k); n <= cap && i + n <= L; n++) {
                double c = partition_stage_cost(k, S, n, m->layer, m->embed, m->head);
                if (SQ(k + 1, i + n) + c * c < best) best = SQ(k + 1, i + n) + c * c;
            }
            SQ(k, i) = best;
        }
    }
    assert(SQ(0, 0) < HUGE_VAL);  // t is feasible
    for (int k = 0, i = 0; k < S; i += counts[k++]) {
        int n = min_layers(m, k);
        for (;; n++) {
            double c = partition_stage_cost(k, S, n, m->layer, m->embed, m->head);
            if (SQ(k + 1, i + n) + c * c <= SQ(k, i) * (1 + 1e-12)) break;
        }
        counts[k] = n;
    }
#undef SQ
    free(sq);
}

int partition_balance_costs(int n_layers, int n_stages, double layer_cost, double embed_cost, double head_cost,
                            int *counts, Error *err) {
    if (n_stages < 1 || n_layers < n_stages) {
        error_set(err, "cannot split %d layers into %d stages: every stage needs at least one layer", n_layers,
                  n_stages);
        return -1;
    }
    bool finite = isfinite(layer_cost + embed_cost + head_cost);
    if (!(layer_cost > 0) || !(embed_cost >= 0) || !(head_cost >= 0) || !finite) {
        error_set(err, "partition costs: layer (%g) must be > 0, embedding (%g) and head (%g) >= 0", layer_cost,
                  embed_cost, head_cost);
        return -1;
    }
    Model m = {n_layers, n_stages, layer_cost, embed_cost, head_cost};
    split_evenly(&m, optimal_bound(&m), counts);
    return 0;
}

int partition_balance(int n_layers, int n_stages, int *counts, Error *err) {
    return partition_balance_costs(n_layers, n_stages, 1.0, 1.0, 1.0, counts, err);
}

// One element of an element-wise pass (load, a few flops, store; exp or sigmoid included)
// costs about as much as this many matmul FLOPs on a CPU: 0.86 ns against OpenBLAS's ~100
// GFLOP/s on one core, fitted on `tiny` (where the passes are half the time) and checked on
// `small` (where they are a fifteenth).
#define PARTITION_ELEMENT_FLOPS 86.0

// One layer's forward per token: matmul FLOPs (weights, and attention's QK^T and PV over the
// keys a causal block sees) and element-wise passes.
typedef struct {
    double weight_flops, attn_flops, elems;
} LayerWork;

static LayerWork layer_work(const ModelConfig *c, int T) {
    const double C = c->hidden, Q = (double)c->heads * c->head_dim, KV = (double)c->kv_heads * c->head_dim;
    const double I = c->intermediate;
    // Keys a query sees: causal, in blocks of 64 rows (kernels/cpu/attention.c).
    const double keys = fmin(T, (T + 64.0) / 2.0);
    return (LayerWork){.weight_flops = 2.0 * (C * Q + 2.0 * C * KV + Q * C + 3.0 * C * I),
                       .attn_flops = 4.0 * Q * keys,
                       .elems = 2.0 * C + (Q + KV) + c->heads * keys + 2.0 * I + 2.0 * C};
}

PartitionCosts partition_costs(const ModelConfig *c, int T) {
    const double C = c->hidden, V = c->vocab;
    const LayerWork lw = layer_work(c, T);
    const double layer_flops = lw.weight_flops + lw.attn_flops, layer_elems = lw.elems;
    const double head_flops = 2.0 * C * V, head_elems = C + 3.0 * V;
    // Forward + backward: 3x the forward's matmuls, about 3x its element-wise passes.
    const double w = PARTITION_ELEMENT_FLOPS;
    return (PartitionCosts){.layer = 3.0 * (layer_flops + w * layer_elems),
                            .embed = 3.0 * w * C,
                            .head = 3.0 * (head_flops + w * head_elems)};
}

double partition_weight_share(const ModelConfig *c, int T) {
    const LayerWork lw = layer_work(c, T);
    const double forward = lw.weight_flops + lw.attn_flops + PARTITION_ELEMENT_FLOPS * lw.elems;
    return lw.weight_flops / (2.0 * forward);  // the backward is twice the forward
}

int partition_balance_model(const ModelConfig *cfg, int T, int n_stages, int *counts, Error *err) {
    const PartitionCosts pc = partition_costs(cfg, T);
    return partition_balance_costs(cfg->layers, n_stages, pc.layer, pc.embed, pc.head, counts, err);
}

int partition_parse_split(const char *text, int n_layers, int n_stages, int *counts, Error *err) {
    int n = 0;
    long sum = 0;
    const char *p = text;
    for (;;) {
        if (!isdigit((unsigned char)*p)) {
            error_set(err, "--split '%s': expected comma-separated layer counts like 3,3,2", text);
            return -1;
        }
        long v = 0;
        for (; isdigit((unsigned char)*p); p++)
            if ((v = v * 10 + (*p - '0')) > 1000000) v = 1000001;
        if (v == 0 && (n == 0 || n != n_stages - 1 || *p != '\0')) {  // n: this count's stage
            error_set(err, "--split '%s': stage %d has no layers (only the last stage, which holds the head, may have none)",
                      text, n);
            return -1;
        }
        if (n == n_stages) {
            error_set(err, "--split '%s': more than %d counts for %d stages", text, n_stages, n_stages);
            return -1;
        }
        counts[n++] = (int)v;
        sum += v;
        if (*p == '\0') break;
        if (*p++ != ',') {
            error_set(err, "--split '%s': expected comma-separated layer counts like 3,3,2", text);
            return -1;
        }
    }
    if (n != n_stages) {
        error_set(err, "--split '%s': %d counts for %d stages", text, n, n_stages);
        return -1;
    }
    if (sum != n_layers) {
        error_set(err, "--split '%s': the counts add up to %ld layers, the model has %d", text, sum, n_layers);
        return -1;
    }
    return 0;
}

int partition_first_layer(const int *counts, int stage) {
    int first = 0;
    for (int k = 0; k < stage; k++) first += counts[k];
    return first;
}
