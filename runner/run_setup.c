/* run_setup.c — what `tandem run` does before its first step: the config loaded, the
 * store chosen, the backend picked, the data and the model laid out, the memory planned. */
#include "runner/run_impl.h"

#include <libgen.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/domain_caps.h"
#include "deploy/sweep_root.h"
#include "model/blas_core.h"
#include "model/gpt2_import.h"
#include "report/progress.h"
#include "runner/memplan.h"
#include "runner/model_source.h"
#include "steps/mixture.h"
#include "steps/simplex.h"
#include "util/args.h"
#include "util/meminfo.h"
#include "util/testhook.h"

static void default_store(const char *config_path, char *out, size_t cap) {
    char *copy = strdup(config_path ? config_path : "run");
    char *base = copy ? basename(copy) : "run";
    char *dot = strrchr(base, '.');
    if (dot && dot != base) *dot = '\0';
    snprintf(out, cap, "file://./runs/%s", base);
    free(copy);
}

static void fill_hparams(run_ctx *r) {
    const config *c = &r->cfg;
    step_hparams *h = &r->hp;
    memset(h, 0, sizeof *h);
    h->B = c->train.batch;
    h->T = c->train.seq;
    h->micro = c->train.micro_batch;
    h->K = c->tandem.K;
    h->V = c->tandem.val_batch ? c->tandem.val_batch : dataset_n_domains(&r->ds);
    h->E = c->tandem.E;
    h->gamma = c->tandem.gamma;
    h->lr_probe = c->tandem.lr_probe;
    h->lr_alpha = c->tandem.lr_alpha;
    h->alpha_floor = c->tandem.alpha_floor;
    h->alpha_step = c->tandem.alpha_step == CONFIG_ALPHA_PGD ? STEP_ALPHA_PGD : STEP_ALPHA_EG;
    h->alpha_budget = c->tandem.alpha_budget;
    h->episodes = c->run.episodes;
    h->val_mean = c->tandem.val_loss == CONFIG_VAL_MEAN;
    h->eval_batches = c->tandem.eval_batches;
    h->probe_carry = c->tandem.probe_carry;
    int fixed = c->run.mode == CONFIG_MODE_FIXED;
    h->fixed = fixed;
    /* the overfitting cap bounds the α step, which a fixed run never takes; alpha_cut =
     * overfit cuts on its marks */
    h->overfit_cap = (c->tandem.overfit_cap || c->tandem.alpha_cut == CONFIG_CUT_OVERFIT) && !fixed;
    h->overfit_capped = c->tandem.overfit_cap && !fixed;
    h->skip_pinned = c->tandem.skip_pinned && !fixed;
    h->plan_tokens = (double)h->episodes * h->E * h->B * h->T;
    h->mixing = c->data.mixing == CONFIG_MIXING_SAMPLE || (c->data.mixing == CONFIG_MIXING_AUTO && fixed)
                    ? STEP_MIX_SAMPLE
                    : STEP_MIX_WEIGHT;
    h->lr = c->optim.lr;
    h->lr_min = c->optim.lr_min;
    h->warmup = c->optim.warmup;
    h->total_free = (long)c->run.episodes * c->tandem.E;
    h->cosine = c->optim.schedule == CONFIG_SCHEDULE_COSINE;
    h->weight_decay = c->optim.weight_decay;
    h->clip = c->optim.clip;
    h->beta1 = c->optim.beta1;
    h->beta2 = c->optim.beta2;
    h->eps = c->optim.eps;
    h->seed = c->run.seed;
    for (int m = 0; m < dataset_n_domains(&r->ds) && m < STEP_MAX_DOMAINS; m++)
        h->names[m] = dataset_domain_name(&r->ds, m);
}

/* A DMO's every α step keeps α_m ≥ tandem.alpha_floor and ≤ the cap's bound alpha_hi[m]:
 * a cap below the floor leaves no α, refused here by the domain's name (the projection,
 * which knows only indices, said "domain 2" at the first step). A fixed run has no α
 * step: its floor binds nothing. */
static int caps_over_floor(const run_ctx *r, tdm_err *e) {
    const step_hparams *h = &r->hp;
    for (int m = 0; !h->fixed && m < dataset_n_domains(&r->ds); m++)
        if (!(h->alpha_hi[m] >= h->alpha_floor))
            return err_set(e, ERR_USAGE,
                           "domain '%s' may hold at most %g of the mixture (its cap, data.max_epochs), "
                           "below tandem.alpha_floor = %g: lower the floor or raise the cap",
                           dataset_domain_name(&r->ds, m), h->alpha_hi[m], h->alpha_floor);
    return 0;
}

