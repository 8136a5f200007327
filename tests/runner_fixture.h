/* runner_fixture.h — driving the tandem binary from tests: start a run, signal or kill
 * it, wait, read its log, and read `tandem hash` of its store. */
#ifndef TANDEM_TESTS_RUNNER_FIXTURE_H
#define TANDEM_TESTS_RUNNER_FIXTURE_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/stop_signals.h"

#include "tests/test.h"

static inline const char *tandem_bin(void) {
    const char *b = getenv("TANDEM_BIN");
    return b && *b ? b : "./tandem";
}

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A run under test: its config file, store URL (a path or s3://...) and log file. */
typedef struct fixture {
    char *dir;
    char config[600], store[600], log[600];
} fixture;

/* A fresh fixture below a new scratch directory named after `tag`: its config path
 * (DIR/run.yaml, not yet written), its store (DIR/STORE; NULL: "store") and its log
 * (DIR/log.txt). fixture_done removes the directory and frees it. */
static inline void fixture_init(fixture *f, const char *tag, const char *store) {
    f->dir = test_tmpdir(tag);
    snprintf(f->config, sizeof f->config, "%s/run.yaml", f->dir);
    snprintf(f->store, sizeof f->store, "%s/%s", f->dir, store ? store : "store");
    snprintf(f->log, sizeof f->log, "%s/log.txt", f->dir);
}

static inline void fixture_done(fixture *f) {
    test_rmtree(f->dir);
    free(f->dir);
    f->dir = NULL;
}

/* Reads at most cap bytes of the file at path into buf (*n of them). 0, or -1. */
static inline int read_file(const char *path, unsigned char *buf, size_t cap, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    *n = fread(buf, 1, cap, fp);
    fclose(fp);
    return 0;
}

static inline int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* Whether runs start with SIGHUP ignored (as under nohup). Either way the child sets it
 * itself: the suite may itself run under nohup (SIGHUP ignored, inherited), and a run that
 * inherits an ignored SIGHUP keeps ignoring it (util/stop_signals.h). */
static int fixture_hup_ignored;

/* Starts `tandem run CONFIG --store STORE --quiet EXTRA...` (extra: NULL-terminated, at
 * most 16) with an optional "K=V" environment entry; output goes to the fixture's log.
 * block_stop: the child blocks the stop signals (util/stop_signals.h) across exec, as a careful
 * launcher does, so that a signal sent at any moment stays pending until tandem's
 * handler takes it. */
static inline pid_t start_run_full(const fixture *f, const char *env_kv, const char *const *extra,
                                   int block_stop) {
    sigset_t stop, old;
    sigemptyset(&stop);
    for (int i = 0; i < TDM_N_STOP_SIGNALS; i++) sigaddset(&stop, TDM_STOP_SIGNALS[i]);
    /* blocked before fork, so that not even the child's first instruction can be hit */
    if (block_stop) sigprocmask(SIG_BLOCK, &stop, &old);
    pid_t pid = fork();
    if (pid != 0) {
        if (block_stop) sigprocmask(SIG_SETMASK, &old, NULL);
        return pid;
    }
    signal(SIGHUP, fixture_hup_ignored ? SIG_IGN : SIG_DFL);
    if (env_kv) {
        char kv[256];
        snprintf(kv, sizeof kv, "%s", env_kv);
        char *eq = strchr(kv, '=');
        *eq = '\0';
        setenv(kv, eq + 1, 1);
    }
    int fd = open(f->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    const char *argv[24] = {tandem_bin(), "run", f->config, "--store", f->store, "--quiet"};
    for (int i = 0; extra && extra[i] && i < 16; i++) argv[6 + i] = extra[i];
    execv(tandem_bin(), (char *const *)argv);
    _exit(127);
}

static inline pid_t start_run_argv(const fixture *f, const char *env_kv, const char *const *extra) {
    return start_run_full(f, env_kv, extra, 0);
}

/* Whether process pid catches signal sig now (its SigCgt in /proc); -1 when it is gone. */
static inline int catches_signal(pid_t pid, int sig) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *fp = fopen(path, "r");
    if (!fp) return -1;
    int r = -1;
    while (fgets(line, sizeof line, fp))
        if (strncmp(line, "SigCgt:", 7) == 0) {
            unsigned long long mask = strtoull(line + 7, NULL, 16);
            r = (int)((mask >> (sig - 1)) & 1);
            break;
        }
    fclose(fp);
    return r;
}

/* Waits (up to 60 s) until pid has installed its handler for sig: from then on, the
 * signal is the program's to handle, whatever the machine's start-up speed. 0 when it
 * has, -1 when the process ended or never did. */
static inline int wait_catches(pid_t pid, int sig) {
    double t0 = now_s();
    while (now_s() - t0 < 60) {
        int c = catches_signal(pid, sig);
        if (c == 1) return 0;
        if (c < 0) return -1;
        usleep(500);
    }
    return -1;
}

static inline pid_t start_run(const fixture *f, const char *env_kv, const char *extra1, const char *extra2) {
    const char *extra[] = {extra1, extra1 ? extra2 : NULL, NULL};
    return start_run_argv(f, env_kv, extra);
}

/* Exit code, or 128 + signal number. */
static inline int wait_exit(pid_t pid) {
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static inline int run_to_end(const fixture *f, const char *env_kv) {
    return wait_exit(start_run(f, env_kv, NULL, NULL));
}

static inline int read_all(const char *path, char *buf, size_t cap) {
    FILE *fp = fopen(path, "r");
    if (!fp) return -1;
    size_t n = fread(buf, 1, cap - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return 0;
}

/* The state letter of pid in /proc (R, S, T, Z...), 0 when it is gone. */
static inline char proc_state(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_all(path, buf, sizeof buf)) return 0;
    const char *close = strrchr(buf, ')');
    return close && close[1] == ' ' ? close[2] : 0;
}

/* Whether pid is stopped by a signal (state T in /proc: a TANDEM_TEST_STOP_AT hook's
 * SIGSTOP). Not 't', a tracing stop: LeakSanitizer ptrace-stops every thread of an ASan
 * build as it ends, and a writer that ran to its end without reaching its hook read as
 * frozen there (test_fenced_writer_deletes_no_new_record: "B exited 0"). */
static inline int is_stopped(pid_t pid) { return proc_state(pid) == 'T'; }

/* Waits (up to 120 s: an ASan build on a loaded machine) until pid is stopped (a
 * TANDEM_TEST_STOP_AT hook); gives up at once when it ended without stopping. */
static inline int wait_stopped(pid_t pid) {
    double t0 = now_s();
    for (char st; (st = proc_state(pid)) != 'T' && now_s() - t0 < 120; usleep(1000))
        if (st == 0 || st == 'Z') return 0;
    return is_stopped(pid);
}

/* Runs `tandem COMMAND STORE OPTIONS` (OPTIONS: shell words, may be "") into out (stdout
 * and stderr); returns its exit status, -1 when it could not run. */
static inline int tandem_on_store(const fixture *f, const char *command, const char *options,
                                  char *out, size_t cap) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s '%s' %s 2>&1", tandem_bin(), command, f->store, options);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The output of `tandem hash STORE`. */
static inline int hash_of(const fixture *f, char *out, size_t cap) {
    return tandem_on_store(f, "hash", "", out, cap) == 0 ? 0 : -1;
}


/* What a chaos loop did. */
typedef struct chaos_result {
    int kills;     /* lives ended by SIGKILL */
    int in_commit; /* of them, by the commit hooks (blob, manifest, head, alpha) */
    int finished;  /* a life ran to the end (exit 0) */
    int bad_exit;  /* a life exited otherwise: its code (0 when none) */
    char log[8192];
} chaos_result;

/* SIGKILLs a run again and again until `kills` lives ended that way or it finished:
 * first 8 lives killed inside commits by TANDEM_TEST_KILL_AT (blob, manifest, head, alpha
 * at their 1st and 2nd passage), then lives killed after a random delay in
 * [0, max_delay_s) — short, so that the run needs many lives. `seed` keys the delays. */
static inline void chaos_loop(const fixture *f, int kills, double max_delay_s, uint64_t seed,
                              chaos_result *out) {
    static const char *const labels[] = {"blob", "manifest", "head", "alpha"};
    memset(out, 0, sizeof *out);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int attempt = 0; attempt < 3 * kills && out->kills < kills && !out->finished; attempt++) {
        int rc;
        if (attempt < 8) {
            char env[64];
            snprintf(env, sizeof env, "TANDEM_TEST_KILL_AT=%s:%d", labels[attempt % 4], 1 + attempt / 4);
            rc = run_to_end(f, env);
            if (rc == 128 + SIGKILL) out->in_commit++;
        } else {
            pid_t pid = start_run(f, NULL, NULL, NULL);
            x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift: only the delays */
            double delay = (double)(x >> 11) * 0x1.0p-53 * max_delay_s;
            struct timespec ts = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9)};
            nanosleep(&ts, NULL);
            kill(pid, SIGKILL);
            rc = wait_exit(pid);
        }
        if (rc == 128 + SIGKILL) out->kills++;
        else if (rc == 0) out->finished = 1;
        else {
            out->bad_exit = rc;
            read_all(f->log, out->log, sizeof out->log);
            return;
        }
    }
}

#endif
