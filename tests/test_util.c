/* test_util.c — the small shared pieces: the counter-based RNG, the YAML tree, util/buf
 * (growable strings with a sticky out-of-memory flag) and ledger/keys (the store's key
 * names, spelled and parsed in one place).
 *
 *   buf     appends of every kind, growth across many doublings, printf of long output,
 *           take hands over and empties, an impossible size sets oom for good
 *   keys    each key kind spelled as the store layout says; indices parsed back, and
 *           leading zeros, overflow, other suffixes, other prefixes refused
 *   json    the --json writer: escapes, invalid UTF-8 as U+FFFD, shortest exact reals
 *           (2000 random ones read back), whole numbers as integers, NaN/Inf as null
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <stdint.h>

#include "ledger/keys.h"
#include "tests/test.h"
#include "util/buf.h"
#include "util/fileio.h"
#include "util/hex.h"
#include "util/json.h"
#include "util/json_read.h"
#include "util/outfile.h"
#include "util/rng.h"
#include "util/secretname.h"
#include "util/term.h"
#include "util/ydoc.h"

/* Known-answer vectors of Philox4x32-10 from the Random123 distribution (kat_vectors). */
static void test_philox_known_answers(void) {
    static const uint32_t cases[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        rng_philox(&cases[i][4], &cases[i][0], out);
        for (int j = 0; j < 4; j++)
            CHECK(out[j] == cases[i][6 + j], "case %d word %d: %08x != %08x", i, j, out[j],
                  cases[i][6 + j]);
    }
}

static void test_stream_coordinates_independent(void) {
    rng_stream a, b, c;
    rng_stream_init(&a, 42, RNG_TEST, 1, 2, 3);
    rng_stream_init(&b, 42, RNG_TEST, 1, 2, 3);
    rng_stream_init(&c, 42, RNG_TEST, 1, 2, 4);
    int same_ac = 0;
    for (int i = 0; i < 100; i++) {
        uint32_t x = rng_u32(&a), y = rng_u32(&b), z = rng_u32(&c);
        CHECK(x == y, "same key and counter must repeat (i=%d)", i);
        same_ac += x == z;
    }
    CHECK(same_ac < 3, "different coordinates gave %d equal words of 100", same_ac);
}

static void test_uniform_and_normal_moments(void) {
    rng_stream s;
    rng_stream_init(&s, 7, RNG_TEST, 0, 0, 0);
    double su = 0, sn = 0, sn2 = 0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double u = rng_uniform(&s);
        CHECK(u >= 0 && u < 1, "uniform out of range: %g", u);
        su += u;
        double z = rng_normal(&s);
        sn += z;
        sn2 += z * z;
    }
    CHECK(fabs(su / n - 0.5) < 0.005, "uniform mean %g", su / n);
    CHECK(fabs(sn / n) < 0.01, "normal mean %g", sn / n);
    CHECK(fabs(sn2 / n - 1) < 0.02, "normal variance %g", sn2 / n);
}

static void test_below_is_unbiased_and_in_range(void) {
    rng_stream s;
    rng_stream_init(&s, 9, RNG_TEST, 0, 0, 0);
    int hist[3] = {0};
    for (int i = 0; i < 30000; i++) {
        uint64_t x = rng_below(&s, 3);
        CHECK(x < 3, "rng_below(3) gave %llu", (unsigned long long)x);
        hist[x]++;
    }
    for (int i = 0; i < 3; i++) CHECK(abs(hist[i] - 10000) < 500, "bucket %d: %d", i, hist[i]);
    CHECK(rng_below(&s, 1) == 0, "rng_below(1) must be 0");
}

