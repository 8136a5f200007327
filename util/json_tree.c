/* json_tree.c — the JSON tree reader (json_tree.h) on Debian's jansson: jansson parses
 * (strictly, with byte offsets in its errors) and its values are copied into arena-held
 * tjson nodes, so that callers walk plain structs and the document costs one allocation
 * per arena chunk. */
#include "util/json_tree.h"

#include <jansson.h>
#include <math.h>
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

/* A copy of s[0..n) in the arena, NUL-terminated. */
static const char *arena_str(tjson_doc *d, const char *s, size_t n) {
    char *p = arena_alloc(d, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* Copies jansson's value v into *out (depth: containers above it). -1 with err set when
 * too deep, too large or out of memory. */
static int copy_value(tjson_doc *d, const json_t *v, tjson *out, int depth, char *err, size_t cap) {
    if (depth > TJ_MAX_DEPTH) return snprintf(err, cap, "nesting deeper than %d levels", TJ_MAX_DEPTH), -1;
    switch (json_typeof(v)) {
    case JSON_NULL: out->type = TJ_NULL; return 0;
    case JSON_TRUE: out->type = TJ_TRUE; return 0;
    case JSON_FALSE: out->type = TJ_FALSE; return 0;
    case JSON_INTEGER:
        out->type = TJ_NUM;
        out->u.num = (double)json_integer_value(v);
        return 0;
    case JSON_REAL:
        out->type = TJ_NUM;
        out->u.num = json_real_value(v);
        return 0;
    case JSON_STRING: {
        size_t n = json_string_length(v);
        if (n > UINT32_MAX) return snprintf(err, cap, "a string longer than 4 GiB"), -1;
        out->type = TJ_STR;
        out->n = (uint32_t)n;
        if (!(out->u.s = arena_str(d, json_string_value(v), n))) return snprintf(err, cap, "out of memory"), -1;
        return 0;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        out->type = TJ_ARR;
        out->n = (uint32_t)n;
        if (!(out->u.kids = arena_alloc(d, (n ? n : 1) * sizeof(tjson)))) return snprintf(err, cap, "out of memory"), -1;
        memset(out->u.kids, 0, (n ? n : 1) * sizeof(tjson));
        for (size_t i = 0; i < n; i++)
            if (copy_value(d, json_array_get(v, i), &out->u.kids[i], depth + 1, err, cap)) return -1;
        return 0;
    }
    case JSON_OBJECT: {
        size_t n = json_object_size(v), i = 0;
        out->type = TJ_OBJ;
        out->n = (uint32_t)n;
        if (!(out->u.kids = arena_alloc(d, (n ? n : 1) * sizeof(tjson)))) return snprintf(err, cap, "out of memory"), -1;
        memset(out->u.kids, 0, (n ? n : 1) * sizeof(tjson));
        /* members in the document's order (jansson keeps insertion order) */
        for (void *it = json_object_iter((json_t *)v); it && i < n; it = json_object_iter_next((json_t *)v, it), i++) {
            tjson *kid = &out->u.kids[i];
            size_t kl = json_object_iter_key_len(it);
            if (!(kid->key = arena_str(d, json_object_iter_key(it), kl))) return snprintf(err, cap, "out of memory"), -1;
            kid->keylen = (uint32_t)kl;
            if (copy_value(d, json_object_iter_value(it), kid, depth + 1, err, cap)) return -1;
        }
        return 0;
    }
    }
    return snprintf(err, cap, "a value of an unknown type"), -1;
}

/* Whether the containers of text[0..n) nest deeper than TJ_MAX_DEPTH, brackets inside
 * strings aside (*at: the byte where they do). A pass before jansson's parse, whose own
 * limit is 2048 levels: a hostile file stops at 64 whether or not it is well-formed. */
static int too_deep(const char *text, size_t n, size_t *at) {
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = text[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > TJ_MAX_DEPTH) return *at = i, 1;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return 0;
}

/* Jansson's message quotes the token it stopped in ("invalid escape near '"\\\xc3'"): bytes
 * as read, so a UTF-8 character may be cut after its first byte. Drops the bytes of a cut
 * character before the closing quote, in place. */
static void near_whole_chars(char *msg) {
    char *q = strstr(msg, " near '");
    char *close = q ? strrchr(q + 7, '\'') : NULL;
    if (!close) return;
    char *c = close; /* back over continuation bytes to the character's first byte */
    size_t cont = 0;
    while (c > q + 7 && ((unsigned char)c[-1] & 0xC0) == 0x80 && cont < 3) c--, cont++;
    if (c == q + 7) return;
    unsigned char lead = (unsigned char)c[-1];
    size_t need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
    if (lead < 0xC0 || cont >= need) return; /* ASCII, a stray byte, or a whole character */
    memmove(c - 1, close, strlen(close) + 1);
}

tjson_doc *tjson_parse(const char *text, size_t n, const tjson **root, char *err, size_t cap) {
    char scratch[8];
    if (!cap) err = scratch, cap = sizeof scratch;
    err[0] = '\0';
    size_t at = 0;
    if (too_deep(text, n, &at)) {
        snprintf(err, cap, "nesting deeper than %d levels at byte %zu", TJ_MAX_DEPTH, at);
        return NULL;
    }
    json_error_t je;
    /* any value at the top; \u0000 inside strings is data; a key given twice is an error
     * (which of the two values counts would be the reader's guess) */
    json_t *v = json_loadb(text, n, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &je);
    if (!v) {
        const char *near = strstr(je.text, " near ");
        if (json_error_code(&je) == json_error_duplicate_key && near)
            snprintf(err, cap, "an object key is given twice: %s (at byte %d)", near + 6, je.position);
        else if (json_error_code(&je) == json_error_duplicate_key)
            snprintf(err, cap, "an object key is given twice (at byte %d)", je.position);
        else if (json_error_code(&je) == json_error_out_of_memory || !je.text[0])
            snprintf(err, cap, "out of memory while parsing it (%zu bytes of JSON take ~40 times that "
                     "in memory), not a fault of the text", n);
        else {
            near_whole_chars(je.text);
            snprintf(err, cap, "%s at byte %d", je.text, je.position);
        }
        return NULL;
    }
    tjson_doc *d = calloc(1, sizeof *d);
    if (!d) snprintf(err, cap, "out of memory");
    if (d && copy_value(d, v, &d->root, 0, err, cap)) {
        tjson_free(d);
        d = NULL;
    }
    json_decref(v);
    if (d) *root = &d->root;
    return d;
}

void tjson_free(tjson_doc *d) {
    if (!d) return;
    for (chunk *c = d->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(d);
}

const tjson *tjson_get(const tjson *o, const char *key) {
    if (!o || o->type != TJ_OBJ) return NULL;
    size_t kl = strlen(key);
    for (uint32_t i = 0; i < o->n; i++)
        if (o->u.kids[i].keylen == kl && !memcmp(o->u.kids[i].key, key, kl)) return &o->u.kids[i];
    return NULL;
}

int tjson_int(const tjson *o, const char *path, const char *key, long dflt, long lo, long hi, int *out, tdm_err *e) {
    const tjson *v = tjson_get(o, key);
    if (!v || v->type == TJ_NULL) {
        if (dflt < 0) return err_set(e, ERR_USAGE, "%s: \"%s\" is missing", path, key);
        *out = (int)dflt;
        return 0;
    }
    if (v->type != TJ_NUM || v->u.num != floor(v->u.num) || v->u.num < (double)lo || v->u.num > (double)hi)
        return err_set(e, ERR_USAGE, "%s: \"%s\" must be an integer in %ld..%ld", path, key, lo, hi);
    *out = (int)v->u.num;
    return 0;
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
