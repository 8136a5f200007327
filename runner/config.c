/* config.c — the schema table and everything derived from it (see config.h). */
#include "runner/config.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runner/cluster_check.h"
#include "runner/presets.h"
#include "util/ydoc.h"

/* ---------------------------------------------------------------------------------------
 * The schema
 * ------------------------------------------------------------------------------------- */

typedef enum { T_INT, T_U64, T_FLOAT, T_BOOL, T_ENUM, T_STRING } key_type;

enum {
    F_PATH = 1,   /* a path: relative values from a file resolve against its directory */
    F_NOECHO = 2, /* errors never repeat the value (it may hold a pasted secret) */
};

typedef struct key_def {
    const char *key;
    key_type type;
    size_t off;      /* of the field in struct config */
    const char *def; /* default as value text; NULL = required, no default */
    double lo, hi;   /* range of ints and floats; hi = INFINITY: unbounded */
    bool lo_open, hi_open;      /* floats: bound excluded */
    const char *const *names;   /* enum values, NULL-terminated, in enum order */
    unsigned flags;
    /* strings: the format check, or NULL for any text. Returns true when `s` is valid,
     * else false with `why` set to "expected ..." (never echoing a value that could be
     * a secret). */
    bool (*check)(const char *s, char *why, size_t n);
    const char *doc;
} key_def;

static const char *const preset_names[] = {"none",
                                           "data-abundant-160m",
                                           "data-restricted-160m",
                                           "data-restricted-410m",
                                           "data-restricted-1b",
                                           "sft-qwen2-0.5b",
                                           NULL};
static const char *const device_names[] = {"cpu", "cuda", NULL};
static const char *const precision_names[] = {"fp32", "bf16", NULL};
static const char *const mixing_names[] = {"weight", "sample", "auto", NULL};
static const char *const mixture_names[] = {"uniform", "natural", "file", NULL};
static const char *const mode_names[] = {"tandem", "fixed", NULL};
static const char *const snapshot_names[] = {"auto", "host", "stream", NULL};
static const char *const schedule_names[] = {"cosine", "constant", NULL};
static const char *const alpha_step_names[] = {"eg", "pgd", NULL};
static const char *const val_loss_names[] = {"sum", "mean", NULL};
static const char *const cloud_names[] = {"none", "gke", "eks", "aks", NULL};

#define COUNT_NAMES(a) (sizeof(a) / sizeof(a)[0] - 1)
_Static_assert(COUNT_NAMES(preset_names) == CONFIG_PRESET_COUNT, "preset names vs enum");
_Static_assert(COUNT_NAMES(device_names) == CONFIG_DEVICE_CUDA + 1, "device names vs enum");
_Static_assert(COUNT_NAMES(precision_names) == CONFIG_PRECISION_BF16 + 1, "precision names vs enum");
_Static_assert(COUNT_NAMES(mixing_names) == CONFIG_MIXING_AUTO + 1, "mixing names vs enum");
_Static_assert(COUNT_NAMES(mixture_names) == CONFIG_MIXTURE_FILE + 1, "mixture names vs enum");
_Static_assert(COUNT_NAMES(mode_names) == CONFIG_MODE_FIXED + 1, "mode names vs enum");
_Static_assert(COUNT_NAMES(schedule_names) == CONFIG_SCHEDULE_CONSTANT + 1, "schedule");
_Static_assert(COUNT_NAMES(alpha_step_names) == CONFIG_ALPHA_PGD + 1, "alpha step");
_Static_assert(COUNT_NAMES(val_loss_names) == CONFIG_VAL_MEAN + 1, "val loss");
_Static_assert(COUNT_NAMES(cloud_names) == CONFIG_CLOUD_AKS + 1, "cloud");

/* offsetof, plus a compile-time proof that the field has C type T: a row whose type tag
 * disagrees with its field would otherwise write an int over a double at run time. (The
 * operand of _Generic is not evaluated; a mismatch selects a negative array size.) */
#define FIELD(f, T)                                                                        \
    (offsetof(config, f) + 0 * sizeof(char[_Generic(((config *)0)->f, T: 1, default: -1)]))

#define INT(k, f, d, l, h, doc_)                                                           \
    {.key = k, .type = T_INT, .off = FIELD(f, int), .def = d, .lo = l, .hi = h, .doc = doc_}
#define U64(k, f, d, doc_)                                                                 \
    {.key = k, .type = T_U64, .off = FIELD(f, uint64_t), .def = d, .lo = 0,               \
     .hi = INFINITY, .doc = doc_}
#define FLT(k, f, d, l, lopen, h, hopen, doc_)                                             \
    {.key = k, .type = T_FLOAT, .off = FIELD(f, double), .def = d, .lo = l, .hi = h,      \
     .lo_open = lopen, .hi_open = hopen, .doc = doc_}
#define BOOL(k, f, d, doc_) {.key = k, .type = T_BOOL, .off = FIELD(f, bool), .def = d, .doc = doc_}
#define ENUM(k, f, d, nm, doc_)                                                            \
    {.key = k, .type = T_ENUM, .off = FIELD(f, int), .def = d, .names = nm, .doc = doc_}
#define STR(k, f, d, fl, doc_)                                                             \
    {.key = k, .type = T_STRING, .off = FIELD(f, char *), .def = d, .flags = fl, .doc = doc_}
#define STRC(k, f, d, fl, chk, doc_)                                                       \
    {.key = k, .type = T_STRING, .off = FIELD(f, char *), .def = d, .flags = fl,          \
     .check = chk, .doc = doc_}

