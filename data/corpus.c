/* corpus.c — the synthetic Markov corpus generator behind `tandem gen-corpus`. */
#include "data/corpus.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/prep.h"
#include "data/shard.h"
#include "util/fileio.h"
#include "util/rng.h"
#include "util/testhook.h"

/* Coordinates of the generator's Philox streams (purpose RNG_CORPUS). */
#define STREAM_SHARED_ALPHABET 0xFFFFFFFFu
#define STREAM_ALPHABET 0u
#define STREAM_SUCCESSORS 1u
#define STREAM_TEXT 2u

void corpus_opts_init(corpus_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_domains = CORPUS_DEFAULT_DOMAINS;
    o->val_tokens = CORPUS_DEFAULT_VAL;
    o->test_tokens = CORPUS_DEFAULT_TEST;
    o->shard_tokens = CORPUS_DEFAULT_SHARD;
    o->vocab = CORPUS_DEFAULT_VOCAB;
    o->seed = CORPUS_DEFAULT_SEED;
    o->order = CORPUS_DEFAULT_ORDER;
    o->report = stdout;
}

static int alphabet_size(int vocab) {
    return vocab < CORPUS_MAX_ALPHABET ? vocab : CORPUS_MAX_ALPHABET;
}

/* b_m of this corpus: the options' explicit list, else the default sequence. */
static int domain_branching(const corpus_opts *o, int m);

int corpus_branching(int n_domains, int vocab, int m) {
    int a = alphabet_size(vocab);
    if (a < 2 || n_domains < 1 || m < 0) return a < 1 ? 1 : a;
    double r = n_domains > 1 ? pow(a / 2.0, 1.0 / (n_domains - 1)) : 2.0;
    int b = 0;
    for (int i = 0; i <= m; i++) {
        /* Exact integers on the doubling path, so the common case never depends on libm. */
        int next = r >= 2.0 ? (i < 30 ? 2 << i : a) : (int)lround(2.0 * pow(r, i));
        if (next <= b) next = b + 1;
        b = next > a ? a : next;
    }
    return b;
}

static void zipf_probs(int b, double *p) {
    double z = 0;
    for (int j = 0; j < b; j++) z += 1.0 / (j + 1);
    for (int j = 0; j < b; j++) p[j] = 1.0 / (j + 1) / z;
}

double corpus_entropy_bits(int b) {
    double p[CORPUS_MAX_ALPHABET];
    if (b < 1 || b > CORPUS_MAX_ALPHABET) return NAN;
    zipf_probs(b, p);
    double h = 0;
    for (int j = 0; j < b; j++) h -= p[j] * log2(p[j]);
    return h;
}

/* One domain's source: its alphabet, successor table and cumulative probabilities. */
typedef struct {
    int a, b, order;
    uint16_t alphabet[CORPUS_MAX_ALPHABET];
    uint8_t *succ; /* [a^order contexts][b] alphabet indices */
    double cdf[CORPUS_MAX_ALPHABET];
} source;

/* `vperm` is the vocabulary after the shared partial shuffle; its first a/2 entries are
 * the shared tokens and are kept, the rest of the alphabet is drawn from the remainder. */
static int source_init(source *s, const uint16_t *vperm, int vocab, uint64_t seed, int m, int b,
                       int order) {
    s->a = alphabet_size(vocab);
    s->b = b;
    s->order = order;
    int contexts = order == 2 ? s->a * s->a : s->a;
    uint16_t *v = malloc((size_t)vocab * sizeof *v);
    s->succ = malloc((size_t)contexts * (size_t)b);
    if (!v || !s->succ) {
        free(v);
        free(s->succ);
        s->succ = NULL;
        return -1;
    }
    memcpy(v, vperm, (size_t)vocab * sizeof *v);
    rng_stream r;
    rng_stream_init(&r, seed, RNG_CORPUS, (uint32_t)m, 0, STREAM_ALPHABET);
    for (int i = s->a / 2; i < s->a; i++) {
        int k = i + (int)rng_below(&r, (uint64_t)(vocab - i));
        uint16_t t = v[i];
        v[i] = v[k];
        v[k] = t;
    }
    memcpy(s->alphabet, v, (size_t)s->a * sizeof *v);
    free(v);
    uint8_t idx[CORPUS_MAX_ALPHABET];
    for (int ctx = 0; ctx < contexts; ctx++) {
        for (int i = 0; i < s->a; i++) idx[i] = (uint8_t)i;
        rng_stream_init(&r, seed, RNG_CORPUS, (uint32_t)m, (uint32_t)ctx, STREAM_SUCCESSORS);
        for (int j = 0; j < b; j++) {
            int k = j + (int)rng_below(&r, (uint64_t)(s->a - j));
            uint8_t t = idx[j];
            idx[j] = idx[k];
            idx[k] = t;
        }
        memcpy(s->succ + (size_t)ctx * (size_t)b, idx, (size_t)b);
    }
    double p[CORPUS_MAX_ALPHABET];
    zipf_probs(b, p);
    double c = 0;
    for (int j = 0; j < b; j++) s->cdf[j] = c += p[j];
    return 0;
}

