/* test_data.c — shards, datasets, the resumable sampler, the corpus generator and its CLI. */
#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/corpus.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "data/shard.h"
#include "cli/cmds.h"
#include "tests/test.h"
#include "util/rng.h"

/* ---- helpers ---------------------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void rm_rf(char *dir) {
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

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

static int write_text(const char *path, const char *text) {
    return write_bytes(path, text, strlen(text));
}

/* A raw shard image: header fields as given, then `n` tokens 0,1,2,.. (mod 200), as
 * uint32 for the uint32 formats (version 7, or 2), else as uint16. */
static unsigned char *raw_shard(int32_t magic, int32_t version, int32_t count, size_t n,
                                size_t *len) {
    size_t w = version == 7 || version == 2 ? 4 : 2;
    *len = SHARD_HEADER_BYTES + w * n;
    unsigned char *b = calloc(1, *len);
    if (!b) abort();
    int32_t h[3] = {magic, version, count};
    memcpy(b, h, sizeof h); /* the test host is little-endian, like shard.c requires */
    for (size_t i = 0; i < n; i++) {
        uint32_t t = (uint32_t)(i % 200);
        memcpy(b + SHARD_HEADER_BYTES + w * i, &t, w); /* little-endian: the low bytes */
    }
    return b;
}

static int write_tokens(const char *path, size_t n, uint64_t seed, int vocab) {
    uint16_t *t = malloc((n ? n : 1) * sizeof *t);
    if (!t) abort();
    rng_stream s;
    rng_stream_init(&s, seed, RNG_TEST, 0, 0, 0);
    for (size_t i = 0; i < n; i++) t[i] = (uint16_t)rng_below(&s, (uint64_t)vocab);
    tdm_err e = {0};
    int rc = shard_write(path, t, n, &e);
    if (rc) fprintf(stderr, "  shard_write: %s\n", e.msg);
    free(t);
    return rc;
}

static int files_equal(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) eq = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

static void small_corpus_opts(corpus_opts *o, const char *out) {
    static const uint64_t train[] = {5000};
    corpus_opts_init(o);
    o->out = out;
    o->n_domains = 3;
    o->train_tokens = train;
    o->n_train = 1;
    o->val_tokens = 1000;
    o->test_tokens = 500;
    o->shard_tokens = 2000;
    o->vocab = 64;
    o->seed = 7;
    o->report = NULL;
}

/* ---- shards ----------------------------------------------------------------------- */

static void test_shard_roundtrip(void) {
    char *dir = test_tmpdir("shard");
    char *path = join(dir, "x.bin");
    uint16_t tok[1000];
    for (int i = 0; i < 1000; i++) tok[i] = (uint16_t)((i * 7919) % 65536);
    tdm_err e = {0};
    CHECK(shard_write(path, tok, 1000, &e) == 0, "write: %s", e.msg);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == SHARD_HEADER_BYTES + 2000, "size %lld",
          (long long)st.st_size);
    shard s;
    CHECK(shard_open(&s, path, 65536, &e) == 0, "open: %s", e.msg);
    CHECK(s.n == 1000 && memcmp(s.tok, tok, sizeof tok) == 0, "tokens differ (n=%zu)", s.n);
    const int32_t *h = s.map;
    CHECK(h[0] == 20240520 && h[1] == 1 && h[2] == 1000 && h[3] == 0 && h[255] == 0,
          "header %d %d %d", h[0], h[1], h[2]);
    shard_close(&s);
    CHECK(s.map == NULL && s.path == NULL, "close must zero");
    shard_close(&s); /* twice is harmless */

    /* overwrite atomically with an empty shard: valid, and no temp file left behind */
    CHECK(shard_write(path, NULL, 0, &e) == 0, "write empty: %s", e.msg);
    CHECK(shard_open(&s, path, 256, &e) == 0, "open empty: %s", e.msg);
    CHECK(s.n == 0, "n=%zu", s.n);
    shard_close(&s);
    int entries = 0;
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d));) entries += de->d_name[0] != '.';
    if (d) closedir(d);
    CHECK(entries == 1, "directory holds %d entries, expected only x.bin", entries);
    free(path);
    rm_rf(dir);
}

