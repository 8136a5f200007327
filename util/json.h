/* json.h — writing JSON values to a stream, escaped whatever the text holds.
 *
 * The callers stream their documents member by member; each value is encoded by jansson.
 * Strings: `"`, `\` and every control character are escaped (\n, \t, ... or \u00XX),
 * bytes that are not valid UTF-8 become U+FFFD, so any C string gives valid JSON.
 * Numbers: a whole number as an integer; a real in the shortest form that reads back to
 * the same double, with '.' whatever the locale; NaN and ±Inf (which JSON cannot hold)
 * are written as null. */
#ifndef TANDEM_UTIL_JSON_H
#define TANDEM_UTIL_JSON_H

#include <stdio.h>

/* s as a JSON string (with its quotes); NULL as null. */
void json_str(FILE *f, const char *s);
/* v as a JSON number, or null when it is not finite. */
void json_num(FILE *f, double v);
/* `"key":` — json_str of the key and a colon. */
void json_key(FILE *f, const char *key);

/* `"error":{"code":N,"message":MSG}` with N = code & 0xff (the exit status): the member a
 * --json document of a failed command starts with (docs/json.md). */
void json_error_member(FILE *f, int code, const char *msg);
/* A whole --json document and its newline: {ERROR, MEMBERS} — the error member when code
 * is not 0, then `body`: members each after a comma (",\"a\":1,\"b\":2"), or NULL/"". */
void json_document(FILE *f, int code, const char *msg, const char *body);

#endif
