/* sweep.h — a study over settings as one job: `--sweep key=v1,v2,... [--sweep ...]` on
 * `tandem run` and `tandem manifest` (docs/scheduling.md, "Sweeps").
 *
 * The points are the Cartesian product of the values, the first --sweep varying slowest;
 * point i sets each key to its value after the config and every --set. Each point is its
 * own run in its own store, STORE/<label> (label: "key=value,key=value", any '/' in a value
 * made '_'), whose RUN pins the resolved config as always. A Slurm job array (task i =
 * point i) or a Kubernetes Indexed Job (completion index i) runs them; `tandem run` finds
 * its point from --point, else TANDEM_POINT (the rendered Jobs set it from the completion
 * index), else SLURM_ARRAY_TASK_ID, else JOB_COMPLETION_INDEX.
 */
#ifndef TANDEM_DEPLOY_SWEEP_H
#define TANDEM_DEPLOY_SWEEP_H

#include <stddef.h>

#include "util/err.h"

#define SWEEP_MAX_KEYS 8
#define SWEEP_MAX_POINTS 10000
#define SWEEP_LABEL_MAX 200 /* bytes of a point's label: a file name (255) with room to spare */

typedef struct sweep {
    int nkeys;
    char *key[SWEEP_MAX_KEYS];
    int nvals[SWEEP_MAX_KEYS];
    char **val[SWEEP_MAX_KEYS];
    size_t npoints;
} sweep;

/* Parses n "--sweep" texts into *s (zeroed first; free with sweep_free). ERR_USAGE naming
 * the text when one is not key=v1[,v2...], repeats a key, sweeps cluster.* (where a job
 * runs is one job's) or store, or there would be more than SWEEP_MAX_POINTS points, two
 * values of a key would give the same label, or a label would pass SWEEP_LABEL_MAX. */
int sweep_parse(sweep *s, char *const *texts, int n, tdm_err *e);
void sweep_free(sweep *s);

/* The value index of key k at point i (the first key varies slowest). */
int sweep_value_at(const sweep *s, size_t i, int k);

/* Point i's "key=value" settings, one per key, into sets[] (each cap bytes). */
void sweep_point_sets(const sweep *s, size_t i, char (*sets)[512], size_t cap);
/* Point i's label, the store prefix of its run. */
void sweep_label(const sweep *s, size_t i, char *out, size_t cap);

/* Loads every point's config (the file at `path`, the `nsets` --set texts, then the
 * point's settings): the first that does not load is its error, as "--sweep point i
 * (label): ...", so that a bad value is said before any point runs, not by a task hours
 * later. ERR_INTERNAL on out of memory. */
int sweep_check_points(const sweep *s, const char *path, char *const *sets, int nsets, tdm_err *e);

/* The point this process runs: `given` (>= 0), else TANDEM_POINT, SLURM_ARRAY_TASK_ID or
 * JOB_COMPLETION_INDEX; ERR_USAGE when none is there or it is out of range. */
int sweep_point_index(const sweep *s, long given, size_t *out, tdm_err *e);

#endif
