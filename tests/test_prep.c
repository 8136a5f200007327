/* test_prep.c — `tandem prep`: byte-level shards from text, JSON lines and JSON records,
 * plain or compressed (data/prep.h, data/textsrc.h, data/docread.h, data/jsonl.h, the CLI),
 * and the shards of a subword tokenizer (--tokenizer: data/prep_encode.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "data/dataset.h"
#include "data/docread.h"
#include "data/jsonl.h"
#include "data/prep.h"
#include "data/shard.h"
#include "data/textsrc.h"
#include "data/tokenizer.h"
#include "data/utf8.h"
#include "util/buf.h"
#include "cli/cmds.h"
#include "tests/test.h"
#include "util/rng.h"

/* ---- helpers ---------------------------------------------------------------------- */

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (!p) abort();
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

static int write_bytes(const char *path, const void *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(buf, 1, len, f);
    return (fclose(f) == 0 && w == len) ? 0 : -1;
}

/* Writes `len` seeded bytes at dir/rel: printable text with newlines, or (raw) any byte. */
static unsigned char *make_file(const char *dir, const char *rel, size_t len, uint64_t seed,
                                int raw) {
    unsigned char *b = malloc(len ? len : 1);
    if (!b) abort();
    rng_stream r;
    rng_stream_init(&r, seed, RNG_TEST, 7, 0, 0);
    for (size_t i = 0; i < len; i++) {
        uint32_t x = rng_u32(&r);
        b[i] = raw ? (unsigned char)x : (x % 61 == 0 ? '\n' : (unsigned char)(' ' + x % 95));
    }
    char *p = join(dir, rel);
    if (write_bytes(p, b, len)) abort();
    free(p);
    return b;
}

static unsigned char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    unsigned char *b = malloc(cap);
    for (size_t r; b && (r = fread(b + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) {
            unsigned char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    fclose(f);
    *len = n;
    return b;
}

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Options for a silent run into `out` over the given inputs. */
static void quiet_opts(prep_opts *o, const char *out, const prep_input *in, int n) {
    prep_opts_init(o);
    o->out = out;
    o->inputs = in;
    o->n_inputs = n;
    o->report = NULL;
    o->warnings = NULL;
    o->progress = NULL;
}

/* A split's tokens, shard after shard, as bytes (every token is < 256: the loader checked). */
static unsigned char *split_bytes(const dataset *ds, int m, int s, size_t *len) {
    size_t n_sh, total = 0;
    const shard *sh = dataset_shards(ds, m, s, &n_sh);
    for (size_t i = 0; i < n_sh; i++) total += sh[i].n;
    unsigned char *b = malloc(total ? total : 1);
    if (!b) abort();
    size_t k = 0;
    for (size_t i = 0; i < n_sh; i++)
        for (size_t j = 0; j < sh[i].n; j++) b[k++] = (unsigned char)sh[i].tok[j];
    *len = total;
    return b;
}

static int count_tmp_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));) n += strstr(de->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

/* Writes text (NUL-terminated) at dir/rel. */
static void put_text(const char *dir, const char *rel, const char *text) {
    char *p = join(dir, rel);
    if (write_bytes(p, text, strlen(text))) abort();
    free(p);
}

/* Compresses src into dst: gzip (zlib) or zstd. */
static int compress_file(const char *src, const char *dst, int zst) {
    size_t n;
    unsigned char *b = read_all(src, &n);
    if (!b) return -1;
    int rc = -1;
    if (!zst) {
        gzFile g = gzopen(dst, "wb9");
        if (g && (n == 0 || gzwrite(g, b, (unsigned)n) == (int)n)) rc = 0;
        if (g && gzclose(g) != Z_OK) rc = -1;
    } else {
        /* with a checksum, so that flipped bytes are found for sure */
        size_t cap = ZSTD_compressBound(n);
        void *z = malloc(cap);
        ZSTD_CCtx *c = ZSTD_createCCtx();
        if (z && c && !ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1))) {
            size_t zn = ZSTD_compress2(c, z, cap, b, n);
            if (!ZSTD_isError(zn)) rc = write_bytes(dst, z, zn);
        }
        ZSTD_freeCCtx(c);
        free(z);
    }
    free(b);
    return rc;
}

/* The split rule of prep.h computed here from util/rng.h and FNV-1a, not through prep.c. */
static int expected_split(uint64_t seed, const char *name, uint64_t k, const double f[3]) {
    uint32_t key = 2166136261u;
    for (const char *c = name; *c; c++) key = (key ^ (unsigned char)*c) * 16777619u;
    rng_stream r;
    rng_stream_init(&r, seed, PREP_RNG_PURPOSE, key, (uint32_t)k, (uint32_t)(k >> 32));
    double u = rng_uniform(&r);
    if (u < f[0]) return SPLIT_TRAIN;
    if (f[2] == 0 || u < f[0] + f[1]) return SPLIT_VAL;
    return SPLIT_TEST;
}

/* A domain's expected documents, in order. */
typedef struct docs {
    char **p;
    size_t *n;
    int count;
} docs;

static void add_doc(docs *d, const void *p, size_t n) {
    d->p = realloc(d->p, (size_t)(d->count + 1) * sizeof *d->p);
    d->n = realloc(d->n, (size_t)(d->count + 1) * sizeof *d->n);
    if (!d->p || !d->n) abort();
    d->p[d->count] = malloc(n + 1);
    memcpy(d->p[d->count], p, n);
    d->n[d->count++] = n;
}

static void add_str(docs *d, const char *s) {
    add_doc(d, s, strlen(s));
}

static void free_docs(docs *d) {
    for (int i = 0; i < d->count; i++) free(d->p[i]);
    free(d->p), free(d->n);
    memset(d, 0, sizeof *d);
}

/* Checks that domain m's splits hold exactly its documents, each followed by '\n', in
 * order, each in the split the rule gives (no rescue). Returns 0, or -1 after a failed
 * CHECK. */
static int check_docs(const dataset *ds, int m, const docs *want, uint64_t seed,
                      const double f[3]) {
    unsigned char *sp[SPLIT_COUNT];
    size_t sl[SPLIT_COUNT], off[SPLIT_COUNT] = {0};
    for (int s = 0; s < SPLIT_COUNT; s++) sp[s] = split_bytes(ds, m, s, &sl[s]);
    const char *name = ds->domains[m].name;
    int bad = 0;
    for (int k = 0; k < want->count && !bad; k++) {
        int s = expected_split(seed, name, (uint64_t)k, f);
        size_t n = want->n[k];
        if (prep_doc_split(seed, name, (uint64_t)k, f) != s) {
            fprintf(stderr, "  %s doc %d: prep_doc_split disagrees with the rule\n", name, k);
            bad = 1;
        } else if (off[s] + n + 1 > sl[s] || memcmp(sp[s] + off[s], want->p[k], n) ||
                   sp[s][off[s] + n] != '\n') {
            fprintf(stderr, "  %s doc %d (%zu bytes) is not next in %s (at %zu of %zu)\n", name,
                    k, n, dataset_split_name(s), off[s], sl[s]);
            bad = 1;
        }
        off[s] += n + 1;
    }
    for (int s = 0; s < SPLIT_COUNT && !bad; s++)
        if (off[s] != sl[s]) {
            fprintf(stderr, "  %s %s: %zu bytes of documents, %zu tokens in shards\n", name,
                    dataset_split_name(s), off[s], sl[s]);
            bad = 1;
        }
    for (int s = 0; s < SPLIT_COUNT; s++) free(sp[s]);
    CHECK_OR_RET(!bad, "domain %s does not hold its documents", name);
    return 0;
}

/* A memory stream for warnings or the report. */
typedef struct memout {
    FILE *f;
    char *buf;
    size_t len;
} memout;

static FILE *memout_open(memout *m) {
    m->buf = NULL;
    m->len = 0;
    m->f = open_memstream(&m->buf, &m->len);
    if (!m->f) abort();
    return m->f;
}

/* Closes the stream; m->buf holds the text (free it). */
static const char *memout_close(memout *m) {
    fclose(m->f);
    m->f = NULL;
    return m->buf ? m->buf : "";
}

/* Occurrences of needle in hay. */
static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++) n++;
    return n;
}

/* Random printable text (no '\n'-only guarantee), seeded, into out[0..n). */
static void rand_text(char *out, size_t n, uint64_t seed) {
    rng_stream r;
    rng_stream_init(&r, seed, RNG_TEST, 9, 0, 0);
    for (size_t i = 0; i < n; i++) {
        uint32_t x = rng_u32(&r);
        out[i] = x % 61 == 0 ? ' ' : (char)('a' + x % 26);
    }
}

/* Writes a .jsonl of n records {"text": "..."} of 20..119 random letters each, and adds
 * them to d. */
static void make_jsonl(const char *dir, const char *rel, int n, uint64_t seed, docs *d) {
    char *p = join(dir, rel);
    FILE *f = fopen(p, "wb");
    if (!f) abort();
    for (int i = 0; i < n; i++) {
        char t[128];
        size_t len = 20 + (size_t)((seed * 31 + (uint64_t)i * 7) % 100);
        rand_text(t, len, seed * 100000 + (uint64_t)i);
        fprintf(f, "{\"id\": %d, \"text\": \"%.*s\"}\n", i, (int)len, t);
        if (d) add_doc(d, t, len);
    }
    fclose(f);
    free(p);
}

/* ---- the documents, the partition, the dataset ------------------------------------- */

/* Two domains over a tree: text files, a .jsonl, a subdirectory, an empty file, a
 * symlink and a binary file; domain b is given twice (a file, then a directory). */
static void test_prep_partitions_the_documents(void) {
    char *dir = test_tmpdir("prep");
    char *in = join(dir, "in"), *a = join(in, "a"), *bdir = join(in, "bdir");
    char *sub = join(a, "sub"), *out = join(dir, "out");
    CHECK(mkdir(in, 0777) == 0 && mkdir(a, 0777) == 0 && mkdir(sub, 0777) == 0 &&
              mkdir(bdir, 0777) == 0,
          "mkdir");
    docs da = {0}, db = {0};
    /* sorted path order: docs.jsonl, empty.txt, sub.txt, sub/y.txt, sub/z.bin, x.txt
     * ("sub.txt" < "sub/..." since '.' < '/') */
    make_jsonl(a, "docs.jsonl", 40, 3, &da);
    unsigned char *subtxt = make_file(a, "sub.txt", 1234, 2, 0);
    unsigned char *y = make_file(a, "sub/y.txt", 7001, 3, 0);
    free(make_file(a, "sub/z.bin", 3000, 4, 1)); /* any byte: binary, left out */
    free(make_file(a, "empty.txt", 0, 5, 0));
    unsigned char *x = make_file(a, "x.txt", 5000, 1, 0);
    add_doc(&da, subtxt, 1234), add_doc(&da, y, 7001), add_doc(&da, x, 5000);
    char *link = join(a, "zz-link.txt");
    CHECK(symlink("x.txt", link) == 0, "symlink: %s", strerror(errno));
    /* hidden ones are left out as a glob leaves them (before: read, a .git/config's token
     * and all, into the shards) */
    char *git = join(a, ".git"), *cache = join(sub, ".cache");
    CHECK(mkdir(git, 0777) == 0 && mkdir(cache, 0777) == 0, "mkdir hidden");
    free(make_file(a, ".git/config", 300, 21, 0));
    free(make_file(a, ".env", 200, 22, 0));
    free(make_file(a, "sub/.cache/c.txt", 400, 23, 0));
    free(git), free(cache);
    unsigned char *b1 = make_file(in, "b.txt", 2500, 6, 0);
    free(make_file(bdir, "c.txt", 4100, 7, 1)); /* binary */
    unsigned char *b3 = make_file(bdir, "a.txt", 900, 8, 0);
    add_doc(&db, b1, 2500), add_doc(&db, b3, 900);
    make_jsonl(bdir, "d.jsonl", 30, 9, &db);

    char *pb = join(in, "b.txt");
    prep_input inputs[] = {{"alpha", a}, {"b", pb}, {"b", bdir}};
    prep_opts o;
    quiet_opts(&o, out, inputs, 3);
    o.split[0] = 0.6, o.split[1] = 0.2, o.split[2] = 0.2;
    o.shard_tokens = 1000; /* several shards per split, cutting through documents */
    o.seed = 11;
    prep_stats st[DATASET_MAX_DOMAINS];
    int n_st = 0;
    o.stats = st, o.n_stats = &n_st;
    memout rep, warn;
    o.report = memout_open(&rep);
    o.warnings = memout_open(&warn);
    tdm_err e = {0};
    int rc = prep_run(&o, &e);
    const char *rtext = memout_close(&rep), *wtext = memout_close(&warn);
    CHECK(rc == 0, "prep: %s", e.msg);

    char *yaml = join(out, "dataset.yaml");
    dataset ds;
    rc = dataset_load(&ds, yaml, &e);
    CHECK(rc == 0, "dataset_load: %s", e.msg);
    int shape = ds.vocab == 256 && ds.n_domains == 2 && !strcmp(ds.domains[0].name, "alpha") &&
                !strcmp(ds.domains[1].name, "b");
    int ka = shape ? check_docs(&ds, 0, &da, 11, o.split) : -1;
    int kb = shape ? check_docs(&ds, 1, &db, 11, o.split) : -1;
    int full = 1;
    for (int m = 0; shape && m < 2; m++)
        for (int s = 0; s < SPLIT_COUNT; s++) {
            size_t n;
            const shard *sh = dataset_shards(&ds, m, s, &n);
            for (size_t i = 0; i + 1 < n; i++) full &= sh[i].n == 1000;
            full &= n >= 1 && sh[n - 1].n >= 1 && sh[n - 1].n <= 1000;
        }
    dataset_free(&ds);
    CHECK(shape, "dataset shape: vocab %d, %d domains", ds.vocab, ds.n_domains);
    CHECK(ka == 0 && kb == 0, "documents misplaced");
    CHECK(full, "a shard other than a split's last is not full");
    /* the summary's numbers */
    uint64_t text_a = 0;
    for (int k = 0; k < da.count; k++) text_a += da.n[k];
    CHECK(n_st == 2 && st[0].files == 6 && st[0].files_used == 4 && st[0].docs == 43 &&
              st[0].text_bytes == text_a && st[0].tokens == text_a + 43 &&
              st[0].skipped[TEXTSRC_BINARY] == 1 && st[0].skipped[TEXTSRC_EMPTY] == 1 &&
              st[0].skipped[TEXTSRC_SPECIAL] == 1 && st[0].skipped[TEXTSRC_HIDDEN] == 3 && st[0].n_moved == 0,
          "alpha stats: %d domains, files %llu used %llu docs %llu bytes %llu tokens %llu",
          n_st, (unsigned long long)st[0].files, (unsigned long long)st[0].files_used,
          (unsigned long long)st[0].docs, (unsigned long long)st[0].text_bytes,
          (unsigned long long)st[0].tokens);
    CHECK(st[1].docs == 32 && st[1].files == 4 && st[1].skipped[TEXTSRC_BINARY] == 1 &&
              st[1].split_docs[0] + st[1].split_docs[1] + st[1].split_docs[2] == 32 &&
              st[1].split_tokens[0] + st[1].split_tokens[1] + st[1].split_tokens[2] ==
                  st[1].tokens,
          "b stats");
    char row[200];
    snprintf(row, sizeof row, "alpha        4        43 %13llu %13llu  %llu/%llu/%llu",
             (unsigned long long)text_a, (unsigned long long)(text_a + 43),
             (unsigned long long)st[0].split_docs[0], (unsigned long long)st[0].split_tokens[0],
             (unsigned long long)st[0].shards[0]);
    CHECK(strstr(rtext, "domain ") && strstr(rtext, row) &&
              strstr(rtext, "alpha: 4 of 6 files gave documents; left out: 1 binary, 1 empty, "
                            "1 symlink/special, 3 hidden\n") &&
              strstr(rtext, "b: 3 of 4 files gave documents; left out: 1 binary\n") &&
              !strstr(rtext, "moved"),
          "report:\n%s(want row '%s')", rtext, row);
    /* the binary files, the symlink and the hidden ones are named; the empty file is counted only */
    CHECK(strstr(wtext, "prep: alpha: ") && strstr(wtext, "sub/z.bin: ") && strstr(wtext, "(binary, left out)") &&
              strstr(wtext, "symlink") && !strstr(wtext, "empty.txt") && strstr(wtext, "a/.git: hidden") &&
              strstr(wtext, "sub/.cache: hidden") && count_of(wtext, "\n") == 6,
          "warnings:\n%s", wtext);
    char *adir = join(out, "alpha");
    CHECK(count_tmp_files(adir) == 0, "temporary files left in %s", adir);
    free(rep.buf), free(warn.buf);
    free(x), free(subtxt), free(y), free(b1), free(b3);
    free_docs(&da), free_docs(&db);
    free(link), free(pb), free(yaml), free(adir);
    free(in), free(a), free(bdir), free(sub), free(out);
    test_rmtree(dir);
    free(dir);
}

