/* test_chaos.c — the chaos harness (issue 13, item 6): the ledger's guarantees tried as
 * a hostile operator would, on the file store and on S3 (s3rver behind
 * tests/s3/proxy.py). Every case ends in one of four classes:
 *
 *   healed    the run went on by itself (exit 0) and ended where an undisturbed run ends
 *             (the same `tandem hash`), with `verify` and `alpha --verify` clean
 *   refused   it stopped with a clear error (exit 2/3, naming the object and what to do;
 *             or verify named a fault the run did not need to touch) and the documented
 *             way back (`tandem repair --apply`, or restoring the object) brought it to
 *             the same end
 *   stranded  no documented way back: an exit 4 or 1, a crash, a sanitizer report, a
 *             hang, an unclear error, or a way back that does not work
 *   lost      it "healed" but ended elsewhere, or with verify faults no repair clears; a
 *             job killed by a signal it should have caught; a store changed by a read
 *
 * Families (docs/reliability.md has the table of a full run):
 *   kill storm       SIGKILL at random moments, inside commits and inside the retention
 *                    pass after a commit (TANDEM_TEST_KILL_AT),
 *                    many lives, then a resume: file store and S3
 *   stale writer     writer A frozen (SIGSTOP) at many HEAD positions and moments, writer
 *                    B takes the lease over (half with an allowed config change), A let go
 *                    at several delays: A exits 3 (or 0 when it had nothing left to
 *                    write), B finishes, a rerun reports the finished run, verify and the
 *                    chain pass, and with the same config B ends at the reference hash
 *   start-up signal  each stop signal (util/stop_signals.h) 0-2 s after the run catches SIGTERM (and one
 *                    pending across exec): exit 75, the resume ends at the reference
 *   corruption       object kind (HEAD, lease, RUN, configs/0.mp, states, blobs, alpha
 *                    records inside and past what the newest state vouches for, pins,
 *                    mixture.mp, data.mp) x damage (delete, truncate to 0 and to half, a byte
 *                    flipped at the start, middle and end, swapped with the same object of
 *                    another run); verify must report a fault exactly when the run meets
 *                    the object and cannot use it
 *   S3 fault storm   the proxy's 500/503/429, resets, closes, truncated bodies, stalls and
 *                    lost answers during whole runs (and a kill among them)
 *   disk full        the file store on a tmpfs too small for the run (sizes from a few KiB
 *                    to more than it needs; root only), then grown: a clear stop, a resume
 *   fuzzed config    random mutations of a valid YAML config: exit 0 (or 75 when it runs
 *                    long) or 2 naming a key or a line, the store untouched when refused
 *   fuzzed records   random byte flips, truncations and deletions of random objects of a
 *                    stopped run before a resume: never a crash, classified as above
 *   read-only        status, verify, hash, alpha, mixture, eval, repair (and gc, pin) on a
 *                    missing path, an empty directory, a missing S3 prefix and a damaged
 *                    store: nothing is created or changed
 *
 * The kill storms, stale writers and start-up signals run again with the snapshot streamed
 * (rows "stream") and under the DMO's default hold, pinned probes then full ones (rows
 * "held", "held-s3"; the others set alpha_cut: any, every episode running the twins).
 *
 * CHAOS_SCALE (default 1) multiplies the number of cases: 1 is the bounded version that
 * `make test` runs in both builds; `make chaos` runs 10 on the rel build. CHAOS_SEED fixes
 * the random choices (timings vary anyway). The S3 families FAIL when the server cannot
 * start. Any stranded or lost case, or any disagreement of verify with the run, fails.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ledger/keys.h"
#include "ledger/records.h"
#include "storage/store.h"
#include "tests/corpus_fixture.h"
#include "tests/runner_fixture.h"
#include "tests/s3_env.h"
#include "tests/test.h"

static int g_scale = 1;
static char g_root[600], g_tmp[600], g_corpus[700], g_srv[700];
static int g_s3_up;
static uint64_t g_rng;
static char g_ref16[1024]; /* 16 episodes, a state every 2: storms, writers, signals */
static char g_ref16_held[1024]; /* the same under the default hold (g_held) */
static char g_ref12[1024]; /* 12 episodes, a state every 4: the corruption scenarios */
static double g_t_file = 0.5, g_t_s3 = 3; /* an undisturbed run's time, seconds */

/* The longest a single `tandem run` may take before the harness calls it hung. */
#define LIFE_LIMIT_S 600.0

/* ------------------------------------------------------------------ small helpers */

static uint64_t rnd(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return g_rng;
}
static uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }
static double rnd_unit(void) { return (double)(rnd() >> 11) * 0x1.0p-53; }

static void sleep_s(double s) {
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

/* Runs a shell command; its exit status (128 when it did not exit). */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* A fresh directory under the harness's scratch directory (caller frees). */
static char *case_dir(const char *tag) {
    size_t len = strlen(g_tmp) + strlen(tag) + 16;
    char *p = malloc(len);
    if (!p) abort();
    snprintf(p, len, "%s/%s-XXXXXX", g_tmp, tag);
    if (!mkdtemp(p)) {
        perror("mkdtemp");
        abort();
    }
    return p;
}

/* The first line of text that is not empty, for one-line reports. */
static void first_line(const char *text, char *out, size_t cap) {
    while (*text == '\n') text++;
    size_t n = strcspn(text, "\n");
    if (n >= cap) n = cap - 1;
    memcpy(out, text, n);
    out[n] = '\0';
}

/* The first line of a log that is not an ordinary line of a resume (see log_noticed). */
static void first_news(const char *log, char *out, size_t cap) {
    const char *p = log;
    while (*p && (!strncmp(p, "tandem: taking over the lease ", 30) || *p == '\n')) {
        p += strcspn(p, "\n");
        if (*p) p++;
    }
    first_line(p, out, cap);
}

/* A sanitizer (ASan, UBSan, LSan) spoke in this output. */
static int sanitizer_report(const char *log) {
    return strstr(log, "Sanitizer") || strstr(log, "runtime error:");
}

/* ------------------------------------------------------------------ the table */

enum { C_HEALED, C_REFUSED, C_STRANDED, C_LOST, C_N };
static const char *const CLASS_NAMES[C_N] = {"healed", "refused", "STRANDED", "LOST"};

/* One row of the table: a family on a store. `disagree` counts cases where verify and the
 * run disagreed about an object, `bad` other broken promises (a stale writer's exit
 * code, a sanitizer report in a read); both fail the family like stranded and lost. */
typedef struct row {
    char family[32], store[8];
    int tried, n[C_N], disagree, bad;
} row;
static row g_rows[32];
static int g_nrows;

static row *row_of(const char *family, const char *store) {
    for (int i = 0; i < g_nrows; i++)
        if (!strcmp(g_rows[i].family, family) && !strcmp(g_rows[i].store, store)) return &g_rows[i];
    row *r = &g_rows[g_nrows++];
    memset(r, 0, sizeof *r);
    snprintf(r->family, sizeof r->family, "%s", family);
    snprintf(r->store, sizeof r->store, "%s", store);
    return r;
}

/* Counts one case; prints it unless it healed (refusals in one line, the rest with the
 * detail). */
static void tally(row *r, int cls, const char *what, const char *detail) {
    r->tried++;
    r->n[cls]++;
    if (cls == C_HEALED) return;
    char line[400];
    first_line(detail ? detail : "", line, sizeof line);
    printf("  %s/%s: %s -> %s: %s\n", r->family, r->store, what, CLASS_NAMES[cls],
           cls == C_REFUSED ? line : detail ? detail : "");
    fflush(stdout);
}

static void violation(row *r, int *counter, const char *what, const char *detail) {
    (*counter)++;
    printf("  %s/%s: %s: %s\n", r->family, r->store, what, detail);
    fflush(stdout);
}

/* The family's verdict: something was tried, nothing stranded or lost, no broken
 * promise. */
#define CHECK_ROW(r, min_tried)                                                            \
    CHECK((r)->tried >= (min_tried) && !(r)->n[C_STRANDED] && !(r)->n[C_LOST] &&           \
              !(r)->disagree && !(r)->bad,                                                 \
          "%s/%s: %d tried (at least %d), %d stranded, %d lost, %d verify/run "            \
          "disagreements, %d broken promises",                                             \
          (r)->family, (r)->store, (r)->tried, (min_tried), (r)->n[C_STRANDED],            \
          (r)->n[C_LOST], (r)->disagree, (r)->bad)

static void print_table(void) {
    printf("\n%-18s %-5s %6s %7s %8s %9s %5s\n", "family", "store", "tried", "healed", "refused",
           "stranded", "lost");
    for (int i = 0; i < g_nrows; i++) {
        const row *r = &g_rows[i];
        printf("%-18s %-5s %6d %7d %8d %9d %5d%s\n", r->family, r->store, r->tried,
               r->n[C_HEALED], r->n[C_REFUSED], r->n[C_STRANDED], r->n[C_LOST],
               r->disagree || r->bad ? "  (broken promises, see above)" : "");
    }
    printf("\n");
}

/* ------------------------------------------------------------------ S3 server */

/* POSTs a JSON body to the proxy's control API; 0 when it answered 2xx. */
static int control(const char *path, const char *json) {
    return sh("curl -sf -X POST --data-binary '%s' '%s%s' >/dev/null", json,
              getenv("TANDEM_S3_CONTROL"), path);
}

/* The proxy's count of injected faults (all kinds). */
static long faults_injected(void) {
    char cmd[1024], out[16384] = "";
    snprintf(cmd, sizeof cmd, "curl -sf '%s/counters'", getenv("TANDEM_S3_CONTROL"));
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    pclose(p);
    const char *at = strstr(out, "\"injected\"");
    const char *end = at ? strchr(at, '}') : NULL;
    long total = 0;
    for (const char *c = at ? strchr(at, '{') : NULL; c && end && c < end; c++)
        if (*c == ':') total += atol(c + 1);
    return total;
}

/* ------------------------------------------------------------------ runs */

/* 1 while a family runs under the DMO's default hold (`alpha_cut: overfit`, the pinned
 * probe) instead of `alpha_cut: any` (every episode runs the twins): every life then gets
 * HELD_RISE, so that the run is pinned (no twins, u scored, α kept) up to domain 1's mark
 * and runs full probes after it; the α records, the probe kinds and the reference hash
 * (g_ref16_held) differ from the other families'. */
static int g_held;
#define HELD_RISE "TANDEM_TEST_VAL_RISE=1:4"

/* The config of every run here: a tiny model (a whole run takes well under a second on
 * the file store), `episodes` episodes, a full state every `every`. */
static void config_text(char *out, size_t cap, int seed, int episodes, int every) {
    snprintf(out, cap,
             "run: {episodes: %d, seed: %d, threads: 1}\n"
             "data: {dataset: %s/dataset.yaml}\n"
             "model: {layers: 2, channels: 32, heads: 2, ctx: 32}\n"
             "train: {batch: 6, seq: 32}\n"
             "tandem: {K: 2, E: 3%s}\n"
             "optim: {lr: 3e-3}\n"
             "checkpoint: {every_episodes: %d, chunk_kib: 64}\n",
             episodes, seed, g_corpus, g_held ? "" : ", alpha_cut: any", every);
}

/* The uninterrupted 16-episode run's hash of the family running now. */
static const char *ref16(void) { return g_held ? g_ref16_held : g_ref16; }

/* A run under test in a fresh directory: its config (seed, episodes, a state every
 * `every`), its store (a path, or a fresh S3 prefix named after the directory) and log. */
static int fx_open(fixture *f, const char *tag, int s3, int seed, int episodes, int every) {
    f->dir = case_dir(tag);
    snprintf(f->config, sizeof f->config, "%s/run.yaml", f->dir);
    snprintf(f->log, sizeof f->log, "%s/log.txt", f->dir);
    if (s3)
        snprintf(f->store, sizeof f->store, "s3://%s/%s", getenv("TANDEM_S3_BUCKET"),
                 strrchr(f->dir, '/') + 1);
    else
        snprintf(f->store, sizeof f->store, "%s/store", f->dir);
    char text[2048];
    config_text(text, sizeof text, seed, episodes, every);
    return write_file(f->config, text);
}

static void fx_close(fixture *f) {
    test_rmtree(f->dir);
    free(f->dir);
    f->dir = NULL;
}

/* Waits for pid at most limit_s seconds, SIGKILLing it past that: its exit code, 128 +
 * the signal that ended it, or -2 when it had to be killed for hanging. */
static int wait_limit(pid_t pid, double limit_s) {
    double t0 = now_s();
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (w < 0 && errno != EINTR) return -1;
        if (now_s() - t0 > limit_s) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -2;
        }
        usleep(2000);
    }
}

