/* simplex.c — projection onto the probability simplex; see simplex.h. */
#include "steps/simplex.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int descending(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* every entry of v finite, else ERR_DIVERGED naming the first that is not */
static int check_finite(const double *v, int M, tdm_err *e) {
    for (int m = 0; m < M; m++)
        if (!isfinite(v[m]))
            return err_set(e, ERR_DIVERGED,
                           "alpha update produced %s for domain %d (the losses diverged; lower "
                           "tandem.lr_probe or tandem.lr_alpha)",
                           isnan(v[m]) ? "NaN" : "Inf", m);
    return 0;
}

int simplex_project(const double *v, int M, double floor, double *out, tdm_err *e) {
    if (M < 1 || M > 1 << 20) return err_set(e, ERR_INTERNAL, "simplex: %d domains", M);
    if (!(floor >= 0) || floor * M >= 1)
        return err_set(e, ERR_USAGE,
                       "tandem.alpha_floor = %g is too large for %d domains (need floor x M < 1)",
                       floor, M);
    int rc = check_finite(v, M, e);
    if (rc) return rc;
    double z = 1.0 - floor * M;
    double *s = malloc((size_t)M * sizeof *s);
    if (!s) return err_set(e, ERR_INTERNAL, "out of memory");
    memcpy(s, v, (size_t)M * sizeof *s);
    qsort(s, (size_t)M, sizeof *s, descending);
    double c = 0, theta = 0;
    for (int j = 1; j <= M; j++) {
        c += s[j - 1];
        double t = (c - z) / j;
        if (s[j - 1] - t > 0) theta = t; /* the last j where this holds is ρ */
    }
    free(s);
    for (int i = 0; i < M; i++) {
        double b = v[i] - theta;
        out[i] = (b > 0 ? b : 0) + floor;
    }
    return 0;
}

/* hi_m, 1 where there is no upper bound (hi NULL) */
static double upper(const double *hi, int m) { return hi ? hi[m] : 1; }

/* Σ_m clip(v_m − θ, lo_m, hi_m) */
static double box_sum(const double *v, int M, const double *lo, const double *hi, double theta) {
    double s = 0;
    for (int m = 0; m < M; m++) {
        double x = v[m] - theta;
        s += x < lo[m] ? lo[m] : x > upper(hi, m) ? upper(hi, m) : x;
    }
    return s;
}

/* The projection onto {lo ≤ α ≤ hi, Σα = 1} once the bounds are known to be sound
 * (lo_m ≤ hi_m, Σ lo < 1 ≤ Σ hi, v finite; hi NULL: none): θ between two breaks, found exactly. */
static int project_bounds(const double *v, int M, const double *lo, const double *hi,
                          double *out, tdm_err *e) {
    double *b = malloc(2 * (size_t)M * sizeof *b);
    if (!b) return err_set(e, ERR_INTERNAL, "out of memory");
    for (int m = 0; m < M; m++) {
        b[2 * m] = v[m] - upper(hi, m);
        b[2 * m + 1] = v[m] - lo[m];
    }
    qsort(b, 2 * (size_t)M, sizeof *b, descending); /* θ falls between two of them */
    /* from the largest break down, the sum grows from Σ lo (< 1) to Σ hi (≥ 1): find
     * the first break where it reaches 1; on the segment above it the sum is linear */
    double theta = b[2 * M - 1];
    for (int j = 0; j < 2 * M; j++) {
        double s = box_sum(v, M, lo, hi, b[j]);
        if (s >= 1) {
            double above = j > 0 ? b[j - 1] : b[j];
            double s_above = j > 0 ? box_sum(v, M, lo, hi, above) : s;
            /* linear between (b[j], s) and (above, s_above), s_above < 1 ≤ s */
            theta = s > s_above ? b[j] + (s - 1) * (above - b[j]) / (s - s_above) : b[j];
            break;
        }
    }
    free(b);
    for (int m = 0; m < M; m++) {
        double x = v[m] - theta;
        out[m] = x < lo[m] ? lo[m] : x > upper(hi, m) ? upper(hi, m) : x;
    }
    return 0;
}

int simplex_project_box(const double *v, int M, double floor, const double *hi, double *out,
                        tdm_err *e) {
    int bounded = 0;
    for (int m = 0; hi && m < M; m++) bounded |= hi[m] < 1;
    if (!bounded) return simplex_project(v, M, floor, out, e);
    if (M < 1 || M > 1 << 20) return err_set(e, ERR_INTERNAL, "simplex: %d domains", M);
    if (!(floor >= 0) || floor * M >= 1)
        return err_set(e, ERR_USAGE,
                       "tandem.alpha_floor = %g is too large for %d domains (need floor x M < 1)",
                       floor, M);
    int rc = check_finite(v, M, e);
    if (rc) return rc;
    double room = 0;
    for (int m = 0; m < M; m++) {
        if (!(hi[m] >= floor))
            return err_set(e, ERR_USAGE,
                           "domain %d may hold at most %g of the mixture (its cap, data.max_epochs), "
                           "below tandem.alpha_floor = %g: lower the floor or raise the cap",
                           m, hi[m], floor);
        room += hi[m];
    }
    if (room < 1 - 1e-12)
        return err_set(e, ERR_USAGE,
                       "the domains' caps (data.max_epochs) allow only %.4g of the token budget: "
                       "raise them or lower run.episodes",
                       room);
    double *lo = malloc((size_t)M * sizeof *lo);
    if (!lo) return err_set(e, ERR_INTERNAL, "out of memory");
    for (int m = 0; m < M; m++) lo[m] = floor;
    rc = project_bounds(v, M, lo, hi, out, e);
    free(lo);
    return rc;
}

int simplex_project_bounds(const double *v, int M, const double *lo, const double *hi,
                           double *out, tdm_err *e) {
    if (M < 1 || M > 1 << 20) return err_set(e, ERR_INTERNAL, "simplex: %d domains", M);
    int rc = check_finite(v, M, e);
    if (rc) return rc;
    double low = 0, room = 0;
    for (int m = 0; m < M; m++) {
        double h = upper(hi, m);
        if (!(lo[m] >= 0) || !(lo[m] <= h))
            return err_set(e, ERR_INTERNAL, "simplex: domain %d bounded by [%g, %g]", m, lo[m], h);
        low += lo[m];
        room += h;
    }
    if (!(low <= 1 + 1e-12) || room < 1 - 1e-12)
        return err_set(e, ERR_INTERNAL, "simplex: bounds sum to [%g, %g], not around 1", low, room);
    if (low >= 1 - 1e-15) { /* nothing can move: α is the lower bounds */
        for (int m = 0; m < M; m++) out[m] = lo[m] / low;
        return 0;
    }
    return project_bounds(v, M, lo, hi, out, e);
}
