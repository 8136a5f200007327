/* compare_layout.h — where `tandem compare` keeps its runs inside its store: the TANDEM
 * run and the four final runs, each a run of its own under STORE/<name>. One table:
 * cli/cmd_compare.c makes the runs under these names (the finals in their point order,
 * as cluster jobs index them), and config/run_config.c names them when such a store is
 * given where a single run is expected. */
#ifndef TANDEM_CONFIG_COMPARE_LAYOUT_H
#define TANDEM_CONFIG_COMPARE_LAYOUT_H

/* [0] the DMO run, then the final runs by point: Uniform, Natural, TANDEM's α*, UniMax */
enum { COMPARE_DMO, COMPARE_UNIFORM, COMPARE_NATURAL, COMPARE_TANDEM, COMPARE_UNIMAX, COMPARE_NRUNS };
extern const char *const compare_runs[COMPARE_NRUNS];

#endif
