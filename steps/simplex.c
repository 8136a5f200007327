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
