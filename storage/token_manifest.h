// storage/token_manifest: tokenize.json, the manifest `pptrain tokenize` leaves in a shard
// folder, read back at train time: shards are ids, meaningful only under the tokenizer that
// made them, so training on them with another tokenizer.json is refused.
#ifndef PPTRAIN_TOKEN_MANIFEST_H
#define PPTRAIN_TOKEN_MANIFEST_H
#include <stdbool.h>

#include "engine/error.h"

typedef struct {
    char tokenizer[128];   // the tokenizer's name as `pptrain tokenize` described it
    char sha256[65];       // of the tokenizer.json that made the shards
    int vocab;
} TokenManifest;

// 1 with *m filled when data_path is a folder holding a tokenize.json, 0 when it is not (a
// file, or a folder without one), -1 with err when the manifest is unreadable or malformed.
int token_manifest_read(const char *data_path, TokenManifest *m, Error *err);

// 0 when data_path is not a folder with a tokenize.json, or when the sha256 it records equals
// that of tokenizer_path (a tokenizer.json, or a folder holding one); else -1 with err.
int token_manifest_check(const char *data_path, const char *tokenizer_path, Error *err);
#endif
