/* run_load.c — the start of a run: the ledger opened (lease, config change recorded),
 * the newest verified state loaded or a new run initialised, and every rank given rank
 * 0's state. */
#include "runner/run_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/domain_caps.h"
#include "ledger/audit.h"
#include "ledger/ckpt.h"
#include "ledger/keys.h"
#include "ledger/read.h"
#include "report/progress.h"
#include "runner/mixfile.h"
#include "runner/data_source.h"
#include "runner/model_source.h"
#include "steps/mixture.h"
#include "steps/simplex.h"
#include "util/args.h"
#include "util/testhook.h"

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

int run_start_alpha(const run_ctx *r, int M, double *alpha, int *moved, tdm_err *e) {
    const step_hparams *h = &r->hp;
    double tokens[STEP_MAX_DOMAINS], epochs[STEP_MAX_DOMAINS];
    for (int m = 0; m < M; m++) {
        tokens[m] = (double)dataset_tokens(&r->ds, m, SPLIT_TRAIN);
        epochs[m] = h->cap[m] / tokens[m]; /* INFINITY where uncapped */
    }
    int rc = 0;
    if (moved) *moved = 0;
    if (r->cfg.data.mixture == CONFIG_MIXTURE_UNIMAX) {
        double budget = h->plan_tokens; /* episodes x E x B x T (fill_hparams) */
        /* a DMO starts where repetition still pays (tandem.start_epochs), the UniMax
         * baseline (a fixed run) plans only the nearly free repeats (data.unimax_epochs) */
        double N = r->cfg.data.unimax_epochs;
        if (!h->fixed && r->cfg.tandem.start_epochs > 0) N = r->cfg.tandem.start_epochs;
        rc = mixture_unimax(tokens, M, budget, N, epochs, alpha, e);
        if (rc) return rc;
    }
    if (!h->has_caps) return 0;
    double in[STEP_MAX_DOMAINS], hi[STEP_MAX_DOMAINS];
    memcpy(in, alpha, (size_t)M * sizeof *in);
    /* a fixed run's domain of weight 0 (a mixture file's) stays at 0: the projection into
     * the caps spread the others' excess onto it, and the run trained on a domain its
     * mixture leaves out (a hunt of odd configs; fixed_caps_fit, run first, refuses caps
     * the other domains cannot hold) */
    for (int m = 0; m < M; m++) hi[m] = h->fixed && !(in[m] > 0) ? 0 : h->alpha_hi[m];
    rc = simplex_project_box(in, M, 0, hi, alpha, e);
    if (rc) return rc;
    double most = 0;
    for (int m = 0; m < M; m++) most = fmax(most, fabs(in[m] - alpha[m]));
    if (moved) *moved = most > 1e-12;
    return 0;
}

/* The α a new run starts from (run_start_alpha on r->st), said when the caps moved it
 * (the run then starts from another mixture than the one asked for). */
static int initial_mixture(run_ctx *r, tdm_err *e) {
    int moved = 0, rc = run_start_alpha(r, r->st.M, r->st.alpha, &moved, e);
    if (rc) return rc;
    if (moved && r->progress != PROGRESS_QUIET && r->rank == 0)
        fprintf(stderr, "tandem: data.max_epochs: the %s mixture gives some domain more than its cap "
                        "allows over %d episodes; starting from the nearest mixture within the caps\n",
                r->cfg.data.mixture == CONFIG_MIXTURE_FILE ? "file's" : "starting", r->cfg.run.episodes);
    return 0;
}

/* A fixed run's caps (data.max_epochs) against its mixture: a domain of weight 0 is never
 * trained on, so only the domains with α > 0 hold the run's rows (in whole rows of
 * train.seq under sample mixing). setup_caps counted every domain, and the batches then
 * put the rows the weighted domains could not hold into the weight-0 one. ERR_USAGE
 * naming the caps, the mixture and the domains left out; 0 when nothing is left out. */
