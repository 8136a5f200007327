/* gens.h — a run's config generations, and which objects belong to the run.
 *
 * Each allowed config change is recorded as configs/<i>.mp and takes effect at a run
 * position: generation i (the config after i changes) ends there, and generation i + 1
 * computes what follows. States and α records carry the generation they were computed
 * under. An object of generation g at position seq belongs to the run when g is the current
 * generation, or an older one and seq is at or before the end of g — not merely before the
 * newest change: with two changes, a fenced-out writer of generation 0 may have left a state
 * between them, past generation 0's end, which the run never computed.
 */
#ifndef TANDEM_LEDGER_GENS_H
#define TANDEM_LEDGER_GENS_H

#include <stdint.h>

/* n recorded changes (configs/0.mp .. n-1); change i took effect at run position end[i]. */
typedef struct ckpt_gens {
    uint64_t n;
    uint64_t *end; /* n positions, malloc'd (NULL when n is 0), non-decreasing */
} ckpt_gens;

/* Appends a change taking effect at seq. 0, or -1 when out of memory (g unchanged). */
int ckpt_gens_add(ckpt_gens *g, uint64_t seq);

/* *dst = a copy of *src (dst's old contents are not freed). 0, or -1 (dst zeroed). */
int ckpt_gens_copy(ckpt_gens *dst, const ckpt_gens *src);

void ckpt_gens_free(ckpt_gens *g);

/* Where the newest change took effect; 0 when there is none. */
uint64_t ckpt_gens_newest(const ckpt_gens *g);

/* Whether an object computed under (has_gen, gen) at run position seq belongs to the run
 * whose generations are g (current generation g->n). Objects without a generation (written
 * before there were any) belong. */
int ckpt_gen_belongs(int has_gen, uint64_t gen, uint64_t seq, const ckpt_gens *g);

#endif
