// tests/unit/test_tokenizer.c: the Hugging Face tokenizer against the `tokenizers` package.
// tests/reference/tokenizers_ref.py trained one tokenizer per family (GPT-2 and Llama 3
// byte-level BPE, Llama 2 and Mistral SentencePiece-style BPE; and variants: SmolLM's Digits,
// ByteLevel's add_prefix_space, Metaspace's "always" with split, Split's other behaviors
// and invert, non-special added tokens) and wrote, for texts covering
// scripts, emoji, combining marks, whitespace runs, digits, contractions, special tokens,
// invalid UTF-8 and the empty document, the ids and decoded strings `tokenizers` gives.
// pptrain's must equal them exactly; decode(encode(x)) == x wherever `tokenizers` is lossless.
// Then malformed and unsupported tokenizer.json files, each refused with one line.
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/data/data.h"
#include "engine/data/tokenizer_hf.h"
#include "test_util.h"

#define FIXTURES PPTRAIN_SOURCE_DIR "/tests/fixtures/tokenizers"

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    *len = fread(buf, 1, (size_t)n, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static size_t unhex(const char *h, char *out) {
    size_t n = strlen(h) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned b;
        sscanf(h + 2 * i, "%2x", &b);
        out[i] = (char)b;
    }
    out[n] = '\0';
    return n;
}

enum { MAX_FAMILIES = 32 };
static HfTokenizer *cache[MAX_FAMILIES];   // each fixture tokenizer, loaded once

static HfTokenizer *family(const char *name) {
    static char names[MAX_FAMILIES][32];
    for (int i = 0; i < MAX_FAMILIES; i++)
        if (cache[i] && strcmp(names[i], name) == 0) return cache[i];
    char path[512];
    snprintf(path, sizeof path, "%s/%s", FIXTURES, name);
    Error err = {0};
    HfTokenizer *t = hf_tokenizer_load(path, &err);
    CHECK(t != NULL, "load %s: %s", name, err.msg);
    int kept = 0;
    for (int i = 0; i < MAX_FAMILIES && !kept; i++)
        if (!cache[i]) {
            cache[i] = t;
            snprintf(names[i], sizeof names[i], "%s", name);
            kept = 1;
        }
    CHECK(kept, "more than %d fixture families: raise MAX_FAMILIES", MAX_FAMILIES);
    return t;
}

static void check_ids(const char *what, const HfIds *got, const cJSON *want) {
    size_t n = (size_t)cJSON_GetArraySize(want), i = 0;
    int same = got->n == n;
    for (const cJSON *c = want->child; c && same; c = c->next, i++) same = got->id[i] == (int32_t)c->valuedouble;
    CHECK(same, "%s: %zu ids, want %zu (first difference at %zu: %d vs %d)", what, got->n, n, i ? i - 1 : 0,
          got->n > (i ? i - 1 : 0) ? got->id[i ? i - 1 : 0] : -1,
          (int)cJSON_GetArrayItem(want, (int)(i ? i - 1 : 0))->valuedouble);
}

