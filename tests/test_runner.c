/* test_runner.c — `tandem run` as users and schedulers drive it: the binary
 * ($TANDEM_BIN) is started, killed, signalled and resumed on a small DMO run, and every
 * path must end with the same final hashes (`tandem hash`) as the uninterrupted run.
 *
 *   chaos        SIGKILL at 20+ moments (random times, and inside commits by hook)
 *   SIGTERM      during each step kind: exit 75 quickly, a committed state, same end;
 *                and at every moment of start-up, also pending across exec
 *   corruption   a flipped blob byte, a truncated manifest, a deleted HEAD: named, fallen
 *                back from, same end
 *   nondeterminism  a perturbed replay (test-only switch) exits 4 and overwrites nothing
 *   config       a changed pinned key is refused (exit 2) unless allowed (recorded);
 *                an allowed change after a SIGKILL sets the old trajectory's α records
 *                aside (superseded/) instead of failing the replay check, even when the
 *                set-aside itself is killed midway; and one allowed while HEAD is lost
 *                takes effect at the newest state (nothing set aside as fenced), and a
 *                lost change record given again is recorded where it first took effect
 */
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/corpus_fixture.h"
#include "tests/runner_fixture.h"
#include "data/shard.h"
#include "ledger/records.h"
#include "model/blas_core.h"
#include "model/model.h"
#include "tests/test.h"
#include "util/rng.h"

static char g_corpus[600]; /* shared by all fixtures */
static char g_ref_hash[1024];
static double g_ref_seconds;
static int g_ref_steps;

/* A run's config: the reference's model, data and budget with its tandem and checkpoint
 * sections given (NULL: the reference's). */
static int fixture_open_config(fixture *f, const char *tag, const char *tandem, const char *checkpoint) {
    f->dir = test_tmpdir(tag);
    snprintf(f->config, sizeof f->config, "%s/run.yaml", f->dir);
    snprintf(f->store, sizeof f->store, "%s/store", f->dir);
    snprintf(f->log, sizeof f->log, "%s/log.txt", f->dir);
    char text[2048];
    snprintf(text, sizeof text,
             "run: {episodes: 16, seed: 3, threads: 1}\n"
             "data: {dataset: %s/dataset.yaml}\n"
             "model: {layers: 2, channels: 32, heads: 2, ctx: 32}\n"
             "train: {batch: 6, seq: 32}\n"
             "tandem: %s\n"
             "optim: {lr: 3e-3}\n"
             "checkpoint: %s\n",
             g_corpus, tandem ? tandem : "{K: 2, E: 3, lr_alpha: 0.5, alpha_cut: any}",
             checkpoint ? checkpoint : "{every_episodes: 1}");
    return write_file(f->config, text);
}

/* The reference run's config with its checkpoint section replaced (NULL: the reference's).
 * alpha_cut: any, so that every resume and replay here is checked on an α that moves (this
 * budget repeats no domain past 4 epochs: the default hold would keep α at its start;
 * the hold's own tests are test_pinned_probe_resumes, test_steps' and cli_caps'). */
static int fixture_open_ckpt(fixture *f, const char *tag, const char *checkpoint) {
    return fixture_open_config(f, tag, NULL, checkpoint);
}

static int fixture_open(fixture *f, const char *tag) { return fixture_open_ckpt(f, tag, NULL); }

/* Whether the run's store ends where the uninterrupted reference run does (its hash). */
static int at_reference(fixture *f) {
    char h[1024];
    return hash_of(f, h, sizeof h) == 0 && strcmp(h, g_ref_hash) == 0;
}

static void fixture_close(fixture *f) {
    test_rmtree(f->dir);
    free(f->dir);
}

static void setup_corpus(void) {
    char *dir = test_tmpdir("runner-corpus");
    uint64_t tr[3] = {30000, 15000, 6000};
    tdm_err e = {0};
    if (corpus_fixture(dir, 3, tr, 3, 3000, NULL, &e)) {
        fprintf(stderr, "corpus: %s\n", e.msg);
        exit(1);
    }
    snprintf(g_corpus, sizeof g_corpus, "%s", dir);
    free(dir);
}

static void test_uninterrupted_reference(void) {
    fixture f;
    CHECK(fixture_open(&f, "ref") == 0, "fixture");
    double t0 = now_s();
    int rc = run_to_end(&f, NULL);
    g_ref_seconds = now_s() - t0;
    char log[8192];
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0, "exit %d: %s", rc, log);
    CHECK(hash_of(&f, g_ref_hash, sizeof g_ref_hash) == 0, "hash: %s", g_ref_hash);
    CHECK(strstr(g_ref_hash, "step done") && strstr(g_ref_hash, " 16\n"), "final state: %s", g_ref_hash);
    g_ref_steps = 16 * (3 + 2);
    printf("  reference run: %.2f s, %d steps\n", g_ref_seconds, g_ref_steps);
    /* a finished run reports at once and changes nothing */
    rc = run_to_end(&f, NULL);
    char again[1024];
    CHECK(rc == 0 && hash_of(&f, again, sizeof again) == 0 && strcmp(again, g_ref_hash) == 0,
          "rerun of a finished run changed it (exit %d)", rc);
    fixture_close(&f);
}

static void test_chaos_sigkill(void) {
    CHECK(g_ref_hash[0], "needs the reference run");
    fixture f;
    CHECK(fixture_open(&f, "chaos") == 0, "fixture");
    chaos_result cr;
    chaos_loop(&f, 24, g_ref_seconds / 16, (uint64_t)time(NULL), &cr);
    CHECK(!cr.bad_exit, "a life exited %d: %s", cr.bad_exit, cr.log);
    int kills = cr.kills, in_commit = cr.in_commit, finished = cr.finished;
    printf("  %d SIGKILLs (%d inside commits by hook) before the run finished\n", kills, in_commit);
    CHECK(kills >= 20, "only %d kills landed", kills);
    CHECK(in_commit >= 6, "only %d kills inside commits", in_commit);
    int rc = finished ? 0 : run_to_end(&f, NULL);
    char log[8192];
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0, "final resume exited %d: %s", rc, log);
    char h[1024];
    CHECK(hash_of(&f, h, sizeof h) == 0, "hash: %s", h);
    CHECK(strcmp(h, g_ref_hash) == 0, "chaos run ended elsewhere:\n%s\nvs uninterrupted:\n%s", h,
          g_ref_hash);
    fixture_close(&f);
}

/* The writer epoch in the (file) store's lease, 0 when there is none: it grows when a
 * run has started and taken the lease. */
static uint64_t lease_epoch(const fixture *f) {
    char path[700];
    static char buf[4096];
    snprintf(path, sizeof path, "%s/lease", f->store);
    FILE *fp = fopen(path, "rb");
    if (!fp) return 0;
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    rec_lease l;
    tdm_err e;
    return rec_lease_decode(buf, n, "lease", &l, &e) ? 0 : l.epoch;
}

static void test_sigterm_each_step_kind(void) {
    CHECK(g_ref_hash[0], "needs the reference run");
    static const char *const kinds[] = {"probe", "alpha", "free"};
    for (int k = 0; k < 3; k++) {
        fixture f;
        CHECK(fixture_open(&f, "term") == 0, "fixture");
        char env[64];
        snprintf(env, sizeof env, "TANDEM_TEST_SIGNAL_AT=%s:%d", kinds[k], k == 2 ? 5 : 3);
        int rc = run_to_end(&f, env);
        char log[8192];
        read_all(f.log, log, sizeof log);
        CHECK(rc == 75, "%s: exit %d: %s", kinds[k], rc, log);
        char h[1024];
        CHECK(hash_of(&f, h, sizeof h) == 0, "%s: no committed state: %s", kinds[k], h);
        /* probe 3 is abandoned (state before it); alpha 3 completes (its free steps are
         * next); free 5 is episode 1's second, so its third is next */
        const char *want = k == 0 ? "seq 10\nstep probe" : k == 1 ? "seq 12\nstep free" : "seq 9\nstep free";
        CHECK(strstr(h, want), "%s: committed state is at %s", kinds[k], h);
        rc = run_to_end(&f, NULL);
        read_all(f.log, log, sizeof log);
        CHECK(rc == 0, "%s: resume exit %d: %s", kinds[k], rc, log);
        CHECK(hash_of(&f, h, sizeof h) == 0 && strcmp(h, g_ref_hash) == 0,
              "%s: resumed run ended elsewhere:\n%s", kinds[k], h);
        fixture_close(&f);
    }
    /* an external SIGTERM at a random moment: exit 75 within about one step */
    fixture f;
    CHECK(fixture_open(&f, "term") == 0, "fixture");
    double step = g_ref_seconds / g_ref_steps, worst = 0;
    rng_stream s;
    rng_stream_init(&s, 11, RNG_TEST, 21, 0, 0);
    for (int i = 0; i < 5; i++) {
        uint64_t before = lease_epoch(&f);
        pid_t pid = start_run(&f, NULL, NULL, NULL);
        /* from when it holds the lease: a signal before main() is the loader's business */
        double w0 = now_s();
        while (lease_epoch(&f) == before && now_s() - w0 < 30) usleep(2000);
        double delay = rng_uniform(&s) * 0.3 * g_ref_seconds;
        struct timespec ts = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9)};
        nanosleep(&ts, NULL);
        double t0 = now_s();
        kill(pid, SIGTERM);
        int rc = wait_exit(pid);
        double lat = now_s() - t0;
        if (rc == 0) continue; /* finished before the signal */
        CHECK(rc == 75, "external SIGTERM: exit %d", rc);
        if (lat > worst) worst = lat;
    }
    printf("  SIGTERM to exit: worst %.3f s; mean step %.3f s\n", worst, step);
    /* one step, plus the commit and process exit (fsyncs), with slack for a busy machine */
    CHECK(worst < 4 * step + 0.5, "exit took %.3f s, a step takes %.3f s", worst, step);
    int rc = run_to_end(&f, NULL);
    CHECK(rc == 0 && at_reference(&f),
          "after external SIGTERMs the run ended elsewhere (exit %d)", rc);
    fixture_close(&f);
}

