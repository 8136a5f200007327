/* buf.h — a growable byte string: append, then take or free.
 *
 * Errors are sticky: an append that cannot grow the buffer sets `oom` and every later
 * append is dropped, so a writer appends unconditionally and checks `oom` once at the
 * end. The contents are always NUL-terminated once anything was appended. A zeroed
 * buf_t is empty and valid. */
#ifndef TANDEM_UTIL_BUF_H
#define TANDEM_UTIL_BUF_H

#include <stddef.h>

typedef struct buf_t {
    char *p;
    size_t n, cap;
    int oom;
} buf_t;

/* Room for `add` more bytes plus a NUL: 0, or -1 with oom set (b otherwise intact). */
int buf_reserve(buf_t *b, size_t add);
void buf_putn(buf_t *b, const char *s, size_t n);
void buf_puts(buf_t *b, const char *s);
void buf_putc(buf_t *b, char c);
/* printf into the buffer. */
void buf_printf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the NUL-terminated contents to the caller, who frees them, and empties b; NULL
 * (and b emptied) when an append failed. */
char *buf_take(buf_t *b);
void buf_free(buf_t *b);

#endif
