/* utf8.h — UTF-8 checking in pieces, and encoding one code point.
 *
 * Valid means RFC 3629: no overlong forms, no surrogates (U+D800..U+DFFF), nothing above
 * U+10FFFF. The checker keeps a partial sequence across calls, so a stream can be checked
 * in read-sized pieces; a sequence still open at the end of the input is invalid
 * (utf8_done).
 */
#ifndef TANDEM_DATA_UTF8_H
#define TANDEM_DATA_UTF8_H

#include <stddef.h>
#include <stdint.h>

typedef struct utf8_state {
    unsigned need;          /* continuation bytes still expected */
    unsigned char lo, hi;   /* the range allowed for the next continuation byte */
    unsigned char seen;     /* bytes of the open sequence seen so far */
} utf8_state;               /* zeroed: at a character boundary */

/* Checks p[0..n) as the continuation of the text *st has seen. Returns n when it is
 * valid so far, else the offset where the first invalid sequence starts (0 when it
 * started in an earlier piece; *st is then undefined). */
size_t utf8_scan(utf8_state *st, const unsigned char *p, size_t n);

/* Whether the text checked so far ends at a character boundary. */
static inline int utf8_done(const utf8_state *st) { return st->need == 0; }

/* Writes code point cp (<= 0x10FFFF, not a surrogate) as 1..4 bytes to out; returns the
 * count. */
size_t utf8_put(uint32_t cp, char out[4]);

#endif
