/* cluster_check.h — the formats of the cluster.* strings of a config.
 *
 * Their values end up in sbatch directives, shell words and Kubernetes objects
 * (deploy/manifest.c renders them), so each is checked when the config is parsed, with
 * the key and its origin named by the caller. Each check returns true when `s` is valid,
 * else false with `why` set to "expected ..." (never echoing a value that could be a
 * secret). */
#ifndef TANDEM_CONFIG_CLUSTER_CHECK_H
#define TANDEM_CONFIG_CLUSTER_CHECK_H

#include <stdbool.h>
#include <stddef.h>

/* A size with an optional binary unit: "64G", "512M", "1024" (Slurm: megabytes). */
bool cluster_check_size(const char *s, char *why, size_t n);

/* Slurm's --time: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or UNLIMITED. */
bool cluster_check_slurm_time(const char *s, char *why, size_t n);
/* A valid Slurm time limit in seconds; -1 for none ("", UNLIMITED, INFINITE) or one that
 * does not parse. MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS. */
long cluster_slurm_time_seconds(const char *s);

/* A name for an #SBATCH line: letters, digits, '_', '.', '-'. */
bool cluster_check_slurm_name(const char *s, char *why, size_t n);

/* The same, or a comma-separated list of them (partitions). */
bool cluster_check_slurm_list(const char *s, char *why, size_t n);

/* A Kubernetes DNS subdomain: dot-separated labels, at most 253. */
bool cluster_check_dns_subdomain(const char *s, char *why, size_t n);

/* A container image reference: no blanks, quotes or control characters. */
bool cluster_check_image(const char *s, char *why, size_t n);

/* An absolute path without blanks, quotes or control characters. */
bool cluster_check_path(const char *s, char *why, size_t n);

/* Node labels or tolerations a config may give: the manifest writer (deploy/manifest.c)
 * holds 48 of each, cluster.cloud adds at most 3. */
#define CLUSTER_LIST_MAX 40

/* A DNS label that starts with a letter (cluster.job_name: a Service name too). */
bool cluster_check_job_name(const char *s, char *why, size_t n);

/* "key=value,key2=value2": node labels, each key once, at most CLUSTER_LIST_MAX. */
bool cluster_check_labels(const char *s, char *why, size_t n);

/* "key[=value][:Effect],...": tolerations, at most CLUSTER_LIST_MAX. */
bool cluster_check_tolerations(const char *s, char *why, size_t n);

/* "NAME=value,...": extra environment. Values are never echoed: a person may have pasted
 * a secret by mistake, and an error message ends up in logs. A ',' inside a value is
 * written "\," (NO_PROXY=localhost\,169.254.169.254); any other '\' is itself. */
bool cluster_check_env(const char *s, char *why, size_t n);

/* The length of the cluster.env entry at p: up to the first ',' that is not "\,". */
size_t cluster_env_entry_len(const char *p);

/* The entry of `len` bytes at p as the job gets it, each "\," made ",", into out (cap
 * bytes, cut to fit). */
void cluster_env_entry(const char *p, size_t len, char *out, size_t cap);

#endif
