/* codec.h — strict msgpack reading and writing helpers (msgpack-c).
 *
 * Records are msgpack maps with string keys. Writing goes through a codec_writer (an
 * msgpack sbuffer + packer). Reading is strict: codec_parse() pre-scans the bytes (every
 * declared array/map size must fit in the bytes that remain, nesting ≤ 32, exactly one
 * object, no trailing bytes) before msgpack-c allocates anything, and the field readers
 * check each value's type and range and reject unknown or duplicate keys. Every failure
 * is ERR_STORE with a message "WHAT: field 'x' ...", where WHAT names the object (its
 * store key), so a corrupt object is named to the user.
 */
#ifndef TANDEM_LEDGER_CODEC_H
#define TANDEM_LEDGER_CODEC_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/sha256.h"
#include "util/err.h"

typedef struct codec_writer {
    msgpack_sbuffer buf;
    msgpack_packer pk;
} codec_writer;

void codec_writer_init(codec_writer *w);
/* Hands the bytes over (caller frees with free()) and resets the writer. */
void *codec_writer_take(codec_writer *w, size_t *n);
void codec_writer_free(codec_writer *w);

void codec_map(codec_writer *w, size_t npairs);
void codec_array(codec_writer *w, size_t n);
void codec_key(codec_writer *w, const char *key);
void codec_str(codec_writer *w, const char *s);
void codec_u64(codec_writer *w, uint64_t v);
void codec_f64(codec_writer *w, double v);
void codec_bool(codec_writer *w, int v);
void codec_bin(codec_writer *w, const void *data, size_t n);
void codec_f64s(codec_writer *w, const double *v, size_t n);
void codec_u64s(codec_writer *w, const uint64_t *v, size_t n);

/* A parsed object; free with codec_parsed_free. */
typedef struct codec_parsed {
    msgpack_unpacked u;
    const msgpack_object *root;
} codec_parsed;

/* Parses exactly one msgpack object from data[0..n). */
int codec_parse(const void *data, size_t n, const char *what, codec_parsed *out, tdm_err *e);
void codec_parsed_free(codec_parsed *p);

/* Field access on a map object. `what` names the object in messages. */
typedef struct codec_map_reader {
    const msgpack_object *map;
    const char *what;
    tdm_err *e;
} codec_map_reader;

/* Checks that `o` is a map with string keys, no duplicates, and only keys from `allowed`
 * (NULL-terminated; NULL: any key, for a record whose later fields an older tandem skips). */
int codec_open_map(codec_map_reader *r, const msgpack_object *o, const char *what,
                   const char *const *allowed, tdm_err *e);

/* The value for key, or NULL when absent. */
const msgpack_object *codec_field(const codec_map_reader *r, const char *key);

/* Required fields of each kind; ranges inclusive. */
int codec_get_u64(const codec_map_reader *r, const char *key, uint64_t min, uint64_t max,
                  uint64_t *out);
int codec_get_f64(const codec_map_reader *r, const char *key, double *out);
int codec_get_bool(const codec_map_reader *r, const char *key, int *out);
/* A string of at most cap-1 bytes without NUL bytes, copied NUL-terminated. */
int codec_get_str(const codec_map_reader *r, const char *key, char *out, size_t cap);
int codec_get_digest(const codec_map_reader *r, const char *key, sha256_digest *out);
/* An array of exactly n finite-or-not doubles (n == SIZE_MAX: any length up to cap,
 * count in *got). */
int codec_get_f64s(const codec_map_reader *r, const char *key, double *out, size_t cap,
                   size_t *got);
int codec_get_u64s(const codec_map_reader *r, const char *key, uint64_t *out, size_t cap,
                   size_t *got);

/* Errors about a field, formatted "WHAT: field 'key' ...". */
int codec_field_error(const codec_map_reader *r, const char *key, const char *problem);

/* Typed readers of a bare object (for array elements). */
int codec_obj_u64(const msgpack_object *o, uint64_t *out);
int codec_obj_f64(const msgpack_object *o, double *out);

/* The self-digest, a sealed record's last field: "self" → the SHA-256 of every byte
 * before its 32-byte value, so a record damaged anywhere no longer matches it.
 * codec_put_self appends it (the map header must count it); codec_check_self checks it
 * when the record has one (*has = 1) and fails ERR_STORE "corrupt" when it does not
 * match. */
void codec_put_self(codec_writer *w);
int codec_check_self(const void *data, size_t n, const codec_map_reader *r, int *has);

#endif