/* Starts `tandem run` on the fixture with up to two "K=V" environment entries (either
 * may be NULL) and extra arguments; see start_run_full. */
/* 1 while a family runs with checkpoint.snapshot: stream (commits written chunk by chunk
 * from the model's memory, the loop waiting for them) instead of the default host copy:
 * every life start2 starts gets --set checkpoint.snapshot=stream (a key that is not
 * pinned, so the same stores and reference hashes serve both) */
static int g_stream;

static pid_t start2(const fixture *f, const char *env1, const char *env2, const char *const *extra,
                    int block) {
    const char *more[64];
    int nm = 0;
    if (g_stream) {
        for (int i = 0; extra && extra[i] && nm < 60; i++) more[nm++] = extra[i];
        more[nm++] = "--set";
        more[nm++] = "checkpoint.snapshot=stream";
        more[nm] = NULL;
        extra = more;
    }
    char kv[2][256];
    const char *envs[2] = {env1, env2};
    for (int i = 0; i < 2; i++)
        if (envs[i]) {
            snprintf(kv[i], sizeof kv[i], "%s", envs[i]);
            char *eq = strchr(kv[i], '=');
            *eq = '\0';
            setenv(kv[i], eq + 1, 1);
        }
    if (g_held) setenv("TANDEM_TEST_VAL_RISE", strchr(HELD_RISE, '=') + 1, 1);
    pid_t pid = start_run_full(f, NULL, extra, block);
    if (g_held) unsetenv("TANDEM_TEST_VAL_RISE");
    for (int i = 0; i < 2; i++)
        if (envs[i]) unsetenv(kv[i]);
    return pid;
}

/* One life of `tandem run` to its end (LIFE_LIMIT_S at most). */
static int life(const fixture *f, const char *env, const char *const *extra) {
    return wait_limit(start2(f, env, NULL, extra, 0), LIFE_LIMIT_S);
}

/* `tandem COMMAND STORE OPTIONS` into out; its exit status. */
static int cmd(const fixture *f, const char *command, const char *options, char *out, size_t cap) {
    return tandem_on_store(f, command, options, out, cap);
}

/* Episodes whose metrics rows the current case damaged on purpose ("3,7"): a row is
 * written once with its episode, so nothing restores one of a finished episode. */
static char g_rows_damaged[256];

/* The run's store is whole: verify and alpha --verify exit 0, and its metrics rows are one
 * per episode and agree with its α records (tests/metrics/rows_match_alpha.py): no row a
 * killed, stale or replaced writer left behind, no hole (but the rows the case damaged),
 * no duplicate. */
static int store_clean(const fixture *f, char *why, size_t cap) {
    char out[16384];
    int v = cmd(f, "verify", "", out, sizeof out);
    if (v) {
        snprintf(why, cap, "verify exit %d: %.1500s", v, out);
        return 0;
    }
    v = cmd(f, "alpha", "--verify", out, sizeof out);
    if (v) {
        snprintf(why, cap, "alpha --verify exit %d: %.1500s", v, out);
        return 0;
    }
    char sh_cmd[4096];
    snprintf(sh_cmd, sizeof sh_cmd,
             "'%s' metrics '%s' --format jsonl > '%s/rows.jsonl' 2>/dev/null && '%s' alpha '%s' --format json > "
             "'%s/alpha.json' 2>/dev/null && /usr/bin/python3 '%s/tests/metrics/rows_match_alpha.py' '%s/rows.jsonl' "
             "'%s/alpha.json' '%s' 2>&1",
             tandem_bin(), f->store, f->dir, tandem_bin(), f->store, f->dir, g_root, f->dir, f->dir, g_rows_damaged);
    FILE *p = popen(sh_cmd, "r");
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = '\0';
    if (p) pclose(p);
    if (strcmp(out, "ok\n") != 0) {
        snprintf(why, cap, "metrics rows: %.1500s", n ? out : "tandem metrics or alpha failed");
        return 0;
    }
    return 1;
}

/* The uninterrupted run's hash of a config, on a file store of its own. */
static int reference(int seed, int episodes, int every, char *hash, size_t cap, double *secs) {
    fixture f;
    if (fx_open(&f, "ref", 0, seed, episodes, every)) return -1;
    double t0 = now_s();
    int rc = life(&f, NULL, NULL);
    if (secs) *secs = now_s() - t0;
    if (rc == 0) rc = hash_of(&f, hash, cap);
    fx_close(&f);
    return rc;
}

/* ------------------------------------------------------------------ store objects */

/* The objects of a store through tandem's own store API (the same code for both stores):
 * read, write, delete, list, copy. */
static store *open_url(const char *url) {
    tdm_err e = {0};
    store *s = store_open(url, &e);
    if (!s) fprintf(stderr, "  cannot open %s: %s\n", url, e.msg);
    return s;
}

/* 0 with *data (malloc'ed) and *n; 1 when absent; -1 on error. */
static int obj_read(const char *url, const char *key, unsigned char **data, size_t *n) {
    store *s = open_url(url);
    if (!s) return -1;
    tdm_err e = {0};
    void *d = NULL;
    int rc = store_get(s, key, &d, n, NULL, &e);
    store_close(s);
    if (rc == STORE_NOT_FOUND) return 1;
    if (rc) return -1;
    *data = d;
    return 0;
}

static int obj_write(const char *url, const char *key, const void *data, size_t n) {
    store *s = open_url(url);
    if (!s) return -1;
    tdm_err e = {0};
    int rc = store_put(s, key, data, n, STORE_OVERWRITE, &e);
    store_close(s);
    return rc ? -1 : 0;
}

static int obj_delete(const char *url, const char *key) {
    store *s = open_url(url);
    if (!s) return -1;
    tdm_err e = {0};
    int rc = store_delete(s, key, &e);
    store_close(s);
    return rc && rc != STORE_NOT_FOUND ? -1 : 0;
}

/* Every key under prefix (caller frees with store_list_free); -1 on error. */
static int obj_keys(const char *url, const char *prefix, store_list *l) {
    store *s = open_url(url);
    if (!s) return -1;
    tdm_err e = {0};
    int rc = store_list_prefix(s, prefix, l, &e);
    store_close(s);
    return rc ? -1 : 0;
}

/* Copies every object of store src into store dst (which is new). */
static int store_copy(const char *src, const char *dst) {
    store *a = open_url(src), *b = a ? open_url(dst) : NULL;
    if (!a || !b) {
        if (a) store_close(a);
        return -1;
    }
    tdm_err e = {0};
    store_list l;
    int rc = store_list_prefix(a, "", &l, &e);
    for (size_t i = 0; !rc && i < l.n; i++) {
        void *d = NULL;
        size_t n = 0;
        rc = store_get(a, l.keys[i], &d, &n, NULL, &e);
        if (!rc) rc = store_put(b, l.keys[i], d, n, STORE_OVERWRITE, &e);
        free(d);
    }
    if (rc) fprintf(stderr, "  copy %s -> %s: %s\n", src, dst, e.msg);
    else store_list_free(&l);
    store_close(a);
    store_close(b);
    return rc ? -1 : 0;
}

/* A digest of a whole store (every key and its bytes): to tell whether anything changed. */
static int store_digest(const char *url, sha256_digest *out, size_t *nkeys) {
    store *s = open_url(url);
    if (!s) return -1;
    tdm_err e = {0};
    store_list l;
    int rc = store_list_prefix(s, "", &l, &e);
    sha256_ctx *ctx = sha256_begin();
    if (!ctx) rc = -1;
    for (size_t i = 0; !rc && i < l.n; i++) {
        void *d = NULL;
        size_t n = 0;
        rc = store_get(s, l.keys[i], &d, &n, NULL, &e);
        if (rc) break;
        sha256_digest od;
        sha256(d, n, &od);
        free(d);
        sha256_update(ctx, l.keys[i], strlen(l.keys[i]) + 1);
        sha256_update(ctx, od.b, sizeof od.b);
    }
    if (ctx) sha256_end(ctx, out);
    *nkeys = rc ? 0 : l.n;
    if (!rc) store_list_free(&l);
    store_close(s);
    return rc ? -1 : 0;
}

/* HEAD of a store, decoded; -1 when there is none or it does not decode. */
static int head_of_url(const char *url, rec_head *h) {
    unsigned char *d = NULL;
    size_t n = 0;
    if (obj_read(url, "HEAD", &d, &n)) return -1;
    tdm_err e;
    int rc = rec_head_decode(d, n, "HEAD", h, &e);
    free(d);
    return rc ? -1 : 0;
}

static uint64_t lease_epoch_of(const char *url) {
    unsigned char *d = NULL;
    size_t n = 0;
    if (obj_read(url, "lease", &d, &n)) return 0;
    rec_lease l;
    tdm_err e;
    int rc = rec_lease_decode(d, n, "lease", &l, &e);
    free(d);
    return rc ? 0 : l.epoch;
}

/* The key of blob `chunk` of tensor 0 of the state at `key`, into out. */
static int blob_of_state(const char *url, const char *key, char *out, size_t cap) {
    unsigned char *d = NULL;
    size_t n = 0;
    if (obj_read(url, key, &d, &n)) return -1;
    rec_state s;
    tdm_err e;
    int rc = rec_state_decode(d, n, key, &s, &e);
    free(d);
    if (rc) return -1;
    char hex[SHA256_HEX_LEN + 1];
    sha256_hex(&s.tensors[0].chunks[0], hex);
    snprintf(out, cap, "blobs/%s", hex);
    rec_state_free(&s);
    return 0;
}

/* ------------------------------------------------------------------ judging a damaged run */

/* Whether a resume's log shows that it met something wrong: any line but the ordinary
 * ones of a resume after a kill (taking over a lease that was not released, resuming
 * from a state past HEAD). */
static int log_noticed(const char *log) {
    static const char *const ordinary[] = {"tandem: taking over the lease ",
                                           "tandem: resuming from states/"};
    for (const char *p = log; *p;) {
        size_t n = strcspn(p, "\n");
        int plain = n == 0;
        for (size_t i = 0; !plain && i < sizeof ordinary / sizeof *ordinary; i++)
            plain = strncmp(p, ordinary[i], strlen(ordinary[i])) == 0;
        if (!plain) return 1;
        p += n + (p[n] == '\n');
    }
    return 0;
}

/* Whether the run said something beyond what verify already noted: a non-ordinary line of
 * its log that names none of the objects verify's notes begin with ("note  KEY cannot be
 * read": a damaged metrics row, which the run writes again and says so; "note  KEY lies
 * past HEAD ...": a cut-off commit's state the run passes over and says so — agreement).
 * Only store keys (a '/' in them) count, never a note's number. */