/* 4000 documents: the fractions hold (of documents); with test 0 there is no test split. */
static void test_prep_fractions_and_no_test(void) {
    char *dir = test_tmpdir("prepfrac");
    docs d = {0};
    make_jsonl(dir, "big.jsonl", 4000, 21, &d);
    char *path = join(dir, "big.jsonl"), *out = join(dir, "out"), *out2 = join(dir, "out2");
    prep_input in[] = {{"big", path}};
    prep_opts o;
    quiet_opts(&o, out, in, 1);
    o.seed = 5;
    prep_stats st[DATASET_MAX_DOMAINS];
    o.stats = st;
    tdm_err e = {0};
    CHECK(prep_run(&o, &e) == 0, "%s", e.msg);
    char *yaml = join(out, "dataset.yaml");
    dataset ds;
    CHECK(dataset_load(&ds, yaml, &e) == 0, "%s", e.msg);
    int k = check_docs(&ds, 0, &d, 5, o.split);
    dataset_free(&ds);
    CHECK(k == 0, "documents misplaced");
    double ft = (double)st[0].split_docs[0] / 4000, fv = (double)st[0].split_docs[1] / 4000,
           fe = (double)st[0].split_docs[2] / 4000;
    CHECK(ft > 0.88 && ft < 0.92, "train fraction %.4f not within 0.9 +- 0.02", ft);
    CHECK(fv > 0.035 && fv < 0.065 && fe > 0.035 && fe < 0.065, "val %.4f test %.4f", fv, fe);

    /* test 0: no test shards, no test key, and train+val is every document */
    o.out = out2;
    o.split[0] = 0.8, o.split[1] = 0.2, o.split[2] = 0;
    CHECK(prep_run(&o, &e) == 0, "%s", e.msg);
    free(yaml);
    yaml = join(out2, "dataset.yaml");
    size_t yl;
    char *y = (char *)read_all(yaml, &yl);
    CHECK(y && yl > 0, "yaml");
    int has_test = memmem(y, yl, "test:", 5) != NULL;
    free(y);
    CHECK(!has_test, "a test split was described with fraction 0");
    CHECK(dataset_load(&ds, yaml, &e) == 0, "%s", e.msg);
    size_t ntest = ds.domains[0].split[SPLIT_TEST].n_shards;
    k = check_docs(&ds, 0, &d, 5, o.split);
    dataset_free(&ds);
    CHECK(ntest == 0 && k == 0 && st[0].split_docs[0] + st[0].split_docs[1] == 4000,
          "test shards %zu", ntest);
    double f2 = (double)st[0].split_docs[0] / 4000;
    CHECK(f2 > 0.77 && f2 < 0.83, "train %.4f", f2);
    char *stale = join(out2, "big/test_000.bin");
    CHECK(!exists(stale), "a test shard was written");
    free(stale), free(path), free(out), free(out2), free(yaml);
    free_docs(&d);
    test_rmtree(dir);
    free(dir);
}
/* Lists regular files below root (relative paths, sorted) into a newline-joined string. */
static void list_files(const char *root, const char *rel, char **acc, size_t *len) {
    char *p = *rel ? join(root, rel) : strdup(root);
    DIR *d = opendir(p);
    char *names[256];
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d)) && n < 256;)
        if (de->d_name[0] != '.') names[n++] = strdup(de->d_name);
    if (d) closedir(d);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(names[j], names[i]) < 0) {
                char *t = names[i];
                names[i] = names[j];
                names[j] = t;
            }
    for (int i = 0; i < n; i++) {
        char *r = *rel ? join(rel, names[i]) : strdup(names[i]);
        char *full = join(root, r);
        struct stat st;
        if (stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
            list_files(root, r, acc, len);
        } else {
            size_t rl = strlen(r);
            *acc = realloc(*acc, *len + rl + 2);
            memcpy(*acc + *len, r, rl);
            *len += rl;
            (*acc)[(*len)++] = '\n';
            (*acc)[*len] = '\0';
        }
        free(full), free(r), free(names[i]);
    }
    free(p);
}

/* Whether every file below two output directories has the same bytes (and the same
 * names). With `skip_yaml`, dataset.yaml is not compared. */
static int same_tree(const char *o1, const char *o2, int skip_yaml) {
    char *l1 = NULL, *l2 = NULL;
    size_t n1 = 0, n2 = 0;
    list_files(o1, "", &l1, &n1);
    list_files(o2, "", &l2, &n2);
    int same = l1 && l2 && n1 == n2 && !strcmp(l1, l2);
    for (char *p = l1, *nl; same && (nl = strchr(p, '\n')); p = nl + 1) {
        *nl = '\0';
        if (skip_yaml && !strcmp(p, "dataset.yaml")) continue;
        char *fa = join(o1, p), *fb = join(o2, p);
        size_t la, lb;
        unsigned char *a = read_all(fa, &la), *b = read_all(fb, &lb);
        if (!a || !b || la != lb || memcmp(a, b, la)) {
            fprintf(stderr, "  %s differs\n", p);
            same = 0;
        }
        free(a), free(b), free(fa), free(fb);
    }
    free(l1), free(l2);
    return same;
}

/* Same inputs and options, same bytes; the order of the arguments does not matter;
 * another seed, another split. */
static void test_prep_deterministic_and_seeded(void) {
    char *dir = test_tmpdir("prepdet");
    char *in = join(dir, "in"), *in2 = join(dir, "in2");
    CHECK(mkdir(in, 0777) == 0 && mkdir(in2, 0777) == 0, "mkdir");
    free(make_file(in, "one.txt", 9000, 31, 0));
    make_jsonl(in, "two.jsonl", 300, 32, NULL);
    make_jsonl(in2, "three.jsonl", 200, 33, NULL);
    char *one = join(in, "one.txt"), *two = join(in, "two.jsonl");
    char *outs[4] = {join(dir, "o1"), join(dir, "o2"), join(dir, "o3"), join(dir, "o4")};
    prep_input fwd[] = {{"web", one}, {"web", two}, {"code", in2}};
    prep_input rev[] = {{"code", in2}, {"web", two}, {"web", one}};
    prep_opts o;
    tdm_err e = {0};
    for (int i = 0; i < 4; i++) {
        quiet_opts(&o, outs[i], i == 3 ? rev : fwd, 3);
        o.shard_tokens = 5000;
        o.seed = i == 2 ? 8 : 7;
        CHECK(prep_run(&o, &e) == 0, "run %d: %s", i, e.msg);
    }
    CHECK(same_tree(outs[0], outs[1], 0), "two runs with the same inputs wrote different bytes");
    /* the arguments reversed: the same shards (dataset.yaml lists the domains in the
     * order given, so only it differs) */
    CHECK(same_tree(outs[0], outs[3], 1), "reordered arguments changed the shards");
    char *l1 = NULL;
    size_t n1 = 0;
    list_files(outs[0], "", &l1, &n1);
    CHECK(l1 && strstr(l1, "web/train_000.bin\nweb/train_001.bin\n") &&
              strstr(l1, "web/val_000.bin") && strstr(l1, "code/test_000.bin") &&
              strstr(l1, "dataset.yaml"),
          "files:\n%s", l1);
    free(l1);
    /* the same run again over its own output: it overwrites, nothing is stale */
    quiet_opts(&o, outs[0], fwd, 3);
    o.shard_tokens = 5000;
    o.seed = 7;
    CHECK(prep_run(&o, &e) == 0, "rerun into the same --out: %s", e.msg);

    /* seed 8: the hash splits differently, and the val shard holds other text */
    int differ = 0;
    for (uint64_t k = 0; k < 70; k++)
        differ += prep_doc_split(7, "web", k, o.split) != prep_doc_split(8, "web", k, o.split);
    CHECK(differ > 0, "seeds 7 and 8 split all 70 documents alike");
    char *v1 = join(outs[0], "web/val_000.bin"), *v3 = join(outs[2], "web/val_000.bin");
    size_t la, lb;
    unsigned char *a = read_all(v1, &la), *b = read_all(v3, &lb);
    int val_same = a && b && la == lb && !memcmp(a, b, la);
    free(a), free(b), free(v1), free(v3);
    CHECK(!val_same, "seed 8 gave the same val shard as seed 7");
    /* the domain's name is a coordinate too */
    differ = 0;
    for (uint64_t k = 0; k < 70; k++)
        differ += prep_doc_split(7, "web", k, o.split) != prep_doc_split(7, "code", k, o.split);
    CHECK(differ > 0, "domains web and code split all 70 documents alike");
    for (int i = 0; i < 4; i++) free(outs[i]);
    free(in), free(in2), free(one), free(two);
    test_rmtree(dir);
    free(dir);
}

/* A small domain: the hash gives val (and test) no document, so the nearest move. */
static void test_prep_small_domain(void) {
    char *dir = test_tmpdir("prepsmall");
    /* three documents with distinct contents: 100 'a', 100 'b', 99 'c' */
    char text[100];
    memset(text, 'a', 100);
    char *pa = join(dir, "a.txt"), *pb = join(dir, "b.txt"), *pc = join(dir, "c.txt");
    CHECK(write_bytes(pa, text, 100) == 0, "write");
    memset(text, 'b', 100);
    CHECK(write_bytes(pb, text, 100) == 0, "write");
    memset(text, 'c', 99);
    CHECK(write_bytes(pc, text, 99) == 0, "write");
    const double f[3] = {0.9, 0.05, 0.05};
    /* a seed where the hash alone puts all three documents in train */
    uint64_t seed = 0;
    for (;; seed++) {
        int all = 1;
        for (uint64_t k = 0; k < 3; k++) all &= prep_doc_split(seed, "tiny", k, f) == SPLIT_TRAIN;
        if (all) break;
    }
    /* the rule: val takes the train document with u nearest [0.9, 0.95), then test the
     * remaining one nearest [0.95, 1): both from above, so the largest u */
    double u[3];
    for (int k = 0; k < 3; k++) {
        rng_stream r;
        rng_stream_init(&r, seed, PREP_RNG_PURPOSE, prep_domain_key("tiny"), (uint32_t)k, 0);
        u[k] = rng_uniform(&r);
    }
    int kv = 0;
    for (int k = 1; k < 3; k++)
        if (u[k] > u[kv]) kv = k;
    int kt = -1;
    for (int k = 0; k < 3; k++)
        if (k != kv && (kt < 0 || u[k] > u[kt])) kt = k;
    char *out = join(dir, "out");
    prep_input in[] = {{"tiny", pc}, {"tiny", pa}, {"tiny", pb}};
    prep_opts o;
    quiet_opts(&o, out, in, 3);
    o.seed = seed;
    memout rep;
    o.report = memout_open(&rep);
    tdm_err e = {0};
    int rc = prep_run(&o, &e);
    const char *rtext = memout_close(&rep);
    CHECK(rc == 0, "%s", e.msg);
    char *yaml = join(out, "dataset.yaml");
    dataset ds;
    CHECK(dataset_load(&ds, yaml, &e) == 0, "%s", e.msg);
    size_t lv, lt, ltr;
    unsigned char *v = split_bytes(&ds, 0, SPLIT_VAL, &lv);
    unsigned char *t = split_bytes(&ds, 0, SPLIT_TEST, &lt);
    unsigned char *tr = split_bytes(&ds, 0, SPLIT_TRAIN, &ltr);
    dataset_free(&ds);
    const char want[3] = {'a', 'b', 'c'};
    const size_t wlen[3] = {101, 101, 100};
    int kr = 3 - kv - kt;
    int ok = lv == wlen[kv] && lt == wlen[kt] && ltr == wlen[kr] && v[0] == want[kv] &&
             t[0] == want[kt] && tr[0] == want[kr] && v[lv - 1] == '\n';
    free(v), free(t), free(tr);
    CHECK(ok, "val got %zu bytes, test %zu, train %zu; expected documents %d/%d/%d", lv, lt,
          ltr, kv, kt, kr);
    char says[120];
    snprintf(says, sizeof says,
             "tiny: the hash gave val no document, so document %d moved there from train", kv);
    CHECK(strstr(rtext, says), "report does not tell of the move: %s\n%s", says, rtext);
    /* a third of the tokens in val where 5 % was asked: said */
    CHECK(strstr(rtext, "tiny: warning: val holds 33.") && strstr(rtext, "against the 5.0% asked"),
          "report does not warn of the uneven split:\n%s", rtext);
    free(rep.buf);

    /* two documents cannot feed three splits: an error naming the domain */
    o.n_inputs = 2;
    o.report = NULL;
    char *out2 = join(dir, "out2");
    o.out = out2;
    rc = prep_run(&o, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "domain 'tiny' has 2 documents from 2 files") &&
              strstr(e.msg, "train, val and test each need one") &&
              strstr(e.msg, "--split with test 0"),
          "rc %d: %s", rc, e.msg);
    CHECK(!exists(out2), "a refused run created %s", out2);
    /* ... but two splits can: test 0 */
    o.split[0] = 0.9, o.split[1] = 0.1, o.split[2] = 0;
    CHECK(prep_run(&o, &e) == 0, "two documents, two splits: %s", e.msg);
    /* one document with test 0 already: what is missing is a document, not test 0 (the
     * message told to give --split with test 0, as given) */
    o.n_inputs = 1;
    char *out3 = join(dir, "out3");
    o.out = out3;
    rc = prep_run(&o, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "has 1 document from 1 file") && strstr(e.msg, "train and val each need one") &&
              !strstr(e.msg, "--split with test 0") && strstr(e.msg, "gives test 0 already"),
          "rc %d: %s", rc, e.msg);
    free(out3);
    free(pa), free(pb), free(pc), free(out), free(out2), free(yaml);
    test_rmtree(dir);
    free(dir);
}

/* Runs prep over `in` (n inputs) into dir/out<tag>, one domain, split 0.5/0.5, and loads
 * its documents in order (train and val interleaved back by the rule). Returns 0. */
static int run_one(const char *dir, const char *tag, const prep_input *in, int n,
                   prep_stats *st, memout *warn, tdm_err *e) {
    char name[64];
    snprintf(name, sizeof name, "out%s", tag);
    char *out = join(dir, name);
    prep_opts o;
    quiet_opts(&o, out, in, n);
    o.split[0] = 0.5, o.split[1] = 0.5, o.split[2] = 0;
    o.stats = st;
    if (warn) o.warnings = memout_open(warn);
    int rc = prep_run(&o, e);
    if (warn) memout_close(warn);
    free(out);
    return rc;
}

/* Checks dir/out<tag> (run by run_one) against the documents expected. */
static int check_out(const char *dir, const char *tag, const docs *want) {
    char name[80];
    snprintf(name, sizeof name, "out%s/dataset.yaml", tag);
    char *yaml = join(dir, name);
    dataset ds;
    tdm_err e = {0};
    int rc = dataset_load(&ds, yaml, &e);
    free(yaml);
    CHECK_OR_RET(rc == 0, "%s", e.msg);
    const double f[3] = {0.5, 0.5, 0};
    rc = check_docs(&ds, 0, want, 1, f);
    dataset_free(&ds);
    return rc;
}

/* The documents of a NUL-free list "a\0b\0\0" (ends with an empty string). */
static void add_strs(docs *d, const char *list) {
    for (const char *p = list; *p; p += strlen(p) + 1) add_str(d, p);
}

/* .jsonl: the text field with every escape decoded, CRLF lines, blank lines, a line
 * without the field, another field name; and the JSON reader's edges directly. */
