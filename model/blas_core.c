/* blas_core.c — OpenBLAS on CPUs newer than itself.
 *
 * Debian bookworm's OpenBLAS (0.3.21, built with DYNAMIC_ARCH) picks its kernels by the
 * CPU's family and model. A CPU it does not know — Intel's Sapphire and Emerald Rapids
 * (family 6, models 0x8F and 0xCF), newer AMD parts — gets its generic Prescott (SSE3)
 * kernels, although the CPU has AVX-512: sgemm, ~85 % of a CPU step, then runs 2-3.5x
 * slower than with the SkylakeX kernels (measured on an Emerald Rapids VM, the 3-layer
 * bench-dmo model; docs/benchmarks.md). OpenBLAS reads OPENBLAS_CORETYPE when the library
 * loads, before main(), so the only documented way to choose for it is to set the
 * variable and exec again. A user's own OPENBLAS_CORETYPE is always left alone. */
#include "model/blas_core.h"

#include <cblas.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

void blas_core_reexec(char **argv) {
    const char *core = blas_core_better();
    if (!core || setenv("OPENBLAS_CORETYPE", core, 1) != 0) return;
    /* block the stop signals that are not blocked already (a signal mask survives exec,
     * a handler does not), and tell the new image which ones to let go again */
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
    setenv(REEXEC_BLOCKED, list, 1);
    sigprocmask(SIG_BLOCK, &want, NULL);
    /* test-only: a stop signal that comes while the exec is under way (it stays pending
     * for the new image's handler, blocked here) */
    const char *raise_sig = getenv("TANDEM_TEST_REEXEC_RAISE");
    if (raise_sig) {
        int sig = atoi(raise_sig);
        unsetenv("TANDEM_TEST_REEXEC_RAISE");
        if (sig > 0 && sig < 64) raise(sig);
    }
    execv("/proc/self/exe", argv);
    /* no /proc, or exec refused: carry on with OpenBLAS's choice rather than fail, and
     * unset the variable so that this process and its children (tandem compare's runs)
     * compute with the same kernels, hence the same bits */
    sigprocmask(SIG_SETMASK, &old, NULL);
    unsetenv(REEXEC_BLOCKED);
    unsetenv("OPENBLAS_CORETYPE");
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