static void test_shard_rejections(void) {
    char *dir = test_tmpdir("shardbad");
    struct {
        const char *name;
        int32_t magic, version, count;
        size_t n;
        size_t cut; /* write only this many bytes when nonzero */
        const char *says;
    } cases[] = {
        {"short.bin", SHARD_MAGIC, 1, 0, 0, 100, "shorter than"},
        {"magic.bin", 12345, 1, 5, 5, 0, "bad magic 12345"},
        {"version.bin", SHARD_MAGIC, 3, 5, 5, 0, "shard version 3 is not supported"},
        {"v7magic.bin", SHARD_MAGIC, 7, 5, 5, 0, "shard version 7 is not supported with magic"},
        {"u32v1.bin", SHARD_MAGIC_U32, 1, 5, 5, 0, "shard version 1 is not supported with magic"},
        {"u32v3.bin", SHARD_MAGIC_U32, 3, 5, 5, 0, "shard version 3 is not supported"},
        {"u32longer.bin", SHARD_MAGIC_U32, 7, 10, 9, 0, "truncated"},
        {"u32shorter.bin", SHARD_MAGIC_U32, 7, 4, 5, 0, "4 trailing bytes"},
        {"u32half.bin", SHARD_MAGIC_U32, 7, 5, 5, SHARD_HEADER_BYTES + 18, "truncated"},
        {"u32vocab.bin", SHARD_MAGIC_U32, 7, 150, 150, 0, "token 100 at position 100 is >= vocab 100"},
        {"v2vocab.bin", SHARD_MAGIC, 2, 150, 150, 0, "token 100 at position 100 is >= vocab 100"},
        {"longer.bin", SHARD_MAGIC, 1, 10, 5, 0, "truncated"},
        {"shorter.bin", SHARD_MAGIC, 1, 3, 5, 0, "4 trailing bytes"},
        {"negative.bin", SHARD_MAGIC, 1, -1, 0, 0, "negative"},
        {"vocab.bin", SHARD_MAGIC, 1, 150, 150, 0, "token 100 at position 100 is >= vocab 100"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t len;
        unsigned char *img =
            raw_shard(cases[i].magic, cases[i].version, cases[i].count, cases[i].n, &len);
        char *path = join(dir, cases[i].name);
        CHECK(write_bytes(path, img, cases[i].cut ? cases[i].cut : len) == 0, "write %s", path);
        free(img);
        shard s;
        tdm_err e = {0};
        int rc = shard_open(&s, path, 100, &e);
        int named = strstr(e.msg, path) != NULL, says = strstr(e.msg, cases[i].says) != NULL;
        free(path);
        CHECK(rc == ERR_USAGE, "%s: rc %d (%s)", cases[i].name, rc, e.msg);
        CHECK(named, "%s: message does not name the file: %s", cases[i].name, e.msg);
        CHECK(says, "%s: message lacks '%s': %s", cases[i].name, cases[i].says, e.msg);
        CHECK(s.map == NULL && s.tok == NULL && s.tok32 == NULL && s.n == 0,
              "%s: shard not zeroed", cases[i].name);
    }
    /* the same bytes pass when the vocabulary is large enough, so the check is the vocab */
    char *path = join(dir, "vocab.bin");
    shard s;
    tdm_err e = {0};
    CHECK(shard_open(&s, path, 200, &e) == 0, "vocab 200 should accept: %s", e.msg);
    shard_close(&s);
    free(path);
    const char *wide[] = {"u32vocab.bin", "v2vocab.bin"}; /* llm.c's llama-3 format, version 2 */
    for (int i = 0; i < 2; i++) {
        path = join(dir, wide[i]);
        CHECK(shard_open(&s, path, 200, &e) == 0, "%s, vocab 200 should accept: %s", wide[i], e.msg);
        CHECK(s.width == 4 && s.tok32 && s.n == 150 && shard_token(&s, 149) == 149,
              "%s read back: %d %zu", wide[i], s.width, s.n);
        shard_close(&s);
        free(path);
    }
    path = join(dir, "missing.bin");
    CHECK(shard_open(&s, path, 256, &e) == ERR_USAGE && strstr(e.msg, path), "missing: %s", e.msg);
    free(path);
    CHECK(shard_open(&s, dir, 256, &e) == ERR_USAGE && strstr(e.msg, "not a regular file"),
          "directory: %s", e.msg);
    rm_rf(dir);
}

/* shard_write_tokens writes llm.c's uint32 format (magic 20240801, version 7) above
 * uint16's vocabulary and the uint16 one (20240520, version 1) up to it; both read back
 * token for token; the vocabulary bound is exact on both sides. */
static void test_shard_v2_roundtrip(void) {
    char *dir = test_tmpdir("shardv2");
    char *path = join(dir, "w.bin"), *narrow = join(dir, "n.bin"), *bad = join(dir, "bad.bin");
    enum { N = 3000, V = 70000 };
    static uint32_t tok[N], back[N];
    for (int i = 0; i < N; i++) tok[i] = (uint32_t)(((uint64_t)i * 104729u) % V);
    tok[17] = V - 1; /* the largest id the vocabulary allows */
    tok[18] = 65536; /* the first one uint16 cannot hold */
    tdm_err e = {0};
    CHECK(shard_width_for(V) == 4 && shard_width_for(65536) == 2 && shard_width_for(256) == 2,
          "widths for 70000/65536/256: %d %d %d", shard_width_for(V), shard_width_for(65536),
          shard_width_for(256));
    CHECK(shard_write_tokens(path, tok, N, V, &e) == 0, "write v2: %s", e.msg);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == SHARD_HEADER_BYTES + 4 * N, "v2 size %lld",
          (long long)st.st_size);
    shard s;
    CHECK(shard_open(&s, path, V, &e) == 0, "open v2: %s", e.msg);
    const int32_t *h = s.map;
    CHECK(h[0] == 20240801 && h[1] == 7 && h[2] == N && h[3] == 0 && h[255] == 0,
          "uint32 header %d %d %d", h[0], h[1], h[2]);
    CHECK(s.width == 4 && s.tok == NULL && s.tok32 && s.n == N, "uint32 shard %d %zu", s.width, s.n);
    CHECK(shard_copy(&s, 0, N, back, &e) == 0, "copy: %s", e.msg);
    CHECK(memcmp(back, tok, sizeof tok) == 0 && shard_token(&s, 17) == V - 1 &&
              shard_token(&s, 18) == 65536,
          "v2 tokens differ");
    CHECK(shard_copy(&s, 10, 9, back, &e) == 0, "copy: %s", e.msg);
    CHECK(back[7] == V - 1 && back[8] == 65536, "v2 copy at an offset: %u %u", back[7], back[8]);
    /* the file rewritten in place while open (the mapping sees it): a token past the
     * vocabulary is an error naming the file, never handed to the model */
    {
        int fd = open(path, O_WRONLY);
        uint32_t big = V + 5;
        CHECK(fd >= 0 && pwrite(fd, &big, 4, SHARD_HEADER_BYTES + 4 * 12) == 4, "rewrite in place");
        if (fd >= 0) close(fd);
        CHECK(shard_copy(&s, 10, 9, back, &e) == ERR_USAGE && strstr(e.msg, path) &&
                  strstr(e.msg, "rewritten while the run read it") && strstr(e.msg, "position 12"),
              "a token past the vocabulary after the open: %s", e.msg);
        CHECK(shard_copy(&s, 0, 10, back, &e) == 0, "the windows before it still read: %s", e.msg);
        fd = open(path, O_WRONLY); /* put the token back for the cases below */
        CHECK(fd >= 0 && pwrite(fd, &tok[12], 4, SHARD_HEADER_BYTES + 4 * 12) == 4, "restore");
        if (fd >= 0) close(fd);
    }
    shard_close(&s);
    /* token = vocab - 1 is the largest accepted: one vocab less refuses it, naming the file */
    CHECK(shard_open(&s, path, V - 1, &e) == ERR_USAGE && strstr(e.msg, path) &&
              strstr(e.msg, "token 69999 at position 17 is >= vocab 69999"),
          "v2 at vocab 69999: %s", e.msg);
    CHECK(s.map == NULL && s.tok32 == NULL && s.n == 0, "refused shard not zeroed");
    /* a token = vocab is refused by the writer too, and nothing is written */
    tok[5] = V;
    CHECK(shard_write_tokens(bad, tok, N, V, &e) == ERR_USAGE && strstr(e.msg, bad) &&
              strstr(e.msg, "token 70000 at position 5"),
          "write token = vocab: %s", e.msg);
    CHECK(access(bad, F_OK) != 0, "a refused shard was written");
    CHECK(shard_write_tokens(bad, tok, N, SHARD_VOCAB_MAX + 1, &e) == ERR_USAGE &&
              strstr(e.msg, "16777216"),
          "vocab above the bound: %s", e.msg);
    CHECK(shard_open(&s, path, SHARD_VOCAB_MAX + 1, &e) == ERR_USAGE, "open above the bound");
    /* vocab 65536 fits version 1: 2 bytes a token, the old reader's layout */
    for (int i = 0; i < N; i++) tok[i] = (uint32_t)(((uint64_t)i * 7919u) % 65536);
    tok[3] = 65535;
    CHECK(shard_write_tokens(narrow, tok, N, 65536, &e) == 0, "write v1: %s", e.msg);
    CHECK(stat(narrow, &st) == 0 && st.st_size == SHARD_HEADER_BYTES + 2 * N, "v1 size %lld",
          (long long)st.st_size);
    CHECK(shard_open(&s, narrow, 65536, &e) == 0, "open v1: %s", e.msg);
    CHECK(s.width == 2 && s.tok && s.tok32 == NULL && ((const int32_t *)s.map)[0] == 20240520 &&
              ((const int32_t *)s.map)[1] == 1,
          "uint16 shard %d", s.width);
    CHECK(shard_copy(&s, 0, N, back, &e) == 0, "copy: %s", e.msg);
    CHECK(memcmp(back, tok, sizeof tok) == 0 && s.tok[3] == 65535, "v1 tokens differ");
    shard_close(&s);
    /* a version-1 shard loads into a larger vocabulary (all its ids are below it) */
    CHECK(shard_open(&s, narrow, V, &e) == 0 && s.n == N, "v1 at vocab 70000: %s", e.msg);
    shard_close(&s);
    int entries = 0;
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d));) entries += de->d_name[0] != '.';
    if (d) closedir(d);
    CHECK(entries == 2, "directory holds %d entries, expected w.bin and n.bin", entries);
    free(path);
    free(narrow);
    free(bad);
    rm_rf(dir);
}

/* ---- datasets --------------------------------------------------------------------- */

