/* run.c — the episode loop of `tandem run`; see run.h. */
#include "runner/run.h"

#include <libgen.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "data/dataset.h"
#include "gpu/plugin.h"
#include "ledger/audit.h"
#include "ledger/ckpt.h"
#include "ledger/keys.h"
#include "ledger/metrics.h"
#include "ledger/read.h"
#include "ledger/records.h"
#include "model/model.h"
#include "util/args.h"
#include "config/config.h"
#include "config/domain_caps.h"
#include "runner/ckpt_model.h"
#include "runner/evaluate.h"
#include "runner/memplan.h"
#include "report/metrics_log.h"
#include "runner/model_source.h"
#include "runner/mixfile.h"
#include "config/run_config.h"
#include "report/progress.h"
#include "steps/mixture.h"
#include "steps/simplex.h"
#include "steps/steps.h"
#include "storage/store.h"
#include "util/testhook.h"

static volatile sig_atomic_t g_signal;
static struct timespec g_signal_at; /* when the first stop signal came (monotonic) */

static void on_signal(int sig) {
    if (!g_signal) clock_gettime(CLOCK_MONOTONIC, &g_signal_at); /* async-signal-safe */
    g_signal = sig;
}

int run_signal_pending(void) { return g_signal; }

void run_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigset_t stop;
    sigemptyset(&stop);
    int sigs[] = {SIGTERM, SIGINT, SIGUSR1};
    for (int i = 0; i < 3; i++) {
        sigaction(sigs[i], &sa, NULL);
        sigaddset(&stop, sigs[i]);
    }
    /* a launcher may hand us these blocked (a careful one blocks them across fork and
     * exec so that none is lost before this handler exists): a signal already pending
     * is delivered to the handler here, and later ones are not held back for ever */
    sigprocmask(SIG_UNBLOCK, &stop, NULL);
}

static double now_mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double now_wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Where the run is: the next step and the position. */
enum { NEXT_PROBE, NEXT_ALPHA, NEXT_FREE, NEXT_DONE };
static const char *const NEXT_NAMES[] = {"probe", "alpha", "free", "done"};

typedef struct run_ctx {
    config cfg;
    dataset ds;
    model_layout lay;
    step_hparams hp;
    const model_ops *ops; /* the backend run.device names */
    comm *comm;           /* the ranks of a data-parallel run; rank 0 alone writes the store */
    int rank;
    step_nets nets;
    step_state st;
    /* the episode's free phase so far, for its metrics row: per-domain loss and gradient
     * norm sums over ep_n free steps (kept in the state record across a resume) */
    double ep_loss[STEP_MAX_DOMAINS], ep_grad;
    int ep_n;
    store *store;
    ckpt *ck;
    ckpt_model_io ck_io; /* the backend's transfers as the ledger moves chunks */
    int progress;
    uint64_t seq;
    int next;
    uint64_t index; /* next free step within the episode */
    uint64_t alpha_records;
    sha256_digest alpha_head;
    const char *names[STEP_MAX_DOMAINS];
    int shortened; /* run.episodes lowered to where the run stands: commit it as done */
    const gpu_plugin *gpu; /* run.device = cuda: the loaded backend */
    int streaming;         /* commits stream from the model's memory (memplan) */
    uint64_t reported_commit; /* the newest state a "commit" event named (--json) */
    int have_mixture;         /* the final mixture was written: mixture holds it */
    double mixture[STEP_MAX_DOMAINS];
    tfevents *tb; /* log.tensorboard: the event file of this life (rank 0) */
    int val_off;  /* log.val_every failed once (said): not tried again in this life */
    /* the episode's free steps this life ran: each one's mixture loss, for the row */
    double step_loss[METRICS_MAX_STEPS];
    int step_n;
    uint64_t step_first; /* the AdamW step count after the first of them */
} run_ctx;

/* --json: a "commit" event for a full state that landed since the last one reported */
static void report_commit(run_ctx *r) {
    if (r->progress != PROGRESS_JSON || !r->ck) return;
    uint64_t s = ckpt_last_commit_seq(r->ck);
    if (s == UINT64_MAX || s == r->reported_commit) return;
    r->reported_commit = s;
    char key[64];
    ledger_state_key(key, sizeof key, s);
    progress_commit(r->progress, s, key);
}

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
}

/* data.max_epochs: the caps in tokens and the box they put on α (steps/mixture.h), for a
 * budget of the tokens u trains on over the planned run (the probe's steps too when they
 * carry into u). Refused when the caps cannot hold that budget; under sample mixing in
 * whole rows of train.seq tokens, since a row is never split. */
static int setup_caps(run_ctx *r, tdm_err *e) {
    step_hparams *h = &r->hp;
    int M = dataset_n_domains(&r->ds);
    double epochs[STEP_MAX_DOMAINS], tokens[STEP_MAX_DOMAINS];
    int rc = domain_caps_resolve(r->cfg.data.max_epochs, &r->ds, epochs, e);
    if (rc < 0 || rc > 1) return rc;
    h->has_caps = rc;
    double steps = (double)h->episodes * (h->E + (h->probe_carry && !h->fixed ? h->K : 0));
    double budget = steps * h->B * h->T, room = 0, rows = 0;
    for (int m = 0; m < M; m++) {
        tokens[m] = (double)dataset_tokens(&r->ds, m, SPLIT_TRAIN);
        h->cap[m] = isfinite(epochs[m]) ? epochs[m] * tokens[m] : INFINITY;
        room += h->cap[m];
        rows += floor(h->cap[m] / h->T);
    }
    mixture_alpha_bounds(tokens, M, budget, epochs, h->alpha_hi);
    if (!h->has_caps) return 0;
    if (room < budget || (h->mixing == STEP_MIX_SAMPLE && rows < steps * h->B))
        return err_set(e, ERR_USAGE,
                       "data.max_epochs = %s: the caps let u see %.4g tokens in all, but the run "
                       "trains on %.4g (run.episodes x (tandem.E%s) x train.batch x train.seq%s): "
                       "raise the caps, cap fewer domains, or lower run.episodes",
                       r->cfg.data.max_epochs, room, budget,
                       h->probe_carry && !h->fixed ? " + tandem.K, with probe_carry" : "",
                       h->mixing == STEP_MIX_SAMPLE ? ", in whole sequences" : "");
    return 0;
}

