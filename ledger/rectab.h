/* rectab.h — records described once: a record kind is a table of its fields (name, type,
 * where the value lives in the record's struct, range, when it is present), and one
 * encoder and one strict decoder work from any table (libgit2's object table; the shape of
 * config/config_keys.c). records.c and metrics.c hold the tables; only ledger/ includes
 * this.
 *
 * Bytes: a record is a msgpack map — "format" first, then the table's fields that are
 * present, in table order, then the self-digest "self" when the table seals it. The byte
 * form of every kind is pinned by tests/records/golden/ (test_records_golden).
 *
 * Decoding is strict: "format" checked first (a newer tandem's record says so), unknown
 * keys refused (but in an `open` table: the lease) and duplicate keys refused, each field's type and range checked, the self-digest checked
 * when there is one (required by some tables), then the table's own rule (`check`) over
 * the whole record. Every failure is ERR_STORE naming the object and the field.
 */
#ifndef TANDEM_LEDGER_RECTAB_H
#define TANDEM_LEDGER_RECTAB_H

#include <stddef.h>
#include <stdint.h>

#include "ledger/codec.h"
#include "ledger/records.h"

/* What a field holds. */
typedef enum {
    RT_U64,     /* uint64_t in [min, max] */
    RT_INT,     /* int in [min, max], written as an unsigned integer */
    RT_F64,     /* double, any value (RT_FINITE: finite) */
    RT_BOOL,    /* int 0/1 */
    RT_STR,     /* char[size], NUL-terminated, no NUL inside */
    RT_DIGEST,  /* sha256_digest, as 32 bytes */
    RT_DOMAINS, /* double[M]: one value per domain (the table's M); the first one read
                 * fixes M unless the table's M is read first (RT_EARLY) */
    RT_NAMES,   /* char[M][REC_DOMAIN_MAX]: one name of [A-Za-z0-9_.-] per domain */
    RT_CUSTOM,  /* the field's own put and get */
} rt_type;

/* Flags of a field. */
enum {
    RT_FINITE = 1 << 0, /* RT_F64, RT_DOMAINS: no NaN or Inf */
    RT_PROB = 1 << 1,   /* RT_DOMAINS: every value in [0, 1] (implies finite) */
    RT_NONNEG = 1 << 2, /* RT_DOMAINS: every value finite and >= 0 */
    RT_OPT = 1 << 3,    /* present when the int at `has` is nonzero; a decoder that finds it
                         * sets that int to 1 (when it is 0) */
    RT_IF = 1 << 4,     /* present exactly when the int at `has` (a field read before it) is
                         * nonzero; present otherwise, or missing then, is a fault */
    RT_EARLY = 1 << 5,  /* decoded before every other field (the table's M, flags that
                         * RT_IF fields depend on) */
    RT_META = 1 << 6,   /* not part of the record's hash (rt_put_body leaves it out) */
    RT_LOOSE = 1 << 7,  /* RT_DOMAINS: the message "is not one value per domain" for any
                         * count fault, as metrics rows have always said it */
};

/* A table's M for a record without domains. */
#define RT_NO_M ((size_t)-1)

/* The most fields a table has. */
#define RT_MAX_FIELDS 40

typedef struct rt_field {
    const char *name;
    rt_type type;
    size_t off;        /* offsetof the value in the record */
    size_t size;       /* RT_STR: its capacity */
    uint64_t min, max; /* RT_U64, RT_INT */
    int flags;
    size_t has;        /* RT_OPT, RT_IF: offsetof the int that says it is present */
    const char *cond;  /* RT_IF: the name of that flag's field, for messages */
    /* RT_CUSTOM: writes the value (after its key); reads it from `o` (present), 0 or an
     * ERR_* code (codec_field_error naming the field) */
    void (*put)(codec_writer *w, const void *rec);
    int (*get)(const codec_map_reader *r, const msgpack_object *o, const char *key, void *rec);
} rt_field;

/* How a record kind is sealed with a self-digest. */
typedef enum {
    RT_SEAL_NONE,     /* never (lease, RUN: rewritten or checked by their own digest) */
    RT_SEAL_ALWAYS,   /* written always; read when there (records older than it have none) */
    RT_SEAL_REQUIRED, /* written always; a record without one is damaged */
    RT_SEAL_IF,       /* written exactly when the int at seal_if is nonzero (has_gen), and then
                       * read: the field named seal_field and "self" both or neither */
} rt_seal;

typedef struct rt_table {
    const char *kind;
    size_t size;       /* sizeof the record's struct (zeroed before decoding) */
    const rt_field *fields;
    int n;
    size_t M;          /* offsetof the record's int domain count; RT_NO_M: it has none */
    rt_seal seal;
    size_t seal_if;    /* RT_SEAL_IF */
    const char *seal_field;
    /* the kind's own rule over the decoded record (NULL: none): 0, or codec_field_error */
    int (*check)(const codec_map_reader *r, void *rec);
    /* frees what a failed decode allocated (NULL: nothing to free) */
    void (*release)(void *rec);
    /* fields this tandem does not know are skipped, not refused: a record a newer tandem
     * may add optional fields to, which an older one must still read (the lease: one
     * refused was replaced, a live writer's taken over) */
    int open;
    /* a record whose int at format_run_if is set is written in REC_FORMAT_RUN (a state
     * with its run's identity), others in REC_FORMAT */
    int format_run;
    size_t format_run_if;
} rt_table;

/* The record as bytes: a malloc'd buffer, its size in *n (NULL when out of memory). */
void *rt_encode(const rt_table *t, const void *rec, size_t *n);
/* The fields of the record's hash: "format" and every present field but the RT_META ones,
 * as a map (no self-digest), into w. */
void rt_put_body(codec_writer *w, const rt_table *t, const void *rec);
/* Decodes data[0..n) into rec (zeroed first); `what` names the object in messages. */
int rt_decode(const rt_table *t, const void *data, size_t n, const char *what, void *rec, tdm_err *e);

#endif