static void test_dataset_loads_generated_corpus(void) {
    char *dir = test_tmpdir("dsgen");
    corpus_opts o;
    small_corpus_opts(&o, dir);
    tdm_err e = {0};
    CHECK(corpus_generate(&o, &e) == 0, "generate: %s", e.msg);
    char *yaml = join(dir, "dataset.yaml");
    dataset ds;
    int rc = dataset_load(&ds, yaml, &e);
    free(yaml);
    CHECK(rc == 0, "load: %s", e.msg);
    CHECK(dataset_n_domains(&ds) == 3 && ds.vocab == 64, "domains %d vocab %d",
          dataset_n_domains(&ds), ds.vocab);
    CHECK(strcmp(dataset_domain_name(&ds, 2), "d2") == 0, "name %s", dataset_domain_name(&ds, 2));
    CHECK(dataset_find_domain(&ds, "d1") == 1 && dataset_find_domain(&ds, "x") == -1, "find");
    size_t n;
    const shard *sh = dataset_shards(&ds, 1, SPLIT_TRAIN, &n);
    CHECK(n == 3 && sh[0].n == 2000 && sh[1].n == 2000 && sh[2].n == 1000,
          "train shards %zu: %zu %zu", n, n ? sh[0].n : 0, n > 2 ? sh[2].n : 0);
    CHECK(strstr(sh[0].path, "train_000.bin") && strstr(sh[2].path, "train_002.bin"),
          "shards not in sorted order: %s, %s", sh[0].path, sh[2].path);
    CHECK(dataset_tokens(&ds, 1, SPLIT_TRAIN) == 5000, "train tokens");
    CHECK(dataset_tokens(&ds, 0, SPLIT_VAL) == 1000 && dataset_tokens(&ds, 2, SPLIT_TEST) == 500,
          "val/test tokens");
    dataset_free(&ds);
    CHECK(ds.domains == NULL && ds.n_domains == 0, "free must zero");
    dataset_free(&ds);
    rm_rf(dir);
}

/* Loads `yaml` written into dir/dataset.yaml; returns the code, message in *e. */
static int load_text(const char *dir, const char *yaml, tdm_err *e) {
    char *path = join(dir, "dataset.yaml");
    if (write_text(path, yaml)) abort();
    dataset ds;
    int rc = dataset_load(&ds, path, e);
    if (rc == 0)
        dataset_free(&ds);
    else if (ds.domains || ds.path)
        rc = -1; /* must be zeroed on failure */
    free(path);
    return rc;
}

