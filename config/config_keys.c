/* config_keys.c — the schema table: every config key with its type, default, range,
 * allowed values and documentation, in documentation order. Parsing and errors
 * (config.c), --help and docs/config.md's table (config_doc.c) all come from it. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "config/cluster_check.h"
#include "config/domain_caps.h"
#include "util/outfile.h"
#include "util/urltext.h"
#include "config/config.h"
#include "config/config_impl.h"

const char *const config_preset_names[] = {"none",
                                           "data-abundant-160m",
                                           "data-restricted-160m",
                                           "data-restricted-410m",
                                           "data-restricted-1b",
                                           "sft-qwen2-0.5b",
                                           NULL};
static const char *const device_names[] = {"cpu", "cuda", NULL};
static const char *const precision_names[] = {"fp32", "bf16", NULL};
const char *const config_attention_names[] = {"auto", "cudnn", "builtin", NULL};
static const char *const mixing_names[] = {"weight", "sample", "auto", NULL};
static const char *const mixture_names[] = {"uniform", "natural", "file", "unimax", NULL};
static const char *const mode_names[] = {"tandem", "fixed", NULL};
static const char *const snapshot_names[] = {"auto", "host", "stream", NULL};
static const char *const schedule_names[] = {"cosine", "constant", NULL};
static const char *const alpha_step_names[] = {"eg", "pgd", NULL};
static const char *const alpha_cut_names[] = {"repeated", "any", "overfit", NULL};
static const char *const val_loss_names[] = {"sum", "mean", NULL};
static const char *const cloud_names[] = {"none", "gke", "eks", "aks", NULL};

/* model.init: "random", or "hf:" followed by a local folder (runner/model_source.c reads
 * it): user info or a URL after "hf:" is refused (util/outfile.h), without repeating it. */
static bool model_init_check(const char *value, char *why, size_t n) {
    if (!strcmp(value, "random")) return true;
    if (!strncmp(value, "hf:", 3) && value[3]) {
        char local[400];
        if (outfile_path_local(value + 3, 0, local, sizeof local)) return true;
        snprintf(why, n, "hf:DIR: %s", local);
        return false;
    }
    char shown[240]; /* a value pasted with a secret in it is shown masked */
    outfile_mask_path(value, shown, sizeof shown);
    snprintf(why, n, "expected random, or hf:DIR (a Hugging Face model folder), got '%.200s'", shown);
    return false;
}

/* data.dataset: a local file. User info in it ("s3://KEY:SECRET@b/d.yaml") is refused
 * without repeating it: kept, it reached "cannot open ..." errors and the pinned config;
 * a URL is refused too (the dataset and its shards are read from local files only), saying
 * to copy it here rather than "No such file or directory". */
static bool local_input_check(const char *value, char *why, size_t n) {
    return outfile_path_local(value, 0, why, n);
}

/* log.tensorboard: "" (none) or a local folder, as `tandem metrics --tensorboard` takes.
 * "s3://b/tb" was written as the local folder ./s3:/b/tb (its user info, if any, in the
 * folder's name and the store's RUN) while the user looked for it in the bucket. */
static bool local_output_check(const char *value, char *why, size_t n) {
    return outfile_path_local(value, 1, why, n);
}

/* run.blas_kernels: "auto", or an OpenBLAS core name (letters, digits, '_'). */
static bool blas_kernels_check(const char *value, char *why, size_t n) {
    size_t len = strlen(value), ok = strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
    /* "AUTO" would be taken for the name of kernels OpenBLAS does not have */
    if (len && len <= 32 && ok == len && (strcasecmp(value, "auto") || !strcmp(value, "auto"))) return true;
    snprintf(why, n, "expected auto, or the name of OpenBLAS's kernels (as `tandem version` shows them: "
                     "Haswell, SkylakeX, ...), got '%.60s'", value);
    return false;
}