/* data.max_epochs: the caps in tokens and the box they put on α (steps/mixture.h), for a
 * budget of the tokens u trains on over the planned run (the probe's steps too when they
 * carry into u). Refused when the caps cannot hold that budget; under sample mixing in
 * whole rows of train.seq tokens, since a row is never split (domain_caps_fit). */
static int setup_caps(run_ctx *r, tdm_err *e) {
    step_hparams *h = &r->hp;
    int M = dataset_n_domains(&r->ds);
    double epochs[STEP_MAX_DOMAINS], tokens[STEP_MAX_DOMAINS];
    int rc = domain_caps_resolve(r->cfg.data.max_epochs, &r->ds, epochs, e);
    if (rc < 0 || rc > 1) return rc;
    h->has_caps = rc;
    int carry = h->probe_carry && !h->fixed;
    double steps = (double)h->episodes * (h->E + (carry ? h->K : 0));
    double budget = steps * h->B * h->T;
    for (int m = 0; m < M; m++) {
        tokens[m] = (double)dataset_tokens(&r->ds, m, SPLIT_TRAIN);
        h->cap[m] = isfinite(epochs[m]) ? epochs[m] * tokens[m] : INFINITY;
    }
    mixture_alpha_bounds(tokens, M, budget, epochs, h->alpha_hi);
    if (!h->has_caps) return 0;
    if ((rc = caps_over_floor(r, e))) return rc;
    return domain_caps_fit(r->cfg.data.max_epochs, &r->ds, epochs, steps * h->B, h->T, h->mixing == STEP_MIX_SAMPLE,
                           carry ? "run.episodes x (tandem.E + tandem.K, with probe_carry) x train.batch x train.seq"
                                 : "run.episodes x tandem.E x train.batch x train.seq",
                           NULL, e);
}

/* tandem.alpha_cut = overfit or repeated: the α step's lower bounds (steps.h, has_lo).
 * overfit: lo_m = α⁰_m, every domain held at or above its start; a domain the overfitting
 * record marks (its smoothed validation loss risen above its lowest: steps.h) loses its
 * bound (the floor; capped too only with tandem.overfit_cap), so weight moves only away
 * from domains the DMO's u shows overfitted, to the others as the probe says. repeated: with B the tokens of the
 * planned final run (run.episodes x E x train.batch x train.seq, UniMax's budget) and
 * N = data.unimax_epochs, a domain may be cut to the weight at which B repeats it N
 * times, and no domain below its start: lo_m = min(α⁰_m, N·tokens_m/B). Both at least
 * the floor (α⁰ with the floor and the caps applied, as the first step would).
 * Why: the probe reads a domain's train/validation gap as harm from repetition, also where
 * more of the domain still lowers its test loss; cutting on that reading lost to the start
 * it left — below N epochs on the held-out corpora (repeated), and past them on the
 * seventh and tenth corpora, where UniMax's start at 16 epochs beat the step's α*
 * (docs/dmo.md, "The hold"). Computed from the pinned config and the data alone, so a
 * resumed run holds the same bounds; a data.mixture = file start has no hold (its file
 * is not read again on resume). */
static int setup_hold(run_ctx *r, tdm_err *e) {
    step_hparams *h = &r->hp;
    h->has_lo = 0;
    int cut = r->cfg.tandem.alpha_cut;
    if (h->fixed || cut == CONFIG_CUT_ANY || r->cfg.data.mixture == CONFIG_MIXTURE_FILE) return 0;
    int M = dataset_n_domains(&r->ds);
    step_state s;
    step_state_init(&s, &r->ds, r->cfg.data.mixture == CONFIG_MIXTURE_NATURAL);
    double start[STEP_MAX_DOMAINS];
    int rc = run_start_alpha(r, M, s.alpha, NULL, e);
    if (!rc) rc = simplex_project_box(s.alpha, M, h->alpha_floor, h->has_caps ? h->alpha_hi : NULL, start, e);
    if (rc) return rc;
    double budget = h->plan_tokens, low = 0;
    for (int m = 0; m < M; m++) {
        double tokens = (double)dataset_tokens(&r->ds, m, SPLIT_TRAIN);
        double at_n = cut == CONFIG_CUT_OVERFIT ? INFINITY
                      : budget > 0              ? r->cfg.data.unimax_epochs * tokens / budget
                                                : 1;
        h->alpha_lo[m] = fmax(h->alpha_floor, fmin(start[m], at_n));
        low += h->alpha_lo[m];
    }
    h->has_lo = 1;
    if (r->progress == PROGRESS_QUIET) return 0;
    if (cut == CONFIG_CUT_OVERFIT)
        fprintf(stderr, "tandem: the α step holds every weight at or above its start until the "
                        "DMO's u shows a domain overfitted (its validation loss rising): only then "
                        "is that domain cut (tandem.alpha_cut = overfit; repeated or any let the "
                        "probe cut on its own reading)\n");
    else if (low > 1 - 1e-9 && !h->overfit_cap)
        fprintf(stderr, "tandem: the starting mixture repeats no domain more than data.unimax_epochs "
                        "= %g epochs over this run, so the α step holds every weight at its start "
                        "(tandem.alpha_cut = repeated; any lets the probe move them)\n",
                r->cfg.data.unimax_epochs);
    return 0;
}

