/* run_position.c — where a run stands: its position and small state as a state record
 * (to and from the ledger), and the checks of run.episodes against it. */
#include "runner/run_impl.h"

#include <stdlib.h>
#include <string.h>

#include "ledger/audit.h"
#include "report/progress.h"

const char *const run_next_names[] = {"probe", "alpha", "free", "done"};

/* Attempt number for the lease record: Slurm's restart count when present. */
uint64_t run_attempt_number(void) {
    const char *v = getenv("SLURM_RESTART_COUNT");
    return v ? strtoull(v, NULL, 10) : 0;
}

/* The first step of every episode: the probe in a TANDEM run, a free step in a fixed one. */
int run_first_step(const run_ctx *r) {
    return r->cfg.run.mode == CONFIG_MODE_FIXED ? NEXT_FREE : NEXT_PROBE;
}

/* The scalars of the state as a manifest record (views and tensors are the ckpt's). */
void run_to_record(const run_ctx *r, rec_state *rec) {
    memset(rec, 0, sizeof *rec);
    rec->seq = r->seq;
    rec->episode = r->st.episode;
    snprintf(rec->step, sizeof rec->step, "%s", run_next_names[r->next]);
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
    rec->has_val = r->hp.overfit_cap;
    if (rec->has_val) {
        rec->val_n = r->st.val_n;
        memcpy(rec->val_now, r->st.val_now, sizeof rec->val_now);
        memcpy(rec->val_ema, r->st.val_ema, sizeof rec->val_ema);
        memcpy(rec->val_var, r->st.val_var, sizeof rec->val_var);
        memcpy(rec->val_best, r->st.val_best, sizeof rec->val_best);
        memcpy(rec->val_best_seen, r->st.val_best_seen, sizeof rec->val_best_seen);
        for (int m = 0; m < r->st.M; m++) rec->overfit[m] = r->st.overfit[m] ? 1 : 0;
    }
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

int run_from_record(run_ctx *r, const rec_state *rec, tdm_err *e) {
    if (rec->M != dataset_n_domains(&r->ds))
        return err_set(e, ERR_STORE, "the stored state has %d domains but %s has %d", rec->M,
                       r->ds.path, dataset_n_domains(&r->ds));
    if (rec->seed != r->cfg.run.seed)
        return err_set(e, ERR_STORE, "the stored state was made with seed %llu, not %llu",
                       (unsigned long long)rec->seed, (unsigned long long)r->cfg.run.seed);
    int next = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(rec->step, run_next_names[i]) == 0) next = i;
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
    /* the overfitting record (tandem.overfit_cap); a state without one (the key turned on
     * by --allow-change) starts the record afresh from here */
    if (rec->has_val) {
        r->st.val_n = rec->val_n;
        memcpy(r->st.val_now, rec->val_now, sizeof r->st.val_now);
        memcpy(r->st.val_ema, rec->val_ema, sizeof r->st.val_ema);
        memcpy(r->st.val_var, rec->val_var, sizeof r->st.val_var);
        memcpy(r->st.val_best, rec->val_best, sizeof r->st.val_best);
        memcpy(r->st.val_best_seen, rec->val_best_seen, sizeof r->st.val_best_seen);
        for (int m = 0; m < rec->M; m++) r->st.overfit[m] = rec->overfit[m] != 0;
    }
    memcpy(r->st.loss_u, rec->loss_u, sizeof r->st.loss_u);
    memcpy(r->st.loss_w, rec->loss_w, sizeof r->st.loss_w);
    /* mid-episode: the probe's losses and the free sums, for the episode's row (a manifest
     * of an older version has none: that row then covers the steps after the resume) */
    memset(r->ep_loss, 0, sizeof r->ep_loss);
    memset(r->ep_held, 0, sizeof r->ep_held);
    r->ep_grad = 0;
    r->ep_n = 0;
    if (rec->has_episode) {
        memcpy(r->st.loss_u, rec->ep_loss_u, sizeof r->st.loss_u);
        memcpy(r->st.loss_w, rec->ep_loss_w, sizeof r->st.loss_w);
        memcpy(r->ep_loss, rec->ep_free_loss, sizeof r->ep_loss);
        r->ep_grad = rec->ep_grad;
        r->ep_n = (int)rec->ep_free_n;
        /* the state keeps the sums, not how many steps held each domain: a domain with a
         * loss counted in every step so far, one without in none (under sample mixing the
         * row of an episode resumed midway may so count a step that drew none) */
        for (int m = 0; m < rec->M && m < STEP_MAX_DOMAINS; m++) r->ep_held[m] = r->ep_loss[m] != 0 ? r->ep_n : 0;
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

/* A run.episodes changed since the state was written (allowed and recorded by run_config_open):
 * more episodes continue a run, finished or not; fewer end it at the new count if it has
 * not gone past it, else it is refused. The cosine schedule and the eg α rate follow the
 * new length from here on (the steps already taken keep the rates they had): said once. */
int run_fit_episodes(run_ctx *r, tdm_err *e) {
    uint64_t T = (uint64_t)r->cfg.run.episodes, ep = r->st.episode;
    int at_boundary = r->next == NEXT_DONE || (r->next == run_first_step(r) && r->index == 0);
    if (ep > T || (ep == T && !at_boundary))
        return err_set(e, ERR_USAGE,
                       "run.episodes = %llu, but the run in %s has already done %llu episode%s%s: "
                       "it can be extended, not cut below where it is (set run.episodes >= %llu)",
                       (unsigned long long)T, store_url(r->store), (unsigned long long)ep,
                       ep == 1 ? "" : "s", at_boundary ? "" : " and is inside the next",
                       (unsigned long long)(at_boundary ? ep : ep + 1));
    if (r->next == NEXT_DONE && ep < T) {
        r->next = run_first_step(r);
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
int run_precheck_episodes(run_ctx *r, tdm_err *e) {
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

