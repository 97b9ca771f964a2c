// libFuzzer target: storage/safetensors' validating reader on arbitrary bytes. Every input must
// either be refused with an Error or open into tensors whose every byte is inside the file
// (ASan checks the conversion reads). Built with -DPPTRAIN_FUZZ=ON and clang (tests/run-tests).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "storage/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/pptrain-fuzz-st-%d.safetensors", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    Error err;
    SafetensorsFile *st = safetensors_open(path, &err);
    if (!st) return 0;
    for (int i = 0; i < safetensors_count(st); i++) {
        const SafetensorsTensor *t = safetensors_tensor(st, i);
        if (safetensors_find(st, t->name) != t) abort();   // lookup finds what iteration finds
        if (t->numel > (1u << 20)) continue;
        float *out = malloc((t->numel ? t->numel : 1) * sizeof(float));
        safetensors_to_f32(t, out, t->numel, &err);        // refuses integer dtypes: fine
        free(out);
    }
    for (int i = 0; i < safetensors_metadata_count(st); i++)
        if (!safetensors_metadata_key(st, i) || !safetensors_metadata_value(st, i)) abort();
    safetensors_close(st);
    return 0;
}
