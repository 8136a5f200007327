/* test_audit.c — auditing a run from its store: `tandem alpha` (table, CSV, JSON,
 * --verify, --plot), `mixture`, `status`, `verify`, `gc` (killed midway, then resumed)
 * and `eval`, each driven through the binary ($TANDEM_BIN); RUN deleted, truncated or
 * flipped (verify reports a fault exactly when run refuses, and no damage makes a new
 * run); stale leases (a killed holder, a reused pid, a silent foreign host) in status
 * and gc, and a holder's pid judged only from its own PID namespace and boot. */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "ledger/audit.h"
#include "ledger/gens.h"
#include "ledger/records.h"
#include "tests/corpus_fixture.h"
#include "tests/runner_fixture.h"
#include "tests/test.h"
#include "util/pidns.h"

static char g_corpus[600];

static int fixture_audit(fixture *f, const char *tag, int episodes) {
    f->dir = test_tmpdir(tag);
    snprintf(f->config, sizeof f->config, "%s/run.yaml", f->dir);
    snprintf(f->store, sizeof f->store, "%s/store", f->dir);
    snprintf(f->log, sizeof f->log, "%s/log.txt", f->dir);
    char text[2048];
    snprintf(text, sizeof text,
             "run: {episodes: %d, seed: 7, threads: 1}\n"
             "data: {dataset: %s/dataset.yaml}\n"
             "model: {layers: 1, channels: 32, heads: 2, ctx: 32}\n"
             "train: {batch: 6, seq: 32}\n"
             "tandem: {K: 2, E: 2, lr_alpha: 0.5, alpha_cut: any}\n"
             "optim: {lr: 3e-3}\n"
             "checkpoint: {every_episodes: 1, chunk_kib: 16, keep: 0}\n",
             episodes, g_corpus);
    return write_file(f->config, text);
}

/* Runs `tandem ARGS` (a shell fragment), capturing stdout+stderr; returns the exit code. */
static int tandem_cmd(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int tandem_cmd(char *out, size_t cap, const char *fmt, ...) {
    char args[3000], cmd[3400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", tandem_bin(), args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static char out[1 << 20];

/* Starts `sh -c cmd` in the background; its pid. */
static pid_t start_sh(const char *cmd) {
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Waits (up to 60 s) until `tandem status` says a live process on this host holds the
 * lease of `store`: a fixed sleep before a check that needs the holder there raced the
 * holder's start-up on a loaded machine (ASan, 2 cores). 0 when it does. */
static int wait_lease_held(const char *store) {
    char buf[8192];
    double t0 = now_s();
    while (now_s() - t0 < 60) {
        if (tandem_cmd(buf, sizeof buf, "status '%s'", store) == 0 && strstr(buf, "held since") &&
            strstr(buf, "alive on this host"))
            return 0;
        usleep(50000);
    }
    return -1;
}

/* Waits (up to 60 s) until the file at `path` is gone (gc has begun deleting). 0 then. */
static int wait_gone(const char *path) {
    double t0 = now_s();
    while (now_s() - t0 < 60) {
        if (access(path, F_OK) != 0) return 0;
        usleep(5000);
    }
    return -1;
}

static void test_alpha_listing_and_mixture(void) {
    fixture f;
    CHECK(fixture_audit(&f, "audit", 10) == 0, "fixture");
    CHECK(run_to_end(&f, NULL) == 0, "run");
    CHECK(tandem_cmd(out, sizeof out, "alpha '%s'", f.store) == 0, "alpha: %s", out);
    CHECK(count_lines(out) == 1 + 10 * 3, "table rows: %d", count_lines(out));
    CHECK(strstr(out, "d0") && strstr(out, "d2") && strstr(out, "loss_w"), "table: %.300s", out);
    CHECK(tandem_cmd(out, sizeof out, "alpha '%s' --format csv", f.store) == 0, "csv");
    CHECK(!strncmp(out, "episode,domain,alpha,alpha_next,loss_u,loss_w,delta,seen,epochs\n", 64), "csv header");
    CHECK(count_lines(out) == 31, "csv rows %d", count_lines(out));
    /* the mixture is the mean alpha_next of the last 10 % (1 episode of 10) */
    double want[3] = {0};
    for (char *line = strchr(out, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        int t, m;
        double a, an;
        if (sscanf(line, "%d,d%d,%lf,%lf", &t, &m, &a, &an) == 4 && t == 9) want[m] = an;
        if (!strchr(line, '\n')) break;
    }
    CHECK(tandem_cmd(out, sizeof out, "mixture '%s'", f.store) == 0, "mixture: %s", out);
    for (int m = 0; m < 3; m++) {
        char key[32];
        snprintf(key, sizeof key, "  \"d%d\": ", m); /* quoted: a domain named on or null is a string */
        char *at = strstr(out, key);
        CHECK(at && fabs(atof(at + strlen(key)) - want[m]) < 1e-15, "mixture d%d: %s", m, out);
    }
    CHECK(tandem_cmd(out, sizeof out, "mixture '%s' --last-fraction 0.5", f.store) == 0 &&
              strstr(out, "episodes 5..9 of 10"), "last-fraction: %s", out);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' alpha '%s' --format json | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); "
             "assert len(d)==10 and abs(sum(d[9][\"alpha_next\"].values())-1)<1e-12 and d[3][\"episode\"]==3'",
             tandem_bin(), f.store);
    CHECK(system(cmd) == 0, "JSON output does not parse or is wrong");
    char svg[700];
    snprintf(svg, sizeof svg, "%s/alpha.svg", f.dir);
    CHECK(tandem_cmd(out, sizeof out, "alpha '%s' --plot '%s'", f.store, svg) == 0, "plot: %s", out);
    FILE *p = fopen(svg, "r");
    CHECK(p, "no SVG written");
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    fclose(p);
    CHECK(strstr(out, "<svg") && strstr(out, "d0") && strstr(out, "d2") && strstr(out, "episode"), "SVG content");
    test_rmtree(f.dir);
    free(f.dir);
}

/* Rewrites alpha/<t>.mp with one α_{t+1} nudged: a consistent-looking but altered record. */
static int alter_record(const fixture *f, int t) {
    char path[800];
    snprintf(path, sizeof path, "%s/alpha/%d.mp", f->store, t);
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    rec_alpha a;
    tdm_err e;
    if (rec_alpha_decode(buf, n, path, &a, &e)) return -1;
    a.alpha_next[0] += 1e-6;
    a.alpha_next[1] -= 1e-6;
    size_t m;
    void *enc = rec_alpha_encode(&a, &m);
    fp = fopen(path, "wb");
    int rc = fp && fwrite(enc, 1, m, fp) == m ? 0 : -1;
    if (fp) fclose(fp);
    free(enc);
    return rc;
}

static void test_alpha_verify_names_the_damage(void) {
    fixture f;
    CHECK(fixture_audit(&f, "audit", 8) == 0, "fixture");
    CHECK(run_to_end(&f, NULL) == 0, "run");
    CHECK(tandem_cmd(out, sizeof out, "alpha '%s' --verify", f.store) == 0 && strstr(out, "8 records"),
          "intact chain: %s", out);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s.orig'", f.store, f.store);
    CHECK(system(cmd) == 0, "copy");
    /* an altered middle record: the next one's link breaks */
    CHECK(alter_record(&f, 2) == 0, "alter");
    CHECK(tandem_cmd(out, sizeof out, "alpha '%s' --verify", f.store) == 3, "altered record passed: %s", out);
    CHECK(strstr(out, "alpha/2.mp was altered"), "message: %s", out);
    /* an altered last record: only the state's chain head can tell */
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s.orig' '%s'", f.store, f.store, f.store);
    CHECK(system(cmd) == 0, "restore");
    CHECK(alter_record(&f, 7) == 0, "alter");
    CHECK(tandem_cmd(out, sizeof out, "alpha '%s' --verify", f.store) == 3 && strstr(out, "alpha/7.mp was altered"),
          "altered last record: %s", out);
    /* a missing record */
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s.orig' '%s' && rm '%s/alpha/4.mp'", f.store, f.store,
             f.store, f.store);
    CHECK(system(cmd) == 0, "delete");
    CHECK(tandem_cmd(out, sizeof out, "alpha '%s' --verify", f.store) == 3 && strstr(out, "alpha/4.mp is missing"),
          "missing record: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 3 && strstr(out, "alpha/4.mp"), "verify: %s", out);
    test_rmtree(f.dir);
    free(f.dir);
}

static void test_status_and_verify(void) {
    fixture f;
    CHECK(fixture_audit(&f, "audit", 8) == 0, "fixture");
    CHECK(run_to_end(&f, "TANDEM_TEST_SIGNAL_AT=free:7") == 75, "stopped run");
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", f.store) == 0, "status: %s", out);
    CHECK(strstr(out, "run-") && strstr(out, "episode 3/8") && strstr(out, "finished  no") &&
              strstr(out, "released"), "status text:\n%s", out);
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0 && strstr(out, "0 faults"), "verify: %s", out);
    /* a flipped byte in a blob */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "f=$(ls '%s'/blobs | head -n 1); printf 'X' | dd of='%s'/blobs/$f bs=1 seek=10 conv=notrunc status=none; echo $f",
             f.store, f.store);
    FILE *p = popen(cmd, "r");
    char name[100] = "";
    CHECK(p && fgets(name, sizeof name, p), "flip");
    pclose(p);
    name[strcspn(name, "\n")] = '\0';
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 3, "corrupt blob passed: %s", out);
    CHECK(strstr(out, name) && strstr(out, "corrupt"), "verify names the blob %s: %s", name, out);
    test_rmtree(f.dir);
    free(f.dir);
}

static void test_gc_killed_midway_loses_nothing(void) {
    fixture f;
    CHECK(fixture_audit(&f, "gc", 12) == 0, "fixture");
    /* reference: the same run uninterrupted */
    fixture r;
    CHECK(fixture_audit(&r, "gcref", 12) == 0, "fixture");
    CHECK(run_to_end(&r, NULL) == 0, "reference run");
    char ref[1024], h[1024];
    CHECK(hash_of(&r, ref, sizeof ref) == 0, "reference hash");
    CHECK(run_to_end(&f, "TANDEM_TEST_SIGNAL_AT=free:20") == 75, "stopped run");
    CHECK(tandem_cmd(out, sizeof out, "pin '%s' 4", f.store) == 0, "pin: %s", out);
    /* gc refuses while a writer holds the lease */
    pid_t live = start_run(&f, "TANDEM_TEST_STEP_DELAY_MS=200", NULL, NULL);
    CHECK(wait_lease_held(f.store) == 0, "the live run never held the lease");
    CHECK(tandem_cmd(out, sizeof out, "gc '%s' --keep 1", f.store) == 2 && strstr(out, "holds the lease"),
          "gc ran beside a live writer: %s", out);
    kill(live, SIGTERM);
    CHECK(wait_exit(live) == 75, "live run stop");
    /* a run that starts while gc collects (gc checked the lease at its start): gc stops at
     * its next deletion, before it takes the run's new blobs, whose manifests it has not
     * read, for garbage */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "TANDEM_TEST_GC_DELAY_MS=2000 '%s' gc '%s' --keep 1 > '%s/gc.out' 2>&1; "
             "echo \"exit $?\" >> '%s/gc.out'", tandem_bin(), f.store, f.dir, f.dir);
    pid_t gcp = start_sh(cmd);
    CHECK(gcp > 0, "fork");
    usleep(300000);
    live = start_run(&f, "TANDEM_TEST_STEP_DELAY_MS=200", NULL, NULL);
    int gst = 0;
    CHECK(waitpid(gcp, &gst, 0) == gcp, "wait for gc");
    kill(live, SIGTERM);
    int lst = wait_exit(live);
    CHECK(lst == 75 || lst == 0, "the run beside gc: exit %d", lst);
    char gcout[2048] = "";
    snprintf(cmd, sizeof cmd, "%s/gc.out", f.dir);
    read_all(cmd, gcout, sizeof gcout);
    CHECK(strstr(gcout, "a run took the lease while gc was collecting") && strstr(gcout, "exit 2"),
          "gc went on beside a run that started meanwhile: %s", gcout);
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0, "after gc stopped: %s", out);
    /* killed after a few deletions, then verified and resumed */
    snprintf(cmd, sizeof cmd, "TANDEM_TEST_KILL_AT=gc:3 '%s' gc '%s' --keep 1 > /dev/null 2>&1", tandem_bin(), f.store);
    int st = system(cmd);
    CHECK(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) == 137), "gc was not killed (status %d)", st);
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0, "after a killed gc: %s", out);
    /* what killed writes leave and nothing lists: an old .tmp-* goes, a young one (a write
     * that may be on its way) stays */
    snprintf(cmd, sizeof cmd, "head -c 5000 /dev/zero > '%s/blobs/.tmp-old1' && touch -d '2 hours ago' "
             "'%s/blobs/.tmp-old1' && head -c 7 /dev/zero > '%s/blobs/.tmp-young' && mkdir -p '%s/other' && "
             "touch -d '2 hours ago' '%s/other/.tmp-notours'", f.store, f.store, f.store, f.store, f.store);
    CHECK(system(cmd) == 0, "temporaries");
    CHECK(tandem_cmd(out, sizeof out, "gc '%s' --keep 1", f.store) == 0 &&
              strstr(out, "removed 1 stray temporary file (0.0 MB)"), "gc: %s", out);
    snprintf(cmd, sizeof cmd, "test ! -e '%s/blobs/.tmp-old1' && test -e '%s/blobs/.tmp-young' && rm '%s/blobs/.tmp-young' "
             "&& test -e '%s/other/.tmp-notours' && rm -r '%s/other'", f.store, f.store, f.store, f.store, f.store);
    CHECK(system(cmd) == 0, "gc removed the young temporary or one outside the store's folders, or kept the old one");
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0 && !strstr(out, "orphan"), "after gc: %s", out);
    snprintf(cmd, sizeof cmd, "ls '%s/states' | wc -l", f.store);
    FILE *p = popen(cmd, "r");
    int count = 0;
    CHECK(p && fscanf(p, "%d", &count) == 1, "count");
    pclose(p);
    CHECK(count <= 3, "%d states left (keep 1 + previous verified + pinned)", count);
    snprintf(cmd, sizeof cmd, "test -f '%s/states/4.mp'", f.store);
    CHECK(system(cmd) == 0, "the pinned state was deleted");
    CHECK(tandem_cmd(out, sizeof out, "alpha '%s' --verify", f.store) == 0, "alpha records touched: %s", out);
    CHECK(run_to_end(&f, NULL) == 0, "resume after gc");
    CHECK(hash_of(&f, h, sizeof h) == 0 && strcmp(h, ref) == 0, "after gc the run ended elsewhere:\n%s", h);
    test_rmtree(f.dir);
    free(f.dir);
    test_rmtree(r.dir);
    free(r.dir);
}

