/* nfc.c — NFC (nfc.h): canonical decomposition (recursive; Hangul by arithmetic),
 * canonical ordering of combining marks, then canonical composition of each mark with
 * the last starter it is not blocked from (UAX #15). */
#include "data/nfc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/pretok.h"
#include "data/unicode_tables.h"

#define RAW 0x80000000u /* an invalid byte, kept: RAW | byte */
enum {
    SBASE = 0xAC00,
    LBASE = 0x1100,
    VBASE = 0x1161,
    TBASE = 0x11A7,
    LCOUNT = 19,
    VCOUNT = 21,
    TCOUNT = 28
};
#define NCOUNT (VCOUNT * TCOUNT)
#define SCOUNT (LCOUNT * NCOUNT)

static unsigned ccc(uint32_t cp) {
    if (cp < 0x300 || cp & RAW) return 0;
    size_t lo = 0, hi = unicode_nccc;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (unicode_ccc[mid][0] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < unicode_nccc && unicode_ccc[lo][0] == cp ? unicode_ccc[lo][1] : 0;
}

static const uint32_t *decomp(uint32_t cp) {
    size_t lo = 0, hi = unicode_ndecomp;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (unicode_decomp[mid][0] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < unicode_ndecomp && unicode_decomp[lo][0] == cp ? unicode_decomp[lo] : NULL;
}

/* The primary composite of (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE &&
        b < TBASE + TCOUNT)
        return a + (b - TBASE);
    size_t lo = 0, hi = unicode_ncomp;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (unicode_comp[mid][0] < a || (unicode_comp[mid][0] == a && unicode_comp[mid][1] < b))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < unicode_ncomp && unicode_comp[lo][0] == a && unicode_comp[lo][1] == b
               ? unicode_comp[lo][2]
               : 0;
}

/* Appends the full canonical decomposition of cp to v (room checked by the caller: a
 * code point decomposes into at most 4 here, Unicode's maximum for canonical forms). */
static void decompose(uint32_t cp, uint32_t *v, size_t *k) {
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t s = cp - SBASE;
        v[(*k)++] = LBASE + s / NCOUNT;
        v[(*k)++] = VBASE + (s % NCOUNT) / TCOUNT;
        if (s % TCOUNT) v[(*k)++] = TBASE + s % TCOUNT;
        return;
    }
    const uint32_t *d = cp < 0xC0 || cp & RAW ? NULL : decomp(cp);
    if (!d) {
        v[(*k)++] = cp;
        return;
    }
    decompose(d[1], v, k);
    if (d[2]) decompose(d[2], v, k);
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp & RAW) return o[0] = (char)(cp & 0xFF), 1;
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 63)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 63)),
               o[2] = (char)(0x80 | (cp & 63)), 3;
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63)), o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

int nfc_normalize(const char *text, size_t n, char **out, size_t *outn) {
    *out = NULL;
    size_t i = 0;
    while (i < n) {
        if ((unsigned char)text[i] < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp = pretok_utf8(text, n, i, &len);
        if (cp != 0xFFFFFFFFu && cp >= 0x300) break;
        i += len;
    }
    if (i == n) return 0;
    /* decompose: at most 4 code points per input byte is far more than enough (a
     * canonical decomposition has at most 4 code points and its source >= 2 bytes) */
    uint32_t *v = malloc((n * 2 + 4) * sizeof *v);
    if (!v) return -1;
    size_t k = 0;
    for (i = 0; i < n;) {
        size_t len;
        uint32_t cp = pretok_utf8(text, n, i, &len);
        if (cp == 0xFFFFFFFFu) cp = RAW | (unsigned char)text[i];
        decompose(cp, v, &k);
        i += len;
    }
    /* canonical ordering: each run of non-starters sorted by class, stably — by insertion
     * for a short run (the usual one to three marks), by counting (classes are 1..255) for
     * a long one: thousands of alternating marks ("Zalgo" text, which crawls hold) made
     * the insertion sort quadratic, minutes for one document */
    uint32_t *tmp = NULL;
    for (size_t a = 0; a < k;) {
        if (!ccc(v[a])) {
            a++;
            continue;
        }
        size_t b = a + 1;
        while (b < k && ccc(v[b])) b++;
        if (b - a <= 16) {
            for (size_t j = a + 1; j < b; j++) {
                unsigned c = ccc(v[j]);
                for (size_t i2 = j; i2 > a && ccc(v[i2 - 1]) > c; i2--) {
                    uint32_t t = v[i2];
                    v[i2] = v[i2 - 1];
                    v[i2 - 1] = t;
                }
            }
        } else {
            if (!tmp && !(tmp = malloc(k * sizeof *tmp))) {
                free(v);
                return -1;
            }
            size_t at[257] = {0};
            for (size_t j = a; j < b; j++) at[ccc(v[j]) + 1]++;
            for (int c = 1; c < 257; c++) at[c] += at[c - 1];
            for (size_t j = a; j < b; j++) tmp[at[ccc(v[j])]++] = v[j];
            memcpy(v + a, tmp, (b - a) * sizeof *v);
        }
        a = b;
    }
    free(tmp);
    /* compose: each character joins the last starter unless a character between them
     * has class 0 or a class >= its own (blocked) */
    size_t w = 0, starter = SIZE_MAX;
    unsigned last = 0;
    for (size_t a = 0; a < k; a++) {
        uint32_t cp = v[a];
        unsigned c = ccc(cp);
        if (starter != SIZE_MAX && (w == starter + 1 || (last != 0 && last < c))) {
            uint32_t comp = compose(v[starter], cp);
            if (comp) {
                v[starter] = comp;
                continue;
            }
        }
        if (c == 0)
            starter = cp & RAW ? SIZE_MAX : w, last = 0;
        else
            last = c;
        v[w++] = cp;
    }
    char *o = malloc(w * 4 + 1);
    if (!o) {
        free(v);
        return -1;
    }
    size_t on = 0;
    for (size_t a = 0; a < w; a++) on += put_utf8(o + on, v[a]);
    free(v);
    o[on] = '\0';
    *out = o;
    *outn = on;
    return 0;
}
