// tests/unit/test_cuda_arena.c: the scratch arena a CUDA stage's context reserves
// (stage_cuda_arena_bytes, engine/model/model_cuda_arena.c: the number model_cuda.c reserves
// and the run banner prints), against the sizes docs/gpu.md states, worked out here on their
// own from the kernels' documented uses: 256-byte pieces, the largest use plus 4 KiB of slack.
// Needs no GPU and no toolkit: every build has the estimate.
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "engine/error.h"
#include "engine/model/model.h"
#include "tests/unit/test_util.h"

#define MIB ((size_t)1 << 20)
#define SLACK ((size_t)4096)

static size_t round256(size_t bytes) { return (bytes + 255) / 256 * 256; }
static size_t max2(size_t a, size_t b) { return a > b ? a : b; }

static StageModel shell_of(const ModelConfig *cfg, bool embed, bool head) {
    return (StageModel){.cfg = *cfg, .layer_begin = 0, .layer_end = cfg->layers, .has_embed = embed, .has_head = head};
}

// The RMSNorm weight gradient's partial sums, C doubles a chunk of rows: chunks of 64 where the
// input gradient's kernel sums them (C a multiple of 4 up to 1024), else of 128 (doubled past
// 65535 chunks).
static size_t norm_partials(size_t N, size_t C) {
    size_t chunk = 128;
    while ((N + chunk - 1) / chunk > 65535) chunk *= 2;
    if (C % 4 == 0 && C <= 1024) chunk = 64;
    return round256((N + chunk - 1) / chunk * C * 8);
}
// The gradient norm's per-block partial sums, 1024 doubles at most: the floor of every stage.
#define GRADNORM ((size_t)8192)

// 125m at 16 x 1024 tokens a microbatch (the GPU benchmark's shape): N = 16384 rows, C = 768.
static void test_125m(void) {
    Error err;
    ModelConfig cfg;
    CHECK(model_config_preset(&cfg, "125m", &err) == 0, "preset 125m: %s", err.msg);
    const size_t B = 16, T = 1024, N = B * T, C = (size_t)cfg.hidden, V = (size_t)cfg.vocab;
    // 125m has as many kv heads as heads: no grouped queries, so no dk/dv shares. A body stage's
    // largest use is the RMSNorm weight gradient's partial sums: 256 chunks of 768 doubles,
    // 1.5 MiB.
    const size_t norm = norm_partials(N, C);
    CHECK(norm == 256 * 768 * 8 && norm > GRADNORM, "norm partials %zu", norm);
    const StageModel body = shell_of(&cfg, false, false);
    CHECK(stage_cuda_arena_bytes(&body, (int)B, (int)T, true) == norm + SLACK, "125m body stage: %zu, want %zu",
          stage_cuda_arena_bytes(&body, (int)B, (int)T, true), norm + SLACK);
    // The first stage's embedding sort: 3 index vectors of N int32 and cub's storage (32 bytes a
    // row and a MiB), 1.7 MiB: over the norm's.
    const size_t embed = 3 * round256(4 * N) + round256(32 * N) + MIB;
    CHECK(embed == 1769472 && embed > norm, "embedding sort %zu", embed);
    const StageModel first = shell_of(&cfg, true, false);
    CHECK(stage_cuda_arena_bytes(&first, (int)B, (int)T, true) == embed + SLACK, "125m first stage: %zu",
          stage_cuda_arena_bytes(&first, (int)B, (int)T, true));
    // The head's fused classifier: R = 64 MiB / (V x 4 bytes) = 524 rows at V = 32000 (gpu.md),
    // their fp32 logits, in bf16 mode the bf16 dlogits of a gradient group of 4 chunks (2096
    // rows), and N double row losses: 192.0 MiB in bf16, 64.1 MiB in fp32.
    const size_t R = (64 * MIB) / (V * 4);
    CHECK(R == 524, "classifier rows %zu", R);
    const size_t head_bf16 = round256(8 * N) + round256(R * V * 4) + round256(4 * R * V * 2);
    const size_t head_fp32 = round256(8 * N) + round256(R * V * 4);
    CHECK(head_bf16 == 201347072 && head_fp32 == 67203072, "classifier %zu / %zu", head_bf16, head_fp32);
    const StageModel last = shell_of(&cfg, false, true);
    CHECK(stage_cuda_arena_bytes(&last, (int)B, (int)T, true) == head_bf16 + SLACK, "125m head stage, bf16: %zu, want %zu",
          stage_cuda_arena_bytes(&last, (int)B, (int)T, true), head_bf16 + SLACK);
    CHECK(stage_cuda_arena_bytes(&last, (int)B, (int)T, false) == head_fp32 + SLACK, "125m head stage, fp32: %zu",
          stage_cuda_arena_bytes(&last, (int)B, (int)T, false));
    printf("125m, %zu x %zu tokens: arena %.2f MiB a body stage, %.2f MiB the head's (bf16)\n", B, T,
           (norm + SLACK) / (double)MIB, (head_bf16 + SLACK) / (double)MIB);
}

