// Layer partition: the optimal max stage cost (checked against brute force), the documented
// tie-break, and manual --split validation.
#include <string.h>

#include "engine/partition.h"
#include "tests/unit/test_util.h"

static double max_cost(const int *counts, int S, double layer, double embed, double head) {
    double worst = 0;
    for (int k = 0; k < S; k++) {
        double c = partition_stage_cost(k, S, counts[k], layer, embed, head);
        if (c > worst) worst = c;
    }
    return worst;
}

// Smallest max cost over every composition of L into S parts, by enumeration: positive parts,
// but the last may be 0 when the head costs more than a layer (a head-only stage).
static double brute_best(int L, int S, int k, int left, int *counts, double layer, double embed, double head) {
    if (k == S - 1) {
        counts[k] = left;
        return left > 0 || (S > 1 && head > layer) ? max_cost(counts, S, layer, embed, head) : 1e300;
    }
    double best = 1e300;
    for (int n = 1; n <= left - (S - 2 - k); n++) {
        counts[k] = n;
        double c = brute_best(L, S, k + 1, left - n, counts, layer, embed, head);
        if (c < best) best = c;
    }
    return best;
}

static void expect_split(int L, int S, const int *want) {
    int got[16];
    Error err;
    CHECK(partition_balance(L, S, got, &err) == 0, "L=%d S=%d: %s", L, S, err.msg);
    CHECK(memcmp(got, want, sizeof(int) * (size_t)S) == 0, "L=%d S=%d: got %d,%d,... want %d,%d,...", L, S, got[0],
          got[1], want[0], want[1]);
}

static void test_examples(void) {
    // 8 layers + embedding + head = 10 units over 4 stages: best max is 3 (10/4 rounded up).
    // 1,3,3,1 and 2,2,2,2 and 1,2,3,2 all reach it with costs {3,3,2,2}; the last tie-break
    // (earlier stages smaller) gives 1,2,3,2, stage costs 2,2,3,3.
    expect_split(8, 4, (int[]){1, 2, 3, 2});
    expect_split(8, 2, (int[]){4, 4});          // 5, 5
    expect_split(8, 1, (int[]){8});
    expect_split(8, 8, (int[]){1, 1, 1, 1, 1, 1, 1, 1});
    // 34 units, max 9: 6,9,9,8 (costs 7,9,9,9) also fits, but costs {9,9,8,8} are more even.
    expect_split(32, 4, (int[]){7, 8, 9, 8});
    expect_split(12, 4, (int[]){2, 3, 4, 3});    // 14 units: max 4, costs 3,3,4,4
    int c[4];
    Error err;
    CHECK(partition_balance_costs(8, 4, 1, 0, 0, c, &err) == 0 && c[0] == 2 && c[1] == 2 && c[2] == 2 && c[3] == 2,
          "free embedding and head: 2,2,2,2");
    CHECK(partition_balance_costs(10, 3, 1, 4, 0, c, &err) == 0 && c[0] == 1 && c[1] == 4 && c[2] == 5,
          "heavy embedding: %d,%d,%d", c[0], c[1], c[2]);
    CHECK(partition_first_layer((int[]){1, 2, 3, 2}, 3) == 6, "first layer of stage 3");
}

static void test_optimal_vs_brute_force(void) {
    const double costs[][3] = {{1, 1, 1}, {1, 0, 0}, {1, 2.5, 0.5}, {0.7, 1.3, 3.1}, {2, 0, 5}};
    for (int L = 1; L <= 12; L++)
        for (int S = 1; S <= L && S <= 6; S++)
            for (size_t k = 0; k < sizeof costs / sizeof costs[0]; k++) {
                int got[16], scratch[16];
                Error err;
                const double *c = costs[k];
                CHECK(partition_balance_costs(L, S, c[0], c[1], c[2], got, &err) == 0, "%s", err.msg);
                int sum = 0, positive = 1;  // every stage, the last only when its head is light
                for (int s = 0; s < S; s++)
                    sum += got[s], positive &= got[s] > 0 || (s == S - 1 && S > 1 && c[2] > c[0]);
                CHECK(sum == L && positive, "L=%d S=%d: counts sum %d", L, S, sum);
                double best = brute_best(L, S, 0, L, scratch, c[0], c[1], c[2]);
                CHECK_NEAR(max_cost(got, S, c[0], c[1], c[2]), best, 1e-9, "optimal max stage cost");
            }
}