static int fixed_caps_fit(const run_ctx *r, tdm_err *e) {
    const step_hparams *h = &r->hp;
    int M = r->st.M;
    if (!h->fixed || !h->has_caps) return 0;
    double epochs[STEP_MAX_DOMAINS];
    char zero[256] = "";
    size_t at = 0;
    for (int m = 0; m < M; m++) {
        epochs[m] = h->cap[m] / (double)dataset_tokens(&r->ds, m, SPLIT_TRAIN); /* ∞: none */
        if (r->st.alpha[m] > 0) continue;
        epochs[m] = 0;
        if (at < sizeof zero)
            at += (size_t)snprintf(zero + at, sizeof zero - at, "%s%s", at ? ", " : "",
                                   dataset_domain_name(&r->ds, m));
    }
    if (!zero[0]) return 0;
    double steps = (double)h->episodes * h->E;
    int rc = domain_caps_fit(r->cfg.data.max_epochs, &r->ds, epochs, steps * h->B, h->T,
                             h->mixing == STEP_MIX_SAMPLE, "run.episodes x tandem.E x train.batch x train.seq",
                             NULL, e);
    if (rc)
        err_prefix(e, "the mixture (data.mixture = %s) gives weight 0 to %s, which is never trained on, so only "
                      "the other domains' caps count: ",
                   r->cfg.data.mixture == CONFIG_MIXTURE_FILE ? "file" : "a fixed mixture", zero);
    return rc;
}

/* Loads the newest verified state into the nets (ledger_resume, ledger_start), or
 * initialises a new run. */
static int load_or_init(run_ctx *r, const ckpt_gens *g, ledger_resumed *res, tdm_err *e) {
    rec_state rec;
    int rc = ledger_resume(r->ld, g, &rec, res, e);
    if (rc) return rc;
    if (res->found) {
        rc = run_from_record(r, &rec, e);
        if (!rc) rc = run_fit_episodes(r, e);
        rec_state_free(&rec);
        return rc ? rc : ledger_start(r->ld, r->seq, e);
    }
    const model_ops *ops = r->nets.ops;
    size_t P = r->lay.numel;
    step_state_init(&r->st, &r->ds, r->cfg.data.mixture == CONFIG_MIXTURE_NATURAL);
    if (r->cfg.data.mixture == CONFIG_MIXTURE_FILE &&
        (rc = mixture_file_read(r->cfg.data.mixture_file, &r->ds, r->st.alpha, e)))
        return rc;
    /* a file given for another mixture is not read: said, not refused (a sweep over
     * data.mixture keeps one data.mixture_file for its `file` points) */
    if (r->cfg.data.mixture != CONFIG_MIXTURE_FILE && r->cfg.data.mixture_file[0] && r->rank == 0)
        fprintf(stderr, "tandem: note: data.mixture_file is set, but data.mixture is not `file`: the file is not "
                "read\n");
    /* the caps against the mixture as asked for, before the start is moved into them (after,
     * a weight of 0 had been lifted and the check passed) */
    if ((rc = fixed_caps_fit(r, e))) return rc;
    if ((rc = initial_mixture(r, e))) return rc;
    /* streaming has no host buffers: u's initial values pass through a buffer of its own
     * (one parameter-sized copy, before training starts, freed at once) */
    float *host = ledger_host(r->ld), *own = NULL;
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
    r->next = run_first_step(r);
    r->index = 0;
    r->alpha_records = 0;
    memset(&r->alpha_head, 0, sizeof r->alpha_head);
    return rc ? rc : ledger_start(r->ld, r->seq, e);
}

/* The run position at which a config change recorded now takes effect: the newest state
 * of the run as it stands before the change (its generations gens; a state of a later
 * generation is a lost change record's, whose
 * change is being given again: the newest state before it is where that change took
 * effect). Usually the state HEAD names (never one past it: a commit cut off before HEAD
 * moved is recomputed); found by listing where HEAD is deleted or damaged and names
 * nothing. (A lost
 * HEAD used to put the change at position 0, so that every state of the old generation
 * looked written by a fenced-out writer, was set aside, and the run stranded.) Should the
 * state found fail its checks at load, the run goes on from an older one and ledger_start
 * sets aside what lies past it, as for any resume at or before the newest change. Reads
 * only; HEAD's position where no listed state decodes, 0 where the run has none. */