/* A running chain of one split. */
typedef struct {
    rng_stream r;
    int prev2, prev1; /* alphabet indices */
} chain;

static void chain_init(chain *c, const source *s, uint64_t seed, int m, int split) {
    rng_stream_init(&c->r, seed, RNG_CORPUS, (uint32_t)m, (uint32_t)split, STREAM_TEXT);
    c->prev2 = (int)rng_below(&c->r, (uint64_t)s->a);
    c->prev1 = (int)rng_below(&c->r, (uint64_t)s->a);
}

static void chain_emit(chain *c, const source *s, uint16_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double u = rng_uniform(&c->r);
        int j = 0;
        while (j < s->b - 1 && u >= s->cdf[j]) j++; /* Zipf: usually stops in a step or two */
        size_t ctx = s->order == 2 ? (size_t)c->prev2 * (size_t)s->a + (size_t)c->prev1
                                   : (size_t)c->prev1;
        int next = s->succ[ctx * (size_t)s->b + (size_t)j];
        out[i] = s->alphabet[next];
        c->prev2 = c->prev1;
        c->prev1 = next;
    }
}

static uint64_t split_count(const corpus_opts *o, int m, int split) {
    if (split == SPLIT_VAL) return o->val_tokens;
    if (split == SPLIT_TEST) return o->test_tokens;
    if (o->n_train == 0) return CORPUS_DEFAULT_TRAIN;
    return o->train_tokens[o->n_train == 1 ? 0 : m];
}

static uint64_t shard_count(const corpus_opts *o, uint64_t tokens) {
    return (tokens + o->shard_tokens - 1) / o->shard_tokens;
}

/* Digits in shard numbers, at least 3, enough that names sort in shard order. */
static int shard_digits(uint64_t shards) {
    int d = 1;
    for (uint64_t x = shards > 0 ? shards - 1 : 0; x >= 10; x /= 10) d++;
    return d < 3 ? 3 : d;
}

static int domain_branching(const corpus_opts *o, int m) {
    return o->successors ? o->successors[m] : corpus_branching(o->n_domains, o->vocab, m);
}

static int check_opts(const corpus_opts *o, tdm_err *e) {
    if (!o->out || !o->out[0]) return err_set(e, ERR_USAGE, "no output directory");
    if (o->order != 1 && o->order != 2)
        return err_set(e, ERR_USAGE, "Markov order %d is not 1 or 2", o->order);
    for (int m = 0; o->successors && m < o->n_domains; m++)
        if (o->successors[m] < 1 || o->successors[m] > alphabet_size(o->vocab))
            return err_set(e, ERR_USAGE, "domain %d: %d successors per context is outside 1..%d "
                           "(the alphabet of vocab %d)", m, o->successors[m], alphabet_size(o->vocab),
                           o->vocab);
    if (o->n_domains < 1 || o->n_domains > DATASET_MAX_DOMAINS)
        return err_set(e, ERR_USAGE, "%d domains is outside 1..%d", o->n_domains,
                       DATASET_MAX_DOMAINS);
    for (int m = 0; o->names && m < o->n_domains; m++) {
        const char *n = o->names[m];
        if (!n || !dataset_name_ok(n) || !strcmp(n, ".") || !strcmp(n, ".."))
            return err_set(e, ERR_USAGE,
                           "domain name '%s' must be 1..%d characters of "
                           "[A-Za-z0-9_.-] (and not . or ..)",
                           n ? n : "", DATASET_NAME_MAX);
        if (dataset_name_reserved(n))
            return err_set(e, ERR_USAGE, "domain name '%s' " DATASET_RESERVED_WHY, n);
        if (dataset_folder_name_bad(n))
            return err_set(e, ERR_USAGE, "domain name '%s' %s", n, dataset_folder_name_bad(n));
        for (int k = 0; k < m; k++)
            if (!strcmp(o->names[k], n))
                return err_set(e, ERR_USAGE, "domain name '%s' appears twice", n);
            else if (!strcasecmp(o->names[k], n)) /* as prep */
                return err_set(e, ERR_USAGE, "domain names '%s' and '%s' differ only in case; their directories "
                               "would collide on a case-insensitive file system: rename one", o->names[k], n);
    }
    if (o->n_train != 0 && o->n_train != 1 && o->n_train != o->n_domains)
        return err_set(e, ERR_USAGE,
                       "%d train token counts for %d domains; give one for all or "
                       "one per domain",
                       o->n_train, o->n_domains);
    for (int i = 0; i < o->n_train; i++)
        if (o->train_tokens[i] < 1)
            return err_set(e, ERR_USAGE, "train token count #%d must be >= 1", i + 1);
    if (o->val_tokens < 1) return err_set(e, ERR_USAGE, "val tokens must be >= 1");
    if (o->shard_tokens < 1 || o->shard_tokens > SHARD_MAX_TOKENS)
        return err_set(e, ERR_USAGE, "shard tokens %llu is outside 1..%u",
                       (unsigned long long)o->shard_tokens, SHARD_MAX_TOKENS);
    if (o->vocab < 2 || o->vocab > 65536) /* a model needs two tokens at least (model.vocab) */
        return err_set(e, ERR_USAGE, "vocab %d is outside 2..65536", o->vocab);
    return 0;
}