static void test_dataset_errors(void) {
    char *dir = test_tmpdir("dserr");
    char *web = join(dir, "web");
    CHECK(mkdir(web, 0777) == 0, "mkdir");
    const char *files[] = {"web/train_0.bin", "web/train_1.bin", "web/val_0.bin", "web/big.bin"};
    for (int i = 0; i < 4; i++) {
        char *p = join(dir, files[i]);
        int rc = write_tokens(p, 300, (uint64_t)i, i == 3 ? 1000 : 200);
        free(p);
        CHECK(rc == 0, "write %s", files[i]);
    }
    tdm_err e = {0};
    /* a good one first, so the failures below are about what each changes */
    CHECK(load_text(dir,
                    "vocab: 256\ndomains:\n  - name: web\n    train: [web/train_*.bin]\n"
                    "    val: web/val_0.bin\n",
                    &e) == 0,
          "good: %s", e.msg);
    struct {
        const char *yaml, *says[3];
    } cases[] = {
        {"vocab: 256\ndomains:\n  - name: web\n    train: [web/train_*.bin, web/nope_*.bin]\n"
         "    val: [web/val_*.bin]\n",
         {"dataset.yaml:4:", "'web' train", "'web/nope_*.bin' matched no file"}},
        {"vocab: 256\ndomains:\n  - name: web\n    train: [web/train_*.bin]\n"
         "    val: [web/val_*.bin]\n    tset: [web/val_*.bin]\n",
         {"dataset.yaml:6:", "unknown key 'tset'", "domain 'web'"}},
        {"vocab: 256\ndomains:\n  - name: web\n    train: [web/train_0.bin]\n"
         "    val: [web/val_*.bin]\n  - name: web\n    train: [web/train_1.bin]\n"
         "    val: [web/val_*.bin]\n",
         {"dataset.yaml:6:", "duplicate domain name 'web'", "#2"}},
        /* a directory's own name (prep and gen-corpus refused it, a hand-written file not:
         * `mixture --format megatron` then printed /data/../text_document) */
        {"vocab: 256\ndomains:\n  - name: web\n    train: [web/train_0.bin]\n"
         "    val: [web/val_*.bin]\n  - name: ..\n    train: [web/train_1.bin]\n"
         "    val: [web/val_*.bin]\n",
         {"dataset.yaml:6:", "name '..'", "directory's own name"}},
        /* a pattern into a missing directory (before: "could not be read (permissions?)") */
        {"vocab: 256\ndomains:\n  - name: web\n    train: [nodir/train_*.bin]\n"
         "    val: [web/val_*.bin]\n",
         {"dataset.yaml:4:", "nodir' could not be read", "No such file or directory"}},
        {"vocab: 256\ndomains:\n  - name: web\n    train: [web/train_*.bin]\n"
         "    val: [web/train_1.bin]\n",
         {"train_1.bin", "'web' val", "also"}},
        /* a repeat is refused at its mention, before it is mapped again or anything after
         * it is opened (before: every copy mapped, then big.bin's refusal, the repeat only
         * after the whole list — 60,000 mentions of one file met vm.max_map_count first) */
        {"vocab: 256\ndomains:\n  - name: web\n    train:\n      - web/train_0.bin\n"
         "      - ./web/train_0.bin\n      - web/big.bin\n    val: [web/val_*.bin]\n",
         {"dataset.yaml:6: shard ", "./web/train_0.bin (domain 'web' train) is also ",
          "train_0.bin (domain 'web' train); each file may appear once"}},
        {"vocab: 256\ndomains:\n  - name: web\n    train: [web/train_*.bin]\n",
         {"dataset.yaml:", "'web'", "no 'val'"}},
        {"vocab: 256\ndomains:\n  - name: \"w b\"\n    train: [web/train_*.bin]\n"
         "    val: [web/val_*.bin]\n",
         {"dataset.yaml:3:", "'w b'", "[A-Za-z0-9_.-]"}},
        {"vocab: 0\ndomains: []\n", {"dataset.yaml:1:", "vocab", "1..16777216"}},
        {"vocab: 256\ndomain:\n  - name: web\n", {"dataset.yaml:", "unknown key 'domain'", ""}},
        {"vocab: 256\ndomains: []\n", {"dataset.yaml:2:", "1..64 domains", ""}},
        {"vocab: 256\ndomains:\n  - name: web\n    train: [web/big.bin]\n"
         "    val: [web/val_*.bin]\n",
         {"big.bin", ">= vocab 256", "'web' train"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        err_clear(&e);
        int rc = load_text(dir, cases[i].yaml, &e);
        CHECK(rc == ERR_USAGE, "case %zu: rc %d (%s)", i, rc, e.msg);
        for (int k = 0; k < 3; k++)
            CHECK(strstr(e.msg, cases[i].says[k]), "case %zu: message lacks \"%s\": %s", i,
                  cases[i].says[k], e.msg);
    }
    /* a dataset.yaml path that ends in a space (a line break inside a quoted YAML value
     * folds into one): quoted and said (before: "cannot open corpus/dataset.yaml : ...") */
    {
        dataset ds;
        char *p = join(dir, "dataset.yaml ");
        err_clear(&e);
        int rc = dataset_load(&ds, p, &e);
        CHECK(rc == ERR_USAGE && strstr(e.msg, "dataset.yaml '") && strstr(e.msg, "ends with white space"),
              "a path ending in a space: rc %d: %s", rc, e.msg);
        free(p);
    }
    free(web);
    rm_rf(dir);
}

/* tokenizer, tokenizer_sha256 and eot: optional, validated, written and read back; the
 * model-vocabulary rule against a dataset of vocab 70000 in version-2 shards. */
static void test_dataset_tokenizer_keys(void) {
    char *dir = test_tmpdir("dstok");
    char *web = join(dir, "web");
    CHECK(mkdir(web, 0777) == 0, "mkdir");
    enum { N = 400, V = 70000 };
    static uint32_t tok[N];
    for (int i = 0; i < N; i++) tok[i] = (uint32_t)(65000 + i * 11) % V;
    const char *files[] = {"web/train_0.bin", "web/val_0.bin"};
    tdm_err e = {0};
    for (int i = 0; i < 2; i++) {
        char *p = join(dir, files[i]);
        CHECK(shard_write_tokens(p, tok, N, V, &e) == 0, "write %s: %s", files[i], e.msg);
        free(p);
    }
    static const char sha[] = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08";
    dataset_yaml_domain dom = {.name = "web", .comment = "one domain"};
    dataset_yaml_meta meta = {.vocab = V, .tokenizer = "hf-bpe:gpt2", .tokenizer_sha256 = sha,
                              .eot = V - 1};
    char *yaml = join(dir, "dataset.yaml");
    CHECK(dataset_write_yaml_meta(yaml, "# test\n", &meta, &dom, 1, 0, &e) == 0, "write: %s", e.msg);
    dataset ds;
    CHECK(dataset_load(&ds, yaml, &e) == 0, "load: %s", e.msg);
    CHECK(ds.vocab == V && strcmp(ds.tokenizer, "hf-bpe:gpt2") == 0 && ds.eot == V - 1 &&
              strcmp(ds.tokenizer_sha256,
                     "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08") == 0,
          "read back: vocab %d tokenizer '%s' eot %d sha %s", ds.vocab, ds.tokenizer, ds.eot,
          ds.tokenizer_sha256);
    size_t n;
    const shard *sh = dataset_shards(&ds, 0, SPLIT_TRAIN, &n);
    CHECK(n == 1 && sh[0].width == 4 && shard_token(&sh[0], 100) == tok[100] && tok[100] > 65535,
          "v2 shard in the dataset");
    /* the model's vocabulary: the dataset's by default, larger allowed, smaller refused */
    int v = -1;
    CHECK(dataset_model_vocab(&ds, 0, &v, &e) == 0 && v == V, "default: %d", v);
    CHECK(dataset_model_vocab(&ds, V + 30, &v, &e) == 0 && v == V + 30, "padding: %d", v);
    CHECK(dataset_model_vocab(&ds, 50257, &v, &e) == ERR_USAGE && strstr(e.msg, "50257") &&
              strstr(e.msg, "70000") && strstr(e.msg, yaml) && strstr(e.msg, "hf-bpe:gpt2") &&
              strstr(e.msg, "model.vocab = 0"),
          "smaller: %s", e.msg);
    dataset_free(&ds);
    /* dataset_write_yaml (no tokenizer) still writes a file without the keys */
    CHECK(dataset_write_yaml(yaml, "", V, &dom, 1, 0, &e) == 0, "plain write: %s", e.msg);
    CHECK(dataset_load(&ds, yaml, &e) == 0 && ds.tokenizer[0] == '\0' &&
              ds.tokenizer_sha256[0] == '\0' && ds.eot == -1,
          "absent keys: %s", e.msg);
    dataset_free(&ds);
    /* refusals, in the loader and (before writing) in the writer */
    meta.eot = V;
    CHECK(dataset_write_yaml_meta(yaml, "", &meta, &dom, 1, 0, &e) == ERR_USAGE &&
              strstr(e.msg, "eot 70000"),
          "writer eot: %s", e.msg);
    meta.eot = -1, meta.tokenizer = "hf bpe";
    CHECK(dataset_write_yaml_meta(yaml, "", &meta, &dom, 1, 0, &e) == ERR_USAGE &&
              strstr(e.msg, "'hf bpe'"),
          "writer tokenizer: %s", e.msg);
    const char *body = "domains:\n  - name: web\n    train: [web/train_*.bin]\n    val: [web/val_*.bin]\n";
    struct {
        const char *head, *says;
    } cases[] = {
        {"vocab: 70000\neot: 70000\n", "eot must be a token id in 0..69999"},
        {"vocab: 70000\neot: \"5\"\n", "eot must be"},
        {"vocab: 70000\ntokenizer_sha256: abc\n", "64 hex digits"},
        {"vocab: 70000\ntokenizer: [byte]\n", "tokenizer must be a string"},
        {"vocab: 70000\ntokenizer: \"a b\"\n", "tokenizer must be a string"},
        {"vocab: 65536\n", "token 65539 at position 49 is >= vocab 65536"}, /* ids above it */
        {"vocab: 70000\ntokeniser: byte\n", "unknown key 'tokeniser'"},
    };
    char text[512];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(text, sizeof text, "%s%s", cases[i].head, body);
        err_clear(&e);
        int rc = load_text(dir, text, &e);
        CHECK(rc == ERR_USAGE && strstr(e.msg, cases[i].says), "case %zu: rc %d: %s", i, rc, e.msg);
    }
    snprintf(text, sizeof text, "vocab: 70000\ntokenizer: tiktoken:cl100k\neot: 0\n%s", body);
    CHECK(load_text(dir, text, &e) == 0, "plain tokenizer scalar: %s", e.msg);
    free(yaml);
    free(web);
    rm_rf(dir);
}

/* Patterns are relative to the YAML's directory even when its name has glob characters. */
static void test_dataset_dir_with_glob_characters(void) {
    char *dir = test_tmpdir("dsglob");
    char *sub = join(dir, "run[1]*");
    CHECK(mkdir(sub, 0777) == 0, "mkdir");
    char *a = join(sub, "a.bin"), *b = join(sub, "b.bin"), *yaml = join(sub, "d.yaml");
    CHECK(write_tokens(a, 50, 1, 10) == 0 && write_tokens(b, 60, 2, 10) == 0, "shards");
    CHECK(write_text(yaml, "vocab: 10\ndomains:\n  - {name: x, train: [a.bin], val: [b.bin]}\n") ==
              0,
          "yaml");
    dataset ds;
    tdm_err e = {0};
    int rc = dataset_load(&ds, yaml, &e);
    free(a), free(b), free(yaml), free(sub);
    CHECK(rc == 0, "load: %s", e.msg);
    int ok = dataset_tokens(&ds, 0, SPLIT_TRAIN) == 50 && dataset_tokens(&ds, 0, SPLIT_VAL) == 60;
    dataset_free(&ds);
    CHECK(ok, "wrong files resolved");
    rm_rf(dir);
}

/* ---- sampler ---------------------------------------------------------------------- */

/* One domain "x" whose train split has shards of the given sizes, val one of 10 tokens. */
static int make_dataset(const char *dir, const size_t *sizes, int n, dataset *ds, tdm_err *e) {
    char yaml[2048];
    int off = snprintf(yaml, sizeof yaml, "vocab: 256\ndomains:\n  - name: x\n    train: [");
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "s%d.bin", i);
        char *p = join(dir, name);
        int rc = write_tokens(p, sizes[i], 100 + (uint64_t)i, 256);
        free(p);
        if (rc) return rc;
        off += snprintf(yaml + off, sizeof yaml - (size_t)off, "%s%s", i ? ", " : "", name);
    }
    snprintf(yaml + off, sizeof yaml - (size_t)off, "]\n    val: [v.bin]\n");
    char *v = join(dir, "v.bin"), *y = join(dir, "d.yaml");
    int rc = write_tokens(v, 10, 99, 256);
    if (!rc) rc = write_text(y, yaml);
    if (!rc) rc = dataset_load(ds, y, e);
    free(v);
    free(y);
    return rc;
}