/* A preemption at any moment of start-up (argument parsing, config, store open, lease,
 * restore, the first steps) ends the run with exit 75, never with death by the signal;
 * and each run, resumed, ends where the uninterrupted one does. Two launch styles:
 *  - plain fork+exec, the signal timed from when the process catches SIGTERM (main's first
 *    line): 0 ms to ~2 s in growing steps, each stop signal (util/stop_signals.h) in turn;
 *  - the signals blocked across fork and exec (a careful launcher), sent at once or a few
 *    ms after fork: they wait pending through the dynamic loader for tandem's handler. */
static void test_signal_during_startup(void) {
    CHECK(g_ref_hash[0], "needs the reference run");
    static const double delays_ms[] = {0, 0.2, 1, 2, 5, 10, 20, 40, 80, 160, 320, 640, 1000, 1500, 2000};
    static const double pending_ms[] = {0, 0, 0.1, 0.5, 1, 3};
    int n = (int)(sizeof delays_ms / sizeof delays_ms[0]), lives = n + 6, stopped = 0;
    for (int i = 0; i < lives; i++) {
        /* a fresh run each time, slowed (30 ms a step, 2.4 s in all) so that it is still
         * running at the latest signal */
        fixture f;
        CHECK(fixture_open(&f, "startsig") == 0, "fixture");
        int sig = TDM_STOP_SIGNALS[i % TDM_N_STOP_SIGNALS], pending = i >= n;
        double d = pending ? pending_ms[i - n] : delays_ms[i];
        pid_t pid = start_run_full(&f, "TANDEM_TEST_STEP_DELAY_MS=30", NULL, pending);
        if (!pending) CHECK(wait_catches(pid, sig) == 0, "run %d never caught signal %d", i, sig);
        usleep((useconds_t)(d * 1000));
        kill(pid, sig);
        int rc = wait_exit(pid);
        char log[4096];
        read_all(f.log, log, sizeof log);
        CHECK(rc == 75, "signal %d %.1f ms after %s: exit %d: %s", sig, d,
              pending ? "fork, blocked across exec" : "the handler", rc, log);
        stopped++;
        rc = run_to_end(&f, NULL);
        CHECK(rc == 0 && at_reference(&f),
              "after a start-up signal (%.1f ms) the run ended elsewhere (exit %d)", d, rc);
        fixture_close(&f);
    }
    printf("  %d start-up signals (0-2000 ms after the handler, 0-3 ms after fork pending "
           "across exec): all exit 75, all resumed to the reference hash\n", stopped);
}

/* The stop signals beyond DESIGN's three, mid-run: a hang-up (the terminal or ssh session
 * that started the run went away), another batch system's warning (SIGUSR2), a CPU-time
 * soft limit (SIGXCPU), a container manager's shutdown (SIGPWR), Ctrl-\ or an image's
 * STOPSIGNAL (SIGQUIT) and `timeout -s ALRM` (SIGALRM) each stop the run as a preemption
 * does — exit 75 after a commit where their default action would kill it (SIGXCPU and
 * SIGQUIT: with a core; SIGPWR, SIGQUIT and SIGALRM left the lease held) — and the resume
 * ends at the reference. A run started with SIGHUP ignored (nohup) keeps ignoring it and
 * finishes. */
static void test_more_stop_signals(void) {
    CHECK(g_ref_hash[0], "needs the reference run");
    static const int sigs[] = {SIGHUP, SIGUSR2, SIGXCPU, SIGPWR, SIGQUIT, SIGALRM, SIGHUP};
    const int n = (int)(sizeof sigs / sizeof *sigs);
    unsetenv("TANDEM_TEST_VAL_RISE"); /* an earlier test's hook, had it stopped early */
    for (int i = 0; i < n; i++) {
        int sig = sigs[i], nohup = i == n - 1;
        fixture f;
        CHECK(fixture_open(&f, nohup ? "stopsig-ignored" : "stopsig") == 0, "fixture");
        fixture_hup_ignored = nohup; /* SIG_IGN in the child, kept across exec */
        pid_t pid = start_run_full(&f, "TANDEM_TEST_STEP_DELAY_MS=30", NULL, 0);
        fixture_hup_ignored = 0;
        CHECK(wait_catches(pid, SIGTERM) == 0, "the run never caught SIGTERM");
        /* the handlers go in one after another: wait for this one (nohup: it never comes;
         * looked at once the run is well under way) */
        int caught = nohup ? 0 : wait_catches(pid, sig) == 0;
        usleep(300 * 1000);
        if (nohup) caught = catches_signal(pid, sig) == 1;
        kill(pid, sig);
        int rc = wait_exit(pid);
        char log[4096];
        read_all(f.log, log, sizeof log);
        if (nohup) {
            CHECK(!caught && rc == 0, "SIGHUP ignored by the launcher: caught %d, exit %d: %s", caught, rc, log);
        } else {
            CHECK(caught && rc == 75, "signal %d: caught %d, exit %d: %s", sig, caught, rc, log);
            rc = run_to_end(&f, NULL);
        }
        CHECK(rc == 0 && at_reference(&f),
              "after signal %d (%s) the run ended elsewhere (exit %d)", sig, nohup ? "ignored" : "caught", rc);
        fixture_close(&f);
    }
}

/* The OpenBLAS re-exec (model/blas_core.c: on a CPU OpenBLAS does not know, tandem sets
 * OPENBLAS_CORETYPE and executes itself again) holds the stop signals across its exec:
 * each of them, raised by a test hook in the first image just before its exec, reaches
 * the second image's handler (exit 75; without the hold the signal's default action ended
 * the process). The re-exec is forced by a test hook (this CPU is known) with the core the
 * suite runs on, so the resume ends at the reference; that it happened is read from the
 * running process's environment (OPENBLAS_CORETYPE, unset when it started). */
static void test_stop_signals_across_blas_reexec(void) {
    CHECK(g_ref_hash[0], "needs the reference run");
    char core[64];
    const char *had = getenv("OPENBLAS_CORETYPE");
    snprintf(core, sizeof core, "%s", had && *had ? had : blas_core_name());
    char hook[96];
    snprintf(hook, sizeof hook, "TANDEM_TEST_BLAS_REEXEC=%s", core);
    for (int i = -1; i < TDM_N_STOP_SIGNALS; i++) {
        fixture f;
        CHECK(fixture_open(&f, "reexec") == 0, "fixture");
        unsetenv("OPENBLAS_CORETYPE");
        setenv("TANDEM_TEST_STEP_DELAY_MS", "30", 1);
        char sig[16];
        snprintf(sig, sizeof sig, "%d", i < 0 ? 0 : TDM_STOP_SIGNALS[i]);
        if (i >= 0) setenv("TANDEM_TEST_REEXEC_RAISE", sig, 1);
        pid_t pid = start_run_full(&f, hook, NULL, 0);
        unsetenv("TANDEM_TEST_STEP_DELAY_MS");
        unsetenv("TANDEM_TEST_REEXEC_RAISE");
        if (had) setenv("OPENBLAS_CORETYPE", core, 1);
        int rc;
        if (i < 0) { /* no signal: the re-exec happened, and the run is caught up in it */
            CHECK(wait_catches(pid, SIGTERM) == 0, "the run never caught SIGTERM");
            char path[64], env[65536] = "", want[96];
            snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
            FILE *fp = fopen(path, "rb");
            size_t n = fp ? fread(env, 1, sizeof env - 1, fp) : 0;
            if (fp) fclose(fp);
            snprintf(want, sizeof want, "OPENBLAS_CORETYPE=%s", core);
            int found = 0;
            for (size_t at = 0; at < n; at += strlen(env + at) + 1) found |= !strcmp(env + at, want);
            CHECK(found, "no re-exec: %s not in the process's environment", want);
            kill(pid, SIGTERM);
        }
        rc = wait_exit(pid);
        char log[4096];
        read_all(f.log, log, sizeof log);
        CHECK(rc == 75, "signal %d across the re-exec: exit %d: %s", i < 0 ? SIGTERM : TDM_STOP_SIGNALS[i], rc, log);
        rc = run_to_end(&f, NULL);
        CHECK(rc == 0 && at_reference(&f),
              "after a signal across the re-exec the run ended elsewhere (exit %d)", rc);
        fixture_close(&f);
    }
}

/* HEAD's manifest, decoded. */
static int head_state(const fixture *f, rec_state *s, char *key, size_t cap) {
    char path[800];
    static char buf[1 << 16];
    snprintf(path, sizeof path, "%s/HEAD", f->store);
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    rec_head h;
    tdm_err e;
    if (rec_head_decode(buf, n, "HEAD", &h, &e)) return -1;
    snprintf(key, cap, "%s", h.state);
    snprintf(path, sizeof path, "%s/%s", f->store, h.state);
    fp = fopen(path, "rb");
    if (!fp) return -1;
    n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    return rec_state_decode(buf, n, key, s, &e);
}

