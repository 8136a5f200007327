/* mixture.c — UniMax and the caps' bounds on α; see mixture.h. */
#include "steps/mixture.h"

#include <math.h>
#include <stdlib.h>

/* the domain's cap in epochs (INFINITY: none) */
static double cap_of(const double *cap, int m) { return cap && cap[m] > 0 ? cap[m] : INFINITY; }

int mixture_unimax(const double *tokens, int M, double budget, double N, const double *cap,
                   double *alpha, tdm_err *e) {
    if (M < 1 || M > 1 << 20 || !(budget > 0) || !(N > 0))
        return err_set(e, ERR_INTERNAL, "unimax: M %d, budget %g, N %g", M, budget, N);
    double *bound = malloc((size_t)M * sizeof *bound);
    int *order = malloc((size_t)M * sizeof *order);
    if (!bound || !order) {
        free(bound);
        free(order);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    /* the epochs bound every domain below its cap shares: N, or more when that cannot
     * fill the budget. f(n) = Σ min(n, cap_m) t_m is continuous, non-decreasing and linear
     * between consecutive caps: walk the caps above N upwards until f reaches the budget */
    double n = N, have = 0, room = 0;
    for (int m = 0; m < M; m++) {
        have += fmin(N, cap_of(cap, m)) * tokens[m];
        room += cap_of(cap, m) * tokens[m]; /* INFINITY when a domain is uncapped */
    }
    if (have < budget && room < budget) {
        free(bound);
        free(order);
        return err_set(e, ERR_USAGE,
                       "the domains' caps (data.max_epochs) hold %.4g tokens but the run trains on "
                       "%.4g: raise the caps or lower run.episodes",
                       room, budget);
    }
    for (double lo = N; have < budget;) {
        double fixed = 0, open = 0, next = INFINITY; /* on the segment (lo, next] */
        for (int m = 0; m < M; m++) {
            double c = cap_of(cap, m);
            if (c <= lo) fixed += c * tokens[m];
            else open += tokens[m], next = fmin(next, c);
        }
        if (!(open > 0)) { /* only by rounding: room ≥ budget leaves a domain above lo */
            n = lo;
            break;
        }
        n = (budget - fixed) / open;
        if (n <= next) break;
        lo = next;
    }
    for (int m = 0; m < M; m++) {
        bound[m] = fmin(n, cap_of(cap, m)) * tokens[m];
        order[m] = m;
    }
    /* water-filling in ascending order of bound (index order among equals) */
    for (int i = 1; i < M; i++)
        for (int j = i; j > 0 && bound[order[j]] < bound[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    double left = budget, sum = 0;
    for (int i = 0; i < M; i++) {
        int m = order[i];
        double share = left / (M - i), a = share < bound[m] ? share : bound[m];
        alpha[m] = a;
        left -= a;
    }
    for (int m = 0; m < M; m++) sum += alpha[m];
    for (int m = 0; m < M; m++) alpha[m] /= sum;
    free(bound);
    free(order);
    return 0;
}

int mixture_alpha_bounds(const double *tokens, int M, double budget, const double *cap,
                         double *hi) {
    int bounded = 0;
    for (int m = 0; m < M; m++) {
        double c = cap_of(cap, m);
        hi[m] = isfinite(c) && budget > 0 ? fmin(1.0, c * tokens[m] / budget) : 1.0;
        bounded |= hi[m] < 1;
    }
    return bounded;
}
