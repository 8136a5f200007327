/* tokenizer_impl.h — the tokenizer's insides, shared by tokenizer.c (encode, decode) and
 * the loaders (tok_load.c). Not for other modules: they use data/tokenizer.h. */
#ifndef TANDEM_DATA_TOKENIZER_IMPL_H
#define TANDEM_DATA_TOKENIZER_IMPL_H

#include "data/bpe.h"
#include "data/pretok.h"
#include "data/tokenizer.h"

/* A non-special added token (tokenizer.json added_tokens with "special": false): matched
 * in the text as Hugging Face matches it — the raw ones first, in the text as written,
 * then the normalized ones in the parts between those matches, each pass leftmost,
 * longest — before pre-tokenization, the text between matches encoded on its own (special
 * tokens are never matched: tokenizer.h). lstrip / rstrip take the whitespace before /
 * after a match with it. */
typedef struct tok_match {
    char *s; /* the content (NFC when "normalized" and the normalizer is NFC) */
    size_t n;
    uint32_t id;
    int lstrip, rstrip;
    int raw; /* not "normalized": matched before the normalized ones, in the text as
              * written (under NFC the parts between such matches are normalized each on
              * its own: Hugging Face's order) */
    uint32_t order; /* its place in added_tokens: of two with one content, the later wins */
} tok_match;

struct tokenizer {
    bpe m;
    pretok_pattern pat;
    int add_prefix_space; /* ByteLevel's: a space before text that does not start with one */
    int nfc;              /* normalizer NFC: text is normalized before pre-tokenization */
    uint32_t vocab;
    int64_t eot;
    uint32_t *added; /* the added / special tokens' ids (their bytes are in m) */
    size_t nadded;
    tok_match *match; /* the non-special added tokens */
    size_t nmatch;
    /* their contents as a byte trie: node 0 is the root (its children in root[]), each
     * node a byte with its first child and next sibling (0: none) and the token ending
     * there (-1: none). A place of the text costs the length of its longest match. */
    struct tok_node { uint32_t child, sibling; int32_t match; unsigned char byte; } *trie;
    size_t ntrie;
    uint32_t root[256];
    int no_cuts; /* a safe cut could fall inside a match, or end an lstrip one's strip (tok_load.c) */
    int nraw;    /* of them, raw ones */
    char digest[65];
    char kind[48];
};

#endif