/* mkdir -p. */
static int make_dirs(const char *path, tdm_err *e) {
    char *p = strdup(path);
    if (!p) return err_set(e, ERR_INTERNAL, "%s: out of memory", path);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0') continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            int rc = err_sys(e, ERR_USAGE, errno, "cannot create directory %s", p);
            free(p);
            return rc;
        }
        *s = c;
        if (c == '\0') break;
    }
    free(p);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return err_set(e, ERR_USAGE, "%s exists and is not a directory", path);
    return 0;
}

/* Whether `file` (a directory entry) is a shard this run writes. */
static int is_planned(const corpus_opts *o, int m, const char *file, int *is_shard) {
    int s, nd;
    uint64_t v;
    if (!(*is_shard = dataset_shard_match(file, &s, &v, &nd))) return 0;
    uint64_t shards = shard_count(o, split_count(o, m, s));
    return nd == shard_digits(shards) && v < shards;
}

static int check_no_stale(const corpus_opts *o, int m, const char *dir, tdm_err *e) {
    DIR *d = opendir(dir);
    if (!d) return 0; /* not there yet */
    int rc = 0;
    struct dirent *de;
    while (!rc && (de = readdir(d))) {
        int is_shard;
        if (!is_planned(o, m, de->d_name, &is_shard) && is_shard)
            rc = err_set(e, ERR_USAGE,
                         "%s/%s is from an earlier corpus and would be read as part "
                         "of this one; remove it or choose another --out",
                         dir, de->d_name);
    }
    closedir(d);
    return rc;
}

static char *path_join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

static int write_split(const corpus_opts *o, const source *s, int m, int split, const char *dir,
                       uint16_t *buf, tdm_err *e) {
    uint64_t total = split_count(o, m, split), shards = shard_count(o, total);
    int digits = shard_digits(shards);
    chain c;
    chain_init(&c, s, o->seed, m, split);
    for (uint64_t k = 0; k < shards; k++) {
        uint64_t n = total - k * o->shard_tokens;
        if (n > o->shard_tokens) n = o->shard_tokens;
        chain_emit(&c, s, buf, (size_t)n);
        char file[64];
        dataset_shard_name(split, k, digits, file);
        char *path = path_join(dir, file);
        if (!path) return err_set(e, ERR_INTERNAL, "out of memory");
        int rc = shard_write(path, buf, (size_t)n, e);
        free(path);
        if (rc) return rc;
    }
    return 0;
}

static int write_yaml(const corpus_opts *o, char names[][DATASET_NAME_MAX + 1], tdm_err *e) {
    char header[256];
    snprintf(header, sizeof header,
             "# dataset written by tandem gen-corpus (seed %llu): %d order-%d Markov domains.\n"
             "# A domain's entropy is the lowest loss any model can reach on it.\n",
             (unsigned long long)o->seed, o->n_domains, o->order);
    dataset_yaml_domain doms[DATASET_MAX_DOMAINS];
    for (int m = 0; m < o->n_domains; m++) {
        int b = domain_branching(o, m);
        double h = corpus_entropy_bits(b);
        doms[m].name = names[m];
        snprintf(doms[m].comment, sizeof doms[m].comment,
                 "%d successors/context, entropy %.4f bits = %.4f nats", b, h, h * M_LN2);
    }
    char *path = path_join(o->out, "dataset.yaml");
    int rc = path ? dataset_write_yaml(path, header, o->vocab, doms, o->n_domains, o->test_tokens > 0, e)
                  : err_set(e, ERR_INTERNAL, "out of memory");
    free(path);
    return rc;
}

