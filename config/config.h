/* config.h — the run configuration: YAML sections + `--set section.key=value` → a typed struct.
 *
 * A config file is YAML with one map per section (run, data, model, train, tandem, optim,
 * checkpoint, cluster) and two top-level scalars (preset, store):
 *
 *   preset: data-restricted-160m        # optional: a named bundle of values (see below)
 *   data:
 *     dataset: corpus/dataset.yaml      # relative to THIS file's directory
 *   tandem:
 *     K: 5
 *
 * Every key is addressed as `section.key` on the command line (`--set tandem.K=3`).
 * Layering, later wins: built-in defaults → the preset (the file's `preset:` or the last
 * `--set preset=...`) → the file's keys → the other --set values, in order.
 *
 * One schema table in config.c (key, type, field, default, range, enum values, doc) drives
 * parsing, validation, the canonical form, --help and docs/config.md; adding a key means
 * adding a field here and one row there.
 *
 * Parsing is strict because a silently misread hyper-parameter wastes a GPU-week: unknown
 * keys are errors (with a "did you mean" suggestion), integers must be plain integers (a
 * quoted "5" or a 5.0 is rejected), floats must be finite, bools are true/false only.
 * Every error is ERR_USAGE and names the key and where it came from: "file:line" for
 * YAML, "--set key=value" for the command line.
 *
 * The canonical form (every key, sorted, → exact value text, floats round-trip to the
 * bit) is what a run pins in its store; a resumed run rebuilds the pinned config with
 * config_from_canonical and compares it with config_diff.
 */
#ifndef TANDEM_CONFIG_CONFIG_H
#define TANDEM_CONFIG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/err.h"

#define CONFIG_STR_MAX 4096 /* bytes of a string value, NUL included */
#define CONFIG_KEY_MAX 64   /* bytes of a key name, NUL included */

/* ------------------------------------------------------ the typed configuration */

/* Enum-valued keys are stored as these ints; the order matches the value lists of the
 * schema (config.c checks the counts at compile time). */
enum config_preset {
    CONFIG_PRESET_NONE,
    CONFIG_PRESET_DATA_ABUNDANT_160M,
    CONFIG_PRESET_DATA_RESTRICTED_160M,
    CONFIG_PRESET_DATA_RESTRICTED_410M,
    CONFIG_PRESET_DATA_RESTRICTED_1B,
    CONFIG_PRESET_SFT_QWEN2_0_5B,
    CONFIG_PRESET_COUNT
};
enum config_device { CONFIG_DEVICE_CPU, CONFIG_DEVICE_CUDA };
enum config_snapshot { CONFIG_SNAPSHOT_AUTO, CONFIG_SNAPSHOT_HOST, CONFIG_SNAPSHOT_STREAM };
enum config_precision { CONFIG_PRECISION_FP32, CONFIG_PRECISION_BF16 };
/* model.attention: the CUDA backend's attention (gpu/cuda.h model_cuda_set_attention) */
enum config_attention { CONFIG_ATTENTION_AUTO, CONFIG_ATTENTION_CUDNN, CONFIG_ATTENTION_BUILTIN };
extern const char *const config_attention_names[]; /* "auto", "cudnn", "builtin" */
/* auto: weight for TANDEM runs, sample for fixed-mixture training (DESIGN.md §2) */
enum config_mixing { CONFIG_MIXING_WEIGHT, CONFIG_MIXING_SAMPLE, CONFIG_MIXING_AUTO };
/* the mixture a TANDEM run starts from, or a fixed run trains with */
enum config_mixture {
    CONFIG_MIXTURE_UNIFORM,
    CONFIG_MIXTURE_NATURAL,
    CONFIG_MIXTURE_FILE,
    CONFIG_MIXTURE_UNIMAX /* steps/mixture.h; N = tandem.start_epochs (DMO), data.unimax_epochs (fixed) */
};
/* tandem.alpha_step: eg = the normalised exponentiated-gradient step (default); pgd =
 * Algorithm 1's projected step with η_α (tandem.lr_alpha) */
enum config_alpha_step { CONFIG_ALPHA_EG, CONFIG_ALPHA_PGD };
/* tandem.alpha_cut: which domains the α step may take weight from below their starting
 * weight: repeated = only those the run repeats more than data.unimax_epochs epochs, down
 * to that many; any = every domain (Algorithm 1); overfit = only those the overfitting
 * record has marked (default since 2026-12-05's third session) */