static int slurp_bytes(const char *path, void **data, size_t *n);

/* A state set aside whole (repair or a run moves a state it will not use, intact, to
 * quarantine/<epoch>/ for an audit) keeps its blobs through gc: gc took every blob no
 * state under states/ named, so the copy kept could no longer be loaded. The set-aside
 * copy here is moved by hand, as repair's set-aside leaves it; after gc --keep 1 each of
 * its chunks is still in blobs/ and hashes to its name. */
static void test_gc_keeps_set_aside_states(void) {
    fixture f;
    CHECK(fixture_audit(&f, "gc-aside", 4) == 0, "fixture");
    CHECK(run_to_end(&f, NULL) == 0, "run");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && mkdir -p quarantine/9/states && n=$(ls states | sort -n | head -n 1) && "
             "mv states/$n quarantine/9/states/$n && echo $n > '%s/aside'", f.store, f.dir);
    CHECK(system(cmd) == 0, "set a state aside");
    char name[64] = "", path[1200];
    snprintf(path, sizeof path, "%s/aside", f.dir);
    read_all(path, name, sizeof name);
    name[strcspn(name, "\n")] = '\0';
    CHECK(tandem_cmd(out, sizeof out, "gc '%s' --keep 1", f.store) == 0, "gc: %s", out);
    snprintf(path, sizeof path, "%s/quarantine/9/states/%s", f.store, name);
    void *data = NULL;
    size_t n = 0;
    rec_state s;
    tdm_err e = {0};
    int readable = slurp_bytes(path, &data, &n) == 0 && rec_state_decode(data, n, name, &s, &e) == 0;
    free(data);
    CHECK(readable, "%s: %s", path, e.msg);
    if (!readable) {
        test_rmtree(f.dir);
        free(f.dir);
        return;
    }
    size_t chunks = 0, gone = 0;
    for (size_t t = 0; t < s.ntensors; t++)
        for (size_t k = 0; k < s.tensors[t].nchunks; k++) {
            char hex[SHA256_HEX_LEN + 1];
            sha256_hex(&s.tensors[t].chunks[k], hex);
            snprintf(path, sizeof path, "%s/blobs/%s", f.store, hex);
            void *b = NULL;
            size_t bn = 0;
            sha256_digest d;
            chunks++;
            if (slurp_bytes(path, &b, &bn) == 0) {
                sha256(b, bn, &d);
                if (!sha256_equal(&d, &s.tensors[t].chunks[k])) gone++;
            } else {
                gone++;
            }
            free(b);
        }
    rec_state_free(&s);
    CHECK(chunks > 0 && gone == 0, "gc took %zu of the %zu blobs of the set-aside %s: %s", gone, chunks, name, out);
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0, "verify after gc: %s", out);
    test_rmtree(f.dir);
    free(f.dir);
}

/* HEAD lost and the newest manifest damaged, in a run that cannot replay from its seed
 * (its length was changed): gc --keep 1 keeps the newest state that verifies, not only the
 * newest (the damaged one), and the run heals from it (it used to be left with nothing). */
static void test_gc_without_head_keeps_a_verified_state(void) {
    fixture f;
    CHECK(fixture_audit(&f, "gc-nohead", 4) == 0, "fixture");
    CHECK(run_to_end(&f, NULL) == 0, "run");
    CHECK(tandem_cmd(out, sizeof out, "run '%s' --store '%s' --set run.episodes=6 --allow-change run.episodes "
                     "--quiet", f.config, f.store) == 0, "extend: %s", out);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && rm HEAD && n=$(ls states | sort -n | tail -n 1) && "
             "printf 'X' | dd of=states/$n bs=1 seek=50 conv=notrunc status=none", f.store);
    CHECK(system(cmd) == 0, "delete HEAD, damage the newest manifest");
    CHECK(tandem_cmd(out, sizeof out, "gc '%s' --keep 1", f.store) == 0, "gc: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "run '%s' --store '%s' --set run.episodes=6 --quiet", f.config, f.store) == 0 &&
              strstr(out, "the newest state that verifies"), "the run after gc: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0, "verify: %s", out);
    test_rmtree(f.dir);
    free(f.dir);
}

/* The bytes of `path` (malloc'd) into *data; -1 when it cannot be read. */
static int slurp_bytes(const char *path, void **data, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    rewind(fp);
    *data = malloc(len > 0 ? (size_t)len : 1);
    *n = *data && len > 0 ? fread(*data, 1, (size_t)len, fp) : 0;
    fclose(fp);
    return *data && (long)*n == len ? 0 : -1;
}

static int put_bytes(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    int bad = fwrite(data, 1, n, fp) != n;
    return fclose(fp) || bad ? -1 : 0;
}

/* Records edited as someone editing a store would, each encoder's self-digest intact:
 * the last α record's α_{t+1} off the simplex (mixture printed 1, 1, 1, exit 0), records
 * of five domains in a run of three (mixture printed '?'), mixture.mp's names permuted
 * (a final run took it as α*) or damaged (said without naming its store), a view of an
 * older state outside the tensor (verify passed what every load refuses). Each is now
 * refused or a fault, naming the object. */