static void report(const corpus_opts *o, const char *name, int m) {
    if (!o->report) return;
    int b = domain_branching(o, m);
    double h = corpus_entropy_bits(b);
    fprintf(o->report,
            "%s: train %llu, val %llu, test %llu tokens; order-%d Markov, %d successors/context "
            "over %d tokens; entropy %.4f bits = %.4f nats/token (best achievable loss)\n",
            name, (unsigned long long)split_count(o, m, SPLIT_TRAIN),
            (unsigned long long)o->val_tokens, (unsigned long long)o->test_tokens, o->order, b,
            alphabet_size(o->vocab), h, h * M_LN2);
}

/* The shared half of every alphabet: a seeded partial shuffle of the vocabulary. */
static uint16_t *shared_vocab(int vocab, uint64_t seed) {
    uint16_t *v = malloc((size_t)vocab * sizeof *v);
    if (!v) return NULL;
    for (int i = 0; i < vocab; i++) v[i] = (uint16_t)i;
    rng_stream r;
    rng_stream_init(&r, seed, RNG_CORPUS, STREAM_SHARED_ALPHABET, 0, STREAM_ALPHABET);
    for (int i = 0; i < alphabet_size(vocab) / 2; i++) {
        int k = i + (int)rng_below(&r, (uint64_t)(vocab - i));
        uint16_t t = v[i];
        v[i] = v[k];
        v[k] = t;
    }
    return v;
}

int corpus_generate(const corpus_opts *o, tdm_err *e) {
    int rc = check_opts(o, e);
    if (rc) {
        if (e) err_prefix(e, "gen-corpus: ");
        return rc;
    }
    char names[DATASET_MAX_DOMAINS][DATASET_NAME_MAX + 1];
    char *dirs[DATASET_MAX_DOMAINS] = {0};
    uint64_t most = 0;
    for (int m = 0; m < o->n_domains; m++) {
        if (o->names)
            snprintf(names[m], sizeof names[m], "%s", o->names[m]);
        else
            snprintf(names[m], sizeof names[m], "d%d", m);
        for (int s = 0; s < SPLIT_COUNT; s++) {
            uint64_t n = split_count(o, m, s);
            if (n > most) most = n;
        }
    }
    if (most > o->shard_tokens) most = o->shard_tokens;
    uint16_t *buf = malloc((size_t)most * sizeof *buf);
    uint16_t *vperm = shared_vocab(o->vocab, o->seed);
    if (!buf || !vperm) rc = err_set(e, ERR_INTERNAL, "out of memory");
    /* Every check before the first write, so a refused run leaves nothing behind. */
    for (int m = 0; !rc && m < o->n_domains; m++) {
        dirs[m] = path_join(o->out, names[m]);
        if (!dirs[m])
            rc = err_set(e, ERR_INTERNAL, "out of memory");
        else
            rc = check_no_stale(o, m, dirs[m], e);
    }
    int lock = -1; /* one writer into --out at a time, as prep */
    if (!rc && (lock = prep_lock_out(o->out, e)) < 0) rc = e->code;
    for (int m = 0; !rc && m < o->n_domains; m++) rc = check_no_stale(o, m, dirs[m], e); /* again, under it */
    /* From here on the output changes: first retire the old description, so that a run
     * killed midway over an earlier corpus leaves no dataset.yaml vouching for a mix of
     * old and new shards (written last, it is the mark of a whole corpus), as prep does. */
    char *yaml = rc ? NULL : path_join(o->out, "dataset.yaml");
    if (!rc && !yaml) rc = err_set(e, ERR_INTERNAL, "out of memory");
    if (!rc && unlink(yaml) != 0 && errno != ENOENT)
        rc = err_sys(e, ERR_USAGE, errno, "cannot remove the old %s", yaml);
    free(yaml);
    for (int m = 0; !rc && m < o->n_domains; m++) fileio_sweep_dead_temporaries(dirs[m], dataset_shard_stem, 60.0);
    for (int m = 0; !rc && m < o->n_domains; m++) {
        rc = make_dirs(dirs[m], e);
        source s = {0};
        int b = domain_branching(o, m);
        if (!rc && source_init(&s, vperm, o->vocab, o->seed, m, b, o->order))
            rc = err_set(e, ERR_INTERNAL, "out of memory");
        for (int sp = 0; !rc && sp < SPLIT_COUNT; sp++)
            if (split_count(o, m, sp) > 0) rc = write_split(o, &s, m, sp, dirs[m], buf, e);
        free(s.succ);
        if (!rc) report(o, names[m], m);
        testhook_kill_at("corpus"); /* killed between two domains, for the tests */
    }
    if (!rc) rc = write_yaml(o, names, e);
    if (lock >= 0) close(lock);
    for (int m = 0; m < o->n_domains; m++) free(dirs[m]);
    free(buf);
    free(vperm);
    if (rc && e) err_prefix(e, "gen-corpus: ");
    return rc;
}
