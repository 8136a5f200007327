/* ydoc.c — libyaml event stream → ydoc_node tree. */
#include "util/ydoc.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "util/fileio.h"

typedef struct {
    yaml_parser_t parser;
    const char *name;
    tdm_err *e;
    const char *text; /* the input, for the line of a reader error */
    size_t len;
} ydoc_reader;

static ydoc_node *node_new(ydoc_kind kind, int line) {
    ydoc_node *n = calloc(1, sizeof *n);
    if (n) {
        n->kind = kind;
        n->line = line;
    }
    return n;
}

void ydoc_free(ydoc_node *n) {
    if (!n) return;
    free(n->value);
    for (size_t i = 0; i < n->n; i++) {
        if (n->keys) free(n->keys[i]);
        ydoc_free(n->items[i]);
    }
    free(n->keys);
    free(n->items);
    free(n);
}

/* libyaml reads a key ("simple key") of at most YDOC_KEY_MAX characters from its start to
 * its ':', and past that reports only what it then makes of the text ("mapping values are
 * not allowed in this context", "did not find expected ',' or '}'"). The length of the
 * longest key on line `line` (1-based) of r's text, so that the error can say it; 0 when
 * no key there is that long. */
#define YDOC_KEY_MAX 1024
static size_t long_key(const ydoc_reader *r, size_t line) {
    const char *t = r->text, *end = t + r->len;
    for (size_t l = 1; t < end && l < line; t++)
        if (*t == '\n') l++;
    const char *eol = memchr(t, '\n', (size_t)(end - t));
    if (!eol) eol = end;
    size_t longest = 0;
    const char *start = t;
    for (const char *c = t; c < eol; c++) {
        if (*c == '{' || *c == '[' || *c == ',') start = c + 1;
        if (*c != ':' || (c + 1 < eol && c[1] != ' ' && c[1] != '\t' && c[1] != ',' && c[1] != '}' && c[1] != '\r'))
            continue;
        const char *k = start;
        while (k < c && (*k == ' ' || *k == '\t' || *k == '-')) k++;
        if ((size_t)(c - k) > YDOC_KEY_MAX && (size_t)(c - k) > longest) longest = (size_t)(c - k);
        start = c + 1;
    }
    return longest;
}

static int next_event(ydoc_reader *r, yaml_event_t *ev) {
    if (!yaml_parser_parse(&r->parser, ev)) {
        const yaml_parser_t *p = &r->parser;
        if (p->error == YAML_READER_ERROR) {
            /* a bad byte (not UTF-8, a control character): libyaml gives its offset, not
             * a mark (the mark stays at line 1) */
            size_t at = p->problem_offset < r->len ? p->problem_offset : r->len, line = 1;
            for (size_t i = 0; i < at; i++) line += r->text[i] == '\n';
            return err_set(r->e, ERR_USAGE, "%s:%zu: YAML syntax error: %s (byte 0x%02x at offset %zu; fix the file)",
                           r->name, line, p->problem ? p->problem : "unreadable text",
                           at < r->len ? (unsigned char)r->text[at] : 0u, at);
        }
        for (size_t l = p->problem_mark.line + 1; r->text && l >= 1 && l + 1 >= p->problem_mark.line + 1; l--) {
            size_t n = long_key(r, l); /* the key's line, or the line before it (a block map's next key) */
            if (n)
                return err_set(r->e, ERR_USAGE, "%s:%zu: a key of %zu characters: YAML keys are at most %d "
                               "characters (libyaml: %s); shorten it", r->name, l, n, YDOC_KEY_MAX,
                               p->problem ? p->problem : "unknown problem");
        }
        return err_set(r->e, ERR_USAGE, "%s:%zu: YAML syntax error: %s (fix the file)", r->name,
                       p->problem_mark.line + 1, p->problem ? p->problem : "unknown problem");
    }
    return 0;
}

/* Appends a pair (map) or an item (sequence); room grows geometrically, so a map of n
 * keys costs O(n) copies, not O(n^2). -1 when out of memory (parent unchanged). */
static int append(ydoc_node *parent, char *key, ydoc_node *child) {
    if (parent->n == parent->cap) {
        size_t cap = parent->cap ? parent->cap * 2 : 4;
        ydoc_node **items = realloc(parent->items, cap * sizeof *items);
        if (!items) return -1;
        parent->items = items;
        if (parent->kind == YDOC_MAP) {
            char **keys = realloc(parent->keys, cap * sizeof *keys);
            if (!keys) return -1;
            parent->keys = keys;
        }
        parent->cap = cap;
    }
    if (parent->kind == YDOC_MAP) parent->keys[parent->n] = key;
    parent->items[parent->n++] = child;
    return 0;
}

