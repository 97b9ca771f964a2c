// Text files -> documents -> one token stream (BOS + doc bytes + EOS per document).
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

typedef struct {
    uint16_t *tok;
    uint64_t n, cap;
    uint64_t *doc;        // document starts
    uint64_t n_doc, cap_doc;
    int in_doc;
    uint64_t blank_run;   // blank lines seen inside the current document, not yet written
} Builder;

static void push(Builder *b, uint16_t t) {
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 1 << 16;
        b->tok = check_alloc(realloc(b->tok, b->cap * sizeof *b->tok), b->cap * sizeof *b->tok,
                             __FILE__, __LINE__);
    }
    b->tok[b->n++] = t;
}

static void mark_doc_start(Builder *b) {
    if (b->n_doc == b->cap_doc) {
        b->cap_doc = b->cap_doc ? 2 * b->cap_doc : 1024;
        b->doc = check_alloc(realloc(b->doc, b->cap_doc * sizeof *b->doc),
                             b->cap_doc * sizeof *b->doc, __FILE__, __LINE__);
    }
    b->doc[b->n_doc++] = b->n;
}

static void begin_doc(Builder *b) {
    mark_doc_start(b);
    push(b, TOKEN_BOS);
    b->in_doc = 1;
    b->blank_run = 0;
}

static void end_doc(Builder *b) {
    if (b->in_doc) push(b, TOKEN_EOS);
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

static void split_docs(Builder *b, const unsigned char *p, size_t n) {
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

int data_load_text(const char *root, const FileList *files, TokenStream *out, Error *err) {
    *out = (TokenStream){0};
    Builder b = {0};
    size_t binary = 0;
    for (size_t i = 0; i < files->n; i++) {
        unsigned char *p;
        size_t n;
        if (data_read_file(files->path[i], &p, &n, err) != 0) goto fail;
        if (files->lone && n == 0) {
            error_set(err, "%s: empty file", files->path[i]);
            goto fail;
        }
        const unsigned char *nul = n ? memchr(p, '\0', n) : NULL;
        if (nul) {
            binary++;
            if (files->lone) {
                error_set(err, "%s: not a text file (NUL byte at offset %zu); llm.c token "
                          "shards must be named *.bin", files->path[i], (size_t)(nul - p));
                free(p);
                goto fail;
            }
        } else {
            size_t skip = n >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
            split_docs(&b, p + skip, n - skip);
        }
        free(p);
    }
    if (b.n_doc == 0) {
        if (files->lone)
            error_set(err, "%s: no documents (only blank lines)", root);
        else
            error_set(err, "%s: no text documents in %zu files (%zu skipped as binary)", root,
                      files->n, binary);
        goto fail;
    }
    mark_doc_start(&b);       // doc[n_doc] = end of the stream
    out->tok = b.tok;
    out->width = 2;
    out->n = b.n;
    out->doc_start = b.doc;
    out->n_docs = b.n_doc - 1;
    out->max_token = TOKEN_EOS;   // every document ends in EOS; bytes and BOS are below it
    out->kind = "text";
    return 0;
fail:
    free(b.tok);
    free(b.doc);
    return -1;
}

void data_free_stream(TokenStream *s) {
    free(s->tok);
    free(s->doc_start);
    *s = (TokenStream){0};
}