static int noticed_beyond_notes(const char *log, const char *vout) {
    char keys[16][REC_KEY_MAX];
    int nk = 0;
    for (const char *p = vout; (p = strstr(p, "note  ")) && nk < 16; p += 6) {
        size_t n = strcspn(p + 6, " \n");
        if (n > 0 && n < REC_KEY_MAX && memchr(p + 6, '/', n) &&
            (strncmp(p + 6 + n, " cannot be read", 15) == 0 || strncmp(p + 6 + n, " lies past HEAD", 15) == 0))
            snprintf(keys[nk++], REC_KEY_MAX, "%.*s", (int)n, p + 6);
    }
    static const char *const ordinary[] = {"tandem: taking over the lease ", "tandem: resuming from states/"};
    for (const char *p = log; *p;) {
        size_t n = strcspn(p, "\n");
        int plain = n == 0;
        for (size_t i = 0; !plain && i < sizeof ordinary / sizeof *ordinary; i++)
            plain = strncmp(p, ordinary[i], strlen(ordinary[i])) == 0;
        for (int k = 0; !plain && k < nk; k++) {
            char line[4096];
            snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line - 1 ? n : sizeof line - 1), p);
            plain = strstr(line, keys[k]) != NULL;
        }
        if (!plain) return 1;
        p += n + (p[n] == '\n');
    }
    return 0;
}

/* An object as it was before the harness damaged it, to restore it. */
typedef struct saved_obj {
    char key[REC_KEY_MAX];
    unsigned char *data;
    size_t n;
    int existed;
} saved_obj;

/* A damaged store to judge: the run's fixture and arguments, the hash an undisturbed
 * resume ends with, and the objects as they were. */
typedef struct dcase {
    fixture *f;
    const char *const *args;
    const char *ref;
    saved_obj saved[8];
    int nsaved;
    char desc[300];
} dcase;

static int dcase_save(dcase *d, const char *key) {
    if (d->nsaved == 8) return -1;
    saved_obj *o = &d->saved[d->nsaved];
    snprintf(o->key, sizeof o->key, "%s", key);
    int rc = obj_read(d->f->store, key, &o->data, &o->n);
    if (rc < 0) return -1;
    o->existed = rc == 0;
    d->nsaved++;
    return 0;
}

static void dcase_free(dcase *d) {
    for (int i = 0; i < d->nsaved; i++) free(d->saved[i].data);
    d->nsaved = 0;
}

/* Puts every saved object back as it was. */
static int dcase_restore(dcase *d) {
    int rc = 0;
    for (int i = 0; i < d->nsaved; i++) {
        saved_obj *o = &d->saved[i];
        rc |= o->existed ? obj_write(d->f->store, o->key, o->data, o->n) : obj_delete(d->f->store, o->key);
    }
    return rc;
}

/* A resume ends where it should: exit 0, the reference hash, verify and the chain clean.
 * why says what went wrong otherwise. */
static int resume_ok(dcase *d, char *why, size_t cap) {
    int rc = life(d->f, NULL, d->args);
    char log[8192] = "", h[1024] = "";
    read_all(d->f->log, log, sizeof log);
    if (rc != 0) {
        snprintf(why, cap, "the resume exited %d: %.1500s", rc, log);
        return 0;
    }
    if (hash_of(d->f, h, sizeof h) || strcmp(h, d->ref)) {
        snprintf(why, cap, "the resume ended elsewhere: %.300s", h);
        return 0;
    }
    return store_clean(d->f, why, cap);
}

/* Judges a damaged store: verify, then a resume, then (when the run refused, or verify
 * still reports a fault after it) the way back the message or verify names, and returns
 * the class (why: the detail). dis gets a message when verify and the run disagree about
 * the damage: the run met something verify did not report, refused a store verify called
 * clean, or verify reported a fault the run healed without a word. */
static int judge(dcase *d, char *why, size_t cap, char *dis, size_t dcap) {
    fixture *f = d->f;
    char vout[16384], log[16384] = "", h[1024] = "";
    dis[0] = '\0';
    why[0] = '\0';
    int vf = cmd(f, "verify", "", vout, sizeof vout);
    if (vf != 0 && vf != 3) {
        snprintf(why, cap, "verify exited %d: %.1500s", vf, vout);
        return C_STRANDED;
    }
    int rc = life(f, NULL, d->args);
    read_all(f->log, log, sizeof log);
    if (sanitizer_report(log) || sanitizer_report(vout)) {
        snprintf(why, cap, "sanitizer report (exit %d): %.3000s %.2000s", rc, log, vout);
        return C_STRANDED;
    }
    int noticed = rc != 0 || log_noticed(log);
    if (rc == 0) {
        char out[16384];
        int hr = hash_of(f, h, sizeof h);
        int vf2 = cmd(f, "verify", "", out, sizeof out);
        int av = cmd(f, "alpha", "--verify", out + 8192, sizeof out - 8192);
        if ((noticed && vf == 0 && noticed_beyond_notes(log, vout)) || (!noticed && vf != 0 && vf2 == 0))
            snprintf(dis, dcap, "verify %s, the run %s: verify said: %.1200s\nthe run said: %.1500s",
                     vf ? "reported a fault" : "was clean", noticed ? "met the damage" : "said nothing",
                     vout, log);
        if (hr || strcmp(h, d->ref)) {
            snprintf(why, cap, "healed but ended elsewhere (%.200s); the run said: %.1500s", h, log);
            return C_LOST;
        }
        if (vf2 == 0 && av == 0) return C_HEALED;
        /* the run did not need the object; verify names it: the operator's way back */
        char rout[8192];
        int rr = cmd(f, "repair", "--apply", rout, sizeof rout);
        char w2[2000];
        if (rr == 0 && resume_ok(d, w2, sizeof w2)) {
            snprintf(why, cap, "the run healed, verify still named a fault, tandem repair --apply cleared it: %.300s", out);
            return C_REFUSED;
        }
        snprintf(why, cap, "verify faults remain after healing (repair exit %d: %.500s; then %.500s): %.1000s",
                 rr, rout, w2, out);
        return C_LOST;
    }
    if (rc == 2 || rc == 3) {
        if (vf == 0)
            snprintf(dis, dcap, "verify was clean but the run refused (exit %d): %.1500s", rc, log);
        int named = 0;
        for (int i = 0; i < d->nsaved; i++) named |= strstr(log, d->saved[i].key) != NULL;
        int repair = strstr(log, "tandem repair") != NULL;
        int clear = named && (repair || strstr(log, "restore") || strstr(log, "Restore"));
        char w[2000] = "";
        int back = 0;
        if (repair) {
            char rout[8192];
            back = cmd(f, "repair", "--apply", rout, sizeof rout) == 0 && resume_ok(d, w, sizeof w);
        }
        if (!back) back = dcase_restore(d) == 0 && resume_ok(d, w, sizeof w);
        char line[600];
        first_news(log, line, sizeof line);
        snprintf(why, cap, "exit %d: %s", rc, line);
        if (back && clear) return C_REFUSED;
        snprintf(why, cap, "exit %d %s: %.1500s%s%.800s", rc,
                 !clear ? "with an unclear message (no object named, or no way back)" : "and no way back",
                 log, back ? "" : "\nthe way back failed: ", back ? "" : w);
        return C_STRANDED;
    }
    snprintf(why, cap, "the resume exited %d: %.2000s", rc, log);
    return C_STRANDED;
}

/* ------------------------------------------------------------------ scenarios */

/* Stores in a known situation, built once per store kind, each twice: the run (seed 3)
 * and another run (seed 4) in the same situation, whose objects the swaps take.
 *   mid       stopped (exit 75) at the start of episode 8, then killed in episode 9: HEAD
 *             names states/40.mp, states/20.mp is older, alpha/8.mp and 9.mp lie past it
 *   past      stopped likewise, then killed inside the final commit between the manifest
 *             and HEAD: states/60.mp (done) lies past HEAD (states/40.mp)
 *   finished  run to the end (states/20, 40, 60.mp, mixture.mp), states/20.mp pinned
 *   changed   stopped at the start of episode 4 (states/20.mp), resumed with optim.lr
 *             changed (configs/0.mp), killed in episode 6: alpha/4.mp and 5.mp of the new
 *             config lie past HEAD */
enum { SC_MID, SC_PAST, SC_FIN, SC_CHG, SC_N };
static const char *const SC_NAMES[SC_N] = {"mid", "past", "finished", "changed"};
static const char *const CHANGE_ARGS[] = {"--set", "optim.lr=1e-3", "--allow-change", "optim.lr", NULL};

typedef struct scenario {
    int built, ok;
    fixture fx[2];
    char ref[1024]; /* where an undisturbed resume of fx[0] ends */
    const char *const *args;
    char why[2000];
} scenario;
static scenario g_scen[2][SC_N];

/* Brings one store into scenario `which`; 0 when every step went as planned. */
static int scenario_lives(fixture *f, int which, char *why, size_t cap) {
    int rc, want = 0;
    rec_head h = {0};
    char key[64];
    unsigned char *d = NULL;
    size_t n;
    switch (which) {
    case SC_FIN:
        if ((rc = life(f, NULL, NULL)) != 0) break;
        char out[4096];
        rc = cmd(f, "pin", "20", out, sizeof out);
        if (rc) snprintf(why, cap, "pin: %.1000s", out);
        return rc;
    case SC_CHG:
        if ((rc = life(f, "TANDEM_TEST_SIGNAL_AT=probe:5", NULL)) != (want = 75)) break;
        if ((rc = life(f, "TANDEM_TEST_KILL_AT=free-step:7", CHANGE_ARGS)) != (want = 128 + SIGKILL)) break;
        if (head_of_url(f->store, &h) || h.seq != 20 || obj_read(f->store, "configs/0.mp", &d, &n) ||
            (free(d), d = NULL, obj_read(f->store, "alpha/5.mp", &d, &n))) {
            snprintf(why, cap, "changed: not the expected store (HEAD at %llu)", (unsigned long long)h.seq);
            return -1;
        }
        free(d);
        return 0;
    default: /* mid, past */
        if ((rc = life(f, "TANDEM_TEST_SIGNAL_AT=probe:9", NULL)) != (want = 75)) break;
        want = 128 + SIGKILL;
        rc = life(f, which == SC_MID ? "TANDEM_TEST_KILL_AT=free-step:4" : "TANDEM_TEST_KILL_AT=head:1", NULL);
        if (rc != want) break;
        snprintf(key, sizeof key, "%s", which == SC_MID ? "alpha/9.mp" : "states/60.mp");
        if (head_of_url(f->store, &h) || h.seq != 40 || obj_read(f->store, key, &d, &n)) {
            snprintf(why, cap, "%s: not the expected store (HEAD at %llu, %s)", SC_NAMES[which],
                     (unsigned long long)h.seq, key);
            return -1;
        }
        free(d);
        return 0;
    }
    char log[4096] = "";
    read_all(f->log, log, sizeof log);
    snprintf(why, cap, "%s: a life exited %d, not %d: %.1500s", SC_NAMES[which], rc, want, log);
    return -1;
}

/* The scenario, built on first use. */
static scenario *scenario_get(int s3, int which) {
    scenario *sc = &g_scen[s3][which];
    if (sc->built) return sc;
    sc->built = 1;
    sc->args = which == SC_CHG ? CHANGE_ARGS : NULL;
    for (int k = 0; k < 2; k++) {
        char tag[32];
        snprintf(tag, sizeof tag, "scen-%s-%d", SC_NAMES[which], k);
        if (fx_open(&sc->fx[k], tag, s3, 3 + k, 12, 4) ||
            scenario_lives(&sc->fx[k], which, sc->why, sizeof sc->why))
            return sc;
    }
    /* where an undisturbed resume ends (for mid, past, finished: the uninterrupted run's
     * end, which is checked too) */
    fixture c;
    fx_open(&c, "scen-ref", s3, 3, 12, 4);
    int rc = store_copy(sc->fx[0].store, c.store) ? -1 : life(&c, NULL, sc->args);
    if (rc == 0) rc = hash_of(&c, sc->ref, sizeof sc->ref);
    char why[2000] = "";
    if (rc == 0 && !store_clean(&c, why, sizeof why)) rc = -1;
    if (rc == 0 && which != SC_CHG && strcmp(sc->ref, g_ref12)) {
        snprintf(why, sizeof why, "an undisturbed resume ended elsewhere than the uninterrupted run");
        rc = -1;
    }
    if (rc) snprintf(sc->why, sizeof sc->why, "%s: undisturbed resume: exit %d %.1800s", SC_NAMES[which], rc, why);
    fx_close(&c);
    sc->ok = rc == 0;
    return sc;
}

