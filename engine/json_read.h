// engine/json_read: the one door every JSON file pptrain reads passes through (config.json,
// generation_config.json, model.safetensors.index.json, trainer_state.json, the run config
// inside it, safetensors headers).
//
// Why a door of its own: cJSON keeps two equal keys of one object as siblings and
// cJSON_GetObjectItem finds the first, while Python's json (and so transformers and every
// tool built on it) takes the last. A config.json with "hidden_size" twice would train one
// model in pptrain and load as another in transformers. pptrain refuses such a file by name.
#ifndef PPTRAIN_JSON_READ_H
#define PPTRAIN_JSON_READ_H
#include <cjson/cJSON.h>
#include <stddef.h>

#include "engine/error.h"

// Parses text[0..len) as one JSON object (only whitespace may follow it; a NUL ends the text
// early), in which no object, however deep, holds one key twice. Returns the tree (free it
// with cJSON_Delete), or NULL with a one-line err: "PATH: not a JSON object (...)" or
// "PATH: duplicate key: "K" twice in "OBJECT" ...".
cJSON *json_parse_object(const char *text, size_t len, const char *path, Error *err);
// The duplicate-key walk alone, for a tree parsed with other error messages (safetensors
// headers). Returns 0, or -1 with err naming the key and path.
int json_check_unique_keys(const cJSON *root, const char *path, Error *err);
#endif
