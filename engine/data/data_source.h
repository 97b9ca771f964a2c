// Private to engine/data/data*.c: the source readers behind dataset_open. data_files.c finds the
// files a --data path names, data_text.c turns text into documents, data_shard.c reads llm.c
// token shards; data.c batches and shuffles the resulting token stream.
#ifndef PPTRAIN_DATA_SOURCE_H
#define PPTRAIN_DATA_SOURCE_H
#include <stddef.h>
#include <stdint.h>

#include "engine/data/data.h"
#include "engine/error.h"

// Every token of a source, back to back (text: BOS + doc + EOS per document).
typedef struct {
    void *tok;            // (n) uint16_t when width == 2, uint32_t when width == 4
    int width;            // bytes per token
    uint64_t n;           // tokens in the stream
    uint64_t *doc_start;  // (n_docs + 1) text only: index of each document's BOS; [n_docs] == n
    uint64_t n_docs;      // 0 for shards (they carry no document marks)
    int32_t max_token;
    int32_t pad;          // text: the filler input of pad batching
    const char *kind;     // static: "text", "llm.c shard (uint16)", "llm.c shard (uint32)"
} TokenStream;

// The files a path names: itself, or the visible files of a folder (recursively) in sorted
// path order, each file once (symlinked duplicates dropped) and without strfile(1) indexes.
typedef struct {
    char **path;          // (n)
    size_t n;
    int lone;             // 1 when the path named a file rather than a folder
} FileList;

int data_list_files(const char *path, FileList *out, Error *err);
// The files a --data path names as a source: the shards a `pptrain tokenize` folder's manifest
// lists (engine/data/data.h; each must be a file there), else data_list_files without the
// tokenize.json files it found (a manifest is not data). A folder holding .tokenize-partial and
// no manifest is refused: a tokenize into it has not finished.
int data_list_source(const char *path, FileList *out, Error *err);
void data_free_files(FileList *fl);
int data_has_suffix(const char *s, const char *suffix);
// Reads a whole file into a fresh buffer (*buf is NULL when the file is empty).
int data_read_file(const char *path, unsigned char **buf, size_t *len, Error *err);

// Documents of text, as bytes without BOS/EOS: doc d is bytes[start[d] .. start[d+1]).
typedef struct {
    char *bytes;
    uint64_t n, cap;
    uint64_t *start;      // (n_docs + 1)
    uint64_t n_docs, cap_docs;
} TextDocs;
// Appends the documents of one file's bytes (the rules at the top of data_text.c).
void data_text_split(const unsigned char *p, size_t n, TextDocs *out);
void data_free_docs(TextDocs *d);

// root is the path the user gave, for messages about the source as a whole; te NULL: the
// byte tokenizer.
int data_load_text(const char *root, const FileList *files, const TextEncoding *te, TokenStream *out,
                   Error *err);
int data_load_shards(const FileList *files, TokenStream *out, Error *err);
// Checks one .bin file's llm.c shard header (magic, version, count against the size) without
// reading its tokens: 0, or -1 with err naming the file and what is wrong.
int data_check_shard(const char *path, Error *err);
void data_free_stream(TokenStream *s);
// Encodes every document of d under te on te->n_enc threads: ids[k] gets document k's ids.
// -1 with err ("<path>: document N: ...", the first that failed) when one cannot be encoded.
int data_encode_docs(const TextEncoding *te, const TextDocs *d, HfIds *ids, const char *path, Error *err);
#endif