static void test_corruption_falls_back(void) {
    CHECK(g_ref_hash[0], "needs the reference run");
    for (int kind = 0; kind < 3; kind++) {
        fixture f;
        CHECK(fixture_open(&f, "corrupt") == 0, "fixture");
        int rc = run_to_end(&f, "TANDEM_TEST_SIGNAL_AT=free:10");
        CHECK(rc == 75, "setup run exit %d", rc);
        rec_state s;
        char key[128], path[900], expect[200];
        CHECK(head_state(&f, &s, key, sizeof key) == 0, "HEAD unreadable");
        if (kind == 0) {
            char hex[65];
            sha256_hex(&s.tensors[1].chunks[0], hex);
            snprintf(path, sizeof path, "%s/blobs/%s", f.store, hex);
            snprintf(expect, sizeof expect, "blobs/%s", hex);
            int fd = open(path, O_RDWR);
            CHECK(fd >= 0, "open blob");
            unsigned char b;
            CHECK(pread(fd, &b, 1, 100) == 1, "read");
            b ^= 0x10;
            CHECK(pwrite(fd, &b, 1, 100) == 1, "write");
            close(fd);
        } else if (kind == 1) {
            snprintf(path, sizeof path, "%s/%s", f.store, key);
            struct stat st;
            CHECK(stat(path, &st) == 0 && truncate(path, st.st_size / 2) == 0, "truncate");
            snprintf(expect, sizeof expect, "%s", key);
        } else {
            snprintf(path, sizeof path, "%s/HEAD", f.store);
            CHECK(unlink(path) == 0, "delete HEAD");
            snprintf(expect, sizeof expect, "HEAD is missing");
        }
        rec_state_free(&s);
        /* run in the foreground with stderr captured (no --quiet effect on errors) */
        rc = run_to_end(&f, NULL);
        char log[16384];
        read_all(f.log, log, sizeof log);
        CHECK(rc == 0, "kind %d: resume exit %d: %s", kind, rc, log);
        CHECK(strstr(log, expect), "kind %d: the resume did not name '%s':\n%s", kind, expect, log);
        if (kind < 2) CHECK(strstr(log, "falling back"), "kind %d: no fall-back reported:\n%s", kind, log);
        char h[1024];
        CHECK(hash_of(&f, h, sizeof h) == 0 && strcmp(h, g_ref_hash) == 0,
              "kind %d: ended elsewhere:\n%s", kind, h);
        fixture_close(&f);
    }
}

static int slurp(const char *path, char **buf, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    *buf = malloc((size_t)len + 1);
    *n = fread(*buf, 1, (size_t)len, fp);
    fclose(fp);
    return 0;
}

static void test_nondeterministic_replay_is_detected(void) {
    CHECK(g_ref_hash[0], "needs the reference run");
    fixture f;
    CHECK(fixture_open(&f, "nondet") == 0, "fixture");
    int rc = run_to_end(&f, "TANDEM_TEST_SIGNAL_AT=alpha:4");
    CHECK(rc == 75, "setup exit %d", rc);
    char *before[4];
    size_t nb[4];
    char path[800];
    for (int t = 0; t < 4; t++) {
        snprintf(path, sizeof path, "%s/alpha/%d.mp", f.store, t);
        CHECK(slurp(path, &before[t], &nb[t]) == 0, "alpha/%d.mp missing", t);
    }
    /* forget every state so the run replays from the start, perturbing episode 1 */
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/states' '%s/HEAD'", f.store, f.store);
    CHECK(system(cmd) == 0, "rm");
    rc = run_to_end(&f, "TANDEM_TEST_PERTURB_EPISODE=1");
    char log[8192];
    read_all(f.log, log, sizeof log);
    CHECK(rc == 4, "perturbed replay exited %d, not 4: %s", rc, log);
    CHECK(strstr(log, "episode 1") && strstr(log, "nondeterminism") &&
              strstr(log, "only on the kind of machine that wrote what it is compared with"),
          "message: %s", log);
    for (int t = 0; t < 4; t++) {
        char *after;
        size_t na;
        snprintf(path, sizeof path, "%s/alpha/%d.mp", f.store, t);
        CHECK(slurp(path, &after, &na) == 0, "alpha/%d.mp gone", t);
        CHECK(na == nb[t] && memcmp(after, before[t], na) == 0, "alpha/%d.mp was overwritten", t);
        free(after);
        free(before[t]);
    }
    /* the unperturbed replay verifies against the same records and finishes */
    rc = run_to_end(&f, NULL);
    CHECK(rc == 0 && at_reference(&f),
          "after the guard the run ended elsewhere (exit %d)", rc);
    fixture_close(&f);
}

/* Sample mixing, probe_carry and time-based checkpoints (no per-episode ones): a run
 * stopped twice by SIGTERM ends where the uninterrupted run with the same settings does,
 * and the time policy committed several states. */
static void test_sample_mixing_time_policy(void) {
    fixture a, b;
    CHECK(fixture_open(&a, "time") == 0 && fixture_open(&b, "time") == 0, "fixture");
    char text[4096];
    for (int i = 0; i < 2; i++) {
        fixture *f = i ? &b : &a;
        snprintf(text, sizeof text,
                 "run: {episodes: 16, seed: 3, threads: 1}\n"
                 "data: {dataset: %s/dataset.yaml, mixing: sample}\n"
                 "model: {layers: 2, channels: 32, heads: 2, ctx: 32}\n"
                 "train: {batch: 6, seq: 32}\n"
                 "tandem: {K: 2, E: 3, lr_alpha: 0.5, probe_carry: true, alpha_cut: any}\n"
                 "optim: {lr: 3e-3}\n"
                 "checkpoint: {every_episodes: 0, every_seconds: 0.02}\n",
                 g_corpus);
        CHECK(write_file(f->config, text) == 0, "config");
    }
    int rc = run_to_end(&a, NULL);
    char ha[1024], hb[1024], log[8192];
    read_all(a.log, log, sizeof log);
    CHECK(rc == 0 && hash_of(&a, ha, sizeof ha) == 0, "uninterrupted: exit %d %s", rc, log);
    CHECK(strcmp(ha, g_ref_hash) != 0, "sample mixing gave the weight-mixing result");
    CHECK(run_to_end(&b, "TANDEM_TEST_SIGNAL_AT=free:7") == 75, "first stop");
    CHECK(run_to_end(&b, "TANDEM_TEST_SIGNAL_AT=alpha:5") == 75, "second stop");
    rc = run_to_end(&b, NULL);
    CHECK(rc == 0 && hash_of(&b, hb, sizeof hb) == 0, "resume exit %d", rc);
    CHECK(strcmp(ha, hb) == 0, "interrupted run ended elsewhere:\n%s\nvs\n%s", hb, ha);
    char states[800];
    snprintf(states, sizeof states, "ls '%s/states' | wc -l", a.store);
    FILE *p = popen(states, "r");
    int count = 0;
    CHECK(p && fscanf(p, "%d", &count) == 1, "count states");
    pclose(p);
    CHECK(count >= 3, "the time policy committed only %d states", count);
    fixture_close(&a);
    fixture_close(&b);
}

/* The weight of domain `name` in `tandem mixture STORE`'s YAML; -1 when absent. */
static double mixture_weight(const fixture *f, const char *name) {
    char out[4096], key[64];
    if (tandem_on_store(f, "mixture", "", out, sizeof out) != 0) return -1;
    snprintf(key, sizeof key, "\"%s\": ", name);
    const char *p = strstr(out, key);
    return p ? strtod(p + strlen(key), NULL) : -1;
}

/* The pinned probe across stops and kills (the default hold, tandem.skip_pinned): with
 * domain 2's validation score rising from episode 4 (the test hook), the episodes before
 * the mark run no twins and the ones after it do; a run stopped inside a pinned probe,
 * killed inside a commit and stopped again inside a full probe ends on the uninterrupted
 * run's bits, with the same α records (pinned ones without probe losses). */
