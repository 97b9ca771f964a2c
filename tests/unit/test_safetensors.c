// tests/unit/test_safetensors.c: the tests of storage/safetensors.
// storage/safetensors: writer -> reader round trip, the committed PyTorch fixture (written by
// Python's safetensors), every malformed header the reader must refuse, and dtype conversions.
#include "storage/safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/test_util.h"

#ifndef PPTRAIN_SOURCE_DIR
#define PPTRAIN_SOURCE_DIR "."
#endif

static char g_dir[256];

static void path_in(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", g_dir, name);
}

static int file_exists(const char *path) { return access(path, F_OK) == 0; }

// Writes an 8-byte length (hlen, independent of the header text when forced), the header
// text, then data_len bytes of data.
static void write_raw_len(const char *path, uint64_t hlen, const char *header, size_t data_len) {
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        perror(path);
        exit(1);
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(hlen >> (8 * i));
    fwrite(len8, 1, 8, fp);
    fwrite(header, 1, strlen(header), fp);
    for (size_t i = 0; i < data_len; i++) fputc((int)(i & 0xFF), fp);
    fclose(fp);
}

static void write_raw(const char *path, const char *header, size_t data_len) {
    write_raw_len(path, strlen(header), header, data_len);
}

// Expects safetensors_open to refuse the file with a message holding the path and `want`.
static void expect_refused(const char *label, const char *path, const char *want) {
    Error err = {{0}};
    SafetensorsFile *f = safetensors_open(path, &err);
    CHECK(f == NULL, "%s: was accepted", label);
    if (f) {
        safetensors_close(f);
        return;
    }
    CHECK(strstr(err.msg, want) != NULL, "%s: message \"%s\" lacks \"%s\"", label, err.msg, want);
    CHECK(strstr(err.msg, path) != NULL, "%s: message \"%s\" does not name the file", label,
          err.msg);
    CHECK(strchr(err.msg, '\n') == NULL, "%s: message has a newline", label);
}

static void bad_header(const char *label, const char *header, size_t data_len, const char *want) {
    char path[512];
    path_in(path, sizeof path, "bad.safetensors");
    write_raw(path, header, data_len);
    expect_refused(label, path, want);
}

static void test_dtypes(void) {
    SafetensorsDtype d;
    CHECK(safetensors_dtype_parse("BF16", &d) == 0 && d == ST_BF16, "BF16 parses");
    CHECK(safetensors_dtype_parse("F64", &d) == 0 && d == ST_F64, "F64 parses");
    CHECK(safetensors_dtype_parse("f32", &d) == -1, "dtype names are case-sensitive");
    CHECK(safetensors_dtype_size(ST_F32) == 4 && safetensors_dtype_size(ST_BF16) == 2 &&
          safetensors_dtype_size(ST_I64) == 8 && safetensors_dtype_size(ST_BOOL) == 1,
          "dtype sizes");
    for (int i = 0; i < ST_DTYPE_COUNT; i++) {
        CHECK(safetensors_dtype_parse(safetensors_dtype_name((SafetensorsDtype)i), &d) == 0 &&
              (int)d == i, "dtype %d name round trip", i);
    }
}

