/* test_store.c — SHA-256 and the file:// store: atomic puts, create-only,
 * compare-and-swap, listing, deletion, key rules and error paths. */
#include <sys/stat.h>
#include <unistd.h>

#include "storage/digest_set.h"
#include "storage/sha256.h"
#include "storage/store.h"
#include "storage/url.h"
#include "tests/test.h"

/* The digest set against a plain list: 20000 digests of 5000 distinct values (each added
 * four times), members found at the index they were first added at, non-members not; and
 * digests that share 30 of their bytes (a hostile store's manifests could name such) spread
 * over the slots. */
static void test_digest_set(void) {
    digest_set s = {0};
    size_t added = 0;
    for (int round = 0; round < 4; round++)
        for (uint32_t v = 0; v < 5000; v++) {
            sha256_digest d;
            sha256(&v, sizeof v, &d);
            int r = digest_set_add(&s, &d);
            CHECK(r >= 0, "out of memory");
            added += (size_t)r;
            CHECK(r == (round == 0), "round %d, value %u: add said %d", round, v, r);
        }
    CHECK(added == 5000 && s.n == 5000, "%zu added, %zu members", added, s.n);
    for (uint32_t v = 0; v < 10000; v++) {
        sha256_digest d;
        sha256(&v, sizeof v, &d);
        size_t at = digest_set_find(&s, &d);
        CHECK(v < 5000 ? at == v : at == SIZE_MAX, "value %u found at %zu", v, at);
        CHECK(digest_set_has(&s, &d) == (v < 5000), "value %u", v);
    }
    digest_set_free(&s);
    CHECK(s.n == 0 && !digest_set_has(&s, &(sha256_digest){{0}}), "an emptied set");
    for (int i = 0; i < 3000; i++) {
        sha256_digest d = {{0}};
        d.b[31] = (uint8_t)i, d.b[30] = (uint8_t)(i >> 8);
        CHECK(digest_set_add(&s, &d) == 1, "digest %d not added", i);
    }
    CHECK(s.n == 3000, "%zu members", s.n);
    /* and they spread: the longest run of taken slots stays short (one run of 3000 with a
     * hash of part of the bytes) */
    size_t run = 0, longest = 0;
    for (size_t i = 0; i < 2 * s.nslot; i++) {
        run = s.slot[i & (s.nslot - 1)] ? run + 1 : 0;
        if (run > longest) longest = run;
    }
    CHECK(longest < 64, "a run of %zu taken slots of %zu", longest, s.nslot);
    digest_set_free(&s);
}

static void test_sha256_known_answers(void) {
    sha256_digest d;
    char hex[65];
    sha256("", 0, &d);
    sha256_hex(&d, hex);
    CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0,
          "empty: %s", hex);
    sha256("abc", 3, &d);
    sha256_hex(&d, hex);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0,
          "abc: %s", hex);
    sha256_digest back;
    CHECK(sha256_parse_hex(hex, &back) == 0 && sha256_equal(&back, &d), "hex round trip");
    CHECK(sha256_parse_hex("xyz", &back) == -1, "short hex rejected");
    hex[5] = 'g';
    CHECK(sha256_parse_hex(hex, &back) == -1, "non-hex rejected");
    /* incremental equals one-shot */
    sha256_ctx *c = sha256_begin();
    sha256_update(c, "a", 1);
    sha256_update(c, "bc", 2);
    sha256_digest d2;
    sha256_end(c, &d2);
    CHECK(sha256_equal(&d, &d2), "incremental");
}

