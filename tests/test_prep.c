/* test_prep.c — `tandem prep`: byte-level shards from text trees (data/prep.h, its CLI). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/prep.h"
#include "data/shard.h"
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

/* The split rule of prep.h computed here from util/rng.h, not through prep.c. */
static int expected_split(uint64_t seed, int m, uint64_t k, const double f[3]) {
    rng_stream r;
    rng_stream_init(&r, seed, PREP_RNG_PURPOSE, (uint32_t)m, (uint32_t)k, (uint32_t)(k >> 32));
    double u = rng_uniform(&r);
    if (u < f[0]) return SPLIT_TRAIN;
    if (f[2] == 0 || u < f[0] + f[1]) return SPLIT_VAL;
    return SPLIT_TEST;
}

/* Checks that the three splits of domain m partition `stream` block by block in the
 * order the hash assigns. Returns the number of blocks, or -1 (after a failed CHECK). */
static int check_partition(const dataset *ds, int m, const unsigned char *stream, size_t len,
                           size_t block, uint64_t seed, const double f[3]) {
    unsigned char *sp[SPLIT_COUNT];
    size_t sl[SPLIT_COUNT], off[SPLIT_COUNT] = {0};
    for (int s = 0; s < SPLIT_COUNT; s++) sp[s] = split_bytes(ds, m, s, &sl[s]);
    int bad = 0, k = 0;
    for (size_t pos = 0; pos < len && !bad; pos += block, k++) {
        size_t n = len - pos < block ? len - pos : block;
        int s = expected_split(seed, m, (uint64_t)k, f);
        if (prep_block_split(seed, m, (uint64_t)k, f) != s) {
            fprintf(stderr, "  domain %d block %d: prep_block_split disagrees with the rule\n", m,
                    k);
            bad = 1;
        } else if (off[s] + n > sl[s] || memcmp(sp[s] + off[s], stream + pos, n)) {
            fprintf(stderr, "  domain %d block %d is not next in %s (at %zu of %zu)\n", m, k,
                    dataset_split_name(s), off[s], sl[s]);
            bad = 1;
        }
        off[s] += n;
    }
    for (int s = 0; s < SPLIT_COUNT && !bad; s++)
        if (off[s] != sl[s]) {
            fprintf(stderr, "  domain %d %s: %zu bytes of blocks, %zu tokens in shards\n", m,
                    dataset_split_name(s), off[s], sl[s]);
            bad = 1;
        }
    for (int s = 0; s < SPLIT_COUNT; s++) free(sp[s]);
    CHECK_OR_RET(!bad, "domain %d does not partition its stream", m);
    return k;
}

/* Appends the stream contribution of one file: its bytes, then '\n' unless empty. */
static void append(unsigned char **st, size_t *len, const unsigned char *b, size_t n) {
    *st = realloc(*st, *len + n + 1);
    if (!*st) abort();
    memcpy(*st + *len, b, n);
    *len += n;
    if (n) (*st)[(*len)++] = '\n';
}

