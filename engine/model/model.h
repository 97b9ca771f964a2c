// engine/model: the Llama configuration, its named parameters, and the unit a pipeline stage
// runs: a contiguous range of decoder layers, plus the token embedding if it is first, plus
// the final norm + LM head + loss if it is last.
//
// Parameters carry Hugging Face LlamaForCausalLM names ("model.embed_tokens.weight",
// "model.layers.3.self_attn.q_proj.weight", "model.norm.weight", "lm_head.weight") and are
// initialized from (seed, name) alone (engine/model/init.h): N(0, init_std^2) for matrices, 1 for
// norm weights.
#ifndef PPTRAIN_MODEL_H
#define PPTRAIN_MODEL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/error.h"
#include "engine/optim.h"
#include "kernels/cpu/kernels.h"

typedef enum { ROPE_DEFAULT = 0, ROPE_LLAMA3 = 1 } RopeType;
#define ROPE_MAX_HEAD_DIM 1024  // the GPU's rotary tables take inv_freq by value
#define MODEL_MAX_EOS 16        // eos_token_id lists (Llama 3.1 has 3)

typedef struct {
    char name[128];         // "tiny", "small", or the config.json path it came from
    int hidden;             // C
    int intermediate;       // I
    int layers;             // L
    int heads;              // NH
    int kv_heads;           // NKV (divides NH)
    int head_dim;           // HD (NH * HD need not equal C, as in HF)
    int vocab;              // V
    int max_positions;      // longest sequence the run may use
    float rope_theta;
    RopeType rope_type;     // ROPE_DEFAULT, or ROPE_LLAMA3 with rope_llama3's parameters
    RopeLlama3 rope_llama3; // (kernels/cpu/kernels.h) Llama 3.1's frequency rescaling
    float rms_eps;
    bool tie_word_embeddings;
    bool attention_bias;    // q, k, v and o projections add a bias (HF attention_bias)
    bool mlp_bias;          // gate, up and down projections add a bias (HF mlp_bias)
    float init_std;         // HF initializer_range
    // The model's special token ids as its config.json has them (bos_token_id, eos_token_id,
    // pad_token_id), so checkpoints and exports keep the model's identity: has_* false where
    // the source had none (or null), eos a list where the source wrote a list. They do not
    // enter the math. Presets: the byte tokenizer's BOS 256 and EOS 257, no pad.
    bool has_bos, has_pad, eos_is_list;
    int bos_id, pad_id;
    int n_eos;              // 0: no eos_token_id
    int eos_ids[MODEL_MAX_EOS];
} ModelConfig;

// Presets: "tiny" (8 layers, ~0.33 M parameters, for tests), "small" (8 layers,
// ~25 M parameters, for demos and CPU benchmarks) and "125m" (12 x 768, 32000 tokens,
// ~127 M parameters, sequences up to 1024: the GPU benchmark). -1 for an unknown name.
int model_config_preset(ModelConfig *cfg, const char *name, Error *err);
// Reads a Hugging Face config.json (LlamaForCausalLM keys); validates it.
int model_config_from_json(ModelConfig *cfg, const char *path, Error *err);
// The same from the text of such a file; `path` names it in errors (and becomes cfg->name).
int model_config_from_json_text(ModelConfig *cfg, const char *text, const char *path, Error *err);
// The config.json of a Hugging Face LlamaForCausalLM with these dimensions (malloc'd text):
// what transformers needs to load a checkpoint, and what model_config_from_json reads back.
// torch_dtype: "float32" or "bfloat16", the dtype of the weights beside it.
char *model_config_to_hf_json(const ModelConfig *cfg, const char *torch_dtype);
// Refuses dimensions that do not fit (non-positive sizes, heads % kv_heads, odd head_dim).
int model_config_validate(const ModelConfig *cfg, Error *err);
// The rotary inverse frequencies inv_freq(head_dim / 2) of this model (rope_inv_freq).
void model_rope_inv_freq(const ModelConfig *cfg, float *inv_freq);
// Total parameter count of the whole model.
size_t model_config_param_count(const ModelConfig *cfg);
// Training FLOPs for one token at sequence length T: 6 * (matmul parameters) plus causal
// attention (QK^T and PV, forward + backward), the count llm.c and PaLM's MFU use.
double model_flops_per_token(const ModelConfig *cfg, int T);

