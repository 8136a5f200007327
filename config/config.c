/* config.c — the config_schema table and everything derived from it (see config.h). */
#include "config/config.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/cluster_check.h"
#include "config/config_impl.h"
#include "config/presets.h"
#include "util/outfile.h"
#include "util/term.h"
#include "util/ydoc.h"

/* ---------------------------------------------------------------------------------------
 * The config_schema
 * ------------------------------------------------------------------------------------- */





/* ---------------------------------------------------------------------------------------
 * Schema helpers
 * ------------------------------------------------------------------------------------- */

static const key_def *find_key(const char *key) {
    for (size_t i = 0; i < config_nkeys; i++)
        if (strcmp(config_schema[i].key, key) == 0) return &config_schema[i];
    return NULL;
}

static void *field(config *c, const key_def *k) { return (char *)c + k->off; }

bool config_path_joined(const config *c, const char *key) {
    const key_def *k = find_key(key);
    size_t row = k ? (size_t)(k - config_schema) : 0;
    return k && (c->joined[row / 64] >> (row % 64) & 1);
}

/* Whether `name` is a section, i.e. the part before '.' of some key. */
static bool is_section(const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < config_nkeys; i++)
        if (strncmp(config_schema[i].key, name, n) == 0 && config_schema[i].key[n] == '.') return true;
    return false;
}

/* Appends printf-style text to buf (of size n, holding a string); truncates silently,
 * which only shortens human-readable text. */
void config_append(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void config_append(char *buf, size_t n, const char *fmt, ...) {
    size_t used = strlen(buf);
    if (used + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, n - used, fmt, ap);
    va_end(ap);
}

static void append_names(char *buf, size_t n, const char *const *names, const char *sep) {
    for (size_t i = 0; names[i]; i++) config_append(buf, n, "%s%s", i ? sep : "", names[i]);
}

/* A float bound as people write it ("0", "1", "1e-08" is never needed here). */
static void append_bound(char *buf, size_t n, double v) { config_append(buf, n, "%g", v); }

/* The allowed values in the notation of the docs: ">= 1", "0..65536", "> 0", "[0, 1)",
 * "cpu, cuda", "true, false", "" for strings. */
void config_allowed_text(const key_def *k, char *buf, size_t n) {
    buf[0] = '\0';
    switch (k->type) {
    case T_INT:
    case T_U64:
        if (isinf(k->hi) || k->hi >= INT_MAX) config_append(buf, n, ">= %.0f", k->lo);
        else config_append(buf, n, "%.0f..%.0f", k->lo, k->hi);
        break;
    case T_FLOAT:
        if (isinf(k->hi)) {
            config_append(buf, n, "%s ", k->lo_open ? ">" : ">=");
            append_bound(buf, n, k->lo);
        } else {
            config_append(buf, n, "%s", k->lo_open ? "(" : "[");
            append_bound(buf, n, k->lo);
            config_append(buf, n, ", ");
            append_bound(buf, n, k->hi);
            config_append(buf, n, "%s", k->hi_open ? ")" : "]");
        }
        break;
    case T_BOOL: config_append(buf, n, "true, false"); break;
    case T_ENUM: append_names(buf, n, k->names, ", "); break;
    case T_STRING: break;
    }
}

/* What a valid value looks like, for "expected ..." in error messages. */
static void expected_text(const key_def *k, char *buf, size_t n) {
    char allowed[256];
    config_allowed_text(k, allowed, sizeof allowed);
    buf[0] = '\0';
    switch (k->type) {
    case T_INT:
    case T_U64:
        config_append(buf, n, "an integer %s%s", strchr(allowed, '.') ? "in " : "", allowed);
        break;
    case T_FLOAT:
        config_append(buf, n, "a finite number %s%s", allowed[0] == '[' || allowed[0] == '(' ? "in " : "",
               allowed);
        break;
    case T_BOOL: config_append(buf, n, "true or false"); break;
    case T_ENUM: config_append(buf, n, "one of: %s", allowed); break;
    case T_STRING: config_append(buf, n, "a string"); break;
    }
}

const char *config_type_name(key_type t) {
    switch (t) {
    case T_INT:
    case T_U64: return "int";
    case T_FLOAT: return "float";
    case T_BOOL: return "bool";
    case T_ENUM: return "enum";
    case T_STRING: return "string";
    }
    return "?";
}

/* ---------------------------------------------------------------------------------------
 * Value text ↔ field
 * ------------------------------------------------------------------------------------- */

/* Plain decimal integer: [+-]?(0|[1-9][0-9]*). Returns 0 with sign and magnitude, -1 when
 * the text is not one, -2 when it is but exceeds 2^64-1, -3 for leading zeros (which
 * YAML 1.1 would read as octal, so a person might mean either). */
static int parse_int(const char *s, bool *neg, uint64_t *mag) {
    const char *p = s;
    *neg = false;
    if (*p == '+' || *p == '-') *neg = *p++ == '-';
    if (*p < '0' || *p > '9') return -1;
    const char *digits = p;
    uint64_t v = 0;
    bool over = false;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) over = true;
        else v = v * 10 + d;
    }
    if (*p) return -1;
    if (digits[0] == '0' && p - digits > 1) return -3;
    *mag = v;
    return over ? -2 : 0;
}

/* Decimal float syntax only: [+-]? digits [. digits] [e [+-] digits] (or .digits). This
 * shuts out what strtod would also take: inf, nan, hex floats, leading blanks. */
static bool float_syntax(const char *s) {
    const char *p = s;
    int digits = 0;
    if (*p == '+' || *p == '-') p++;
    while (*p >= '0' && *p <= '9') p++, digits++;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') p++, digits++;
    }
    if (!digits) return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (*p < '0' || *p > '9') return false;
        while (*p >= '0' && *p <= '9') p++;
    }
    return *p == '\0';
}

static bool looks_nonfinite(const char *s) {
    while (*s == '+' || *s == '-' || *s == '.') s++;
    return strcasecmp(s, "inf") == 0 || strcasecmp(s, "infinity") == 0 ||
           strcasecmp(s, "nan") == 0;
}

static bool float_in_range(const key_def *k, double v) {
    if (!isfinite(v)) return false;
    if (k->lo_open ? !(v > k->lo) : !(v >= k->lo)) return false;
    if (k->hi_open ? !(v < k->hi) : !(v <= k->hi)) return false;
    return true;
}

