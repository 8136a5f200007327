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

int term_hidden_char(const char *s, size_t *at, unsigned *cp) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; p[i]; i++) {
        unsigned c = p[i];
        if (c < 0x20 || c == 0x7f) {
            *at = i, *cp = c;
            return 1;
        }
        if (c == 0xC2 && p[i + 1] >= 0x80 && p[i + 1] <= 0x9F) {
            *at = i, *cp = p[i + 1];
            return 1;
        }
        if (c == 0xE2 && p[i + 1] && p[i + 2]) {
            unsigned v = ((c & 0x0F) << 12) | ((p[i + 1] & 0x3Fu) << 6) | (p[i + 2] & 0x3Fu);
            if ((p[i + 1] & 0xC0) == 0x80 && (p[i + 2] & 0xC0) == 0x80 &&
                ((v >= 0x200B && v <= 0x200F) || v == 0x2028 || v == 0x2029 || (v >= 0x202A && v <= 0x202E) ||
                 (v >= 0x2060 && v <= 0x2064) || (v >= 0x2066 && v <= 0x2069))) {
                *at = i, *cp = v;
                return 1;
            }
        }
        if (c == 0xEF && p[i + 1] == 0xBB && p[i + 2] == 0xBF) {
            *at = i, *cp = 0xFEFF;
            return 1;
        }
    }
    return 0;
}