static uint64_t change_position(store *st, const ckpt_gens *gens) {
    tdm_err e;
    rec_head h;
    int h_ok = ledger_read(st, REC_KIND_HEAD, LEDGER_HEAD, NULL, &h, &e) == 0;
    uint64_t head = h_ok ? h.seq : 0;
    uint64_t *seqs = NULL;
    size_t ns = 0;
    if (audit_state_seqs(st, &seqs, &ns, &e)) return head;
    uint64_t at = head;
    for (size_t i = ns; i-- > 0;) { /* newest first */
        /* not past HEAD where HEAD is there: nothing ties a state there to this run (a
         * sibling's copied in took the change, and the run went on from its weights:
         * review); the run's own cut-off commit is recomputed under the new config */
        if (h_ok && seqs[i] > head) continue;
        char key[64];
        ledger_state_key(key, sizeof key, seqs[i]);
        rec_state rec;
        if (ledger_read(st, REC_KIND_STATE, key, NULL, &rec, &e)) continue;
        int ours = rec.seq == seqs[i] && ckpt_gen_belongs(rec.has_gen, rec.gen, rec.seq, gens);
        rec_state_free(&rec);
        if (ours) {
            at = seqs[i];
            break;
        }
    }
    free(seqs);
    return at;
}

/* Whether the change this start records (pinned->pending) includes data.dataset: then
 * data.mp follows the new dataset. */
static int data_change(const run_config_result *pinned) {
    for (size_t i = 0; i < pinned->pending.n; i++)
        if (!strcmp(pinned->pending.new_values[i].key, "data.dataset")) return 1;
    return 0;
}

/* The pinned config and its generations read again once the lease is held (run_config_open
 * into *pinned, which it replaces; RUN's creation by the first look is kept in ->created).
 * The first look came before the lease: another writer may have recorded a config change
 * (configs/<g>.mp) since, and a writer that went on under the generations it read first
 * would compute the whole run under a superseded generation — every state it commits then
 * counts as a fenced-out writer's, and the run strands. So this writer acts on what the
 * store says now: its config still fits the run with that change (the same change: it is
 * recorded already, nothing pending; an allowed one on top: pending again) and it goes on,
 * or it is refused as a fresh start would be (exit 2), the message naming the change. */
static int reread_pinned(run_ctx *r, const run_opts *o, int defaulted, run_config_result *pinned, tdm_err *e) {
    run_config_result now;
    uint64_t before = pinned->gens.n;
    int rc = run_config_open(r->store, &r->cfg, r->names, dataset_n_domains(&r->ds), o->allow, o->nallow, defaulted,
                             &now, e);
    uint64_t after = now.gens.n;
    if (rc) {
        if (after > before)
            err_prefix(e, "while this writer took the lease of %s, another writer recorded a config change (%s%llu.mp%s), "
                       "which this writer's config does not fit (it stops, writing nothing, and gives the lease back): ",
                       store_url(r->store), LEDGER_CONFIGS, (unsigned long long)before,
                       after > before + 1 ? " and later ones" : "");
        run_config_result_free(&now);
        return rc;
    }
    if (after != before && r->progress != PROGRESS_QUIET)
        fprintf(stderr, "tandem: %s: another writer recorded a config change (%s%llu.mp) while this one took the "
                "lease; this run's config fits the run with it: going on under it\n", store_url(r->store),
                LEDGER_CONFIGS, (unsigned long long)before);
    now.created = pinned->created;
    run_config_result_free(pinned);
    *pinned = now;
    return 0;
}

/* The grace period (seconds from the stop signal to SIGKILL) the scheduler set in the
 * environment (TANDEM_GRACE_S, which the rendered Slurm scripts and Kubernetes Jobs set),
 * or 0 when unknown: then a stop always commits a full state. */
static double env_grace(void) {
    const char *v = getenv("TANDEM_GRACE_S");
    double g = 0;
    return v && !args_parse_double(v, &g) && g > 0 ? g : 0;
}