static void test_prep_jsonl_fields(void) {
    char *dir = test_tmpdir("prepjsonl");
    put_text(dir, "a.jsonl",
             "{\"id\": 1, \"text\": \"caf\\u00e9 \\ud83d\\ude00 \\\"q\\\" a\\\\b \\/ tab\\tnl\\n\"}\r\n"
             "\r\n"
             "{\"meta\": {\"text\": \"nested, not this\"}, \"text\": \"second\", \"text\": \"dup\"}\n"
             "{\"id\": 3}\n"
             "  {\"text\": \"\\u4e2d\\u6587 raw \xc3\xa9\", \"n\": [1, -2.5e3, true, null]}  \n"
             "{\"text\": 7}\n"
             "{\"text\": \"no newline at the end\"}");
    char *pa = join(dir, "a.jsonl");
    prep_input in[] = {{"web", pa}};
    prep_stats st[DATASET_MAX_DOMAINS];
    memout warn;
    tdm_err e = {0};
    CHECK(run_one(dir, "1", in, 1, st, &warn, &e) == 0, "%s", e.msg);
    docs want = {0};
    add_strs(&want, "caf\xc3\xa9 \xf0\x9f\x98\x80 \"q\" a\\b / tab\tnl\n\0"
                    "dup\0" /* a repeated key: its last value (it was the first, "second") */
                    "\xe4\xb8\xad\xe6\x96\x87 raw \xc3\xa9\0"
                    "no newline at the end\0");
    CHECK(check_out(dir, "1", &want) == 0, "documents misplaced or wrong");
    uint64_t tb = 0;
    for (int k = 0; k < want.count; k++) tb += want.n[k];
    free_docs(&want);
    CHECK(st[0].docs == 4 && st[0].skipped[TEXTSRC_NO_FIELD] == 2 && st[0].text_bytes == tb &&
              st[0].tokens == tb + 4,
          "docs %llu, no field %llu", (unsigned long long)st[0].docs,
          (unsigned long long)st[0].skipped[TEXTSRC_NO_FIELD]);
    CHECK(strstr(warn.buf, "prep: web: ") && strstr(warn.buf, "a.jsonl:4: no string \"text\" field") &&
              strstr(warn.buf, "a.jsonl:6: no string \"text\" field"),
          "warnings:\n%s", warn.buf);
    free(warn.buf);
    /* --text-field: another key */
    put_text(dir, "b.jsonl", "{\"content\": \"x1\", \"text\": \"no\"}\n{\"content\": \"x2\"}\n"
                             "{\"content\": \"x3\"}\n");
    char *pb = join(dir, "b.jsonl"), *out2 = join(dir, "out2");
    prep_input inb[] = {{"web", pb}};
    prep_opts o;
    quiet_opts(&o, out2, inb, 1);
    o.text_field = "content";
    o.stats = st;
    CHECK(prep_run(&o, &e) == 0 && st[0].docs == 3 && st[0].text_bytes == 6, "%s", e.msg);
    /* a line of NUL bytes (a zero-filled block, damage after a crash) is no blank line: it
     * is left out as bad JSON and counted (it vanished unreported) */
    {
        static const char nul[] = "{\"text\": \"n1\"}\n\0\0\0\0\0\0\0\0\n{\"text\": \"n2\"}\n"
                                  "{\"text\": \"n3\"}\n";
        char *pc = join(dir, "c.jsonl"), *out3 = join(dir, "out3");
        CHECK(write_bytes(pc, nul, sizeof nul - 1) == 0, "write");
        prep_input inc[] = {{"web", pc}};
        quiet_opts(&o, out3, inc, 1);
        o.stats = st;
        CHECK(prep_run(&o, &e) == 0 && st[0].docs == 3 && st[0].skipped[TEXTSRC_BAD_JSON] == 1,
              "a line of NULs: %s; docs %llu, bad JSON %llu", e.msg, (unsigned long long)st[0].docs,
              (unsigned long long)st[0].skipped[TEXTSRC_BAD_JSON]);
        free(pc);
        free(out3);
    }
    /* the reader's edges */
    buf_t b = {0};
    jsonl_result r;
    CHECK(jsonl_record("{\"text\":\"\\ud800x\"}", 18, "text", &b, &r) == JSONL_BAD_UTF8,
          "lone surrogate: %d", r.status);
    CHECK(jsonl_record("{\"text\":\"a\"} x", 15, "text", &b, &r) == JSONL_SYNTAX, "trailing");
    CHECK(jsonl_record("{\"text\":\"a\",}", 13, "text", &b, &r) == JSONL_SYNTAX, "comma");
    CHECK(jsonl_record("{\"text\":\"a\tb\"}", 14, "text", &b, &r) == JSONL_SYNTAX, "raw tab");
    CHECK(jsonl_record("[1]", 3, "text", &b, &r) == JSONL_NOT_OBJECT, "array");
    CHECK(jsonl_record("{\"text\":\"\xe9t\xe9\"}", 14, "text", &b, &r) == JSONL_BAD_UTF8,
          "latin-1 bytes: %d", r.status);
    CHECK(jsonl_record("{\"text\":\"ok\",\"x\":\"\xff\"}", 21, "text", &b, &r) == JSONL_OK &&
              b.n == 2,
          "bad bytes outside the field: %d", r.status);
    /* a repeated key: the last value is the record's (Python's json, JSON.parse, jq, pyarrow;
     * prep kept the first) */
    static const char dup[] = "{\"text\":\"FIRST\",\"n\":1,\"text\":\"SECOND\"}";
    CHECK(jsonl_record(dup, sizeof dup - 1, "text", &b, &r) == JSONL_OK && b.n == 6 && !memcmp(b.p, "SECOND", 6),
          "a repeated key: %d '%.*s'", r.status, (int)b.n, b.p);
    static const char dup2[] = "{\"text\":\"\xff\",\"text\":\"ok\"}";
    CHECK(jsonl_record(dup2, sizeof dup2 - 1, "text", &b, &r) == JSONL_OK && b.n == 2,
          "a repeated key after invalid UTF-8: %d", r.status);
    static const char dup3[] = "{\"text\":\"A\",\"text\":null}";
    CHECK(jsonl_record(dup3, sizeof dup3 - 1, "text", &b, &r) == JSONL_NO_FIELD && b.n == 0,
          "a repeated key ending on null: %d", r.status);
    char deep[700];
    size_t dn = 0;
    dn += (size_t)sprintf(deep, "{\"a\":");
    for (int i = 0; i < 300; i++) deep[dn++] = '[';
    for (int i = 0; i < 300; i++) deep[dn++] = ']';
    deep[dn++] = '}';
    CHECK(jsonl_record(deep, dn, "text", &b, &r) == JSONL_SYNTAX && !strcmp(r.why, "nested too deep"),
          "deep: %d", r.status);
    buf_free(&b);
    /* UTF-8 rules */
    static const char *bad[] = {"\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf5"};
    for (int i = 0; i < 5; i++) {
        utf8_state u = {0};
        CHECK(utf8_scan(&u, (const unsigned char *)bad[i], strlen(bad[i])) < strlen(bad[i]),
              "invalid UTF-8 %d accepted", i);
    }
    utf8_state u = {0};
    CHECK(utf8_scan(&u, (const unsigned char *)"\xf0\x9f", 2) == 2 && !utf8_done(&u) &&
              utf8_scan(&u, (const unsigned char *)"\x98\x80", 2) == 2 && utf8_done(&u),
          "a character split across pieces");
    free(pa), free(pb), free(out2);
    test_rmtree(dir);
    free(dir);
}

/* .json: an array of records and a single object; a syntax error drops the whole file. */
static void test_prep_json_files(void) {
    char *dir = test_tmpdir("prepjson");
    put_text(dir, "a.json", "[\n  {\"text\": \"one\"},\n  {\"text\": \"two\\nlines\"},\n"
                            "  {\"other\": 1},\n  \"not an object\",\n  {\"text\": \"three\"}\n]\n");
    put_text(dir, "b.json", "{\"text\": \"single\"}");
    put_text(dir, "c.json", "[{\"text\": \"fine\"},\n{\"text\": \"broken\"\n");
    put_text(dir, "d.JSON", "{\"text\": \"upper-case suffix\"}"); /* still JSON */
    put_text(dir, "e.json", " [ ] \n"); /* no records: an empty file (it was nothing at all) */
    /* a byte order mark first (Windows editors write one): before, the .jsonl's first
     * record was lost as bad JSON and the whole .json left out */
    put_text(dir, "f.json", "\xef\xbb\xbf[{\"text\": \"bom json\"}]");
    put_text(dir, "g.jsonl", "\xef\xbb\xbf{\"text\": \"bom line 1\"}\n{\"text\": \"bom line 2\"}\n");
    prep_input in[] = {{"web", dir}};
    prep_stats st[DATASET_MAX_DOMAINS];
    memout warn;
    tdm_err e = {0};
    char *sub = join(dir, "in");
    CHECK(mkdir(sub, 0777) == 0, "mkdir");
    /* inputs in a subdirectory, so that out/ is not inside the input */
    const char *names[] = {"a.json", "b.json", "c.json", "d.JSON", "e.json", "f.json", "g.jsonl"};
    for (int i = 0; i < 7; i++) {
        char *from = join(dir, names[i]), *to = join(sub, names[i]);
        CHECK(rename(from, to) == 0, "rename");
        free(from), free(to);
    }
    in[0].path = sub;
    CHECK(run_one(dir, "1", in, 1, st, &warn, &e) == 0, "%s", e.msg);
    docs want = {0};
    add_strs(&want, "one\0two\nlines\0three\0single\0upper-case suffix\0bom json\0bom line 1\0bom line 2\0");
    int ok = check_out(dir, "1", &want) == 0;
    free_docs(&want);
    CHECK(ok, "documents misplaced or wrong");
    CHECK(st[0].docs == 8 && st[0].files_used == 5 && st[0].skipped[TEXTSRC_BAD_JSON] == 2 &&
              st[0].skipped[TEXTSRC_NO_FIELD] == 1 && st[0].skipped[TEXTSRC_EMPTY] == 1,
          "docs %llu, bad JSON %llu, no field %llu", (unsigned long long)st[0].docs,
          (unsigned long long)st[0].skipped[TEXTSRC_BAD_JSON],
          (unsigned long long)st[0].skipped[TEXTSRC_NO_FIELD]);
    CHECK(strstr(warn.buf, "a.json:4: element 3: no string \"text\" field") &&
              strstr(warn.buf, "a.json:5: element 4: bad JSON record: not a JSON object") &&
              strstr(warn.buf, "c.json:3: bad JSON: ") &&
              strstr(warn.buf, "(the whole file is left out)"),
          "warnings:\n%s", warn.buf);
    free(warn.buf), free(sub);
    test_rmtree(dir);
    free(dir);
}
/* A .json array on one line: each issue names its element, not only line 1 (every element
 * was "line 1"); one object alone names none. A text holding \u0000 is left out as binary,
 * as a plain file holding a NUL byte is (it was kept, the NUL a token of a byte-level
 * dataset), in .json and .jsonl alike. */
static void test_prep_json_elements_and_nul(void) {
    char *dir = test_tmpdir("prepjsonel");
    char *sub = join(dir, "in");
    CHECK(mkdir(sub, 0777) == 0, "mkdir");
    put_text(sub, "a.json", "[{\"text\": \"first\"}, {\"text\": \"nul\\u0000inside\"}, {\"o\": 1}, 5, "
                            "{\"text\": \"\"}, {\"text\": \"last\"}]");
    put_text(sub, "b.json", "{\"o\": 2}");
    put_text(sub, "c.jsonl", "{\"text\": \"kept\"}\n{\"text\": \"x\\u0000y\"}\n");
    prep_input in[] = {{"web", sub}};
    prep_stats st[DATASET_MAX_DOMAINS];
    memout warn;
    tdm_err e = {0};
    CHECK(run_one(dir, "1", in, 1, st, &warn, &e) == 0, "%s", e.msg);
    docs want = {0};
    add_strs(&want, "first\0last\0kept\0");
    int ok = check_out(dir, "1", &want) == 0;
    free_docs(&want);
    CHECK(ok, "documents misplaced or wrong (a NUL kept?)");
    CHECK(st[0].docs == 3 && st[0].skipped[TEXTSRC_BINARY] == 2 && st[0].skipped[TEXTSRC_NO_FIELD] == 2 &&
              st[0].skipped[TEXTSRC_BAD_JSON] == 1 && st[0].skipped[TEXTSRC_EMPTY] == 1,
          "docs %llu, binary %llu, no field %llu, bad JSON %llu, empty %llu", (unsigned long long)st[0].docs,
          (unsigned long long)st[0].skipped[TEXTSRC_BINARY], (unsigned long long)st[0].skipped[TEXTSRC_NO_FIELD],
          (unsigned long long)st[0].skipped[TEXTSRC_BAD_JSON], (unsigned long long)st[0].skipped[TEXTSRC_EMPTY]);
    CHECK(strstr(warn.buf, "a.json:1: element 2: a NUL character (\\u0000) in the \"text\" field (binary") &&
              strstr(warn.buf, "a.json:1: element 3: no string \"text\" field") &&
              strstr(warn.buf, "a.json:1: element 4: bad JSON record: not a JSON object") &&
              strstr(warn.buf, "b.json:1: no string \"text\" field") &&
              strstr(warn.buf, "c.jsonl:2: a NUL character (\\u0000)"),
          "warnings:\n%s", warn.buf);
    free(warn.buf), free(sub);
    test_rmtree(dir);
    free(dir);
}

/* gzip and zstd inputs give the same shards as the plain files (gzip also as several
 * members with zero padding after them); corrupt and truncated streams, and other bytes
 * after a gzip stream, are reported and left out whole. */
