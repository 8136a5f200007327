/* run_signal.c — the stop signal of `tandem run`: a flag and the time it came, honoured at
 * the next safe point (see run.h). */
#include "runner/run_impl.h"

#include <math.h>
#include <string.h>

#include "util/stop_signals.h"

volatile sig_atomic_t run_stop_signal;
struct timespec run_stop_at; /* when the first stop signal came (monotonic) */

/* The first stop signal wins: its time starts the grace period, its number is the one the
 * stop names (SIGXCPU repeats every CPU second past the soft limit, and a second signal
 * must not move either). The stop signals are masked while it runs (sa_mask), so it never
 * nests. A SIGQUIT after a stop quits at once (Ctrl-\ twice, for a run that hangs). */
static void on_signal(int sig) {
    if (run_stop_signal && sig == SIGQUIT) {
        /* Ctrl-\ again: quit now, as it does elsewhere (a run that does not reach its
         * stop commit); delivered, with its default action, once this handler returns */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGQUIT, &dfl, NULL);
        raise(SIGQUIT);
        return;
    }
    if (run_stop_signal) return;
    clock_gettime(CLOCK_MONOTONIC, &run_stop_at); /* async-signal-safe */
    run_stop_signal = sig;
}

int run_signal_pending(void) { return run_stop_signal; }

double run_grace_s;

double run_store_deadline(void) {
    if (!run_stop_signal || !(run_grace_s > 0)) return INFINITY;
    double at = (double)run_stop_at.tv_sec + (double)run_stop_at.tv_nsec * 1e-9;
    double g = run_grace_s - RUN_STOP_EXIT_S;
    return at + (g > 1 ? g : 1);
}

void run_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < TDM_N_STOP_SIGNALS; i++) sigaddset(&sa.sa_mask, TDM_STOP_SIGNALS[i]);
    sigset_t stop;
    sigemptyset(&stop);
    for (int i = 0; i < TDM_N_STOP_SIGNALS; i++) {
        int sig = TDM_STOP_SIGNALS[i];
        /* a run started under nohup, which set SIGHUP to be ignored, keeps ignoring it
         * (exec keeps an ignored disposition, so this also holds after blas_core's exec) */
        struct sigaction was;
        if (TDM_STOP_SIGNAL_KEEPS_IGNORE(sig) && sigaction(sig, NULL, &was) == 0 && was.sa_handler == SIG_IGN)
            continue;
        sigaction(sig, &sa, NULL);
        sigaddset(&stop, sig);
    }
    /* a launcher may hand us these blocked (a careful one blocks them across fork and
     * exec so that none is lost before this handler exists): a signal already pending
     * is delivered to the handler here, and later ones are not held back for ever */
    sigprocmask(SIG_UNBLOCK, &stop, NULL);
    /* a reader of the events that went away (`tandem run --json | consumer`) ends the
     * events, not the run: killed by SIGPIPE it would stop without its stop commit; the
     * failed write is said once (report/progress.c) and the exit status tells (cli/main.c) */
    signal(SIGPIPE, SIG_IGN);
}