static void test_key_rules(void) {
    const char *good[] = {"HEAD", "states/12.mp", "blobs/ab-cd_ef.0", "a/b/c"};
    const char *bad[] = {"", "/abs", "a//b", "a/", "../x", "a/./b", "a/../b", "sp ace", "é"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECK(store_key_valid(good[i]), "'%s' must be valid", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(!store_key_valid(bad[i]), "'%s' must be invalid", bad[i]);
}

static void test_put_get_overwrite_delete(void) {
    char *dir = test_tmpdir("store");
    char url[512];
    snprintf(url, sizeof url, "file://%s/run", dir);
    tdm_err e = {0};
    store *s = store_open(url, &e);
    CHECK(s, "open: %s", e.msg);
    CHECK(store_put(s, "states/1.mp", "hello", 5, STORE_OVERWRITE, &e) == 0, "%s", e.msg);
    void *data = NULL;
    size_t n = 0;
    CHECK(store_get(s, "states/1.mp", &data, &n, NULL, &e) == 0, "%s", e.msg);
    CHECK(n == 5 && memcmp(data, "hello", 5) == 0, "content");
    free(data);
    CHECK(store_put(s, "states/1.mp", "bye", 3, STORE_OVERWRITE, &e) == 0, "%s", e.msg);
    CHECK(store_get(s, "states/1.mp", &data, &n, NULL, &e) == 0 && n == 3, "overwritten");
    free(data);
    /* past STORE_OBJECT_MAX: never written (refused before a byte is read), and an object
     * grown past it is said, not read (a 1 TiB sparse file: "out of memory", exit 1) */
    CHECK(store_put(s, "states/2.mp", "x", (size_t)STORE_OBJECT_MAX + 1, STORE_OVERWRITE, &e) == ERR_STORE &&
              strstr(e.msg, "checkpoint.chunk_kib"),
          "a put past the bound: %s", e.msg);
    char big[700];
    snprintf(big, sizeof big, "%s/run/states/3.mp", dir);
    FILE *bf = fopen(big, "wb");
    CHECK(bf && fclose(bf) == 0 && truncate(big, (off_t)STORE_OBJECT_MAX + 1) == 0, "grow %s", big);
    data = NULL;
    CHECK(store_get(s, "states/3.mp", &data, &n, NULL, &e) == ERR_STORE && !data &&
              strstr(e.msg, "states/3.mp is 268435457 bytes") && strstr(e.msg, "move it out of the store"),
          "a get past the bound: %s", e.msg);
    unlink(big);
    CHECK(store_put(s, "empty", "", 0, STORE_OVERWRITE, &e) == 0, "empty object");
    CHECK(store_get(s, "empty", &data, &n, NULL, &e) == 0 && n == 0, "empty read");
    free(data);
    int ex = -1;
    CHECK(store_exists(s, "states/1.mp", &ex, &e) == 0 && ex == 1, "exists");
    CHECK(store_exists(s, "states/2.mp", &ex, &e) == 0 && ex == 0, "absent");
    CHECK(store_get(s, "nope", &data, &n, NULL, &e) == STORE_NOT_FOUND, "missing get");
    CHECK(store_delete(s, "states/1.mp", &e) == 0, "%s", e.msg);
    CHECK(store_delete(s, "states/1.mp", &e) == STORE_NOT_FOUND, "double delete");
    CHECK(store_put(s, "../escape", "x", 1, STORE_OVERWRITE, &e) != 0, "bad key refused");
    store_close(s);
    /* plain paths work as URLs too, and see the same objects */
    char path[512];
    snprintf(path, sizeof path, "%s/run", dir);
    s = store_open(path, &e);
    CHECK(s, "open plain path: %s", e.msg);
    CHECK(store_exists(s, "empty", &ex, &e) == 0 && ex == 1, "same store by path");
    store_close(s);
    CHECK(store_open("s3x://bucket/x", &e) == NULL && e.code == ERR_USAGE, "unknown scheme");
    CHECK(strstr(e.msg, "s3x://bucket/x"), "message names the URL: %s", e.msg);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "cleanup");
    free(dir);
}

static void test_create_only_and_cas(void) {
    char *dir = test_tmpdir("store");
    tdm_err e = {0};
    store *s = store_open(dir, &e);
    CHECK(s, "%s", e.msg);
    CHECK(store_put(s, "RUN", "one", 3, STORE_CREATE, &e) == 0, "%s", e.msg);
    CHECK(store_put(s, "RUN", "two", 3, STORE_CREATE, &e) == STORE_EXISTS, "create-only twice");
    void *data;
    size_t n;
    CHECK(store_get(s, "RUN", &data, &n, NULL, &e) == 0 && memcmp(data, "one", 3) == 0,
          "create-only must not replace");
    free(data);

    store_version none = {{0}}, v1, v2, cur;
    CHECK(store_put_if(s, "HEAD", "h1", 2, &none, &v1, &e) == 0, "create via CAS: %s", e.msg);
    CHECK(store_put_if(s, "HEAD", "hX", 2, &none, NULL, &e) == STORE_CONFLICT, "absent expected");
    CHECK(store_get(s, "HEAD", &data, &n, &cur, &e) == 0, "get");
    free(data);
    CHECK(strcmp(cur.v, v1.v) == 0, "version from get equals version from put");
    CHECK(store_put_if(s, "HEAD", "h2", 2, &v1, &v2, &e) == 0, "CAS with the right version");
    CHECK(store_put_if(s, "HEAD", "h3", 2, &v1, NULL, &e) == STORE_CONFLICT, "stale version");
    CHECK(store_get(s, "HEAD", &data, &n, NULL, &e) == 0 && memcmp(data, "h2", 2) == 0,
          "a conflict must not write");
    free(data);
    CHECK(strcmp(v1.v, v2.v) != 0, "versions differ for different content");
    store_close(s);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "cleanup");
    free(dir);
}