/* Whether out[0..n) are the tokens of `sh` from `off` on (any shard version). */
static int is_slice(const uint32_t *out, const shard *sh, uint64_t off, size_t n) {
    if (off + n > sh->n) return 0;
    for (size_t i = 0; i < n; i++)
        if (out[i] != shard_token(sh, (size_t)off + i)) return 0;
    return 1;
}

static void test_sampler_epoch_visits_every_window_once(void) {
    char *dir = test_tmpdir("samp");
    const size_t sizes[] = {1000, 777, 50, 17, 300};
    const int T = 16;
    dataset ds;
    tdm_err e = {0};
    CHECK(make_dataset(dir, sizes, 5, &ds, &e) == 0, "dataset: %s", e.msg);
    sampler_cursor cur = {0, 0};
    uint64_t shifts[3];
    for (uint64_t ep = 0; ep < 3; ep++) {
        uint64_t w = sampler_windows(&ds, 0, SPLIT_TRAIN, T, 5, ep);
        /* the shift is the offset mod T of any window; recount W by brute force */
        size_t si;
        uint64_t off;
        sampler_cursor c0 = cur;
        CHECK(sampler_locate(&ds, 0, SPLIT_TRAIN, T, 5, &c0, &si, &off, &e) == 0, "%s", e.msg);
        uint64_t shift = off % T, brute = 0, base[5];
        shifts[ep] = shift;
        for (int i = 0; i < 5; i++) {
            base[i] = brute;
            for (uint64_t st = shift; st + T + 1 <= sizes[i]; st += T) brute++;
        }
        CHECK(w == brute && w > 100, "epoch %llu: W %llu, brute force %llu", (unsigned long long)ep,
              (unsigned long long)w, (unsigned long long)brute);
        unsigned char *seen = calloc(w, 1);
        int monotone = 1;
        uint64_t prev = 0;
        for (uint64_t k = 0; k < w; k++) {
            CHECK(cur.epoch == ep && cur.pos == k, "cursor (%llu,%llu) at step %llu",
                  (unsigned long long)cur.epoch, (unsigned long long)cur.pos,
                  (unsigned long long)k);
            sampler_cursor c = cur;
            CHECK(sampler_locate(&ds, 0, SPLIT_TRAIN, T, 5, &c, &si, &off, &e) == 0, "%s", e.msg);
            uint32_t out[T + 1];
            CHECK(sampler_next(&ds, 0, SPLIT_TRAIN, T, 5, &cur, out, &e) == 0, "%s", e.msg);
            const shard *sh = &ds.domains[0].split[SPLIT_TRAIN].shards[si];
            CHECK(off % T == shift && off + T + 1 <= sh->n, "window %llu+%d in shard of %zu",
                  (unsigned long long)off, T + 1, sh->n);
            CHECK(is_slice(out, sh, off, T + 1), "not a slice of shard %zu", si);
            uint64_t g = base[si] + (off - shift) / T;
            CHECK(g < w && !seen[g], "window %llu visited twice", (unsigned long long)g);
            seen[g] = 1;
            if (k && g < prev) monotone = 0;
            prev = g;
        }
        free(seen);
        CHECK(!monotone, "epoch %llu visited windows in storage order", (unsigned long long)ep);
        CHECK(cur.epoch == ep + 1 && cur.pos == 0, "epoch did not roll over");
    }
    CHECK(shifts[0] != shifts[1] || shifts[1] != shifts[2], "three epochs with one shift %llu",
          (unsigned long long)shifts[0]);
    dataset_free(&ds);
    rm_rf(dir);
}

/* The visit order of an epoch, as global window numbers at shift-independent positions. */
static void test_sampler_epochs_and_seeds_differ(void) {
    char *dir = test_tmpdir("samp2");
    const size_t sizes[] = {4000};
    dataset ds;
    tdm_err e = {0};
    CHECK(make_dataset(dir, sizes, 1, &ds, &e) == 0, "dataset: %s", e.msg);
    const int T = 8;
    uint64_t order[3][32];
    uint64_t seeds[3] = {1, 1, 2}, epochs[3] = {0, 1, 0};
    for (int r = 0; r < 3; r++) {
        sampler_cursor c = {epochs[r], 0};
        for (int k = 0; k < 32; k++) {
            size_t si;
            uint64_t off;
            c.pos = (uint64_t)k;
            CHECK(sampler_locate(&ds, 0, SPLIT_TRAIN, T, seeds[r], &c, &si, &off, &e) == 0, "%s",
                  e.msg);
            order[r][k] = off / T;
        }
    }
    int same01 = 0, same02 = 0;
    for (int k = 0; k < 32; k++)
        same01 += order[0][k] == order[1][k], same02 += order[0][k] == order[2][k];
    CHECK(same01 < 4, "epochs 0 and 1 agree on %d of 32 positions", same01);
    CHECK(same02 < 4, "seeds 1 and 2 agree on %d of 32 positions", same02);
    /* same inputs, same answer */
    sampler_cursor a = {3, 17}, b = {3, 17};
    uint32_t x[T + 1], y[T + 1];
    for (int k = 0; k < 50; k++) {
        CHECK(sampler_next(&ds, 0, SPLIT_TRAIN, T, 9, &a, x, &e) == 0, "%s", e.msg);
        CHECK(sampler_next(&ds, 0, SPLIT_TRAIN, T, 9, &b, y, &e) == 0, "%s", e.msg);
        CHECK(memcmp(x, y, sizeof x) == 0 && a.pos == b.pos && a.epoch == b.epoch, "step %d", k);
    }
    dataset_free(&ds);
    rm_rf(dir);
}

/* A shard of exactly T+1 tokens has a window only at shift 0: other epochs are skipped. */
static void test_sampler_skips_empty_epochs(void) {
    char *dir = test_tmpdir("samp3");
    const int T = 8;
    const size_t sizes[] = {(size_t)T + 1};
    dataset ds;
    tdm_err e = {0};
    CHECK(make_dataset(dir, sizes, 1, &ds, &e) == 0, "dataset: %s", e.msg);
    sampler_cursor c = {0, 0};
    uint64_t last_epoch = 0;
    int skipped = 0;
    for (int k = 0; k < 6; k++) {
        uint32_t out[T + 1];
        sampler_cursor before = c;
        CHECK(sampler_next(&ds, 0, SPLIT_TRAIN, T, 3, &c, out, &e) == 0, "%s", e.msg);
        CHECK(is_slice(out, &ds.domains[0].split[SPLIT_TRAIN].shards[0], 0, T + 1),
              "step %d: not the only window", k);
        CHECK(c.pos == 0 && c.epoch > before.epoch, "cursor did not move to a later epoch");
        uint64_t used = c.epoch - 1; /* the epoch the window came from */
        CHECK(sampler_windows(&ds, 0, SPLIT_TRAIN, T, 3, used) == 1, "epoch without window used");
        skipped += used > (k ? last_epoch + 1 : 0);
        last_epoch = used;
    }
    CHECK(skipped > 0, "no epoch was skipped in 6 samples at T=%d", T);
    sampler_cursor bad = {0, 5};
    uint32_t out[T + 1];
    CHECK(sampler_next(&ds, 0, SPLIT_TRAIN, T, 3, &bad, out, &e) == ERR_USAGE &&
              strstr(e.msg, "cursor") && bad.pos == 5,
          "bad cursor: %s", e.msg);
    dataset_free(&ds);
    rm_rf(dir);
}

