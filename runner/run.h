/* run.h — `tandem run`: start or resume a TANDEM run (DESIGN.md §1-§6).
 *
 * The same command the first time and after every preemption: it pins the config in
 * the store (or checks it against the pinned one), takes the writer lease, loads the
 * newest verified state (or starts one), and runs steps — probe (with sync), alpha,
 * E free steps per episode — committing an α record every episode and full states by
 * the checkpoint policy. The stop signals (util/stop_signals.h) only set a flag; at the next safe
 * point (between steps; a probe is abandoned) the state is committed and the process
 * exits 75. Exit codes are those of DESIGN.md §6.
 */
#ifndef TANDEM_RUNNER_RUN_H
#define TANDEM_RUNNER_RUN_H

#include "util/err.h"

typedef struct run_opts {
    const char *config_path;
    char *const *sets; /* "key=value" overrides */
    int nsets;
    const char *store_url; /* NULL: the config's store, else file://runs/<config name> */
    int store_defaulted;   /* store_url is the command's default, not the user's: a refusal
                            * for a reused store says --store, not --allow-change */
    const char *store_suffix; /* a sweep point's label: the run lives in STORE/<suffix> */
    /* a sweep point: its study, recorded at STORE/SWEEP (deploy/sweep_root.h) before the
     * point's own store is made */
    const struct sweep *study;
    char *const *study_texts;
    int nstudy;
    char *const *allow;    /* keys allowed to differ from the pinned config */
    int nallow;
    int progress; /* PROGRESS_TEXT, _JSON, _QUIET */
    int no_summary; /* no closing summary (α moved, the mixture) on stdout: the caller's */
} run_opts;

/* Runs to completion or to a signal; returns the process exit code (0, 75, or an
 * error code with e set). */
int run_main(const run_opts *o, tdm_err *e);

/* Catches the stop signals of util/stop_signals.h (a flag the run honours at its next safe
 * point: commit, exit 75; SIGHUP not when it was ignored, as under nohup) and unblocks them. main() calls it first thing for `tandem run`, so
 * that a preemption at any moment after exec's dynamic loading ends in exit 75, never in
 * death by the signal; run_main calls it too. Idempotent. */
void run_signals_install(void);

/* The signal that asked the process to stop (after run_signals_install), or 0: commands
 * that chain runs (tandem compare) stop between them with exit 75. */
int run_signal_pending(void);

/* The exit code for "committed after a signal, requeue me". */
#define RUN_EXIT_REQUEUE 75

#endif