/* In documentation order: section by section, as a config file is written. */
static const key_def schema[] = {
    ENUM("preset", preset, "none", preset_names,
         "named bundle of values applied before the file's keys (see Presets)"),
    INT("run.episodes", run.episodes, "20", 1, INT_MAX,
        "episodes T; each is sync, probe (K steps), alpha update, free (E steps)"),
    U64("run.seed", run.seed, "1", "seed of every counter-based random stream (init, data order)"),
    ENUM("run.mode", run.mode, "tandem", mode_names,
         "tandem: data-mixture optimisation; fixed: train with a fixed mixture (data.mixture), "
         "the paper's second stage"),
    ENUM("run.device", run.device, "cpu", device_names,
         "compute backend: cpu (OpenBLAS) or cuda (gpu/, builds made with nvcc)"),
    ENUM("run.precision", run.precision, "fp32", precision_names,
         "compute precision: fp32 everywhere, or bf16 matmul/attention inputs with fp32 "
         "master weights, optimiser state and accumulation (cuda only)"),
    INT("run.threads", run.threads, "0", 0, INT_MAX, "CPU threads; 0 = all cores"),
    STR("data.dataset", data.dataset, NULL, F_PATH,
        "dataset YAML (DESIGN.md §7); a relative path is relative to the config file"),
    ENUM("data.mixing", data.mixing, "auto", mixing_names,
         "weight: B/M sequences per domain, α-weighted loss; sample: each sequence's domain "
         "drawn ∝ α; auto: weight for run.mode=tandem, sample for fixed"),
    ENUM("data.mixture", data.mixture, "uniform", mixture_names,
         "α at episode 0 (tandem) or throughout (fixed): uniform, natural (∝ train tokens "
         "per domain), or file (data.mixture_file)"),
    STR("data.mixture_file", data.mixture_file, "", F_PATH,
        "used when data.mixture = file: a mixture YAML written by `tandem mixture`, or the store "
        "of a finished TANDEM run (its α*, mixture.mp); a relative path is relative to the "
        "config file"),
    INT("model.vocab", model.vocab, "0", 0, 65536, "vocabulary size; 0 = the dataset's"),
    INT("model.ctx", model.ctx, "64", 1, INT_MAX, "context length (learned positions)"),
    INT("model.layers", model.layers, "2", 1, INT_MAX, "transformer blocks"),
    INT("model.heads", model.heads, "2", 1, INT_MAX, "attention heads; must divide model.channels"),
    INT("model.channels", model.channels, "64", 1, INT_MAX, "model width C"),
    INT("train.batch", train.batch, "8", 1, 1 << 24,
        "sequences per step (mixing=weight: ⌊B/M⌋ per domain, one more for the first B mod M)"),
    INT("train.seq", train.seq, "64", 1, INT_MAX, "tokens per sequence; at most model.ctx"),
    INT("tandem.K", tandem.K, "5", 1, INT_MAX, "probe steps per episode"),
    INT("tandem.E", tandem.E, "5", 1, INT_MAX, "free steps per episode"),
    INT("tandem.val_batch", tandem.val_batch, "0", 0, 1 << 24,
        "validation sequences in each probe step of the w twin, at least one per domain "
        "(split as train.batch is); 0 = one per domain (keeps an episode at the paper's (E + 2K + 2/3)/E cost)"),
    FLT("tandem.gamma", tandem.gamma, "1.0", 0, false, INFINITY, false,
        "γ: weight of the α-weighted train loss in the w twin and in the α step"),
    FLT("tandem.lr_probe", tandem.lr_probe, "1e-2", 0, true, INFINITY, false,
        "η_K: SGD learning rate of both probe twins (constant)"),
    ENUM("tandem.alpha_step", tandem.alpha_step, "eg", alpha_step_names,
         "the α update: eg = exponentiated gradient with the loss differences normalised by "
         "their size and a step of alpha_budget / episodes (needs no tuning); pgd = Algorithm "
         "1's projected step α − η_α γ (ℓ_w − ℓ_u) with η_α = lr_alpha"),
    FLT("tandem.alpha_budget", tandem.alpha_budget, "2", 0, false, INFINITY, false,
        "c (alpha_step = eg): the most any α_m / α_j ratio can change, in log units, per unit "
        "of normalised evidence over the whole run"),
    FLT("tandem.lr_alpha", tandem.lr_alpha, "4e-3", 0, false, INFINITY, false,
        "η_α (alpha_step = pgd): step size of Algorithm 1's α update"),
    INT("tandem.eval_batches", tandem.eval_batches, "1", 1, 1024,
        "train batches (train.batch sequences each, the same rows per domain) on which the "
        "probe evaluates both twins for ℓ_w and ℓ_u; 1 keeps the paper's episode cost"),
    ENUM("tandem.val_loss", tandem.val_loss, "sum", val_loss_names,
         "L_val(w) in the w twin's objective: sum of the domains' validation losses (the "
         "paper's eq. 1) or their mean"),
    BOOL("tandem.probe_carry", tandem.probe_carry, "false",
         "free phase continues from the probe's u'_K instead of the synced u"),
    FLT("tandem.alpha_floor", tandem.alpha_floor, "0", 0, false, 1, true,
        "ε: lower bound of every α_m after the projection (needs ε·M < 1)"),
    FLT("optim.lr", optim.lr, "5e-4", 0, true, INFINITY, false,
        "η_E: AdamW peak learning rate of the free phase"),
    FLT("optim.lr_min", optim.lr_min, "0", 0, false, INFINITY, false,
        "final learning rate of the cosine schedule; at most optim.lr"),
    INT("optim.warmup", optim.warmup, "0", 0, INT_MAX, "free steps of linear warm-up"),
    ENUM("optim.schedule", optim.schedule, "cosine", schedule_names,
         "learning-rate schedule over the run's T·E free steps"),
    FLT("optim.weight_decay", optim.weight_decay, "1e-2", 0, false, INFINITY, false,
        "AdamW decoupled weight decay (2-D tensors only)"),
    FLT("optim.clip", optim.clip, "1.0", 0, false, INFINITY, false,
        "global gradient-norm clip; 0 = off"),
    FLT("optim.beta1", optim.beta1, "0.9", 0, false, 1, true, "AdamW β1"),
    FLT("optim.beta2", optim.beta2, "0.95", 0, false, 1, true, "AdamW β2"),
    FLT("optim.eps", optim.eps, "1e-8", 0, true, INFINITY, false, "AdamW ε"),
    INT("checkpoint.keep", checkpoint.keep, "3", 0, INT_MAX,
        "full states the writer keeps after each commit (the newest N, HEAD's, pinned ones and "
        "the blobs they need; α records always stay); 0 = keep all. Not pinned: change it any "
        "time"),
    FLT("checkpoint.grace_s", checkpoint.grace_s, "0", 0, false, INFINITY, false,
        "seconds from a stop signal to SIGKILL: on a signal a full state is committed only if "
        "the measured commit throughput says it fits, else the last one stands (the resume "
        "replays); 0 = the environment's TANDEM_GRACE_S (set by the rendered Slurm scripts and "
        "Kubernetes Jobs), or always commit when unknown. Not pinned"),
    INT("checkpoint.every_episodes", checkpoint.every_episodes, "5", 0, INT_MAX,
        "full state every N episodes; 0 = only on time, at the end or on a signal"),
    FLT("checkpoint.every_seconds", checkpoint.every_seconds, "0", 0, false, INFINITY, false,
        "full state at least every S seconds; 0 = off"),
    INT("checkpoint.chunk_kib", checkpoint.chunk_kib, "65536", 4, 65536,
        "tensor chunk size in the store, KiB (at most 64 MiB)"),
    ENUM("checkpoint.snapshot", checkpoint.snapshot, "auto", snapshot_names,
         "host = copy the state into host memory and write it in the background (the loop "
         "waits for the copy only); stream = write it chunk by chunk from the model's memory "
         "(no second copy in host memory; the loop waits for the write); auto = host when the "
         "copy fits in the memory available, else stream. Not pinned"),
    INT("cluster.nodes", cluster.nodes, "1", 1, 4096,
        "nodes of the job (Slurm --nodes; Kubernetes: 1 = a Job, more = an Indexed Job of that "
        "many pods and a headless Service)"),
    INT("cluster.tasks_per_node", cluster.tasks_per_node, "1", 1, 256,
        "ranks (tandem processes) per node for data parallelism (Slurm --ntasks-per-node; "
        "launched by srun --mpi=pmix when the job has more than one rank)"),
    INT("cluster.gpus_per_node", cluster.gpus_per_node, "0", 0, 64,
        "GPUs per node (Slurm --gres=gpu[:TYPE]:N, Kubernetes nvidia.com/gpu); 0 = a CPU job, no "
        "GPU directives"),
    STRC("cluster.gpu_type", cluster.gpu_type, "h100", 0, cluster_check_slurm_name,
         "GPU model: the Slurm gres type (\"\" = untyped) and, with cluster.cloud, the node "
         "labels selected (h100, h200, a100)"),
    INT("cluster.cpus_per_task", cluster.cpus_per_task, "0", 0, 4096,
        "CPU cores per node for tandem (Slurm --cpus-per-task, Kubernetes cpu request); 0 = the "
        "scheduler's default"),
    STRC("cluster.memory", cluster.memory, "", 0, cluster_check_size,
         "memory per node: 64G, 512M (binary units; Slurm --mem, Kubernetes request and limit "
         "64Gi); \"\" = the scheduler's default"),
    STRC("cluster.time_limit", cluster.time_limit, "", 0, cluster_check_slurm_time,
         "Slurm --time (MM, HH:MM:SS, D-HH:MM:SS), afresh after each requeue; \"\" = the "
         "partition's"),
    STRC("cluster.partition", cluster.partition, "", 0, cluster_check_slurm_list,
         "Slurm --partition; \"\" = the default partition"),
    STRC("cluster.account", cluster.account, "", 0, cluster_check_slurm_name,
         "Slurm --account; \"\" = the user's default"),
    STRC("cluster.job_name", cluster.job_name, "", 0, cluster_check_dns_label,
         "job name (Slurm --job-name, Kubernetes Job name: a DNS label); \"\" = from the config "
         "file's name"),
    STRC("cluster.workdir", cluster.workdir, "", F_PATH, cluster_check_path,
         "Slurm --chdir: where the job runs and writes its log (shared storage); \"\" = the "
         "directory tandem manifest runs in"),
    STRC("cluster.tandem_binary", cluster.tandem_binary, "", F_PATH, cluster_check_path,
         "tandem on the nodes; \"\" = Slurm: the absolute path of the tandem that renders; "
         "Kubernetes: /usr/local/bin/tandem (the image's)"),
    STRC("cluster.credentials_file", cluster.credentials_file, "", F_PATH, cluster_check_path,
         "Slurm: a file of AWS_* assignments (mode 600) that the batch script reads into "
         "tandem's environment; credentials never appear on a command line"),
    INT("cluster.signal_lead_s", cluster.signal_lead_s, "300", 1, 65535,
        "Slurm --signal=B:USR1@S: seconds before the time limit when the batch shell gets "
        "USR1, tandem commits and the job requeues itself"),
    STRC("cluster.image", cluster.image, "", 0, cluster_check_image,
         "Kubernetes: the container image (see Dockerfile); required by tandem manifest k8s"),
    ENUM("cluster.cloud", cluster.cloud, "none", cloud_names,
         "Kubernetes node labels and tolerations for cluster.gpu_type and spot capacity on GKE, "
         "EKS (managed node groups) or AKS; none = only cluster.node_selector and "
         "cluster.tolerations"),
    BOOL("cluster.spot", cluster.spot, "false",
         "Kubernetes: run on the spot (preemptible) nodes of cluster.cloud"),
    STRC("cluster.node_selector", cluster.node_selector, "", 0, cluster_check_labels,
         "extra Kubernetes node labels 'key=value,...'; they win over the cloud's"),
    STRC("cluster.tolerations", cluster.tolerations, "", 0, cluster_check_tolerations,
         "extra Kubernetes tolerations 'key[=value][:Effect],...' (no value: operator Exists; "
         "no effect: every effect)"),
    INT("cluster.grace_period_s", cluster.grace_period_s, "120", 0, 86400,
        "Kubernetes terminationGracePeriodSeconds, SIGTERM to SIGKILL: more than a commit takes "
        "(see docs/preemption.md)"),
    STRC("cluster.secret_name", cluster.secret_name, "", 0, cluster_check_dns_subdomain,
         "Kubernetes Secret with AWS credentials as the files credentials (and optionally "
         "config) of ~/.aws, mounted read-only for tandem"),
    INT("cluster.backoff_limit", cluster.backoff_limit, "3", 0, 1000000,
        "Kubernetes: failed pods (preemptions and exit 75 not counted) before the Job fails; per "
        "index when cluster.nodes > 1"),
    STRC("cluster.data_pvc", cluster.data_pvc, "", 0, cluster_check_dns_subdomain,
         "Kubernetes PersistentVolumeClaim with the corpus, mounted read-only at /data"),
    STRC("cluster.env", cluster.env, "", F_NOECHO, cluster_check_env,
         "extra environment of tandem 'NAME=value,...' (AWS_REGION, AWS_ENDPOINT_URL, "
         "TANDEM_S3_*); credentials are refused"),
    INT("cluster.coordinator_port", cluster.coordinator_port, "29500", 1, 65535,
        "cluster.nodes > 1: the port of rank 0 given to every rank as TANDEM_COORDINATOR"),
    STR("store", store, "", 0,
        "run store URL (file:///path or s3://bucket/prefix); empty = the runner decides"),
};
#define NKEYS (sizeof schema / sizeof schema[0])