static void test_pinned_probe_resumes(void) {
    fixture a, b;
    /* the DMO's defaults: the hold (alpha_cut: overfit) and the pinned probe */
    CHECK(fixture_open_config(&a, "pinned-a", "{K: 2, E: 3}", NULL) == 0 &&
              fixture_open_config(&b, "pinned-b", "{K: 2, E: 3}", NULL) == 0,
          "fixture");
    setenv("TANDEM_TEST_VAL_RISE", "2:4", 1);
    char ha[1024], hb[1024], out[65536], out2[65536];
    int rc = run_to_end(&a, NULL);
    CHECK(rc == 0 && hash_of(&a, ha, sizeof ha) == 0, "uninterrupted: exit %d", rc);
    /* which episodes probed: none before the mark, every one after it */
    int first = -1, n = 0, runs = 0;
    CHECK(tandem_on_store(&a, "alpha", "--format csv", out, sizeof out) == 0, "alpha csv");
    for (char *line = strchr(out, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        int t = atoi(line + 1);
        char *f = line + 1;
        for (int k = 0; k < 4 && f; k++) f = strchr(f + 1, ','); /* episode,domain,alpha,alpha_next, */
        int probed = f && f[1] != ','; /* a pinned row: ",,,," (no loss_u, loss_w, delta) */
        if (f && !probed && strncmp(f, ",,,,", 4)) runs++; /* loss_u empty but not the rest */
        if (probed && first < 0) first = t;
        if (probed) n++;
        runs += probed != (first >= 0); /* a pinned row after the first probed one */
    }
    CHECK(first > 2 && first < 15 && runs == 0 && n == 3 * (16 - first),
          "the mark's probes: first probed episode %d, %d probed rows, %d out of order", first, n, runs);
    CHECK(run_to_end(&b, "TANDEM_TEST_SIGNAL_AT=probe:2") == 75, "stop in a pinned probe");
    CHECK(run_to_end(&b, "TANDEM_TEST_KILL_AT=manifest:4") == 128 + SIGKILL, "kill in a commit");
    /* this life resumes at episode 3-5 (the kill was in its predecessor's 4th commit), so
     * its (first - 1)-th probe is in episode first + 1 to first + 3: a full one, after the
     * mark (or the run ends first: exit 0) */
    char stop[64];
    snprintf(stop, sizeof stop, "TANDEM_TEST_SIGNAL_AT=probe:%d", first > 2 ? first - 1 : 1);
    rc = run_to_end(&b, stop);
    CHECK(rc == 75 || (rc == 0 && first + 3 > 15), "stop in a full probe: exit %d", rc);
    rc = run_to_end(&b, NULL);
    unsetenv("TANDEM_TEST_VAL_RISE");
    CHECK(rc == 0 && hash_of(&b, hb, sizeof hb) == 0, "resume exit %d", rc);
    CHECK(strcmp(ha, hb) == 0, "interrupted run ended elsewhere:\n%s\nvs\n%s", hb, ha);
    CHECK(tandem_on_store(&b, "alpha", "--format csv", out2, sizeof out2) == 0 && strcmp(out, out2) == 0,
          "the α records differ after the stops");
    printf("  pinned probe: episodes 0..%d pinned, %d..15 probed; stopped and killed, the same bits\n",
           first - 1, first);
    fixture_close(&a);
    fixture_close(&b);
}

/* tandem.overfit_cap across stops and kills: with domain 2's validation score rising from
 * episode 4 (the test hook; a real overfit needs a bigger model) the run says so, α*
 * gives domain 2 less than the same run without the rise, and a run stopped inside an α
 * step and killed inside a commit ends on the uninterrupted run's bits (the record is in
 * every state); with nothing marked, α* is the bits of the same run without the cap
 * (alpha_cut: any, so that α moves here). */
static void test_overfit_cap_resumes(void) {
    fixture a, b, c;
    CHECK(fixture_open(&a, "ovcap-a") == 0 && fixture_open(&b, "ovcap-b") == 0 && fixture_open(&c, "ovcap-c") == 0,
          "fixture");
    static const char text_of[] = "run: {episodes: 16, seed: 3, threads: 1}\n"
                                  "data: {dataset: %s/dataset.yaml}\n"
                                  "model: {layers: 2, channels: 32, heads: 2, ctx: 32}\n"
                                  "train: {batch: 6, seq: 32}\n"
                                  "tandem: {K: 2, E: 3, alpha_cut: any, overfit_cap: %s}\n"
                                  "optim: {lr: 3e-3}\n"
                                  "checkpoint: {every_episodes: 1}\n";
    char text[2048];
    snprintf(text, sizeof text, text_of, g_corpus, "true");
    CHECK(write_file(a.config, text) == 0 && write_file(b.config, text) == 0 && write_file(c.config, text) == 0,
          "config");
    CHECK(run_to_end(&c, NULL) == 0, "the run without the rise");
    setenv("TANDEM_TEST_VAL_RISE", "2:4", 1);
    /* not --quiet (as start_run is): the run's words are checked too */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' run '%s' --store '%s' > '%s' 2>&1", tandem_bin(), a.config, a.store, a.log);
    int st = system(cmd), rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    char ha[1024], hb[1024], log[8192];
    read_all(a.log, log, sizeof log);
    CHECK(rc == 0 && hash_of(&a, ha, sizeof ha) == 0, "uninterrupted: exit %d %s", rc, log);
    CHECK(strstr(log, "d2's validation loss (smoothed) has risen") && strstr(log, "tandem.overfit_cap"),
          "the run says it holds domain 2: %s", log);
    CHECK(run_to_end(&b, "TANDEM_TEST_SIGNAL_AT=alpha:7") == 75, "stop in an α step");
    CHECK(run_to_end(&b, "TANDEM_TEST_KILL_AT=manifest:3") == 128 + SIGKILL, "kill in a commit");
    rc = run_to_end(&b, NULL);
    unsetenv("TANDEM_TEST_VAL_RISE");
    CHECK(rc == 0 && hash_of(&b, hb, sizeof hb) == 0, "resume exit %d", rc);
    CHECK(strcmp(ha, hb) == 0, "interrupted run ended elsewhere:\n%s\nvs\n%s", hb, ha);
    double held = mixture_weight(&a, "d2"), free_w = mixture_weight(&c, "d2");
    CHECK(held >= 0 && free_w > 0 && held < free_w - 0.01, "α*_2 %g with the rise, %g without", held, free_w);
    /* with no domain marked the cap changes nothing: the same α* as the run without it */
    char off[2048];
    snprintf(off, sizeof off, text_of, g_corpus, "false");
    fixture d;
    CHECK(fixture_open(&d, "ovcap-d") == 0 && write_file(d.config, off) == 0, "fixture");
    CHECK(run_to_end(&d, NULL) == 0, "the run without the cap");
    for (int m = 0; m < 3; m++) {
        char name[16];
        snprintf(name, sizeof name, "d%d", m);
        double x = mixture_weight(&c, name), y = mixture_weight(&d, name);
        CHECK(x >= 0 && x == y, "%s: α* %.17g with the cap (nothing marked), %.17g without", name, x, y);
    }
    fixture_close(&d);
    /* a fixed run (a final run) takes no α step: given the key, it may resume with it changed */
    fixture g;
    CHECK(fixture_open(&g, "ovcap-fixed") == 0 && write_file(g.config, text) == 0, "fixture");
    CHECK(wait_exit(start_run(&g, "TANDEM_TEST_SIGNAL_AT=free:5", "--set", "run.mode=fixed")) == 75, "fixed: stop");
    CHECK(write_file(g.config, off) == 0, "config");
    rc = wait_exit(start_run(&g, NULL, "--set", "run.mode=fixed"));
    read_all(g.log, log, sizeof log);
    CHECK(rc == 0, "a fixed run resumed without overfit_cap: exit %d %s", rc, log);
    fixture_close(&g);
    printf("  overfit cap: α*_2 %.4f with the rise from episode 4, %.4f without\n", held, free_w);
    fixture_close(&a);
    fixture_close(&b);
    fixture_close(&c);
}

/* Two runners on one store: the second takes the lease; the first, still running, is
 * fenced out at its next commit (exit 3) without moving HEAD — otherwise the second's
 * compare-and-swap would fail and it could not finish — and the run ends as if the
 * second had been alone. */
static void test_two_runners_fence_the_stale_one(void) {
    CHECK(g_ref_hash[0], "needs the reference run");
    fixture a, b;
    CHECK(fixture_open(&a, "fence") == 0, "fixture");
    b = a;
    snprintf(b.log, sizeof b.log, "%s/log-b.txt", a.dir);
    pid_t pa = start_run(&a, "TANDEM_TEST_STEP_DELAY_MS=20", NULL, NULL);
    char head[700];
    snprintf(head, sizeof head, "%s/HEAD", a.store);
    double t0 = now_s();
    while (access(head, F_OK) != 0 && now_s() - t0 < 30) usleep(10000);
    CHECK(access(head, F_OK) == 0, "runner A never committed");
    int rb = run_to_end(&b, NULL);
    int ra = wait_exit(pa);
    char la[8192], lb[8192];
    read_all(a.log, la, sizeof la);
    read_all(b.log, lb, sizeof lb);
    CHECK(ra == 3, "stale runner exited %d, not 3: %s", ra, la);
    CHECK(strstr(la, "fenced out"), "stale runner's message: %s", la);
    CHECK(rb == 0, "second runner exited %d: %s", rb, lb);
    CHECK(strstr(lb, "taking over the lease"), "second runner did not report the takeover: %s", lb);
    char h[1024];
    CHECK(hash_of(&b, h, sizeof h) == 0 && strcmp(h, g_ref_hash) == 0, "ended elsewhere:\n%s", h);
    fixture_close(&a);
}

/* The paper's second stage: a fixed mixture from a file, sample mixing (auto), free
 * steps only — no α records — and the same resume guarantees. */
static void test_fixed_mixture_training(void) {
    fixture a, b;
    CHECK(fixture_open(&a, "fixed") == 0 && fixture_open(&b, "fixed") == 0, "fixture");
    char mix[700], text[4096];
    snprintf(mix, sizeof mix, "%s/mix.yaml", a.dir);
    CHECK(write_file(mix, "# a mixture as tandem mixture writes it\nmixture:\n  d0: 0.2\n  d1: 0.3\n  d2: 0.5\n") == 0, "mix");
    for (int i = 0; i < 2; i++) {
        fixture *f = i ? &b : &a;
        snprintf(text, sizeof text,
                 "run: {episodes: 10, seed: 3, threads: 1, mode: fixed}\n"
                 "data: {dataset: %s/dataset.yaml, mixture: file, mixture_file: %s}\n"
                 "model: {layers: 2, channels: 32, heads: 2, ctx: 32}\n"
                 "train: {batch: 5, seq: 32}\n"
                 "tandem: {E: 3}\n"
                 "optim: {lr: 3e-3}\n"
                 "checkpoint: {every_episodes: 2}\n",
                 g_corpus, mix);
        CHECK(write_file(f->config, text) == 0, "config");
    }
    int rc = run_to_end(&a, NULL);
    char log[8192], ha[1024], hb[1024];
    read_all(a.log, log, sizeof log);
    CHECK(rc == 0 && hash_of(&a, ha, sizeof ha) == 0, "fixed run: exit %d %s", rc, log);
    CHECK(strstr(ha, "seq 30\nstep done") && strstr(ha, " 0\n"), "fixed run: 30 free steps, no alpha records:\n%s", ha);
    char path[800];
    snprintf(path, sizeof path, "%s/alpha", a.store);
    CHECK(access(path, F_OK) != 0, "a fixed run wrote alpha records");
    CHECK(run_to_end(&b, "TANDEM_TEST_SIGNAL_AT=free:8") == 75, "stop");
    CHECK(run_to_end(&b, "TANDEM_TEST_SIGNAL_AT=free:11") == 75, "second stop");
    CHECK(run_to_end(&b, NULL) == 0 && hash_of(&b, hb, sizeof hb) == 0, "resume");
    CHECK(strcmp(ha, hb) == 0, "fixed run resumed elsewhere:\n%s\nvs\n%s", hb, ha);
    /* a mixture file that does not fit the dataset is refused naming the domain */
    CHECK(write_file(mix, "mixture:\n  d0: 0.5\n  dX: 0.5\n") == 0, "mix");
    fixture c;
    CHECK(fixture_open(&c, "fixed") == 0, "fixture");
    snprintf(text, sizeof text, "run: {mode: fixed}\ndata: {dataset: %s/dataset.yaml, mixture: file, mixture_file: %s}\n",
             g_corpus, mix);
    CHECK(write_file(c.config, text) == 0, "config");
    rc = run_to_end(&c, NULL);
    read_all(c.log, log, sizeof log);
    CHECK(rc == 2 && strstr(log, "dX") && strstr(log, "mix.yaml"), "bad mixture file: exit %d %s", rc, log);
    /* thirds written to four digits: refused, saying how near 1 the sum must be */
    CHECK(write_file(mix, "mixture:\n  d0: 0.3333\n  d1: 0.3333\n  d2: 0.3333\n") == 0, "mix");
    rc = run_to_end(&c, NULL);
    read_all(c.log, log, sizeof log);
    CHECK(rc == 2 && strstr(log, "sum to 0.9999, not 1 (they must, within 1e-06"), "thirds: exit %d %s", rc, log);
    fixture_close(&a);
    fixture_close(&b);
    fixture_close(&c);
}

/* `tandem run CONFIG --store S --quiet` plus the NULL-terminated extra arguments, with
 * one optional environment assignment; returns the exit status (output in f->log). */
static int run_args(const fixture *f, const char *env_kv, ...) {
    const char *extra[17] = {0};
    int n = 0;
    va_list ap;
    va_start(ap, env_kv);
    for (const char *a; n < 16 && (a = va_arg(ap, const char *));) extra[n++] = a;
    va_end(ap);
    return wait_exit(start_run_argv(f, env_kv, extra));
}

static void test_pinned_config(void) {
    fixture f;
    CHECK(fixture_open(&f, "pin") == 0, "fixture");
    int rc = run_to_end(&f, "TANDEM_TEST_SIGNAL_AT=free:2");
    CHECK(rc == 75, "setup exit %d", rc);
    rc = wait_exit(start_run(&f, NULL, "--set", "tandem.K=3"));
    char log[8192];
    read_all(f.log, log, sizeof log);
    CHECK(rc == 2, "changed key accepted (exit %d)", rc);
    CHECK(strstr(log, "tandem.K") && strstr(log, "--allow-change tandem.K "), "message: %s", log);
    /* the options that resume as pinned are named (a hunt across versions: a default that
     * changed since the run began was refused with no word of --set), and they resume */
    CHECK(strstr(log, "add --set tandem.K=2 to the command"), "the pinned value is not offered: %s", log);
    rc = wait_exit(start_run(&f, "TANDEM_TEST_SIGNAL_AT=free:1", "--set", "tandem.K=2"));
    read_all(f.log, log, sizeof log);
    CHECK(rc == 75, "resumed with the offered --set (stopped again at once): exit %d: %s", rc, log);
    rc = wait_exit(start_run(&f, NULL, "--set", "tandem.bogus=1"));
    read_all(f.log, log, sizeof log);
    CHECK(rc == 2 && strstr(log, "tandem.bogus"), "unknown key: exit %d: %s", rc, log);
    /* allowed: recorded, and the run goes on with K = 3 */
    rc = run_args(&f, NULL, "--set", "tandem.K=3", "--allow-change", "tandem.K", NULL);
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0, "allowed change: exit %d: %s", rc, log);
    char path[800];
    snprintf(path, sizeof path, "%s/configs/0.mp", f.store);
    struct stat st;
    CHECK(stat(path, &st) == 0, "no change record");
    /* model.attention changes nothing on the CPU (every value runs the same kernels):
     * another value is no change there (the finished run exits 0, not 2 naming the key) */
    rc = run_args(&f, NULL, "--set", "tandem.K=3", "--set", "model.attention=builtin", NULL);
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0 && !strstr(log, "model.attention"), "model.attention on the CPU: exit %d: %s", rc, log);
    fixture_close(&f);
}