static void test_sampler_too_short_split(void) {
    char *dir = test_tmpdir("samp4");
    const size_t sizes[] = {100, 40};
    dataset ds;
    tdm_err e = {0};
    CHECK(make_dataset(dir, sizes, 2, &ds, &e) == 0, "dataset: %s", e.msg);
    sampler_cursor c = {0, 0};
    uint32_t out[200];
    CHECK(sampler_next(&ds, 0, SPLIT_VAL, 16, 1, &c, out, &e) == ERR_USAGE, "val accepted");
    CHECK(strstr(e.msg, "domain 'x' val") && strstr(e.msg, "T+1 = 17") &&
              strstr(e.msg, "hold 10 tokens"),
          "message: %s", e.msg);
    CHECK(c.epoch == 0 && c.pos == 0, "cursor moved on error");
    /* train: 100 tokens make windows at T=99 (one, at shift 0) but none at T=100 */
    CHECK(sampler_check(&ds, 0, SPLIT_TRAIN, 99, &e) == 0, "T=99: %s", e.msg);
    CHECK(sampler_check(&ds, 0, SPLIT_TRAIN, 100, &e) == ERR_USAGE && strstr(e.msg, "T+1 = 101") &&
              strstr(e.msg, "longest 100"),
          "T=100: %s", e.msg);
    CHECK(sampler_check(&ds, 1, SPLIT_TRAIN, 8, &e) == ERR_USAGE, "domain 1 accepted");
    CHECK(sampler_check(&ds, 0, 3, 8, &e) == ERR_USAGE, "split 3 accepted");
    CHECK(sampler_check(&ds, 0, SPLIT_TRAIN, 0, &e) == ERR_USAGE, "T=0 accepted");
    CHECK(sampler_check(&ds, 0, SPLIT_TEST, 8, &e) == ERR_USAGE, "absent test split accepted");
    dataset_free(&ds);
    rm_rf(dir);
}

/* Batches after restoring cursors saved at step n equal the uninterrupted run's. */
static void test_sampler_batches_resume_bit_exact(void) {
    char *dir = test_tmpdir("samp5");
    corpus_opts o;
    small_corpus_opts(&o, dir);
    tdm_err e = {0};
    CHECK(corpus_generate(&o, &e) == 0, "generate: %s", e.msg);
    char *yaml = join(dir, "dataset.yaml");
    dataset ds;
    int rc = dataset_load(&ds, yaml, &e);
    free(yaml);
    CHECK(rc == 0, "load: %s", e.msg);
    enum { B = 6, T = 32, STEPS = 120, SAVE = 37 };
    /* 5000 train tokens / 32 ≈ 155 windows per epoch, so 120 steps × 2 per domain cross an
     * epoch boundary */
    static uint32_t run[STEPS][B][T + 1];
    int32_t ids[B];
    sampler_cursor cur[3] = {{0, 0}, {0, 0}, {0, 0}}, saved[3];
    for (int s = 0; s < STEPS; s++) {
        if (s == SAVE) memcpy(saved, cur, sizeof cur);
        CHECK(sampler_batch_per_domain(&ds, SPLIT_TRAIN, T, B, 11, cur, &run[s][0][0], ids, &e) ==
                  0,
              "step %d: %s", s, e.msg);
        for (int b = 0; b < B; b++) CHECK(ids[b] == b / 2, "row %d has domain %d", b, ids[b]);
    }
    CHECK(cur[0].epoch >= 1, "the run never crossed an epoch (epoch %llu)",
          (unsigned long long)cur[0].epoch);
    sampler_cursor end[3];
    memcpy(end, cur, sizeof cur);
    memcpy(cur, saved, sizeof cur);
    static uint32_t again[B][T + 1];
    for (int s = SAVE; s < STEPS; s++) {
        CHECK(sampler_batch_per_domain(&ds, SPLIT_TRAIN, T, B, 11, cur, &again[0][0], ids, &e) == 0,
              "%s", e.msg);
        CHECK(memcmp(again, run[s], sizeof again) == 0, "resumed step %d differs", s);
    }
    CHECK(memcmp(cur, end, sizeof cur) == 0, "cursors differ after resume");
    /* rows of different domains come from different sources */
    CHECK(memcmp(run[0][0], run[0][2], sizeof run[0][0]) != 0, "domains 0 and 1 equal");
    /* B not divisible by M: ⌊B/M⌋ rows each, one more for the first B mod M domains, each
     * domain's rows the ones its cursor gives next */
    sampler_cursor c5[3];
    memcpy(c5, cur, sizeof cur);
    CHECK(sampler_batch_per_domain(&ds, SPLIT_TRAIN, T, 5, 11, c5, &again[0][0], ids, &e) == 0,
          "B=5: %s", e.msg);
    CHECK(ids[0] == 0 && ids[1] == 0 && ids[2] == 1 && ids[3] == 1 && ids[4] == 2,
          "B=5 rows: %d %d %d %d %d", ids[0], ids[1], ids[2], ids[3], ids[4]);
    CHECK(c5[0].pos == cur[0].pos + 2 && c5[2].pos == cur[2].pos + 1, "B=5 cursors");
    /* fewer rows than domains: error, cursors untouched */
    CHECK(sampler_batch_per_domain(&ds, SPLIT_TRAIN, T, 2, 11, cur, &again[0][0], ids, &e) ==
                  ERR_USAGE &&
              strstr(e.msg, "B=2") && strstr(e.msg, "3 domains"),
          "B=2: %s", e.msg);
    CHECK(memcmp(cur, end, sizeof cur) == 0, "cursors moved on error");
    /* an error in the last domain leaves the earlier domains' cursors in place */
    cur[2].pos = 1u << 30;
    memcpy(end, cur, sizeof cur);
    CHECK(sampler_batch_per_domain(&ds, SPLIT_TRAIN, T, B, 11, cur, &again[0][0], ids, &e) ==
                  ERR_USAGE &&
              strstr(e.msg, "domain 'd2' train"),
          "bad cursor: %s", e.msg);
    CHECK(memcmp(cur, end, sizeof cur) == 0, "cursors moved on error");
    dataset_free(&ds);
    rm_rf(dir);
}

/* ---- corpus ----------------------------------------------------------------------- */

static void test_corpus_is_deterministic(void) {
    char *d1 = test_tmpdir("corpA"), *d2 = test_tmpdir("corpB"), *d3 = test_tmpdir("corpC");
    corpus_opts o;
    tdm_err e = {0};
    small_corpus_opts(&o, d1);
    CHECK(corpus_generate(&o, &e) == 0, "%s", e.msg);
    o.out = d2;
    CHECK(corpus_generate(&o, &e) == 0, "%s", e.msg);
    o.out = d3;
    o.seed = 8;
    CHECK(corpus_generate(&o, &e) == 0, "%s", e.msg);
    const char *files[] = {"dataset.yaml",   "d0/train_000.bin", "d0/train_002.bin",
                           "d1/val_000.bin", "d2/test_000.bin",  "d2/train_001.bin"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char *a = join(d1, files[i]), *b = join(d2, files[i]), *c = join(d3, files[i]);
        int same = files_equal(a, b), other = files_equal(a, c);
        free(a), free(b), free(c);
        CHECK(same, "%s differs between two runs with one seed", files[i]);
        if (strstr(files[i], ".bin")) CHECK(!other, "%s is the same for seeds 7 and 8", files[i]);
    }
    rm_rf(d1);
    rm_rf(d2);
    rm_rf(d3);
}