/* ---------------------------------------------------------------------------------------
 * Schema helpers
 * ------------------------------------------------------------------------------------- */

static const key_def *find_key(const char *key) {
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(schema[i].key, key) == 0) return &schema[i];
    return NULL;
}

static void *field(config *c, const key_def *k) { return (char *)c + k->off; }
static const void *cfield(const config *c, const key_def *k) { return (const char *)c + k->off; }

/* Whether `name` is a section, i.e. the part before '.' of some key. */
static bool is_section(const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < NKEYS; i++)
        if (strncmp(schema[i].key, name, n) == 0 && schema[i].key[n] == '.') return true;
    return false;
}

/* Appends printf-style text to buf (of size n, holding a string); truncates silently,
 * which only shortens human-readable text. */
static void append(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t n, const char *fmt, ...) {
    size_t used = strlen(buf);
    if (used + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, n - used, fmt, ap);
    va_end(ap);
}

static void append_names(char *buf, size_t n, const char *const *names, const char *sep) {
    for (size_t i = 0; names[i]; i++) append(buf, n, "%s%s", i ? sep : "", names[i]);
}

/* A float bound as people write it ("0", "1", "1e-08" is never needed here). */
static void append_bound(char *buf, size_t n, double v) { append(buf, n, "%g", v); }

/* The allowed values in the notation of the docs: ">= 1", "0..65536", "> 0", "[0, 1)",
 * "cpu, cuda", "true, false", "" for strings. */
static void allowed_text(const key_def *k, char *buf, size_t n) {
    buf[0] = '\0';
    switch (k->type) {
    case T_INT:
    case T_U64:
        if (isinf(k->hi) || k->hi >= INT_MAX) append(buf, n, ">= %.0f", k->lo);
        else append(buf, n, "%.0f..%.0f", k->lo, k->hi);
        break;
    case T_FLOAT:
        if (isinf(k->hi)) {
            append(buf, n, "%s ", k->lo_open ? ">" : ">=");
            append_bound(buf, n, k->lo);
        } else {
            append(buf, n, "%s", k->lo_open ? "(" : "[");
            append_bound(buf, n, k->lo);
            append(buf, n, ", ");
            append_bound(buf, n, k->hi);
            append(buf, n, "%s", k->hi_open ? ")" : "]");
        }
        break;
    case T_BOOL: append(buf, n, "true, false"); break;
    case T_ENUM: append_names(buf, n, k->names, ", "); break;
    case T_STRING: break;
    }
}

/* What a valid value looks like, for "expected ..." in error messages. */
static void expected_text(const key_def *k, char *buf, size_t n) {
    char allowed[256];
    allowed_text(k, allowed, sizeof allowed);
    buf[0] = '\0';
    switch (k->type) {
    case T_INT:
    case T_U64:
        append(buf, n, "an integer %s%s", strchr(allowed, '.') ? "in " : "", allowed);
        break;
    case T_FLOAT:
        append(buf, n, "a finite number %s%s", allowed[0] == '[' || allowed[0] == '(' ? "in " : "",
               allowed);
        break;
    case T_BOOL: append(buf, n, "true or false"); break;
    case T_ENUM: append(buf, n, "one of: %s", allowed); break;
    case T_STRING: append(buf, n, "a string"); break;
    }
}

static const char *type_name(key_type t) {
    switch (t) {
    case T_INT:
    case T_U64: return "int";
    case T_FLOAT: return "float";
    case T_BOOL: return "bool";
    case T_ENUM: return "enum";
    case T_STRING: return "string";
    }
    return "?";
}

/* ---------------------------------------------------------------------------------------
 * Value text ↔ field
 * ------------------------------------------------------------------------------------- */

/* Plain decimal integer: [+-]?(0|[1-9][0-9]*). Returns 0 with sign and magnitude, -1 when
 * the text is not one, -2 when it is but exceeds 2^64-1, -3 for leading zeros (which
 * YAML 1.1 would read as octal, so a person might mean either). */
static int parse_int(const char *s, bool *neg, uint64_t *mag) {
    const char *p = s;
    *neg = false;
    if (*p == '+' || *p == '-') *neg = *p++ == '-';
    if (*p < '0' || *p > '9') return -1;
    const char *digits = p;
    uint64_t v = 0;
    bool over = false;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) over = true;
        else v = v * 10 + d;
    }
    if (*p) return -1;
    if (digits[0] == '0' && p - digits > 1) return -3;
    *mag = v;
    return over ? -2 : 0;
}

