/* tokenizer.c — encoding (one thread, many threads, many documents) and decoding
 * (tokenizer.h). Loading (the dispatch and the two file formats) is tok_load.c's. */
#include "data/tokenizer.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/nfc.h"
#include "data/tokenizer_impl.h"
#include "util/buf.h"
#include "data/unicode_tables.h"

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    bpe_free(&t->m);
    free(t->added);
    for (size_t i = 0; i < t->nmatch; i++) free(t->match[i].s);
    free(t->match);
    free(t->trie);
    free(t);
}

uint32_t tokenizer_vocab(const tokenizer *t) { return t->vocab; }
int64_t tokenizer_eot(const tokenizer *t) { return t->eot; }
const char *tokenizer_digest(const tokenizer *t) { return t->digest; }
const char *tokenizer_kind(const tokenizer *t) { return t->kind; }

int tokenizer_id_matched(const tokenizer *t, uint32_t id) {
    for (size_t i = 0; i < t->nmatch; i++)
        if (t->match[i].id == id) return 1;
    return 0;
}

int64_t tokenizer_token_id(const tokenizer *t, const char *s, size_t n) {
    /* the last added token of that content: one listed at two ids is the later one, as
     * Hugging Face's tokenizers map content to id in file order */
    for (size_t i = t->nadded; i-- > 0;) {
        size_t k;
        const char *c = bpe_token(&t->m, t->added[i], &k);
        if (c && k == n && !memcmp(c, s, n)) return t->added[i];
    }
    uint32_t id = bpe_lookup(&t->m, s, n);
    return id == BPE_NONE ? -1 : (int64_t)id;
}

/* The pieces that start in [from, to) of text[0..n), pre-tokenized and encoded onto out
 * (no added token matched). */
static int encode_plain(const tokenizer *t, const char *text, size_t n, size_t from, size_t to,
                        bpe_cache *cache, tok_ids *out) {
    for (size_t i = from; i < to;) {
        size_t k = pretok_next(t->pat, text, n, i);
        int rc = bpe_encode_piece(&t->m, text + i, k, cache, out);
        if (rc) return rc;
        i += k;
    }
    return 0;
}

/* The length of the Unicode White_Space character at s[0..n) (Rust's char::is_whitespace,
 * which Hugging Face's lstrip / rstrip use), 0 if none. */
static size_t white_at(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    if (!n) return 0;
    if (u[0] == ' ' || (u[0] >= '\t' && u[0] <= '\r')) return 1;
    if (n >= 2 && u[0] == 0xc2 && (u[1] == 0x85 || u[1] == 0xa0)) return 2;
    if (n >= 3 && u[0] == 0xe1 && u[1] == 0x9a && u[2] == 0x80) return 3; /* U+1680 */
    if (n >= 3 && u[0] == 0xe2 && u[1] == 0x80 && (u[2] <= 0x8a || u[2] == 0xa8 || u[2] == 0xa9 || u[2] == 0xaf))
        return 3; /* U+2000..200A, 2028, 2029, 202F */
    if (n >= 3 && u[0] == 0xe2 && u[1] == 0x81 && u[2] == 0x9f) return 3; /* U+205F */
    if (n >= 3 && u[0] == 0xe3 && u[1] == 0x80 && u[2] == 0x80) return 3; /* U+3000 */
    return 0;
}

/* The length of the White_Space run that ends at s[end] (looking back from end, not
 * before from). */
static size_t white_before(const char *s, size_t from, size_t end) {
    size_t k = end;
    while (k > from) {
        size_t back = 1;
        while (back < 4 && k - back > from && ((unsigned char)s[k - back] & 0xc0) == 0x80) back++;
        if (white_at(s + k - back, back) != back) break;
        k -= back;
    }
    return end - k;
}

/* Which added tokens a search takes: Hugging Face matches the raw ones ("normalized":
 * false) first, in the text as written, then the normalized ones in the (normalized)
 * parts between those matches. */