static void test_prep_compressed(void) {
    char *dir = test_tmpdir("prepz");
    const char *kinds[] = {"plain", "gz", "zst"};
    char *sub[3];
    for (int i = 0; i < 3; i++) {
        sub[i] = join(dir, kinds[i]);
        CHECK(mkdir(sub[i], 0777) == 0, "mkdir");
    }
    make_jsonl(sub[0], "a.jsonl", 50, 41, NULL);
    free(make_file(sub[0], "b.txt", 1500000, 42, 0)); /* more than one 1 MiB read */
    put_text(sub[0], "c.json", "[{\"text\": \"j1\"}, {\"text\": \"j2\"}]");
    /* 3 MB that compress to a few KiB: one compressed read fills the output buffer */
    size_t rn = 3000000;
    char *rep = malloc(rn);
    CHECK(rep, "malloc");
    for (size_t i = 0; i < rn; i++) rep[i] = i % 32 == 31 ? '\n' : (char)('a' + i % 32 % 26);
    char *rp = join(sub[0], "d.txt");
    CHECK(write_bytes(rp, rep, rn) == 0, "write");
    free(rp);
    /* exactly 2 MiB, two whole output buffers: zstd ends the frame as it fills the second
     * (before: "zstd: truncated stream", the file left out) */
    rp = join(sub[0], "e.txt");
    CHECK(write_bytes(rp, rep, (size_t)2 << 20) == 0, "write");
    free(rep), free(rp);
    const char *files[] = {"a.jsonl", "b.txt", "c.json", "d.txt", "e.txt"};
    for (int z = 1; z < 3; z++)
        for (int i = 0; i < 5; i++) {
            char *src = join(sub[0], files[i]);
            char name[64];
            snprintf(name, sizeof name, "%s.%s", files[i], kinds[z]);
            char *dst = join(sub[z], name);
            CHECK(compress_file(src, dst, z == 2) == 0, "compress %s", dst);
            free(src), free(dst);
        }
    /* b.txt.gz as gzip(1) reads it too: two members one after the other (`cat x.gz y.gz`),
     * then zero padding (as tar and block writers leave) */
    {
        size_t bn;
        char *bp = join(sub[0], "b.txt"), *h1 = join(dir, "h1"), *h2 = join(dir, "h2");
        char *h1z = join(dir, "h1.gz"), *h2z = join(dir, "h2.gz"), *bz = join(sub[1], "b.txt.gz");
        unsigned char *b = read_all(bp, &bn), *m1 = NULL, *m2 = NULL;
        size_t n1 = 0, n2 = 0;
        CHECK(b && write_bytes(h1, b, bn / 3) == 0 && write_bytes(h2, b + bn / 3, bn - bn / 3) == 0 &&
                  compress_file(h1, h1z, 0) == 0 && compress_file(h2, h2z, 0) == 0 &&
                  (m1 = read_all(h1z, &n1)) && (m2 = read_all(h2z, &n2)),
              "two gzip members");
        unsigned char *cat = calloc(n1 + n2 + 700, 1);
        CHECK(cat, "oom");
        memcpy(cat, m1, n1), memcpy(cat + n1, m2, n2);
        CHECK(write_bytes(bz, cat, n1 + n2 + 700) == 0, "write");
        free(b), free(m1), free(m2), free(cat), free(bp), free(h1), free(h2), free(h1z), free(h2z), free(bz);
    }
    prep_stats st[3][DATASET_MAX_DOMAINS];
    tdm_err e = {0};
    for (int z = 0; z < 3; z++) {
        prep_input in[] = {{"web", sub[z]}};
        CHECK(run_one(dir, kinds[z], in, 1, st[z], NULL, &e) == 0, "%s: %s", kinds[z], e.msg);
    }
    char *o0 = join(dir, "outplain"), *o1 = join(dir, "outgz"), *o2 = join(dir, "outzst");
    CHECK(st[0][0].docs == 55 && st[1][0].docs == 55 && st[2][0].docs == 55 &&
              st[2][0].text_bytes == st[0][0].text_bytes && st[0][0].text_bytes > 4500000,
          "documents %llu %llu %llu",
          (unsigned long long)st[0][0].docs, (unsigned long long)st[1][0].docs,
          (unsigned long long)st[2][0].docs);
    CHECK(same_tree(o0, o1, 1), "gzip inputs gave other shards");
    CHECK(same_tree(o0, o2, 1), "zstd inputs gave other shards");
    CHECK(st[1][0].input_bytes < st[0][0].input_bytes, "input bytes are the compressed sizes");

    /* damaged streams: a truncated gzip, flipped zstd bytes, a truncated zstd, a .gz that
     * is not gzip; each file is left out whole, the rest is kept */
    char *bad = join(dir, "bad");
    CHECK(mkdir(bad, 0777) == 0, "mkdir");
    make_jsonl(bad, "ok.jsonl", 10, 43, NULL);
    size_t n;
    char *pg = join(sub[1], "a.jsonl.gz"), *pz = join(sub[2], "b.txt.zst");
    unsigned char *g = read_all(pg, &n);
    char *t1 = join(bad, "trunc.jsonl.gz");
    CHECK(g && write_bytes(t1, g, n / 2) == 0, "write");
    free(g);
    unsigned char *z = read_all(pz, &n);
    char *t2 = join(bad, "trunc.txt.zst"), *t3 = join(bad, "flip.txt.zst");
    CHECK(z && write_bytes(t2, z, n - 7) == 0, "write");
    for (size_t i = n / 3; i < n / 3 + 16; i++) z[i] ^= 0x5a;
    CHECK(write_bytes(t3, z, n) == 0, "write");
    free(z);
    put_text(bad, "plain.txt.gz", "this is not gzip data\n");
    /* a whole gzip member and then other bytes: gzread ignored them (the file read as good,
     * the bytes lost without a word); gzip -t calls it trailing garbage */
    g = read_all(pg, &n);
    char *t4 = join(bad, "tail.jsonl.gz");
    unsigned char *gt = g ? malloc(n + 6) : NULL;
    CHECK(gt, "oom");
    memcpy(gt, g, n), memcpy(gt + n, "\0\0JUNK", 6);
    CHECK(write_bytes(t4, gt, n + 6) == 0, "write");
    free(g), free(gt);
    /* a sound zstd frame that declares a 2 GiB window (zstd --long=31; a raw block of 132
     * bytes here): past the 128 MiB decoded, left out as unsupported, saying both sizes
     * (it was a "corrupt stream": "Frame requires too much memory for decoding") */
    {
        static const char text[] = "hello world from a frame with a huge window\n";
        unsigned char fr[9 + 3 * sizeof text];
        size_t tn = 3 * (sizeof text - 1);
        memcpy(fr, "\x28\xb5\x2f\xfd\x00\xa8", 6);
        uint32_t bh = (uint32_t)(tn << 3) | 1; /* the last block, raw */
        fr[6] = (unsigned char)bh, fr[7] = (unsigned char)(bh >> 8), fr[8] = (unsigned char)(bh >> 16);
        for (int k = 0; k < 3; k++) memcpy(fr + 9 + k * (sizeof text - 1), text, sizeof text - 1);
        char *t5 = join(bad, "long.txt.zst");
        CHECK(write_bytes(t5, fr, 9 + tn) == 0, "write");
        free(t5);
    }
    prep_input inb[] = {{"web", bad}};
    memout warn;
    CHECK(run_one(dir, "bad", inb, 1, st[0], &warn, &e) == 0, "%s", e.msg);
    CHECK(st[0][0].docs == 10 && st[0][0].files_used == 1 &&
              st[0][0].skipped[TEXTSRC_CORRUPT] == 5 && st[0][0].skipped[TEXTSRC_UNSUPPORTED] == 1,
          "docs %llu, corrupt %llu, unsupported %llu:\n%s", (unsigned long long)st[0][0].docs,
          (unsigned long long)st[0][0].skipped[TEXTSRC_CORRUPT],
          (unsigned long long)st[0][0].skipped[TEXTSRC_UNSUPPORTED], warn.buf);
    CHECK(strstr(warn.buf, "long.txt.zst: zstd: a frame that needs a window of 2 GiB, more than the 128 MiB prep "
                           "decodes with") && strstr(warn.buf, "without --long"), "warnings:\n%s", warn.buf);
    CHECK(strstr(warn.buf, "trunc.jsonl.gz: gzip: ") && strstr(warn.buf, "trunc.txt.zst: zstd: truncated") &&
              strstr(warn.buf, "flip.txt.zst: zstd: ") &&
              strstr(warn.buf, "plain.txt.gz: not gzip data") &&
              strstr(warn.buf, "tail.jsonl.gz: gzip: other data after the gzip stream at byte ") &&
              count_of(warn.buf, "(the file is left out)") == 6,
          "warnings:\n%s", warn.buf);
    free(warn.buf);
    for (int i = 0; i < 3; i++) free(sub[i]);
    free(o0), free(o1), free(o2), free(bad), free(pg), free(pz), free(t1), free(t2), free(t3), free(t4);
    test_rmtree(dir);
    free(dir);
}

/* JSON lines under their other names (.ndjson, .jsonlines: read as text before, the
 * records' JSON became the text) give the records' texts; a compression prep does not read
 * (.bz2, .xz) is left out saying so (before: "a NUL byte ... (binary)"). */
static void test_prep_other_names(void) {
    char *dir = test_tmpdir("prepnames"), *src = join(dir, "in");
    CHECK(mkdir(src, 0777) == 0, "mkdir");
    put_text(src, "a.ndjson", "{\"text\": \"one\"}\n{\"text\": \"two\"}\n");
    put_text(src, "b.jsonlines", "{\"text\": \"three\"}\n{\"text\": \"four\"}\n");
    char *bz = join(src, "c.txt.bz2"), *xz = join(src, "d.xz");
    CHECK(write_bytes(bz, "BZh91AY&SY\0\1\2", 13) == 0 && write_bytes(xz, "\xfd" "7zXZ\0\0\4", 8) == 0, "write");
    free(bz), free(xz);
    put_text(src, "e.pt.bz2", "five"); /* named so by chance: text, read as text */
    prep_input in[] = {{"j", src}};
    prep_stats st[DATASET_MAX_DOMAINS];
    memout warn;
    tdm_err e = {0};
    CHECK(run_one(dir, "o", in, 1, st, &warn, &e) == 0, "%s", e.msg);
    CHECK(st[0].docs == 5 && st[0].text_bytes == strlen("onetwothreefourfive") && st[0].skipped[TEXTSRC_UNREADABLE] == 2 &&
              strstr(warn.buf, "bzip2-compressed") && strstr(warn.buf, "xz-compressed") && !strstr(warn.buf, "binary"),
          "docs %llu, text bytes %llu, unreadable %llu: %s", (unsigned long long)st[0].docs,
          (unsigned long long)st[0].text_bytes, (unsigned long long)st[0].skipped[TEXTSRC_UNREADABLE], warn.buf);
    free(warn.buf);
    test_rmtree(dir);
    free(dir), free(src);
}

/* Quoted globs expanded by tandem ("**" any depth), excludes, and the match rules. */
static void test_prep_globs(void) {
    char *dir = test_tmpdir("prepglob");
    char *cwd = getcwd(NULL, 0);
    CHECK(cwd && chdir(dir) == 0, "chdir");
    CHECK(mkdir("src", 0777) == 0 && mkdir("src/pkg", 0777) == 0 &&
              mkdir("src/pkg/tests", 0777) == 0 && mkdir("src/.hidden", 0777) == 0 &&
              mkdir("src/pkg/deep", 0777) == 0,
          "mkdir");
    put_text(".", "src/a.py", "A\n");
    put_text(".", "src/pkg/b.py", "B\n");
    put_text(".", "src/pkg/deep/c.py", "C\n");
    put_text(".", "src/pkg/tests/test_b.py", "T\n");
    put_text(".", "src/.hidden/h.py", "H\n");
    put_text(".", "src/pkg/notes.txt", "N\n");
    CHECK(write_bytes("src/pkg/b.pyc", "\x42\x0d\x0d\x0a\0\0\0\0", 8) == 0, "write");
    prep_input in[] = {{"py", "src/**/*.py"}};
    prep_input ex[] = {{"py", "tests"}};
    prep_opts o;
    quiet_opts(&o, "out", in, 1);
    o.excludes = ex, o.n_excludes = 1;
    o.split[0] = 0.5, o.split[1] = 0.5, o.split[2] = 0;
    prep_stats st[DATASET_MAX_DOMAINS];
    o.stats = st;
    tdm_err e = {0};
    CHECK(prep_run(&o, &e) == 0, "%s", e.msg);
    dataset ds;
    CHECK(dataset_load(&ds, "out/dataset.yaml", &e) == 0, "%s", e.msg);
    docs want = {0};
    add_strs(&want, "A\n\0B\n\0C\n\0"); /* src/a.py, src/pkg/b.py, src/pkg/deep/c.py */
    int ok = check_docs(&ds, 0, &want, 1, o.split) == 0;
    dataset_free(&ds);
    free_docs(&want);
    CHECK(ok, "the glob took other files");
    CHECK(st[0].files == 3 && st[0].skipped[TEXTSRC_EXCLUDED] == 1, "files %llu, excluded %llu",
          (unsigned long long)st[0].files, (unsigned long long)st[0].skipped[TEXTSRC_EXCLUDED]);
    /* a directory takes everything but what is excluded and what is hidden (src/.hidden,
     * as the glob left it); the .pyc is binary */
    prep_input in2[] = {{"py", "src"}};
    prep_input ex2[] = {{"py", "*.txt"}, {"py", "pkg/tests"}};
    quiet_opts(&o, "out2", in2, 1);
    o.excludes = ex2, o.n_excludes = 2;
    o.split[0] = 0.5, o.split[1] = 0.5, o.split[2] = 0;
    o.stats = st;
    CHECK(prep_run(&o, &e) == 0, "%s", e.msg);
    CHECK(st[0].files == 4 && st[0].docs == 3 && st[0].skipped[TEXTSRC_BINARY] == 1 &&
              st[0].skipped[TEXTSRC_EXCLUDED] == 2 && st[0].skipped[TEXTSRC_HIDDEN] == 1,
          "files %llu docs %llu binary %llu excluded %llu", (unsigned long long)st[0].files,
          (unsigned long long)st[0].docs, (unsigned long long)st[0].skipped[TEXTSRC_BINARY],
          (unsigned long long)st[0].skipped[TEXTSRC_EXCLUDED]);
    /* an absolute exclude with a relative domain path: matched against the file's absolute
     * path (before: never, "left out: nothing") */
    char absex[1200];
    snprintf(absex, sizeof absex, "%s/src/pkg/deep/*", dir);
    prep_input ex3[] = {{"py", "*.txt"}, {"py", "pkg/tests"}, {"py", absex}};
    quiet_opts(&o, "out2b", in2, 1);
    o.excludes = ex3, o.n_excludes = 3;
    o.split[0] = 0.5, o.split[1] = 0.5, o.split[2] = 0;
    o.stats = st;
    CHECK(prep_run(&o, &e) == 0, "%s", e.msg);
    CHECK(st[0].files == 3 && st[0].skipped[TEXTSRC_EXCLUDED] == 3, "absolute exclude: files %llu, excluded %llu",
          (unsigned long long)st[0].files, (unsigned long long)st[0].skipped[TEXTSRC_EXCLUDED]);
    /* a glob that matches nothing, an exclude for no domain */
    prep_input none[] = {{"py", "src/**/*.rs"}};
    quiet_opts(&o, "out3", none, 1);
    int rc = prep_run(&o, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "glob 'src/**/*.rs' matches no file") &&
              strstr(e.msg, "quote it"),
          "%s", e.msg);
    prep_input exw[] = {{"web", "*.txt"}};
    quiet_opts(&o, "out3", in, 1);
    o.excludes = exw, o.n_excludes = 1;
    rc = prep_run(&o, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "no --domain is named 'web'"), "%s", e.msg);
    CHECK(!exists("out3"), "a refused run wrote output");
    /* the rules themselves */
    CHECK(textsrc_match("src/**/*.py", "src/a.py") && textsrc_match("src/**/*.py", "src/x/y/z.py") &&
              !textsrc_match("src/**/*.py", "src/.h/z.py") && !textsrc_match("src/*.py", "src/x/a.py") &&
              !textsrc_match("*.py", "src/a.py") && textsrc_match("*.py", "a.py") &&
              !textsrc_match("*.py", ".a.py") && textsrc_match("/abs/**", "/abs/q/r") &&
              !textsrc_match("abs/**", "/abs/q") && textsrc_match("d[0-9]/?.c", "d7/x.c"),
          "include rule");
    CHECK(textsrc_excluded("tests", "src/tests/a.py") && textsrc_excluded("*.pyc", "a/b/c.pyc") &&
              textsrc_excluded("pkg/tests", "src/pkg/tests/x") &&
              !textsrc_excluded("pkg/tests", "src/tests/x") &&
              textsrc_excluded("**/gen/*.py", "src/gen/a.py") &&
              !textsrc_excluded("/src/x", "a/src/x") && !textsrc_excluded("test", "tests/a"),
          "exclude rule");
    CHECK(chdir(cwd) == 0, "chdir back");
    free(cwd);
    test_rmtree(dir);
    free(dir);
}

/* The binary rule and invalid UTF-8 in text files. */
static void test_prep_binary_and_utf8(void) {
    char *dir = test_tmpdir("prepbin");
    char *in = join(dir, "in");
    CHECK(mkdir(in, 0777) == 0, "mkdir");
    char big[12000];
    rand_text(big, sizeof big, 51);
    for (size_t i = 100; i < sizeof big; i += 100) big[i] = '\n';
    char *p;
    /* a NUL early: binary */
    big[50] = '\0';
    p = join(in, "nul.txt");
    CHECK(write_bytes(p, big, 9000) == 0, "write");
    free(p);
    big[50] = 'x';
    /* Latin-1 early: binary */
    big[60] = (char)0xe9;
    p = join(in, "latin1.txt");
    CHECK(write_bytes(p, big, 9000) == 0, "write");
    free(p);
    big[60] = 'x';
    /* Latin-1 after the sniff window: invalid UTF-8, on line 101 (a '\n' every 100) */
    big[10050] = (char)0xe9;
    p = join(in, "late.txt");
    CHECK(write_bytes(p, big, 12000) == 0, "write");
    free(p);
    big[10050] = 'x';
    /* a character cut by the end of the file */
    memcpy(big + 998, "\xe2\x82", 2);
    p = join(in, "cut.txt");
    CHECK(write_bytes(p, big, 1000) == 0, "write");
    free(p);
    /* a NUL after the window: binary too, named with its line (94 '\n' before byte 9500) */
    big[998] = big[999] = 'y';
    big[9500] = '\0';
    p = join(in, "latenul.txt");
    CHECK(write_bytes(p, big, 10000) == 0, "write");
    free(p);
    /* a NUL in a later read (past the first MiB read at once): the parts before it were
     * passed on, the whole file is taken back; 12000 '\n' before byte 1200050 */
    {
        size_t hn = (size_t)3 << 19;
        char *huge = malloc(hn);
        CHECK(huge, "malloc");
        for (size_t i = 0; i < hn; i++) huge[i] = i >= 100 && i % 100 == 0 ? '\n' : (char)('a' + i % 26);
        huge[1200050] = '\0';
        p = join(in, "hugenul.txt");
        CHECK(write_bytes(p, huge, hn) == 0, "write");
        free(p);
        free(huge);
    }
    /* a 4-byte character across the 8 KiB window's end is fine */
    big[9500] = 'z';
    memcpy(big + 8190, "\xf0\x9f\x98\x80", 4);
    p = join(in, "edge.txt");
    CHECK(write_bytes(p, big, 9000) == 0, "write");
    free(p);
    put_text(in, "ok.txt", "plain text\n");
    prep_input inp[] = {{"t", in}};
    prep_stats st[DATASET_MAX_DOMAINS];
    memout warn;
    tdm_err e = {0};
    CHECK(run_one(dir, "1", inp, 1, st, &warn, &e) == 0, "%s", e.msg);
    CHECK(st[0].docs == 2 && st[0].skipped[TEXTSRC_BINARY] == 4 &&
              st[0].skipped[TEXTSRC_BAD_UTF8] == 2 && st[0].files == 8 &&
              st[0].text_bytes == 9000 + 11,
          "docs %llu binary %llu utf8 %llu bytes %llu:\n%s", (unsigned long long)st[0].docs,
          (unsigned long long)st[0].skipped[TEXTSRC_BINARY],
          (unsigned long long)st[0].skipped[TEXTSRC_BAD_UTF8],
          (unsigned long long)st[0].text_bytes, warn.buf);
    CHECK(strstr(warn.buf, "nul.txt: a NUL byte at byte 50 (binary, left out)") &&
              strstr(warn.buf, "latin1.txt: bytes that are not UTF-8 at byte 60") &&
              strstr(warn.buf, "late.txt:101: bytes that are not UTF-8") &&
              strstr(warn.buf, "latenul.txt:95: a NUL byte (binary, the file is left out)") &&
              strstr(warn.buf, "hugenul.txt:12001: a NUL byte (binary, the file is left out)") &&
              strstr(warn.buf, "cut.txt:10: the file ends inside a UTF-8 character"),
          "warnings:\n%s", warn.buf);
    free(warn.buf);
    free(in);
    test_rmtree(dir);
    free(dir);
}

