/* metrics_log.c — a metrics row as TensorBoard scalars; see metrics_log.h. */
#include "report/metrics_log.h"

#include <stdio.h>

#include "util/testhook.h"

void metrics_scalars(const rec_metrics *m, const char *names[METRICS_SCALARS],
                     double values[METRICS_SCALARS]) {
    static const char *const n[METRICS_SCALARS] = {"lr", "lr_alpha", "grad_norm",
                                                   "tokens_per_s", "episode_s", "commit_s"};
    const double v[METRICS_SCALARS] = {m->lr, m->lr_alpha, m->grad_norm, m->tokens_per_s,
                                       m->episode_s, m->commit_s};
    for (int i = 0; i < METRICS_SCALARS; i++) names[i] = n[i], values[i] = v[i];
}

int metrics_log_tfevents(tfevents *w, const rec_metrics *m, const char *const *names, tdm_err *e) {
    int rc = 0;
    char tag[128];
    int64_t step = (int64_t)m->t;
    for (int d = 0; !rc && d < m->M; d++) {
        snprintf(tag, sizeof tag, "loss/%s", names[d]);
        rc = tfevents_scalar(w, tag, step, m->time, m->loss[d], e);
        if (!rc && m->has_probe) {
            snprintf(tag, sizeof tag, "loss_u/%s", names[d]);
            rc = tfevents_scalar(w, tag, step, m->time, m->loss_u[d], e);
            snprintf(tag, sizeof tag, "loss_w/%s", names[d]);
            if (!rc) rc = tfevents_scalar(w, tag, step, m->time, m->loss_w[d], e);
        }
        snprintf(tag, sizeof tag, "alpha/%s", names[d]);
        if (!rc) rc = tfevents_scalar(w, tag, step, m->time, m->alpha[d], e);
        snprintf(tag, sizeof tag, "epochs/%s", names[d]);
        if (!rc && m->has_seen) rc = tfevents_scalar(w, tag, step, m->time, m->epochs[d], e);
        snprintf(tag, sizeof tag, "val/%s", names[d]);
        if (!rc && m->has_val) rc = tfevents_scalar(w, tag, step, m->time, m->val[d], e);
    }
    /* each free step's loss on the AdamW step axis (its own tag: the others are per episode) */
    for (int i = 0; !rc && i < m->n_steps; i++)
        rc = tfevents_scalar(w, "train_loss_step", (int64_t)(m->step_first + (uint64_t)i), m->time, m->step_loss[i], e);
    const char *tags[METRICS_SCALARS];
    double values[METRICS_SCALARS];
    metrics_scalars(m, tags, values);
    for (int i = 0; !rc && i < METRICS_SCALARS; i++)
        rc = tfevents_scalar(w, tags[i], step, m->time, values[i], e);
    /* TANDEM_TEST_KILL_AT=tb-row:n: a SIGKILL once the n-th row's events are made, before
     * they are flushed (a kill in the middle of a row's write, for the tests) */
    if (!rc) testhook_kill_at("tb-row");
    return rc ? rc : tfevents_flush(w, e);
}