// Grouped queries where heads x head_dim exceeds hidden: flash attention's backward keeps each
// query head's share of dk and dv, two (B, T, heads, head_dim) fp32 tensors,
// 2 x round256(B T NH HD 4), and they are the arena's largest use.
static void test_gqa_shares(void) {
    Error err;
    ModelConfig cfg;
    CHECK(model_config_preset(&cfg, "125m", &err) == 0, "preset 125m: %s", err.msg);
    cfg.kv_heads = 4;
    cfg.head_dim = 128;   // 12 x 128 = 1536 > 768
    const size_t B = 16, T = 1024, N = B * T, NH = (size_t)cfg.heads, HD = (size_t)cfg.head_dim;
    const size_t shares = 2 * round256(N * NH * HD * 4);
    CHECK(shares == 192 * MIB, "shares %zu", shares);
    const size_t others = max2(norm_partials(N, (size_t)cfg.hidden), 3 * round256(4 * N) + round256(32 * N) + MIB);
    CHECK(shares > others, "shares %zu, others %zu", shares, others);
    const StageModel body = shell_of(&cfg, true, false);
    CHECK(stage_cuda_arena_bytes(&body, (int)B, (int)T, true) == shares + SLACK, "GQA stage: %zu, want %zu",
          stage_cuda_arena_bytes(&body, (int)B, (int)T, true), shares + SLACK);
    // The same shape without grouped queries has no shares: back to the norm's partial sums.
    cfg.kv_heads = cfg.heads;
    const StageModel plain = shell_of(&cfg, false, false);
    CHECK(stage_cuda_arena_bytes(&plain, (int)B, (int)T, true) == norm_partials(N, (size_t)cfg.hidden) + SLACK,
          "no GQA: %zu", stage_cuda_arena_bytes(&plain, (int)B, (int)T, true));
    // Where the norm's own kernels sum (hidden not a multiple of 4, or over 1024), past 65535
    // chunks of 128 rows the chunks double: 2^24 rows would be 131072 chunks of 128, then 65536
    // of 256, so they take 32768 chunks of 512; hidden 66: 16.5 MiB of partial sums. At hidden 64
    // the fused kernel's chunks of 64 rows take no grid's y: 262144 chunks, 128 MiB.
    cfg.hidden = 66;
    cfg.kv_heads = cfg.heads;
    const StageModel wide = shell_of(&cfg, false, false);
    CHECK(stage_cuda_arena_bytes(&wide, 16384, 1024, true) == 32768 * 66 * 8 + SLACK, "2^24 rows, hidden 66: %zu",
          stage_cuda_arena_bytes(&wide, 16384, 1024, true));
    cfg.hidden = 64;
    const StageModel fused = shell_of(&cfg, false, false);
    CHECK(stage_cuda_arena_bytes(&fused, 16384, 1024, true) == 128 * MIB + SLACK, "2^24 rows, hidden 64: %zu",
          stage_cuda_arena_bytes(&fused, 16384, 1024, true));
    // Small shapes: each piece is rounded to 256 bytes (3 x 7 rows, 3 heads on 1 of dim 2,
    // hidden 4: shares 2 x round256(504) = 1024 bytes, the norm's round256(32) = 256), and the
    // gradient norm's 8 KiB is the floor.
    cfg.hidden = 4;
    cfg.heads = 3;
    cfg.kv_heads = 1;
    cfg.head_dim = 2;
    const StageModel small = shell_of(&cfg, false, false);
    CHECK(stage_cuda_arena_bytes(&small, 3, 7, true) == GRADNORM + SLACK, "3 x 7 rows: %zu",
          stage_cuda_arena_bytes(&small, 3, 7, true));
    cfg.head_dim = 64;   // now the shares lead: 2 x round256(21 x 3 x 64 x 4) = 32256 bytes
    const StageModel small_gqa = shell_of(&cfg, false, false);
    CHECK(stage_cuda_arena_bytes(&small_gqa, 3, 7, true) == 2 * round256(21 * 3 * 64 * 4) + SLACK, "3 x 7 rows, HD 64: %zu",
          stage_cuda_arena_bytes(&small_gqa, 3, 7, true));
}

int main(void) {
    test_125m();
    test_gqa_shares();
    return test_finish();
}
