/* pretok.c — the pre-tokenizer matchers (pretok.h). Each alternative of a pattern is a
 * function that returns the end of its match at i or 0 for no match; a pattern tries
 * them in the regex's order, which is what leftmost-first alternation means. */
#include "data/pretok.h"

#include <string.h>

#include "data/unicode_tables.h"

#define BAD 0xFFFFFFFFu

unsigned pretok_utf8(const char *text, size_t n, size_t i, size_t *len) {
    const unsigned char *s = (const unsigned char *)text + i;
    size_t left = n - i;
    unsigned c = s[0];
    *len = 1;
    if (c < 0x80) return c;
    unsigned cp, need, min;
    if (c >= 0xC2 && c <= 0xDF)
        cp = c & 0x1F, need = 1, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        cp = c & 0x0F, need = 2, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        cp = c & 0x07, need = 3, min = 0x10000;
    else
        return BAD;
    if (left <= need) return BAD;
    for (unsigned k = 1; k <= need; k++) {
        if ((s[k] & 0xC0) != 0x80) return BAD;
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return BAD;
    *len = need + 1;
    return cp;
}

/* A decoded character: code point, byte length, class flags. */
typedef struct ch {
    unsigned cp, fl;
    size_t len;
} ch;

/* The character at i; ASCII (most of any text) without the decoder's call. */
static inline ch at(const char *t, size_t n, size_t i) {
    ch c;
    unsigned char b = (unsigned char)t[i];
    if (b < 0x80) {
        c.cp = b;
        c.len = 1;
        c.fl = unicode_stage2[0][b]; /* code points 0..255 are the table's first block */
        return c;
    }
    c.cp = pretok_utf8(t, n, i, &c.len);
    c.fl = c.cp == BAD ? 0 : unicode_flags(c.cp);
    return c;
}

#define IS_OTHER(fl) (!((fl) & (UNI_L | UNI_N | UNI_WS)))
#define IS_NL(cp) ((cp) == '\r' || (cp) == '\n')

/* The end of the run of characters with any of `want` flags from i (i itself if none). */
static size_t run_of(const char *t, size_t n, size_t i, unsigned want) {
    while (i < n) {
        ch c = at(t, n, i);
        if (!(c.fl & want)) break;
        i += c.len;
    }
    return i;
}

/* The end of the run of "other" characters ([^\s\p{L}\p{N}]) from i. */
static size_t run_other(const char *t, size_t n, size_t i) {
    while (i < n) {
        ch c = at(t, n, i);
        if (!IS_OTHER(c.fl)) break;
        i += c.len;
    }
    return i;
}

/* 's 't 're 've 'm 'll 'd at i (text[i] is the apostrophe): the end, or 0. `ci`: ASCII
 * case-insensitive (cl100k's explicit 'S|'rE|... and Llama-3's (?i:) alike). */
static size_t contraction(const char *t, size_t n, size_t i, int ci) {
    static const char *const words[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    if (i >= n || t[i] != '\'') return 0;
    for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
        size_t k = strlen(words[w]);
        if (n - i - 1 < k) continue;
        size_t j = 0;
        for (; j < k; j++) {
            char c = t[i + 1 + j];
            if (ci && c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
            if (c != words[w][j]) break;
        }
        if (j == k) return i + 1 + k;
    }
    return 0;
}

/* Whitespace at i (c0 is \s): `\s*[\r\n]+` when `nl` (the cl100k family), then
 * `\s+(?!\S)`, then `\s+`. */
static size_t space_piece(const char *t, size_t n, size_t i, int nl) {
    size_t k = i, last = i, last_nl = 0;
    int have_nl = 0;
    while (k < n) {
        ch c = at(t, n, k);
        if (!(c.fl & UNI_WS)) break;
        if (IS_NL(c.cp)) have_nl = 1, last_nl = k + c.len;
        last = k;
        k += c.len;
    }
    if (nl && have_nl) return last_nl;
    if (k == n) return k;      /* (?!\S) holds at the end of the text */
    if (last > i) return last; /* give the last space back: it is followed by a space */
    return k;                  /* one space before a non-space: plain \s+ */
}

static size_t gpt2(const char *t, size_t n, size_t i) {
    ch c0 = at(t, n, i);
    size_t e;
    if (c0.cp == '\'' && (e = contraction(t, n, i, 0))) return e;
    size_t j = i;
    ch c = c0;
    if (c0.cp == ' ' && i + 1 < n) {
        ch c1 = at(t, n, i + 1);
        if (!(c1.fl & UNI_WS)) j = i + 1, c = c1;
    }
    if (c.fl & UNI_L) return run_of(t, n, j, UNI_L);
    if (c.fl & UNI_N) return run_of(t, n, j, UNI_N);
    if (IS_OTHER(c.fl)) return run_other(t, n, j);
    return space_piece(t, n, i, 0);
}

/* ` ?[^\s\p{L}\p{N}]+` followed by `[\r\n]*` (or `[\r\n/]*` for o200k): the end or 0. */
static size_t punct_piece(const char *t, size_t n, size_t i, ch c0, int slash) {
    size_t j = i;
    if (c0.cp == ' ' && i + 1 < n && IS_OTHER(at(t, n, i + 1).fl))
        j = i + 1;
    else if (!IS_OTHER(c0.fl))
        return 0;
    j = run_other(t, n, j);
    while (j < n && (t[j] == '\r' || t[j] == '\n' || (slash && t[j] == '/'))) j++;
    return j;
}

static size_t cl100k(const char *t, size_t n, size_t i, size_t max_digits) {
    ch c0 = at(t, n, i);
    size_t e;
    if (c0.cp == '\'' && (e = contraction(t, n, i, 1))) return e;
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (c0.fl & UNI_L) return run_of(t, n, i, UNI_L);
    if (!IS_NL(c0.cp) && !(c0.fl & UNI_N) && i + c0.len < n && (at(t, n, i + c0.len).fl & UNI_L))
        return run_of(t, n, i + c0.len, UNI_L);
    if (c0.fl & UNI_N) {
        size_t j = i;
        for (size_t d = 0; d < max_digits && j < n; d++) {
            ch c = at(t, n, j);
            if (!(c.fl & UNI_N)) break;
            j += c.len;
        }
        return j;
    }
    if ((e = punct_piece(t, n, i, c0, 0))) return e;
    return space_piece(t, n, i, 1);
}

/* o200k's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+ at j: the greedy
 * upper run gives characters back until a lower-class one can start the second run, so
 * the second run starts at the last lower-class position among the upper run and the
 * character after it. Returns the end or 0. */
static size_t o200k_lower_word(const char *t, size_t n, size_t j) {
    size_t p = j, last_lo = (size_t)-1;
    while (p < n) {
        ch c = at(t, n, p);
        if (c.fl & UNI_LO) last_lo = p;
        if (!(c.fl & UNI_UP)) break;
        p += c.len;
    }
    if (last_lo == (size_t)-1) return 0;
    return run_of(t, n, last_lo, UNI_LO);
}

/* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]* at j: the end or 0. */
static size_t o200k_upper_word(const char *t, size_t n, size_t j) {
    size_t p = run_of(t, n, j, UNI_UP);
    if (p == j) return 0;
    return run_of(t, n, p, UNI_LO);
}

static size_t o200k(const char *t, size_t n, size_t i) {
    ch c0 = at(t, n, i);
    int prefix = !IS_NL(c0.cp) && !(c0.fl & (UNI_L | UNI_N)) && i + c0.len < n;
    size_t e = 0;
    for (int alt = 0; alt < 2 && !e; alt++) {
        size_t (*word)(const char *, size_t, size_t) = alt ? o200k_upper_word : o200k_lower_word;
        if (prefix) e = word(t, n, i + c0.len);
        if (!e) e = word(t, n, i);
    }
    if (e) {
        size_t k = contraction(t, n, e, 1);
        return k ? k : e;
    }
    if (c0.fl & UNI_N) {
        size_t j = i;
        for (int d = 0; d < 3 && j < n; d++) {
            ch c = at(t, n, j);
            if (!(c.fl & UNI_N)) break;
            j += c.len;
        }
        return j;
    }
    if ((e = punct_piece(t, n, i, c0, 1))) return e;
    return space_piece(t, n, i, 1);
}

size_t pretok_next(pretok_pattern p, const char *text, size_t n, size_t i) {
    switch (p) {
    case PRETOK_GPT2: return gpt2(text, n, i) - i;
    case PRETOK_CL100K:
    case PRETOK_LLAMA3: return cl100k(text, n, i, 3) - i;
    case PRETOK_QWEN2: return cl100k(text, n, i, 1) - i;
    default: return o200k(text, n, i) - i;
    }
}

static const char *const NAMES[PRETOK_COUNT] = {"gpt2", "cl100k", "llama3", "qwen2", "o200k"};

/* The sources as the references write them (tiktoken's pat_str; Llama-3's and Qwen2's
 * tokenizer.json Split pattern). */
static const char *const REGEX[PRETOK_COUNT] = {
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
    "('s|'S|'t|'T|'re|'rE|'Re|'RE|'ve|'vE|'Ve|'VE|'m|'M|'ll|'lL|'Ll|'LL|'d|'D)|[^\\r\\n\\p{L}"
    "\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+("
    "'s|'S|'t|'T|'re|'rE|'Re|'RE|'ve|'vE|'Ve|'VE|'m|'M|'ll|'lL|'Ll|'LL|'d|'D)?|[^\\r\\n\\p{L}"
    "\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*('s|'S|'t|'T|"
    "'re|'rE|'Re|'RE|'ve|'vE|'Ve|'VE|'m|'M|'ll|'lL|'Ll|'LL|'d|'D)?|\\p{N}{1,3}| ?[^\\s\\p{L}"
    "\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* Other spellings of the same patterns met in tokenizer.json files: cl100k's with
 * (?i:) (GPT-4 conversions) and the GPT-2 pattern with (?i:) is NOT the same (GPT-2's
 * contractions are case-sensitive), so it is not listed. */
static const struct {
    const char *re;
    pretok_pattern p;
} ALIASES[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
     "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     PRETOK_LLAMA3},
};

const char *pretok_name(pretok_pattern p) { return p < PRETOK_COUNT ? NAMES[p] : "?"; }
const char *pretok_regex(pretok_pattern p) { return p < PRETOK_COUNT ? REGEX[p] : ""; }

int pretok_from_name(const char *name) {
    static const struct {
        const char *name;
        pretok_pattern p;
    } more[] = {{"r50k", PRETOK_GPT2},          {"r50k_base", PRETOK_GPT2},
                {"p50k", PRETOK_GPT2},          {"p50k_base", PRETOK_GPT2},
                {"cl100k_base", PRETOK_CL100K}, {"o200k_base", PRETOK_O200K},
                {"llama-3", PRETOK_LLAMA3},     {"qwen", PRETOK_QWEN2}};
    for (int p = 0; p < PRETOK_COUNT; p++)
        if (!strcmp(name, NAMES[p])) return p;
    for (size_t k = 0; k < sizeof more / sizeof *more; k++)
        if (!strcmp(name, more[k].name)) return (int)more[k].p;
    return -1;
}

int pretok_from_regex(const char *re, size_t n) {
    for (int p = 0; p < PRETOK_COUNT; p++)
        if (strlen(REGEX[p]) == n && !memcmp(REGEX[p], re, n)) return p;
    for (size_t k = 0; k < sizeof ALIASES / sizeof *ALIASES; k++)
        if (strlen(ALIASES[k].re) == n && !memcmp(ALIASES[k].re, re, n)) return (int)ALIASES[k].p;
    return -1;
}