static void test_edited_records_are_refused(void) {
    fixture f;
    CHECK(fixture_audit(&f, "edited", 2) == 0, "fixture");
    CHECK(run_to_end(&f, NULL) == 0, "run");
    char cmd[8192], path[1000], copy[900];
    snprintf(copy, sizeof copy, "%s/copy", f.dir);
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", f.store, copy);
    CHECK(system(cmd) == 0, "copy");
    void *d = NULL;
    size_t n = 0;
    tdm_err e = {0};
    /* 1. the last α record's α_{t+1} = 1, 1, 1 */
    snprintf(path, sizeof path, "%s/alpha/1.mp", f.store);
    rec_alpha a;
    CHECK(slurp_bytes(path, &d, &n) == 0 && rec_alpha_decode(d, n, path, &a, &e) == 0 && a.M == 3, "%s", e.msg);
    free(d);
    for (int m = 0; m < 3; m++) a.alpha_next[m] = 1.0;
    d = rec_alpha_encode(&a, &n);
    CHECK(d && put_bytes(path, d, n) == 0, "write %s", path);
    free(d);
    CHECK(tandem_cmd(out, sizeof out, "mixture '%s'", f.store) == 3 && strstr(out, "alpha/1.mp holds weights that do "
                     "not sum to 1"), "mixture of an edited record: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 3 && strstr(out, "do not sum to 1"), "verify: %s", out);
    /* 2. every record of five domains (still on the simplex, the chain relinked) */
    sha256_digest prev = {{0}};
    for (int t = 0; t < 2; t++) {
        snprintf(path, sizeof path, "%s/alpha/%d.mp", f.store, t);
        CHECK(slurp_bytes(path, &d, &n) == 0 && rec_alpha_decode(d, n, path, &a, &e) == 0, "%s", e.msg);
        free(d);
        a.M = 5;
        for (int m = 0; m < 5; m++) a.alpha[m] = a.alpha_next[m] = 0.2, a.loss_u[m] = a.loss_w[m] = 1.0;
        a.prev = prev;
        rec_alpha_hash(&a, &prev);
        d = rec_alpha_encode(&a, &n);
        CHECK(d && put_bytes(path, d, n) == 0, "write %s", path);
        free(d);
    }
    CHECK(tandem_cmd(out, sizeof out, "mixture '%s'", f.store) == 3 && strstr(out, "holds 5 domains but RUN pins 3"),
          "mixture of five-domain records: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "alpha '%s'", f.store) == 3 && strstr(out, "holds 5 domains"), "alpha: %s", out);
    /* 3a. a finished run extended since (killed in its extension): its mixture.mp is still
     * the alpha* of the chain as it stood at the finish, and a final run takes it */
    char ext[1000];
    snprintf(ext, sizeof ext, "%s/extended", f.dir);
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s' && TANDEM_TEST_KILL_AT=alpha:3 '%s' run '%s' --store '%s' --set "
             "run.episodes=5 --allow-change run.episodes --quiet > /dev/null 2>&1; test -f '%s/alpha/2.mp'", copy, ext,
             tandem_bin(), f.config, ext, ext);
    CHECK(system(cmd) == 0, "an extension killed midway");
    CHECK(tandem_cmd(out, sizeof out, "run '%s' --store '%s/final-ext' --set run.mode=fixed --set data.mixture=file "
                     "--set data.mixture_file='%s' --quiet", f.config, f.dir, ext) == 0,
          "a final run on an extended run's mixture: %s", out);
    /* 3. mixture.mp of the copy with two names swapped: a final run refuses it */
    snprintf(path, sizeof path, "%s/mixture.mp", copy);
    rec_mixture x;
    CHECK(slurp_bytes(path, &d, &n) == 0 && rec_mixture_decode(d, n, path, &x, &e) == 0 && x.M == 3, "%s", e.msg);
    free(d);
    char tmp[REC_NAME_MAX];
    memcpy(tmp, x.names[0], sizeof tmp);
    memcpy(x.names[0], x.names[1], sizeof tmp);
    memcpy(x.names[1], tmp, sizeof tmp);
    d = rec_mixture_encode(&x, &n);
    CHECK(d && put_bytes(path, d, n) == 0, "write %s", path);
    free(d);
    CHECK(tandem_cmd(out, sizeof out, "run '%s' --store '%s/final' --set run.mode=fixed --set data.mixture=file "
                     "--set data.mixture_file='%s' --quiet", f.config, f.dir, copy) == 3 &&
              strstr(out, "does not hold the alpha* of the run's alpha chain"), "a final run on it: %s", out);
    /* 3b. the copy's mixture.mp damaged (a byte flipped, its digest broken): the error names
     * that store and data.mixture_file, not "mixture.mp: corrupt" alone (read as the final
     * run's own store) */
    CHECK(slurp_bytes(path, &d, &n) == 0 && n > 8, "read %s", path);
    ((unsigned char *)d)[n / 2] ^= 4;
    CHECK(put_bytes(path, d, n) == 0, "write %s", path);
    free(d);
    char want[1100];
    snprintf(want, sizeof want, "data.mixture_file = %s: ", copy);
    CHECK(tandem_cmd(out, sizeof out, "run '%s' --store '%s/final-b' --set run.mode=fixed --set data.mixture=file "
                     "--set data.mixture_file='%s' --quiet", f.config, f.dir, copy) == 3 &&
              strstr(out, want) && strstr(out, "mixture.mp"), "a final run on a damaged mixture.mp: %s", out);
    /* 4. the copy's oldest state with a view far outside the tensor: a fault */
    snprintf(cmd, sizeof cmd, "ls '%s/states' | sort -n | head -n 1", copy);
    FILE *p = popen(cmd, "r");
    char name[64] = "";
    CHECK(p && fgets(name, sizeof name, p), "oldest state");
    if (p) pclose(p);
    name[strcspn(name, "\n")] = '\0';
    snprintf(path, sizeof path, "%s/states/%s", copy, name);
    rec_state s;
    char key[80];
    snprintf(key, sizeof key, "states/%s", name);
    CHECK(slurp_bytes(path, &d, &n) == 0 && rec_state_decode(d, n, key, &s, &e) == 0 && s.nviews > 0, "%s", e.msg);
    free(d);
    s.views[0].rows = (uint64_t)1 << 30;
    d = rec_state_encode(&s, &n);
    rec_state_free(&s);
    CHECK(d && put_bytes(path, d, n) == 0, "write %s", path);
    free(d);
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", copy) == 3 && strstr(out, "lies outside the parameter tensor"),
          "verify of a view outside the tensor: %s", out);
    test_rmtree(f.dir);
    free(f.dir);
}

/* Every blob damaged: eval and export have no state to read, and that is damage (exit 3),
 * not an empty run (it was exit 2 "holds no committed state", after a line saying the run
 * was being replayed from its seed). */
static void test_readers_of_a_damaged_store(void) {
    fixture f;
    CHECK(fixture_audit(&f, "readers", 2) == 0, "fixture");
    CHECK(run_to_end(&f, NULL) == 0, "run");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "for b in '%s'/blobs/*; do printf 'X' | dd of=\"$b\" bs=1 seek=3 conv=notrunc "
             "status=none; done", f.store);
    CHECK(system(cmd) == 0, "damage every blob");
    int rc = tandem_cmd(out, sizeof out, "eval '%s'", f.store);
    CHECK(rc == 3 && strstr(out, "no state of it can be loaded") && !strstr(out, "replaying the run"), "eval: exit %d: %.300s",
          rc, strstr(out, "tandem eval") ? strstr(out, "tandem eval") : out);
    CHECK(tandem_cmd(out, sizeof out, "export '%s' --out '%s/hf'", f.store, f.dir) == 3 && strstr(out, "no state of it"),
          "export: %s", out);
    test_rmtree(f.dir);
    free(f.dir);
}

/* export into a folder whose model.safetensors cannot be replaced: the folder's own
 * config.json stays (it was overwritten first, then the weights failed); a config.json that
 * is a link is replaced, not written through to the file it points at. */
static void test_export_replaces_nothing_on_failure(void) {
    fixture f;
    CHECK(fixture_audit(&f, "export-fail", 2) == 0, "fixture");
    CHECK(run_to_end(&f, NULL) == 0, "run");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && mkdir -p out/model.safetensors out2 && echo '{\"mine\": 1}' > out/config.json "
             "&& echo victim > victim.json && ln -s \"$PWD/victim.json\" out2/config.json", f.dir);
    CHECK(system(cmd) == 0, "setup");
    CHECK(tandem_cmd(out, sizeof out, "export '%s' --out '%s/out'", f.store, f.dir) == 2, "export: %s", out);
    snprintf(cmd, sizeof cmd, "grep -q mine '%s/out/config.json'", f.dir);
    CHECK(system(cmd) == 0, "a failed export replaced the folder's config.json");
    CHECK(tandem_cmd(out, sizeof out, "export '%s' --out '%s/out2'", f.store, f.dir) == 0, "export: %s", out);
    snprintf(cmd, sizeof cmd, "grep -qx victim '%s/victim.json' && test ! -L '%s/out2/config.json' && "
             "grep -q GPT2LMHeadModel '%s/out2/config.json'", f.dir, f.dir, f.dir);
    CHECK(system(cmd) == 0, "export wrote through a link at config.json");
    test_rmtree(f.dir);
    free(f.dir);
}

/* Answers that said something untrue: "unpinned" for a state never pinned, "no alpha
 * records yet" of a fixed-mixture run (it never has any), an empty chart for a store without
 * metrics rows (exit 0, as if the run learned nothing). */
static void test_small_answers_are_true(void) {
    fixture f;
    CHECK(fixture_audit(&f, "answers", 2) == 0, "fixture");
    CHECK(run_to_end(&f, "TANDEM_TEST_SIGNAL_AT=probe:1") == 75, "a run stopped before any row");
    CHECK(tandem_cmd(out, sizeof out, "metrics '%s' --plot '%s/m.svg'", f.store, f.dir) == 2 &&
              strstr(out, "no row to draw"), "metrics --plot without rows: %s", out);
    char path[900];
    snprintf(path, sizeof path, "%s/m.svg", f.dir);
    CHECK(access(path, F_OK) != 0, "an empty chart was written");
    CHECK(run_to_end(&f, NULL) == 0, "run");
    CHECK(tandem_cmd(out, sizeof out, "pin '%s' 4 --remove", f.store) == 0 && strstr(out, "was not pinned"),
          "pin --remove of an unpinned state: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "run '%s' --store '%s/fixed' --set run.mode=fixed --quiet", f.config, f.dir) == 0,
          "a fixed run: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "mixture '%s/fixed'", f.dir) == 2 && strstr(out, "fixed-mixture run"),
          "mixture of a fixed run: %s", out);
    test_rmtree(f.dir);
    free(f.dir);
}

static void test_eval_reports_average(void) {
    fixture f;
    CHECK(fixture_audit(&f, "eval", 4) == 0, "fixture");
    CHECK(run_to_end(&f, NULL) == 0, "run");
    CHECK(tandem_cmd(out, sizeof out, "eval '%s' --split val --json", f.store) == 0, "eval: %s", out);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' eval '%s' --split val --json | /usr/bin/python3 -c 'import json,sys,math; d=json.load(sys.stdin); "
             "l=[v[\"loss\"] for v in d[\"domains\"].values()]; "
             "assert len(l)==3 and abs(d[\"average_ppl\"]-math.exp(sum(l)/3))<1e-9*d[\"average_ppl\"] and all(0<x<6 for x in l)'",
             tandem_bin(), f.store);
    CHECK(system(cmd) == 0, "Average is not exp(mean loss): %s", out);
    CHECK(tandem_cmd(out, sizeof out, "eval '%s' --split nope", f.store) == 2, "bad split accepted");
    /* progress on a terminal only: under script(1) stderr is a terminal and the status
     * line shows; through a pipe it does not */
    char bin[2048], bin_raw[4096];
    CHECK(realpath(tandem_bin(), bin_raw) != NULL && strlen(bin_raw) < sizeof bin, "realpath");
    snprintf(bin, sizeof bin, "%.2000s", bin_raw);
    snprintf(cmd, sizeof cmd, "script -qec \"'%s' eval '%s' --split val\" /dev/null 2>&1 | grep -c 'evaluating d1 on the val split'",
             bin, f.store);
    CHECK(test_sh(cmd, out, 64) == 0 && atoi(out) >= 1, "no progress on a terminal: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "eval '%s' --split val", f.store) == 0 && !strstr(out, "evaluating") &&
              !strchr(out, '\r'),
          "progress went to a pipe: %s", out);
    /* --max-tokens N: at most N targets per domain, in whole windows of train.seq (32) */
    snprintf(cmd, sizeof cmd, "'%s' eval '%s' --split val --max-tokens 70 --json | /usr/bin/python3 -c 'import json,sys; "
             "d=json.load(sys.stdin); t=[v[\"tokens\"] for v in d[\"domains\"].values()]; assert t==[64,64,64], t'",
             tandem_bin(), f.store);
    CHECK(system(cmd) == 0, "--max-tokens 70 did not take two windows of 32 per domain");
    CHECK(tandem_cmd(out, sizeof out, "eval '%s' --max-tokens 0", f.store) == 2 && strstr(out, "evaluate nothing"),
          "--max-tokens 0: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "eval '%s' --max-tokens 31", f.store) == 2 && strstr(out, "train.seq = 32"),
          "--max-tokens below one window: %s", out);
    /* a count as gen-corpus takes one (2M was "not a non-negative integer"), and past 2^64
     * said as such */
    snprintf(cmd, sizeof cmd, "t() { /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); "
             "print([v[\"tokens\"] for v in d[\"domains\"].values()])'; }; '%s' eval '%s' --split val --max-tokens "
             "0.07k >/dev/null 2>&1; test $? = 2 && a=$('%s' eval '%s' --split val --max-tokens 2M --json | t) && "
             "b=$('%s' eval '%s' --split val --json | t) && test -n \"$a\" && test \"$a\" = \"$b\"",
             tandem_bin(), f.store, tandem_bin(), f.store, tandem_bin(), f.store);
    CHECK(system(cmd) == 0, "--max-tokens 2M was not taken as a count");
    CHECK(tandem_cmd(out, sizeof out, "eval '%s' --max-tokens 18446744073709551616", f.store) == 2 &&
              strstr(out, "below 2^64"),
          "--max-tokens past 2^64: %s", out);
    /* the kept states by run position, and where a missing one sends the user */
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", f.store) == 0 && strstr(out, "at run positions"), "status: %s", out);
    snprintf(cmd, sizeof cmd, "'%s' status '%s' --json | /usr/bin/python3 -c 'import json,sys,os; d=json.load(sys.stdin); "
             "s=sorted(int(n[:-3]) for n in os.listdir(sys.argv[1] + \"/states\")); "
             "assert d[\"size\"][\"state_seqs\"]==s and len(s)==4, (d[\"size\"], s)' '%s'",
             tandem_bin(), f.store, f.store);
    CHECK(system(cmd) == 0, "status --json does not list the kept states");
    CHECK(tandem_cmd(out, sizeof out, "eval '%s' --state 3", f.store) == 2 && strstr(out, "tandem status"),
          "a missing --state: %s", out);
    test_rmtree(f.dir);
    free(f.dir);
}


