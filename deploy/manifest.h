/* manifest.h — a run config → a Slurm batch script or Kubernetes objects that requeue on
 * preemption (`tandem manifest slurm|k8s CONFIG`; docs/scheduling.md).
 *
 * Both renderers read the cluster.* section of the config (config/config.h) and write
 * text only: nothing is submitted. The output is a pure function of the options — no
 * time stamps, no host names — so a checked-in example stays byte-identical to what
 * `tandem manifest` renders from its config (tests/cli_k8s.sh, tests/cli_slurm.sh).
 *
 * The contract with the runner (DESIGN.md §6): SIGTERM, SIGINT or SIGUSR1 (and the other
 * stop signals of util/stop_signals.h) → tandem commits at its next safe point and exits
 * 75 ("requeue me"); 2 is a config or usage
 * error that no retry can fix.
 *
 * Sweeps (deploy/sweep.h): a Slurm job array (--array=0-N-1, task i = point i) or a
 * Kubernetes Indexed Job (completion index i = point i, FailIndex on 2 and 5 so that one
 * bad point does not stop the others), tandem run getting the --sweep texts and finding
 * its point from SLURM_ARRAY_TASK_ID or TANDEM_POINT.
 *
 * Slurm: one script for one node or several (--nodes): --requeue, --open-mode=append,
 * --signal=B:USR1@cluster.signal_lead_s, traps that forward USR1 and TERM to the srun step
 * as USR1 (srun turns a TERM into SIGKILL of its tasks), a wait loop that survives the
 * traps, `scontrol requeue` on exit 75 after a USR1, SLURM_RESTART_COUNT in the log, GPU
 * directives only when cluster.gpus_per_node > 0, S3 credentials read from
 * cluster.credentials_file inside the script (never on a command line).
 *
 * Kubernetes: a ConfigMap with the config (as config_print_yaml writes it, so the pod
 * runs exactly the rendered values) and a batch/v1 Job — or, for cluster.nodes > 1, an
 * Indexed Job and a headless Service — with restartPolicy Never, a podFailurePolicy
 * (exit 2 → FailJob, exit 75 → Ignore, DisruptionTarget → Ignore), backoff limits,
 * podReplacementPolicy Failed, terminationGracePeriodSeconds, nvidia.com/gpu, the AWS
 * credentials mounted from a Secret, node selection for the GPU and spot capacity on
 * GKE, EKS and AKS, and tandem as PID 1 in exec form.
 */
#ifndef TANDEM_DEPLOY_MANIFEST_H
#define TANDEM_DEPLOY_MANIFEST_H

#include <stdio.h>

#include "config/config.h"
#include "util/err.h"

/* Where the image's tandem lives (Dockerfile) and where the pod sees its config. */
#define MANIFEST_K8S_TANDEM "/usr/local/bin/tandem"
#define MANIFEST_K8S_CONFIG_DIR "/etc/tandem"
#define MANIFEST_K8S_SECRET_DIR "/var/run/secrets/tandem-aws"
#define MANIFEST_K8S_DATA_DIR "/data"

typedef struct manifest_opts {
    const config *cfg;       /* loaded with config_load, --set values applied */
    const char *config_path; /* Slurm: the config file as the nodes see it (absolute) */
    const char *config_name; /* the config file's name without directory and extension */
    const char *store_url;   /* where the run lives (the caller resolves the default) */
    char *const *sets;       /* Slurm: the --set texts, passed on to `tandem run` (but cluster.*) */
    int nsets;
    const char *tandem_binary; /* Slurm: tandem when cluster.tandem_binary is "" */
    const char *workdir;       /* Slurm: --chdir when cluster.workdir is "" */
    const char *rendered_from; /* the command line, for the header comment (may be NULL) */
    const struct sweep *sweep; /* --sweep: one job of many points (NULL or none: one run) */
    char *const *sweep_texts;  /* the --sweep texts as given, passed on to tandem run */
    int nsweeps;
    /* What each task runs: NULL = `tandem run CONFIG --store STORE` (+ --set, --sweep);
     * else `tandem COMMAND CONFIG --store STORE` + --set + command_args, e.g. the final
     * runs of `tandem compare` (command "compare", args "--only final"), where `sweep`
     * only numbers the points and point_names[i] names point i's store under STORE. */
    const char *command;
    const char *const *command_args;
    int ncommand_args;
    const char *const *point_names;
    /* added to the job name, cluster.job_name's too: "-dmo" and "-finals" for the two jobs
     * of `tandem manifest --compare`, which must not share one name */
    const char *name_suffix;
} manifest_opts;

/* The job name: cluster.job_name, else "tandem-" + the config name made a DNS label
 * (lowercase, runs of other characters → '-', cut so that "<name>-<index>" of the last
 * pod of an Indexed Job still fits 63 characters; a cut name ends in a hash of the whole
 * config name), then "-" and 6 hex digits of a hash of the job's store (an S3 URL as the
 * backends read it, a file store as its absolute path: one store, one name; two stores, two
 * names), then name_suffix. */
void manifest_job_name(const manifest_opts *o, char *out, size_t cap);

/* Writes the sbatch script to `out`; warnings ("tandem manifest: warning: ...") go to
 * `warn` when not NULL. Returns 0, or ERR_USAGE with `e` naming the key, or ERR_INTERNAL
 * with the errno of the first failed write when `out` could not be written. */
int manifest_slurm(FILE *out, FILE *warn, const manifest_opts *o, tdm_err *e);

/* Writes the Kubernetes objects as one multi-document YAML stream (ConfigMap, Service
 * when cluster.nodes > 1, Job). Requires cluster.image. Same returns as manifest_slurm. */
int manifest_k8s(FILE *out, FILE *warn, const manifest_opts *o, tdm_err *e);

#endif
