// engine/partition: which decoder layers each pipeline stage holds.
//
// L layers are cut into S contiguous stages (S = P*V with virtual stages, stage s holding the
// layers after stage s-1's), each with at least one layer except that the last, which holds the
// head, may have none. Cost model: a layer costs layer_cost, the embedding
// adds embed_cost to stage 0, the final norm + LM head + loss add head_cost to stage S-1;
// partition_costs derives the three from the model (an embedding lookup costs almost
// nothing, a head with a 32000-token vocabulary several layers).
#ifndef PPTRAIN_PARTITION_H
#define PPTRAIN_PARTITION_H
#include "engine/error.h"
#include "engine/model/model.h"

// Fills counts[S] with the split that minimizes the most expensive stage (exact; it bounds
// the pipeline's step time); the last stage gets no layers only when the head costs more than
// a layer and a head-only stage lowers that maximum or, at an equal one, evens the split. Ties: first the smallest sum of squared stage costs (the most
// even split), then the lexicographically smallest counts ("earlier stages smaller"): under
// 1F1B stage s keeps up to S-s microbatches of activations, so the early stages are the ones
// to keep light. About L^2 steps and (S+1)(L+1) doubles. Returns 0, or -1 with err when
// S < 1 or S > L, or a cost is out of range (layer > 0, embed and head >= 0).
int partition_balance_costs(int n_layers, int n_stages, double layer_cost, double embed_cost, double head_cost,
                            int *counts, Error *err);
// partition_balance_costs with costs 1, 1, 1.
int partition_balance(int n_layers, int n_stages, int *counts, Error *err);

// What a decoder layer, the embedding and the head (final norm, LM head, loss) cost per token
// of training (forward + backward), from the model's dimensions and the sequence length T:
// matmul FLOPs (attention's QK^T and PV over the keys a causal block sees), plus the
// element-wise passes (norms, RoPE, softmax, SwiGLU, residuals, the loss over the
// vocabulary, the embedding's copy and scatter) weighted by what one element costs next to a
// FLOP on a CPU. Units: FLOP-equivalents. Measured on `small` (T 256): a layer 216 us per
// token on one core, the model 213.
typedef struct {
    double layer, embed, head;
} PartitionCosts;
PartitionCosts partition_costs(const ModelConfig *cfg, int T);
// The weight-gradient share of a layer's backward (W / B) under the same model: W is one GEMM
// per weight GEMM of the forward; the input gradient also pays attention's backward and the
// element-wise passes. Measured with --trace (zb-h1, P 2, T 256): tiny 0.26 (model 0.17),
// small 0.41 (model 0.44); the plans from measured costs split a stage's backward by it.
double partition_weight_share(const ModelConfig *cfg, int T);
// partition_balance_costs with partition_costs(cfg, T): the default split of a run.
int partition_balance_model(const ModelConfig *cfg, int T, int n_stages, int *counts, Error *err);

// Parses a manual split like "3,3,2" or "4,4,0": n_stages counts summing to n_layers, each
// positive but the last.
int partition_parse_split(const char *text, int n_layers, int n_stages, int *counts, Error *err);

// Cost of stage s holding n layers under the cost model above.
double partition_stage_cost(int stage, int n_stages, int n_layers_in_stage, double layer_cost, double embed_cost,
                            double head_cost);
// First layer of stage s (the sum of counts[0..s)).
int partition_first_layer(const int *counts, int stage);
#endif