static void scenarios_free(void) {
    for (int s = 0; s < 2; s++)
        for (int w = 0; w < SC_N; w++)
            for (int k = 0; k < 2; k++)
                if (g_scen[s][w].fx[k].dir) fx_close(&g_scen[s][w].fx[k]);
}

/* A fresh fixture holding a copy of the scenario's run. */
static int scenario_copy(scenario *sc, int s3, fixture *f) {
    f->dir = case_dir("case");
    snprintf(f->config, sizeof f->config, "%s", sc->fx[0].config);
    snprintf(f->log, sizeof f->log, "%s/log.txt", f->dir);
    if (s3)
        snprintf(f->store, sizeof f->store, "s3://%s/%s", getenv("TANDEM_S3_BUCKET"),
                 strrchr(f->dir, '/') + 1);
    else
        snprintf(f->store, sizeof f->store, "%s/store", f->dir);
    return store_copy(sc->fx[0].store, f->store);
}

/* ------------------------------------------------------------------ corruption matrix */

typedef struct kind {
    const char *name;
    int scen;
    const char *key; /* "@blob": the first chunk of the state HEAD names */
} kind;

static const kind KINDS[] = {
    {"HEAD", SC_MID, "HEAD"},
    {"HEAD (finished)", SC_FIN, "HEAD"},
    {"lease", SC_MID, "lease"},
    {"RUN", SC_MID, "RUN"},
    {"configs/0.mp", SC_CHG, "configs/0.mp"},
    {"state HEAD names", SC_MID, "states/40.mp"},
    {"final state", SC_FIN, "states/60.mp"},
    {"older state", SC_MID, "states/20.mp"},
    {"state past HEAD", SC_PAST, "states/60.mp"},
    {"blob", SC_MID, "@blob"},
    {"blob (finished)", SC_FIN, "@blob"},
    {"alpha vouched", SC_MID, "alpha/3.mp"},
    {"alpha last vouched", SC_MID, "alpha/7.mp"},      /* the tail of HEAD's part of the chain */
    {"alpha last (finished)", SC_FIN, "alpha/11.mp"},  /* the final state's last record */
    {"alpha past state", SC_MID, "alpha/9.mp"},
    {"alpha (changed)", SC_CHG, "alpha/5.mp"},
    {"pin", SC_FIN, "pins/20"},
    {"mixture.mp", SC_FIN, "mixture.mp"},
    {"data.mp", SC_MID, "data.mp"},
    {"metrics row past HEAD", SC_MID, "metrics/8.mp"},
    {"metrics row (finished)", SC_FIN, "metrics/5.mp"},
};
#define NKINDS ((int)(sizeof KINDS / sizeof *KINDS))

enum { D_DELETE, D_TRUNC0, D_HALF, D_FLIP0, D_FLIPMID, D_FLIPEND, D_SWAP, D_N };
static const char *const D_NAMES[D_N] = {"delete", "truncate to 0", "truncate to half", "flip at start",
                                         "flip in the middle", "flip at the end", "swap with another run's"};

/* The store key a kind names in store url (resolving "@blob"). */
static int kind_key(const kind *k, const char *url, char *key, size_t cap) {
    if (strcmp(k->key, "@blob")) {
        snprintf(key, cap, "%s", k->key);
        return 0;
    }
    rec_head h;
    return head_of_url(url, &h) ? -1 : blob_of_state(url, h.state, key, cap);
}

/* Damages object `key` of the case's store (saved first); `other`: the other run's store
 * and its key of the same object, for a swap. */
static int damage(dcase *d, const char *key, int dmg, const char *other_url, const char *other_key) {
    if (dcase_save(d, key)) return -1;
    saved_obj *o = &d->saved[d->nsaved - 1];
    if (!o->existed) return -1;
    const char *url = d->f->store;
    unsigned char *b = NULL;
    size_t n = 0;
    int rc;
    switch (dmg) {
    case D_DELETE: return obj_delete(url, key);
    case D_TRUNC0: return obj_write(url, key, "", 0);
    case D_HALF: return obj_write(url, key, o->data, o->n / 2);
    case D_SWAP:
        if (obj_read(other_url, other_key, &b, &n)) return -1;
        rc = obj_write(url, key, b, n);
        free(b);
        return rc;
    default:
        b = malloc(o->n ? o->n : 1);
        memcpy(b, o->data, o->n);
        size_t at = dmg == D_FLIP0 ? 0 : dmg == D_FLIPMID ? o->n / 2 : o->n - 1;
        if (o->n) b[at] ^= 0x5a;
        rc = o->n ? obj_write(url, key, b, o->n) : -1;
        free(b);
        return rc;
    }
}

/* One case of the matrix: a copy of the kind's scenario, the damage, the judgement. */
static void corruption_case(row *r, int s3, int ki, int dmg) {
    const kind *k = &KINDS[ki];
    char what[200];
    snprintf(what, sizeof what, "%s (%s): %s", k->name, SC_NAMES[k->scen], D_NAMES[dmg]);
    scenario *sc = scenario_get(s3, k->scen);
    if (!sc->ok) {
        tally(r, C_STRANDED, what, sc->why);
        return;
    }
    fixture f;
    char key[REC_KEY_MAX], okey[REC_KEY_MAX];
    dcase d = {.f = &f, .args = sc->args, .ref = sc->ref};
    if (scenario_copy(sc, s3, &f) || kind_key(k, f.store, key, sizeof key) ||
        kind_key(k, sc->fx[1].store, okey, sizeof okey) ||
        damage(&d, key, dmg, sc->fx[1].store, okey)) {
        violation(r, &r->bad, what, "the harness could not set the case up");
        dcase_free(&d);
        fx_close(&f);
        return;
    }
    char why[8192], dis[4096];
    int cls = judge(&d, why, sizeof why, dis, sizeof dis);
    tally(r, cls, what, why);
    if (dis[0]) violation(r, &r->disagree, what, dis);
    dcase_free(&d);
    fx_close(&f);
}

/* ------------------------------------------------------------------ kill storms */

/* The ordinal of the final commit in the next life of a kill-storm run (16 episodes, a
 * state every 2: a life that starts from the state of episode e commits at e+2, ..., 14
 * and then finally at 16); 0 when it cannot tell or the run is done. */
static int final_commit(const fixture *f) {
    store_list l;
    if (obj_keys(f->store, "states/", &l)) return 0;
    uint64_t best = 0;
    int found = 0;
    for (size_t i = 0; i < l.n; i++) {
        uint64_t q;
        if (ledger_key_index(l.keys[i], "states/", &q) == 0 && (!found || q > best)) best = q, found = 1;
    }
    store_list_free(&l);
    int e = 0;
    if (found) {
        char key[64];
        unsigned char *d = NULL;
        size_t n = 0;
        rec_state s;
        tdm_err er;
        snprintf(key, sizeof key, "states/%llu.mp", (unsigned long long)best);
        if (obj_read(f->store, key, &d, &n) || rec_state_decode(d, n, key, &s, &er)) {
            free(d);
            return 0;
        }
        free(d);
        e = (int)s.episode;
        int mid = strcmp(s.step, "probe") != 0 || s.index;
        rec_state_free(&s);
        if (mid) return 0;
    }
    return e >= 16 || e % 2 ? 0 : (16 - e) / 2;
}

/* A run killed with SIGKILL again and again — inside commits by the hooks and at random
 * moments up to 40 % of an undisturbed run's time (start-up included) — until it
 * finished or `lives` lives were spent, then resumed: healed when the end is the
 * uninterrupted run's. The first life of storm `idx` takes its hook from a list that
 * includes the final commit's manifest and HEAD move. */
static void kill_storm(row *r, int s3, int idx, int lives) {
    /* retain/gc: inside the retention pass after a commit (checkpoint.keep, default 3;
     * the storm's run keeps 8 states, so passes delete) */
    static const char *const first[] = {"head:1", "manifest:1", "blob:5", "alpha:1", "blob:1",
                                        "alpha-step:1", "probe-step:1", "free-step:1", "gc:2",
                                        "retain:2"};
    enum { NFIRST = sizeof first / sizeof *first };
    static const struct {
        const char *label;
        int max;
    } hooks[] = {{"blob", 9}, {"manifest", 1}, {"head", 1}, {"alpha", 2}, {"free-step", 6},
                 {"probe-step", 2}, {"alpha-step", 2}, {"retain", 2}, {"gc", 6}};
    fixture f;
    char what[64];
    snprintf(what, sizeof what, "storm %d", idx);
    if (fx_open(&f, "kill", s3, 3, 16, 2)) {
        violation(r, &r->bad, what, "fixture");
        return;
    }
    double tmax = 0.4 * (s3 ? g_t_s3 : g_t_file);
    int kills = 0, hooked = 0, rc = 0, finished = 0;
    char env[64];
    for (int l = 0; l < lives && !finished; l++) {
        if (l == 0 || rnd_below(3) == 0) {
            int h = (int)rnd_below(sizeof hooks / sizeof *hooks);
            if (l == 0) snprintf(env, sizeof env, "TANDEM_TEST_KILL_AT=%s", first[idx % NFIRST]);
            else snprintf(env, sizeof env, "TANDEM_TEST_KILL_AT=%s:%d", hooks[h].label, 1 + (int)rnd_below((uint64_t)hooks[h].max));
            rc = life(&f, env, NULL);
            hooked += rc == 128 + SIGKILL;
        } else {
            pid_t pid = start2(&f, NULL, NULL, NULL, 0);
            sleep_s(rnd_unit() * tmax);
            kill(pid, SIGKILL);
            rc = wait_limit(pid, LIFE_LIMIT_S);
        }
        if (rc == 128 + SIGKILL) kills++;
        else if (rc == 0) finished = 1;
        else break;
    }
    /* the last killed life dies inside the final commit (between the manifest and the HEAD
     * move, or before the manifest), when the run has one left */
    int left = rc == 128 + SIGKILL ? final_commit(&f) : 0;
    if (left > 0) {
        snprintf(env, sizeof env, "TANDEM_TEST_KILL_AT=%s:%d", idx % 2 ? "head" : "manifest", left);
        rc = life(&f, env, NULL);
        if (rc == 128 + SIGKILL) kills++, hooked++;
    }
    if (rc == 128 + SIGKILL) rc = life(&f, NULL, NULL);
    char log[8192] = "", h[1024] = "", why[4096];
    read_all(f.log, log, sizeof log);
    snprintf(what, sizeof what, "storm %d (%d kills, %d in hooks)", idx, kills, hooked);
    if (rc == 0) {
        if (hash_of(&f, h, sizeof h) || strcmp(h, ref16())) {
            snprintf(why, sizeof why, "ended elsewhere: %.300s", h);
            tally(r, C_LOST, what, why);
        } else if (!store_clean(&f, why, sizeof why)) {
            tally(r, C_LOST, what, why);
        } else {
            tally(r, C_HEALED, what, NULL);
        }
    } else {
        /* a kill must never need the operator: any other exit strands the storm */
        snprintf(why, sizeof why, "a life exited %d after %d kills: %.3000s", rc, kills, log);
        tally(r, C_STRANDED, what, why);
    }
    printf("    %s/%s %s\n", r->family, r->store, what);
    fx_close(&f);
}

/* ------------------------------------------------------------------ stale writers */

/* Whether pid has ended (a zombie not yet waited for), without reaping it. */
static int proc_done(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_all(path, buf, sizeof buf)) return 1;
    const char *close = strrchr(buf, ')');
    return !close || close[2] == 'Z' || close[2] == 'X';
}

/* Writer A (slowed by TANDEM_TEST_STEP_DELAY_MS) is frozen with SIGSTOP once HEAD reaches
 * `stop_at` (0: once it holds the lease) plus a random few milliseconds; writer B takes the
 * lease over, with optim.lr changed (allowed) when `changed`; A is let go `after_ms` after
 * the takeover (-1: after B finished). A must exit 3 (fenced out) or 0 (it had nothing
 * left to write); B must finish, a rerun report the finished run (the same hash), verify
 * and alpha --verify pass, and with the same config B ends at the reference. */