static void test_ydoc_tree_and_lines(void) {
    const char *text = "name: demo\n"
                       "sizes: [1, 2, 3]\n"
                       "nested:\n"
                       "  quoted: \"7\"\n"
                       "  plain: 7\n";
    tdm_err e = {0};
    ydoc_node *root = ydoc_parse(text, strlen(text), "t.yaml", &e);
    CHECK(root, "parse failed: %s", e.msg);
    CHECK(root->kind == YDOC_MAP && root->n == 3, "root kind %d n %zu", root->kind, root->n);
    const ydoc_node *sizes = ydoc_get(root, "sizes");
    CHECK(sizes && sizes->kind == YDOC_SEQ && sizes->n == 3, "sizes");
    CHECK(strcmp(sizes->items[2]->value, "3") == 0, "sizes[2]=%s", sizes->items[2]->value);
    const ydoc_node *nested = ydoc_get(root, "nested");
    CHECK(nested && nested->line == 4, "nested line %d", nested ? nested->line : -1);
    CHECK(ydoc_get(nested, "quoted")->quoted == 1, "quoted flag");
    CHECK(ydoc_get(nested, "plain")->quoted == 0, "plain flag");
    CHECK(ydoc_get(nested, "plain")->line == 5, "line of plain");
    CHECK(ydoc_get(root, "absent") == NULL, "absent key");
    ydoc_free(root);
}

static void test_ydoc_rejections(void) {
    const char *bad[] = {
        "a: [1, 2\n",             /* syntax */
        "a: 1\na: 2\n",           /* duplicate key */
        "a: &x 1\nb: *x\n",       /* alias */
        "a: 1\n---\nb: 2\n",      /* two documents */
        "? [1, 2]\n: v\n",        /* non-scalar key */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tdm_err e = {0};
        ydoc_node *root = ydoc_parse(bad[i], strlen(bad[i]), "bad.yaml", &e);
        CHECK(root == NULL, "case %zu accepted", i);
        CHECK(e.code == ERR_USAGE, "case %zu code %d", i, e.code);
        CHECK(strstr(e.msg, "bad.yaml:") != NULL, "case %zu message lacks file: %s", i, e.msg);
    }
    tdm_err e = {0};
    CHECK(ydoc_parse_file("/nonexistent/x.yaml", &e) == NULL, "missing file");
    CHECK(strstr(e.msg, "/nonexistent/x.yaml"), "message names the path: %s", e.msg);
}

static void test_buf(void) {
    buf_t b = {0};
    char *empty = buf_take(&b);
    CHECK(empty && !strcmp(empty, ""), "an empty take is \"\"");
    free(empty);
    buf_puts(&b, "ab");
    buf_putc(&b, 'c');
    buf_putn(&b, "dexx", 2);
    buf_printf(&b, "-%d-%s", 42, "z");
    CHECK(!b.oom && b.n == 10 && !strcmp(b.p, "abcde-42-z"), "%zu '%s'", b.n, b.p);
    for (int i = 0; i < 20000; i++) buf_putc(&b, (char)('a' + i % 26));
    CHECK(!b.oom && b.n == 20010 && b.p[20009] == (char)('a' + 19999 % 26) && b.p[20010] == '\0',
          "growth: %zu", b.n);
    char big[5000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    buf_printf(&b, "%s!", big);
    CHECK(b.n == 20010 + 5000 && b.p[b.n - 1] == '!', "long printf: %zu", b.n);
    char *s = buf_take(&b);
    CHECK(s && strlen(s) == 25010 && b.p == NULL && b.n == 0, "take");
    free(s);
    /* an impossible size: oom, sticky; later appends dropped; take gives NULL */
    buf_puts(&b, "x");
    CHECK(buf_reserve(&b, SIZE_MAX - 8) == -1 && b.oom, "impossible reserve");
    buf_puts(&b, "more");
    CHECK(b.n == 1, "an append after oom was kept");
    CHECK(buf_take(&b) == NULL && b.p == NULL && !b.oom, "take after oom");
    buf_free(&b);
}

static void test_hex(void) {
    char out[17];
    const unsigned char b[8] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xcd, 0xef, 0xff};
    hex_lower(b, 8, out);
    CHECK(!strcmp(out, "00017f80abcdefff"), "%s", out);
    out[0] = 'x';
    hex_lower(b, 0, out);
    CHECK(out[0] == '\0', "no bytes: an empty string");
}