static int count_files(const char *dir) {
    char cmd[900];
    snprintf(cmd, sizeof cmd, "ls '%s' 2>/dev/null | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
}

/* A run killed with α records beyond its last full state (commits every 5 episodes),
 * resumed with an allowed change: the records the old config computed after that state
 * are set aside under superseded/0/alpha/, the run finishes, and the α chain verifies.
 * Then the same with the set-aside itself killed after its first copy: the next plain
 * resume (the change is already recorded) finishes the job. */
static void test_change_after_kill_supersedes_alpha(void) {
    for (int variant = 0; variant < 2; variant++) {
        fixture f;
        CHECK(fixture_open(&f, "change") == 0, "fixture");
        int rc = run_args(&f, "TANDEM_TEST_KILL_AT=alpha:9", "--set", "checkpoint.every_episodes=5", NULL);
        CHECK(rc == 128 + SIGKILL, "setup run exit %d", rc);
        char dir[900], log[8192], out[8192];
        snprintf(dir, sizeof dir, "%s/alpha", f.store);
        int before = count_files(dir);
        CHECK(before == 8, "%d alpha records before the change (want 8: episodes 0..7)", before);
        rc = run_args(&f, variant ? "TANDEM_TEST_KILL_AT=supersede:1" : NULL, "--set",
                      "checkpoint.every_episodes=5", "--set", "tandem.K=3", "--allow-change",
                      "tandem.K", NULL);
        read_all(f.log, log, sizeof log);
        if (variant == 0) {
            CHECK(rc == 0, "allowed change after a kill: exit %d: %s", rc, log);
        } else {
            CHECK(rc == 128 + SIGKILL, "kill inside the set-aside: exit %d: %s", rc, log);
            rc = run_args(&f, NULL, "--set", "checkpoint.every_episodes=5", "--set", "tandem.K=3", NULL);
            read_all(f.log, log, sizeof log);
            CHECK(rc == 0, "resume after a killed set-aside: exit %d: %s", rc, log);
        }
        snprintf(dir, sizeof dir, "%s/superseded/0/alpha", f.store);
        int set_aside = count_files(dir);
        /* the last full state is at episode 5's end; records 5..7 took effect after it */
        CHECK(set_aside == 3, "variant %d: %d records set aside (want 3): %s", variant, set_aside, log);
        rc = tandem_on_store(&f, "alpha", "--verify", out, sizeof out);
        CHECK(rc == 0 && strstr(out, "16 records"), "alpha --verify exit %d: %s", rc, out);
        fixture_close(&f);
    }
}

/* HEAD lost (deleted, or bytes that do not decode) and a change allowed in the same
 * resume: the change takes effect where the run goes on from — the newest state, found by
 * listing — so the old generation's states still belong to the run. It used to be recorded
 * at position 0: every state looked written by a fenced-out writer, all were set aside,
 * and the run stranded (exit 3). Now it finishes, sets nothing aside, and verifies. */
static void test_change_with_head_lost(void) {
    for (int variant = 0; variant < 2; variant++) {
        fixture f;
        CHECK(fixture_open(&f, variant ? "change-head-bad" : "change-head-gone") == 0, "fixture");
        int rc = run_args(&f, "TANDEM_TEST_KILL_AT=alpha:9", "--set", "checkpoint.every_episodes=2", NULL);
        CHECK(rc == 128 + SIGKILL, "setup run exit %d", rc);
        char path[900], dir[900], log[8192], out[8192];
        snprintf(path, sizeof path, "%s/HEAD", f.store);
        if (variant == 0) {
            CHECK(unlink(path) == 0, "unlink %s: %s", path, strerror(errno));
        } else {
            FILE *h = fopen(path, "wb");
            CHECK(h && fputs("not a record", h) >= 0 && fclose(h) == 0, "garble %s", path);
        }
        snprintf(dir, sizeof dir, "%s/states", f.store);
        int states = count_files(dir);
        CHECK(states >= 3, "%d states before the change", states);
        rc = run_args(&f, NULL, "--set", "checkpoint.every_episodes=2", "--set", "tandem.K=3",
                      "--allow-change", "tandem.K", NULL);
        read_all(f.log, log, sizeof log);
        CHECK(rc == 0, "variant %d: change with HEAD %s: exit %d: %s", variant,
              variant ? "damaged" : "missing", rc, log);
        CHECK(!strstr(log, "fenced out or superseded"), "variant %d: old states taken for a fenced writer's: %s",
              variant, log);
        snprintf(dir, sizeof dir, "%s/quarantine", f.store);
        CHECK(count_files(dir) == 0, "variant %d: something was set aside: %s", variant, log);
        CHECK(strstr(log, variant ? "HEAD was damaged" : "HEAD was missing"),
              "variant %d: HEAD's repair not reported: %s", variant, log);
        rc = tandem_on_store(&f, "verify", "", out, sizeof out);
        CHECK(rc == 0 && strstr(out, " 0 faults"), "variant %d: verify exit %d: %s", variant, rc, out);
        rc = tandem_on_store(&f, "alpha", "--verify", out, sizeof out);
        CHECK(rc == 0, "variant %d: alpha --verify exit %d: %s", variant, rc, out);
        fixture_close(&f);
    }
}

/* The bytes of the store object `key` (at most cap) into buf, its path into path; the
 * count read, 0 when it cannot be read. */
static size_t read_object(const fixture *f, const char *key, unsigned char *buf, size_t cap, char *path,
                          size_t pcap) {
    snprintf(path, pcap, "%s/%s", f->store, key);
    FILE *fp = fopen(path, "rb");
    size_t n = fp ? fread(buf, 1, cap, fp) : 0;
    if (fp) fclose(fp);
    return n;
}

/* The position configs/0.mp records (the run position its change took effect at), or
 * UINT64_MAX where it cannot be read. */
static uint64_t change_record_seq(const fixture *f) {
    char path[900];
    static unsigned char buf[1 << 16];
    size_t n = read_object(f, "configs/0.mp", buf, sizeof buf, path, sizeof path);
    rec_change ch;
    tdm_err e;
    if (!n || rec_change_decode(buf, n, path, &ch, &e)) return UINT64_MAX;
    uint64_t seq = ch.seq;
    rec_change_free(&ch);
    return seq;
}

/* A change record lost after states of its generation were written, the same change given
 * again (the documented way to heal it): recorded again at the position the change first
 * took effect — the newest state of the old generation — not at HEAD's, past it, where
 * the record would say that the states between were computed under the old config. Every
 * state is kept (checkpoint.keep 0): where retention has removed the old generation's
 * states, nothing says where the change took effect, and HEAD's position is taken. */
static void test_lost_change_record_heals_at_its_position(void) {
    fixture f;
    CHECK(fixture_open(&f, "lost-change") == 0, "fixture");
    int rc = run_args(&f, "TANDEM_TEST_KILL_AT=alpha:9", "--set", "checkpoint.every_episodes=2", "--set", "checkpoint.keep=0", NULL);
    CHECK(rc == 128 + SIGKILL, "setup run exit %d", rc);
    rc = run_args(&f, NULL, "--set", "checkpoint.every_episodes=2", "--set", "checkpoint.keep=0", "--set", "tandem.K=3",
                  "--allow-change", "tandem.K", NULL);
    CHECK(rc == 0, "changed run exit %d", rc);
    uint64_t first = change_record_seq(&f);
    CHECK(first != UINT64_MAX && first > 0, "configs/0.mp: position %llu", (unsigned long long)first);
    char rec[900], log[8192], out[8192];
    snprintf(rec, sizeof rec, "%s/configs/0.mp", f.store);
    CHECK(unlink(rec) == 0, "unlink %s: %s", rec, strerror(errno));
    rc = run_args(&f, NULL, "--set", "checkpoint.every_episodes=2", "--set", "checkpoint.keep=0", "--set", "tandem.K=3",
                  "--allow-change", "tandem.K", NULL);
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0, "the same change given again: exit %d: %s", rc, log);
    uint64_t again = change_record_seq(&f);
    CHECK(again == first, "recorded again at run position %llu, first at %llu: %s",
          (unsigned long long)again, (unsigned long long)first, log);
    rc = tandem_on_store(&f, "verify", "", out, sizeof out);
    CHECK(rc == 0 && strstr(out, " 0 faults"), "verify exit %d: %s", rc, out);
    fixture_close(&f);
}

