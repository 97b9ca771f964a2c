// engine/model/model_cuda_arena: the scratch arena a CUDA stage's context reserves, in plain C
// for every build (with the toolkit or without): the one formula that engine/model/model_cuda.c
// reserves with (cuda_ctx_reserve) and that the run banner reports (engine/train_loop.c).
// Its pieces are kernels/cuda's own sizes, read from kernels_cuda.h without the CUDA runtime
// (PPTRAIN_KERNELS_CUDA_SIZES_ONLY), so an estimate is the number the kernels take.
#include <stdint.h>

#include "engine/model/model.h"

#define PPTRAIN_KERNELS_CUDA_SIZES_ONLY
#include "kernels/cuda/kernels_cuda.h"

// The most the kernels ask of the context's arena for one slot's shapes (each use is alone),
// each as kernels_cuda.h sizes it: the embedding sort (first stage: 3 index vectors and cub's
// temporary storage, bounded by 32 bytes a row and a MiB), the fused classifier (last stage: its
// row losses and one chunk's logits, cuda_classifier_arena_bytes), an RMSNorm weight
// gradient's per-chunk partial sums (cuda_rmsnorm_arena_bytes), the gradient norm's per-block
// partial sums (at most 1024 doubles, whatever the stage's size), flash attention's backward with
// grouped queries (each query head's share of dk and dv: cuda_flash_backward_arena_bytes; its
// row statistics live in the slot); plus 4 KiB of slack, what a kernel's own alignment may add.
size_t stage_cuda_arena_bytes(const StageModel *s, int B, int T, bool low_precision) {
    const size_t N = (size_t)B * (size_t)T;
    const size_t embed = 3 * cuda_arena_round(4 * N) + cuda_arena_round(32 * N) + ((size_t)1 << 20);
    const size_t needs[] = {s->has_embed ? embed : 0,
                            s->has_head ? cuda_classifier_arena_bytes((int)N, s->cfg.vocab, low_precision) : 0,
                            cuda_rmsnorm_arena_bytes((int)N, s->cfg.hidden),
                            cuda_grad_sum_squares_arena_bytes(SIZE_MAX),
                            cuda_flash_backward_arena_bytes(N, s->cfg.heads, s->cfg.kv_heads, s->cfg.head_dim)};
    size_t need = 0;
    for (size_t k = 0; k < sizeof needs / sizeof needs[0]; k++)
        if (needs[k] > need) need = needs[k];
    return need + 4096;
}