/* store and data.mixture_file: a URL with user info ("s3://KEY:SECRET@bucket/x") is
 * refused without repeating it; kept, a pasted secret would reach error messages, the
 * pinned config, argv and rendered jobs. */
static bool no_userinfo_check(const char *value, char *why, size_t n) {
    const char *sep = strstr(value, "://");
    /* the rules store_url_parse applies: user info in any spelling ("s3:/K:S@b", a path
     * "runs/K:S@b"), and a ':' or '@' in a well-formed URL's authority */
    if (!url_text_has_userinfo(value, strlen(value)) && (!sep || !url_authority_has_userinfo(sep + 3)))
        return true;
    snprintf(why, n, "a URL with user info (user:secret@host in any spelling, or a ':' before its first '/') is "
                     "refused and not repeated here: "
                     "credentials never go into a config or a URL; tandem takes them from the "
                     "environment, a profile or the rest of the credential chain (docs/running.md)");
    return false;
}

/* cluster.workdir, tandem_binary, credentials_file: a path on the nodes (no control
 * character, cluster_check_path) rendered into job files, without user info. */
static bool cluster_path_check(const char *value, char *why, size_t n) {
    return cluster_check_path(value, why, n) && no_userinfo_check(value, why, n);
}

#define COUNT_NAMES(a) (sizeof(a) / sizeof(a)[0] - 1)
_Static_assert(COUNT_NAMES(config_preset_names) == CONFIG_PRESET_COUNT, "preset names vs enum");
_Static_assert(COUNT_NAMES(device_names) == CONFIG_DEVICE_CUDA + 1, "device names vs enum");
_Static_assert(COUNT_NAMES(precision_names) == CONFIG_PRECISION_BF16 + 1, "precision names vs enum");
_Static_assert(COUNT_NAMES(config_attention_names) == CONFIG_ATTENTION_BUILTIN + 1, "attention names");
_Static_assert(COUNT_NAMES(mixing_names) == CONFIG_MIXING_AUTO + 1, "mixing names vs enum");
_Static_assert(COUNT_NAMES(mixture_names) == CONFIG_MIXTURE_UNIMAX + 1, "mixture names vs enum");
_Static_assert(COUNT_NAMES(mode_names) == CONFIG_MODE_FIXED + 1, "mode names vs enum");
_Static_assert(COUNT_NAMES(schedule_names) == CONFIG_SCHEDULE_CONSTANT + 1, "schedule");
_Static_assert(COUNT_NAMES(alpha_step_names) == CONFIG_ALPHA_PGD + 1, "alpha step");
_Static_assert(COUNT_NAMES(alpha_cut_names) == CONFIG_CUT_OVERFIT + 1, "alpha cut");
_Static_assert(COUNT_NAMES(val_loss_names) == CONFIG_VAL_MEAN + 1, "val loss");
_Static_assert(COUNT_NAMES(cloud_names) == CONFIG_CLOUD_AKS + 1, "cloud");

/* offsetof, plus a compile-time proof that the field has C type T: a row whose type tag
 * disagrees with its field would otherwise write an int over a double at run time. (The
 * operand of _Generic is not evaluated; a mismatch selects a negative array size.) */
#define FIELD(f, T)                                                                        \
    (offsetof(config, f) + 0 * sizeof(char[_Generic(((config *)0)->f, T: 1, default: -1)]))

#define INTF(k, f, d, l, h, fl, doc_)                                                      \
    {.key = k, .type = T_INT, .off = FIELD(f, int), .def = d, .lo = l, .hi = h, .flags = fl, \
     .doc = doc_}
#define INT(k, f, d, l, h, doc_) INTF(k, f, d, l, h, 0, doc_)
#define U64(k, f, d, doc_)                                                                 \
    {.key = k, .type = T_U64, .off = FIELD(f, uint64_t), .def = d, .lo = 0,               \
     .hi = INFINITY, .doc = doc_}