/* Parses `text` as a value of key `k` and stores it into `c`; `quoted` says the YAML
 * scalar was written in quotes (so it is a string, never a number or bool). On error
 * sets ERR_USAGE as "<where>: expected ..., got '...'" and leaves `c` unchanged. `where`
 * names the key and its origin ("file:line: tandem.K" or "--set tandem.K=x"). */
static int set_key(config *c, const key_def *k, const char *text, bool quoted,
                   const char *where, tdm_err *e) {
    char exp[320], shown[240];
    expected_text(k, exp, sizeof exp);
    /* the value as errors show it: a URL with user info pasted under the wrong key
     * ("--set tandem.K=https://u:SECRET@h") is not repeated whole */
    outfile_mask_path(text, shown, sizeof shown);
    if (quoted && (k->type == T_INT || k->type == T_U64 || k->type == T_FLOAT ||
                   k->type == T_BOOL))
        return err_set(e, ERR_USAGE,
                       "%s: expected %s, got the quoted string \"%.200s\" (write it without "
                       "quotes)",
                       where, exp, shown);
    switch (k->type) {
    case T_INT:
    case T_U64: {
        bool neg;
        uint64_t mag = 0;
        int r = parse_int(text, &neg, &mag);
        if (r == -1 || r == -3)
            return err_set(e, ERR_USAGE, "%s: expected %s, got '%.200s'%s", where, exp, shown,
                           r == -3 ? " (no leading zeros: YAML may read them as octal)"
                                   : (float_syntax(text) ? " (a plain integer, no decimals or "
                                                           "exponent)"
                                                         : ""));
        /* which side of the range it missed: "too large" says more than "out of range" */
        bool big = r == -2 || (!neg && k->type == T_INT && (mag > INT_MAX || (long long)mag > k->hi));
        bool small = neg && mag != 0 &&
                     (k->type == T_U64 || mag > INT_MAX || -(long long)mag < k->lo);
        /* a non-negative value below the range ("-0" among them: it is 0) */
        if (!big && !small && k->type == T_INT && (!neg || mag == 0) && (long long)mag < k->lo) small = true;
        if (big)
            return err_set(e, ERR_USAGE, "%s: %.200s is too large: expected %s (at most %llu)", where,
                           shown, exp,
                           k->type == T_U64 ? (unsigned long long)UINT64_MAX : (unsigned long long)k->hi);
        if (small)
            return err_set(e, ERR_USAGE, "%s: %.200s is too small: expected %s", where, shown, exp);
        long long v = neg ? -(long long)mag : (long long)mag;
        if (k->type == T_INT) *(int *)field(c, k) = (int)v;
        else *(uint64_t *)field(c, k) = mag;
        return 0;
    }
    case T_FLOAT: {
        if (!float_syntax(text))
            return err_set(e, ERR_USAGE, "%s: expected %s, got '%.200s'%s", where, exp, shown,
                           looks_nonfinite(text) ? " (inf and nan are not allowed)" : "");
        errno = 0;
        char *end;
        double v = strtod(text, &end);
        if (*end)
            return err_set(e, ERR_USAGE, "%s: '%.200s' is not a number in the C locale", where,
                           shown);
        if (errno == ERANGE && isinf(v)) /* underflow keeps the rounded value: 5e-324 is fine */
            return err_set(e, ERR_USAGE, "%s: %.200s is too large for a double: expected %s",
                           where, shown, exp);
        if (!float_in_range(k, v))
            return err_set(e, ERR_USAGE, "%s: %.200s is out of range: expected %s", where, shown,
                           exp);
        *(double *)field(c, k) = v;
        return 0;
    }
    case T_BOOL:
        if (strcmp(text, "true") && strcmp(text, "false"))
            return err_set(e, ERR_USAGE, "%s: expected %s, got '%.200s'", where, exp, shown);
        *(bool *)field(c, k) = text[0] == 't';
        return 0;
    case T_ENUM:
        for (int i = 0; k->names[i]; i++)
            if (strcmp(text, k->names[i]) == 0) {
                *(int *)field(c, k) = i;
                return 0;
            }
        return err_set(e, ERR_USAGE, "%s: expected %s; got '%.200s'", where, exp, shown);
    case T_STRING: {
        if (strlen(text) >= CONFIG_STR_MAX)
            return err_set(e, ERR_USAGE, "%s: longer than %d bytes", where, CONFIG_STR_MAX - 1);
        /* no value is meant with a control character: a block scalar's kept line end (key:
         * |), a CR from a script saved with Windows line ends; a path with one named another
         * file than it showed ("cannot open corp/dataset.yaml" with the CR unseen) */
        size_t i;
        unsigned cp;
        if (term_hidden_char(text, &i, &cp) && cp < 0x80)
            return err_set(e, ERR_USAGE, "%s: holds a control character (0x%02x at byte %zu%s): remove it", where,
                           cp, i,
                           cp == '\n' ? ", a line end: a block scalar (|) keeps it; write the value on the key's line"
                           : cp == '\r' ? ", a carriage return: Windows line ends?"
                                        : "");
        /* nor one in Unicode's clothes: NEL (YAML's line break), the C1 controls, a line or
         * paragraph separator, a zero-width or direction-changing character — the path
         * "dataset.yaml<U+0085>" failed later as "cannot open .../dataset.yaml?" (hunt) */
        if (term_hidden_char(text, &i, &cp))
            return err_set(e, ERR_USAGE, "%s: holds U+%04X at byte %zu, %s that does not show: remove it", where, cp, i,
                           cp < 0xA0 ? "a control character" : cp == 0x2028 || cp == 0x2029 ? "a line break"
                                                                                            : "a character");
        char why[512];
        if (k->check && !k->check(text, why, sizeof why))
            return err_set(e, ERR_USAGE, "%s: %s", where, why);
        memcpy(field(c, k), text, strlen(text) + 1);
        return 0;
    }
    }
    return err_set(e, ERR_INTERNAL, "%s: unknown key type", where);
}

/* The shortest of %.15g..%.17g that reads back to the same bits: exact, and "0.1" rather
 * than "0.10000000000000001" in a pinned config a person will read. */
