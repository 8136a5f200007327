/* test_parquet.c — the Parquet reader (data/parquet.h) against files written by two
 * independent writers (tests/parquet/gen.mjs: parquetjs-lite and arrow-rs through
 * parquet-wasm; every codec we read, PLAIN and dictionary, data pages v1 and v2, several
 * row groups, nulls, an empty string, multi-byte UTF-8), what it refuses (LZ4, BROTLI, a
 * nested column, a missing or non-string column), thousands of damaged files (footers and
 * pages flipped, cut), and `tandem prep` writing the same shards from a .parquet file as
 * from a .jsonl of the same texts. Without node (tests/parquet/setup.sh could not install
 * it) the writer-based checks say SKIPPED and count as neither pass nor fail. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

#include "data/parquet.h"
#include "data/thrift.h"
#include "tests/parquet_seeds.h"
#include "tests/test.h"
#include "util/json_tree.h"

static char g_dir[4096]; /* the generated files; "" when node is not there */
static char **g_want;    /* the non-null, non-empty texts, in row order */
static size_t g_nwant, g_nulls, g_empty;

static int read_all_file(const char *path, uint8_t **data, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap = cap ? 2 * cap : 65536);
            if (!nb) break;
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        if (!got) break;
        len += got;
    }
    fclose(f);
    *data = buf, *n = len;
    return buf ? 0 : -1;
}

/* ------------------------------------------------------------------ a collecting sink */

typedef struct collect {
    char **v;
    size_t n, cap, nulls, empty;
    uint64_t last_row;
    int out_of_order;
} collect;

static int on_value(void *ctx, const char *text, size_t n, uint64_t row, tdm_err *e) {
    (void)e;
    collect *c = ctx;
    if (c->n + c->nulls + c->empty && row <= c->last_row) c->out_of_order = 1;
    c->last_row = row;
    if (n == 0) {
        c->empty++;
        return 0;
    }
    if (c->n == c->cap) {
        char **nv = realloc(c->v, (c->cap = c->cap ? 2 * c->cap : 256) * sizeof *nv);
        if (!nv) return err_set(e, ERR_INTERNAL, "out of memory");
        c->v = nv;
    }
    c->v[c->n] = strndup(text, n);
    c->n++;
    return 0;
}

static void on_null(void *ctx, uint64_t row) {
    collect *c = ctx;
    if (c->n + c->nulls + c->empty && row <= c->last_row) c->out_of_order = 1;
    c->last_row = row;
    c->nulls++;
}

static void collect_free(collect *c) {
    for (size_t i = 0; i < c->n; i++) free(c->v[i]);
    free(c->v);
    memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------------ the fixtures */

/* Installs the writers and generates the files (tests/parquet/); 0 when they are there. */
static int make_fixtures(void) {
    char tmpl[] = "/tmp/tandem-parquet-XXXXXX";
    if (!mkdtemp(tmpl)) return -1;
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cd '%s' && bash tests/parquet/setup.sh >'%s/setup.log' 2>&1 && "
             "node tests/parquet/gen.mjs '%s' build/parquet-writers/node_modules >'%s/gen.log' 2>&1",
             getenv("TANDEM_ROOT") ? getenv("TANDEM_ROOT") : ".", tmpl, tmpl, tmpl);
    if (system(cmd) != 0) {
        printf("  (no fixtures: %s/setup.log and gen.log say why)\n", tmpl);
        return -1;
    }
    snprintf(g_dir, sizeof g_dir, "%s", tmpl);
    char path[4200];
    snprintf(path, sizeof path, "%s/expected.jsonl", g_dir);
    uint8_t *data;
    size_t n;
    if (read_all_file(path, &data, &n)) return -1;
    for (char *line = (char *)data, *end = (char *)data + n; line < end;) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t len = nl ? (size_t)(nl - line) : (size_t)(end - line);
        if (len) {
            const tjson *root;
            char err[200];
            tjson_doc *d = tjson_parse(line, len, &root, err, sizeof err);
            const tjson *t = d ? tjson_get(root, "text") : NULL;
            if (t && t->type == TJ_STR) {
                g_want = realloc(g_want, (g_nwant + 1) * sizeof *g_want);
                g_want[g_nwant++] = strndup(t->u.s, t->n);
            }
            tjson_free(d);
        }
        line += len + 1;
    }
    free(data);
    snprintf(path, sizeof path, "%s/expected.json", g_dir);
    if (read_all_file(path, &data, &n)) return -1;
    const tjson *root;
    char err[200];
    tjson_doc *d = tjson_parse((const char *)data, n, &root, err, sizeof err);
    const tjson *nu = d ? tjson_get(root, "nulls") : NULL, *em = d ? tjson_get(root, "empty") : NULL;
    g_nulls = nu ? (size_t)nu->u.num : 0, g_empty = em ? (size_t)em->u.num : 0;
    tjson_free(d);
    free(data);
    return 0;
}

