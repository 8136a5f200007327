/* test_steps.c — the simplex projection's edge cases and the TANDEM steps: the sign of
 * the α update, determinism of probe and free steps, abandonment, sample mixing. */
#include <math.h>
#include <string.h>

#include "tests/corpus_fixture.h"
#include "steps/mixture.h"
#include "steps/simplex.h"
#include "steps/steps.h"
#include "tests/test.h"
#include "util/rng.h"

/* KKT conditions of the projection: sum 1, all ≥ floor, and v_i − α_i equal (= θ) on
 * entries above the floor, ≤ θ on entries at it. */
static int is_projection(const double *v, const double *a, int M, double floor) {
    double s = 0, theta = NAN;
    for (int i = 0; i < M; i++) {
        s += a[i];
        if (a[i] < floor - 1e-15) return 0;
        if (a[i] > floor + 1e-12) {
            double t = v[i] - a[i];
            if (isnan(theta)) theta = t;
            else if (fabs(theta - t) > 1e-12) return 0;
        }
    }
    if (fabs(s - 1) > 1e-12) return 0;
    for (int i = 0; i < M; i++)
        if (a[i] <= floor + 1e-12 && !isnan(theta) && v[i] - floor > theta + 1e-12) return 0;
    return 1;
}

static void test_simplex_edge_cases(void) {
    tdm_err e = {0};
    double out[8];
    double eq[4] = {0.3, 0.3, 0.3, 0.3};
    CHECK(simplex_project(eq, 4, 0, out, &e) == 0, "%s", e.msg);
    for (int i = 0; i < 4; i++) CHECK(fabs(out[i] - 0.25) < 1e-15, "all equal -> uniform");
    double dom[3] = {5, 0, 0};
    simplex_project(dom, 3, 0, out, &e);
    CHECK(out[0] == 1 && out[1] == 0 && out[2] == 0, "one dominant: %g %g %g", out[0], out[1],
          out[2]);
    double neg[3] = {-1, 0.5, 0.2};
    simplex_project(neg, 3, 0, out, &e);
    CHECK(out[0] == 0 && fabs(out[1] - 0.65) < 1e-15 && fabs(out[2] - 0.35) < 1e-15,
          "negative: %g %g %g", out[0], out[1], out[2]);
    CHECK(is_projection(neg, out, 3, 0), "negative: KKT");
    double one[1] = {-3};
    simplex_project(one, 1, 0, out, &e);
    CHECK(out[0] == 1, "M=1 gives 1, got %g", out[0]);
    double fl[3] = {1, 0, 0};
    simplex_project(fl, 3, 0.1, out, &e);
    CHECK(fabs(out[0] - 0.8) < 1e-15 && fabs(out[1] - 0.1) < 1e-15 && fabs(out[2] - 0.1) < 1e-15,
          "floor: %g %g %g", out[0], out[1], out[2]);
    CHECK(is_projection(fl, out, 3, 0.1), "floor: KKT");
    double already[3] = {0.2, 0.3, 0.5};
    simplex_project(already, 3, 0, out, &e);
    for (int i = 0; i < 3; i++) CHECK(fabs(out[i] - already[i]) < 1e-15, "fixed point");
    double nan[2] = {NAN, 0.5}, inf[2] = {0.5, INFINITY};
    CHECK(simplex_project(nan, 2, 0, out, &e) != 0 && strstr(e.msg, "NaN"), "NaN: %s", e.msg);
    CHECK(simplex_project(inf, 2, 0, out, &e) != 0 && strstr(e.msg, "Inf"), "Inf: %s", e.msg);
    CHECK(simplex_project(already, 3, 0.34, out, &e) == ERR_USAGE, "floor too large");
    /* random vectors: always a projection */
    rng_stream s;
    rng_stream_init(&s, 3, RNG_TEST, 10, 0, 0);
    for (int k = 0; k < 2000; k++) {
        int M = 1 + (int)rng_below(&s, 8);
        double v[8], floor = k % 3 ? 0 : 0.5 / M * rng_uniform(&s);
        for (int i = 0; i < M; i++) v[i] = 4 * rng_normal(&s);
        CHECK(simplex_project(v, M, floor, out, &e) == 0, "%s", e.msg);
        CHECK(is_projection(v, out, M, floor), "case %d (M=%d) is not the projection", k, M);
    }
}

/* Both α steps move weight toward the domain the extra validation data helped (ℓ_w < ℓ_u)
 * and away from the one it hurt, stay on the simplex, and refuse a step without losses. */
static void test_alpha_sign(void) {
    for (int kind = 0; kind < 2; kind++) {
        step_hparams hp = {.lr_alpha = 0.1, .gamma = 1.0, .alpha_budget = 2, .episodes = 10,
                           .alpha_step = kind ? STEP_ALPHA_PGD : STEP_ALPHA_EG};
        step_state s = {.M = 3, .have_losses = 1};
        for (int m = 0; m < 3; m++) s.alpha[m] = 1.0 / 3;
        /* domain 0: the extra validation data lowered its train loss more (ℓ_w < ℓ_u) */
        s.loss_u[0] = 2.0, s.loss_w[0] = 1.5;
        s.loss_u[1] = 2.0, s.loss_w[1] = 2.0;
        s.loss_u[2] = 2.0, s.loss_w[2] = 2.4;
        double before[3];
        tdm_err e = {0};
        CHECK(step_alpha(&hp, &s, before, &e) == 0, "%s", e.msg);
        CHECK(s.alpha[0] > before[0] && s.alpha[2] < before[2], "step %d sign: %g %g %g", kind,
              s.alpha[0], s.alpha[1], s.alpha[2]);
        CHECK(fabs(s.alpha[0] + s.alpha[1] + s.alpha[2] - 1) < 1e-15, "sums to 1");
        CHECK(!s.have_losses, "losses consumed");
        CHECK(step_alpha(&hp, &s, before, &e) != 0, "a second alpha step without a probe is refused");
        s.have_losses = 1;
        s.loss_w[1] = NAN;
        CHECK(step_alpha(&hp, &s, before, &e) != 0, "step %d: NaN loss rejected", kind);
        CHECK(step_alpha_rate(&hp) == (kind ? 0.1 : 0.2), "rate %g", step_alpha_rate(&hp));
    }
}

/* One eg step from alpha with losses lu, lw (M domains); returns the new α in out. */
static void eg_once(const step_hparams *hp, int M, const double *alpha, const double *lu,
                    const double *lw, double *out) {
    step_state s = {.M = M, .have_losses = 1};
    memcpy(s.alpha, alpha, (size_t)M * sizeof *alpha);
    memcpy(s.loss_u, lu, (size_t)M * sizeof *lu);
    memcpy(s.loss_w, lw, (size_t)M * sizeof *lw);
    tdm_err e = {0};
    CHECK(step_alpha(hp, &s, NULL, &e) == 0, "%s", e.msg);
    memcpy(out, s.alpha, (size_t)M * sizeof *out);
}

/* The eg step's contract (steps.h): scale-free, no move without disagreement, bounded per
 * episode and per run, never 0; consistent evidence moves α, evidence that flips sign
 * (noise) moves it far less. */
