/* tok_load.c — tokenizer_load (tokenizer.h): the file read, told apart and loaded from
 * its two formats, a Hugging Face tokenizer.json (byte-level BPE) and a tiktoken ranks
 * file (the loaders fill t, t->m initialised and the rest zero, from the file's bytes). Every check names the file
 * and the key or line at fault; nothing in the file is trusted (ids are range-checked
 * before they size anything, strings carry their lengths). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/sha256.h"
#include "util/buf.h"
#include "util/fileio.h"
#include "util/json_tree.h"
#include "data/bytelevel.h"
#include "data/nfc.h"
#include "data/tokenizer_impl.h"

/* Ids stay below 2^24: the largest vocabularies are ~10^6, and an id sizes the decode
 * table, so a hostile 2e9 must be an error, not a 16 GB allocation. */
#define MAX_ID 0xFFFFFFu

/* ---- tiktoken ranks ---- */

/* The family's special tokens, placed after the ranks as tiktoken's definitions do. The
 * first one is the end of text. */
typedef struct special {
    const char *content;
    uint32_t id;
} special;

static const special SPECIALS_GPT2[] = {{"<|endoftext|>", 50256}, {NULL, 0}};
static const special SPECIALS_CL100K[] = {{"<|endoftext|>", 100257},   {"<|fim_prefix|>", 100258},
                                          {"<|fim_middle|>", 100259},  {"<|fim_suffix|>", 100260},
                                          {"<|endofprompt|>", 100276}, {NULL, 0}};
static const special SPECIALS_O200K[] = {
    {"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}, {NULL, 0}};
static const special SPECIALS_LLAMA3[] = {
    {"<|end_of_text|>", 128001}, {"<|begin_of_text|>", 128000}, {NULL, 0}};
static const special SPECIALS_QWEN2[] = {
    {"<|endoftext|>", 151643}, {"<|im_start|>", 151644}, {"<|im_end|>", 151645}, {NULL, 0}};

static int b64val(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Standard base64 (padding required to a multiple of 4) from s[0..n) into out (n/4*3
 * bytes of room). The decoded length, or -1 when malformed. */
static long b64decode(const char *s, size_t n, char *out) {
    if (n == 0 || n % 4) return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == n && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad || (v[k] = b64val((unsigned char)s[i + k])) < 0) {
                return -1;
            }
        }
        uint32_t w =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[o++] = (char)(w >> 16);
        if (pad < 2) out[o++] = (char)(w >> 8);
        if (pad < 1) out[o++] = (char)w;
    }
    return (long)o;
}

