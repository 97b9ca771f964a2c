// engine/data: training text -> batches of token ids.
//
// Sources: a plain text file, a folder of text files (read recursively, in sorted path
// order), an llm.c token shard (.bin), or a folder of .bin shards: every .bin in it, or, in a
// folder `pptrain tokenize` wrote, exactly the shards its tokenize.json lists (below). Text
// is tokenized with the byte tokenizer (engine/data/tokenizer.h) or a Hugging Face tokenizer
// (TextEncoding: its BOS, EOS and pad take the places of the byte tokenizer's below).
//
// Batching (one batch = B rows of T inputs and T targets):
//   pad:  one document per row: BOS + document + EOS, clipped to T+1 tokens or padded with
//         PAD; inputs = row[0..T), targets = row[1..T], and a target that is PAD is -1
//         (ignored by the loss). Documents of a text file are separated by blank lines or by
//         lines holding only "%" (the fortune(6) format). Shards have no document marks and
//         are refused in this mode.
//   pack: one contiguous token stream (text: each document as BOS + doc + EOS, back to back),
//         cut into windows of T+1 tokens at stride T; no pads.
// Order: the documents (pad) or windows (pack) of an epoch are visited in a permutation
// that depends only on (seed, epoch). A cursor (epoch, index into the permutation) says
// where the next batch starts; saving and restoring it reproduces every later batch exactly.
#ifndef PPTRAIN_DATA_H
#define PPTRAIN_DATA_H
#include <stdint.h>

#include "engine/data/tokenizer_hf.h"
#include "engine/error.h"

typedef enum { BATCHING_PAD = 0, BATCHING_PACK = 1 } Batching;

// How text becomes ids under a Hugging Face tokenizer: each document is encoded with the
// template's special tokens (BOS), then eos is appended unless the template itself ends
// sequences with eos. pad is pad batching's filler input (never a target). n_enc encoders, one per
// thread (text_encoding_init makes them).
typedef struct {
    const HfTokenizer *tok;
    int32_t eos, pad;     // -1: none
    HfEncoder **enc;      // (n_enc)
    int n_enc;
} TextEncoding;
// eos and pad from the tokenizer (pad: its pad, else its eos, else 0 — a pad input is
// never a target, so its value only has to be a valid id).
void text_encoding_init(TextEncoding *te, const HfTokenizer *tok, int threads);
void text_encoding_free(TextEncoding *te);
// One document's ids, appended to out.
int text_encoding_doc(const TextEncoding *te, HfEncoder *enc, const char *text, size_t n, HfIds *out,
                      Error *err);

typedef struct {
    uint64_t epoch;     // completed passes over the data
    uint64_t index;     // next item (document or window) within this epoch's permutation
} DataCursor;

typedef struct Dataset Dataset;

// Opens path for rows of seq_len inputs. Returns NULL and fills err (one line naming the
// path and the problem: missing, empty, wrong magic/version, truncated body, shards in pad
// mode, fewer tokens than one window, ...).
Dataset *dataset_open(const char *path, Batching mode, int seq_len, uint64_t seed, Error *err);
// Which files of a folder of llm.c shards: DATA_TRAIN (what dataset_open reads) leaves out
// the validation shards ("_val_" in the name), and refuses a folder of nothing else;
// DATA_VAL reads those alone (none: an error); DATA_ALL every file. A file path, or text, is read whole.
typedef enum { DATA_TRAIN = 0, DATA_VAL, DATA_ALL } DataSplit;
Dataset *dataset_open_split(const char *path, Batching mode, int seq_len, uint64_t seed, DataSplit split,
                            Error *err);
// The same with text encoded by te (NULL: the byte tokenizer). Shards are read as they are.
Dataset *dataset_open_text(const char *path, Batching mode, int seq_len, uint64_t seed, DataSplit split,
                           const TextEncoding *te, Error *err);
// `pptrain tokenize`'s folder: DIR/tokenize.json lists the shards it wrote ("shards": [{"file":
// NAME, ...}, ...]), and a folder holding one is read as exactly those files, in sorted order: a
// listed shard that is missing is an error, and a file it does not list (a stray .bin, an
// earlier run's shard) is not read. While tokenize writes, its shards wait in the hidden
// DIR/.tokenize-partial; a folder holding that and no tokenize.json is a tokenize that has not
// finished, and is refused. A folder without either is read as it always was.
#define DATA_MANIFEST "tokenize.json"
#define DATA_STAGING ".tokenize-partial"
#define DATA_MANIFEST_MAX_BYTES ((size_t)1 << 26)
// DIR/tokenize.json parsed: 1 with *json (free with cJSON_Delete) and *path (its path, malloc'd),
// 0 when dir is not a folder holding one, -1 with err when it cannot be read or is not a JSON
// object (both NULL but on 1). The one reader of the file: its shards (below) and its tokenizer
// (storage/token_manifest.h) both start here.
struct cJSON;
int data_manifest_read(const char *dir, struct cJSON **json, char **path, Error *err);
typedef struct {
    char **name;   // (n) the file names the manifest lists, in its order
    size_t n;
} ShardNames;
// 1 with out filled when dir is a folder holding a tokenize.json, 0 when it is not (a file, or
// a folder without one), -1 with err when the manifest is unreadable, has no "shards" list, or
// lists a name that is not a file name (empty, ".", "..", with a '/').
int data_manifest_shards(const char *dir, ShardNames *out, Error *err);
void data_free_shard_names(ShardNames *s);

// The validation shards a DATA_TRAIN open set aside (0 for anything else).
size_t dataset_held_out(const Dataset *ds);
// The same count before any open, from the listing alone (0 too when path cannot be listed:
// the open says why): whether --data brings a validation set of its own.
size_t data_held_out_count(const char *path);
void dataset_close(Dataset *ds);

// Largest token id present (so the caller can check it against the model's vocabulary).
int32_t dataset_max_token(const Dataset *ds);
// Documents (pad) or windows (pack) in one epoch; total tokens in the source.
uint64_t dataset_items(const Dataset *ds);
uint64_t dataset_tokens(const Dataset *ds);
// "text" or "llm.c shard (uint16)" / "llm.c shard (uint32)": for the run banner.
const char *dataset_kind(const Dataset *ds);

// `pptrain tokenize`: every text document under paths (files or folders, the rules of
// engine/data/data_text.c), encoded by te, handed in order to sink->emit with its index.
typedef struct {
    uint64_t bytes_total, bytes_done;   // of the input files
    uint64_t files, skipped, docs, tokens;
} TokenizeStats;
typedef struct {
    void *ctx;
    int (*emit)(void *ctx, uint64_t doc, const int32_t *ids, size_t n, Error *err);
    void (*progress)(void *ctx, const TokenizeStats *st);   // may be NULL
} TokenizeSink;
int data_tokenize_paths(const char *const *paths, int n_paths, const TextEncoding *te, TokenizeSink *sink,
                        TokenizeStats *st, Error *err);

// Fills inputs(B, T) and targets(B, T) with the next B items and advances the cursor,
// wrapping into the next epoch (a new permutation) when one is exhausted.
void dataset_next_batch(Dataset *ds, int B, int32_t *inputs, int32_t *targets);

DataCursor dataset_get_cursor(const Dataset *ds);
void dataset_set_cursor(Dataset *ds, DataCursor c);
#endif