static int count_tmp_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));) n += strstr(de->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

/* ---- the byte stream, the partition, the dataset ----------------------------------- */

/* Two domains over a tree with several files, a subdirectory, an empty file, a symlink
 * and non-UTF-8 bytes; domain b is given twice (a file, then a directory). */
static void test_prep_partitions_the_stream(void) {
    char *dir = test_tmpdir("prep");
    char *in = join(dir, "in"), *a = join(in, "a"), *bdir = join(in, "bdir");
    char *sub = join(a, "sub"), *out = join(dir, "out");
    CHECK(mkdir(in, 0777) == 0 && mkdir(a, 0777) == 0 && mkdir(sub, 0777) == 0 &&
              mkdir(bdir, 0777) == 0,
          "mkdir");
    /* names chosen so that byte order differs from creation order and from a per-level
     * walk: "sub.txt" < "sub/..." since '.' < '/' */
    unsigned char *x = make_file(a, "x.txt", 5000, 1, 0);
    unsigned char *subtxt = make_file(a, "sub.txt", 1234, 2, 0);
    unsigned char *y = make_file(a, "sub/y.txt", 7001, 3, 0);
    unsigned char *z = make_file(a, "sub/z.bin", 3000, 4, 1); /* any byte, 0 and 255 too */
    unsigned char *emp = make_file(a, "empty.txt", 0, 5, 0);
    char *link = join(a, "zz-link.txt");
    CHECK(symlink("x.txt", link) == 0, "symlink: %s", strerror(errno));
    unsigned char *b1 = make_file(in, "b.txt", 2500, 6, 0);
    unsigned char *b2 = make_file(bdir, "c.txt", 4100, 7, 1);
    unsigned char *b3 = make_file(bdir, "a.txt", 900, 8, 0);

    char *pb = join(in, "b.txt");
    prep_input inputs[] = {{"alpha", a}, {"b", pb}, {"b", bdir}};
    prep_opts o;
    quiet_opts(&o, out, inputs, 3);
    o.split[0] = 0.6, o.split[1] = 0.2, o.split[2] = 0.2;
    o.block_bytes = 700;
    o.shard_tokens = 1000; /* several shards per split, cutting through blocks */
    o.seed = 11;
    char *rep_path = join(dir, "report.txt");
    o.report = fopen(rep_path, "w+");
    CHECK(o.report, "report file");
    tdm_err e = {0};
    int rc = prep_run(&o, &e);
    fclose(o.report);
    CHECK(rc == 0, "prep: %s", e.msg);

    /* the streams, built here in the documented order */
    unsigned char *sa = NULL, *sb = NULL;
    size_t la = 0, lb = 0;
    append(&sa, &la, emp, 0);        /* a/empty.txt */
    append(&sa, &la, subtxt, 1234);  /* a/sub.txt */
    append(&sa, &la, y, 7001);       /* a/sub/y.txt */
    append(&sa, &la, z, 3000);       /* a/sub/z.bin */
    append(&sa, &la, x, 5000);       /* a/x.txt; the symlink is skipped */
    append(&sb, &lb, b1, 2500);      /* in/b.txt */
    append(&sb, &lb, b3, 900);       /* in/bdir/a.txt */
    append(&sb, &lb, b2, 4100);      /* in/bdir/c.txt */

    char *yaml = join(out, "dataset.yaml");
    dataset ds;
    rc = dataset_load(&ds, yaml, &e);
    CHECK(rc == 0, "dataset_load: %s", e.msg);
    int shape = ds.vocab == 256 && ds.n_domains == 2 && !strcmp(ds.domains[0].name, "alpha") &&
                !strcmp(ds.domains[1].name, "b");
    int ka = shape ? check_partition(&ds, 0, sa, la, 700, 11, o.split) : -1;
    int kb = shape ? check_partition(&ds, 1, sb, lb, 700, 11, o.split) : -1;
    /* shards are full except each split's last */
    int full = 1;
    for (int m = 0; shape && m < 2; m++)
        for (int s = 0; s < SPLIT_COUNT; s++) {
            size_t n;
            const shard *sh = dataset_shards(&ds, m, s, &n);
            for (size_t i = 0; i + 1 < n; i++) full &= sh[i].n == 1000;
            full &= n >= 1 && sh[n - 1].n >= 1 && sh[n - 1].n <= 1000;
        }
    uint64_t tokens_a = shape ? dataset_tokens(&ds, 0, 0) + dataset_tokens(&ds, 0, 1) +
                                    dataset_tokens(&ds, 0, 2)
                              : 0;
    dataset_free(&ds);
    CHECK(shape, "dataset shape: vocab %d, %d domains", ds.vocab, ds.n_domains);
    CHECK(ka == (int)((la + 699) / 700) && kb == (int)((lb + 699) / 700), "blocks %d %d", ka, kb);
    CHECK(tokens_a == la && la == 16239, "domain alpha: %llu tokens, stream %zu",
          (unsigned long long)tokens_a, la);
    CHECK(full, "a shard other than a split's last is not full");
    char *adir = join(out, "alpha");
    CHECK(count_tmp_files(adir) == 0, "temporary files left in %s", adir);
    size_t rl;
    char *rep = (char *)read_all(rep_path, &rl);
    CHECK(rep, "report");
    rep = realloc(rep, rl + 1);
    rep[rl] = '\0';
    int rep_ok = strstr(rep, "alpha: 5 files (1 empty, 1 symlink/special file skipped), 16239 "
                             "tokens in 24 blocks of 700 bytes: train ") != NULL &&
                 strstr(rep, "\nb: 3 files (0 empty), 7503 tokens in 11 blocks") != NULL &&
                 !strstr(rep, "moved");
    CHECK(rep_ok, "report:\n%s", rep);
    free(rep);
    free(x), free(subtxt), free(y), free(z), free(emp), free(b1), free(b2), free(b3);
    free(sa), free(sb), free(link), free(pb), free(yaml), free(rep_path), free(adir);
    free(in), free(a), free(bdir), free(sub), free(out);
    test_rmtree(dir);
    free(dir);
}

/* ~2 MB of random text: the fractions hold; with test 0 there is no test split. */
static void test_prep_fractions_and_no_test(void) {
    char *dir = test_tmpdir("prepfrac");
    unsigned char *big = make_file(dir, "big.txt", 2000000, 21, 0);
    char *path = join(dir, "big.txt"), *out = join(dir, "out"), *out2 = join(dir, "out2");
    prep_input in[] = {{"big", path}};
    prep_opts o;
    quiet_opts(&o, out, in, 1);
    o.block_bytes = 1024;
    o.seed = 5;
    tdm_err e = {0};
    CHECK(prep_run(&o, &e) == 0, "%s", e.msg);
    char *yaml = join(out, "dataset.yaml");
    dataset ds;
    CHECK(dataset_load(&ds, yaml, &e) == 0, "%s", e.msg);
    double total = 2000001.0;
    double ft = (double)dataset_tokens(&ds, 0, SPLIT_TRAIN) / total;
    double fv = (double)dataset_tokens(&ds, 0, SPLIT_VAL) / total;
    double fe = (double)dataset_tokens(&ds, 0, SPLIT_TEST) / total;
    unsigned char *stream = NULL;
    size_t sl = 0;
    append(&stream, &sl, big, 2000000);
    int k = check_partition(&ds, 0, stream, sl, 1024, 5, o.split);
    dataset_free(&ds);
    CHECK(k == 1954, "blocks %d", k);
    CHECK(ft > 0.85 && ft < 0.95, "train fraction %.4f not within 0.9 +- 0.05", ft);
    CHECK(fv > 0.03 && fv < 0.07 && fe > 0.03 && fe < 0.07, "val %.4f test %.4f", fv, fe);
    CHECK(ft + fv + fe > 0.999999 && ft + fv + fe < 1.000001, "splits lose bytes");

    /* test 0: no test shards, no test key, and train+val is the whole stream */
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
    uint64_t tr = dataset_tokens(&ds, 0, SPLIT_TRAIN), va = dataset_tokens(&ds, 0, SPLIT_VAL);
    size_t ntest = ds.domains[0].split[SPLIT_TEST].n_shards;
    k = check_partition(&ds, 0, stream, sl, 1024, 5, o.split);
    dataset_free(&ds);
    CHECK(ntest == 0 && tr + va == 2000001, "test shards %zu, train+val %llu", ntest,
          (unsigned long long)(tr + va));
    CHECK(k == 1954, "blocks %d", k);
    CHECK((double)tr / 2000001.0 > 0.75 && (double)tr / 2000001.0 < 0.85, "train %llu",
          (unsigned long long)tr);
    char *stale = join(out2, "big/test_000.bin");
    CHECK(!exists(stale), "a test shard was written");
    free(stale), free(stream), free(big), free(path), free(out), free(out2), free(yaml);
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

/* Same inputs and options, same bytes; another seed, another assignment. */
static void test_prep_deterministic_and_seeded(void) {
    char *dir = test_tmpdir("prepdet");
    char *in = join(dir, "in");
    CHECK(mkdir(in, 0777) == 0, "mkdir");
    free(make_file(in, "one.txt", 90000, 31, 0));
    free(make_file(in, "two.txt", 50000, 32, 1));
    char *outs[3] = {join(dir, "o1"), join(dir, "o2"), join(dir, "o3")};
    prep_input inputs[] = {{"web", in}, {"code", in}};
    prep_opts o;
    tdm_err e = {0};
    /* the same files in two domains are refused (below); one domain here */
    for (int i = 0; i < 3; i++) {
        quiet_opts(&o, outs[i], inputs, 1);
        o.block_bytes = 2048;
        o.shard_tokens = 50000;
        o.seed = i == 2 ? 8 : 7;
        CHECK(prep_run(&o, &e) == 0, "run %d: %s", i, e.msg);
    }
    char *l1 = NULL, *l2 = NULL;
    size_t n1 = 0, n2 = 0;
    list_files(outs[0], "", &l1, &n1);
    list_files(outs[1], "", &l2, &n2);
    CHECK(l1 && l2 && n1 == n2 && !strcmp(l1, l2), "file lists differ:\n%s---\n%s", l1, l2);
    CHECK(strstr(l1, "web/train_000.bin\nweb/train_001.bin\nweb/train_002.bin\n") &&
              strstr(l1, "web/val_000.bin") && strstr(l1, "dataset.yaml"),
          "files:\n%s", l1);
    int same = 1;
    for (char *p = l1, *nl; same && (nl = strchr(p, '\n')); p = nl + 1) {
        *nl = '\0';
        char *fa = join(outs[0], p), *fb = join(outs[1], p);
        size_t la, lb;
        unsigned char *a = read_all(fa, &la), *b = read_all(fb, &lb);
        if (!a || !b || la != lb || memcmp(a, b, la)) {
            fprintf(stderr, "  %s differs\n", p);
            same = 0;
        }
        free(a), free(b), free(fa), free(fb);
    }
    free(l1), free(l2);
    CHECK(same, "two runs with the same inputs wrote different bytes");
    /* the same run again over its own output: it overwrites, nothing is stale */
    quiet_opts(&o, outs[0], inputs, 1);
    o.block_bytes = 2048;
    o.shard_tokens = 50000;
    o.seed = 7;
    CHECK(prep_run(&o, &e) == 0, "rerun into the same --out: %s", e.msg);

    /* seed 8: the hash assigns differently, and the val shard holds other text */
    int differ = 0;
    for (uint64_t k = 0; k < 70; k++)
        differ += prep_block_split(7, 0, k, o.split) != prep_block_split(8, 0, k, o.split);
    CHECK(differ > 0, "seeds 7 and 8 assign all 70 blocks alike");
    char *v1 = join(outs[0], "web/val_000.bin"), *v3 = join(outs[2], "web/val_000.bin");
    size_t la, lb;
    unsigned char *a = read_all(v1, &la), *b = read_all(v3, &lb);
    int val_same = a && b && la == lb && !memcmp(a, b, la);
    free(a), free(b), free(v1), free(v3);
    CHECK(!val_same, "seed 8 gave the same val shard as seed 7");
    /* the domain index is a coordinate too */
    differ = 0;
    for (uint64_t k = 0; k < 70; k++)
        differ += prep_block_split(7, 0, k, o.split) != prep_block_split(7, 1, k, o.split);
    CHECK(differ > 0, "domains 0 and 1 assign all 70 blocks alike");
    for (int i = 0; i < 3; i++) free(outs[i]);
    free(in);
    test_rmtree(dir);
    free(dir);
}

/* A small domain: the hash gives val (and test) no block, so the nearest blocks move. */
static void test_prep_small_domain(void) {
    char *dir = test_tmpdir("prepsmall");
    /* three blocks of 100 with distinct contents: 100 'a', 100 'b', 99 'c' + '\n' */
    char text[300];
    memset(text, 'a', 100), memset(text + 100, 'b', 100), memset(text + 200, 'c', 99);
    char *path = join(dir, "t.txt");
    CHECK(write_bytes(path, text, 299) == 0, "write");
    const double f[3] = {0.9, 0.05, 0.05};
    /* a seed where the hash alone puts all three blocks in train */
    uint64_t seed = 0;
    for (;; seed++) {
        int all = 1;
        for (uint64_t k = 0; k < 3; k++) all &= prep_block_split(seed, 0, k, f) == SPLIT_TRAIN;
        if (all) break;
    }
    /* the rule: val takes the train block with u nearest [0.9, 0.95), then test the
     * remaining one nearest [0.95, 1) — both from above, so the largest u */
    double u[3];
    for (int k = 0; k < 3; k++) {
        rng_stream r;
        rng_stream_init(&r, seed, PREP_RNG_PURPOSE, 0, (uint32_t)k, 0);
        u[k] = rng_uniform(&r);
    }
    int kv = 0;
    for (int k = 1; k < 3; k++)
        if (u[k] > u[kv]) kv = k;
    int kt = -1;
    for (int k = 0; k < 3; k++)
        if (k != kv && (kt < 0 || u[k] > u[kt])) kt = k;
    char *out = join(dir, "out");
    prep_input in[] = {{"tiny", path}};
    prep_opts o;
    quiet_opts(&o, out, in, 1);
    o.block_bytes = 100;
    o.seed = seed;
    char *rep_path = join(dir, "rep.txt");
    o.report = fopen(rep_path, "w");
    tdm_err e = {0};
    int rc = prep_run(&o, &e);
    fclose(o.report);
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
    int ok = lv >= 100 && lt >= 100 && ltr >= 100 && v[0] == want[kv] && t[0] == want[kt] &&
             lv + lt + ltr == 300;
    int kr = 3 - kv - kt;
    ok = ok && tr[0] == want[kr];
    free(v), free(t), free(tr);
    CHECK(ok, "val got %zu bytes, test %zu, train %zu; expected blocks %d/%d/%d", lv, lt, ltr, kv,
          kt, kr);
    size_t rl;
    char *rep = (char *)read_all(rep_path, &rl);
    CHECK(rep, "report");
    rep = realloc(rep, rl + 1);
    rep[rl] = '\0';
    char says[96];
    snprintf(says, sizeof says, "the hash gave val no block, so block %d moved there from train",
             kv);
    int rep_ok = strstr(rep, says) != NULL;
    free(rep);
    CHECK(rep_ok, "report does not tell of the move: %s", says);

    /* two blocks cannot feed three splits: an error naming the domain and the bytes */
    o.block_bytes = 150;
    o.report = NULL;
    char *out2 = join(dir, "out2");
    o.out = out2;
    rc = prep_run(&o, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "domain 'tiny'") &&
              strstr(e.msg, "needs at least 301 bytes") &&
              strstr(e.msg, "--block-bytes to 149 or less"),
          "rc %d: %s", rc, e.msg);
    CHECK(!exists(out2), "a refused run created %s", out2);
    /* ... but two splits can: test 0 */
    o.split[0] = 0.9, o.split[1] = 0.1, o.split[2] = 0;
    CHECK(prep_run(&o, &e) == 0, "two blocks, two splits: %s", e.msg);
    free(path), free(out), free(out2), free(yaml), free(rep_path);
    test_rmtree(dir);
    free(dir);
}

/* ---- rejections ------------------------------------------------------------------- */

typedef struct {
    const char *what;
    prep_input in[3];
    int n;
    double split[3];
    uint64_t block, shard;
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
    free(make_file(".", "blank.txt", 0, 43, 0));
    free(make_file(".", "outfile", 10, 44, 0));
    CHECK(link("in/a.txt", "hard.txt") == 0, "link");
    CHECK(mkfifo("fifo", 0666) == 0, "mkfifo");
    reject_case cases[] = {
        {"missing path", {{"web", "in/nope.txt"}}, 1, {0}, 0, 0, NULL,
         {"domain 'web'", "in/nope.txt", "No such file"}},
        {"bad name", {{"we b", "in"}}, 1, {0}, 0, 0, NULL, {"'we b'", "[A-Za-z0-9_.-]", ""}},
        {"slash name", {{"a/b", "in"}}, 1, {0}, 0, 0, NULL, {"'a/b'", "", ""}},
        {"dot-dot name", {{"..", "in"}}, 1, {0}, 0, 0, NULL, {"'..'", "not . or ..", ""}},
        {"case clash", {{"web", "in/a.txt"}, {"Web", "in/sub"}}, 2, {0}, 0, 0, NULL,
         {"'web' and 'Web'", "only in case", ""}},
        {"same file twice in a domain", {{"web", "in"}, {"web", "in/a.txt"}}, 2, {0}, 0, 0, NULL,
         {"domain 'web'", "in/a.txt is given twice", ""}},
        {"same file in two domains", {{"web", "in/sub"}, {"code", "in/sub/b.txt"}}, 2, {0}, 0, 0,
         NULL, {"in/sub/b.txt (domain 'web')", "(domain 'code') are the same file", ""}},
        {"hard link", {{"web", "in/a.txt"}, {"code", "hard.txt"}}, 2, {0}, 0, 0, NULL,
         {"hard.txt", "in/a.txt", "same file"}},
        {"sum not 1", {{"web", "in"}}, 1, {0.9, 0.05, 0.1}, 0, 0, NULL,
         {"0.9,0.05,0.1", "sum to 1.05", "not 1"}},
        {"val 0", {{"web", "in"}}, 1, {1, 0, 0}, 0, 0, NULL, {"train and val", "> 0", ""}},
        {"negative", {{"web", "in"}}, 1, {1.1, 0.1, -0.2}, 0, 0, NULL,
         {"train = 1.1", "[0, 1]", ""}},
        {"block too large", {{"web", "in"}}, 1, {0}, 1ull << 41, 0, NULL,
         {"block bytes 2199023255552 is outside 1..", "--block-bytes", ""}},
        {"shard tokens", {{"web", "in"}}, 1, {0}, 0, 3000000000u, NULL,
         {"shard tokens 3000000000", "--shard-tokens", ""}},
        {"no text", {{"web", "blank.txt"}, {"web", "empty"}}, 2, {0}, 0, 0, NULL,
         {"domain 'web' has no text", "1 file, 1 empty", ""}},
        {"fifo", {{"web", "fifo"}}, 1, {0}, 0, 0, NULL,
         {"domain 'web'", "fifo is neither a regular file nor a directory", ""}},
        {"out inside input", {{"web", "in"}}, 1, {0}, 0, 0, "in/sub/new/out",
         {"is inside input directory in of domain 'web'", "outside the inputs", ""}},
        {"out is a file", {{"web", "in"}}, 1, {0}, 0, 0, "outfile",
         {"output outfile", "not a directory", ""}},
        {"no inputs", {{NULL, NULL}}, 0, {0}, 0, 0, NULL, {"--domain NAME=PATH", "", ""}},
    };
    size_t nc = sizeof cases / sizeof *cases;
    for (size_t i = 0; i < nc; i++) {
        reject_case *c = &cases[i];
        prep_opts o;
        quiet_opts(&o, c->out ? c->out : "out", c->in, c->n);
        if (c->split[0] || c->split[1] || c->split[2]) memcpy(o.split, c->split, sizeof o.split);
        if (c->shard) o.shard_tokens = c->shard;
        if (c->block) o.block_bytes = c->block;
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
    /* block bytes 0 (the CLI refuses it before, see test_cli_prep) */
    prep_input one[] = {{"web", "in"}};
    prep_opts o;
    quiet_opts(&o, "out", one, 1);
    o.block_bytes = 0;
    tdm_err e = {0};
    CHECK(prep_run(&o, &e) == ERR_USAGE && strstr(e.msg, "block bytes 0 is outside"), "%s",
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
    o.block_bytes = 512;
    o.shard_tokens = 1000;
    CHECK(prep_run(&o, &e) == 0, "first run: %s", e.msg);
    CHECK(exists("out/web/train_005.bin"), "expected at least 6 train shards");
    size_t yl0, yl1;
    unsigned char *y0 = read_all("out/dataset.yaml", &yl0);
    o.shard_tokens = 100000;
    int rc = prep_run(&o, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "out/web/train_001.bin and ") &&
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

/* Unreadable file and directory. Permission bits do not stop root, so as root the check
 * runs in a child that drops to nobody; if it cannot, the case says so and passes. */
static void test_prep_unreadable(void) {
    char *dir = test_tmpdir("prepperm");
    CHECK(chmod(dir, 0755) == 0, "chmod");
    char *in = join(dir, "in"), *locked = join(dir, "in/locked"), *out = join(dir, "out");
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
            tdm_err e = {0};
            int rc = prep_run(&o, &e);
            if (write(fds[1], &rc, sizeof rc) != (ssize_t)sizeof rc ||
                write(fds[1], e.msg, sizeof e.msg) != (ssize_t)sizeof e.msg)
                _exit(3);
            _exit(0);
        }
        close(fds[1]);
        int rc = -1, status = 0;
        tdm_err got = {0};
        char *msg = got.msg;
        ssize_t r1 = read(fds[0], &rc, sizeof rc);
        ssize_t r2 = r1 == (ssize_t)sizeof rc ? read(fds[0], msg, sizeof got.msg) : 0;
        close(fds[0]);
        waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
            printf("  (cannot run as an unprivileged user here: unreadable-path checks "
                   "not run)\n");
            break;
        }
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && r2 == (ssize_t)sizeof got.msg,
              "child failed (status %d)", status);
        msg[sizeof got.msg - 1] = '\0';
        if (round == 0)
            CHECK(rc == ERR_USAGE && strstr(msg, "domain 'web': cannot read ") &&
                      strstr(msg, "secret.txt") &&
                      strstr(msg, "make it readable or leave it out") &&
                      strstr(msg, "Permission denied"),
                  "unreadable file: rc %d: %s", rc, msg);
        else
            CHECK(rc == ERR_USAGE && strstr(msg, "cannot read directory ") &&
                      strstr(msg, "in/locked") && strstr(msg, "Permission denied"),
                  "unreadable directory: rc %d: %s", rc, msg);
        CHECK(!exists(out), "a refused run wrote output");
    }
    chmod(locked, 0755);
    free(in), free(locked), free(out), free(secret), free(okp);
    test_rmtree(dir);
    free(dir);
}