enum { MATCH_RAW = 1, MATCH_NORM = 2 };

/* The longest non-special added token of the kinds `want` at text[p..end): its index in
 * t->match, or -1. Walks the trie as far as the text follows it. */
static long match_at(const tokenizer *t, const char *text, size_t p, size_t end, int want) {
    long best = -1;
    uint32_t node = p < end ? t->root[(unsigned char)text[p]] : 0;
    for (size_t q = p + 1; node; q++) {
        int32_t m = t->trie[node].match;
        if (m >= 0 && (want & (t->match[m].raw ? MATCH_RAW : MATCH_NORM))) best = m;
        if (q >= end) break;
        unsigned char c = (unsigned char)text[q];
        uint32_t next = t->trie[node].child;
        while (next && t->trie[next].byte != c) next = t->trie[next].sibling;
        node = next;
    }
    return best;
}

/* The first non-special added token of the kinds `want` that starts in text[from, to)
 * and ends by `end`: its start (*at) and its index in t->match, leftmost and then
 * longest; -1 if none. */
static long next_match(const tokenizer *t, const char *text, size_t from, size_t to, size_t end, size_t *at,
                       int want) {
    int have = (t->nraw ? MATCH_RAW : 0) | (t->nmatch > (size_t)t->nraw ? MATCH_NORM : 0);
    if (!(want & have)) return -1; /* none of that kind: no scan */
    for (size_t p = from; p < to; p++) {
        if (!t->root[(unsigned char)text[p]]) continue;
        long k = match_at(t, text, p, end, want);
        if (k >= 0) {
            *at = p;
            return k;
        }
    }
    return -1;
}

/* The raw matches of a text normalized to NFC, found in the text as written (tok_nfc):
 * their places in the normalized text, in order. With `known` unset the raw tokens are
 * looked for in the text itself (no normalizer: the text is as written). */
typedef struct tok_span { size_t at; long k; } tok_span;
typedef struct tok_spans { tok_span *v; size_t n, cap; int known; } tok_spans;

static int spans_add(tok_spans *sp, size_t at, long k) {
    if (sp->n == sp->cap) {
        size_t cap = sp->cap ? 2 * sp->cap : 16;
        tok_span *v = realloc(sp->v, cap * sizeof *v);
        if (!v) return -1;
        sp->v = v;
        sp->cap = cap;
    }
    sp->v[sp->n++] = (tok_span){at, k};
    return 0;
}

/* The index of the first span at or after `from`. */
static size_t spans_from(const tok_spans *sp, size_t from) {
    size_t lo = 0, hi = sp->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sp->v[mid].at < from) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Whether an added token begins at text[p] (p < n) in the whole text's matching: a part
 * that ends at a cut where one begins ends its pre-tokenization there, as the whole text's
 * would. */
static int match_begins(const tokenizer *t, const char *text, size_t n, size_t p, const tok_spans *sp) {
    if (!sp->known) return match_at(t, text, p, n, MATCH_RAW | MATCH_NORM) >= 0;
    size_t s = spans_from(sp, p);
    return (s < sp->n && sp->v[s].at == p) || match_at(t, text, p, n, MATCH_NORM) >= 0;
}

/* The pieces that start in [from, to) of text[0..n), encoded onto out: the non-special
 * added tokens matched first — the raw ones (from `sp` when their places are known), then
 * the normalized ones in the parts between them, as Hugging Face's two passes do — the
 * text between matches pre-tokenized and encoded on its own (ByteLevel's prefix space
 * before each part that begins the text — `first` — or follows a match, as Hugging Face
 * gives each part one; without such tokens the space is in the text already: prefixed(),
 * prepared()). Pieces never cross `to` when it is a safe cut (or n). 0, -1 (no memory) or
 * -2 (a piece past BPE_PIECE_MAX). */