/* ------------------------------------------------- duplicate keys, in O(1) each */

/* The keys of the map being read, hashed: open addressing over indices into map->keys
 * (slot value i + 1; 0 is empty), at most half full. */
typedef struct {
    size_t *slot;
    size_t cap; /* a power of two */
} key_set;

static size_t key_hash(const char *s) {
    size_t h = 1469598103934665603u; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* 1 when key is already among map's keys; else records that it will be map's n-th key
 * (call before appending it) and returns 0. -1 when out of memory. */
static int key_set_add(key_set *ks, const ydoc_node *map, const char *key) {
    if (2 * (map->n + 1) > ks->cap) {
        size_t cap = ks->cap ? ks->cap * 2 : 16;
        size_t *slot = calloc(cap, sizeof *slot);
        if (!slot) return -1;
        for (size_t i = 0; i < map->n; i++) {
            size_t j = key_hash(map->keys[i]) & (cap - 1);
            while (slot[j]) j = (j + 1) & (cap - 1);
            slot[j] = i + 1;
        }
        free(ks->slot);
        ks->slot = slot;
        ks->cap = cap;
    }
    size_t j = key_hash(key) & (ks->cap - 1);
    for (; ks->slot[j]; j = (j + 1) & (ks->cap - 1))
        if (strcmp(map->keys[ks->slot[j] - 1], key) == 0) return 1;
    ks->slot[j] = map->n + 1;
    return 0;
}

/* A copy of a scalar's text; NULL with e set when it holds a NUL character (a "\0" escape
 * or a raw NUL byte), which a C string would silently cut short: "K\0junk" must not be
 * read as "K". */
static char *scalar_text(ydoc_reader *r, const yaml_event_t *ev, const char *what) {
    const char *v = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    if (memchr(v, '\0', len)) {
        err_set(r->e, ERR_USAGE, "%s:%zu: a %s holds a NUL character (a \\0 escape?); remove it",
                r->name, ev->start_mark.line + 1, what);
        return NULL;
    }
    char *s = malloc(len + 1);
    if (!s) {
        err_set(r->e, ERR_INTERNAL, "%s: out of memory", r->name);
        return NULL;
    }
    memcpy(s, v, len);
    s[len] = '\0';
    return s;
}

#define YAML_TAG_PREFIX "tag:yaml.org,2002:"

/* Checks a node's tag: none, or one of YAML's own types that fits the node. *as_string
 * (scalars): 1 for !!str and the non-specific "!", which make the text a string as quotes
 * do; 0 for !!int, !!float, !!bool and !!null, which make even quoted text a plain scalar
 * (the reader of the key then parses it); -1 for no tag (quotes decide). Any other
 * tag (!!binary, !custom, a collection tag on a scalar) is refused: the program would not
 * read the value as the tag says. */
static int check_tag(ydoc_reader *r, const yaml_event_t *ev, const unsigned char *tag_u,
                     ydoc_kind kind, int *as_string) {
    if (as_string) *as_string = -1;
    if (!tag_u) return 0;
    const char *tag = (const char *)tag_u;
    const char *core = strncmp(tag, YAML_TAG_PREFIX, strlen(YAML_TAG_PREFIX)) == 0
                           ? tag + strlen(YAML_TAG_PREFIX) : NULL;
    int ok;
    if (kind == YDOC_SCALAR) {
        int str = strcmp(tag, "!") == 0 || (core && strcmp(core, "str") == 0);
        if (as_string) *as_string = str ? 1 : 0;
        ok = str || (core && (!strcmp(core, "int") || !strcmp(core, "float") ||
                              !strcmp(core, "bool") || !strcmp(core, "null")));
    } else {
        ok = strcmp(tag, "!") == 0 ||
             (core && strcmp(core, kind == YDOC_MAP ? "map" : "seq") == 0);
    }
    if (ok) return 0;
    return err_set(r->e, ERR_USAGE, "%s:%zu: the YAML tag '%.100s' is not supported here; write "
                   "the value without it", r->name, ev->start_mark.line + 1, tag);
}

/* Reads the node that starts with event `ev` (already taken from the parser). */
static ydoc_node *read_node(ydoc_reader *r, yaml_event_t *ev, int depth);

static ydoc_node *read_collection(ydoc_reader *r, ydoc_kind kind, int line, int depth) {
    ydoc_node *n = node_new(kind, line);
    if (!n) {
        err_set(r->e, ERR_INTERNAL, "%s: out of memory", r->name);
        return NULL;
    }
    key_set seen = {0};
    for (;;) {
        yaml_event_t ev;
        if (next_event(r, &ev)) goto fail;
        if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            free(seen.slot);
            return n;
        }
        char *key = NULL;
        if (kind == YDOC_MAP) {
            if (ev.type != YAML_SCALAR_EVENT) {
                err_set(r->e, ERR_USAGE, "%s:%zu: map keys must be plain words", r->name,
                        ev.start_mark.line + 1);
                yaml_event_delete(&ev);
                goto fail;
            }
            int kline = (int)ev.start_mark.line + 1;
            key = check_tag(r, &ev, ev.data.scalar.tag, YDOC_SCALAR, NULL) ? NULL
                                                                          : scalar_text(r, &ev, "key");
            yaml_event_delete(&ev);
            if (!key) goto fail;
            int dup = key_set_add(&seen, n, key);
            if (dup) {
                if (dup < 0) err_set(r->e, ERR_INTERNAL, "%s: out of memory", r->name);
                else err_set(r->e, ERR_USAGE, "%s:%d: key '%.200s' appears twice", r->name, kline, key);
                free(key);
                goto fail;
            }
            if (next_event(r, &ev)) {
                free(key);
                goto fail;
            }
        }
        ydoc_node *child = read_node(r, &ev, depth + 1);
        if (!child) {
            free(key);
            goto fail;
        }
        if (append(n, key, child)) {
            free(key);
            ydoc_free(child);
            goto oom;
        }
    }
oom:
    err_set(r->e, ERR_INTERNAL, "%s: out of memory", r->name);
fail:
    free(seen.slot);
    ydoc_free(n);
    return NULL;
}

