// storage/token_manifest: checks a shard folder's tokenize.json against a tokenizer.json.
#include "storage/token_manifest.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/json_read.h"
#include "storage/atomic_file.h"

int token_manifest_check(const char *data_path, const char *tokenizer_path, Error *err) {
    char manifest[4200], tok[4200];
    struct stat st;
    snprintf(manifest, sizeof manifest, "%s/tokenize.json", data_path);
    if (stat(data_path, &st) != 0 || !S_ISDIR(st.st_mode) || stat(manifest, &st) != 0) return 0;
    int dir = stat(tokenizer_path, &st) == 0 && S_ISDIR(st.st_mode);
    snprintf(tok, sizeof tok, dir ? "%s/tokenizer.json" : "%s", tokenizer_path);
    char *text = file_read_text(manifest, 1 << 20, err);
    if (!text) return -1;
    cJSON *m = json_parse_object(text, strlen(text), manifest, err);
    free(text);
    if (!m) return -1;
    const char *want = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "tokenizer_sha256"));
    char have[65];
    int rc = 0;
    if (!want || strlen(want) != 64) {
        error_set(err, "%s: malformed (no tokenizer_sha256)", manifest);
        rc = -1;
    } else if (file_sha256(tok, have, NULL, err) != 0) {
        rc = -1;
    } else if (strcmp(have, want) != 0) {
        error_set(err, "%s: the shards were made with a tokenizer.json whose sha256 is %.12s..., not %s (%.12s...): "
                  "pass the tokenizer that made them, or run pptrain tokenize again", manifest, want, tok, have);
        rc = -1;
    }
    cJSON_Delete(m);
    return rc;
}
