/* data_source.h — the dataset a run started from, pinned by content (data.mp).
 *
 * RUN pins data.dataset as a path; what a run computes depends on the tokens under it.
 * A corpus rebuilt with another seed at the same path, or two domains' shards swapped,
 * used to be resumed from without a word and end elsewhere. data.mp holds, per domain and
 * split, the SHA-256 of the shards' tokens; every start of the run compares the dataset
 * with it.
 */
#ifndef TANDEM_RUNNER_DATA_SOURCE_H
#define TANDEM_RUNNER_DATA_SOURCE_H

#include "data/dataset.h"
#include "ledger/records.h"
#include "storage/store.h"
#include "util/err.h"
#include "ledger/ledger.h"
#include "runner/pin_mode.h"

/* The digests of ds: its domain names and, per domain and split, the SHA-256 of its
 * shards' digests in order, each shard's the SHA-256 of its token count (8 bytes,
 * little-endian) and its token bytes as stored. Shards are hashed in parallel. */
int data_source_digest(const dataset *ds, rec_data *out, tdm_err *e);

/* ds against the store's data.mp: ERR_USAGE naming the domain and split whose tokens
 * differ (or the domains, when they are not the run's), and what to do. Only the train and
 * val splits, which a run reads, refuse; a test split that differs is said (an evaluation
 * then scores today's). When the store has none (a new run, or one begun before data.mp)
 * and mode PIN_WRITE, it is written; a damaged one is said and, with PIN_WRITE, written
 * again; with PIN_WRITE, one that differs is replaced (said) when nothing was computed from
 * it yet or `repin` (data.dataset is a change the run records now, --allow-change).
 * PIN_CHECK refuses what PIN_WRITE would and writes nothing. Every write is preceded by
 * ld's lease check (ld NULL: none; ERR_STORE "fenced out" and nothing written). */
int data_source_fingerprint(store *st, const dataset *ds, pin_mode mode, int repin, ledger *ld, tdm_err *e);

#endif