static int cmp_rec_kv(const void *a, const void *b) {
    return strcmp(((const rec_kv *)a)->key, ((const rec_kv *)b)->key);
}

/* Rewrites the fixture's RUN with its entry KEY removed (value NULL: as a run pinned
 * before KEY existed would have it) or KEY = VALUE added (as a newer tandem would write
 * it, a key this one does not know); the map kept sorted, config_sha256 recomputed. 0 on
 * success. */
static int rewrite_pinned(const fixture *f, const char *key, const char *value) {
    char path[900];
    static unsigned char buf[1 << 16];
    size_t n = read_object(f, "RUN", buf, sizeof buf, path, sizeof path);
    rec_run run;
    tdm_err e;
    if (!n || rec_run_decode(buf, n, path, &run, &e)) return -1;
    int rc = 0;
    if (value) {
        rec_kv *more = realloc(run.config, (run.nconfig + 1) * sizeof *more);
        if (more) {
            run.config = more;
            run.config[run.nconfig].key = strdup(key);
            run.config[run.nconfig].value = strdup(value);
            run.nconfig++;
            qsort(run.config, run.nconfig, sizeof *run.config, cmp_rec_kv); /* RUN's map is sorted */
        } else {
            rc = -1;
        }
    } else {
        size_t kept = 0;
        for (size_t i = 0; i < run.nconfig; i++) {
            if (strcmp(run.config[i].key, key) == 0) {
                free(run.config[i].key);
                free(run.config[i].value);
            } else {
                run.config[kept++] = run.config[i];
            }
        }
        if (kept == run.nconfig) rc = -1;
        run.nconfig = kept;
    }
    rec_config_hash(run.config, run.nconfig, &run.config_sha);
    size_t len = 0;
    void *data = rc ? NULL : rec_run_encode(&run, &len);
    rec_run_free(&run);
    if (!data) return -1;
    FILE *fp = fopen(path, "wb");
    rc = fp && fwrite(data, 1, len, fp) == len ? 0 : -1;
    if (fp && fclose(fp)) rc = -1;
    free(data);
    return rc;
}
static int drop_pinned_key(const fixture *f, const char *key) { return rewrite_pinned(f, key, NULL); }
static int add_pinned_key(const fixture *f, const char *key, const char *value) {
    return rewrite_pinned(f, key, value);
}

/* A store written by a newer tandem (its RUN pins a key this one does not know; whole,
 * verifying) was called damaged, with "restore that object from a copy of this store": a
 * mixed fleet's older node sent its users to their backups. It is a newer tandem's run:
 * exit 2 saying so and naming the key, nothing written, and the run goes on where the
 * key is known (here: the entry removed again). */
static void test_a_run_of_a_newer_tandem(void) {
    fixture f;
    CHECK(fixture_open(&f, "newer-tandem") == 0, "fixture");
    int rc = run_args(&f, "TANDEM_TEST_SIGNAL_AT=free:2", NULL);
    CHECK(rc == 75, "setup exit %d", rc);
    char before[4096], after[4096], log[8192], out[8192];
    CHECK(hash_of(&f, before, sizeof before) == 0, "hash");
    CHECK(add_pinned_key(&f, "run.future_key", "7") == 0, "RUN rewritten with a key of a newer tandem");
    rc = run_args(&f, NULL, NULL);
    read_all(f.log, log, sizeof log);
    CHECK(rc == 2 && strstr(log, "holds the config key 'run.future_key', which this tandem does not know") &&
          strstr(log, "newer tandem") && !strstr(log, "damaged") && !strstr(log, "restore"),
          "run: exit %d: %s", rc, log);
    rc = tandem_on_store(&f, "status", "", out, sizeof out);
    CHECK(rc == 2 && strstr(out, "newer tandem") && !strstr(out, "damaged"), "status: exit %d: %s", rc, out);
    const char *readers[][2] = {{"verify", ""}, {"repair", ""}, {"repair", "--apply"}, {"gc", "--keep 1"},
                                {"eval", ""}};
    for (size_t i = 0; i < sizeof readers / sizeof *readers; i++) {
        rc = tandem_on_store(&f, readers[i][0], readers[i][1], out, sizeof out);
        CHECK(rc == 2 && strstr(out, "newer tandem") && !strstr(out, "damaged"), "%s %s: exit %d: %s",
              readers[i][0], readers[i][1], rc, out);
    }
    /* what needs no config (the α history, the mixture) still reads */
    CHECK(tandem_on_store(&f, "alpha", "--verify", out, sizeof out) == 0, "alpha: %s", out);
    CHECK(tandem_on_store(&f, "mixture", "", out, sizeof out) == 0, "mixture: %s", out);
    CHECK(hash_of(&f, after, sizeof after) == 0 && strcmp(before, after) == 0, "the store moved: %s / %s",
          before, after);
    CHECK(drop_pinned_key(&f, "run.future_key") == 0, "the entry removed again");
    rc = run_args(&f, NULL, NULL);
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0, "resume: exit %d: %s", rc, log);
    fixture_close(&f);
}

