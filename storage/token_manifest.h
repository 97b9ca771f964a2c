// storage/token_manifest: tokenize.json, the manifest `pptrain tokenize` leaves in a shard
// folder, read back at train time: shards are ids, meaningful only under the tokenizer that
// made them, so training on them with another tokenizer.json is refused.
#ifndef PPTRAIN_TOKEN_MANIFEST_H
#define PPTRAIN_TOKEN_MANIFEST_H
#include "engine/error.h"

// 0 when data_path is not a folder with a tokenize.json, or when the sha256 it records equals
// that of tokenizer_path (a tokenizer.json, or a folder holding one); else -1 with err.
int token_manifest_check(const char *data_path, const char *tokenizer_path, Error *err);
#endif
