/* compare_layout.c — the names of `tandem compare`'s runs in its store (compare_layout.h). */
#include "config/compare_layout.h"

const char *const compare_runs[COMPARE_NRUNS] = {"dmo", "uniform", "natural", "tandem", "unimax"};