typedef struct {
    char name[96];          // Hugging Face tensor name
    int rows, cols;         // shape (rows, cols); cols == 0 for a vector of rows
    size_t numel;
    size_t offset;          // into StageModel.weights / .grads
} ParamInfo;

// Views into the flat weight (or gradient) buffer for one decoder layer.
typedef struct {
    float *ln1;             // (C)             input_layernorm.weight
    float *wq;              // (NH*HD, C)      self_attn.q_proj.weight
    float *wk;              // (NKV*HD, C)     self_attn.k_proj.weight
    float *wv;              // (NKV*HD, C)     self_attn.v_proj.weight
    float *wo;              // (C, NH*HD)      self_attn.o_proj.weight
    float *ln2;             // (C)             post_attention_layernorm.weight
    float *wgate;           // (I, C)          mlp.gate_proj.weight
    float *wup;             // (I, C)          mlp.up_proj.weight
    float *wdown;           // (C, I)          mlp.down_proj.weight
    // Biases, NULL when the config has none: (Q) (KV) (KV) (C) with attention_bias, (I) (I)
    // (C) with mlp_bias. Each follows its weight in the layout (HF state_dict order).
    float *bq, *bk, *bv, *bo, *bgate, *bup, *bdown;
} LayerParams;

typedef struct {
    float *wte;             // (V, C) model.embed_tokens.weight     first stage only
    LayerParams *layer;     // [layer_end - layer_begin]
    float *norm;            // (C)    model.norm.weight              last stage only
    float *lm_head;         // (V, C) lm_head.weight (== wte when tied) last stage only
} ParamViews;

// Where stages compute (--device). DEVICE_CUDA: on CUDA GPUs (engine/model/model_cuda.h), when
// the build has that backend (engine/model/stage_ops.h: stage_device_find).
typedef enum { DEVICE_CPU = 0, DEVICE_CUDA = 1 } DeviceKind;

// A stage's backend: the table every stage_* entry point below calls through
// (engine/model/stage_ops.h).
typedef struct StageOps StageOps;

typedef struct {
    ModelConfig cfg;
    int layer_begin, layer_end;   // global layer indices [begin, end)
    bool has_embed, has_head;
    int n_params;
    ParamInfo *params;            // [n_params], in HF order
    // Tied word embeddings (Megatron's way): a stage with the head keeps its own copy of the
    // embedding matrix as its lm_head, (V, C) floats at head_copy_offset after the params,
    // named by no ParamInfo (checkpoints, the export and the norm see the embedding once).
    // Its gradient collects the head's part (H); stage_tie_grads makes both copies' gradients
    // E + H, so AdamW keeps them bitwise equal. 0: no copy.
    size_t head_copy_offset;
    size_t numel;                 // the params' floats, and the head copy's
    float *weights;               // (numel) one allocation, carved into views
    float *grads;                 // (numel)
    ParamViews w, g;              // named views into weights and grads
    // The backend: the CPU's from stage_create, computing in weights/grads; a device backend's
    // after its attach, and weights/grads are then the host mirror, brought up to date only by
    // stage_download. dev: that backend's state (NULL on the CPU).
    const StageOps *ops;
    void *dev;
} StageModel;

// Creates the stage holding layers [layer_begin, layer_end) (plus embedding / head as
// flagged), its weights initialized from (seed, name) and gradients zeroed. Returns NULL
// with err set when the range is empty or out of bounds.
StageModel *stage_create(const ModelConfig *cfg, int layer_begin, int layer_end,
                         bool has_embed, bool has_head, uint64_t seed, Error *err);
