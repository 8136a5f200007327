/* err.c — formatting of tdm_err values. */
#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int err_set(tdm_err *e, int code, const char *fmt, ...) {
    if (!e) return code;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return code;
}

int err_prefix(tdm_err *e, const char *fmt, ...) {
    if (!e) return ERR_INTERNAL;
    char head[512];
    va_list ap;
    va_start(ap, fmt);
    int hn = vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    if (hn < 0) return e->code;
    size_t h = (size_t)hn < sizeof head ? (size_t)hn : sizeof head - 1;
    size_t old = strnlen(e->msg, sizeof e->msg - 1);
    if (h + old > sizeof e->msg - 1) old = sizeof e->msg - 1 - h; /* keep the head whole */
    memmove(e->msg + h, e->msg, old);
    memcpy(e->msg, head, h);
    e->msg[h + old] = '\0';
    return e->code;
}

int err_sys(tdm_err *e, int code, int errno_value, const char *fmt, ...) {
    if (!e) return code;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    size_t used = n < 0 ? 0 : ((size_t)n < sizeof e->msg ? (size_t)n : sizeof e->msg - 1);
    const char *why = strerror(errno_value);
    size_t room = sizeof e->msg - 1 - used;
    if (room > 2) {
        memcpy(e->msg + used, ": ", 2);
        size_t w = strnlen(why, room - 2);
        memcpy(e->msg + used + 2, why, w);
        e->msg[used + 2 + w] = '\0';
    }
    return code;
}

void err_clear(tdm_err *e) {
    if (!e) return;
    e->code = 0;
    e->msg[0] = '\0';
}