/* Progress lines for a domain larger than progress_bytes, one per mark passed. */
static void test_prep_progress(void) {
    char *dir = test_tmpdir("prepprog");
    free(make_file(dir, "big.txt", 300000, 61, 0));
    char *path = join(dir, "big.txt"), *out = join(dir, "out"), *pp = join(dir, "progress.txt");
    prep_input in[] = {{"big", path}};
    prep_opts o;
    quiet_opts(&o, out, in, 1);
    o.progress = fopen(pp, "w");
    o.progress_bytes = 4096;
    tdm_err e = {0};
    int rc = prep_run(&o, &e);
    fclose(o.progress);
    CHECK(rc == 0, "%s", e.msg);
    size_t len;
    char *text = (char *)read_all(pp, &len);
    CHECK(text, "progress file");
    int lines = 0, good = 1;
    for (char *p = text; p < text + len;) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        if (!nl) break;
        *nl = '\0';
        lines++;
        good &= !strncmp(p, "prep: big: ", 11) && strstr(p, " of 300001 bytes (") &&
                strstr(p, "tokens so far") && strstr(p, "; train ");
        p = nl + 1;
    }
    free(text);
    CHECK(lines == 300000 / 4096 && good, "%d progress lines (want %d), well formed %d", lines,
          300000 / 4096, good);
    free(path), free(out), free(pp);
    test_rmtree(dir);
    free(dir);
}