/* Broken JSON lines: each reported with file:line up to PREP_ISSUES_SHOWN, then a count;
 * invalid UTF-8 inside a JSON string too; never fatal while documents remain. */
static void test_prep_bad_json_reported(void) {
    char *dir = test_tmpdir("prepbadjson");
    char *p = join(dir, "x.jsonl");
    FILE *f = fopen(p, "wb");
    CHECK(f, "open");
    for (int i = 1; i <= 20; i++) {
        if (i % 3 == 0) fprintf(f, "{\"text\": \"unterminated\n");
        else if (i == 10) fprintf(f, "{\"text\": \"bad \xff byte\"}\n");
        else fprintf(f, "{\"text\": \"line %d\"}\n", i);
    }
    fclose(f);
    prep_input in[] = {{"web", p}};
    prep_stats st[DATASET_MAX_DOMAINS];
    memout warn;
    tdm_err e = {0};
    CHECK(run_one(dir, "1", in, 1, st, &warn, &e) == 0, "%s", e.msg);
    /* lines 3, 6, ..., 18 are broken (6), line 10 has a bad byte, 13 documents remain */
    CHECK(st[0].docs == 13 && st[0].skipped[TEXTSRC_BAD_JSON] == 6 &&
              st[0].skipped[TEXTSRC_BAD_UTF8] == 1,
          "docs %llu bad %llu utf8 %llu", (unsigned long long)st[0].docs,
          (unsigned long long)st[0].skipped[TEXTSRC_BAD_JSON],
          (unsigned long long)st[0].skipped[TEXTSRC_BAD_UTF8]);
    CHECK(strstr(warn.buf, "x.jsonl:3: bad JSON line: unterminated string") &&
              strstr(warn.buf, "x.jsonl:15: bad JSON line") &&
              !strstr(warn.buf, "x.jsonl:18:") &&
              strstr(warn.buf, "x.jsonl:10: invalid UTF-8 in the text field") &&
              strstr(warn.buf, "prep: web: ... and 1 more left out as bad JSON\n") &&
              count_of(warn.buf, "bad JSON line") == PREP_ISSUES_SHOWN,
          "warnings:\n%s", warn.buf);
    free(warn.buf);
    /* nothing left at all: fatal, naming what was left out */
    put_text(dir, "all_bad.jsonl", "{\n[\n{\"id\": 1}\n");
    char *pb = join(dir, "all_bad.jsonl");
    prep_input inb[] = {{"web", pb}};
    int rc = run_one(dir, "2", inb, 1, st, NULL, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "domain 'web' has 0 documents from 1 file") &&
              strstr(e.msg, "all_bad.jsonl (left out: 2 bad JSON, 1 no text field)") &&
              strstr(e.msg, "--text-field"),
          "rc %d: %s", rc, e.msg);
    free(p), free(pb);
    test_rmtree(dir);
    free(dir);
}

/* A .jsonl record of 3 MiB reaches the sink in pieces (as a plain file does) and is kept
 * whole: every byte a token, one separator. A record past the limit (lowered for the test)
 * is left out with its line, the file's other records kept: one huge record in a small
 * compressed file held 6x its size in memory, and ran out of it naming no file. */
static void test_prep_long_records(void) {
    char *dir = test_tmpdir("preplong");
    char *p = join(dir, "big.jsonl");
    size_t len = (3u << 20) + 100;
    FILE *f = fopen(p, "wb");
    CHECK(f, "open");
    fputs("{\"text\": \"", f);
    for (size_t i = 0; i < len; i++) fputc('a' + (int)(i % 26), f);
    fputs("\"}\n{\"text\": \"small\"}\n{\"text\": \"tiny!\"}\n", f);
    fclose(f);
    prep_input in[] = {{"web", p}};
    prep_stats st[DATASET_MAX_DOMAINS];
    memout warn;
    tdm_err e = {0};
    CHECK(run_one(dir, "1", in, 1, st, NULL, &e) == 0, "%s", e.msg);
    CHECK(st[0].docs == 3 && st[0].text_bytes == len + 10 && st[0].tokens == len + 10 + 3 &&
              st[0].skipped[TEXTSRC_TOO_LONG] == 0,
          "docs %llu bytes %llu tokens %llu", (unsigned long long)st[0].docs, (unsigned long long)st[0].text_bytes,
          (unsigned long long)st[0].tokens);
    /* a file of one over-long record without a final newline: too long, not also empty */
    char *p2 = join(dir, "lone.jsonl");
    f = fopen(p2, "wb");
    CHECK(f, "open");
    fputs("{\"text\": \"", f);
    for (size_t i = 0; i < 5000; i++) fputc('b', f);
    fputs("\"}", f);
    fclose(f);
    prep_input in2[] = {{"web", p}, {"web", p2}};
    setenv("TANDEM_TEST_RECORD_MAX", "4096", 1);
    int rc = run_one(dir, "2", in2, 2, st, &warn, &e);
    unsetenv("TANDEM_TEST_RECORD_MAX");
    CHECK(rc == 0 && st[0].docs == 2 && st[0].skipped[TEXTSRC_TOO_LONG] == 2 && st[0].skipped[TEXTSRC_EMPTY] == 0 &&
              st[0].tokens == 12,
          "rc %d docs %llu too long %llu empty %llu: %s", rc, (unsigned long long)st[0].docs,
          (unsigned long long)st[0].skipped[TEXTSRC_TOO_LONG], (unsigned long long)st[0].skipped[TEXTSRC_EMPTY], e.msg);
    free(p2);
    CHECK(strstr(warn.buf, "big.jsonl:1: a record longer than"), "warnings:\n%s", warn.buf);
    free(warn.buf);
    free(p);
    test_rmtree(dir);
    free(dir);
}

/* Edges: an empty file, a document larger than a shard, CRLF text kept as it is. */
static void test_prep_boundaries(void) {
    char *dir = test_tmpdir("prepedge");
    char *in = join(dir, "in");
    CHECK(mkdir(in, 0777) == 0, "mkdir");
    put_text(in, "a_empty.txt", "");
    put_text(in, "b_crlf.txt", "one\r\ntwo\r\n");
    unsigned char *big = make_file(in, "c_big.txt", 5000, 61, 0);
    put_text(in, "d_small.txt", "small");
    put_text(in, "e_empty.jsonl", "\n\n");
    prep_input inp[] = {{"t", in}};
    char *out = join(dir, "out");
    prep_opts o;
    quiet_opts(&o, out, inp, 1);
    o.split[0] = 0.5, o.split[1] = 0.5, o.split[2] = 0;
    o.shard_tokens = 1000;
    prep_stats st[DATASET_MAX_DOMAINS];
    o.stats = st;
    tdm_err e = {0};
    CHECK(prep_run(&o, &e) == 0, "%s", e.msg);
    dataset ds;
    char *yaml = join(out, "dataset.yaml");
    CHECK(dataset_load(&ds, yaml, &e) == 0, "%s", e.msg);
    docs want = {0};
    add_str(&want, "one\r\ntwo\r\n");
    add_doc(&want, big, 5000);
    add_str(&want, "small");
    int ok = check_docs(&ds, 0, &want, 1, o.split) == 0;
    int s_big = expected_split(1, "t", 1, o.split);
    size_t nsh = 0;
    dataset_shards(&ds, 0, s_big, &nsh);
    dataset_free(&ds);
    free_docs(&want);
    CHECK(ok, "documents");
    CHECK(nsh >= 5, "a 5001-token document over shards of 1000: %zu shards", nsh);
    CHECK(st[0].docs == 3 && st[0].skipped[TEXTSRC_EMPTY] == 2 && st[0].files == 5 &&
              st[0].files_used == 3,
          "docs %llu empty %llu", (unsigned long long)st[0].docs,
          (unsigned long long)st[0].skipped[TEXTSRC_EMPTY]);
    free(big), free(in), free(out), free(yaml);
    test_rmtree(dir);
    free(dir);
}

/* ---- rejections ------------------------------------------------------------------- */

typedef struct {
    const char *what;
    prep_input in[3];
    int n;
    double split[3];
    uint64_t shard;
    const char *out; /* relative to the test dir; NULL: "out" */
    const char *says[3];
} reject_case;

static void test_prep_rejections(void) {
    char *dir = test_tmpdir("prepbad");
    char *cwd = getcwd(NULL, 0);
    CHECK(cwd && chdir(dir) == 0, "chdir");
    CHECK(mkdir("in", 0777) == 0 && mkdir("in/sub", 0777) == 0 && mkdir("empty", 0777) == 0,
          "mkdir");
    free(make_file(".", "in/a.txt", 5000, 41, 0));
    free(make_file(".", "in/sub/b.txt", 5000, 42, 0));
    free(make_file(".", "in/c.txt", 5000, 45, 0));
    free(make_file(".", "blank.txt", 0, 43, 0));
    free(make_file(".", "outfile", 10, 44, 0));
    CHECK(link("in/a.txt", "hard.txt") == 0, "link");
    CHECK(mkfifo("fifo", 0666) == 0, "mkfifo");
    reject_case cases[] = {
        {"missing path", {{"web", "in/nope.txt"}}, 1, {0}, 0, NULL,
         {"domain 'web'", "in/nope.txt", "No such file"}},
        {"bad name", {{"we b", "in"}}, 1, {0}, 0, NULL, {"'we b'", "[A-Za-z0-9_.-]", ""}},
        {"slash name", {{"a/b", "in"}}, 1, {0}, 0, NULL, {"'a/b'", "", ""}},
        {"dot-dot name", {{"..", "in"}}, 1, {0}, 0, NULL, {"'..'", "not . or ..", ""}},
        /* the folder would take dataset.yaml's place: refused before any work (before: every
         * shard written, then exit 2 on the rename, and a second try stuck on it) */
        {"dataset.yaml name", {{"web", "in/a.txt"}, {"Dataset.YAML", "in/c.txt"}}, 2, {0}, 0, NULL,
         {"'Dataset.YAML'", "in the place of the corpus's dataset.yaml", ""}},
        {"reserved name", {{"web", "in/a.txt"}, {"AVERAGE", "in/c.txt"}}, 2, {0}, 0, NULL,
         {"'AVERAGE' is reserved", "rename the domain", ""}},
        {"case clash", {{"web", "in/a.txt"}, {"Web", "in/sub"}}, 2, {0}, 0, NULL,
         {"'web' and 'Web'", "only in case", ""}},
        {"same file twice in a domain", {{"web", "in"}, {"web", "in/a.txt"}}, 2, {0}, 0, NULL,
         {"domain 'web'", "in/a.txt is given twice", ""}},
        {"same file in two domains", {{"web", "in/sub"}, {"code", "in/sub/b.txt"}}, 2, {0}, 0,
         NULL, {"in/sub/b.txt (domain 'web')", "(domain 'code') are the same file", ""}},
        {"hard link", {{"web", "in/a.txt"}, {"code", "hard.txt"}}, 2, {0}, 0, NULL,
         {"hard.txt", "in/a.txt", "same file"}},
        {"sum not 1", {{"web", "in"}}, 1, {0.9, 0.05, 0.1}, 0, NULL,
         {"0.9,0.05,0.1", "sum to 1.05", "not 1"}},
        {"val 0", {{"web", "in"}}, 1, {1, 0, 0}, 0, NULL, {"train and val", "> 0", ""}},
        {"negative", {{"web", "in"}}, 1, {1.1, 0.1, -0.2}, 0, NULL,
         {"train = 1.1", "[0, 1]", ""}},
        {"shard tokens", {{"web", "in"}}, 1, {0}, 3000000000u, NULL,
         {"shard tokens 3000000000", "--shard-tokens", ""}},
        /* one-token shards: 26 k files from 27 kB, none a run could read a window from */
        {"shard tokens 1", {{"web", "in"}}, 1, {0}, 1, NULL, {"shard tokens 1 is outside 256..", "--shard-tokens", ""}},
        {"no text", {{"web", "blank.txt"}, {"web", "empty"}}, 2, {0}, 0, NULL,
         {"domain 'web' has 0 documents from 1 file", "left out: 1 empty", ""}},
        {"glob matches nothing", {{"web", "in/**/*.md"}}, 1, {0}, 0, NULL,
         {"domain 'web'", "glob 'in/**/*.md' matches no file", ""}},
        {"glob in a missing directory", {{"web", "nodir/*.txt"}}, 1, {0}, 0, NULL,
         {"glob 'nodir/*.txt'", "nodir is not a directory", ""}},
        {"fifo", {{"web", "fifo"}}, 1, {0}, 0, NULL,
         {"domain 'web'", "fifo is neither a regular file nor a directory", "quoted glob"}},
        {"out inside input", {{"web", "in"}}, 1, {0}, 0, "in/sub/new/out",
         {"is inside input directory in of domain 'web'", "outside the inputs", ""}},
        {"out is a file", {{"web", "in"}}, 1, {0}, 0, "outfile",
         {"output outfile", "not a directory", ""}},
        {"no inputs", {{NULL, NULL}}, 0, {0}, 0, NULL, {"--domain NAME=PATH", "", ""}},
    };
    size_t nc = sizeof cases / sizeof *cases;
    for (size_t i = 0; i < nc; i++) {
        reject_case *c = &cases[i];
        prep_opts o;
        quiet_opts(&o, c->out ? c->out : "out", c->in, c->n);
        if (c->split[0] || c->split[1] || c->split[2]) memcpy(o.split, c->split, sizeof o.split);
        if (c->shard) o.shard_tokens = c->shard;
        tdm_err e = {0};
        int rc = prep_run(&o, &e);
        CHECK(rc == ERR_USAGE, "%s: rc %d (%s)", c->what, rc, e.msg);
        CHECK(!strncmp(e.msg, "prep: ", 6), "%s: message lacks the prefix: %s", c->what, e.msg);
        for (int k = 0; k < 3; k++)
            CHECK(strstr(e.msg, c->says[k]), "%s: message lacks \"%s\": %s", c->what, c->says[k],
                  e.msg);
        CHECK(!exists("out") && !exists("in/sub/new"), "%s: a refused run wrote output",
              c->what);
    }
    /* an empty text field name (the CLI refuses it before, see test_cli_prep) */
    prep_input one[] = {{"web", "in"}};
    prep_opts o;
    quiet_opts(&o, "out", one, 1);
    o.text_field = "";
    tdm_err e = {0};
    CHECK(prep_run(&o, &e) == ERR_USAGE && strstr(e.msg, "empty JSON text field name"), "%s",
          e.msg);
    /* more than 64 domains */
    prep_input many[65];
    char names[65][16];
    for (int i = 0; i < 65; i++) {
        snprintf(names[i], sizeof names[i], "d%d", i);
        many[i] = (prep_input){names[i], "in/a.txt"};
    }
    quiet_opts(&o, "out", many, 65);
    CHECK(prep_run(&o, &e) == ERR_USAGE && strstr(e.msg, "more than 64 domains (at 'd64')"),
          "65 domains: %s", e.msg);

    /* stale shards: many small train shards, then a run that writes fewer */
    prep_input in[] = {{"web", "in"}};
    quiet_opts(&o, "out", in, 1);
    o.shard_tokens = 1000;
    CHECK(prep_run(&o, &e) == 0, "first run: %s", e.msg);
    CHECK(exists("out/web/train_005.bin"), "expected at least 6 train shards");
    size_t yl0, yl1;
    unsigned char *y0 = read_all("out/dataset.yaml", &yl0);
    o.shard_tokens = 100000;
    int rc = prep_run(&o, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "out/web/") && strstr(e.msg, "_001.bin and ") &&
              strstr(e.msg, "other shards are from an earlier dataset") &&
              strstr(e.msg, "remove them or choose another --out"),
          "stale: rc %d: %s", rc, e.msg);
    unsigned char *y1 = read_all("out/dataset.yaml", &yl1);
    int kept = y0 && y1 && yl0 == yl1 && !memcmp(y0, y1, yl0);
    free(y0), free(y1);
    CHECK(kept, "a refused run touched dataset.yaml");
    /* a stray test shard when this run writes no test split is stale as well */
    o.shard_tokens = 1000;
    o.split[0] = 0.9, o.split[1] = 0.1, o.split[2] = 0;
    rc = prep_run(&o, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "out/web/test_000.bin"), "stale test: %s", e.msg);
    CHECK(chdir(cwd) == 0, "chdir back");
    free(cwd);
    test_rmtree(dir);
    free(dir);
}

