/* steps.c — sync, probe, alpha and free; see steps.h. */
#include "steps/steps.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "steps/mixture.h"
#include "steps/simplex.h"
#include "util/rng.h"

/* Phases keep the mixing draws of probe and free steps in separate streams. */
enum { PHASE_PROBE = 1, PHASE_FREE = 2 };

int step_nets_create(step_nets *n, const model_ops *ops, const model_layout *lay,
                     const step_hparams *hp, int M, int threads, tdm_err *e) {
    memset(n, 0, sizeof *n);
    n->ops = ops;
    n->lay = lay;
    int rows = hp->B + hp->V > hp->B ? hp->B + hp->V : hp->B;
    /* micro-batches: the workspace holds one pass's rows, and a seventh buffer the pass's
     * gradient */
    n->micro = hp->micro > 0 && hp->micro < rows ? hp->micro : 0;
    n->ctx = ops->create(lay, n->micro ? n->micro : rows, hp->T, 2 * M, threads, e);
    if (!n->ctx) return e ? e->code : ERR_INTERNAL;
    size_t P = lay->numel;
    float **bufs[] = {&n->u, &n->m, &n->v, &n->w, &n->up, &n->grad, &n->mgrad};
    size_t nbufs = sizeof bufs / sizeof *bufs - (n->micro ? 0 : 1);
    for (size_t i = 0; i < nbufs; i++)
        if (!(*bufs[i] = ops->alloc(n->ctx, P))) goto oom;
    n->tokens = malloc((size_t)rows * (hp->T + 1) * sizeof *n->tokens);
    n->domain = malloc((size_t)rows * sizeof *n->domain);
    if (!n->tokens || !n->domain) goto oom;
    return 0;
oom:
    step_nets_destroy(n);
    return err_set(e, ERR_INTERNAL,
                   "out of memory for the twins: 6 x %zu parameters plus a batch of %d x %d", P,
                   hp->B + hp->V, hp->T);
}

void step_nets_destroy(step_nets *n) {
    if (n->ctx) {
        float *bufs[] = {n->u, n->m, n->v, n->w, n->up, n->grad, n->mgrad};
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
            if (bufs[i]) n->ops->release(n->ctx, bufs[i]);
        n->ops->destroy(n->ctx);
    }
    free(n->tokens);
    free(n->domain);
    free(n->host_grad);
    memset(n, 0, sizeof *n);
}

int step_check(const step_hparams *hp, const dataset *ds, tdm_err *e) {
    int M = dataset_n_domains(ds);
    if (M > STEP_MAX_DOMAINS)
        return err_set(e, ERR_USAGE, "%s has %d domains; at most %d are supported", ds->path, M,
                       STEP_MAX_DOMAINS);
    /* weight mixing, and a TANDEM probe's evaluation batch, take at least one sequence per
     * domain (⌊B/M⌋ each, one more for the first B mod M: sampler_batch_per_domain) */
    if (hp->B < M && (!hp->fixed || hp->mixing == STEP_MIX_WEIGHT))
        return err_set(e, ERR_USAGE,
                       "train.batch = %d is smaller than the %d domains of %s (every batch holds "
                       "at least one sequence per domain; or use data.mixing = sample in a fixed "
                       "run)",
                       hp->B, M, ds->path);
    if (!hp->fixed && hp->V < M)
        return err_set(e, ERR_USAGE,
                       "tandem.val_batch = %d must be at least the %d domains of %s (one "
                       "validation sequence per domain)",
                       hp->V, M, ds->path);
    if (hp->alpha_floor * M >= 1)
        return err_set(e, ERR_USAGE, "tandem.alpha_floor = %g times %d domains must be below 1",
                       hp->alpha_floor, M);
    for (int m = 0; m < M; m++) {
        int rc = sampler_check(ds, m, SPLIT_TRAIN, hp->T, e);
        if (!rc && !hp->fixed) rc = sampler_check(ds, m, SPLIT_VAL, hp->T, e);
        /* the sampler knows T, not the key that sets it */
        if (rc) return err_append(e, " (T is train.seq = %d)", hp->T);
    }
    return 0;
}

void step_state_init(step_state *s, const dataset *ds, int natural_alpha) {
    memset(s, 0, sizeof *s);
    int M = dataset_n_domains(ds);
    s->M = M;
    double total = 0;
    for (int m = 0; m < M; m++) total += (double)dataset_tokens(ds, m, SPLIT_TRAIN);
    for (int m = 0; m < M; m++)
        s->alpha[m] = natural_alpha && total > 0
                          ? (double)dataset_tokens(ds, m, SPLIT_TRAIN) / total
                          : 1.0 / M;
}

int step_sync(step_nets *n, tdm_err *e) {
    size_t P = n->lay->numel;
    int rc = n->ops->copy(n->ctx, n->w, n->u, P, e);
    if (!rc) rc = n->ops->copy(n->ctx, n->up, n->u, P, e);
    return rc;
}

double step_lr(const step_hparams *hp, uint64_t free_steps) {
    if (!hp->cosine) return hp->lr;
    return model_lr_cosine((long)free_steps, hp->total_free, hp->warmup, hp->lr, hp->lr_min);
}

