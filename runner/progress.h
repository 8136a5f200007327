/* progress.h — one line per episode on stderr: plain text, JSON lines, or nothing. */
#ifndef TANDEM_RUNNER_PROGRESS_H
#define TANDEM_RUNNER_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

enum { PROGRESS_TEXT = 0, PROGRESS_JSON = 1, PROGRESS_QUIET = 2 };

typedef struct progress_line {
    uint64_t episode, episodes; /* the episode just finished (1-based in text), of T */
    uint64_t seq;               /* run position after it */
    int M;
    const char *const *names;
    const double *loss;    /* mean free-phase train loss per domain this episode */
    const double *loss_u;  /* probe evaluation of u' and w */
    const double *loss_w;
    const double *alpha;   /* α after the episode's update */
    double tokens_per_s;
    double since_commit_s; /* seconds since the last full commit; < 0: none yet */
    double eta_s;
} progress_line;

void progress_print(FILE *f, int mode, const progress_line *p);

/* Prints a message in the selected mode: text as is, JSON as {"event": ..., "message": ...}. */
void progress_event(FILE *f, int mode, const char *event, const char *message);

#endif
