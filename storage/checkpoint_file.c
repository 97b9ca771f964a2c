// storage/checkpoint_file: the names of a checkpoint's shards (checkpoint_file.h).
#include "storage/checkpoint_file.h"

#include <stdio.h>
#include <string.h>

void ckpt_shard_name(char *out, size_t cap, const char *kind, int stage, int n_stages) {
    snprintf(out, cap, "%s-%05d-of-%05d.safetensors", kind, stage + 1, n_stages);
}

bool ckpt_is_shard(const char *name) {
    const size_t n = strlen(name), k = strlen(".safetensors");
    return (strncmp(name, "model-", 6) == 0 || strncmp(name, "optimizer-", 10) == 0) && n > k &&
           strcmp(name + n - k, ".safetensors") == 0;
}
