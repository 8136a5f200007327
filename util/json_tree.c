/* json_tree.c — the JSON tree reader (json_tree.h): a recursive-descent parser into
 * arena-held values. Members of a container are collected on a shared scratch stack and
 * copied to the arena once the container closes, so the tree costs one allocation per
 * arena chunk, not one per value. */
#include "util/json_tree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TJ_MAX_DEPTH 64
#define TJ_CHUNK (1u << 20)

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    max_align_t data[];
} chunk;

struct tjson_doc {
    chunk *chunks;
    tjson root;
};

typedef struct parser {
    const char *p, *end, *start;
    tjson_doc *doc;
    tjson *stack; /* scratch: members of the open containers */
    size_t sn, scap;
    char *err;
    size_t errcap;
    int failed;
} parser;

static int fail(parser *ps, const char *what) {
    if (!ps->failed)
        snprintf(ps->err, ps->errcap, "%s at byte %zu", what, (size_t)(ps->p - ps->start));
    ps->failed = 1;
    return -1;
}

/* n bytes from the arena (aligned for any type); NULL when out of memory. */
static void *arena_alloc(tjson_doc *d, size_t n) {
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    chunk *c = d->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > TJ_CHUNK ? n : TJ_CHUNK;
        c = malloc(sizeof(chunk) + cap);
        if (!c) return NULL;
        c->next = d->chunks;
        c->used = 0;
        c->cap = cap;
        d->chunks = c;
    }
    void *r = (char *)c->data + c->used;
    c->used += n;
    return r;
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int hex4(const char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* Parses the string at ps->p (on its opening quote) into the arena: *out (NUL-terminated)
 * and *len. The unescaped form is never longer than the source, which sizes the copy. */
static int parse_string(parser *ps, const char **out, uint32_t *len) {
    const char *q = ++ps->p;
    while (q < ps->end && *q != '"') q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
    if (q >= ps->end) return fail(ps, "unterminated string");
    if ((size_t)(q - ps->p) > UINT32_MAX - 1) return fail(ps, "string too long");
    char *dst = arena_alloc(ps->doc, (size_t)(q - ps->p) + 1);
    if (!dst) return fail(ps, "out of memory");
    size_t n = 0;
    while (ps->p < q) {
        unsigned char c = (unsigned char)*ps->p;
        if (c < 0x20) return fail(ps, "control character in a string");
        if (c != '\\') {
            dst[n++] = (char)c;
            ps->p++;
            continue;
        }
        char esc = ps->p[1];
        ps->p += 2;
        switch (esc) {
        case '"': dst[n++] = '"'; break;
        case '\\': dst[n++] = '\\'; break;
        case '/': dst[n++] = '/'; break;
        case 'b': dst[n++] = '\b'; break;
        case 'f': dst[n++] = '\f'; break;
        case 'n': dst[n++] = '\n'; break;
        case 'r': dst[n++] = '\r'; break;
        case 't': dst[n++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (q - ps->p < 4 || hex4(ps->p, &cp)) return fail(ps, "bad \\u escape");
            ps->p += 4;
            if (cp >= 0xDC00 && cp < 0xE000) return fail(ps, "lone low surrogate");
            if (cp >= 0xD800 && cp < 0xDC00) {
                if (q - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' || hex4(ps->p + 2, &lo) ||
                    lo < 0xDC00 || lo >= 0xE000)
                    return fail(ps, "lone high surrogate");
                ps->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            /* a \uXXXX is 6 source bytes and at most 3 UTF-8 bytes; a pair is 12 and 4 */
            if (cp < 0x80)
                dst[n++] = (char)cp;
            else if (cp < 0x800) {
                dst[n++] = (char)(0xC0 | (cp >> 6));
                dst[n++] = (char)(0x80 | (cp & 63));
            } else if (cp < 0x10000) {
                dst[n++] = (char)(0xE0 | (cp >> 12));
                dst[n++] = (char)(0x80 | ((cp >> 6) & 63));
                dst[n++] = (char)(0x80 | (cp & 63));
            } else {
                dst[n++] = (char)(0xF0 | (cp >> 18));
                dst[n++] = (char)(0x80 | ((cp >> 12) & 63));
                dst[n++] = (char)(0x80 | ((cp >> 6) & 63));
                dst[n++] = (char)(0x80 | (cp & 63));
            }
            break;
        }
        default: ps->p -= 2; return fail(ps, "bad escape in a string");
        }
    }
    dst[n] = '\0';
    ps->p = q + 1;
    *out = dst;
    *len = (uint32_t)n;
    return 0;
}

static int push(parser *ps, const tjson *v) {
    if (ps->sn == ps->scap) {
        size_t cap = ps->scap ? ps->scap * 2 : 1024;
        tjson *s = realloc(ps->stack, cap * sizeof *s);
        if (!s) return fail(ps, "out of memory");
        ps->stack = s;
        ps->scap = cap;
    }
    ps->stack[ps->sn++] = *v;
    return 0;
}

static int parse_value(parser *ps, tjson *v, int depth);

/* An array or object whose opening bracket is at ps->p; members go through the scratch
 * stack and land in one arena array. */
static int parse_container(parser *ps, tjson *v, int depth, int obj) {
    if (depth >= TJ_MAX_DEPTH) return fail(ps, "nesting deeper than 64");
    char close = obj ? '}' : ']';
    size_t base = ps->sn;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
    } else {
        for (;;) {
            tjson m = {0};
            skip_ws(ps);
            if (obj) {
                if (ps->p >= ps->end || *ps->p != '"') return fail(ps, "expected a key");
                if (parse_string(ps, &m.key, &m.keylen)) return -1;
                skip_ws(ps);
                if (ps->p >= ps->end || *ps->p != ':') return fail(ps, "expected ':'");
                ps->p++;
            }
            const char *key = m.key;
            uint32_t keylen = m.keylen;
            if (parse_value(ps, &m, depth + 1)) return -1;
            m.key = key;
            m.keylen = keylen;
            if (push(ps, &m)) return -1;
            if (ps->sn - base > UINT32_MAX - 1) return fail(ps, "too many members");
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                continue;
            }
            if (ps->p < ps->end && *ps->p == close) {
                ps->p++;
                break;
            }
            return fail(ps, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    size_t n = ps->sn - base;
    v->type = obj ? TJ_OBJ : TJ_ARR;
    v->n = (uint32_t)n;
    v->u.kids = NULL;
    if (n) {
        v->u.kids = arena_alloc(ps->doc, n * sizeof(tjson));
        if (!v->u.kids) return fail(ps, "out of memory");
        memcpy(v->u.kids, ps->stack + base, n * sizeof(tjson));
    }
    ps->sn = base;
    return 0;
}

/* A number per the JSON grammar (checked here; strtod alone accepts more: hex, inf). */
static int parse_number(parser *ps, tjson *v) {
    const char *q = ps->p;
    if (q < ps->end && *q == '-') q++;
    if (q >= ps->end || *q < '0' || *q > '9') return fail(ps, "unexpected character");
    if (*q == '0')
        q++;
    else
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
    if (q < ps->end && *q == '.') {
        q++;
        if (q >= ps->end || *q < '0' || *q > '9') return fail(ps, "bad number");
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < ps->end && (*q == '+' || *q == '-')) q++;
        if (q >= ps->end || *q < '0' || *q > '9') return fail(ps, "bad number");
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
    }
    char tmp[64];
    size_t len = (size_t)(q - ps->p);
    if (len >= sizeof tmp) {
        /* a long literal: its value as a double is still what strtod gives; copy it */
        char *big = malloc(len + 1);
        if (!big) return fail(ps, "out of memory");
        memcpy(big, ps->p, len);
        big[len] = '\0';
        v->u.num = strtod(big, NULL);
        free(big);
    } else {
        memcpy(tmp, ps->p, len);
        tmp[len] = '\0';
        v->u.num = strtod(tmp, NULL);
    }
    v->type = TJ_NUM;
    ps->p = q;
    return 0;
}

static int literal(parser *ps, const char *word, tjson_type t, tjson *v) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n))
        return fail(ps, "unexpected character");
    ps->p += n;
    v->type = t;
    return 0;
}