/* Decimal float syntax only: [+-]? digits [. digits] [e [+-] digits] (or .digits). This
 * shuts out what strtod would also take: inf, nan, hex floats, leading blanks. */
static bool float_syntax(const char *s) {
    const char *p = s;
    int digits = 0;
    if (*p == '+' || *p == '-') p++;
    while (*p >= '0' && *p <= '9') p++, digits++;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') p++, digits++;
    }
    if (!digits) return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (*p < '0' || *p > '9') return false;
        while (*p >= '0' && *p <= '9') p++;
    }
    return *p == '\0';
}

static bool looks_nonfinite(const char *s) {
    while (*s == '+' || *s == '-' || *s == '.') s++;
    return strcasecmp(s, "inf") == 0 || strcasecmp(s, "infinity") == 0 ||
           strcasecmp(s, "nan") == 0;
}

static bool float_in_range(const key_def *k, double v) {
    if (!isfinite(v)) return false;
    if (k->lo_open ? !(v > k->lo) : !(v >= k->lo)) return false;
    if (k->hi_open ? !(v < k->hi) : !(v <= k->hi)) return false;
    return true;
}

/* Parses `text` as a value of key `k` and stores it into `c`; `quoted` says the YAML
 * scalar was written in quotes (so it is a string, never a number or bool). On error
 * sets ERR_USAGE as "<where>: expected ..., got '...'" and leaves `c` unchanged. `where`
 * names the key and its origin ("file:line: tandem.K" or "--set tandem.K=x"). */
static int set_key(config *c, const key_def *k, const char *text, bool quoted,
                   const char *where, tdm_err *e) {
    char exp[320];
    expected_text(k, exp, sizeof exp);
    if (quoted && (k->type == T_INT || k->type == T_U64 || k->type == T_FLOAT ||
                   k->type == T_BOOL))
        return err_set(e, ERR_USAGE,
                       "%s: expected %s, got the quoted string \"%.200s\" (write it without "
                       "quotes)",
                       where, exp, text);
    switch (k->type) {
    case T_INT:
    case T_U64: {
        bool neg;
        uint64_t mag = 0;
        int r = parse_int(text, &neg, &mag);
        if (r == -1 || r == -3)
            return err_set(e, ERR_USAGE, "%s: expected %s, got '%.200s'%s", where, exp, text,
                           r == -3 ? " (no leading zeros: YAML may read them as octal)"
                                   : (float_syntax(text) ? " (a plain integer, no decimals or "
                                                           "exponent)"
                                                         : ""));
        /* which side of the range it missed: "too large" says more than "out of range" */
        bool big = r == -2 || (!neg && k->type == T_INT && (mag > INT_MAX || (long long)mag > k->hi));
        bool small = neg && mag != 0 &&
                     (k->type == T_U64 || mag > INT_MAX || -(long long)mag < k->lo);
        if (!big && !small && k->type == T_INT && !neg && (long long)mag < k->lo) small = true;
        if (big)
            return err_set(e, ERR_USAGE, "%s: %.200s is too large: expected %s (at most %llu)", where,
                           text, exp,
                           k->type == T_U64 ? (unsigned long long)UINT64_MAX : (unsigned long long)k->hi);
        if (small)
            return err_set(e, ERR_USAGE, "%s: %.200s is too small: expected %s", where, text, exp);
        long long v = neg ? -(long long)mag : (long long)mag;
        if (k->type == T_INT) *(int *)field(c, k) = (int)v;
        else *(uint64_t *)field(c, k) = mag;
        return 0;
    }
    case T_FLOAT: {
        if (!float_syntax(text))
            return err_set(e, ERR_USAGE, "%s: expected %s, got '%.200s'%s", where, exp, text,
                           looks_nonfinite(text) ? " (inf and nan are not allowed)" : "");
        errno = 0;
        char *end;
        double v = strtod(text, &end);
        if (*end)
            return err_set(e, ERR_USAGE, "%s: '%.200s' is not a number in the C locale", where,
                           text);
        if (errno == ERANGE && isinf(v)) /* underflow keeps the rounded value: 5e-324 is fine */
            return err_set(e, ERR_USAGE, "%s: %.200s is too large for a double: expected %s",
                           where, text, exp);
        if (!float_in_range(k, v))
            return err_set(e, ERR_USAGE, "%s: %.200s is out of range: expected %s", where, text,
                           exp);
        *(double *)field(c, k) = v;
        return 0;
    }
    case T_BOOL:
        if (strcmp(text, "true") && strcmp(text, "false"))
            return err_set(e, ERR_USAGE, "%s: expected %s, got '%.200s'", where, exp, text);
        *(bool *)field(c, k) = text[0] == 't';
        return 0;
    case T_ENUM:
        for (int i = 0; k->names[i]; i++)
            if (strcmp(text, k->names[i]) == 0) {
                *(int *)field(c, k) = i;
                return 0;
            }
        return err_set(e, ERR_USAGE, "%s: expected %s; got '%.200s'", where, exp, text);
    case T_STRING: {
        if (strlen(text) >= CONFIG_STR_MAX)
            return err_set(e, ERR_USAGE, "%s: longer than %d bytes", where, CONFIG_STR_MAX - 1);
        char why[512];
        if (k->check && !k->check(text, why, sizeof why))
            return err_set(e, ERR_USAGE, "%s: %s", where, why);
        memcpy(field(c, k), text, strlen(text) + 1);
        return 0;
    }
    }
    return err_set(e, ERR_INTERNAL, "%s: unknown key type", where);
}

/* The shortest of %.15g..%.17g that reads back to the same bits: exact, and "0.1" rather
 * than "0.10000000000000001" in a pinned config a person will read. */
static void format_double(double v, char *buf, size_t n) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        double back = strtod(buf, NULL);
        if (memcmp(&back, &v, sizeof v) == 0) return;
    }
}

/* The canonical value text of key `k` in `c` (n >= CONFIG_STR_MAX holds any value). */
static void format_value(const config *c, const key_def *k, char *buf, size_t n) {
    const void *f = cfield(c, k);
    switch (k->type) {
    case T_INT: snprintf(buf, n, "%d", *(const int *)f); return;
    case T_U64: snprintf(buf, n, "%" PRIu64, *(const uint64_t *)f); return;
    case T_FLOAT: format_double(*(const double *)f, buf, n); return;
    case T_BOOL: snprintf(buf, n, "%s", *(const bool *)f ? "true" : "false"); return;
    case T_ENUM: {
        int v = *(const int *)f;
        int count = 0;
        while (k->names[count]) count++;
        snprintf(buf, n, "%s", v >= 0 && v < count ? k->names[v] : "?");
        return;
    }
    case T_STRING: snprintf(buf, n, "%s", (const char *)f); return;
    }
}

/* Whether the field of `k` in `c` holds a value its parser could have produced; for
 * configs filled or changed by hand. */
static bool field_valid(const config *c, const key_def *k) {
    const void *f = cfield(c, k);
    switch (k->type) {
    case T_INT: {
        int v = *(const int *)f;
        return v >= k->lo && v <= k->hi;
    }
    case T_U64: return true;
    case T_FLOAT: return float_in_range(k, *(const double *)f);
    case T_BOOL: return true;
    case T_ENUM: {
        int v = *(const int *)f, count = 0;
        while (k->names[count]) count++;
        return v >= 0 && v < count;
    }
    case T_STRING: {
        char why[512];
        return memchr(f, '\0', CONFIG_STR_MAX) != NULL &&
               (!k->check || k->check((const char *)f, why, sizeof why));
    }
    }
    return false;
}

/* ---------------------------------------------------------------------------------------
 * Unknown keys: suggestions
 * ------------------------------------------------------------------------------------- */

static int tolower_ascii(int ch) { return ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch; }

/* Optimal-string-alignment distance, case-insensitive (a swapped pair of letters counts
 * once: "lr_porbe" is one typo away from "lr_probe"). Long names are cut at 63 bytes. */
