/* prep_encode.c — prep's subword tokenizer glue (prep_encode.h). */
#include "data/prep_encode.h"

#include <stdlib.h>
#include <string.h>

#include "data/shard.h"

int prep_tok_load(const prep_opts *o, prep_tok *k, tdm_err *e) {
    memset(k, 0, sizeof *k);
    k->vocab = PREP_VOCAB;
    k->eot = PREP_SEPARATOR;
    k->threads = o->threads;
    k->chunk = o->chunk_bytes ? o->chunk_bytes : PREP_ENC_CHUNK;
    k->held_max = o->doc_max_bytes ? o->doc_max_bytes : PREP_DOC_HELD_MAX;
    if (!o->tokenizer) {
        if (o->pattern || o->eot_token)
            return err_set(e, ERR_USAGE, "%s needs --tokenizer FILE (byte-level has no choice)",
                           o->pattern ? "--pattern" : "--eot-token");
        return 0;
    }
    int rc = tokenizer_load(o->tokenizer, o->pattern, &k->t, e);
    if (rc) return rc;
    int64_t eot = tokenizer_eot(k->t);
    if (o->eot_token) {
        eot = tokenizer_token_id(k->t, o->eot_token, strlen(o->eot_token));
        if (eot < 0)
            rc = err_set(e, ERR_USAGE,
                         "--eot-token \"%s\" is not a token of tokenizer %s; name one of its "
                         "added tokens or a token's exact text",
                         o->eot_token, o->tokenizer);
    } else if (eot < 0) {
        rc = err_set(e, ERR_USAGE,
                     "tokenizer %s has no end-of-text token (<|endoftext|>, <|end_of_text|> or "
                     "</s>) to put between documents; name one with --eot-token STRING",
                     o->tokenizer);
    }
    if (!rc && tokenizer_id_matched(k->t, (uint32_t)eot))
        rc = err_set(e, ERR_USAGE,
                     "tokenizer %s: the end-of-text id %lld is an added token that is not special (matched in "
                     "text): a document holding its text would hold the separator too; name a special token with "
                     "--eot-token STRING",
                     o->tokenizer, (long long)eot);
    if (!rc && tokenizer_vocab(k->t) > SHARD_VOCAB_MAX)
        rc = err_set(e, ERR_USAGE, "tokenizer %s: vocab %u is above the %d shards hold",
                     o->tokenizer, (unsigned)tokenizer_vocab(k->t), SHARD_VOCAB_MAX);
    if (rc) {
        prep_tok_free(k);
        return rc;
    }
    k->vocab = tokenizer_vocab(k->t);
    k->eot = (uint32_t)eot;
    return 0;
}

void prep_tok_free(prep_tok *k) {
    tokenizer_free(k->t);
    k->t = NULL;
}

/* Encodes the buffer up to `cut` (its length or a safe cut) onto out and keeps the rest. */
static int prep_enc_part(prep_enc *x, size_t cut, tok_ids *out, tdm_err *e) {
    if (!x->cache && !(x->cache = bpe_cache_new()))
        return err_set(e, ERR_INTERNAL, "out of memory");
    int rc = tokenizer_encode_head(x->k->t, x->buf, x->len, cut, !x->started, x->k->threads,
                                   x->cache, out, e);
    if (rc) return rc;
    x->started = 1;
    memmove(x->buf, x->buf + cut, x->len - cut);
    x->len -= cut;
    return 0;
}

int prep_enc_text(prep_enc *x, const char *p, size_t n, tok_ids *out, tdm_err *e) {
    out->n = 0;
    if (x->too_long) return 0;
    if (x->len + n > x->k->held_max) {
        if (x->started) /* its first parts are written: it cannot be left out any more */
            return err_set(e, ERR_USAGE, "a document runs on past %zu bytes with no place to cut it for "
                           "the tokenizer (a newline that a letter or digit follows) after its first parts: "
                           "split the file into documents", x->k->held_max);
        x->too_long = 1;
        x->len = x->next_try = x->scanned = 0;
        return 0;
    }
    if (x->len + n > x->cap) {
        size_t nc = x->cap ? x->cap : 1 << 16;
        while (nc < x->len + n) nc *= 2;
        char *nb = realloc(x->buf, nc);
        if (!nb) return err_set(e, ERR_INTERNAL, "out of memory (a document's text)");
        x->buf = nb;
        x->cap = nc;
    }
    memcpy(x->buf + x->len, p, n);
    x->len += n;
    if (x->len < x->k->chunk || x->len < x->next_try) return 0;
    /* The last safe cut: everything before it encodes as in the whole document. With
     * none, wait for another chunk, and then look only at the text that came since (a
     * cut needs a '\n' and the whole character after it, up to 4 bytes, so from the
     * last 5 bytes looked at: a character cut off by the end is no cut yet), so that a
     * long document without cuts costs linear time. */
    size_t cut = tokenizer_safe_cut(x->k->t, x->buf + x->scanned, x->len - x->scanned);
    if (cut == 0) {
        x->next_try = x->len + x->k->chunk;
        x->scanned = x->len > 5 ? x->len - 5 : 0;
        return 0;
    }
    cut += x->scanned;
    x->next_try = x->scanned = 0;
    return prep_enc_part(x, cut, out, e);
}