/* Conditional entropy H(x_t | x_{t-2}, x_{t-1}) in bits, by counting. */
static double empirical_entropy(const uint16_t *t, size_t n, int vocab) {
    size_t nc = (size_t)vocab * (size_t)vocab;
    uint32_t *cnt = calloc(nc * (size_t)vocab, sizeof *cnt), *ctx = calloc(nc, sizeof *ctx);
    if (!cnt || !ctx) abort();
    for (size_t i = 2; i < n; i++) {
        size_t c = (size_t)t[i - 2] * (size_t)vocab + t[i - 1];
        cnt[c * (size_t)vocab + t[i]]++;
        ctx[c]++;
    }
    double h = 0;
    for (size_t c = 0; c < nc; c++)
        for (int x = 0; x < vocab; x++) {
            uint32_t k = cnt[c * (size_t)vocab + (size_t)x];
            if (k) h -= (double)k / (double)(n - 2) * log2((double)k / ctx[c]);
        }
    free(cnt);
    free(ctx);
    return h;
}

static void test_corpus_entropies_follow_branching(void) {
    char *dir = test_tmpdir("corpH");
    static const uint64_t train[] = {100000, 150000, 200000};
    corpus_opts o;
    small_corpus_opts(&o, dir);
    o.vocab = 16; /* 16^2 contexts: enough samples per context for a plug-in estimate */
    o.train_tokens = train;
    o.n_train = 3;
    o.shard_tokens = 1000000;
    tdm_err e = {0};
    CHECK(corpus_generate(&o, &e) == 0, "%s", e.msg);
    char *yaml = join(dir, "dataset.yaml");
    dataset ds;
    int rc = dataset_load(&ds, yaml, &e); /* validates every token < 16 */
    free(yaml);
    CHECK(rc == 0, "%s", e.msg);
    double prev = 0;
    for (int m = 0; m < 3; m++) {
        int b = corpus_branching(3, 16, m);
        CHECK(b == 2 << m, "domain %d: b=%d", m, b);
        size_t n;
        const shard *sh = dataset_shards(&ds, m, SPLIT_TRAIN, &n);
        CHECK(n == 1 && sh[0].n == train[m], "domain %d train tokens %zu", m, sh[0].n);
        double h = empirical_entropy(sh[0].tok, sh[0].n, 16), want = corpus_entropy_bits(b);
        CHECK(fabs(h - want) < 0.03, "domain %d: empirical %.4f bits, source %.4f", m, h, want);
        CHECK(h > prev + 0.3, "domain %d entropy %.4f not above %.4f", m, h, prev);
        prev = h;
    }
    dataset_free(&ds);
    rm_rf(dir);
    CHECK(fabs(corpus_entropy_bits(2) - 0.9182958) < 1e-6, "H(2)=%.7f", corpus_entropy_bits(2));
    CHECK(corpus_entropy_bits(1) == 0, "H(1)");
}

static void test_corpus_alphabets_overlap_partly(void) {
    char *dir = test_tmpdir("corpV");
    static const uint64_t train[] = {60000};
    corpus_opts o;
    small_corpus_opts(&o, dir);
    o.vocab = 256;
    o.train_tokens = train;
    o.shard_tokens = 100000;
    tdm_err e = {0};
    CHECK(corpus_generate(&o, &e) == 0, "%s", e.msg);
    char *yaml = join(dir, "dataset.yaml");
    dataset ds;
    int rc = dataset_load(&ds, yaml, &e);
    free(yaml);
    CHECK(rc == 0, "%s", e.msg);
    unsigned char used[3][256] = {{0}};
    for (int m = 0; m < 3; m++) {
        size_t n;
        const shard *sh = dataset_shards(&ds, m, SPLIT_TRAIN, &n);
        int distinct = 0;
        for (size_t i = 0; i < sh[0].n; i++) {
            distinct += !used[m][sh[0].tok[i]];
            used[m][sh[0].tok[i]] = 1;
        }
        CHECK(distinct > 32 && distinct <= CORPUS_MAX_ALPHABET, "domain %d uses %d tokens", m,
              distinct);
    }
    int both = 0, only1 = 0;
    for (int t = 0; t < 256; t++)
        both += used[1][t] && used[2][t], only1 += used[1][t] && !used[2][t];
    CHECK(both > 16 && only1 > 16, "d1/d2 share %d tokens, d1 alone has %d", both, only1);
    dataset_free(&ds);
    rm_rf(dir);
    for (int mm = 1; mm <= 64; mm *= 4) {
        int prev = 0;
        for (int m = 0; m < mm; m++) {
            int b = corpus_branching(mm, 256, m);
            CHECK(b > prev && b <= 128, "M=%d m=%d: b=%d after %d", mm, m, b, prev);
            prev = b;
        }
    }
}

static void test_corpus_refuses_stale_shards_and_bad_options(void) {
    char *dir = test_tmpdir("corpS");
    corpus_opts o;
    small_corpus_opts(&o, dir);
    tdm_err e = {0};
    CHECK(corpus_generate(&o, &e) == 0, "%s", e.msg);
    CHECK(corpus_generate(&o, &e) == 0, "same corpus again: %s", e.msg);
    o.shard_tokens = 5000; /* one train shard now; train_001/002 would be stale */
    CHECK(corpus_generate(&o, &e) == ERR_USAGE && strstr(e.msg, "train_001.bin"), "stale: %s",
          e.msg);
    small_corpus_opts(&o, dir);
    const char *names[] = {"a", "a", "c"};
    o.names = names;
    CHECK(corpus_generate(&o, &e) == ERR_USAGE && strstr(e.msg, "'a' appears twice"), "%s", e.msg);
    const char *names2[] = {"a", "..", "c"};
    o.names = names2;
    CHECK(corpus_generate(&o, &e) == ERR_USAGE && strstr(e.msg, "'..'"), "%s", e.msg);
    const char *names3[] = {"a", "Average", "c"}; /* the tables' mean row */
    o.names = names3;
    CHECK(corpus_generate(&o, &e) == ERR_USAGE && strstr(e.msg, "'Average' is reserved"), "%s",
          e.msg);
    const char *names4[] = {"a", "dataset.yaml", "c"}; /* its folder: in the description's place */
    o.names = names4;
    CHECK(corpus_generate(&o, &e) == ERR_USAGE && strstr(e.msg, "'dataset.yaml'"), "%s", e.msg);
    const char *names5[] = {"a", "b", "A"}; /* as prep: case-insensitive file systems */
    o.names = names5;
    CHECK(corpus_generate(&o, &e) == ERR_USAGE && strstr(e.msg, "only in case"), "%s", e.msg);
    small_corpus_opts(&o, dir);
    o.vocab = 0;
    CHECK(corpus_generate(&o, &e) == ERR_USAGE && strstr(e.msg, "vocab 0"), "%s", e.msg);
    o.vocab = 1; /* no model takes it (model.vocab >= 2): refused here, not by the run after */
    CHECK(corpus_generate(&o, &e) == ERR_USAGE && strstr(e.msg, "vocab 1"), "%s", e.msg);
    small_corpus_opts(&o, dir);
    o.n_train = 2;
    CHECK(corpus_generate(&o, &e) == ERR_USAGE && strstr(e.msg, "2 train token counts"), "%s",
          e.msg);
    rm_rf(dir);
}

