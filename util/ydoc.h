/* ydoc.h — a YAML document as a small tree (parsed with libyaml).
 *
 * Configs and dataset descriptions are YAML. This module turns one YAML document into a
 * tree of maps, sequences and scalars that remembers line numbers, so callers can name
 * "file:line: key" in their errors. Anchors/aliases, multiple documents, NUL characters
 * (\0 escapes) and tags other than YAML's own scalar types are rejected: a config must read
 * the same to a person as to the program. !!str makes a scalar a string (as quotes do).
 */
#ifndef TANDEM_UTIL_YDOC_H
#define TANDEM_UTIL_YDOC_H

#include <stddef.h>
#include <stdio.h>

#include "util/err.h"

typedef enum { YDOC_SCALAR, YDOC_SEQ, YDOC_MAP } ydoc_kind;

typedef struct ydoc_node {
    ydoc_kind kind;
    int line;    /* 1-based line in the source */
    int quoted;  /* scalar written with quotes (so "1" is a string, 1 is a number) */
    char *value; /* scalar text (NUL-terminated) */
    size_t n;    /* items in a sequence or pairs in a map */
    char **keys; /* map keys, n of them */
    struct ydoc_node **items; /* sequence items or map values, n of them */
    size_t cap;               /* room in items (and keys) */
} ydoc_node;

/* Parses `len` bytes of YAML; `name` is used in error messages. Returns a tree the caller
 * frees with ydoc_free, or NULL with `e` set (ERR_USAGE, naming name:line). An empty
 * document gives an empty map. */
ydoc_node *ydoc_parse(const char *text, size_t len, const char *name, tdm_err *e);

/* Reads and parses a file; errors name the path. */
ydoc_node *ydoc_parse_file(const char *path, tdm_err *e);

void ydoc_free(ydoc_node *n);

/* Writes `s` as a YAML double-quoted scalar: '"' and '\\' escaped, newline and tab as
 * \n and \t, other control characters as \uXXXX; what any YAML parser reads back as s. */
void ydoc_quote(FILE *f, const char *s);

/* Whether s can be written as a YAML scalar that every reader reads back: valid UTF-8
 * (shortest forms, no surrogates, nothing past U+10FFFF) without U+FFFE or U+FFFF, which
 * YAML excludes from its character set even escaped. 0 with the byte offset of the first
 * fault in *bad otherwise. Text read by ydoc_parse always passes (libyaml checks it); text
 * from the command line or the environment must be checked before it is written. */
int ydoc_text_ok(const char *s, size_t *bad);

/* The check under ydoc_text_ok, on n bytes (NUL bytes pass as U+0000): valid UTF-8, and,
 * unless nonchars_ok, no U+FFFE or U+FFFF. 1, or 0 with the first fault's offset in *bad
 * (when not NULL). */
int ydoc_utf8_ok(const char *s, size_t n, int nonchars_ok, size_t *bad);

/* The length (2 or 3) of the UTF-8 sequence at p when it encodes a C1 control (U+0080..
 * U+009F, NEL U+0085 among them), U+2028 or U+2029 — characters YAML 1.1 parsers (PyYAML,
 * go-yaml as kubectl uses it) read as line breaks, even in a comment or a block scalar —
 * with the code point in *cp; 0 otherwise. ydoc_quote escapes them as \uXXXX. */
size_t ydoc_break_char(const unsigned char *p, unsigned *cp);

/* Writes `s` as text inside a YAML comment: control characters, and the line breaks of
 * YAML 1.1 (ydoc_break_char), become '?', so that nothing after them starts a YAML line
 * of the text's choosing. */
void ydoc_comment(FILE *f, const char *s);

/* The value of `key` in map `map`, or NULL when absent (or `map` is not a map). */
const ydoc_node *ydoc_get(const ydoc_node *map, const char *key);

#endif
