// engine/data/data_encode.c: documents -> ids under a Hugging Face tokenizer, on several
// threads (one HfEncoder each; the tokenizer itself is shared read-only).
#include <omp.h>
#include <stdlib.h>

#include "engine/data/data_source.h"

void text_encoding_init(TextEncoding *te, const HfTokenizer *tok, int threads) {
    te->tok = tok;
    te->eos = hf_tokenizer_eos(tok);
    te->pad = hf_tokenizer_pad(tok) >= 0 ? hf_tokenizer_pad(tok) : te->eos >= 0 ? te->eos : 0;
    te->n_enc = threads < 1 ? 1 : threads;
    te->enc = xcalloc((size_t)te->n_enc, sizeof *te->enc);
    for (int i = 0; i < te->n_enc; i++) te->enc[i] = hf_encoder_new(tok);
}

void text_encoding_free(TextEncoding *te) {
    for (int i = 0; i < te->n_enc; i++) hf_encoder_free(te->enc[i]);
    free(te->enc);
    *te = (TextEncoding){0};
}

int text_encoding_doc(const TextEncoding *te, HfEncoder *enc, const char *text, size_t n, HfIds *out,
                      Error *err) {
    if (hf_encode(enc, text, n, 1, out, err) != 0) return -1;
    // By the template, not by the last id: a document whose text ends in the EOS string
    // still gets its own EOS.
    if (te->eos >= 0 && hf_tokenizer_last_special(te->tok) != te->eos) hf_ids_push(out, te->eos);
    return 0;
}

int data_encode_docs(const TextEncoding *te, const TextDocs *d, HfIds *ids, const char *path, Error *err) {
    int64_t bad = -1;   // the first document that failed; its message wins
    Error first = {{0}};
#pragma omp parallel for schedule(dynamic, 8) num_threads(te->n_enc)
    for (int64_t k = 0; k < (int64_t)d->n_docs; k++) {
        Error e = {{0}};
        HfEncoder *enc = te->enc[omp_get_thread_num()];
        const char *s = d->bytes + d->start[k];
        if (text_encoding_doc(te, enc, s, d->start[k + 1] - d->start[k], &ids[k], &e) != 0) {
#pragma omp critical(data_encode_error)
            if (bad < 0 || k < bad) bad = k, first = e;
        }
    }
    if (bad >= 0) error_set(err, "%s: document %lld: %s", path, (long long)bad + 1, first.msg);
    return bad >= 0 ? -1 : 0;
}
