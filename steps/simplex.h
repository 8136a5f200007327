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

#endif