#define FLTF(k, f, d, l, lopen, h, hopen, fl, doc_)                                        \
    {.key = k, .type = T_FLOAT, .off = FIELD(f, double), .def = d, .lo = l, .hi = h,      \
     .lo_open = lopen, .hi_open = hopen, .flags = fl, .doc = doc_}
#define FLT(k, f, d, l, lopen, h, hopen, doc_) FLTF(k, f, d, l, lopen, h, hopen, 0, doc_)
#define BOOLF(k, f, d, fl, doc_)                                                           \
    {.key = k, .type = T_BOOL, .off = FIELD(f, bool), .def = d, .flags = fl, .doc = doc_}
#define BOOL(k, f, d, doc_) BOOLF(k, f, d, 0, doc_)
#define ENUMF(k, f, d, nm, fl, doc_)                                                       \
    {.key = k, .type = T_ENUM, .off = FIELD(f, int), .def = d, .names = nm, .flags = fl,  \
     .doc = doc_}
#define ENUM(k, f, d, nm, doc_) ENUMF(k, f, d, nm, 0, doc_)
#define STR(k, f, d, fl, doc_)                                                             \
    {.key = k, .type = T_STRING, .off = FIELD(f, char *), .def = d, .flags = fl, .doc = doc_}
#define STRC(k, f, d, fl, chk, doc_)                                                       \
    {.key = k, .type = T_STRING, .off = FIELD(f, char *), .def = d, .flags = fl,          \
     .check = chk, .doc = doc_}