static int load_tiktoken(tokenizer *t, const char *path, const char *data, size_t n,
                            tdm_err *e) {
    char *tok = malloc(n / 4 * 3 + 3);
    if (!tok) return err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
    size_t line = 0, ntok = 0;
    uint32_t maxid = 0;
    int rc = 0;
    for (size_t i = 0; i < n && !rc;) {
        const char *nl = memchr(data + i, '\n', n - i);
        size_t end = nl ? (size_t)(nl - data) : n, next = end + 1;
        line++;
        if (end > i && data[end - 1] == '\r') end--;
        if (end == i) {
            i = next;
            continue;
        }
        const char *sp = memchr(data + i, ' ', end - i);
        long k = sp ? b64decode(data + i, (size_t)(sp - data) - i, tok) : -1;
        char *stop = NULL;
        unsigned long long rank = 0;
        if (sp && sp + 1 < data + end && sp[1] >= '0' && sp[1] <= '9') {
            char num[24];
            size_t len = (size_t)(data + end - sp - 1);
            if (len < sizeof num) {
                memcpy(num, sp + 1, len);
                num[len] = '\0';
                rank = strtoull(num, &stop, 10);
                if (*stop) stop = NULL;
            }
        }
        if (k <= 0 || !stop) {
            rc = err_set(e, ERR_USAGE, "tokenizer %s line %zu: expected \"BASE64TOKEN RANK\"", path,
                         line);
        } else if (rank > MAX_ID) { /* as written: strtoull's overflow reads as 2^64 - 1 */
            rc = err_set(e, ERR_USAGE, "tokenizer %s line %zu: rank %.*s is too large", path, line,
                         (int)(data + end - sp - 1), sp + 1);
        } else {
            int r = bpe_set_token(&t->m, (uint32_t)rank, tok, (size_t)k, 1);
            if (r < 0)
                rc = err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
            else if (r == BPE_TOO_LONG)
                rc = err_set(e, ERR_USAGE, "tokenizer %s line %zu: a token of %ld bytes (at most 16 MiB)", path,
                             line, k);
            else if (r)
                rc = err_set(e, ERR_USAGE,
                             "tokenizer %s line %zu: rank %llu or its token appears twice", path,
                             line, rank);
            if (rank > maxid) maxid = (uint32_t)rank;
            ntok++;
        }
        i = next;
    }
    free(tok);
    if (rc) return rc;
    if (!ntok) return err_set(e, ERR_USAGE, "tokenizer %s: no ranks", path);
    int b = bpe_check_bytes(&t->m);
    if (b) return err_set(e, ERR_USAGE, "tokenizer %s: no token for the byte 0x%02x", path, b - 1);
    int dm = bpe_derive_merges(&t->m);
    if (dm == -2)
        return err_set(e, ERR_USAGE, "tokenizer %s: its tokens split into pairs of tokens more than %d times each "
                       "on average (gpt2, cl100k and o200k: about 2): not a BPE vocabulary", path,
                       BPE_DERIVED_PER_TOKEN);
    if (dm) return err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
    t->m.whole_first = 1; /* tiktoken looks a whole piece up before merging */
    const special *sp = t->pat == PRETOK_GPT2     ? SPECIALS_GPT2
                        : t->pat == PRETOK_O200K  ? SPECIALS_O200K
                        : t->pat == PRETOK_LLAMA3 ? SPECIALS_LLAMA3
                        : t->pat == PRETOK_QWEN2  ? SPECIALS_QWEN2
                                                  : SPECIALS_CL100K;
    size_t nsp = 0;
    while (sp[nsp].content) nsp++;
    t->added = malloc(nsp * sizeof *t->added);
    if (!t->added) return err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
    for (size_t k = 0; k < nsp; k++) {
        int r = bpe_set_token(&t->m, sp[k].id, sp[k].content, strlen(sp[k].content), 0);
        if (r < 0) return err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
        if (r)
            return err_set(e, ERR_USAGE,
                           "tokenizer %s: rank %u is taken, but the %s family puts %s there", path,
                           sp[k].id, pretok_name(t->pat), sp[k].content);
        t->added[t->nadded++] = sp[k].id;
        if (sp[k].id > maxid) maxid = sp[k].id;
    }
    t->eot = sp[0].id;
    t->vocab = maxid + 1;
    return 0;
}

/* ---- tokenizer.json ---- */

/* GPT-2's byte-level alphabet: byte b is written as code point byte_cp[b]; cp_byte is
 * the inverse over code points 0..323 (-1: not a byte's). */
typedef struct bytelevel {
    int cp_byte[BYTELEVEL_MAX_CP];
} bytelevel;

static void bytelevel_init(bytelevel *bl) {
    unsigned cp[256];
    bytelevel_alphabet(cp);
    for (int c = 0; c < BYTELEVEL_MAX_CP; c++) bl->cp_byte[c] = -1;
    for (int b = 0; b < 256; b++) bl->cp_byte[cp[b]] = b;
}

/* The bytes a vocab / merge string stands for, into out (room for n bytes). The length,
 * or -1 when a character is not of the byte-level alphabet. */
static long bytelevel_decode(const bytelevel *bl, const char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len;
        unsigned cp = pretok_utf8(s, n, i, &len);
        if (cp >= BYTELEVEL_MAX_CP || bl->cp_byte[cp] < 0) return -1;
        out[o++] = (char)bl->cp_byte[cp];
        i += len;
    }
    return (long)o;
}