static void stale_case(row *r, int s3, int stop_at, int after_ms, int changed) {
    char what[160];
    snprintf(what, sizeof what, "A frozen at HEAD >= %d, let go %d ms after B took over, %s", stop_at,
             after_ms, changed ? "B changed optim.lr" : "same config");
    fixture f;
    if (fx_open(&f, "stale", s3, 3, 16, 2)) {
        violation(r, &r->bad, what, "fixture");
        return;
    }
    const char *delay_a = s3 ? "TANDEM_TEST_STEP_DELAY_MS=25" : "TANDEM_TEST_STEP_DELAY_MS=15";
    pid_t a = start2(&f, delay_a, NULL, NULL, 0);
    double t0 = now_s();
    rec_head h = {0};
    /* stop_at 0: as soon as A holds the lease (before that, A is not stale but the later
     * of two writers, and B is the one fenced out) */
    while (stop_at == 0 && lease_epoch_of(f.store) < 1 && now_s() - t0 < 120) {
        if (kill(a, 0) != 0 || proc_done(a)) break;
        usleep(s3 ? 20000 : 1000);
    }
    while (stop_at > 0 && now_s() - t0 < 120) {
        if (head_of_url(f.store, &h) == 0 && h.seq >= (uint64_t)stop_at) break;
        if (kill(a, 0) != 0 || proc_done(a)) break;
        usleep(s3 ? 20000 : 1000);
    }
    sleep_s(rnd_unit() * (s3 ? 0.2 : 0.04));
    kill(a, SIGSTOP);
    uint64_t ea = lease_epoch_of(f.store);
    fixture fb = f;
    snprintf(fb.log, sizeof fb.log, "%s/log-b.txt", f.dir);
    const char *const *extra = changed ? CHANGE_ARGS : NULL;
    /* A may be frozen inside a compare-and-swap of the file store, holding its .lock: B
     * then waits TANDEM_STORE_LOCK_TIMEOUT_S and refuses naming the holder (below); 8 s
     * here instead of 120 keeps such a case short */
    setenv("TANDEM_STORE_LOCK_TIMEOUT_S", "8", 1);
    pid_t b = start2(&fb, "TANDEM_TEST_STEP_DELAY_MS=3", NULL, extra, 0);
    unsetenv("TANDEM_STORE_LOCK_TIMEOUT_S");
    int rb = -100;
    t0 = now_s();
    while (lease_epoch_of(f.store) <= ea && now_s() - t0 < 120) {
        pid_t w = waitpid(b, &rb, WNOHANG);
        if (w == b) {
            rb = WIFEXITED(rb) ? WEXITSTATUS(rb) : 128 + WTERMSIG(rb);
            break;
        }
        usleep(s3 ? 20000 : 1000);
    }
    if (after_ms < 0 && rb == -100) rb = wait_limit(b, LIFE_LIMIT_S);
    else if (after_ms > 0) sleep_s(after_ms / 1000.0);
    kill(a, SIGCONT);
    int ra = wait_limit(a, LIFE_LIMIT_S);
    if (rb == -100) rb = wait_limit(b, LIFE_LIMIT_S);
    char la[8192] = "", lb[8192] = "", why[8192] = "", hb[1024] = "", h2[1024] = "";
    read_all(f.log, la, sizeof la);
    read_all(fb.log, lb, sizeof lb);
    /* A stops at its next write: fenced out by the lease or HEAD, or (frozen while it
     * created the run) refused by the run B created */
    int a_clear = strstr(la, "fenced out") || strstr(la, "another tandem") || strstr(la, "another writer");
    if (!(ra == 3 && a_clear) && ra != 0) {
        snprintf(why, sizeof why, "A exited %d: %.2000s", ra, la);
        violation(r, &r->bad, what, why);
    }
    why[0] = '\0';
    int cls = C_HEALED;
    if (rb == 0) {
        int again = life(&fb, NULL, extra);
        if (hash_of(&f, hb, sizeof hb)) snprintf(why, sizeof why, "no hash after B");
        else if (again != 0) snprintf(why, sizeof why, "the rerun after B exited %d", again);
        else if (hash_of(&f, h2, sizeof h2) || strcmp(hb, h2)) snprintf(why, sizeof why, "the rerun moved the run");
        else if (!changed && strcmp(hb, ref16())) snprintf(why, sizeof why, "B ended elsewhere (same config)");
        else store_clean(&f, why, sizeof why);
        if (why[0]) cls = C_LOST;
    } else if (rb == 3 && strstr(lb, "tandem repair")) {
        char out[8192];
        int rr = cmd(&f, "repair", "--apply", out, sizeof out);
        int again = rr ? rr : life(&fb, NULL, extra);
        cls = again == 0 && store_clean(&f, why, sizeof why) &&
                      (changed || (hash_of(&f, hb, sizeof hb) == 0 && !strcmp(hb, ref16())))
                  ? C_REFUSED
                  : C_STRANDED;
        snprintf(why, sizeof why, "B exited 3 (then repair %d, rerun %d): %.2000s", rr, again, lb);
    } else if (rb == 3 && strstr(lb, "/.lock has been held by")) {
        /* A was frozen holding the file store's lock: B refused with the way out (end the
         * holder or let it go on, run again). A has been let go since: the run again must
         * finish where it should */
        int again = life(&fb, NULL, extra);
        char lr[4096] = "";
        read_all(fb.log, lr, sizeof lr);
        cls = again == 0 && store_clean(&f, why, sizeof why) &&
                      (changed || (hash_of(&f, hb, sizeof hb) == 0 && !strcmp(hb, ref16())))
                  ? C_REFUSED
                  : C_STRANDED;
        snprintf(why, sizeof why, "B exited 3 waiting for the lock A held (rerun %d): %.2000s%s%.1500s",
                 again, lb, again ? "\n  the rerun said: " : "", again ? lr : "");
    } else {
        snprintf(why, sizeof why, "B exited %d: %.3000s\nA exited %d: %.1500s", rb, lb, ra, la);
        cls = C_STRANDED;
    }
    tally(r, cls, what, why);
    fx_close(&f);
}

/* ------------------------------------------------------------------ start-up signals */

/* A run signalled `delay` seconds after it catches SIGTERM (delay < 0: the signal is sent
 * at once while the launcher blocks it, so that it is pending across exec): exit 75, then
 * the resume ends at the reference. A run killed by the signal is a lost job. */
static void signal_case(row *r, int s3, int sig, double delay) {
    char what[120];
    snprintf(what, sizeof what, "SIG%s %s", sigabbrev_np(sig),
             delay == -1 ? "pending across exec" : delay == -2 ? "during start-up I/O" : "");
    if (delay >= 0) snprintf(what + strlen(what), sizeof what - strlen(what), "%.3f s after the handler", delay);
    fixture f;
    if (fx_open(&f, "sig", s3, 3, 16, 2)) {
        violation(r, &r->bad, what, "fixture");
        return;
    }
    /* -2: raised by the run itself as its start-up begins (TANDEM_TEST_SIGNAL_AT=setup:1),
     * where a blocking read on NFS or FUSE would be interrupted: a requeue, never exit 2 */
    pid_t pid = start2(&f, "TANDEM_TEST_STEP_DELAY_MS=40", delay == -2 ? "TANDEM_TEST_SIGNAL_AT=setup:1" : NULL,
                       NULL, 1);
    if (delay == -1) {
        kill(pid, sig);
    } else if (delay == -2) {
        /* nothing to send */
    } else {
        if (wait_catches(pid, SIGTERM)) violation(r, &r->bad, what, "the run never caught SIGTERM");
        sleep_s(delay);
        kill(pid, sig);
    }
    int rc = wait_limit(pid, LIFE_LIMIT_S);
    char log[8192] = "", why[4096] = "", h[1024] = "";
    read_all(f.log, log, sizeof log);
    int cls;
    if (rc == 75 || rc == 0) {
        int again = rc == 75 ? life(&f, NULL, NULL) : 0;
        if (again) snprintf(why, sizeof why, "the resume exited %d", again);
        else if (hash_of(&f, h, sizeof h) || strcmp(h, ref16())) snprintf(why, sizeof why, "ended elsewhere");
        else store_clean(&f, why, sizeof why);
        cls = why[0] ? C_LOST : C_HEALED;
    } else if (rc == 128 + sig) {
        snprintf(why, sizeof why, "the run died of the signal (status %d): the job is lost, not requeued", rc);
        cls = C_LOST;
    } else {
        snprintf(why, sizeof why, "exit %d: %.3000s", rc, log);
        cls = C_STRANDED;
    }
    tally(r, cls, what, why);
    fx_close(&f);
}

/* ------------------------------------------------------------------ S3 fault storms */

/* ------------------------------------------------------------------ disk full */

/* The size of everything under dir, bytes (st_blocks: what a file system charges). */
static long long tree_bytes(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    long long sum = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char p[1200];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(p, &st)) continue;
        sum += S_ISDIR(st.st_mode) ? tree_bytes(p) : (long long)st.st_blocks * 512;
    }
    closedir(d);
    return sum;
}

/* A run whose file store fills its file system (a tmpfs of `kib` KiB, mounted for the
 * case; root only) at some point of its life — the lease, a blob, a manifest, HEAD, an
 * α record — then, with the space freed (the tmpfs grown), resumed: healed when the
 * first life fit and ended at the reference, refused when it stopped with a clear error
 * (exit 3 naming the store and the lack of space) and the resume ended there; anything
 * else strands the run. Returns -1 when tmpfs cannot be mounted here (the family is then
 * reported as not run). */
static int disk_full_case(row *r, long long kib) {
    fixture f;
    char what[96];
    snprintf(what, sizeof what, "%lld KiB free", kib);
    if (fx_open(&f, "full", 0, 3, 16, 2)) {
        violation(r, &r->bad, what, "fixture");
        return 0;
    }
    char mnt[560];
    snprintf(mnt, sizeof mnt, "%.540s/mnt", f.dir);
    mkdir(mnt, 0700);
    if (sh("mount -t tmpfs -o size=%lldk,mode=0700 tmpfs '%s' 2>/dev/null", kib, mnt) != 0) {
        fx_close(&f);
        return -1;
    }
    snprintf(f.store, sizeof f.store, "%s/store", mnt);
    int rc1 = life(&f, NULL, NULL);
    char log1[8192] = "", log2[8192] = "", h[1024] = "", why[12000];
    read_all(f.log, log1, sizeof log1);
    int cls;
    why[0] = '\0';
    if (rc1 != 0) {
        int clear = rc1 == 3 && strstr(log1, "space") && strstr(log1, "run again") &&
                    strstr(log1, f.store);
        /* read-only commands on the full store still answer, and change nothing */
        char out[16384];
        long long before = tree_bytes(mnt);
        int st = cmd(&f, "status", "", out, sizeof out);
        int ro_ok = (st == 0 || st == 3) && !sanitizer_report(out) && tree_bytes(mnt) == before;
        sh("mount -o remount,size=65536k '%s'", mnt);
        int rc2 = life(&f, NULL, NULL);
        read_all(f.log, log2, sizeof log2);
        int ended = rc2 == 0 && hash_of(&f, h, sizeof h) == 0 && !strcmp(h, ref16());
        if (!ended) {
            snprintf(why, sizeof why, "full: exit %d: %.2000s\nwith space: exit %d, %.300s: %.2000s", rc1,
                     log1, rc2, h, log2);
            cls = rc2 == 0 ? C_LOST : C_STRANDED;
        } else if (!store_clean(&f, why, sizeof why)) {
            cls = C_LOST;
        } else if (!clear || !ro_ok || sanitizer_report(log1)) {
            snprintf(why, sizeof why, "unclear stop (exit %d%s): %.3000s", rc1,
                     ro_ok ? "" : "; status on the full store failed or wrote", log1);
            cls = C_STRANDED;
        } else {
            const char *line = strstr(log1, "space");
            while (line > log1 && line[-1] != '\n') line--;
            snprintf(why, sizeof why, "exit 3, then with space the resume ended at the reference: %.400s", line);
            cls = C_REFUSED;
        }
    } else if (hash_of(&f, h, sizeof h) || strcmp(h, ref16())) {
        snprintf(why, sizeof why, "fit, but ended elsewhere: %.300s", h);
        cls = C_LOST;
    } else {
        cls = store_clean(&f, why, sizeof why) ? C_HEALED : C_LOST;
    }
    tally(r, cls, what, why);
    sh("umount '%s'", mnt);
    fx_close(&f);
    return 0;
}