enum config_alpha_cut { CONFIG_CUT_REPEATED, CONFIG_CUT_ANY, CONFIG_CUT_OVERFIT };
/* tandem.val_loss: how w's objective adds the domains' validation losses */
enum config_val_loss { CONFIG_VAL_SUM, CONFIG_VAL_MEAN };
/* tandem: DMO episodes (probe, alpha, free); fixed: free steps only, α never moves */
enum config_mode { CONFIG_MODE_TANDEM, CONFIG_MODE_FIXED };
enum config_schedule { CONFIG_SCHEDULE_COSINE, CONFIG_SCHEDULE_CONSTANT };
enum config_cloud { CONFIG_CLOUD_NONE, CONFIG_CLOUD_GKE, CONFIG_CLOUD_EKS, CONFIG_CLOUD_AKS };

/* The typed configuration; see config_print_help (or docs/config.md) for each key's
 * meaning, range and default. Field names are the key names. */
typedef struct config {
    int preset;                 /* enum config_preset: where the non-file values came from */
    /* not keys: the path keys a file gave relative, joined to its folder by the loader
     * (bit k for the schema's row k; config_path_joined) */
    uint64_t joined[2];
    char store[CONFIG_STR_MAX]; /* run store URL; "" = the runner decides */
    struct config_run {
        int episodes;  /* T */
        int mode;      /* enum config_mode */
        uint64_t seed;
        int device;    /* enum config_device */
        int precision; /* enum config_precision: compute precision of the CUDA backend */
        int threads;   /* 0 = all cores */
        char blas_kernels[CONFIG_STR_MAX]; /* OpenBLAS core name; "auto" = resolved at creation */
    } run;
    struct config_data {
        char dataset[CONFIG_STR_MAX]; /* dataset YAML; resolved against the config's dir */
        int mixing;                   /* enum config_mixing */
        int mixture;                  /* enum config_mixture */
        char mixture_file[CONFIG_STR_MAX]; /* `tandem mixture` YAML when mixture = file */
        double unimax_epochs;              /* N of UniMax in a fixed run; the hold's bound */
        char max_epochs[CONFIG_STR_MAX];   /* per-domain caps, config/domain_caps.h */
    } data;
    struct config_model {
        int vocab; /* 0 = the dataset's */
        int ctx, layers, heads, channels;
        char init[CONFIG_STR_MAX]; /* "random", or "hf:DIR" (runner/model_source.h) */
        int attention;             /* enum config_attention */
    } model;
    struct config_train {
        int batch; /* sequences per step */
        int seq;   /* tokens per sequence */
        int micro_batch; /* rows per forward/backward pass; 0 = all at once */
    } train;
    struct config_tandem {
        int K, E;
        int val_batch; /* 0 = one sequence per domain */
        double gamma;
        double lr_probe; /* η_K */
        double lr_alpha; /* η_α (alpha_step = pgd) */
        int alpha_step;  /* enum config_alpha_step */
        double alpha_budget; /* c (alpha_step = eg): the step is c / episodes */
        int alpha_cut;       /* enum config_alpha_cut */
        int val_loss;    /* enum config_val_loss */
        int eval_batches; /* train batches of the probe's evaluation of the twins */
        bool probe_carry;
        bool overfit_cap;    /* bound a domain whose validation loss rose (steps.h) */
        bool skip_pinned;    /* no twins while the hold pins α (steps.h step_pinned) */
        double start_epochs; /* N of the DMO's UniMax start; 0 = data.unimax_epochs */
        double alpha_floor;
    } tandem;
    struct config_optim {
        double lr; /* η_E */
        double lr_min;
        int warmup;
        int schedule; /* enum config_schedule */
        double weight_decay, clip, beta1, beta2, eps;
    } optim;
    struct config_checkpoint {
        int keep; /* full states the writer keeps (0 = all) */
        double grace_s; /* seconds from a stop signal to SIGKILL; 0 = TANDEM_GRACE_S or unknown */
        int every_episodes;
        double every_seconds;
        int chunk_kib;
        int snapshot; /* enum config_snapshot */
    } checkpoint;
    /* What the run reports beside its store; never compared when a run resumes. */
    struct config_log {
        char tensorboard[CONFIG_STR_MAX]; /* TensorBoard event files' directory; "" = none */
        int val_every;                    /* u's validation loss every N episodes; 0 = never */
        int val_tokens;                   /* at most this many targets per domain for it */
    } log;
    /* Where a run executes, not what it computes: read by `tandem manifest` (runner/
     * manifest.h) and never compared when a run resumes (config/run_config.c). String values
     * are checked for their format when parsed; "" means "not set / the default". */
    struct config_cluster {
        int nodes;
        int gpus_per_node;             /* 0 = a CPU job */
        int tasks_per_node;            /* ranks (tandem processes) per node */
        char gpu_type[CONFIG_STR_MAX]; /* Slurm gres type; cloud GPU labels */
        int cpus_per_task;             /* 0 = the scheduler's default */
        char memory[CONFIG_STR_MAX];   /* "64G": digits and K, M, G or T */
        char time_limit[CONFIG_STR_MAX];
        char partition[CONFIG_STR_MAX];
        char account[CONFIG_STR_MAX];
        char job_name[CONFIG_STR_MAX]; /* a DNS label */
        char workdir[CONFIG_STR_MAX];
        char tandem_binary[CONFIG_STR_MAX];
        char credentials_file[CONFIG_STR_MAX];
        int signal_lead_s;
        char image[CONFIG_STR_MAX];
        int cloud; /* enum config_cloud */
        bool spot;
        char node_selector[CONFIG_STR_MAX]; /* "k=v,k2=v2" */
        char tolerations[CONFIG_STR_MAX];   /* "key[=value][:Effect],..." */
        int grace_period_s;
        char secret_name[CONFIG_STR_MAX];
        char service_account[CONFIG_STR_MAX]; /* Kubernetes: IRSA / Pod Identity, "" = none */
        bool secret_as_env;                   /* the Secret's keys as env, not mounted files */
        int backoff_limit;
        char data_pvc[CONFIG_STR_MAX];
        char env[CONFIG_STR_MAX]; /* "NAME=value,..." */
        int coordinator_port;
    } cluster;
} config;

