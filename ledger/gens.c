/* gens.c — a run's config generations (gens.h). */
#include "ledger/gens.h"

#include <stdlib.h>
#include <string.h>

int ckpt_gens_add(ckpt_gens *g, uint64_t seq) {
    uint64_t *end = realloc(g->end, (size_t)(g->n + 1) * sizeof *end);
    if (!end) return -1;
    end[g->n] = seq;
    g->end = end;
    g->n++;
    return 0;
}

int ckpt_gens_copy(ckpt_gens *dst, const ckpt_gens *src) {
    memset(dst, 0, sizeof *dst);
    if (!src->n) return 0;
    dst->end = malloc((size_t)src->n * sizeof *dst->end);
    if (!dst->end) return -1;
    memcpy(dst->end, src->end, (size_t)src->n * sizeof *dst->end);
    dst->n = src->n;
    return 0;
}

void ckpt_gens_free(ckpt_gens *g) {
    free(g->end);
    memset(g, 0, sizeof *g);
}

uint64_t ckpt_gens_newest(const ckpt_gens *g) { return g->n ? g->end[g->n - 1] : 0; }

int ckpt_gen_belongs(int has_gen, uint64_t gen, uint64_t seq, const ckpt_gens *g) {
    if (!has_gen) return 1; /* written before generations existed */
    if (gen == g->n) return 1;
    /* an older generation up to where it ended; anything past that end was computed by a
     * writer that was fenced out or whose config was superseded */
    return gen < g->n && seq <= g->end[gen];
}
