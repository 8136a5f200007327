/* run.c — the episode loop of `tandem run`; see run.h. */
#include "runner/run_impl.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger/keys.h"
#include "report/metrics_log.h"
#include "report/progress.h"
#include "runner/evaluate.h"
#include "storage/sha256.h"
#include "util/term.h"
#include "util/testhook.h"

/* --json: a "commit" event for a full state that landed since the last one reported */
static void report_commit(run_ctx *r) {
    if (r->progress != PROGRESS_JSON || !r->ld) return;
    uint64_t s = ledger_last_commit(r->ld).seq;
    if (s == UINT64_MAX || s == r->reported_commit) return;
    r->reported_commit = s;
    char key[64];
    ledger_state_key(key, sizeof key, s);
    progress_commit(r->progress, s, key);
}

/* Commits the state when the ledger's policy says `when` is due (ledger_save). */
static int save(run_ctx *r, ledger_save_when when, tdm_err *e) {
    if (!r->ld) return 0; /* every rank holds the same state; rank 0 writes it */
    rec_state rec;
    run_to_record(r, &rec);
    return ledger_save(r->ld, &rec, when, e);
}

/* The end of the run: the last write landed, α* sealed into mixture.mp from the verified α
 * chain (a TANDEM run) and printed on `out` (may be NULL), the lease released. `again`: the
 * run was finished before this process started (ledger_finish). */
static int finish(run_ctx *r, FILE *out, int again, tdm_err *e) {
    ledger_final f = {.mixture = !r->hp.fixed, .names = r->names, .alpha_records = r->alpha_records,
                      .alpha_head = r->alpha_head, .again = again};
    ledger_mixture lm;
    int rc = ledger_finish(r->ld, &f, &lm, e);
    _Static_assert(LEDGER_STOPPED_SHORT == RUN_EXIT_REQUEUE, "a final commit given up for a stop is a requeue");
    if (rc == LEDGER_STOPPED_SHORT)
        fprintf(stderr, "tandem: signal %d: the final state was not committed in time (run position %llu); the "
                "last full state stands, with the alpha records committed so far; exiting 75 (requeue to "
                "resume)\n", (int)run_stop_signal, (unsigned long long)r->seq);
    if (rc || r->hp.fixed) return rc;
    const rec_mixture *x = &lm.x;
    r->have_mixture = 1;
    for (int m = 0; m < x->M && m < STEP_MAX_DOMAINS; m++) r->mixture[m] = x->alpha[m];
    if (out) {
        double most = 0;
        for (int m = 0; m < x->M; m++) most = fmax(most, fabs(x->alpha[m] - lm.start[m]));
        /* unmoved (to rounding) is the default's answer where nothing overfitted: said as such */
        fprintf(out, "alpha %s (episode 0 -> final mixture, mean of episodes %llu..%llu):\n",
                most > 1e-9 ? "moved" : "held its start", (unsigned long long)x->first,
                (unsigned long long)x->last);
        for (int m = 0; m < x->M; m++)
            fprintf(out, "  %-12s %.4f -> %.4f\n", x->names[m], lm.start[m], x->alpha[m]);
    }
    return 0;
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
    int was[STEP_MAX_DOMAINS];
    for (int m = 0; m < r->st.M; m++) was[m] = r->st.overfit[m];
    int rc = step_alpha(&hp, &r->st, a.alpha, e);
    if (rc) return rc;
    /* tandem.overfit_cap: said when a domain's mark is set or cleared (a replayed step after
     * a resume says it again: the state before it had not), naming the key that put it on */
    const char *why = r->cfg.tandem.alpha_cut == CONFIG_CUT_OVERFIT ? "tandem.alpha_cut = overfit"
                                                                    : "tandem.overfit_cap";
    for (int m = 0; m < r->st.M && r->progress != PROGRESS_QUIET; m++) {
        double tok = (double)dataset_tokens(&r->ds, m, SPLIT_TRAIN);
        double at = tok > 0 ? r->st.val_best_seen[m] / tok : 0;
        if (r->st.overfit[m] && !was[m] && (hp.overfit_capped || hp.has_lo)) { /* a file start has no hold */
            char then[320];
            if (hp.overfit_capped)
                snprintf(then, sizeof then, "α_%s is held at the weight that gives the planned run as many "
                         "of its tokens (more only if every marked domain's must rise)", r->names[m]);
            else
                snprintf(then, sizeof then, "the α step may now cut α_%s below its start, as far as the "
                         "probe's evidence takes it,", r->names[m]);
            fprintf(stderr,
                    "tandem: episode %llu: %s's validation loss (smoothed) has risen %.1f %% above its "
                    "lowest (%.4f, at %.2f epochs of it), past its noise: %s until it finds a new lowest (%s)\n",
                    (unsigned long long)r->st.episode, r->names[m],
                    100 * (r->st.val_ema[m] / r->st.val_best[m] - 1), r->st.val_best[m], at, then, why);
        } else if (!r->st.overfit[m] && was[m] && (hp.overfit_capped || hp.has_lo)) {
            fprintf(stderr,
                    "tandem: episode %llu: %s's validation loss found a new lowest (%.4f, at %.2f epochs "
                    "of it): %s (%s)\n",
                    (unsigned long long)r->st.episode, r->names[m], r->st.val_best[m], at,
                    !hp.overfit_capped ? "it is held at its start again"
                    : hp.has_lo        ? "its cap is lifted and it is held at its start again"
                                       : "its cap is lifted",
                    why);
        }
    }
    memcpy(a.alpha_next, r->st.alpha, sizeof a.alpha_next);
    a.lr_alpha = step_alpha_rate(&hp);
    a.gamma = hp.gamma;
    a.seq = r->seq + 1;
    a.prev = r->alpha_head;
    a.time = run_now_wall();
    gethostname(a.host, sizeof a.host);
    a.host[sizeof a.host - 1] = '\0';
    a.attempt = run_attempt_number();
    sha256_digest h = {0};
    rc = r->ld ? ledger_alpha(r->ld, &a, &h, e) : 0;
    if (rc) return rc;
    r->alpha_head = h;
    r->alpha_records = r->st.episode + 1;
    return 0;
}

