// storage/checkpoint_file: a checkpoint's files by name and record, apart from how they are
// written (storage/checkpoint.h): the seal (checkpoint_seal.h) and the identity files
// (model_identity.h) list and check them without reaching back into the writer.
#ifndef PPTRAIN_CHECKPOINT_FILE_H
#define PPTRAIN_CHECKPOINT_FILE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CKPT_STATE_FILE "trainer_state.json"
#define CKPT_INDEX_FILE "model.safetensors.index.json"
#define CKPT_CONFIG_FILE "config.json"

typedef struct {
    char path[256];         // relative to the checkpoint folder
    int64_t bytes;
    char sha256[65];        // 64 lowercase hex digits
    int stage;              // the stage a shard holds; -1 for the index and config
} CkptFile;

// "model-00002-of-00004.safetensors" for stage 1 of 4 (kind "model" or "optimizer").
void ckpt_shard_name(char *out, size_t cap, const char *kind, int stage, int n_stages);
// "model-….safetensors" or "optimizer-….safetensors": a stage's shard.
bool ckpt_is_shard(const char *name);
#endif