static void test_round_trip(void) {
    char path[512], tmp[600];
    path_in(path, sizeof path, "rt.safetensors");
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());

    float w[6] = {1.5f, -2.25f, 3.0f, 0.0f, -0.0f, 1e-30f};
    uint16_t hb[5] = {0x3F80, 0xC000, 0x0000, 0x7F80, 0x3E00};
    double dd[3] = {1.0 / 3.0, -1e300, 2.5};
    int64_t scalar = -42;
    int32_t ids[4] = {256, 72, 105, 257};
    uint8_t bytes[3] = {1, 2, 255};
    int64_t s_w[2] = {2, 3}, s_hb[1] = {5}, s_dd[1] = {3}, s_ids[2] = {1, 4}, s_empty[2] = {0, 4},
            s_bytes[1] = {3};
    SafetensorsWriteTensor ts[] = {
        {"model.layers.0.w", ST_F32, 2, s_w, w},
        {"half", ST_BF16, 1, s_hb, hb},
        {"dbl", ST_F64, 1, s_dd, dd},        // at offset 34: not 8-aligned
        {"scalar", ST_I64, 0, NULL, &scalar},
        {"ids", ST_I32, 2, s_ids, ids},
        {"empty", ST_F32, 2, s_empty, NULL},
        {"bytes", ST_U8, 1, s_bytes, bytes},
    };
    const int n = (int)(sizeof ts / sizeof ts[0]);
    SafetensorsMeta meta[] = {{"format", "pt"}, {"config", "{\"a\": \"q\\\"uote\"}\nline2\ttab"}};
    Error err = {{0}};
    int rc = safetensors_write(path, n, ts, 2, meta, &err);
    CHECK(rc == 0, "write: %s", err.msg);
    CHECK(!file_exists(tmp), "no .tmp left behind");

    FILE *fp = fopen(path, "rb");
    unsigned char len8[8] = {0};
    CHECK(fp && fread(len8, 1, 8, fp) == 8, "read header length");
    if (fp) fclose(fp);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | len8[i];
    CHECK(hlen % 8 == 0, "header length %llu is a multiple of 8", (unsigned long long)hlen);

    SafetensorsFile *f = safetensors_open(path, &err);
    CHECK(f != NULL, "open round trip: %s", err.msg);
    if (!f) return;
    CHECK(safetensors_count(f) == n, "count %d", safetensors_count(f));
    for (int i = 0; i < n && i < safetensors_count(f); i++) {
        const SafetensorsTensor *t = safetensors_tensor(f, i);
        CHECK(strcmp(t->name, ts[i].name) == 0, "order %d: %s", i, t->name);
        CHECK(t->dtype == ts[i].dtype, "dtype of %s", t->name);
        CHECK(t->ndim == ts[i].ndim, "ndim of %s", t->name);
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            CHECK(t->shape[d] == ts[i].shape[d], "shape of %s", t->name);
            numel *= (size_t)ts[i].shape[d];
        }
        CHECK(t->numel == numel, "numel of %s", t->name);
        CHECK(t->nbytes == numel * safetensors_dtype_size(ts[i].dtype), "nbytes of %s", t->name);
        CHECK(t->nbytes == 0 || memcmp(t->data, ts[i].data, t->nbytes) == 0, "bytes of %s",
              t->name);
        CHECK(safetensors_find(f, ts[i].name) == t, "find %s", ts[i].name);
    }
    CHECK(safetensors_find(f, "nope") == NULL, "find missing");
    CHECK(safetensors_find(f, "scalar")->numel == 1, "scalar has one element");
    CHECK(safetensors_find(f, "model.layers.0.w")->aligned, "F32 at offset 0 is aligned");
    CHECK(!safetensors_find(f, "dbl")->aligned, "F64 at offset 34 is flagged unaligned");
    CHECK(safetensors_metadata_count(f) == 2, "metadata count");
    const char *fmt = safetensors_metadata(f, "format");
    CHECK(fmt && strcmp(fmt, "pt") == 0, "metadata format");
    const char *cfg = safetensors_metadata(f, "config");
    CHECK(cfg && strcmp(cfg, meta[1].value) == 0, "metadata with quotes, newline, tab");
    CHECK(safetensors_metadata(f, "missing") == NULL, "missing metadata key");

    float out[6];
    CHECK(safetensors_to_f32(safetensors_find(f, "model.layers.0.w"), out, 6, &err) == 0, "f32");
    CHECK(memcmp(out, w, sizeof w) == 0, "f32 copy is exact");
    float hf[5];
    CHECK(safetensors_to_f32(safetensors_find(f, "half"), hf, 5, &err) == 0, "bf16");
    CHECK(hf[0] == 1.0f && hf[1] == -2.0f && hf[2] == 0.0f && isinf(hf[3]) && hf[4] == 0.125f,
          "bf16 values %g %g %g %g %g", hf[0], hf[1], hf[2], hf[3], hf[4]);
    float df[3];
    CHECK(safetensors_to_f32(safetensors_find(f, "dbl"), df, 3, &err) == 0, "f64 (unaligned)");
    CHECK(df[0] == (float)(1.0 / 3.0) && isinf(df[1]) && df[1] < 0 && df[2] == 2.5f,
          "f64 narrows");
    CHECK(safetensors_to_f32(safetensors_find(f, "ids"), out, 4, &err) == -1 &&
          strstr(err.msg, "I32") && strstr(err.msg, "ids"), "I32 refused: %s", err.msg);
    CHECK(safetensors_to_f32(safetensors_find(f, "half"), hf, 4, &err) == -1 &&
          strstr(err.msg, "half"), "count mismatch refused: %s", err.msg);

    int64_t want_ok[2] = {2, 3}, want_bad[2] = {3, 2};
    CHECK(safetensors_expect(f, "model.layers.0.w", 2, want_ok, &err) != NULL, "expect ok");
    CHECK(safetensors_expect(f, "model.layers.0.w", 2, want_bad, &err) == NULL &&
          strstr(err.msg, "[2, 3]") && strstr(err.msg, "[3, 2]"), "expect shape: %s", err.msg);
    CHECK(safetensors_expect(f, "absent", 2, want_ok, &err) == NULL &&
          strstr(err.msg, "absent"), "expect missing: %s", err.msg);
    safetensors_close(f);

    // Overwriting an existing file replaces it whole.
    SafetensorsWriteTensor one = {"only", ST_F32, 1, s_hb, w};
    CHECK(safetensors_write(path, 1, &one, 0, NULL, &err) == 0, "overwrite: %s", err.msg);
    f = safetensors_open(path, &err);
    CHECK(f && safetensors_count(f) == 1 && safetensors_metadata_count(f) == 0 &&
          safetensors_find(f, "only") && safetensors_find(f, "only")->numel == 5, "overwritten");
    safetensors_close(f);

    // A file with no tensors at all is valid.
    CHECK(safetensors_write(path, 0, NULL, 0, NULL, &err) == 0, "empty write: %s", err.msg);
    f = safetensors_open(path, &err);
    CHECK(f && safetensors_count(f) == 0, "empty file reads: %s", err.msg);
    safetensors_close(f);
}

