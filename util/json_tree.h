/* json_tree.h — a JSON reader for whole documents, large ones included: tokenizer.json (a
 * 150k-entry vocab, a 150k-entry merge list), safetensors headers, config.json. The
 * document is parsed into a tree of values held by one arena.
 *
 * Hostile input is expected: Debian's jansson parses (every byte checked, strings kept
 * with their lengths — a \u0000 inside is data, not an end — and the byte offset of the
 * first error reported), nesting is limited to 64 levels, and an object key given twice
 * is an error (which value counts would otherwise be a guess). Only the reader's own
 * values are kept: numbers as double (an integer beyond 64 bits is an error), strings as
 * UTF-8 (surrogate pairs joined; a lone surrogate is an error). Object members keep the
 * document's order. */
#ifndef TANDEM_UTIL_JSON_TREE_H
#define TANDEM_UTIL_JSON_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

typedef enum { TJ_NULL, TJ_FALSE, TJ_TRUE, TJ_NUM, TJ_STR, TJ_ARR, TJ_OBJ } tjson_type;

typedef struct tjson {
    tjson_type type;
    uint32_t n;      /* TJ_STR: bytes; TJ_ARR, TJ_OBJ: members */
    const char *key; /* the member's key when inside an object (NUL-terminated too) */
    uint32_t keylen;
    union {
        double num;         /* TJ_NUM */
        const char *s;      /* TJ_STR (NUL-terminated too) */
        struct tjson *kids; /* TJ_ARR, TJ_OBJ: n members */
    } u;
} tjson;

typedef struct tjson_doc tjson_doc;

/* Parses text[0..n) (one JSON value, whitespace around allowed). Returns the document
 * (free with tjson_free) and sets *root; NULL on a syntax error or no memory, with
 * err (cap bytes) saying what and at which byte offset. */
tjson_doc *tjson_parse(const char *text, size_t n, const tjson **root, char *err, size_t cap);
void tjson_free(tjson_doc *d);

/* The first member of object o named key (NUL-terminated); NULL when o is not an
 * object or has no such member. */
const tjson *tjson_get(const tjson *o, const char *key);

/* An integer member `key` of object o in [lo, hi] into *out; dflt when it is absent or
 * null (dflt < 0: required). ERR_USAGE naming `path` (the file) and the key otherwise. */
int tjson_int(const tjson *o, const char *path, const char *key, long dflt, long lo, long hi, int *out, tdm_err *e);

/* The JSON type's name for messages: "null", "a string", "an object"... */
const char *tjson_type_name(const tjson *v);

#endif