static int encode_range(const tokenizer *t, const char *text, size_t n, size_t from, size_t to, int first,
                        const tok_spans *sp, bpe_cache *cache, tok_ids *out) {
    if (!t->nmatch) return encode_plain(t, text, n, from, to, cache, out);
    int after_match = first, rc = 0;
    size_t s = sp->known ? spans_from(sp, from) : 0, rat = to;
    long rk = -2; /* the next raw match (at rat); -2: not looked for yet */
    for (size_t i = from; !rc && i < to;) {
        if (rk == -2 || (rk >= 0 && rat < i)) { /* pass 1: the next raw match, once */
            rat = to;
            rk = -1;
            if (sp->known) {
                while (s < sp->n && sp->v[s].at < i) s++;
                if (s < sp->n && sp->v[s].at < to) rat = sp->v[s].at, rk = sp->v[s].k;
            } else if ((rk = next_match(t, text, i, to, to, &rat, MATCH_RAW)) < 0) {
                rat = to;
            }
        }
        /* pass 2: a normalized match before it, else it */
        size_t at = rat;
        long k = next_match(t, text, i, rat, rat, &at, MATCH_NORM);
        if (k < 0) k = rk, at = rat;
        size_t end = at; /* the part before the match */
        if (k >= 0 && t->match[k].lstrip) end -= white_before(text, i, at);
        /* how far the part's pre-tokenizer may look: to the match that ends it; for a part
         * that runs on past `to` (a cut), the text's end — unless a match begins right at
         * the cut, which ends the part there (as the whole text's encoding would) */
        size_t vis = k >= 0 ? end : to < n && match_begins(t, text, n, to, sp) ? to : n;
        if (end > i) {
            if (after_match && t->add_prefix_space && text[i] != ' ') {
                char *p = malloc(vis - i + 1);
                if (!p) return -1;
                p[0] = ' ';
                memcpy(p + 1, text + i, vis - i);
                rc = encode_plain(t, p, vis - i + 1, 0, end - i + 1, cache, out);
                free(p);
            } else {
                rc = encode_plain(t, text, vis, i, end, cache, out);
            }
        }
        if (rc || k < 0) break;
        if (tok_ids_append(out, &t->match[k].id, 1)) return -1;
        i = at + t->match[k].n;
        /* a normalized match's strip stays in its part (before the next raw match) */
        size_t lim = k == rk && at == rat ? to : rat;
        if (t->match[k].rstrip)
            for (size_t w; i < lim && (w = white_at(text + i, lim - i)); i += w) {}
        after_match = 1;
    }
    return rc;
}

/* Folds one thread's encode_range failure `bad` into the shared *fail: a piece too long
 * (-2) outranks no memory (-1), so the code is the same every run whatever the threads'
 * order. Called inside a parallel region (the critical section binds to it). */
static void fail_keep(int *fail, int bad) {
    if (!bad) return;
#pragma omp critical(tok_fail)
    if (*fail != -2) *fail = bad;
}

/* The error for encode_range's failure `bad` (-1 or -2; 0: none). */
static int encode_fail(int bad, tdm_err *e) {
    if (!bad) return 0;
    if (bad == -2)
        return err_set(e, ERR_USAGE,
                       "tokenizer: the text holds one piece (a run of letters, digits, spaces or "
                       "punctuation with no break) longer than " BPE_PIECE_MAX_TEXT ", more than "
                       "this tokenizer encodes: not natural text; leave that document out or break it up");
    return err_set(e, ERR_INTERNAL, "tokenizer: out of memory");
}

/* NFC of text[0..n) as nfc_normalize gives it (*out NULL: as it is), but where raw added
 * tokens are matched in the text as written: the parts between their matches normalized
 * each on its own, the matches kept and their places put in *sp (offset by `base`) —
 * Hugging Face splits on them first, then normalizes (a combining mark after "<tool"
 * composed with its 'l', and the token was not found; a raw token that only the
 * normalization spells is no match). */