static void test_list_prefix_sorted_skips_temporaries(void) {
    char *dir = test_tmpdir("store");
    tdm_err e = {0};
    store *s = store_open(dir, &e);
    CHECK(s, "%s", e.msg);
    const char *keys[] = {"states/10.mp", "states/2.mp", "alpha/0.mp", "HEAD", "blobs/aa/bb"};
    for (size_t i = 0; i < 5; i++)
        CHECK(store_put(s, keys[i], "x", 1, STORE_OVERWRITE, &e) == 0, "%s", e.msg);
    /* a stray temporary, as a crash mid-write leaves it */
    char stray[600];
    snprintf(stray, sizeof stray, "%s/states/.tmp-abc", dir);
    FILE *f = fopen(stray, "w");
    CHECK(f, "stray");
    fclose(f);
    store_list l;
    CHECK(store_list_prefix(s, "states/", &l, &e) == 0, "%s", e.msg);
    CHECK(l.n == 2 && strcmp(l.keys[0], "states/10.mp") == 0 &&
              strcmp(l.keys[1], "states/2.mp") == 0,
          "states listing: n=%zu", l.n);
    store_list_free(&l);
    CHECK(store_list_prefix(s, "", &l, &e) == 0 && l.n == 5, "all keys: %zu", l.n);
    CHECK(strcmp(l.keys[0], "HEAD") == 0 && strcmp(l.keys[1], "alpha/0.mp") == 0, "sorted");
    store_list_free(&l);
    CHECK(store_list_prefix(s, "stat", &l, &e) == 0 && l.n == 2, "partial segment prefix");
    store_list_free(&l);
    CHECK(store_list_prefix(s, "zzz/", &l, &e) == 0 && l.n == 0, "empty listing");
    store_list_free(&l);
    /* linked directories are not walked into: two links to "." made every listing walk
     * 2^40 paths (verify, gc and a run hung, deaf to SIGTERM); one to / the whole disk */
    char link[700];
    snprintf(link, sizeof link, "%s/states/a", dir);
    CHECK(symlink(".", link) == 0, "link a");
    snprintf(link, sizeof link, "%s/states/b", dir);
    CHECK(symlink(".", link) == 0, "link b");
    snprintf(link, sizeof link, "%s/quarantine", dir);
    CHECK(symlink("/", link) == 0, "link /");
    CHECK(store_list_prefix(s, "", &l, &e) == 0 && l.n == 5, "with linked directories: %zu keys", l.n);
    store_list_free(&l);
    /* a folder linked from elsewhere (pins/ on another disk) is listed, as it reads */
    char elsewhere[700], cmd2[3000];
    snprintf(elsewhere, sizeof elsewhere, "%s-elsewhere", dir);
    snprintf(cmd2, sizeof cmd2, "mkdir -p '%s' && printf x > '%s/7' && ln -s '%s' '%s/pins'", elsewhere, elsewhere,
             elsewhere, dir);
    CHECK(system(cmd2) == 0, "link pins/");
    CHECK(store_list_prefix(s, "pins/", &l, &e) == 0 && l.n == 1 && !strcmp(l.keys[0], "pins/7"),
          "a folder linked from elsewhere: %zu keys", l.n);
    store_list_free(&l);
    snprintf(cmd2, sizeof cmd2, "rm -rf '%s'", elsewhere);
    CHECK(system(cmd2) == 0, "cleanup");
    store_close(s);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "cleanup");
    free(dir);
}

static void test_unusable_root_is_an_error(void) {
    char *dir = test_tmpdir("store");
    char file[600];
    snprintf(file, sizeof file, "%s/plainfile", dir);
    FILE *f = fopen(file, "w");
    CHECK(f, "file");
    fclose(f);
    tdm_err e = {0};
    CHECK(store_open(file, &e) == NULL && e.code == ERR_STORE, "a file is not a store root");
    CHECK(strstr(e.msg, "plainfile"), "message names the path: %s", e.msg);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "cleanup");
    free(dir);
}

/* store_open_existing creates nothing: a missing or empty root is "no store"; a
 * read-only handle refuses every write; a writable one works on an existing store. */
