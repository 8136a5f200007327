/* ydoc.c — libyaml event stream → ydoc_node tree. */
#include "util/ydoc.h"

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

static int next_event(ydoc_reader *r, yaml_event_t *ev) {
    if (!yaml_parser_parse(&r->parser, ev)) {
        return err_set(r->e, ERR_USAGE, "%s:%zu: YAML syntax error: %s (fix the file)", r->name,
                       r->parser.problem_mark.line + 1,
                       r->parser.problem ? r->parser.problem : "unknown problem");
    }
    return 0;
}

static int append(ydoc_node *parent, char *key, ydoc_node *child) {
    size_t n = parent->n + 1;
    ydoc_node **items = realloc(parent->items, n * sizeof *items);
    if (!items) return -1;
    parent->items = items;
    if (parent->kind == YDOC_MAP) {
        char **keys = realloc(parent->keys, n * sizeof *keys);
        if (!keys) return -1;
        parent->keys = keys;
        keys[n - 1] = key;
    }
    items[n - 1] = child;
    parent->n = n;
    return 0;
}

/* Reads the node that starts with event `ev` (already taken from the parser). */
static ydoc_node *read_node(ydoc_reader *r, yaml_event_t *ev, int depth);

static ydoc_node *read_collection(ydoc_reader *r, ydoc_kind kind, int line, int depth) {
    ydoc_node *n = node_new(kind, line);
    if (!n) {
        err_set(r->e, ERR_INTERNAL, "%s: out of memory", r->name);
        return NULL;
    }
    for (;;) {
        yaml_event_t ev;
        if (next_event(r, &ev)) goto fail;
        if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
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
            key = strdup((const char *)ev.data.scalar.value);
            int kline = (int)ev.start_mark.line + 1;
            yaml_event_delete(&ev);
            if (!key) goto oom;
            if (ydoc_get(n, key)) {
                err_set(r->e, ERR_USAGE, "%s:%d: key '%s' appears twice", r->name, kline, key);
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
        n = node_new(YDOC_SCALAR, line);
        if (n) {
            n->value = strdup((const char *)ev->data.scalar.value);
            n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
            if (!n->value) {
                free(n);
                n = NULL;
            }
        }
        if (!n) err_set(r->e, ERR_INTERNAL, "%s: out of memory", r->name);
        yaml_event_delete(ev);
        return n;
    case YAML_SEQUENCE_START_EVENT:
        yaml_event_delete(ev);
        return read_collection(r, YDOC_SEQ, line, depth);
    case YAML_MAPPING_START_EVENT:
        yaml_event_delete(ev);
        return read_collection(r, YDOC_MAP, line, depth);
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
    ydoc_reader r = {.name = name, .e = e};
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