static void format_double(double v, char *buf, size_t n) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (memcmp(&back, &v, sizeof v) == 0) return;
    }
}

/* The canonical value text of key `k` in `c` (n >= CONFIG_STR_MAX holds any value). */
void config_format_value(const config *c, const key_def *k, char *buf, size_t n) {
    const void *f = config_field(c, k);
    switch (k->type) {
    case T_INT: snprintf(buf, n, "%d", *(const int *)f); return;
    case T_U64: snprintf(buf, n, "%" PRIu64, *(const uint64_t *)f); return;
    case T_FLOAT: format_double(*(const double *)f, buf, n); return;
    case T_BOOL: snprintf(buf, n, "%s", *(const bool *)f ? "true" : "false"); return;
    case T_ENUM: {
        int v = *(const int *)f;
        int count = 0;
        while (k->names[count]) count++;
        snprintf(buf, n, "%s", v >= 0 && v < count ? k->names[v] : "?");
        return;
    }
    case T_STRING: snprintf(buf, n, "%s", (const char *)f); return;
    }
}

int config_value_text(const config *c, const char *key, char *buf, size_t n) {
    const key_def *k = find_key(key);
    if (!k) return -1;
    config_format_value(c, k, buf, n);
    return 0;
}

/* Whether the field of `k` in `c` holds a value its parser could have produced; for
 * configs filled or changed by hand. */
static bool field_valid(const config *c, const key_def *k) {
    const void *f = config_field(c, k);
    switch (k->type) {
    case T_INT: {
        int v = *(const int *)f;
        return v >= k->lo && v <= k->hi;
    }
    case T_U64: return true;
    case T_FLOAT: return float_in_range(k, *(const double *)f);
    case T_BOOL: return true;
    case T_ENUM: {
        int v = *(const int *)f, count = 0;
        while (k->names[count]) count++;
        return v >= 0 && v < count;
    }
    case T_STRING: {
        char why[512];
        return memchr(f, '\0', CONFIG_STR_MAX) != NULL &&
               (!k->check || k->check((const char *)f, why, sizeof why));
    }
    }
    return false;
}

/* ---------------------------------------------------------------------------------------
 * Unknown keys: suggestions
 * ------------------------------------------------------------------------------------- */

static int tolower_ascii(int ch) { return ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch; }

/* Optimal-string-alignment distance, case-insensitive (a swapped pair of letters counts
 * once: "lr_porbe" is one typo away from "lr_probe"). Long names are cut at 63 bytes. */
static int edit_distance(const char *a, const char *b) {
    enum { M = 64 };
    size_t la = strnlen(a, M - 1), lb = strnlen(b, M - 1);
    int d[M][M];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int ca = tolower_ascii(a[i - 1]), cb = tolower_ascii(b[j - 1]);
            int best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower_ascii(b[j - 2]) && tolower_ascii(a[i - 2]) == cb &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* " (did you mean 'X'?)" for an unknown `name`, or "" when nothing is close. Candidates
 * are the full keys, or with `top` the names allowed at the top of a file (sections and
 * undotted keys). Close means at most 2 edits (case ignored), or else the same last
 * component in another section ("model.lr" → "optim.lr", "episodes" → "run.episodes"). */
static void suggestion(const char *name, bool top, char *buf, size_t n) {
    const char *best = NULL;
    size_t best_len = 0;
    int best_d = 3;
    for (size_t i = 0; i < config_nkeys; i++) {
        const char *cand = config_schema[i].key;
        size_t len = strlen(cand);
        if (top) {
            const char *dot = strchr(cand, '.');
            if (dot) len = (size_t)(dot - cand);
        }
        char tmp[CONFIG_KEY_MAX];
        snprintf(tmp, sizeof tmp, "%.*s", (int)len, cand);
        int d = edit_distance(name, tmp);
        if (d < best_d && (size_t)d < len) best = cand, best_len = len, best_d = d;
    }
    if (!best) {
        const char *leaf = strrchr(name, '.');
        leaf = leaf ? leaf + 1 : name;
        for (size_t i = 0; i < config_nkeys && !best; i++) {
            const char *kl = strrchr(config_schema[i].key, '.');
            kl = kl ? kl + 1 : config_schema[i].key;
            if (strcasecmp(kl, leaf) == 0 && strcmp(config_schema[i].key, name) != 0)
                best = config_schema[i].key, best_len = strlen(best);
        }
    }
    if (best) snprintf(buf, n, " (did you mean '%.*s'?)", (int)best_len, best);
    else buf[0] = '\0';
}

/* "run, data, ..., checkpoint" — the sections in config_schema order. */
static void section_list(char *buf, size_t n) {
    buf[0] = '\0';
    const char *prev = NULL;
    size_t prev_len = 0;
    for (size_t i = 0; i < config_nkeys; i++) {
        const char *dot = strchr(config_schema[i].key, '.');
        if (!dot) continue;
        size_t len = (size_t)(dot - config_schema[i].key);
        if (prev && len == prev_len && strncmp(prev, config_schema[i].key, len) == 0) continue;
        config_append(buf, n, "%s%.*s", prev ? ", " : "", (int)len, config_schema[i].key);
        prev = config_schema[i].key, prev_len = len;
    }
}

/* "K, E, gamma, ..." — the keys of one section, without the section prefix. */
static void section_keys(const char *section, char *buf, size_t n) {
    size_t len = strlen(section);
    buf[0] = '\0';
    for (size_t i = 0; i < config_nkeys; i++)
        if (strncmp(config_schema[i].key, section, len) == 0 && config_schema[i].key[len] == '.')
            config_append(buf, n, "%s%s", buf[0] ? ", " : "", config_schema[i].key + len + 1);
}

/* ---------------------------------------------------------------------------------------
 * Layering
 * ------------------------------------------------------------------------------------- */

/* Where a key's value came from, so that a cross-field error can name both culprits. */
typedef enum { O_DEFAULT, O_PRESET, O_FILE, O_SET } origin_kind;
typedef struct origin {
    origin_kind kind;
    int line; /* O_FILE */
} origin;

void config_defaults(config *c) {
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < config_nkeys; i++) {
        if (!config_schema[i].def) continue; /* required: stays "" */
        tdm_err e;
        /* The defaults are literals of this file and the tests load them; failing here
         * is a config_schema bug that must not turn into a silently zero hyper-parameter. */
        if (set_key(c, &config_schema[i], config_schema[i].def, false, config_schema[i].key, &e)) {
            fprintf(stderr, "tandem: bad built-in default: %s\n", e.msg);
            abort();
        }
    }
}