static ydoc_node *read_node(ydoc_reader *r, yaml_event_t *ev, int depth) {
    int line = (int)ev->start_mark.line + 1;
    if (depth > 64) {
        yaml_event_delete(ev);
        err_set(r->e, ERR_USAGE, "%s:%d: nesting deeper than 64 levels", r->name, line);
        return NULL;
    }
    ydoc_node *n = NULL;
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
    {
        int as_string;
        if (check_tag(r, ev, ev->data.scalar.tag, YDOC_SCALAR, &as_string)) {
            yaml_event_delete(ev);
            return NULL;
        }
        char *text = scalar_text(r, ev, "value");
        n = text ? node_new(YDOC_SCALAR, line) : NULL;
        if (n) {
            n->value = text;
            n->quoted = as_string >= 0 ? as_string : ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        } else if (text) {
            free(text);
            err_set(r->e, ERR_INTERNAL, "%s: out of memory", r->name);
        }
        yaml_event_delete(ev);
        return n;
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        ydoc_kind kind = ev->type == YAML_MAPPING_START_EVENT ? YDOC_MAP : YDOC_SEQ;
        int bad = check_tag(r, ev, kind == YDOC_MAP ? ev->data.mapping_start.tag
                                                    : ev->data.sequence_start.tag, kind, NULL);
        yaml_event_delete(ev);
        return bad ? NULL : read_collection(r, kind, line, depth);
    }
    case YAML_ALIAS_EVENT:
        yaml_event_delete(ev);
        err_set(r->e, ERR_USAGE, "%s:%d: YAML aliases (*name) are not supported; write the value out",
                r->name, line);
        return NULL;
    default:
        yaml_event_delete(ev);
        err_set(r->e, ERR_USAGE, "%s:%d: unexpected YAML structure", r->name, line);
        return NULL;
    }
}