/* ---- CLI -------------------------------------------------------------------------- */

static void test_cli_prep(void) {
    char *dir = test_tmpdir("prepcli");
    char *in = join(dir, "in"), *out = join(dir, "out");
    CHECK(mkdir(in, 0777) == 0, "mkdir");
    free(make_file(in, "a.txt", 30000, 71, 0));
    free(make_file(dir, "b.txt", 20000, 72, 0));
    char *b = join(dir, "b.txt");
    char dom_a[4200], dom_b[4200];
    snprintf(dom_a, sizeof dom_a, "web=%s", in);
    snprintf(dom_b, sizeof dom_b, "--domain=code=%s", b);
    char *ok[] = {"prep", "--domain", dom_a, dom_b, "--out", out, "--split", "0.8,0.2",
                  "--block-bytes", "1Ki", "--shard-tokens", "10k", "--seed", "9"};
    CHECK(cmd_prep(14, ok) == 0, "valid arguments refused");
    char *yaml = join(out, "dataset.yaml");
    dataset ds;
    tdm_err e = {0};
    CHECK(dataset_load(&ds, yaml, &e) == 0, "%s", e.msg);
    const double f[3] = {0.8, 0.2, 0};
    unsigned char *stream = NULL;
    size_t sl = 0;
    size_t al;
    char *pa = join(in, "a.txt");
    unsigned char *abytes = read_all(pa, &al);
    append(&stream, &sl, abytes, al);
    int k = check_partition(&ds, 0, stream, sl, 1024, 9, f);
    size_t nsh;
    const shard *sh = dataset_shards(&ds, 0, SPLIT_TRAIN, &nsh);
    int good = ds.n_domains == 2 && !strcmp(ds.domains[1].name, "code") &&
               ds.domains[0].split[SPLIT_TEST].n_shards == 0 && nsh >= 2 && sh[0].n == 10000 &&
               dataset_tokens(&ds, 1, SPLIT_TRAIN) + dataset_tokens(&ds, 1, SPLIT_VAL) == 20001;
    dataset_free(&ds);
    free(stream), free(abytes), free(pa);
    CHECK(k == 30, "blocks %d", k);
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
    char *bad8[] = {"prep", "--domain", dom_a, "--out", out2, "--block-bytes", "0"};
    char *bad9[] = {"prep", "--domain", dom_a, "--out", out2, "--shard-tokens", "3G"};
    char *bad10[] = {"prep", "--domain", dom_a, "--out", out2, "--frobnicate", "1"};
    char *bad11[] = {"prep", "--domain", dom_a, "--out", out2, "stray"};
    char *bad12[] = {"prep", "--domain", "web=/nonexistent/tandem-prep", "--out", out2};
    char *bad13[] = {"prep", "--domain", dom_a, "--out", out2, "--seed", "-1"};
    char *bad14[] = {"prep", "--domain", dom_a, "--out"};
    char **bads[] = {bad1, bad2, bad3, bad4, bad5, bad6, bad7, bad8, bad9, bad10, bad11, bad12,
                     bad13, bad14};
    int argcs[] = {3, 3, 5, 5, 7, 7, 7, 7, 7, 7, 6, 5, 7, 4};
    for (int i = 0; i < 14; i++) CHECK(cmd_prep(argcs[i], bads[i]) == 2, "bad case %d", i + 1);
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
    free(in), free(out), free(out2), free(b), free(yaml);
    test_rmtree(dir);
    free(dir);
}

int main(void) {
    RUN(test_prep_partitions_the_stream);
    RUN(test_prep_fractions_and_no_test);
    RUN(test_prep_deterministic_and_seeded);
    RUN(test_prep_small_domain);
    RUN(test_prep_rejections);
    RUN(test_prep_unreadable);
    RUN(test_prep_progress);
    RUN(test_cli_prep);
    return test_summary("test_prep");
}