/* One key of the canonical form. */
typedef struct config_kv {
    char key[CONFIG_KEY_MAX];
    char value[CONFIG_STR_MAX];
} config_kv;

/* ----------------------------- building a config: defaults, preset, file, --set */

/* Sets every key to its built-in default (data.dataset, which has none, to ""). Never
 * fails; the result does not pass config_check until data.dataset is set. */
void config_defaults(config *c);

/* Builds `*c` from defaults, preset, the YAML file `path` (NULL: none) and the `nsets`
 * "key=value" texts of `sets`, in the layering order above, then runs config_check.
 * A relative data.dataset from the file is resolved against the file's directory (and
 * stored resolved); one from --set is kept as given (relative to the working directory).
 * Returns 0, or ERR_USAGE (ERR_INTERNAL on out-of-memory) with `e` set; `*c` is only
 * written on success. */
int config_load(config *c, const char *path, char *const *sets, int nsets, tdm_err *e);
/* config_load where the last `nsweep` of `sets` are a --sweep point's settings: an error
 * about one of them names --sweep, the option the user wrote, not --set. */
int config_load_sweep(config *c, const char *path, char *const *sets, int nsets, int nsweep,
                      tdm_err *e);

/* Applies one "--set key=value": `value` is parsed with the key's type (it is never
 * "quoted", so a string key takes the text as is). `preset` applies the preset's values
 * over everything in `c`, then records the preset. Does not resolve paths and does not
 * run the cross-field checks (they may be transiently violated between two sets); on
 * error `c` is unchanged. */
int config_set(config *c, const char *key, const char *value, tdm_err *e);

/* The checks that involve more than one key: data.dataset is set, model.channels is a
 * multiple of model.heads, train.seq <= model.ctx, optim.lr_min <= optim.lr. Also
 * re-checks every key's range (a struct filled by hand may hold anything). */
int config_check(const config *c, tdm_err *e);

/* 0 when `key` is a config key; else ERR_USAGE naming it with `flag` (the option that gave
 * it, e.g. "--allow-change") and a "did you mean" when one is close. */