/* Unreadable file and directory: left out, counted and reported, not fatal. Permission
 * bits do not stop root, so as root the check runs in a child that drops to nobody; if
 * it cannot, the case says so and passes. */
static void test_prep_unreadable(void) {
    char *dir = test_tmpdir("prepperm");
    CHECK(chmod(dir, 0755) == 0, "chmod");
    char *in = join(dir, "in"), *locked = join(dir, "in/locked");
    CHECK(mkdir(in, 0755) == 0 && mkdir(locked, 0755) == 0, "mkdir");
    free(make_file(in, "ok.txt", 1000, 51, 0));
    free(make_file(in, "secret.txt", 1000, 52, 0));
    free(make_file(locked, "x.txt", 1000, 53, 0));
    char *secret = join(in, "secret.txt"), *okp = join(in, "ok.txt");
    for (int round = 0; round < 2; round++) {
        /* round 0: the file is unreadable; round 1: the directory */
        CHECK(chmod(secret, round == 0 ? 0 : 0644) == 0 &&
                  chmod(locked, round == 0 ? 0755 : 0) == 0,
              "chmod");
        char oname[16];
        snprintf(oname, sizeof oname, "out%d", round);
        char *out = join(dir, oname);
        CHECK(mkdir(out, 0777) == 0 && chmod(out, 0777) == 0, "mkdir out");
        int fds[2];
        CHECK(pipe(fds) == 0, "pipe");
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork");
        if (pid == 0) {
            close(fds[0]);
            if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(77);
            if (access(okp, R_OK) != 0) _exit(77); /* $TMPDIR closed to nobody */
            prep_input inputs[] = {{"web", in}};
            prep_opts o;
            quiet_opts(&o, out, inputs, 1);
            o.split[0] = 0.5, o.split[1] = 0.5, o.split[2] = 0;
            prep_stats st[DATASET_MAX_DOMAINS];
            o.stats = st;
            char msg[1024] = "";
            o.warnings = fmemopen(msg, sizeof msg - 1, "w");
            tdm_err e = {0};
            int rc = prep_run(&o, &e);
            fclose(o.warnings);
            uint64_t skipped = rc ? 0 : st[0].skipped[TEXTSRC_UNREADABLE];
            uint64_t docs = rc ? 0 : st[0].docs;
            if (rc) snprintf(msg, sizeof msg, "%s", e.msg);
            if (write(fds[1], &rc, sizeof rc) != (ssize_t)sizeof rc ||
                write(fds[1], &skipped, sizeof skipped) != (ssize_t)sizeof skipped ||
                write(fds[1], &docs, sizeof docs) != (ssize_t)sizeof docs ||
                write(fds[1], msg, sizeof msg) != (ssize_t)sizeof msg)
                _exit(3);
            _exit(0);
        }
        close(fds[1]);
        int rc = -1, status = 0;
        uint64_t skipped = 0, docs = 0;
        char msg[1024] = "";
        ssize_t r1 = read(fds[0], &rc, sizeof rc);
        ssize_t r2 = r1 == (ssize_t)sizeof rc ? read(fds[0], &skipped, sizeof skipped) : 0;
        ssize_t r3 = r2 == (ssize_t)sizeof skipped ? read(fds[0], &docs, sizeof docs) : 0;
        ssize_t r4 = r3 == (ssize_t)sizeof docs ? read(fds[0], msg, sizeof msg) : 0;
        close(fds[0]);
        waitpid(pid, &status, 0);
        free(out);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
            printf("  (cannot run as an unprivileged user here: unreadable-path checks "
                   "not run)\n");
            break;
        }
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && r4 == (ssize_t)sizeof msg,
              "child failed (status %d)", status);
        msg[sizeof msg - 1] = '\0';
        CHECK(rc == 0 && skipped == 1 && docs == 2, "round %d: rc %d, unreadable %llu, docs %llu: %s",
              round, rc, (unsigned long long)skipped, (unsigned long long)docs, msg);
        if (round == 0)
            CHECK(strstr(msg, "prep: web: ") && strstr(msg, "secret.txt: cannot open: Permission denied"),
                  "unreadable file: %s", msg);
        else
            CHECK(strstr(msg, "in/locked: cannot read directory: Permission denied"),
                  "unreadable directory: %s", msg);
    }
    chmod(locked, 0755);
    free(in), free(locked), free(secret), free(okp);
    test_rmtree(dir);
    free(dir);
}

/* Progress lines while reading and while writing, on a domain larger than the mark. */
static void test_prep_progress(void) {
    char *dir = test_tmpdir("prepprog");
    free(make_file(dir, "big.txt", 300000, 61, 0));
    make_jsonl(dir, "more.jsonl", 20, 62, NULL);
    char *path = join(dir, "big.txt"), *p2 = join(dir, "more.jsonl");
    char *out = join(dir, "out");
    prep_input in[] = {{"big", path}, {"big", p2}};
    prep_opts o;
    quiet_opts(&o, out, in, 2);
    memout prog;
    o.progress = memout_open(&prog);
    o.progress_bytes = 4096;
    tdm_err e = {0};
    int rc = prep_run(&o, &e);
    const char *text = memout_close(&prog);
    CHECK(rc == 0, "%s", e.msg);
    int reading = 0, writing = 0, good = 1;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        if (!nl) break;
        char line[300];
        snprintf(line, sizeof line, "%.*s", (int)(nl - p), p);
        if (strstr(line, ": reading: ")) {
            reading++;
            good &= !strncmp(line, "prep: big: reading: ", 20) && strstr(line, " bytes read, file ") &&
                    strstr(line, " of 2, ") && strstr(line, " documents so far");
        } else if (strstr(line, ": writing: ")) {
            writing++;
            good &= !strncmp(line, "prep: big: writing: ", 20) && strstr(line, " tokens (") &&
                    strstr(line, "; train ");
        } else {
            good = 0;
        }
        p = nl + 1;
    }
    CHECK(reading >= 1 && writing >= 1 && good, "%d reading lines, %d writing, well formed %d:\n%s",
          reading, writing, good, text);
    free(prog.buf);
    free(path), free(p2), free(out);
    test_rmtree(dir);
    free(dir);
}

/* ---- --tokenizer ----------------------------------------------------------------- */

/* The code point GPT-2's byte-level alphabet writes byte b as. */
static int byte_cp(int b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) n++;
    return 256 + n;
}

static void put_bl(FILE *f, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) fprintf(f, "\\u%04x", byte_cp((unsigned char)s[i]));
}

/* Writes a byte-level BPE tokenizer.json at path: the 256 bytes (id = byte), merges[k] =
 * "left right" (ASCII, one space between) as id 256 + k, and, when eot, the added token
 * <|endoftext|> as id 256 + nm. `prefix_space`: ByteLevel's add_prefix_space. */
static void write_tok_json(const char *path, const char *const *merges, size_t nm, int eot,
                           int prefix_space) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    fprintf(f, "{\"version\":\"1.0\",\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\","
               "\"add_prefix_space\":%s,\"use_regex\":true},\"added_tokens\":[",
            prefix_space ? "true" : "false");
    if (eot) /* 2: not special, so matched in text */
        fprintf(f, "{\"id\":%zu,\"content\":\"<|endoftext|>\",\"special\":%s}", 256 + nm, eot == 2 ? "false" : "true");
    fprintf(f, "],\"model\":{\"type\":\"BPE\",\"dropout\":null,\"vocab\":{");
    for (int c = 0; c < 256; c++) {
        char ch = (char)c;
        fputs(c ? ",\"" : "\"", f);
        put_bl(f, &ch, 1);
        fprintf(f, "\":%d", c);
    }
    for (size_t k = 0; k < nm; k++) {
        const char *sp = strchr(merges[k], ' ');
        fputs(",\"", f);
        put_bl(f, merges[k], (size_t)(sp - merges[k]));
        put_bl(f, sp + 1, strlen(sp + 1));
        fprintf(f, "\":%zu", 256 + k);
    }
    fputs("},\"merges\":[", f);
    for (size_t k = 0; k < nm; k++) {
        const char *sp = strchr(merges[k], ' ');
        fputs(k ? ",[\"" : "[\"", f);
        put_bl(f, merges[k], (size_t)(sp - merges[k]));
        fputs("\",\"", f);
        put_bl(f, sp + 1, strlen(sp + 1));
        fputs("\"]", f);
    }
    fputs("]}}", f);
    if (fclose(f)) abort();
}

static const char *const MERGES[] = {"t h", "th e", "i n", "a n", "e r", "o n", "r e", "in g",
                                     "an d", "e n", "o r", "a t"};
#define N_MERGES (sizeof MERGES / sizeof *MERGES)

/* Seeded English-like text of about n bytes: words, spaces, newlines, some UTF-8. */
static char *word_text(size_t n, uint64_t seed, size_t *len) {
    static const char *const W[] = {"the", "and", "then", "ring", "other", "in", "at", "on",
                                    "Tandem", "mixture", "caf\xc3\xa9", "\xe4\xb8\xad\xe6\x96\x87",
                                    "42", "it's", "x", "--", "(a)", "\"q\""};
    rng_stream r;
    rng_stream_init(&r, seed, RNG_TEST, 11, 0, 0);
    char *b = malloc(n + 64);
    if (!b) abort();
    size_t k = 0;
    while (k < n) {
        uint32_t x = rng_u32(&r);
        const char *w = W[x % 18];
        size_t wl = strlen(w);
        memcpy(b + k, w, wl);
        k += wl;
        uint32_t sep = (x >> 8) % 16;
        b[k++] = sep == 0 ? '\n' : sep == 1 ? '.' : ' ';
        if (sep == 1) b[k++] = '\n';
        if (sep == 2) b[k++] = ' ';
    }
    *len = k;
    return b;
}

/* Checks domain m's splits: exactly tokenizer_encode(doc) + eot per document, in order,
 * in the split the rule gives, and each segment decoding back to its document's text
 * (after the space of add_prefix_space when `prefix`). Sets *big when a token >= 65536
 * was seen. 0, or -1 after a failed CHECK. */
static int check_tok_docs(const dataset *ds, int m, const docs *want, tokenizer *t, uint32_t eot,
                          uint64_t seed, const double f[3], int prefix, int *big) {
    uint32_t *sp[SPLIT_COUNT];
    size_t sl[SPLIT_COUNT], off[SPLIT_COUNT] = {0};
    for (int s = 0; s < SPLIT_COUNT; s++) {
        size_t n_sh, total = 0, k = 0;
        const shard *sh = dataset_shards(ds, m, s, &n_sh);
        for (size_t i = 0; i < n_sh; i++) total += sh[i].n;
        sp[s] = malloc((total ? total : 1) * sizeof *sp[s]);
        if (!sp[s]) abort();
        for (size_t i = 0; i < n_sh; k += sh[i].n, i++)
            if (shard_copy(&sh[i], 0, sh[i].n, sp[s] + k, NULL)) abort();
        sl[s] = total;
        for (size_t i = 0; i < total; i++) *big |= sp[s][i] >= 65536;
    }
    int bad = 0;
    tdm_err e = {0};
    for (int k = 0; k < want->count && !bad; k++) {
        int s = expected_split(seed, ds->domains[m].name, (uint64_t)k, f);
        tok_ids ids = {0};
        buf_t dec = {0};
        if (tokenizer_encode(t, want->p[k], want->n[k], &ids, &e)) abort();
        size_t n = ids.n;
        if (off[s] + n + 1 > sl[s] || memcmp(sp[s] + off[s], ids.v, n * sizeof *ids.v) ||
            sp[s][off[s] + n] != eot) {
            fprintf(stderr, "  doc %d (%zu tokens) is not next in %s (at %zu of %zu)\n", k, n,
                    dataset_split_name(s), off[s], sl[s]);
            bad = 1;
        } else if (tokenizer_decode(t, sp[s] + off[s], n, &dec, &e) ||
                   (prefix && want->p[k][0] != ' ' && (dec.n < 1 || dec.p[0] != ' ')) ||
                   dec.n - (size_t)(prefix && want->p[k][0] != ' ') != want->n[k] ||
                   memcmp(dec.p + (prefix && want->p[k][0] != ' '), want->p[k], want->n[k])) {
            fprintf(stderr, "  doc %d does not decode to its text\n", k);
            bad = 1;
        }
        off[s] += n + 1;
        tok_ids_free(&ids);
        buf_free(&dec);
    }
    for (int s = 0; s < SPLIT_COUNT && !bad; s++)
        if (off[s] != sl[s]) {
            fprintf(stderr, "  %s: %zu tokens of documents, %zu in shards\n", dataset_split_name(s),
                    off[s], sl[s]);
            bad = 1;
        }
    for (int s = 0; s < SPLIT_COUNT; s++) free(sp[s]);
    CHECK_OR_RET(!bad, "domain %s does not hold its documents' tokens", ds->domains[m].name);
    return 0;
}

/* The magic of a shard file's header. */
static int32_t shard_magic(const char *path) {
    size_t n;
    unsigned char *b = read_all(path, &n);
    int32_t m = -1;
    if (b && n >= 4) memcpy(&m, b, 4);
    free(b);
    return m;
}

/* Whether two files have the same bytes. */
static int same_file(const char *a, const char *b) {
    size_t na, nb;
    unsigned char *x = read_all(a, &na), *y = read_all(b, &nb);
    int same = x && y && na == nb && !memcmp(x, y, na);
    free(x), free(y);
    return same;
}

/* Documents of text files and a .jsonl through a small tokenizer.json: the tokens, their
 * decoding, dataset.yaml's keys, the uint16 format, the summary's token counts; the same
 * bytes on 1 and 3 threads. */