/* Applies preset `p` over `c`; records O_PRESET in `from` when given. A failure is a bug
 * in the preset table (ERR_INTERNAL). */
/* Presets: the YAML files of configs/presets/ (config/presets.h), applied key by key
 * through the same parser as --set. config_preset_names[] holds the enum's order; the files are
 * found by name. */
static const config_preset_src *preset_src(int p) {
    for (const config_preset_src *s = config_preset_srcs; p > 0 && s->name; s++)
        if (strcmp(s->name, config_preset_names[p]) == 0) return s;
    return NULL; /* "none", or a name without a file (test_config catches that) */
}

/* Calls fn(key, value text, quoted, arg) for every "section: {key: value}" of preset p, in
 * the file's order; stops at the first nonzero return. A preset file that is not such a
 * map is ERR_INTERNAL (it is part of the build). */
int config_preset_each(int p, int (*fn)(const key_def *k, const ydoc_node *v, void *arg),
                       void *arg, tdm_err *e) {
    const config_preset_src *src = preset_src(p);
    if (!src) return 0;
    char name[96];
    snprintf(name, sizeof name, "preset %s", config_preset_names[p]);
    ydoc_node *root = ydoc_parse(src->text, src->len, name, e);
    if (!root) return e->code = ERR_INTERNAL;
    int rc = root->kind == YDOC_MAP ? 0 : err_set(e, ERR_INTERNAL, "%s: not a map of sections", name);
    for (size_t i = 0; !rc && i < root->n; i++) {
        const ydoc_node *sec = root->items[i];
        if (sec->kind != YDOC_MAP)
            rc = err_set(e, ERR_INTERNAL, "%s:%d: '%s' is not a section", name, sec->line, root->keys[i]);
        for (size_t j = 0; !rc && j < sec->n; j++) {
            char full[2 * CONFIG_KEY_MAX + 2];
            snprintf(full, sizeof full, "%.*s.%.*s", CONFIG_KEY_MAX, root->keys[i], CONFIG_KEY_MAX,
                     sec->keys[j]);
            const key_def *k = find_key(full);
            if (!k || sec->items[j]->kind != YDOC_SCALAR)
                rc = err_set(e, ERR_INTERNAL, "%s:%d: '%s' is not a key with a value", name,
                             sec->items[j]->line, full);
            else
                rc = fn(k, sec->items[j], arg);
        }
    }
    ydoc_free(root);
    return rc;
}

/* Preset p's one line of documentation. */
const char *config_preset_doc(int p) {
    const config_preset_src *src = preset_src(p);
    return src ? src->doc : "built-in defaults only";
}

typedef struct preset_apply {
    config *c;
    int p;
    origin *from;
    tdm_err *e;
} preset_apply;

static int apply_one(const key_def *k, const ydoc_node *v, void *arg) {
    preset_apply *a = arg;
    char where[128];
    snprintf(where, sizeof where, "preset %s: %s", config_preset_names[a->p], k->key);
    if (set_key(a->c, k, v->value, v->quoted != 0, where, a->e)) return a->e->code = ERR_INTERNAL;
    if (a->from) a->from[k - config_schema] = (origin){O_PRESET, 0};
    return 0;
}

static int apply_preset(config *c, int p, origin *from, tdm_err *e) {
    preset_apply a = {c, p, from, e};
    return config_preset_each(p, apply_one, &a, e);
}

/* " (from file:line)" and the like, for naming both keys of a cross-field error. */
static void origin_text(const origin *o, const config *c, const char *path, char *buf,
                        size_t n) {
    switch (o->kind) {
    case O_DEFAULT: snprintf(buf, n, " (default)"); break;
    case O_PRESET: snprintf(buf, n, " (from preset %s)", config_preset_names[c->preset]); break;
    case O_FILE: snprintf(buf, n, " (from %s:%d)", path ? path : "?", o->line); break;
    case O_SET: snprintf(buf, n, " (from --set)"); break;
    }
}

/* config_check, naming where each offending value came from when `from` is given (the
 * loader), and the file in the "required" message when `path` is. */
/* input: the config comes from a user (a file, --set), not from a store; the rules added
 * after runs were stored under looser ones apply to input alone, so that a stored run
 * that kept a value they refuse still loads (RUN holds every key, pinned or not). */