/* A run pinned before tandem.alpha_step existed (it computed with pgd, the step of its
 * day), resumed as the refusal says: today's default (eg) is named as a change from pgd,
 * and with --allow-change it is recorded and the run goes on under it; the next resume
 * reads the record back. It used to print "? -> eg" and then crash on the allowed change
 * (the pinned form lacked the key). */
static void test_change_of_a_key_younger_than_the_run(void) {
    fixture f;
    CHECK(fixture_open(&f, "younger-key") == 0, "fixture");
    int rc = run_args(&f, "TANDEM_TEST_SIGNAL_AT=free:2", "--set", "tandem.alpha_step=pgd", NULL);
    CHECK(rc == 75, "setup exit %d", rc);
    CHECK(drop_pinned_key(&f, "tandem.alpha_step") == 0, "RUN rewritten without tandem.alpha_step");
    char log[8192], out[8192];
    /* the pinned value (pgd, from before the key) resumes as it is */
    rc = run_args(&f, "TANDEM_TEST_SIGNAL_AT=free:4", "--set", "tandem.alpha_step=pgd", NULL);
    read_all(f.log, log, sizeof log);
    CHECK(rc == 75, "resume with the pinned value: exit %d: %s", rc, log);
    rc = run_args(&f, NULL, NULL);
    read_all(f.log, log, sizeof log);
    CHECK(rc == 2 && strstr(log, "tandem.alpha_step: pgd -> eg"), "refusal: exit %d: %s", rc, log);
    rc = run_args(&f, NULL, "--allow-change", "tandem.alpha_step", NULL);
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0 && strstr(log, "configs/0.mp"), "allowed change: exit %d: %s", rc, log);
    rc = run_args(&f, NULL, NULL);
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0, "plain resume after the change: exit %d: %s", rc, log);
    rc = tandem_on_store(&f, "verify", "", out, sizeof out);
    CHECK(rc == 0 && strstr(out, " 0 faults"), "verify exit %d: %s", rc, out);
    fixture_close(&f);
}

/* checkpoint.snapshot = stream (no host copy; chunks cross one by one between the model
 * and the store): killed again and again, also inside its commits, the run ends on the
 * reference's hashes — the same bytes as the host copy's background commits wrote. And
 * auto streams when TANDEM_MEM_AVAILABLE leaves no room for the copy, says so, and ends
 * there too; where even streaming cannot fit, the run is refused before it allocates
 * (exit 2, naming what to lower) and the store is left untouched. */
static void test_streaming_commits(void) {
    /* 4 KiB chunks, so that every tensor crosses in many chunks at many offsets. The
     * chunking is part of the manifests, so the reference here is a host-copy run of the
     * same config; it also prints the estimate (model, workspace and the copy) */
    fixture f;
    CHECK(fixture_open_ckpt(&f, "stream-host", "{every_episodes: 1, chunk_kib: 4}") == 0, "fixture");
    char cmd[2400], log[8192], h[1024], host_hash[1024];
    snprintf(cmd, sizeof cmd, "TANDEM_MEM_AVAILABLE=1T %s run %s --store %s --set "
             "checkpoint.snapshot=host --json >%s 2>&1", tandem_bin(), f.config, f.store, f.log);
    int rc = system(cmd);
    read_all(f.log, log, sizeof log);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%s: %s", cmd, log);
    const char *p = strstr(log, "memory: ~");
    CHECK(p && strstr(log, "checkpoint copy"), "no memory estimate printed: %s", log);
    double v = atof(p + 9);
    const char *unit = strpbrk(p + 9, "KMG");
    CHECK(v > 0 && unit, "estimate: %s", p);
    double need = v * (unit[0] == 'G' ? 1073741824.0 : unit[0] == 'M' ? 1048576.0 : 1024.0);
    CHECK(hash_of(&f, host_hash, sizeof host_hash) == 0, "hash: %s", host_hash);
    CHECK(strstr(host_hash, "step done"), "%s", host_hash);
    fixture_close(&f);

    /* streaming, killed again and again (also inside its commits: blob, manifest, HEAD) */
    CHECK(fixture_open_ckpt(&f, "stream", "{every_episodes: 1, chunk_kib: 4, snapshot: stream}") == 0,
          "fixture");
    chaos_result cr;
    chaos_loop(&f, 12, g_ref_seconds / 16, (uint64_t)time(NULL) ^ 0x5eed, &cr);
    CHECK(!cr.bad_exit, "a life exited %d: %s", cr.bad_exit, cr.log);
    printf("  streaming: %d SIGKILLs (%d inside commits)\n", cr.kills, cr.in_commit);
    CHECK(cr.in_commit >= 6, "only %d kills inside commits", cr.in_commit);
    rc = cr.finished ? 0 : run_to_end(&f, NULL);
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0, "final resume exited %d: %s", rc, log);
    CHECK(hash_of(&f, h, sizeof h) == 0 && strcmp(h, host_hash) == 0,
          "streamed run ended elsewhere:\n%s\nvs the host copy's:\n%s", h, host_hash);
    fixture_close(&f);

    /* auto with just the estimate available: the copy would leave less than auto keeps
     * free, so it streams, says so, and ends on the same bytes */
    CHECK(fixture_open_ckpt(&f, "auto", "{every_episodes: 1, chunk_kib: 4}") == 0, "fixture");
    snprintf(cmd, sizeof cmd, "TANDEM_MEM_AVAILABLE=%.0f %s run %s --store %s >%s 2>&1", need,
             tandem_bin(), f.config, f.store, f.log);
    rc = system(cmd);
    read_all(f.log, log, sizeof log);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%s: %s", cmd, log);
    CHECK(strstr(log, "commits stream chunk by chunk"), "auto did not stream at %.0f bytes: %s",
          need, log);
    CHECK(hash_of(&f, h, sizeof h) == 0 && strcmp(h, host_hash) == 0,
          "auto-streamed run ended elsewhere:\n%s\nvs the host copy's:\n%s", h, host_hash);
    /* far too little: refused before anything is allocated or written */
    char store2[700];
    snprintf(store2, sizeof store2, "%s-none", f.store);
    snprintf(cmd, sizeof cmd, "TANDEM_MEM_AVAILABLE=64K %s run %s --store %s >%s 2>&1",
             tandem_bin(), f.config, store2, f.log);
    rc = system(cmd);
    read_all(f.log, log, sizeof log);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "exit %d: %s", rc, log);
    CHECK(strstr(log, "does not fit in this machine's memory") && strstr(log, "train.batch") &&
              strstr(log, "model.layers"),
          "%s", log);
    char probe[800];
    snprintf(probe, sizeof probe, "ls -A %s 2>/dev/null | grep -q .", store2);
    CHECK(system(probe) != 0, "a refused run wrote into %s", store2);
    fixture_close(&f);
}

/* ---- a vocabulary above uint16 -------------------------------------------------------- */

/* A 2-domain dataset of vocab 70000 in llm.c's uint32 shards, nearly all ids > 65535
 * (69999 and 0 included), under dir. 0, or -1 with the reason on stderr. */