static void test_writer_refuses(void) {
    char path[512], tmp[600];
    path_in(path, sizeof path, "wr.safetensors");
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    unlink(path);
    float x[4] = {0};
    int64_t s4[1] = {4}, sneg[2] = {2, -2};
    Error err = {{0}};
    SafetensorsWriteTensor dup[2] = {{"a", ST_F32, 1, s4, x}, {"a", ST_F32, 1, s4, x}};
    CHECK(safetensors_write(path, 2, dup, 0, NULL, &err) == -1 && strstr(err.msg, "'a'") &&
          strstr(err.msg, "twice"), "duplicate names: %s", err.msg);
    SafetensorsWriteTensor res = {"__metadata__", ST_F32, 1, s4, x};
    CHECK(safetensors_write(path, 1, &res, 0, NULL, &err) == -1 && strstr(err.msg, "reserved"),
          "reserved name: %s", err.msg);
    SafetensorsWriteTensor neg = {"n", ST_F32, 2, sneg, x};
    CHECK(safetensors_write(path, 1, &neg, 0, NULL, &err) == -1 && strstr(err.msg, "negative"),
          "negative dim: %s", err.msg);
    SafetensorsWriteTensor nodata = {"n", ST_F32, 1, s4, NULL};
    CHECK(safetensors_write(path, 1, &nodata, 0, NULL, &err) == -1 && strstr(err.msg, "no data"),
          "no data: %s", err.msg);
    SafetensorsMeta m2[2] = {{"k", "1"}, {"k", "2"}};
    SafetensorsWriteTensor ok = {"a", ST_F32, 1, s4, x};
    CHECK(safetensors_write(path, 1, &ok, 2, m2, &err) == -1 && strstr(err.msg, "'k'"),
          "duplicate metadata: %s", err.msg);
    CHECK(!file_exists(path) && !file_exists(tmp), "refused writes leave nothing");

    char nodir[600];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/x.safetensors", g_dir);
    CHECK(safetensors_write(nodir, 1, &ok, 0, NULL, &err) == -1 &&
          strstr(err.msg, "cannot write"), "missing directory: %s", err.msg);
}