static void test_errors(void) {
    int c[8];
    Error err;
    CHECK(partition_balance(4, 8, c, &err) == -1 && strstr(err.msg, "cannot split 4 layers into 8 stages"), "%s",
          err.msg);
    CHECK(partition_balance(4, 0, c, &err) == -1, "zero stages");
    CHECK(partition_balance_costs(4, 2, 0, 1, 1, c, &err) == -1 && strstr(err.msg, "layer (0) must be > 0"), "%s",
          err.msg);
    CHECK(partition_parse_split("3,3,2", 8, 3, c, &err) == 0 && c[0] == 3 && c[2] == 2, "3,3,2");
    CHECK(partition_parse_split("4,4,0", 8, 3, c, &err) == 0 && c[2] == 0, "4,4,0: a head-only last stage");
    const struct { const char *text; int L, S; const char *want; } bad[] = {
        {"3,3", 8, 3, "2 counts for 3 stages"},
        {"3,3,1,1", 8, 3, "more than 3 counts"},
        {"3,0,5", 8, 3, "stage 1 has no layers (only the last stage"},
        {"0,4,4", 8, 3, "stage 0 has no layers"},
        {"0", 0, 1, "stage 0 has no layers"},
        {"3,3,3", 8, 3, "add up to 9 layers, the model has 8"},
        {"3,,5", 8, 3, "expected comma-separated"},
        {"3,3,2,", 8, 3, "expected comma-separated"},
        {"3,-3,8", 8, 3, "expected comma-separated"},
        {"3,x,2", 8, 3, "expected comma-separated"},
        {"", 8, 3, "expected comma-separated"},
        {"3,3,2 ", 8, 3, "expected comma-separated"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        CHECK(partition_parse_split(bad[k].text, bad[k].L, bad[k].S, c, &err) == -1 && strstr(err.msg, bad[k].want),
              "'%s': '%s'", bad[k].text, err.msg);
}

// Costs from the model: the embedding lookup is nearly free, the head follows the
// vocabulary (half a layer of `tiny`, a twentieth of `small`'s 512-wide layers, four of
// 125m's layers with 32000 tokens), and the default splits follow: `small` at P = 4 is
// 2,2,2,2 (the flat model's 1,2,3,2 left a 2.8x spread of busy time), 125m keeps the last
// stage light.
static void test_model_costs(void) {
    Error err;
    ModelConfig tiny, small, m125;
    CHECK(model_config_preset(&tiny, "tiny", &err) == 0 && model_config_preset(&small, "small", &err) == 0 &&
              model_config_preset(&m125, "125m", &err) == 0, "presets");
    const PartitionCosts t = partition_costs(&tiny, 256), s = partition_costs(&small, 256),
                         m = partition_costs(&m125, 256);
    CHECK(t.embed < 0.05 * t.layer && s.embed < 0.01 * s.layer && m.embed < 0.01 * m.layer, "embedding ~ free");
    CHECK(t.head > 0.3 * t.layer && t.head < 0.7 * t.layer, "tiny head %.2f layers", t.head / t.layer);
    CHECK(s.head > 0.02 * s.layer && s.head < 0.1 * s.layer, "small head %.3f layers", s.head / s.layer);
    CHECK(m.head > 3.0 * m.layer && m.head < 5.0 * m.layer, "125m head %.2f layers", m.head / m.layer);
    CHECK(partition_costs(&small, 1024).layer > 1.1 * s.layer, "attention grows with T");
    int counts[4];
    CHECK(partition_balance_model(&small, 256, 4, counts, &err) == 0 && counts[0] == 2 && counts[1] == 2 &&
              counts[2] == 2 && counts[3] == 2, "small P=4: %d,%d,%d,%d", counts[0], counts[1], counts[2], counts[3]);
    // 125m's head (about four layers) gets a stage of its own: 4,4,4,0, not 3,4,4,1 whose
    // last stage costs a layer more than the others (measured, M 1: 340 against 217-289 ms).
    CHECK(partition_balance_model(&m125, 256, 4, counts, &err) == 0 && counts[0] == 4 && counts[1] == 4 &&
              counts[2] == 4 && counts[3] == 0, "125m P=4: %d,%d,%d,%d", counts[0], counts[1], counts[2], counts[3]);
    // A head no heavier than a layer never stands alone (small, tiny, the flat 1,1,1 model).
    CHECK(partition_balance_costs(3, 4, 1, 1, 1, counts, &err) == -1, "4 stages, 3 layers");
    CHECK(partition_balance_costs(9, 4, 1, 0, 1, counts, &err) == 0 && counts[3] > 0, "head = layer: %d", counts[3]);
}

// The weight-gradient share of the backward: near measured (--trace, zb-h1, T 256: small 0.41,
// tiny 0.26), below a half (the input gradient also pays attention and the element-wise
// passes), and smaller where element-wise work weighs more (tiny).
static void test_weight_share(void) {
    Error err;
    ModelConfig tiny, small;
    CHECK(model_config_preset(&tiny, "tiny", &err) == 0 && model_config_preset(&small, "small", &err) == 0, "presets");
    const double t = partition_weight_share(&tiny, 256), s = partition_weight_share(&small, 256);
    CHECK(s > 0.38 && s < 0.5, "small W/B %.3f", s);
    CHECK(t > 0.1 && t < s, "tiny W/B %.3f below small's", t);
}

int main(void) {
    test_model_costs();
    test_weight_share();
    test_examples();
    test_optimal_vs_brute_force();
    test_errors();
    return test_finish();
}