/* The domain of a sample-mixing row from the uniform draw u: the first m with u below the
 * running sum of α, the last domain taking what rounding leaves — or, with caps, the same
 * over the domains that still have room for a row of T tokens (rows already given to each
 * in this batch counted), α renormalised over them (`capped`: a batch that trains u in a
 * run with caps). -1 when no domain has room, or (a fixed run) none of weight > 0. */
static int draw_domain(const step_hparams *hp, const step_state *s, int capped, const int *count,
                       double u) {
    int M = s->M;
    if (!capped) {
        double c = 0;
        int m = 0;
        for (; m < M - 1; m++) {
            c += s->alpha[m];
            if (u < c) break;
        }
        return m;
    }
    int open[STEP_MAX_DOMAINS], n = 0;
    double total = 0;
    for (int m = 0; m < M; m++)
        if (s->seen[m] + (double)(count[m] + 1) * hp->T <= hp->cap[m]) {
            open[n++] = m;
            total += s->alpha[m];
        }
    if (n == 0) return -1;
    /* only zero-weight domains have room. A fixed run draws none (a weight of 0 means
     * never trained on; its mixture was checked against the caps up front). A DMO's α,
     * which moves (alpha_floor 0 lets it reach 0), draws as it always has — the one with
     * the most room — so that its stores replay bit for bit and it does not fail late */
    if (!(total > 0)) {
        if (hp->fixed) return -1;
        int best = open[0];
        for (int i = 1; i < n; i++)
            if (hp->cap[open[i]] - s->seen[open[i]] > hp->cap[best] - s->seen[best]) best = open[i];
        return best;
    }
    double target = u * total, c = 0;
    for (int i = 0; i < n - 1; i++) {
        c += s->alpha[open[i]];
        if (target < c) return open[i];
    }
    return open[n - 1];
}

/* Fills rows [0, B) of the batch buffers with train sequences mixed by α and sets
 * coef[m] so that sum_m coef[m] L^m is the α-mixture loss: weight mixing takes B/M
 * sequences per domain and coef = α; sample mixing draws each row's domain ∝ α from the
 * stream (seed, RNG_MIX_SAMPLE; a, phase, k) and coef[m] = n_m / B (the plain mean).
 * `trains_u`: the batch trains u (a free step, or a probe step whose u' becomes u): its
 * tokens count in s->seen and the caps apply (step_free's contract). */
static int mixed_batch(const step_hparams *hp, const dataset *ds, step_nets *n, step_state *s,
                       uint32_t a, uint32_t phase, uint32_t k, int trains_u, double *coef,
                       tdm_err *e) {
    int M = s->M, B = hp->B, T = hp->T;
    double bt = (double)B * T;
    if (hp->mixing == STEP_MIX_WEIGHT) {
        for (int m = 0; m < M; m++) {
            coef[m] = s->alpha[m];
            /* cut to the cap: only when α left the caps' box (a run extended past its
             * planned budget, a mixture file); the gradient then weighs less than 1 */
            if (trains_u && hp->has_caps && s->seen[m] + coef[m] * bt > hp->cap[m])
                coef[m] = hp->cap[m] > s->seen[m] ? (hp->cap[m] - s->seen[m]) / bt : 0;
        }
        int rc = sampler_batch_per_domain(ds, SPLIT_TRAIN, T, B, hp->seed, s->train, n->tokens,
                                          n->domain, e);
        for (int m = 0; !rc && trains_u && m < M; m++) s->seen[m] += coef[m] * bt;
        return rc;
    }
    int count[STEP_MAX_DOMAINS] = {0};
    rng_stream r;
    rng_stream_init(&r, hp->seed, RNG_MIX_SAMPLE, a, phase, k);
    for (int i = 0; i < B; i++) {
        int m = draw_domain(hp, s, trains_u && hp->has_caps, count, rng_uniform(&r));
        if (m < 0)
            return err_set(e, ERR_USAGE,
                           "every domain of weight > 0 has reached its cap (data.max_epochs) "
                           "before the run's end: raise the caps or lower run.episodes");
        count[m]++;
    }
    sampler_cursor keep[STEP_MAX_DOMAINS];
    memcpy(keep, s->train, (size_t)M * sizeof *keep);
    int row = 0;
    for (int m = 0; m < M; m++) {
        coef[m] = (double)count[m] / B;
        for (int j = 0; j < count[m]; j++, row++) {
            int rc = sampler_next(ds, m, SPLIT_TRAIN, T, hp->seed, &s->train[m],
                                  n->tokens + (size_t)row * (T + 1), e);
            if (rc) {
                memcpy(s->train, keep, (size_t)M * sizeof *keep);
                return rc;
            }
            n->domain[row] = m;
        }
    }
    for (int m = 0; trains_u && m < M; m++) s->seen[m] += (double)count[m] * T;
    return 0;
}

/* The forward (and with coef, the backward) of rows [lo, hi) of a batch of `rows` rows,
 * as parts of the whole: part[m] gets this slice's mean token loss of domain m weighted by
 * its share of the batch's rows of m, and n->grad the gradient of sum_m coef[m] times that
 * share of L^m. With n->micro the slice goes through in passes of at most n->micro rows,
 * each pass's gradient added into n->grad in row order (sgd with rate -1 adds exactly). */
