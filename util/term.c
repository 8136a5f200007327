/* term.c — see term.h. */
#include "util/term.h"

void term_text(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F) { /* C1, the 8-bit CSI among them */
            fputc('?', f);
            p++;
            continue;
        }
        fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, f);
    }
}

void term_copy(char *out, size_t cap, const char *s) {
    size_t n = 0;
    if (!cap) return;
    for (const unsigned char *p = (const unsigned char *)s; *p && n + 1 < cap; p++) {
        if (p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F) {
            out[n++] = '?';
            p++;
            continue;
        }
        out[n++] = *p < 0x20 || *p == 0x7f ? '?' : (char)*p;
    }
    out[n] = '\0';
}