/* A whole run under the proxy's faults (seeded by idx; odd storms also take a SIGKILL
 * half-way and resume under the same faults): healed when it ends at the reference. A
 * run that gives up (exit 3, retries spent) is refused when a resume without faults
 * heals it. */
static void fault_storm(row *r, int idx) {
    char what[120], rules[2048];
    double p = 0.02 + 0.015 * (idx % 4);
    snprintf(rules, sizeof rules,
             "{\"seed\": %d, \"rules\": ["
             "{\"fault\": \"503\", \"probability\": %.3f},"
             "{\"fault\": \"500\", \"probability\": %.3f},"
             "{\"fault\": \"429\", \"probability\": %.3f},"
             "{\"fault\": \"reset\", \"probability\": %.3f},"
             "{\"fault\": \"close\", \"probability\": %.3f},"
             "{\"fault\": \"reset_after\", \"methods\": [\"PUT\", \"POST\", \"DELETE\"], \"probability\": %.3f},"
             "{\"fault\": \"truncate\", \"methods\": [\"GET\"], \"probability\": %.3f},"
             "{\"fault\": \"stall\", \"stall_seconds\": 3, \"max_count\": 2, \"probability\": 0.01}]}",
             100 + idx, p, p, p / 2, p, p / 2, p, 2 * p);
    snprintf(what, sizeof what, "storm %d (p %.3f%s)", idx, p, idx % 2 ? ", a kill among them" : "");
    fixture f;
    if (fx_open(&f, "s3faults", 1, 3, 16, 2)) {
        violation(r, &r->bad, what, "fixture");
        return;
    }
    control("/reset", "{}");
    setenv("TANDEM_S3_RETRIES", "12", 1);
    setenv("TANDEM_S3_TIMEOUT", "1", 1);
    /* a write given up on may land for this long (the 3 s stalls are well inside it): a
     * process that gave up on a DELETE waits it out before it ends (store_settle_own_deletes),
     * 62 s by default, at the end of most storms */
    setenv("TANDEM_TEST_SETTLE_S", "8", 1);
    int ok = control("/faults", rules) == 0;
    int rc;
    if (idx % 2) {
        pid_t pid = start2(&f, NULL, NULL, NULL, 0);
        sleep_s((0.2 + 0.5 * rnd_unit()) * g_t_s3);
        kill(pid, SIGKILL);
        rc = wait_limit(pid, LIFE_LIMIT_S);
        if (rc == 128 + SIGKILL || rc == 0) rc = life(&f, NULL, NULL);
    } else {
        rc = life(&f, NULL, NULL);
    }
    long injected = faults_injected();
    control("/reset", "{}");
    unsetenv("TANDEM_S3_RETRIES");
    unsetenv("TANDEM_S3_TIMEOUT");
    unsetenv("TANDEM_TEST_SETTLE_S");
    char log[8192] = "", why[4096] = "", h[1024] = "";
    read_all(f.log, log, sizeof log);
    snprintf(what + strlen(what), sizeof what - strlen(what), ", %ld faults", injected);
    if (!ok || injected < 1) violation(r, &r->bad, what, "no fault was injected");
    int cls;
    if (rc == 0 || rc == 3) {
        int again = rc == 3 ? life(&f, NULL, NULL) : 0;
        if (again) snprintf(why, sizeof why, "exit %d, and without faults %d: %.2000s", rc, again, log);
        else if (hash_of(&f, h, sizeof h) || strcmp(h, ref16())) snprintf(why, sizeof why, "ended elsewhere");
        else store_clean(&f, why, sizeof why);
        cls = why[0] ? (again ? C_STRANDED : C_LOST) : rc == 3 ? C_REFUSED : C_HEALED;
        if (cls == C_REFUSED) first_line(log, why, sizeof why);
    } else {
        snprintf(why, sizeof why, "exit %d: %.3000s", rc, log);
        cls = C_STRANDED;
    }
    tally(r, cls, what, why);
    fx_close(&f);
}

/* ------------------------------------------------------------------ fuzzed configs */

/* The valid config the fuzzer mutates (a few tenths of a second when run). */
static int base_config_lines(char lines[][256], int cap) {
    static const char *const base[] = {
        "# a valid config; the fuzzer mutates it", "run:", "  episodes: 2", "  seed: 7", "  threads: 1",
        "data:", "  dataset: %s/dataset.yaml", "  mixing: weight", "model:", "  layers: 1",
        "  channels: 16", "  heads: 2", "  ctx: 16", "train:", "  batch: 4", "  seq: 16", "tandem:",
        "  K: 1", "  E: 2", "  gamma: 1.0", "  lr_probe: 1e-2", "optim:", "  lr: 1e-3",
        "  schedule: cosine", "  weight_decay: 1e-2", "  clip: 1.0", "checkpoint:", "  every_episodes: 1"};
    int n = 0;
    for (size_t i = 0; i < sizeof base / sizeof *base && n < cap; i++, n++) {
        if (strstr(base[i], "%s")) snprintf(lines[n], 256, "  dataset: %.200s/dataset.yaml", g_corpus);
        else snprintf(lines[n], 256, "%s", base[i]);
    }
    return n;
}

/* The value part of a "key: value" line, or NULL. */
static char *value_of(char *line) {
    char *c = strstr(line, ": ");
    return c ? c + 2 : NULL;
}

/* One random mutation of the config's lines; its name into what. */
static int mutate(char lines[][256], int n, int cap, char *what, size_t wcap) {
    static const char *const wrong[] = {"[1, 2]", "{a: 1}", "yes", "\"text\"", "~", "-", "0x1F",
                                        "1_000", "12abc", "''", "!!binary aGVsbG8=", "&a 3", "*a",
                                        "true", "[]", "3.5", "-2", "cosine", "sample"};
    static const char *const extreme[] = {"0", "-1", "1e308", "-1e308", "1e-320", "nan", ".nan", ".inf",
                                          "-.inf", "18446744073709551616", "9223372036854775807",
                                          "-9223372036854775808", "2147483648", "4294967296", "1e30",
                                          "0.0", "-0", "65537", "1e9", "99999999999999999999999"};
    int i = (int)rnd_below((uint64_t)n), j = (int)rnd_below((uint64_t)n);
    char *v = value_of(lines[i]);
    switch (rnd_below(10)) {
    case 0:
        snprintf(what, wcap, "line %d deleted", i + 1);
        memmove(lines[i], lines[i + 1], (size_t)(n - i - 1) * 256);
        return n - 1;
    case 1: {
        char *w = value_of(lines[j]);
        if (!v || !w) break;
        char a[256], b[256];
        snprintf(a, sizeof a, "%s", v);
        snprintf(b, sizeof b, "%s", w);
        snprintf(v, 256 - (size_t)(v - lines[i]), "%s", b);
        snprintf(w, 256 - (size_t)(w - lines[j]), "%s", a);
        snprintf(what, wcap, "values of lines %d and %d swapped", i + 1, j + 1);
        return n;
    }
    case 2:
        if (!v) break;
        snprintf(v, 256 - (size_t)(v - lines[i]), "%s", wrong[rnd_below(sizeof wrong / sizeof *wrong)]);
        snprintf(what, wcap, "line %d: %s", i + 1, lines[i]);
        return n;
    case 3:
    case 4:
        if (!v) break;
        snprintf(v, 256 - (size_t)(v - lines[i]), "%s", extreme[rnd_below(sizeof extreme / sizeof *extreme)]);
        snprintf(what, wcap, "line %d: %s", i + 1, lines[i]);
        return n;
    case 5:
        if (n >= cap) break;
        memmove(lines[i + 1], lines[i], (size_t)(n - i) * 256);
        snprintf(lines[i + 1], 256, rnd_below(2) ? "  nosuch_key: 1" : "nosuch_section: {a: 1}");
        snprintf(what, wcap, "unknown key after line %d", i + 1);
        return n + 1;
    case 6: {
        size_t len = strlen(lines[i]);
        int k = 1 + (int)rnd_below(4);
        for (int x = 0; x < k && len; x++) {
            static const char garbage[] = {'\x01', '\xff', '\xc3', ':', '{', '[', '\t', '&', '*', '!',
                                           '#', '"', '\'', '%', '@', '|', '>', '\\', '\x7f', '-'};
            lines[i][rnd_below(len)] = garbage[rnd_below(sizeof garbage)];
        }
        snprintf(what, wcap, "garbage bytes in line %d", i + 1);
        return n;
    }
    case 7:
        if (lines[i][0] == ' ') memmove(lines[i], lines[i] + 1, strlen(lines[i]));
        else {
            memmove(lines[i] + 3, lines[i], strlen(lines[i]) + 1 > 252 ? 252 : strlen(lines[i]) + 1);
            memcpy(lines[i], "   ", 3);
        }
        snprintf(what, wcap, "indentation of line %d", i + 1);
        return n;
    case 8:
        if (n >= cap) break;
        memmove(lines[i + 1], lines[i], (size_t)(n - i) * 256);
        snprintf(what, wcap, "line %d duplicated", i + 1);
        return n + 1;
    default: {
        size_t len = strlen(lines[i]);
        if (!len) break;
        lines[i][rnd_below(len)] = (char)('a' + rnd_below(26));
        snprintf(what, wcap, "a letter of line %d changed", i + 1);
        return n;
    }
    }
    snprintf(what, wcap, "line %d unchanged", i + 1);
    return n;
}

/* Whether a refusal's message points somewhere: a line (FILE.yaml:N:), or a key of a
 * section. */
static int names_key_or_line(const char *log) {
    for (const char *p = strstr(log, ".yaml:"); p; p = strstr(p + 1, ".yaml:"))
        if (p[6] >= '0' && p[6] <= '9') return 1;
    static const char *const where[] = {"line ", "run.", "data.", "model.", "train.", "tandem.",
                                        "optim.", "checkpoint.", "cluster.", "key", "preset",
                                        "section"};
    for (size_t i = 0; i < sizeof where / sizeof *where; i++)
        if (strstr(log, where[i])) return 1;
    return 0;
}

/* A fuzzed config: accepted (exit 0, or 75 when it runs longer than a few seconds and is
 * stopped), or refused with exit 2 naming a key or a line and the store untouched. */
