/* simplex.h — Euclidean projection onto the probability simplex, in float64.
 *
 * Π(v) = argmin_{α ≥ ε, Σα = 1} ||α − v||² (Held et al. / Duchi et al.): with z = 1 − Mε
 * and β = α − ε the problem is the projection onto {β ≥ 0, Σβ = z}: sort v descending
 * (s), prefix sums c_j, ρ = max{j : s_j − (c_j − z)/j > 0}, θ = (c_ρ − z)/ρ,
 * β_i = max(v_i − θ, 0) — the steps DESIGN.md §2 names, with the floor folded in.
 */
#ifndef TANDEM_STEPS_SIMPLEX_H
#define TANDEM_STEPS_SIMPLEX_H

#include "util/err.h"

/* Projects v[0..M) onto the simplex with every entry ≥ floor (0 ≤ floor, M·floor < 1).
 * NaN or Inf in v, M < 1, or a bad floor → ERR_INTERNAL naming the problem; out is then
 * untouched. out may alias v. */
int simplex_project(const double *v, int M, double floor, double *out, tdm_err *e);

/* The same projection with an upper bound per entry as well: argmin ||α − v||² over
 * {floor ≤ α_m ≤ hi[m], Σα = 1} (the domains' caps, data.max_epochs). α_m = clip(v_m − θ,
 * floor, hi[m]) for the one θ where the sum is 1: Σ clip(v − θ) is piecewise linear and
 * non-increasing in θ, with breaks at v_m − hi[m] and v_m − floor, so θ is found exactly
 * on the segment between two breaks. hi == NULL, or every hi[m] ≥ 1, is simplex_project
 * itself (the same bits). Needs floor ≤ hi[m] and Σ hi ≥ 1 (ERR_USAGE otherwise). */
int simplex_project_box(const double *v, int M, double floor, const double *hi, double *out,
                        tdm_err *e);

/* The same with a lower bound per entry (the α step's hold, tandem.alpha_cut): argmin
 * ||α − v||² over {lo[m] ≤ α_m ≤ hi[m], Σα = 1}; hi may be NULL (no upper bound). The
 * caller guarantees 0 ≤ lo ≤ hi and Σ lo ≤ 1 ≤ Σ hi (ERR_INTERNAL otherwise); Σ lo = 1
 * leaves α at lo. */
int simplex_project_bounds(const double *v, int M, const double *lo, const double *hi,
                           double *out, tdm_err *e);

#endif
