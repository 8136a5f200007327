/* thrift.h — a bounded reader of Apache Thrift's compact protocol, what Parquet's footer
 * and page headers are written in (data/parquet.c).
 *
 * Hostile input is expected: every read is checked against the end of the buffer, nesting
 * is limited (THRIFT_MAX_DEPTH), sizes are never trusted (a list's declared length is
 * checked against the bytes left), and the first problem sticks (r->bad) so that a caller
 * can read a whole struct and check once. Unknown fields are skipped whole, so newer
 * writers' additions are passed over.
 */
#ifndef TANDEM_DATA_THRIFT_H
#define TANDEM_DATA_THRIFT_H

#include <stddef.h>
#include <stdint.h>

#define THRIFT_MAX_DEPTH 32

/* Compact protocol types (the low nibble of a field header). */
enum {
    THRIFT_STOP = 0, THRIFT_TRUE = 1, THRIFT_FALSE = 2, THRIFT_BYTE = 3, THRIFT_I16 = 4, THRIFT_I32 = 5,
    THRIFT_I64 = 6, THRIFT_DOUBLE = 7, THRIFT_BINARY = 8, THRIFT_LIST = 9, THRIFT_SET = 10, THRIFT_MAP = 11,
    THRIFT_STRUCT = 12
};

typedef struct thrift_rd {
    const uint8_t *p, *end;
    int depth;
    const char *bad; /* the first problem (a static phrase), NULL while all is well */
} thrift_rd;

void thrift_init(thrift_rd *r, const void *data, size_t n);

/* The next field of the struct being read: its id and type; THRIFT_STOP (0) at the struct's
 * end or on a problem (r->bad). *last is the previous field id of this struct (start 0). */
int thrift_field(thrift_rd *r, int16_t *last, int16_t *id);
/* A bool field's value comes in its type (THRIFT_TRUE / THRIFT_FALSE). */
int64_t thrift_int(thrift_rd *r, int type);  /* I8/I16/I32/I64 by type, zigzag decoded */
/* A binary or string: *n bytes at the returned pointer (inside the buffer); NULL on a
 * problem. */
const uint8_t *thrift_binary(thrift_rd *r, size_t *n);
/* A list or set header: its element type and count (checked against the bytes left: every
 * element takes at least one byte, except bools in a list, which take one each too). */
int thrift_list(thrift_rd *r, int *elem_type, size_t *count);
/* Skips a value of `type` whole (structs, lists, maps nested up to THRIFT_MAX_DEPTH). */
void thrift_skip(thrift_rd *r, int type);
/* Enters / leaves a nested struct (depth accounting). 0, or -1 when too deep. */
int thrift_enter(thrift_rd *r);
void thrift_leave(thrift_rd *r);

#endif
