// tests/unit/test_data.c: the tests of engine/data.
// engine/data (the byte tokenizer included): document splitting, pad and pack rows, llm.c shards
// (good and malformed), folder walks, epoch order and cursor save/restore. Inputs are written
// into a fresh temporary folder; the committed corpus in tests/fixtures/text is opened last.
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/data/data.h"
#include "engine/data/tokenizer.h"
#include "tests/unit/test_util.h"

#ifndef PPTRAIN_SOURCE_DIR
#define PPTRAIN_SOURCE_DIR "."
#endif

enum { MAX_T = 512 };

static char tmp_root[] = "/tmp/pptrain_test_data_XXXXXX";
static char path_buf[4][1024];

// A path under the temporary folder; four rotating buffers so a call can take a few.
static const char *tmp_path(const char *name) {
    static int next;
    char *p = path_buf[next++ % 4];
    snprintf(p, sizeof path_buf[0], "%s/%s", tmp_root, name);
    return p;
}

static const char *write_bytes(const char *name, const void *data, size_t n) {
    const char *path = tmp_path(name);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *s = dir + strlen(tmp_root) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        mkdir(dir, 0755);
        *s = '/';
    }
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot create %s", path);
    if (f) {
        if (n) fwrite(data, 1, n, f);
        fclose(f);
    }
    return path;
}

static const char *write_text(const char *name, const char *text) {
    return write_bytes(name, text, strlen(text));
}

static void put_le32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

