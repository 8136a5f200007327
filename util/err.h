/* err.h — error values carried up the call chain.
 *
 * Every fallible function in tandem takes a `tdm_err *` and returns 0 on success or a
 * non-zero code from the enum below. The message names what failed (file, key, object)
 * and what to do. The codes are the process exit codes of DESIGN.md §6, so the CLI can
 * exit with `e.code` directly. A NULL `tdm_err *` is allowed: the error is then dropped
 * on purpose by the caller (only used for best-effort clean-up).
 */
#ifndef TANDEM_UTIL_ERR_H
#define TANDEM_UTIL_ERR_H

#include <stddef.h>

enum {
    ERR_OK = 0,
    ERR_INTERNAL = 1, /* a bug or an unexpected system failure */
    ERR_USAGE = 2,    /* bad configuration, arguments or input files */
    ERR_STORE = 3,    /* store unreachable, corrupt run, fenced out */
    ERR_NONDET = 4,   /* nondeterministic replay detected */
    /* the run diverged: a loss, gradient or α is not finite. Deterministic, so a retry
     * replays the same steps and diverges again: schedulers must not requeue it */
    ERR_DIVERGED = 5,
    /* stopped by a signal between two safe steps, nothing lost: the command again goes on
     * (runner/run.h's RUN_EXIT_REQUEUE, the exit status schedulers requeue on) */
    ERR_STOPPED = 75,
};

typedef struct tdm_err {
    int code;
    char msg[1024];
} tdm_err;

/* Sets e->code and formats e->msg (printf-style). Returns `code` so callers can write
 * `return err_set(e, ERR_USAGE, "...")`. A message longer than msg[] keeps its start and
 * its end with " [...] " between (the same in every function here): the start names what
 * failed, the end says why and what to do. Control characters become '?'. */
int err_set(tdm_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends context ("while loading X: ") to an error already set. Returns e->code. */
int err_prefix(tdm_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends text (printf-style) to an error already set, as err_set keeps it. Returns e->code. */
int err_append(tdm_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Like err_set but appends ": strerror(errno_value)". */
int err_sys(tdm_err *e, int code, int errno_value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Clears an error value. */
void err_clear(tdm_err *e);

#endif
