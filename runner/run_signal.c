/* run_signal.c — the stop signal of `tandem run`: a flag and the time it came, honoured at
 * the next safe point (see run.h). */
#include "runner/run_impl.h"

#include <string.h>

volatile sig_atomic_t run_stop_signal;
struct timespec run_stop_at; /* when the first stop signal came (monotonic) */

static void on_signal(int sig) {
    if (!run_stop_signal) clock_gettime(CLOCK_MONOTONIC, &run_stop_at); /* async-signal-safe */
    run_stop_signal = sig;
}

int run_signal_pending(void) { return run_stop_signal; }

void run_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigset_t stop;
    sigemptyset(&stop);
    int sigs[] = {SIGTERM, SIGINT, SIGUSR1};
    for (int i = 0; i < 3; i++) {
        sigaction(sigs[i], &sa, NULL);
        sigaddset(&stop, sigs[i]);
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
