/* prep_encode.h — the subword side of prep's encoder (data/prep.c, prep_encode): a
 * tokenizer loaded for `tandem prep --tokenizer`, and the open document's text buffered
 * and encoded in parts cut at safe points (tokenizer_safe_cut), so that a document of any
 * size is encoded exactly as tokenizer_encode would encode it whole while memory stays
 * near PREP_ENC_CHUNK (a document with no safe cut, e.g. one long line, is held whole). */
#ifndef TANDEM_DATA_PREP_ENCODE_H
#define TANDEM_DATA_PREP_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "data/prep.h"
#include "data/tokenizer.h"
#include "util/err.h"

#define PREP_ENC_CHUNK (4u << 20) /* default prep_tok.chunk */
/* The most text of one document held whole for want of a safe cut (one long line; a run
 * of digits and spaces; lines that all begin with a space or punctuation): past it the
 * document is left out and counted (too long), as a .jsonl record past 256 MiB is,
 * instead of buffering all of a small compressed file's decompressed text without end.
 * (Held whole, one long pre-tokenizer piece costs the encoder ~25-40 bytes a byte.) */
#define PREP_DOC_HELD_MAX ((size_t)256 << 20)

/* What documents become: byte-level (t NULL, vocab 256, eot PREP_SEPARATOR) or the
 * tokens of tokenizer t with its end-of-text id after each document. */
typedef struct prep_tok {
    tokenizer *t;
    uint32_t vocab, eot;
    int threads; /* encoding threads (<= 0: OpenMP's default) */
    size_t chunk; /* buffered text that triggers encoding a part */
    size_t held_max; /* the most text buffered without a safe cut (PREP_DOC_HELD_MAX) */
} prep_tok;

/* Loads o->tokenizer (with o->pattern) and picks its end-of-text token: o->eot_token when
 * given (it must be a token of the vocabulary), else tokenizer_eot. No o->tokenizer:
 * byte-level. 0, or ERR_USAGE naming the file or option and what to do. */
int prep_tok_load(const prep_opts *o, prep_tok *k, tdm_err *e);
void prep_tok_free(prep_tok *k);

/* The state of one pass's open document. Zeroed but for k: empty. */
typedef struct prep_enc {
    const prep_tok *k;
    char *buf;           /* text of the open document not yet encoded */
    size_t len, cap;
    size_t next_try;     /* buffered length at which to look for a safe cut again */
    size_t scanned;      /* buf[0..scanned] holds no safe cut (0: nothing known) */
    int started;         /* a part of the open document has been encoded */
    int too_long;        /* the open document passed held_max before any part was encoded:
                          * it is left out (its text is dropped as it comes) */
    bpe_cache *cache;    /* kept across documents (NULL until the first) */
} prep_enc;

/* Appends n bytes of the open document's text and sets out to the ids that are final
 * (out->n may be 0: the text waits for a safe cut or the document's end). Past held_max
 * without a safe cut the document is left out (x->too_long; the caller counts it at its
 * end), or, when parts of it are written already, ERR_USAGE. */
int prep_enc_text(prep_enc *x, const char *p, size_t n, tok_ids *out, tdm_err *e);
/* Closes the document: out gets the ids of the rest of its text and the end-of-text id. */
int prep_enc_end(prep_enc *x, tok_ids *out, tdm_err *e);
/* Forgets the open document (one the reader left out half-way). */
void prep_enc_drop(prep_enc *x);
void prep_enc_free(prep_enc *x);

#define PREP_BATCH_BYTES (4u << 20) /* short documents' text gathered per batch */

/* Short documents (each whole in a prep_enc buffer when it ends) gathered to be encoded
 * together on k->threads threads (tokenizer_encode_docs): many threads on documents too
 * short to be cut. The caller emits their ids in order, so the output stays the one of
 * a single thread. */
typedef struct prep_batch {
    char *text;       /* the documents' texts, end to end */
    size_t bytes, cap;
    size_t *off;      /* document i is text[off[i]..off[i + 1]) */
    int *split;       /* and goes to this split */
    tok_ids *ids;     /* after prep_batch_encode: its ids, the end-of-text id last */
    size_t n, ncap;
} prep_batch;

/* Appends a document's text and split. 0 or ERR_INTERNAL. */
int prep_batch_add(prep_batch *b, const char *s, size_t n, int split, tdm_err *e);
/* Encodes every document of the batch into ids[i] (replacing what was there). */
int prep_batch_encode(prep_batch *b, const prep_tok *k, tdm_err *e);
/* Empties the batch, keeping its memory. */
void prep_batch_clear(prep_batch *b);
void prep_batch_free(prep_batch *b);

#endif
