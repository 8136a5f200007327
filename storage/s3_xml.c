/* s3_xml.c — tag scanning and entities; see s3_xml.h. */
#include "storage/s3_xml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The next <tag>...</tag> at or after *pos: content bounds in [*a, *b). 1 when found. */
static int next_element(const char *xml, size_t n, const char *tag, size_t *pos, size_t *a,
                        size_t *b) {
    char open[80], close[80];
    int ol = snprintf(open, sizeof open, "<%s>", tag), cl = snprintf(close, sizeof close, "</%s>", tag);
    if (ol <= 0 || cl <= 0 || (size_t)ol >= sizeof open || (size_t)cl >= sizeof close) return 0;
    const char *p = xml + *pos, *end = xml + n;
    const char *s = memmem(p, (size_t)(end - p), open, (size_t)ol);
    if (!s) return 0;
    const char *t = memmem(s + ol, (size_t)(end - (s + ol)), close, (size_t)cl);
    if (!t) return 0;
    *a = (size_t)(s + ol - xml);
    *b = (size_t)(t - xml);
    *pos = (size_t)(t + cl - xml);
    return 1;
}

int s3_xml_decode(const char *src, size_t n, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        char ch = src[i];
        if (ch == '&') {
            const char *semi = memchr(src + i, ';', n - i > 12 ? 12 : n - i);
            if (!semi) return -1;
            size_t len = (size_t)(semi - (src + i)) + 1;
            unsigned long code = 0;
            if (!strncmp(src + i, "&amp;", len)) code = '&';
            else if (!strncmp(src + i, "&lt;", len)) code = '<';
            else if (!strncmp(src + i, "&gt;", len)) code = '>';
            else if (!strncmp(src + i, "&quot;", len)) code = '"';
            else if (!strncmp(src + i, "&apos;", len)) code = '\'';
            else if (len > 3 && src[i + 1] == '#') {
                char num[16];
                memcpy(num, src + i + 2, len - 3);
                num[len - 3] = '\0';
                char *e;
                code = num[0] == 'x' ? strtoul(num + 1, &e, 16) : strtoul(num, &e, 10);
                if (*e || code == 0 || code > 0x10FFFF) return -1;
            } else {
                return -1;
            }
            /* UTF-8 encode */
            unsigned char buf[4];
            int bl;
            if (code < 0x80) buf[0] = (unsigned char)code, bl = 1;
            else if (code < 0x800) buf[0] = (unsigned char)(0xC0 | code >> 6), buf[1] = (unsigned char)(0x80 | (code & 63)), bl = 2;
            else if (code < 0x10000) buf[0] = (unsigned char)(0xE0 | code >> 12), buf[1] = (unsigned char)(0x80 | ((code >> 6) & 63)), buf[2] = (unsigned char)(0x80 | (code & 63)), bl = 3;
            else buf[0] = (unsigned char)(0xF0 | code >> 18), buf[1] = (unsigned char)(0x80 | ((code >> 12) & 63)), buf[2] = (unsigned char)(0x80 | ((code >> 6) & 63)), buf[3] = (unsigned char)(0x80 | (code & 63)), bl = 4;
            if (o + (size_t)bl >= cap) return -1;
            memcpy(out + o, buf, (size_t)bl);
            o += (size_t)bl;
            i += len;
        } else {
            if (o + 1 >= cap) return -1;
            out[o++] = ch;
            i++;
        }
    }
    if (o >= cap) return -1;
    out[o] = '\0';
    return 0;
}

int s3_xml_first(const char *xml, size_t n, const char *tag, char *out, size_t cap) {
    size_t pos = 0, a, b;
    if (!next_element(xml, n, tag, &pos, &a, &b)) return 0;
    if (s3_xml_decode(xml + a, b - a, out, cap) == 0) return 1;
    if (cap) out[0] = '\0'; /* never a half-decoded, unterminated value */
    return 0;
}

int s3_xml_each(const char *xml, size_t n, const char *tag, int (*fn)(void *ctx, const char *text),
                void *ctx) {
    size_t pos = 0, a, b;
    char text[4097];
    while (next_element(xml, n, tag, &pos, &a, &b)) {
        if (s3_xml_decode(xml + a, b - a, text, sizeof text)) return -1;
        int r = fn(ctx, text);
        if (r) return r;
    }
    return 0;
}

int s3_xml_escape(const char *src, char *out, size_t cap) {
    size_t o = 0;
    for (; *src; src++) {
        const char *rep = NULL;
        switch (*src) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&apos;"; break;
        }
        size_t len = rep ? strlen(rep) : 1;
        if (o + len >= cap) {
            if (cap) out[o] = '\0'; /* terminated even when refused */
            return -1;
        }
        if (rep) memcpy(out + o, rep, len);
        else out[o] = *src;
        o += len;
    }
    out[o] = '\0';
    return 0;
}
