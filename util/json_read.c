/* json_read.c — one field of a small JSON object, on Debian's jansson; see json_read.h. */
#include "util/json_read.h"

#include <jansson.h>
#include <string.h>

/* The top-level member `key` of the object text[0..n), or NULL (not one JSON object, a
 * key given twice, or no such member); *doc holds the parsed document (json_decref it). */
static json_t *member(const char *text, size_t n, const char *key, json_t **doc) {
    json_error_t je;
    *doc = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je); /* an object at the top */
    return *doc ? json_object_get(*doc, key) : NULL;
}

int json_read_string(const char *text, size_t n, const char *key, char *out, size_t cap) {
    json_t *doc, *v = member(text, n, key, &doc);
    size_t len = v && json_is_string(v) ? json_string_length(v) : 0;
    int ok = v && json_is_string(v) && len < cap && !memchr(json_string_value(v), '\0', len);
    if (ok) memcpy(out, json_string_value(v), len + 1);
    json_decref(doc);
    return ok;
}

int json_read_number(const char *text, size_t n, const char *key, double *out) {
    json_t *doc, *v = member(text, n, key, &doc);
    int ok = v && json_is_number(v);
    if (ok) *out = json_number_value(v);
    json_decref(doc);
    return ok;
}
