// tests/fuzz/fuzz_tokenizer.c: libFuzzer target: the tokenizer.json reader and the encoder
// and decoder (engine/data/tokenizer_hf.h). An input is "JSON \0 TEXT": the JSON is parsed as a
// tokenizer.json, and TEXT is encoded with it when it loads, else with one of the four fixture
// tokenizers (tests/fixtures/tokenizers, picked by TEXT's length), and the ids decoded again.
// Loading may refuse and encoding may refuse invalid UTF-8; nothing may crash, read out of
// bounds or leak (ASan + UBSan + LeakSanitizer), and every id encode gives must decode.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/tokenizer_hf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static HfTokenizer *fixtures[4];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    static const char *const names[4] = {"gpt2", "llama3", "llama2", "mistral"};
    for (int i = 0; i < 4; i++) {
        char path[1024];
        Error err;
        snprintf(path, sizeof path, "%s/tests/fixtures/tokenizers/%s", PPTRAIN_SOURCE_DIR, names[i]);
        if (!(fixtures[i] = hf_tokenizer_load(path, &err))) {
            fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
            abort();
        }
    }
    return 0;
}

static void round_trip(const HfTokenizer *t, const char *text, size_t n) {
    HfEncoder *e = hf_encoder_new(t);
    HfIds ids = {0};
    Error err;
    if (hf_encode(e, text, n, 1, &ids, &err) == 0) {
        for (size_t i = 0; i < ids.n; i++)
            if (ids.id[i] < 0 || ids.id[i] >= hf_tokenizer_vocab(t)) abort();
        char *out;
        size_t len;
        if (hf_decode(t, ids.id, ids.n, &out, &len, &err) != 0) abort();
        free(out);
    }
    hf_ids_free(&ids);
    hf_encoder_free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    const char *text = nul ? (const char *)nul + 1 : "";
    size_t text_len = nul ? size - json_len - 1 : 0;
    Error err;
    HfTokenizer *t = json_len ? hf_tokenizer_parse((const char *)data, json_len, "fuzz", &err) : NULL;
    round_trip(t ? t : fixtures[text_len % 4], text, text_len);
    hf_tokenizer_free(t);
    return 0;
}
