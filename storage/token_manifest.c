// storage/token_manifest: checks a shard folder's tokenize.json against a tokenizer.json.
#include "storage/token_manifest.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/data/data.h"
#include "storage/atomic_file.h"

int token_manifest_read(const char *data_path, TokenManifest *m, Error *err) {
    memset(m, 0, sizeof *m);
    cJSON *j;
    char *manifest;
    int rc = data_manifest_read(data_path, &j, &manifest, err);
    if (rc <= 0) return rc;
    const char *sha = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "tokenizer_sha256"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "tokenizer"));
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(j, "vocab");
    if (!sha || strlen(sha) != 64 || strspn(sha, "0123456789abcdef") != 64) {
        error_set(err, "%s: malformed (no tokenizer_sha256)", manifest);
        rc = -1;
    } else {
        snprintf(m->sha256, sizeof m->sha256, "%s", sha);
        snprintf(m->tokenizer, sizeof m->tokenizer, "%s", name ? name : "a tokenizer.json");
        m->vocab = cJSON_IsNumber(vocab) && vocab->valuedouble > 0 && vocab->valuedouble < 1e9 ? vocab->valueint : 0;
    }
    cJSON_Delete(j);
    free(manifest);
    return rc;
}

int token_manifest_check(const char *data_path, const char *tokenizer_path, Error *err) {
    TokenManifest m;
    const int found = token_manifest_read(data_path, &m, err);
    if (found <= 0) return found;
    char tok[4200], have[65];
    struct stat st;
    const int dir = stat(tokenizer_path, &st) == 0 && S_ISDIR(st.st_mode);
    snprintf(tok, sizeof tok, dir ? "%s/tokenizer.json" : "%s", tokenizer_path);
    if (file_sha256(tok, have, NULL, err) != 0) return -1;
    if (strcmp(have, m.sha256) != 0) {
        error_set(err, "%s/tokenize.json: the shards were made with a tokenizer.json whose sha256 is %.12s..., "
                  "not %s (%.12s...): pass the tokenizer that made them, or run pptrain tokenize again",
                  data_path, m.sha256, tok, have);
        return -1;
    }
    return 0;
}