static void fuzz_config_case(row *r, int idx) {
    char lines[80][256];
    int n = base_config_lines(lines, 60);
    char what[600] = "", one[200];
    int m = 1 + (int)rnd_below(3);
    for (int k = 0; k < m; k++) {
        n = mutate(lines, n, 60, one, sizeof one);
        snprintf(what + strlen(what), sizeof what - strlen(what), "%s%s", k ? "; " : "", one);
    }
    fixture f;
    f.dir = case_dir("fuzzcfg");
    snprintf(f.config, sizeof f.config, "%s/fuzz.yaml", f.dir);
    snprintf(f.store, sizeof f.store, "%s/store", f.dir);
    snprintf(f.log, sizeof f.log, "%s/log.txt", f.dir);
    FILE *fp = fopen(f.config, "wb");
    size_t total = 0;
    char text[80 * 257];
    for (int i = 0; i < n; i++) total += (size_t)snprintf(text + total, sizeof text - total, "%s\n", lines[i]);
    if (rnd_below(8) == 0) {
        total = rnd_below(total);
        snprintf(what + strlen(what), sizeof what - strlen(what), "; cut at byte %zu", total);
    }
    if (fp) {
        fwrite(text, 1, total, fp);
        fclose(fp);
    }
    char label[700];
    snprintf(label, sizeof label, "config %d (%s)", idx, what);
    pid_t pid = start2(&f, NULL, NULL, NULL, 0);
    /* a valid config may run long: stopped after a few seconds, it must commit and exit 75 */
    int rc = 0;
    double t0 = now_s();
    int st, done = 0;
    while (!done && now_s() - t0 < 4.0) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) done = 1;
        else usleep(5000);
    }
    if (done) rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    else {
        kill(pid, SIGTERM);
        rc = wait_limit(pid, 180);
    }
    char log[16384] = "", why[20000];
    read_all(f.log, log, sizeof log);
    struct stat sst;
    int touched = stat(f.store, &sst) == 0;
    int cls;
    if (sanitizer_report(log)) {
        snprintf(why, sizeof why, "sanitizer report (exit %d): %.6000s", rc, log);
        cls = C_STRANDED;
    } else if (rc == 0 || (!done && rc == 75)) {
        cls = C_HEALED;
        why[0] = '\0';
    } else if (rc == 5 && strstr(log, "diverged") && names_key_or_line(log)) {
        /* a valid config whose run diverged: the documented exit 5, naming the key to lower
         * (the run had begun, so its store exists) */
        cls = C_REFUSED;
        snprintf(why, sizeof why, "%.500s", log);
    } else if (rc == 2 && names_key_or_line(log)) {
        cls = touched ? C_LOST : C_REFUSED;
        snprintf(why, sizeof why, "%s%.500s", touched ? "refused but the store was created: " : "", log);
    } else {
        snprintf(why, sizeof why, "exit %d%s: %.3000s", rc, rc == -2 ? " (hung after SIGTERM)" : "", log);
        cls = C_STRANDED;
    }
    if (cls != C_HEALED && cls != C_REFUSED) {
        char cfg[8192] = "";
        read_all(f.config, cfg, sizeof cfg);
        snprintf(why + strlen(why), sizeof why - strlen(why), "\n  the config:\n%.4000s", cfg);
    }
    tally(r, cls, label, why);
    fx_close(&f);
}

/* ------------------------------------------------------------------ fuzzed records */

/* 1-3 random objects of a copy of a stopped (or finished) run's store, each flipped at
 * 1-3 random bytes, truncated at a random length or deleted, then judged like the
 * matrix. */
static void fuzz_records_case(row *r, int s3, int idx) {
    int which = idx % 4 == 3 ? SC_PAST : idx % 4 == 2 ? SC_FIN : SC_MID;
    scenario *sc = scenario_get(s3, which);
    char what[600];
    snprintf(what, sizeof what, "records %d (%s):", idx, SC_NAMES[which]);
    if (!sc->ok) {
        tally(r, C_STRANDED, what, sc->why);
        return;
    }
    fixture f;
    dcase d = {.f = &f, .args = sc->args, .ref = sc->ref};
    store_list l = {0};
    if (scenario_copy(sc, s3, &f) || obj_keys(f.store, "", &l) || l.n == 0) {
        violation(r, &r->bad, what, "the harness could not set the case up");
        fx_close(&f);
        return;
    }
    int m = 1 + (int)rnd_below(3), setup = 0;
    for (int k = 0; k < m && !setup; k++) {
        const char *key = l.keys[rnd_below(l.n)];
        int dup = 0;
        for (int i = 0; i < d.nsaved; i++) dup |= !strcmp(d.saved[i].key, key);
        if (dup) continue;
        if (dcase_save(&d, key) || !d.saved[d.nsaved - 1].existed) {
            setup = -1;
            break;
        }
        saved_obj *o = &d.saved[d.nsaved - 1];
        int how = (int)rnd_below(5);
        char one[200];
        if (how == 0) {
            setup = obj_delete(f.store, key);
            snprintf(one, sizeof one, " %s deleted", key);
        } else if (how == 1 || o->n == 0) {
            size_t cut = rnd_below(o->n + 1);
            setup = obj_write(f.store, key, o->data, cut);
            snprintf(one, sizeof one, " %s cut to %zu of %zu bytes", key, cut, o->n);
        } else {
            unsigned char *b = malloc(o->n);
            memcpy(b, o->data, o->n);
            int flips = 1 + (int)rnd_below(3);
            snprintf(one, sizeof one, " %s flipped at", key);
            for (int x = 0; x < flips; x++) {
                size_t at = rnd_below(o->n);
                b[at] ^= (unsigned char)(1 + rnd_below(255));
                snprintf(one + strlen(one), sizeof one - strlen(one), " %zu", at);
            }
            setup = obj_write(f.store, key, b, o->n);
            free(b);
        }
        snprintf(what + strlen(what), sizeof what - strlen(what), "%s", one);
        unsigned t;
        if (sscanf(key, "metrics/%u.mp", &t) == 1)
            snprintf(g_rows_damaged + strlen(g_rows_damaged), sizeof g_rows_damaged - strlen(g_rows_damaged), "%s%u",
                     g_rows_damaged[0] ? "," : "", t);
    }
    store_list_free(&l);
    if (setup) {
        violation(r, &r->bad, what, "the harness could not damage the store");
    } else {
        char why[8192], dis[4096];
        int cls = judge(&d, why, sizeof why, dis, sizeof dis);
        tally(r, cls, what, why);
        if (dis[0]) violation(r, &r->disagree, what, dis);
    }
    g_rows_damaged[0] = '\0';
    dcase_free(&d);
    fx_close(&f);
}

/* ------------------------------------------------------------------ read-only commands */

/* Runs a read-only command on a URL; its exit status, output into out. */
static int ro_cmd(const char *command, const char *url, char *out, size_t cap) {
    fixture f = {0};
    snprintf(f.store, sizeof f.store, "%s", url);
    char word[32];
    snprintf(word, sizeof word, "%.*s", (int)strcspn(command, " "), command);
    return tandem_on_store(&f, word, command + strlen(word), out, cap);
}

static const char *const RO_CMDS[] = {"status", "verify", "hash", "alpha", "alpha --verify", "mixture",
                                      "eval --split val", "repair", "gc --keep 1", "pin 20"};
#define N_RO ((int)(sizeof RO_CMDS / sizeof *RO_CMDS))

/* Every command on a store that is not there (file: a missing path two levels deep, and an
 * empty directory; S3: a prefix never written): exit 3 "no store at", and nothing is
 * created. Then every read-only command on a damaged store (a copy of the mid scenario
 * with its newest state and newest alpha record flipped): the store is unchanged. */
static void readonly_cases(row *r, int s3) {
    char *dir = case_dir("ro");
    char url[900], what[300], out[16384], why[17000];
    for (int place = 0; place < (s3 ? 1 : 2); place++) {
        if (s3) snprintf(url, sizeof url, "s3://%s/%s-never", getenv("TANDEM_S3_BUCKET"), strrchr(dir, '/') + 1);
        else if (place == 0) snprintf(url, sizeof url, "%s/no/such/store", dir);
        else snprintf(url, sizeof url, "%s", dir);
        for (int c = 0; c < N_RO; c++) {
            snprintf(what, sizeof what, "%s on %s", RO_CMDS[c], s3 ? "a missing prefix" : place ? "an empty directory" : "a missing path");
            int rc = ro_cmd(RO_CMDS[c], url, out, sizeof out);
            int created;
            if (s3) {
                store_list l;
                created = obj_keys(url, "", &l) ? 1 : l.n > 0;
                if (!obj_keys(url, "", &l)) store_list_free(&l);
            } else {
                char p[1000];
                snprintf(p, sizeof p, "%s/no", dir);
                DIR *dd = opendir(dir);
                int entries = 0;
                struct dirent *de;
                while (dd && (de = readdir(dd))) entries += de->d_name[0] != '.';
                if (dd) closedir(dd);
                created = entries > 0 || access(p, F_OK) == 0;
            }
            snprintf(why, sizeof why, "exit %d: %.2000s", rc, out);
            if (created) tally(r, C_LOST, what, "a path was created");
            else if (rc == 3 && strstr(out, "no store at")) tally(r, C_REFUSED, what, out);
            else tally(r, C_STRANDED, what, why);
        }
    }
    /* a damaged store: reads change nothing */
    scenario *sc = scenario_get(s3, SC_MID);
    if (!sc->ok) {
        tally(r, C_STRANDED, "reads of a damaged store", sc->why);
    } else {
        fixture f;
        dcase d = {.f = &f};
        if (scenario_copy(sc, s3, &f) || damage(&d, "states/40.mp", D_FLIPMID, NULL, NULL) ||
            damage(&d, "alpha/9.mp", D_FLIPMID, NULL, NULL)) {
            violation(r, &r->bad, "reads of a damaged store", "setup");
        } else {
            sha256_digest before, after;
            size_t nb = 0, na = 0;
            store_digest(f.store, &before, &nb);
            for (int c = 0; c < N_RO - 2; c++) {
                snprintf(what, sizeof what, "%s on a damaged store", RO_CMDS[c]);
                int rc = ro_cmd(RO_CMDS[c], f.store, out, sizeof out);
                store_digest(f.store, &after, &na);
                snprintf(why, sizeof why, "exit %d: %.2000s", rc, out);
                if (sanitizer_report(out)) tally(r, C_STRANDED, what, why);
                else if (na != nb || memcmp(&before, &after, sizeof before)) tally(r, C_LOST, what, "the store changed");
                else if (rc != 0 && rc != 3) tally(r, C_STRANDED, what, why);
                else tally(r, C_HEALED, what, NULL);
            }
        }
        dcase_free(&d);
        fx_close(&f);
    }
    test_rmtree(dir);
    free(dir);
}

/* ------------------------------------------------------------------ the families */

static void test_references(void) {
    CHECK(reference(3, 16, 2, g_ref16, sizeof g_ref16, &g_t_file) == 0, "the uninterrupted run");
    CHECK(reference(3, 12, 4, g_ref12, sizeof g_ref12, NULL) == 0, "the scenarios' uninterrupted run");
    if (!g_s3_up) return; /* the S3 families fail on their own */
    fixture f;
    CHECK(fx_open(&f, "s3ref", 1, 3, 16, 2) == 0, "fixture");
    double t0 = now_s();
    int rc = life(&f, NULL, NULL);
    g_t_s3 = now_s() - t0;
    char h[1024] = "";
    CHECK(rc == 0 && hash_of(&f, h, sizeof h) == 0 && strcmp(h, ref16()) == 0,
          "the S3 run (exit %d) ended elsewhere than the file-store run:\n%s", rc, h);
    printf("  an undisturbed run: %.2f s on the file store, %.2f s on S3\n", g_t_file, g_t_s3);
    fx_close(&f);
}

#define NEEDS_S3() CHECK(g_s3_up, "the S3 test server did not start (see %s/start.log)", g_tmp)

static void test_kill_storms_file(void) {
    row *r = row_of("kill storm", "file");
    for (int i = 0; i < 2 * g_scale; i++) kill_storm(r, 0, i, 14);
    CHECK_ROW(r, 2 * g_scale);
}

static void test_kill_storms_s3(void) {
    row *r = row_of("kill storm", "s3");
    NEEDS_S3();
    for (int i = 0; i < g_scale; i++) kill_storm(r, 1, i, 10);
    CHECK_ROW(r, g_scale);
}

/* n stale-writer cases: half with a changed config, A frozen at HEAD positions 0..70
 * (every commit of the run) and let go at 0..400 ms after the takeover or after B ended. */
static void stale_writers(row *r, int s3, int n) {
    static const int afters[] = {0, 5, 20, 60, 150, 400, -1};
    for (int i = 0; i < n; i++) stale_case(r, s3, 10 * ((i / 2) % 8), afters[i % 7], i % 2);
}

static void test_stale_writers_file(void) {
    row *r = row_of("stale writer", "file");
    stale_writers(r, 0, 5 * g_scale);
    CHECK_ROW(r, 5 * g_scale);
}

