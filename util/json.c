/* json.c — escaped JSON output; see json.h. */
#include "util/json.h"

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

void json_str(FILE *f, const char *s) {
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc((int)c, f);
            p++;
        } else if (c < 0x20 || c == 0x7F) {
            const char *esc = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
            if (esc) fputs(esc, f);
            else fprintf(f, "\\u%04x", c);
            p++;
        } else {
            size_t n = utf8_len(p);
            if (n == 0) {
                fputs("\\ufffd", f);
                p++;
            } else {
                fwrite(p, 1, n, f);
                p += n;
            }
        }
    }
    fputc('"', f);
}

void json_num(FILE *f, double v) {
    if (!isfinite(v)) {
        fputs("null", f);
        return;
    }
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) { /* the shortest that reads back exactly */
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        for (char *c = buf; *c; c++)
            if (*c == ',') *c = '.'; /* a locale's decimal comma */
        if (strtod(buf, NULL) == v) break;
    }
    fputs(buf, f);
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