static int wide_dataset(const char *dir) {
    enum { V = 70000, NTRAIN = 4000, NVAL = 1500 };
    static uint32_t tok[NTRAIN];
    const char *names[2] = {"lo", "hi"};
    dataset_yaml_domain doms[2];
    tdm_err e = {0};
    rng_stream s;
    for (int m = 0; m < 2; m++) {
        memset(&doms[m], 0, sizeof doms[m]);
        doms[m].name = names[m];
        char path[700];
        snprintf(path, sizeof path, "%s/%s", dir, names[m]);
        if (mkdir(path, 0777) != 0) return -1;
        for (int split = 0; split < 2; split++) {
            int n = split ? NVAL : NTRAIN;
            rng_stream_init(&s, 77, RNG_TEST, (uint64_t)m, (uint64_t)split, 0);
            /* a learnable chain: each id is followed by one of 4 successors */
            uint32_t t = 65536;
            for (int i = 0; i < n; i++) {
                tok[i] = t;
                t = 65536 + (uint32_t)(((t - 65536) * 37 + 11 * (m + 1) + rng_below(&s, 4)) % 4464);
            }
            tok[5] = V - 1, tok[9] = 0;
            char shard_path[800];
            snprintf(shard_path, sizeof shard_path, "%s/%s_000.bin", path, split ? "val" : "train");
            if (shard_write_tokens(shard_path, tok, (size_t)n, V, &e)) {
                fprintf(stderr, "  %s\n", e.msg);
                return -1;
            }
        }
    }
    char yaml[700];
    snprintf(yaml, sizeof yaml, "%s/dataset.yaml", dir);
    dataset_yaml_meta meta = {.vocab = V, .tokenizer = "test:wide", .eot = 0};
    if (dataset_write_yaml_meta(yaml, "", &meta, doms, 2, 0, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        return -1;
    }
    return 0;
}

static int wide_fixture(fixture *f, const char *tag, const char *data_dir, const char *extra) {
    f->dir = test_tmpdir(tag);
    snprintf(f->config, sizeof f->config, "%s/run.yaml", f->dir);
    snprintf(f->store, sizeof f->store, "%s/store", f->dir);
    snprintf(f->log, sizeof f->log, "%s/log.txt", f->dir);
    char text[2048];
    snprintf(text, sizeof text,
             "%s"
             "run: {episodes: 6, seed: 5, threads: 1}\n"
             "data: {dataset: %s/dataset.yaml}\n"
             "model: {layers: 1, channels: 16, heads: 2, ctx: 8}\n"
             "train: {batch: 2, seq: 8}\n"
             "tandem: {K: 2, E: 2, lr_alpha: 0.5, alpha_cut: any}\n"
             "optim: {lr: 3e-3}\n"
             "checkpoint: {every_episodes: 1}\n",
             extra ? extra : "", data_dir);
    return write_file(f->config, text);
}

/* Training on ids above 65535 (vocab 70000, model.vocab left to the dataset): the run
 * ends, SIGKILLed lives resume bit-exact; a model.vocab below the dataset's is refused
 * naming both; above it runs (padding); a preset's model takes the dataset's vocab. */
static void test_wide_vocabulary(void) {
    char *data = test_tmpdir("wide-data");
    CHECK(wide_dataset(data) == 0, "dataset");
    fixture ref;
    CHECK(wide_fixture(&ref, "wide-ref", data, NULL) == 0, "fixture");
    double t0 = now_s();
    int rc = run_to_end(&ref, NULL);
    double secs = now_s() - t0;
    char log[8192], href[1024], h[1024];
    read_all(ref.log, log, sizeof log);
    CHECK(rc == 0, "reference exit %d: %s", rc, log);
    CHECK(hash_of(&ref, href, sizeof href) == 0 && strstr(href, "step done"), "hash: %s", href);

    fixture f;
    CHECK(wide_fixture(&f, "wide-kill", data, NULL) == 0, "fixture");
    chaos_result cr;
    chaos_loop(&f, 10, secs / 3, (uint64_t)time(NULL), &cr);
    CHECK(!cr.bad_exit, "a life exited %d: %s", cr.bad_exit, cr.log);
    printf("  %d SIGKILLs (%d inside commits) on the vocab-70000 run\n", cr.kills, cr.in_commit);
    CHECK(cr.kills >= 4, "only %d kills landed", cr.kills);
    rc = cr.finished ? 0 : run_to_end(&f, NULL);
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0, "final resume exited %d: %s", rc, log);
    CHECK(hash_of(&f, h, sizeof h) == 0 && strcmp(h, href) == 0,
          "killed run ended elsewhere:\n%s\nvs uninterrupted:\n%s", h, href);
    fixture_close(&f);

    /* model.vocab below the dataset's: exit 2 before the store is touched */
    CHECK(wide_fixture(&f, "wide-small", data, NULL) == 0, "fixture");
    rc = wait_exit(start_run(&f, NULL, "--set", "model.vocab=50257"));
    read_all(f.log, log, sizeof log);
    CHECK(rc == 2, "model.vocab 50257 < 70000 accepted (exit %d): %s", rc, log);
    CHECK(strstr(log, "model.vocab = 50257") && strstr(log, "vocabulary 70000") &&
              strstr(log, "dataset.yaml") && strstr(log, "test:wide") &&
              strstr(log, "model.vocab = 0"),
          "message: %s", log);
    struct stat st;
    CHECK(stat(f.store, &st) != 0, "a refused run created its store");
    /* above it: padding rows, the run trains */
    const char *pad[] = {"--set", "model.vocab=70016", "--set", "run.episodes=1", NULL};
    rc = wait_exit(start_run_argv(&f, NULL, pad));
    read_all(f.log, log, sizeof log);
    CHECK(rc == 0, "model.vocab 70016 > 70000: exit %d: %s", rc, log);
    fixture_close(&f);

    /* a preset (model.vocab = 0) builds its model at the dataset's vocabulary: the memory
     * plan names the parameter count of 12 x 768 at vocab 70000 (refused at 64 KiB) */
    CHECK(wide_fixture(&f, "wide-preset", data, NULL) == 0, "fixture");
    model_config pc = {.vocab = 70000, .ctx = 512, .layers = 12, .heads = 12, .channels = 768};
    model_layout lay;
    CHECK(model_layout_init(&lay, &pc, NULL) == 0, "layout");
    char want[64];
    snprintf(want, sizeof want, "%zu parameters", lay.numel);
    model_layout_free(&lay);
    /* the file's train/model keys would override the preset's shape: drop them */
    char text[1024];
    snprintf(text, sizeof text,
             "preset: data-restricted-160m\nrun: {threads: 1}\ndata: {dataset: %s/dataset.yaml}\n",
             data);
    CHECK(write_file(f.config, text) == 0, "config");
    rc = run_to_end(&f, "TANDEM_MEM_AVAILABLE=64K");
    read_all(f.log, log, sizeof log);
    CHECK(rc == 2 && strstr(log, want), "preset at vocab 70000: exit %d, wanted '%s': %s", rc, want,
          log);
    fixture_close(&f);
    fixture_close(&ref);
    test_rmtree(data);
    free(data);
}

/* A run whose stdout is a pipe nobody reads (a wedged log shipper, `tandem run --json |
 * less` left on screen): it waits on the pipe while no stop is pending, as a blocking write
 * would; a SIGTERM then still ends it with its stop commit and exit 75 within seconds,
 * its events dropped and said on stderr (it sat in write(2) until the reader went away,
 * and a scheduler's SIGKILL at the grace period's end lost the work since the last
 * commit). The pipe is filled before the run starts, all but one page (a pipe's room
 * comes in pages: poll says POLLOUT for a free one): the run's first 4 kB of events pass,
 * later ones find no room. The committed state resumes to the reference. */
static void test_stop_while_stdout_is_not_read(void) {
    CHECK(g_ref_hash[0], "needs the reference run");
    fixture f;
    CHECK(fixture_open(&f, "stuckout") == 0, "fixture");
    int p[2];
    CHECK(pipe(p) == 0, "pipe: %s", strerror(errno));
    int cap = fcntl(p[1], F_GETPIPE_SZ);
    CHECK(cap > 4096, "pipe size %d", cap);
    char junk[4096];
    memset(junk, '#', sizeof junk);
    fcntl(p[1], F_SETFL, O_NONBLOCK); /* the test's own pipe, cleared before the run has it */
    long filled = 0;
    while (filled < cap - 4096) {
        ssize_t w = write(p[1], junk, sizeof junk);
        if (w <= 0) break;
        filled += w;
    }
    fcntl(p[1], F_SETFL, 0);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TANDEM_TEST_STEP_DELAY_MS", "30", 1); /* still running when the pipe is full */
        int fd = open(f.log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(p[1], 1);
        if (fd >= 0) dup2(fd, 2);
        close(p[0]);
        execl(tandem_bin(), tandem_bin(), "run", f.config, "--store", f.store, "--json", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    /* full: nothing more comes for a second, the run still there */
    int had = -1, now = 0;
    double still = now_s(), t_start = now_s();
    while (now_s() - t_start < 60) {
        if (ioctl(p[0], FIONREAD, &now) < 0) break;
        if (now != had) had = now, still = now_s();
        else if (now > filled && now_s() - still > 1.0) break;
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            pid = -1;
            break;
        }
        usleep(20 * 1000);
    }
    char log[8192];
    read_all(f.log, log, sizeof log);
    CHECK(pid > 0, "the run ended before its stdout filled: %s", log);
    CHECK(now > filled, "the run wrote nothing to stdout in 60 s: %s", log);
    double t0 = now_s();
    kill(pid, SIGTERM);
    int st = 0, done = 0;
    while (!done && now_s() - t0 < 20) {
        done = waitpid(pid, &st, WNOHANG) == pid;
        if (!done) usleep(20 * 1000);
    }
    double lat = now_s() - t0;
    if (!done) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    close(p[0]);
    read_all(f.log, log, sizeof log);
    CHECK(done, "still running 20 s after SIGTERM with its stdout not read: %s", log);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    printf("  SIGTERM with stdout not read: exit %d after %.2f s\n", rc, lat);
    CHECK(rc == 75 && lat < 10, "exit %d after %.1f s: %s", rc, lat, log);
    CHECK(strstr(log, "standard output was not being read after the stop signal"),
          "the dropped events not said: %s", log);
    char h[1024];
    CHECK(hash_of(&f, h, sizeof h) == 0, "no committed state: %s", h);
    rc = run_to_end(&f, NULL);
    CHECK(rc == 0 && at_reference(&f), "resumed after the stop, the run ended elsewhere (exit %d)", rc);
    fixture_close(&f);
}

int main(void) {
    setup_corpus();
    RUN(test_uninterrupted_reference);
    RUN(test_chaos_sigkill);
    RUN(test_sigterm_each_step_kind);
    RUN(test_signal_during_startup);
    RUN(test_corruption_falls_back);
    RUN(test_nondeterministic_replay_is_detected);
    RUN(test_sample_mixing_time_policy);
    RUN(test_overfit_cap_resumes);
    RUN(test_pinned_probe_resumes);
    RUN(test_more_stop_signals);
    RUN(test_stop_while_stdout_is_not_read);
    RUN(test_stop_signals_across_blas_reexec);
    RUN(test_two_runners_fence_the_stale_one);
    RUN(test_fixed_mixture_training);
    RUN(test_pinned_config);
    RUN(test_change_after_kill_supersedes_alpha);
    RUN(test_change_with_head_lost);
    RUN(test_lost_change_record_heals_at_its_position);
    RUN(test_change_of_a_key_younger_than_the_run);
    RUN(test_a_run_of_a_newer_tandem);
    RUN(test_streaming_commits);
    RUN(test_wide_vocabulary);
    test_rmtree(g_corpus);
    return test_summary("test_runner");
}
