/* blas_core.c — OpenBLAS on CPUs newer than itself.
 *
 * Debian bookworm's OpenBLAS (0.3.21, built with DYNAMIC_ARCH) picks its kernels by the
 * CPU's family and model. A CPU it does not know — Intel's Sapphire and Emerald Rapids
 * (family 6, models 0x8F and 0xCF), newer AMD parts — gets its generic Prescott (SSE3)
 * kernels, although the CPU has AVX-512: sgemm, ~85 % of a CPU step, then runs 2-3.5x
 * slower than with the SkylakeX kernels (measured on an Emerald Rapids VM, the 3-layer
 * bench-dmo model; docs/benchmarks.md). OpenBLAS reads OPENBLAS_CORETYPE when the library
 * loads, before main(), so the only documented way to choose for it is to set the
 * variable and exec again. A user's own OPENBLAS_CORETYPE is left alone here; a run's
 * pinned kernels (run.blas_kernels, blas_core_pin) take precedence over it. */
#include "model/blas_core.h"

#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "util/stop_signals.h"

const char *blas_core_name(void) { return openblas_get_corename(); }

const char *blas_core_better(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (getenv("OPENBLAS_CORETYPE")) return NULL;
    /* test-only: re-execute with this core whatever OpenBLAS chose, so that the suite can
     * try the re-exec (signals held across it) on a CPU OpenBLAS knows */
    const char *forced = getenv("TANDEM_TEST_BLAS_REEXEC");
    if (forced && *forced) return forced;
    const char *now = openblas_get_corename();
    if (!now || strcasecmp(now, "Prescott") != 0) return NULL;
    __builtin_cpu_init();
    /* __builtin_cpu_supports also checks that the OS saves the wide registers (XCR0) */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return NULL;
}

/* The stop signals a run catches (util/stop_signals.h) are held across the exec so that
 * one sent in the meantime waits for the handler instead of killing the process. */
#define REEXEC_BLOCKED "TANDEM_REEXEC_BLOCKED"
/* The core a pinned run's exec asked for (blas_core_pin): the new image tells a core
 * OpenBLAS would not take from one it has not been asked for yet, and never loops. */
#define PIN_EXEC "TANDEM_BLAS_PIN_EXEC"

static char **main_argv; /* main()'s, for the exec of a pinned run */

/* Executes /proc/self/exe with `argv` and OPENBLAS_CORETYPE=core, the stop signals that
 * are not blocked already blocked across the exec (a signal mask survives exec, a handler
 * does not) and named in REEXEC_BLOCKED for the new image to let go again. A stop signal
 * this image's handler already took (*stop_flag, read once they are blocked: one that
 * comes later stays pending for the new image) would die with it: then no exec. Returns
 * only when it did not exec, with the mask and the variables as they were. */
static void exec_with_core(const char *core, char **argv, volatile sig_atomic_t *stop_flag) {
    const char *had = getenv("OPENBLAS_CORETYPE");
    char was[64] = "";
    int had_it = had != NULL;
    if (had) snprintf(was, sizeof was, "%s", had);
    if (!argv) {
        errno = ENOEXEC;
        return;
    }
    sigset_t want, old;
    sigemptyset(&want);
    char list[64] = "";
    sigprocmask(SIG_BLOCK, NULL, &old);
    for (size_t i = 0; i < (size_t)TDM_N_STOP_SIGNALS; i++)
        if (!sigismember(&old, TDM_STOP_SIGNALS[i])) {
            sigaddset(&want, TDM_STOP_SIGNALS[i]);
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", list[0] ? "," : "",
                     TDM_STOP_SIGNALS[i]);
        }
    sigprocmask(SIG_BLOCK, &want, NULL);
    if (stop_flag && *stop_flag) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        errno = EINTR;
        return;
    }
    if (setenv("OPENBLAS_CORETYPE", core, 1) != 0 || setenv(REEXEC_BLOCKED, list, 1) != 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        return;
    }
    /* test-only: a stop signal that comes while the exec is under way (it stays pending
     * for the new image's handler, blocked here) */
    const char *raise_sig = getenv("TANDEM_TEST_REEXEC_RAISE");
    if (raise_sig) {
        int sig = atoi(raise_sig);
        unsetenv("TANDEM_TEST_REEXEC_RAISE");
        if (sig > 0 && sig < 64) raise(sig);
    }
    fflush(NULL); /* what was printed is printed once, not lost with this image */
    execv("/proc/self/exe", argv);
    int err = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    unsetenv(REEXEC_BLOCKED);
    if (had_it) setenv("OPENBLAS_CORETYPE", was, 1);
    else unsetenv("OPENBLAS_CORETYPE");
    errno = err;
}