/* gen-corpus killed between two domains over an earlier corpus of the same names: no
 * dataset.yaml remains to vouch for the mix of new and old shards (the old one stayed,
 * and a run took the mix as a corpus); run again, it writes the whole new corpus. */
static void test_corpus_killed_midway_leaves_no_description(void) {
    char *dir = test_tmpdir("corpK");
    const char *bin = getenv("TANDEM_BIN") && *getenv("TANDEM_BIN") ? getenv("TANDEM_BIN") : "./tandem";
    char cmd[4096];
    const char *args = "--names a,b,c --train-tokens 3000,2000,1000 --val-tokens 500 --test-tokens 500";
    snprintf(cmd, sizeof cmd, "'%s' gen-corpus --out '%s' %s --seed 1 >/dev/null 2>&1", bin, dir, args);
    CHECK(system(cmd) == 0, "gen-corpus");
    char *yaml = join(dir, "dataset.yaml");
    struct stat st;
    CHECK(stat(yaml, &st) == 0, "no dataset.yaml");
    /* another corpus under the same names, killed after its first domain */
    snprintf(cmd, sizeof cmd, "TANDEM_TEST_KILL_AT=corpus:1 '%s' gen-corpus --out '%s' %s --seed 2 >/dev/null 2>&1",
             bin, dir, args);
    int status = system(cmd);
    CHECK(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 137),
          "not killed between the domains (status %d)", status);
    CHECK(stat(yaml, &st) != 0 && errno == ENOENT, "the old dataset.yaml survived a half-written corpus");
    /* a reader of the half-written folder is told what happened and what to do (before:
     * "cannot open .../dataset.yaml: No such file or directory" alone) */
    dataset ds;
    tdm_err e = {0};
    CHECK(dataset_load(&ds, yaml, &e) != 0 && strstr(e.msg, "did not finish") && strstr(e.msg, "same command again"),
          "%s", e.msg);
    snprintf(cmd, sizeof cmd, "'%s' gen-corpus --out '%s' %s --seed 2 >/dev/null 2>&1", bin, dir, args);
    CHECK(system(cmd) == 0, "gen-corpus again");
    CHECK(stat(yaml, &st) == 0, "no dataset.yaml after the rerun");
    free(yaml);
    rm_rf(dir);
}

static void test_cli_gen_corpus(void) {
    char *dir = test_tmpdir("cli");
    char *out = join(dir, "new/corpus");
    char *ok[] = {"gen-corpus",
                  "--out",
                  out,
                  "--names",
                  "a,b",
                  "--train-tokens=3000,4k",
                  "--val-tokens",
                  "500",
                  "--test-tokens",
                  "0",
                  "--vocab",
                  "100",
                  "--seed",
                  "3"};
    CHECK(cmd_gen_corpus(14, ok) == 0, "valid arguments refused");
    char *yaml = join(out, "dataset.yaml");
    dataset ds;
    tdm_err e = {0};
    int rc = dataset_load(&ds, yaml, &e);
    free(yaml);
    CHECK(rc == 0, "%s", e.msg);
    int good = ds.n_domains == 2 && !strcmp(ds.domains[1].name, "b") && ds.vocab == 100 &&
               dataset_tokens(&ds, 1, SPLIT_TRAIN) == 4000 &&
               dataset_tokens(&ds, 0, SPLIT_VAL) == 500 &&
               ds.domains[0].split[SPLIT_TEST].n_shards == 0;
    dataset_free(&ds);
    CHECK(good, "the corpus does not match the arguments");
    char *help[] = {"gen-corpus", "--help"};
    CHECK(cmd_gen_corpus(2, help) == 0, "--help");
    char *bad1[] = {"gen-corpus", "--out", out, "--domains", "x"};
    char *bad2[] = {"gen-corpus", "--out", out, "--frobnicate", "1"};
    char *bad3[] = {"gen-corpus", "--domains", "2"};
    char *bad4[] = {"gen-corpus", "--out", out, "--domains", "3", "--names", "a,b"};
    char *bad5[] = {"gen-corpus", "--out", out, "--train-tokens", "1,2"}; /* 3 domains */
    char *bad6[] = {"gen-corpus", "--out"};
    char *bad7[] = {"gen-corpus", "--out", out, "--vocab", "65537"};
    char **bads[] = {bad1, bad2, bad3, bad4, bad5, bad6, bad7};
    int argcs[] = {5, 5, 3, 7, 5, 2, 5};
    for (int i = 0; i < 7; i++) CHECK(cmd_gen_corpus(argcs[i], bads[i]) == 2, "bad case %d", i + 1);
    /* more than any disk holds (1e15 tokens a domain): refused before a byte is written
     * (before: it wrote until the disk was full) */
    char *out2 = join(dir, "huge");
    char *huge[] = {"gen-corpus", "--out", out2, "--train-tokens", "1000000000000000"};
    struct stat hs;
    CHECK(cmd_gen_corpus(5, huge) == 3 && stat(out2, &hs) != 0, "a corpus larger than the disk was started");
    free(out2);
    free(out);
    rm_rf(dir);
}

/* The names a stale-shard check recognises: what dataset.yaml's globs match, with the
 * index read only from an all-digit middle. */
static void test_shard_names_match_back(void) {
    char name[64];
    int split = -1, digits = -1;
    uint64_t index = 0;
    for (int s = 0; s < SPLIT_COUNT; s++) {
        dataset_shard_name(s, 42, 4, name);
        CHECK(dataset_shard_match(name, &split, &index, &digits) && split == s && index == 42 &&
                  digits == 4,
              "%s: split %d index %llu digits %d", name, split, (unsigned long long)index, digits);
    }
    CHECK(dataset_shard_match("val_x1.bin", &split, &index, &digits) && split == SPLIT_VAL && digits == 0,
          "a non-digit middle is a shard-like name without an index");
    CHECK(dataset_shard_match("train_12345678901234567890.bin", &split, &index, &digits) && digits == 0,
          "20 digits: no index (it could overflow)");
    CHECK(dataset_shard_match("train_.bin", &split, &index, &digits) && digits == 0,
          "an empty middle matches the glob train_*.bin");
    const char *no[] = {"train_1.bi", "trainx_1.bin", "test1.bin", "train_1.bin.tmp", "x"};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        CHECK(!dataset_shard_match(no[i], &split, &index, &digits), "'%s' is no shard name", no[i]);
}

int main(void) {
    RUN(test_shard_names_match_back);
    RUN(test_shard_roundtrip);
    RUN(test_shard_rejections);
    RUN(test_shard_v2_roundtrip);
    RUN(test_dataset_loads_generated_corpus);
    RUN(test_dataset_errors);
    RUN(test_dataset_tokenizer_keys);
    RUN(test_dataset_dir_with_glob_characters);
    RUN(test_sampler_epoch_visits_every_window_once);
    RUN(test_sampler_epochs_and_seeds_differ);
    RUN(test_sampler_skips_empty_epochs);
    RUN(test_sampler_too_short_split);
    RUN(test_sampler_batches_resume_bit_exact);
    RUN(test_corpus_is_deterministic);
    RUN(test_corpus_entropies_follow_branching);
    RUN(test_corpus_alphabets_overlap_partly);
    RUN(test_corpus_refuses_stale_shards_and_bad_options);
    RUN(test_corpus_killed_midway_leaves_no_description);
    RUN(test_cli_gen_corpus);
    return test_summary("test_data");
}