static int parse_value(parser *ps, tjson *v, int depth) {
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "unexpected end of input");
    switch (*ps->p) {
    case '{': return parse_container(ps, v, depth, 1);
    case '[': return parse_container(ps, v, depth, 0);
    case '"': v->type = TJ_STR; return parse_string(ps, &v->u.s, &v->n);
    case 't': return literal(ps, "true", TJ_TRUE, v);
    case 'f': return literal(ps, "false", TJ_FALSE, v);
    case 'n': return literal(ps, "null", TJ_NULL, v);
    default: return parse_number(ps, v);
    }
}

void tjson_free(tjson_doc *d) {
    if (!d) return;
    for (chunk *c = d->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(d);
}

tjson_doc *tjson_parse(const char *text, size_t n, const tjson **root, char *err, size_t cap) {
    parser ps = {.p = text, .end = text + n, .start = text, .err = err, .errcap = cap};
    if (cap) err[0] = '\0';
    ps.doc = calloc(1, sizeof *ps.doc);
    if (!ps.doc) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    int rc = parse_value(&ps, &ps.doc->root, 0);
    if (!rc) {
        skip_ws(&ps);
        if (ps.p != ps.end) rc = fail(&ps, "trailing characters after the value");
    }
    free(ps.stack);
    if (rc) {
        tjson_free(ps.doc);
        return NULL;
    }
    *root = &ps.doc->root;
    return ps.doc;
}

const tjson *tjson_get(const tjson *o, const char *key) {
    if (!o || o->type != TJ_OBJ) return NULL;
    size_t kl = strlen(key);
    for (uint32_t i = 0; i < o->n; i++)
        if (o->u.kids[i].keylen == kl && !memcmp(o->u.kids[i].key, key, kl)) return &o->u.kids[i];
    return NULL;
}

const char *tjson_type_name(const tjson *v) {
    if (!v) return "missing";
    switch (v->type) {
    case TJ_NULL: return "null";
    case TJ_FALSE:
    case TJ_TRUE: return "a boolean";
    case TJ_NUM: return "a number";
    case TJ_STR: return "a string";
    case TJ_ARR: return "an array";
    default: return "an object";
    }
}