static int check_all(const config *c, const origin *from, const char *path, int input, tdm_err *e) {
    char va[64], vb[64], oa[CONFIG_STR_MAX / 4] = "", ob[CONFIG_STR_MAX / 4] = "";
    for (size_t i = 0; i < config_nkeys; i++)
        if (!field_valid(c, &config_schema[i])) {
            char why[512];
            if (config_schema[i].type == T_STRING && config_schema[i].check &&
                memchr(config_field(c, &config_schema[i]), '\0', CONFIG_STR_MAX))
                return err_set(e, ERR_USAGE, "%s: %s", config_schema[i].key,
                               (config_schema[i].check((const char *)config_field(c, &config_schema[i]), why,
                                                sizeof why),
                                why));
            char exp[320];
            expected_text(&config_schema[i], exp, sizeof exp);
            config_format_value(c, &config_schema[i], va, sizeof va);
            return err_set(e, ERR_USAGE, "%s = %s is out of range: expected %s", config_schema[i].key,
                           va, exp);
        }
    const key_def *ka, *kb;
#define ORIGINS(a, b)                                                                      \
    do {                                                                                   \
        ka = find_key(a), kb = find_key(b);                                                \
        if (from) {                                                                        \
            origin_text(&from[ka - config_schema], c, path, oa, sizeof oa);                       \
            origin_text(&from[kb - config_schema], c, path, ob, sizeof ob);                       \
        }                                                                                  \
        config_format_value(c, ka, va, sizeof va);                                                \
        config_format_value(c, kb, vb, sizeof vb);                                                \
    } while (0)
    if (!c->data.dataset[0]) {
        if (path)
            return err_set(e, ERR_USAGE,
                           "%s: data.dataset is required: the dataset YAML to train on (add "
                           "'dataset: PATH' under 'data:', or --set data.dataset=PATH)",
                           path);
        return err_set(e, ERR_USAGE,
                       "data.dataset is required: the dataset YAML to train on (give a config "
                       "file or --set data.dataset=PATH)");
    }
    if (c->data.mixture == CONFIG_MIXTURE_FILE && !c->data.mixture_file[0])
        return err_set(e, ERR_USAGE,
                       "data.mixture = file needs data.mixture_file: the YAML that `tandem "
                       "mixture STORE --out FILE` writes");
    if (c->model.channels % c->model.heads) {
        ORIGINS("model.channels", "model.heads");
        return err_set(e, ERR_USAGE,
                       "model.channels = %s%s is not a multiple of model.heads = %s%s: each "
                       "head gets channels/heads dimensions",
                       va, oa, vb, ob);
    }
    if (c->model.ctx > 1 << 16 && !strcmp(c->model.init, "random")) {
        ORIGINS("model.ctx", "model.init");
        return err_set(e, ERR_USAGE,
                       "model.ctx = %s%s with model.init = %s%s: a GPT-2 of the model.* shape "
                       "takes at most 65536 positions (a model of model.init hf:DIR may take "
                       "more)",
                       va, oa, vb, ob);
    }
    if (c->train.seq > c->model.ctx) {
        ORIGINS("train.seq", "model.ctx");
        return err_set(e, ERR_USAGE,
                       "train.seq = %s%s exceeds model.ctx = %s%s: a sequence must fit the "
                       "model's positions (lower train.seq or raise model.ctx)",
                       va, oa, vb, ob);
    }
    /* a validation budget below one window (train.seq targets: evaluate.c) measured
     * nothing, and every episode blamed the data */
    if (input && c->log.val_every > 0 && (long long)c->log.val_tokens < (long long)c->train.seq) {
        ORIGINS("log.val_tokens", "train.seq");
        return err_set(e, ERR_USAGE,
                       "log.val_tokens = %s%s is less than one validation window of train.seq = %s%s "
                       "tokens: no domain could be measured; raise log.val_tokens or set "
                       "log.val_every = 0",
                       va, oa, vb, ob);
    }
    /* as prep and tokenize take them (2 million threads grew the memory plan), and as
     * TANDEM_GRACE_S is read */
    if (input && c->run.threads > 1024)
        return err_set(e, ERR_USAGE, "run.threads = %d%s is out of range: expected 0..1024 (0 = all cores)",
                       c->run.threads, from ? (origin_text(&from[find_key("run.threads") - config_schema], c, path,
                                                           oa, sizeof oa), oa) : "");
    if (input && c->checkpoint.grace_s > 1e7)
        return err_set(e, ERR_USAGE, "checkpoint.grace_s = %g%s is out of range: expected [0, 1e7] seconds",
                       c->checkpoint.grace_s, from ? (origin_text(&from[find_key("checkpoint.grace_s") - config_schema], c,
                                                                  path, oa, sizeof oa), oa) : "");
    if (c->optim.lr_min > c->optim.lr) {
        ORIGINS("optim.lr_min", "optim.lr");
        return err_set(e, ERR_USAGE,
                       "optim.lr_min = %s%s exceeds optim.lr = %s%s: the schedule decays "
                       "from optim.lr down to optim.lr_min",
                       va, oa, vb, ob);
    }
    if (c->run.precision == CONFIG_PRECISION_BF16 && c->run.device != CONFIG_DEVICE_CUDA) {
        ORIGINS("run.precision", "run.device");
        return err_set(e, ERR_USAGE,
                       "run.precision = %s%s needs run.device = cuda (run.device = %s%s): the "
                       "CPU backend computes in fp32 only",
                       va, oa, vb, ob);
    }
    if (c->model.attention == CONFIG_ATTENTION_CUDNN && c->run.precision != CONFIG_PRECISION_BF16) {
        ORIGINS("model.attention", "run.precision");
        return err_set(e, ERR_USAGE,
                       "model.attention = %s%s needs run.precision = bf16 (run.precision = %s%s): "
                       "cuDNN's fused attention takes bf16 inputs; use model.attention = auto or "
                       "builtin",
                       va, oa, vb, ob);
    }
    long limit = cluster_slurm_time_seconds(c->cluster.time_limit);
    if (limit > 0 && c->cluster.signal_lead_s >= limit) {
        ORIGINS("cluster.signal_lead_s", "cluster.time_limit");
        return err_set(e, ERR_USAGE,
                       "cluster.signal_lead_s = %s%s is not shorter than cluster.time_limit = %s%s (%ld s): "
                       "Slurm would signal the job at once, and every try would stop and be requeued "
                       "without progress; lower the lead or raise the limit",
                       va, oa, vb, ob, limit);
    }
#undef ORIGINS
    return 0;
}

int config_check(const config *c, tdm_err *e) {
    tdm_err local;
    return check_all(c, NULL, NULL, 0, e ? e : &local);
}

typedef struct loader {
    config c;
    origin from[CONFIG_NKEYS_MAX];
    const char *path; /* the config file, or NULL */
} loader;

static const char *kind_name(ydoc_kind k) {
    return k == YDOC_MAP ? "a map" : k == YDOC_SEQ ? "a sequence" : "a scalar";
}

/* An unquoted empty, ~ or null: YAML's "no value", which for us is always a mistake
 * (a commented-out value), except as an empty section. */
static bool plain_null(const ydoc_node *v) {
    return v->kind == YDOC_SCALAR && !v->quoted &&
           (!v->value[0] || strcmp(v->value, "~") == 0 || strcasecmp(v->value, "null") == 0);
}

/* Sets key `k` from the YAML node `v` of the loader's file (`line`: where to point the
 * reader), resolving a relative path against the file's directory. */