/* parquet_read of n bytes' column into c; its return, the reason in why. */
static int read_bytes(const uint8_t *data, size_t n, const char *column, collect *c, char *why, size_t cap) {
    parquet_sink s = {c, on_value, on_null};
    tdm_err e = {0};
    return parquet_read(data, n, column, &s, why, cap, &e);
}

/* parquet_read of the fixture `file`'s column into c; its return (-1 when the file cannot
 * be read), the reason in why. */
static int read_fixture(const char *file, const char *column, collect *c, char *why, size_t cap) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", g_dir, file);
    uint8_t *data;
    size_t n;
    if (read_all_file(path, &data, &n)) return snprintf(why, cap, "cannot read %.200s", file), -1;
    int rc = read_bytes(data, n, column, c, why, cap);
    free(data);
    return rc;
}

/* ------------------------------------------------------------------ the tests */

/* Every file of both writers: the texts in row order, the nulls and the empty string. */
static void test_every_writer(void) {
    if (!g_dir[0]) {
        printf("SKIPPED test_every_writer (node and the writers could not be installed)\n");
        return;
    }
    DIR *dir = opendir(g_dir);
    CHECK(dir != NULL, "open %s", g_dir);
    struct dirent *de;
    int files = 0, lite = 0, arrow = 0, dict = 0, zstd = 0, v2 = 0;
    while (dir && (de = readdir(dir))) {
        const char *nm = de->d_name;
        size_t l = strlen(nm);
        if (l < 8 || strcmp(nm + l - 8, ".parquet") || !strncmp(nm, "unsupported-", 12) || !strncmp(nm, "odd-", 4))
            continue; /* other rows: test_prep_odd_files */
        collect c = {0};
        char why[256] = "";
        int rc = read_fixture(nm, "text", &c, why, sizeof why);
        int same = rc == 0 && c.n == g_nwant && c.nulls == g_nulls && c.empty == g_empty && !c.out_of_order;
        for (size_t i = 0; same && i < c.n; i++) same = !strcmp(c.v[i], g_want[i]);
        CHECK(same, "%s: rc %d (%s), %zu texts (want %zu), %zu nulls (want %zu), %zu empty", nm, rc, why, c.n,
              g_nwant, c.nulls, g_nulls, c.empty);
        files++;
        lite += !strncmp(nm, "lite-", 5), arrow += !strncmp(nm, "arrow-", 6);
        dict += strstr(nm, "-dict-") != NULL, zstd += strstr(nm, "zstd") != NULL, v2 += strstr(nm, "-v2") != NULL;
        collect_free(&c);
    }
    if (dir) closedir(dir);
    CHECK(files >= 22 && lite >= 6 && arrow >= 16 && dict >= 8 && zstd >= 4 && v2 >= 11,
          "files read: %d (%d parquetjs-lite, %d arrow-rs; %d dictionary, %d zstd, %d page v2)", files, lite, arrow,
          dict, zstd, v2);
    printf("  %d files (%d parquetjs-lite, %d arrow-rs; %d dictionary-encoded, %d zstd, %d with data page v2): "
           "%zu texts, %zu nulls and %zu empty each, as written\n",
           files, lite, arrow, dict, zstd, v2, g_nwant, g_nulls, g_empty);
}