void stage_free(StageModel *s);          // and its device part
// The parameter with this HF name, or NULL.
const ParamInfo *stage_find_param(const StageModel *s, const char *name);
// The global-norm reduction (DESIGN.md "Parity"): the squared gradient norm is the sum, in
// the whole model's tensor order, of each tensor's grad_sum_squares, on every layout.
// model_param_tensors: the whole model's tensor count; stage_param_base: the global index of
// the stage's first tensor; stage_grad_sum_squares: out[i] for each of the stage's n_params
// tensors (a device backend may give the whole stage's sum in out[0]: stage_ops.h).
int model_param_tensors(const ModelConfig *cfg);
// The whole model's tensors (every layer, the embedding, the norm, the head unless tied) in HF
// order, as one stage holding them all lays them out: malloc'd, *n of them. What a folder of its
// weights must hold, and all it may hold (storage/checkpoint.c refuses the rest).
ParamInfo *model_param_infos(const ModelConfig *cfg, int *n);
int stage_param_base(const StageModel *s);

// Tied embeddings. stage_tied_grad: this stage's gradient of the tied matrix, (V, C): the
// embedding's on a stage with the embedding, else the head copy's; NULL without either.
// stage_tie_grads, on a stage holding both: embedding gradient = E + H, copied to the head
// copy. stage_tie_set: gradient of the tied matrix = sum (E + H, summed elsewhere), into the
// stage's every copy. Host memory (CPU stages).
float *stage_tied_grad(StageModel *s);
// The head copy as the tensor it copies ("model.embed_tokens.weight", (V, C), at
// head_copy_offset); numel 0 when the stage has none.
ParamInfo stage_head_copy_info(const StageModel *s);
// After weights were written by name on a stage holding both ends: the head copy := the
// embedding (a no-op without a copy or without the embedding).
void stage_sync_head_copy(StageModel *s);
void stage_tie_grads(StageModel *s);
void stage_tie_set(StageModel *s, const float *sum);
void stage_grad_sum_squares(const StageModel *s, double *out);
// Points the named views v (v->layer holds the stage's layers) at the tensors of one flat
// buffer in the stage's layout: weights, grads, or their device twins (engine/model/model_cuda.c).
void stage_carve_views(const StageModel *s, float *base, ParamViews *v);

// Gradients and the optimizer, on the stage's device (engine/model/stage_ops.h says more).
void stage_zero_grads(StageModel *s);
// Applies one AdamW update with opt->t incremented (adamw_state_step) to the gradients scaled
// by clip (< 1 clips, as grad_scale); the gradients are unspecified after it until the next
// stage_zero_grads (a CPU stage's are scaled, a GPU stage's not: stage_ops.h).
void stage_update(StageModel *s, AdamWState *opt, const OptimConfig *o, double lr, float clip);
// The gradient all-reduce over replicas: the numel floats to sum in place (device memory when
// `device`, else host memory), and the sum handed back to the stage after it.
float *stage_reduce_begin(StageModel *s, bool device);
void stage_reduce_end(StageModel *s, bool device);
// A stage on a device: its host mirror from the device (weights; gradients when `grads`; opt's
// moments when opt) and to it (weights; moments when opt). No-ops on the CPU.
void stage_download(StageModel *s, bool grads, AdamWState *opt);
void stage_upload(StageModel *s, const AdamWState *opt);
// Prepares the calling thread to drive the stage (a GPU: its device made current).
void stage_bind_thread(const StageModel *s);