static int tok_nfc(const tokenizer *t, const char *text, size_t n, size_t base, char **out, size_t *outn,
                   tok_spans *sp) {
    if (!t->nraw) return nfc_normalize(text, n, out, outn);
    sp->known = 1;
    *out = NULL;
    buf_t b = {0};
    int changed = 0, oom = 0;
    for (size_t i = 0; i <= n;) {
        size_t at = n;
        long k = next_match(t, text, i, n, n, &at, MATCH_RAW);
        if (k < 0) at = n;
        char *part = NULL;
        size_t pn = at - i;
        if (nfc_normalize(text + i, at - i, &part, &pn)) {
            buf_free(&b);
            return -1;
        }
        changed |= part != NULL;
        buf_putn(&b, part ? part : text + i, pn);
        free(part);
        if (k < 0) break;
        oom |= spans_add(sp, base + b.n, k);
        buf_putn(&b, t->match[k].s, t->match[k].n);
        i = at + t->match[k].n;
    }
    if (b.oom || oom) {
        buf_free(&b);
        return -1;
    }
    if (!changed) {
        buf_free(&b);
        return 0;
    }
    *out = b.p ? b.p : calloc(1, 1);
    *outn = b.n;
    return *out ? 0 : -1;
}

/* The text to encode, as the pipeline has it before pre-tokenization: text itself, or a
 * copy in *owned (free it) normalized to NFC (normalizer NFC) and/or with a space in front
 * (ByteLevel add_prefix_space), in that order, as Hugging Face applies them; the raw
 * matches' places in *sp (free it). NULL when out of memory. */
static const char *prefixed(const tokenizer *t, const char *text, size_t *n, char **owned, tok_spans *sp) {
    *owned = NULL;
    if (t->nfc) {
        if (tok_nfc(t, text, *n, 0, owned, n, sp)) return NULL;
        if (*owned) text = *owned;
    }
    /* with non-special added tokens, the space goes before each part (encode_range), and
     * the spans' places stay as they are */
    if (!t->add_prefix_space || *n == 0 || text[0] == ' ' || t->nmatch) return text;
    char *p = malloc(*n + 1);
    if (!p) {
        free(*owned);
        *owned = NULL;
        return NULL;
    }
    p[0] = ' ';
    memcpy(p + 1, text, *n);
    free(*owned);
    *owned = p;
    ++*n;
    return p;
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t n, tok_ids *out, tdm_err *e) {
    char *owned;
    tok_spans sp = {0};
    text = prefixed(t, text, &n, &owned, &sp);
    bpe_cache *c = bpe_cache_new();
    int rc = !text || !c ? -1 : encode_range(t, text, n, 0, n, 1, &sp, c, out);
    bpe_cache_free(c);
    free(sp.v);
    free(owned);
    return encode_fail(rc, e);
}

/* Whether text[c] (c >= 1, c < n) begins a letter or digit (\p{L}, \p{N}), whole within
 * text[0..n), just after a '\n'. No pattern's piece spans that point: a letter's or
 * digit's piece never starts before a '\n' (the optional prefix of every pattern excludes
 * \r and \n), and every whitespace or punctuation piece that reaches the '\n' ends with it
 * (o200k's punctuation takes a trailing [\r\n/]*, and '/' is no letter). For NFC, '\n' is
 * a starter that is in no composite pair, first or second, so neither reordering nor
 * composition crosses it whatever follows (no letter or digit has a combining class; a
 * Hangul vowel or trailing jamo composes with a leading jamo before it, and '\n' is
 * none): NFC of the two sides is NFC of the whole. Before 2026-12-05 only an ASCII letter counted, so that text whose lines
 * begin otherwise (Cyrillic, CJK, digits) had no cut at all. */