int prep_enc_end(prep_enc *x, tok_ids *out, tdm_err *e) {
    out->n = 0;
    int rc = x->len ? prep_enc_part(x, x->len, out, e) : 0;
    if (!rc && tok_ids_append(out, &x->k->eot, 1))
        rc = err_set(e, ERR_INTERNAL, "out of memory");
    prep_enc_drop(x);
    return rc;
}

void prep_enc_drop(prep_enc *x) {
    x->len = x->next_try = x->scanned = 0;
    x->started = x->too_long = 0;
}

void prep_enc_free(prep_enc *x) {
    free(x->buf);
    bpe_cache_free(x->cache);
    x->cache = NULL;
    x->buf = NULL;
    x->len = x->cap = x->next_try = x->scanned = 0;
    x->started = 0;
}

int prep_batch_add(prep_batch *b, const char *s, size_t n, int split, tdm_err *e) {
    if (b->n + 2 > b->ncap) {
        size_t nc = b->ncap ? b->ncap * 2 : 256;
        size_t *no = realloc(b->off, nc * sizeof *no);
        if (no) b->off = no;
        int *ns = no ? realloc(b->split, nc * sizeof *ns) : NULL;
        if (ns) b->split = ns;
        tok_ids *ni = ns ? realloc(b->ids, nc * sizeof *ni) : NULL;
        if (!ni) return err_set(e, ERR_INTERNAL, "out of memory");
        memset(ni + b->ncap, 0, (nc - b->ncap) * sizeof *ni);
        b->ids = ni;
        b->ncap = nc;
    }
    if (b->bytes + n > b->cap) {
        size_t nc = b->cap ? b->cap : 1 << 16;
        while (nc < b->bytes + n) nc *= 2;
        char *nt = realloc(b->text, nc);
        if (!nt) return err_set(e, ERR_INTERNAL, "out of memory");
        b->text = nt;
        b->cap = nc;
    }
    memcpy(b->text + b->bytes, s, n);
    b->off[b->n] = b->bytes;
    b->split[b->n++] = split;
    b->bytes += n;
    b->off[b->n] = b->bytes;
    return 0;
}

int prep_batch_encode(prep_batch *b, const prep_tok *k, tdm_err *e) {
    if (!b->n) return 0;
    const char **docs = malloc(b->n * sizeof *docs);
    size_t *lens = malloc(b->n * sizeof *lens);
    int rc = 0;
    if (!docs || !lens) rc = err_set(e, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; !rc && i < b->n; i++) {
        docs[i] = b->text + b->off[i];
        lens[i] = b->off[i + 1] - b->off[i];
        b->ids[i].n = 0;
    }
    if (!rc)
        rc = tokenizer_encode_docs(k->t, b->n, (const char *const *)docs, lens, k->threads, b->ids,
                                   e);
    for (size_t i = 0; !rc && i < b->n; i++)
        if (tok_ids_append(&b->ids[i], &k->eot, 1)) rc = err_set(e, ERR_INTERNAL, "out of memory");
    free(docs);
    free(lens);
    return rc;
}

void prep_batch_clear(prep_batch *b) {
    b->n = b->bytes = 0;
}

void prep_batch_free(prep_batch *b) {
    for (size_t i = 0; i < b->ncap; i++) tok_ids_free(&b->ids[i]);
    free(b->text);
    free(b->off);
    free(b->split);
    free(b->ids);
    memset(b, 0, sizeof *b);
}
