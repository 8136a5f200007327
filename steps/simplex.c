/* simplex.c — projection onto the probability simplex; see simplex.h. */
#include "steps/simplex.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int descending(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

int simplex_project(const double *v, int M, double floor, double *out, tdm_err *e) {
    if (M < 1 || M > 1 << 20) return err_set(e, ERR_INTERNAL, "simplex: %d domains", M);
    if (!(floor >= 0) || floor * M >= 1)
        return err_set(e, ERR_USAGE,
                       "tandem.alpha_floor = %g is too large for %d domains (need floor x M < 1)",
                       floor, M);
    for (int i = 0; i < M; i++)
        if (!isfinite(v[i]))
            return err_set(e, ERR_DIVERGED,
                           "alpha update produced %s for domain %d (the losses diverged; lower "
                           "tandem.lr_probe or tandem.lr_alpha)",
                           isnan(v[i]) ? "NaN" : "Inf", i);
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

/* Σ_m clip(v_m − θ, lo, hi_m) */
static double box_sum(const double *v, int M, double lo, const double *hi, double theta) {
    double s = 0;
    for (int m = 0; m < M; m++) {
        double x = v[m] - theta;
        s += x < lo ? lo : x > hi[m] ? hi[m] : x;
    }
    return s;
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
    double room = 0;
    for (int m = 0; m < M; m++) {
        if (!isfinite(v[m]))
            return err_set(e, ERR_DIVERGED,
                           "alpha update produced %s for domain %d (the losses diverged; lower "
                           "tandem.lr_probe or tandem.lr_alpha)",
                           isnan(v[m]) ? "NaN" : "Inf", m);
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
    double *b = malloc(2 * (size_t)M * sizeof *b);
    if (!b) return err_set(e, ERR_INTERNAL, "out of memory");
    for (int m = 0; m < M; m++) {
        b[2 * m] = v[m] - hi[m];
        b[2 * m + 1] = v[m] - floor;
    }
    qsort(b, 2 * (size_t)M, sizeof *b, descending); /* θ falls between two of them */
    /* from the largest break down, the sum grows from M·floor (< 1) to Σ hi (≥ 1): find
     * the first break where it reaches 1; on the segment above it the sum is linear */
    double theta = b[2 * M - 1];
    for (int j = 0; j < 2 * M; j++) {
        double s = box_sum(v, M, floor, hi, b[j]);
        if (s >= 1) {
            double above = j > 0 ? b[j - 1] : b[j];
            double s_above = j > 0 ? box_sum(v, M, floor, hi, above) : s;
            /* linear between (b[j], s) and (above, s_above), s_above < 1 ≤ s */
            theta = s > s_above ? b[j] + (s - 1) * (above - b[j]) / (s - s_above) : b[j];
            break;
        }
    }
    free(b);
    for (int m = 0; m < M; m++) {
        double x = v[m] - theta;
        out[m] = x < floor ? floor : x > hi[m] ? hi[m] : x;
    }
    return 0;
}