static int file_key(loader *L, const key_def *k, const ydoc_node *v, int line, tdm_err *e) {
    char where[CONFIG_STR_MAX + 128];
    snprintf(where, sizeof where, "%s:%d: %s", L->path, line, k->key);
    if (v->kind != YDOC_SCALAR) {
        char exp[320];
        expected_text(k, exp, sizeof exp);
        return err_set(e, ERR_USAGE, "%s: expected %s, got %s", where, exp, kind_name(v->kind));
    }
    if (plain_null(v))
        return err_set(e, ERR_USAGE,
                       "%s: has no value; give one, or delete the line to get the default%s%s%s",
                       where, k->def ? " (" : "", k->def ? k->def : "", k->def ? ")" : "");
    const char *text = v->value, *path = text;
    char resolved[CONFIG_STR_MAX];
    const char *slash = strrchr(L->path, '/');
    int scheme = 0; /* bytes of "scheme:" before the path (F_SCHEME_PATH) */
    if ((k->flags & F_SCHEME_PATH) && strchr(text, ':')) {
        scheme = (int)(strchr(text, ':') - text) + 1;
        path = text + scheme;
    }
    /* a URL (s3://..., file://...) is not relative to anything */
    if ((k->flags & (F_PATH | F_SCHEME_PATH)) && (scheme || !(k->flags & F_SCHEME_PATH)) && path[0] &&
        path[0] != '/' && slash && !strstr(text, "://")) {
        /* checked as written too: joined, "K:S@host/x" became "/dir/K:S@host/x", whose
         * first segment no longer reads as user info, and went on into errors and RUN */
        char why[512];
        if (k->check && !k->check(text, why, sizeof why)) return err_set(e, ERR_USAGE, "%s: %s", where, why);
        /* Lexical join, no realpath: the file need not exist yet, and "..": through a
         * symlinked directory must mean what the shell would make of it. */
        int dirlen = (int)(slash - L->path) + 1; /* keeps the '/' (also for "/x.yaml") */
        int len = snprintf(resolved, sizeof resolved, "%.*s%.*s%s", scheme, text, dirlen, L->path, path);
        if (len < 0 || (size_t)len >= sizeof resolved)
            return err_set(e, ERR_USAGE,
                           "%s: the path resolved against %.*s is longer than %d bytes", where,
                           dirlen, L->path, CONFIG_STR_MAX - 1);
        text = resolved;
    }
    if (set_key(&L->c, k, text, v->quoted, where, e)) return e->code;
    L->from[k - config_schema] = (origin){O_FILE, line};
    size_t row = (size_t)(k - config_schema);
    if (text == resolved) L->c.joined[row / 64] |= 1ull << (row % 64);
    return 0;
}

/* The line of top-level key `name`. ydoc gives a block map or sequence the line of its
 * first entry, one or more lines below the key a person must fix; so on this error path
 * the file is scanned for "name:" at column 0. Falls back to the value's line. */
static int top_key_line(const loader *L, const char *name, const ydoc_node *v) {
    if (v->kind == YDOC_SCALAR) return v->line;
    FILE *f = fopen(L->path, "r");
    if (!f) return v->line;
    char *buf = NULL;
    size_t cap = 0, len = strlen(name);
    int lineno = 0, found = 0;
    while (!found && getline(&buf, &cap, f) > 0) {
        lineno++;
        if (strncmp(buf, name, len)) continue;
        const char *p = buf + len;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == ':') found = lineno;
    }
    free(buf);
    fclose(f);
    return found ? found : v->line;
}

/* `value` for a message (buf, cap bytes): whole, or with its user info as "***"
 * (outfile_mask_path), so that no error repeats a pasted credential. */
static const char *masked_value(const char *value, char *buf, size_t cap) {
    outfile_mask_path(value, buf, cap);
    return buf;
}

/* Applies every key of the file except `preset` (already applied, as a lower layer). */
static int apply_file(loader *L, const ydoc_node *root, tdm_err *e) {
    char list[512], sugg[128], shown[240];
    if (root->kind != YDOC_MAP)
        return err_set(e, ERR_USAGE,
                       "%s:%d: expected a map of sections at the top (e.g. 'tandem:' with "
                       "indented keys below), got %s",
                       L->path, root->line, kind_name(root->kind));
    for (size_t i = 0; i < root->n; i++) {
        const char *name = root->keys[i];
        const ydoc_node *v = root->items[i];
        const key_def *k = find_key(name);
        if (k && strcmp(name, "preset") == 0) continue;
        if (k && !strchr(name, '.')) {
            if (file_key(L, k, v, top_key_line(L, name, v), e)) return e->code;
            continue;
        }
        if (k) /* "tandem.K: 5" at the top: one spelling per key keeps files greppable */
            return err_set(e, ERR_USAGE,
                           "%s:%d: '%s': keys are nested in YAML files: write '%.*s:' and "
                           "below it '  %s: %s'",
                           L->path, top_key_line(L, name, v), name,
                           (int)(strchr(name, '.') - name), name,
                           strchr(name, '.') + 1,
                           /* a value holding user info is not repeated, whatever its key */
                           v->kind == YDOC_SCALAR && !(k->flags & F_NOECHO) ? masked_value(v->value, shown, sizeof shown)
                                                                            : "...");
        if (!is_section(name)) {
            suggestion(name, true, sugg, sizeof sugg);
            section_list(list, sizeof list);
            return err_set(e, ERR_USAGE,
                           "%s:%d: unknown key '%s'%s; the top level holds the sections %s "
                           "and the keys preset, store",
                           L->path, top_key_line(L, name, v), name, sugg, list);
        }
        if (plain_null(v)) continue; /* a section with every key commented out */
        if (v->kind != YDOC_MAP)
            return err_set(e, ERR_USAGE,
                           "%s:%d: '%s' is a section: expected a map of its keys (%s: then "
                           "indented 'KEY: value' lines), got %s",
                           L->path, top_key_line(L, name, v), name, name, kind_name(v->kind));
        for (size_t j = 0; j < v->n; j++) {
            char full[2 * CONFIG_KEY_MAX + 2];
            snprintf(full, sizeof full, "%.*s.%.*s", CONFIG_KEY_MAX, name, CONFIG_KEY_MAX,
                     v->keys[j]);
            const key_def *sk = find_key(full);
            if (!sk) {
                suggestion(full, false, sugg, sizeof sugg);
                section_keys(name, list, sizeof list);
                return err_set(e, ERR_USAGE, "%s:%d: unknown key '%s'%s; the keys of '%s' are %s",
                               L->path, v->items[j]->line, full, sugg, name, list);
            }
            if (file_key(L, sk, v->items[j], v->items[j]->line, e)) return e->code;
        }
    }
    return 0;
}