static void test_alpha_eg_contract(void) {
    enum { M = 4, T = 200 };
    step_hparams hp = {.gamma = 1.0, .alpha_budget = 2, .episodes = T, .alpha_step = STEP_ALPHA_EG};
    double a0[M] = {0.1, 0.2, 0.3, 0.4}, lu[M] = {2.0, 2.1, 1.9, 2.2}, lw[M] = {1.9, 2.15, 1.7, 2.2};
    double x[M], y[M], lu2[M], lw2[M];
    /* the same evidence on any loss scale gives the same step (to rounding) */
    eg_once(&hp, M, a0, lu, lw, x);
    for (int m = 0; m < M; m++) lu2[m] = 1000 * lu[m], lw2[m] = 1000 * lw[m];
    eg_once(&hp, M, a0, lu2, lw2, y);
    for (int m = 0; m < M; m++) CHECK(fabs(x[m] - y[m]) < 1e-14, "scale: %g vs %g", x[m], y[m]);
    /* also where Σ Δ² leaves double precision (γ 1e-200: it underflowed to 0 and α froze at
     * its start; γ 1e200: it overflowed, the same) */
    const double gammas[] = {1e-100, 1e-200, 1e-310, 1e150, 1e200, 1e300};
    for (size_t i = 0; i < sizeof gammas / sizeof *gammas; i++) {
        step_hparams g = hp;
        g.gamma = gammas[i];
        eg_once(&g, M, a0, lu, lw, y);
        double tol = gammas[i] < 1e-300 ? 1e-9 : 1e-14; /* a subnormal Δ keeps fewer digits */
        for (int m = 0; m < M; m++)
            CHECK(fabs(x[m] - y[m]) < tol, "γ %g: α_%d %.17g, at γ 1 %.17g", gammas[i], m, y[m], x[m]);
    }
    /* a budget so large that exp(−η g) underflows: the losing domains keep a weight > 0
     * (it was 0 after one step, and stayed 0 for good) */
    step_hparams huge = hp;
    huge.alpha_budget = 1e300;
    double h2[M];
    eg_once(&huge, M, a0, lu, lw, y);
    eg_once(&huge, M, y, lu, lw, h2);
    for (int m = 0; m < M; m++) CHECK(y[m] > 0 && h2[m] > 0, "budget 1e300: α_%d %g then %g", m, y[m], h2[m]);
    /* every domain helped alike (Δ equal): no disagreement, α stays */
    for (int m = 0; m < M; m++) lw2[m] = lu[m] - 0.3;
    eg_once(&hp, M, a0, lu, lw2, y);
    for (int m = 0; m < M; m++) CHECK(fabs(y[m] - a0[m]) < 1e-15, "uniform Δ moved α: %g", y[m]);
    /* Δ = 0 everywhere: no evidence, α stays */
    eg_once(&hp, M, a0, lu, lu, y);
    for (int m = 0; m < M; m++) CHECK(y[m] == a0[m] || fabs(y[m] - a0[m]) < 1e-15, "zero Δ");
    /* one step changes no log-ratio by more than 2 η √M (|g_m| ≤ √M) */
    double eta = hp.alpha_budget / T, bound = 2 * eta * sqrt((double)M) + 1e-12;
    for (int m = 0; m < M; m++)
        for (int j = 0; j < M; j++) {
            double change = log(x[m] / x[j]) - log(a0[m] / a0[j]);
            CHECK(fabs(change) <= bound, "log-ratio %d/%d moved %g > %g", m, j, change, bound);
        }
    /* a whole run of the most lopsided consistent evidence: bounded, and never 0 */
    double c[M], n[M];
    for (int m = 0; m < M; m++) c[m] = n[m] = 0.25;
    double big[M] = {2, 2, 2, 2}, hurt[M] = {2, 2, 2, 3}; /* domain 3 always hurt */
    rng_stream r;
    rng_stream_init(&r, 3, RNG_TEST, 33, 0, 0);
    for (int t = 0; t < T; t++) {
        eg_once(&hp, M, c, big, hurt, c);
        /* noise: the same magnitude, its sign drawn at random every episode */
        double flip[M] = {2, 2, 2, rng_uniform(&r) < 0.5 ? 3 : 1};
        eg_once(&hp, M, n, big, flip, n);
    }
    double drift_c = log(c[0] / c[3]), drift_n = fabs(log(n[0] / n[3]));
    double run_bound = hp.alpha_budget * 2 * sqrt((double)M);
    CHECK(c[3] > 0 && drift_c > 0 && drift_c <= run_bound + 1e-9,
          "consistent evidence: log(α0/α3) = %g, bound %g", drift_c, run_bound);
    CHECK(drift_n < 0.35 * drift_c, "noise moved α as far as evidence: %g vs %g", drift_n, drift_c);
    printf("  eg over %d episodes: consistent evidence log(α0/α3) = %.3f (bound %.3f), random "
           "sign %.3f; α3 %.4f\n", T, drift_c, run_bound, drift_n, c[3]);
}

/* KKT conditions of the projection onto {lo ≤ α ≤ hi, Σα = 1}: one θ with α_i = v_i − θ
 * where lo_i < α_i < hi_i, v_i − lo_i ≤ θ where α_i = lo_i, v_i − hi_i ≥ θ where α_i = hi_i. */
static int is_bounds_projection(const double *v, const double *a, int M, const double *lo,
                                const double *hi) {
    double s = 0, theta = NAN, tlo = -INFINITY, thi = INFINITY;
    for (int i = 0; i < M; i++) {
        s += a[i];
        if (a[i] < lo[i] - 1e-15 || a[i] > hi[i] + 1e-15) return 0;
        if (a[i] > lo[i] + 1e-12 && a[i] < hi[i] - 1e-12) {
            double t = v[i] - a[i];
            if (isnan(theta)) theta = t;
            else if (fabs(theta - t) > 1e-12) return 0;
        } else if (a[i] <= lo[i] + 1e-12) {
            tlo = fmax(tlo, v[i] - lo[i]); /* θ ≥ this */
        } else {
            thi = fmin(thi, v[i] - hi[i]); /* θ ≤ this */
        }
    }
    if (fabs(s - 1) > 1e-12) return 0;
    if (isnan(theta)) return tlo <= thi + 1e-12;
    return tlo <= theta + 1e-12 && theta <= thi + 1e-12;
}

static int is_box_projection(const double *v, const double *a, int M, double floor, const double *hi) {
    double lo[16];
    for (int i = 0; i < M; i++) lo[i] = floor;
    return is_bounds_projection(v, a, M, lo, hi);
}

/* The projection with upper bounds (the caps' box): KKT on random inputs, bounds that do
 * not bind give simplex_project's bits, bounds that cannot hold the mass are refused. */
static void test_simplex_box(void) {
    tdm_err e = {0};
    rng_stream r;
    rng_stream_init(&r, 11, RNG_TEST, 1, 0, 0);
    int checked = 0;
    for (int trial = 0; trial < 400; trial++) {
        int M = 1 + (int)(rng_uniform(&r) * 9);
        double v[10], hi[10], out[10], room = 0;
        double lo = trial % 3 == 0 ? 0.01 : 0;
        for (int m = 0; m < M; m++) {
            v[m] = (rng_uniform(&r) - 0.3) * (trial % 2 ? 3 : 0.5);
            hi[m] = lo + rng_uniform(&r) * (trial % 4 == 1 ? 0.3 : 1.2);
            room += hi[m];
        }
        if (room < 1 || lo * M >= 1) continue;
        CHECK(simplex_project_box(v, M, lo, hi, out, &e) == 0, "trial %d: %s", trial, e.msg);
        CHECK(is_box_projection(v, out, M, lo, hi), "trial %d (M %d): not the box projection", trial, M);
        checked++;
    }
    CHECK(checked > 150, "only %d random cases", checked);
    double v[3] = {0.7, 0.2, 0.4}, a[3], b[3], none[3] = {1, 1, 1};
    CHECK(simplex_project_box(v, 3, 0, none, a, &e) == 0 && simplex_project(v, 3, 0, b, &e) == 0 &&
              memcmp(a, b, sizeof a) == 0,
          "bounds of 1 are simplex_project itself");
    double tight[3] = {0.2, 0.3, 0.4};
    CHECK(simplex_project_box(v, 3, 0, tight, a, &e) == ERR_USAGE && strstr(e.msg, "data.max_epochs"),
          "caps holding 0.9 of the mass: %s", e.msg);
    double capped[3] = {0.1, 1, 1};
    CHECK(simplex_project_box(v, 3, 0, capped, a, &e) == 0 && fabs(a[0] - 0.1) < 1e-15 &&
              fabs(a[1] + a[2] - 0.9) < 1e-12 && fabs((v[1] - a[1]) - (v[2] - a[2])) < 1e-12,
          "one binding cap: %g %g %g", a[0], a[1], a[2]);
}

