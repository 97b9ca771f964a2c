// console/cmd/cmd_tokenize.c: `pptrain tokenize`: text files or folders -> llm.c token shards
// with a Hugging Face tokenizer (engine/data/tokenizer_hf.h), written as OUT/<name>_train_NNNNNN.bin
// and OUT/<name>_val_NNNNNN.bin plus OUT/tokenize.json (the tokenizer's sha256, which
// `pptrain train --tokenizer` checks, and the shards' counts).
//
// Nothing half-written: every shard goes through the atomic writer (storage/atomic_file) into
// the hidden OUT/.tokenize-partial/ (training never reads hidden entries), and is renamed into
// OUT only once all are written, tokenize.json last. So an interrupted run leaves OUT without
// a partial set of shards that training would read as the whole corpus, and a folder with a
// tokenize.json holds exactly the shards it lists. A rerun removes what an earlier run of the
// same --name left (finished or not) before writing, so interrupting and rerunning is safe.
#include "console/cmd/cmd_tokenize.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "console/cli.h"
#include "console/cli_options.h"
#include "engine/data/data.h"
#include "engine/data/tokenizer_hf.h"
#include "storage/atomic_file.h"

enum { SHARD_HEADER_INTS = 256, MAGIC_U16 = 20240520, MAGIC_U32 = 20240801 };
#define STAGING ".tokenize-partial"

typedef struct {
    const char *out, *name, *tokenizer;
    double val_fraction;      // share of documents, spread evenly (doc k is val when
    uint64_t val_docs;        //   floor((k+1)f) > floor(kf)), or the first val_docs documents
    uint64_t shard_tokens;    // tokens per shard at most
    int threads;
    bool have_frac, have_docs, help;
} Options;

typedef struct {
    const char *split;        // "train" or "val"
    void *buf;                // (n) tokens of the shard being filled, width bytes each
    uint64_t n, total;
    int shards;
} Split;

typedef struct {
    const Options *o;
    int width;                // 2 (magic 20240520 v1) or 4 (magic 20240801 v7)
    Split train, val;
    cJSON *files;             // the shards written: [{name, tokens, sha256}]
    double t0, last_draw;
    int tty;
} Writer;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

CLI_TEXT_SETTER(set_tokenizer, Options, tokenizer)
CLI_TEXT_SETTER(set_out, Options, out)
CLI_TEXT_SETTER(set_name, Options, name)
static int set_val_fraction(void *opts, const char *f, const char *v, Error *e) {
    Options *o = opts;
    o->have_frac = true;
    return cli_parse_float(f, v, 0, 1, &o->val_fraction, e);
}
static int set_val_docs(void *opts, const char *f, const char *v, Error *e) {
    Options *o = opts;
    o->have_docs = true;
    return cli_parse_u64(f, v, &o->val_docs, e);
}
static int set_shard_tokens(void *opts, const char *f, const char *v, Error *e) {
    Options *o = opts;
    if (cli_parse_u64(f, v, &o->shard_tokens, e)) return -1;
    if (o->shard_tokens < 1 || o->shard_tokens > INT32_MAX) {
        error_set(e, "--shard-tokens: %s is not in 1..%d (the header counts in int32)", v, INT32_MAX);
        return -1;
    }
    return 0;
}
static int set_threads(void *opts, const char *f, const char *v, Error *e) {
    long l;
    if (cli_parse_int(f, v, 1, 1024, &l, e)) return -1;
    ((Options *)opts)->threads = (int)l;
    return 0;
}
static int set_help(void *o, const char *f, const char *v, Error *e) {
    (void)f, (void)v, (void)e;
    ((Options *)o)->help = true;
    return 0;
}