/* In documentation order: section by section, as a config file is written. */
const key_def config_schema[] = {
    ENUM("preset", preset, "none", config_preset_names,
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
    INT("run.threads", run.threads, "0", 0, INT_MAX, "CPU threads, at most 1024; 0 = all cores, resolved when the run is created and pinned as that number"),
    STRC("run.blas_kernels", run.blas_kernels, "auto", 0, blas_kernels_check,
         "OpenBLAS's kernels (cpu): auto = those in use when the run is created, pinned as their name (a resume "
         "on another CPU starts again with them: bit-identical results); or a name as `tandem version` shows"),
    STRC("data.dataset", data.dataset, NULL, F_PATH, local_input_check,
        "dataset YAML (DESIGN.md §7), a local file; a relative path is relative to the config file"),
    ENUM("data.mixing", data.mixing, "auto", mixing_names,
         "weight: B/M sequences per domain, α-weighted loss; sample: each sequence's domain "
         "drawn ∝ α; auto: weight for run.mode=tandem, sample for fixed"),
    ENUM("data.mixture", data.mixture, "unimax", mixture_names,
         "α at episode 0 (tandem) or throughout (fixed): unimax (the budget spread evenly with "
         "no domain repeated more than N epochs, the surplus to the others, N = "
         "tandem.start_epochs in a TANDEM run and data.unimax_epochs in a fixed one; "
         "uniform when data is abundant, natural when the whole corpus must repeat more: the "
         "DMO starts from what repetition allows, docs/dmo.md), uniform, natural (∝ train "
         "tokens per domain), or file (data.mixture_file)"),
    STRC("data.mixture_file", data.mixture_file, "", F_PATH | F_NOECHO, no_userinfo_check,
        "used when data.mixture = file: a mixture written by `tandem mixture` (YAML, or its --format json), or the store "
        "of a finished TANDEM run (its α*, mixture.mp); a relative path is relative to the "
        "config file; the mixture of a run that diverged is refused"),
    FLT("data.unimax_epochs", data.unimax_epochs, "4", 0, true, INFINITY, false,
        "N of data.mixture = unimax in a fixed run (the UniMax baseline): the most epochs of a "
        "domain's train tokens UniMax plans for (Muennighoff et al. 2023: up to ~4 repetitions "
        "are worth almost as much as new data); also the bound of tandem.alpha_cut = repeated"),
    STRC("data.max_epochs", data.max_epochs, "", 0, domain_caps_check,
         "caps: NAME=EPOCHS,... (a domain, or * for every domain not named; ';' separates them too, "
         "for a --sweep, which splits its values at commas): u never trains on "
         "more than that many epochs of the domain's train tokens over the run; α, α* and the "
         "final runs stay within them (docs/dmo.md); \"\" = none"),
    INT("model.vocab", model.vocab, "0", 0, MODEL_VOCAB_MAX,
        "vocabulary size; 0 = the dataset's; never below the dataset's (above: padding rows)"),
    INT("model.ctx", model.ctx, "64", 1, INT_MAX,
        "context length (learned positions): at most 65536 for a GPT-2 of model.init random, at "
        "most the model's max_position_embeddings for hf:DIR"),
    INT("model.layers", model.layers, "2", 1, 1024, "transformer blocks"),
    INT("model.heads", model.heads, "2", 1, 65536, "attention heads; must divide model.channels"),
    INT("model.channels", model.channels, "64", 1, 65536, "model width C"),
    STRC("model.init", model.init, "random", F_SCHEME_PATH, model_init_check,
         "random: a GPT-2 of the model.* shape, initialised from run.seed; hf:DIR: a Hugging Face "
         "folder (config.json + safetensors, docs/models.md) of the Llama / Qwen2 family or a GPT-2 "
         "(GPT2LMHeadModel: an exported run, GPT-2 itself), whose architecture and weights are the "
         "initial u (model.layers, heads, channels are then unused; model.ctx bounds the sequences); "
         "a relative DIR is relative to the config file"),
    ENUM("model.attention", model.attention, "auto", config_attention_names,
         "attention on run.device = cuda: auto (cuDNN's fused attention when run.precision = bf16, "
         "cuDNN 9 loads and a start-up self-check against the built-in kernel passes; else the "
         "built-in kernel; the run says which and why), cudnn (the same or an error), builtin "
         "(gpu/ kernels only). The two give different bits: a resume runs what the pinned value "
         "picks (docs/gpu.md); cpu ignores it, but cudnn is refused without run.precision = bf16 (which needs "
         "cuda)"),
    INT("train.batch", train.batch, "8", 1, 1 << 24,
        "sequences per step (mixing=weight: ⌊B/M⌋ per domain, one more for the first B mod M)"),
    INT("train.seq", train.seq, "64", 1, INT_MAX, "tokens per sequence; at most model.ctx"),
    INT("train.micro_batch", train.micro_batch, "0", 0, 1 << 24,
        "sequences per forward/backward pass: each batch (the probe's validation rows included) "
        "goes through in passes of at most this many rows whose gradients are summed, so the "
        "activations' memory follows it while the batch stays; the result differs from one pass "
        "only in the order of float additions (and is as deterministic); 0 = one pass"),
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
    ENUMF("tandem.alpha_cut", tandem.alpha_cut, "overfit", alpha_cut_names, F_DMO_ONLY,
         "which domains the α step may cut below their starting weight (a data.mixture = file "
         "start: every domain, whatever this says): overfit = only a domain whose validation "
         "loss the DMO's u shows rising (the overfitting record's mark, kept whatever "
         "tandem.overfit_cap says), as far as the probe's evidence takes it, until the domain "
         "finds a new lowest; repeated = a domain the planned run would repeat "
         "more than data.unimax_epochs epochs, down to that many; any = every domain, as "
         "Algorithm 1"),
    BOOLF("tandem.overfit_cap", tandem.overfit_cap, "false", F_DMO_ONLY,
         "every probe also scores u on fixed validation windows of each domain; a domain whose "
         "smoothed validation loss rises above its lowest (by 1 % and by 3 sd of its noise) is "
         "held, until it finds a new lowest, at the weight that gives it over the planned run "
         "the tokens u had seen of it at that lowest (docs/dmo.md, \"The overfitting cap\"); "
         "with tandem.alpha_cut = overfit (the default) the record and its marks are kept "
         "anyway, and this adds the cap"),
    BOOLF("tandem.skip_pinned", tandem.skip_pinned, "true", F_DMO_ONLY,
         "while the hold's bounds admit one mixture only (alpha_cut = overfit with no domain "
         "marked), an episode runs no twins: u is only scored for the overfitting record and "
         "α stays where it must (docs/dmo.md, \"The hold\"); false runs the full probe every "
         "episode, as runs pinned before the key did (the same α, other batches for u)"),
    FLTF("tandem.start_epochs", tandem.start_epochs, "16", 0, false, INFINITY, false, F_DMO_ONLY,
        "N of a TANDEM run's start when data.mixture = unimax: UniMax with no domain repeated "
        "more than this many epochs (Muennighoff et al. 2023: past ~16 repetitions more of a "
        "domain is worth little); the default α step (alpha_cut = overfit) cuts only a domain "
        "the DMO's u shows overfitted (with alpha_cut = repeated: one the run repeats more than "
        "data.unimax_epochs, down to that many). Fixed runs (the UniMax "
        "baseline) use data.unimax_epochs; 0 = data.unimax_epochs here too"),
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
    INTF("checkpoint.keep", checkpoint.keep, "3", 0, INT_MAX, F_UNPINNED,
        "full states the writer keeps after each commit (the newest N, HEAD's, pinned ones and "
        "the blobs they need; α records always stay); 0 = keep all. Not pinned: change it any "
        "time"),
    FLTF("checkpoint.grace_s", checkpoint.grace_s, "0", 0, false, INFINITY, false, F_UNPINNED,
        "seconds from a stop signal to SIGKILL, at most 1e7: on a signal a full state is committed only if "
        "the measured commit throughput says it fits, else the last one stands (the resume "
        "replays); 0 = the environment's TANDEM_GRACE_S (set by the rendered Slurm scripts and "
        "Kubernetes Jobs), or always commit when unknown. Not pinned"),
    INT("checkpoint.every_episodes", checkpoint.every_episodes, "5", 0, INT_MAX,
        "full state every N episodes; 0 = only on time, at the end or on a signal"),
    FLT("checkpoint.every_seconds", checkpoint.every_seconds, "0", 0, false, INFINITY, false,
        "full state at least every S seconds; 0 = off"),
    INT("checkpoint.chunk_kib", checkpoint.chunk_kib, "65536", 4, 65536,
        "tensor chunk size in the store, KiB (at most 64 MiB)"),
    ENUMF("checkpoint.snapshot", checkpoint.snapshot, "auto", snapshot_names, F_UNPINNED,
         "host = copy the state into host memory and write it in the background (the loop "
         "waits for the copy only); stream = write it chunk by chunk from the model's memory "
         "(no second copy in host memory; the loop waits for the write); auto = host when the "
         "copy fits in the memory available, else stream. Not pinned"),
    STRC("log.tensorboard", log.tensorboard, "", F_UNPINNED, local_output_check,
        "local directory for TensorBoard event files of each episode's metrics (created if missing; "
        "a new file per start of the run, holding the episodes not logged before); empty = "
        "none. `tandem metrics STORE --tensorboard DIR` writes the whole history any time. Not "
        "pinned"),
    INTF("log.val_every", log.val_every, "0", 0, INT_MAX, F_UNPINNED,
         "every N episodes (and at the last), u's validation loss per domain, evaluated as "
         "`tandem eval --split val --max-tokens log.val_tokens` would, into the episode's "
         "metrics row and TensorBoard (val/DOMAIN); 0 = never. Not pinned"),
    INTF("log.val_tokens", log.val_tokens, "8192", 1, INT_MAX, F_UNPINNED,
         "at most this many target tokens per domain for log.val_every (whole windows of "
         "train.seq: at least one). Not pinned"),
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
    STRC("cluster.job_name", cluster.job_name, "", 0, cluster_check_job_name,
         "job name (Slurm --job-name, Kubernetes Job name: a DNS label starting with a letter); "
         "\"\" = tandem-<config file's name>-<6 hex digits of a hash of the store>"),
    STRC("cluster.workdir", cluster.workdir, "", F_PATH, cluster_path_check,
         "Slurm --chdir: where the job runs and writes its log (shared storage); \"\" = the "
         "directory tandem manifest runs in"),
    STRC("cluster.tandem_binary", cluster.tandem_binary, "", F_PATH, cluster_path_check,
         "tandem on the nodes; \"\" = Slurm: the absolute path of the tandem that renders; "
         "Kubernetes: /usr/local/bin/tandem (the image's). A relative path is relative to the "
         "config file (Slurm); Kubernetes wants it absolute as written"),
    STRC("cluster.credentials_file", cluster.credentials_file, "", F_PATH, cluster_path_check,
         "Slurm: a file of AWS_* assignments (mode 600) that the batch script reads into "
         "tandem's environment; credentials never appear on a command line"),
    INT("cluster.signal_lead_s", cluster.signal_lead_s, "300", 1, 65535,
        "Slurm --signal=B:USR1@S: seconds before the time limit when the batch shell gets "
        "USR1, tandem commits and the job requeues itself; shorter than cluster.time_limit"),
    STRC("cluster.image", cluster.image, "", 0, cluster_check_image,
         "Kubernetes: the container image (see Dockerfile); required by tandem manifest k8s"),
    ENUM("cluster.cloud", cluster.cloud, "none", cloud_names,
         "Kubernetes node labels and tolerations for cluster.gpu_type and spot capacity on GKE, "
         "EKS (managed node groups) or AKS; none = only cluster.node_selector and "
         "cluster.tolerations"),
    BOOL("cluster.spot", cluster.spot, "false",
         "Kubernetes: run on the spot (preemptible) nodes of cluster.cloud"),
    STRC("cluster.node_selector", cluster.node_selector, "", 0, cluster_check_labels,
         "extra Kubernetes node labels 'key=value,...' (each key once, at most 40); they win "
         "over the cloud's"),
    STRC("cluster.tolerations", cluster.tolerations, "", 0, cluster_check_tolerations,
         "extra Kubernetes tolerations 'key[=value][:Effect],...' (at most 40; no value: operator "
         "Exists; no effect: every effect)"),
    INT("cluster.grace_period_s", cluster.grace_period_s, "120", 0, 86400,
        "Kubernetes terminationGracePeriodSeconds, SIGTERM to SIGKILL: more than a commit takes "
        "(see docs/preemption.md)"),
    STRC("cluster.secret_name", cluster.secret_name, "", 0, cluster_check_dns_subdomain,
         "Kubernetes Secret with AWS credentials as the files credentials (and optionally "
         "config) of ~/.aws, mounted read-only for tandem"),
    BOOL("cluster.secret_as_env", cluster.secret_as_env, "false",
         "Kubernetes: take the keys AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and (optional) "
         "AWS_SESSION_TOKEN of cluster.secret_name as environment variables (secretKeyRef) "
         "instead of mounting it as ~/.aws files"),
    STRC("cluster.service_account", cluster.service_account, "", 0, cluster_check_dns_subdomain,
         "Kubernetes ServiceAccount of the pods: on EKS annotated with an IAM role (IRSA) or "
         "bound by Pod Identity, so that tandem gets temporary credentials through the web "
         "identity the platform injects (no keys in a Secret)"),
    INT("cluster.backoff_limit", cluster.backoff_limit, "3", 0, 1000000,
        "Kubernetes: failed pods (preemptions and exit 75 not counted) before the Job fails; per "
        "index when cluster.nodes > 1"),
    STRC("cluster.data_pvc", cluster.data_pvc, "", 0, cluster_check_dns_subdomain,
         "Kubernetes PersistentVolumeClaim with the corpus, mounted read-only at /data"),
    STRC("cluster.env", cluster.env, "", F_NOECHO, cluster_check_env,
         "extra environment of tandem 'NAME=value,...' (AWS_REGION, AWS_ENDPOINT_URL, "
         "TANDEM_S3_*); a ',' inside a value is written '\\,' (NO_PROXY=localhost\\,10.0.0.1); "
         "credentials and the names the job sets itself (TANDEM_RANK, "
         "TANDEM_WORLD_SIZE, TANDEM_POINT, SLURM_*, ...) are refused"),
    INT("cluster.coordinator_port", cluster.coordinator_port, "29500", 1, 65535,
        "cluster.nodes > 1: the port of rank 0 given to every rank as TANDEM_COORDINATOR"),
    STRC("store", store, "", F_NOECHO, no_userinfo_check,
        "run store URL (file:///path or s3://bucket/prefix); empty = the runner decides"),
};
const size_t config_nkeys = sizeof config_schema / sizeof config_schema[0];
_Static_assert(sizeof config_schema / sizeof config_schema[0] <= CONFIG_NKEYS_MAX,
               "CONFIG_NKEYS_MAX (config_impl.h) is too small for the schema");

/* Sections that say where and how a run executes (nodes, image, scheduler; where it
 * logs), never what it computes: every key in them is unpinned, present and future. */
static const char *const unpinned_sections[] = {"cluster.", "log."};

/* The schema's flags of `key`; none for a key the schema does not have (pinned, echoed). */
static unsigned key_flags(const char *key) {
    for (size_t i = 0; i < config_nkeys; i++)
        if (!strcmp(config_schema[i].key, key)) return config_schema[i].flags;
    return 0;
}

bool config_key_pinned(const char *key) {
    for (size_t i = 0; i < sizeof unpinned_sections / sizeof *unpinned_sections; i++)
        if (!strncmp(key, unpinned_sections[i], strlen(unpinned_sections[i]))) return false;
    return !(key_flags(key) & F_UNPINNED);
}

bool config_key_path(const char *key) { return key_flags(key) & (F_PATH | F_SCHEME_PATH); }

/* What a run computes, as run_config_identity names it: the sections of the data, the
 * model, the batch, the DMO and the optimiser, and the run's seed, length, mode and
 * precision — never where it runs or stores (run.device, run.threads, the store, cluster.*,
 * checkpoint.*, log.*), nor a path (a dataset or model folder moved to another node is the
 * same run; data.mp and model.mp pin their contents), nor the attention kernel's choice. */
bool config_key_identity(const char *key) {
    static const char *const sections[] = {"data.", "model.", "train.", "tandem.", "optim."};
    static const char *const run_keys[] = {"run.seed", "run.episodes", "run.mode", "run.precision"};
    if (config_key_path(key) || !strcmp(key, "model.attention")) return false;
    for (size_t i = 0; i < sizeof run_keys / sizeof *run_keys; i++)
        if (!strcmp(key, run_keys[i])) return true;
    for (size_t i = 0; i < sizeof sections / sizeof *sections; i++)
        if (!strncmp(key, sections[i], strlen(sections[i]))) return true;
    return false;
}

const char *config_relative_path(const char *key, const char *value) {
    unsigned f = key_flags(key);
    const char *path = value;
    if (f & F_SCHEME_PATH) {
        const char *colon = strchr(value, ':');
        if (!colon) return NULL; /* model.init: random */
        path = colon + 1;
    } else if (!(f & F_PATH)) {
        return NULL;
    }
    return path[0] && path[0] != '/' && !strstr(value, "://") ? path : NULL;
}

bool config_key_dmo_only(const char *key) { return key_flags(key) & F_DMO_ONLY; }

bool config_key_noecho(const char *key) { return key_flags(key) & F_NOECHO; }
