/* mixture.h — the fixed mixtures a run can start from or train on, and the per-domain caps.
 *
 *   uniform  α_m = 1/M
 *   natural  α_m ∝ the domain's train tokens
 *   unimax   UniMax (Chung et al., ICLR 2023): the token budget spread as evenly as
 *            possible over the domains with none repeated more than N epochs; the
 *            surplus of a capped domain goes to the others. When N epochs of every domain
 *            cannot fill the budget, the bound rises to the epochs that can (for every
 *            domain alike: then UniMax is Natural), so UniMax spans Uniform (plenty of
 *            data) to Natural (the whole corpus repeated more than N times).
 *
 * Caps (data.max_epochs) bound what a run's u may see of a domain: at most cap_m epochs
 * of its train tokens over the run. They are a box on α: α_m ≤ cap_m · tokens_m / budget,
 * where budget is the tokens u trains on in the whole run (mixture_alpha_bounds).
 */
#ifndef TANDEM_STEPS_MIXTURE_H
#define TANDEM_STEPS_MIXTURE_H

#include "util/err.h"

/* UniMax over M domains of tokens[m] train tokens for a run of `budget` tokens, N epochs
 * at most per domain (N > 0), and per-domain caps in epochs (cap[m]; INFINITY or cap ==
 * NULL: none) that no domain exceeds in any case. Writes alpha[M] (sums to 1). ERR_USAGE
 * when the caps cannot hold the budget (Σ cap_m tokens_m < budget). */
int mixture_unimax(const double *tokens, int M, double budget, double N, const double *cap,
                   double *alpha, tdm_err *e);

/* hi[m] = min(1, cap[m] · tokens[m] / budget): the largest α_m the caps allow (1 for an
 * uncapped domain). Returns 1 when some domain is bounded below 1, else 0. */
int mixture_alpha_bounds(const double *tokens, int M, double budget, const double *cap,
                         double *hi);

#endif
