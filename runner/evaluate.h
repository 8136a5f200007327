/* evaluate.h — the per-domain held-out loss of a run's state, as the paper reports it:
 * every window of T+1 tokens of a domain's split at stride T, in order (no sampling),
 * the mean token loss per domain, and Average = exp(mean of the per-domain losses).
 * Used by `tandem eval` and `tandem compare`. */
#ifndef TANDEM_RUNNER_EVALUATE_H
#define TANDEM_RUNNER_EVALUATE_H

#include <stdint.h>

#include "data/dataset.h"
#include "ledger/records.h"
#include "model/model.h"
#include "storage/store.h"
#include "util/err.h"

typedef struct eval_result {
    char run_id[64];
    uint64_t seq;     /* the state evaluated */
    char step[16];    /* its position's next step ("done" for a finished run) */
    int M;
    char names[REC_MAX_DOMAINS][REC_DOMAIN_MAX];
    double loss[REC_MAX_DOMAINS];     /* mean token loss (nats) */
    uint64_t tokens[REC_MAX_DOMAINS]; /* targets scored */
    double mean_loss, average_ppl;    /* Average = exp(mean_loss) */
} eval_result;

/* Evaluates the run in `st` (its pinned config says the model, dataset and batch shape)
 * on `split` (SPLIT_TEST, ...), at most max_tokens targets per domain: the newest verified
 * state, or states/<*seq>.mp when seq is not NULL. On the CPU with the run's thread
 * count and, as blas_mode (model/blas_core.h: BLAS_PIN_EVAL for tandem eval, which may
 * start again with them; BLAS_PIN_NOTE for an evaluation among others) lets, its pinned
 * kernels. ERR_USAGE when there is no such state or a domain has no window; store errors
 * as they come. */
int eval_store(store *st, int split, uint64_t max_tokens, const uint64_t *seq, int blas_mode, eval_result *out,
               tdm_err *e);

/* A check eval_store makes between two batches (NULL: none, the default): when it returns
 * non-zero the evaluation stops there with RUN_EXIT_REQUEUE (75), "stopped by a signal".
 * tandem compare sets run_signal_pending: a stop signal during one model's evaluation
 * (minutes on a large test split) waited for its end, past a scheduler's grace (a hunt). */
void eval_set_stop_check(int (*pending)(void));

/* The per-domain loss of `params` (a tensor of ctx's backend) on ds's split, as eval_store
 * computes it for a state (whole windows, at most max_tokens targets per domain): for a
 * run evaluating its own u (log.val_every). ERR_USAGE when a domain has no window. */
int eval_params(const model_ops *ops, model_ctx *ctx, const float *params, const dataset *ds, int split, int B,
                int T, uint64_t max_tokens, double *loss, uint64_t *tokens, tdm_err *e);

#endif
