// console/cmd/cmd_tokenize.c: `pptrain tokenize`: text files or folders -> llm.c token shards
// with a Hugging Face tokenizer (engine/data/tokenizer_hf.h), written as OUT/<name>_train_NNNNNN.bin
// and OUT/<name>_val_NNNNNN.bin plus OUT/tokenize.json (the tokenizer's sha256, which
// `pptrain train --tokenizer` checks, and the shards, which training reads and nothing else:
// engine/data/data.h).
//
// Nothing half-written: every shard goes through the atomic writer (storage/atomic_file) into
// the hidden OUT/.tokenize-partial/ (training never reads hidden entries). Until all are written
// the folder is as an earlier run left it, and a run that fails leaves it so. Then the shards
// are renamed into OUT and tokenize.json is replaced, last: the manifest is the commit. Only
// then go the shards the old manifest listed and the new one does not (and any other shard of
// this --name): a rerun, under any --name, leaves only its own shards. When a new shard takes
// the name of one the old manifest lists (a rerun under the same --name), the old manifest goes
// before the renames, and the staging folder stays until the new one is written: a folder
// holding it and no manifest is refused by training as a tokenize that has not finished.
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
    snprintf(path, sizeof path, "%s/" DATA_STAGING "/%s", w->o->out, name);
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

// NAME_train_NNNNNN.bin or NAME_val_NNNNNN.bin: a shard this command writes under --name NAME
// (name NULL: under any name).
static bool shard_file(const char *file, const char *name) {
    const size_t n = strlen(file);
    if (n < 11 || strcmp(file + n - 4, ".bin") != 0 || file[n - 11] != '_') return false;
    for (size_t i = n - 10; i < n - 4; i++)
        if (file[i] < '0' || file[i] > '9') return false;
    const size_t split = n - 11;   // the '_' before the digits: "_train" or "_val" ends there
    size_t prefix;
    if (split > 6 && strncmp(file + split - 6, "_train", 6) == 0) prefix = split - 6;
    else if (split > 4 && strncmp(file + split - 4, "_val", 4) == 0) prefix = split - 4;
    else return false;
    return !name || (strlen(name) == prefix && strncmp(file, name, prefix) == 0);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Whether name is in the sorted list (n).
static bool in_list(const char *const *list, size_t n, const char *name) {
    return n && bsearch(&name, list, n, sizeof *list, cmp_name) != NULL;
}

// The staging folder emptied of shards (of any --name: it is this command's own) and of the
// temporaries of writers that are gone; OUT of those temporaries too.
static void clear_staging(const char *out) {
    char staging[4096], path[8192];
    snprintf(staging, sizeof staging, "%s/" DATA_STAGING, out);
    DIR *d = opendir(staging);
    for (struct dirent *e; d && (e = readdir(d));)
        if (shard_file(e->d_name, NULL)) {
            snprintf(path, sizeof path, "%s/%s", staging, e->d_name);
            unlink(path);
        }
    if (d) closedir(d);
    atomic_file_clean_stale(staging);
    atomic_file_clean_stale(out);
}

// Every staged shard renamed into OUT (*moved counts them), the folder synced.
static int publish(const Writer *w, int *moved, Error *err) {
    char from[4096], to[4096];
    snprintf(to, sizeof to, "%s/" DATA_MANIFEST, w->o->out);   // any name in OUT, for the fsync
    const cJSON *f;
    cJSON_ArrayForEach(f, w->files) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "file"));
        snprintf(from, sizeof from, "%s/" DATA_STAGING "/%s", w->o->out, name);
        if (atomic_file_move_into(from, w->o->out, err)) return -1;
        ++*moved;
    }
    return fsync_parent_dir(to, err);
}

static int write_manifest(const Writer *w, const HfTokenizer *t, const char *sha, const TokenizeStats *st,
                          Error *err) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "tokenizer", hf_tokenizer_name(t));
    cJSON_AddStringToObject(m, "tokenizer_sha256", sha);
    cJSON_AddNumberToObject(m, "vocab", hf_tokenizer_vocab(t));
    cJSON_AddNumberToObject(m, "bytes_per_token", w->width);
    cJSON_AddNumberToObject(m, "documents", (double)st->docs);
    cJSON_AddNumberToObject(m, "train_tokens", (double)w->train.total);
    cJSON_AddNumberToObject(m, "val_tokens", (double)w->val.total);
    cJSON_AddItemToObject(m, "shards", cJSON_Duplicate(w->files, true));
    char *text = cJSON_Print(m);
    char path[4096];
    snprintf(path, sizeof path, "%s/" DATA_MANIFEST, w->o->out);
    int rc = atomic_write_file(path, text, strlen(text), err);
    free(text);
    cJSON_Delete(m);
    return rc;
}

// The names of this run's shards, sorted, *n of them (free the array; the names are w->files').
static const char **new_names(const Writer *w, size_t *n) {
    const int count = cJSON_GetArraySize(w->files);
    const char **names = xcalloc(count > 0 ? (size_t)count : 1, sizeof *names);
    *n = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, w->files) names[(*n)++] = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "file"));
    qsort(names, *n, sizeof *names, cmp_name);
    return names;
}