void blas_core_reexec(char **argv) {
    main_argv = argv;
    const char *core = blas_core_better();
    /* no /proc, or exec refused: carry on with OpenBLAS's choice rather than fail (the
     * variable unset again, so that this process and its children, tandem compare's
     * runs, compute with the same kernels, hence the same bits) */
    if (core) exec_with_core(core, argv, NULL);
}

/* The instruction sets the kernels of each x86 core of OpenBLAS 0.3 use (its
 * driver/others/dynamic.c names and kernel/x86_64/KERNEL.* files). */
enum { NEEDS_SSE3, NEEDS_SSSE3, NEEDS_SSE42, NEEDS_AVX, NEEDS_AVX2_FMA, NEEDS_AVX512 };
static const struct {
    const char *name;
    int needs;
} x86_cores[] = {
    {"Prescott", NEEDS_SSE3},     {"Opteron_SSE3", NEEDS_SSE3}, {"Barcelona", NEEDS_SSE3},
    {"Nano", NEEDS_SSE3},         {"Core2", NEEDS_SSSE3},       {"Penryn", NEEDS_SSSE3},
    {"Atom", NEEDS_SSSE3},        {"Bobcat", NEEDS_SSSE3},      {"Dunnington", NEEDS_SSE42},
    {"Nehalem", NEEDS_SSE42},     {"Sandybridge", NEEDS_AVX},   {"Haswell", NEEDS_AVX2_FMA},
    {"Zen", NEEDS_AVX2_FMA},      {"SkylakeX", NEEDS_AVX512},   {"Cooperlake", NEEDS_AVX512},
    {"SapphireRapids", NEEDS_AVX512},
};

/* test-only: TANDEM_TEST_CPU_LACKS=avx512 (or avx2, avx) has this CPU judged without
 * them, so that the suite can try a node that cannot run a run's kernels */
static int test_lacks(const char *what) {
    const char *v = getenv("TANDEM_TEST_CPU_LACKS");
    size_t n = strlen(what);
    for (const char *p = v; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ','))
        if (strcspn(p, ",") == n && !strncmp(p, what, n)) return 1;
    return 0;
}