/* Test-only: TANDEM_TEST_VAL_RISE=m:t makes domain m's validation score (tandem.overfit_cap)
 * rise 5 % an episode from episode t on, as if u overfitted it there, so that the suite can
 * check a capped run across kills and resumes (a real overfit needs a bigger model than a
 * test runs). Applied to the probe's result before anything is committed, so a replayed
 * probe gets the same. */
static void test_val_rise(run_ctx *r) {
    const char *v = getenv("TANDEM_TEST_VAL_RISE");
    int m;
    unsigned long long t;
    if (!v || !r->hp.overfit_cap || sscanf(v, "%d:%llu", &m, &t) != 2 || m < 0 || m >= r->st.M ||
        r->st.episode < t)
        return;
    r->st.val_now[m] *= 1 + 0.05 * (double)(r->st.episode - t + 1);
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

/* A run that diverged says so in its store (diverged.mp, ledger_diverged) before the lease
 * is given back: where, the message that names the key to lower, when. A record that cannot
 * be written is said on stderr; the run exits 5 with its message all the same. */
static void record_divergence(run_ctx *r, const tdm_err *why) {
    if (!r->ld || r->next == NEXT_DONE) return;
    rec_diverged d;
    memset(&d, 0, sizeof d);
    d.seq = r->seq;
    d.episode = r->st.episode;
    snprintf(d.step, sizeof d.step, "%s", run_next_names[r->next]);
    d.index = r->next == NEXT_FREE ? r->index : 0;
    snprintf(d.message, sizeof d.message, "%s", why->msg);
    d.time = run_now_wall();
    gethostname(d.host, sizeof d.host);
    d.host[sizeof d.host - 1] = '\0';
    d.attempt = run_attempt_number();
    tdm_err we = {0};
    if (ledger_diverged(r->ld, &d, &we))
        fprintf(stderr, "tandem: the divergence could not be recorded in %s/%s (tandem status will not show it): %s\n",
                store_url(r->store), LEDGER_DIVERGED, we.msg);
}

/* Commits at a safe point on a signal and returns 75, or returns 0 to go on. The ledger
 * decides whether a full commit fits in what is left of the grace period (ledger_stop):
 * otherwise the last full state stands (the α records up to now are already in the store)
 * and the resume replays from it, bit-exact. */
static int safe_point(run_ctx *r, tdm_err *e) {
    int stop = run_stop_signal != 0;
    /* a signal that reached any rank stops all of them here, at the same position */
    int rc0 = comm_any(r->comm, stop, &stop, e);
    if (rc0) return rc0;
    if (!stop) return 0;
    if (!run_stop_signal) { /* another rank's signal: the grace period counts from now here */
        clock_gettime(CLOCK_MONOTONIC, &run_stop_at);
        run_stop_signal = SIGTERM;
    }
    rec_state rec;
    run_to_record(r, &rec);
    ledger_stop_plan p = {.full = 1};
    int rc = r->ld ? ledger_stop(r->ld, &rec, &p, 0, e) : 0;
    char msg[400];
    if (p.full) {
        snprintf(msg, sizeof msg, "tandem: signal %d: committing at run position %llu and exiting 75 "
                 "(requeue to resume)", (int)run_stop_signal, (unsigned long long)r->seq);
        progress_event(stderr, r->progress, "signal", msg);
    }
    if (!rc && r->ld) rc = ledger_stop(r->ld, &rec, &p, 1, e);
    if (!p.full) {
        /* the message names the state a resume starts from */
        /* the estimate as it was judged: with its margin (1.7 s "more than" 1.8 s read as
         * a contradiction) */
        char stands[96];
        if (p.none_yet) /* it claimed "run position 0" where no state was (hunt) */
            snprintf(stands, sizeof stands, "no full state is committed yet: the resume starts from the beginning");
        else
            snprintf(stands, sizeof stands, "the last full state (run position %llu%s) stands",
                     (unsigned long long)p.last_seq, p.landed ? ", the commit in flight, let land" : "");
        snprintf(msg, sizeof msg, "tandem: signal %d: a full commit would take about %.1f s (%.1f s with the "
                 "%.1fx safety margin), more than the %.1f s left of the %.0f s grace period: %s, with the α "
                 "records up to now; exiting 75 (the resume replays from %s, bit-exact)",
                 (int)run_stop_signal, p.need, p.need * p.margin, p.margin, p.left > 0 ? p.left : 0, p.grace,
                 stands, p.none_yet ? "the seed" : "there");
        /* said even with --quiet: the state a resume starts from is not the newest */
        if (r->progress == PROGRESS_QUIET) fprintf(stderr, "%s\n", msg);
        else progress_event(stderr, r->progress, "signal", msg);
    }
    /* the others exit 75 only when rank 0's commit holds: "requeue me" must be true */
    int mine = rc;
    rc = agree(r, rc, "commit at the stop", e);
    /* rank 0's own commit held: a peer gone meanwhile (its grace ran out before rank 0's,
     * which counts from the safe point) does not undo it — 1 spent one of a Job's retries */
    if (rc && !mine && r->rank == 0) {
        fprintf(stderr, "tandem: %s; rank 0's stop commit holds: exiting 75\n", e->msg);
        rc = 0;
    }
    return rc ? rc : RUN_EXIT_REQUEUE;
}

static int loop(run_ctx *r, tdm_err *e) {
    const config *c = &r->cfg;
    int M = r->st.M, rc = 0;
    uint64_t T = (uint64_t)c->run.episodes, E = (uint64_t)c->tandem.E;
    uint64_t steps_total = T * (r->hp.fixed ? E : E + 2);
    double lr_last = 0;
    tdm_err te = {0};
    double t_episode = run_now_mono(), t_start = t_episode;
    uint64_t seq_start = r->seq;
    long tokens = 0;
    while (r->next != NEXT_DONE) {
        if ((rc = safe_point(r, e))) return rc;
        if ((rc = save(r, LEDGER_SAVE_TICK, e))) return rc;
        test_signal_hook(run_next_names[r->next]);
        switch (r->next) {
        case NEXT_PROBE: {
            /* where the hold pins α (steps.h, step_pinned) the twins could not move it: u
             * is only scored for the overfitting record, and a mark brings the probe back */
            int pinned = step_pinned(&r->hp, &r->st);
            if (pinned) {
                rc = step_probe_pinned(&r->hp, &r->ds, &r->nets, &r->st, e);
            } else {
                rc = step_sync(&r->nets, e);
                /* one rank alone must not abandon a probe the others go on with: with
                 * several ranks a signal waits for the safe point after the probe */
                if (!rc) rc = step_probe(&r->hp, &r->ds, &r->nets, &r->st,
                                         comm_world(r->comm) > 1 ? NULL : &run_stop_signal, e);
            }
            if (rc == STEP_ABANDONED) continue; /* the safe point commits and exits */
            if (rc) return rc;
            test_val_rise(r);
            long probe_rows = (long)r->hp.K * (2 * r->hp.B + r->hp.V) + 2L * r->hp.B * r->hp.eval_batches;
            if (!pinned) tokens += probe_rows * r->hp.T;
            if (r->hp.overfit_cap) tokens += (long)r->hp.B * r->hp.T;
            r->next = NEXT_ALPHA;
            break;
        }
        case NEXT_ALPHA:
            if ((rc = alpha_step(r, e))) return rc;
            r->next = NEXT_FREE;
            r->index = 0;
            break;
        case NEXT_FREE: {
            step_report rep;
            if ((rc = step_free(&r->hp, &r->ds, &r->nets, &r->st, &rep, e))) {
                /* where, in the words tandem status uses (its free step counted from 1 in
                 * the episode; the step's own count is the run's AdamW steps: a hunt) */
                if (rc == ERR_DIVERGED)
                    err_prefix(e, "episode %llu, free step %llu of %d (run position %llu): ",
                               (unsigned long long)r->st.episode, (unsigned long long)r->index + 1, r->hp.E,
                               (unsigned long long)r->seq);
                return rc;
            }
            tokens += rep.tokens;
            /* the batch's loss is its domains' losses in their shares of it; a domain whose
             * batch held no row (sample mixing) has no loss to count: its 0 pulled the
             * row's mean down, a third or two thirds of the true loss in compare's Uniform
             * runs (a hunt of odd configs) */
            double mix = 0;
            for (int m = 0; m < M; m++) {
                int held = r->hp.mixing != STEP_MIX_SAMPLE || rep.coef[m] > 0;
                if (held) r->ep_loss[m] += rep.loss[m], r->ep_held[m]++;
                mix += rep.coef[m] * rep.loss[m];
            }
            if (r->step_n == 0) r->step_first = r->st.free_steps;
            if (r->step_n < METRICS_MAX_STEPS) r->step_loss[r->step_n++] = mix;
            r->ep_grad += rep.grad_norm;
            lr_last = rep.lr;
            r->ep_n++;
            if (++r->index == E) {
                double mean[STEP_MAX_DOMAINS];
                int loss_n = r->ep_n; /* E, or fewer after resuming an older version's state */
                for (int m = 0; m < M; m++) {
                    /* no row drawn in the episode: no measurement (NaN; JSON null, "-" in the
                     * progress line), not a loss of 0 */
                    mean[m] = r->ep_held[m] ? r->ep_loss[m] / r->ep_held[m] : NAN;
                    r->ep_loss[m] = 0, r->ep_held[m] = 0;
                }
                /* a pinned episode's probe ran no twins (loss_u = loss_w = 0, steps.h) */
                int probed = 0;
                for (int m = 0; !r->hp.fixed && m < M; m++)
                    probed |= r->st.loss_u[m] != 0 || r->st.loss_w[m] != 0;
                rec_metrics row = {.t = r->st.episode, .seq = r->seq + 1, .M = M,
                                   .has_probe = probed, .lr = lr_last,
                                   .lr_alpha = r->hp.fixed ? 0 : step_alpha_rate(&r->hp),
                                   .grad_norm = r->ep_grad / loss_n, .free_steps = (uint64_t)loss_n};
                r->ep_grad = 0;
                r->ep_n = 0;
                r->index = 0;
                r->st.episode++;
                r->next = r->st.episode == T ? NEXT_DONE : run_first_step(r);
                double now = run_now_mono(), dt = now - t_episode;
                double last = r->ld ? ledger_last_commit(r->ld).time : 0;
                double per_step = (now - t_start) / (double)(r->seq + 1 - seq_start);
                progress_line pl = {.episode = r->st.episode, .episodes = T, .seq = r->seq + 1,
                                    .M = M, .names = r->names, .loss = mean,
                                    .loss_u = probed ? r->st.loss_u : NULL,
                                    .loss_w = probed ? r->st.loss_w : NULL,
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
                row.time = run_now_wall();
                gethostname(row.host, sizeof row.host);
                row.host[sizeof row.host - 1] = '\0';
                row.attempt = run_attempt_number();
                /* log.val_every: u's validation loss, as `tandem eval --split val` measures a
                 * state (rank 0 alone writes rows; a forward pass changes no state) */
                /* without log.val_every, tandem.overfit_cap's score of u at this episode's
                 * probe (its fixed validation windows) is the row's validation loss */
                int scored = r->hp.overfit_cap && c->log.val_every == 0;
                for (int m = 0; scored && m < M; m++) scored = r->st.val_now[m] > 0; /* 0: no score */
                if (scored) {
                    row.has_val = 1;
                    memcpy(row.val, r->st.val_now, sizeof row.val);
                    row.val_tokens = (uint64_t)(r->hp.B / M) * (uint64_t)r->hp.T;
                }
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
                if (r->ld && (rc = ledger_metrics(r->ld, &row, &fresh, e))) return rc;
                /* the live TensorBoard log: rows this life wrote (a replayed episode's row
                 * was logged by the life that wrote it) */
                /* a row of the trajectory before --allow-change replaced: the live log holds
                 * that trajectory's values from here on too (a file of an earlier life);
                 * TensorBoard shows the new ones, W&B's sync keeps the old (docs/metrics.md) */
                if (fresh == 2 && r->tb && !r->tb_replaced) {
                    r->tb_replaced = 1;
                    fprintf(stderr, "tandem: log.tensorboard: episode %llu's row replaces one of the trajectory "
                            "before the config change; %s also holds that trajectory's values from "
                            "episode %llu on, in the files of earlier starts. TensorBoard shows the new ones "
                            "(a step that goes back drops, per tag, the later ones read before it); wandb sync "
                            "--sync-tensorboard keeps the old: for W&B, write the history anew with tandem "
                            "metrics STORE --tensorboard NEW_DIR\n",
                            (unsigned long long)row.t, c->log.tensorboard, (unsigned long long)row.t);
                }
                if (fresh && r->tb && metrics_log_tfevents(r->tb, &row, r->names, &te)) {
                    fprintf(stderr, "tandem: log.tensorboard: %s; the run goes on without it "
                            "(tandem metrics --tensorboard writes the history later)\n", te.msg);
                    tfevents_close(r->tb, 1, NULL);
                    r->tb = NULL;
                }
                t_episode = run_now_mono(); /* the next episode's time, without this one's row */
                tokens = 0;
            }
            break;
        }
        default:
            return err_set(e, ERR_INTERNAL, "bad run position");
        }
        r->seq++;
        if (r->next == run_first_step(r) && r->index == 0 && (rc = save(r, LEDGER_SAVE_EPISODE, e))) return rc;
    }
    /* the end: a final synchronous commit of the finished state */
    return save(r, LEDGER_SAVE_NOW, e);
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

/* A store outcome that reached the end of the run unhandled (a fault of this program):
 * ERR_STORE naming the store and the outcome, instead of the negative code as the exit
 * status and whatever message e last held. */
static int unhandled_outcome(const run_ctx *r, int rc, tdm_err *e) {
    const char *what = rc == STORE_NOT_FOUND  ? "an object was not found"
                       : rc == STORE_EXISTS   ? "an object to be created was there already"
                       : rc == STORE_CONFLICT ? "an object changed under a compare-and-swap"
                       : rc == STORE_CORRUPT  ? "an object did not hash to its digest"
                                              : "an unknown store outcome";
    return err_set(e, ERR_STORE, "%s: %s (store outcome %d), and this start did not handle it: another writer was "
                   "probably active on the store at the same moment; run again (tandem status and tandem verify "
                   "say where the run stands)",
                   r->store ? store_url(r->store) : "the store", what, rc);
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
    /* a reader of stdout or stderr that stopped reading holds the run until a stop comes,
     * never past it (report/progress.h): the stop commit and exit 75 within the grace */
    progress_guard_streams(run_signal_pending);
    store_set_deadline(run_store_deadline); /* an endpoint that stops answering after a stop
                                             * signal cannot hold the run past its grace */
    store_set_stop_check(run_signal_pending); /* nor a wait for a late DELETE (store.h) */
    int rc = 0;
    comm_set_stop_flag(&run_stop_signal); /* a stop while the ranks gather ends the wait */
    if (!(r->comm = comm_open_deferred(e))) rc = e->code;
    r->rank = comm_rank(r->comm);
    if (r->rank != 0) r->progress = PROGRESS_QUIET; /* one voice: rank 0's */
    /* tcp: set up before the ranks gather, so that the hello carries a key of the run's
     * store and rank 0 turns away the ranks of another run given the same
     * TANDEM_COORDINATOR (they swapped ranks and both ended with bits no config gives). A
     * rank whose set-up failed still comes (with no key), and the agreement below ends
     * them all. MPI: MPI_Init came first (comm_open_deferred), as before. */
    if (!rc) {
        int src = run_setup(r, o, e);
        sha256_digest key;
        sha256(r->cfg.store, strlen(r->cfg.store), &key);
        /* the key once the store is known, also when set-up failed after that: a keyless
         * rank of another run took one of this run's places */
        comm_set_run_key(r->cfg.store[0] ? key.b : NULL);
        tdm_err ce = {0};
        if (comm_connect(r->comm, &ce)) {
            comm_close(r->comm); /* never connected: frees it, no barrier */
            r->comm = NULL;
            rc = src ? src : (*e = ce, ce.code);
        } else {
            rc = src;
            /* rank 0 may be held by its store on purpose (a late S3 DELETE waited out, up
             * to the settle window): the others wait that much longer for it */
            if (r->store) comm_allow_wait(r->comm, store_settle_window_s(r->store));
        }
    }
    if (!rc && comm_world(r->comm) > 1) {
        if (r->hp.B < comm_world(r->comm))
            rc = err_set(e, ERR_USAGE, "train.batch = %d is smaller than the %d ranks: every "
                         "rank needs at least one row of the global batch",
                         r->hp.B, comm_world(r->comm));
    }
    /* a rank that failed to set up must not leave the others waiting in a collective:
     * every rank reaches each agreement, whatever happened before it */
    rc = agree(r, rc, "set up", e);
    /* the same run on every rank (config, data, world) before any collective whose size
     * the config sets: exit 2 naming the rank and keys that differ */
    if (!rc) rc = run_agree_identity(r, e);
    /* GPU ranks: one GPU each, gradients summed by NCCL (before the workspace exists);
     * collective, and it agrees on its own local steps before NCCL's */
    if (!rc && r->cfg.run.device == CONFIG_DEVICE_CUDA) rc = comm_enable_device(r->comm, e);
    run_config_result pinned = {0};
    if (!rc) rc = run_plan_memory(r, e);
    if (!rc) rc = step_nets_create(&r->nets, r->ops, &r->lay, &r->hp, r->st.M ? r->st.M : dataset_n_domains(&r->ds), r->cfg.run.threads, e);
    r->nets.comm = r->comm;
    /* the staging buffer of the host all-reduce, now: a failure here is agreed on below,
     * not discovered by one rank inside a collective */
    if (!rc && comm_world(r->comm) > 1 && !comm_has_device(r->comm) &&
        !(r->nets.host_grad = malloc(r->lay.numel * sizeof *r->nets.host_grad)))
        rc = err_set(e, ERR_INTERNAL, "out of memory for the gradient all-reduce");
    rc = agree(r, rc, "create its model workspace", e);
    ledger_resumed res = {0};
    if (!rc) rc = run_load_everywhere(r, o, &pinned, &res, e);
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
    r->reported_commit = r->ld ? ledger_last_commit(r->ld).seq : UINT64_MAX; /* news from here on */
    if (!rc) {
        char msg[512];
        /* the run id as RUN holds it, the store's text: its control characters as '?' */
        char rid[sizeof pinned.run_id];
        term_copy(rid, sizeof rid, pinned.run_id);
        if (r->shortened)
            snprintf(msg, sizeof msg, "tandem: ending the run in %s (%s) at episode %llu: run.episodes "
                     "was lowered to where it stands", store_url(r->store), rid,
                     (unsigned long long)r->st.episode);
        else if (r->next == NEXT_DONE)
            snprintf(msg, sizeof msg, "tandem: the run in %s (%s) is already finished", store_url(r->store), rid);
        else if (res.found)
            snprintf(msg, sizeof msg, "tandem: resuming %s in %s at episode %llu/%d (%s step, run position %llu)",
                     rid, store_url(r->store), (unsigned long long)r->st.episode,
                     r->cfg.run.episodes, run_next_names[r->next], (unsigned long long)r->seq);
        else if (res.seed_replay)
            snprintf(msg, sizeof msg, "tandem: replaying %s in %s from its seed (%d episodes), bit for "
                     "bit, checked against its alpha records", rid, store_url(r->store),
                     r->cfg.run.episodes);
        else if (!pinned.created) /* RUN was there: stopped before its first full state */
            snprintf(msg, sizeof msg, "tandem: starting %s in %s again from its seed (%d episodes): it "
                     "stopped before its first full state; what it recorded is checked as it goes",
                     rid, store_url(r->store), r->cfg.run.episodes);
        else if (r->cfg.run.mode == CONFIG_MODE_FIXED)
            snprintf(msg, sizeof msg, "tandem: new run %s in %s: %d episodes of E=%d free steps on a "
                     "fixed mixture, %zu parameters, %d domains",
                     rid, store_url(r->store), r->cfg.run.episodes, r->cfg.tandem.E,
                     r->lay.numel, r->st.M);
        else
            snprintf(msg, sizeof msg, "tandem: new run %s in %s: %d episodes of K=%d probe + E=%d free steps, %zu parameters, %d domains",
                     rid, store_url(r->store), r->cfg.run.episodes, r->cfg.tandem.K,
                     r->cfg.tandem.E, r->lay.numel, r->st.M);
        progress_event(stderr, r->progress, "start", msg);
        if (comm_world(r->comm) > 1 && r->progress != PROGRESS_QUIET)
            fprintf(stderr, "tandem: %d ranks (%s, %s transport); the global batch of %d rows is "
                    "split across them\n", comm_world(r->comm), comm_source(r->comm),
                    comm_backend(r->comm), r->hp.B);
    }
    int was_done = !rc && r->next == NEXT_DONE;
    if (!rc && r->next != NEXT_DONE) rc = loop(r, e); /* loop's first safe point sees a pending signal */
    /* the store left unanswered past the stop's deadline: what was committed whole stands
     * (a commit cut off is a state past HEAD, or none), so this is a requeue, not a failed
     * job (exit 3 stopped a Slurm job for good, after holding it until SIGKILL) */
    if (rc == ERR_STORE && run_signal_pending() && store_gave_up_at_deadline()) {
        if (r->rank == 0)
            fprintf(stderr, "tandem: signal %d: the store did not answer before the grace period's end (%s); the "
                    "last full state stands, with the alpha records committed so far; exiting 75\n",
                    (int)run_stop_signal, e->msg);
        rc = RUN_EXIT_REQUEUE;
    }
    else if (!rc && r->shortened && r->rank == 0) rc = save(r, LEDGER_SAVE_NOW, e); /* the done state */
    int finished_loop = rc == 0; /* every rank is here then (failures abort below) */
    if (r->rank == 0) {
        /* the closing text on stdout; with --json stdout holds JSON alone (the end event
         * carries the mixture). A missing mixture.mp is news only when the finished state
         * was committed whole (HEAD named it): a kill between its manifest and HEAD leaves
         * no mixture yet, and tandem verify (which goes by HEAD) calls neither a fault */
        int summary = r->progress == PROGRESS_TEXT && !o->no_summary;
        if (!rc) rc = finish(r, summary ? stdout : NULL, was_done && res.head_named, e);
        if (!rc && r->hp.fixed && summary) {
            printf("trained with the fixed mixture:");
            for (int m = 0; m < r->st.M; m++) printf(" %s %.4f", r->names[m], r->st.alpha[m]);
            printf("\n");
        }
        report_commit(r);
    }
    if (rc == ERR_DIVERGED) record_divergence(r, e);
    /* a store outcome (STORE_EXISTS, STORE_CONFLICT, ...: negative) is the caller's to
     * handle and never an exit status (-2 left the process as 254, under a message an
     * earlier step had set and left in e); one that got this far is said as what it is */
    if (rc < 0) rc = unhandled_outcome(r, rc, e);
    /* A run that fails (exit 1, 3, 4, 5) ends here, not killed: it gives the lease back, so
     * that status and gc do not see a holder that is gone. A writer that was fenced out
     * finds the lease no longer its own and writes nothing. */
    ledger_close(r->ld, rc && rc != RUN_EXIT_REQUEUE);
    r->ld = NULL;
    /* the other ranks succeed only when rank 0's last commit and mixture hold */
    if (finished_loop) rc = agree(r, rc, "finish the run", e);
    /* a final commit given up for the stop (rank 0's finish: 75) is every rank's requeue:
     * the others exited 0 on an unfinished run (review) — collective for every rank here */
    if (finished_loop && comm_world(r->comm) > 1) {
        int rq = 0;
        tdm_err ce = {0};
        if (!comm_any(r->comm, rc == RUN_EXIT_REQUEUE, &rq, &ce) && rq && rc == 0) rc = RUN_EXIT_REQUEUE;
    }
    /* a divergence is every rank's at once (it is judged on reduced losses and gradients,
     * and on u and α, the same everywhere): the others wait here until rank 0 has
     * recorded it and given the lease back — aborting at once, under MPI they ended rank 0
     * inside that write (MPI_Abort), no record and a lease left held */
    else if (rc == ERR_DIVERGED && comm_world(r->comm) > 1) (void)agree(r, rc, "record the divergence", e);
    /* A failed rank ends the job (the others may wait in a collective); a finished or
     * requeued run ends with all ranks together. */
    if (rc && rc != RUN_EXIT_REQUEUE && comm_world(r->comm) > 1) {
        char me[32]; /* which rank says it, once: "rank 1: ..." or "rank 1's ..." */
        size_t ml = (size_t)snprintf(me, sizeof me, "rank %d", r->rank);
        if (strncmp(e->msg, me, ml) || (e->msg[ml] >= '0' && e->msg[ml] <= '9')) err_prefix(e, "%s: ", me);
        /* MPI_Abort ends this process: its one word; over tcp the caller says it */
        if (!strcmp(comm_backend(r->comm), "mpi")) fprintf(stderr, "tandem run: %s\n", e->msg);
        comm_abort(r->comm, rc);
    }
    /* TANDEM_TEST_KILL_AT=close:1: a SIGKILL before the last barrier (a rank whose grace
     * ran out while rank 0 made the stop commit) */
    if (comm_world(r->comm) > 1) testhook_kill_at("close");
    if (comm_close(r->comm)) {
        if (!rc)
            rc = err_set(e, ERR_INTERNAL, "another rank went away instead of finishing with this one "
                         "(its log says why)");
        /* a stop (its commit made, or nothing started): a peer killed meanwhile (its grace
         * ran out) changes nothing of it; still a requeue, not a failure */
        else if (rc == RUN_EXIT_REQUEUE)
            fprintf(stderr, "tandem: rank %d: another rank went away before the last barrier (its log "
                    "says why); this rank's stop stands: exit 75\n", r->rank);
    }
    if (r->rank == 0 && r->progress == PROGRESS_JSON) {
        if (rc && rc != RUN_EXIT_REQUEUE) progress_error(r->progress, rc, e->msg);
        progress_end(r->progress, rc, r->st.episode, (uint64_t)(r->cfg.run.episodes > 0 ? r->cfg.run.episodes : 0),
                     r->seq, r->st.M, r->names, r->have_mixture ? r->mixture : NULL);
    }
    run_config_result_free(&pinned);
    tfevents_close(r->tb, 1, NULL); /* a live log: what it holds stays */
    if (r->nets.ctx) step_nets_destroy(&r->nets);
    if (r->store) store_close(r->store);
    model_layout_free(&r->lay);
    dataset_free(&r->ds);
    free(r);
    progress_release_streams();
    return rc;
}