static void test_prep_tokenizer(void) {
    char *dir = test_tmpdir("preptok");
    char *in = join(dir, "in"), *out = join(dir, "out"), *out1 = join(dir, "out1");
    char *tj = join(dir, "tokenizer.json");
    CHECK(mkdir(in, 0777) == 0, "mkdir");
    write_tok_json(tj, MERGES, N_MERGES, 1, 0);
    docs dw = {0};
    for (int i = 0; i < 4; i++) {
        char name[32];
        size_t n;
        char *t = word_text(1000 + 900 * (size_t)i, 30 + (uint64_t)i, &n);
        snprintf(name, sizeof name, "d%d.txt", i);
        char *p = join(in, name);
        if (write_bytes(p, t, n)) abort();
        free(p);
        add_doc(&dw, t, n);
        free(t);
    }
    make_jsonl(in, "z.jsonl", 40, 31, &dw);
    prep_input pi = {"web", in};
    prep_stats st[2];
    int nst = 0;
    memout rep;
    prep_opts o;
    quiet_opts(&o, out, &pi, 1);
    o.tokenizer = tj;
    o.split[0] = 0.6, o.split[1] = 0.2, o.split[2] = 0.2;
    o.shard_tokens = 700;
    o.threads = 3;
    o.stats = st;
    o.n_stats = &nst;
    o.report = memout_open(&rep);
    tdm_err e = {0};
    int rc = prep_run(&o, &e);
    const char *table = memout_close(&rep);
    char tokstr[32];
    snprintf(tokstr, sizeof tokstr, " %" PRIu64 " ", st[0].tokens);
    int in_table = strstr(table, tokstr) != NULL;
    free(rep.buf);
    CHECK(rc == 0, "%s", e.msg);
    tokenizer *t = NULL;
    CHECK(tokenizer_load(tj, NULL, &t, &e) == 0, "%s", e.msg);
    char *yaml = join(out, "dataset.yaml");
    dataset ds;
    rc = dataset_load(&ds, yaml, &e);
    if (rc) tokenizer_free(t);
    CHECK(rc == 0, "%s", e.msg);
    int big = 0;
    int k = check_tok_docs(&ds, 0, &dw, t, 256 + N_MERGES, 1, o.split, 0, &big);
    uint64_t in_shards = 0;
    for (int s = 0; s < SPLIT_COUNT; s++) in_shards += dataset_tokens(&ds, 0, s);
    int keys = ds.vocab == (int)(256 + N_MERGES + 1) && ds.eot == (int)(256 + N_MERGES) &&
               !strcmp(ds.tokenizer, "hf-bpe:gpt2") &&
               !strcmp(ds.tokenizer_sha256, tokenizer_digest(t)) &&
               ds.domains[0].split[SPLIT_TRAIN].n_shards >= 2;
    uint64_t text = 0;
    for (int i = 0; i < dw.count; i++) text += dw.n[i];
    dataset_free(&ds);
    tokenizer_free(t);
    CHECK(k == 0, "documents misplaced");
    CHECK(keys, "dataset.yaml: vocab, eot, tokenizer, tokenizer_sha256 or shards wrong");
    CHECK(nst == 1 && st[0].docs == (uint64_t)dw.count && st[0].text_bytes == text &&
              st[0].tokens == in_shards && st[0].tokens < text,
          "stats: %" PRIu64 " docs, %" PRIu64 " bytes, %" PRIu64 " tokens (%" PRIu64
          " in shards)",
          st[0].docs, st[0].text_bytes, st[0].tokens, in_shards);
    CHECK(in_table, "the summary's tokens column is not %s", tokstr);
    char *sh0 = join(out, "web/train_000.bin");
    CHECK(shard_magic(sh0) == SHARD_MAGIC, "vocab %zu: not a uint16 shard", 256 + N_MERGES + 1);
    /* one thread: the same bytes */
    o.out = out1;
    o.threads = 1;
    o.stats = NULL;
    o.report = NULL;
    CHECK(prep_run(&o, &e) == 0, "%s", e.msg);
    const char *files[] = {"dataset.yaml", "web/train_000.bin", "web/train_001.bin",
                           "web/val_000.bin", "web/test_000.bin"};
    for (int i = 0; i < 5; i++) {
        char *a = join(out, files[i]), *b = join(out1, files[i]);
        int same = same_file(a, b);
        free(a), free(b);
        CHECK(same, "%s differs between 3 threads and 1", files[i]);
    }
    free_docs(&dw);
    free(in), free(out), free(out1), free(tj), free(yaml), free(sh0);
    test_rmtree(dir);
    free(dir);
}

/* A tiktoken ranks file whose tokens reach past 65535 (Qwen2's specials put the
 * end-of-text at 151643): uint32 shards in llm.c's 20240801 format that read back. */
static void test_prep_tokenizer_u32(void) {
    char *dir = test_tmpdir("preptok32");
    char *in = join(dir, "in"), *out = join(dir, "out"), *rf = join(dir, "ranks.tiktoken");
    CHECK(mkdir(in, 0777) == 0, "mkdir");
    /* the 256 bytes, then merged tokens at ranks 70000.. (base64 by hand) */
    FILE *f = fopen(rf, "wb");
    CHECK(f, "open");
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *toks[] = {"th", "the", "in", "an", "ing", "and", "er", " the", " an", " and"};
    for (int i = 0; i < 256 + 10; i++) {
        unsigned char v[8];
        size_t n = 1;
        if (i < 256) v[0] = (unsigned char)i;
        else n = strlen(toks[i - 256]), memcpy(v, toks[i - 256], n);
        char enc[16];
        size_t o = 0;
        for (size_t j = 0; j < n; j += 3) {
            uint32_t w = (uint32_t)v[j] << 16 | (j + 1 < n ? (uint32_t)v[j + 1] << 8 : 0) |
                         (j + 2 < n ? v[j + 2] : 0);
            enc[o++] = b64[w >> 18 & 63];
            enc[o++] = b64[w >> 12 & 63];
            enc[o++] = j + 1 < n ? b64[w >> 6 & 63] : '=';
            enc[o++] = j + 2 < n ? b64[w & 63] : '=';
        }
        fprintf(f, "%.*s %d\n", (int)o, enc, i < 256 ? i : 70000 + i - 256);
    }
    fclose(f);
    /* enough documents that the hash gives each split one (no rescue to account for) */
    const double fr[3] = {0.5, 0.3, 0.2};
    int ndocs = 3, placed[SPLIT_COUNT] = {0};
    for (;; ndocs++) {
        memset(placed, 0, sizeof placed);
        for (int j = 0; j < ndocs; j++) placed[expected_split(1, "w", (uint64_t)j, fr)]++;
        if (placed[0] && placed[1] && placed[2]) break;
    }
    docs dw = {0};
    for (int i = 0; i < ndocs; i++) {
        char name[32];
        size_t n;
        char *t = word_text(1500, 50 + (uint64_t)i, &n);
        snprintf(name, sizeof name, "%03d.txt", i);
        char *p = join(in, name);
        if (write_bytes(p, t, n)) abort();
        free(p);
        add_doc(&dw, t, n);
        free(t);
    }
    prep_input pi = {"w", in};
    prep_opts o;
    quiet_opts(&o, out, &pi, 1);
    o.tokenizer = rf;
    o.pattern = "qwen2";
    memcpy(o.split, fr, sizeof fr);
    o.shard_tokens = 1000;
    tdm_err e = {0};
    CHECK(prep_run(&o, &e) == 0, "%s", e.msg);
    tokenizer *t = NULL;
    CHECK(tokenizer_load(rf, "qwen2", &t, &e) == 0, "%s", e.msg);
    char *yaml = join(out, "dataset.yaml");
    dataset ds;
    int rc = dataset_load(&ds, yaml, &e);
    if (rc) tokenizer_free(t);
    CHECK(rc == 0, "%s", e.msg);
    int big = 0;
    size_t n_sh;
    const shard *sh = dataset_shards(&ds, 0, SPLIT_TRAIN, &n_sh);
    int wide = n_sh >= 1 && sh[0].width == 4 && sh[0].tok32 != NULL;
    int vocab = ds.vocab, eot = ds.eot;
    int keys = vocab == 151646 && eot == 151643 && !strcmp(ds.tokenizer, "tiktoken:qwen2");
    int k = check_tok_docs(&ds, 0, &dw, t, 151643, 1, o.split, 0, &big);
    dataset_free(&ds);
    tokenizer_free(t);
    CHECK(k == 0, "documents misplaced");
    CHECK(wide, "vocab 151646: the shards are not uint32");
    CHECK(keys, "dataset.yaml: vocab %d eot %d", vocab, eot);
    CHECK(big, "no token >= 65536 reached a shard");
    char *sh0 = join(out, "w/train_000.bin");
    CHECK(shard_magic(sh0) == SHARD_MAGIC_U32, "not llm.c's uint32 magic");
    free_docs(&dw);
    free(in), free(out), free(rf), free(yaml), free(sh0);
    test_rmtree(dir);
    free(dir);
}

/* The smallest number of documents >= at_least for which the hash alone gives every split
 * with a fraction > 0 a document of domain `name` (seed 1): no rescue to account for. */
static int docs_for_splits(const char *name, const double f[3], int at_least) {
    for (int n = at_least;; n++) {
        int placed[SPLIT_COUNT] = {0};
        for (int j = 0; j < n; j++) placed[expected_split(1, name, (uint64_t)j, f)]++;
        if (placed[0] && placed[1] && (placed[2] || f[2] == 0)) return n;
    }
}

/* A document of 3.6 MB (2.3 MB of it without any safe cut) encoded in parts of 64 KiB on
 * 2 threads gives tokenizer_encode's ids of the whole text; the tokenizer adds a prefix
 * space, which only the document's first part gets. The short documents before it are
 * encoded as a batch and still come first. */
static void test_prep_tokenizer_chunked(void) {
    char *dir = test_tmpdir("preptokch");
    char *in = join(dir, "in"), *out = join(dir, "out"), *tj = join(dir, "tok.json");
    CHECK(mkdir(in, 0777) == 0, "mkdir");
    write_tok_json(tj, MERGES, N_MERGES, 1, 1);
    const double f[3] = {0.5, 0.5, 0};
    int n = docs_for_splits("big", f, 2);
    docs dw = {0};
    for (int i = 0; i < n; i++) {
        size_t l1, l2;
        int large = i == n - 1; /* last: the short ones before it wait in a batch */
        char *a = word_text(large ? 1000000 : 500, 70 + (uint64_t)i, &l1);
        char *b = word_text(large ? 300000 : 300, 90 + (uint64_t)i, &l2);
        /* no '\n', so no safe cut, over more than two of docread's 1 MiB reads: a part
         * boundary is looked for and not found, then found in the text after it */
        size_t flat = large ? 2300000 : 100;
        char *t = malloc(l1 + flat + l2);
        if (!t) abort();
        memcpy(t, a, l1);
        for (size_t j = 0; j < flat; j++) t[l1 + j] = "the and "[j % 8];
        memcpy(t + l1 + flat, b, l2);
        char name[32];
        snprintf(name, sizeof name, "%03d.txt", i);
        char *p = join(in, name);
        if (write_bytes(p, t, l1 + flat + l2)) abort();
        free(p);
        add_doc(&dw, t, l1 + flat + l2);
        free(a), free(b), free(t);
    }
    /* a .jsonl whose short records wait in a batch when a long one, read whole, is cut
     * into parts: the batch goes out first */
    char *jp = join(in, "mix.jsonl");
    FILE *jf = fopen(jp, "wb");
    CHECK(jf, "open %s", jp);
    for (int r = 0; r < 25; r++) {
        size_t l;
        char *t = word_text(r == 12 ? 400000 : 200, 200 + (uint64_t)r, &l);
        fputs("{\"text\": \"", jf);
        for (size_t j = 0; j < l; j++) {
            if (t[j] == '\n') fputs("\\n", jf);
            else if (t[j] == '"' || t[j] == '\\') fputc('\\', jf), fputc(t[j], jf);
            else fputc(t[j], jf);
        }
        fputs("\"}\n", jf);
        add_doc(&dw, t, l);
        free(t);
    }
    fclose(jf);
    free(jp);
    prep_input pi = {"big", in};
    prep_opts o;
    quiet_opts(&o, out, &pi, 1);
    memcpy(o.split, f, sizeof f);
    o.tokenizer = tj;
    o.threads = 2;
    o.chunk_bytes = 64 << 10;
    tdm_err e = {0};
    CHECK(prep_run(&o, &e) == 0, "%s", e.msg);
    tokenizer *t = NULL;
    CHECK(tokenizer_load(tj, NULL, &t, &e) == 0, "%s", e.msg);
    char *yaml = join(out, "dataset.yaml");
    dataset ds;
    int rc = dataset_load(&ds, yaml, &e);
    if (rc) tokenizer_free(t);
    CHECK(rc == 0, "%s", e.msg);
    int big = 0, k = check_tok_docs(&ds, 0, &dw, t, 256 + N_MERGES, 1, o.split, 1, &big);
    dataset_free(&ds);
    tokenizer_free(t);
    free_docs(&dw);
    CHECK(k == 0, "the chunked encoding differs from the whole document's");
    free(in), free(out), free(tj), free(yaml);
    test_rmtree(dir);
    free(dir);
}

/* A plain-text document with no safe cut (a run of digits and spaces, as a small .gz of
 * one repeated line decompresses to) is held whole only up to its bound: past it it is
 * left out and counted as too long, the other documents prepared as ever (a 49 KB .gz
 * held 265 MB, without end). The bound made small here (doc_max_bytes); 256 MiB by
 * default. */
static void test_prep_document_without_cuts(void) {
    char *dir = test_tmpdir("prepnocut");
    char *in = join(dir, "in"), *out = join(dir, "out"), *tj = join(dir, "tok.json");
    CHECK(mkdir(in, 0777) == 0, "mkdir");
    write_tok_json(tj, MERGES, N_MERGES, 1, 0);
    size_t n = 300000;
    char *t = malloc(n);
    CHECK(t, "memory");
    for (size_t i = 0; i < n; i++) t[i] = i % 2 ? ' ' : '1';
    char *p = join(in, "digits.txt");
    CHECK(write_bytes(p, t, n) == 0, "write");
    free(t);
    free(p);
    const double f[3] = {0.8, 0.1, 0.1};
    int nd = docs_for_splits("num", f, 3);
    for (int i = 0; i < nd; i++) {
        size_t l;
        char *w = word_text(300, 500 + (uint64_t)i, &l), name[32];
        snprintf(name, sizeof name, "%03d.txt", i);
        p = join(in, name);
        CHECK(write_bytes(p, w, l) == 0, "write");
        free(p);
        free(w);
    }
    prep_input pi = {"num", in};
    prep_opts o;
    prep_stats st[DATASET_MAX_DOMAINS];
    quiet_opts(&o, out, &pi, 1);
    memcpy(o.split, f, sizeof f);
    o.tokenizer = tj;
    o.threads = 1;
    o.chunk_bytes = 16 << 10;
    o.doc_max_bytes = 100000;
    o.stats = st;
    tdm_err e = {0};
    int rc = prep_run(&o, &e);
    CHECK(rc == 0 && st[0].docs == (uint64_t)nd && st[0].skipped[TEXTSRC_TOO_LONG] == 1,
          "a document past its bound without a cut: rc %d (%s), %llu documents of %d, %llu too long", rc, e.msg,
          (unsigned long long)st[0].docs, nd, (unsigned long long)st[0].skipped[TEXTSRC_TOO_LONG]);
    /* a bound above it: the same file is a document */
    test_rmtree(out);
    o.doc_max_bytes = 400000;
    rc = prep_run(&o, &e);
    CHECK(rc == 0 && st[0].docs == (uint64_t)nd + 1 && st[0].skipped[TEXTSRC_TOO_LONG] == 0,
          "within the bound: rc %d (%s), %llu documents", rc, e.msg, (unsigned long long)st[0].docs);
    free(in), free(out), free(tj);
    test_rmtree(dir);
    free(dir);
}

/* A tokenizer without an end-of-text token needs --eot-token; option misuse is refused
 * before anything is written. */
static void test_prep_tokenizer_eot(void) {
    char *dir = test_tmpdir("preptokeot");
    char *in = join(dir, "in"), *out = join(dir, "out"), *tj = join(dir, "noeot.json");
    CHECK(mkdir(in, 0777) == 0, "mkdir");
    write_tok_json(tj, MERGES, N_MERGES, 0, 0);
    const double f[3] = {0.5, 0.5, 0};
    int n = docs_for_splits("d", f, 2);
    docs dw = {0};
    for (int i = 0; i < n; i++) {
        size_t l;
        char *t = word_text(300, 110 + (uint64_t)i, &l);
        char name[32];
        snprintf(name, sizeof name, "%03d.txt", i);
        char *p = join(in, name);
        if (write_bytes(p, t, l)) abort();
        free(p);
        add_doc(&dw, t, l);
        free(t);
    }
    prep_input pi = {"d", in};
    prep_opts o;
    quiet_opts(&o, out, &pi, 1);
    memcpy(o.split, f, sizeof f);
    o.tokenizer = tj;
    tdm_err e = {0};
    int rc = prep_run(&o, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "no end-of-text token") && strstr(e.msg, "--eot-token"),
          "no eot: rc %d, %s", rc, e.msg);
    o.eot_token = "<|nope|>";
    rc = prep_run(&o, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "<|nope|>"), "a bad --eot-token: rc %d, %s", rc, e.msg);
    o.tokenizer = NULL;
    rc = prep_run(&o, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "--tokenizer"), "--eot-token alone: rc %d, %s", rc, e.msg);
    o.eot_token = NULL;
    o.pattern = "gpt2";
    rc = prep_run(&o, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "--tokenizer"), "--pattern alone: rc %d, %s", rc, e.msg);
    o.tokenizer = tj;
    o.pattern = "o200k";
    rc = prep_run(&o, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "o200k"), "a pattern the file contradicts: rc %d, %s",
          rc, e.msg);
    /* an end-of-text token that is not special is matched in text: a document holding its
     * text would hold the separator (before: written silently) */
    char *tj2 = join(dir, "plain-eot.json");
    write_tok_json(tj2, MERGES, N_MERGES, 2, 0);
    o.tokenizer = tj2;
    o.pattern = NULL;
    rc = prep_run(&o, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "is an added token that is not special"), "a non-special eot: rc %d, %s",
          rc, e.msg);
    o.tokenizer = tj;
    free(tj2);
    CHECK(!exists(out), "a refused run wrote %s", out);
    /* a token named by its text: here the byte '\n' */
    o.pattern = NULL;
    o.eot_token = "\n";
    CHECK(prep_run(&o, &e) == 0, "%s", e.msg);
    tokenizer *t = NULL;
    CHECK(tokenizer_load(tj, NULL, &t, &e) == 0, "%s", e.msg);
    char *yaml = join(out, "dataset.yaml");
    dataset ds;
    rc = dataset_load(&ds, yaml, &e);
    if (rc) tokenizer_free(t);
    CHECK(rc == 0, "%s", e.msg);
    int big = 0, k = check_tok_docs(&ds, 0, &dw, t, '\n', 1, o.split, 0, &big);
    int vocab = ds.vocab, eot = ds.eot;
    dataset_free(&ds);
    tokenizer_free(t);
    free_docs(&dw);
    CHECK(k == 0, "documents misplaced");
    CHECK(vocab == (int)(256 + N_MERGES) && eot == '\n', "vocab %d eot %d", vocab, eot);
    free(in), free(out), free(tj), free(yaml);
    test_rmtree(dir);
    free(dir);
}