static int slice_pass(const step_hparams *hp, step_nets *n, const float *params, int rows,
                      int lo, int hi, int nd, const double *coef, double *part, tdm_err *e) {
    long total[2 * STEP_MAX_DOMAINS] = {0};
    for (int i = 0; i < rows; i++) total[n->domain[i]]++;
    memset(part, 0, (size_t)nd * sizeof *part);
    if (hi <= lo) {
        if (coef) n->ops->scale(n->ctx, n->grad, 0.0f); /* no rows here: nothing to add */
        return 0;
    }
    int step = n->micro ? n->micro : hi - lo, rc = 0;
    for (int a = lo; a < hi && !rc; a += step) {
        int b = a + step < hi ? a + step : hi;
        long mine[2 * STEP_MAX_DOMAINS] = {0};
        for (int i = a; i < b; i++) mine[n->domain[i]]++;
        double got[2 * STEP_MAX_DOMAINS] = {0}, c[2 * STEP_MAX_DOMAINS] = {0};
        model_batch mb = {.B = b - a, .T = hp->T, .tokens = n->tokens + (size_t)a * (hp->T + 1),
                          .domain = n->domain + a};
        rc = n->ops->forward(n->ctx, params, &mb, got, NULL, e);
        for (int m = 0; m < nd; m++) {
            double share = total[m] ? (double)mine[m] / (double)total[m] : 0;
            if (mine[m]) part[m] += got[m] * share;
            if (coef) c[m] = mine[m] ? coef[m] * share : 0;
        }
        if (!rc && coef) rc = n->ops->backward(n->ctx, params, c, a == lo ? n->grad : n->mgrad, e);
        if (!rc && coef && a != lo) rc = n->ops->sgd(n->ctx, n->grad, n->mgrad, -1.0f, e);
    }
    return rc;
}

/* Whether dp_pass computes the batch in one forward of this process's backend, with no
 * all-reduce and no micro-batches: then it need not wait for the losses. */
static int dp_single(const step_nets *n) {
    return comm_world(n->comm) == 1 && !comm_has_device(n->comm) && !n->micro;
}

/* Forward of `params` on the batch rows [0, rows) (and with coef, the backward into
 * n->grad), as one process would compute it over all rows: loss[0..nd) gets the mean
 * token loss per domain id over the whole batch, and the gradient is that of
 * sum_m coef[m] L^m. With several ranks each computes rows [rows r / R, rows (r+1) / R):
 * its losses are weighted by its share of each domain's rows before the rank-order sum,
 * and its backward coefficients are coef[m] n_rm / N_m, so that the summed gradient is
 * the one-process gradient (up to the order of float additions); micro-batches split a
 * rank's rows the same way (slice_pass). loss NULL: not wanted now; where dp_single holds
 * they stay on the device, unwaited for (ops->results reads them), so that a step queues
 * its whole work before its one wait. */
static int dp_pass(const step_hparams *hp, step_nets *n, const float *params, int rows, int nd,
                   const double *coef, double *loss, tdm_err *e) {
    int R = comm_world(n->comm);
    if (dp_single(n)) {
        model_batch b = {.B = rows, .T = hp->T, .tokens = n->tokens, .domain = n->domain};
        int rc = n->ops->forward(n->ctx, params, &b, loss, NULL, e);
        if (!rc && coef) rc = n->ops->backward(n->ctx, params, coef, n->grad, e);
        return rc;
    }
    int r = comm_rank(n->comm);
    int lo = (int)((long)rows * r / R), hi = (int)((long)rows * (r + 1) / R);
    double part[2 * STEP_MAX_DOMAINS] = {0};
    if (R == 1 && !comm_has_device(n->comm)) /* micro-batches in one process */
        return slice_pass(hp, n, params, rows, 0, rows, nd, coef, loss ? loss : part, e);
    int rc = slice_pass(hp, n, params, rows, lo, hi, nd, coef, part, e);
    /* every rank takes part in the collectives even after a local error, so that none
     * is left waiting; the error is returned after them */
    tdm_err ce = {0};
    int crc = comm_allreduce_f64(n->comm, part, (size_t)nd, &ce);
    if (!crc && coef && comm_has_device(n->comm)) {
        crc = comm_allreduce_device_f32(n->comm, n->grad, n->lay->numel, &ce);
    } else if (!crc && coef) {
        /* the runner allocated host_grad up front (a failure there is agreed on at start) */
        size_t P = n->lay->numel;
        if (!n->host_grad && !(n->host_grad = malloc(P * sizeof *n->host_grad)))
            crc = err_set(&ce, ERR_INTERNAL, "out of memory for the gradient all-reduce");
        tdm_err de = {0};
        int drc = crc ? crc : n->ops->download(n->ctx, n->host_grad, n->grad, P, &de);
        if (drc && !crc && n->host_grad) /* still take part, with nothing to add */
            memset(n->host_grad, 0, P * sizeof *n->host_grad);
        if (!crc) crc = comm_allreduce_f32(n->comm, n->host_grad, P, &ce);
        if (!crc && drc) crc = drc, ce = de;
        if (!crc) crc = n->ops->upload(n->ctx, n->grad, n->host_grad, P, &ce);
    }
    if (!rc && crc) {
        *e = ce;
        rc = crc;
    }
    if (!rc && loss) memcpy(loss, part, (size_t)nd * sizeof *loss);
    return rc;
}