static int cut_at(const char *text, size_t n, size_t c) {
    if (text[c - 1] != '\n') return 0;
    unsigned char b = (unsigned char)text[c];
    if (b < 0x80) return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9');
    size_t len;
    unsigned cp = pretok_utf8(text, n, c, &len);
    return cp != 0xFFFFFFFFu && (unicode_flags(cp) & (UNI_L | UNI_N));
}

/* The first safe cut at or after `from` (cut_at). n when there is none. */
static size_t next_cut(const char *text, size_t n, size_t from) {
    for (size_t i = from ? from - 1 : 0; i + 1 < n; i++) {
        const char *nl = memchr(text + i, '\n', n - 1 - i);
        if (!nl) break;
        i = (size_t)(nl - text);
        if (i + 1 >= from && cut_at(text, n, i + 1)) return i + 1;
    }
    return n;
}

size_t tokenizer_safe_cut(const tokenizer *t, const char *text, size_t n) {
    /* one rule serves every pattern pretok knows; an added token holding a '\n' could
     * hold a cut */
    if (t->no_cuts) return 0;
    for (size_t c = n ? n - 1 : 0; c > 0; c--)
        if (cut_at(text, n, c)) return c;
    return 0;
}

/* The text to encode for encode_cut: as prefixed(), with the position `cut` of the
 * original mapped into it (*cut), the prefix space only when `start`. NFC is applied to
 * [0, cut) and [cut, n) on their own, which is NFC of the whole when cut is a safe cut
 * (a letter or digit after a '\n' is a starter that composes with nothing before it). NULL
 * when out of memory. */
static const char *prepared(const tokenizer *t, const char *text, size_t *n, size_t *cut,
                            int start, char **owned, tok_spans *sp) {
    *owned = NULL;
    int pre = start && t->add_prefix_space && !t->nmatch; /* else encode_range's, per part */
    if (!t->nfc) {
        if (!pre || *n == 0 || text[0] == ' ') return text;
        char *p = malloc(*n + 1);
        if (!p) return NULL;
        p[0] = ' ';
        memcpy(p + 1, text, *n);
        ++*n;
        ++*cut;
        return *owned = p;
    }
    char *h = NULL, *tl = NULL;
    size_t hn = *cut, tn = *n - *cut;
    if (tok_nfc(t, text, *cut, 0, &h, &hn, sp) || tok_nfc(t, text + *cut, *n - *cut, hn, &tl, &tn, sp)) {
        free(h);
        return NULL;
    }
    const char *hs = h ? h : text, *ts = tl ? tl : text + *cut;
    size_t lead = pre && hn + tn > 0 && (hn ? hs[0] : ts[0]) != ' ';
    char *p = malloc(lead + hn + tn + 1);
    if (p) {
        p[0] = ' ';
        memcpy(p + lead, hs, hn);
        memcpy(p + lead + hn, ts, tn);
        *n = lead + hn + tn;
        *cut = lead + hn;
    }
    free(h);
    free(tl);
    return *owned = p;
}

/* The pieces of text[0..n) that start before `cut` (n or a safe cut), encoded onto out
 * on `threads` threads: the prefix is cut further at safe cuts into parts encoded
 * concurrently and appended in order. `cache` (NULL: a new one) serves one thread. */