int blas_core_runs_here(const char *core, char *lacks, size_t n) {
    if (n) lacks[0] = '\0';
#if defined(__x86_64__) && defined(__GNUC__)
    int needs = -1;
    for (size_t i = 0; i < sizeof x86_cores / sizeof *x86_cores; i++)
        if (!strcasecmp(core, x86_cores[i].name)) needs = x86_cores[i].needs;
    if (needs < 0) return -1;
    __builtin_cpu_init();
    const char *miss = NULL;
    /* __builtin_cpu_supports also checks that the OS saves the wide registers (XCR0) */
    if (needs >= NEEDS_AVX512 &&
        (test_lacks("avx512") || !__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
         !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq")))
        miss = "AVX-512 (F, BW, VL, DQ)";
    else if (needs >= NEEDS_AVX2_FMA &&
             (test_lacks("avx2") || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")))
        miss = "AVX2 with FMA";
    else if (needs >= NEEDS_AVX && (test_lacks("avx") || !__builtin_cpu_supports("avx")))
        miss = "AVX";
    else if (needs >= NEEDS_SSE42 && !__builtin_cpu_supports("sse4.2"))
        miss = "SSE4.2";
    else if (needs >= NEEDS_SSSE3 && !__builtin_cpu_supports("ssse3"))
        miss = "SSSE3";
    else if (!__builtin_cpu_supports("sse3"))
        miss = "SSE3";
    if (miss) snprintf(lacks, n, "%s", miss);
    return miss == NULL;
#else
    (void)core;
    return -1;
#endif
}

int blas_core_pin(const char *want, int mode, volatile sig_atomic_t *stop_flag, tdm_err *e) {
    if (!want || !*want || !strcmp(want, "auto")) return 0;
    const char *now = blas_core_name();
    if (!now) now = "?";
    if (!strcasecmp(now, want)) return 0;
    /* kept for the whole command: a second store pinned to other kernels in one process
     * (tandem results, compare) must not start it again, and again */
    const char *asked = getenv(PIN_EXEC);
    char lacks[64];
    int runs = blas_core_runs_here(want, lacks, sizeof lacks);
    char way[256];
    snprintf(way, sizeof way, "resume it on a node whose CPU runs them, or go on with this node's kernels "
             "(other bits from here on) with --set run.blas_kernels=%s --allow-change run.blas_kernels", now);
    int may_exec = (mode == BLAS_PIN_RUN || mode == BLAS_PIN_EVAL) && !asked && runs > 0;
    if (!may_exec && (mode == BLAS_PIN_EVAL || mode == BLAS_PIN_NOTE || runs < 0)) {
        /* an evaluation (it writes nothing the run depends on), or kernels this build
         * cannot judge (another architecture: before the pin such a resume went on with
         * its node's kernels, and still does): the kernels in use, said once */
        static int said;
        if (!said++)
            fprintf(stderr, "tandem: note: %s with OpenBLAS's %s kernels, not the %s ones %s pinned%s: its "
                    "numbers may differ in their last bits from the run's own\n",
                    mode == BLAS_PIN_RUN || mode == BLAS_PIN_MPI ? "going on" : "evaluating", now, want,
                    mode == BLAS_PIN_RUN || mode == BLAS_PIN_MPI ? "this run" : "the run",
                    runs < 0 ? " (this build cannot tell whether this CPU runs those)" : "");
        return 0;
    }
    if (asked && !strcasecmp(asked, want))
        return err_set(e, ERR_USAGE, "run.blas_kernels = %s: this run computes with OpenBLAS's %s kernels (pinned "
                       "when it was created: the bits of its matmuls depend on them), and OpenBLAS did not "
                       "take OPENBLAS_CORETYPE=%s here (it runs %s): %s",
                       want, want, want, now, way);
    if (asked)
        return err_set(e, ERR_USAGE, "run.blas_kernels = %s: this command already computes with OpenBLAS's %s "
                       "kernels for another run, and this one is pinned to %s's: run it in a command of its own",
                       want, asked, want);
    if (runs == 0)
        return err_set(e, ERR_USAGE, "run.blas_kernels = %s: this run computes with OpenBLAS's %s kernels (pinned "
                       "when it was created: the bits of its matmuls depend on them), and this CPU lacks %s, "
                       "which they need: %s",
                       want, want, lacks, way);
    if (mode == BLAS_PIN_MPI)
        return err_set(e, ERR_USAGE, "run.blas_kernels = %s: this run computes with OpenBLAS's %s kernels (pinned "
                       "when it was created), and this rank has %s; an MPI rank cannot start again with others: "
                       "set OPENBLAS_CORETYPE=%s in the job's environment, or %s",
                       want, want, now, want, way);
    fprintf(stderr, "tandem: this run computes with OpenBLAS's %s kernels (pinned when it was created, for "
            "bit-identical resumes) and this process had %s: starting again with OPENBLAS_CORETYPE=%s\n",
            want, now, want);
    setenv(PIN_EXEC, want, 1);
    exec_with_core(want, main_argv, stop_flag);
    int err = errno;
    unsetenv(PIN_EXEC);
    if (err == EINTR) /* a stop signal came first: the caller's requeue */
        return err_set(e, ERR_INTERNAL, "stopped before starting again with OpenBLAS's %s kernels", want);
    return err_sys(e, ERR_INTERNAL, err, "run.blas_kernels = %s: cannot start this program again with "
                   "OPENBLAS_CORETYPE=%s; set it in the job's environment, or %s",
                   want, want, way);
}

void blas_core_reexec_unblock(void) {
    const char *list = getenv(REEXEC_BLOCKED);
    if (!list) return;
    sigset_t set;
    sigemptyset(&set);
    for (const char *p = list; *p;) {
        char *end;
        long sig = strtol(p, &end, 10);
        if (end == p) break;
        for (size_t i = 0; i < (size_t)TDM_N_STOP_SIGNALS; i++)
            if (sig == TDM_STOP_SIGNALS[i]) sigaddset(&set, (int)sig);
        p = *end == ',' ? end + 1 : end;
    }
    unsetenv(REEXEC_BLOCKED); /* children start from the mask as the launcher gave it */
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

/* ---------------------------------------------------------------- the address space OpenBLAS takes */

/* Decimal digits of v at p (no terminator); returns the number written. For the message of
 * blas_core_preinit, which cannot rely on stdio yet. */
static size_t preinit_utoa(char *p, unsigned long long v) {
    char tmp[24];
    size_t n = 0;
    do tmp[n++] = (char)('0' + v % 10), v /= 10;
    while (v);
    for (size_t i = 0; i < n; i++) p[i] = tmp[n - 1 - i];
    return n;
}

/* Appends s to buf[*len] within cap (truncating). */
static void preinit_cat(char *buf, size_t *len, size_t cap, const char *s) {
    while (*s && *len < cap) buf[(*len)++] = *s++;
}

static void preinit_num(char *buf, size_t *len, size_t cap, unsigned long long v) {
    char d[24];
    size_t n = preinit_utoa(d, v);
    d[n] = '\0';
    preinit_cat(buf, len, cap, d);
}

/* This process's mapped address space now (VmSize of /proc/self/status), bytes; 0 when
 * unreadable. open/read only: it runs before libc's and the libraries' constructors. */
static unsigned long long preinit_vm_size(void) {
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[4096];
    size_t got = 0;
    for (ssize_t r; got < sizeof buf - 1 && (r = read(fd, buf + got, sizeof buf - 1 - got)) > 0;)
        got += (size_t)r;
    close(fd);
    buf[got] = '\0';
    for (char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, "VmSize:", 7)) {
            unsigned long long kib = 0;
            for (p += 7; *p == ' ' || *p == '\t'; p++) {}
            for (; *p >= '0' && *p <= '9'; p++) kib = kib * 10 + (unsigned)(*p - '0');
            return kib * 1024;
        }
    return 0;
}

int blas_core_threads(void) { return openblas_get_num_threads(); }

int blas_core_load_buffers(char **envp) {
    /* the CPUs of the machine, not of this process's affinity mask: OpenBLAS 0.3.21 maps
     * as many under `taskset -c 0` on two CPUs (measured) */
    long n = get_nprocs_conf();
    if (n < 1) n = 1;
    /* its OpenMP build takes OMP_NUM_THREADS (its first number: "4,2" is 4) when lower;
     * OPENBLAS_NUM_THREADS changes nothing here (measured: 2 buffers with it at 1) */
    for (char **v = envp; v && *v; v++)
        if (!strncmp(*v, "OMP_NUM_THREADS=", 16)) {
            long omp = 0;
            for (const char *p = *v + 16; *p >= '0' && *p <= '9' && omp < 100000; p++)
                omp = omp * 10 + (*p - '0');
            if (omp > 0 && omp < n) n = omp;
        }
    return n > BLAS_CORE_MAX_THREADS ? BLAS_CORE_MAX_THREADS : (int)n;
}

/* Room OpenBLAS's constructor needs beyond its buffers before main() runs: libgomp's and
 * libcrypto's start-up, the loader's TLS. Measured 0.3 MiB under `tandem version` (the
 * limit at which it starts minus VmSize here minus the buffers); 8 MiB leaves room for
 * other library versions without refusing a limit that would work by much. */
#define PREINIT_SLACK (8ULL << 20)

void blas_core_preinit(int argc, char **argv, char **envp) {
    (void)argc, (void)argv;
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return;
    unsigned long long mapped = preinit_vm_size();
    int n = blas_core_load_buffers(envp);
    unsigned long long need = mapped + (unsigned long long)n * BLAS_CORE_BUFFER_BYTES + PREINIT_SLACK;
    if ((unsigned long long)as.rlim_cur >= need) return;
    char msg[640];
    size_t len = 0, cap = sizeof msg - 1;
    preinit_cat(msg, &len, cap, "tandem: the address-space limit (ulimit -v) is ");
    preinit_num(msg, &len, cap, (unsigned long long)as.rlim_cur >> 20);
    preinit_cat(msg, &len, cap, " MiB; OpenBLAS needs about ");
    preinit_num(msg, &len, cap, (need + (1ULL << 20) - 1) >> 20);
    preinit_cat(msg, &len, cap, " MiB to load (");
    preinit_num(msg, &len, cap, (unsigned long long)n);
    preinit_cat(msg, &len, cap, n == 1 ? " buffer" : " buffers");
    preinit_cat(msg, &len, cap, " of 128 MiB, one per CPU or per OMP_NUM_THREADS, besides the ");
    preinit_num(msg, &len, cap, mapped >> 20);
    preinit_cat(msg, &len, cap, " MiB of libraries already mapped) and would wait forever "
                                "for them: raise the limit, e.g. ulimit -v unlimited (a run "
                                "needs more still: it says how much");
    if (n > 1) preinit_cat(msg, &len, cap, "), or load it with one buffer: OMP_NUM_THREADS=1\n");
    else preinit_cat(msg, &len, cap, ")\n");
    if (write(STDERR_FILENO, msg, len) < 0) { /* nothing more to do */ }
    _exit(2);
}