/* The scalars of the state as a manifest record (views and tensors are the ckpt's). */
static void to_record(const run_ctx *r, rec_state *rec) {
    memset(rec, 0, sizeof *rec);
    rec->seq = r->seq;
    rec->episode = r->st.episode;
    snprintf(rec->step, sizeof rec->step, "%s", NEXT_NAMES[r->next]);
    rec->index = r->index;
    rec->free_steps = r->st.free_steps;
    rec->seed = r->cfg.run.seed;
    rec->M = r->st.M;
    memcpy(rec->alpha, r->st.alpha, sizeof rec->alpha);
    rec->have_losses = r->st.have_losses;
    memcpy(rec->loss_u, r->st.loss_u, sizeof rec->loss_u);
    memcpy(rec->loss_w, r->st.loss_w, sizeof rec->loss_w);
    for (int m = 0; m < r->st.M; m++) {
        rec->cursors[m][0] = r->st.train[m].epoch;
        rec->cursors[m][1] = r->st.train[m].pos;
        rec->cursors[m][2] = r->st.val[m].epoch;
        rec->cursors[m][3] = r->st.val[m].pos;
    }
    rec->alpha_records = r->alpha_records;
    rec->alpha_head = r->alpha_head;
    rec->has_seen = 1;
    memcpy(rec->seen, r->st.seen, sizeof rec->seen);
    /* inside an episode's free phase: what its metrics row needs (absent at boundaries,
     * so a state between episodes is encoded as before) */
    rec->has_episode = r->next == NEXT_FREE && (r->index > 0 || !r->hp.fixed);
    if (rec->has_episode) {
        memcpy(rec->ep_loss_u, r->st.loss_u, sizeof rec->ep_loss_u);
        memcpy(rec->ep_loss_w, r->st.loss_w, sizeof rec->ep_loss_w);
        memcpy(rec->ep_free_loss, r->ep_loss, sizeof rec->ep_free_loss);
        rec->ep_grad = r->ep_grad;
        rec->ep_free_n = (uint64_t)r->ep_n;
    }
}

static int from_record(run_ctx *r, const rec_state *rec, tdm_err *e) {
    if (rec->M != dataset_n_domains(&r->ds))
        return err_set(e, ERR_STORE, "the stored state has %d domains but %s has %d", rec->M,
                       r->ds.path, dataset_n_domains(&r->ds));
    if (rec->seed != r->cfg.run.seed)
        return err_set(e, ERR_STORE, "the stored state was made with seed %llu, not %llu",
                       (unsigned long long)rec->seed, (unsigned long long)r->cfg.run.seed);
    int next = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(rec->step, NEXT_NAMES[i]) == 0) next = i;
    if (next < 0 || (next == NEXT_ALPHA) != (rec->have_losses != 0) ||
        rec->index >= (uint64_t)r->hp.E)
        return err_set(e, ERR_STORE, "the stored state's position (%s, index %llu) is inconsistent",
                       rec->step, (unsigned long long)rec->index);
    memset(&r->st, 0, sizeof r->st);
    r->st.M = rec->M;
    r->st.episode = rec->episode;
    r->st.free_steps = rec->free_steps;
    memcpy(r->st.alpha, rec->alpha, sizeof r->st.alpha);
    r->st.have_losses = rec->have_losses;
    if (rec->has_seen) memcpy(r->st.seen, rec->seen, sizeof r->st.seen);
    memcpy(r->st.loss_u, rec->loss_u, sizeof r->st.loss_u);
    memcpy(r->st.loss_w, rec->loss_w, sizeof r->st.loss_w);
    /* mid-episode: the probe's losses and the free sums, for the episode's row (a manifest
     * of an older version has none: that row then covers the steps after the resume) */
    memset(r->ep_loss, 0, sizeof r->ep_loss);
    r->ep_grad = 0;
    r->ep_n = 0;
    if (rec->has_episode) {
        memcpy(r->st.loss_u, rec->ep_loss_u, sizeof r->st.loss_u);
        memcpy(r->st.loss_w, rec->ep_loss_w, sizeof r->st.loss_w);
        memcpy(r->ep_loss, rec->ep_free_loss, sizeof r->ep_loss);
        r->ep_grad = rec->ep_grad;
        r->ep_n = (int)rec->ep_free_n;
    }
    for (int m = 0; m < rec->M; m++) {
        r->st.train[m] = (sampler_cursor){rec->cursors[m][0], rec->cursors[m][1]};
        r->st.val[m] = (sampler_cursor){rec->cursors[m][2], rec->cursors[m][3]};
    }
    r->seq = rec->seq;
    r->next = next;
    r->index = rec->index;
    r->alpha_records = rec->alpha_records;
    r->alpha_head = rec->alpha_head;
    return 0;
}

static int commit(run_ctx *r, int async, tdm_err *e) {
    if (r->rank != 0) return 0; /* every rank holds the same state; one writes it */
    rec_state rec;
    to_record(r, &rec);
    float *dev[CKPT_TENSORS] = {r->nets.u, r->nets.m, r->nets.v};
    return ckpt_snapshot(r->ck, &rec, &r->ck_io.io, dev, async, e); /* ck_io: set when ck was opened */
}

/* α* = the mean of α_{t+1} over the last 10 % of the episodes, from the α records after
 * the whole chain is verified (every record present and linked, the last one the one this
 * run's state vouches for): written to mixture.mp and printed. A damaged audit trail is
 * ERR_STORE naming the record and the repair. `again`: the run was finished before this
 * process started, so mixture.mp should be there already: one that is missing or differs
 * (damaged) is reported as it is rewritten. */
static int write_mixture(run_ctx *r, FILE *out, int again, tdm_err *e) {
    audit_chain c;
    int rc = audit_chain_read(r->store, &c, e);
    const char *url = store_url(r->store);
    if (!rc && (!c.ok || c.n != r->alpha_records || (c.n && !sha256_equal(&c.hash[c.n - 1], &r->alpha_head))))
        rc = err_set(e, ERR_STORE,
                     "%s: the α chain does not verify at the end of the run (%s): the audit "
                     "trail is damaged. Restore the record from a copy of the store, or run "
                     "`tandem repair %s` (a dry run; then --apply) to roll the run back to "
                     "before it",
                     url, !c.ok ? c.problem : "it does not end where the final state says", url);
    rec_mixture x;
    if (!rc) {
        audit_mixture(&c, 0.1, &x);
        for (int m = 0; m < x.M; m++) snprintf(x.names[m], REC_NAME_MAX, "%s", r->names[m]);
        size_t n;
        void *data = rec_mixture_encode(&x, &n);
        void *old = NULL;
        size_t on = 0;
        int got = again ? store_get(r->store, LEDGER_MIXTURE, &old, &on, NULL, e) : 0;
        /* the same α* stays as it is (also one written before mixture.mp was sealed) */
        int same = again && got == 0 && rec_mixture_same(old, on, &x);
        if (again && !same && (got == STORE_NOT_FOUND || got == 0))
            fprintf(stderr, "tandem: %s/mixture.mp %s; written again from the alpha chain\n", url,
                    got == STORE_NOT_FOUND ? "was missing" : "did not match the alpha chain (damaged)");
        free(old);
        if (got && got != STORE_NOT_FOUND) rc = got;
        else if (!same) rc = store_put(r->store, LEDGER_MIXTURE, data, n, STORE_OVERWRITE, e);
        free(data);
    }
    if (!rc) {
        r->have_mixture = 1;
        for (int m = 0; m < x.M && m < STEP_MAX_DOMAINS; m++) r->mixture[m] = x.alpha[m];
    }
    if (!rc && out) {
        fprintf(out, "alpha moved (episode 0 -> final mixture, mean of episodes %llu..%llu):\n",
                (unsigned long long)x.first, (unsigned long long)x.last);
        for (int m = 0; m < x.M; m++)
            fprintf(out, "  %-12s %.4f -> %.4f\n", x.names[m], c.rec[0].alpha[m], x.alpha[m]);
    }
    audit_chain_free(&c);
    return rc;
}

