/* json_read.h — reading one field of a small JSON object (the credential endpoints'
 * answers: ECS/EKS container credentials, EC2 instance metadata), parsed whole by Debian's
 * jansson: \uXXXX escapes and surrogate pairs to UTF-8, malformed text refused. */
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
