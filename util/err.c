/* err.c — formatting of tdm_err values. */
#include "util/err.h"

#include <errno.h>
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

/* A message longer than msg[] (formatted whole into `ERR_LONG` bytes first) keeps its
 * start and its end with " [...] " between them: the start names what failed, the end
 * says why and what to do, and a long name in the middle (a path near PATH_MAX, an
 * endpoint's answer) must not push the reason out. Cuts fall on UTF-8 character
 * boundaries. */
#define ERR_LONG 16384
static void err_fit(tdm_err *e, const char *text, size_t n) {
    const size_t cap = sizeof e->msg - 1;
    if (n <= cap) {
        memcpy(e->msg, text, n);
        e->msg[n] = '\0';
        return;
    }
    static const char gap[] = " [...] ";
    size_t g = sizeof gap - 1, head = (cap - g) * 2 / 5, tail = cap - g - head;
    while (head && ((unsigned char)text[head] & 0xC0) == 0x80) head--;            /* not inside a character */
    while (tail && ((unsigned char)text[n - tail] & 0xC0) == 0x80) tail--;
    memcpy(e->msg, text, head);
    memcpy(e->msg + head, gap, g);
    memcpy(e->msg + head + g, text + n - tail, tail);
    e->msg[head + g + tail] = '\0';
}

int err_set(tdm_err *e, int code, const char *fmt, ...) {
    if (!e) return code;
    e->code = code;
    char text[ERR_LONG];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    err_fit(e, text, n < 0 ? 0 : (size_t)n < sizeof text ? (size_t)n : sizeof text - 1);
    err_clean(e->msg);
    return code;
}

int err_prefix(tdm_err *e, const char *fmt, ...) {
    if (!e) return ERR_INTERNAL;
    char text[ERR_LONG];
    va_list ap;
    va_start(ap, fmt);
    int hn = vsnprintf(text, sizeof text / 2, fmt, ap);
    va_end(ap);
    if (hn < 0) return e->code;
    size_t h = (size_t)hn < sizeof text / 2 ? (size_t)hn : sizeof text / 2 - 1;
    size_t old = strnlen(e->msg, sizeof e->msg - 1);
    memcpy(text + h, e->msg, old);
    err_fit(e, text, h + old);
    err_clean(e->msg);
    return e->code;
}

int err_append(tdm_err *e, const char *fmt, ...) {
    if (!e) return ERR_INTERNAL;
    char text[ERR_LONG];
    size_t old = strnlen(e->msg, sizeof e->msg - 1);
    memcpy(text, e->msg, old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text + old, sizeof text - old, fmt, ap);
    va_end(ap);
    if (n < 0) return e->code;
    err_fit(e, text, old + ((size_t)n < sizeof text - old ? (size_t)n : sizeof text - old - 1));
    err_clean(e->msg);
    return e->code;
}

/* What to do about an errno whose cause is a limit of the process, not the file: said
 * with it, since strerror alone ("File too large" of a 2 MB object) sends users to the
 * file. "" for the others. */
static const char *limit_hint(int errno_value) {
    switch (errno_value) {
    case EFBIG: return " (the process's file-size limit, ulimit -f / RLIMIT_FSIZE, or the file system's: raise it)";
    case EMFILE: return " (the process's limit on open files, ulimit -n / RLIMIT_NOFILE: raise it)";
    case ENFILE: return " (the system's limit on open files, fs.file-max)";
    default: return "";
    }
}

int err_sys(tdm_err *e, int code, int errno_value, const char *fmt, ...) {
    if (!e) return code;
    e->code = code;
    char text[ERR_LONG];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text / 2, fmt, ap);
    va_end(ap);
    size_t used = n < 0 ? 0 : ((size_t)n < sizeof text / 2 ? (size_t)n : sizeof text / 2 - 1);
    int w = snprintf(text + used, sizeof text - used, ": %s%s", strerror(errno_value), limit_hint(errno_value));
    err_fit(e, text, used + (w < 0 ? 0 : (size_t)w < sizeof text - used ? (size_t)w : sizeof text - used - 1));
    err_clean(e->msg);
    return code;
}

void err_clear(tdm_err *e) {
    if (!e) return;
    e->code = 0;
    e->msg[0] = '\0';
}