static void one_case(const cJSON *c) {
    const char *fam = cJSON_GetStringValue(cJSON_GetObjectItem(c, "family"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
    const char *hex = cJSON_GetStringValue(cJSON_GetObjectItem(c, "text_hex"));
    char what[128];
    snprintf(what, sizeof what, "%s/%s", fam, name);
    HfTokenizer *t = family(fam);
    if (!t) return;
    char *text = malloc(strlen(hex) / 2 + 1);
    size_t n = unhex(hex, text);
    HfEncoder *e = hf_encoder_new(t);
    HfIds ids = {0};
    Error err = {0};
    int rc = hf_encode(e, text, n, 1, &ids, &err);
    if (cJSON_IsTrue(cJSON_GetObjectItem(c, "error"))) {
        CHECK(rc == -1 && strstr(err.msg, "invalid UTF-8"), "%s: refused (rc %d, %s)", what, rc, err.msg);
    } else if (rc != 0) {
        CHECK(0, "%s: encode failed: %s", what, err.msg);
    } else {
        check_ids(what, &ids, cJSON_GetObjectItem(c, "ids"));
        char *dec;
        size_t len;
        const char *dh = cJSON_GetStringValue(cJSON_GetObjectItem(c, "decoded_hex"));
        char *want = malloc(strlen(dh) / 2 + 1);
        size_t wn = unhex(dh, want);
        CHECK(hf_decode(t, ids.id, ids.n, &dec, &len, &err) == 0, "%s: decode: %s", what, err.msg);
        CHECK(len == wn && memcmp(dec, want, wn) == 0, "%s: decoded \"%s\", want \"%s\"", what, dec, want);
        if (cJSON_IsTrue(cJSON_GetObjectItem(c, "lossless")))
            CHECK(len == n && memcmp(dec, text, n) == 0, "%s: decode(encode(x)) != x", what);
        free(dec);
        free(want);
    }
    hf_ids_free(&ids);
    hf_encoder_free(e);
    free(text);
}

static void test_fixtures(void) {
    size_t len;
    char *json = slurp(FIXTURES "/cases.json", &len);
    CHECK(json != NULL, "read cases.json");
    if (!json) return;
    cJSON *cases = cJSON_Parse(json);
    CHECK(cJSON_GetArraySize(cases) >= 12 * 18, "cases: %d", cJSON_GetArraySize(cases));
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next) one_case(c);
    cJSON_Delete(cases);
    free(json);
}

static void test_identity(void) {
    HfTokenizer *l3 = family("llama3"), *l2 = family("llama2"), *g = family("gpt2");
    if (!l3 || !l2 || !g) return;
    CHECK(hf_tokenizer_bos(l3) == 0 && hf_tokenizer_eos(l3) == 1 && hf_tokenizer_pad(l3) == 1,
          "llama3 bos/eos/pad %d %d %d", hf_tokenizer_bos(l3), hf_tokenizer_eos(l3), hf_tokenizer_pad(l3));
    CHECK(hf_tokenizer_bos(l2) == 1 && hf_tokenizer_eos(l2) == 2 && hf_tokenizer_pad(l2) == -1,
          "llama2 bos/eos/pad %d %d %d", hf_tokenizer_bos(l2), hf_tokenizer_eos(l2), hf_tokenizer_pad(l2));
    CHECK(hf_tokenizer_vocab(l3) == 700 && hf_tokenizer_vocab(l2) == 856, "vocab %d %d",
          hf_tokenizer_vocab(l3), hf_tokenizer_vocab(l2));
    CHECK(hf_tokenizer_byte_fallback(l2) && !hf_tokenizer_byte_fallback(g), "byte_fallback");
    CHECK(hf_tokenizer_token_id(l2, "<0x41>") == 3 + 0x41, "<0x41> is %d", hf_tokenizer_token_id(l2, "<0x41>"));
    int32_t bad = 9999;
    char *out;
    size_t n;
    Error err = {0};
    CHECK(hf_decode(l2, &bad, 1, &out, &n, &err) == -1 && strstr(err.msg, "9999"), "decode id 9999: %s", err.msg);
}

// A mutation of the llama3 fixture: replaces the first `from` with `to`, parses it, and
// expects a refusal whose message holds `says`.
static void refused(const char *from, const char *to, const char *says) {
    size_t len;
    char *json = slurp(FIXTURES "/llama3/tokenizer.json", &len);
    if (!json) return;
    char *at = strstr(json, from);
    CHECK(at != NULL, "fixture holds %s", from);
    if (!at) return free(json);
    size_t lf = strlen(from), lt = strlen(to);
    char *m = malloc(len - lf + lt + 1);
    memcpy(m, json, (size_t)(at - json));
    memcpy(m + (at - json), to, lt);
    memcpy(m + (at - json) + lt, at + lf, len - (size_t)(at - json) - lf + 1);
    Error err = {0};
    HfTokenizer *t = hf_tokenizer_parse(m, strlen(m), "tok.json", &err);
    CHECK(t == NULL && strstr(err.msg, says) && !strchr(err.msg, '\n'), "%s -> %s: \"%s\" (want \"%s\")",
          from, to, err.msg, says);
    hf_tokenizer_free(t);
    free(m);
    free(json);
}

static void test_refusals(void) {
    refused("\"type\": \"BPE\"", "\"type\": \"WordPiece\"", "model.type \"WordPiece\"");
    refused("\"type\": \"BPE\"", "\"type\": \"BPE\", \"frobnicate\": 1", "unsupported key \"frobnicate\"");
    refused("\"version\": \"1.0\"", "\"version\": \"1.0\",", "malformed JSON");
    refused("\"truncation\": null", "\"truncation\": {\"max_length\": 5}", "truncation is set");
    refused("\"merges\": [", "\"merges\": [[\"Ġ\", \"nosuchtoken\"], ", "names a token not in the vocabulary");
    refused("\"type\": \"Split\"", "\"type\": \"Punctuation\"", "pre_tokenizer type \"Punctuation\"");
    refused("\"behavior\": \"Isolated\"", "\"behavior\": \"Sideways\"", "Split behavior \"Sideways\"");
    refused("\"Regex\": \"(?i:", "\"Regex\": \"((?i:", "regex does not compile");
    refused("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFKC\"}", "normalizer type \"NFKC\"");
    refused("\"dropout\": null", "\"dropout\": 0.1", "dropout is set");
    refused("\"lstrip\": false", "\"lstrip\": true", "lstrip true is not supported");
    refused("\"decoder\": {", "\"decoder\": {\"type\": \"WordPiece\"}, \"x\": {", "unsupported key \"x\"");
    refused("\"type\": \"TemplateProcessing\"", "\"type\": \"BertProcessing\"", "post_processor type \"BertProcessing\"");
    // Python's json (so the tokenizers package) keeps the last of two equal keys, cJSON the first.
    refused("\"type\": \"BPE\"", "\"type\": \"BPE\", \"dropout\": 0.5", "duplicate key");
}

// Non-UTF-8 text: refused under a tokenizer without byte fallback, repaired under one with.
static void test_invalid_utf8(void) {
    HfTokenizer *g = family("gpt2"), *l2 = family("llama2");
    if (!g || !l2) return;
    HfEncoder *e = hf_encoder_new(g);
    HfIds ids = {0};
    Error err = {0};
    CHECK(hf_encode(e, "ab\xC3", 3, 1, &ids, &err) == -1 && strstr(err.msg, "byte 2"), "%s", err.msg);
    hf_encoder_free(e);
    e = hf_encoder_new(l2);
    CHECK(hf_encode(e, "ab\xC3", 3, 1, &ids, &err) == 0, "%s", err.msg);
    hf_encoder_free(e);
    hf_ids_free(&ids);
}

// Text through dataset_open_text under the Llama 2-style tokenizer: a pad row is the
// template's BOS, the document's ids, its EOS, then the pad filler (EOS: it has no pad),
// whose targets are ignored; the same on 1 and 3 encoding threads.
static void test_dataset_text(void) {
    HfTokenizer *t = family("llama2");
    if (!t) return;
    char path[] = "/tmp/pptrain_test_tokenizer_XXXXXX";
    int fd = mkstemp(path);
    const char *text = "The first document.\n\nA second, longer document about bubbles.\n";
    CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "temp file");
    close(fd);
    HfEncoder *e = hf_encoder_new(t);
    HfIds want = {0};
    Error err = {0};
    hf_encode(e, "The first document.", 19, 1, &want, &err);
    hf_ids_push(&want, 2);
    enum { T = 16 };
    int32_t in[2][2 * T], tg[2][2 * T];
    for (int threads = 1, k = 0; threads <= 3; threads += 2, k++) {
        TextEncoding te;
        text_encoding_init(&te, t, threads);
        CHECK(te.eos == 2 && te.pad == 2, "eos %d pad %d", te.eos, te.pad);
        Dataset *ds = dataset_open_text(path, BATCHING_PAD, T, 7, DATA_TRAIN, &te, &err);
        CHECK(ds != NULL, "open: %s", err.msg);
        if (!ds) return;
        CHECK(dataset_items(ds) == 2, "2 documents, got %llu", (unsigned long long)dataset_items(ds));
        for (int d = 0; d < 2; d++) dataset_next_batch(ds, 1, in[k] + d * T, tg[k] + d * T);
        int32_t *row = in[k][0] == 1 && tg[k][0] == want.id[1] ? in[k] : in[k] + T;
        int32_t *trow = row == in[k] ? tg[k] : tg[k] + T;
        int same = 1;
        for (size_t i = 0; i < want.n && i < T; i++) same &= row[i] == want.id[i];
        CHECK(same && row[want.n] == 2 && trow[want.n - 1] == -1 && trow[want.n - 2] == 2,
              "row: BOS, ids, EOS, pad; EOS the last target");
        dataset_close(ds);
        text_encoding_free(&te);
    }
    CHECK(memcmp(in[0], in[1], sizeof in[0]) == 0, "1 and 3 threads give the same batches");
    hf_ids_free(&want);
    hf_encoder_free(e);
    unlink(path);
}

int main(void) {
    test_fixtures();
    test_identity();
    test_refusals();
    test_invalid_utf8();
    test_dataset_text();
    for (int i = 0; i < MAX_FAMILIES; i++) hf_tokenizer_free(cache[i]);
    return test_finish();
}