static int edit_distance(const char *a, const char *b) {
    enum { M = 64 };
    size_t la = strnlen(a, M - 1), lb = strnlen(b, M - 1);
    int d[M][M];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int ca = tolower_ascii(a[i - 1]), cb = tolower_ascii(b[j - 1]);
            int best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower_ascii(b[j - 2]) && tolower_ascii(a[i - 2]) == cb &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* " (did you mean 'X'?)" for an unknown `name`, or "" when nothing is close. Candidates
 * are the full keys, or with `top` the names allowed at the top of a file (sections and
 * undotted keys). Close means at most 2 edits (case ignored), or else the same last
 * component in another section ("model.lr" → "optim.lr", "episodes" → "run.episodes"). */
static void suggestion(const char *name, bool top, char *buf, size_t n) {
    const char *best = NULL;
    size_t best_len = 0;
    int best_d = 3;
    for (size_t i = 0; i < NKEYS; i++) {
        const char *cand = schema[i].key;
        size_t len = strlen(cand);
        if (top) {
            const char *dot = strchr(cand, '.');
            if (dot) len = (size_t)(dot - cand);
        }
        char tmp[CONFIG_KEY_MAX];
        snprintf(tmp, sizeof tmp, "%.*s", (int)len, cand);
        int d = edit_distance(name, tmp);
        if (d < best_d && (size_t)d < len) best = cand, best_len = len, best_d = d;
    }
    if (!best) {
        const char *leaf = strrchr(name, '.');
        leaf = leaf ? leaf + 1 : name;
        for (size_t i = 0; i < NKEYS && !best; i++) {
            const char *kl = strrchr(schema[i].key, '.');
            kl = kl ? kl + 1 : schema[i].key;
            if (strcasecmp(kl, leaf) == 0 && strcmp(schema[i].key, name) != 0)
                best = schema[i].key, best_len = strlen(best);
        }
    }
    if (best) snprintf(buf, n, " (did you mean '%.*s'?)", (int)best_len, best);
    else buf[0] = '\0';
}

/* "run, data, ..., checkpoint" — the sections in schema order. */
static void section_list(char *buf, size_t n) {
    buf[0] = '\0';
    const char *prev = NULL;
    size_t prev_len = 0;
    for (size_t i = 0; i < NKEYS; i++) {
        const char *dot = strchr(schema[i].key, '.');
        if (!dot) continue;
        size_t len = (size_t)(dot - schema[i].key);
        if (prev && len == prev_len && strncmp(prev, schema[i].key, len) == 0) continue;
        append(buf, n, "%s%.*s", prev ? ", " : "", (int)len, schema[i].key);
        prev = schema[i].key, prev_len = len;
    }
}

/* "K, E, gamma, ..." — the keys of one section, without the section prefix. */
static void section_keys(const char *section, char *buf, size_t n) {
    size_t len = strlen(section);
    buf[0] = '\0';
    for (size_t i = 0; i < NKEYS; i++)
        if (strncmp(schema[i].key, section, len) == 0 && schema[i].key[len] == '.')
            append(buf, n, "%s%s", buf[0] ? ", " : "", schema[i].key + len + 1);
}

/* ---------------------------------------------------------------------------------------
 * Layering
 * ------------------------------------------------------------------------------------- */

/* Where a key's value came from, so that a cross-field error can name both culprits. */
typedef enum { O_DEFAULT, O_PRESET, O_FILE, O_SET } origin_kind;
typedef struct origin {
    origin_kind kind;
    int line; /* O_FILE */
} origin;

void config_defaults(config *c) {
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NKEYS; i++) {
        if (!schema[i].def) continue; /* required: stays "" */
        tdm_err e;
        /* The defaults are literals of this file and the tests load them; failing here
         * is a schema bug that must not turn into a silently zero hyper-parameter. */
        if (set_key(c, &schema[i], schema[i].def, false, schema[i].key, &e)) {
            fprintf(stderr, "tandem: bad built-in default: %s\n", e.msg);
            abort();
        }
    }
}

/* Applies preset `p` over `c`; records O_PRESET in `from` when given. A failure is a bug
 * in the preset table (ERR_INTERNAL). */
/* Presets: the YAML files of configs/presets/ (runner/presets.h), applied key by key
 * through the same parser as --set. preset_names[] holds the enum's order; the files are
 * found by name. */
static const config_preset_src *preset_src(int p) {
    for (const config_preset_src *s = config_preset_srcs; p > 0 && s->name; s++)
        if (strcmp(s->name, preset_names[p]) == 0) return s;
    return NULL; /* "none", or a name without a file (test_config catches that) */
}

/* Calls fn(key, value text, quoted, arg) for every "section: {key: value}" of preset p, in
 * the file's order; stops at the first nonzero return. A preset file that is not such a
 * map is ERR_INTERNAL (it is part of the build). */
static int preset_each(int p, int (*fn)(const key_def *k, const ydoc_node *v, void *arg),
                       void *arg, tdm_err *e) {
    const config_preset_src *src = preset_src(p);
    if (!src) return 0;
    char name[96];
    snprintf(name, sizeof name, "preset %s", preset_names[p]);
    ydoc_node *root = ydoc_parse(src->text, src->len, name, e);
    if (!root) return e->code = ERR_INTERNAL;
    int rc = root->kind == YDOC_MAP ? 0 : err_set(e, ERR_INTERNAL, "%s: not a map of sections", name);
    for (size_t i = 0; !rc && i < root->n; i++) {
        const ydoc_node *sec = root->items[i];
        if (sec->kind != YDOC_MAP)
            rc = err_set(e, ERR_INTERNAL, "%s:%d: '%s' is not a section", name, sec->line, root->keys[i]);
        for (size_t j = 0; !rc && j < sec->n; j++) {
            char full[2 * CONFIG_KEY_MAX + 2];
            snprintf(full, sizeof full, "%.*s.%.*s", CONFIG_KEY_MAX, root->keys[i], CONFIG_KEY_MAX,
                     sec->keys[j]);
            const key_def *k = find_key(full);
            if (!k || sec->items[j]->kind != YDOC_SCALAR)
                rc = err_set(e, ERR_INTERNAL, "%s:%d: '%s' is not a key with a value", name,
                             sec->items[j]->line, full);
            else
                rc = fn(k, sec->items[j], arg);
        }
    }
    ydoc_free(root);
    return rc;
}

typedef struct preset_apply {
    config *c;
    int p;
    origin *from;
    tdm_err *e;
} preset_apply;

static int apply_one(const key_def *k, const ydoc_node *v, void *arg) {
    preset_apply *a = arg;
    char where[128];
    snprintf(where, sizeof where, "preset %s: %s", preset_names[a->p], k->key);
    if (set_key(a->c, k, v->value, v->quoted != 0, where, a->e)) return a->e->code = ERR_INTERNAL;
    if (a->from) a->from[k - schema] = (origin){O_PRESET, 0};
    return 0;
}

static int apply_preset(config *c, int p, origin *from, tdm_err *e) {
    preset_apply a = {c, p, from, e};
    return preset_each(p, apply_one, &a, e);
}

/* " (from file:line)" and the like, for naming both keys of a cross-field error. */
static void origin_text(const origin *o, const config *c, const char *path, char *buf,
                        size_t n) {
    switch (o->kind) {
    case O_DEFAULT: snprintf(buf, n, " (default)"); break;
    case O_PRESET: snprintf(buf, n, " (from preset %s)", preset_names[c->preset]); break;
    case O_FILE: snprintf(buf, n, " (from %s:%d)", path ? path : "?", o->line); break;
    case O_SET: snprintf(buf, n, " (from --set)"); break;
    }
}

/* config_check, naming where each offending value came from when `from` is given (the
 * loader), and the file in the "required" message when `path` is. */