/* The keys to lower when AdamW's decay alone blows u up (lr x weight_decay >= 1 with
 * weight_decay >= 1: each free step scales u by 1 - lr wd, of size >= 1), else NULL. A u
 * grown that way may still score finite at a probe's start and only overflow in the
 * twins' first SGD steps, whatever tandem.lr_probe is: the probe names these keys too. */
static const char *decay_key(const step_hparams *hp) {
    if (!(hp->weight_decay >= 1 && hp->lr * hp->weight_decay >= 1)) return NULL;
    return hp->lr > 1 ? "optim.weight_decay and optim.lr" : "optim.weight_decay";
}

/* One SGD step of `params` on rows [0, rows) with coefficients coef over nd domain ids;
 * loss as dp_pass's (NULL: not wanted, nothing waited for). */
static int sgd_step(const step_hparams *hp, step_nets *n, float *params, int rows, int nd,
                    const double *coef, double *loss, tdm_err *e) {
    int rc = dp_pass(hp, n, params, rows, nd, coef, loss, e);
    if (!rc) rc = n->ops->sgd(n->ctx, params, n->grad, (float)hp->lr_probe, e);
    return rc;
}

/* u (untouched by any probe) on the same validation windows every episode, into val_now:
 * cursors at the start of each val split's first epoch, so that the losses of successive
 * probes differ only by what u learned (the overfitting record, step_alpha) */
static int score_u(const step_hparams *hp, const dataset *ds, step_nets *n, int M, double *val_now,
                   tdm_err *e) {
    double loss[2 * STEP_MAX_DOMAINS];
    sampler_cursor fixed[STEP_MAX_DOMAINS];
    memset(fixed, 0, sizeof fixed);
    int rc = sampler_batch_per_domain(ds, SPLIT_VAL, hp->T, hp->B, hp->seed, fixed, n->tokens, n->domain, e);
    if (!rc) rc = dp_pass(hp, n, n->u, hp->B, M, NULL, loss, e);
    /* 0 is "no score" (a loss is never 0): what is not finite is not kept, so that the
     * state always encodes */
    for (int m = 0; !rc && m < M; m++) val_now[m] = isfinite(loss[m]) && loss[m] > 0 ? loss[m] : 0;
    return rc;
}

int step_pinned(const step_hparams *hp, const step_state *s) {
    /* with probe_carry the twins' steps train u too: they are never skipped */
    if (!hp->skip_pinned || !hp->has_lo || hp->fixed || hp->probe_carry) return 0;
    double sum = 0;
    for (int m = 0; m < s->M; m++) {
        int marked = hp->overfit_cap && s->overfit[m] && hp->plan_tokens > 0; /* overfit_bounds */
        sum += marked ? hp->alpha_floor : hp->alpha_lo[m];
    }
    return sum >= 1 - STEP_PINNED_SLACK;
}

int step_probe_pinned(const step_hparams *hp, const dataset *ds, step_nets *n, step_state *s, tdm_err *e) {
    step_state work = *s;
    memset(work.loss_w, 0, sizeof work.loss_w);
    memset(work.loss_u, 0, sizeof work.loss_u);
    int rc = hp->overfit_cap ? score_u(hp, ds, n, s->M, work.val_now, e) : 0;
    if (rc) return rc;
    work.have_losses = 1;
    *s = work;
    return 0;
}

/* A loss for a message: a NaN as "NaN" (printf's %g said "-nan" for the NaN a diverged
 * net's arithmetic makes, whose sign bit is set), an infinity as "Inf" or "-Inf". */
static const char *loss_text(double x, char buf[32]) {
    if (isnan(x)) return "NaN";
    if (isinf(x)) return x > 0 ? "Inf" : "-Inf";
    snprintf(buf, 32, "%g", x);
    return buf;
}

/* The probe's verdict on its twins' losses in *work: 0 when all are finite, else
 * ERR_DIVERGED naming the twin, the domain (by name) and the key most likely responsible.
 * u' takes SGD steps at lr_probe on the α-mixture alone; w also on γ times it, so w alone
 * diverging points at γ when γ > 1. Either points at the decay instead when it blows u up
 * (decay_key): u was then already near overflow, and no lr_probe helps. */