/* The projection with a lower bound per domain (the α step's hold): KKT on random inputs,
 * with and without upper bounds; lower bounds that take all the mass leave α at them;
 * unsound bounds are refused. */
static void test_simplex_bounds(void) {
    tdm_err e = {0};
    rng_stream r;
    rng_stream_init(&r, 12, RNG_TEST, 1, 0, 0);
    int checked = 0, bound_lo = 0;
    for (int trial = 0; trial < 600; trial++) {
        int M = 1 + (int)(rng_uniform(&r) * 9);
        double v[10], lo[10], hi[10], ones[10], out[10], low = 0, room = 0;
        for (int m = 0; m < M; m++) {
            v[m] = (rng_uniform(&r) - 0.3) * (trial % 2 ? 3 : 0.5);
            lo[m] = rng_uniform(&r) * 1.6 / M;
            hi[m] = lo[m] + rng_uniform(&r) * (trial % 4 == 1 ? 0.3 : 1.2);
            ones[m] = 1;
            low += lo[m];
            room += hi[m];
        }
        if (low >= 1) continue;
        int capped = trial % 3 != 0 && room >= 1;
        CHECK(simplex_project_bounds(v, M, lo, capped ? hi : NULL, out, &e) == 0, "trial %d: %s", trial, e.msg);
        CHECK(is_bounds_projection(v, out, M, lo, capped ? hi : ones), "trial %d (M %d): not the projection",
              trial, M);
        for (int m = 0; m < M; m++) bound_lo += out[m] <= lo[m] + 1e-12 && v[m] > lo[m];
        checked++;
    }
    CHECK(checked > 200 && bound_lo > 50, "only %d random cases, %d binding lower bounds", checked, bound_lo);
    /* the floor as every lower bound: simplex_project_box's bits */
    double v[3] = {0.9, 0.2, -0.4}, a[3], b[3], fl[3] = {0.05, 0.05, 0.05}, hi[3] = {0.5, 1, 1};
    CHECK(simplex_project_bounds(v, 3, fl, hi, a, &e) == 0 && simplex_project_box(v, 3, 0.05, hi, b, &e) == 0 &&
              memcmp(a, b, sizeof a) == 0,
          "a uniform lower bound is the floor: %g %g %g vs %g %g %g", a[0], a[1], a[2], b[0], b[1], b[2]);
    /* lower bounds holding all the mass: α is them, whatever v says */
    double all[3] = {0.5, 0.3, 0.2};
    CHECK(simplex_project_bounds(v, 3, all, NULL, a, &e) == 0 && fabs(a[0] - 0.5) < 1e-15 &&
              fabs(a[1] - 0.3) < 1e-15 && fabs(a[2] - 0.2) < 1e-15,
          "full lower bounds: %g %g %g", a[0], a[1], a[2]);
    double over[3] = {0.5, 0.4, 0.2}, crossed[3] = {0.5, 0.1, 0.1}, below[3] = {0.4, 1, 1};
    CHECK(simplex_project_bounds(v, 3, over, NULL, a, &e) == ERR_INTERNAL, "lower bounds over 1");
    CHECK(simplex_project_bounds(v, 3, crossed, below, a, &e) == ERR_INTERNAL && strstr(e.msg, "domain 0"),
          "lo above hi: %s", e.msg);
    double nan_v[3] = {NAN, 0, 0};
    CHECK(simplex_project_bounds(nan_v, 3, fl, NULL, a, &e) == ERR_DIVERGED && strstr(e.msg, "NaN"),
          "NaN: %s", e.msg);
}

/* The hold in the eg step (alpha_cut = repeated, steps.h has_lo): a domain hurt in every
 * episode of a run falls to its lower bound and no further, the others move freely; with
 * lower bounds that hold all the mass (no domain repeated past N epochs) α stays put. */
static void test_alpha_hold(void) {
    enum { M = 4, T = 200 };
    step_hparams hp = {.gamma = 1.0, .alpha_budget = 2, .episodes = T, .alpha_step = STEP_ALPHA_EG,
                       .has_lo = 1, .alpha_lo = {0.05, 0.1, 0.1, 0.2}};
    double a[M] = {0.25, 0.25, 0.25, 0.25}, free_a[M] = {0.25, 0.25, 0.25, 0.25};
    double lu[M] = {2, 2, 2, 2}, lw[M] = {2, 2, 2, 3}; /* domain 3 always hurt */
    step_hparams any = hp;
    any.has_lo = 0;
    double least = 1;
    for (int t = 0; t < T; t++) {
        eg_once(&hp, M, a, lu, lw, a);
        eg_once(&any, M, free_a, lu, lw, free_a);
        least = fmin(least, a[3]);
    }
    CHECK(free_a[3] < 0.2 - 1e-3, "without the hold the hurt domain falls below 0.2: %g", free_a[3]);
    CHECK(least >= 0.2 - 1e-15 && fabs(a[3] - 0.2) < 1e-12, "held at 0.2: least %g, end %g", least, a[3]);
    CHECK(fabs(a[0] - a[1]) < 1e-12 && a[0] > 0.25, "the rest share its weight: %g %g %g", a[0], a[1], a[2]);
    /* every domain at its lower bound (the bounds are α⁰): α never moves */
    step_hparams frozen = hp;
    double a0[M] = {0.4, 0.3, 0.2, 0.1}, x[M];
    memcpy(frozen.alpha_lo, a0, sizeof a0);
    memcpy(x, a0, sizeof a0);
    for (int t = 0; t < 50; t++) {
        double lw2[M] = {2, 2 + 0.1 * (t % 3), 1.5, 3};
        eg_once(&frozen, M, x, lu, lw2, x);
    }
    for (int m = 0; m < M; m++) CHECK(fabs(x[m] - a0[m]) < 1e-15, "frozen α moved: %d %.17g", m, x[m]);
    /* Algorithm 1's step off the simplex: every domain helped alike pushes v above α
     * everywhere (Σv > 1), and the projection's shift would take some below their bounds */
    step_hparams pgd = frozen;
    pgd.alpha_step = STEP_ALPHA_PGD;
    pgd.lr_alpha = 0.5;
    double lw3[M] = {1.9, 1.7, 1.95, 1.6};
    eg_once(&pgd, M, a0, lu, lw3, x); /* (eg_once runs whichever step hp names) */
    for (int m = 0; m < M; m++) CHECK(fabs(x[m] - a0[m]) < 1e-15, "pgd under full bounds moved: %d %.17g", m, x[m]);
    step_hparams pgd_free = pgd;
    pgd_free.has_lo = 0;
    double y[M];
    eg_once(&pgd_free, M, a0, lu, lw3, y);
    int below = 0;
    for (int m = 0; m < M; m++) below |= y[m] < a0[m] - 1e-9;
    CHECK(below, "the unheld pgd step takes some domain below its start here");
    printf("  hold: the hurt domain ends at %.4f (its bound 0.2; %.4f without the hold)\n", a[3], free_a[3]);
}

