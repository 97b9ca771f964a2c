// storage/checkpoint: checkpoints in the Hugging Face layout (DESIGN.md, "Formats users
// already have"), written by every process for the stages it holds and read back, by tensor
// name, under any other layout (stages, virtual stages, schedule, dp, transport).
//
// A checkpoint folder of a run with S stages:
//   model-0000k-of-0000S.safetensors      stage k-1's weights: HF names, F32, {"format":"pt"}
//   optimizer-0000k-of-0000S.safetensors  its AdamW moments "<name>.exp_avg", "<name>.exp_avg_sq"
//   model.safetensors.index.json          {"metadata":{"total_size":N},"weight_map":{name:file}}
//   config.json                           LlamaForCausalLM: transformers loads the folder as is
//   trainer_state.json                    step, data cursor, RNG, lr position, the run config,
//                                         and every other file's size and sha256
//   checksums.sha256                      the sha256 of every file above, trainer_state.json
//                                         included (storage/checkpoint_seal.h)
// Each file is written to a temporary name, fsynced and renamed (storage/atomic_file.h);
// checksums.sha256 and then trainer_state.json are written last, after every other file is
// durable and hashed: a folder without trainer_state.json is not a checkpoint.
// Under mpirun the processes need not share a filesystem: each hashes its shards as it writes
// them and sends the root their records; the root writes the manifest from the records alone,
// and every process gets a copy of the small files (storage/checkpoint_spread.h). A folder on
// one node's disk then holds that node's shards only: CKPT_OPEN_CHECK_ON_READ reads it.
// A plain Hugging Face folder (model.safetensors, or an index and its shards, and config.json;
// F32, BF16, F16 or F64) is read by the same reader: that is --init-from.
#ifndef PPTRAIN_CHECKPOINT_H
#define PPTRAIN_CHECKPOINT_H
#include <stdbool.h>
#include <stdint.h>

#include "engine/pipeline.h"
#include "engine/train_loop.h"
#include "storage/checkpoint_file.h"

typedef struct {
    int step;               // optimizer steps done
    int adam_step;          // AdamW's update count t
    DataCursor cursor;      // where the next batch starts
    RunConfig rc;           // the run that wrote it (model, data, optimizer, batch, steps, seed)
    PipelineOptions po;     // and its layout
    int64_t run_id;         // its row in the run store (0: not recorded)
    int n_files;
    CkptFile *files;        // every file but trainer_state.json
} CkptState;


// ---- writing (DIR must exist) -----------------------------------------------------------------
// One safetensors file of a stage's parameters in HF order: for each parameter, one tensor per
// set (name + suffix) read at the parameter's offset in the set's buffer (weights, or an AdamW
// moment: they share the layout). F32, or BF16 rounded to nearest even; metadata
// {"format":"pt"} and, when kind is not NULL, {"pptrain": kind}. Atomic (safetensors_write).
typedef struct {
    const float *base;      // (sm->numel)
    const char *suffix;     // "" or ".exp_avg", ...
} CkptParamSet;
// *written (when not NULL): the file's name-less record, its bytes and sha256 hashed as it was
// written.
int ckpt_write_params(const char *path, const StageModel *sm, const CkptParamSet *sets, int n_sets, bool bf16,
                      const char *kind, CkptFile *written, Error *err);
// Stage s's weights (or, with `optimizer`, its AdamW moments) as this process holds them, into
// dir under its shard name; *f: the file's record, hashed as written.
int ckpt_write_stage_file(const char *dir, const Pipeline *p, int s, bool optimizer, CkptFile *f, Error *err);
// Every process: the weights and moments of the stages it holds, when it is in replica 0.
// *records (malloc'd text, "" for a process that wrote nothing): what it wrote, one line per
// file ("file NAME BYTES SHA256 STAGE INODE MTIME", the file as it lies on disk) and, after each
// weights shard, one per tensor ("tensor NAME BYTES"), for the root's manifest: every
// process's records, concatenated, are all the root needs to know of the shards (it never
// opens another process's file).
int ckpt_write_shards(const char *dir, const Pipeline *p, char **records, Error *err);
// The root, once every process's shards are durable, from their records: the index and
// config.json, the identity files of identity_src (the run's source folder, or NULL:
// storage/model_identity.h), then the seal over every file's hash, then trainer_state.json.
// *out (free with ckpt_state_clear) lists the files for the run store. Returns 0, or -1 with
// err (and no trainer_state.json), also when the records miss a shard.
int ckpt_write_manifest(const char *dir, const char *records, const RunConfig *rc, const PipelineOptions *po,
                        int n_stages, const TrainPosition *pos, int adam_step, int64_t run_id,
                        const char *identity_src, CkptState *out, Error *err);
void ckpt_state_clear(CkptState *st);

// ---- reading ----------------------------------------------------------------------------------
typedef struct Checkpoint Checkpoint;
// Opens a checkpoint folder, or a plain HF folder when it has no trainer_state.json (and
// `need_state` is false). CKPT_OPEN_VERIFY: every file of the manifest must exist with its
// recorded size and sha256, and so must every file checksums.sha256 lists (when the folder has
// one). NULL
// with a one-line err ("DIR: model-00002-of-00004.safetensors: sha256 does not match the
// manifest"), also when its model files hold a tensor the model of config.json does not use
// ("DIR/model.safetensors: tensor 'model.layers.4.mlp.up_proj.weight' and 8 more are not used:
// config.json says 4 layers"); older transformers' rotary inv_freq and a tied lm_head are not such.
typedef enum {
    CKPT_OPEN_TRUSTED = 0,        // the caller has checked every file (ckpt_find_resume with shards)
    CKPT_OPEN_VERIFY = 1,         // every file of the seal and the manifest, now
    CKPT_OPEN_CHECK_ON_READ = 2,  // the caller has checked all but the shards (ckpt_find_resume
                                  // without shards): each shard is checked against the manifest
                                  // when a tensor is first read from it, and one the folder lacks
                                  // (another node's) is an error only when a tensor is read from it
} CkptOpenCheck;
Checkpoint *ckpt_open(const char *dir, bool need_state, CkptOpenCheck check, Error *err);
void ckpt_close(Checkpoint *c);
const char *ckpt_dir(const Checkpoint *c);
// The trainer state, NULL for a plain HF folder.
const CkptState *ckpt_state(const Checkpoint *c);
// The model of config.json (untied when the folder's lm_head.weight is not its tied
// embedding, as transformers unties it: ckpt_note then says so).
const ModelConfig *ckpt_model(const Checkpoint *c);
// A warning the user should see about how the folder was read, or "".
const char *ckpt_note(const Checkpoint *c);
// A TensorSource (engine/pipeline.h) over the folder: ctx is the Checkpoint. Moments exist only
// in checkpoint folders.
int ckpt_tensor_source(void *ctx, const char *name, TensorRole role, const ParamInfo *info, float *dst, Error *err);
// The whole model (every layer, embedding and head on one StageModel) with the folder's
// weights: for export and for comparing logits with transformers. NULL with err.
StageModel *ckpt_load_model(Checkpoint *c, Error *err);

// Reads trainer_state.json of dir (no verification). Returns 0, or -1 with err.
int ckpt_read_state(const char *dir, CkptState *out, Error *err);
// The same from the file's text; `path` names it in errors.
int ckpt_state_parse(const char *text, const char *path, CkptState *out, Error *err);
// Every file of a manifest exists under dir with its size and sha256; without `shards`, every
// file but the shards (checked as they are read: CKPT_OPEN_CHECK_ON_READ).
int ckpt_verify_files(const char *dir, const CkptFile *files, int n, bool shards, Error *err);
#endif
