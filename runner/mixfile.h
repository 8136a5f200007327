/* mixfile.h — reading a mixture file (what `tandem mixture` writes) into α.
 *
 *   mixture:
 *     web: 0.31
 *     code: 0.42
 *
 * Every domain of the dataset must appear exactly once, by name, with a finite value ≥ 0;
 * the values must sum to 1 within 1e-6 and are then renormalised to sum to 1 exactly in
 * float64. Errors name the file, the line and the domain (ERR_USAGE).
 *
 * `path` may instead name the store of a finished TANDEM run (a URL with "://", or a
 * directory): its mixture.mp (α*, matched to the dataset's domains by name) is read, as
 * `tandem compare` does for its final run. */
#ifndef TANDEM_RUNNER_MIXFILE_H
#define TANDEM_RUNNER_MIXFILE_H

#include "data/dataset.h"
#include "util/err.h"

int mixture_file_read(const char *path, const dataset *ds, double *alpha, tdm_err *e);

#endif