/* ------------------------------------------------------------------ RUN damage */

static int file_size(const char *path) {
    struct stat st;
    return stat(path, &st) ? -1 : (int)st.st_size;
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Restores the store from its copy STORE.orig. */
static int restore(const fixture *f) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s.orig' '%s'", f->store, f->store, f->store);
    return system(cmd) == 0 ? 0 : -1;
}

/* XORs byte `off` of RUN with 0x20 (truncate >= 0: cut RUN to that size instead; -2:
 * delete it). */
static int damage_run(const fixture *f, int off, int truncate_to) {
    char path[700];
    snprintf(path, sizeof path, "%s/RUN", f->store);
    if (truncate_to == -2) return unlink(path);
    if (truncate_to >= 0) return truncate(path, truncate_to);
    FILE *fp = fopen(path, "r+b");
    if (!fp) return -1;
    int c = fseek(fp, off, SEEK_SET) == 0 ? fgetc(fp) : EOF;
    int rc = c == EOF || fseek(fp, off, SEEK_SET) || fputc(c ^ 0x20, fp) == EOF ? -1 : 0;
    return fclose(fp) || rc ? -1 : 0;
}

/* Copies RUN's bytes (or notes its absence: n = -1). */
static void run_bytes(const fixture *f, char *buf, int cap, int *n) {
    char path[700];
    snprintf(path, sizeof path, "%s/RUN", f->store);
    FILE *fp = fopen(path, "rb");
    *n = fp ? (int)fread(buf, 1, (size_t)cap, fp) : -1;
    if (fp) fclose(fp);
}

/* The store of a run stopped midway (HEAD, states, alpha records, a released lease),
 * copied to STORE.orig. */
static int stopped_run(fixture *f, const char *tag) {
    if (fixture_audit(f, tag, 6)) return -1;
    if (run_to_end(f, "TANDEM_TEST_SIGNAL_AT=free:5") != 75) return -1;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s.orig'", f->store, f->store);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_run_damage_verify_agrees_with_run(void) {
    fixture f;
    CHECK(stopped_run(&f, "rundmg") == 0, "stopped run");
    char path[700];
    snprintf(path, sizeof path, "%s/RUN", f.store);
    int n = file_size(path);
    CHECK(n > 100, "RUN is %d bytes", n);
    /* every damage: -2 delete, >= 0 truncate to that size, -1 with an offset: a flip */
    struct { int trunc, off; } cases[] = {
        {-2, 0}, {0, 0}, {1, 0}, {n / 2, 0}, {n - 1, 0},
        {-1, 0}, {-1, 1}, {-1, 5}, {-1, n / 8}, {-1, n / 4}, {-1, n / 3}, {-1, n / 2},
        {-1, 2 * n / 3}, {-1, 3 * n / 4}, {-1, n - 40}, {-1, n - 9}, {-1, n - 2}, {-1, n - 1},
        {-1, -1}, /* inside the run id (found below): a label, which both may accept */
    };
    static char orig[1 << 16];
    int no;
    run_bytes(&f, orig, sizeof orig, &no);
    for (int k = 0; k + 4 < no; k++)
        if (!memcmp(orig + k, "run-", 4)) {
            cases[sizeof cases / sizeof *cases - 1].off = k + 5;
            break;
        }
    CHECK(cases[sizeof cases / sizeof *cases - 1].off > 0, "no run id in RUN");
    int refused = 0, accepted = 0;
    static char log[16384], before[1 << 16], after[1 << 16];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char what[64];
        if (cases[i].trunc == -2) snprintf(what, sizeof what, "RUN deleted");
        else if (cases[i].trunc >= 0) snprintf(what, sizeof what, "RUN truncated to %d bytes", cases[i].trunc);
        else snprintf(what, sizeof what, "RUN byte %d flipped", cases[i].off);
        CHECK(restore(&f) == 0, "restore");
        CHECK(damage_run(&f, cases[i].off, cases[i].trunc) == 0, "%s", what);
        int nb, na;
        run_bytes(&f, before, sizeof before, &nb);
        int v = tandem_cmd(out, sizeof out, "verify '%s'", f.store);
        int faulted = v == 3 && strstr(out, "FAULT") && strstr(out, "RUN");
        CHECK(v == 0 || faulted, "%s: verify exit %d: %s", what, v, out);
        int st = tandem_cmd(out, sizeof out, "status '%s'", f.store);
        CHECK(st == (faulted ? 3 : 0), "%s: status exit %d, verify %d: %s", what, st, v, out);
        CHECK(!faulted || strstr(out, "RUN       FAULT"), "%s: status does not say so: %s", what, out);
        int r = run_to_end(&f, NULL);
        read_all(f.log, log, sizeof log);
        /* verify reports a fault exactly when run refuses */
        CHECK(r == (faulted ? 3 : 0), "%s: run exit %d while verify exit %d: %s", what, r, v, log);
        if (faulted) {
            CHECK(strstr(log, "RUN") && strstr(log, "restore"), "%s: run's message: %s", what, log);
            /* refused means untouched: no new RUN, no recorded change */
            run_bytes(&f, after, sizeof after, &na);
            CHECK(na == nb && (nb < 0 || memcmp(before, after, (size_t)nb) == 0),
                  "%s: run changed RUN (%d -> %d bytes)", what, nb, na);
            snprintf(path, sizeof path, "%s/configs", f.store);
            CHECK(!exists(path), "%s: run recorded a config change", what);
            refused++;
        } else {
            accepted++;
        }
        CHECK(cases[i].trunc == -1 || faulted, "%s passed verify: %s", what, out);
    }
    printf("  RUN damage: %d refused by verify and run alike, %d accepted by both (flips in "
           "labels: run id, creation time, domain names)\n", refused, accepted);
    CHECK(refused >= 12, "only %d of the damages were refused", refused);
    test_rmtree(f.dir);
    free(f.dir);
}

static void test_run_missing_is_never_a_new_run(void) {
    fixture f;
    CHECK(stopped_run(&f, "runmiss") == 0, "stopped run");
    char path[700];
    snprintf(path, sizeof path, "%s/RUN", f.store);
    static char log[16384];
    /* another config on a store that lost RUN: exit 3 naming RUN, not a config change
     * (2), not nondeterminism (4), not a new run */
    CHECK(unlink(path) == 0, "delete RUN");
    int r = wait_exit(start_run(&f, NULL, "--set", "optim.lr=1e-3"));
    read_all(f.log, log, sizeof log);
    CHECK(r == 3 && strstr(log, "RUN is missing") && strstr(log, "restore"), "exit %d: %s", r, log);
    snprintf(path, sizeof path, "%s/RUN", f.store);
    CHECK(!exists(path), "a RUN was created");
    snprintf(path, sizeof path, "%s/configs", f.store);
    CHECK(!exists(path), "a config change was recorded");
    /* restored from the copy, the run resumes and finishes */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp '%s.orig/RUN' '%s/RUN'", f.store, f.store);
    CHECK(system(cmd) == 0, "restore RUN");
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0, "verify after the repair: %s", out);
    CHECK(run_to_end(&f, NULL) == 0, "resume after the repair");
    /* a finished store without RUN: still no new run */
    snprintf(cmd, sizeof cmd, "rm '%s/RUN'", f.store);
    CHECK(system(cmd) == 0, "delete RUN");
    r = run_to_end(&f, NULL);
    read_all(f.log, log, sizeof log);
    CHECK(r == 3 && strstr(log, "RUN is missing"), "finished store: exit %d: %s", r, log);
    snprintf(path, sizeof path, "%s/RUN", f.store);
    CHECK(!exists(path), "a RUN was created on the finished store");
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 3 && strstr(out, "RUN is missing"),
          "verify: %s", out);
    test_rmtree(f.dir);
    free(f.dir);
}

/* repair --apply against a run that takes the lease while it works: the plan shown was
 * made before repair held the lease; a run that takes the lease over, heals the hole
 * itself and finishes must not be rolled back by that old plan (it was: the finished
 * run's alpha records set aside, HEAD moved back, verify exit 3). */
static void test_repair_against_a_run(void) {
    fixture f, r;
    CHECK(stopped_run(&f, "repair-race") == 0, "stopped run");
    CHECK(fixture_audit(&r, "repair-race-ref", 6) == 0 && run_to_end(&r, NULL) == 0, "reference run");
    char ref[1024], h[1024], path[800];
    CHECK(hash_of(&r, ref, sizeof ref) == 0, "reference hash");
    snprintf(path, sizeof path, "%s/alpha/1.mp", f.store);
    CHECK(unlink(path) == 0, "delete an alpha record");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "TANDEM_TEST_REPAIR_DELAY_MS=2500 '%s' repair '%s' --apply > '%s/repair.out' 2>&1; "
             "echo \"exit $?\" >> '%s/repair.out'", tandem_bin(), f.store, f.dir, f.dir);
    pid_t rp = start_sh(cmd);
    CHECK(rp > 0, "fork");
    /* repair holds the lease and waits (its plan made, TANDEM_TEST_REPAIR_DELAY_MS) */
    CHECK(wait_lease_held(f.store) == 0, "repair never held the lease");
    CHECK(run_to_end(&f, NULL) == 0, "the run beside repair");
    int st = 0;
    CHECK(waitpid(rp, &st, 0) == rp, "wait for repair");
    char rout[4096] = "";
    snprintf(path, sizeof path, "%s/repair.out", f.dir);
    read_all(path, rout, sizeof rout);
    CHECK(strstr(rout, "exit 3") && (strstr(rout, "changed since the plan was made") || strstr(rout, "fenced out")),
          "repair went on after a run took the lease: %s", rout);
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0, "after repair and run: %s", out);
    CHECK(hash_of(&f, h, sizeof h) == 0 && strcmp(h, ref) == 0, "the finished run was changed:\n%s", h);
    test_rmtree(f.dir);
    free(f.dir);
    test_rmtree(r.dir);
    free(r.dir);
}

/* repair --apply killed after each thing it sets aside, then run again: the second
 * repair finishes what the first began — verify finds no fault and a third has nothing to
 * do — and the run resumes to the uninterrupted run's bits. Killed after it had set aside
 * the states that vouch past the break, before the records past it, the second one moved
 * HEAD only: a hole with records past it, which verify called a fault and repair "nothing
 * to repair" (a hunt). */
