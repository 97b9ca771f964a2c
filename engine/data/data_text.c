// Text files -> documents -> one token stream (per document: BOS + doc + EOS with the byte
// tokenizer; with a Hugging Face tokenizer, its encoding of the document, special tokens
// included (BOS from its template), then its EOS when it has one and the template does not
// end sequences with it itself).
//
// A file holding a line that is exactly "%" is in fortune(6) format: documents are the text
// between "%" lines, so a fortune keeps the blank lines inside it. Any other file is split at
// blank lines (empty or whitespace-only), one or more in a row. Either way a document loses
// its leading and trailing blank lines, its lines are joined with "\n" (CRLF and LF alike;
// no newline after the last line), and a document with no visible character is skipped.
// Documents never span files. A UTF-8 byte-order mark at the start of a file is dropped.
// A file holding a NUL byte is not text: skipped inside a folder, refused when named alone.
#include "engine/data/data_source.h"

#include <stdlib.h>
#include <string.h>

#include "engine/data/tokenizer.h"
#include "engine/data/tokenizer_hf.h"

typedef struct {
    TextDocs *d;
    int in_doc;
    uint64_t blank_run;   // blank lines seen inside the current document, not yet written
} Builder;

static void push(Builder *b, unsigned char c) {
    TextDocs *d = b->d;
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 1 << 16;
        d->bytes = check_alloc(realloc(d->bytes, d->cap), d->cap, __FILE__, __LINE__);
    }
    d->bytes[d->n++] = (char)c;
}

static void mark_doc_start(TextDocs *d) {
    if (d->n_docs + 1 >= d->cap_docs) {
        d->cap_docs = d->cap_docs ? 2 * d->cap_docs : 1024;
        d->start = check_alloc(realloc(d->start, d->cap_docs * sizeof *d->start),
                               d->cap_docs * sizeof *d->start, __FILE__, __LINE__);
    }
    d->start[d->n_docs++] = d->n;
}

static void begin_doc(Builder *b) {
    mark_doc_start(b->d);
    b->in_doc = 1;
    b->blank_run = 0;
}

// Closes the open document: start[n_docs] is where the next would start (its end).
static void end_doc(Builder *b) {
    if (b->in_doc) b->d->start[b->d->n_docs] = b->d->n;
    b->in_doc = 0;
    b->blank_run = 0;
}

static void add_line(Builder *b, const unsigned char *s, size_t len) {
    if (!b->in_doc) begin_doc(b);
    else
        for (uint64_t i = 0; i <= b->blank_run; i++) push(b, '\n');
    b->blank_run = 0;
    for (size_t i = 0; i < len; i++) push(b, s[i]);
}

static int is_blank(const unsigned char *s, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\f' && s[i] != '\v')
            return 0;
    return 1;
}

typedef struct {
    const unsigned char *s;
    size_t len;          // without the "\n" and one trailing "\r"
} Line;

// The line starting at *at in p[0..n); moves *at to the start of the next one.
static Line next_line(const unsigned char *p, size_t n, size_t *at) {
    Line l = {p + *at, n - *at};
    const unsigned char *nl = memchr(l.s, '\n', l.len);
    if (nl) l.len = (size_t)(nl - l.s);
    *at += l.len + (nl != NULL);
    if (l.len && l.s[l.len - 1] == '\r') l.len--;
    return l;
}

static int is_percent(Line l) { return l.len == 1 && l.s[0] == '%'; }