// An llm.c shard whose header says `count` tokens; the body holds tok[0..n_body), each
// `width` bytes little-endian, then `extra` zero bytes.
static const char *write_shard(const char *name, uint32_t magic, uint32_t version,
                               uint32_t count, const uint32_t *tok, size_t n_body, int width,
                               size_t extra) {
    size_t n = 1024 + n_body * (size_t)width + extra;
    unsigned char *buf = calloc(1, n);
    put_le32(buf, magic);
    put_le32(buf + 4, version);
    put_le32(buf + 8, count);
    for (size_t i = 0; i < n_body; i++)
        for (int b = 0; b < width; b++)
            buf[1024 + i * (size_t)width + (size_t)b] = (unsigned char)(tok[i] >> (8 * b));
    const char *path = write_bytes(name, buf, n);
    free(buf);
    return path;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

// The text of one row: inputs, then the last target, decoded (BOS and PAD vanish, EOS is "\n").
static const char *row_text(const int32_t *in, const int32_t *tg, int T) {
    static char out[MAX_T + 2];
    int32_t ids[MAX_T + 1];
    memcpy(ids, in, (size_t)T * sizeof *ids);
    ids[T] = tg[T - 1] < 0 ? TOKEN_PAD : tg[T - 1];
    tokenizer_decode(ids, (size_t)T + 1, out, sizeof out);
    return out;
}

static Dataset *open_ok(const char *path, Batching mode, int T, uint64_t seed) {
    Error err = {{0}};
    Dataset *ds = dataset_open(path, mode, T, seed, &err);
    CHECK(ds != NULL, "open %s: %s", path, err.msg);
    return ds;
}

static void expect_error(const char *path, Batching mode, int T, const char *what) {
    Error err = {{0}};
    Dataset *ds = dataset_open(path, mode, T, 1, &err);
    CHECK(ds == NULL, "%s opened though it should fail with \"%s\"", path, what);
    CHECK(strstr(err.msg, path) != NULL, "message names the path: %s", err.msg);
    CHECK(strstr(err.msg, what) != NULL, "message says \"%s\": %s", what, err.msg);
    CHECK(strchr(err.msg, '\n') == NULL, "one line: %s", err.msg);
    dataset_close(ds);
}

// Every row of one epoch in pad mode (B = 1), decoded, sorted by strcmp into out[0..items).
static int cmp_cstr(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static size_t epoch_texts(Dataset *ds, int T, char **out, size_t cap) {
    size_t n = (size_t)dataset_items(ds);
    int32_t in[MAX_T], tg[MAX_T];
    for (size_t i = 0; i < n && i < cap; i++) {
        dataset_next_batch(ds, 1, in, tg);
        out[i] = strdup(row_text(in, tg, T));
    }
    n = n < cap ? n : cap;
    qsort(out, n, sizeof *out, cmp_cstr);
    return n;
}

static void free_texts(char **t, size_t n) {
    for (size_t i = 0; i < n; i++) free(t[i]);
}

static void test_tokenizer(void) {
    const char text[] = "Hi\xff\x01 there\n";
    size_t n = sizeof text - 1;
    int32_t ids[32];
    CHECK(tokenizer_encode(text, n, ids) == n, "encode returns n");
    CHECK(ids[2] == 255 && ids[3] == 1 && ids[0] == 'H', "bytes map to 0..255");
    char out[32];
    CHECK(tokenizer_decode(ids, n, out, sizeof out) == n, "decode length");
    CHECK(memcmp(out, text, n) == 0 && out[n] == '\0', "round trip");
    int32_t sp[] = {TOKEN_BOS, 'a', TOKEN_PAD, TOKEN_EOS, 'b', 9999, -1};
    CHECK(tokenizer_decode(sp, 7, out, sizeof out) == 3 && strcmp(out, "a\nb") == 0,
          "specials: BOS and PAD vanish, EOS is a newline: \"%s\"", out);
    CHECK(tokenizer_decode(ids, n, out, 4) == 3 && strcmp(out, "Hi\xff") == 0,
          "decode stops at cap - 1");
    CHECK(tokenizer_decode(ids, n, out, 0) == 0, "cap 0 writes nothing");
}

static void test_split(void) {
    const int T = 64;
    const char *p = write_text("split/blank.txt",
        "\xEF\xBB\xBF  \n\nFirst line\nsecond line\n\n\n \t\nSecond doc\r\nwith crlf\r\n"
        "\r\n\r\nlast has no newline");
    Dataset *ds = open_ok(p, BATCHING_PAD, T, 7);
    if (ds) {
        CHECK(dataset_items(ds) == 3, "3 documents, got %llu",
              (unsigned long long)dataset_items(ds));
        char *t[3];
        size_t n = epoch_texts(ds, T, t, 3);
        CHECK(n == 3 && strcmp(t[0], "First line\nsecond line\n") == 0, "doc 1: \"%s\"", t[0]);
        CHECK(n == 3 && strcmp(t[1], "Second doc\nwith crlf\n") == 0, "doc 2: \"%s\"", t[1]);
        CHECK(n == 3 && strcmp(t[2], "last has no newline\n") == 0, "doc 3: \"%s\"", t[2]);
        free_texts(t, n);
        CHECK(strcmp(dataset_kind(ds), "text") == 0, "kind %s", dataset_kind(ds));
        // BOS + EOS per document: 2+22 + 2+20 + 2+19
        CHECK(dataset_tokens(ds) == 67, "tokens %llu", (unsigned long long)dataset_tokens(ds));
        dataset_close(ds);
    }
    p = write_text("split/fortunes",
        "A fortune\n\nwith a blank line inside\n%\n\n  \n%\n\nSecond\r\n  indented\n\n%\n"
        "Third, not closed by %");
    ds = open_ok(p, BATCHING_PAD, T, 7);
    if (ds) {
        CHECK(dataset_items(ds) == 3, "fortunes: 3 documents, got %llu",
              (unsigned long long)dataset_items(ds));
        char *t[3];
        size_t n = epoch_texts(ds, T, t, 3);
        CHECK(n == 3 && strcmp(t[0], "A fortune\n\nwith a blank line inside\n") == 0,
              "fortune keeps its inner blank line: \"%s\"", t[0]);
        CHECK(n == 3 && strcmp(t[1], "Second\n  indented\n") == 0, "fortune 2: \"%s\"", t[1]);
        CHECK(n == 3 && strcmp(t[2], "Third, not closed by %\n") == 0, "fortune 3: \"%s\"",
              t[2]);
        free_texts(t, n);
        dataset_close(ds);
    }
    expect_error(write_text("split/blank_only.txt", " \n\n\t\r\n"), BATCHING_PAD, T,
                 "no documents");
}

static void test_pad_rows(void) {
    int32_t in[16], tg[16];
    Dataset *ds = open_ok(write_text("pad/short.txt", "abc\n"), BATCHING_PAD, 8, 1);
    if (ds) {
        dataset_next_batch(ds, 1, in, tg);
        const int32_t ein[8] = {TOKEN_BOS, 'a', 'b', 'c', TOKEN_EOS, TOKEN_PAD, TOKEN_PAD,
                                TOKEN_PAD};
        const int32_t etg[8] = {'a', 'b', 'c', TOKEN_EOS, -1, -1, -1, -1};
        CHECK(memcmp(in, ein, sizeof ein) == 0, "padded inputs");
        CHECK(memcmp(tg, etg, sizeof etg) == 0, "padded targets are -1");
        CHECK(dataset_max_token(ds) == TOKEN_PAD, "PAD is an input: max %d",
              dataset_max_token(ds));
        dataset_close(ds);
    }
    ds = open_ok(write_text("pad/long.txt", "abcdefghij"), BATCHING_PAD, 4, 1);
    if (ds) {
        dataset_next_batch(ds, 2, in, tg);   // one document: both rows are it
        const int32_t ein[8] = {TOKEN_BOS, 'a', 'b', 'c', TOKEN_BOS, 'a', 'b', 'c'};
        const int32_t etg[8] = {'a', 'b', 'c', 'd', 'a', 'b', 'c', 'd'};
        CHECK(memcmp(in, ein, sizeof ein) == 0, "clipped inputs");
        CHECK(memcmp(tg, etg, sizeof etg) == 0, "clipped targets");
        CHECK(dataset_max_token(ds) == TOKEN_EOS, "no PAD in any input: max %d",
              dataset_max_token(ds));
        dataset_close(ds);
    }
    ds = open_ok(write_text("pad/exact.txt", "ab"), BATCHING_PAD, 3, 1);
    if (ds) {
        dataset_next_batch(ds, 1, in, tg);
        const int32_t ein[3] = {TOKEN_BOS, 'a', 'b'}, etg[3] = {'a', 'b', TOKEN_EOS};
        CHECK(memcmp(in, ein, sizeof ein) == 0 && memcmp(tg, etg, sizeof etg) == 0,
              "a row of exactly T+1 tokens ends with the EOS target");
        dataset_close(ds);
    }
}

static void test_pack_windows(void) {
    // stream: BOS a b c EOS BOS d e EOS (9 tokens); T = 3 -> windows [0..3], [3..6]
    const char *p = write_text("pack/two.txt", "abc\n\nde\n");
    Dataset *ds = open_ok(p, BATCHING_PACK, 3, 5);
    if (ds) {
        CHECK(dataset_items(ds) == 2, "2 windows, got %llu",
              (unsigned long long)dataset_items(ds));
        CHECK(dataset_tokens(ds) == 9, "9 tokens");
        CHECK(dataset_max_token(ds) == TOKEN_EOS, "max %d", dataset_max_token(ds));
        int32_t in[6], tg[6];
        dataset_next_batch(ds, 2, in, tg);
        const int32_t w0i[3] = {TOKEN_BOS, 'a', 'b'}, w0t[3] = {'a', 'b', 'c'};
        const int32_t w1i[3] = {'c', TOKEN_EOS, TOKEN_BOS}, w1t[3] = {TOKEN_EOS, TOKEN_BOS, 'd'};
        int first = in[0] == TOKEN_BOS ? 0 : 3, second = 3 - first;
        CHECK(memcmp(in + first, w0i, sizeof w0i) == 0 && memcmp(tg + first, w0t, sizeof w0t) == 0,
              "window 0");
        CHECK(memcmp(in + second, w1i, sizeof w1i) == 0 &&
              memcmp(tg + second, w1t, sizeof w1t) == 0, "window 1 starts at stride T");
        dataset_close(ds);
    }
    ds = open_ok(p, BATCHING_PACK, 8, 5);
    CHECK(ds && dataset_items(ds) == 1, "9 tokens hold one window of 9");
    dataset_close(ds);
    expect_error(p, BATCHING_PACK, 9, "fewer than one window");
    expect_error(p, BATCHING_PACK, 0, "at least 1");
}

static void test_folder_order(void) {
    // sorted path order: "a.txt" < "a/c.txt" ('.' < '/') < "b.txt"
    write_text("order/b.txt", "bee");
    write_text("order/a/c.txt", "sea\n");
    write_text("order/a.txt", "ay\n");
    const char *dir = tmp_path("order");
    Dataset *ds = open_ok(dir, BATCHING_PACK, 13, 3);   // 14 tokens: one window of all
    if (ds) {
        int32_t in[13], tg[13];
        dataset_next_batch(ds, 1, in, tg);
        const char *t = row_text(in, tg, 13);
        CHECK(strcmp(t, "ay\nsea\nbee\n") == 0, "files in sorted path order: \"%s\"", t);
        dataset_close(ds);
    }
}

// What a user pointing at /usr/share/games/fortunes expects: each fortune once.
static void test_fortune_folder(void) {
    write_text("fortunes/riddles", "Q: one?\nA: yes\n%\nQ: two?\n%\nQ: three?\n%\n");
    const unsigned char dat[] = {0, 0, 0, 2, 0, 0, 0, 3, 'x', 0};   // strfile index: binary
    write_bytes("fortunes/riddles.dat", dat, sizeof dat);
    write_text("fortunes/notes.dat", "not an index: no file called notes\n");
    write_text("fortunes/.hidden", "never read\n\nnor this\n");
    write_text("fortunes/.git/config", "[core]\n");
    write_bytes("fortunes/picture.png", "\x89PNG\r\n\x1a\n\0\0", 10);
    write_text("fortunes/sub/more", "Q: four?\n%\nQ: five?\n");
    CHECK(symlink("riddles", tmp_path("fortunes/riddles.u8")) == 0, "symlink .u8");
    CHECK(symlink("..", tmp_path("fortunes/sub/loop")) == 0, "symlink loop");
    CHECK(symlink("gone", tmp_path("fortunes/dangling")) == 0, "dangling symlink");
    const char *dir = tmp_path("fortunes");
    Dataset *ds = open_ok(dir, BATCHING_PAD, 48, 11);
    if (ds) {
        char *t[16];
        size_t n = epoch_texts(ds, 48, t, 16);
        CHECK(n == 6, "6 documents (3 riddles once, notes.dat, 2 in sub), got %zu", n);
        const char *want[] = {"Q: five?\n", "Q: four?\n", "Q: one?\nA: yes\n", "Q: three?\n",
                              "Q: two?\n", "not an index: no file called notes\n"};
        for (size_t i = 0; i < n && i < 6; i++)
            CHECK(strcmp(t[i], want[i]) == 0, "doc %zu: \"%s\" vs \"%s\"", i, t[i], want[i]);
        free_texts(t, n);
        dataset_close(ds);
    }
    write_bytes("binonly/a.png", "\x89PNG\0", 5);
    write_bytes("binonly/b.o", "\x7f" "ELF\0\0", 6);
    expect_error(tmp_path("binonly"), BATCHING_PAD, 8, "skipped as binary");
    expect_error(write_bytes("lone.png", "\x89PNG\0", 5), BATCHING_PAD, 8, "not a text file");
}

static void test_shards(void) {
    uint32_t v1[10] = {0, 1, 258, 65535, 256, 257, 7, 8, 50256, 9};
    const char *p = write_shard("shard/v1.bin", 20240520, 1, 10, v1, 10, 2, 0);
    Dataset *ds = open_ok(p, BATCHING_PACK, 3, 2);
    if (ds) {
        CHECK(strcmp(dataset_kind(ds), "llm.c shard (uint16)") == 0, "kind %s",
              dataset_kind(ds));
        CHECK(dataset_tokens(ds) == 10 && dataset_items(ds) == 3, "10 tokens, 3 windows");
        CHECK(dataset_max_token(ds) == 65535, "max %d", dataset_max_token(ds));
        int32_t in[9], tg[9];
        dataset_next_batch(ds, 3, in, tg);
        int seen[3] = {0};
        for (int r = 0; r < 3; r++) {
            int w = -1;
            for (int c = 0; c < 3; c++)
                if (in[r * 3] == (int32_t)v1[c * 3]) w = c;
            CHECK(w >= 0, "row %d is a window", r);
            if (w < 0) continue;
            seen[w]++;
            for (int j = 0; j < 3; j++) {
                CHECK(in[r * 3 + j] == (int32_t)v1[w * 3 + j], "input %d of window %d", j, w);
                CHECK(tg[r * 3 + j] == (int32_t)v1[w * 3 + j + 1],
                      "target %d of window %d: %d (258 is a token here, not padding)", j, w,
                      tg[r * 3 + j]);
            }
        }
        CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1, "each window once");
        dataset_close(ds);
    }
    expect_error(p, BATCHING_PAD, 3, "no document boundaries");

    uint32_t v7[5] = {128000, 70000, 1, 2147483647u, 128255};
    p = write_shard("shard/v7.bin", 20240801, 7, 5, v7, 5, 4, 0);
    ds = open_ok(p, BATCHING_PACK, 4, 2);
    if (ds) {
        CHECK(strcmp(dataset_kind(ds), "llm.c shard (uint32)") == 0, "kind %s",
              dataset_kind(ds));
        CHECK(dataset_max_token(ds) == 2147483647, "max %d", dataset_max_token(ds));
        int32_t in[4], tg[4];
        dataset_next_batch(ds, 1, in, tg);
        for (int j = 0; j < 4; j++)
            CHECK(in[j] == (int32_t)v7[j] && tg[j] == (int32_t)v7[j + 1], "uint32 token %d", j);
        dataset_close(ds);
    }
}

// llm.c's folders hold fineweb_train_*.bin beside fineweb_val_*.bin: training reads the
// former (and says how many it set aside), validation the latter, whatever their order.
static void test_val_shards(void) {
    uint32_t t[12];
    for (uint32_t i = 0; i < 12; i++) t[i] = 2000 + i;
    write_shard("llmc/fw_train_000001.bin", 20240520, 1, 4, t, 4, 2, 0);
    write_shard("llmc/fw_train_000002.bin", 20240520, 1, 4, t + 4, 4, 2, 0);
    write_shard("llmc/fw_val_000000.bin", 20240520, 1, 4, t + 8, 4, 2, 0);
    Dataset *train = open_ok(tmp_path("llmc"), BATCHING_PACK, 1, 3);
    Error err = {{0}};
    Dataset *val = dataset_open_split(tmp_path("llmc"), BATCHING_PACK, 1, 3, DATA_VAL, &err);
    Dataset *all = dataset_open_split(tmp_path("llmc"), BATCHING_PACK, 1, 3, DATA_ALL, &err);
    CHECK(train && dataset_tokens(train) == 8 && dataset_held_out(train) == 1, "training: 8 tokens, 1 val shard aside");
    CHECK(val && dataset_tokens(val) == 4 && dataset_held_out(val) == 0, "validation: the val shard's 4 tokens");
    CHECK(all && dataset_tokens(all) == 12, "all: 12 tokens");
    int32_t in[3], tg[3];
    if (val) {
        dataset_next_batch(val, 3, in, tg);
        for (int r = 0; r < 3; r++) CHECK(in[r] >= 2008 && in[r] < 2012, "validation row from the val shard: %d", in[r]);
    }
    if (train) {
        dataset_next_batch(train, 3, in, tg);
        for (int r = 0; r < 3; r++) CHECK(in[r] >= 2000 && in[r] < 2008, "training row from a train shard: %d", in[r]);
    }
    dataset_close(train);
    dataset_close(val);
    dataset_close(all);
    // A folder with no val shard has no validation split; one of val shards only is no training
    // set (it would train on what it should validate on), but is a validation set.
    write_shard("noval/a.bin", 20240520, 1, 4, t, 4, 2, 0);
    CHECK(!dataset_open_split(tmp_path("noval"), BATCHING_PACK, 1, 3, DATA_VAL, &err) && strstr(err.msg, "_val_"),
          "no val shards: one line naming _val_: %s", err.msg);
    write_shard("onlyval/x_val_1.bin", 20240520, 1, 4, t, 4, 2, 0);
    CHECK(!dataset_open(tmp_path("onlyval"), BATCHING_PACK, 1, 3, &err) && strstr(err.msg, "only llm.c validation") &&
              strstr(err.msg, "--val-data"),
          "a folder of val shards only: refused for training, naming --val-data: %s", err.msg);
    Dataset *only = dataset_open_split(tmp_path("onlyval"), BATCHING_PACK, 1, 3, DATA_VAL, &err);
    CHECK(only && dataset_tokens(only) == 4, "a folder of val shards only: its validation split");
    dataset_close(only);
}

static void test_shard_folder(void) {
    uint32_t t[15];
    for (uint32_t i = 0; i < 15; i++) t[i] = 1000 + i;
    write_shard("shards/b.bin", 20240520, 1, 5, t + 5, 5, 2, 0);
    write_shard("shards/a.bin", 20240520, 1, 5, t, 5, 2, 0);
    write_shard("shards/sub/c.bin", 20240520, 1, 5, t + 10, 5, 2, 0);
    write_bytes("shards/.partial.bin", "junk", 4);
    Dataset *ds = open_ok(tmp_path("shards"), BATCHING_PACK, 1, 9);
    if (ds) {
        CHECK(dataset_tokens(ds) == 15 && dataset_items(ds) == 14, "15 tokens, 14 windows");
        int32_t in[14], tg[14];
        dataset_next_batch(ds, 14, in, tg);
        int seen[14] = {0};
        for (int r = 0; r < 14; r++) {
            CHECK(tg[r] == in[r] + 1, "shards concatenated in path order: %d -> %d", in[r],
                  tg[r]);
            if (in[r] >= 1000 && in[r] < 1014) seen[in[r] - 1000]++;
        }
        for (int w = 0; w < 14; w++) CHECK(seen[w] == 1, "window %d once", w);
        dataset_close(ds);
    }
    write_shard("mixed_width/a.bin", 20240520, 1, 5, t, 5, 2, 0);
    write_shard("mixed_width/b.bin", 20240801, 7, 5, t, 5, 4, 0);
    expect_error(tmp_path("mixed_width"), BATCHING_PACK, 2, "different tokenizers");
    write_shard("mixed_kind/a.bin", 20240520, 1, 5, t, 5, 2, 0);
    write_text("mixed_kind/notes.txt", "hello\n");
    expect_error(tmp_path("mixed_kind"), BATCHING_PACK, 2, "mixes");
    write_shard("bad_in_folder/a.bin", 20240520, 1, 5, t, 5, 2, 0);
    const char *bad = write_shard("bad_in_folder/b.bin", 20240520, 1, 6, t, 5, 2, 0);
    Error err = {{0}};
    CHECK(dataset_open(tmp_path("bad_in_folder"), BATCHING_PACK, 2, 1, &err) == NULL &&
          strstr(err.msg, bad) && strstr(err.msg, "truncated"),
          "a bad shard in a folder is named: %s", err.msg);
}

static void test_malformed(void) {
    uint32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    expect_error(write_shard("bad/magic.bin", 20240521, 1, 8, t, 8, 2, 0), BATCHING_PACK, 2,
                 "wrong magic");
    expect_error(write_shard("bad/version.bin", 20240520, 7, 8, t, 8, 2, 0), BATCHING_PACK, 2,
                 "unknown llm.c shard version 7");
    expect_error(write_shard("bad/version7.bin", 20240801, 1, 8, t, 8, 4, 0), BATCHING_PACK, 2,
                 "unknown llm.c shard version 1");
    expect_error(write_shard("bad/truncated.bin", 20240520, 1, 8, t, 7, 2, 0), BATCHING_PACK, 2,
                 "truncated");
    expect_error(write_shard("bad/truncated_odd.bin", 20240801, 7, 8, t, 7, 4, 3),
                 BATCHING_PACK, 2, "truncated");
    expect_error(write_shard("bad/extra.bin", 20240520, 1, 8, t, 8, 2, 1), BATCHING_PACK, 2,
                 "bytes after the 8 tokens");
    expect_error(write_shard("bad/zero.bin", 20240520, 1, 0, t, 0, 2, 0), BATCHING_PACK, 2,
                 "declares 0 tokens");
    uint32_t huge[2] = {1, 0x80000000u};
    expect_error(write_shard("bad/huge.bin", 20240801, 7, 2, huge, 2, 4, 0), BATCHING_PACK, 1,
                 "above the largest id");
    unsigned char header[100] = {0};
    put_le32(header, 20240520);
    expect_error(write_bytes("bad/short.bin", header, sizeof header), BATCHING_PACK, 2,
                 "shorter than the 1024-byte");
    expect_error(write_bytes("bad/empty.bin", "", 0), BATCHING_PACK, 2, "empty file");
    expect_error(write_shard("bad/few.bin", 20240520, 1, 4, t, 4, 2, 0), BATCHING_PACK, 4,
                 "fewer than one window");
    expect_error(write_bytes("bad/empty.txt", "", 0), BATCHING_PAD, 8, "empty file");
    expect_error(tmp_path("bad/no_such_file.txt"), BATCHING_PAD, 8, "No such file");
    mkdir(tmp_path("bad/empty_dir"), 0755);
    expect_error(tmp_path("bad/empty_dir"), BATCHING_PAD, 8, "empty folder");
    write_text("bad/hidden_only/.secret", "text\n");
    expect_error(tmp_path("bad/hidden_only"), BATCHING_PAD, 8, "empty folder");
}

// 40 documents "doc 0" .. "doc 39"; returns the folder.
static const char *write_numbered_docs(void) {
    char text[1024] = "";
    for (int i = 0; i < 40; i++) {
        size_t len = strlen(text);
        snprintf(text + len, sizeof text - len, "doc %d\n\n", i);
    }
    return write_text("numbered.txt", text);
}

static int doc_number(const int32_t *in, const int32_t *tg, int T) {
    int k = -1;
    sscanf(row_text(in, tg, T), "doc %d", &k);
    return k;
}

static void test_order(void) {
    enum { T = 12, B = 7, N = 40, EPOCHS = 3, BATCHES = (EPOCHS * N + B - 1) / B };
    const char *p = write_numbered_docs();
    Dataset *a = open_ok(p, BATCHING_PAD, T, 42), *b = open_ok(p, BATCHING_PAD, T, 42);
    Dataset *c = open_ok(p, BATCHING_PAD, T, 43);
    if (!a || !b || !c) return;
    CHECK(dataset_items(a) == N, "%d documents", N);
    static int32_t in[BATCHES][B * T], tg[BATCHES][B * T];
    int32_t in2[B * T], tg2[B * T];
    DataCursor cur[BATCHES];
    int same_b = 1, same_c = 1;
    for (int k = 0; k < BATCHES; k++) {
        cur[k] = dataset_get_cursor(a);
        dataset_next_batch(a, B, in[k], tg[k]);
        dataset_next_batch(b, B, in2, tg2);
        same_b &= memcmp(in[k], in2, sizeof in2) == 0 && memcmp(tg[k], tg2, sizeof tg2) == 0;
        dataset_next_batch(c, B, in2, tg2);
        same_c &= memcmp(in[k], in2, sizeof in2) == 0;
    }
    CHECK(same_b, "same seed, same batches");
    CHECK(!same_c, "another seed, another order");

    // Item i of the sequence belongs to epoch i / N: each epoch visits every document once,
    // and the epochs' orders differ.
    int order[EPOCHS][N], count[EPOCHS][N];
    memset(count, 0, sizeof count);
    for (int i = 0; i < EPOCHS * N; i++) {
        int k = doc_number(in[i / B] + (i % B) * T, tg[i / B] + (i % B) * T, T);
        CHECK(k >= 0 && k < N, "row %d is a document: %d", i, k);
        if (k >= 0 && k < N) count[i / N][k]++;
        order[i / N][i % N] = k;
    }
    for (int e = 0; e < EPOCHS; e++)
        for (int k = 0; k < N; k++)
            CHECK(count[e][k] == 1, "epoch %d visits doc %d %d times", e, k, count[e][k]);
    CHECK(memcmp(order[0], order[1], sizeof order[0]) != 0, "epoch 1 reshuffled");
    CHECK(cur[0].epoch == 0 && cur[0].index == 0, "starts at (0, 0)");
    CHECK(cur[6].epoch == 1 && cur[6].index == 2, "batch 6 starts at (1, 2): 6*7 = 42 = 40+2");

    // Restoring any saved cursor, into the same or a fresh dataset, replays the sequence.
    const int points[] = {0, 1, 5, 6, 11, 12, BATCHES - 1, 3};
    for (size_t pi = 0; pi < sizeof points / sizeof points[0]; pi++) {
        int k0 = points[pi];
        Dataset *d = pi % 2 ? a : open_ok(p, BATCHING_PAD, T, 42);
        if (!d) continue;
        dataset_set_cursor(d, cur[k0]);
        DataCursor got = dataset_get_cursor(d);
        CHECK(got.epoch == cur[k0].epoch && got.index == cur[k0].index, "get after set");
        int same = 1;
        for (int k = k0; k < BATCHES; k++) {
            dataset_next_batch(d, B, in2, tg2);
            same &= memcmp(in[k], in2, sizeof in2) == 0 && memcmp(tg[k], tg2, sizeof tg2) == 0;
        }
        CHECK(same, "resume at batch %d (epoch %llu, index %llu) replays the rest", k0,
              (unsigned long long)cur[k0].epoch, (unsigned long long)cur[k0].index);
        if (d != a) dataset_close(d);
    }

    // After exactly one epoch the cursor reads (1, 0), and an index past the epoch carries.
    dataset_set_cursor(a, (DataCursor){0, 0});
    for (int i = 0; i < N; i++) dataset_next_batch(a, 1, in2, tg2);
    DataCursor e1 = dataset_get_cursor(a);
    CHECK(e1.epoch == 1 && e1.index == 0, "after one epoch: (%llu, %llu)",
          (unsigned long long)e1.epoch, (unsigned long long)e1.index);
    dataset_set_cursor(a, (DataCursor){0, N + 2});
    dataset_next_batch(a, B, in2, tg2);
    CHECK(memcmp(in[6], in2, sizeof in2) == 0, "(0, N+2) is (1, 2)");
    dataset_close(a);
    dataset_close(b);
    dataset_close(c);
}

static void test_fixture_corpus(void) {
    const char *dir = PPTRAIN_SOURCE_DIR "/tests/fixtures/text";
    Dataset *ds = open_ok(dir, BATCHING_PAD, 256, 1);
    if (ds) {
        CHECK(dataset_items(ds) >= 60, "fixture paragraphs: %llu",
              (unsigned long long)dataset_items(ds));
        CHECK(dataset_tokens(ds) >= 20000, "fixture tokens: %llu",
              (unsigned long long)dataset_tokens(ds));
        dataset_close(ds);
    }
    ds = open_ok(dir, BATCHING_PACK, 64, 1);
    if (ds) {
        CHECK(dataset_max_token(ds) == TOKEN_EOS, "pack max %d", dataset_max_token(ds));
        dataset_close(ds);
    }
}

int main(void) {
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    test_tokenizer();
    test_split();
    test_pad_rows();
    test_pack_windows();
    test_folder_order();
    test_fortune_folder();
    test_shards();
    test_shard_folder();
    test_val_shards();
    test_malformed();
    test_order();
    test_fixture_corpus();
    nftw(tmp_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return test_finish();
}