static void test_repair_killed_midway_finishes(void) {
    fixture f, r;
    CHECK(stopped_run(&f, "repair-killed") == 0, "stopped run");
    CHECK(fixture_audit(&r, "repair-killed-ref", 6) == 0 && run_to_end(&r, NULL) == 0, "reference run");
    char ref[1024], h[1024], path[800], out[4096];
    CHECK(hash_of(&r, ref, sizeof ref) == 0, "reference hash");
    snprintf(path, sizeof path, "%s/alpha/1.mp", f.store);
    CHECK(unlink(path) == 0, "delete an alpha record");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rm -rf '%s.orig' && cp -a '%s' '%s.orig'", f.store, f.store, f.store);
    CHECK(system(cmd) == 0, "keep the damaged store");
    CHECK(tandem_cmd(out, sizeof out, "repair '%s'", f.store) == 0, "plan: %s", out);
    int items = 0;
    for (const char *p = out; (p = strstr(p, "set aside ")); p++) items++;
    CHECK(items >= 2, "the plan sets aside %d objects: %s", items, out);
    for (int k = 1; k <= items; k++) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s.orig' '%s'", f.store, f.store, f.store);
        CHECK(system(cmd) == 0, "restore the damaged store");
        /* the exit status through a shell that outlives the killed repair */
        snprintf(cmd, sizeof cmd, "TANDEM_TEST_KILL_AT=repair-aside:%d '%s' repair '%s' --apply >/dev/null 2>&1; "
                 "echo $?", k, tandem_bin(), f.store);
        int rc = test_sh(cmd, out, sizeof out);
        CHECK(rc == 0 && atoi(out) == 128 + SIGKILL, "killed after %d set aside: exit %s", k, out);
        rc = tandem_cmd(out, sizeof out, "repair '%s' --apply", f.store);
        CHECK(rc == 0, "repair after one killed after %d: exit %d: %s", k, rc, out);
        rc = tandem_cmd(out, sizeof out, "verify '%s'", f.store);
        CHECK(rc == 0, "killed after %d, repaired again: verify exit %d: %s", k, rc, out);
        rc = tandem_cmd(out, sizeof out, "repair '%s'", f.store);
        CHECK(rc == 0 && strstr(out, "nothing to repair"), "killed after %d, repaired again: %s", k, out);
    }
    CHECK(run_to_end(&f, NULL) == 0, "the run after the repairs");
    CHECK(hash_of(&f, h, sizeof h) == 0 && strcmp(h, ref) == 0, "ended elsewhere:\n%s", h);
    test_rmtree(f.dir);
    free(f.dir);
    test_rmtree(r.dir);
    free(r.dir);
}

/* A stop signal to gc or repair --apply frozen before one of its deletions (TERM, as a
 * scheduler's or a timeout's): it ends there, exit 75 naming what it did; gc's lines
 * reached its log (they were in stdio's buffer, lost with the process), repair released
 * the lease (it kept it, and gc refused the store for a day); nothing is damaged, and the
 * same command again finishes. Before: both died by the signal (exit 143). */
static void test_gc_and_repair_stop_on_a_signal(void) {
    fixture f, r;
    char cmd[4096], out[8192], path[800], h0[1024], h[1024];
    /* gc: frozen before its 3rd deletion, then TERM */
    CHECK(fixture_audit(&f, "gc-stop", 8) == 0 && run_to_end(&f, NULL) == 0, "finished run");
    CHECK(hash_of(&f, h0, sizeof h0) == 0, "hash");
    snprintf(path, sizeof path, "%s/gc.out", f.dir);
    snprintf(cmd, sizeof cmd, "TANDEM_TEST_STOP_AT=gc-delete:3 exec '%s' gc '%s' --keep 1 >'%s' 2>&1", tandem_bin(),
             f.store, path);
    pid_t p = start_sh(cmd);
    CHECK(p > 0 && wait_stopped(p), "gc never froze before its 3rd deletion");
    kill(p, SIGTERM);
    kill(p, SIGCONT);
    int st = 0;
    CHECK(waitpid(p, &st, 0) == p, "wait for gc");
    read_all(path, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 75, "gc after TERM: %s: %s",
          WIFSIGNALED(st) ? "killed by the signal" : "exit", out);
    CHECK(count_lines(out) >= 4 && strstr(out, "delete states/") && strstr(out, "stopped by a signal") &&
              strstr(out, "run tandem gc again"),
          "gc's lines and its stop: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0, "verify after a stopped gc: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "gc '%s' --keep 1", f.store) == 0, "gc again: %s", out);
    CHECK(hash_of(&f, h, sizeof h) == 0 && strcmp(h, h0) == 0, "gc changed the run:\n%s", h);
    test_rmtree(f.dir);
    free(f.dir);
    /* repair --apply: frozen after its first set-aside, then TERM */
    CHECK(stopped_run(&f, "repair-stop") == 0, "stopped run");
    CHECK(fixture_audit(&r, "repair-stop-ref", 6) == 0 && run_to_end(&r, NULL) == 0, "reference run");
    CHECK(hash_of(&r, h0, sizeof h0) == 0, "reference hash");
    snprintf(path, sizeof path, "%s/alpha/1.mp", f.store);
    CHECK(unlink(path) == 0, "delete an alpha record");
    snprintf(path, sizeof path, "%s/repair.out", f.dir);
    snprintf(cmd, sizeof cmd, "TANDEM_TEST_STOP_AT=repair-aside:1 exec '%s' repair '%s' --apply >'%s' 2>&1",
             tandem_bin(), f.store, path);
    p = start_sh(cmd);
    CHECK(p > 0 && wait_stopped(p), "repair never froze after its first set-aside");
    kill(p, SIGTERM);
    kill(p, SIGCONT);
    CHECK(waitpid(p, &st, 0) == p, "wait for repair");
    read_all(path, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 75, "repair after TERM: %s: %s",
          WIFSIGNALED(st) ? "killed by the signal" : "exit", out);
    CHECK(strstr(out, "set aside states/") && strstr(out, "stopped by a signal after setting aside 1 of") &&
              strstr(out, "repair --apply again"),
          "repair's plan and its stop: %s", out);
    snprintf(cmd, sizeof cmd, "'%s' status '%s' --json | /usr/bin/python3 -c 'import json,sys; "
             "print(json.load(sys.stdin)[\"lease\"][\"state\"])'", tandem_bin(), f.store);
    CHECK(test_sh(cmd, out, sizeof out) == 0 && !strncmp(out, "released", 8), "the lease after a stopped repair: %s",
          out);
    CHECK(tandem_cmd(out, sizeof out, "repair '%s' --apply", f.store) == 0, "repair again: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0, "verify after repair: %s", out);
    CHECK(run_to_end(&f, NULL) == 0, "the run after the repair");
    CHECK(hash_of(&f, h, sizeof h) == 0 && strcmp(h, h0) == 0, "ended elsewhere:\n%s", h);
    test_rmtree(f.dir);
    free(f.dir);
    test_rmtree(r.dir);
    free(r.dir);
}

/* The oldest state of a file store (gc deletes it first), or -1. */
static long oldest_state(const char *store) {
    char path[800];
    long oldest = -1;
    snprintf(path, sizeof path, "%s/states", store);
    DIR *d = opendir(path);
    for (struct dirent *de; d && (de = readdir(d));) {
        char *end;
        long seq = strtol(de->d_name, &end, 10);
        if (end != de->d_name && !strcmp(end, ".mp") && (oldest < 0 || seq < oldest)) oldest = seq;
    }
    if (d) closedir(d);
    return oldest;
}

/* Two gcs and a pin: gc A frozen before it deletes the oldest state, which is pinned then
 * ("pinned", exit 0); A deletes it, sees the pin and is frozen before it puts it back; gc B
 * runs meanwhile, the pinned state not listed. B keeps the unreferenced blobs and says why
 * (before: it deleted the pinned state's blobs, A put back a manifest without them, and
 * the state pin had answered for could not be loaded: verify's fault, a hunt); A ends
 * with the state back, whole. */
static void test_two_gcs_and_a_pin(void) {
    fixture f;
    char cmd[4096], path[800], out[8192];
    CHECK(fixture_audit(&f, "gc2-pin", 8) == 0 && run_to_end(&f, NULL) == 0, "finished run");
    long oldest = oldest_state(f.store);
    CHECK(oldest >= 0, "no state");
    snprintf(path, sizeof path, "%s/gc-a.out", f.dir);
    snprintf(cmd, sizeof cmd, "TANDEM_TEST_STOP_AT=gc-delete:1 TANDEM_TEST_STOP2_AT=gc-put-back:1 exec '%s' gc '%s' "
             "--keep 1 >'%s' 2>&1", tandem_bin(), f.store, path);
    pid_t a = start_sh(cmd);
    CHECK(a > 0 && wait_stopped(a), "gc A never froze before its first deletion");
    int prc = tandem_cmd(out, sizeof out, "pin '%s' %ld", f.store, oldest);
    CHECK(prc == 0 && strstr(out, "pinned"), "pin: exit %d: %s", prc, out);
    kill(a, SIGCONT);
    CHECK(wait_stopped(a), "gc A never froze before its put-back");
    char bout[8192];
    int brc = tandem_cmd(bout, sizeof bout, "gc '%s' --keep 1", f.store);
    kill(a, SIGCONT);
    int st = 0;
    CHECK(waitpid(a, &st, 0) == a && WIFEXITED(st) && WEXITSTATUS(st) == 0, "gc A");
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0, "verify after two gcs and a pin: %s", out);
    CHECK(brc == 0 && strstr(bout, "keep unreferenced blobs") && strstr(bout, "pins a state that is not there"),
          "gc B beside A's put-back: exit %d: %s", brc, bout);
    CHECK(tandem_cmd(out, sizeof out, "export '%s' --state %ld --out '%s/x'", f.store, oldest, f.dir) == 0,
          "the pinned state does not export: %s", out);
    test_rmtree(f.dir);
    free(f.dir);
}

/* tandem pin while gc collects: gc read the pins when it began, and deleted a state that
 * pin, meanwhile, had answered "pinned" for. gc now checks the pin as it deletes. */
static void test_pin_during_gc(void) {
    fixture f;
    CHECK(fixture_audit(&f, "pin-gc", 8) == 0 && run_to_end(&f, NULL) == 0, "finished run");
    char cmd[4096], path[800];
    snprintf(cmd, sizeof cmd, "TANDEM_TEST_GC_DELAY_MS=500 '%s' gc '%s' --keep 1 > '%s/gc.out' 2>&1",
             tandem_bin(), f.store, f.dir);
    /* the oldest state, which gc deletes first */
    long oldest = oldest_state(f.store);
    CHECK(oldest >= 0 && oldest < 24, "no state older than 24 in %s", path);
    pid_t gp = start_sh(cmd);
    CHECK(gp > 0, "fork");
    /* gc has begun with the oldest states (waited for, not slept: gc's start-up on a loaded
     * machine is no fixed time), and states/24.mp is still to come */
    snprintf(path, sizeof path, "%s/states/%ld.mp", f.store, oldest);
    CHECK(wait_gone(path) == 0, "gc never deleted %s", path);
    int prc = tandem_cmd(out, sizeof out, "pin '%s' 24", f.store);
    int st = 0;
    CHECK(waitpid(gp, &st, 0) == gp && WIFEXITED(st) && WEXITSTATUS(st) == 0, "gc");
    snprintf(path, sizeof path, "%s/states/24.mp", f.store);
    CHECK(prc == 0 && strstr(out, "pinned states/24.mp"), "pin: exit %d: %s", prc, out);
    CHECK(exists(path), "states/24.mp was pinned while gc collected, and gc deleted it");
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0, "verify: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "export '%s' --state 24 --out '%s/x24'", f.store, f.dir) == 0,
          "the pinned state does not export: %s", out);
    test_rmtree(f.dir);
    free(f.dir);
}


/* Deletes from store `copy` the blobs that state `seq` of store `from` names and no other
 * state of `from` does (what retention deletes with it); *removed of them. 0, or -1. */
