/* steps.h — the TANDEM episode steps (DESIGN.md §2) as pure functions of (hparams, state).
 *
 * One episode t: sync (w ← u, u' ← u), probe (K SGD steps of both twins on the same
 * batches, then one shared evaluation batch per domain giving ℓ_w and ℓ_u), alpha
 * (α ← Π(α − η_α γ (ℓ_w − ℓ_u)) in float64), and E free steps (AdamW on the α-mixture).
 * Given the same hparams, dataset, state and thread count, each step produces the same
 * bits every time: batches come from the sampler cursors in the state and from
 * counter-based random numbers keyed by (seed, episode or free-step number, phase), and
 * the model backend is deterministic. This is what lets the runner replay a step after a
 * crash and compare.
 *
 * The state is split in two: step_state (small, host: α, cursors, counters, pending
 * losses) and step_nets (the backend's tensors: u and the AdamW moments, plus scratch for
 * the twins and a gradient). The twins w and u' live only between sync and the end of the
 * probe; nothing outside a probe needs them, so they are never checkpointed.
 *
 * steps/ knows nothing of storage or configuration files.
 */
#ifndef TANDEM_STEPS_STEPS_H
#define TANDEM_STEPS_STEPS_H

#include <signal.h>
#include <stdint.h>

#include "data/dataset.h"
#include "data/sampler.h"
#include "model/model.h"
#include "util/err.h"

#define STEP_MAX_DOMAINS 64

enum { STEP_MIX_WEIGHT = 0, STEP_MIX_SAMPLE = 1 };
/* The α update (step_alpha): normalised exponentiated gradient, or Alg. 1's projected step */
enum { STEP_ALPHA_EG = 0, STEP_ALPHA_PGD = 1 };

/* Returned by step_probe when `abandon` became set mid-probe: nothing changed. */
#define STEP_ABANDONED (-10)

typedef struct step_hparams {
    int B, T;       /* sequences per batch (at least M for weight mixing), tokens each */
    int K, E;       /* probe length, free steps per episode */
    int V;          /* validation sequences per probe step of w (at least M) */
    double gamma;   /* γ: weight of the α-mixture train loss in w's objective */
    double lr_probe, lr_alpha, alpha_floor;
    int alpha_step;      /* STEP_ALPHA_EG or STEP_ALPHA_PGD */
    double alpha_budget; /* c of the eg step: its rate is c / episodes */
    long episodes;       /* T, the run's episodes (the eg step's rate) */
    int val_mean;        /* w's L_val: mean of the domains' losses (1) or their sum (0) */
    int eval_batches;    /* B-row train batches the probe evaluates the twins on (0: 1) */
    int micro;           /* rows per forward/backward pass (0: all rows at once) */
    int probe_carry; /* free phase continues from u'_K instead of u */
    int mixing;      /* STEP_MIX_WEIGHT or STEP_MIX_SAMPLE */
    int fixed;       /* fixed-mixture training: free steps only (no probe, so no val batches) */
    /* free phase: AdamW with a cosine (or constant) schedule over total_free steps */
    double lr, lr_min;
    long warmup, total_free;
    int cosine;
    double weight_decay, clip, beta1, beta2, eps;
    uint64_t seed;
    double alpha_perturb; /* test-only: moved from α_1 to α_0 after the step; 0 in real runs */
    /* Caps (data.max_epochs; steps/mixture.h): cap[m] the most tokens of domain m that u
     * may train on over the whole run (INFINITY: no cap), alpha_hi[m] the largest α_m they
     * allow for the run's budget (1: none); has_caps when some domain has a cap. */
    int has_caps;
    double cap[STEP_MAX_DOMAINS], alpha_hi[STEP_MAX_DOMAINS];
    /* the hold (tandem.alpha_cut = overfit or repeated): α_m ≥ alpha_lo[m] at every α
     * step, where alpha_lo[m] = α⁰_m (overfit: a domain the overfitting record marks drops
     * to the floor, overfit_bounds) or min(α⁰_m, the weight at which the planned run
     * repeats domain m data.unimax_epochs times) (repeated), at least the floor; has_lo
     * when it is in force */
    int has_lo;
    double alpha_lo[STEP_MAX_DOMAINS];
    /* the overfitting cap (tandem.overfit_cap): every probe also scores u on the same
     * validation windows of each domain (the first B/M of its val split), and a domain
     * whose smoothed validation loss has risen STEP_OVERFIT_RISE above its lowest (and has
     * not found a new lowest since) is held at α_m ≤ (the tokens of it u had seen at that
     * lowest) / plan_tokens, the weight at
     * which the planned run sees it as often as the DMO's u had when it began to overfit
     * (its hold's lower bound falls to the floor). plan_tokens: run.episodes x E x B x T.
     * overfit_cap: the record is kept and marks lower the hold (tandem.overfit_cap, or
     * tandem.alpha_cut = overfit); overfit_capped: a mark also caps the domain as above
     * (tandem.overfit_cap only: under alpha_cut = overfit alone a mark lets the probe cut
     * the domain, it does not cut it itself) */
    int overfit_cap, overfit_capped;
    double plan_tokens;
    int skip_pinned; /* tandem.skip_pinned: step_pinned may say yes */
    /* the domains' names, for messages (the dataset's strings, not owned; NULL: a domain
     * is named by its index) */
    const char *names[STEP_MAX_DOMAINS];
} step_hparams;