void data_text_split(const unsigned char *p, size_t n, TextDocs *out) {
    Builder bb = {out, 0, 0}, *b = &bb;
    if (!out->start) mark_doc_start(out), out->n_docs = 0;   // room for start[0]
    if (n >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3, n -= 3;
    int fortune = 0;
    for (size_t at = 0; at < n && !fortune;) fortune = is_percent(next_line(p, n, &at));
    for (size_t at = 0; at < n;) {
        Line l = next_line(p, n, &at);
        if (fortune && is_percent(l)) end_doc(b);
        else if (!is_blank(l.s, l.len)) add_line(b, l.s, l.len);
        else if (!fortune) end_doc(b);
        else if (b->in_doc) b->blank_run++;
    }
    end_doc(b);
}

void data_free_docs(TextDocs *d) {
    free(d->bytes);
    free(d->start);
    *d = (TextDocs){0};
}

// The stream being built: tokens of width 2 or 4 and each document's first index.
typedef struct {
    TokenStream *s;
    uint64_t cap, cap_docs;
} Stream;

static void stream_push(Stream *st, int32_t id) {
    TokenStream *s = st->s;
    if (s->n == st->cap) {
        st->cap = st->cap ? 2 * st->cap : 1 << 16;
        s->tok = check_alloc(realloc(s->tok, st->cap * (size_t)s->width), st->cap * (size_t)s->width,
                             __FILE__, __LINE__);
    }
    if (s->width == 2) ((uint16_t *)s->tok)[s->n++] = (uint16_t)id;
    else ((uint32_t *)s->tok)[s->n++] = (uint32_t)id;
    if (id > s->max_token) s->max_token = id;
}

static void stream_doc(Stream *st) {
    TokenStream *s = st->s;
    if (s->n_docs + 1 >= st->cap_docs) {
        st->cap_docs = st->cap_docs ? 2 * st->cap_docs : 1024;
        s->doc_start = check_alloc(realloc(s->doc_start, st->cap_docs * sizeof *s->doc_start),
                                   st->cap_docs * sizeof *s->doc_start, __FILE__, __LINE__);
    }
    s->doc_start[s->n_docs++] = s->n;
}

// One file's documents into the stream.
static int add_docs(Stream *st, const TextDocs *d, const char *path, const TextEncoding *te,
                    Error *err) {
    if (!te) {
        for (uint64_t k = 0; k < d->n_docs; k++) {
            stream_doc(st);
            stream_push(st, TOKEN_BOS);
            for (uint64_t i = d->start[k]; i < d->start[k + 1]; i++) stream_push(st, (unsigned char)d->bytes[i]);
            stream_push(st, TOKEN_EOS);
        }
        return 0;
    }
    HfIds *ids = xcalloc(d->n_docs + 1, sizeof *ids);
    int rc = data_encode_docs(te, d, ids, path, err);
    for (uint64_t k = 0; k < d->n_docs && rc == 0; k++) {
        stream_doc(st);
        for (size_t i = 0; i < ids[k].n; i++) stream_push(st, ids[k].id[i]);
    }
    for (uint64_t k = 0; k < d->n_docs; k++) hf_ids_free(&ids[k]);
    free(ids);
    return rc;
}

// A file's bytes as documents, or 1 when it is binary (NUL byte), -1 on an error.
static int read_docs(const FileList *files, size_t i, TextDocs *d, Error *err) {
    unsigned char *p;
    size_t n;
    if (data_read_file(files->path[i], &p, &n, err) != 0) return -1;
    if (files->lone && n == 0) {
        error_set(err, "%s: empty file", files->path[i]);
        return -1;
    }
    const unsigned char *nul = n ? memchr(p, '\0', n) : NULL;
    if (nul && files->lone)
        error_set(err, "%s: not a text file (NUL byte at offset %zu); llm.c token "
                  "shards must be named *.bin", files->path[i], (size_t)(nul - p));
    if (!nul) data_text_split(p, n, d);
    free(p);
    return nul ? (files->lone ? -1 : 1) : 0;
}

int data_load_text(const char *root, const FileList *files, const TextEncoding *te, TokenStream *out,
                   Error *err) {
    *out = (TokenStream){0};
    out->width = te && hf_tokenizer_vocab(te->tok) > 65536 ? 4 : 2;
    out->pad = te ? te->pad : TOKEN_PAD;
    Stream st = {out, 0, 0};
    size_t binary = 0;
    for (size_t i = 0; i < files->n; i++) {
        TextDocs d = {0};
        int rc = read_docs(files, i, &d, err);
        if (rc == 0) rc = add_docs(&st, &d, files->path[i], te, err);
        data_free_docs(&d);
        if (rc < 0) goto fail;
        binary += (size_t)rc;
    }
    if (out->n_docs == 0) {
        if (files->lone)
            error_set(err, "%s: no documents (only blank lines)", root);
        else
            error_set(err, "%s: no text documents in %zu files (%zu skipped as binary)", root,
                      files->n, binary);
        goto fail;
    }
    stream_doc(&st);       // doc_start[n_docs] = end of the stream
    out->n_docs--;
    out->kind = "text";
    return 0;
fail:
    data_free_stream(out);
    return -1;
}

void data_free_stream(TokenStream *s) {
    free(s->tok);
    free(s->doc_start);
    *s = (TokenStream){0};
}
