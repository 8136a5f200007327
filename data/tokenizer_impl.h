/* tokenizer_impl.h — the tokenizer's insides, shared by tokenizer.c (encode, decode) and
 * the loaders (tok_load.c). Not for other modules: they use data/tokenizer.h. */
#ifndef TANDEM_DATA_TOKENIZER_IMPL_H
#define TANDEM_DATA_TOKENIZER_IMPL_H

#include "data/bpe.h"
#include "data/pretok.h"
#include "data/tokenizer.h"

struct tokenizer {
    bpe m;
    pretok_pattern pat;
    int add_prefix_space; /* ByteLevel's: a space before text that does not start with one */
    int nfc;              /* normalizer NFC: text is normalized before pre-tokenization */
    uint32_t vocab;
    int64_t eot;
    uint32_t *added; /* the added / special tokens' ids (their bytes are in m) */
    size_t nadded;
    char digest[65];
    char kind[48];
};

#endif
