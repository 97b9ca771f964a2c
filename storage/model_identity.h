// storage/model_identity: the files beside a model's weights that make it that model to the
// tools that load it: its generation defaults (generation_config.json: the eos ids generate
// stops on) and its tokenizer (tokenizer.json, tokenizer_config.json, special_tokens_map.json,
// tokenizer.model, ...). pptrain does not read them to train; it carries them, byte for byte,
// from a run's source folder (--init-from, or the checkpoint --resume reads) into every
// checkpoint, where they are recorded with their sha256 like the other files, and from a
// checkpoint into its export. Each is optional: a folder without one passes none on.
#ifndef PPTRAIN_MODEL_IDENTITY_H
#define PPTRAIN_MODEL_IDENTITY_H
#include <stdbool.h>

#include "engine/error.h"
#include "storage/checkpoint_file.h"

#define IDENTITY_N_FILES 7
// In the order they are copied (and packed for other processes: storage/checkpoint_spread.h).
extern const char *const IDENTITY_FILES[IDENTITY_N_FILES];
// Whether name is one of them.
bool identity_is_file(const char *name);
// Copies each identity file src_dir has into dst_dir through the atomic writer; a JSON one
// must parse as one object with no duplicate key (engine/json_read.h). When files is not NULL
// each copy's record (name, bytes, sha256, stage -1) is appended at files[*n], *n advanced
// (room for IDENTITY_N_FILES more). src_dir NULL or "": nothing. Returns 0, or -1 with err
// naming the file; what was copied before stays (the caller discards the folder).
int identity_copy(const char *src_dir, const char *dst_dir, CkptFile *files, int *n, Error *err);
// The JSON ones among dir's identity files parse as identity_copy requires: a folder is
// refused when it is opened, not at its first checkpoint. Returns 0, or -1 with err.
int identity_check(const char *dir, Error *err);
#endif