/* Attempt number for the lease record: Slurm's restart count when present. */
static uint64_t attempt_number(void) {
    const char *v = getenv("SLURM_RESTART_COUNT");
    return v ? strtoull(v, NULL, 10) : 0;
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

static int setup(run_ctx *r, const run_opts *o, tdm_err *e) {
    /* test-only: TANDEM_TEST_SIGNAL_AT=setup:1, a SIGTERM as start-up begins */
    if (testhook_hit("TANDEM_TEST_SIGNAL_AT", "setup")) raise(SIGTERM);
    int rc = config_load(&r->cfg, o->config_path, o->sets, o->nsets, e);
    if (rc) return rc;
    char url[CONFIG_STR_MAX];
    if (o->store_url) snprintf(url, sizeof url, "%s", o->store_url);
    else if (r->cfg.store[0]) snprintf(url, sizeof url, "%s", r->cfg.store);
    else default_store(o->config_path, url, sizeof url);
    if (o->store_suffix) { /* a sweep point: its own run under the study's store */
        size_t n = strlen(url);
        while (n > 0 && url[n - 1] == '/') url[--n] = '\0';
        if (n + 1 + strlen(o->store_suffix) >= sizeof url)
            return err_set(e, ERR_USAGE, "store %s: too long with the sweep point %s", url, o->store_suffix);
        snprintf(url + n, sizeof url - n, "/%s", o->store_suffix);
    }
    snprintf(r->cfg.store, sizeof r->cfg.store, "%s", url);
    if ((rc = model_source_preset_check(&r->cfg, e))) return rc;
    /* said before the store is made (the CUDA backend would refuse it at create, after) */
    if (model_source_hf_dir(&r->cfg) && r->cfg.run.device == CONFIG_DEVICE_CUDA &&
        r->cfg.run.precision == CONFIG_PRECISION_BF16)
        return err_set(e, ERR_USAGE, "run.precision = bf16: the CUDA backend runs the Llama / Qwen2 family "
                       "(model.init = %s) in fp32 only so far; set run.precision: fp32", r->cfg.model.init);
    if ((rc = select_backend(r, e))) return rc;
    /* the key names the file, so that a refusal points at the config line to fix */
    if ((rc = dataset_load(&r->ds, r->cfg.data.dataset, e))) return err_prefix(e, "data.dataset: ");
    model_config mc;
    if ((rc = model_source_config(&r->cfg, &r->ds, &mc, e))) return rc;
    if ((rc = model_layout_init(&r->lay, &mc, e))) return rc;
    fill_hparams(r);
    if ((rc = setup_caps(r, e))) return rc;
    if ((rc = step_check(&r->hp, &r->ds, e))) return rc;
    /* the parameter-sized buffers: 3 host copies for commits, and on the CPU the 6 of the
     * twins (u, m, v, w, u', grad); the workspace is checked by the backend */
    char what[160];
    snprintf(what, sizeof what, "a model of %zu parameters (%s = %d, %s = %d, vocab %d)", r->lay.numel,
             mc.arch == MODEL_ARCH_HF ? "layers" : "model.layers", mc.layers,
             mc.arch == MODEL_ARCH_HF ? "hidden_size" : "model.channels", mc.channels, mc.vocab);
    double copies = r->cfg.run.device == CONFIG_DEVICE_CPU ? 9 : 3;
    if ((rc = model_memory_check(copies * 4.0 * (double)r->lay.numel, what,
                                 mc.arch == MODEL_ARCH_HF ? "run it on a machine with more memory"
                                                          : "lower model.layers, model.channels or model.vocab",
                                 e)))
        return rc;
    for (int m = 0; m < dataset_n_domains(&r->ds); m++) r->names[m] = dataset_domain_name(&r->ds, m);
    if (r->rank == 0 && r->cfg.log.tensorboard[0] && !(r->tb = tfevents_open(r->cfg.log.tensorboard, e))) {
        /* asked for and impossible: said before the store is touched, naming the key */
        char why[sizeof e->msg];
        snprintf(why, sizeof why, "%s", e->msg);
        return err_set(e, ERR_USAGE, "log.tensorboard: %s (fix the path or leave the key empty)", why);
    }
    if (!(r->store = store_open(url, e))) return e->code;
    return 0;
}

/* The first step of every episode: the probe in a TANDEM run, a free step in a fixed one. */
static int first_step(const run_ctx *r) {
    return r->cfg.run.mode == CONFIG_MODE_FIXED ? NEXT_FREE : NEXT_PROBE;
}

/* A run.episodes changed since the state was written (allowed and recorded by run_config_open):
 * more episodes continue a run, finished or not; fewer end it at the new count if it has
 * not gone past it, else it is refused. The cosine schedule and the eg α rate follow the
 * new length from here on (the steps already taken keep the rates they had): said once. */
static int fit_episodes(run_ctx *r, tdm_err *e) {
    uint64_t T = (uint64_t)r->cfg.run.episodes, ep = r->st.episode;
    int at_boundary = r->next == NEXT_DONE || (r->next == first_step(r) && r->index == 0);
    if (ep > T || (ep == T && !at_boundary))
        return err_set(e, ERR_USAGE,
                       "run.episodes = %llu, but the run in %s has already done %llu episode%s%s: "
                       "it can be extended, not cut below where it is (set run.episodes >= %llu)",
                       (unsigned long long)T, store_url(r->store), (unsigned long long)ep,
                       ep == 1 ? "" : "s", at_boundary ? "" : " and is inside the next",
                       (unsigned long long)(at_boundary ? ep : ep + 1));
    if (r->next == NEXT_DONE && ep < T) {
        r->next = first_step(r);
        r->index = 0;
        if (r->progress != PROGRESS_QUIET)
            fprintf(stderr, "tandem: extending the finished run from %llu to %llu episodes; from "
                    "here on the learning rate follows the cosine over %llu episodes%s\n",
                    (unsigned long long)ep, (unsigned long long)T, (unsigned long long)T,
                    r->hp.fixed ? "" : " and the α step's rate is alpha_budget / run.episodes");
    } else if (r->next != NEXT_DONE && ep == T) {
        r->next = NEXT_DONE; /* shortened to exactly where it stands: ends with this state */
        r->shortened = 1;
    }
    return 0;
}

/* fit_episodes' refusal, before anything is pinned: a lowered run.episodes that the run
 * has already gone past is refused without recording the change (HEAD's state tells
 * where the run stands; without a readable HEAD, fit_episodes still refuses later). */
static int precheck_episodes(run_ctx *r, tdm_err *e) {
    rec_head h;
    rec_state s;
    int have = 0;
    tdm_err ignore;
    if (audit_head(r->store, &h, &s, &have, &ignore) || !have) return 0;
    uint64_t T = (uint64_t)r->cfg.run.episodes, ep = s.episode;
    int boundary = !strcmp(s.step, "done") ||
                   (!strcmp(s.step, r->cfg.run.mode == CONFIG_MODE_FIXED ? "free" : "probe") && s.index == 0);
    rec_state_free(&s);
    if (ep > T || (ep == T && !boundary))
        return err_set(e, ERR_USAGE,
                       "run.episodes = %llu, but the run in %s has already done %llu episode%s%s: "
                       "it can be extended, not cut below where it is (set run.episodes >= %llu); "
                       "nothing was changed",
                       (unsigned long long)T, store_url(r->store), (unsigned long long)ep,
                       ep == 1 ? "" : "s", boundary ? "" : " and is inside the next",
                       (unsigned long long)(boundary ? ep : ep + 1));
    return 0;
}

/* Sets a parameter-sized buffer of the backend to zeros, a MiB of zeros at a time. */
static int zero_tensor(run_ctx *r, float *buf, tdm_err *e) {
    size_t P = r->lay.numel, step = (size_t)1 << 18;
    float *z = calloc(step < P ? step : P ? P : 1, sizeof *z);
    if (!z) return err_set(e, ERR_INTERNAL, "out of memory");
    int rc = 0;
    for (size_t at = 0; !rc && at < P; at += step)
        rc = r->nets.ops->upload(r->nets.ctx, buf + at, z, P - at < step ? P - at : step, e);
    free(z);
    return rc;
}

/* The α a new run starts from (or, fixed, trains with), after uniform, natural or the file:
 * UniMax computed for the run's free-step budget, and any mixture moved into the caps' box
 * (said, since the run then starts from another mixture than the one asked for). */
static int initial_mixture(run_ctx *r, tdm_err *e) {
    step_hparams *h = &r->hp;
    int M = r->st.M;
    double tokens[STEP_MAX_DOMAINS], epochs[STEP_MAX_DOMAINS];
    for (int m = 0; m < M; m++) {
        tokens[m] = (double)dataset_tokens(&r->ds, m, SPLIT_TRAIN);
        epochs[m] = h->cap[m] / tokens[m]; /* INFINITY where uncapped */
    }
    int rc = 0;
    if (r->cfg.data.mixture == CONFIG_MIXTURE_UNIMAX) {
        double budget = (double)h->episodes * h->E * h->B * h->T;
        rc = mixture_unimax(tokens, M, budget, r->cfg.data.unimax_epochs, epochs, r->st.alpha, e);
        if (rc) return rc;
    }
    if (!h->has_caps) return 0;
    double in[STEP_MAX_DOMAINS];
    memcpy(in, r->st.alpha, (size_t)M * sizeof *in);
    rc = simplex_project_box(in, M, 0, h->alpha_hi, r->st.alpha, e);
    if (rc) return rc;
    double moved = 0;
    for (int m = 0; m < M; m++) moved = fmax(moved, fabs(in[m] - r->st.alpha[m]));
    if (moved > 1e-12 && r->progress != PROGRESS_QUIET && r->rank == 0)
        fprintf(stderr, "tandem: data.max_epochs: the %s mixture gives some domain more than its cap "
                        "allows over %d episodes; starting from the nearest mixture within the caps\n",
                r->cfg.data.mixture == CONFIG_MIXTURE_FILE ? "file's" : "starting", r->cfg.run.episodes);
    return 0;
}

/* Loads the newest verified state into the nets, or initialises a new run. */
static int load_or_init(run_ctx *r, int *resumed, tdm_err *e) {
    rec_state rec;
    int found = 0;
    int rc = ckpt_load(r->ck, &rec, &found, e);
    if (rc) return rc;
    const model_ops *ops = r->nets.ops;
    size_t P = r->lay.numel;
    *resumed = found;
    if (found) {
        rc = ckpt_check_chain(r->ck, rec.alpha_records, &rec.alpha_head, e);
        if (!rc) rc = ckpt_report_alpha_holes(r->ck, rec.alpha_records, e);
        if (!rc) rc = from_record(r, &rec, e);
        if (!rc) rc = fit_episodes(r, e);
        /* HEAD names the state the run goes on from (a finished run commits no more) */
        if (!rc) rc = ckpt_settle_head(r->ck, e);
        rec_state_free(&rec);
        /* streaming: the load wrote the tensors already */
        float *dev[CKPT_TENSORS] = {r->nets.u, r->nets.m, r->nets.v};
        for (int t = 0; !rc && !ckpt_streaming(r->ck) && t < CKPT_TENSORS; t++)
            rc = ops->upload(r->nets.ctx, dev[t], ckpt_host(r->ck, t), P, e);
        return rc;
    }
    step_state_init(&r->st, &r->ds, r->cfg.data.mixture == CONFIG_MIXTURE_NATURAL);
    if (r->cfg.data.mixture == CONFIG_MIXTURE_FILE &&
        (rc = mixture_file_read(r->cfg.data.mixture_file, &r->ds, r->st.alpha, e)))
        return rc;
    if ((rc = initial_mixture(r, e))) return rc;
    /* streaming has no host buffers: u's initial values pass through a buffer of its own
     * (one parameter-sized copy, before training starts, freed at once) */
    float *host = ckpt_host(r->ck, 0), *own = NULL;
    if (!host && !(host = own = malloc(P * sizeof *host)))
        return err_set(e, ERR_INTERNAL, "out of memory for the initial parameters (%zu)", P);
    rc = model_source_weights(&r->cfg, &r->lay, host, e);
    if (!rc) rc = ops->upload(r->nets.ctx, r->nets.u, host, P, e);
    free(own);
    /* AdamW's moments start at zero — written here, not assumed: a replay from the seed
     * comes after a load that streamed an unusable state's tensors into them */
    if (!rc) rc = zero_tensor(r, r->nets.m, e);
    if (!rc) rc = zero_tensor(r, r->nets.v, e);
    r->seq = 0;
    r->next = first_step(r);
    r->index = 0;
    r->alpha_records = 0;
    memset(&r->alpha_head, 0, sizeof r->alpha_head);
    return rc;
}

/* Seq of HEAD if readable, else 0: only labels a recorded config change. */
static uint64_t peek_head_seq(store *st) {
    tdm_err e;
    rec_head h;
    return ledger_read(st, REC_KIND_HEAD, LEDGER_HEAD, NULL, &h, &e) ? 0 : h.seq;
}

static int alpha_step(run_ctx *r, tdm_err *e) {
    rec_alpha a;
    memset(&a, 0, sizeof a);
    a.t = r->st.episode;
    a.M = r->st.M;
    memcpy(a.loss_u, r->st.loss_u, sizeof a.loss_u);
    memcpy(a.loss_w, r->st.loss_w, sizeof a.loss_w);
    a.has_seen = 1;
    memcpy(a.seen, r->st.seen, sizeof a.seen);
    step_hparams hp = r->hp;
    const char *perturb = getenv("TANDEM_TEST_PERTURB_EPISODE"); /* test-only switch */
    if (perturb && strtoull(perturb, NULL, 10) == r->st.episode) hp.alpha_perturb = 1e-9;
    int rc = step_alpha(&hp, &r->st, a.alpha, e);
    if (rc) return rc;
    memcpy(a.alpha_next, r->st.alpha, sizeof a.alpha_next);
    a.lr_alpha = step_alpha_rate(&hp);
    a.gamma = hp.gamma;
    a.seq = r->seq + 1;
    a.prev = r->alpha_head;
    a.time = now_wall();
    gethostname(a.host, sizeof a.host);
    a.host[sizeof a.host - 1] = '\0';
    a.attempt = attempt_number();
    sha256_digest h = {0};
    rc = r->rank == 0 ? ckpt_alpha_record(r->ck, &a, &h, e) : 0;
    if (rc) return rc;
    r->alpha_head = h;
    r->alpha_records = r->st.episode + 1;
    return 0;
}

/* Test-only: TANDEM_TEST_SIGNAL_AT=kind:n raises SIGTERM as the n-th step of that kind
 * (probe, alpha, free) starts, so the suite can stop a run inside a chosen step kind. */
static void test_signal_hook(const char *kind) {
    if (testhook_hit("TANDEM_TEST_SIGNAL_AT", kind)) raise(SIGTERM);
    /* TANDEM_TEST_KILL_AT=free-step:n: a SIGKILL as the n-th free step starts (any rank) */
    char label[32];
    snprintf(label, sizeof label, "%s-step", kind);
    testhook_kill_at(label);
    /* TANDEM_TEST_STEP_DELAY_MS slows every step, so that two runs overlap in time */
    testhook_sleep("TANDEM_TEST_STEP_DELAY_MS");
}

static int agree(run_ctx *r, int rc, const char *what, tdm_err *e);

/* The grace period (seconds from the stop signal to SIGKILL) the scheduler set in the
 * environment (TANDEM_GRACE_S, which the rendered Slurm scripts and Kubernetes Jobs set),
 * or 0 when unknown: then a stop always commits a full state. */
static double env_grace(void) {
    const char *v = getenv("TANDEM_GRACE_S");
    double g = 0;
    return v && !args_parse_double(v, &g) && g > 0 ? g : 0;
}

/* Headroom on the estimate (a commit can be slower than the last one) and time kept for
 * releasing the lease and exiting. */
#define GRACE_SAFETY 1.5
#define GRACE_MARGIN_S 2.0
#define GRACE_SETTLE_S 5.0

/* The grace period of this run (checkpoint.grace_s, else TANDEM_GRACE_S), 0 when unknown. */
static double grace_of(const run_ctx *r) {
    return r->cfg.checkpoint.grace_s > 0 ? r->cfg.checkpoint.grace_s : env_grace();
}

/* Seconds since the first stop signal; 0 when none came. */
static double since_signal(void) {
    return g_signal_at.tv_sec || g_signal_at.tv_nsec
               ? now_mono() - (g_signal_at.tv_sec + g_signal_at.tv_nsec * 1e-9)
               : 0;
}

/* ckpt_set_stop_check for streamed commits, which the training loop waits for: once a stop
 * signal has come, a commit whose rest would outlast the grace period (with the same
 * headroom as safe_point's) is given up, so that the run still exits 75 in time instead of
 * being killed in the middle of it. Without a known grace period a stop always commits. */
static int stream_stop_check(void *arg, double seconds_left) {
    const run_ctx *r = arg;
    double grace = grace_of(r);
    if (!g_signal || grace <= 0) return 0;
    return seconds_left * GRACE_SAFETY > grace - since_signal() - GRACE_MARGIN_S;
}

/* Commits at a safe point on a signal and returns 75, or returns 0 to go on. */
static int safe_point(run_ctx *r, tdm_err *e) {
    int stop = g_signal != 0;
    /* a signal that reached any rank stops all of them here, at the same position */
    int rc0 = comm_any(r->comm, stop, &stop, e);
    if (rc0) return rc0;
    if (!stop) return 0;
    if (!g_signal) g_signal = SIGTERM; /* another rank's signal */
    /* the grace period: a full commit only if the measured throughput says it fits in
     * what is left of it; otherwise the last full state stands (the α records up to now are
     * already in the store) and the resume replays from it, bit-exact */
    double grace = grace_of(r), since = since_signal();
    double inflight = 0, need = r->ck ? ckpt_commit_estimate(r->ck, &inflight) : 0;
    double left = grace - since - GRACE_MARGIN_S;
    if (grace > 0 && r->ck && inflight > 0 && left > 0 && !ckpt_rate_measured(r->ck)) {
        /* a first commit in flight, judged by the guess alone: let it show its pace, or
         * land, for a quarter of what is left (at most GRACE_SETTLE_S) before judging.
         * Seen on an H100 node: a 1B state's first commit (11 GB at 1.4 GB/s, 8 s) given
         * up at 30 s of grace because the guess (50 MB/s) said 433 s. */
        ckpt_settle(r->ck, left / 4 < GRACE_SETTLE_S ? left / 4 : GRACE_SETTLE_S);
        need = ckpt_commit_estimate(r->ck, &inflight);
        since = since_signal();
        left = grace - since - GRACE_MARGIN_S;
    }
    int full = grace <= 0 || need * GRACE_SAFETY <= left;
    char msg[400];
    int rc = 0;
    if (full) {
        snprintf(msg, sizeof msg, "tandem: signal %d: committing at run position %llu and exiting 75 "
                 "(requeue to resume)", (int)g_signal, (unsigned long long)r->seq);
        progress_event(stderr, r->progress, "signal", msg);
        rc = commit(r, 0, e);
    } else {
        /* the commit in flight first: it lands if it fits (then it is the state that
         * stands), else it is given up; the message names the state a resume starts from */
        int landed = 0;
        if (r->ck) {
            if (inflight > 0 && inflight * GRACE_SAFETY <= left) landed = (rc = ckpt_wait(r->ck, e)) == 0;
            else if (inflight > 0) ckpt_cancel(r->ck);
            else rc = ckpt_wait(r->ck, e); /* none in flight: nothing to wait for */
        }
        uint64_t last = r->ck ? ckpt_last_commit_seq(r->ck) : 0;
        snprintf(msg, sizeof msg, "tandem: signal %d: a full commit would take about %.1f s, more "
                 "than the %.1f s left of the %.0f s grace period: the last full state (run "
                 "position %llu%s) stands, with the α records up to now; exiting 75 (the resume "
                 "replays from there, bit-exact)",
                 (int)g_signal, need, left > 0 ? left : 0, grace,
                 (unsigned long long)(last == UINT64_MAX ? 0 : last),
                 landed ? ", the commit in flight, let land" : "");
        /* said even with --quiet: the state a resume starts from is not the newest */
        if (r->progress == PROGRESS_QUIET) fprintf(stderr, "%s\n", msg);
        else progress_event(stderr, r->progress, "signal", msg);
    }
    if (!rc && r->ck) rc = ckpt_release(r->ck, e);
    /* the others exit 75 only when rank 0's commit holds: "requeue me" must be true */
    rc = agree(r, rc, "commit at the stop", e);
    return rc ? rc : RUN_EXIT_REQUEUE;
}

static int loop(run_ctx *r, tdm_err *e) {
    const config *c = &r->cfg;
    int M = r->st.M, rc = 0;
    uint64_t T = (uint64_t)c->run.episodes, E = (uint64_t)c->tandem.E;
    uint64_t steps_total = T * (r->hp.fixed ? E : E + 2);
    double lr_last = 0;
    tdm_err te = {0};
    double t_episode = now_mono(), t_start = t_episode;
    uint64_t seq_start = r->seq;
    long tokens = 0;
    while (r->next != NEXT_DONE) {
        if ((rc = safe_point(r, e))) return rc;
        if (r->ck && c->checkpoint.every_seconds > 0 &&
            now_mono() - ckpt_last_commit_time(r->ck) >= c->checkpoint.every_seconds &&
            ckpt_last_commit_seq(r->ck) != r->seq)
            if ((rc = commit(r, 1, e))) return rc;
        test_signal_hook(NEXT_NAMES[r->next]);
        switch (r->next) {
        case NEXT_PROBE:
            rc = step_sync(&r->nets, e);
            /* one rank alone must not abandon a probe the others go on with: with several
             * ranks a signal waits for the safe point after the probe */
            if (!rc) rc = step_probe(&r->hp, &r->ds, &r->nets, &r->st,
                                     comm_world(r->comm) > 1 ? NULL : &g_signal, e);
            if (rc == STEP_ABANDONED) continue; /* the safe point commits and exits */
            if (rc) return rc;
            tokens += ((long)r->hp.K * (2 * r->hp.B + r->hp.V) + 2L * r->hp.B * r->hp.eval_batches) * r->hp.T;
            r->next = NEXT_ALPHA;
            break;
        case NEXT_ALPHA:
            if ((rc = alpha_step(r, e))) return rc;
            r->next = NEXT_FREE;
            r->index = 0;
            break;
        case NEXT_FREE: {
            step_report rep;
            if ((rc = step_free(&r->hp, &r->ds, &r->nets, &r->st, &rep, e))) return rc;
            tokens += rep.tokens;
            double mix = 0;
            for (int m = 0; m < M; m++) r->ep_loss[m] += rep.loss[m], mix += r->st.alpha[m] * rep.loss[m];
            if (r->step_n == 0) r->step_first = r->st.free_steps;
            if (r->step_n < METRICS_MAX_STEPS) r->step_loss[r->step_n++] = mix;
            r->ep_grad += rep.grad_norm;
            lr_last = rep.lr;
            r->ep_n++;
            if (++r->index == E) {
                double mean[STEP_MAX_DOMAINS];
                int loss_n = r->ep_n; /* E, or fewer after resuming an older version's state */
                for (int m = 0; m < M; m++) mean[m] = r->ep_loss[m] / loss_n, r->ep_loss[m] = 0;
                rec_metrics row = {.t = r->st.episode, .seq = r->seq + 1, .M = M,
                                   .has_probe = !r->hp.fixed, .lr = lr_last,
                                   .lr_alpha = r->hp.fixed ? 0 : step_alpha_rate(&r->hp),
                                   .grad_norm = r->ep_grad / loss_n, .free_steps = (uint64_t)loss_n};
                r->ep_grad = 0;
                r->ep_n = 0;
                r->index = 0;
                r->st.episode++;
                r->next = r->st.episode == T ? NEXT_DONE : first_step(r);
                double now = now_mono(), dt = now - t_episode;
                double last = r->ck ? ckpt_last_commit_time(r->ck) : 0;
                double per_step = (now - t_start) / (double)(r->seq + 1 - seq_start);
                progress_line pl = {.episode = r->st.episode, .episodes = T, .seq = r->seq + 1,
                                    .M = M, .names = r->names, .loss = mean,
                                    .loss_u = r->st.loss_u, .loss_w = r->st.loss_w,
                                    .alpha = r->st.alpha,
                                    .tokens_per_s = dt > 0 ? (double)tokens / dt : 0,
                                    .since_commit_s = last > 0 ? now - last : -1,
                                    .eta_s = per_step * (double)(steps_total - (r->seq + 1))};
                progress_print(stderr, r->progress, &pl);
                report_commit(r);
                /* the episode's row, before any state after it is committed (metrics.h) */
                memcpy(row.loss, mean, sizeof row.loss);
                memcpy(row.loss_u, r->st.loss_u, sizeof row.loss_u);
                memcpy(row.loss_w, r->st.loss_w, sizeof row.loss_w);
                memcpy(row.alpha, r->st.alpha, sizeof row.alpha);
                row.has_seen = 1;
                for (int m = 0; m < M; m++) {
                    row.seen[m] = r->st.seen[m];
                    row.epochs[m] = r->st.seen[m] / (double)dataset_tokens(&r->ds, m, SPLIT_TRAIN);
                }
                row.n_steps = r->step_n;
                row.step_first = r->step_first;
                memcpy(row.step_loss, r->step_loss, (size_t)r->step_n * sizeof *r->step_loss);
                r->step_n = 0;
                row.tokens_per_s = pl.tokens_per_s;
                row.episode_s = dt;
                row.commit_s = r->ck ? ckpt_last_commit_seconds(r->ck) : 0;
                row.time = now_wall();
                gethostname(row.host, sizeof row.host);
                row.host[sizeof row.host - 1] = '\0';
                row.attempt = attempt_number();
                /* log.val_every: u's validation loss, as `tandem eval --split val` measures a
                 * state (rank 0 alone writes rows; a forward pass changes no state) */
                if (r->rank == 0 && c->log.val_every > 0 && !r->val_off &&
                    (r->st.episode % (uint64_t)c->log.val_every == 0 || r->st.episode == T)) {
                    uint64_t vt[STEP_MAX_DOMAINS];
                    tdm_err ve;
                    if (eval_params(r->nets.ops, r->nets.ctx, r->nets.u, &r->ds, SPLIT_VAL, r->hp.B, r->hp.T,
                                    (uint64_t)c->log.val_tokens, row.val, vt, &ve) == 0) {
                        row.has_val = 1;
                        row.val_tokens = vt[0];
                        for (int m = 1; m < M; m++)
                            if (vt[m] < row.val_tokens) row.val_tokens = vt[m];
                    } else {
                        fprintf(stderr, "tandem: log.val_every: %s; the run goes on without it\n", ve.msg);
                        r->val_off = 1;
                    }
                }
                int fresh = 0;
                if (r->rank == 0 && r->ck && (rc = ckpt_metrics_record(r->ck, &row, &fresh, e))) return rc;
                /* the live TensorBoard log: rows this life wrote (a replayed episode's row
                 * was logged by the life that wrote it) */
                if (fresh && r->tb && metrics_log_tfevents(r->tb, &row, r->names, &te)) {
                    fprintf(stderr, "tandem: log.tensorboard: %s; the run goes on without it "
                            "(tandem metrics --tensorboard writes the history later)\n", te.msg);
                    tfevents_close(r->tb);
                    r->tb = NULL;
                }
                t_episode = now_mono(); /* the next episode's time, without this one's row */
                tokens = 0;
            }
            break;
        }
        default:
            return err_set(e, ERR_INTERNAL, "bad run position");
        }
        r->seq++;
        if (r->next == first_step(r) && r->index == 0 && c->checkpoint.every_episodes > 0 &&
            r->st.episode % (uint64_t)c->checkpoint.every_episodes == 0)
            if ((rc = commit(r, 1, e))) return rc;
    }
    /* the end: a final synchronous commit of the finished state */
    return commit(r, 0, e);
}

/* What every rank needs of rank 0's load: the position and the small state (the
 * tensors follow separately). Same binary on every rank, so the bytes are the layout. */
typedef struct rank0_view {
    int rc, next, resumed;
    uint64_t seq, index, alpha_records;
    step_state st;
    sha256_digest alpha_head;
} rank0_view;

/* Floats per piece of the state's broadcast to the other ranks (64 MiB). */
#define BCAST_PIECE ((size_t)16 << 20)

/* Rank 0 pins the run, takes the lease and loads (or initialises) the state; then every
 * rank receives the position, the step state and u, m, v from it. Collective. */
static int load_everywhere(run_ctx *r, const run_opts *o, run_config_result *pin, int *resumed,
                           tdm_err *e) {
    int rc = 0;
    if (r->rank == 0) rc = precheck_episodes(r, e);
    if (r->rank == 0 && !rc) {
        int defaulted = o->store_defaulted || (!o->store_url && !r->cfg.store[0]);
        rc = run_config_open(r->store, &r->cfg, r->names, dataset_n_domains(&r->ds), o->allow, o->nallow,
                             defaulted, pin, e);
        /* the model.init folder is the one the run started from (pinned by content) */
        if (!rc) rc = model_source_fingerprint(r->store, &r->cfg, 1, e);
        uint64_t chunk = (uint64_t)r->cfg.checkpoint.chunk_kib << 10;
        float *dev[CKPT_TENSORS] = {r->nets.u, r->nets.m, r->nets.v};
        ckpt_model_io_init(&r->ck_io, r->nets.ops, r->nets.ctx);
        if (!rc && !(r->ck = r->streaming ? ckpt_model_open_stream(r->store, &r->lay, chunk, &r->ck_io, dev, e)
                                          : ckpt_model_open(r->store, &r->lay, chunk, e)))
            rc = e->code;
        if (!rc) rc = ckpt_acquire(r->ck, attempt_number(), e);
        /* a config change is recorded by the writer that holds the lease, at HEAD as it
         * stands now that no other writer can move it */
        if (!rc) rc = run_config_record_change(r->store, pin, peek_head_seq(r->store), e);
        if (!rc) ckpt_set_generation(r->ck, pin->nchanges, pin->change_seq);
        if (!rc) ckpt_set_retention(r->ck, r->cfg.checkpoint.keep);
        if (!rc && r->streaming) ckpt_set_stop_check(r->ck, stream_stop_check, r);
        if (!rc) rc = load_or_init(r, resumed, e);
        /* Resuming at or before the newest config change: what lies beyond this state was
         * computed under the old config. Checked on every resume, not only when the change
         * is recorded, so that a kill between recording and cleaning up is finished later. */
        if (!rc && pin->nchanges && r->seq <= pin->change_seq) {
            int moved = 0;
            rc = ckpt_drop_states_after(r->ck, r->seq, e);
            if (!rc) rc = ckpt_supersede_alpha_after(r->ck, r->seq, pin->nchanges - 1, &moved, e);
            if (!rc && moved)
                fprintf(stderr, "tandem: %d alpha records computed under the previous config after "
                        "run position %llu set aside under superseded/%llu/alpha/ (the replay "
                        "writes new ones)\n", moved, (unsigned long long)r->seq,
                        (unsigned long long)(pin->nchanges - 1));
        }
    }
    if (comm_world(r->comm) == 1) return rc;
    rank0_view v = {0};
    if (r->rank == 0)
        v = (rank0_view){.rc = rc, .next = r->next, .resumed = *resumed, .seq = r->seq,
                         .index = r->index, .alpha_records = r->alpha_records, .st = r->st,
                         .alpha_head = r->alpha_head};
    tdm_err ce = {0};
    int crc = comm_bcast(r->comm, &v, sizeof v, &ce);
    if (!crc && v.rc && r->rank != 0)
        crc = err_set(&ce, v.rc, "rank 0 could not load the run (exit %d; its log says why)", v.rc);
    if (!crc && v.rc == 0) {
        r->next = v.next, *resumed = v.resumed, r->seq = v.seq, r->index = v.index;
        r->alpha_records = v.alpha_records, r->st = v.st, r->alpha_head = v.alpha_head;
        /* in pieces of at most BCAST_PIECE floats: no rank holds a host copy of the state */
        size_t P = r->lay.numel, piece = P < BCAST_PIECE ? P : BCAST_PIECE;
        float *host = malloc(piece * sizeof *host);
        float *dev[CKPT_TENSORS] = {r->nets.u, r->nets.m, r->nets.v};
        if (!host) crc = err_set(&ce, ERR_INTERNAL, "out of memory");
        for (int t = 0; !crc && t < CKPT_TENSORS; t++)
            for (size_t off = 0; !crc && off < P; off += piece) {
                size_t n = P - off < piece ? P - off : piece;
                if (r->rank == 0) crc = r->nets.ops->download(r->nets.ctx, host, dev[t] + off, n, &ce);
                if (!crc) crc = comm_bcast(r->comm, host, n * sizeof *host, &ce);
                if (!crc && r->rank != 0)
                    crc = r->nets.ops->upload(r->nets.ctx, dev[t] + off, host, n, &ce);
            }
        free(host);
    }
    if (rc) return rc;
    if (crc) *e = ce;
    return crc;
}

/* Collective: every rank learns whether any rank failed (`rc` is this rank's result)
 * and fails too, so that none goes on into a collective the failed one never enters. */
static int agree(run_ctx *r, int rc, const char *what, tdm_err *e) {
    if (!r->comm || comm_world(r->comm) == 1) return rc;
    int bad = 0;
    tdm_err ce = {0};
    int failed = rc != 0 && rc != RUN_EXIT_REQUEUE;
    if (comm_any(r->comm, failed, &bad, &ce)) return rc ? rc : (*e = ce, ce.code);
    /* exit 1, not 2: for a scheduler this rank's failure is retryable (the other rank's
     * own exit code says what happened) */
    if (bad && !failed) return err_set(e, ERR_INTERNAL, "another rank failed to %s (its log says why)", what);
    return rc;
}

/* The memory estimate (runner/memplan.h), before the workspace exists: printed by rank 0,
 * checked by every rank against its own GPU and host; decides checkpoint.snapshot = auto. */
static int plan_memory(run_ctx *r, tdm_err *e) {
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

int run_main(const run_opts *o, tdm_err *e) {
    run_ctx *r = calloc(1, sizeof *r);
    if (!r) return err_set(e, ERR_INTERNAL, "out of memory");
    r->progress = o->progress;
    /* main() installed the handlers before parsing anything; again here for callers that
     * are not main (tests): a preemption during setup must not kill us (or, as PID 1 in a
     * container, be ignored until the grace period ends) — it is honoured as soon as
     * there is a state to commit */
    run_signals_install();
    int rc = 0;
    if (!(r->comm = comm_open(e))) rc = e->code;
    r->rank = comm_rank(r->comm);
    if (r->rank != 0) r->progress = PROGRESS_QUIET; /* one voice: rank 0's */
    if (!rc) rc = setup(r, o, e);
    if (!rc && comm_world(r->comm) > 1) {
        if (r->hp.B < comm_world(r->comm))
            rc = err_set(e, ERR_USAGE, "train.batch = %d is smaller than the %d ranks: every "
                         "rank needs at least one row of the global batch",
                         r->hp.B, comm_world(r->comm));
    }
    /* a rank that failed to set up must not leave the others waiting in a collective:
     * every rank reaches each agreement, whatever happened before it */
    rc = agree(r, rc, "set up", e);
    /* GPU ranks: one GPU each, gradients summed by NCCL (before the workspace exists);
     * collective, and it agrees on its own local steps before NCCL's */
    if (!rc && r->cfg.run.device == CONFIG_DEVICE_CUDA) rc = comm_enable_device(r->comm, e);
    run_config_result pin = {0};
    if (!rc) rc = plan_memory(r, e);
    if (!rc) rc = step_nets_create(&r->nets, r->ops, &r->lay, &r->hp, r->st.M ? r->st.M : dataset_n_domains(&r->ds), r->cfg.run.threads, e);
    r->nets.comm = r->comm;
    /* the staging buffer of the host all-reduce, now: a failure here is agreed on below,
     * not discovered by one rank inside a collective */
    if (!rc && comm_world(r->comm) > 1 && !comm_has_device(r->comm) &&
        !(r->nets.host_grad = malloc(r->lay.numel * sizeof *r->nets.host_grad)))
        rc = err_set(e, ERR_INTERNAL, "out of memory for the gradient all-reduce");
    rc = agree(r, rc, "create its model workspace", e);
    int resumed = 0;
    if (!rc) rc = load_everywhere(r, o, &pin, &resumed, e);
    /* A stop signal during start-up is always a requeue: a read the signal interrupted (a
     * config or shard on NFS or FUSE: EINTR), or anything else that failed meanwhile, is
     * not a config error to fail the job for good on (exit 2 would, under a Job's
     * podFailurePolicy); a real error shows again at the next start. Nothing was written
     * but what a commit writes whole. */
    if (rc && rc != RUN_EXIT_REQUEUE && rc != ERR_NONDET && rc != ERR_DIVERGED && run_signal_pending()) {
        if (r->rank == 0 && r->progress != PROGRESS_QUIET)
            fprintf(stderr, "tandem: stopped by a signal during start-up (%s); nothing was lost: run "
                    "again to resume\n", e->msg);
        rc = RUN_EXIT_REQUEUE;
    }
    r->reported_commit = r->ck ? ckpt_last_commit_seq(r->ck) : UINT64_MAX; /* news from here on */
    if (!rc) {
        char msg[512];
        if (r->shortened)
            snprintf(msg, sizeof msg, "tandem: ending the run in %s (%s) at episode %llu: run.episodes "
                     "was lowered to where it stands", store_url(r->store), pin.run_id,
                     (unsigned long long)r->st.episode);
        else if (r->next == NEXT_DONE)
            snprintf(msg, sizeof msg, "tandem: the run in %s (%s) is already finished", store_url(r->store), pin.run_id);
        else if (resumed)
            snprintf(msg, sizeof msg, "tandem: resuming %s in %s at episode %llu/%d (%s step, run position %llu)",
                     pin.run_id, store_url(r->store), (unsigned long long)r->st.episode,
                     r->cfg.run.episodes, NEXT_NAMES[r->next], (unsigned long long)r->seq);
        else if (r->ck && ckpt_seed_replay(r->ck))
            snprintf(msg, sizeof msg, "tandem: replaying %s in %s from its seed (%d episodes), bit for "
                     "bit, checked against its alpha records", pin.run_id, store_url(r->store),
                     r->cfg.run.episodes);
        else if (r->cfg.run.mode == CONFIG_MODE_FIXED)
            snprintf(msg, sizeof msg, "tandem: new run %s in %s: %d episodes of E=%d free steps on a "
                     "fixed mixture, %zu parameters, %d domains",
                     pin.run_id, store_url(r->store), r->cfg.run.episodes, r->cfg.tandem.E,
                     r->lay.numel, r->st.M);
        else
            snprintf(msg, sizeof msg, "tandem: new run %s in %s: %d episodes of K=%d probe + E=%d free steps, %zu parameters, %d domains",
                     pin.run_id, store_url(r->store), r->cfg.run.episodes, r->cfg.tandem.K,
                     r->cfg.tandem.E, r->lay.numel, r->st.M);
        progress_event(stderr, r->progress, "start", msg);
        if (comm_world(r->comm) > 1 && r->progress != PROGRESS_QUIET)
            fprintf(stderr, "tandem: %d ranks (%s, %s transport); the global batch of %d rows is "
                    "split across them\n", comm_world(r->comm), comm_source(r->comm),
                    comm_backend(r->comm), r->hp.B);
    }
    int was_done = !rc && r->next == NEXT_DONE;
    if (!rc && r->next != NEXT_DONE) rc = loop(r, e); /* loop's first safe point sees a pending signal */
    else if (!rc && r->shortened && r->rank == 0) rc = commit(r, 0, e); /* the done state */
    int finished_loop = rc == 0; /* every rank is here then (failures abort below) */
    if (r->rank == 0) {
        if (!rc) rc = ckpt_wait(r->ck, e);
        /* the closing text on stdout; with --json stdout holds JSON alone (the end event
         * carries the mixture) */
        int summary = r->progress == PROGRESS_TEXT && !o->no_summary;
        /* a missing mixture.mp is news only when the finished state was committed whole
         * (HEAD named it): a kill between its manifest and HEAD leaves no mixture yet, and
         * tandem verify (which goes by HEAD) calls neither a fault */
        if (!rc && !r->hp.fixed)
            rc = write_mixture(r, summary ? stdout : NULL, was_done && ckpt_head_named_loaded(r->ck), e);
        if (!rc && r->hp.fixed && summary) {
            printf("trained with the fixed mixture:");
            for (int m = 0; m < r->st.M; m++) printf(" %s %.4f", r->names[m], r->st.alpha[m]);
            printf("\n");
        }
        if (!rc) rc = ckpt_release(r->ck, e);
        report_commit(r);
    }
    /* A run that fails (exit 1, 3, 4, 5) ends here, not killed: it gives the lease back, so
     * that status and gc do not see a holder that is gone. A writer that was fenced out
     * finds the lease no longer its own and writes nothing. */
    if (rc && rc != RUN_EXIT_REQUEUE && r->rank == 0 && r->ck && ckpt_epoch(r->ck)) {
        tdm_err ignore;
        ckpt_wait(r->ck, &ignore);
        ckpt_release(r->ck, &ignore);
    }
    /* the other ranks succeed only when rank 0's last commit and mixture hold */
    if (finished_loop) rc = agree(r, rc, "finish the run", e);
    if (r->ck) {
        tdm_err ignore;
        ckpt_wait(r->ck, &ignore);
        ckpt_close(r->ck);
    }
    /* A failed rank ends the job (the others may wait in a collective); a finished or
     * requeued run ends with all ranks together. */
    if (rc && rc != RUN_EXIT_REQUEUE && comm_world(r->comm) > 1) {
        fprintf(stderr, "tandem run (rank %d): %s\n", r->rank, e->msg);
        comm_abort(r->comm, rc);
    }
    if (comm_close(r->comm) && (!rc || rc == RUN_EXIT_REQUEUE))
        rc = err_set(e, ERR_INTERNAL, "another rank went away instead of finishing with this one "
                     "(its log says why)");
    if (r->rank == 0 && r->progress == PROGRESS_JSON) {
        if (rc && rc != RUN_EXIT_REQUEUE) progress_error(r->progress, rc, e->msg);
        progress_end(r->progress, rc, r->st.episode, (uint64_t)(r->cfg.run.episodes > 0 ? r->cfg.run.episodes : 0),
                     r->seq, r->st.M, r->names, r->have_mixture ? r->mixture : NULL);
    }
    run_config_result_free(&pin);
    tfevents_close(r->tb);
    if (r->nets.ctx) step_nets_destroy(&r->nets);
    if (r->store) store_close(r->store);
    model_layout_free(&r->lay);
    dataset_free(&r->ds);
    free(r);
    return rc;
}