/* One parsed "--set key=value". */
typedef struct set_item {
    const key_def *k;
    const char *value;
    const char *text; /* the whole "key=value" */
    const char *flag; /* where it came from: "--set", or "--sweep" for a sweep point's */
} set_item;

/* The value is not repeated: a misspelt key of a value never echoed (cluster.envx=...)
 * may carry a pasted secret as well. */
static int unknown_set_key(const char *flag, const char *key, const char *text, tdm_err *e) {
    char sugg[128];
    suggestion(key, false, sugg, sizeof sugg);
    (void)text;
    return err_set(e, ERR_USAGE,
                   "%s %.100s=...: unknown key '%.100s'%s; keys are section.key (see tandem run "
                   "--help)",
                   flag, key, key, sugg);
}

int config_key_known(const char *key, const char *flag, tdm_err *e) {
    if (find_key(key)) return 0;
    char sugg[128];
    suggestion(key, false, sugg, sizeof sugg);
    return err_set(e, ERR_USAGE, "%s %.100s: unknown key '%.100s'%s; keys are section.key (see tandem run --help)",
                   flag, key, key, sugg);
}

/* Splits "key=value" at the first '=' (values may contain '=') and finds the key. */
static int split_set(const char *text, const char *flag, set_item *it, tdm_err *e) {
    const char *eq = strchr(text, '=');
    if (!eq || eq == text) {
        char shown[240]; /* "--set u:S@h", a value pasted without its key: not repeated */
        outfile_mask_path(text, shown, sizeof shown);
        return err_set(e, ERR_USAGE, "%s '%.200s': expected key=value (e.g. %s tandem.K=3)", flag,
                       shown, flag);
    }
    char key[2 * CONFIG_KEY_MAX];
    snprintf(key, sizeof key, "%.*s", (int)(eq - text), text);
    it->k = find_key(key);
    it->value = eq + 1;
    it->text = text;
    it->flag = flag;
    if (!it->k) return unknown_set_key(flag, key, text, e);
    return 0;
}

static int set_from_cli(config *c, const set_item *it, tdm_err *e) {
    char where[256];
    char shown[240];
    /* a value holding user info in any spelling ("cluster.image=https://u:S@reg/img",
     * "log.tensorboard=s3://KEY@b/tb") is shown masked whatever its key: the key's check
     * may refuse it for its shape alone */
    outfile_mask_path(it->value, shown, sizeof shown);
    if (it->k->flags & F_NOECHO) snprintf(where, sizeof where, "%s %s=...", it->flag, it->k->key);
    else snprintf(where, sizeof where, "%s %.*s%.200s", it->flag, (int)(it->value - it->text), it->text, shown);
    return set_key(c, it->k, it->value, false, where, e);
}

int config_load(config *out, const char *path, char *const *sets, int nsets, tdm_err *e) {
    return config_load_sweep(out, path, sets, nsets, 0, e);
}

int config_load_sweep(config *out, const char *path, char *const *sets, int nsets, int nsweep,
                      tdm_err *e) {
    tdm_err local;
    if (!e) e = &local;
    err_clear(e);
    int rc = 0;
    ydoc_node *root = NULL;
    set_item *items = NULL;
    loader *L = calloc(1, sizeof *L);
    if (!L || (nsets > 0 && !(items = calloc((size_t)nsets, sizeof *items)))) {
        rc = err_set(e, ERR_INTERNAL, "out of memory loading the config");
        goto done;
    }
    config_defaults(&L->c);
    L->path = path;
    for (int i = 0; i < nsets; i++)
        if ((rc = split_set(sets[i], i >= nsets - nsweep ? "--sweep" : "--set", &items[i], e)))
            goto done;
    if (path && !(root = ydoc_parse_file(path, e))) {
        rc = e->code ? e->code : ERR_USAGE;
        goto done;
    }
    /* The preset layer: the file's preset, then the last --set preset wins. */
    const key_def *pk = find_key("preset");
    const ydoc_node *pv = root ? ydoc_get(root, "preset") : NULL;
    if (pv && (rc = file_key(L, pk, pv, top_key_line(L, "preset", pv), e))) goto done;
    for (int i = 0; i < nsets; i++)
        if (items[i].k == pk) {
            if ((rc = set_from_cli(&L->c, &items[i], e))) goto done;
            L->from[pk - config_schema] = (origin){O_SET, 0};
        }
    if ((rc = apply_preset(&L->c, L->c.preset, L->from, e))) goto done;
    if (root && (rc = apply_file(L, root, e))) goto done;
    for (int i = 0; i < nsets; i++) {
        if (items[i].k == pk) continue;
        if ((rc = set_from_cli(&L->c, &items[i], e))) goto done;
        size_t row = (size_t)(items[i].k - config_schema);
        L->from[row] = (origin){O_SET, 0};
        L->c.joined[row / 64] &= ~(1ull << (row % 64)); /* --set's value: as given */
    }
    if ((rc = check_all(&L->c, L->from, path, 1, e))) goto done;
    *out = L->c;
done:
    ydoc_free(root);
    free(items);
    free(L);
    return rc;
}