static void test_keys(void) {
    char k[128];
    ledger_state_key(k, sizeof k, 12);
    CHECK(!strcmp(k, "states/12.mp"), "%s", k);
    ledger_alpha_key(k, sizeof k, 0);
    CHECK(!strcmp(k, "alpha/0.mp"), "%s", k);
    ledger_config_key(k, sizeof k, 3);
    CHECK(!strcmp(k, "configs/3.mp"), "%s", k);
    ledger_pin_key(k, sizeof k, 18446744073709551615ull);
    CHECK(!strcmp(k, "pins/18446744073709551615"), "%s", k);
    sha256_digest d;
    sha256("abc", 3, &d);
    ledger_blob_key(k, sizeof k, &d);
    CHECK(!strcmp(k, "blobs/ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "%s", k);
    ledger_quarantine_key(k, sizeof k, 7, "states/3.mp");
    CHECK(!strcmp(k, "quarantine/7/states/3.mp"), "%s", k);
    ledger_superseded_key(k, sizeof k, 1, "alpha/9.mp");
    CHECK(!strcmp(k, "superseded/1/alpha/9.mp"), "%s", k);
    uint64_t n = 99;
    CHECK(ledger_key_index("states/0.mp", LEDGER_STATES, &n) == 0 && n == 0, "0");
    CHECK(ledger_key_index("alpha/18446744073709551615.mp", LEDGER_ALPHA, &n) == 0 &&
              n == UINT64_MAX,
          "max");
    CHECK(ledger_key_index("pins/42", LEDGER_PINS, &n) == 0 && n == 42, "pin");
    static const char *const bad[][2] = {
        {"states/01.mp", LEDGER_STATES},  {"states/.mp", LEDGER_STATES},
        {"states/1.mpx", LEDGER_STATES},  {"states/1", LEDGER_STATES},
        {"alpha/1.mp", LEDGER_STATES},    {"alpha/18446744073709551616.mp", LEDGER_ALPHA},
        {"pins/5.mp", LEDGER_PINS},       {"pins/-1", LEDGER_PINS},
        {"states/1a.mp", LEDGER_STATES},  {"states/ 1.mp", LEDGER_STATES},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(ledger_key_index(bad[i][0], bad[i][1], &n) == -1, "%s accepted", bad[i][0]);
}

/* The credential endpoints' JSON: the wanted field among nested values, escapes and
 * surrogate pairs decoded; malformed text, a non-string value or a short buffer refused. */
static void test_json_read(void) {
    const char *doc = "{ \"Code\": \"Success\", \"n\": -1.5e3, \"ok\": true, \"z\": null,\n"
                      "  \"nested\": {\"AccessKeyId\": \"WRONG\", \"a\": [1, {\"b\": \"}\"}]},\n"
                      "  \"AccessKeyId\": \"ASIA\\u0041\\\"q\\\\\", \"Token\": \"\\ud83d\\ude00x\" }";
    char out[64];
    CHECK(json_read_string(doc, strlen(doc), "AccessKeyId", out, sizeof out) && !strcmp(out, "ASIAA\"q\\"),
          "top-level field, escapes: '%s'", out);
    CHECK(json_read_string(doc, strlen(doc), "Token", out, sizeof out) && !strcmp(out, "\xf0\x9f\x98\x80x"),
          "a surrogate pair as UTF-8");
    CHECK(json_read_string(doc, strlen(doc), "Code", out, sizeof out) && !strcmp(out, "Success"), "Code");
    CHECK(!json_read_string(doc, strlen(doc), "n", out, sizeof out), "a number is not a string");
    double v = 0;
    CHECK(json_read_number(doc, strlen(doc), "n", &v) && v == -1500, "a number: %g", v);
    CHECK(!json_read_number(doc, strlen(doc), "Code", &v), "a string is not a number");
    CHECK(!json_read_string(doc, strlen(doc), "b", out, sizeof out), "nested keys are not top-level");
    CHECK(!json_read_string(doc, strlen(doc), "Token", out, 4), "too long for the buffer");
    const char *bad[] = {"", "[]", "{\"a\":\"x\"", "{\"a\":\"x\"} trailing", "{\"a\" \"x\"}",
                         "{\"a\":\"\\q\"}", "{\"a\":\"\\udc00\"}", "{\"a\":\"x\",}", "{a:\"x\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(!json_read_string(bad[i], strlen(bad[i]), "a", out, sizeof out), "malformed %zu accepted: %s", i,
              bad[i]);
}

/* What json_str / json_num write (through jansson's encoder) into a memory stream. */
static const char *json_out(int num, const char *s, double v) {
    static char out[256];
    FILE *f = fmemopen(out, sizeof out, "w");
    if (!f) return "";
    if (num) json_num(f, v);
    else json_str(f, s);
    fclose(f);
    return out;
}

/* The --json writer: any C string gives valid JSON that reads back to the same text
 * (invalid bytes as U+FFFD), reals in the shortest form that reads back to the same
 * double, whole numbers as integers, no NaN or infinity. */
static void test_json_write(void) {
    CHECK(!strcmp(json_out(0, "a\"b\\c\n\t\x01", 0), "\"a\\\"b\\\\c\\n\\t\\u0001\""), "escapes: %s",
          json_out(0, "a\"b\\c\n\t\x01", 0));
    CHECK(!strcmp(json_out(0, "caf\xc3\xa9 \xf0\x9f\x98\x80", 0), "\"caf\xc3\xa9 \xf0\x9f\x98\x80\""),
          "valid UTF-8 kept as it is: %s", json_out(0, "caf\xc3\xa9 \xf0\x9f\x98\x80", 0));
    /* a lone continuation byte, Latin-1, an overlong '/', a surrogate, a cut sequence: 8 bad
     * bytes after the y, each one U+FFFD */
    CHECK(!strcmp(json_out(0, "x\x80y\xe9\xc0\xaf\xed\xa0\x80\xe2\x82", 0),
                  "\"x\xef\xbf\xbdy\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                  "\xef\xbf\xbd\xef\xbf\xbd\""),
          "invalid bytes each become U+FFFD: %s", json_out(0, "x\x80y\xe9\xc0\xaf\xed\xa0\x80\xe2\x82", 0));
    CHECK(!strcmp(json_out(0, NULL, 0), "null") && !strcmp(json_out(0, "", 0), "\"\""), "NULL and empty");
    struct {
        double v;
        const char *want;
    } nums[] = {{0.1, "0.1"}, {250, "250"}, {-3, "-3"}, {0, "0"}, {1e-5, "1e-5"}, {2.5, "2.5"},
                {1.0 / 3, "0.3333333333333333"}, {6.9412345678901234, "6.941234567890123"},
                {NAN, "null"}, {INFINITY, "null"}, {-INFINITY, "null"}};
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++)
        CHECK(!strcmp(json_out(1, NULL, nums[i].v), nums[i].want), "%.17g -> %s, want %s", nums[i].v,
              json_out(1, NULL, nums[i].v), nums[i].want);
    /* every real reads back to itself */
    rng_stream r;
    rng_stream_init(&r, 20261128, RNG_TEST, 0, 0, 0);
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
        double v = (rng_uniform(&r) - 0.5) * pow(10, (int)(rng_uniform(&r) * 40) - 20);
        if (strtod(json_out(1, NULL, v), NULL) != v) bad++;
    }
    CHECK(bad == 0, "%d of 2000 reals did not read back", bad);
}

static int any_name(const char *name, size_t len) {
    return len > 0 && name[0] != 'z'; /* "z..." stands for a file the caller does not write */
}

/* What a killed writer left: removed when its PID is gone and it is not fresh; a live
 * writer's (this process's, PID 1's), a fresh one and names that only look alike stay. */
static void test_sweep_dead_temporaries(void) {
    char *dir = test_tmpdir("sweep");
    long dead = 4000000; /* above the usual pid_max: no such process */
    while (kill((pid_t)dead, 0) == 0 || errno != ESRCH) dead--;
    char names[9][128];
    snprintf(names[0], sizeof names[0], "a.bin.tmp.%ld.3", dead);        /* removed */
    snprintf(names[1], sizeof names[1], "b.safetensors.tmp-%ld", dead);  /* removed */
    snprintf(names[2], sizeof names[2], "a.bin.tmp.%ld.1", (long)getpid()); /* this process */
    snprintf(names[3], sizeof names[3], "d.json.tmp-1");                /* PID 1 lives */
    snprintf(names[4], sizeof names[4], "c.bin.tmp.%ld.x", dead);        /* not a temporary's name */
    snprintf(names[5], sizeof names[5], "train_000.bin");               /* a shard */
    snprintf(names[6], sizeof names[6], "e.bin.tmp.%ld.1", dead);        /* fresh: kept */
    snprintf(names[7], sizeof names[7], "f.tmp-%ldx", dead);             /* not a temporary's name */
    snprintf(names[8], sizeof names[8], "z.bin.tmp.%ld.1", dead);        /* not a file the caller writes */
    for (int i = 0; i < 9; i++) {
        char path[1300];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "w");
        CHECK(f && fputs("x", f) >= 0 && fclose(f) == 0, "write %s", path);
        if (i != 6) {
            struct timespec old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
            CHECK(utimensat(AT_FDCWD, path, old, 0) == 0, "utimensat");
        }
    }
    size_t n = fileio_sweep_dead_temporaries(dir, any_name, 10.0);
    int kept = 1;
    for (int i = 0; i < 9; i++) {
        char path[1300];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        int there = access(path, F_OK) == 0;
        if (there != (i >= 2)) kept = 0, fprintf(stderr, "  %s: %s\n", names[i], there ? "kept" : "removed");
        unlink(path);
    }
    rmdir(dir);
    free(dir);
    CHECK(n == 2 && kept, "removed %zu", n);
}