/* Picks r->ops from run.device; for cuda, checks that a device is there and sets the
 * compute precision of the workspaces about to be created. */
static int select_backend(run_ctx *r, tdm_err *e) {
    if (r->cfg.run.device == CONFIG_DEVICE_CPU) {
        r->ops = &model_cpu_ops;
        return 0;
    }
    const gpu_plugin *gpu = gpu_plugin_load(e); /* loads tandem-cuda.so now, not at exec */
    if (!gpu) return e->code;
    char why[256] = "";
    if (gpu->device_count(why, sizeof why) < 1)
        return err_set(e, ERR_USAGE,
                       "run.device = cuda but no CUDA device is usable here (%s): run on a GPU "
                       "node, or --set run.device=cpu (needs --allow-change run.device on a "
                       "pinned run)",
                       why);
    int rc = gpu->set_precision(r->cfg.run.precision == CONFIG_PRECISION_BF16 ? "bf16" : "fp32", e);
    if (!rc) rc = gpu->set_attention(config_attention_names[r->cfg.model.attention], e);
    if (rc) return rc;
    r->ops = gpu->ops;
    r->gpu = gpu;
    if (r->progress != PROGRESS_QUIET) {
        char desc[512];
        tdm_err de = {0};
        if (gpu->describe(desc, sizeof desc, &de) == 0)
            fprintf(stderr, "tandem: CUDA backend, %s, on %s\n",
                    r->cfg.run.precision == CONFIG_PRECISION_BF16 ? "bf16" : "fp32", desc);
    }
    return 0;
}

/* run.threads 0 ("all cores") is resolved when the run is created, and pinned as the
 * number it resolved to: the CPU kernels' float sums (OpenMP teams, OpenBLAS) depend on
 * the team size, so a resume on a node with other cores (another OMP_NUM_THREADS, cpuset,
 * cpus-per-task) computed other bits — exit 0, verify clean, another final hash; after a
 * SIGKILL "nondeterminism in episode 0". A config that says 0 follows the pin (a run
 * pinned with 0, before, keeps "all cores"); one that names a number is compared with it
 * as any pinned key is. A new run of several ranks keeps 0 (each rank its own cores, as
 * before): its ranks may have other cores, and no one number is agreed before the
 * workspace exists. The pin was read by pin_kernels. */
static void resolve_threads(run_ctx *r) {
    if (r->cfg.run.device != CONFIG_DEVICE_CPU || r->cfg.run.threads != 0) return;
    int here = omp_get_max_threads(); /* OMP_NUM_THREADS, else the CPUs this process may use */
    if (here > 1024) here = 1024;     /* run.threads' own bound */
    if (r->pin_have) r->cfg.run.threads = r->pin_threads;
    else if (comm_world(r->comm) == 1) r->cfg.run.threads = here;
    if (r->pin_have && r->pin_threads > here)
        fprintf(stderr, "tandem%s: run.threads 0 resolved to %d threads when this run was created, and the run "
                "keeps them (bit-identical results across resumes); %d are available here (OMP_NUM_THREADS, else "
                "the CPUs this process may use): to use those, resume with --set run.threads=%d --allow-change "
                "run.threads (the bits then differ from an uninterrupted run)\n",
                comm_world(r->comm) > 1 ? " (a rank)" : "", r->pin_threads, here, here);
}