static int probe_diverged(const step_hparams *hp, const dataset *ds, const step_state *work, tdm_err *e) {
    const char *decay = decay_key(hp);
    char lt[32];
    for (int m = 0; m < work->M; m++) {
        if (isfinite(work->loss_u[m])) continue;
        if (decay)
            return err_set(e, ERR_DIVERGED,
                           "probe of episode %llu: the proxy twin u' diverged (its loss on domain "
                           "'%s' is %s after %d SGD steps at tandem.lr_probe = %g) from a u blown "
                           "up by the free steps' decay (optim.lr = %g x optim.weight_decay = %g "
                           ">= 1): lower %s",
                           (unsigned long long)work->episode, dataset_domain_name(ds, m),
                           loss_text(work->loss_u[m], lt), hp->K, hp->lr_probe, hp->lr, hp->weight_decay, decay);
        return err_set(e, ERR_DIVERGED,
                       "probe of episode %llu: the proxy twin u' diverged (its loss on domain "
                       "'%s' is %s after %d SGD steps at tandem.lr_probe = %g): lower "
                       "tandem.lr_probe",
                       (unsigned long long)work->episode, dataset_domain_name(ds, m),
                       loss_text(work->loss_u[m], lt), hp->K, hp->lr_probe);
    }
    for (int m = 0; m < work->M; m++) {
        if (isfinite(work->loss_w[m])) continue;
        const char *name = dataset_domain_name(ds, m);
        if (decay)
            return err_set(e, ERR_DIVERGED,
                           "probe of episode %llu: the reference twin w diverged (its loss on "
                           "domain '%s' is %s after %d SGD steps at tandem.lr_probe = %g) from a "
                           "u blown up by the free steps' decay (optim.lr = %g x "
                           "optim.weight_decay = %g >= 1): lower %s",
                           (unsigned long long)work->episode, name, loss_text(work->loss_w[m], lt), hp->K,
                           hp->lr_probe, hp->lr, hp->weight_decay, decay);
        if (hp->gamma > 1)
            return err_set(e, ERR_DIVERGED,
                           "probe of episode %llu: the reference twin w diverged (its loss on "
                           "domain '%s' is %s) while u' did not: w's objective weighs the train "
                           "loss by tandem.gamma = %g; lower tandem.gamma (or tandem.lr_probe)",
                           (unsigned long long)work->episode, name, loss_text(work->loss_w[m], lt), hp->gamma);
        return err_set(e, ERR_DIVERGED,
                       "probe of episode %llu: the reference twin w diverged (its loss on "
                       "domain '%s' is %s after %d SGD steps at tandem.lr_probe = %g): lower "
                       "tandem.lr_probe",
                       (unsigned long long)work->episode, name, loss_text(work->loss_w[m], lt), hp->K, hp->lr_probe);
    }
    return 0;
}

int step_probe(const step_hparams *hp, const dataset *ds, step_nets *n, step_state *s,
               const volatile sig_atomic_t *abandon, tdm_err *e) {
    int M = s->M, B = hp->B, T = hp->T;
    step_state work = *s; /* the probe commits to *s only when it completes */
    double coef_u[2 * STEP_MAX_DOMAINS], coef_w[2 * STEP_MAX_DOMAINS], loss[2 * STEP_MAX_DOMAINS];
    char lt[32];
    for (int k = 0; k < hp->K; k++) {
        if (abandon && *abandon) return STEP_ABANDONED;
        /* rows [0, B): train, mixed by α; rows [B, B+V): val, V/M per domain, scored as
         * domains M..2M-1 so one forward gives w both of its loss terms */
        int rc = mixed_batch(hp, ds, n, &work, (uint32_t)work.episode, PHASE_PROBE, (uint32_t)k,
                             hp->probe_carry, coef_u, e);
        if (!rc)
            rc = sampler_batch_per_domain(ds, SPLIT_VAL, T, hp->V, hp->seed, work.val,
                                          n->tokens + (size_t)B * (T + 1), n->domain + B, e);
        if (rc) return rc;
        for (int i = B; i < B + hp->V; i++) n->domain[i] += M;
        for (int m = 0; m < M; m++) {
            coef_u[M + m] = 0;
            coef_w[m] = hp->gamma * coef_u[m];
            coef_w[M + m] = hp->val_mean ? 1.0 / M : 1.0;
        }
        /* u' on Σ α_m L_train^m; w on L_val + γ Σ α_m L_train^m, same train rows, with
         * L_val = Σ_m L_val^m (the paper's eq. 1) or its mean over the M domains */
        /* only the first step's losses are looked at: the others are never waited for */
        rc = sgd_step(hp, n, n->up, B, M, coef_u, k == 0 ? loss : NULL, e);
        if (rc) return rc;
        /* the first step's losses are those of u itself (u' = u then): a u that is no longer
         * finite diverged before this probe, in the free steps, not here */
        for (int m = 0; k == 0 && m < M; m++)
            if (!isfinite(loss[m]))
                return err_set(e, ERR_DIVERGED,
                               "probe of episode %llu: the model u is not finite at the start of "
                               "the probe (its loss on domain '%s' is %s): it diverged in the free "
                               "steps before; lower %s%s",
                               (unsigned long long)work.episode, dataset_domain_name(ds, m), loss_text(loss[m], lt),
                               decay_key(hp) ? decay_key(hp) : "optim.lr",
                               hp->probe_carry ? " (or tandem.lr_probe: tandem.probe_carry "
                                                 "continues the free steps from the probe's u')"
                                               : "");
        rc = sgd_step(hp, n, n->w, B + hp->V, 2 * M, coef_w, NULL, e);
        if (rc) return rc;
    }
    /* evaluation batches of B train sequences (the same rows per domain in each), shared
     * by both twins; ℓ_w and ℓ_u are the per-domain means over them */
    int rc = 0, nb = hp->eval_batches > 0 ? hp->eval_batches : 1;
    memset(work.loss_w, 0, sizeof work.loss_w);
    memset(work.loss_u, 0, sizeof work.loss_u);
    for (int b = 0; b < nb && !rc; b++) {
        rc = sampler_batch_per_domain(ds, SPLIT_TRAIN, T, B, hp->seed, work.train, n->tokens,
                                      n->domain, e);
        if (!rc) rc = dp_pass(hp, n, n->w, B, M, NULL, loss, e);
        for (int m = 0; !rc && m < M; m++) work.loss_w[m] += loss[m] / nb;
        if (!rc) rc = dp_pass(hp, n, n->up, B, M, NULL, loss, e);
        for (int m = 0; !rc && m < M; m++) work.loss_u[m] += loss[m] / nb;
    }
    if (!rc && hp->overfit_cap) rc = score_u(hp, ds, n, M, work.val_now, e);
    if (!rc && hp->probe_carry) rc = n->ops->copy(n->ctx, n->u, n->up, n->lay->numel, e);
    if (!rc) rc = probe_diverged(hp, ds, &work, e);
    if (rc) return rc;
    work.have_losses = 1;
    *s = work;
    return 0;
}