/* A FIFO at an output path that no process reads is refused (ERR_USAGE naming the option
 * and the path) within seconds, never waited on; one with a reader is written through.
 * (Before, open(2) waited for a reader for ever: the alarm ends such a wait as a failure.) */
static void test_outfile_fifo(void) {
    char *dir = test_tmpdir("fifo");
    char path[1100];
    snprintf(path, sizeof path, "%s/fifo", dir);
    CHECK(mkfifo(path, 0600) == 0, "mkfifo");
    alarm(30);
    outfile o;
    tdm_err e = {0};
    time_t t0 = time(NULL);
    int rc = outfile_open(&o, "--out", path, &e);
    CHECK(rc == ERR_USAGE && strstr(e.msg, "--out") && strstr(e.msg, path) && strstr(e.msg, "no process reads"),
          "rc %d: %s", rc, e.msg);
    CHECK(time(NULL) - t0 < 10, "refused after %lds", (long)(time(NULL) - t0));
    if (!rc) outfile_close(&o, 1, 0, &e);
    /* a reader there: written through, the FIFO stays */
    int rfd = open(path, O_RDONLY | O_NONBLOCK);
    CHECK(rfd >= 0, "reader");
    tdm_err e2 = {0};
    rc = outfile_open(&o, "--out", path, &e2);
    CHECK(rc == 0, "with a reader: %s", e2.msg);
    if (!rc) {
        fputs("hello\n", o.f);
        CHECK(outfile_close(&o, 0, 0, &e2) == 0, "close: %s", e2.msg);
        char got[16] = {0};
        CHECK(read(rfd, got, sizeof got - 1) == 6 && !strcmp(got, "hello\n"), "read back '%s'", got);
    }
    alarm(0);
    struct stat st;
    CHECK(lstat(path, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO stays");
    if (rfd >= 0) close(rfd);
    unlink(path);
    rmdir(dir);
    free(dir);
}

/* Text from outside printed for people: no control character reaches the terminal. */
static void test_term_text(void) {
    char out[64];
    term_copy(out, sizeof out, "a\x1b[31mb\xc2\x9b" "c\n\x7f\xc3\xa9");
    CHECK(!strcmp(out, "a?[31mb?c??\xc3\xa9"), "term_copy: %s", out);
    term_copy(out, 4, "abcdef");
    CHECK(!strcmp(out, "abc"), "cut: %s", out);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    CHECK(f, "memstream");
    term_text(f, "host\x1b]0;TITLE\x07");
    fclose(f);
    CHECK(buf && !strcmp(buf, "host?]0;TITLE?"), "term_text: %s", buf ? buf : "");
    free(buf);
    /* every error message the same way, whatever it quotes (a key from a file, a path a
     * glob found, an endpoint's answer): newlines and tabs stay, UTF-8 text too */
    tdm_err e = {0};
    err_set(&e, ERR_USAGE, "unknown key '%s'\tsee\n", "\x1b]0;PWNED\x07\x1b[2J\xc2\x9b" "1m\xc3\xa9");
    CHECK(!strcmp(e.msg, "unknown key '?]0;PWNED??[2J?1m\xc3\xa9'\tsee?"), "err_set: %s", e.msg);
    err_prefix(&e, "%s: ", "file\x1b[31m");
    CHECK(!strncmp(e.msg, "file?[31m: unknown key '?]0;", 28), "err_prefix: %s", e.msg);
    /* a newline in a name cannot start a line of its own; an indented continuation stays */
    err_set(&e, ERR_USAGE, "cannot read %s:\n  %s", "x\ntandem: run finished", "line two");
    CHECK(!strcmp(e.msg, "cannot read x?tandem: run finished:\n  line two"), "err_set newline: %s", e.msg);
    err_sys(&e, ERR_STORE, 2, "open %s", "x\x07y");
    CHECK(!strncmp(e.msg, "open x?y: ", 10), "err_sys: %s", e.msg);
}

/* A message longer than tdm_err holds keeps its start (what failed) and its end (why, what
 * to do) with " [...] " between: a path near PATH_MAX used to push the reason out of
 * `tandem run --store <long path>`'s error; the same for err_sys's strerror and for a
 * prefix put before a long message; cuts never split a UTF-8 character. */
static void test_long_messages_keep_their_reason(void) {
    char name[4200];
    memset(name, 'd', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    for (int i = 300; i < 3900; i += 2) name[i] = (char)0xC3, name[i + 1] = (char)0xA9; /* é */
    tdm_err e = {0};
    err_set(&e, ERR_STORE, "store %s: cannot create it: check the path", name);
    size_t n = strlen(e.msg);
    CHECK(n <= sizeof e.msg - 1 && n > 900, "length %zu", n);
    CHECK(!strncmp(e.msg, "store ddd", 9) && strstr(e.msg, " [...] ") &&
              !strcmp(e.msg + n - strlen("dd: cannot create it: check the path"), "dd: cannot create it: check the path"),
          "err_set: %.60s ... %s", e.msg, e.msg + n - 60);
    for (size_t i = 0; i < n; i++) /* every é whole: a lead byte is followed by its continuation */
        if ((unsigned char)e.msg[i] == 0xC3) CHECK((unsigned char)e.msg[i + 1] == 0xA9, "split at %zu", i);
    CHECK((unsigned char)e.msg[strstr(e.msg, " [...] ") - e.msg + 7] != 0xA9, "the tail starts inside a character");
    err_sys(&e, ERR_STORE, 36, "open %s", name);
    n = strlen(e.msg);
    CHECK(!strncmp(e.msg, "open dd", 7) && strstr(e.msg, " [...] ") &&
              !strcmp(e.msg + n - strlen(": File name too long"), ": File name too long"),
          "err_sys: %s", e.msg + n - 40);
    err_set(&e, ERR_STORE, "%s: the reason", name);
    err_prefix(&e, "tandem run: %s: ", "the store");
    n = strlen(e.msg);
    CHECK(!strncmp(e.msg, "tandem run: the store: ddd", 26) && !strcmp(e.msg + n - 12, ": the reason"),
          "err_prefix: %.40s ... %s", e.msg, e.msg + n - 40);
    n = strlen(e.msg);
    for (size_t i = 0; i < n; i++) /* the prefix's cut too falls between characters */
        if ((unsigned char)e.msg[i] == 0xC3) CHECK((unsigned char)e.msg[i + 1] == 0xA9, "prefix split at %zu", i);
    /* a hint appended to a long message (the full file system's) survives as its end */
    err_sys(&e, ERR_STORE, 28, "%s: cannot write HEAD", name);
    err_append(&e, " (the store's file system is full: free space)");
    n = strlen(e.msg);
    CHECK(strstr(e.msg, " [...] ") && strstr(e.msg, ": No space left on device (the store's file system is full: free space)") &&
              n <= sizeof e.msg - 1,
          "err_append: %s", e.msg + (n > 80 ? n - 80 : 0));
    /* short ones as before */
    err_set(&e, ERR_USAGE, "short %d", 1);
    CHECK(!strcmp(e.msg, "short 1"), "%s", e.msg);
    err_prefix(&e, "a: ");
    CHECK(!strcmp(e.msg, "a: short 1"), "%s", e.msg);
    err_append(&e, " (%s)", "hint");
    CHECK(!strcmp(e.msg, "a: short 1 (hint)"), "%s", e.msg);
}

/* One rule for cluster.env's refusal and the no-core check: secrets by their words, not
 * words that merely hold the letters (TOKENIZERS_PARALLELISM), not where a secret lies. */
static void test_secret_env_name(void) {
    static const char *const secret[] = {
        "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "HF_TOKEN", "GITHUBTOKEN", "db_password", "PGPASSWORD", "MYSQL_PWD_PASSWD",
        "SMTP_PASS", "GPG_PASSPHRASE", "CLIENTSECRETS", "GITHUB_PAT", "WANDB_KEY",
        "KAGGLE_KEY", "AZURE_STORAGE_ACCOUNT_KEY", "OPENAI_API_KEYS", "ACCESS_KEYS",
        "R2_ACCESS_KEYID", "PRIVATE_KEYS", "WANDB_API_KEY",
        "OPENAI_API_KEY", "STRIPE_APIKEY", "SSH_PRIVATE_KEY", "JWT_SIGNING_KEY",
        "DATA_ENCRYPTION_KEY", "auth_key", "token",
        /* missed before 2026-12-06 (their values went into the srun line and the ConfigMap) */
        "MYSQL_PWD", "AZURE_STORAGE_CONNECTION_STRING", "DB_CONNSTR", "JWT", "API_JWT", "BEARER",
        "SESSION_COOKIE", "COOKIES",
        "AWS_ACCESS_KEY_ID"}; /* half of a credential: it goes with the secret, in a file */
    static const char *const plain[] = {
        "TOKENIZERS_PARALLELISM", "AWS_REGION", "PASSWORD_FILE",
        "AWS_SHARED_CREDENTIALS_FILE", "SECRET_DIR", "TOKENS_PER_BATCH", "BYPASS_PROXY",
        "KEY", "HOME", "PATH", "NCCL_IB_DISABLE", "FILE", "COMPASS_HEADING", "MAX_TOKENS",
        "GOOGLE_APPLICATION_CREDENTIALS", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "HF_HOME", "PYTORCH_CUDA_ALLOC_CONF",
        "MASTER_ADDR", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "KEYBOARD_LAYOUT",
        "PWD", "OLDPWD", "CONNECTION_TIMEOUT", "COOKIE_DIR"};
    for (size_t i = 0; i < sizeof secret / sizeof *secret; i++)
        CHECK(secret_env_name(secret[i], strlen(secret[i])), "%s: a secret", secret[i]);
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
        CHECK(!secret_env_name(plain[i], strlen(plain[i])), "%s: no secret", plain[i]);
    /* the length is the name's, not the string's (cluster.env passes NAME=value) */
    CHECK(secret_env_name("HF_TOKEN=abc", 8), "a name cut from NAME=value");
    CHECK(!secret_env_name("LANG=PASSWORD", 4), "the value is not the name");
}

int main(void) {
    RUN(test_json_read);
    RUN(test_json_write);
    RUN(test_philox_known_answers);
    RUN(test_stream_coordinates_independent);
    RUN(test_uniform_and_normal_moments);
    RUN(test_below_is_unbiased_and_in_range);
    RUN(test_ydoc_tree_and_lines);
    RUN(test_ydoc_rejections);
    RUN(test_buf);
    RUN(test_hex);
    RUN(test_keys);
    RUN(test_sweep_dead_temporaries);
    RUN(test_outfile_fifo);
    RUN(test_term_text);
    RUN(test_long_messages_keep_their_reason);
    RUN(test_secret_env_name);
    return test_summary("test_util");
}
