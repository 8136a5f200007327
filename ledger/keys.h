/* keys.h — the names of a run's objects in its store: the one place they are spelled.
 *
 *   RUN                          the pinned config (rec_run)
 *   HEAD                         the state a run resumes from (rec_head)
 *   lease                        the writer lease: epoch, holder (rec_lease)
 *   mixture.mp                   α* of a finished run (rec_mixture)
 *   model.mp                     the model.init folder a run started from (rec_model)
 *   data.mp                      the dataset's tokens a run started from (rec_data)
 *   diverged.mp                  where the run diverged (exit 5), until the next start
 *                                (rec_diverged)
 *   SWEEP                        at a sweep's root, not in a run: its points (rec_sweep)
 *   states/<seq>.mp              a full state's manifest (rec_state), by run position
 *   blobs/<sha-256 hex>          a chunk of a tensor, named by its content
 *   alpha/<t>.mp                 the α record of episode t (rec_alpha), hash-chained
 *   metrics/<t>.mp               what episode t measured (rec_metrics, ledger/metrics.h)
 *   configs/<n>.mp               the n-th recorded config change (rec_config_change)
 *   pins/<seq>                   a state kept out of retention (tandem gc --pin)
 *   superseded/<n>/<key>         α records set aside by config change n
 *   quarantine/<epoch>/<key>     damaged or stale objects set aside by writer <epoch>
 *
 * docs/running.md ("What is in the store") describes each. */
#ifndef TANDEM_LEDGER_KEYS_H
#define TANDEM_LEDGER_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "storage/sha256.h"

#define LEDGER_RUN "RUN"
#define LEDGER_HEAD "HEAD"
#define LEDGER_LEASE "lease"
#define LEDGER_MIXTURE "mixture.mp"
#define LEDGER_MODEL "model.mp"
#define LEDGER_DATA "data.mp"
#define LEDGER_SWEEP "SWEEP"
#define LEDGER_DIVERGED "diverged.mp"
/* prefixes, for listing */
#define LEDGER_STATES "states/"
#define LEDGER_BLOBS "blobs/"
#define LEDGER_ALPHA "alpha/"
#define LEDGER_METRICS "metrics/"
#define LEDGER_CONFIGS "configs/"
#define LEDGER_PINS "pins/"
#define LEDGER_SUPERSEDED "superseded/"
#define LEDGER_QUARANTINE "quarantine/"

/* Each writes the key into buf (cap bytes, truncated if it must be; 64 always suffices
 * except for the set-aside keys, which hold another key: give them its length + 48). */
void ledger_state_key(char *buf, size_t cap, uint64_t seq);
void ledger_alpha_key(char *buf, size_t cap, uint64_t t);
void ledger_metrics_key(char *buf, size_t cap, uint64_t t);
void ledger_config_key(char *buf, size_t cap, uint64_t n);
void ledger_pin_key(char *buf, size_t cap, uint64_t seq);
void ledger_blob_key(char *buf, size_t cap, const sha256_digest *d);
void ledger_quarantine_key(char *buf, size_t cap, uint64_t epoch, const char *key);
void ledger_superseded_key(char *buf, size_t cap, uint64_t change, const char *key);

/* Whether `rel`, a path relative to a store's root, is or lies under one of the store's
 * own names (the objects and folders above, .lock and the file store's temporaries):
 * what a command's output (--plot, --svg, --out) must never be written over. */
int ledger_key_owned(const char *rel);

/* The number in "<prefix><n>.mp" (or "<prefix><n>" for pins): 0 and *n, or -1 when `key`
 * is not such a key. */
int ledger_key_index(const char *key, const char *prefix, uint64_t *n);

#endif