int config_key_known(const char *key, const char *flag, tdm_err *e);

/* ------------------------------------------ the canonical form: what a run pins */

/* The canonical form: one entry per key, all keys (defaults included), sorted by key
 * (strcmp), value texts such that config_from_canonical gives back the same struct bit
 * for bit. `*out` is malloc'd; the caller frees it with free(). */
int config_canonical(const config *c, config_kv **out, size_t *n, tdm_err *e);

/* Rebuilds a config from a canonical form: every key exactly once, no unknown key, each
 * value valid, then config_check. No preset is applied (its values are all listed) and no
 * path is resolved (they were stored resolved). One exception to "every key": a missing
 * cluster.* key takes its default, so that runs pinned before the cluster section
 * existed still load (those keys never change what a run computes). `*c` is only
 * written on success. */
int config_from_canonical(config *c, const config_kv *kv, size_t n, tdm_err *e);

/* The keys whose canonical values differ between `a` and `b`, sorted. `*keys` is a
 * malloc'd array (NULL when *n == 0) of pointers to static strings: free(*keys) only. */
int config_diff(const config *a, const config *b, const char ***keys, size_t *n, tdm_err *e);

/* Whether a change of `key` on resume changes what the run computes (run_config.c refuses
 * those): false for the cluster.* and log.* sections and the keys flagged F_UNPINNED in
 * the schema (checkpoint.keep, checkpoint.grace_s, checkpoint.snapshot); true otherwise,
 * unknown keys included. */
/* The canonical text of `key`'s value in c (the shortest exact number, "true", the enum's
 * name, the string) into buf (CONFIG_STR_MAX holds any); -1 for an unknown key. */
int config_value_text(const config *c, const char *key, char *buf, size_t n);
/* Whether `key`'s value is a path (or scheme:path, as model.init's hf:DIR). */
bool config_key_path(const char *key);
/* Whether c's value of path key `key` came from the config file, relative there, and was
 * joined to the file's folder (a value from --set, a preset or an absolute one: false).
 * A Kubernetes Job runs the image's files, where the config's folder is not. */
bool config_path_joined(const config *c, const char *key);
/* The relative path inside `value` of path key `key` (after "hf:" for model.init), as the
 * loader would resolve it against the config's directory; NULL when the key takes no path
 * or the value is none (empty, absolute, a URL, model.init's random). */
const char *config_relative_path(const char *key, const char *value);
bool config_key_pinned(const char *key);
/* Whether `key` is part of a run's identity (run_config_identity): what it computes, not
 * where or how it runs, and no path. A younger key (config_key_before) counts only where
 * its value is not the one runs pinned before it computed with. */
bool config_key_identity(const char *key);
/* The value that runs pinned before `key` existed computed with, where the key is younger
 * than some pinned runs (a RUN may lack it; config_from_canonical gives it that value);
 * NULL for a key every RUN holds. */
const char *config_key_before(const char *key);

/* Whether only the α step reads `key` (flagged F_DMO_ONLY in the schema: tandem.alpha_cut,
 * tandem.overfit_cap, tandem.start_epochs, tandem.skip_pinned): a fixed run computes the
 * same bits whatever its value, so run_config.c lets a fixed run resume with it changed.
 * False for unknown keys. */
bool config_key_dmo_only(const char *key);

/* Whether errors never repeat the value of `key` (flagged F_NOECHO: store, cluster.env,
 * data.mixture_file, which may hold a pasted secret). False for unknown keys. */
bool config_key_noecho(const char *key);

/* ------------------------------------- the schema written out: help, docs, YAML */

/* The schema as plain-text help (for `tandem run --help`): every key with its type,
 * range, default and meaning, then the presets. */
void config_print_help(FILE *f);

/* The same as a Markdown table plus the presets, as pasted into docs/config.md. */
void config_print_markdown(FILE *f);

/* Writes `c` as a config file that config_load reads back to the same struct: `preset`
 * (so the struct records the same preset; the file's keys then restate its values),
 * then every section with every key (defaults included; floats exact, strings
 * double-quoted), without `store` (a run's location is given on the command line). Each line is preceded by `indent`, for embedding in
 * another YAML document. */
void config_print_yaml(FILE *f, const config *c, const char *indent);

#endif