int config_set(config *c, const char *key, const char *value, tdm_err *e) {
    tdm_err local;
    if (!e) e = &local;
    char text[256];
    snprintf(text, sizeof text, "%.100s=%.150s", key, value);
    set_item it = {.k = find_key(key), .value = value, .text = text, .flag = "--set"};
    if (!it.k) return unknown_set_key("--set", key, text, e);
    config *tmp = malloc(sizeof *tmp);
    if (!tmp) return err_set(e, ERR_INTERNAL, "out of memory");
    *tmp = *c;
    int rc = set_from_cli(tmp, &it, e);
    if (!rc && strcmp(key, "preset") == 0) rc = apply_preset(tmp, tmp->preset, NULL, e);
    if (!rc) *c = *tmp;
    free(tmp);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Canonical form and diff
 * ------------------------------------------------------------------------------------- */

static int cmp_key(const void *a, const void *b) {
    return strcmp((*(const key_def *const *)a)->key, (*(const key_def *const *)b)->key);
}

/* The config_schema rows sorted by key name: the order of the canonical form. */
static void sorted_keys(const key_def *order[CONFIG_NKEYS_MAX]) {
    for (size_t i = 0; i < config_nkeys; i++) order[i] = &config_schema[i];
    qsort(order, config_nkeys, sizeof order[0], cmp_key);
}

int config_canonical(const config *c, config_kv **out, size_t *n, tdm_err *e) {
    tdm_err local;
    if (!e) e = &local;
    *out = NULL;
    *n = 0;
    const key_def *order[CONFIG_NKEYS_MAX];
    sorted_keys(order);
    /* A field no parser could have produced would be pinned as text that does not load
     * back; refuse rather than store it. */
    for (size_t i = 0; i < config_nkeys; i++)
        if (!field_valid(c, order[i])) return check_all(c, NULL, NULL, 0, e);
    config_kv *kv = calloc(config_nkeys, sizeof *kv);
    if (!kv) return err_set(e, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < config_nkeys; i++) {
        snprintf(kv[i].key, sizeof kv[i].key, "%s", order[i]->key);
        config_format_value(c, order[i], kv[i].value, sizeof kv[i].value);
    }
    *out = kv;
    *n = config_nkeys;
    return 0;
}

/* Keys younger than some pinned runs that change what a run computes, with the value runs
 * pinned before them computed with (config_from_canonical fills a RUN that lacks one). */
static const struct {
    const char *key, *value;
} before_key[] = {
    {"tandem.alpha_step", "pgd"}, {"tandem.alpha_budget", "2"}, {"tandem.val_loss", "sum"},
    {"tandem.alpha_cut", "any"}, {"tandem.overfit_cap", "false"}, {"tandem.skip_pinned", "false"},
    {"tandem.start_epochs", "0"},
    {"tandem.eval_batches", "1"}, {"checkpoint.keep", "0"},
    {"checkpoint.grace_s", "0"}, {"checkpoint.snapshot", "auto"},
    {"train.micro_batch", "0"}, {"log.tensorboard", ""}, {"model.init", "random"},
    {"data.unimax_epochs", "4"}, {"data.max_epochs", ""},
    {"model.attention", "builtin"}, {"run.blas_kernels", "auto"}};

const char *config_key_before(const char *key) {
    for (size_t j = 0; j < sizeof before_key / sizeof *before_key; j++)
        if (strcmp(before_key[j].key, key) == 0) return before_key[j].value;
    return NULL;
}

int config_from_canonical(config *c, const config_kv *kv, size_t n, tdm_err *e) {
    tdm_err local;
    if (!e) e = &local;
    config *tmp = malloc(sizeof *tmp);
    if (!tmp) return err_set(e, ERR_INTERNAL, "out of memory");
    config_defaults(tmp);
    bool seen[CONFIG_NKEYS_MAX] = {false};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const key_def *k = NULL;
        if (memchr(kv[i].key, '\0', sizeof kv[i].key)) k = find_key(kv[i].key);
        if (!k) {
            rc = err_set(e, ERR_USAGE, "canonical config: unknown key '%.*s'",
                         (int)sizeof kv[i].key, kv[i].key);
        } else if (seen[k - config_schema]) {
            rc = err_set(e, ERR_USAGE, "canonical config: key '%s' appears twice", k->key);
        } else if (!memchr(kv[i].value, '\0', sizeof kv[i].value)) {
            rc = err_set(e, ERR_USAGE, "canonical config: the value of '%s' is not terminated",
                         k->key);
        } else if (k->type == T_STRING && k->check && !config_key_pinned(k->key) &&
                   strlen(kv[i].value) < CONFIG_STR_MAX && !k->check(kv[i].value, (char[512]){0}, 512)) {
            /* an unpinned value an older tandem took and this one refuses (log.tensorboard:
             * s3://b/tb, written as the local folder ./s3:/b/tb): it never changed what the
             * run computed and a resume takes its own value, so it keeps the default rather
             * than making the whole RUN read as damaged (status, eval, resume: exit 3) */
            seen[k - config_schema] = true;
        } else {
            char where[128];
            snprintf(where, sizeof where, "canonical config: %s", k->key);
            rc = set_key(tmp, k, kv[i].value, false, where, e);
            seen[k - config_schema] = true;
        }
    }
    /* cluster.* keys are younger than some pinned runs and never change what a run
     * computes: a missing one keeps its default (config_defaults above). Younger keys
     * that do change it take the value that runs pinned before them computed with. */
    /* (data.mixture has been pinned since the first version: its default moving from
     * uniform to unimax changes no pinned run) */
    for (size_t i = 0; i < config_nkeys && !rc; i++) {
        if (seen[i] || strncmp(config_schema[i].key, "cluster.", 8) == 0) continue;
        const char *old = NULL;
        for (size_t j = 0; j < sizeof before_key / sizeof *before_key; j++)
            if (strcmp(before_key[j].key, config_schema[i].key) == 0) old = before_key[j].value;
        if (old) rc = set_key(tmp, &config_schema[i], old, false, "canonical config", e);
        else rc = err_set(e, ERR_USAGE, "canonical config: key '%s' is missing", config_schema[i].key);
    }
    if (!rc) rc = check_all(tmp, NULL, NULL, 0, e);
    if (!rc) *c = *tmp;
    free(tmp);
    return rc;
}

int config_diff(const config *a, const config *b, const char ***keys, size_t *n, tdm_err *e) {
    tdm_err local;
    if (!e) e = &local;
    *keys = NULL;
    *n = 0;
    const key_def *order[CONFIG_NKEYS_MAX];
    sorted_keys(order);
    const char **out = malloc(config_nkeys * sizeof *out);
    char *va = malloc(2 * CONFIG_STR_MAX);
    if (!out || !va) {
        free(out);
        free(va);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    char *vb = va + CONFIG_STR_MAX;
    size_t m = 0;
    for (size_t i = 0; i < config_nkeys; i++) {
        /* Compare as canonical text: exactly what a pinned config would show, and bitwise
         * for floats (-0 differs from 0, as it may in a computation). */
        config_format_value(a, order[i], va, CONFIG_STR_MAX);
        config_format_value(b, order[i], vb, CONFIG_STR_MAX);
        if (strcmp(va, vb)) out[m++] = order[i]->key;
    }
    free(va);
    if (!m) {
        free(out);
        return 0;
    }
    *keys = out;
    *n = m;
    return 0;
}