static void test_stale_writers_s3(void) {
    row *r = row_of("stale writer", "s3");
    NEEDS_S3();
    stale_writers(r, 1, 2 * g_scale);
    CHECK_ROW(r, 2 * g_scale);
}

/* n signals: the first pending across exec, the others 0..2 s after the handler exists,
 * in even steps; the stop signals (util/stop_signals.h) in turn from `first`: each row
 * starts elsewhere in the table, so that the bounded run (2-4 cases a row) sends all six
 * and the one pending across exec is another signal in each row. */
static void startup_signals(row *r, int s3, int n, int first) {
    for (int i = 0; i < n; i++)
        signal_case(r, s3, TDM_STOP_SIGNALS[(first + i) % TDM_N_STOP_SIGNALS], i == 0 ? -1 : n > 2 ? 2.0 * (i - 1) / (n - 2) : 0);
    signal_case(r, s3, SIGTERM, -2);
}

static void test_startup_signals_file(void) {
    row *r = row_of("start-up signal", "file");
    startup_signals(r, 0, 3 * g_scale, 0);
    CHECK_ROW(r, 3 * g_scale);
}

static void test_startup_signals_s3(void) {
    row *r = row_of("start-up signal", "s3");
    NEEDS_S3();
    startup_signals(r, 1, 3 * g_scale + 1, 3);
    CHECK_ROW(r, 3 * g_scale + 1);
}

/* The matrix on the file store: every kind with every damage from CHAOS_SCALE 3 on,
 * three damages per kind (all seven across the kinds) below. */
static void test_corruption_file(void) {
    row *r = row_of("corruption", "file");
    int per = g_scale >= 3 ? D_N : 3;
    for (int k = 0; k < NKINDS; k++)
        for (int j = 0; j < per; j++) corruption_case(r, 0, k, per == D_N ? j : (k * 3 + j) % D_N);
    CHECK_ROW(r, NKINDS * per);
}

/* On S3: the whole matrix from CHAOS_SCALE 5 on, else 3 x CHAOS_SCALE random cases of the
 * kinds of the mid scenario. */
static void test_corruption_s3(void) {
    row *r = row_of("corruption", "s3");
    NEEDS_S3();
    int n = 0;
    if (g_scale >= 5) {
        for (int k = 0; k < NKINDS; k++)
            for (int dmg = 0; dmg < D_N; dmg++, n++) corruption_case(r, 1, k, dmg);
    } else {
        for (; n < 3 * g_scale;) {
            int k = (int)rnd_below(NKINDS);
            if (KINDS[k].scen != SC_MID) continue;
            corruption_case(r, 1, k, (int)rnd_below(D_N));
            n++;
        }
    }
    CHECK_ROW(r, n);
}

static void test_s3_fault_storms(void) {
    row *r = row_of("S3 fault storm", "s3");
    NEEDS_S3();
    for (int i = 0; i < 2 * g_scale; i++) fault_storm(r, i);
    CHECK_ROW(r, 2 * g_scale);
}

/* n sizes of free space, from a few KiB (the lease does not fit) to more than the run
 * needs, spread evenly in log scale over what the undisturbed run's store takes. */
static void test_disk_full(void) {
    row *r = row_of("disk full", "file");
    fixture ref;
    CHECK(fx_open(&ref, "fullref", 0, 3, 16, 2) == 0 && life(&ref, NULL, NULL) == 0, "reference");
    long long need = tree_bytes(ref.store) / 1024 + 64;
    fx_close(&ref);
    int n = 4 * g_scale;
    for (int i = 0; i < n; i++) {
        /* the top size is 4x the final store: a run's peak (states before retention
         * deletes, temporaries) is above its end */
        long long kib = (long long)(8 * pow((double)need * 4 / 8, (double)i / (n - 1)));
        if (disk_full_case(r, kib < 8 ? 8 : kib) < 0) {
            printf("  disk full: not run (tmpfs cannot be mounted here: needs root)\n");
            return;
        }
    }
    CHECK_ROW(r, n);
}

static void test_fuzzed_configs(void) {
    row *r = row_of("fuzzed config", "file");
    for (int i = 0; i < 40 * g_scale; i++) fuzz_config_case(r, i);
    CHECK_ROW(r, 40 * g_scale);
}

static void test_fuzzed_records_file(void) {
    row *r = row_of("fuzzed records", "file");
    for (int i = 0; i < 10 * g_scale; i++) fuzz_records_case(r, 0, i);
    CHECK_ROW(r, 10 * g_scale);
}

static void test_fuzzed_records_s3(void) {
    row *r = row_of("fuzzed records", "s3");
    NEEDS_S3();
    for (int i = 0; i < 2 * g_scale; i++) fuzz_records_case(r, 1, i);
    CHECK_ROW(r, 2 * g_scale);
}

/* The families again with checkpoint.snapshot: stream (g_stream), bounded: a kill storm, a
 * few stale writers, start-up signals, one damage of every object kind, fuzzed records. */
static void test_stream_snapshots(void) {
    g_stream = 1;
    row *r = row_of("kill storm", "stream");
    for (int i = 0; i < g_scale; i++) kill_storm(r, 0, 100 + i, 14);
    CHECK_ROW(r, g_scale);
    r = row_of("stale writer", "stream");
    for (int i = 0; i < 2 * g_scale; i++) stale_case(r, 0, 10 * ((3 * i + 1) % 8), i % 2 ? 20 : -1, i % 2);
    CHECK_ROW(r, 2 * g_scale);
    r = row_of("start-up signal", "stream");
    startup_signals(r, 0, 2 * g_scale, 1);
    CHECK_ROW(r, 2 * g_scale);
    r = row_of("corruption", "stream");
    for (int k = 0; k < NKINDS; k++) corruption_case(r, 0, k, (k * 5 + 1) % D_N);
    CHECK_ROW(r, NKINDS);
    r = row_of("fuzzed records", "stream");
    for (int i = 0; i < 4 * g_scale; i++) fuzz_records_case(r, 0, i);
    CHECK_ROW(r, 4 * g_scale);
    g_stream = 0;
}

/* The families again under the DMO's default hold (g_held): the run pinned (no twins)
 * until domain 1's validation score rises (the test hook) and marks it, full probes after
 * it, so that kills, stale writers and signals land in pinned probes, in full ones and
 * across the switch. The uninterrupted run must show both kinds of episode. */
static void held_dmo(void) {
    fixture f;
    CHECK(fx_open(&f, "heldref", 0, 3, 16, 2) == 0 && life(&f, NULL, NULL) == 0 &&
              hash_of(&f, g_ref16_held, sizeof g_ref16_held) == 0,
          "the uninterrupted held run");
    char out[65536];
    CHECK(cmd(&f, "alpha", "--format json", out, sizeof out) == 0, "alpha: %.500s", out);
    int probed = 0, records = 0;
    for (const char *p = out; (p = strstr(p, "\"episode\"")); p++) records++;
    for (const char *p = out; (p = strstr(p, "\"loss_u\"")); p++) probed++;
    fx_close(&f);
    CHECK(records == 16 && probed > 0 && probed < records,
          "the held run should be pinned before the mark and probe after it: %d of %d records probed", probed,
          records);
    CHECK(strcmp(g_ref16_held, g_ref16) != 0, "the held run ended where the unheld one does");
    printf("  the held run: %d of 16 episodes pinned, then full probes\n", records - probed);
    row *r = row_of("kill storm", "held");
    for (int i = 0; i < 2 * g_scale; i++) kill_storm(r, 0, 200 + i, 14);
    CHECK_ROW(r, 2 * g_scale);
    r = row_of("stale writer", "held");
    for (int i = 0; i < 2 * g_scale; i++) stale_case(r, 0, 10 * ((5 * i + 2) % 8), i % 2 ? 60 : 0, i % 2);
    CHECK_ROW(r, 2 * g_scale);
    r = row_of("start-up signal", "held");
    startup_signals(r, 0, 2 * g_scale, 5);
    CHECK_ROW(r, 2 * g_scale);
    if (g_s3_up) {
        r = row_of("kill storm", "held-s3");
        for (int i = 0; i < g_scale; i++) kill_storm(r, 1, 300 + i, 10);
        CHECK_ROW(r, g_scale);
        r = row_of("S3 fault storm", "held-s3");
        for (int i = 0; i < g_scale; i++) fault_storm(r, 1 + 2 * i); /* odd: a kill among them */
        CHECK_ROW(r, g_scale);
    }
}

static void test_held_dmo(void) {
    g_held = 1;
    held_dmo();
    g_held = 0;
}

static void test_readonly_file(void) {
    row *r = row_of("read-only", "file");
    readonly_cases(r, 0);
    CHECK_ROW(r, 2 * N_RO + N_RO - 2);
}

static void test_readonly_s3(void) {
    row *r = row_of("read-only", "s3");
    NEEDS_S3();
    readonly_cases(r, 1);
    CHECK_ROW(r, N_RO + N_RO - 2);
}

int main(void) {
    const char *v = getenv("CHAOS_SCALE");
    g_scale = v && atoi(v) > 0 ? atoi(v) : 1;
    v = getenv("CHAOS_SEED");
    uint64_t seed = v && *v ? strtoull(v, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    g_rng = seed * 0x9E3779B97F4A7C15ull + 1;
    printf("test_chaos: CHAOS_SCALE=%d CHAOS_SEED=%llu\n", g_scale, (unsigned long long)seed);
    const char *root = getenv("TANDEM_ROOT");
    snprintf(g_root, sizeof g_root, "%s", root && *root ? root : ".");
    char *dir = test_tmpdir("chaos");
    snprintf(g_tmp, sizeof g_tmp, "%s", dir);
    free(dir);
    snprintf(g_corpus, sizeof g_corpus, "%s/corpus", g_tmp);
    uint64_t tr[3] = {30000, 15000, 6000};
    tdm_err e = {0};
    if (corpus_fixture(g_corpus, 3, tr, 3, 3000, NULL, &e)) {
        fprintf(stderr, "corpus: %s\n", e.msg);
        return 1;
    }
    snprintf(g_srv, sizeof g_srv, "%s/server", g_tmp);
    if (sh("bash '%s/tests/s3/start.sh' '%s' > '%s/start.log' 2>&1", g_root, g_srv, g_tmp) == 0) {
        char envf[800];
        snprintf(envf, sizeof envf, "%s/env", g_srv);
        g_s3_up = s3_load_env(envf) == 0;
        unsetenv("TANDEM_S3_PART_MIB");
    } else {
        sh("cat '%s/start.log'", g_tmp);
    }
    double t0 = now_s();
#define TIMED(fn)                                                                          \
    do {                                                                                   \
        double t_ = now_s();                                                               \
        if (!test_selected_(#fn)) break;                                                   \
        RUN(fn);                                                                           \
        printf("  (%s: %.0f s)\n", #fn, now_s() - t_);                                     \
    } while (0)
    TIMED(test_references);
    TIMED(test_kill_storms_file);
    TIMED(test_kill_storms_s3);
    TIMED(test_stale_writers_file);
    TIMED(test_stale_writers_s3);
    TIMED(test_startup_signals_file);
    TIMED(test_startup_signals_s3);
    TIMED(test_corruption_file);
    TIMED(test_corruption_s3);
    TIMED(test_s3_fault_storms);
    TIMED(test_disk_full);
    TIMED(test_fuzzed_configs);
    TIMED(test_fuzzed_records_file);
    TIMED(test_fuzzed_records_s3);
    TIMED(test_stream_snapshots);
    TIMED(test_held_dmo);
    TIMED(test_readonly_file);
    TIMED(test_readonly_s3);
    print_table();
    printf("test_chaos: %.0f s (CHAOS_SCALE=%d, CHAOS_SEED=%llu)\n", now_s() - t0, g_scale,
           (unsigned long long)seed);
    scenarios_free();
    if (g_s3_up) sh("bash '%s/tests/s3/stop.sh' '%s' >/dev/null 2>&1", g_root, g_srv);
    test_rmtree(g_tmp);
    return test_summary("test_chaos");
}