static int check_all(const config *c, const origin *from, const char *path, tdm_err *e) {
    char va[64], vb[64], oa[CONFIG_STR_MAX / 4] = "", ob[CONFIG_STR_MAX / 4] = "";
    for (size_t i = 0; i < NKEYS; i++)
        if (!field_valid(c, &schema[i])) {
            char why[512];
            if (schema[i].type == T_STRING && schema[i].check &&
                memchr(cfield(c, &schema[i]), '\0', CONFIG_STR_MAX))
                return err_set(e, ERR_USAGE, "%s: %s", schema[i].key,
                               (schema[i].check((const char *)cfield(c, &schema[i]), why,
                                                sizeof why),
                                why));
            char exp[320];
            expected_text(&schema[i], exp, sizeof exp);
            format_value(c, &schema[i], va, sizeof va);
            return err_set(e, ERR_USAGE, "%s = %s is out of range: expected %s", schema[i].key,
                           va, exp);
        }
    const key_def *ka, *kb;
#define ORIGINS(a, b)                                                                      \
    do {                                                                                   \
        ka = find_key(a), kb = find_key(b);                                                \
        if (from) {                                                                        \
            origin_text(&from[ka - schema], c, path, oa, sizeof oa);                       \
            origin_text(&from[kb - schema], c, path, ob, sizeof ob);                       \
        }                                                                                  \
        format_value(c, ka, va, sizeof va);                                                \
        format_value(c, kb, vb, sizeof vb);                                                \
    } while (0)
    if (!c->data.dataset[0]) {
        if (path)
            return err_set(e, ERR_USAGE,
                           "%s: data.dataset is required: the dataset YAML to train on (add "
                           "'dataset: PATH' under 'data:', or --set data.dataset=PATH)",
                           path);
        return err_set(e, ERR_USAGE,
                       "data.dataset is required: the dataset YAML to train on (give a config "
                       "file or --set data.dataset=PATH)");
    }
    if (c->data.mixture == CONFIG_MIXTURE_FILE && !c->data.mixture_file[0])
        return err_set(e, ERR_USAGE,
                       "data.mixture = file needs data.mixture_file: the YAML that `tandem "
                       "mixture STORE --out FILE` writes");
    if (c->model.channels % c->model.heads) {
        ORIGINS("model.channels", "model.heads");
        return err_set(e, ERR_USAGE,
                       "model.channels = %s%s is not a multiple of model.heads = %s%s: each "
                       "head gets channels/heads dimensions",
                       va, oa, vb, ob);
    }
    if (c->train.seq > c->model.ctx) {
        ORIGINS("train.seq", "model.ctx");
        return err_set(e, ERR_USAGE,
                       "train.seq = %s%s exceeds model.ctx = %s%s: a sequence must fit the "
                       "model's positions (lower train.seq or raise model.ctx)",
                       va, oa, vb, ob);
    }
    if (c->optim.lr_min > c->optim.lr) {
        ORIGINS("optim.lr_min", "optim.lr");
        return err_set(e, ERR_USAGE,
                       "optim.lr_min = %s%s exceeds optim.lr = %s%s: the schedule decays "
                       "from optim.lr down to optim.lr_min",
                       va, oa, vb, ob);
    }
    if (c->run.precision == CONFIG_PRECISION_BF16 && c->run.device != CONFIG_DEVICE_CUDA) {
        ORIGINS("run.precision", "run.device");
        return err_set(e, ERR_USAGE,
                       "run.precision = %s%s needs run.device = cuda (run.device = %s%s): the "
                       "CPU backend computes in fp32 only",
                       va, oa, vb, ob);
    }
#undef ORIGINS
    return 0;
}

int config_check(const config *c, tdm_err *e) {
    tdm_err local;
    return check_all(c, NULL, NULL, e ? e : &local);
}

typedef struct loader {
    config c;
    origin from[NKEYS];
    const char *path; /* the config file, or NULL */
} loader;

static const char *kind_name(ydoc_kind k) {
    return k == YDOC_MAP ? "a map" : k == YDOC_SEQ ? "a sequence" : "a scalar";
}

/* An unquoted empty, ~ or null: YAML's "no value", which for us is always a mistake
 * (a commented-out value), except as an empty section. */
static bool plain_null(const ydoc_node *v) {
    return v->kind == YDOC_SCALAR && !v->quoted &&
           (!v->value[0] || strcmp(v->value, "~") == 0 || strcasecmp(v->value, "null") == 0);
}

/* Sets key `k` from the YAML node `v` of the loader's file (`line`: where to point the
 * reader), resolving a relative path against the file's directory. */
static int file_key(loader *L, const key_def *k, const ydoc_node *v, int line, tdm_err *e) {
    char where[CONFIG_STR_MAX + 128];
    snprintf(where, sizeof where, "%s:%d: %s", L->path, line, k->key);
    if (v->kind != YDOC_SCALAR) {
        char exp[320];
        expected_text(k, exp, sizeof exp);
        return err_set(e, ERR_USAGE, "%s: expected %s, got %s", where, exp, kind_name(v->kind));
    }
    if (plain_null(v))
        return err_set(e, ERR_USAGE,
                       "%s: has no value; give one, or delete the line to get the default%s%s%s",
                       where, k->def ? " (" : "", k->def ? k->def : "", k->def ? ")" : "");
    const char *text = v->value;
    char resolved[CONFIG_STR_MAX];
    const char *slash = strrchr(L->path, '/');
    /* a URL (s3://..., file://...) is not relative to anything */
    if ((k->flags & F_PATH) && text[0] && text[0] != '/' && slash && !strstr(text, "://")) {
        /* Lexical join, no realpath: the file need not exist yet, and "..": through a
         * symlinked directory must mean what the shell would make of it. */
        int dirlen = (int)(slash - L->path) + 1; /* keeps the '/' (also for "/x.yaml") */
        int len = snprintf(resolved, sizeof resolved, "%.*s%s", dirlen, L->path, text);
        if (len < 0 || (size_t)len >= sizeof resolved)
            return err_set(e, ERR_USAGE,
                           "%s: the path resolved against %.*s is longer than %d bytes", where,
                           dirlen, L->path, CONFIG_STR_MAX - 1);
        text = resolved;
    }
    if (set_key(&L->c, k, text, v->quoted, where, e)) return e->code;
    L->from[k - schema] = (origin){O_FILE, line};
    return 0;
}

/* The line of top-level key `name`. ydoc gives a block map or sequence the line of its
 * first entry, one or more lines below the key a person must fix; so on this error path
 * the file is scanned for "name:" at column 0. Falls back to the value's line. */
static int top_key_line(const loader *L, const char *name, const ydoc_node *v) {
    if (v->kind == YDOC_SCALAR) return v->line;
    FILE *f = fopen(L->path, "r");
    if (!f) return v->line;
    char *buf = NULL;
    size_t cap = 0, len = strlen(name);
    int lineno = 0, found = 0;
    while (!found && getline(&buf, &cap, f) > 0) {
        lineno++;
        if (strncmp(buf, name, len)) continue;
        const char *p = buf + len;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == ':') found = lineno;
    }
    free(buf);
    fclose(f);
    return found ? found : v->line;
}

