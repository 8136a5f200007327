/* read.h — the one way to read a record of a run's store: the object at a key, decoded as
 * its kind.
 *
 * The table in read.c names each kind's decoder (records.h, metrics.h); commands, the
 * runner and config/run_config.c read records through here and never call a rec_*_decode
 * themselves, so a new kind or a change of how a kind is checked happens in ledger/ only.
 *
 *   rec_head h;
 *   int rc = ledger_read(st, REC_KIND_HEAD, LEDGER_HEAD, NULL, &h, &e);
 *   if (rc == STORE_NOT_FOUND) ...   missing
 *   if (rc == STORE_CORRUPT) ...     there, but not a valid record (e names it and why)
 *   if (rc) ...                      the store failed (e: ERR_STORE's message)
 */
#ifndef TANDEM_LEDGER_READ_H
#define TANDEM_LEDGER_READ_H

#include <stddef.h>

#include "ledger/metrics.h"
#include "ledger/records.h"
#include "storage/store.h"
#include "util/err.h"

/* The kinds of record; out points at the struct named beside each. */
typedef enum rec_kind {
    REC_KIND_HEAD,    /* rec_head    HEAD */
    REC_KIND_RUN,     /* rec_run     RUN (free with rec_run_free) */
    REC_KIND_CHANGE,  /* rec_change  configs/<n>.mp (rec_change_free) */
    REC_KIND_STATE,   /* rec_state   states/<seq>.mp (rec_state_free) */
    REC_KIND_ALPHA,   /* rec_alpha   alpha/<t>.mp */
    REC_KIND_LEASE,   /* rec_lease   lease */
    REC_KIND_MIXTURE, /* rec_mixture mixture.mp */
    REC_KIND_MODEL,   /* rec_model   model.mp */
    REC_KIND_METRICS, /* rec_metrics metrics/<t>.mp */
    REC_KIND_SWEEP,   /* rec_sweep   SWEEP (a sweep's root) */
    REC_KIND_DATA,    /* rec_data    data.mp */
    REC_KIND_DIVERGED, /* rec_diverged diverged.mp */
    REC_KIND_COUNT
} rec_kind;

/* Decodes `data` (n bytes) as a record of `kind` into *out; `what` names the object in
 * messages (normally its key). 0, or STORE_CORRUPT with e naming the object and what is
 * wrong with it (the decoder's message), or ERR_INTERNAL (out of memory); nothing to free
 * on failure. */
int ledger_decode(rec_kind kind, const void *data, size_t n, const char *what, void *out, tdm_err *e);

/* Reads `key` from st and decodes it (ledger_decode; `what` NULL: the key names it).
 * 0; STORE_NOT_FOUND when there is no such object; STORE_CORRUPT when it does not decode;
 * any other non-zero code when the store failed. e is set whenever the result is not 0. */
int ledger_read(store *st, rec_kind kind, const char *key, const char *what, void *out, tdm_err *e);

#endif
