/* metrics.h — what each episode measured, kept in the run's store so that it survives
 * preemption: metrics/<t>.mp, one row per episode, written by the run at the episode's
 * end (before any state that follows it is committed).
 *
 * A resume replays the episodes after its state bit for bit; their rows are already
 * there, and the first row written for an episode stands (its timings are the ones that
 * happened), so a run killed any number of times has exactly one row per episode: none
 * lost, none twice. A row of an older config generation (a run changed with
 * --allow-change resumes from before it) is replaced. Rows are not part of the audit
 * trail (the α chain is), but each is sealed with its own SHA-256 (codec_put_self), so
 * a damaged row reads as damaged, never as other figures: it is rewritten when the run
 * passes its episode, and `tandem metrics` skips one it cannot read, saying so.
 */
#ifndef TANDEM_LEDGER_METRICS_H
#define TANDEM_LEDGER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "ledger/ckpt.h"
#include "ledger/records.h"
#include "storage/store.h"

/* Per-step losses a row holds at most: an episode of more free steps records its first
 * METRICS_MAX_STEPS (the per-episode figures cover them all). */
#define METRICS_MAX_STEPS 256

typedef struct rec_metrics {
    uint64_t t;   /* episode, 0-based */
    uint64_t seq; /* run position at its end */
    uint64_t gen; /* config generation it was computed under */
    int M;
    double loss[REC_MAX_DOMAINS];   /* mean free-phase train loss per domain */
    int has_probe;                  /* run.mode tandem: the probe's figures below */
    double loss_u[REC_MAX_DOMAINS]; /* the probe's evaluation of u' and w */
    double loss_w[REC_MAX_DOMAINS];
    double alpha[REC_MAX_DOMAINS];  /* the mixture of this episode's free steps */
    int has_seen;                   /* rows of this version on: the two below */
    double seen[REC_MAX_DOMAINS];   /* tokens of each domain u has trained on, at its end */
    double epochs[REC_MAX_DOMAINS]; /* the same in epochs of the domain's train tokens */
    int n_steps;                    /* per-step train losses recorded (0: none) */
    uint64_t step_first;            /* the AdamW step count after the first of them */
    double step_loss[METRICS_MAX_STEPS]; /* each free step's mixture loss, Σ_m α_m·ℓ_m */
    int has_val;                    /* log.val_every: the two below */
    double val[REC_MAX_DOMAINS];    /* u's validation loss per domain at the episode's end */
    uint64_t val_tokens;            /* targets per domain it was measured on (the least) */
    double lr;                      /* free-phase learning rate of its last step */
    double lr_alpha;                /* α step size (0 in fixed mode) */
    double grad_norm;               /* mean free-step gradient norm, before clipping */
    uint64_t free_steps;            /* free steps measured (fewer than E: resumed midway) */
    double tokens_per_s;            /* every forward pass of the episode (probe included) */
    double episode_s;               /* wall seconds the episode took */
    double commit_s;                /* the last full commit before it: seconds (0: none) */
    double time;                    /* unix seconds at its end */
    char host[REC_NAME_MAX];
    uint64_t attempt;               /* Slurm's restart count when known */
} rec_metrics;

void *rec_metrics_encode(const rec_metrics *m, size_t *n);
/* Strict, as every record decoder (ledger/records.h); `what` names the object. */
int rec_metrics_decode(const void *data, size_t n, const char *what, rec_metrics *m, tdm_err *e);

/* Writes episode m->t's row under the writer's lease unless a row of the current
 * generation is there (the first stands); m->gen is set to the writer's, *fresh (may be
 * NULL) to whether this call wrote it: 0 no, 1 a new row (or one that could not be read),
 * 2 over the row of an older config generation (a resume with --allow-change from before
 * the change: another trajectory's). ERR_STORE when this writer was fenced out. */
int ckpt_metrics_record(ckpt *c, rec_metrics *m, int *fresh, tdm_err *e);

/* Every readable row of the store, in episode order (*rows: caller frees); *skipped
 * counts rows that could not be read (said on stderr, naming each). */
int ledger_metrics_read(store *st, rec_metrics **rows, size_t *n, size_t *skipped, tdm_err *e);


#endif
