/* err.c — formatting of tdm_err values. */
#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Control characters in a message become '?' (tabs stay): messages carry text from
 * outside — a key or name from a file, a path found by a glob, an endpoint's answer — and
 * are printed to a terminal, where an escape sequence would act (set the title, clear the
 * screen, hide what follows). C1 controls in UTF-8 (U+0080..U+009F, the 8-bit CSI among
 * them) too, as util/term.c's term_text. A newline stays only where two spaces follow it:
 * the messages that span lines indent their continuation lines, so a name holding a
 * newline cannot start a line of its own that reads as another message ("tandem: ..."). */
static void err_clean(char *s) {
    unsigned char *r = (unsigned char *)s, *w = r;
    while (*r) {
        if (r[0] == 0xC2 && r[1] >= 0x80 && r[1] <= 0x9F) {
            *w++ = '?';
            r += 2;
            continue;
        }
        unsigned char c = *r++;
        if (c == '\n') {
            *w++ = r[0] == ' ' && r[1] == ' ' ? '\n' : '?';
            continue;
        }
        *w++ = (c < 0x20 && c != '\t') || c == 0x7f ? '?' : c;
    }
    *w = '\0';
}

int err_set(tdm_err *e, int code, const char *fmt, ...) {
    if (!e) return code;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    err_clean(e->msg);
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
    err_clean(e->msg);
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
    err_clean(e->msg);
    return code;
}

void err_clear(tdm_err *e) {
    if (!e) return;
    e->code = 0;
    e->msg[0] = '\0';
}