/* What is refused, with the reason named. */
static void test_refusals(void) {
    if (!g_dir[0]) {
        printf("SKIPPED test_refusals (no fixtures)\n");
        return;
    }
    struct {
        const char *file, *column;
        int rc;
        const char *want;
    } cases[] = {
        {"unsupported-lz4.parquet", "text", PARQUET_UNSUPPORTED, "codec LZ4_RAW"},
        {"unsupported-brotli.parquet", "text", PARQUET_UNSUPPORTED, "codec BROTLI"},
        {"unsupported-nested.parquet", "text", PARQUET_UNSUPPORTED, "a group (nested)"},
        {"arrow-zstd-dict-v1.parquet", "id", PARQUET_NO_COLUMN, "not a string column"},
        {"arrow-zstd-dict-v1.parquet", "body", PARQUET_NO_COLUMN, "the columns are: id, text"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        collect c = {0};
        char why[256] = "";
        int rc = read_fixture(cases[i].file, cases[i].column, &c, why, sizeof why);
        CHECK(rc == cases[i].rc && strstr(why, cases[i].want), "%s column %s: rc %d: %s", cases[i].file,
              cases[i].column, rc, why);
        collect_free(&c);
    }
}

/* Bytes that are not a Parquet file, each refused as corrupt. */
static void test_not_parquet(void) {
    static const uint8_t footer_too_long[] = "PAR1\x00\x00\xff\xff\xff\x7fPAR1";
    static const uint8_t footer_garbage[] = "PAR1\x19\x2c\x1c\x15\x00\x05\x00\x00\x00PAR1";
    struct {
        const uint8_t *data;
        size_t n;
        const char *want;
    } cases[] = {
        {(const uint8_t *)"", 0, "not a Parquet file"},
        {(const uint8_t *)"PAR1PAR1", 8, "not a Parquet file"},
        {(const uint8_t *)"just some text, not parquet", 27, "not a Parquet file"},
        {footer_too_long, sizeof footer_too_long - 1, "footer's length"},
        {footer_garbage, sizeof footer_garbage - 1, "footer does not read"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        collect c = {0};
        char why[256] = "";
        int rc = read_bytes(cases[i].data, cases[i].n, "text", &c, why, sizeof why);
        CHECK(rc == PARQUET_CORRUPT && strstr(why, cases[i].want), "case %zu: rc %d: %s", i, rc, why);
        collect_free(&c);
    }
}

/* Four small files embedded in the tests (tests/parquet_seeds.h: written by arrow-rs
 * through parquet-wasm, 3 row groups of 4 rows; dictionary, PLAIN and DELTA_BYTE_ARRAY;
 * snappy, gzip, zstd, uncompressed; pages v1 and v2), read without node: 8 texts (one
 * empty) and 2 nulls each, the same texts in every one. */
static void test_embedded_files(void) {
    static const char *const want[] = {"alpha", "beta \xc3\xa9", "", "gamma \xe4\xb8\xad\xe6\x96\x87", "alpha",
                                       "delta \xf0\x9f\x8e\x89", "alpha", "eps"};
    for (size_t f = 0; f < sizeof PQSEEDS / sizeof *PQSEEDS; f++) {
        collect c = {0};
        char why[256] = "";
        int rc = read_bytes(PQSEEDS[f].p, PQSEEDS[f].n, "text", &c, why, sizeof why);
        size_t k = 0;
        int same = rc == 0 && c.n == 7 && c.empty == 1 && c.nulls == 2 && !c.out_of_order;
        for (size_t i = 0; same && i < sizeof want / sizeof *want; i++)
            if (want[i][0]) same = !strcmp(c.v[k++], want[i]);
        CHECK(same, "%s: rc %d (%s), %zu texts, %zu empty, %zu nulls", PQSEEDS[f].name, rc, why, c.n, c.empty, c.nulls);
        collect_free(&c);
    }
}

/* The RLE / bit-packed decoder on hand-made runs: the Parquet spec's own example decodes,
 * and a hostile bit-packed header whose groups x width wraps around 2^64 (to 16 bytes,
 * which the page has) is refused instead of read past the page (it read 2 bytes a value
 * for as many values as asked; ASan saw the heap overflow). */
static void test_hybrid_runs(void) {
    uint32_t out[100];
    /* bit-packed, width 3, one group: 0..7 (the spec's example bytes), then an RLE run of
     * five 4s */
    static const uint8_t ok[] = {0x03, 0x88, 0xc6, 0xfa, 0x0a, 0x04};
    const char *bad = parquet_hybrid(ok, sizeof ok, 3, out, 13);
    int same = bad == NULL;
    for (uint32_t v = 0; same && v < 13; v++) same = out[v] == (v < 8 ? v : 4);
    CHECK(same, "the spec's example: %s", bad ? bad : "wrong values");
    /* groups = 2^60 + 1 at width 16: groups x 16 = 2^64 + 16 */
    uint8_t *p = malloc(9 + 16);
    uint64_t hdr = ((((uint64_t)1 << 60) + 1) << 1) | 1;
    size_t n = 0;
    while (hdr >= 0x80) p[n++] = (uint8_t)(hdr | 0x80), hdr >>= 7;
    p[n++] = (uint8_t)hdr;
    CHECK(n == 9, "the header takes %zu bytes", n);
    memset(p + n, 0, 16);
    bad = parquet_hybrid(p, n + 16, 16, out, 100);
    CHECK(bad && strstr(bad, "longer than the page"), "a wrapping bit-packed run: %s", bad ? bad : "read (past the page)");
    /* width 0 and groups past 2^61 (groups x 8 wraps): zeros, nothing read past the page */
    hdr = ((uint64_t)1 << 62) | 1, n = 0;
    while (hdr >= 0x80) p[n++] = (uint8_t)(hdr | 0x80), hdr >>= 7;
    p[n++] = (uint8_t)hdr;
    for (int i = 0; i < 10; i++) out[i] = 7;
    bad = parquet_hybrid(p, n, 0, out, 10);
    same = bad == NULL;
    for (int i = 0; same && i < 10; i++) same = out[i] == 0;
    CHECK(same, "width 0, a huge run: %s", bad ? bad : "values not 0");
    free(p);
}

/* Thrift maps and lists of bools: each element is a byte of its own in the compact
 * protocol. A map skip that consumed none looped over the declared count without moving
 * (a footer of many such maps took minutes per MiB), and read what follows as fields. */
static void test_thrift_bool_collections(void) {
    static const uint8_t map[] = {0x04, 0x11, 1, 2, 1, 1, 2, 2, 1, 2, 0x99};
    thrift_rd r;
    thrift_init(&r, map, sizeof map);
    thrift_skip(&r, THRIFT_MAP);
    CHECK(!r.bad && r.p == map + sizeof map - 1, "a map of 4 bool pairs: %s, %td bytes consumed",
          r.bad ? r.bad : "ok", r.p - map);
    static const uint8_t cut[] = {0x04, 0x11, 1, 2, 1, 1};
    thrift_init(&r, cut, sizeof cut);
    thrift_skip(&r, THRIFT_MAP);
    CHECK(r.bad != NULL, "a map of 4 bool pairs in 4 bytes was skipped whole");
    static const uint8_t list[] = {0x31, 1, 2, 1, 0x99}; /* 3 elements of type TRUE */
    thrift_init(&r, list, sizeof list);
    thrift_skip(&r, THRIFT_LIST);
    CHECK(!r.bad && r.p == list + 4, "a list of 3 bools: %s, %td bytes consumed", r.bad ? r.bad : "ok", r.p - list);
}

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* Damaged files: bytes flipped in the footer or anywhere, files cut short. Each read ends
 * cleanly — all rows, or a PARQUET_* code with a reason — never a crash (ASan watches). */
static void test_fuzz(void) {
    if (!g_dir[0]) {
        printf("SKIPPED test_fuzz (no fixtures)\n");
        return;
    }
    const char *files[] = {"arrow-zstd-dict-v2.parquet", "arrow-snappy-plain-v1.parquet", "lite-gzip-v2.parquet",
                           "lite-uncompressed-v1.parquet"};
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int refused = 0, read = 0, bad = 0;
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", g_dir, files[f]);
        uint8_t *orig;
        size_t n;
        CHECK(read_all_file(path, &orig, &n) == 0, "read %s", path);
        uint32_t flen = (uint32_t)orig[n - 8] | (uint32_t)orig[n - 7] << 8 | (uint32_t)orig[n - 6] << 16 |
                        (uint32_t)orig[n - 5] << 24;
        uint8_t *m = malloc(n);
        for (int it = 0; it < 1500; it++) {
            memcpy(m, orig, n);
            size_t len = n;
            int kind = (int)(rng_next(&seed) % 4);
            int flips = 1 + (int)(rng_next(&seed) % 4);
            for (int k = 0; k < flips; k++) {
                size_t at = kind < 2 ? n - 8 - flen + rng_next(&seed) % (flen + 8) /* the footer */
                                     : rng_next(&seed) % n;                          /* anywhere */
                if (kind == 1) m[at] = (uint8_t)rng_next(&seed); /* a random byte */
                else m[at] ^= (uint8_t)(1u << (rng_next(&seed) % 8));
            }
            if (kind == 3) len = 4 + rng_next(&seed) % (n - 4); /* cut short (and flipped) */
            collect c = {0};
            char why[256] = "";
            int rc = read_bytes(m, len, "text", &c, why, sizeof why);
            if (rc == 0) read++;
            else if ((rc == PARQUET_CORRUPT || rc == PARQUET_NO_COLUMN || rc == PARQUET_UNSUPPORTED) && why[0]) refused++;
            else bad++;
            collect_free(&c);
        }
        free(m);
        free(orig);
    }
    CHECK(bad == 0 && refused > 3000, "%d damaged files refused with a reason, %d read through, %d unclean", refused,
          read, bad);
    printf("  %d damaged files: %d refused with a reason, %d read through (a flip inside a text)\n", refused + read,
           refused, read);
}

/* tandem prep: the same shards from a .parquet file as from a .jsonl of its texts. */
static void test_prep_same_shards(void) {
    if (!g_dir[0]) {
        printf("SKIPPED test_prep_same_shards (no fixtures)\n");
        return;
    }
    const char *bin = getenv("TANDEM_BIN") ? getenv("TANDEM_BIN") : "./tandem";
    char cmd[20000];
    snprintf(cmd, sizeof cmd,
             "set -e; d='%s'; mkdir -p $d/pj $d/pp; cp $d/expected.jsonl $d/pj/docs.jsonl; "
             "cp $d/arrow-gzip-dict-v1.parquet $d/lite-snappy-v2.parquet $d/pp/; "
             "cat $d/expected.jsonl $d/expected.jsonl > $d/pj/docs.jsonl; "
             "'%s' prep --domain web=$d/pj --out $d/oj >$d/oj.log 2>&1; "
             "'%s' prep --domain web=$d/pp --out $d/op >$d/op.log 2>&1; "
             "for f in $d/oj/web/*.bin; do cmp $f $d/op/web/$(basename $f); done; "
             "grep -q 'left out: 2 empty, 22 null' $d/op.log",
             g_dir, bin, bin);
    int rc = system(cmd);
    CHECK(rc == 0, "prep from .parquet and from .jsonl: different shards or summary (see %s/op.log)", g_dir);
    /* a domain's own column: --text-field NAME=FIELD */
    snprintf(cmd, sizeof cmd,
             "set -e; d='%s'; mkdir -p $d/pn; cp $d/arrow-zstd-plain-v1.parquet $d/pn/; "
             "! '%s' prep --domain web=$d/pn --text-field web=id --out $d/on >$d/on.log 2>&1; "
             "grep -q 'column \"id\" is not a string column (INT32)' $d/on.log",
             g_dir, bin);
    CHECK(system(cmd) == 0, "--text-field web=id: not refused by name (see %s/on.log)", g_dir);
}

/* Odd files among good ones (tests/parquet/gen.mjs): a file of no rows is counted as an
 * empty file (it was counted neither as giving documents nor as left out); a text holding a
 * NUL character is left out as binary, as a plain file holding one (it was kept, the NUL a
 * token); a file of many long column names lists what fits, each name cut with "..." and
 * the rest counted (the list was cut silently at 64 bytes a name and 512 in all); an
 * unsupported codec or a nested column is counted as unsupported (it was "corrupt stream"). */
static void test_prep_odd_files(void) {
    if (!g_dir[0]) {
        printf("SKIPPED test_prep_odd_files (no fixtures)\n");
        return;
    }
    const char *bin = getenv("TANDEM_BIN") ? getenv("TANDEM_BIN") : "./tandem";
    char cmd[20000];
    snprintf(cmd, sizeof cmd,
             "set -e; d='%s'; mkdir -p $d/po; cp $d/odd-*.parquet $d/arrow-zstd-dict-v1.parquet $d/po/; "
             "'%s' prep --domain web=$d/po --out $d/oo >$d/oo.log 2>&1; "
             "grep -q '2 of 4 files gave documents; left out: 1 binary, 1 no text field, 2 empty, 11 null' $d/oo.log; "
             "grep -q 'odd-nul.parquet: row 2: a NUL character in the \"text\" column (binary, left out)' $d/oo.log; "
             "grep -q 'column_01_nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn\\.\\.\\., column_02' $d/oo.log; "
             "grep -q 'column_03_nnnnnnnnnn and 36 more); --text-field' $d/oo.log",
             g_dir, bin);
    CHECK(system(cmd) == 0, "odd Parquet files: counted or named wrongly (see %s/oo.log)", g_dir);
    /* sound files in a form prep does not read (codecs, a nested column) are counted as
     * unsupported, not as a "corrupt stream"; with no documents left, the hint names
     * Parquet beside text files, .jsonl and .json */
    snprintf(cmd, sizeof cmd,
             "set -e; d='%s'; mkdir -p $d/pu; cp $d/unsupported-*.parquet $d/pu/; "
             "! '%s' prep --domain web=$d/pu --out $d/ou >$d/ou.log 2>&1; "
             "grep -q '(left out: 3 unsupported)' $d/ou.log; ! grep -q 'corrupt' $d/ou.log; "
             "grep -q 'codec BROTLI is not supported' $d/ou.log; "
             "grep -q 'give it text files, or .jsonl, .json or .parquet files' $d/ou.log",
             g_dir, bin);
    CHECK(system(cmd) == 0, "unsupported Parquet files: counted or named wrongly (see %s/ou.log)", g_dir);
}

/* ------------------------------------------------------------------ hand-made files */

/* A Thrift compact-protocol writer, enough for a one-column file (field deltas < 16,
 * lists of < 15). */
typedef struct tw {
    uint8_t *p;
    size_t n, cap;
} tw;

static void tw_byte(tw *w, uint8_t b) {
    if (w->n == w->cap) w->p = realloc(w->p, w->cap = w->cap ? 2 * w->cap : 256);
    w->p[w->n++] = b;
}
static void tw_bytes(tw *w, const void *b, size_t n) {
    for (size_t i = 0; i < n; i++) tw_byte(w, ((const uint8_t *)b)[i]);
}
static void tw_varint(tw *w, uint64_t v) {
    for (; v >= 0x80; v >>= 7) tw_byte(w, (uint8_t)(v | 0x80));
    tw_byte(w, (uint8_t)v);
}
/* field `delta` after the last, compact type t (5 i32, 6 i64, 8 binary, 9 list, 12 struct) */
static void tw_field(tw *w, int delta, int t) { tw_byte(w, (uint8_t)(delta << 4 | t)); }
static void tw_int(tw *w, int delta, int t, int64_t v) {
    tw_field(w, delta, t);
    tw_varint(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}
static void tw_str(tw *w, int delta, const char *v) {
    tw_field(w, delta, 8);
    tw_varint(w, strlen(v));
    tw_bytes(w, v, strlen(v));
}

/* A Parquet file of one required string column "text", one row group, one v1 data page
 * (PLAIN, zstd) whose header says it decompresses to `usize` bytes and whose body is
 * body[0..bn), holding `values` values: *n bytes, malloc'd. */
static uint8_t *one_page_file(const uint8_t *body, size_t bn, int64_t usize, int values, size_t *n) {
    tw f = {0}, h = {0}, m = {0};
    tw_bytes(&f, "PAR1", 4);
    /* PageHeader: type DATA_PAGE, sizes, data_page_header {values, PLAIN, RLE, RLE} */
    tw_int(&h, 1, 5, 0);
    tw_int(&h, 1, 5, usize);
    tw_int(&h, 1, 5, (int64_t)bn);
    tw_field(&h, 2, 12);
    tw_int(&h, 1, 5, values);
    tw_int(&h, 1, 5, 0);
    tw_int(&h, 1, 5, 3);
    tw_int(&h, 1, 5, 3);
    tw_byte(&h, 0);
    tw_byte(&h, 0);
    int64_t chunk = (int64_t)(h.n + bn);
    tw_bytes(&f, h.p, h.n);
    tw_bytes(&f, body, bn);
    /* FileMetaData: version, schema [root (1 child), text: BYTE_ARRAY REQUIRED UTF8],
     * num_rows, row_groups [{columns [{file_offset, meta_data {BYTE_ARRAY, [PLAIN],
     * [text], ZSTD, values, sizes, data_page_offset 4}}], total_byte_size, num_rows}] */
    tw_int(&m, 1, 5, 1);
    tw_field(&m, 1, 9);
    tw_byte(&m, 2 << 4 | 12);
    tw_str(&m, 4, "schema");
    tw_int(&m, 1, 5, 1);
    tw_byte(&m, 0);
    tw_int(&m, 1, 5, 6);
    tw_int(&m, 2, 5, 0);
    tw_str(&m, 1, "text");
    tw_int(&m, 2, 5, 0);
    tw_byte(&m, 0);
    tw_int(&m, 1, 6, values);
    tw_field(&m, 1, 9);
    tw_byte(&m, 1 << 4 | 12);
    tw_field(&m, 1, 9);
    tw_byte(&m, 1 << 4 | 12);
    tw_int(&m, 2, 6, 4);
    tw_field(&m, 1, 12);
    tw_int(&m, 1, 5, 6);
    tw_field(&m, 1, 9);
    tw_byte(&m, 1 << 4 | 5);
    tw_varint(&m, 0);
    tw_field(&m, 1, 9);
    tw_byte(&m, 1 << 4 | 8);
    tw_varint(&m, 4);
    tw_bytes(&m, "text", 4);
    tw_int(&m, 1, 5, 6);
    tw_int(&m, 1, 6, values);
    tw_int(&m, 1, 6, usize);
    tw_int(&m, 1, 6, chunk);
    tw_int(&m, 2, 6, 4);
    tw_byte(&m, 0);
    tw_byte(&m, 0);
    tw_int(&m, 2, 6, usize);
    tw_int(&m, 1, 6, values);
    tw_byte(&m, 0);
    tw_byte(&m, 0);
    tw_bytes(&f, m.p, m.n);
    uint8_t len[4] = {(uint8_t)m.n, (uint8_t)(m.n >> 8), (uint8_t)(m.n >> 16), (uint8_t)(m.n >> 24)};
    tw_bytes(&f, len, 4);
    tw_bytes(&f, "PAR1", 4);
    free(h.p);
    free(m.p);
    *n = f.n;
    return f.p;
}

/* zstd of `zeros` zero bytes, streamed 1 MiB at a time: *n bytes, malloc'd. */
static uint8_t *zstd_zeros(size_t zeros, size_t *n) {
    ZSTD_CCtx *z = ZSTD_createCCtx();
    size_t cap = ZSTD_compressBound(1 << 20) + (zeros >> 10) + 4096, at = 0;
    uint8_t *out = malloc(cap), *zero = calloc(1, 1 << 20);
    ZSTD_CCtx_setPledgedSrcSize(z, zeros);
    for (size_t done = 0; done < zeros;) {
        size_t k = zeros - done < (1u << 20) ? zeros - done : (1u << 20);
        ZSTD_inBuffer in = {zero, k, 0};
        done += k;
        ZSTD_EndDirective end = done == zeros ? ZSTD_e_end : ZSTD_e_continue;
        size_t left;
        do {
            ZSTD_outBuffer o = {out + at, cap - at, 0};
            left = ZSTD_compressStream2(z, &o, &in, end);
            at += o.pos;
        } while (!ZSTD_isError(left) && (in.pos < in.size || (end == ZSTD_e_end && left)));
    }
    ZSTD_freeCCtx(z);
    free(zero);
    *n = at;
    return out;
}

/* A decompression bomb: a file of ~20 KB whose one page claims 512 MiB, zstd of zeros
 * (it does decompress to that: an honest frame). Refused before anything is allocated
 * for it, naming the ratio; the reader took the 512 MiB (with four pages of a GiB each,
 * ~4 GiB from a tiny file). The same hand-made file with a small honest page reads. */
static void test_decompression_bomb(void) {
    static const uint8_t plain[] = {5, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'};
    uint8_t zb[256];
    size_t zn = ZSTD_compress(zb, sizeof zb, plain, sizeof plain, 3), n;
    CHECK(!ZSTD_isError(zn), "zstd");
    uint8_t *f = one_page_file(zb, zn, sizeof plain, 1, &n);
    collect c = {0};
    char why[512] = "";
    int rc = read_bytes(f, n, "text", &c, why, sizeof why);
    CHECK(rc == 0 && c.n == 1 && !strcmp(c.v[0], "hello"), "the hand-made file: rc %d (%s), %zu texts", rc, why, c.n);
    collect_free(&c);
    free(f);
    size_t usize = (size_t)512 << 20, bn;
    uint8_t *bomb = zstd_zeros(usize, &bn);
    CHECK(bn < usize / PARQUET_MAX_RATIO, "the bomb is %zu bytes", bn);
    f = one_page_file(bomb, bn, (int64_t)usize, 1, &n);
    memset(&c, 0, sizeof c);
    rc = read_bytes(f, n, "text", &c, why, sizeof why);
    CHECK(rc == PARQUET_CORRUPT && strstr(why, "decompression bomb") && strstr(why, "536870912"),
          "a %zu-byte file claiming 512 MiB: rc %d (%s)", n, rc, why);
    collect_free(&c);
    free(f);
    free(bomb);
}

int main(void) {
    RUN(test_not_parquet);
    RUN(test_decompression_bomb);
    RUN(test_hybrid_runs);
    RUN(test_thrift_bool_collections);
    RUN(test_embedded_files);
    /* the writer-based cases need node: without it they are SKIPPED, never passed */
    if (make_fixtures() == 0) {
        RUN(test_every_writer);
        RUN(test_refusals);
        RUN(test_fuzz);
        RUN(test_prep_same_shards);
        RUN(test_prep_odd_files);
    } else {
        printf("SKIPPED test_every_writer test_refusals test_fuzz test_prep_same_shards test_prep_odd_files (node and the Parquet "
               "writers could not be installed: tests/parquet/setup.sh)\n");
    }
    for (size_t i = 0; i < g_nwant; i++) free(g_want[i]);
    free(g_want);
    if (g_dir[0]) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd)) {}
    }
    return test_summary("test_parquet");
}