static void test_fixture(void) {
    const char *path = PPTRAIN_SOURCE_DIR "/tests/fixtures/tiny_reference.safetensors";
    Error err = {{0}};
    SafetensorsFile *f = safetensors_open(path, &err);
    CHECK(f != NULL, "open fixture: %s", err.msg);
    if (!f) return;
    struct {
        const char *name;
        SafetensorsDtype dtype;
        int ndim;
        int64_t shape[3];
    } want[] = {
        {"input_ids", ST_I32, 2, {4, 32}},
        {"targets", ST_I32, 2, {4, 32}},
        {"logits", ST_F32, 3, {4, 32, 259}},
        {"loss", ST_F64, 1, {1}},
        {"grad.model.embed_tokens.weight", ST_F32, 2, {259, 64}},
        {"grad.model.layers.0.self_attn.q_proj.weight", ST_F32, 2, {64, 64}},
        {"grad.model.layers.7.self_attn.k_proj.weight", ST_F32, 2, {32, 64}},
        {"grad.model.layers.3.mlp.down_proj.weight", ST_F32, 2, {64, 128}},
        {"grad.model.layers.3.mlp.gate_proj.weight", ST_F32, 2, {128, 64}},
        {"grad.model.norm.weight", ST_F32, 1, {64}},
        {"grad.lm_head.weight", ST_F32, 2, {259, 64}},
        {"init_head.model.layers.5.post_attention_layernorm.weight", ST_F32, 1, {16}},
        {"train_inputs", ST_I32, 3, {10, 4, 32}},
        {"train_targets", ST_I32, 3, {10, 4, 32}},
        {"train_losses", ST_F64, 1, {10}},
        {"train_lrs", ST_F64, 1, {10}},
        {"train_grad_norms", ST_F64, 1, {10}},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const SafetensorsTensor *t = safetensors_expect(f, want[i].name, want[i].ndim,
                                                        want[i].shape, &err);
        CHECK(t != NULL, "%s", err.msg);
        CHECK(!t || t->dtype == want[i].dtype, "%s dtype", want[i].name);
        CHECK(!t || t->aligned, "%s aligned", want[i].name);
    }
    // 75 parameters: grads, init heads, final heads (float64 and PyTorch fp32); plus 9 batch /
    // training tensors.
    CHECK(safetensors_count(f) == 75 * 4 + 9, "fixture holds %d tensors", safetensors_count(f));
    int64_t head16[1] = {16};
    CHECK(safetensors_expect(f, "final_head.lm_head.weight", 1, head16, &err) != NULL, "%s",
          err.msg);
    const SafetensorsTensor *ids = safetensors_find(f, "input_ids");
    if (ids && ids->aligned) {
        const int32_t *p = ids->data;
        CHECK(p[0] == 256 && p[32] == 256 && p[64] == 256 && p[96] == 256, "rows start with BOS");
    }
    const SafetensorsTensor *ln = safetensors_find(f, "init_head.model.norm.weight");
    if (ln) {
        float v[16];
        CHECK(safetensors_to_f32(ln, v, 16, &err) == 0, "%s", err.msg);
        CHECK(v[0] == 1.0f && v[15] == 1.0f, "norm weights start at 1");
    }
    const SafetensorsTensor *loss = safetensors_find(f, "loss");
    if (loss) {
        double l;
        memcpy(&l, loss->data, 8);
        CHECK(l > 5.0 && l < 6.2, "first-batch loss %g is near ln(259) = 5.557", l);
    }
    const char *seed = safetensors_metadata(f, "seed");
    CHECK(seed && strcmp(seed, "1337") == 0, "metadata seed");
    const char *cfg = safetensors_metadata(f, "config");
    CHECK(cfg && strstr(cfg, "\"hidden_size\": 64"), "metadata config");
    CHECK(safetensors_metadata(f, "clip") != NULL, "metadata clip");
    safetensors_close(f);
}