/* run.blas_kernels, as run.threads: OpenBLAS picks its kernels by the CPU (SkylakeX on
 * one node, Haswell or Zen on another), and their matmuls round differently, so a resume
 * on another CPU ended on other bits (exit 0, verify clean). "auto" is resolved when the
 * run is created, to the kernels in use, and pinned as their name; a resume whose OpenBLAS
 * runs others starts this program again with them (blas_core_pin), before anything heavy
 * and before the lease, or is refused (exit 2) where this CPU cannot run them. A config
 * that says auto follows the pin (a run pinned before this key keeps auto); a new run of
 * several ranks keeps auto, as for run.threads. Reads the store's pinned config once (a
 * store not there yet holds no pins), for resolve_threads too. */
static int pin_kernels(run_ctx *r, const char *url, tdm_err *e) {
    r->pin_have = 0;
    if (r->cfg.run.device != CONFIG_DEVICE_CPU) return 0;
    /* the store as it is (nothing created: a new run's is, after the TensorBoard check);
     * kept as the run's store unless this process starts again */
    int absent = 0;
    store *st = store_open_present(url, STORE_OPEN_WRITABLE, &absent, e);
    if (!st && !absent) return e->code;
    /* absent is no error here (a new run's store is made later): its "no store at ..."
     * is not left in e, where a later failure that set no message of its own showed it */
    if (!st) err_clear(e);
    config *pinned = st ? malloc(sizeof *pinned) : NULL;
    int rc = st && !pinned ? err_set(e, ERR_INTERNAL, "out of memory") : 0;
    if (st && !rc) rc = run_config_pinned(st, pinned, &r->pin_have, e);
    if (r->pin_have) r->pin_threads = pinned->run.threads;
    int automatic = !strcmp(r->cfg.run.blas_kernels, "auto");
    if (!rc && automatic && r->pin_have)
        snprintf(r->cfg.run.blas_kernels, sizeof r->cfg.run.blas_kernels, "%s", pinned->run.blas_kernels);
    else if (!rc && automatic && comm_world(r->comm) == 1)
        snprintf(r->cfg.run.blas_kernels, sizeof r->cfg.run.blas_kernels, "%s", blas_core_name());
    free(pinned);
    const char *want = r->cfg.run.blas_kernels;
    if (st && (rc || (strcmp(want, "auto") && strcasecmp(want, blas_core_name())))) {
        store_close(st); /* an exec may follow: nothing of this image held across it */
        st = NULL;
    }
    r->store = st;
    if (rc) return rc;
    /* an MPI rank cannot exec (MPI_Init came first); a tcp rank has not met the others yet */
    return blas_core_pin(r->cfg.run.blas_kernels, strcmp(comm_backend(r->comm), "mpi") ? BLAS_PIN_RUN : BLAS_PIN_MPI,
                         &run_stop_signal, e);
}

