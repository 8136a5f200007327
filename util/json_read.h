/* json_read.h — reading one string field of a small JSON object (the credential
 * endpoints' answers: ECS/EKS container credentials, EC2 instance metadata). Not a
 * general parser: it walks the top-level object, skips every other value whole (nested
 * objects and arrays, strings with escapes, numbers, literals) and unescapes the one it
 * wants (\uXXXX, surrogate pairs included, to UTF-8). */
#ifndef TANDEM_UTIL_JSON_READ_H
#define TANDEM_UTIL_JSON_READ_H

#include <stddef.h>

/* 1 with out set when the object text[0..n) has `key` at its top level with a string
 * value that fits cap bytes; 0 when absent, not a string, too long, or text is not one
 * JSON object. */
int json_read_string(const char *text, size_t n, const char *key, char *out, size_t cap);

/* The same for a number value. */
int json_read_number(const char *text, size_t n, const char *key, double *out);

#endif
