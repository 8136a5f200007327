/* sampler.h — resumable, stateless sampling of training sequences from a dataset.
 *
 * A sequence is a window of T+1 consecutive tokens of one shard (inputs are the first T,
 * targets the last T). Epoch e of a (domain, split) is defined by:
 *
 *   shift s_e = rng_below(Philox(seed, RNG_SAMPLER_SHIFT; domain, split, e), T), so every
 *       epoch cuts the shards at other places;
 *   windows: in each shard, in dataset order, start at s_e + i*T for every i with
 *       start + T + 1 <= n; windows never cross shards; numbered 0..W_e-1 across shards;
 *   order: a keyed permutation of 0..W_e-1 (a 6-round Feistel network over the smallest
 *       power of two with an even number of bits >= W_e, keys from Philox(seed,
 *       RNG_SAMPLER_PERM; domain, split, e), cycle-walking back into range), evaluated
 *       per sample, so no permutation is ever stored.
 *
 * The whole sampler state of a (domain, split) is a cursor {epoch, pos}: the pos-th
 * window of epoch `epoch` is next. Every function here is a pure function of (dataset,
 * seed, T, cursor), which is what makes a resumed run read exactly the data the
 * uninterrupted run would have read, and checkpoints need only the cursors. An epoch ends
 * after its W_e windows (epoch+1, pos 0). Epochs are keyed by their low 32 bits. An epoch
 * whose shift leaves no window (possible only when every shard is shorter than 2T) is
 * skipped.
 *
 * Cost per sample: O(shards of the split) to locate the window plus an expected <= 4
 * Feistel evaluations; no allocation.
 */
#ifndef TANDEM_DATA_SAMPLER_H
#define TANDEM_DATA_SAMPLER_H

#include <stdint.h>

#include "data/dataset.h"
#include "util/err.h"

typedef struct sampler_cursor {
    uint64_t epoch;
    uint64_t pos; /* index into the epoch's visit order of the next window */
} sampler_cursor;

/* Checks that (domain, split) exists and has at least one window of T+1 tokens at shift
 * 0; ERR_USAGE naming domain, split and T (with the tokens it has and needs) otherwise. */
int sampler_check(const dataset *ds, int domain, int split, int T, tdm_err *e);

/* W_e: the number of windows of epoch `epoch`; 0 for no window or bad arguments. */
uint64_t sampler_windows(const dataset *ds, int domain, int split, int T, uint64_t seed,
                         uint64_t epoch);

/* Where the window `*cur` points to lies: shard index and token offset of its first
 * token. `*cur` is normalised first (an epoch without windows is skipped), which is the
 * only change made to it. ERR_USAGE when pos is past the epoch's end (a cursor saved
 * for another dataset or T). */
int sampler_locate(const dataset *ds, int domain, int split, int T, uint64_t seed,
                   sampler_cursor *cur, size_t *shard_index, uint64_t *offset, tdm_err *e);

/* Copies the next window (T+1 tokens) into out and advances *cur. On error *cur and out
 * are unchanged. */
int sampler_next(const dataset *ds, int domain, int split, int T, uint64_t seed,
                 sampler_cursor *cur, uint32_t *out, tdm_err *e);

/* The `weight` mixing batch (DESIGN.md §2): B sequences from the dataset's M domains in
 * domain order, ⌊B/M⌋ from each and one more from each of the first B mod M domains (the
 * losses are per-domain means, so an uneven split changes no weight, only how many rows
 * estimate each mean: the paper's batch of 128 over 7 domains is 19 + 6 × 18), taken
 * from `split`. Writes tokens[B][T+1] and domain_ids[B], and advances each cursors[m] by
 * its row count. B < M → ERR_USAGE (a domain without rows). All-or-nothing: on error no
 * cursor moves. */
int sampler_batch_per_domain(const dataset *ds, int split, int T, int B, uint64_t seed,
                             sampler_cursor *cursors, uint32_t *tokens, int32_t *domain_ids,
                             tdm_err *e);

#endif