double step_alpha_rate(const step_hparams *hp) {
    if (hp->alpha_step == STEP_ALPHA_PGD) return hp->lr_alpha;
    return hp->episodes > 0 ? hp->alpha_budget / (double)hp->episodes : 0;
}

/* g_m · rms(Δ) = Δ_m − mean(Δ) into dev, and rms(Δ) (0: every Δ is 0), for Δ finite.
 * The plain sums keep the bits every run has had; only where Σ Δ² under- or overflows
 * (γ 1e-200 or 1e200: rms would read 0 or ∞ and freeze α) are both taken on Δ / max|Δ|,
 * which leaves g unchanged, so that the step stays scale-free at any γ. */
static double eg_spread(const double *d, int M, double *dev) {
    double mean = 0, sq = 0, top = 0;
    for (int m = 0; m < M; m++) {
        mean += d[m] / M;
        sq += d[m] * d[m] / M;
        top = fmax(top, fabs(d[m]));
    }
    if (top == 0 || (sq > 0 && isfinite(sq) && isfinite(mean))) {
        for (int m = 0; m < M; m++) dev[m] = d[m] - mean;
        return sqrt(sq);
    }
    double ms = 0, sqs = 0;
    for (int m = 0; m < M; m++) {
        ms += d[m] / top / M;
        sqs += (d[m] / top) * (d[m] / top) / M;
    }
    /* dev and rms both in units of top: their ratio g is what the step uses */
    for (int m = 0; m < M; m++) dev[m] = d[m] / top - ms;
    return sqrt(sqs);
}

/* The eg step of step_alpha (see steps.h): out ∝ α exp(−η g), g the normalised Δ. A
 * weight α gave as > 0 stays > 0 (docs/dmo.md: the step never sets a weight to 0): where
 * a budget so large that exp underflows would give 0, it keeps DBL_MIN (before the
 * normalisation), a weight that can still recover; a healthy step never comes near. */
static void alpha_eg(const step_hparams *hp, const step_state *s, double *out) {
    int M = s->M;
    double d[STEP_MAX_DOMAINS], dev[STEP_MAX_DOMAINS];
    int finite = 1;
    for (int m = 0; m < M; m++) {
        d[m] = hp->gamma * (s->loss_w[m] - s->loss_u[m]);
        finite &= isfinite(d[m]);
    }
    double rms, eta = step_alpha_rate(hp);
    if (finite) {
        rms = eg_spread(d, M, dev);
    } else { /* NaN on: step_alpha names the step's keys */
        for (int m = 0; m < M; m++) dev[m] = NAN;
        rms = NAN;
    }
    /* a Δ of exactly 0 everywhere carries no evidence (step_probe_pinned's): α stays, to
     * the bit */
    if (rms == 0) {
        memcpy(out, s->alpha, (size_t)M * sizeof *out);
        return;
    }
    double scale = eta / rms;
    /* in log space relative to the largest weight, so that exp never overflows */
    double logit[STEP_MAX_DOMAINS], top = -INFINITY;
    for (int m = 0; m < M; m++) {
        logit[m] = s->alpha[m] > 0 ? log(s->alpha[m]) - scale * dev[m] : -INFINITY;
        if (logit[m] > top) top = logit[m];
    }
    double z = 0;
    for (int m = 0; m < M; m++) {
        out[m] = exp(logit[m] - top);
        if (s->alpha[m] > 0 && out[m] < DBL_MIN) out[m] = DBL_MIN;
        z += out[m];
    }
    for (int m = 0; m < M; m++) out[m] /= z;
}

/* The overfitting record after one more probe (steps.h, overfit_cap): val_now folded
 * into val_ema and its noise into val_var; a rise above the lowest by the margin
 * (STEP_OVERFIT_RISE of it, at least STEP_OVERFIT_Z sd of val_ema) marks the domain, and a new
 * lowest (which takes the tokens seen now) clears the mark: a bump that passes — early
 * training, a change of mixture — was no overfitting, and a mark that stayed would hold
 * the domain where only the bump put it. A val_now that is not finite leaves the
 * domain's record as it was. */
