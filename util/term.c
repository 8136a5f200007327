/* term.c — see term.h. */
#include "util/term.h"

/* The character at p as printed: '?' for a control character (*len = its bytes: 2 for a
 * C1 control in UTF-8, the 8-bit CSI among them), else itself. */
static char term_char(const unsigned char *p, size_t *len) {
    *len = 1;
    if (p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F) {
        *len = 2;
        return '?';
    }
    return p[0] < 0x20 || p[0] == 0x7f ? '?' : (char)p[0];
}

void term_text(FILE *f, const char *s) {
    size_t len;
    for (const unsigned char *p = (const unsigned char *)s; *p; p += len) fputc(term_char(p, &len), f);
}

void term_copy(char *out, size_t cap, const char *s) {
    if (!cap) return;
    size_t n = 0, len;
    for (const unsigned char *p = (const unsigned char *)s; *p && n + 1 < cap; p += len) out[n++] = term_char(p, &len);
    out[n] = '\0';
}