/* Applies every key of the file except `preset` (already applied, as a lower layer). */
static int apply_file(loader *L, const ydoc_node *root, tdm_err *e) {
    char list[512], sugg[128];
    if (root->kind != YDOC_MAP)
        return err_set(e, ERR_USAGE,
                       "%s:%d: expected a map of sections at the top (e.g. 'tandem:' with "
                       "indented keys below), got %s",
                       L->path, root->line, kind_name(root->kind));
    for (size_t i = 0; i < root->n; i++) {
        const char *name = root->keys[i];
        const ydoc_node *v = root->items[i];
        const key_def *k = find_key(name);
        if (k && strcmp(name, "preset") == 0) continue;
        if (k && !strchr(name, '.')) {
            if (file_key(L, k, v, top_key_line(L, name, v), e)) return e->code;
            continue;
        }
        if (k) /* "tandem.K: 5" at the top: one spelling per key keeps files greppable */
            return err_set(e, ERR_USAGE,
                           "%s:%d: '%s': keys are nested in YAML files: write '%.*s:' and "
                           "below it '  %s: %s'",
                           L->path, top_key_line(L, name, v), name,
                           (int)(strchr(name, '.') - name), name,
                           strchr(name, '.') + 1, v->kind == YDOC_SCALAR ? v->value : "...");
        if (!is_section(name)) {
            suggestion(name, true, sugg, sizeof sugg);
            section_list(list, sizeof list);
            return err_set(e, ERR_USAGE,
                           "%s:%d: unknown key '%s'%s; the top level holds the sections %s "
                           "and the keys preset, store",
                           L->path, top_key_line(L, name, v), name, sugg, list);
        }
        if (plain_null(v)) continue; /* a section with every key commented out */
        if (v->kind != YDOC_MAP)
            return err_set(e, ERR_USAGE,
                           "%s:%d: '%s' is a section: expected a map of its keys (%s: then "
                           "indented 'KEY: value' lines), got %s",
                           L->path, top_key_line(L, name, v), name, name, kind_name(v->kind));
        for (size_t j = 0; j < v->n; j++) {
            char full[2 * CONFIG_KEY_MAX + 2];
            snprintf(full, sizeof full, "%.*s.%.*s", CONFIG_KEY_MAX, name, CONFIG_KEY_MAX,
                     v->keys[j]);
            const key_def *sk = find_key(full);
            if (!sk) {
                suggestion(full, false, sugg, sizeof sugg);
                section_keys(name, list, sizeof list);
                return err_set(e, ERR_USAGE, "%s:%d: unknown key '%s'%s; the keys of '%s' are %s",
                               L->path, v->items[j]->line, full, sugg, name, list);
            }
            if (file_key(L, sk, v->items[j], v->items[j]->line, e)) return e->code;
        }
    }
    return 0;
}

/* One parsed "--set key=value". */
typedef struct set_item {
    const key_def *k;
    const char *value;
    const char *text; /* the whole "key=value" */
} set_item;

static int unknown_set_key(const char *key, const char *text, tdm_err *e) {
    char sugg[128];
    suggestion(key, false, sugg, sizeof sugg);
    return err_set(e, ERR_USAGE,
                   "--set %.200s: unknown key '%.100s'%s; keys are section.key (see tandem run "
                   "--help)",
                   text, key, sugg);
}

/* Splits "key=value" at the first '=' (values may contain '=') and finds the key. */
static int split_set(const char *text, set_item *it, tdm_err *e) {
    const char *eq = strchr(text, '=');
    if (!eq || eq == text)
        return err_set(e, ERR_USAGE, "--set '%.200s': expected key=value (e.g. --set tandem.K=3)",
                       text);
    char key[2 * CONFIG_KEY_MAX];
    snprintf(key, sizeof key, "%.*s", (int)(eq - text), text);
    it->k = find_key(key);
    it->value = eq + 1;
    it->text = text;
    if (!it->k) return unknown_set_key(key, text, e);
    return 0;
}

static int set_from_cli(config *c, const set_item *it, tdm_err *e) {
    char where[256];
    if (it->k->flags & F_NOECHO) snprintf(where, sizeof where, "--set %s=...", it->k->key);
    else snprintf(where, sizeof where, "--set %.200s", it->text);
    return set_key(c, it->k, it->value, false, where, e);
}

int config_load(config *out, const char *path, char *const *sets, int nsets, tdm_err *e) {
    tdm_err local;
    if (!e) e = &local;
    err_clear(e);
    int rc = 0;
    ydoc_node *root = NULL;
    set_item *items = NULL;
    loader *L = calloc(1, sizeof *L);
    if (!L || (nsets > 0 && !(items = calloc((size_t)nsets, sizeof *items)))) {
        rc = err_set(e, ERR_INTERNAL, "out of memory loading the config");
        goto done;
    }
    config_defaults(&L->c);
    L->path = path;
    for (int i = 0; i < nsets; i++)
        if ((rc = split_set(sets[i], &items[i], e))) goto done;
    if (path && !(root = ydoc_parse_file(path, e))) {
        rc = e->code ? e->code : ERR_USAGE;
        goto done;
    }
    /* The preset layer: the file's preset, then the last --set preset wins. */
    const key_def *pk = find_key("preset");
    const ydoc_node *pv = root ? ydoc_get(root, "preset") : NULL;
    if (pv && (rc = file_key(L, pk, pv, top_key_line(L, "preset", pv), e))) goto done;
    for (int i = 0; i < nsets; i++)
        if (items[i].k == pk) {
            if ((rc = set_from_cli(&L->c, &items[i], e))) goto done;
            L->from[pk - schema] = (origin){O_SET, 0};
        }
    if ((rc = apply_preset(&L->c, L->c.preset, L->from, e))) goto done;
    if (root && (rc = apply_file(L, root, e))) goto done;
    for (int i = 0; i < nsets; i++) {
        if (items[i].k == pk) continue;
        if ((rc = set_from_cli(&L->c, &items[i], e))) goto done;
        L->from[items[i].k - schema] = (origin){O_SET, 0};
    }
    if ((rc = check_all(&L->c, L->from, path, e))) goto done;
    *out = L->c;
done:
    ydoc_free(root);
    free(items);
    free(L);
    return rc;
}

int config_set(config *c, const char *key, const char *value, tdm_err *e) {
    tdm_err local;
    if (!e) e = &local;
    char text[256];
    snprintf(text, sizeof text, "%.100s=%.150s", key, value);
    set_item it = {.k = find_key(key), .value = value, .text = text};
    if (!it.k) return unknown_set_key(key, text, e);
    config *tmp = malloc(sizeof *tmp);
    if (!tmp) return err_set(e, ERR_INTERNAL, "out of memory");
    *tmp = *c;
    int rc = set_from_cli(tmp, &it, e);
    if (!rc && strcmp(key, "preset") == 0) rc = apply_preset(tmp, tmp->preset, NULL, e);
    if (!rc) *c = *tmp;
    free(tmp);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Canonical form and diff
 * ------------------------------------------------------------------------------------- */

static int cmp_key(const void *a, const void *b) {
    return strcmp((*(const key_def *const *)a)->key, (*(const key_def *const *)b)->key);
}

/* The schema rows sorted by key name: the order of the canonical form. */
static void sorted_keys(const key_def *order[NKEYS]) {
    for (size_t i = 0; i < NKEYS; i++) order[i] = &schema[i];
    qsort(order, NKEYS, sizeof order[0], cmp_key);
}

int config_canonical(const config *c, config_kv **out, size_t *n, tdm_err *e) {
    tdm_err local;
    if (!e) e = &local;
    *out = NULL;
    *n = 0;
    const key_def *order[NKEYS];
    sorted_keys(order);
    /* A field no parser could have produced would be pinned as text that does not load
     * back; refuse rather than store it. */
    for (size_t i = 0; i < NKEYS; i++)
        if (!field_valid(c, order[i])) return check_all(c, NULL, NULL, e);
    config_kv *kv = calloc(NKEYS, sizeof *kv);
    if (!kv) return err_set(e, ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < NKEYS; i++) {
        snprintf(kv[i].key, sizeof kv[i].key, "%s", order[i]->key);
        format_value(c, order[i], kv[i].value, sizeof kv[i].value);
    }
    *out = kv;
    *n = NKEYS;
    return 0;
}

int config_from_canonical(config *c, const config_kv *kv, size_t n, tdm_err *e) {
    tdm_err local;
    if (!e) e = &local;
    config *tmp = malloc(sizeof *tmp);
    if (!tmp) return err_set(e, ERR_INTERNAL, "out of memory");
    config_defaults(tmp);
    bool seen[NKEYS] = {false};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const key_def *k = NULL;
        if (memchr(kv[i].key, '\0', sizeof kv[i].key)) k = find_key(kv[i].key);
        if (!k) {
            rc = err_set(e, ERR_USAGE, "canonical config: unknown key '%.*s'",
                         (int)sizeof kv[i].key, kv[i].key);
        } else if (seen[k - schema]) {
            rc = err_set(e, ERR_USAGE, "canonical config: key '%s' appears twice", k->key);
        } else if (!memchr(kv[i].value, '\0', sizeof kv[i].value)) {
            rc = err_set(e, ERR_USAGE, "canonical config: the value of '%s' is not terminated",
                         k->key);
        } else {
            char where[128];
            snprintf(where, sizeof where, "canonical config: %s", k->key);
            rc = set_key(tmp, k, kv[i].value, false, where, e);
            seen[k - schema] = true;
        }
    }
    /* cluster.* keys are younger than some pinned runs and never change what a run
     * computes: a missing one keeps its default (config_defaults above). Younger keys
     * that do change it take the value that runs pinned before them computed with. */
    static const struct {
        const char *key, *value;
    } before_key[] = {
        {"tandem.alpha_step", "pgd"}, {"tandem.alpha_budget", "2"}, {"tandem.val_loss", "sum"},
        {"tandem.eval_batches", "1"}, {"checkpoint.keep", "0"},
        {"checkpoint.grace_s", "0"}, {"checkpoint.snapshot", "auto"}};
    for (size_t i = 0; i < NKEYS && !rc; i++) {
        if (seen[i] || strncmp(schema[i].key, "cluster.", 8) == 0) continue;
        const char *old = NULL;
        for (size_t j = 0; j < sizeof before_key / sizeof *before_key; j++)
            if (strcmp(before_key[j].key, schema[i].key) == 0) old = before_key[j].value;
        if (old) rc = set_key(tmp, &schema[i], old, false, "canonical config", e);
        else rc = err_set(e, ERR_USAGE, "canonical config: key '%s' is missing", schema[i].key);
    }
    if (!rc) rc = check_all(tmp, NULL, NULL, e);
    if (!rc) *c = *tmp;
    free(tmp);
    return rc;
}

