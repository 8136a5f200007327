/* json.c — escaped JSON output; see json.h.
 *
 * The values themselves are encoded by jansson (the same library that reads JSON in
 * util/json_tree.c), the structure around them by the callers, which stream their
 * documents member by member. Two things jansson's encoder will not do are done here
 * first: a string that is not valid UTF-8 is refused by json_stringn, so invalid bytes
 * are replaced by U+FFFD before it sees them; and a real is printed with %.17g unless a
 * precision is asked for, so the shortest precision that reads back to the same double
 * is found here and handed to it (0.1 stays "0.1", not "0.10000000000000001"). */
#include "util/json.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s) {
    unsigned c = s[0];
    size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || (n == 2 && c < 0xC2) || (n == 4 && c > 0xF4)) return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    /* overlong 3/4-byte forms, surrogates and > U+10FFFF */
    if (n == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0))) return 0;
    if (n == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))) return 0;
    return n;
}

/* Writes v with jansson's encoder and releases it; a value that could not be made (out
 * of memory) is written as null, so the document stays valid JSON. */
static void dump_value(FILE *f, json_t *v, size_t flags) {
    if (!v || json_dumpf(v, f, flags | JSON_ENCODE_ANY) != 0) fputs("null", f);
    json_decref(v);
}

void json_str(FILE *f, const char *s) {
    if (!s) {
        fputs("null", f);
        return;
    }
    /* s with every byte that does not start a valid UTF-8 sequence replaced by U+FFFD
     * (3 bytes for 1: at most 3 times as long) */
    size_t len = strlen(s);
    char *clean = malloc(3 * len + 1);
    if (!clean) {
        fputs("null", f);
        return;
    }
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_len(p);
        if (n == 0) {
            memcpy(clean + o, "\xEF\xBF\xBD", 3), o += 3, p++;
        } else {
            memcpy(clean + o, p, n), o += n, p += n;
        }
    }
    dump_value(f, json_stringn(clean, o), 0);
    free(clean);
}

void json_num(FILE *f, double v) {
    if (!isfinite(v)) {
        fputs("null", f);
        return;
    }
    /* a whole number (counts, episodes, steps) as an integer, as it always was: jansson
     * would print a real 250 as "250.0", which readers that want an integer refuse */
    if (v == floor(v) && fabs(v) < 9007199254740992.0 && !(v == 0 && signbit(v))) {
        dump_value(f, json_integer((json_int_t)v), 0);
        return;
    }
    int prec = 15; /* the shortest that reads back exactly */
    for (char buf[40]; prec < 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        for (char *c = buf; *c; c++)
            if (*c == ',') *c = '.'; /* a locale's decimal comma */
        if (strtod(buf, NULL) == v) break;
    }
    dump_value(f, json_real(v), JSON_REAL_PRECISION(prec));
}

void json_key(FILE *f, const char *key) {
    json_str(f, key);
    fputc(':', f);
}

void json_error_member(FILE *f, int code, const char *msg) {
    fprintf(f, "\"error\":{\"code\":%d,\"message\":", code & 0xff);
    json_str(f, msg);
    fputc('}', f);
}

void json_document(FILE *f, int code, const char *msg, const char *body) {
    fputc('{', f);
    if (code) json_error_member(f, code, msg);
    if (body && *body) fputs(code ? body : body + 1, f);
    fputs("}\n", f);
}
