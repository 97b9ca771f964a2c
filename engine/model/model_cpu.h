// Internal to engine/model/*.c: the CPU backend. Its table (model_cpu.c) is what stage_create
// gives every stage; its equations are model_stage.c's; recompute (model_recompute.c) is
// CPU-only.
#ifndef PPTRAIN_MODEL_CPU_H
#define PPTRAIN_MODEL_CPU_H
#include <stddef.h>
#include <stdint.h>

#include "engine/model/model.h"
#include "engine/model/stage_ops.h"

extern const StageOps stage_cpu_ops;

// Zeroed host memory for an activation arena, 64-byte aligned: every page touched now, not
// inside the first step.
char *stage_cpu_arena(size_t bytes);

// stage_forward, stage_backward_input and stage_backward_weight on host memory (full StageActs).
double stage_cpu_forward(StageModel *s, StageActs *a, const int32_t *tokens, const void *input,
                         const int32_t *targets, float loss_scale);
void stage_cpu_backward_input(StageModel *s, StageActs *a, const void *dout);
void stage_cpu_backward_weight(StageModel *s, StageActs *a);
#endif
