/* buf.c — growable byte strings; see buf.h. */
#include "util/buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int buf_reserve(buf_t *b, size_t add) {
    if (b->oom) return -1;
    if (add >= SIZE_MAX / 4 - b->n) {
        b->oom = 1;
        return -1;
    }
    if (b->n + add + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + add + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void buf_putn(buf_t *b, const char *s, size_t n) {
    if (buf_reserve(b, n) != 0) return;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void buf_puts(buf_t *b, const char *s) { buf_putn(b, s, strlen(s)); }

void buf_putc(buf_t *b, char c) { buf_putn(b, &c, 1); }

void buf_printf(buf_t *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if (buf_reserve(b, (size_t)n) != 0) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

char *buf_take(buf_t *b) {
    if (!b->oom) buf_reserve(b, 0); /* an empty buffer becomes "" */
    if (b->oom) {
        free(b->p);
        *b = (buf_t){0};
        return NULL;
    }
    b->p[b->n] = '\0';
    char *p = b->p;
    *b = (buf_t){0};
    return p;
}

void buf_free(buf_t *b) {
    free(b->p);
    *b = (buf_t){0};
}