// Everything one microbatch keeps between its forward and its backward on one stage,
// sized once for B sequences of T tokens (no allocation inside a step).
typedef struct StageActs StageActs;
StageActs *stage_acts_create(const StageModel *s, int B, int T);
void stage_acts_free(StageActs *a);
size_t stage_acts_bytes(const StageModel *s, int B, int T);
// A slot whose forwards no backward follows (an evaluation's, a sample's; off at creation): a
// backend may then leave out what only the backward reads. A CUDA last stage computes its
// head's gradients in a training forward (stage_forward) and only the loss in this one.
void stage_acts_set_forward_only(StageActs *a, bool forward_only);
// The same for a stage of s's shape on `device`, whatever s's own backend (a shell without
// one, e.g. the banner's for stages of other processes): a CUDA stage keeps its attention
// as O(T) row statistics per head (flash attention), a CPU stage the (T, T) probabilities;
// in bf16 (low_precision) a CUDA stage keeps its norms' outputs and the MLP's hidden as bf16.
size_t stage_acts_bytes_on(const StageModel *s, int B, int T, DeviceKind device, bool low_precision);
// The scratch arena a CUDA stage of s's shape reserves once in its context for microbatches of
// B x T (bf16 GEMM operands when low_precision), beside its slots: the largest of the kernels'
// uses (engine/model/model_cuda_arena.c). Every build has it, the toolkit or not; a shell will do.
size_t stage_cuda_arena_bytes(const StageModel *s, int B, int T, bool low_precision);

// Forward of one microbatch of B*T tokens, on the stage's device.
//   first stage: tokens(B*T) is read (and kept for the embedding's backward);
//   other stages: input(B*T, C) is read (copied in), a message of the stage's format
//     (stage_msg_bytes): fp32 on the CPU; bf16 or fp32 device memory on a GPU.
//   tokens and targets are host memory on every device.
//   last stage: targets(B*T) (-1 = ignore) give the loss and its gradient right away;
//               returns loss_scale * sum of per-token losses (see crossentropy_forward_backward);
//               a GPU stage returns 0 and keeps it on the device for stage_step_loss, and
//               (unless the slot is forward-only) adds the LM head's weight gradient to its
//               gradients here, from the same pass over the logits (its weight half then
//               has only the other parameters' to add).
//   other stages: return 0 and the output is at stage_acts_output().
double stage_forward(StageModel *s, StageActs *a, const int32_t *tokens, const void *input,
                     const int32_t *targets, float loss_scale);
// The last stage's losses that stage_forward left on the device (it returned 0 for them) since
// the last call, summed in forward order; 0 where stage_forward returns them (the CPU).
double stage_step_loss(StageModel *s);
// Device time, for a stage whose entry points return once their work is queued (a GPU;
// stage_ops.h time_*): stage_device_timed says whether it is one; marks 0..n-1
// (stage_time_reserve, at set-up) are recorded in the stage's order of work by
// stage_time_mark, and stage_time_since gives mark k's device time in seconds after mark base,
// false while the device has not run to both (it never waits). No-ops and false on the CPU.
bool stage_device_timed(const StageModel *s);
void stage_time_reserve(StageModel *s, int n);
void stage_time_mark(StageModel *s, int k);
bool stage_time_since(const StageModel *s, int base, int k, double *seconds);
// The output as a message of the stage's format, on the stage's device.
const void *stage_acts_output(const StageActs *a);       // (B*T, C)
// Bytes of one message (an activation or its gradient) of B*T rows: B*T*C*4 on the CPU,
// B*T*C*2 on a GPU in bf16 (DESIGN.md "Numerics"); where it lives: stage_msg_alloc.
size_t stage_msg_bytes(const StageModel *s, int B, int T);
// A message buffer on the stage's device (host memory for a CPU stage); aborts on failure.
void *stage_msg_alloc(const StageModel *s, size_t bytes);
void stage_msg_free(const StageModel *s, void *msg);

