/* metrics_log.h — one episode's row (ledger/metrics.h) as TensorBoard scalars, for the
 * live log of a run (config log.tensorboard) and `tandem metrics --tensorboard DIR`.
 *
 * Tags, at step = the episode (0-based): loss/<domain> (free phase), loss_u/<domain> and
 * loss_w/<domain> (the probe's twins, tandem mode), alpha/<domain>, and lr, lr_alpha,
 * grad_norm, tokens_per_s, episode_s, commit_s. wall_time is the row's time. */
#ifndef TANDEM_REPORT_METRICS_LOG_H
#define TANDEM_REPORT_METRICS_LOG_H

#include "ledger/metrics.h"
#include "util/tfevents.h"

/* The row's scalars other than the per-domain ones, in this order: lr, lr_alpha,
 * grad_norm, tokens_per_s, episode_s, commit_s (their names are also their tags and their
 * JSON fields). */
#define METRICS_SCALARS 6
void metrics_scalars(const rec_metrics *m, const char *names[METRICS_SCALARS],
                     double values[METRICS_SCALARS]);

int metrics_log_tfevents(tfevents *w, const rec_metrics *m, const char *const *names, tdm_err *e);

#endif