/* A string for messages: s cut to 40 bytes, quotes and control bytes escaped. */
static const char *shown(const char *s, size_t n, char buf[200]) {
    size_t o = 0;
    for (size_t i = 0; i < n && i < 40; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            o += (size_t)snprintf(buf + o, 200 - o, "\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            o += (size_t)snprintf(buf + o, 200 - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    if (n > 40) o += (size_t)snprintf(buf + o, 200 - o, "...");
    buf[o] = '\0';
    return buf;
}

/* An integer id in [0, MAX_ID] from v; -1 when v is anything else. */
static int64_t as_id(const tjson *v) {
    if (!v || v->type != TJ_NUM) return -1;
    double d = v->u.num;
    if (!(d >= 0 && d <= MAX_ID) || d != (double)(int64_t)d) return -1;
    return (int64_t)d;
}

/* 1 when v is absent or null, or a string equal to one of the NULL-ended `ok` values. */
static int str_is(const tjson *v, const char *const *ok) {
    if (!v || v->type == TJ_NULL) return 1;
    if (v->type != TJ_STR) return 0;
    for (; *ok; ok++)
        if (strlen(*ok) == v->n && !memcmp(*ok, v->u.s, v->n)) return 1;
    return 0;
}

static int is_str(const tjson *v, const char *s) {
    return v && v->type == TJ_STR && v->n == strlen(s) && !memcmp(v->u.s, s, v->n);
}

/* A boolean member; dflt when absent; -1 when not a boolean. */
static int as_bool(const tjson *o, const char *key, int dflt) {
    const tjson *v = tjson_get(o, key);
    if (!v) return dflt;
    return v->type == TJ_TRUE ? 1 : v->type == TJ_FALSE ? 0 : -1;
}

/* pre_tokenizer: ByteLevel (use_regex) or Sequence[Split(Regex, Isolated), ByteLevel]. */
static int load_pretok(tokenizer *t, const char *path, const tjson *pt, tdm_err *e) {
    const tjson *type = tjson_get(pt, "type");
    if (is_str(type, "ByteLevel")) {
        int use_regex = as_bool(pt, "use_regex", 1), aps = as_bool(pt, "add_prefix_space", 1);
        if (use_regex != 1)
            return err_set(
                e, ERR_USAGE,
                "tokenizer %s: pre_tokenizer.use_regex must be true for a lone ByteLevel", path);
        if (aps < 0)
            return err_set(e, ERR_USAGE,
                           "tokenizer %s: pre_tokenizer.add_prefix_space is not a boolean", path);
        t->pat = PRETOK_GPT2;
        t->add_prefix_space = aps;
        return 0;
    }
    const tjson *seq = tjson_get(pt, "pretokenizers");
    if (!is_str(type, "Sequence") || !seq || seq->type != TJ_ARR || seq->n != 2)
        return err_set(
            e, ERR_USAGE,
            "tokenizer %s: pre_tokenizer must be ByteLevel or a Sequence of Split and ByteLevel "
            "(the byte-level BPE families)",
            path);
    const tjson *split = &seq->u.kids[0], *bl = &seq->u.kids[1];
    const tjson *re = tjson_get(tjson_get(split, "pattern"), "Regex");
    static const char *const isolated[] = {"Isolated", NULL};
    if (!is_str(tjson_get(split, "type"), "Split") || !re || re->type != TJ_STR ||
        !str_is(tjson_get(split, "behavior"), isolated) || as_bool(split, "invert", 0) != 0)
        return err_set(
            e, ERR_USAGE,
            "tokenizer %s: pre_tokenizer.pretokenizers[0] must be a Split with a pattern.Regex, "
            "behavior Isolated, invert false",
            path);
    int p = pretok_from_regex(re->u.s, re->n);
    char buf[200];
    if (p < 0)
        return err_set(
            e, ERR_USAGE,
            "tokenizer %s: pre_tokenizer.pretokenizers[0].pattern.Regex \"%s\" is not one of the "
            "known patterns (GPT-2, cl100k/Llama-3, Qwen2, o200k)",
            path, shown(re->u.s, re->n, buf));
    if (!is_str(tjson_get(bl, "type"), "ByteLevel") || as_bool(bl, "use_regex", 1) != 0 ||
        as_bool(bl, "add_prefix_space", 1) != 0)
        return err_set(
            e, ERR_USAGE,
            "tokenizer %s: pre_tokenizer.pretokenizers[1] must be a ByteLevel with use_regex "
            "false and add_prefix_space false",
            path);
    t->pat = (pretok_pattern)p;
    return 0;
}

/* model: BPE with vocab, merges and the options byte-level tokenizers use. */
static int load_model(tokenizer *t, const char *path, const tjson *model, uint32_t *maxid,
                      tdm_err *e) {
    static const char *const bpe_type[] = {"BPE", NULL}, *const empty[] = {"", NULL};
    if (!model || model->type != TJ_OBJ)
        return err_set(e, ERR_USAGE, "tokenizer %s: model is %s, expected an object", path,
                       tjson_type_name(model));
    if (!str_is(tjson_get(model, "type"), bpe_type))
        return err_set(e, ERR_USAGE, "tokenizer %s: model.type must be \"BPE\"", path);
    if (!str_is(tjson_get(model, "continuing_subword_prefix"), empty) ||
        !str_is(tjson_get(model, "end_of_word_suffix"), empty))
        return err_set(
            e, ERR_USAGE,
            "tokenizer %s: model.continuing_subword_prefix / end_of_word_suffix are not supported",
            path);
    const tjson *dropout = tjson_get(model, "dropout");
    if (dropout && dropout->type != TJ_NULL && !(dropout->type == TJ_NUM && dropout->u.num == 0))
        return err_set(e, ERR_USAGE, "tokenizer %s: model.dropout is not supported", path);
    int ignore_merges = as_bool(model, "ignore_merges", 0),
        byte_fallback = as_bool(model, "byte_fallback", 0);
    if (ignore_merges < 0 || byte_fallback != 0)
        return err_set(
            e, ERR_USAGE,
            "tokenizer %s: model.ignore_merges must be a boolean and model.byte_fallback false",
            path);
    t->m.whole_first = ignore_merges;

    bytelevel bl;
    bytelevel_init(&bl);
    char buf[200];
    char buf2[200];
    const tjson *vocab = tjson_get(model, "vocab");
    if (!vocab || vocab->type != TJ_OBJ)
        return err_set(e, ERR_USAGE, "tokenizer %s: model.vocab is %s, expected an object", path,
                       tjson_type_name(vocab));
    char *tok = NULL;
    size_t tokcap = 0;
    int rc = 0;
    for (uint32_t i = 0; i < vocab->n && !rc; i++) {
        const tjson *v = &vocab->u.kids[i];
        int64_t id = as_id(v);
        if (id < 0) {
            rc = err_set(e, ERR_USAGE,
                         "tokenizer %s: model.vocab[\"%s\"] is not an id (an integer 0..%u)", path,
                         shown(v->key, v->keylen, buf), MAX_ID);
            break;
        }
        if (v->keylen > tokcap) {
            free(tok);
            tokcap = v->keylen;
            tok = malloc(tokcap);
            if (!tok) {
                rc = err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
                break;
            }
        }
        long k = bytelevel_decode(&bl, v->key, v->keylen, tok);
        if (k <= 0) {
            rc =
                err_set(e, ERR_USAGE, "tokenizer %s: model.vocab[\"%s\"] is not a byte-level token",
                        path, shown(v->key, v->keylen, buf));
            break;
        }
        size_t have;
        int taken = bpe_token(&t->m, (uint32_t)id, &have) != NULL;
        int r = bpe_set_token(&t->m, (uint32_t)id, tok, (size_t)k, 1);
        if (r < 0)
            rc = err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
        else if (r == BPE_TOO_LONG)
            rc = err_set(e, ERR_USAGE, "tokenizer %s: model.vocab: a token of %zu bytes (at most 16 MiB)", path,
                         (size_t)k);
        else if (r)
            rc = err_set(e, ERR_USAGE, "tokenizer %s: model.vocab[\"%s\"]: %s", path,
                         shown(v->key, v->keylen, buf),
                         taken ? "its id is another token's too" : "the same bytes appear twice");
        if ((uint32_t)id > *maxid) *maxid = (uint32_t)id;
    }
    free(tok);
    if (rc) return rc;
    int b = bpe_check_bytes(&t->m);
    if (b)
        return err_set(e, ERR_USAGE, "tokenizer %s: model.vocab has no token for the byte 0x%02x",
                       path, b - 1);

    const tjson *merges = tjson_get(model, "merges");
    if (!merges || merges->type != TJ_ARR)
        return err_set(e, ERR_USAGE, "tokenizer %s: model.merges is %s, expected an array", path,
                       tjson_type_name(merges));
    for (uint32_t i = 0; i < merges->n; i++) {
        const tjson *mg = &merges->u.kids[i];
        const char *part[2];
        size_t plen[2];
        if (mg->type == TJ_STR) { /* "left right" */
            const char *sp = memchr(mg->u.s, ' ', mg->n);
            if (!sp || memchr(sp + 1, ' ', mg->n - (size_t)(sp + 1 - mg->u.s)))
                return err_set(e, ERR_USAGE,
                               "tokenizer %s: model.merges[%u] \"%s\" is not two tokens", path, i,
                               shown(mg->u.s, mg->n, buf));
            part[0] = mg->u.s, plen[0] = (size_t)(sp - mg->u.s);
            part[1] = sp + 1, plen[1] = mg->n - plen[0] - 1;
        } else if (mg->type == TJ_ARR && mg->n == 2 && mg->u.kids[0].type == TJ_STR &&
                   mg->u.kids[1].type == TJ_STR) {
            for (int k = 0; k < 2; k++) part[k] = mg->u.kids[k].u.s, plen[k] = mg->u.kids[k].n;
        } else {
            return err_set(
                e, ERR_USAGE,
                "tokenizer %s: model.merges[%u] is %s, expected \"a b\" or [\"a\", \"b\"]", path, i,
                tjson_type_name(mg));
        }
        char *both = malloc(plen[0] + plen[1] + 1);
        if (!both) return err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
        uint32_t id[3];
        long k0 = bytelevel_decode(&bl, part[0], plen[0], both);
        long k1 = k0 < 0 ? -1 : bytelevel_decode(&bl, part[1], plen[1], both + k0);
        int which = -1;
        if (k0 > 0 && k1 > 0) {
            id[0] = bpe_lookup(&t->m, both, (size_t)k0);
            id[1] = bpe_lookup(&t->m, both + k0, (size_t)k1);
            id[2] = bpe_lookup(&t->m, both, (size_t)(k0 + k1));
            which = id[0] == BPE_NONE ? 0 : id[1] == BPE_NONE ? 1 : id[2] == BPE_NONE ? 2 : 3;
        }
        free(both);
        if (which == 3) {
            if (bpe_put_merge(&t->m, id[0], id[1], i, id[2]))
                return err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
            continue;
        }
        if (which == 2)
            return err_set(e, ERR_USAGE,
                           "tokenizer %s: model.merges[%u]: \"%s\"+\"%s\" is not in model.vocab",
                           path, i, shown(part[0], plen[0], buf), shown(part[1], plen[1], buf2));
        int bad = which < 0 ? (k0 <= 0 ? 0 : 1) : which;
        return err_set(e, ERR_USAGE, "tokenizer %s: model.merges[%u]: \"%s\" is not in model.vocab",
                       path, i, shown(part[bad], plen[bad], buf));
    }
    return 0;
}

/* The trie of the non-special tokens' contents (tokenizer_impl.h). */
static int build_trie(tokenizer *t, const char *path, tdm_err *e) {
    size_t total = 1;
    for (size_t k = 0; k < t->nmatch; k++) total += t->match[k].n;
    if (t->nmatch && !(t->trie = calloc(total, sizeof *t->trie)))
        return err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
    t->ntrie = 1;
    if (t->trie) t->trie[0].match = -1;
    for (size_t k = 0; k < t->nmatch; k++) {
        uint32_t node = 0;
        for (size_t b = 0; b < t->match[k].n; b++) {
            unsigned char c = (unsigned char)t->match[k].s[b];
            uint32_t *link = node ? &t->trie[node].child : &t->root[c], next = *link;
            while (node && next && t->trie[next].byte != c) link = &t->trie[next].sibling, next = *link;
            if (!next) { /* a new node (the root's children are found by byte in root[]) */
                next = (uint32_t)t->ntrie++;
                t->trie[next] = (struct tok_node){0, 0, -1, c};
                *link = next;
            }
            node = next;
        }
        t->trie[node].match = (int32_t)k;
    }
    return 0;
}

/* Whether a byte may begin a letter or digit where a safe cut falls (tokenizer.c cut_at). */
static int cut_letter(unsigned char b) {
    return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') || b >= 0xc0;
}

/* by first byte, length and content, then file order: the listings of one content side by side, the later last */
static int longest_first(const void *a, const void *b) {
    const tok_match *x = a, *y = b;
    unsigned char cx = (unsigned char)x->s[0], cy = (unsigned char)y->s[0];
    if (cx != cy) return cx < cy ? -1 : 1;
    if (x->n != y->n) return x->n < y->n ? 1 : -1;
    int d = memcmp(x->s, y->s, x->n);
    return d ? d : (x->order > y->order) - (x->order < y->order);
}

/* A flag of an added token: true, false or absent (dflt). */
static int added_flag(const tjson *a, const char *key, int dflt) {
    const tjson *v = tjson_get(a, key);
    return !v || v->type == TJ_NULL ? dflt : v->type == TJ_TRUE;
}

/* An added token that is not special ("special": false, the default) is matched in text
 * as Hugging Face matches it (tokenizer_impl.h); one whose content another lists again
 * keeps the later id, as the vocabulary does. */
static int add_match(tokenizer *t, const char *path, uint32_t i, const tjson *a, const tjson *c, uint32_t id,
                     tdm_err *e) {
    char buf[200];
    /* the flags are JSON true or false: "special": "true" read as false made a special
     * token one matched in text (Hugging Face refuses such a file) */
    static const char *const flags[] = {"special", "single_word", "lstrip", "rstrip", "normalized"};
    for (size_t k = 0; k < sizeof flags / sizeof *flags; k++) {
        const tjson *v = tjson_get(a, flags[k]);
        if (v && v->type != TJ_TRUE && v->type != TJ_FALSE && v->type != TJ_NULL)
            return err_set(e, ERR_USAGE, "tokenizer %s: added_tokens[%u] \"%s\": \"%s\" must be true or false, not %s",
                           path, i, shown(c->u.s, c->n, buf), flags[k], tjson_type_name(v));
    }
    if (added_flag(a, "special", 0)) return 0;
    if (added_flag(a, "single_word", 0))
        return err_set(e, ERR_USAGE, "tokenizer %s: added_tokens[%u] \"%s\": single_word (a match only as a whole "
                       "word) is not implemented for an added token that is not special", path, i,
                       shown(c->u.s, c->n, buf));
    char *s = NULL;
    size_t n = c->n;
    /* a "normalized" one is matched in the normalized text: its content's NFC; one that
     * is not, in the text as written (tokenizer.c: tok_nfc) */
    if (t->nfc && added_flag(a, "normalized", 1) && nfc_normalize(c->u.s, c->n, &s, &n))
        return err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
    if (c->n > 1024)
        return err_set(e, ERR_USAGE, "tokenizer %s: added_tokens[%u]: a token that is not special of %zu bytes: "
                       "matching one longer than 1 KiB in text is not implemented", path, i, (size_t)c->n);
    if (!s) { /* the content as it is */
        if (!(s = malloc(c->n + 1))) return err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
        memcpy(s, c->u.s, c->n);
        n = c->n;
    }
    /* room doubles when the count reaches a power of two (0, 1, 2, 4, ...) */
    int full = (t->nmatch & (t->nmatch - 1)) == 0;
    tok_match *m = !full ? t->match : realloc(t->match, (t->nmatch ? 2 * t->nmatch : 1) * sizeof *m);
    if (!m) {
        free(s);
        return err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
    }
    t->match = m;
    int raw = !added_flag(a, "normalized", 1);
    t->match[t->nmatch] = (tok_match){s, n, id, added_flag(a, "lstrip", 0), added_flag(a, "rstrip", 0), raw,
                                      (uint32_t)t->nmatch};
    t->nmatch++;
    t->nraw += raw;
    /* a safe cut is after a '\n', before a letter or digit: a match could hold one (a '\n'
     * then such a byte inside it), an lstrip one beginning there take the '\n' before it,
     * an rstrip one take the whitespace up to it (and the part after it, beyond the cut,
     * then gets its prefix space) — no cuts then (a non-ASCII lead byte counts as a letter) */
    for (size_t k = 0; k + 1 < n && !t->no_cuts; k++)
        if (s[k] == '\n' && cut_letter((unsigned char)s[k + 1])) t->no_cuts = 1;
    if (t->match[t->nmatch - 1].lstrip && cut_letter((unsigned char)s[0])) t->no_cuts = 1;
    if (t->match[t->nmatch - 1].rstrip) t->no_cuts = 1;
    /* one ending in a '\n' can end right at a cut: the part after it, beyond the cut, then
     * gets a prefix space (ByteLevel's add_prefix_space) that the cut part does not know */
    if (t->add_prefix_space && s[n - 1] == '\n') t->no_cuts = 1;
    return 0;
}

/* added_tokens: [{id, content, ...}]; an id the vocab has must carry the same bytes. */
static int load_added(tokenizer *t, const char *path, const tjson *added, uint32_t *maxid,
                      tdm_err *e) {
    if (!added || added->type == TJ_NULL) return 0;
    if (added->type != TJ_ARR)
        return err_set(e, ERR_USAGE, "tokenizer %s: added_tokens is %s, expected an array", path,
                       tjson_type_name(added));
    t->added = malloc((added->n ? added->n : 1) * sizeof *t->added);
    if (!t->added) return err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
    char buf[200];
    for (uint32_t i = 0; i < added->n; i++) {
        const tjson *a = &added->u.kids[i], *c = tjson_get(a, "content");
        int64_t id = as_id(tjson_get(a, "id"));
        if (id < 0 || !c || c->type != TJ_STR || c->n == 0)
            return err_set(
                e, ERR_USAGE,
                "tokenizer %s: added_tokens[%u] needs an \"id\" (an integer 0..%u) and a non-empty "
                "\"content\" string",
                path, i, MAX_ID);
        int r = bpe_set_token(&t->m, (uint32_t)id, c->u.s, c->n, 0);
        if (r < 0) return err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
        if (r == BPE_TOO_LONG)
            return err_set(e, ERR_USAGE, "tokenizer %s: added_tokens[%u]: a token of %zu bytes (at most 16 MiB)",
                           path, i, (size_t)c->n);
        size_t k = 0;
        const char *have = bpe_token(&t->m, (uint32_t)id, &k);
        if (r && (!have || k != c->n || memcmp(have, c->u.s, k)))
            return err_set(e, ERR_USAGE,
                           "tokenizer %s: added_tokens[%u] \"%s\": id %lld is another token's",
                           path, i, shown(c->u.s, c->n, buf), (long long)id);
        t->added[t->nadded++] = (uint32_t)id;
        if ((uint32_t)id > *maxid) *maxid = (uint32_t)id;
        int rc = add_match(t, path, i, a, c, (uint32_t)id, e);
        if (rc) return rc;
    }
    /* sorted so that a content listed again lies beside its earlier listing */
    if (t->nmatch > 1) qsort(t->match, t->nmatch, sizeof *t->match, longest_first);
    /* a content listed again: the later listing's (adjacent after the sort, in order) */
    size_t kept = 0;
    for (size_t k = 0; k < t->nmatch; k++) {
        if (k + 1 < t->nmatch && t->match[k + 1].n == t->match[k].n &&
            !memcmp(t->match[k + 1].s, t->match[k].s, t->match[k].n)) {
            t->nraw -= t->match[k].raw;
            free(t->match[k].s);
            continue;
        }
        t->match[kept++] = t->match[k];
    }
    t->nmatch = kept;
    return build_trie(t, path, e);
}

static int load_json(tokenizer *t, const char *path, const char *data, size_t n, tdm_err *e) {
    char msg[256];
    const tjson *root;
    tjson_doc *doc = tjson_parse(data, n, &root, msg, sizeof msg);
    if (!doc) return err_set(e, ERR_USAGE, "tokenizer %s: not valid JSON: %s", path, msg);
    int rc = 0;
    uint32_t maxid = 0;
    const tjson *norm = tjson_get(root, "normalizer");
    if (root->type != TJ_OBJ)
        rc = err_set(e, ERR_USAGE, "tokenizer %s: not a JSON object", path);
    else if (norm && norm->type != TJ_NULL) {
        if (is_str(tjson_get(norm, "type"), "NFC"))
            t->nfc = 1;
        else
            rc = err_set(e, ERR_USAGE,
                         "tokenizer %s: normalizer must be null or NFC (others are not supported)",
                         path);
    }
    if (!rc) rc = load_pretok(t, path, tjson_get(root, "pre_tokenizer"), e);
    if (!rc) rc = load_model(t, path, tjson_get(root, "model"), &maxid, e);
    if (!rc) rc = load_added(t, path, tjson_get(root, "added_tokens"), &maxid, e);
    if (!rc) {
        static const char *const eots[] = {"<|endoftext|>", "<|end_of_text|>", "</s>"};
        t->vocab = maxid + 1;
        for (size_t k = 0; k < sizeof eots / sizeof *eots && t->eot < 0; k++)
            t->eot = tokenizer_token_id(t, eots[k], strlen(eots[k]));
    }
    tjson_free(doc);
    return rc;
}

/* ---- the dispatch ---- */

int tokenizer_load(const char *path, const char *pattern, tokenizer **out, tdm_err *e) {
    *out = NULL;
    int want = -1;
    if (pattern && (want = pretok_from_name(pattern)) < 0)
        return err_set(
            e, ERR_USAGE,
            "tokenizer %s: unknown pattern \"%s\" (gpt2, r50k, cl100k, llama3, qwen2, o200k)", path,
            pattern);
    buf_t file = {0};
    /* 64 MiB: the largest published tokenizer files are ~35 MB, and a JSON tree takes
     * ~40 times its text in memory (at 4 GiB a hostile file asked for far more than any
     * machine has; at 256 MiB still ~10 GiB) */
    if (fileio_read_all(path, &file, (size_t)64 << 20) != 0) {
        int err = errno;
        free(file.p);
        return err == ENOMEM  ? err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path)
               : err == EFBIG ? err_set(e, ERR_USAGE, "tokenizer %s: larger than 64 MiB, which no tokenizer "
                                        "file is (the largest published are ~35 MB)", path)
                              : err_set(e, ERR_USAGE, "tokenizer %s: %s", path, fileio_strerror(err));
    }
    char *data = file.p;
    size_t n = file.n;
    int rc = 0;
    tokenizer *t = calloc(1, sizeof *t);
    if (!t || bpe_init(&t->m)) {
        free(t);
        free(data);
        return err_set(e, ERR_INTERNAL, "tokenizer %s: out of memory", path);
    }
    t->eot = -1;
    sha256_digest d;
    sha256(data, n, &d);
    sha256_hex(&d, t->digest);
    size_t i = 0;
    while (i < n && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n')) i++;
    if (i < n && data[i] == '{') {
        rc = load_json(t, path, data, n, e);
        if (!rc && want >= 0 && (pretok_pattern)want != t->pat &&
            !((pretok_pattern)want == PRETOK_CL100K && t->pat == PRETOK_LLAMA3))
            rc =
                err_set(e, ERR_USAGE, "tokenizer %s: its pre_tokenizer is %s, not the %s asked for",
                        path, pretok_name(t->pat), pattern);
        if (!rc)
            snprintf(t->kind, sizeof t->kind, "hf-bpe:%s%s", pretok_name(t->pat),
                     t->nfc ? "+nfc" : "");
    } else if (want < 0) {
        rc =
            err_set(e, ERR_USAGE,
                    "tokenizer %s: not a tokenizer.json, and a tiktoken ranks file needs a pattern "
                    "(--pattern gpt2|r50k|cl100k|o200k|llama3|qwen2)",
                    path);
    } else {
        t->pat = (pretok_pattern)want;
        rc = load_tiktoken(t, path, data, n, e);
        if (!rc) snprintf(t->kind, sizeof t->kind, "tiktoken:%s", pretok_name(t->pat));
    }
    free(data);
    if (rc) {
        tokenizer_free(t);
        return rc;
    }
    *out = t;
    return 0;
}
