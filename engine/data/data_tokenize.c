// engine/data/data_tokenize.c: text files -> documents -> ids, in order, for
// `pptrain tokenize`. Files are read one at a time; a file's documents are encoded in chunks
// of DOCS_PER_CHUNK on te->n_enc threads, and handed to the sink in document order, so the
// output depends only on the input, never on the thread count.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/data_source.h"

enum { DOCS_PER_CHUNK = 4096 };

// The documents [from, to) of d: encoded, handed to the sink, progress reported.
static int emit_chunk(const TextEncoding *te, const TextDocs *d, uint64_t from, uint64_t to,
                      const char *path, TokenizeSink *sink, TokenizeStats *st, Error *err) {
    TextDocs part = *d;
    part.start = d->start + from;
    part.n_docs = to - from;
    HfIds *ids = xcalloc((size_t)(to - from) + 1, sizeof *ids);
    int rc = data_encode_docs(te, &part, ids, path, err);
    for (uint64_t k = 0; k < to - from && rc == 0; k++) {
        rc = sink->emit(sink->ctx, st->docs++, ids[k].id, ids[k].n, err);
        st->tokens += ids[k].n;
    }
    for (uint64_t k = 0; k < to - from; k++) hf_ids_free(&ids[k]);
    free(ids);
    st->bytes_done += d->start[to] - d->start[from];
    if (rc == 0 && sink->progress) sink->progress(sink->ctx, st);
    return rc;
}

static int one_file(const TextEncoding *te, const char *path, int lone, TokenizeSink *sink,
                    TokenizeStats *st, Error *err) {
    unsigned char *p;
    size_t n;
    if (data_read_file(path, &p, &n, err) != 0) return -1;
    const unsigned char *nul = n ? memchr(p, '\0', n) : NULL;
    size_t at = nul ? (size_t)(nul - p) : n;
    if (at < n) {
        free(p);
        if (!lone) return st->skipped++, 0;
        error_set(err, "%s: not a text file (NUL byte at offset %zu)", path, at);
        return -1;
    }
    TextDocs d = {0};
    data_text_split(p, n, &d);
    free(p);
    // Blank lines between documents count as done once the file is.
    uint64_t text = d.n_docs ? d.start[d.n_docs] - d.start[0] : 0;
    int rc = 0;
    for (uint64_t k = 0; k < d.n_docs && rc == 0; k += DOCS_PER_CHUNK)
        rc = emit_chunk(te, &d, k, k + DOCS_PER_CHUNK < d.n_docs ? k + DOCS_PER_CHUNK : d.n_docs, path,
                        sink, st, err);
    st->bytes_done += n - text;
    data_free_docs(&d);
    return rc;
}

int data_tokenize_paths(const char *const *paths, int n_paths, const TextEncoding *te, TokenizeSink *sink,
                        TokenizeStats *st, Error *err) {
    *st = (TokenizeStats){0};
    FileList *lists = xcalloc((size_t)n_paths, sizeof *lists);
    int rc = 0, listed = 0;
    for (; listed < n_paths && rc == 0; listed++) {
        rc = data_list_files(paths[listed], &lists[listed], err);
        for (size_t i = 0; rc == 0 && i < lists[listed].n; i++) {
            FILE *f = fopen(lists[listed].path[i], "rb");
            if (f && fseek(f, 0, SEEK_END) == 0) st->bytes_total += (uint64_t)ftell(f);
            if (f) fclose(f);
        }
        if (rc) listed--;   // nothing to free for the list that failed
    }
    for (int k = 0; k < n_paths && rc == 0; k++)
        for (size_t i = 0; i < lists[k].n && rc == 0; i++, st->files++)
            rc = one_file(te, lists[k].path[i], lists[k].lone, sink, st, err);
    for (int k = 0; k < listed; k++) data_free_files(&lists[k]);
    free(lists);
    if (rc == 0 && st->docs == 0) {
        error_set(err, "%s: no text documents (%llu files, %llu skipped as binary)", paths[0],
                  (unsigned long long)st->files, (unsigned long long)st->skipped);
        return -1;
    }
    return rc;
}
