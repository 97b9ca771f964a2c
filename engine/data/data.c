// Batches and epoch order over a token stream (engine/data/data_source.h reads the sources).
//
// Items: in pad mode the documents, in pack mode the windows stream[w*T .. w*T+T] for
// w = 0 .. (n-1)/T - 1 (stride T, each window T+1 tokens; a tail shorter than a window is
// never read). dataset_tokens counts the whole stream, BOS and EOS of text included.
//
// Order: epoch e visits the items in a Fisher-Yates shuffle driven by splitmix64, started
// from state = mix(mix(seed) ^ e), where mix is the splitmix64 finalizer (engine/model/init.h):
//   for i = items-1 down to 1: j = below(i+1); swap(perm[i], perm[j])
// below(m) draws r = next() until r >= 2^64 mod m and returns r % m (unbiased). The result
// depends on nothing but (seed, epoch, items): the same on every platform and compiler.
#include "engine/data/data.h"

#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/data_source.h"
#include "engine/data/tokenizer.h"

struct Dataset {
    TokenStream s;
    Batching mode;
    int T;                // seq_len
    uint64_t seed;
    uint64_t items;       // documents (pad) or windows (pack) per epoch
    uint64_t *perm;       // (items) order of the epoch perm_epoch
    uint64_t perm_epoch;
    DataCursor cursor;
    int32_t max_token;
    size_t held_out;      // _val_ shards a training folder set aside (dataset_held_out)
};

static uint64_t splitmix64_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Uniform in [0, m), m >= 1.
static uint64_t below(uint64_t *state, uint64_t m) {
    uint64_t floor = (0 - m) % m;   // 2^64 mod m: draws under it would favour small results
    uint64_t r;
    do r = splitmix64_next(state);
    while (r < floor);
    return r % m;
}

static void make_permutation(Dataset *ds, uint64_t epoch) {
    uint64_t state = mix64(mix64(ds->seed) ^ epoch);
    for (uint64_t i = 0; i < ds->items; i++) ds->perm[i] = i;
    for (uint64_t i = ds->items - 1; i > 0; i--) {
        uint64_t j = below(&state, i + 1), t = ds->perm[i];
        ds->perm[i] = ds->perm[j];
        ds->perm[j] = t;
    }
    ds->perm_epoch = epoch;
}

// llm.c writes a folder's validation shards beside its training shards, "_val_" in their
// names (fineweb_val_000000.bin). A folder's training split leaves them out, when it has
// others; its validation split is them alone. *held_out: the shards a training split left.
static bool is_val_shard(const char *path) {
    const char *name = strrchr(path, '/');
    return data_has_suffix(path, ".bin") && strstr(name ? name + 1 : path, "_val_") != NULL;
}

static int split_files(const char *path, FileList *files, DataSplit split, size_t *held_out, Error *err) {
    *held_out = 0;
    if (files->lone || split == DATA_ALL) return 0;
    size_t val = 0;
    for (size_t i = 0; i < files->n; i++) val += is_val_shard(files->path[i]);
    if (split == DATA_TRAIN && val == 0) return 0;   // nothing to set aside
    if (split == DATA_TRAIN && val == files->n) {   // training on them would leave nothing to validate on
        error_set(err, "%s: only llm.c validation shards (names with _val_) in this folder; train on a folder "
                       "with training shards (--data) and name this one with --val-data", path);
        return -1;
    }
    if (split == DATA_VAL && val == 0) {
        error_set(err, "%s: no llm.c validation shards (names with _val_) in this folder", path);
        return -1;
    }
    size_t kept = 0;
    for (size_t i = 0; i < files->n; i++) {
        if (is_val_shard(files->path[i]) == (split == DATA_VAL)) files->path[kept++] = files->path[i];
        else free(files->path[i]);
    }
    *held_out = split == DATA_TRAIN ? val : 0;
    files->n = kept;
    return 0;
}

size_t data_held_out_count(const char *path) {
    FileList files;
    Error why;
    size_t held_out = 0;
    if (data_list_source(path, &files, &why)) return 0;
    if (split_files(path, &files, DATA_TRAIN, &held_out, &why)) held_out = 0;
    data_free_files(&files);
    return held_out;
}

static int load(const char *path, Batching mode, DataSplit split, const TextEncoding *te, TokenStream *s,
                size_t *held_out, Error *err) {
    FileList files;
    if (data_list_source(path, &files, err) != 0) return -1;
    if (split_files(path, &files, split, held_out, err)) {
        data_free_files(&files);
        return -1;
    }
    size_t shards = 0, first_text = 0, first_shard = 0;
    for (size_t i = files.n; i-- > 0;) {
        if (data_has_suffix(files.path[i], ".bin")) shards++, first_shard = i;
        else first_text = i;
    }
    int rc = -1;
    // A .bin that is no llm.c shard is the real problem: say so before advice about shards.
    const bool refused = shards && (shards < files.n || mode == BATCHING_PAD);
    for (size_t i = 0; refused && i < files.n; i++)
        if (data_has_suffix(files.path[i], ".bin") && data_check_shard(files.path[i], err) != 0) {
            data_free_files(&files);
            return -1;
        }
    if (shards && shards < files.n)
        error_set(err, "%s: folder mixes llm.c shards (%s) and text files (%s); point at one "
                  "kind", path, files.path[first_shard], files.path[first_text]);
    else if (shards && mode == BATCHING_PAD)
        error_set(err, "%s: llm.c token shards have no document boundaries, so they cannot be "
                  "padded one document per row; use --batching pack", path);
    else if (shards)
        rc = data_load_shards(&files, s, err);
    else
        rc = data_load_text(path, &files, te, s, err);
    data_free_files(&files);
    return rc;
}

