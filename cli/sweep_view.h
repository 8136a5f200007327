/* sweep_view.h — a sweep's root as `tandem status ROOT` shows it: every point, its state
 * and α* (deploy/sweep_root.h reads them). */
#ifndef TANDEM_CLI_SWEEP_VIEW_H
#define TANDEM_CLI_SWEEP_VIEW_H

#include <stdio.h>

#include "storage/store.h"
#include "util/err.h"

/* When `st` (opened at url) is a sweep's root (it holds SWEEP): lists its points — index,
 * state, episode, label and α* of finished TANDEM points — as a table on stdout, or with
 * j as the members ,"sweep":{...} written to j; *is_sweep = 1. *is_sweep = 0 (nothing
 * printed) when st holds no SWEEP. Non-zero with e set when SWEEP is damaged
 * (ERR_STORE) or a point's store cannot be read. */
int sweep_view_status(store *st, const char *url, FILE *j, int *is_sweep, tdm_err *e);

#endif