/* How far a domain's smoothed validation loss must rise above its lowest to count as
 * overfitting: STEP_OVERFIT_RISE of the lowest (relative), and at least STEP_OVERFIT_Z
 * standard deviations of the smoothed score's own noise (the windows are few, and one
 * domain's score can swing 5 % from episode to episode); the smoothing: an exponential
 * mean with weight STEP_OVERFIT_EMA on the newest episode (a horizon of ~10 episodes).
 * Fixed, not keys: the relative rise and the smoothing were chosen before any corpus was
 * measured with them, the noise term after a measured false mark (docs/dmo.md, "The
 * overfitting cap"). */
#define STEP_OVERFIT_RISE 0.01
#define STEP_OVERFIT_Z 3.0
#define STEP_OVERFIT_EMA 0.1

typedef struct step_state {
    int M;
    uint64_t episode;
    uint64_t free_steps; /* AdamW steps done: the schedule position and Adam's step count */
    double alpha[STEP_MAX_DOMAINS];
    int have_losses; /* probe done and alpha not yet */
    double loss_u[STEP_MAX_DOMAINS], loss_w[STEP_MAX_DOMAINS];
    sampler_cursor train[STEP_MAX_DOMAINS], val[STEP_MAX_DOMAINS];
    /* Tokens of each domain that u has trained on (free steps, and the probe's steps with
     * probe_carry), counted as their weight in the gradient: under sample mixing a row of
     * domain m is T tokens, under weight mixing the batch gives domain m α_m·B·T (its rows
     * are B/M, each weighing α_m·M). seen[m] / train tokens = epochs of domain m. */
    double seen[STEP_MAX_DOMAINS];
    /* With overfit_cap: u's validation loss per domain at the last probe (val_now), its
     * exponential mean (val_ema) over val_n probes and that of the squared difference of
     * each score from the mean before it (val_var: the score's noise), the lowest val_ema
     * so far (val_best) with the tokens seen then (val_best_seen), and whether val_ema has
     * risen above val_best by the margin since (overfit; cleared by a new lowest) */
    uint64_t val_n;
    double val_now[STEP_MAX_DOMAINS], val_ema[STEP_MAX_DOMAINS], val_var[STEP_MAX_DOMAINS];
    double val_best[STEP_MAX_DOMAINS], val_best_seen[STEP_MAX_DOMAINS];
    int overfit[STEP_MAX_DOMAINS];
} step_state;

typedef struct step_nets {
    const model_ops *ops;
    model_ctx *ctx;
    const model_layout *lay;
    float *u, *m, *v;       /* persistent: proxy parameters and AdamW moments */
    float *w, *up, *grad;   /* scratch: reference twin, probe copy u', one gradient */
    uint32_t *tokens;       /* host batch buffers: [B+V][T+1] */
    int32_t *domain;        /* [B+V] */
    /* Data parallelism (NULL or one rank: none): every rank builds the same global batch
     * and computes its own contiguous share of the rows; gradients and losses are summed
     * across ranks in rank order (comm.h), so all ranks hold the same u, m, v, α. */
    struct comm *comm;
    float *host_grad; /* [numel] staging of the gradient for the all-reduce (ranks > 1) */
    int micro;        /* rows per pass (hp->micro when it splits a batch; else 0) */
    float *mgrad;     /* with micro: the gradient of one pass, added into grad */
} step_nets;

/* Allocates the backend workspace and buffers for batches of hp->B x hp->T over M
 * domains (w's batch holds B train + V val sequences, scored as 2M domains). */
int step_nets_create(step_nets *n, const model_ops *ops, const model_layout *lay,
                     const step_hparams *hp, int M, int threads, tdm_err *e);
void step_nets_destroy(step_nets *n);

/* Checks hparams against the dataset (B divisible by M for weight mixing, every domain
 * has train and val windows of T+1 tokens, the α floor fits). ERR_USAGE naming the key. */
int step_check(const step_hparams *hp, const dataset *ds, tdm_err *e);

/* A fresh state: episode 0, α uniform or proportional to each domain's train tokens. */
void step_state_init(step_state *s, const dataset *ds, int natural_alpha);

/* w ← u and u' ← u. */
int step_sync(step_nets *n, tdm_err *e);