int config_diff(const config *a, const config *b, const char ***keys, size_t *n, tdm_err *e) {
    tdm_err local;
    if (!e) e = &local;
    *keys = NULL;
    *n = 0;
    const key_def *order[NKEYS];
    sorted_keys(order);
    const char **out = malloc(NKEYS * sizeof *out);
    char *va = malloc(2 * CONFIG_STR_MAX);
    if (!out || !va) {
        free(out);
        free(va);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    char *vb = va + CONFIG_STR_MAX;
    size_t m = 0;
    for (size_t i = 0; i < NKEYS; i++) {
        /* Compare as canonical text: exactly what a pinned config would show, and bitwise
         * for floats (-0 differs from 0, as it may in a computation). */
        format_value(a, order[i], va, CONFIG_STR_MAX);
        format_value(b, order[i], vb, CONFIG_STR_MAX);
        if (strcmp(va, vb)) out[m++] = order[i]->key;
    }
    free(va);
    if (!m) {
        free(out);
        return 0;
    }
    *keys = out;
    *n = m;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Documentation
 * ------------------------------------------------------------------------------------- */

/* Prints the words of `text` after `indent` spaces, wrapped before column `width`. */
static void print_wrapped(FILE *f, const char *text, int indent, int width) {
    int col = 0;
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        const char *w = p;
        while (*p && *p != ' ') p++;
        int len = (int)(p - w);
        if (!len) break;
        if (col && col + 1 + len > width) {
            fputc('\n', f);
            col = 0;
        }
        if (!col) col = fprintf(f, "%*s%.*s", indent, "", len, w);
        else col += fprintf(f, " %.*s", len, w);
    }
    if (col) fputc('\n', f);
}

/* A preset's assignments on one line, as a person would pass them to --set. */
typedef struct preset_text {
    char *buf;
    size_t n;
} preset_text;

static int text_one(const key_def *k, const ydoc_node *v, void *arg) {
    preset_text *t = arg;
    append(t->buf, t->n, "%s%s=%s", t->buf[0] ? " " : "", k->key, v->value);
    return 0;
}

/* Preset p's values as "key=value key=value ..." (for --help and docs/config.md). */
static void preset_line(int p, char *buf, size_t n) {
    buf[0] = '\0';
    preset_text t = {buf, n};
    tdm_err ignore;
    preset_each(p, text_one, &t, &ignore);
}

/* Preset p's one line of documentation. */
static const char *preset_doc(int p) {
    const config_preset_src *src = preset_src(p);
    return src ? src->doc : "built-in defaults only";
}

void config_print_help(FILE *f) {
    char allowed[512], line[2048];
    fprintf(f, "Configuration keys. In the YAML file each section is a map ('tandem:' then\n"
               "indented 'K: 5'); on the command line --set section.key=value. Later wins:\n"
               "defaults < preset < config file < --set (in order).\n\n");
    for (size_t i = 0; i < NKEYS; i++) {
        const key_def *k = &schema[i];
        allowed_text(k, allowed, sizeof allowed);
        char head[128];
        if (!k->def) snprintf(head, sizeof head, "%s (required)", k->key);
        else snprintf(head, sizeof head, "%s = %s", k->key, k->def[0] ? k->def : "\"\"");
        snprintf(line, sizeof line, "%s%s%s", type_name(k->type),
                 k->type == T_ENUM ? " one of: " : allowed[0] ? " " : "", allowed);
        if (strlen(head) + strlen(line) < 84) {
            fprintf(f, "  %-34s %s\n", head, line);
        } else { /* long enum lists wrap below the key */
            fprintf(f, "  %s\n", head);
            print_wrapped(f, line, 6, 88);
        }
        print_wrapped(f, k->doc, 6, 88);
    }
    fprintf(f, "\nPresets (applied after the defaults, before the file's keys; which values\n"
               "are assumptions is said in docs/config.md):\n");
    for (int p = 1; p < CONFIG_PRESET_COUNT; p++) {
        fprintf(f, "  %s: %s\n", preset_names[p], preset_doc(p));
        preset_line(p, line, sizeof line);
        print_wrapped(f, line, 6, 88);
    }
}

void config_print_markdown(FILE *f) {
    char allowed[512], line[2048];
    fprintf(f, "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < NKEYS; i++) {
        const key_def *k = &schema[i];
        allowed_text(k, allowed, sizeof allowed);
        fprintf(f, "| `%s` | %s | %s%s%s | %s | %s |\n", k->key, type_name(k->type),
                k->def ? "`" : "*required*", k->def ? (k->def[0] ? k->def : "\"\"") : "",
                k->def ? "`" : "", allowed, k->doc);
    }
    fprintf(f, "\n| preset | what | values |\n|---|---|---|\n");
    for (int p = 1; p < CONFIG_PRESET_COUNT; p++) {
        preset_line(p, line, sizeof line);
        fprintf(f, "| `%s` | %s | `%s` |\n", preset_names[p], preset_doc(p), line);
    }
}

/* A double-quoted YAML scalar (JSON escapes, which YAML reads the same way). */
static void print_quoted(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

void config_print_yaml(FILE *f, const config *c, const char *indent) {
    char value[CONFIG_STR_MAX];
    const char *section = NULL;
    size_t section_len = 0;
    for (size_t i = 0; i < NKEYS; i++) {
        const key_def *k = &schema[i];
        const char *dot = strchr(k->key, '.');
        if (!dot && strcmp(k->key, "preset") != 0) continue; /* store */
        if (dot && (!section || (size_t)(dot - k->key) != section_len ||
                    strncmp(section, k->key, section_len) != 0)) {
            section = k->key;
            section_len = (size_t)(dot - k->key);
            fprintf(f, "%s%.*s:\n", indent, (int)section_len, section);
        }
        fprintf(f, "%s%s%s: ", indent, dot ? "  " : "", dot ? dot + 1 : k->key);
        if (k->type == T_STRING) {
            print_quoted(f, (const char *)cfield(c, k));
        } else {
            format_value(c, k, value, sizeof value);
            fputs(value, f);
        }
        fputc('\n', f);
    }
}