static void test_open_existing_creates_nothing(void) {
    char *dir = test_tmpdir("store");
    char missing[700], empty[700];
    snprintf(missing, sizeof missing, "%s/no/such/run", dir);
    snprintf(empty, sizeof empty, "%s/empty", dir);
    tdm_err e = {0};
    int flags[2] = {STORE_OPEN_READ_ONLY, STORE_OPEN_WRITABLE};
    for (int i = 0; i < 2; i++) {
        CHECK(store_open_existing(missing, flags[i], &e) == NULL && e.code == ERR_STORE &&
                  strstr(e.msg, "no store at") && strstr(e.msg, missing), "missing: %s", e.msg);
        char url[720];
        snprintf(url, sizeof url, "file://%s", missing);
        CHECK(store_open_existing(url, flags[i], &e) == NULL && strstr(e.msg, "no store at"), "%s", e.msg);
    }
    struct stat st;
    snprintf(missing, sizeof missing, "%s/no", dir);
    CHECK(stat(missing, &st) != 0, "a read created %s", missing);
    CHECK(mkdir(empty, 0700) == 0, "mkdir");
    CHECK(store_open_existing(empty, STORE_OPEN_READ_ONLY, &e) == NULL && strstr(e.msg, "no store at"),
          "an empty directory is no store: %s", e.msg);
    char lock[720];
    snprintf(lock, sizeof lock, "%s/.lock", empty);
    CHECK(stat(lock, &st) != 0, "a read created .lock");
    CHECK(store_open_existing("s3x://b/x", STORE_OPEN_READ_ONLY, &e) == NULL && e.code == ERR_USAGE,
          "a bad scheme is a usage error");
    /* a store with content: read-only refuses writes, nothing reaches the disk */
    store *w = store_open(empty, &e);
    CHECK(w, "%s", e.msg);
    CHECK(store_put(w, "HEAD", "h", 1, STORE_OVERWRITE, &e) == 0, "%s", e.msg);
    store_close(w);
    store *r = store_open_existing(empty, STORE_OPEN_READ_ONLY, &e);
    CHECK(r, "an existing store: %s", e.msg);
    store_version none = {{0}};
    CHECK(store_put(r, "x", "1", 1, STORE_OVERWRITE, &e) == ERR_INTERNAL && strstr(e.msg, "read-only"),
          "read-only put: %s", e.msg);
    CHECK(store_put_if(r, "y", "1", 1, &none, NULL, &e) == ERR_INTERNAL, "read-only put_if");
    CHECK(store_delete(r, "HEAD", &e) == ERR_INTERNAL, "read-only delete");
    void *data = NULL;
    size_t n = 0;
    CHECK(store_get(r, "HEAD", &data, &n, NULL, &e) == 0 && n == 1, "read-only get: %s", e.msg);
    free(data);
    store_close(r);
    char x[720];
    snprintf(x, sizeof x, "%s/x", empty);
    CHECK(stat(x, &st) != 0 && stat(lock, &st) != 0, "a read-only handle wrote");
    w = store_open_existing(empty, STORE_OPEN_WRITABLE, &e);
    CHECK(w && store_put(w, "pins/3", "p", 1, STORE_OVERWRITE, &e) == 0, "writable existing: %s", e.msg);
    store_close(w);
    test_rmtree(dir);
    free(dir);
}

/* Store URLs as RFC 8089 and S3 URLs read them: what each form names, and the forms that
 * mean something else refused with the URL that was probably meant; the file store a run
 * makes from file:/ABS is at /ABS, and a refused URL creates nothing anywhere. */
