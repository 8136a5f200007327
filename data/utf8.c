/* utf8.c — see utf8.h. */
#include "data/utf8.h"

size_t utf8_scan(utf8_state *st, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned c = p[i];
        if (st->need) {
            if (c < st->lo || c > st->hi) return i >= st->seen ? i - st->seen : 0;
            st->need--;
            st->seen++;
            st->lo = 0x80, st->hi = 0xBF; /* only the second byte has a narrower range */
            continue;
        }
        if (c < 0x80) continue;
        st->lo = 0x80, st->hi = 0xBF;
        st->seen = 1;
        if (c >= 0xC2 && c <= 0xDF) st->need = 1;
        else if (c == 0xE0) st->need = 2, st->lo = 0xA0;       /* no overlong 3-byte */
        else if (c == 0xED) st->need = 2, st->hi = 0x9F;       /* no surrogates */
        else if (c >= 0xE1 && c <= 0xEF) st->need = 2;
        else if (c == 0xF0) st->need = 3, st->lo = 0x90;       /* no overlong 4-byte */
        else if (c >= 0xF1 && c <= 0xF3) st->need = 3;
        else if (c == 0xF4) st->need = 3, st->hi = 0x8F;       /* nothing past U+10FFFF */
        else return i; /* 0x80..0xC1 as a lead byte, or 0xF5..0xFF */
    }
    return n;
}

size_t utf8_put(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}