ydoc_node *ydoc_parse(const char *text, size_t len, const char *name, tdm_err *e) {
    ydoc_reader r = {.name = name, .e = e, .text = text, .len = len};
    if (!yaml_parser_initialize(&r.parser)) {
        err_set(e, ERR_INTERNAL, "%s: cannot initialise the YAML parser", name);
        return NULL;
    }
    yaml_parser_set_input_string(&r.parser, (const unsigned char *)text, len);
    ydoc_node *root = NULL;
    yaml_event_t ev;
    int docs = 0;
    for (;;) {
        if (next_event(&r, &ev)) goto fail;
        yaml_event_type_t t = ev.type;
        if (t == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (t == YAML_DOCUMENT_START_EVENT) {
            int line = (int)ev.start_mark.line + 1;
            yaml_event_delete(&ev);
            if (++docs > 1) {
                err_set(e, ERR_USAGE, "%s:%d: more than one YAML document ('---'); keep one", name,
                        line);
                goto fail;
            }
            if (next_event(&r, &ev)) goto fail;
            root = read_node(&r, &ev, 0);
            if (!root) goto fail;
            continue;
        }
        yaml_event_delete(&ev); /* stream start, document end */
    }
    yaml_parser_delete(&r.parser);
    if (!root) {
        root = node_new(YDOC_MAP, 1);
        if (!root) err_set(e, ERR_INTERNAL, "%s: out of memory", name);
    }
    return root;
fail:
    ydoc_free(root);
    yaml_parser_delete(&r.parser);
    return NULL;
}

ydoc_node *ydoc_parse_file(const char *path, tdm_err *e) {
    /* a FIFO or device is refused before it can block the open (fileio_open_regular) */
    int fd = fileio_open_regular(path);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd < 0 && errno == EINVAL)
            err_set(e, ERR_USAGE, "%s is not a regular file (a FIFO, a device or a directory?): give "
                                  "the path of a file", path);
        else if (path[0] && (isspace((unsigned char)path[0]) || isspace((unsigned char)path[strlen(path) - 1])))
            /* a line break inside a quoted YAML value folds into a space no one sees (a
             * hunt: "cannot open corpus/dataset.yaml : No such file") */
            err_sys(e, ERR_USAGE, errno, "cannot open '%s' (the name begins or ends with white space: a line "
                    "break inside a quoted YAML value reads as a space)", path);
        else
            err_sys(e, ERR_USAGE, errno, "cannot open %s", path);
        if (fd >= 0) close(fd);
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            if (cap > ((size_t)64 << 20)) {
                fclose(f);
                free(buf);
                err_set(e, ERR_USAGE, "%s: larger than 64 MiB; not a config file?", path);
                return NULL;
            }
            char *nb = realloc(buf, cap);
            if (!nb) {
                fclose(f);
                free(buf);
                err_set(e, ERR_INTERNAL, "%s: out of memory", path);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        err_set(e, ERR_USAGE, "%s: read error", path);
        return NULL;
    }
    ydoc_node *root = ydoc_parse(buf, len, path, e);
    free(buf);
    return root;
}

const ydoc_node *ydoc_get(const ydoc_node *map, const char *key) {
    if (!map || map->kind != YDOC_MAP) return NULL;
    for (size_t i = 0; i < map->n; i++)
        if (strcmp(map->keys[i], key) == 0) return map->items[i];
    return NULL;
}

/* The length of a UTF-8 sequence at p that YAML 1.1 parsers (PyYAML, go-yaml) take as a
 * line break or that is a C1 control — U+0080..U+009F (NEL, U+0085, among them), U+2028
 * LINE SEPARATOR, U+2029 PARAGRAPH SEPARATOR — with its code point in *cp; 0 otherwise. */
size_t ydoc_break_char(const unsigned char *p, unsigned *cp) {
    if (p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F) {
        *cp = p[1];
        return 2;
    }
    if (p[0] == 0xE2 && p[1] == 0x80 && (p[2] == 0xA8 || p[2] == 0xA9)) {
        *cp = 0x2000u + (p[2] - 0x80u);
        return 3;
    }
    return 0;
}

int ydoc_utf8_ok(const char *s, size_t n, int nonchars_ok, size_t *bad) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i], cp, need;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) cp = c & 0x1F, need = 1;
        else if (c >= 0xE0 && c <= 0xEF) cp = c & 0x0F, need = 2;
        else if (c >= 0xF0 && c <= 0xF4) cp = c & 0x07, need = 3;
        else goto fault;
        for (unsigned k = 1; k <= need; k++) {
            if (i + k >= n || (p[i + k] & 0xC0) != 0x80) goto fault;
            cp = cp << 6 | (p[i + k] & 0x3F);
        }
        if ((need == 2 && cp < 0x800) || (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF) || (!nonchars_ok && (cp == 0xFFFE || cp == 0xFFFF)))
            goto fault;
        i += need + 1;
        continue;
    fault:
        if (bad) *bad = i;
        return 0;
    }
    return 1;
}

int ydoc_text_ok(const char *s, size_t *bad) { return ydoc_utf8_ok(s, strlen(s), 0, bad); }

void ydoc_quote(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned cp;
        size_t n = ydoc_break_char(p, &cp);
        if (n) {
            fprintf(f, "\\u%04x", cp); /* a YAML 1.1 line break even inside quotes */
            p += n - 1;
        } else if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

void ydoc_comment(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned cp;
        size_t n = ydoc_break_char(p, &cp);
        if (n) p += n - 1;
        fputc(n || *p < 0x20 || *p == 0x7f ? '?' : *p, f);
    }
}
