/* test_audit.c — auditing a run from its store: `tandem alpha` (table, CSV, JSON,
 * --verify, --plot), `mixture`, `status`, `verify`, `gc` (killed midway, then resumed)
 * and `eval`, each driven through the binary ($TANDEM_BIN). */
#include <math.h>
#include <stdarg.h>

#include "storage/records.h"
#include "tests/corpus_fixture.h"
#include "tests/runner_fixture.h"
#include "tests/test.h"

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
             "tandem: {K: 2, E: 2, lr_alpha: 0.5}\n"
             "optim: {lr: 3e-3}\n"
             "checkpoint: {every_episodes: 1, chunk_kib: 16}\n",
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

static void test_alpha_listing_and_mixture(void) {
    fixture f;
    CHECK(fixture_audit(&f, "audit", 10) == 0, "fixture");
    CHECK(run_to_end(&f, NULL) == 0, "run");
    CHECK(tandem_cmd(out, sizeof out, "alpha '%s'", f.store) == 0, "alpha: %s", out);
    CHECK(count_lines(out) == 1 + 10 * 3, "table rows: %d", count_lines(out));
    CHECK(strstr(out, "d0") && strstr(out, "d2") && strstr(out, "loss_w"), "table: %.300s", out);
    CHECK(tandem_cmd(out, sizeof out, "alpha '%s' --format csv", f.store) == 0, "csv");
    CHECK(!strncmp(out, "episode,domain,alpha,alpha_next,loss_u,loss_w,delta\n", 52), "csv header");
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
        snprintf(key, sizeof key, "  d%d: ", m);
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
    usleep(400000);
    CHECK(tandem_cmd(out, sizeof out, "gc '%s' --keep 1", f.store) == 2 && strstr(out, "holds the lease"),
          "gc ran beside a live writer: %s", out);
    kill(live, SIGTERM);
    CHECK(wait_exit(live) == 75, "live run stop");
    /* killed after a few deletions, then verified and resumed */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "TANDEM_TEST_KILL_AT=gc:3 '%s' gc '%s' --keep 1 > /dev/null 2>&1", tandem_bin(), f.store);
    int st = system(cmd);
    CHECK(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) == 137), "gc was not killed (status %d)", st);
    CHECK(tandem_cmd(out, sizeof out, "verify '%s'", f.store) == 0, "after a killed gc: %s", out);
    CHECK(tandem_cmd(out, sizeof out, "gc '%s' --keep 1", f.store) == 0, "gc: %s", out);
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
    test_rmtree(f.dir);
    free(f.dir);
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
    RUN(test_alpha_listing_and_mixture);
    RUN(test_alpha_verify_names_the_damage);
    RUN(test_status_and_verify);
    RUN(test_gc_killed_midway_loses_nothing);
    RUN(test_eval_reports_average);
    test_rmtree(g_corpus);
    return test_summary("test_audit");
}
