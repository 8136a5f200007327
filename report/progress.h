/* progress.h — what a run reports as it goes: one text line per episode on stderr, or
 * JSON lines on stdout (`tandem run --json`: every event an object with "event" and
 * "time", unix seconds; docs/json.md), or nothing. Human text always goes to stderr. */
#ifndef TANDEM_REPORT_PROGRESS_H
#define TANDEM_REPORT_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

/* TEXT: every episode line on stderr (a run's log); BRIEF: the messages as TEXT, but the
 * episode line only on a terminal, one status line replaced in place (tandem compare: four
 * runs, whose logs want the stages and the results, not every episode). */
enum { PROGRESS_TEXT = 0, PROGRESS_JSON = 1, PROGRESS_QUIET = 2, PROGRESS_BRIEF = 3 };

typedef struct progress_line {
    uint64_t episode, episodes; /* the episode just finished (1-based in text), of T */
    uint64_t seq;               /* run position after it */
    int M;
    const char *const *names;
    const double *loss;    /* mean free-phase train loss per domain this episode */
    const double *loss_u;  /* probe evaluation of u' and w (NULL: no twins ran, steps.h step_pinned) */
    const double *loss_w;
    const double *alpha;   /* α after the episode's update */
    double tokens_per_s;
    double since_commit_s; /* seconds since the last full commit; < 0: none yet */
    double eta_s;
} progress_line;

/* The episode line: text to f, or an "episode" event on stdout. */
void progress_print(FILE *f, int mode, const progress_line *p);

/* A message: text to f as is, or {"event": EVENT, "time": T, "message": ...} on stdout. */
void progress_event(FILE *f, int mode, const char *event, const char *message);

/* JSON only (text shows commits in the episode line): a full state landed. */
void progress_commit(int mode, uint64_t seq, const char *state);

/* JSON only: the run failed with exit `code` (the text goes to stderr as always). */
void progress_error(int mode, int code, const char *message);

/* JSON only, last: the exit code, where the run stands and, when the run finished, the
 * final mixture (mixture NULL otherwise). */
void progress_end(int mode, int code, uint64_t episode, uint64_t episodes, uint64_t seq, int M,
                  const char *const *names, const double *mixture);

/* While a run runs (run_main, between these two): stdout and stderr are written through a
 * gate, so that a reader that stops reading (a wedged log shipper, `tandem run --json |
 * less` left on screen) cannot hold the run past a stop signal. Each write waits until
 * its descriptor takes it (poll, POLLOUT; at most PIPE_BUF bytes at a time, which a pipe
 * with room takes without blocking) — for as long as it takes while no stop is pending
 * (`stop_pending`, the run's flag), as a blocking write would; once one is, for at most
 * about a second in all, after which that stream's output is dropped (counted, and said on
 * stderr at the release when stderr still takes it) so that the stop commit and exit 75
 * come within the grace period. The last line may then be cut. The descriptors' flags
 * are left alone (O_NONBLOCK would change them for every other writer of the pipe).
 * Nested calls count; the outermost release flushes and puts the streams back. */
void progress_guard_streams(int (*stop_pending)(void));
void progress_release_streams(void);

/* Progress of long commands (eval, prep) is for a person watching: shown only when
 * standard error is a terminal, so logs and pipes get the results alone. */
int progress_on_terminal(void);
/* A status line that the next one replaces ("\r...\033[K" on stderr), when stderr is a
 * terminal; nothing otherwise. progress_tty_end clears it. */
void progress_tty(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void progress_tty_end(void);

#endif