// How far the commit got, for what a failure undoes.
typedef struct {
    int moved;     // shards renamed into OUT
    bool torn;     // the old manifest is gone and the new one not yet written
} Commit;

// The new shards into OUT, then the new manifest over the old one (the commit); the old
// manifest goes first only when a new shard would replace a shard it lists.
static int commit(const Writer *w, const ShardNames *old, const HfTokenizer *t, const char *sha,
                  const TokenizeStats *st, Commit *c, Error *err) {
    size_t n;
    const char **names = new_names(w, &n);
    bool clash = false;
    for (size_t i = 0; i < old->n && !clash; i++) clash = in_list(names, n, old->name[i]);
    free(names);
    char path[4096];
    snprintf(path, sizeof path, "%s/" DATA_MANIFEST, w->o->out);
    if (clash) {
        if (unlink(path) != 0 && errno != ENOENT) {
            error_set(err, "%s: cannot remove it to replace its shards: %s", path, strerror(errno));
            return -1;
        }
        c->torn = true;
        if (fsync_parent_dir(path, err)) return -1;
    }
    if (publish(w, &c->moved, err) || write_manifest(w, t, sha, st, err)) return -1;
    c->torn = false;
    return 0;
}

// After the commit: the shards the old manifest listed and any other shard of this --name, when
// the new manifest does not list them. Nothing else in OUT is touched. A file that cannot be
// removed stays (training reads the manifest's shards alone).
static void remove_replaced(const Writer *w, const ShardNames *old) {
    char staging[4096], path[8192];
    snprintf(staging, sizeof staging, "%s/" DATA_STAGING, w->o->out);
    rmdir(staging);
    size_t n;
    const char **names = new_names(w, &n);
    for (size_t i = 0; i < old->n; i++)
        if (!in_list(names, n, old->name[i])) {
            snprintf(path, sizeof path, "%s/%s", w->o->out, old->name[i]);
            unlink(path);
        }
    DIR *d = opendir(w->o->out);
    for (struct dirent *e; d && (e = readdir(d));)
        if (shard_file(e->d_name, w->o->name) && !in_list(names, n, e->d_name)) {
            snprintf(path, sizeof path, "%s/%s", w->o->out, e->d_name);
            unlink(path);
        }
    if (d) closedir(d);
    free(names);
    Error ignored;   // not durable yet: after a crash an unlisted old shard is back, and still unread
    snprintf(path, sizeof path, "%s/" DATA_MANIFEST, w->o->out);
    fsync_parent_dir(path, &ignored);
}

// A run that failed: what it staged goes, and the staging folder and OUT when it made them
// and left them empty. Before the commit OUT is as the earlier run left it; shards renamed
// into OUT beside an old manifest that still stands are removed again. A torn folder (its old
// manifest gone, no new one) keeps the staging folder, so training refuses it until a rerun.
static void undo(const Writer *w, const Commit *c) {
    char staging[4096], path[8192];
    snprintf(staging, sizeof staging, "%s/" DATA_STAGING, w->o->out);
    clear_staging(w->o->out);
    if (c->torn) return;
    int k = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, w->files) {
        if (k++ == c->moved) break;
        snprintf(path, sizeof path, "%s/%s", w->o->out,
                 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "file")));
        unlink(path);
    }
    rmdir(staging);
    rmdir(w->o->out);   // fails harmlessly when it holds anything else
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
    // The shards the folder's manifest lists now; an unreadable one lists none (this run replaces it).
    ShardNames old;
    Error unread;
    if (data_manifest_shards(o->out, &old, &unread) < 0) old = (ShardNames){0};
    Commit c = {0};
    char staging[4096];
    snprintf(staging, sizeof staging, "%s/" DATA_STAGING, o->out);
    int rc = file_make_dirs(staging, err);
    if (rc == 0) {
        clear_staging(o->out);
        rc = data_tokenize_paths(inputs, n_in, &te, &sink, &st, err) || flush_shard(&w, &w.train, err) ||
                     flush_shard(&w, &w.val, err) || commit(&w, &old, t, sha, &st, &c, err)
                 ? -1
                 : 0;
    }
    if (w.tty) fputc('\n', stderr);
    if (rc) undo(&w, &c);
    else remove_replaced(&w, &old);
    data_free_shard_names(&old);
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
    const int refused = cli_refuse_mpirun_copies("tokenize", NULL);
    if (refused) {
        free(inputs);
        return refused;
    }
    HfTokenizer *t = hf_tokenizer_load(o.tokenizer, &err);
    char sha[65];
    int rc = !t || file_sha256(hf_tokenizer_name(t), sha, NULL, &err) || run(&o, inputs, n_in, t, sha, &err) ? -1 : 0;
    hf_tokenizer_free(t);
    free(inputs);
    return rc ? cli_fail(&err) : 0;
}