static const CliOption OPTIONS[] = {
    {"--tokenizer", "FILE|DIR", "tokenizer.json, or a model folder holding one", set_tokenizer, 0},
    {"--out", "DIR", "the shard folder (created; a rerun replaces its shards)", set_out, 0},
    {"--name", "NAME", "shard name prefix (tokens): NAME_train_000000.bin", set_name, 0},
    {"--val-fraction", "F", "this share of documents (spread evenly) to NAME_val_*.bin", set_val_fraction, 0},
    {"--val-docs", "N", "the first N documents to NAME_val_*.bin", set_val_docs, 0},
    {"--shard-tokens", "N", "tokens per shard at most (33554432)", set_shard_tokens, 0},
    {"--threads", "N", "encoding threads (all cores)", set_threads, 0},
    {"--help", NULL, "this help", set_help, 0},
};
#define N_OPTIONS ((int)(sizeof OPTIONS / sizeof OPTIONS[0]))

static void usage(FILE *out) {
    fprintf(out, "usage: pptrain tokenize --tokenizer FILE|DIR --out DIR [options] TEXT...\n\n"
                 "  Encodes every document of the TEXT files or folders (blank lines or fortune \"%%\" lines\n"
                 "  separate documents, as in training on text) with a Hugging Face tokenizer.json: its\n"
                 "  template's BOS, the document, its EOS. Writes llm.c shards: uint16 tokens (magic\n"
                 "  20240520 v1) when the vocabulary fits, else uint32 (magic 20240801 v7), and\n"
                 "  DIR/tokenize.json with the tokenizer's sha256. Train on them with --data DIR.\n\n");
    cli_options_usage(out, OPTIONS, N_OPTIONS, 21, NULL, NULL);
}

// The text files and folders named on the command line, in order.
typedef struct {
    const char **list;  // (argc)
    int n;
} Inputs;

static int take_input(void *ctx, const char *arg, Error *err) {
    (void)err;
    Inputs *in = ctx;
    in->list[in->n++] = arg;
    return 0;
}

static int parse(int argc, char **argv, Options *o, const char ***inputs, int *n_in, Error *err) {
    *o = (Options){.name = "tokens", .shard_tokens = 1u << 25, .threads = omp_get_num_procs()};
    *inputs = xcalloc((size_t)argc, sizeof **inputs);
    *n_in = 0;
    Inputs in = {*inputs, 0};
    const CliCommand command = {"tokenize", OPTIONS, N_OPTIONS, true, "--", take_input, NULL};
    const int rc = cli_options_parse(&command, argc, argv, 2, o, &in, err);
    *n_in = in.n;
    if (rc) return -1;
    if (o->help) return 0;
    if (!o->tokenizer || !o->out || !*n_in) {
        error_set(err, "tokenize needs --tokenizer, --out and at least one text file or folder "
                  "(see pptrain tokenize --help)");
        return -1;
    }
    if (o->have_frac && o->have_docs) {
        error_set(err, "tokenize: --val-fraction and --val-docs are alternatives; give one");
        return -1;
    }
    if (!*o->name || strchr(o->name, '/')) {
        error_set(err, "--name: '%s' must be a non-empty file name prefix without '/'", o->name);
        return -1;
    }
    return 0;
}

// Writes the split's buffered tokens as its next shard: a 1024-byte header (int32 magic,
// version, count, then zeros) and the tokens, little-endian as llm.c reads them.
static int flush_shard(Writer *w, Split *s, Error *err) {
    if (!s->n) return 0;
    char name[512], path[4096];
    snprintf(name, sizeof name, "%s_%s_%06d.bin", w->o->name, s->split, s->shards);
    snprintf(path, sizeof path, "%s/" STAGING "/%s", w->o->out, name);
    int32_t header[SHARD_HEADER_INTS] = {0};
    header[0] = w->width == 2 ? MAGIC_U16 : MAGIC_U32;
    header[1] = w->width == 2 ? 1 : 7;
    header[2] = (int32_t)s->n;
    char sha[65];
    AtomicFile *af = atomic_file_open(path, err);
    if (!af) return -1;
    // A failed append sticks: the commit reports it and removes the temporary file.
    atomic_file_append(af, header, sizeof header, err);
    atomic_file_append(af, s->buf, s->n * (size_t)w->width, err);
    if (atomic_file_commit_hashed(af, sha, NULL, err)) return -1;
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "file", name);
    cJSON_AddNumberToObject(f, "tokens", (double)s->n);
    cJSON_AddStringToObject(f, "sha256", sha);
    cJSON_AddItemToArray(w->files, f);
    s->shards++;
    s->n = 0;
    return 0;
}