/* With the tokenizer test's reference files (tests/tokenizer/setup.sh; skipped without
 * them): GPT-2's ranks on real text, every document decoding back to one of the files. */
static void test_prep_tokenizer_gpt2(void) {
    const char *root = getenv("TANDEM_ROOT");
    char ranks[4200];
    snprintf(ranks, sizeof ranks, "%s/build/tokref/files/gpt2.tiktoken", root ? root : ".");
    const char *src = "/usr/share/common-licenses";
    if (!exists(ranks) || !exists(src)) {
        printf("SKIP test_prep_tokenizer_gpt2: no %s or %s\n", ranks, src);
        return;
    }
    char *dir = test_tmpdir("preptokgpt2");
    char *out = join(dir, "out");
    prep_input pi = {"lic", src};
    prep_stats st[1];
    int nst = 0;
    prep_opts o;
    quiet_opts(&o, out, &pi, 1);
    o.tokenizer = ranks;
    o.pattern = "gpt2";
    o.split[0] = 0.8, o.split[1] = 0.2, o.split[2] = 0;
    o.threads = 2;
    o.stats = st;
    o.n_stats = &nst;
    tdm_err e = {0};
    CHECK(prep_run(&o, &e) == 0, "%s", e.msg);
    tokenizer *t = NULL;
    CHECK(tokenizer_load(ranks, "gpt2", &t, &e) == 0, "%s", e.msg);
    char *yaml = join(out, "dataset.yaml");
    dataset ds;
    int rc = dataset_load(&ds, yaml, &e);
    if (rc) tokenizer_free(t);
    CHECK(rc == 0, "%s", e.msg);
    /* the regular files of src, to find each decoded document among */
    docs files = {0};
    DIR *dp = opendir(src);
    for (struct dirent *de; dp && (de = readdir(dp));) {
        char *p = join(src, de->d_name);
        struct stat sb;
        size_t n;
        unsigned char *b = lstat(p, &sb) == 0 && S_ISREG(sb.st_mode) ? read_all(p, &n) : NULL;
        if (b && n) add_doc(&files, b, n);
        free(b), free(p);
    }
    if (dp) closedir(dp);
    uint64_t found = 0, bytes = 0;
    int bad = 0;
    for (int s = 0; s < SPLIT_COUNT && !bad; s++) {
        size_t n_sh;
        const shard *sh = dataset_shards(&ds, 0, s, &n_sh);
        tok_ids doc = {0};
        for (size_t i = 0; i < n_sh && !bad; i++)
            for (size_t j = 0; j < sh[i].n && !bad; j++) {
                uint32_t id = shard_token(&sh[i], j);
                if (id != 50256) {
                    if (tok_ids_append(&doc, &id, 1)) abort();
                    continue;
                }
                buf_t b = {0};
                bad = tokenizer_decode(t, doc.v, doc.n, &b, &e) != 0;
                int hit = 0;
                for (int f = 0; f < files.count && !bad && !hit; f++)
                    hit = files.n[f] == b.n && !memcmp(files.p[f], b.p, b.n);
                if (!hit) {
                    fprintf(stderr, "  %s: a document of %zu bytes is none of the files\n",
                            dataset_split_name(s), b.n);
                    bad = 1;
                }
                found++;
                bytes += b.n;
                doc.n = 0;
                buf_free(&b);
            }
        if (doc.n) bad = 1; /* every document ends with the end-of-text id */
        tok_ids_free(&doc);
    }
    int vocab = ds.vocab, eot = ds.eot, u16 = ds.domains[0].split[0].shards[0].width == 2;
    dataset_free(&ds);
    tokenizer_free(t);
    free_docs(&files);
    CHECK(!bad, "the shards do not decode to the files");
    CHECK(nst == 1 && found == st[0].docs && bytes == st[0].text_bytes && found >= 5,
          "%" PRIu64 " documents (%" PRIu64 " bytes) decoded, prep kept %" PRIu64, found, bytes,
          st[0].docs);
    CHECK(vocab == 50257 && eot == 50256 && u16, "vocab %d eot %d", vocab, eot);
    free(out), free(yaml);
    test_rmtree(dir);
    free(dir);
}

/* `tandem run` trains on a dataset prep made with a tokenizer of vocab V: model.vocab
 * unset takes V (the first losses are near ln V, an untrained model's). */
static void test_prep_tokenizer_run(void) {
    const char *bin = getenv("TANDEM_BIN");
    if (!bin || !*bin) {
        printf("SKIP test_prep_tokenizer_run: no TANDEM_BIN\n");
        return;
    }
    char *dir = test_tmpdir("preptokrun");
    char *in = join(dir, "in"), *out = join(dir, "out"), *tj = join(dir, "tok.json");
    CHECK(mkdir(in, 0777) == 0, "mkdir");
    write_tok_json(tj, MERGES, N_MERGES, 1, 0);
    const double f[3] = {0.5, 0.5, 0};
    int n = docs_for_splits("a", f, 2);
    for (int i = 0; i < n; i++) {
        size_t l;
        char *t = word_text(3000, 130 + (uint64_t)i, &l);
        char name[32];
        snprintf(name, sizeof name, "%03d.txt", i);
        char *p = join(in, name);
        if (write_bytes(p, t, l)) abort();
        free(p), free(t);
    }
    char cmd[20000];
    snprintf(cmd, sizeof cmd,
             "'%s' prep --domain 'a=%s' --out '%s' --tokenizer '%s' --split 0.5,0.5 "
             ">/dev/null 2>'%s/prep.err'",
             bin, in, out, tj, dir);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tandem prep --tokenizer: status %d", st);
    char *cfg = join(dir, "c.yaml");
    FILE *f2 = fopen(cfg, "w");
    CHECK(f2, "config");
    fprintf(f2,
            "run: {episodes: 2, seed: 1, threads: 1}\n"
            "data: {dataset: %s/dataset.yaml}\n"
            "model: {layers: 1, channels: 16, heads: 2, ctx: 16}\n"
            "train: {batch: 2, seq: 16}\n"
            "tandem: {K: 2, E: 1}\n",
            out);
    fclose(f2);
    snprintf(cmd, sizeof cmd, "'%s' run '%s' --store '%s/store' --json >'%s/run.json' 2>&1", bin,
             cfg, dir, dir);
    st = system(cmd);
    char *rj = join(dir, "run.json");
    size_t len;
    char *txt = (char *)read_all(rj, &len);
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && txt;
    double loss = 0;
    int episodes = 0;
    if (txt) {
        txt[len ? len - 1 : 0] = '\0';
        episodes = count_of(txt, "\"event\":\"episode\"");
        const char *l = strstr(txt, "\"loss\":[");
        if (l) loss = strtod(l + 8, NULL);
    }
    double lnv = log(256.0 + N_MERGES + 1);
    if (!ok || episodes != 2 || fabs(loss - lnv) > 0.5) fprintf(stderr, "%s\n", txt ? txt : "");
    free(txt);
    CHECK(ok, "tandem run: status %d", st);
    CHECK(episodes == 2, "%d episodes", episodes);
    CHECK(fabs(loss - lnv) < 0.5, "first loss %g, ln(vocab %zu) = %g", loss, 256 + N_MERGES + 1,
          lnv);
    free(in), free(out), free(tj), free(cfg), free(rj);
    test_rmtree(dir);
    free(dir);
}

/* ---- CLI -------------------------------------------------------------------------- */

static void test_cli_prep(void) {
    char *dir = test_tmpdir("prepcli");
    char *in = join(dir, "in"), *out = join(dir, "out");
    CHECK(mkdir(in, 0777) == 0, "mkdir");
    unsigned char *abytes = make_file(in, "a.txt", 30000, 71, 0);
    put_text(in, "notes.md", "left out by --exclude\n");
    docs dw = {0};
    add_doc(&dw, abytes, 30000);
    free(abytes);
    make_jsonl(in, "b.jsonl", 30, 73, &dw);
    free(make_file(dir, "b.txt", 20000, 72, 0));
    free(make_file(dir, "b2.txt", 100, 74, 0));
    char dom_a[4200], dom_b[4200], ex[] = "web=*.md";
    snprintf(dom_a, sizeof dom_a, "web=%s", in);
    snprintf(dom_b, sizeof dom_b, "--domain=code=%s/b*.txt", dir); /* tandem expands it */
    char *ok[] = {"prep", "--domain", dom_a, dom_b, "--out", out, "--split", "0.8,0.2",
                  "--exclude", ex, "--text-field", "text", "--shard-tokens", "10k", "--seed", "9"};
    CHECK(cmd_prep(16, ok) == 0, "valid arguments refused");
    char *yaml = join(out, "dataset.yaml");
    dataset ds;
    tdm_err e = {0};
    CHECK(dataset_load(&ds, yaml, &e) == 0, "%s", e.msg);
    const double f[3] = {0.8, 0.2, 0};
    int k = check_docs(&ds, 0, &dw, 9, f);
    size_t nsh;
    const shard *sh = dataset_shards(&ds, 0, SPLIT_TRAIN, &nsh);
    int good = ds.n_domains == 2 && !strcmp(ds.domains[1].name, "code") &&
               ds.domains[0].split[SPLIT_TEST].n_shards == 0 && nsh >= 2 && sh[0].n == 10000 &&
               dataset_tokens(&ds, 1, SPLIT_TRAIN) + dataset_tokens(&ds, 1, SPLIT_VAL) == 20102;
    dataset_free(&ds);
    free_docs(&dw);
    CHECK(k == 0, "documents misplaced");
    CHECK(good, "the dataset does not match the arguments");
    char *help[] = {"prep", "--help"};
    CHECK(cmd_prep(2, help) == 0, "--help");
    char *help2[] = {"prep", "-h"};
    CHECK(cmd_prep(2, help2) == 0, "-h");
    char *out2 = join(dir, "out2");
    char *bad1[] = {"prep", "--out", out2};                             /* no --domain */
    char *bad2[] = {"prep", "--domain", dom_a};                         /* no --out */
    char *bad3[] = {"prep", "--domain", "noequals", "--out", out2};     /* not NAME=PATH */
    char *bad4[] = {"prep", "--domain", "=x", "--out", out2};           /* empty name */
    char *bad5[] = {"prep", "--domain", dom_a, "--out", out2, "--split", "0.5,0.5,0.5"};
    char *bad6[] = {"prep", "--domain", dom_a, "--out", out2, "--split", "0.9,x"};
    char *bad7[] = {"prep", "--domain", dom_a, "--out", out2, "--split", "1"};
    char *bad8[] = {"prep", "--domain", dom_a, "--out", out2, "--block-bytes", "1"}; /* gone */
    char *bad9[] = {"prep", "--domain", dom_a, "--out", out2, "--shard-tokens", "3G"};
    char *bad10[] = {"prep", "--domain", dom_a, "--out", out2, "--frobnicate", "1"};
    char *bad11[] = {"prep", "--domain", dom_a, "--out", out2, "stray"};
    char *bad12[] = {"prep", "--domain", "web=/nonexistent/tandem-prep", "--out", out2};
    char *bad13[] = {"prep", "--domain", dom_a, "--out", out2, "--seed", "-1"};
    char *bad14[] = {"prep", "--domain", dom_a, "--out"};
    char *bad15[] = {"prep", "--domain", dom_a, "--out", out2, "--exclude", "noequals"};
    char *bad16[] = {"prep", "--domain", dom_a, "--out", out2, "--text-field", ""};
    char *bad17[] = {"prep", "--domain", dom_a, "--out", out2, "--exclude", "other=*.md"};
    char *bad18[] = {"prep", "--domain", "web=/nonexistent/tandem-prep/**/*.txt", "--out", out2};
    char *bad19[] = {"prep", "--domain", dom_a, "--out", out2, "--pattern", "gpt2"};
    char *bad20[] = {"prep", "--domain", dom_a, "--out", out2, "--tokenizer", "/nonexistent/t.json"};
    char *bad21[] = {"prep", "--domain", dom_a, "--out", out2, "--eot-token", "\n"};
    char *bad22[] = {"prep", "--domain", dom_a, "--out", out2, "--threads", "0"};
    /* one domain's field, or every domain's, given twice: which one counts would be a guess */
    char *bad23[] = {"prep", "--domain", dom_a, "--out", out2, "--text-field", "web=a", "--text-field", "web=b"};
    char *bad24[] = {"prep", "--domain", dom_a, "--out", out2, "--text-field", "a", "--text-field", "b"};
    char **bads[] = {bad1,  bad2,  bad3,  bad4,  bad5,  bad6,  bad7,  bad8,  bad9,  bad10, bad11, bad12,
                     bad13, bad14, bad15, bad16, bad17, bad18, bad19, bad20, bad21, bad22, bad23, bad24};
    int argcs[] = {3, 3, 5, 5, 7, 7, 7, 7, 7, 7, 6, 5, 7, 4, 7, 7, 7, 5, 7, 7, 7, 7, 9, 9};
    for (int i = 0; i < 24; i++) CHECK(cmd_prep(argcs[i], bads[i]) == 2, "bad case %d", i + 1);
    CHECK(!exists(out2), "a refused command wrote %s", out2);
    /* through the binary and its dispatch, when run.sh says where it is */
    const char *bin = getenv("TANDEM_BIN");
    if (bin && *bin) {
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "%s prep --help >/dev/null", bin);
        int st = system(cmd);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s prep --help: status %d", bin, st);
        snprintf(cmd, sizeof cmd, "%s prep --out %s 2>/dev/null", bin, out2);
        st = system(cmd);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s prep without --domain: status %d", bin,
              st);
    }
    free(in), free(out), free(out2), free(yaml);
    test_rmtree(dir);
    free(dir);
}

int main(void) {
    RUN(test_prep_partitions_the_documents);
    RUN(test_prep_fractions_and_no_test);
    RUN(test_prep_deterministic_and_seeded);
    RUN(test_prep_small_domain);
    RUN(test_prep_jsonl_fields);
    RUN(test_prep_json_files);
    RUN(test_prep_json_elements_and_nul);
    RUN(test_prep_compressed);
    RUN(test_prep_globs);
    RUN(test_prep_other_names);
    RUN(test_prep_binary_and_utf8);
    RUN(test_prep_bad_json_reported);
    RUN(test_prep_long_records);
    RUN(test_prep_boundaries);
    RUN(test_prep_rejections);
    RUN(test_prep_unreadable);
    RUN(test_prep_progress);
    RUN(test_cli_prep);
    RUN(test_prep_tokenizer);
    RUN(test_prep_tokenizer_u32);
    RUN(test_prep_tokenizer_chunked);
    RUN(test_prep_tokenizer_eot);
    RUN(test_prep_document_without_cuts);
    RUN(test_prep_tokenizer_gpt2);
    RUN(test_prep_tokenizer_run);
    return test_summary("test_prep");
}
