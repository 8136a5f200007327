/* config_impl.h — what the config's files share: the schema table's row type, the
 * table, and the helpers that derive text from it (config.c: parsing, checking,
 * canonical form; config_doc.c: --help, docs/config.md's tables, YAML output). */
#ifndef TANDEM_CONFIG_CONFIG_IMPL_H
#define TANDEM_CONFIG_CONFIG_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "util/ydoc.h"

typedef enum { T_INT, T_U64, T_FLOAT, T_BOOL, T_ENUM, T_STRING } key_type;

enum {
    F_PATH = 1,   /* a path: relative values from a file resolve against its directory */
    F_NOECHO = 2, /* errors never repeat the value (it may hold a pasted secret) */
    F_UNPINNED = 4, /* not part of what a run computes: a resume may change it (run_config.c) */
    F_SCHEME_PATH = 8, /* "scheme:path": the path after the first ':' resolves as F_PATH's */
    F_DMO_ONLY = 16, /* only the α step reads it: a fixed run computes the same whatever its
                      * value, so a fixed run may resume with it changed (run_config.c) */
};

typedef struct key_def {
    const char *key;
    key_type type;
    size_t off;      /* of the field in struct config */
    const char *def; /* default as value text; NULL = required, no default */
    double lo, hi;   /* range of ints and floats; hi = INFINITY: unbounded */
    bool lo_open, hi_open;      /* floats: bound excluded */
    const char *const *names;   /* enum values, NULL-terminated, in enum order */
    unsigned flags;
    /* strings: the format check, or NULL for any text. Returns true when `s` is valid,
     * else false with `why` set to "expected ..." (never echoing a value that could be
     * a secret). */
    bool (*check)(const char *s, char *why, size_t n);
    const char *doc;
} key_def;

/* The schema, in documentation order (section by section, as a file is written);
 * config_keys.c. At most CONFIG_NKEYS_MAX rows (a compile-time check there). */
#define CONFIG_NKEYS_MAX 128
extern const key_def config_schema[];
extern const size_t config_nkeys;
/* The preset names in the enum's order ("none" first), NULL-terminated. */
extern const char *const config_preset_names[];

static inline const void *config_field(const config *c, const key_def *k) {
    return (const char *)c + k->off;
}

/* "int", "float", ...: a key's type as --help and the docs name it. */
const char *config_type_name(key_type t);
/* What values a key allows ("1..65536", "one of: a, b"), for --help and the docs. */
void config_allowed_text(const key_def *k, char *buf, size_t n);
/* A key's current value as config text (what a config file would hold). */
void config_format_value(const config *c, const key_def *k, char *buf, size_t n);
/* snprintf appended to buf (truncating). */
void config_append(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Calls fn for each key of preset p in its file's order; see config.c. */
int config_preset_each(int p, int (*fn)(const key_def *k, const ydoc_node *v, void *arg), void *arg,
                       tdm_err *e);
/* Preset p's one line of documentation. */
const char *config_preset_doc(int p);

#endif