/* A fixed pseudo-random number in [0, 1) for episode t (a splitmix64 of t). */
static double noise_at(int t) {
    uint64_t z = (uint64_t)t * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

/* One α step with the overfitting record: val_now and seen set as a probe and the free
 * steps would have left them. */
static void ov_once(const step_hparams *hp, step_state *s, const double *lu, const double *lw,
                    const double *val, const double *seen) {
    s->have_losses = 1;
    memcpy(s->loss_u, lu, (size_t)s->M * sizeof *lu);
    memcpy(s->loss_w, lw, (size_t)s->M * sizeof *lw);
    memcpy(s->val_now, val, (size_t)s->M * sizeof *val);
    memcpy(s->seen, seen, (size_t)s->M * sizeof *seen);
    tdm_err e = {0};
    CHECK(step_alpha(hp, s, NULL, &e) == 0, "%s", e.msg);
}

/* tandem.alpha_cut = overfit (steps.h: overfit_cap without overfit_capped, every lower
 * bound at the start): while nothing is marked α stays at its start whatever the probe
 * says; a marked domain may then be cut by the probe's evidence (not to its cap at once),
 * and only it: the unmarked ones never fall below their start. */
static void test_overfit_unlocks(void) {
    enum { M = 3, T = 100 };
    const double third = 1.0 / 3;
    step_hparams hp = {.gamma = 1.0, .alpha_budget = 2, .episodes = T, .alpha_step = STEP_ALPHA_EG,
                       .overfit_cap = 1, .overfit_capped = 0, .plan_tokens = 2.5e6, .has_lo = 1,
                       .alpha_lo = {third, third, third}};
    step_state s = {.M = M};
    for (int m = 0; m < M; m++) s.alpha[m] = third;
    double lu[M] = {2, 2, 2}, lw[M] = {2.3, 2, 1.5}; /* the probe: domain 0 down, domain 2 up */
    int marked_at = -1, moved_before = 0;
    double least1 = 1, least0 = 1, cap0 = 0;
    for (int t = 0; t < T; t++) {
        double seen[M] = {1e4 * t, 1e4 * t, 1e4 * t};
        /* domain 0: lowest at t = 30, rising 1 % an episode after; 1, 2 falling */
        double val[M] = {t <= 30 ? 4 - 0.05 * t : 2.5 * (1 + 0.01 * (t - 30)), 4 - 0.01 * t, 4 - 0.01 * t};
        ov_once(&hp, &s, lu, lw, val, seen);
        if (marked_at < 0 && s.overfit[0]) marked_at = t, cap0 = s.val_best_seen[0] / hp.plan_tokens;
        if (marked_at < 0)
            for (int m = 0; m < M; m++) moved_before |= fabs(s.alpha[m] - third) > 1e-15;
        least1 = fmin(least1, s.alpha[1]);
        if (marked_at >= 0 && t == marked_at) least0 = s.alpha[0];
    }
    CHECK(!moved_before, "α moved before any mark");
    CHECK(marked_at > 30 && marked_at < 60, "domain 0 marked at %d", marked_at);
    CHECK(s.overfit[0] && s.alpha[0] < third - 0.02 && s.alpha[2] > third + 0.02,
          "marked domain 0 cut (%g) and its weight to domain 2 (%g)", s.alpha[0], s.alpha[2]);
    CHECK(least1 >= third - 1e-15, "unmarked domain 1 fell below its start: %g", least1);
    CHECK(least0 > cap0 + 0.1, "the mark's episode took α_0 to %g, near its cap %g: a cap, not the probe", least0, cap0);
}

/* The overfitting cap (tandem.overfit_cap, steps.h): a domain whose smoothed validation
 * loss rises 1 % above its lowest is held at the weight of the tokens seen at that lowest
 * (val_best_seen / plan_tokens), even while the probe's evidence pushes it up and even
 * below the hold's lower bound; a flat but noisy validation loss marks nothing, and a
 * bump that passes is cleared by the next lowest; off, or
 * with nothing marked, the step is the plain one to the bit; and when every domain is
 * marked with bounds too small for a whole mixture they rise by one factor together. */
static void test_overfit_cap(void) {
    enum { M = 3, T = 100 };
    step_hparams hp = {.gamma = 1.0, .alpha_budget = 2, .episodes = T, .alpha_step = STEP_ALPHA_EG,
                       .overfit_cap = 1, .overfit_capped = 1, .plan_tokens = 2.5e6, .has_lo = 1,
                       .alpha_lo = {0.3, 0.3, 0.3}};
    step_hparams off = hp;
    off.overfit_cap = 0;
    step_state s = {.M = M}, p = {.M = M};
    for (int m = 0; m < M; m++) s.alpha[m] = p.alpha[m] = 1.0 / 3;
    double lu[M] = {2, 2, 2}, lw[M] = {2, 2, 1.5}; /* the probe favours domain 2 throughout */
    int marked_at = -1, flat_marked = 0;
    double least_gap = 1;
    for (int t = 0; t < T; t++) {
        double seen[M] = {1e4 * t, 1e4 * t, 1e4 * t};
        /* domains 0, 1: falling, then flat with ±0.5 % and random ±5 % noise (one domain's
         * score swung that much in a measured run); domain 2: lowest (2.0) at
         * t = 40, rising 0.3 % an episode after */
        double val[M] = {t < 30 ? 4 - 0.05 * t : 2.5 * (1 + 0.005 * ((t % 2) ? 1 : -1)),
                         t < 30 ? 4 - 0.04 * t : 2.8 * (1 + 0.1 * (noise_at(t) - 0.5)),
                         t <= 40 ? 4 - 0.05 * t : 2.0 * (1 + 0.003 * (t - 40))};
        ov_once(&hp, &s, lu, lw, val, seen);
        ov_once(&off, &p, lu, lw, val, seen);
        if (marked_at < 0 && s.overfit[2]) marked_at = t;
        flat_marked |= s.overfit[0] | s.overfit[1];
        if (marked_at >= 0) least_gap = fmin(least_gap, s.val_best_seen[2] / hp.plan_tokens - s.alpha[2]);
        if (marked_at < 0)
            CHECK(memcmp(s.alpha, p.alpha, sizeof s.alpha) == 0, "t %d: unmarked, the step differs", t);
    }
    CHECK(!flat_marked, "noise marked a flat domain");
    CHECK(!p.overfit[2] && p.val_n == 0, "off: no record kept");
    /* the EMA's lowest comes some episodes after the raw one, and the margin takes more
     * where the descent before it was steep (its lag counts as noise) */
    CHECK(marked_at > 45 && marked_at < 90, "domain 2 marked at episode %d", marked_at);
    double c = s.val_best_seen[2] / hp.plan_tokens;
    /* the smoothed lowest lags the raw one (t = 40) where the curve turns this sharply */
    CHECK(c > 0.15 && c < 0.28, "the tokens at its lowest: c = %g", c);
    CHECK(s.alpha[2] <= c + 1e-15 && least_gap >= -1e-15, "α_2 %g above its cap %g (gap %g)", s.alpha[2], c,
          least_gap);
    CHECK(p.alpha[2] > c + 0.1, "without the cap the evidence takes α_2 higher: %g", p.alpha[2]);
    CHECK(fabs(s.alpha[0] + s.alpha[1] + s.alpha[2] - 1) < 1e-12, "a mixture");

    /* the cap goes below the hold's lower bound: marked early (c ≈ 0.1), α_2 falls to it */
    step_state h = {.M = M};
    for (int m = 0; m < M; m++) h.alpha[m] = 1.0 / 3;
    for (int t = 0; t < 40; t++) {
        double seen[M] = {1e4 * t, 1e4 * t, 1e4 * t};
        double val[M] = {3, 3, t <= 10 ? 4 - 0.1 * t : 3.0 * (1 + 0.01 * (t - 10))};
        ov_once(&hp, &h, lu, lw, val, seen);
    }
    CHECK(h.overfit[2] && h.alpha[2] < 0.3 - 0.1, "held below the hold's 0.3: %g", h.alpha[2]);
    CHECK(h.alpha[2] <= h.val_best_seen[2] / hp.plan_tokens + 1e-15, "at most its cap");

    /* a bump that passes: marked while the score is up, cleared by a new lowest, and the
     * hold's lower bound is back (α_2 returns to at least 0.3) */
    step_state b = {.M = M};
    for (int m = 0; m < M; m++) b.alpha[m] = 1.0 / 3;
    int was_marked = 0;
    double least = 1;
    for (int t = 0; t < 60; t++) {
        double seen[M] = {1e4 * t, 1e4 * t, 1e4 * t};
        double bump = t >= 10 && t < 20 ? 0.3 : 0; /* +10 % for ten episodes */
        double val[M] = {3, 3, 3 - 0.01 * t + bump};
        ov_once(&hp, &b, lu, lw, val, seen);
        was_marked |= b.overfit[2];
        if (b.overfit[2]) least = fmin(least, b.alpha[2]);
    }
    CHECK(was_marked && least < 0.3 && !b.overfit[2] && b.alpha[2] >= 0.3 - 1e-15,
          "a passing bump: marked %d (least α_2 %g), at the end marked %d, α_2 %g", was_marked, least, b.overfit[2],
          b.alpha[2]);

    /* no score (0: a probe that ran without the cap before a resume turned it on) leaves
     * the record as it is; the domain's first real score starts it */
    step_state z = {.M = M, .val_n = 7};
    for (int m = 0; m < M; m++) z.alpha[m] = 1.0 / 3;
    double zero[M] = {0, 0, 0}, some[M] = {1e4, 1e4, 1e4}, first[M] = {3, 3, 3};
    ov_once(&hp, &z, lu, lw, zero, some);
    CHECK(z.val_ema[0] == 0 && z.val_best[0] == 0 && !z.overfit[0], "no score: record untouched");
    for (int t = 0; t < 30; t++) ov_once(&hp, &z, lu, lw, first, some);
    CHECK(z.val_ema[0] == 3 && z.val_best[0] == 3 && !z.overfit[0] && !z.overfit[2],
          "started at the first score, not against 0: ema %g best %g", z.val_ema[0], z.val_best[0]);

    /* every domain marked with caps summing to 0.12: raised by one factor (ratios kept) */
    step_hparams all = hp;
    all.has_lo = 0;
    step_state q = {.M = M, .val_n = 5, .overfit = {1, 1, 1}, .val_best = {1, 1, 1}, .val_ema = {2, 2, 2},
                    .val_best_seen = {5e4, 1e5, 1.5e5}};
    for (int m = 0; m < M; m++) q.alpha[m] = 1.0 / 3;
    double seen[M] = {1e5, 2e5, 3e5}, val[M] = {2, 2, 2};
    ov_once(&all, &q, lu, lw, val, seen);
    CHECK(fabs(q.alpha[0] - 1.0 / 6) < 1e-9 && fabs(q.alpha[1] - 2.0 / 6) < 1e-9 && fabs(q.alpha[2] - 3.0 / 6) < 1e-9,
          "raised together: %g %g %g", q.alpha[0], q.alpha[1], q.alpha[2]);
    printf("  overfit cap: domain 2 marked at episode %d, held at %.4f (cap %.4f; %.4f without)\n", marked_at,
           s.alpha[2], c, p.alpha[2]);
}

/* UniMax: uniform while every domain has the data, capped domains at N epochs and their
 * surplus to the rest, Natural when the corpus repeats more than N times, and user caps
 * that hold in every case. */
static void test_unimax(void) {
    tdm_err e = {0};
    double tok[3] = {1000, 100, 10}, a[3];
    CHECK(mixture_unimax(tok, 3, 30, 4, NULL, a, &e) == 0, "%s", e.msg);
    CHECK(fabs(a[0] - 1.0 / 3) < 1e-15 && fabs(a[1] - 1.0 / 3) < 1e-15 && fabs(a[2] - 1.0 / 3) < 1e-15,
          "abundant: uniform, got %g %g %g", a[0], a[1], a[2]);
    CHECK(mixture_unimax(tok, 3, 300, 4, NULL, a, &e) == 0, "%s", e.msg);
    CHECK(fabs(a[2] - 40.0 / 300) < 1e-15 && fabs(a[0] - 130.0 / 300) < 1e-15 &&
              fabs(a[1] - 130.0 / 300) < 1e-15,
          "the small domain at 4 epochs, the rest shared: %g %g %g", a[0], a[1], a[2]);
    CHECK(mixture_unimax(tok, 3, 1000, 4, NULL, a, &e) == 0, "%s", e.msg);
    CHECK(fabs(a[2] - 0.04) < 1e-15 && fabs(a[1] - 0.4) < 1e-15 && fabs(a[0] - 0.56) < 1e-15,
          "two capped: %g %g %g", a[0], a[1], a[2]);
    CHECK(mixture_unimax(tok, 3, 11100, 4, NULL, a, &e) == 0, "%s", e.msg);
    for (int m = 0; m < 3; m++)
        CHECK(fabs(a[m] - tok[m] / 1110) < 1e-12, "10 epochs of the corpus: natural, got %g", a[m]);
    double cap[3] = {INFINITY, INFINITY, 2}; /* 2 epochs of the small one at most */
    CHECK(mixture_unimax(tok, 3, 11100, 4, cap, a, &e) == 0, "%s", e.msg);
    CHECK(fabs(a[2] * 11100 - 20) < 1e-9 && fabs(a[0] / a[1] - 10) < 1e-9,
          "a user cap under Natural: %g %g %g", a[0], a[1], a[2]);
    double all[3] = {1, 1, 1};
    CHECK(mixture_unimax(tok, 3, 2000, 4, all, a, &e) == ERR_USAGE && strstr(e.msg, "data.max_epochs"),
          "caps holding 1110 of 2000 tokens: %s", e.msg);
    double hi[3];
    CHECK(mixture_alpha_bounds(tok, 3, 300, cap, hi) == 1 && hi[0] == 1 && fabs(hi[2] - 20.0 / 300) < 1e-15,
          "bounds: %g %g %g", hi[0], hi[1], hi[2]);
}

typedef struct fixture {
    char *dir;
    dataset ds;
    model_layout lay;
    step_hparams hp;
} fixture;

static int fixture_open(fixture *f, int mixing) {
    memset(f, 0, sizeof *f);
    f->dir = test_tmpdir("steps");
    uint64_t tr = 20000;
    tdm_err e = {0};
    CHECK_OR_RET(corpus_fixture(f->dir, 2, &tr, 1, 3000, &f->ds, &e) == 0, "%s", e.msg);
    model_config mc = {.vocab = 256, .ctx = 16, .layers = 1, .heads = 2, .channels = 16};
    CHECK_OR_RET(model_layout_init(&f->lay, &mc, &e) == 0, "%s", e.msg);
    f->hp = (step_hparams){.B = 4, .T = 16, .K = 2, .E = 2, .V = 2, .gamma = 1, .lr_probe = 1e-2,
                           .lr_alpha = 0.5, .alpha_budget = 2, .episodes = 10, .mixing = mixing, .lr = 1e-3, .lr_min = 1e-4,
                           .total_free = 20, .cosine = 1, .weight_decay = 0.01, .clip = 1,
                           .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .seed = 5};
    CHECK_OR_RET(step_check(&f->hp, &f->ds, &e) == 0, "%s", e.msg);
    return 0;
}

static void fixture_close(fixture *f) {
    dataset_free(&f->ds);
    model_layout_free(&f->lay);
    test_rmtree(f->dir);
    free(f->dir);
}

/* A T longer than a domain's shards: step_check's refusal names train.seq, the key that
 * sets T (the sampler's message said only "use a smaller T"). */
static void test_check_names_train_seq(void) {
    fixture f;
    if (fixture_open(&f, STEP_MIX_WEIGHT)) return;
    tdm_err e = {0};
    f.hp.T = 5000; /* val holds 3000 tokens */
    CHECK(step_check(&f.hp, &f.ds, &e) == ERR_USAGE && strstr(e.msg, "T+1 = 5001") &&
              strstr(e.msg, "train.seq = 5000"),
          "%s", e.msg);
    fixture_close(&f);
}

/* Runs one episode from a fresh state; returns the final state and u. */
static int run_episode(fixture *f, step_state *s, float *u_out, int abandon_probe) {
    tdm_err e = {0};
    step_nets n;
    CHECK_OR_RET(step_nets_create(&n, &model_cpu_ops, &f->lay, &f->hp, 2, 1, &e) == 0, "%s", e.msg);
    float *host = malloc(f->lay.numel * sizeof *host);
    model_init_params(&f->lay, 9, host);
    n.ops->upload(n.ctx, n.u, host, f->lay.numel, &e);
    step_state_init(s, &f->ds, 0);
    volatile sig_atomic_t stop = (sig_atomic_t)abandon_probe;
    CHECK_OR_RET(step_sync(&n, &e) == 0, "%s", e.msg);
    int rc = step_probe(&f->hp, &f->ds, &n, s, &stop, &e);
    if (abandon_probe) {
        CHECK_OR_RET(rc == STEP_ABANDONED, "abandon: rc %d", rc);
        CHECK_OR_RET(!s->have_losses && s->train[0].pos == 0 && s->val[0].pos == 0,
                     "abandoned probe changed the state");
    } else {
        CHECK_OR_RET(rc == 0, "probe: %s", e.msg);
        CHECK_OR_RET(s->have_losses, "probe sets losses");
        CHECK_OR_RET(step_alpha(&f->hp, s, NULL, &e) == 0, "%s", e.msg);
        for (int i = 0; i < f->hp.E; i++) {
            step_report r;
            CHECK_OR_RET(step_free(&f->hp, &f->ds, &n, s, &r, &e) == 0, "%s", e.msg);
        }
    }
    n.ops->download(n.ctx, u_out, n.u, f->lay.numel, &e);
    free(host);
    step_nets_destroy(&n);
    return 0;
}

static void check_episode_deterministic(int mixing) {
    fixture f;
    if (fixture_open(&f, mixing)) return;
    step_state a, b;
    float *ua = malloc(f.lay.numel * sizeof *ua), *ub = malloc(f.lay.numel * sizeof *ub);
    int ok = run_episode(&f, &a, ua, 0) == 0 && run_episode(&f, &b, ub, 0) == 0;
    CHECK(ok, "episode failed");
    CHECK(memcmp(&a, &b, sizeof a) == 0, "step states differ between identical episodes");
    CHECK(memcmp(ua, ub, f.lay.numel * sizeof *ua) == 0, "u differs between identical episodes");
    CHECK(a.free_steps == 2 && a.train[0].pos > 0 && a.val[1].pos > 0, "cursors and counters move");
    CHECK(fabs(a.alpha[0] + a.alpha[1] - 1) < 1e-15 && a.alpha[0] != 0.5, "alpha moved: %g",
          a.alpha[0]);
    /* an abandoned probe leaves everything as it was */
    step_state c;
    CHECK(run_episode(&f, &c, ub, 1) == 0, "abandoned episode");
    free(ua);
    free(ub);
    fixture_close(&f);
}

/* With the overfitting cap the probe also scores u on the same validation windows every
 * time: two identical episodes keep identical records, and an episode's score is u's. */
static void test_overfit_record_deterministic(void) {
    fixture f;
    if (fixture_open(&f, STEP_MIX_WEIGHT)) return;
    f.hp.overfit_cap = 1;
    f.hp.plan_tokens = 1e6;
    step_state a, b;
    float *ua = malloc(f.lay.numel * sizeof *ua), *ub = malloc(f.lay.numel * sizeof *ub);
    CHECK(run_episode(&f, &a, ua, 0) == 0 && run_episode(&f, &b, ub, 0) == 0, "episode failed");
    CHECK(memcmp(&a, &b, sizeof a) == 0, "step states differ between identical episodes");
    CHECK(a.val_n == 1 && a.val_now[0] > 0 && a.val_now[1] > 0 && a.val_best[0] == a.val_now[0] &&
              a.val_best_seen[0] == 0,
          "one probe scored: n %llu, val %g %g", (unsigned long long)a.val_n, a.val_now[0], a.val_now[1]);
    /* u at init scores about log(vocab) on every domain */
    CHECK(fabs(a.val_now[0] - log((double)f.lay.cfg.vocab)) < 1.0, "val %g vs log V %g", a.val_now[0],
          log((double)f.lay.cfg.vocab));
    free(ua);
    free(ub);
    fixture_close(&f);
}

static void test_episode_is_deterministic_weight(void) { check_episode_deterministic(STEP_MIX_WEIGHT); }

/* Caps (data.max_epochs): over a whole run of episodes no domain's seen tokens pass its
 * cap, under either mixing, also when α starts outside the caps' box (a mixture file, a
 * run extended past its budget) so that the batches themselves must stop the domain; α
 * stays in the box after every α step; seen counts exactly the tokens trained on. */
static void check_caps_hold(int mixing) {
    fixture f;
    if (fixture_open(&f, mixing)) return;
    tdm_err e = {0};
    step_nets n;
    CHECK(step_nets_create(&n, &model_cpu_ops, &f.lay, &f.hp, 2, 1, &e) == 0, "%s", e.msg);
    float *host = malloc(f.lay.numel * sizeof *host);
    model_init_params(&f.lay, 9, host);
    n.ops->upload(n.ctx, n.u, host, f.lay.numel, &e);
    double budget = (double)f.hp.episodes * f.hp.E * f.hp.B * f.hp.T;
    f.hp.has_caps = 1;
    f.hp.cap[0] = INFINITY;
    f.hp.cap[1] = 0.2 * budget; /* domain 1 may take a fifth of the run */
    f.hp.alpha_hi[0] = 1;
    f.hp.alpha_hi[1] = 0.2;
    step_state s;
    step_state_init(&s, &f.ds, 0);
    s.alpha[0] = 0.1; /* outside the box: domain 1 asks for 0.9 */
    s.alpha[1] = 0.9;
    double total = 0;
    int steps = 0, ok = 1, boxed = 1;
    for (long t = 0; t < f.hp.episodes && ok; t++) {
        if (t > 0) { /* from the second episode on, α comes from the α step */
            ok &= step_sync(&n, &e) == 0 && step_probe(&f.hp, &f.ds, &n, &s, NULL, &e) == 0 &&
                  step_alpha(&f.hp, &s, NULL, &e) == 0;
            boxed &= s.alpha[1] <= 0.2 + 1e-15;
        }
        for (int i = 0; ok && i < f.hp.E; i++) {
            step_report r;
            double before = s.seen[0] + s.seen[1];
            ok &= step_free(&f.hp, &f.ds, &n, &s, &r, &e) == 0;
            total += s.seen[0] + s.seen[1] - before;
            steps++;
            CHECK(s.seen[1] <= f.hp.cap[1] + 1e-9, "step %d: domain 1 saw %g > cap %g", steps, s.seen[1],
                  f.hp.cap[1]);
        }
    }
    CHECK(ok, "run: %s", e.msg);
    CHECK(boxed, "alpha left the caps' box");
    CHECK(s.seen[1] > 0.9 * f.hp.cap[1], "domain 1 got %g of its %g: the cap was not used", s.seen[1],
          f.hp.cap[1]);
    if (mixing == STEP_MIX_SAMPLE) /* every row a whole sequence of one domain */
        CHECK(fabs(total - budget) < 1e-6 && fmod(s.seen[1], f.hp.T) == 0, "sample: %g of %g", total, budget);
    else /* the weights of the cut steps are lost, never given to another domain */
        CHECK(total <= budget + 1e-6 && total > 0.5 * budget, "weight: %g of %g", total, budget);
    printf("  %s mixing: domain 1 saw %.0f tokens (cap %.0f), domain 0 %.0f; final alpha %.3f %.3f\n",
           mixing == STEP_MIX_SAMPLE ? "sample" : "weight", s.seen[1], f.hp.cap[1], s.seen[0],
           s.alpha[0], s.alpha[1]);
    free(host);
    step_nets_destroy(&n);
    fixture_close(&f);
}

static void test_caps_hold_weight(void) { check_caps_hold(STEP_MIX_WEIGHT); }
static void test_caps_hold_sample(void) { check_caps_hold(STEP_MIX_SAMPLE); }
static void test_episode_is_deterministic_sample(void) { check_episode_deterministic(STEP_MIX_SAMPLE); }

/* Sample mixing with caps never gives a row to a domain of weight 0: when the weighted
 * domain's room runs out mid-run the free step is refused (ERR_USAGE naming the caps)
 * and the weight-0 domain has seen nothing (the redraw gave its rows to it before). */
static void test_caps_zero_weight_never_drawn(void) {
    fixture f;
    if (fixture_open(&f, STEP_MIX_SAMPLE)) return;
    tdm_err e = {0};
    step_nets n;
    CHECK(step_nets_create(&n, &model_cpu_ops, &f.lay, &f.hp, 2, 1, &e) == 0, "%s", e.msg);
    float *host = malloc(f.lay.numel * sizeof *host);
    model_init_params(&f.lay, 9, host);
    n.ops->upload(n.ctx, n.u, host, f.lay.numel, &e);
    f.hp.fixed = 1;
    f.hp.has_caps = 1;
    f.hp.cap[0] = 2.0 * f.hp.B * f.hp.T; /* two steps' rows, then no room */
    f.hp.cap[1] = INFINITY;
    f.hp.alpha_hi[0] = f.hp.alpha_hi[1] = 1;
    step_state s;
    step_state_init(&s, &f.ds, 0);
    s.alpha[0] = 1;
    s.alpha[1] = 0;
    int rc = 0, steps = 0;
    while (!rc && steps < 5) {
        step_report r;
        rc = step_free(&f.hp, &f.ds, &n, &s, &r, &e);
        steps += !rc;
    }
    CHECK(rc == ERR_USAGE && strstr(e.msg, "data.max_epochs"), "rc %d after %d steps: %s", rc, steps, e.msg);
    CHECK(steps == 2 && s.seen[1] == 0 && s.seen[0] == f.hp.cap[0],
          "%d steps; the weight-0 domain saw %g tokens, the other %g", steps, s.seen[1], s.seen[0]);
    free(host);
    step_nets_destroy(&n);
    fixture_close(&f);
}

/* Micro-batches (train.micro_batch): the batch of B train + V val rows in passes of 1, 2
 * and 3 rows gives the one-pass episode up to float summation order (losses, α and u
 * within 1e-5), is itself deterministic, and the workspace holds only a pass's rows. */
static void test_micro_batches(void) {
    fixture f;
    if (fixture_open(&f, STEP_MIX_WEIGHT)) return;
    size_t P = f.lay.numel;
    step_state one, s, again;
    float *u1 = malloc(P * sizeof *u1), *um = malloc(P * sizeof *um), *u2 = malloc(P * sizeof *u2);
    CHECK(run_episode(&f, &one, u1, 0) == 0, "one pass");
    for (int micro = 1; micro <= 3; micro++) {
        f.hp.micro = micro;
        CHECK(run_episode(&f, &s, um, 0) == 0 && run_episode(&f, &again, u2, 0) == 0, "micro %d", micro);
        CHECK(memcmp(&s, &again, sizeof s) == 0 && memcmp(um, u2, P * sizeof *um) == 0,
              "micro %d: two identical episodes differ", micro);
        double du = 0, scale = 0;
        for (size_t i = 0; i < P; i++) {
            du = fmax(du, fabs((double)um[i] - u1[i]));
            scale = fmax(scale, fabs((double)u1[i]));
        }
        double dl = 0, da = 0;
        for (int m = 0; m < one.M; m++) {
            dl = fmax(dl, fabs(s.loss_u[m] - one.loss_u[m]) + fabs(s.loss_w[m] - one.loss_w[m]));
            da = fmax(da, fabs(s.alpha[m] - one.alpha[m]));
        }
        printf("  micro-batch %d: |u - u_one| <= %.2e (|u| <= %.2f), losses %.2e, alpha %.2e\n",
               micro, du, scale, dl, da);
        CHECK(du <= 1e-5 * scale && dl < 1e-5 && da < 1e-5, "micro %d: %g %g %g", micro, du, dl, da);
        CHECK(memcmp(s.train, one.train, sizeof s.train) == 0 && s.free_steps == one.free_steps,
              "micro %d: the data cursors moved differently", micro);
    }
    /* the workspace a pass needs: rows of one pass, not of the batch */
    tdm_err e = {0};
    f.hp.micro = 2;
    double ws_micro = model_cpu_ops.workspace_bytes(&f.lay, 2, f.hp.T, 4, 1);
    double ws_all = model_cpu_ops.workspace_bytes(&f.lay, f.hp.B + f.hp.V, f.hp.T, 4, 1);
    step_nets n;
    CHECK(step_nets_create(&n, &model_cpu_ops, &f.lay, &f.hp, 2, 1, &e) == 0, "%s", e.msg);
    CHECK(n.micro == 2 && n.mgrad != NULL && ws_micro < ws_all / 2, "micro nets: %d %p %g %g",
          n.micro, (void *)n.mgrad, ws_micro, ws_all);
    step_nets_destroy(&n);
    /* a micro-batch as large as the batch is one pass */
    f.hp.micro = f.hp.B + f.hp.V;
    CHECK(step_nets_create(&n, &model_cpu_ops, &f.lay, &f.hp, 2, 1, &e) == 0, "%s", e.msg);
    CHECK(n.micro == 0 && n.mgrad == NULL, "micro >= rows still split");
    step_nets_destroy(&n);
    free(u1);
    free(um);
    free(u2);
    fixture_close(&f);
}

/* probe_carry: the free phase continues from u'_K, so u becomes the probe copy; without
 * it u is untouched by the probe. */
static void test_probe_carry(void) {
    fixture f;
    if (fixture_open(&f, STEP_MIX_WEIGHT)) return;
    tdm_err e = {0};
    size_t P = f.lay.numel;
    float *u0 = malloc(P * sizeof *u0), *u1 = malloc(P * sizeof *u1), *up = malloc(P * sizeof *up);
    for (int carry = 0; carry < 2; carry++) {
        f.hp.probe_carry = carry;
        step_nets n;
        CHECK(step_nets_create(&n, &model_cpu_ops, &f.lay, &f.hp, 2, 1, &e) == 0, "%s", e.msg);
        model_init_params(&f.lay, 9, u0);
        n.ops->upload(n.ctx, n.u, u0, P, &e);
        step_state s;
        step_state_init(&s, &f.ds, 0);
        CHECK(step_sync(&n, &e) == 0 && step_probe(&f.hp, &f.ds, &n, &s, NULL, &e) == 0, "%s", e.msg);
        n.ops->download(n.ctx, u1, n.u, P, &e);
        n.ops->download(n.ctx, up, n.up, P, &e);
        CHECK(memcmp(up, u0, P * sizeof *up) != 0, "the probe did not move u'");
        if (carry) CHECK(memcmp(u1, up, P * sizeof *u1) == 0, "probe_carry: u is not u'_K");
        else CHECK(memcmp(u1, u0, P * sizeof *u1) == 0, "without probe_carry the probe changed u");
        step_nets_destroy(&n);
    }
    free(u0);
    free(u1);
    free(up);
    fixture_close(&f);
}

/* tandem.val_loss = mean weighs w's validation term by 1/M: u' is the same, w is not;
 * tandem.eval_batches = 2 evaluates the twins on two batches: u and u' as before, the
 * train cursors one batch further, the losses those of a larger sample. */
static void test_probe_val_mean_and_eval_batches(void) {
    fixture f;
    if (fixture_open(&f, STEP_MIX_WEIGHT)) return;
    tdm_err e = {0};
    size_t P = f.lay.numel;
    float *u0 = malloc(P * sizeof *u0), *w[3], *up[3];
    step_state s[3];
    for (int v = 0; v < 3; v++) {
        w[v] = malloc(P * sizeof *w[v]);
        up[v] = malloc(P * sizeof *up[v]);
        f.hp.val_mean = v == 1;
        f.hp.eval_batches = v == 2 ? 2 : 1;
        step_nets n;
        CHECK(step_nets_create(&n, &model_cpu_ops, &f.lay, &f.hp, 2, 1, &e) == 0, "%s", e.msg);
        model_init_params(&f.lay, 9, u0);
        n.ops->upload(n.ctx, n.u, u0, P, &e);
        step_state_init(&s[v], &f.ds, 0);
        CHECK(step_sync(&n, &e) == 0 && step_probe(&f.hp, &f.ds, &n, &s[v], NULL, &e) == 0, "%s", e.msg);
        n.ops->download(n.ctx, w[v], n.w, P, &e);
        n.ops->download(n.ctx, up[v], n.up, P, &e);
        step_nets_destroy(&n);
    }
    CHECK(memcmp(up[0], up[1], P * sizeof *u0) == 0, "val_loss changed u'");
    CHECK(memcmp(w[0], w[1], P * sizeof *u0) != 0, "val_loss = mean did not change w");
    CHECK(s[0].loss_u[0] == s[1].loss_u[0] && s[0].loss_w[0] != s[1].loss_w[0],
          "val_loss: ℓ_u %g %g, ℓ_w %g %g", s[0].loss_u[0], s[1].loss_u[0], s[0].loss_w[0],
          s[1].loss_w[0]);
    CHECK(memcmp(w[0], w[2], P * sizeof *u0) == 0 && memcmp(up[0], up[2], P * sizeof *u0) == 0,
          "eval_batches changed the twins");
    CHECK(s[2].train[0].pos == s[0].train[0].pos + (uint64_t)(f.hp.B / 2) &&
              s[2].loss_u[0] != s[0].loss_u[0],
          "eval_batches = 2: cursor %llu vs %llu, ℓ_u %g vs %g",
          (unsigned long long)s[2].train[0].pos, (unsigned long long)s[0].train[0].pos,
          s[2].loss_u[0], s[0].loss_u[0]);
    for (int v = 0; v < 3; v++) free(w[v]), free(up[v]);
    free(u0);
    fixture_close(&f);
}

/* step_pinned: the hold pins α when its lower bounds sum to 1 (alpha_cut = overfit with
 * no mark), not when a mark drops one to the floor, nor without a hold, nor with
 * skip_pinned off or probe_carry on. step_probe_pinned
 * then draws nothing (cursors as they were), leaves u, scores u on the fixed validation
 * windows exactly as step_probe does, and the α step keeps α to the bit; a score that
 * marks a domain unpins the next episode. */
static void test_pinned_probe(void) {
    fixture f;
    if (fixture_open(&f, STEP_MIX_WEIGHT)) return;
    tdm_err e = {0};
    size_t P = f.lay.numel;
    float *u0 = malloc(P * sizeof *u0), *u1 = malloc(P * sizeof *u1);
    step_state s, full;
    step_state_init(&s, &f.ds, 0);
    f.hp.overfit_cap = 1;
    f.hp.plan_tokens = 1e6;
    CHECK(!step_pinned(&f.hp, &s), "pinned without a hold");
    f.hp.has_lo = 1;
    f.hp.alpha_lo[0] = 0.3, f.hp.alpha_lo[1] = 0.7;
    s.alpha[0] = 0.3, s.alpha[1] = 0.7;
    CHECK(!step_pinned(&f.hp, &s), "pinned with skip_pinned off (runs pinned before the key)");
    f.hp.skip_pinned = 1;
    CHECK(step_pinned(&f.hp, &s), "the hold at the start does not pin α");
    step_hparams carry = f.hp;
    carry.probe_carry = 1; /* the twins' steps train u: never skipped */
    CHECK(!step_pinned(&carry, &s), "pinned with probe_carry");
    step_hparams cut = f.hp;
    cut.alpha_lo[0] = 0.2; /* alpha_cut = repeated with domain 0 cut to 0.2 */
    CHECK(!step_pinned(&cut, &s), "a bound below the start pins α");
    step_nets n;
    CHECK(step_nets_create(&n, &model_cpu_ops, &f.lay, &f.hp, 2, 1, &e) == 0, "%s", e.msg);
    model_init_params(&f.lay, 9, u0);
    n.ops->upload(n.ctx, n.u, u0, P, &e);
    full = s;
    CHECK(step_sync(&n, &e) == 0 && step_probe(&f.hp, &f.ds, &n, &full, NULL, &e) == 0, "%s", e.msg);
    step_state before = s;
    CHECK(step_probe_pinned(&f.hp, &f.ds, &n, &s, &e) == 0, "%s", e.msg);
    n.ops->download(n.ctx, u1, n.u, P, &e);
    CHECK(memcmp(u0, u1, P * sizeof *u0) == 0, "the pinned probe changed u");
    CHECK(memcmp(s.train, before.train, sizeof s.train) == 0 && memcmp(s.val, before.val, sizeof s.val) == 0,
          "the pinned probe moved a cursor");
    CHECK(s.have_losses && s.loss_u[0] == 0 && s.loss_w[1] == 0, "losses %g %g", s.loss_u[0], s.loss_w[1]);
    CHECK(s.val_now[0] > 0 && memcmp(s.val_now, full.val_now, sizeof s.val_now) == 0,
          "u's score %g, the full probe's %g", s.val_now[0], full.val_now[0]);
    double was[2];
    CHECK(step_alpha(&f.hp, &s, was, &e) == 0, "%s", e.msg);
    CHECK(s.alpha[0] == 0.3 && s.alpha[1] == 0.7 && s.val_n == 1, "α %.17g %.17g after a pinned probe",
          s.alpha[0], s.alpha[1]);
    s.overfit[1] = 1; /* as a rising score would mark it */
    CHECK(!step_pinned(&f.hp, &s), "a marked domain still pins α");
    step_hparams off = f.hp;
    off.overfit_cap = 0; /* marks lower nothing without the record (alpha_cut = repeated) */
    CHECK(step_pinned(&off, &s), "a mark unpinned α without the record");
    step_nets_destroy(&n);
    free(u0);
    free(u1);
    fixture_close(&f);
}

static void test_check_rejects_bad_batch(void) {
    fixture f;
    if (fixture_open(&f, STEP_MIX_WEIGHT)) return;
    tdm_err e = {0};
    f.hp.B = 1; /* fewer rows than the 2 domains */
    CHECK(step_check(&f.hp, &f.ds, &e) == ERR_USAGE && strstr(e.msg, "train.batch"), "%s", e.msg);
    f.hp.B = 5; /* not a multiple: 3 + 2 rows, fine */
    CHECK(step_check(&f.hp, &f.ds, &e) == 0, "B = 5 over 2 domains: %s", e.msg);
    f.hp.V = 1;
    CHECK(step_check(&f.hp, &f.ds, &e) == ERR_USAGE && strstr(e.msg, "val_batch"), "%s", e.msg);
    f.hp.V = 3;
    CHECK(step_check(&f.hp, &f.ds, &e) == 0, "V = 3 over 2 domains: %s", e.msg);
    f.hp.B = 4;
    f.hp.V = 2;
    f.hp.alpha_floor = 0.5;
    CHECK(step_check(&f.hp, &f.ds, &e) == ERR_USAGE && strstr(e.msg, "alpha_floor"), "%s", e.msg);
    f.hp.alpha_floor = 0;
    f.hp.T = 5000;
    CHECK(step_check(&f.hp, &f.ds, &e) == ERR_USAGE, "T longer than the val split");
    fixture_close(&f);
}

int main(void) {
    RUN(test_simplex_edge_cases);
    RUN(test_simplex_box);
    RUN(test_simplex_bounds);
    RUN(test_alpha_hold);
    RUN(test_overfit_cap);
    RUN(test_overfit_unlocks);
    RUN(test_unimax);
    RUN(test_caps_hold_weight);
    RUN(test_caps_hold_sample);
    RUN(test_caps_zero_weight_never_drawn);
    RUN(test_check_names_train_seq);
    RUN(test_alpha_sign);
    RUN(test_alpha_eg_contract);
    RUN(test_episode_is_deterministic_weight);
    RUN(test_overfit_record_deterministic);
    RUN(test_episode_is_deterministic_sample);
    RUN(test_probe_carry);
    RUN(test_micro_batches);
    RUN(test_probe_val_mean_and_eval_batches);
    RUN(test_pinned_probe);
    RUN(test_check_rejects_bad_batch);
    return test_summary("test_steps");
}