static int delete_unique_blobs(const char *from, const char *copy, uint64_t seq, int *removed) {
    static unsigned char buf[1 << 20];
    char sdir[700], path[1200];
    snprintf(sdir, sizeof sdir, "%s/states", from);
    DIR *d = opendir(sdir);
    if (!d) return -1;
    sha256_digest *others = NULL, *mine = NULL;
    size_t no = 0, nm = 0;
    int rc = 0;
    for (struct dirent *de; !rc && (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        size_t n;
        rec_state s;
        tdm_err e;
        snprintf(path, sizeof path, "%s/%s", sdir, de->d_name);
        if (read_file(path, buf, sizeof buf, &n) || rec_state_decode(buf, n, NULL, &s, &e)) {
            rc = -1;
            break;
        }
        int own = s.seq == seq;
        for (size_t t = 0; t < s.ntensors; t++)
            for (size_t c = 0; c < s.tensors[t].nchunks; c++) {
                sha256_digest **v = own ? &mine : &others;
                size_t *k = own ? &nm : &no;
                sha256_digest *grown = realloc(*v, (*k + 1) * sizeof **v);
                if (!grown) rc = -1;
                else (*v = grown)[(*k)++] = s.tensors[t].chunks[c];
            }
        rec_state_free(&s);
    }
    closedir(d);
    *removed = 0;
    for (size_t i = 0; !rc && i < nm; i++) {
        int shared = 0;
        for (size_t j = 0; j < no && !shared; j++) shared = sha256_equal(&mine[i], &others[j]);
        char hex[65];
        sha256_hex(&mine[i], hex);
        snprintf(path, sizeof path, "%s/blobs/%s", copy, hex);
        if (!shared && unlink(path) == 0) (*removed)++;
    }
    free(mine);
    free(others);
    return rc;
}

/* Two gcs frozen before deleting the oldest state (both found it unpinned), which is
 * pinned then; gc A deletes it, sees the pin and is frozen before putting it back; gc B's
 * deletion finds it gone: B looks at the pin too and puts the state back (a review: B
 * took the state for deleted, and its blob pass deleted the pinned state's blobs). Both
 * end, the state whole. */
static void test_two_gcs_and_a_pin_either_puts_back(void) {
    fixture f;
    char cmd[4096], pa[800], pb[800], out[8192];
    CHECK(fixture_audit(&f, "gc2-pin-b", 8) == 0 && run_to_end(&f, NULL) == 0, "finished run");
    long oldest = oldest_state(f.store);
    CHECK(oldest >= 0, "no state");
    snprintf(pa, sizeof pa, "%s/gc-a.out", f.dir);
    snprintf(pb, sizeof pb, "%s/gc-b.out", f.dir);
    snprintf(cmd, sizeof cmd, "TANDEM_TEST_STOP_AT=gc-delete:1 TANDEM_TEST_STOP2_AT=gc-put-back:1 exec '%s' gc '%s' "
             "--keep 1 >'%s' 2>&1", tandem_bin(), f.store, pa);
    pid_t a = start_sh(cmd);
    CHECK(a > 0 && wait_stopped(a), "gc A never froze before its first deletion");
    snprintf(cmd, sizeof cmd, "TANDEM_TEST_STOP_AT=gc-delete:1 exec '%s' gc '%s' --keep 1 >'%s' 2>&1", tandem_bin(),
             f.store, pb);
    pid_t b = start_sh(cmd);
    CHECK(b > 0 && wait_stopped(b), "gc B never froze before its first deletion");
    int prc = tandem_cmd(out, sizeof out, "pin '%s' %ld", f.store, oldest);
    CHECK(prc == 0 && strstr(out, "pinned"), "pin: exit %d: %s", prc, out);
    kill(a, SIGCONT);
    CHECK(wait_stopped(a), "gc A never froze before its put-back");
    kill(b, SIGCONT);
    int sb = 0, sa = 0;
    CHECK(waitpid(b, &sb, 0) == b, "wait for gc B");
    kill(a, SIGCONT);
    CHECK(waitpid(a, &sa, 0) == a, "wait for gc A");
    CHECK(WIFEXITED(sa) && WEXITSTATUS(sa) == 0 && WIFEXITED(sb) && WEXITSTATUS(sb) == 0, "gc A %d, gc B %d",
          WIFEXITED(sa) ? WEXITSTATUS(sa) : -1, WIFEXITED(sb) ? WEXITSTATUS(sb) : -1);
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0, "verify: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "export '%s' --state %ld --out '%s/x'", f.store, oldest, f.dir) == 0,
          "the pinned state does not export: %s", out);
    test_rmtree(f.dir);
    free(f.dir);
}

/* A pin of a state that is gone (set aside by hand here; a repair or a killed pin does the
 * same): verify notes it, gc deletes no unreferenced blob while it stands and says how
 * to remove it, and once it is removed gc deletes them again. */
