/* jsonl.h — the text field of JSON records, for `tandem prep` (.jsonl and .json inputs).
 *
 * A record is a JSON object (RFC 8259, strict: raw control characters in strings, trailing
 * commas, comments and NaN are syntax errors); its document is the string value of one
 * top-level key (the last occurrence when the key repeats, as Python's json, JSON.parse,
 * jq and pyarrow read it), with every escape decoded to
 * UTF-8 (\uXXXX, surrogate pairs included). Not a general parser: other values are
 * checked and skipped, never kept. Nesting deeper than JSONL_MAX_DEPTH is a syntax error
 * rather than deep recursion.
 *
 * Outcomes per record: JSONL_OK (the text in `out`, possibly empty), JSONL_NOT_OBJECT,
 * JSONL_NO_FIELD (the key is absent or its value is not a string), JSONL_BAD_UTF8 (the
 * field's string holds bytes that are not UTF-8, or a \u escape naming a lone surrogate),
 * JSONL_SYNTAX (not JSON). `at` is the byte offset of the problem (the record's start for
 * NOT_OBJECT/NO_FIELD), `why` a short phrase for a message.
 */
#ifndef TANDEM_DATA_JSONL_H
#define TANDEM_DATA_JSONL_H

#include <stddef.h>

#include "util/buf.h"

#define JSONL_MAX_DEPTH 256

enum { JSONL_OK, JSONL_SYNTAX, JSONL_NOT_OBJECT, JSONL_NO_FIELD, JSONL_BAD_UTF8, JSONL_OOM };

typedef struct jsonl_result {
    int status;
    size_t at;
    const char *why; /* static text */
} jsonl_result;

/* One record: s[0..n) must be exactly one JSON value (whitespace around it allowed, so a
 * CRLF line is fine). Empties `out` and appends the field's text to it when OK. Returns
 * r->status. */
int jsonl_record(const char *s, size_t n, const char *field, buf_t *out, jsonl_result *r);

/* A .json text: one object (one record) or an array whose elements are the records.
 * The whole text is checked first; on a syntax error nothing is passed to fn and the
 * return is JSONL_SYNTAX (r says where). Otherwise fn gets each record's result, its
 * text (in out, valid only during the call) and the offset where it starts; a non-zero
 * return from fn stops the walk and is returned. Returns 0 when fn saw every record. */
int jsonl_each(const char *s, size_t n, const char *field, buf_t *out,
               int (*fn)(void *ctx, const jsonl_result *r, const char *text, size_t len),
               void *ctx, jsonl_result *r);

#endif
