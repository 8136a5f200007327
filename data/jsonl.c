/* jsonl.c — see jsonl.h. A recursive-descent reader over a buffer in memory. */
#include "data/jsonl.h"

#include <stdint.h>
#include <string.h>

#include "data/utf8.h"

typedef struct jp {
    const unsigned char *s;
    size_t n, pos;
    int depth;
    size_t err_at;
    const char *why; /* first syntax error; NULL while none */
    int bad_utf8;    /* a string being kept held invalid UTF-8 */
    int oom;
} jp;

static int jp_fail(jp *p, const char *why) {
    if (!p->why) p->why = why, p->err_at = p->pos;
    return -1;
}

static void jp_ws(jp *p) {
    while (p->pos < p->n) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static int jp_hex4(jp *p, uint32_t *v) {
    if (p->n - p->pos < 4) return jp_fail(p, "a \\u escape needs 4 hex digits");
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p->s[p->pos + (size_t)i];
        int d = c >= '0' && c <= '9' ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return jp_fail(p, "a \\u escape needs 4 hex digits");
        x = x * 16 + (uint32_t)d;
    }
    p->pos += 4;
    *v = x;
    return 0;
}

/* A string at p->pos (the opening quote). With out, its decoded text is appended there
 * and invalid UTF-8 sets p->bad_utf8 (the syntax is still fine); without, it is checked
 * and skipped (raw bytes are not UTF-8-checked: the value is not kept). */
static int jp_string(jp *p, buf_t *out) {
    p->pos++; /* '"' */
    utf8_state u = {0};
    for (;;) {
        size_t run = p->pos;
        while (p->pos < p->n && p->s[p->pos] != '"' && p->s[p->pos] != '\\' &&
               p->s[p->pos] >= 0x20)
            p->pos++;
        if (out && p->pos > run) {
            if (utf8_scan(&u, p->s + run, p->pos - run) != p->pos - run) {
                p->bad_utf8 = 1;
                u = (utf8_state){0};
            }
            buf_putn(out, (const char *)p->s + run, p->pos - run);
        }
        if (p->pos >= p->n) return jp_fail(p, "unterminated string");
        unsigned char c = p->s[p->pos];
        if (c < 0x20) return jp_fail(p, "raw control character in a string");
        if (out && !utf8_done(&u)) { /* a multi-byte character cut by an escape or the end */
            p->bad_utf8 = 1;
            u = (utf8_state){0};
        }
        p->pos++;
        if (c == '"') break;
        if (p->pos >= p->n) return jp_fail(p, "unterminated string");
        char e = (char)p->s[p->pos++], ch = 0;
        switch (e) {
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        case '/': ch = '/'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'n': ch = '\n'; break;
        case 'r': ch = '\r'; break;
        case 't': ch = '\t'; break;
        case 'u': {
            uint32_t cp;
            if (jp_hex4(p, &cp)) return -1;
            if (cp >= 0xD800 && cp <= 0xDBFF && p->n - p->pos >= 6 && p->s[p->pos] == '\\' &&
                p->s[p->pos + 1] == 'u') {
                size_t save = p->pos;
                uint32_t lo;
                p->pos += 2;
                if (jp_hex4(p, &lo)) return -1;
                if (lo >= 0xDC00 && lo <= 0xDFFF) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else p->pos = save; /* a lone high surrogate; the next escape stands alone */
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) {
                if (out) p->bad_utf8 = 1; /* a lone surrogate has no UTF-8 form */
            } else if (out) {
                char b[4];
                buf_putn(out, b, utf8_put(cp, b));
            }
            continue;
        }
        default:
            p->pos--;
            return jp_fail(p, "unknown escape in a string");
        }
        if (out) buf_putc(out, ch);
    }
    if (out && out->oom) p->oom = 1;
    return 0;
}

static int jp_lit(jp *p, const char *lit) {
    size_t l = strlen(lit);
    if (p->n - p->pos < l || memcmp(p->s + p->pos, lit, l)) return jp_fail(p, "not a JSON value");
    p->pos += l;
    return 0;
}

static int jp_digits(jp *p) {
    size_t start = p->pos;
    while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    return p->pos > start ? 0 : jp_fail(p, "malformed number");
}

static int jp_number(jp *p) {
    if (p->s[p->pos] == '-') p->pos++;
    if (p->pos < p->n && p->s[p->pos] == '0') p->pos++;
    else if (jp_digits(p)) return -1;
    if (p->pos < p->n && p->s[p->pos] == '.') {
        p->pos++;
        if (jp_digits(p)) return -1;
    }
    if (p->pos < p->n && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->n && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        if (jp_digits(p)) return -1;
    }
    return 0;
}

static int jp_value(jp *p);

/* An object at p->pos ('{'). With field, the first string value of that key is decoded
 * into out and *found set; every other value is checked and skipped. */