static void overfit_update(step_state *s) {
    for (int m = 0; m < s->M; m++) {
        double now = s->val_now[m];
        /* no score (0: a probe without the cap before a resume that turned it on, or one
         * that was not finite) leaves the record; a domain's first score starts it */
        if (!(isfinite(now) && now > 0)) continue;
        int first = !(s->val_ema[m] > 0);
        const double w = STEP_OVERFIT_EMA;
        double dev = first ? 0 : now - s->val_ema[m];
        double ema = first ? now : (1 - w) * s->val_ema[m] + w * now;
        s->val_var[m] = first ? 0 : (1 - w) * s->val_var[m] + w * dev * dev;
        s->val_ema[m] = ema;
        /* the sd of an exponential mean of independent scores of variance v is
         * sqrt(v w / (2 - w)); v includes the trend's lag while the score falls, which
         * only makes an early mark harder */
        double noise = sqrt(s->val_var[m] * w / (2 - w));
        double margin = fmax(STEP_OVERFIT_RISE * s->val_best[m], STEP_OVERFIT_Z * noise);
        if (first || ema < s->val_best[m]) {
            s->val_best[m] = ema;
            s->val_best_seen[m] = s->seen[m];
            s->overfit[m] = 0;
        } else if (ema > s->val_best[m] + margin && s->val_best_seen[m] > 0) {
            /* (a rise from before any of the domain was trained on is not repetition) */
            s->overfit[m] = 1;
        }
    }
    s->val_n++;
}

/* Σ of the upper bounds with the overfitted domains' c (finite) raised by f. */
static double overfit_sum(const step_hparams *hp, const double *c, const double *hi, int M, double f) {
    double sum = 0;
    for (int m = 0; m < M; m++) sum += isfinite(c[m]) ? fmin(hi[m], fmax(hp->alpha_floor, f * c[m])) : hi[m];
    return sum;
}

/* The bounds of the α step with overfitted domains (steps.h): lo and hi as the hold and
 * the caps give them, an overfitted domain's lower bound down to the floor and, with
 * overfit_capped, its upper bound down to c_m = val_best_seen / plan_tokens. When those bounds cannot hold a whole
 * mixture (Σ hi < 1: the budget must repeat every overfitted domain further than its
 * DMO's u saw it), every c_m is raised by one common factor until they can, as UniMax
 * raises its epochs for every domain alike. Returns whether any domain is overfitted. */
static int overfit_bounds(const step_hparams *hp, const step_state *s, double *lo, double *hi) {
    int M = s->M, any = 0;
    double c[STEP_MAX_DOMAINS];
    for (int m = 0; m < M; m++) {
        lo[m] = hp->has_lo ? hp->alpha_lo[m] : hp->alpha_floor;
        hi[m] = hp->has_caps ? hp->alpha_hi[m] : 1;
        c[m] = INFINITY;
        if (!s->overfit[m] || !(hp->plan_tokens > 0)) continue;
        any = 1;
        lo[m] = hp->alpha_floor;
        if (hp->overfit_capped) c[m] = s->val_best_seen[m] / hp->plan_tokens;
    }
    if (!any) return 0;
    /* the smallest factor f ≥ 1 with Σ bound(f) ≥ 1, by doubling and then a fixed number of
     * halvings (the sum is non-decreasing in f; the same bits every time); where no factor
     * reaches 1 (every c is 0 and the other domains' caps fall short) hi alone bounds */
    double f = 1;
    if (overfit_sum(hp, c, hi, M, 1) < 1) {
        double a = 1, b = 2;
        while (overfit_sum(hp, c, hi, M, b) < 1 && b < 1e300) a = b, b *= 2;
        if (overfit_sum(hp, c, hi, M, b) < 1) return 1;
        for (int it = 0; it < 200; it++) {
            double mid = 0.5 * (a + b);
            if (overfit_sum(hp, c, hi, M, mid) >= 1) b = mid;
            else a = mid;
        }
        f = b;
    }
    for (int m = 0; m < M; m++)
        if (isfinite(c[m])) hi[m] = fmin(hi[m], fmax(hp->alpha_floor, f * c[m]));
    return 1;
}

/* Domain m as a message names it: 'name' where hp->names has it, else its index (in buf). */
static const char *domain_label(const step_hparams *hp, int m, char *buf, size_t n) {
    if (hp->names[m]) snprintf(buf, n, "'%s'", hp->names[m]);
    else snprintf(buf, n, "%d", m);
    return buf;
}