// Backward in two halves, so zero-bubble schedules can run them apart:
//   stage_backward_input ("I"): from dout(B*T, C), a message like the forward's input
//     (ignored on the last stage, whose loss
//     gradient the forward computed) to the gradient of the stage input, at
//     stage_acts_dinput() (first stage: nothing); keeps what the weight half needs.
//   stage_backward_weight ("W"): accumulates the parameter gradients into s->grads; a GPU
//     stage's norm weights (C values a norm) get theirs in the input half instead, from the
//     kernel that makes the norm's input gradient and has its rows in registers.
// stage_backward ("B") runs both.
void stage_backward_input(StageModel *s, StageActs *a, const void *dout);
void stage_backward_weight(StageModel *s, StageActs *a);
void stage_backward(StageModel *s, StageActs *a, const void *dout);
const void *stage_acts_dinput(const StageActs *a);       // (B*T, C), a message like the output
// Logits of the last forward (last stage, before the loss gradient overwrote them only if
// keep_logits was requested at creation): used by tests against the PyTorch fixture.
const float *stage_acts_logits(const StageActs *a);      // (B*T, V)
void stage_acts_keep_logits(StageActs *a, bool keep);

// Recompute (the GPipe paper's re-materialization, --recompute all). A light StageActs keeps
// only what one microbatch must carry between its forward and its backward: the tokens (first
// stage) or the stage input (others), the targets and loss scale (last stage), the output
// (non-last stages) and the input gradient (non-first stages): about 3 * N*C floats instead
// of every layer's activations. A full StageActs then serves as a workspace, borrowed for one
// forward, or from a backward's input half to its weight half. stage_acts_output and
// stage_acts_dinput work on both forms; stage_forward / stage_backward* need a full one.
StageActs *stage_acts_create_light(const StageModel *s, int B, int T);
size_t stage_acts_light_bytes(const StageModel *s, int B, int T);
bool stage_acts_is_light(const StageActs *a);
// stage_forward in the workspace ws, then keeps tokens / input / targets / output in light.
// Returns the loss as stage_forward does.
// Recompute runs on CPU stages only.
double stage_forward_light(StageModel *s, StageActs *light, StageActs *ws, const int32_t *tokens,
                           const void *input, const int32_t *targets, float loss_scale);
// Runs the forward again in ws from what light kept (the same kernels on the same inputs, so
// ws ends bitwise as stage_forward left it), then the input half of the backward from
// dout (ignored on the last stage), and copies the input gradient into light. ws now holds
// what stage_backward_weight(s, ws) needs.
void stage_backward_input_light(StageModel *s, StageActs *light, StageActs *ws, const void *dout);
// Both halves: stage_backward_input_light, then stage_backward_weight on ws.
void stage_backward_light(StageModel *s, StageActs *light, StageActs *ws, const void *dout);

// Generation's KV cache (engine/model/model_decode.c; on a GPU stage in device memory,
// engine/model/model_cuda.c). A StageKV holds, for
// every layer of one stage, the rotated keys and the values of one sequence of up to T
// positions. stage_kv_fill keeps positions [0, n) from a prefill: stage_forward of one row
// (B = 1) of the same T. stage_decode is the forward of the one token at position pos (acts of
// B = T = 1; token on the first stage, else input, (1, C)): it appends the token's keys and
// values at pos and attends to positions [0, pos]; the output (non-last stages) is at
// stage_acts_output, the logits (last stage, keep_logits set) at stage_acts_logits.
typedef struct StageKV StageKV;
StageKV *stage_kv_create(const StageModel *s, int T);
void stage_kv_free(StageKV *kv);
void stage_kv_fill(StageKV *kv, const StageActs *a, int n);
void stage_decode(StageModel *s, StageKV *kv, StageActs *a, const int32_t *token, const void *input, int pos);
// out(V), host: the logits of row `row` of the last stage's forward or decode in a (what a
// GPU stage, whose head keeps no logits, computes for that row alone; a CPU stage's are copied).
void stage_logits_row(const StageModel *s, const StageActs *a, int row, float *out);
#endif