static void test_store_urls(void) {
    char host[256] = "";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    char on_host[400];
    snprintf(on_host, sizeof on_host, "file://%s/srv/r", host);
    static const struct {
        const char *url;
        int kind;         /* -1: refused */
        const char *want; /* the path or canonical URL; for refusals a part of the message */
    } cases[] = {
        {"file:///srv/r", STORE_URL_FILE, "/srv/r"},
        {"file:/srv/r", STORE_URL_FILE, "/srv/r"},
        {"file://localhost/srv/r", STORE_URL_FILE, "/srv/r"},
        {"FILE://LOCALHOST/srv/r", STORE_URL_FILE, "/srv/r"},
        {"file://./runs/x", STORE_URL_FILE, "./runs/x"},
        {"file://../runs/x", STORE_URL_FILE, "../runs/x"},
        {"runs/x", STORE_URL_FILE, "runs/x"},
        {"/srv/r", STORE_URL_FILE, "/srv/r"},
        {"./a:b", STORE_URL_FILE, "./a:b"},
        {"s3://bucket/x", STORE_URL_S3, "s3://bucket/x"},
        {"S3://bucket/x", STORE_URL_S3, "s3://bucket/x"},
        {"file://runs/x", -1, "did you mean file://./runs/x (relative to here) or file:///runs/x"},
        {"file://otherhost/srv/r", -1, "names the host 'otherhost'"},
        {"file:relative", -1, "did you mean file://./relative?"},
        {"file://", -1, "has no path"},
        {"s3:/bucket/x", -1, "did you mean s3://bucket/x?"},
        {"s3:bucket/x", -1, "did you mean s3://bucket/x?"},
        {"s3://", -1, "names no bucket"},
        {"gs://bucket/x", -1, "unsupported scheme 'gs://'"},
        {"a:b/c", -1, "./a:b/c"},
        {"", -1, "empty store URL"},
        /* "s3//" (the ':' left out) made a local store at ./s3/BUCKET/... */
        {"s3//bucket/x", -1, "did you mean s3://bucket/x?"},
        {"S3//bucket/x", -1, "did you mean s3://bucket/x?"},
        /* user info in any spelling: refused, shown masked ("ZQXSECRET" is checked below
         * to be in no message); a path with an '@' alone, a ':' alone, or both after its
         * first segment is a path */
        {"s3:/AKIA:ZQXSECRET@bkt-a/run", -1, "store URL s3:/***@bkt-a/run holds user info"},
        {"s3:AKIA:ZQXSECRET@bkt-a/run", -1, "store URL ***@bkt-a/run holds user info"},
        {"s3:///AKIA:ZQXSECRET@bkt-a", -1, "user info"},
        {"s3//AKIA:ZQXSECRET@bkt-a/run", -1, "user info"},
        {"s3:\\\\AKIA:ZQXSECRET@bkt-a", -1, "user info"},
        {"AKIA:ZQXSECRET@bkt-a", -1, "user info"},
        {"file:u:ZQXSECRET@x", -1, "user info"},
        {"runs/a@b", STORE_URL_FILE, "runs/a@b"},
        {"runs/12:00/lr@3", STORE_URL_FILE, "runs/12:00/lr@3"}, /* ':' and '@' further on */
        {"runs/me@host/x", STORE_URL_FILE, "runs/me@host/x"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        store_url_parts u;
        tdm_err e = {0};
        int rc = store_url_parse(cases[i].url, &u, &e);
        if (cases[i].kind < 0)
            CHECK(rc == ERR_USAGE && strstr(e.msg, cases[i].want) && !strstr(e.msg, "ZQXSECRET"),
                  "%s: rc %d, %s", cases[i].url, rc, e.msg);
        else
            CHECK(rc == 0 && u.kind == cases[i].kind &&
                      !strcmp(u.kind == STORE_URL_FILE ? u.path : u.canon, cases[i].want),
                  "%s: rc %d, kind %d, %s (%s)", cases[i].url, rc, u.kind, u.canon, e.msg);
    }
    store_url_parts u;
    tdm_err e = {0};
    CHECK(host[0] && store_url_parse(on_host, &u, &e) == 0 && !strcmp(u.path, "/srv/r"),
          "this host's name: %s", e.msg);
    /* file:/ABS makes the store at /ABS, not at ./file:/ABS */
    char *dir = test_tmpdir("urls");
    char url[700], where[720];
    snprintf(url, sizeof url, "file:%s/one", dir);
    store *s = store_open(url, &e);
    CHECK(s && store_put(s, "HEAD", "h", 1, STORE_OVERWRITE, &e) == 0, "file:/ABS: %s", e.msg);
    if (s) store_close(s);
    snprintf(where, sizeof where, "%s/one/HEAD", dir);
    struct stat st;
    CHECK(stat(where, &st) == 0, "file:%s/one did not make %s", dir, where);
    CHECK(stat("file:", &st) != 0, "a directory 'file:' was made here");
    CHECK(store_open("s3:/bucket/x", &e) == NULL && e.code == ERR_USAGE && stat("s3:", &st) != 0,
          "s3:/bucket/x: refused, nothing made");
    test_rmtree(dir);
    free(dir);
}

int main(void) {
    RUN(test_sha256_known_answers);
    RUN(test_digest_set);
    RUN(test_key_rules);
    RUN(test_put_get_overwrite_delete);
    RUN(test_create_only_and_cas);
    RUN(test_list_prefix_sorted_skips_temporaries);
    RUN(test_unusable_root_is_an_error);
    RUN(test_open_existing_creates_nothing);
    RUN(test_store_urls);
    return test_summary("test_store");
}
