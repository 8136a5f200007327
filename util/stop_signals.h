/* stop_signals.h — the signals that stop `tandem run` the way a preemption does: the
 * handler sets a flag, the run commits at its next safe point and exits 75 (runner/
 * run_signal.c), and model/blas_core.c holds them blocked across its re-exec. One table for
 * both.
 *
 *   SIGTERM   Kubernetes, Slurm (`scancel`, the time limit), systemd, a spot notice
 *   SIGINT    Ctrl-C
 *   SIGUSR1   Slurm's `--signal=USR1@T` warning (the rendered sbatch scripts)
 *   SIGUSR2   the warning other batch systems send before a kill (Grid Engine's
 *             `-notify`, LSF's job warning action), and Slurm's `--signal=USR2@T`
 *   SIGHUP    the terminal or ssh session that started the run went away; not caught where
 *             the launcher ignored it (`nohup`): that run goes on
 *   SIGXCPU   a CPU-time soft limit below the hard one (`ulimit -S -t`, RLIMIT_CPU) reached:
 *             SIGKILL follows at the hard limit, which counts CPU seconds over all threads
 *             (a run on 8 threads has ~1/8 of the margin in wall time; `ulimit -t` sets
 *             both limits at once, and then no SIGXCPU comes before the SIGKILL)
 *   SIGPWR    a container manager's shutdown of its init (lxc-stop, LXD, systemd-nspawn's
 *             poweroff), a UPS's power-failure notice
 *   SIGQUIT   Ctrl-\, and the STOPSIGNAL some images set for a graceful stop
 *   SIGALRM   `timeout -s ALRM`, an alarm a wrapper set (tandem sets none: curl runs with
 *             CURLOPT_NOSIGNAL)
 *
 * Each of these would otherwise end the process without its stop commit, losing the steps
 * since the last one (the state itself is safe: a kill is a crash the ledger survives). */
#ifndef TANDEM_UTIL_STOP_SIGNALS_H
#define TANDEM_UTIL_STOP_SIGNALS_H

#include <signal.h>

static const int TDM_STOP_SIGNALS[] = {SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP, SIGXCPU, SIGPWR, SIGQUIT, SIGALRM};
#define TDM_N_STOP_SIGNALS ((int)(sizeof TDM_STOP_SIGNALS / sizeof *TDM_STOP_SIGNALS))

/* The signal that, ignored by the launcher, stays ignored (nohup's contract). */
#define TDM_STOP_SIGNAL_KEEPS_IGNORE(sig) ((sig) == SIGHUP)

#endif