static void test_pin_of_a_state_gone(void) {
    fixture f;
    char path[800], out[8192];
    CHECK(fixture_audit(&f, "pin-gone", 8) == 0 && run_to_end(&f, NULL) == 0, "finished run");
    long oldest = oldest_state(f.store);
    CHECK(oldest >= 0, "no state");
    CHECK(tandem_cmd(out, sizeof out, "pin '%s' %ld", f.store, oldest) == 0, "pin: %s", out);
    snprintf(path, sizeof path, "%s/states/%ld.mp", f.store, oldest);
    CHECK(unlink(path) == 0, "remove the pinned state");
    int rc = tandem_cmd(out, sizeof out, "verify '%s'", f.store);
    CHECK(rc == 0 && strstr(out, "which is not there") && strstr(out, "--remove"), "verify: exit %d: %s", rc, out);
    rc = tandem_cmd(out, sizeof out, "gc '%s' --keep 1", f.store);
    CHECK(rc == 0 && strstr(out, "keep unreferenced blobs") && strstr(out, " 0 blobs"), "gc with the pin: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "pin '%s' %ld --remove", f.store, oldest) == 0, "pin --remove: %s", out);
    rc = tandem_cmd(out, sizeof out, "gc '%s' --keep 1", f.store);
    CHECK(rc == 0 && !strstr(out, "keep unreferenced blobs") && !strstr(out, " 0 blobs"), "gc after: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0, "verify after: %s", out);
    test_rmtree(f.dir);
    free(f.dir);
}

/* gc frozen before it deletes the oldest state; meanwhile a run takes the lease (a resume
 * that extends the run) and that state's own blobs go (as a live run's retention deletes
 * a state and its blobs). gc deletes the state, finds the lease taken, and does not put
 * back a manifest whose blobs are gone: it says so, and verify finds nothing wrong
 * (before: "put back ..., so nothing the run uses is gone", and verify's fault of a state
 * without its blobs on a finished run, a hunt). */
static void test_gc_puts_back_no_state_without_blobs(void) {
    fixture f;
    char cmd[4096], path[800], out[8192];
    CHECK(fixture_audit(&f, "gc-noback", 8) == 0 && run_to_end(&f, NULL) == 0, "finished run");
    long oldest = oldest_state(f.store);
    CHECK(oldest >= 0, "no state");
    snprintf(path, sizeof path, "%s/gc.out", f.dir);
    snprintf(cmd, sizeof cmd, "TANDEM_TEST_STOP_AT=gc-delete:1 exec '%s' gc '%s' --keep 1 >'%s' 2>&1", tandem_bin(),
             f.store, path);
    pid_t a = start_sh(cmd);
    CHECK(a > 0 && wait_stopped(a), "gc never froze before its first deletion");
    int removed = 0;
    CHECK(delete_unique_blobs(f.store, f.store, (uint64_t)oldest, &removed) == 0 && removed > 0,
          "remove the oldest state's own blobs (%d)", removed);
    CHECK(tandem_cmd(out, sizeof out, "run '%s' --store '%s' --quiet --set run.episodes=9 --allow-change run.episodes",
                     f.config, f.store) == 0, "the run extended (it takes the lease): %s", out);
    kill(a, SIGCONT);
    int st = 0;
    CHECK(waitpid(a, &st, 0) == a, "wait for gc");
    read_all(path, out, sizeof out);
    CHECK(tandem_cmd(out + strlen(out), sizeof out - strlen(out), "verify '%s'", f.store) == 0,
          "verify after gc raced the run: %s", out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2 && strstr(out, "was not put back"), "gc: %s", out);
    test_rmtree(f.dir);
    free(f.dir);
}

/* A live run's retention deletes its oldest state — the manifest, then its blobs — after
 * its HEAD move. verify and repair, having read that manifest just before, found its blobs
 * missing: verify said FAULT (exit 3) on a healthy store, and `repair --apply` planned to
 * set the state aside, took the live run's lease for it and fenced the run out (a hunt of
 * readers beside writers). Each now sees the manifest gone and counts the state as
 * vanished. Frozen after reading the oldest manifest (TANDEM_TEST_STOP_AT=state-read:1),
 * the state is deleted as retention deletes it, and they go on. */
static void test_readers_outlast_retention(void) {
    fixture f;
    CHECK(fixture_audit(&f, "retrace", 6) == 0, "fixture");
    CHECK(run_to_end(&f, NULL) == 0, "the run");
    char sdir[700], path[1200], cmd[4096], res[900];
    snprintf(sdir, sizeof sdir, "%s/states", f.store);
    uint64_t oldest = UINT64_MAX;
    DIR *d = opendir(sdir);
    for (struct dirent *de; d && (de = readdir(d));)
        if (de->d_name[0] != '.' && strtoull(de->d_name, NULL, 10) < oldest) oldest = strtoull(de->d_name, NULL, 10);
    if (d) closedir(d);
    CHECK(oldest != UINT64_MAX, "no state");
    static const char *const verbs[] = {"verify", "repair --apply"};
    for (int k = 0; k < 2; k++) {
        char copy[900];
        snprintf(copy, sizeof copy, "%s/copy%d", f.dir, k); /* each on a store of its own */
        snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", f.store, copy);
        CHECK(system(cmd) == 0, "copy");
        snprintf(res, sizeof res, "%s/out%d.txt", f.dir, k);
        snprintf(cmd, sizeof cmd, "TANDEM_TEST_STOP_AT=state-read:1 exec '%s' %s '%s' > '%s' 2>&1", tandem_bin(),
                 verbs[k], copy, res);
        pid_t p = start_sh(cmd);
        CHECK(p > 0 && wait_stopped(p), "%s never stopped after its first manifest", verbs[k]);
        /* retention: the manifest, then the blobs no other state names */
        snprintf(path, sizeof path, "%s/states/%llu.mp", copy, (unsigned long long)oldest);
        CHECK(unlink(path) == 0, "unlink %s", path);
        int removed = 0;
        CHECK(delete_unique_blobs(f.store, copy, oldest, &removed) == 0 && removed > 0,
              "no blob of states/%llu.mp is its own", (unsigned long long)oldest);
        kill(p, SIGCONT);
        int rc = wait_exit(p);
        read_all(res, out, sizeof out);
        CHECK(rc == 0 && !strstr(out, "FAULT") && !strstr(out, "set aside"),
              "%s with the oldest state deleted under it: exit %d: %s", verbs[k], rc, out);
    }
    test_rmtree(f.dir);
    free(f.dir);
}

/* What a live run passes through between two of its writes, while it holds the lease: no
 * HEAD yet at its first commit (the manifest written, HEAD not yet), no mixture.mp yet at
 * its end. verify said FAULT for each (exit 3 beside a healthy run: a hunt); now a note.
 * And `gc --dry-run`, meeting a state that a run committed between its two listings, said
 * "refusing to delete blobs" (exit 3) although it deletes nothing: now it keeps the blobs
 * out of its list and says why. */
static void test_live_windows_are_no_faults(void) {
    static const char *const at[] = {"head-put:1", "mixture:1"};
    static const char *const says[] = {"HEAD is not there yet", "mixture.mp is not there yet"};
    for (int k = 0; k < 2; k++) {
        fixture f;
        CHECK(fixture_audit(&f, k ? "livewin-end" : "livewin-first", 4) == 0, "fixture");
        char env[64];
        snprintf(env, sizeof env, "TANDEM_TEST_STOP_AT=%s", at[k]);
        pid_t p = start_run(&f, env, NULL, NULL);
        CHECK(p > 0 && wait_stopped(p), "the run never stopped at %s", at[k]);
        int rc = tandem_cmd(out, sizeof out, "verify '%s'", f.store);
        kill(p, SIGCONT);
        int rr = wait_exit(p);
        CHECK(rc == 0 && strstr(out, says[k]) && !strstr(out, "FAULT"), "verify beside the run at %s: exit %d: %s",
              at[k], rc, out);
        CHECK(rr == 0 && tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0, "the run %d, then verify: %s", rr,
              out);
        if (k == 1) {
            /* gc --dry-run, a state committed between its listings */
            char res[900], cmd[4096], from[1200], to[1200];
            snprintf(res, sizeof res, "%s/gc.txt", f.dir);
            snprintf(cmd, sizeof cmd, "TANDEM_TEST_STOP_AT=gc-relist:1 exec '%s' gc '%s' --keep 1 --dry-run > '%s' 2>&1",
                     tandem_bin(), f.store, res);
            pid_t g = start_sh(cmd);
            CHECK(g > 0 && wait_stopped(g), "gc --dry-run never stopped before its second listing");
            snprintf(from, sizeof from, "%s/states/4.mp", f.store);
            snprintf(to, sizeof to, "%s/states/400.mp", f.store);
            snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
            CHECK(system(cmd) == 0, "a state committed meanwhile");
            kill(g, SIGCONT);
            int rg = wait_exit(g);
            read_all(res, out, sizeof out);
            CHECK(rg == 0 && strstr(out, "keep unreferenced blobs") && !strstr(out, "refusing"),
                  "gc --dry-run with a state committed between its listings: exit %d: %s", rg, out);
        }
        test_rmtree(f.dir);
        free(f.dir);
    }
}

/* ------------------------------------------------------------------ stale leases */

/* Replaces the store's lease with one of (host, pid, time), held. */
static int write_lease(const fixture *f, const char *host, unsigned long long pid, double t) {
    rec_lease l = {.epoch = 7, .pid = pid, .attempt = 0, .time = t, .released = 0};
    snprintf(l.host, sizeof l.host, "%s", host);
    size_t n;
    void *data = rec_lease_encode(&l, &n);
    char path[700];
    snprintf(path, sizeof path, "%s/lease", f->store);
    FILE *fp = fopen(path, "wb");
    int rc = fp && fwrite(data, 1, n, fp) == n ? 0 : -1;
    if (fp && fclose(fp)) rc = -1;
    free(data);
    return rc;
}

/* One rule for "no run here": a missing path, an empty folder and a folder that holds
 * something else are exit 3 for every command that reads a run, and none of them writes. */
static void test_no_run_is_exit_3_everywhere(void) {
    char *dir = test_tmpdir("norun");
    char other[700], empty[700], missing[700], outdir[760];
    snprintf(other, sizeof other, "%s/other", dir);
    snprintf(empty, sizeof empty, "%s/empty", dir);
    snprintf(missing, sizeof missing, "%s/missing", dir);
    snprintf(outdir, sizeof outdir, "%s/export", dir);
    CHECK(mkdir(other, 0777) == 0 && mkdir(empty, 0777) == 0, "mkdir");
    char note[760];
    snprintf(note, sizeof note, "%s/notes.txt", other);
    CHECK(write_file(note, "not a run\n") == 0, "write");
    static const char *const cmds[][2] = {{"status", ""}, {"verify", ""},      {"hash", ""},
                                          {"alpha", ""},  {"mixture", ""},     {"metrics", ""},
                                          {"eval", ""},   {"gc", " --keep 1"}, {"pin", " 4"},
                                          {"repair", ""}, {"repair", " --apply"}};
    const char *paths[] = {other, empty, missing};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
        for (int p = 0; p < 3; p++) {
            int rc = tandem_cmd(out, sizeof out, "%s '%s'%s", cmds[i][0], paths[p], cmds[i][1]);
            CHECK(rc == 3, "tandem %s%s on %s: exit %d (want 3): %s", cmds[i][0], cmds[i][1], paths[p], rc, out);
        }
    int rc = tandem_cmd(out, sizeof out, "export '%s' --out '%s'", other, outdir);
    CHECK(rc == 3 && access(outdir, F_OK) != 0, "export of a folder without a run: exit %d: %s", rc, out);
    CHECK(access(missing, F_OK) != 0, "a read created %s", missing);
    char ls[1600], listing[256];
    snprintf(ls, sizeof ls, "ls -A '%s'; ls -A '%s'", other, empty);
    CHECK(test_sh(ls, listing, sizeof listing) == 0 && !strcmp(listing, "notes.txt\n"), "the folders changed: %s",
          listing);
    test_rmtree(dir);
    free(dir);
}

static void test_stale_lease(void) {
    fixture f;
    CHECK(fixture_audit(&f, "lease", 6) == 0, "fixture");
    char host[256] = "";
    gethostname(host, sizeof host);
    host[63] = '\0';
    /* a live holder: held, gc refuses */
    pid_t pid = start_run(&f, "TANDEM_TEST_STEP_DELAY_MS=100", NULL, NULL);
    double t0 = now_s();
    int held = 0;
    while (!held && now_s() - t0 < 60) {
        usleep(100000);
        held = tandem_cmd(out, sizeof out, "status '%s'", f.store) == 0 && strstr(out, "held since");
    }
    CHECK(held && strstr(out, "alive on this host"), "the live run's lease: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "gc '%s' --keep 1", f.store) == 2 && strstr(out, "holds the lease"),
          "gc beside a live writer: %s", out);
    /* killed: the holder is gone, provably (same host, no such pid) */
    kill(pid, SIGKILL);
    CHECK(wait_exit(pid) == 128 + SIGKILL, "kill");
    char want[128];
    snprintf(want, sizeof want, "no process %d on this host", (int)pid);
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", f.store) == 0 && strstr(out, "STALE") &&
              strstr(out, want) && strstr(out, host) && strstr(out, "ago"),
          "status after the kill: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "gc '%s' --keep 1", f.store) == 0 && strstr(out, "stale") &&
              strstr(out, want), "gc after the kill: %s", out);
    /* a pid that is alive but started after the lease was taken (this test's, with a
     * lease from long before it started): reused, stale */
    CHECK(write_lease(&f, host, (unsigned long long)getpid(), (double)time(NULL) - 1e9) == 0, "lease");
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", f.store) == 0 && strstr(out, "STALE") &&
              strstr(out, "now another process"), "a reused pid: %s", out);
    /* the same pid with a lease taken after it started: alive, held, however old */
    CHECK(write_lease(&f, host, (unsigned long long)getpid(), (double)time(NULL)) == 0, "lease");
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", f.store) == 0 && strstr(out, "held since") &&
              !strstr(out, "STALE"), "a live pid: %s", out);
    /* another host: held while it may be alive, stale after a day without a sign of life */
    fixture g;
    CHECK(fixture_audit(&g, "lease2", 6) == 0, "fixture");
    CHECK(run_to_end(&g, "TANDEM_TEST_KILL_AT=alpha:1") == 128 + SIGKILL, "killed before any record");
    CHECK(write_lease(&g, "elsewhere.example", 4242, (double)time(NULL) - 600) == 0, "lease");
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", g.store) == 0 && strstr(out, "held since") &&
              strstr(out, "elsewhere.example") && !strstr(out, "STALE"), "a recent foreign lease: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "gc '%s' --keep 1", g.store) == 2, "gc beside a foreign holder: %s", out);
    CHECK(write_lease(&g, "elsewhere.example", 4242, (double)time(NULL) - 3 * 86400) == 0, "lease");
    /* its signs of life are judged on the store's clock too (the younger age believed): a
     * lease written just now by its holder is a sign of life, whatever time it states */
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", g.store) == 0 && strstr(out, "held since") &&
              !strstr(out, "STALE"), "a foreign lease stamped 3 days ago, written now: %s", out);
    char touch[1600];
    snprintf(touch, sizeof touch, "find '%s' -type f -exec touch -d '3 days ago' {} +", g.store);
    CHECK(system(touch) == 0, "touch");
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", g.store) == 0 && strstr(out, "STALE") &&
              strstr(out, "no sign of life"), "a silent foreign lease: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "gc '%s' --keep 1", g.store) == 0, "gc after a silent day: %s", out);
    /* a lease whose time is Inf (a hostile or damaged record): no sign of life, not "held,
     * last seen 0 s ago" forever (its file's own age, once old, is no sign either) */
    CHECK(write_lease(&g, "elsewhere.example", 4242, INFINITY) == 0 && system(touch) == 0, "lease");
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", g.store) == 0 && strstr(out, "STALE") &&
              strstr(out, "no sign of life"), "a foreign lease of time Inf: %s", out);
    /* the next run takes a stale lease over and finishes */
    CHECK(run_to_end(&f, NULL) == 0, "resume after a stale lease");
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", f.store) == 0 && strstr(out, "released"), "%s", out);
    test_rmtree(f.dir);
    free(f.dir);
    test_rmtree(g.dir);
    free(g.dir);
}

/* A lease records its holder's PID namespace and boot (util/pidns.h): its pid is judged
 * (kill, /proc) only from the same ones. From another PID namespace on the same host name
 * (a container sharing the node's name) a live holder's pid does not exist here: it was
 * called "gone", and gc went ahead beside it. Now such a holder is judged as one on
 * another host (held while it shows signs of life); in its own namespace a dead one is
 * still stale, and a lease without the fields (an older writer's) is judged as before. */
static int write_lease_start(const fixture *f, const char *host, unsigned long long pid, double t,
                             const pidns_id *ns, int has_start, uint64_t start_ticks) {
    rec_lease l = {.epoch = 7, .pid = pid, .attempt = 0, .time = t, .released = 0};
    snprintf(l.host, sizeof l.host, "%s", host);
    l.has_start = has_start, l.start_ticks = start_ticks;
    if (ns && ns->has_ns) l.has_pid_ns = 1, l.pid_ns = ns->ns;
    if (ns && ns->has_boot) l.has_boot_id = 1, snprintf(l.boot_id, sizeof l.boot_id, "%s", ns->boot);
    size_t n;
    void *data = rec_lease_encode(&l, &n);
    char path[700];
    snprintf(path, sizeof path, "%s/lease", f->store);
    FILE *fp = fopen(path, "wb");
    int rc = fp && fwrite(data, 1, n, fp) == n ? 0 : -1;
    if (fp && fclose(fp)) rc = -1;
    free(data);
    return rc;
}

static int write_lease_ns(const fixture *f, const char *host, unsigned long long pid, double t,
                          const pidns_id *ns) {
    return write_lease_start(f, host, pid, t, ns, 0, 0);
}

