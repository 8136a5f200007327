/* json_read.c — one string field of a JSON object; see json_read.h. */
#include "util/json_read.h"

#include <stdlib.h>
#include <string.h>

typedef struct rd {
    const char *p, *end;
} rd;

static void ws(rd *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static int hex4(const char *p, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                   : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16;
        if (d > 15) return -1;
        *v = *v << 4 | d;
    }
    return 0;
}

/* A string at r->p (after its opening quote is checked here); unescaped into out when out
 * is not NULL. 0, or -1 when malformed or (out) too long. */
static int str(rd *r, char *out, size_t cap) {
    if (r->p >= r->end || *r->p != '"') return -1;
    r->p++;
    size_t n = 0;
    while (r->p < r->end && *r->p != '"') {
        unsigned cp;
        char c = *r->p++;
        if ((unsigned char)c < 0x20) return -1;
        if (c != '\\') {
            if (out && n + 1 >= cap) return -1;
            if (out) out[n] = c;
            n++;
            continue;
        }
        if (r->p >= r->end) return -1;
        c = *r->p++;
        switch (c) {
        case '"': case '\\': case '/': cp = (unsigned char)c; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (r->end - r->p < 4 || hex4(r->p, &cp)) return -1;
            r->p += 4;
            if (cp >= 0xD800 && cp < 0xDC00) { /* a surrogate pair */
                unsigned lo;
                if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' || hex4(r->p + 2, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return -1;
                r->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                return -1;
            }
            break;
        default:
            return -1;
        }
        char b[4];
        size_t k = cp < 0x80 ? (b[0] = (char)cp, 1)
                 : cp < 0x800 ? (b[0] = (char)(0xC0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3F)), 2)
                 : cp < 0x10000 ? (b[0] = (char)(0xE0 | cp >> 12), b[1] = (char)(0x80 | (cp >> 6 & 0x3F)),
                                   b[2] = (char)(0x80 | (cp & 0x3F)), 3)
                 : (b[0] = (char)(0xF0 | cp >> 18), b[1] = (char)(0x80 | (cp >> 12 & 0x3F)),
                    b[2] = (char)(0x80 | (cp >> 6 & 0x3F)), b[3] = (char)(0x80 | (cp & 0x3F)), 4);
        if (out && n + k >= cap) return -1;
        if (out) memcpy(out + n, b, k);
        n += k;
    }
    if (r->p >= r->end) return -1;
    r->p++;
    if (out) out[n] = '\0';
    return 0;
}

/* Skips one value of any kind. */
static int skip(rd *r, int depth) {
    ws(r);
    if (r->p >= r->end || depth > 64) return -1;
    char c = *r->p;
    if (c == '"') return str(r, NULL, 0);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        r->p++;
        ws(r);
        if (r->p < r->end && *r->p == close) return r->p++, 0;
        for (;;) {
            if (c == '{') {
                ws(r);
                if (str(r, NULL, 0)) return -1;
                ws(r);
                if (r->p >= r->end || *r->p++ != ':') return -1;
            }
            if (skip(r, depth + 1)) return -1;
            ws(r);
            if (r->p >= r->end) return -1;
            if (*r->p == ',') { r->p++; continue; }
            if (*r->p == close) return r->p++, 0;
            return -1;
        }
    }
    const char *s = r->p; /* a number or a literal */
    while (r->p < r->end && (strchr("+-.eE", *r->p) || (*r->p >= '0' && *r->p <= '9') ||
                             (*r->p >= 'a' && *r->p <= 'z')))
        r->p++;
    return r->p > s ? 0 : -1;
}

/* Walks the object text[0..n): on the top-level `key` calls take(r, ctx) at its value
 * (which must consume it; nonzero: refused). 1 when found and taken, 0 otherwise or when
 * text is not exactly one object. */
static int find(const char *text, size_t n, const char *key, int (*take)(rd *r, void *ctx), void *ctx) {
    rd r = {text, text + n};
    char k[256];
    int found = 0;
    ws(&r);
    if (r.p >= r.end || *r.p++ != '{') return 0;
    ws(&r);
    if (r.p < r.end && *r.p == '}') return 0;
    for (;;) {
        ws(&r);
        if (str(&r, k, sizeof k)) return 0;
        ws(&r);
        if (r.p >= r.end || *r.p++ != ':') return 0;
        ws(&r);
        if (!found && !strcmp(k, key)) {
            if (take(&r, ctx)) return 0;
            found = 1;
        } else if (skip(&r, 0)) {
            return 0;
        }
        ws(&r);
        if (r.p >= r.end) return 0;
        if (*r.p == ',') { r.p++; continue; }
        if (*r.p == '}') break;
        return 0;
    }
    r.p++;
    ws(&r);
    return found && r.p == r.end; /* one object and nothing after it */
}

typedef struct str_out {
    char *out;
    size_t cap;
} str_out;

static int take_str(rd *r, void *ctx) {
    str_out *o = ctx;
    return r->p < r->end && *r->p == '"' ? str(r, o->out, o->cap) : -1;
}

static int take_num(rd *r, void *ctx) {
    if (r->p >= r->end || !(*r->p == '-' || (*r->p >= '0' && *r->p <= '9'))) return -1;
    char buf[64];
    size_t k = 0;
    while (r->p < r->end && k < sizeof buf - 1 && strchr("+-.eE0123456789", *r->p)) buf[k++] = *r->p++;
    buf[k] = '\0';
    char *end;
    *(double *)ctx = strtod(buf, &end);
    return *end ? -1 : 0;
}

int json_read_string(const char *text, size_t n, const char *key, char *out, size_t cap) {
    str_out o = {out, cap};
    return find(text, n, key, take_str, &o);
}

int json_read_number(const char *text, size_t n, const char *key, double *out) {
    return find(text, n, key, take_num, out);
}