static int is_val(const Options *o, uint64_t doc) {
    if (o->val_docs) return doc < o->val_docs;
    return (uint64_t)((double)(doc + 1) * o->val_fraction) > (uint64_t)((double)doc * o->val_fraction);
}

static int emit(void *ctx, uint64_t doc, const int32_t *ids, size_t n, Error *err) {
    Writer *w = ctx;
    Split *s = is_val(w->o, doc) ? &w->val : &w->train;
    for (size_t i = 0; i < n; i++) {
        if (s->n == w->o->shard_tokens && flush_shard(w, s, err)) return -1;
        if (w->width == 2) ((uint16_t *)s->buf)[s->n++] = (uint16_t)ids[i];   // x86/ARM: little-endian
        else ((uint32_t *)s->buf)[s->n++] = (uint32_t)ids[i];
    }
    s->total += n;
    return 0;
}

// The progress line on a terminal, at most 10 times a second: MB read, MB/s, tokens/s.
static void progress(void *ctx, const TokenizeStats *st) {
    Writer *w = ctx;
    double t = now_s(), dt = t - w->t0;
    if (!w->tty || (t - w->last_draw < 0.1 && st->bytes_done < st->bytes_total)) return;
    w->last_draw = t;
    double frac = st->bytes_total ? (double)st->bytes_done / (double)st->bytes_total : 1;
    char bar[31];
    int filled = (int)(frac * 30);
    for (int i = 0; i < 30; i++) bar[i] = i < filled ? '#' : '.';
    bar[30] = '\0';
    fprintf(stderr, "\rtokenize [%s] %5.1f%%  %.1f/%.1f MB  %.1f MB/s  %.2f M tokens/s ", bar, 100 * frac,
            st->bytes_done / 1e6, st->bytes_total / 1e6, dt > 0 ? st->bytes_done / 1e6 / dt : 0,
            dt > 0 ? st->tokens / 1e6 / dt : 0);
    fflush(stderr);
}

// NAME_train_NNNNNN.bin or NAME_val_NNNNNN.bin: a shard this command writes under --name NAME.
static int ours(const char *file, const char *name) {
    size_t ln = strlen(name);
    if (strncmp(file, name, ln) != 0 || file[ln] != '_') return 0;
    const char *rest = file + ln + 1;
    rest += strncmp(rest, "train_", 6) == 0 ? 6 : strncmp(rest, "val_", 4) == 0 ? 4 : 0;
    if (rest == file + ln + 1) return 0;
    for (int i = 0; i < 6; i++)
        if (rest[i] < '0' || rest[i] > '9') return 0;
    return strcmp(rest + 6, ".bin") == 0;
}

// Removes dir's shards of this --name and stale temporaries.
static void clear_dir(const char *dir, const char *name) {
    DIR *d = opendir(dir);
    if (!d) return;
    char path[4096];
    for (struct dirent *e; (e = readdir(d));)
        if (ours(e->d_name, name)) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    atomic_file_clean_stale(dir);
}

// Before writing: the manifest goes first (the folder is "incomplete" from here until the new
// one is written), then every shard an earlier run of this --name left, staged or published.
static int clear_previous(const Options *o, Error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/" STAGING, o->out);
    if (file_make_dirs(path, err)) return -1;
    snprintf(path, sizeof path, "%s/tokenize.json", o->out);
    if (unlink(path) == 0 && fsync_parent_dir(path, err)) return -1;
    clear_dir(o->out, o->name);
    snprintf(path, sizeof path, "%s/" STAGING, o->out);
    clear_dir(path, o->name);
    return 0;
}

// Every staged shard renamed into OUT, the folder synced, the staging folder removed.
static int publish(const Writer *w, Error *err) {
    char from[4096], to[4096];
    snprintf(to, sizeof to, "%s/tokenize.json", w->o->out);   // any name in OUT, for the fsync
    const cJSON *f;
    cJSON_ArrayForEach(f, w->files) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "file"));
        snprintf(from, sizeof from, "%s/" STAGING "/%s", w->o->out, name);
        if (atomic_file_move_into(from, w->o->out, err)) return -1;
    }
    snprintf(from, sizeof from, "%s/" STAGING, w->o->out);
    rmdir(from);
    return fsync_parent_dir(to, err);
}