static void test_malformed(void) {
    char path[512];
    path_in(path, sizeof path, "bad.safetensors");
    Error err = {{0}};

    char missing[600];
    snprintf(missing, sizeof missing, "%s/does-not-exist.safetensors", g_dir);
    expect_refused("missing file", missing, "cannot open");

    FILE *fp = fopen(path, "wb");
    fclose(fp);
    expect_refused("empty file", path, "shorter than");
    fp = fopen(path, "wb");
    fwrite("\x10\0\0\0\0", 1, 5, fp);
    fclose(fp);
    expect_refused("5-byte file", path, "shorter than");

    write_raw_len(path, 100, "{}", 10);
    expect_refused("header past end", path, "runs past the end");
    write_raw_len(path, 1ull << 40, "{}", 10);
    expect_refused("absurd header length", path, "absurdly large");
    write_raw_len(path, 0, "", 0);
    expect_refused("zero header length", path, "not valid JSON");

    bad_header("not JSON", "{\"a\": {\"dtype\": ", 0, "not valid JSON");
    bad_header("array header", "[1, 2]  ", 0, "not a JSON object");
    bad_header("trailing bytes", "{}  xyz", 0, "trailing bytes");
    bad_header("entry not object", "{\"a\": 5}", 0, "'a' is not an object");
    bad_header("no dtype", "{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
               "lacks \"dtype\"");
    bad_header("no shape", "{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4,
               "lacks \"shape\"");
    bad_header("no offsets", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4,
               "lacks \"data_offsets\"");
    bad_header("dtype not string",
               "{\"a\": {\"dtype\": 4, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
               "\"dtype\" is not a string");
    bad_header("unknown dtype",
               "{\"a\": {\"dtype\": \"F33\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
               "unknown dtype \"F33\"");
    bad_header("shape not array",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": 1, \"data_offsets\": [0, 4]}}", 4,
               "\"shape\" is not an array");
    bad_header("shape string entry",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": [\"1\"], \"data_offsets\": [0, 4]}}", 4,
               "not a non-negative integer");
    bad_header("fractional dim",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4,
               "not a non-negative integer");
    bad_header("negative dim",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": [-1, -4], \"data_offsets\": [0, 16]}}", 16,
               "negative dimension");
    bad_header("offsets length",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4,
               "array of two integers");
    bad_header("offsets not array",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": \"0,4\"}}", 4,
               "array of two integers");
    bad_header("negative offset",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}", 4,
               "not a non-negative integer");
    bad_header("end before begin",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 0]}}", 4,
               "end before begin");
    bad_header("size mismatch",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 20]}}", 20,
               "= 24 bytes, but data_offsets [0, 20] span 20");
    bad_header("overflowing shape",
               "{\"a\": {\"dtype\": \"F64\", \"shape\": [4294967296, 4294967296], "
               "\"data_offsets\": [0, 8]}}", 8, "too large");
    bad_header("beyond data region",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", 12,
               "beyond the data region (12 bytes)");
    bad_header("overlap",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
               " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12,
               "'a' and 'b' overlap");
    bad_header("zero-size inside another",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
               " \"z\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 4]}}", 8,
               "overlap");
    bad_header("hole between",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
               " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}", 12,
               "hole in the data region: bytes 4..8 (before tensor 'b')");
    bad_header("hole at start",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8,
               "hole in the data region: bytes 0..4");
    bad_header("trailing hole",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 8,
               "bytes 4..8 (after the last tensor)");
    bad_header("data but no tensors", "{}", 8, "bytes 0..8 (after the last tensor)");
    bad_header("duplicate name",
               "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
               " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8,
               "duplicate tensor name 'a'");
    bad_header("metadata not object", "{\"__metadata__\": [\"x\"]}", 0,
               "\"__metadata__\" is not an object");
    bad_header("metadata value not string", "{\"__metadata__\": {\"seed\": 1337}}", 0,
               "value for 'seed' is not a string");
    bad_header("metadata twice", "{\"__metadata__\": {}, \"__metadata__\": {}}", 0,
               "\"__metadata__\" twice");
    bad_header("metadata key twice", "{\"__metadata__\": {\"k\": \"1\", \"k\": \"2\"}}", 0,
               "key 'k' twice");

    // Valid foreign files the reader must accept: a header length that is not a multiple of
    // 8 (the data region is then copied to an aligned buffer), and unknown entry fields.
    const char *odd = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":12}}";
    CHECK(strlen(odd) % 8 != 0, "odd header length");
    write_raw(path, odd, 8);
    SafetensorsFile *f = safetensors_open(path, &err);
    CHECK(f != NULL, "odd header length accepted: %s", err.msg);
    if (f) {
        const SafetensorsTensor *t = safetensors_find(f, "x");
        CHECK(t && t->aligned && ((const unsigned char *)t->data)[7] == 7, "odd header data");
        safetensors_close(f);
    }
}