/* The grace period of this run (checkpoint.grace_s, else TANDEM_GRACE_S), 0 when unknown. */
static double grace_of(const run_ctx *r) {
    return r->cfg.checkpoint.grace_s > 0 ? r->cfg.checkpoint.grace_s : env_grace();
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
int run_load_everywhere(run_ctx *r, const run_opts *o, run_config_result *pinned, ledger_resumed *res,
                           tdm_err *e) {
    int rc = 0;
    if (r->rank == 0) rc = run_precheck_episodes(r, e);
    if (r->rank == 0 && !rc) {
        int defaulted = o->store_defaulted || (!o->store_url && !r->cfg.store[0]);
        /* a first look, writing nothing but a new run's RUN (create-only: the run's
         * identity, which an identical start at the same instant adopts): what would be
         * refused is refused before a live writer is taken over */
        rc = run_config_open(r->store, &r->cfg, r->names, dataset_n_domains(&r->ds), o->allow, o->nallow,
                             defaulted, pinned, e);
        if (!rc) rc = model_source_fingerprint(r->store, &r->cfg, PIN_CHECK, NULL, e);
        if (!rc) rc = data_source_fingerprint(r->store, &r->ds, PIN_CHECK, data_change(pinned), NULL, e);
        ckpt_layout cl = {0};
        ckpt_model_io_init(&r->ck_io, r->nets.ops, r->nets.ctx);
        if (!rc) rc = ckpt_model_layout(&r->lay, &cl, e);
        /* a test freezes a writer here: the config read, the lease not yet taken */
        if (!rc) testhook_stop_at("lease-take");
        if (!rc) {
            ledger_opts lo = {.layout = &cl, .chunk_bytes = (uint64_t)r->cfg.checkpoint.chunk_kib << 10,
                              .streaming = r->streaming, .io = &r->ck_io.io,
                              .dev = {r->nets.u, r->nets.m, r->nets.v}, .attempt = run_attempt_number(),
                              .keep = r->cfg.checkpoint.keep,
                              .every_episodes = r->cfg.checkpoint.every_episodes,
                              .every_seconds = r->cfg.checkpoint.every_seconds, .grace_s = grace_of(r),
                              .episodes = (uint64_t)r->cfg.run.episodes, .seed = r->cfg.run.seed,
                              .run = pinned->has_identity ? &pinned->identity : NULL,
                              .stop_flag = &run_stop_signal, .stop_at = &run_stop_at};
            if (!(r->ld = ledger_open(r->store, &lo, e))) rc = e->code;
        }
        ckpt_model_layout_free(&cl);
        /* under the lease: the config as the store holds it now, then the pins written */
        if (!rc) rc = reread_pinned(r, o, defaulted, pinned, e);
        /* the model.init folder is the one the run started from (pinned by content) */
        if (!rc) rc = model_source_fingerprint(r->store, &r->cfg, PIN_WRITE, r->ld, e);
        /* and the dataset's tokens are those it started with (data.mp); the pin follows a
         * data.dataset change recorded below */
        if (!rc) rc = data_source_fingerprint(r->store, &r->ds, PIN_WRITE, data_change(pinned), r->ld, e);
        /* a config change is recorded by the writer that holds the lease, at the position
         * the run goes on from (change_position), now that no other writer can move it (a
         * test freezes a writer right before: the lease held, the change not yet recorded) */
        if (!rc && pinned->pending.n) testhook_stop_at("change-record");
        if (!rc && pinned->pending.n)
            rc = run_config_record_change(r->store, r->ld, pinned, change_position(r->store, &pinned->gens), e);
        if (!rc) rc = load_or_init(r, &pinned->gens, res, e);
    }
    if (comm_world(r->comm) == 1) return rc;
    rank0_view v = {0};
    if (r->rank == 0)
        v = (rank0_view){.rc = rc, .next = r->next, .resumed = res->found, .seq = r->seq,
                         .index = r->index, .alpha_records = r->alpha_records, .st = r->st,
                         .alpha_head = r->alpha_head};
    tdm_err ce = {0};
    int crc = comm_bcast(r->comm, &v, sizeof v, &ce);
    if (!crc && v.rc && r->rank != 0)
        crc = err_set(&ce, v.rc, "rank 0 could not load the run (exit %d; its log says why)", v.rc);
    if (!crc && v.rc == 0) {
        r->next = v.next, res->found = v.resumed, r->seq = v.seq, r->index = v.index;
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