// pad mode: PAD shows in the inputs when some row holds fewer than T tokens of its document.
static int32_t pad_max_token(const TokenStream *s, int T) {
    for (uint64_t d = 0; d < s->n_docs; d++)
        if (s->doc_start[d + 1] - s->doc_start[d] < (uint64_t)T)
            return s->pad > s->max_token ? s->pad : s->max_token;
    return s->max_token;
}

Dataset *dataset_open(const char *path, Batching mode, int seq_len, uint64_t seed, Error *err) {
    return dataset_open_split(path, mode, seq_len, seed, DATA_TRAIN, err);
}

Dataset *dataset_open_split(const char *path, Batching mode, int seq_len, uint64_t seed, DataSplit split,
                            Error *err) {
    return dataset_open_text(path, mode, seq_len, seed, split, NULL, err);
}

Dataset *dataset_open_text(const char *path, Batching mode, int seq_len, uint64_t seed, DataSplit split,
                           const TextEncoding *te, Error *err) {
    if (seq_len < 1) {
        error_set(err, "%s: sequence length %d must be at least 1", path, seq_len);
        return NULL;
    }
    TokenStream s;
    size_t held_out = 0;
    if (load(path, mode, split, te, &s, &held_out, err) != 0) return NULL;
    uint64_t items = mode == BATCHING_PAD ? s.n_docs : (s.n - 1) / (uint64_t)seq_len;
    if (items == 0) {
        error_set(err, "%s: %llu tokens, fewer than one window of %d (seq_len + 1)", path,
                  (unsigned long long)s.n, seq_len + 1);
        data_free_stream(&s);
        return NULL;
    }
    Dataset *ds = xcalloc(1, sizeof *ds);
    ds->s = s;
    ds->mode = mode;
    ds->T = seq_len;
    ds->seed = seed;
    ds->items = items;
    ds->perm = xmalloc((size_t)items * sizeof *ds->perm);
    ds->max_token = mode == BATCHING_PAD ? pad_max_token(&s, seq_len) : s.max_token;
    ds->held_out = held_out;
    make_permutation(ds, 0);
    return ds;
}

size_t dataset_held_out(const Dataset *ds) { return ds->held_out; }

void dataset_close(Dataset *ds) {
    if (!ds) return;
    data_free_stream(&ds->s);
    free(ds->perm);
    free(ds);
}

int32_t dataset_max_token(const Dataset *ds) { return ds->max_token; }
uint64_t dataset_items(const Dataset *ds) { return ds->items; }
uint64_t dataset_tokens(const Dataset *ds) { return ds->s.n; }
const char *dataset_kind(const Dataset *ds) { return ds->s.kind; }

static int32_t token_at(const TokenStream *s, uint64_t i) {
    return s->width == 2 ? ((const uint16_t *)s->tok)[i] : (int32_t)((const uint32_t *)s->tok)[i];
}

// row = s[start .. start+len) then PADs, T+1 tokens -> inputs = row[0..T), targets =
// row[1..T] with -1 where the row is padded. Padding is told by position, not by value:
// in a shard, 258 is an ordinary token.
static void fill_row(const TokenStream *s, uint64_t start, uint64_t len, int T,
                     int32_t *inputs, int32_t *targets) {
    for (int j = 0; j < T; j++) {
        uint64_t k = (uint64_t)j;
        inputs[j] = k < len ? token_at(s, start + k) : s->pad;
        targets[j] = k + 1 < len ? token_at(s, start + k + 1) : -1;
    }
}

void dataset_next_batch(Dataset *ds, int B, int32_t *inputs, int32_t *targets) {
    assert(B >= 1);
    const uint64_t T = (uint64_t)ds->T;
    for (int b = 0; b < B; b++) {
        if (ds->cursor.index == ds->items) {
            ds->cursor.epoch++;
            ds->cursor.index = 0;
        }
        if (ds->perm_epoch != ds->cursor.epoch) make_permutation(ds, ds->cursor.epoch);
        uint64_t item = ds->perm[ds->cursor.index++];
        int32_t *in = inputs + (size_t)b * T, *tg = targets + (size_t)b * T;
        if (ds->mode == BATCHING_PAD) {
            uint64_t start = ds->s.doc_start[item];
            fill_row(&ds->s, start, ds->s.doc_start[item + 1] - start, ds->T, in, tg);
        } else {
            fill_row(&ds->s, item * T, T + 1, ds->T, in, tg);
        }
    }
}

DataCursor dataset_get_cursor(const Dataset *ds) {
    DataCursor c = ds->cursor;
    if (c.index == ds->items) c = (DataCursor){c.epoch + 1, 0};
    return c;
}

// A cursor past the end of its epoch (saved with a different item count) is carried over.
void dataset_set_cursor(Dataset *ds, DataCursor c) {
    ds->cursor.epoch = c.epoch + c.index / ds->items;
    ds->cursor.index = c.index % ds->items;
    if (ds->perm_epoch != ds->cursor.epoch) make_permutation(ds, ds->cursor.epoch);
}