/* Runs the K probe steps on w and u' (after step_sync) and evaluates both on one batch
 * per domain, setting s->loss_w, s->loss_u and have_losses and advancing the cursors.
 * With overfit_cap, u (as synced, before the K steps) is scored on its fixed validation
 * windows into s->val_now.
 * With probe_carry, u ← u'_K at the end. If *abandon becomes non-zero before the last
 * SGD step, returns STEP_ABANDONED with *s unchanged (u untouched). */
int step_probe(const step_hparams *hp, const dataset *ds, step_nets *n, step_state *s,
               const volatile sig_atomic_t *abandon, tdm_err *e);

/* Whether the α step's bounds admit one mixture only: the hold's lower bounds (with
 * overfit_cap, a marked domain's at the floor, as step_alpha bounds it) sum to 1 within
 * STEP_PINNED_SLACK. Then the probe's twins could not move α, and the runner takes
 * step_probe_pinned instead of sync and step_probe: under tandem.alpha_cut = overfit
 * while no domain is marked (every α_m held at its start), or repeated where no domain's
 * bound is below its start. Never with skip_pinned off (tandem.skip_pinned, false in runs
 * pinned before it: their α records were written by full probes) nor with probe_carry
 * (the twins' steps train u). A function of (hparams, state), so a resume decides alike. */
#define STEP_PINNED_SLACK 1e-9
int step_pinned(const step_hparams *hp, const step_state *s);

/* The probe of an episode whose α the bounds pin (step_pinned): no twins, no batches
 * drawn (the cursors stay); with overfit_cap, u is scored on its fixed validation
 * windows into s->val_now as step_probe scores it; loss_w = loss_u = 0 (Δ = 0, "no
 * probe ran": a real loss is never 0) and have_losses set. The α step then keeps α
 * where the bounds allow it, to the bit, and folds the score into the overfitting
 * record; a domain that record marks loosens the bounds, and the next episode probes.
 * Its cost: one forward pass of B rows instead of K SGD steps of both twins and their
 * evaluation (a DMO where nothing overfits costs about what its free steps cost). */
int step_probe_pinned(const step_hparams *hp, const dataset *ds, step_nets *n, step_state *s, tdm_err *e);

/* The α update from the probe's Δ = γ (ℓ_w − ℓ_u), in float64; requires have_losses
 * (cleared). The previous α is copied to alpha_before (may be NULL). With overfit_cap it
 * first folds val_now into the overfitting record (val_ema, val_best, overfit) and bounds
 * an overfitted domain as hparams says.
 *
 *   pgd  α ← Π(α − η_α Δ), Algorithm 1 exactly (η_α = lr_alpha).
 *   eg   α_m ← α_m exp(−η g_m) / Z with g = (Δ − mean Δ) / rms(Δ) and η = c / T
 *        (c = alpha_budget, T = episodes), then Π with the floor if one is set.
 *
 * Why eg is the default: Δ's size follows the loss scale, the model, K and η_K, so no
 * fixed η_α fits every run (the paper's 4e-3 barely moves α on small models; 0.3 starves
 * domains on others). Dividing by rms(Δ) makes the step scale-free and bounds it:
 * rms(g) ≤ 1, and g is small when every domain gains alike from the extra data (the
 * Proposition's no-gap case, where uniform is a fixed point) and O(1) when domains
 * disagree. η = c / T bounds what a whole run can do: a ratio α_m / α_j changes by at
 * most c·max|g_m − g_j| in log units when the evidence points the same way every episode,
 * while evidence that flips sign (noise) cancels out, its sum growing as √T only. The
 * multiplicative step never sets a weight to 0. */
int step_alpha(const step_hparams *hp, step_state *s, double *alpha_before, tdm_err *e);

/* The rate the α step uses (recorded with every α record): lr_alpha for pgd, c / T
 * for eg. */
double step_alpha_rate(const step_hparams *hp);

/* Per-step figures for progress output. */
typedef struct step_report {
    double loss[STEP_MAX_DOMAINS]; /* per-domain train loss of this step's batch (0: no row) */
    double coef[STEP_MAX_DOMAINS]; /* each domain's share of the step's objective: α (cut by
                                    * the caps), under sample mixing its rows / B (0: it held
                                    * no row, and its loss is no measurement) */
    double lr, grad_norm;
    long tokens; /* tokens processed (forward passes) */
} step_report;

/* One AdamW step of u on the α-mixture; advances free_steps and seen. With caps, a domain
 * never goes past cap[m] tokens: under sample mixing a row whose domain has no room left
 * is drawn again among the domains that have (∝ α, from the same random number), under
 * weight mixing the domain's coefficient is cut to what is left. */
int step_free(const step_hparams *hp, const dataset *ds, step_nets *n, step_state *s,
              step_report *r, tdm_err *e);

/* The free-phase learning rate at AdamW step `free_steps`. */
double step_lr(const step_hparams *hp, uint64_t free_steps);

#endif