static int jp_object(jp *p, const char *field, buf_t *key, buf_t *out, int *found) {
    if (++p->depth > JSONL_MAX_DEPTH) return jp_fail(p, "nested too deep");
    p->pos++;
    jp_ws(p);
    if (p->pos < p->n && p->s[p->pos] == '}') {
        p->pos++;
        p->depth--;
        return 0;
    }
    for (;;) {
        jp_ws(p);
        if (p->pos >= p->n || p->s[p->pos] != '"') return jp_fail(p, "expected a key string");
        int want = 0;
        if (field) {
            key->n = 0;
            int saved = p->bad_utf8;
            if (jp_string(p, key)) return -1;
            p->bad_utf8 = saved; /* a key's bytes do not make the text invalid */
            /* every occurrence: the last one is the record's (as Python's json, JSON.parse,
             * jq and pyarrow read a repeated key) */
            want = key->n == strlen(field) && !memcmp(key->p, field, key->n);
        } else if (jp_string(p, NULL)) {
            return -1;
        }
        jp_ws(p);
        if (p->pos >= p->n || p->s[p->pos] != ':') return jp_fail(p, "expected ':'");
        p->pos++;
        jp_ws(p);
        if (want && p->pos < p->n && p->s[p->pos] == '"') {
            out->n = 0;
            if (out->p) out->p[0] = '\0';
            p->bad_utf8 = 0;
            if (jp_string(p, out)) return -1;
            *found = 1;
        } else if (jp_value(p)) {
            return -1;
        } else if (want) { /* a later value that is no string: the record has no text */
            *found = 0, p->bad_utf8 = 0;
            out->n = 0;
            if (out->p) out->p[0] = '\0';
        }
        jp_ws(p);
        if (p->pos >= p->n) return jp_fail(p, "unterminated object");
        if (p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->s[p->pos] == '}') break;
        return jp_fail(p, "expected ',' or '}'");
    }
    p->pos++;
    p->depth--;
    return 0;
}

static int jp_value(jp *p) {
    jp_ws(p);
    if (p->pos >= p->n) return jp_fail(p, "expected a value");
    unsigned char c = p->s[p->pos];
    if (c == '{') return jp_object(p, NULL, NULL, NULL, NULL);
    if (c == '"') return jp_string(p, NULL);
    if (c == 't') return jp_lit(p, "true");
    if (c == 'f') return jp_lit(p, "false");
    if (c == 'n') return jp_lit(p, "null");
    if (c == '-' || (c >= '0' && c <= '9')) return jp_number(p);
    if (c != '[') return jp_fail(p, "not a JSON value");
    if (++p->depth > JSONL_MAX_DEPTH) return jp_fail(p, "nested too deep");
    p->pos++;
    jp_ws(p);
    if (p->pos < p->n && p->s[p->pos] == ']') {
        p->pos++;
        p->depth--;
        return 0;
    }
    for (;;) {
        if (jp_value(p)) return -1;
        jp_ws(p);
        if (p->pos >= p->n) return jp_fail(p, "unterminated array");
        if (p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->s[p->pos] == ']') break;
        return jp_fail(p, "expected ',' or ']'");
    }
    p->pos++;
    p->depth--;
    return 0;
}

/* The record at p->pos: an object whose field is decoded into out. */
static int jp_record(jp *p, const char *field, buf_t *out, jsonl_result *r) {
    buf_t key = {0};
    size_t start = p->pos;
    int found = 0;
    out->n = 0;
    if (out->p) out->p[0] = '\0';
    p->bad_utf8 = 0;
    r->at = start;
    r->why = NULL;
    if (p->pos >= p->n || p->s[p->pos] != '{') {
        r->status = jp_value(p) ? JSONL_SYNTAX : JSONL_NOT_OBJECT;
        r->why = r->status == JSONL_SYNTAX ? p->why : "not a JSON object";
    } else if (jp_object(p, field, &key, out, &found)) {
        r->status = JSONL_SYNTAX;
    } else if (p->oom || key.oom || out->oom) {
        r->status = JSONL_OOM, r->why = "out of memory";
    } else if (!found) {
        r->status = JSONL_NO_FIELD, r->why = "no string field";
        out->n = 0;
    } else if (p->bad_utf8) {
        r->status = JSONL_BAD_UTF8, r->why = "invalid UTF-8 in the text field";
    } else {
        r->status = JSONL_OK;
    }
    if (r->status == JSONL_SYNTAX) r->at = p->err_at, r->why = p->why;
    buf_free(&key);
    return r->status;
}

int jsonl_record(const char *s, size_t n, const char *field, buf_t *out, jsonl_result *r) {
    jp p = {.s = (const unsigned char *)s, .n = n};
    jp_ws(&p);
    if (jp_record(&p, field, out, r) != JSONL_OK && r->status != JSONL_NOT_OBJECT &&
        r->status != JSONL_NO_FIELD && r->status != JSONL_BAD_UTF8)
        return r->status;
    jp_ws(&p);
    if (p.pos < p.n) { /* "{} {}" or "{} x": one record per line */
        r->status = JSONL_SYNTAX, r->at = p.pos, r->why = "text after the JSON value";
        out->n = 0;
    }
    return r->status;
}

int jsonl_each(const char *s, size_t n, const char *field, buf_t *out,
               int (*fn)(void *ctx, const jsonl_result *r, const char *text, size_t len),
               void *ctx, jsonl_result *r) {
    jp p = {.s = (const unsigned char *)s, .n = n};
    /* the whole text first, so a syntax error late in a file skips all of it, not half */
    if (jp_value(&p) == 0) {
        jp_ws(&p);
        if (p.pos < p.n) jp_fail(&p, "text after the JSON value");
    }
    if (p.why) {
        *r = (jsonl_result){JSONL_SYNTAX, p.err_at, p.why};
        return JSONL_SYNTAX;
    }
    p = (jp){.s = (const unsigned char *)s, .n = n};
    jp_ws(&p);
    if (p.s[p.pos] != '[') { /* one object, or a scalar (not an object) */
        jp_record(&p, field, out, r);
        if (r->status == JSONL_OOM) return JSONL_OOM;
        return fn(ctx, r, out->p ? out->p : "", out->n);
    }
    p.pos++;
    for (;;) {
        jp_ws(&p);
        if (p.s[p.pos] == ']') break;
        jp_record(&p, field, out, r);
        if (r->status == JSONL_OOM) return JSONL_OOM;
        int rc = fn(ctx, r, out->p ? out->p : "", out->n);
        if (rc) return rc;
        jp_ws(&p);
        if (p.s[p.pos] == ',') p.pos++;
    }
    return 0;
}