static int encode_cut(const tokenizer *t, const char *text, size_t n, size_t cut, int start,
                      int threads, bpe_cache *cache, tok_ids *out, tdm_err *e) {
    if (threads <= 0) threads = omp_get_max_threads();
    char *owned;
    tok_spans sp = {0};
    text = prepared(t, text, &n, &cut, start, &owned, &sp);
    if (!text) {
        free(sp.v);
        return err_set(e, ERR_INTERNAL, "tokenizer: out of memory");
    }
    size_t target = cut / ((size_t)threads * 8);
    if (target < (1u << 16)) target = 1u << 16;
    int fail = 0;
    if (threads == 1 || cut < 2 * target || t->no_cuts) {
        bpe_cache *c = cache ? cache : bpe_cache_new();
        fail = !c ? -1 : encode_range(t, text, n, 0, cut, start, &sp, c, out);
        if (c != cache) bpe_cache_free(c);
        free(sp.v);
        free(owned);
        return encode_fail(fail, e);
    }
    size_t ncut = 0, cap = cut / target + 2;
    size_t *cuts = malloc(cap * sizeof *cuts);
    fail = cuts ? 0 : -1;
    if (cuts) {
        cuts[ncut++] = 0;
        for (size_t p = next_cut(text, cut, target); p < cut; p = next_cut(text, cut, p + target))
            cuts[ncut++] = p;
        cuts[ncut] = cut;
    }
    tok_ids *parts = fail ? NULL : calloc(ncut, sizeof *parts);
    if (!parts) fail = -1;
    if (!fail) {
#pragma omp parallel num_threads(threads)
        {
            bpe_cache *c = bpe_cache_new();
            int bad = c ? 0 : -1;
#pragma omp for schedule(dynamic, 1)
            for (size_t k = 0; k < ncut; k++)
                if (!bad) bad = encode_range(t, text, n, cuts[k], cuts[k + 1], start && k == 0, &sp, c, &parts[k]);
            fail_keep(&fail, bad);
            bpe_cache_free(c);
        }
        for (size_t k = 0; k < ncut && !fail; k++) fail = tok_ids_append(out, parts[k].v, parts[k].n) ? -1 : 0;
        for (size_t k = 0; k < ncut; k++) tok_ids_free(&parts[k]);
    }
    free(parts);
    free(cuts);
    free(sp.v);
    free(owned);
    return encode_fail(fail, e);
}

int tokenizer_encode_parallel(const tokenizer *t, const char *text, size_t n, int threads,
                              tok_ids *out, tdm_err *e) {
    return encode_cut(t, text, n, n, 1, threads, NULL, out, e);
}

int tokenizer_encode_head(const tokenizer *t, const char *text, size_t n, size_t cut, int start,
                          int threads, bpe_cache *cache, tok_ids *out, tdm_err *e) {
    if (cut > n) return err_set(e, ERR_INTERNAL, "tokenizer: cut %zu past the text's %zu bytes", cut, n);
    return encode_cut(t, text, n, cut, start, threads, cache, out, e);
}

int tokenizer_encode_docs(const tokenizer *t, size_t ndocs, const char *const *docs,
                          const size_t *lens, int threads, tok_ids *outs, tdm_err *e) {
    if (threads <= 0) threads = omp_get_max_threads();
    int fail = 0;
#pragma omp parallel num_threads(threads)
    {
        bpe_cache *c = bpe_cache_new();
        int bad = c ? 0 : -1;
#pragma omp for schedule(dynamic, 1)
        for (size_t d = 0; d < ndocs; d++) {
            if (bad) continue;
            size_t n = lens[d];
            char *owned;
            tok_spans sp = {0};
            const char *text = prefixed(t, docs[d], &n, &owned, &sp);
            bad = !text ? -1 : encode_range(t, text, n, 0, n, 1, &sp, c, &outs[d]);
            free(sp.v);
            free(owned);
        }
        fail_keep(&fail, bad);
        bpe_cache_free(c);
    }
    return encode_fail(fail, e);
}

int tokenizer_decode(const tokenizer *t, const uint32_t *ids, size_t n, buf_t *out, tdm_err *e) {
    for (size_t i = 0; i < n; i++) {
        size_t k;
        const char *s = bpe_token(&t->m, ids[i], &k);
        if (!s)
            return err_set(e, ERR_USAGE,
                           "tokenizer: id %u (at %zu) is not a token of this %s vocabulary", ids[i],
                           i, t->kind);
        buf_putn(out, s, k);
    }
    return out->oom ? err_set(e, ERR_INTERNAL, "tokenizer: out of memory") : 0;
}