static int write_manifest(Writer *w, const HfTokenizer *t, const char *sha, const TokenizeStats *st,
                          Error *err) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "tokenizer", hf_tokenizer_name(t));
    cJSON_AddStringToObject(m, "tokenizer_sha256", sha);
    cJSON_AddNumberToObject(m, "vocab", hf_tokenizer_vocab(t));
    cJSON_AddNumberToObject(m, "bytes_per_token", w->width);
    cJSON_AddNumberToObject(m, "documents", (double)st->docs);
    cJSON_AddNumberToObject(m, "train_tokens", (double)w->train.total);
    cJSON_AddNumberToObject(m, "val_tokens", (double)w->val.total);
    cJSON_AddItemToObject(m, "shards", w->files);
    w->files = NULL;
    char *text = cJSON_Print(m);
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenize.json", w->o->out);
    int rc = atomic_write_file(path, text, strlen(text), err);
    free(text);
    cJSON_Delete(m);
    return rc;
}

static int run(const Options *o, const char **inputs, int n_in, const HfTokenizer *t, const char *sha,
               Error *err) {
    Writer w = {.o = o, .width = hf_tokenizer_vocab(t) > 65536 ? 4 : 2, .train = {.split = "train"},
                .val = {.split = "val"}, .files = cJSON_CreateArray(), .t0 = now_s(), .tty = isatty(2)};
    w.train.buf = xmalloc(o->shard_tokens * (size_t)w.width);
    w.val.buf = xmalloc(o->shard_tokens * (size_t)w.width);
    TextEncoding te;
    text_encoding_init(&te, t, o->threads);
    TokenizeSink sink = {&w, emit, progress};
    TokenizeStats st;
    int rc = clear_previous(o, err) || data_tokenize_paths(inputs, n_in, &te, &sink, &st, err) ||
             flush_shard(&w, &w.train, err) || flush_shard(&w, &w.val, err) || publish(&w, err) ||
             write_manifest(&w, t, sha, &st, err) ? -1 : 0;
    if (w.tty) fputc('\n', stderr);
    if (rc) {   // what this run staged goes; folders it made and left empty too
        char staging[4096];
        snprintf(staging, sizeof staging, "%s/" STAGING, o->out);
        clear_dir(staging, o->name);
        rmdir(staging);
        rmdir(o->out);   // fails harmlessly when it holds anything else
    }
    double dt = now_s() - w.t0;
    if (rc == 0)
        printf("tokenized %llu files, %.1f MB, %llu documents in %.2f s (%.1f MB/s, %.2f M tokens/s, %d threads): "
               "%llu train tokens in %d shards, %llu val tokens in %d shards -> %s\n",
               (unsigned long long)st.files, st.bytes_total / 1e6, (unsigned long long)st.docs, dt,
               st.bytes_total / 1e6 / dt, st.tokens / 1e6 / dt, o->threads, (unsigned long long)w.train.total,
               w.train.shards, (unsigned long long)w.val.total, w.val.shards, o->out);
    text_encoding_free(&te);
    cJSON_Delete(w.files);
    free(w.train.buf);
    free(w.val.buf);
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    for (int i = 2; i < argc; i++)   // help wins over any other word, as before the parse
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
    Options o;
    const char **inputs;
    int n_in;
    Error err = {{0}};
    if (parse(argc, argv, &o, &inputs, &n_in, &err)) {
        free(inputs);
        return cli_fail(&err);
    }
    HfTokenizer *t = hf_tokenizer_load(o.tokenizer, &err);
    char sha[65];
    int rc = !t || file_sha256(hf_tokenizer_name(t), sha, NULL, &err) || run(&o, inputs, n_in, t, sha, &err) ? -1 : 0;
    hf_tokenizer_free(t);
    free(inputs);
    return rc ? cli_fail(&err) : 0;
}