int step_alpha(const step_hparams *hp, step_state *s, double *alpha_before, tdm_err *e) {
    if (!s->have_losses)
        return err_set(e, ERR_INTERNAL, "alpha step of episode %llu without probe losses",
                       (unsigned long long)s->episode);
    int M = s->M;
    double v[STEP_MAX_DOMAINS] = {0}, next[STEP_MAX_DOMAINS];
    if (hp->alpha_step == STEP_ALPHA_PGD) {
        /* ℓ_w < ℓ_u: the extra validation data helped domain m more → its weight grows */
        for (int m = 0; m < M; m++)
            v[m] = s->alpha[m] - hp->lr_alpha * hp->gamma * (s->loss_w[m] - s->loss_u[m]);
    } else {
        alpha_eg(hp, s, v); /* on the simplex already; Π below only enforces the floor */
    }
    /* a step too large for double precision: Π of values like ±1e300 loses α in the
     * rounding (and an infinite one has no projection); the key is the step's size */
    const char *key = hp->alpha_step == STEP_ALPHA_PGD ? "tandem.lr_alpha" : "tandem.alpha_budget";
    double rate = step_alpha_rate(hp);
    char label[80];
    for (int m = 0; m < M; m++)
        if (!isfinite(v[m]))
            return err_set(e, ERR_DIVERGED,
                           "alpha step of episode %llu: the update of domain %s is not finite "
                           "(step size %s = %g, tandem.gamma = %g): lower %s",
                           (unsigned long long)s->episode, domain_label(hp, m, label, sizeof label),
                           key, rate, hp->gamma, key);
    /* the caps' box too (data.max_epochs): α_m ≤ alpha_hi[m] at every step keeps u within
     * them over the planned run, and α* (a mean of such α) within them in a final run;
     * and the hold's lower bounds (alpha_cut = overfit or repeated, floor included): see
     * steps.h */
    const double *hi = hp->has_caps ? hp->alpha_hi : NULL;
    /* the overfitting record first (a copy: *s changes only when the step succeeds);
     * while no domain is overfitted the bounds are those of the hold and the caps */
    step_state rec = *s;
    double ov_lo[STEP_MAX_DOMAINS], ov_hi[STEP_MAX_DOMAINS];
    int over = 0;
    if (hp->overfit_cap) {
        overfit_update(&rec);
        over = overfit_bounds(hp, &rec, ov_lo, ov_hi);
    }
    /* the hold's projection only where the unheld one breaks a bound (a point of the
     * smaller set that is nearest in the larger is nearest in the smaller): elsewhere the
     * step is the unheld one to the bit, so a run whose α never reaches its bounds
     * computes what it did before the hold existed */
    int rc = 0;
    if (over) {
        rc = simplex_project_bounds(v, M, ov_lo, ov_hi, next, e);
    } else {
        rc = simplex_project_box(v, M, hp->alpha_floor, hi, next, e);
        int held = 0;
        for (int m = 0; !rc && hp->has_lo && m < M; m++) held |= next[m] < hp->alpha_lo[m];
        if (held) rc = simplex_project_bounds(v, M, hp->alpha_lo, hi, next, e);
    }
    if (rc) return rc;
    double sum = 0;
    for (int m = 0; m < M; m++) sum += next[m];
    if (!(fabs(sum - 1) <= 1e-6))
        return err_set(e, ERR_DIVERGED,
                       "alpha step of episode %llu: the update is too large to project onto the "
                       "simplex in double precision (the weights sum to %g; step size %s = %g, "
                       "tandem.gamma = %g): lower %s",
                       (unsigned long long)s->episode, sum, key, rate, hp->gamma, key);
    /* test-only: a change no projection can absorb (the hold may pin every weight) */
    if (hp->alpha_perturb != 0 && M > 1) next[0] += hp->alpha_perturb, next[1] -= hp->alpha_perturb;
    if (alpha_before) memcpy(alpha_before, s->alpha, (size_t)M * sizeof *s->alpha);
    *s = rec;
    memcpy(s->alpha, next, (size_t)M * sizeof *next);
    s->have_losses = 0;
    return 0;
}

int step_free(const step_hparams *hp, const dataset *ds, step_nets *n, step_state *s,
              step_report *r, tdm_err *e) {
    double coef[2 * STEP_MAX_DOMAINS] = {0}, loss[2 * STEP_MAX_DOMAINS];
    step_state work = *s;
    int rc = mixed_batch(hp, ds, n, &work, (uint32_t)work.free_steps, PHASE_FREE,
                         (uint32_t)(work.free_steps >> 32), 1, coef, e);
    /* forward, backward, clip and AdamW queued, then one wait for the losses and the norm:
     * a device backend never idles inside the step for the host (ops->clip: an AdamW after
     * a non-finite norm changes nothing, so the check below can come after it) */
    int single = dp_single(n);
    if (!rc) rc = dp_pass(hp, n, n->u, hp->B, s->M, coef, single ? NULL : loss, e);
    if (!rc) rc = n->ops->clip(n->ctx, n->grad, hp->clip, e);
    if (rc) return rc;
    double lr = step_lr(hp, work.free_steps), norm = NAN;
    model_adamw a = {.lr = (float)lr, .beta1 = (float)hp->beta1, .beta2 = (float)hp->beta2,
                     .eps = (float)hp->eps, .weight_decay = (float)hp->weight_decay,
                     .step = (long)work.free_steps + 1};
    rc = n->ops->adamw(n->ctx, n->u, n->grad, n->m, n->v, &a, e);
    if (!rc) rc = n->ops->results(n->ctx, single ? loss : NULL, &norm, e);
    if (rc) return rc;
    if (!isfinite(norm)) {
        /* AdamW's step is bounded by lr per weight, so u diverges through optim.lr, or
         * through the decay when lr x weight_decay >= 1 (each step then scales u by
         * 1 - lr wd, whose size is >= 1); a probe_carry run's u is also the probe's u' */
        const char *key = decay_key(hp) ? decay_key(hp) : "optim.lr";
        return err_set(e, ERR_DIVERGED,
                       "AdamW step %llu of u: the gradient norm is not finite: u diverged (optim.lr = "
                       "%g, optim.weight_decay = %g%s); lower %s",
                       (unsigned long long)work.free_steps + 1, hp->lr, hp->weight_decay,
                       hp->probe_carry ? ", and tandem.probe_carry continues from the probe's "
                                         "u' (tandem.lr_probe)"
                                       : "",
                       key);
    }
    work.free_steps++;
    *s = work;
    if (r) {
        memcpy(r->loss, loss, (size_t)s->M * sizeof *loss);
        memcpy(r->coef, coef, (size_t)s->M * sizeof *coef);
        r->lr = lr;
        r->grad_norm = norm;
        r->tokens = (long)hp->B * hp->T;
    }
    return 0;
}