int run_setup(run_ctx *r, const run_opts *o, tdm_err *e) {
    /* test-only: TANDEM_TEST_SIGNAL_AT=setup:1, a SIGTERM as start-up begins */
    if (testhook_hit("TANDEM_TEST_SIGNAL_AT", "setup")) raise(SIGTERM);
    /* the environment's numbers, said before any store is touched (a sweep's root
     * included): read later, a value that is not one would be passed over ("30s" as no
     * grace period known, "24 G" for the node's memory) */
    int rc = mem_env_check(e);
    if (rc) return rc;
    const char *grace = getenv("TANDEM_GRACE_S");
    double g = 0;
    if (grace && *grace && (args_parse_double(grace, &g) || !(g >= 0) || g > 1e7))
        return err_set(e, ERR_USAGE, "TANDEM_GRACE_S = '%.60s' is not a number of seconds in [0, 1e7]: set "
                       "it to the seconds the scheduler gives from its stop signal to SIGKILL, or unset it", grace);
    run_grace_s = g; /* the store's deadline after a stop counts on it from now on */
    rc = config_load_sweep(&r->cfg, o->config_path, o->sets, o->nsets, o->study ? o->study->nkeys : 0, e);
    if (rc) return rc;
    if (r->cfg.checkpoint.grace_s > 0) run_grace_s = r->cfg.checkpoint.grace_s;
    char url[CONFIG_STR_MAX];
    if (o->store_url) snprintf(url, sizeof url, "%s", o->store_url);
    else if (r->cfg.store[0]) snprintf(url, sizeof url, "%s", r->cfg.store);
    else default_store(o->config_path, url, sizeof url);
    if (o->store_suffix) { /* a sweep point: its own run under the study's store */
        if (o->study) { /* the study recorded at its root, or checked against the one there */
            store *root = store_open(url, e);
            if (!root) return e->code;
            rc = sweep_root_record(root, url, o->study_texts, o->nstudy, o->study, e);
            store_close(root);
            if (rc) return rc;
        }
        size_t n = strlen(url);
        while (n > 0 && url[n - 1] == '/') url[--n] = '\0';
        if (n + 1 + strlen(o->store_suffix) >= sizeof url)
            return err_set(e, ERR_USAGE, "store %s: too long with the sweep point %s", url, o->store_suffix);
        snprintf(url + n, sizeof url - n, "/%s", o->store_suffix);
    }
    snprintf(r->cfg.store, sizeof r->cfg.store, "%s", url);
    if ((rc = model_source_preset_check(&r->cfg, e))) return rc;
    if ((rc = pin_kernels(r, url, e))) return rc;
    if ((rc = select_backend(r, e))) return rc;
    /* the key names the file, so that a refusal points at the config line to fix */
    if ((rc = dataset_load(&r->ds, r->cfg.data.dataset, e))) {
        /* a store that holds a run: the dataset may have moved since it began (a hunt
         * moving stores: the way on was not said) */
        if (r->store && strstr(e->msg, "No such file"))
            err_append(e, " (if the dataset moved since the run began, name it where it is now: --set "
                          "data.dataset=PATH --allow-change data.dataset; its tokens are checked against the "
                          "run's data.mp)");
        return err_prefix(e, "data.dataset: ");
    }
    model_config mc;
    if ((rc = model_source_config(&r->cfg, &r->ds, &mc, e))) return rc;
    if ((rc = model_layout_init(&r->lay, &mc, e))) return rc;
    fill_hparams(r);
    if ((rc = setup_caps(r, e))) return rc;
    if ((rc = setup_hold(r, e))) return rc;
    if ((rc = step_check(&r->hp, &r->ds, e))) return rc;
    /* the parameter-sized buffers: 3 host copies for commits, and on the CPU the 6 of the
     * twins (u, m, v, w, u', grad); the workspace is checked by the backend */
    char what[160];
    int from_folder = model_source_hf_dir(&r->cfg) != NULL;
    snprintf(what, sizeof what, "a model of %zu parameters (%s = %d, %s = %d, vocab %d)", r->lay.numel,
             from_folder ? "layers" : "model.layers", mc.layers, from_folder ? "width" : "model.channels",
             mc.channels, mc.vocab);
    double copies = r->cfg.run.device == CONFIG_DEVICE_CPU ? 9 : 3;
    if ((rc = model_memory_check(copies * 4.0 * (double)r->lay.numel, what,
                                 from_folder ? "run it on a machine with more memory"
                                                          : "lower model.layers, model.channels or model.vocab",
                                 e)))
        return rc;
    for (int m = 0; m < dataset_n_domains(&r->ds); m++) r->names[m] = dataset_domain_name(&r->ds, m);
    if (r->rank == 0 && r->cfg.log.tensorboard[0] && !(r->tb = tfevents_open(r->cfg.log.tensorboard, 0, e))) {
        /* asked for and impossible: said before the store is touched, naming the key */
        char why[sizeof e->msg];
        snprintf(why, sizeof why, "%s", e->msg);
        return err_set(e, ERR_USAGE, "log.tensorboard: %s (fix the path or leave the key empty)", why);
    }
    if (!r->store && !(r->store = store_open(url, e))) return e->code;
    resolve_threads(r);
    return 0;
}

/* The memory estimate (runner/memplan.h), before the workspace exists: printed by rank 0,
 * checked by every rank against its own GPU and host; decides checkpoint.snapshot = auto. */
int run_plan_memory(run_ctx *r, tdm_err *e) {
    size_t fr = 0, tot = 0;
    if (r->gpu && r->gpu->free_memory && r->gpu->free_memory(&fr, &tot, e)) return e->code;
    int rows = r->hp.B + r->hp.V > r->hp.B ? r->hp.B + r->hp.V : r->hp.B;
    int M = r->st.M ? r->st.M : dataset_n_domains(&r->ds);
    run_memplan m;
    int rc = memplan_make(&m, &r->cfg, &r->lay, r->ops, rows, r->hp.T, 2 * M, comm_world(r->comm),
                          (double)((uint64_t)r->cfg.checkpoint.chunk_kib << 10), (double)fr,
                          (double)tot, e);
    if (rc) return rc;
    r->streaming = m.streaming;
    if (r->rank == 0) {
        char msg[1024];
        memplan_describe(&m, msg, sizeof msg);
        char line[1100];
        snprintf(line, sizeof line, "tandem: %s", msg);
        progress_event(stderr, r->progress, "memory", line);
    }
    return 0;
}