static void test_lease_pid_namespace(void) {
    pidns_id me;
    pidns_self(&me);
    if (!me.has_ns || !me.has_boot) {
        TEST_SKIP("no /proc/self/ns/pid or boot_id here");
    }
    fixture f;
    CHECK(fixture_audit(&f, "leasens", 6) == 0, "fixture");
    CHECK(run_to_end(&f, "TANDEM_TEST_KILL_AT=alpha:2") == 128 + SIGKILL, "killed midway");
    char host[256] = "";
    gethostname(host, sizeof host);
    host[63] = '\0';
    /* a pid that is certainly dead here: a child that has exited and been reaped */
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    CHECK(dead > 0 && wait_exit(dead) == 0, "fork");
    char gone[128];
    snprintf(gone, sizeof gone, "no process %d on this host", (int)dead);
    double now = (double)time(NULL);
    /* the killed writer's lease records its namespace and boot (this test's: the same) */
    char path[700], data[4096];
    snprintf(path, sizeof path, "%s/lease", f.store);
    FILE *fp = fopen(path, "rb");
    size_t n = fp ? fread(data, 1, sizeof data, fp) : 0;
    if (fp) fclose(fp);
    rec_lease got;
    tdm_err e;
    CHECK(n > 0 && rec_lease_decode(data, n, "lease", &got, &e) == 0 && got.has_pid_ns && got.pid_ns == me.ns &&
              got.has_boot_id && !strcmp(got.boot_id, me.boot) && got.has_start,
          "the writer's lease does not record its PID namespace, boot and start");
    /* same namespace, same boot, no such pid: stale, as before */
    CHECK(write_lease_ns(&f, host, (unsigned long long)dead, now, &me) == 0, "lease");
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", f.store) == 0 && strstr(out, "STALE") && strstr(out, gone),
          "a dead holder in this namespace: %s", out);
    /* an older writer's lease (no namespace, no boot): judged as before */
    CHECK(write_lease_ns(&f, host, (unsigned long long)dead, now, NULL) == 0, "lease");
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", f.store) == 0 && strstr(out, "STALE") && strstr(out, gone),
          "an old lease of a dead holder: %s", out);
    /* another PID namespace on this host name: the pid means nothing here; held, and gc
     * refuses, while the holder shows signs of life */
    pidns_id other = me;
    other.ns = me.ns + 1;
    CHECK(write_lease_ns(&f, host, (unsigned long long)dead, now, &other) == 0, "lease");
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", f.store) == 0 && strstr(out, "held since") &&
              !strstr(out, "STALE") && strstr(out, "another PID namespace") && !strstr(out, gone),
          "a holder in another PID namespace: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "gc '%s' --keep 1", f.store) == 2 && strstr(out, "holds the lease") &&
              strstr(out, "another PID namespace"), "gc beside a holder in another PID namespace: %s", out);
    /* nor is a live pid here, started after the lease was taken, "now another process" */
    CHECK(write_lease_ns(&f, host, (unsigned long long)getpid(), now - 1e9, &other) == 0, "lease");
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", f.store) == 0 && strstr(out, "held since") &&
              !strstr(out, "now another process"), "a reused-looking pid of another namespace: %s", out);
    /* another boot (this machine since rebooted, or another of the same name): the same */
    pidns_id boot = me;
    snprintf(boot.boot, sizeof boot.boot, "00000000-0000-0000-0000-000000000000");
    CHECK(write_lease_ns(&f, host, (unsigned long long)dead, now, &boot) == 0, "lease");
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", f.store) == 0 && strstr(out, "held since") &&
              strstr(out, "earlier boot"), "a holder of another boot: %s", out);
    /* the json says the same */
    CHECK(tandem_cmd(out, sizeof out, "status '%s' --json", f.store) == 0 && strstr(out, "\"lease\":{\"state\":\"held\""),
          "status --json of a holder of another boot: %s", out);
    /* this host booted again after the holder's last sign of life (a node that crashed
     * and came back): its holder is gone, stale at once (it read as held for 24 h) */
    char bt[32];
    snprintf(bt, sizeof bt, "%.0f", now + 3600);
    setenv("TANDEM_TEST_BOOT_TIME", bt, 1);
    int st1 = tandem_cmd(out, sizeof out, "status '%s'", f.store);
    unsetenv("TANDEM_TEST_BOOT_TIME");
    CHECK(st1 == 0 && strstr(out, "STALE") && strstr(out, "has booted again since the holder's last sign of life"),
          "a holder of a boot before this one: %s", out);
    snprintf(bt, sizeof bt, "%.0f", now - 3600);
    setenv("TANDEM_TEST_BOOT_TIME", bt, 1);
    st1 = tandem_cmd(out, sizeof out, "status '%s'", f.store);
    unsetenv("TANDEM_TEST_BOOT_TIME");
    CHECK(st1 == 0 && strstr(out, "held since"), "a holder of another boot with signs of life since this one: %s", out);
    /* a lease that records its holder's start (clock ticks since the boot): a live holder
     * whose lease time reads as before its start — the wall clock stepped forward since the
     * lease was taken (chrony, a VM resumed) — is its holder, alive, and gc refuses (it was
     * "now another process", and gc collected the blobs of the live writer's commit: a
     * clock hunt); the same pid with another start is another process */
    uint64_t ticks;
    CHECK(pidns_start_ticks(0, &ticks, NULL, 0) == 0, "this process's start");
    CHECK(write_lease_start(&f, host, (unsigned long long)getpid(), now - 3600, &me, 1, ticks) == 0, "lease");
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", f.store) == 0 && strstr(out, "held since") &&
              strstr(out, "alive on this host") && !strstr(out, "STALE"), "a live holder after a clock step: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "gc '%s' --keep 1", f.store) == 2 && strstr(out, "holds the lease"),
          "gc beside a live holder after a clock step: %s", out);
    CHECK(write_lease_start(&f, host, (unsigned long long)getpid(), now, &me, 1, ticks + 1) == 0, "lease");
    CHECK(tandem_cmd(out, sizeof out, "status '%s'", f.store) == 0 && strstr(out, "STALE") &&
              strstr(out, "now another process"), "a pid with another start: %s", out);
    /* a run takes the lease over all the same (the lease is no lock) and finishes */
    CHECK(write_lease_ns(&f, host, (unsigned long long)dead, now, &other) == 0, "lease");
    CHECK(run_to_end(&f, NULL) == 0, "resume after a lease of another namespace");
    test_rmtree(f.dir);
    free(f.dir);
}

/* Which objects belong to a run with changes at positions 10 and 35 (generation 2): each
 * older generation up to its own end, the current one anywhere, a newer one nowhere. The
 * old rule (every older generation up to the newest change) took generation 0 at 20. */
static void test_generation_ends(void) {
    ckpt_gens g = {0};
    CHECK(ckpt_gens_add(&g, 10) == 0 && ckpt_gens_add(&g, 35) == 0 && g.n == 2, "gens");
    static const struct {
        int has_gen;
        uint64_t gen, seq;
        int belongs;
    } cases[] = {
        {1, 0, 10, 1}, {1, 0, 11, 0}, {1, 0, 20, 0}, {1, 0, 35, 0}, {1, 1, 11, 1}, {1, 1, 35, 1},
        {1, 1, 36, 0}, {1, 2, 3, 1},  {1, 2, 99, 1}, {1, 3, 40, 0}, {0, 0, 99, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        CHECK(ckpt_gen_belongs(cases[i].has_gen, cases[i].gen, cases[i].seq, &g) == cases[i].belongs,
              "generation %llu at %llu: belongs %d, want %d", (unsigned long long)cases[i].gen,
              (unsigned long long)cases[i].seq, !cases[i].belongs, cases[i].belongs);
    ckpt_gens copy;
    CHECK(ckpt_gens_copy(&copy, &g) == 0 && copy.n == 2 && copy.end[1] == 35 && ckpt_gens_newest(&copy) == 35,
          "copy");
    ckpt_gens none = {0};
    CHECK(ckpt_gen_belongs(1, 0, 1000, &none) && !ckpt_gen_belongs(1, 1, 0, &none) && ckpt_gens_newest(&none) == 0,
          "no changes");
    ckpt_gens_free(&copy);
    ckpt_gens_free(&g);
}

/* alpha* of a domain held at 1: nine shares of 1/9 add up to 1.0000000000000002 in
 * doubles, and mixture.mp's own [0, 1] check refused the run's alpha* (verify: damaged;
 * compare and data.mixture_file = STORE: exit 3). It is at most 1, and mixture.mp
 * round-trips. */
static void test_mixture_of_a_weight_held_at_one(void) {
    for (size_t n = 81; n <= 200; n++) {
        audit_chain c = {.n = n};
        c.rec = calloc(n, sizeof *c.rec);
        CHECK(c.rec, "out of memory");
        for (size_t t = 0; t < n; t++) {
            c.rec[t].M = 2;
            c.rec[t].alpha_next[0] = 0, c.rec[t].alpha_next[1] = 1;
        }
        rec_mixture x;
        audit_mixture(&c, 0.1, &x);
        free(c.rec);
        snprintf(x.names[0], sizeof x.names[0], "a");
        snprintf(x.names[1], sizeof x.names[1], "b");
        CHECK(x.alpha[1] <= 1.0 && x.alpha[1] > 1 - 1e-12 && x.alpha[0] == 0.0, "%zu records: alpha* %.17g %.17g", n,
              x.alpha[0], x.alpha[1]);
        size_t len;
        void *data = rec_mixture_encode(&x, &len);
        rec_mixture back;
        tdm_err e;
        int rc = data ? rec_mixture_decode(data, len, "mixture.mp", &back, &e) : -1;
        free(data);
        CHECK(rc == 0, "%zu records: mixture.mp does not decode: %s", n, rc > 0 ? e.msg : "no encoding");
    }
}

int main(void) {
    char *dir = test_tmpdir("audit-corpus");
    snprintf(g_corpus, sizeof g_corpus, "%s", dir);
    free(dir);
    uint64_t tr[3] = {20000, 10000, 5000};
    tdm_err e = {0};
    if (corpus_fixture(g_corpus, 3, tr, 3, 3000, NULL, &e)) {
        fprintf(stderr, "corpus: %s\n", e.msg);
        return 1;
    }
    RUN(test_generation_ends);
    RUN(test_alpha_listing_and_mixture);
    RUN(test_mixture_of_a_weight_held_at_one);
    RUN(test_alpha_verify_names_the_damage);
    RUN(test_status_and_verify);
    RUN(test_gc_killed_midway_loses_nothing);
    RUN(test_gc_keeps_set_aside_states);
    RUN(test_gc_without_head_keeps_a_verified_state);
    RUN(test_edited_records_are_refused);
    RUN(test_readers_of_a_damaged_store);
    RUN(test_export_replaces_nothing_on_failure);
    RUN(test_small_answers_are_true);
    RUN(test_eval_reports_average);
    RUN(test_run_damage_verify_agrees_with_run);
    RUN(test_run_missing_is_never_a_new_run);
    RUN(test_no_run_is_exit_3_everywhere);
    RUN(test_repair_against_a_run);
    RUN(test_repair_killed_midway_finishes);
    RUN(test_gc_and_repair_stop_on_a_signal);
    RUN(test_two_gcs_and_a_pin);
    RUN(test_gc_puts_back_no_state_without_blobs);
    RUN(test_two_gcs_and_a_pin_either_puts_back);
    RUN(test_pin_of_a_state_gone);
    RUN(test_pin_during_gc);
    RUN(test_stale_lease);
    RUN(test_readers_outlast_retention);
    RUN(test_live_windows_are_no_faults);
    RUN(test_lease_pid_namespace);
    test_rmtree(g_corpus);
    return test_summary("test_audit");
}