static void test_conversions(void) {
    CHECK(safetensors_bf16_to_f32(0x3F80) == 1.0f, "bf16 1");
    CHECK(safetensors_bf16_to_f32(0xC049) == -3.140625f, "bf16 -3.140625");
    CHECK(isnan(safetensors_bf16_to_f32(0x7FC0)), "bf16 nan");
    CHECK(safetensors_f16_to_f32(0x3C00) == 1.0f, "f16 1");
    CHECK(safetensors_f16_to_f32(0xC000) == -2.0f, "f16 -2");
    CHECK(safetensors_f16_to_f32(0x7BFF) == 65504.0f, "f16 max");
    CHECK(safetensors_f16_to_f32(0x0400) == ldexpf(1.0f, -14), "f16 min normal");
    CHECK(safetensors_f16_to_f32(0x0001) == ldexpf(1.0f, -24), "f16 min subnormal");
    CHECK(safetensors_f16_to_f32(0x83FF) == -ldexpf(1023.0f, -24), "f16 max subnormal, negative");
    CHECK(safetensors_f16_to_f32(0x3555) == 0.333251953125f, "f16 0.33325");
    float nz = safetensors_f16_to_f32(0x8000);
    CHECK(nz == 0.0f && signbit(nz), "f16 -0");
    CHECK(isinf(safetensors_f16_to_f32(0x7C00)) && safetensors_f16_to_f32(0xFC00) < 0, "f16 inf");
    CHECK(isnan(safetensors_f16_to_f32(0x7E00)), "f16 nan");
    // Every finite f16 value widens to a float that converts back (through double) unchanged.
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7C00) == 0x7C00) continue;
        float x = safetensors_f16_to_f32((uint16_t)h);
        int e;
        double m = frexp(fabs((double)x), &e);     // x = m * 2^e, m in [0.5, 1)
        // an f16 value has at most 11 significant bits
        if (x != 0.0f && ldexp(m, 11) != floor(ldexp(m, 11))) bad++;
    }
    CHECK(bad == 0, "%d f16 values widen with more than 11 significant bits", bad);

    union { uint32_t u; float f; } v;
    CHECK(safetensors_f32_to_bf16(1.0f) == 0x3F80, "to bf16 1");
    v.u = 0x3F808000u;   // halfway, lower is even: stays
    CHECK(safetensors_f32_to_bf16(v.f) == 0x3F80, "to bf16 tie to even (down)");
    v.u = 0x3F818000u;   // halfway, lower is odd: rounds up
    CHECK(safetensors_f32_to_bf16(v.f) == 0x3F82, "to bf16 tie to even (up)");
    v.u = 0x3F808001u;   // above halfway
    CHECK(safetensors_f32_to_bf16(v.f) == 0x3F81, "to bf16 rounds up");
    CHECK(isnan(safetensors_bf16_to_f32(safetensors_f32_to_bf16(NAN))), "to bf16 nan");
    CHECK(safetensors_f32_to_bf16(INFINITY) == 0x7F80, "to bf16 inf");
    for (int i = -300; i <= 300; i++) {
        float x = (float)i * 0.37f;
        float y = safetensors_bf16_to_f32(safetensors_f32_to_bf16(x));
        if (fabsf(y - x) > fabsf(x) * (1.0f / 256.0f)) {
            CHECK(0, "bf16 round trip of %g gives %g", x, y);
            break;
        }
    }
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/pptrain_safetensors_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_dtypes();
    test_round_trip();
    test_writer_refuses();
    test_fixture();
    test_malformed();
    test_conversions();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return test_finish();
}
