/* retain.h — which full states a store keeps, and deleting the rest safely.
 *
 * One policy for `tandem gc` and for the writer's own retention after each commit
 * (checkpoint.keep): keep the newest `keep` states, the state HEAD names, the newest older
 * state that verifies (the fall-back, when asked to look for it), every pinned state
 * (pins/<seq>); delete the other state manifests first, then the blobs no kept manifest
 * references. That order makes it crash-safe: a manifest never points at a deleted blob,
 * a kill leaves at most orphan blobs (verify notes them, not faults), and the next pass
 * finishes the job. α records, RUN, HEAD, the lease, configs/, superseded/, quarantine/ and
 * mixture.mp are never touched: the audit trail stays whole.
 */
#ifndef TANDEM_LEDGER_RETAIN_H
#define TANDEM_LEDGER_RETAIN_H

#include <stddef.h>
#include <stdio.h>

#include "storage/store.h"
#include "util/err.h"

typedef struct retain_report {
    size_t states, deleted_states, deleted_blobs, kept, pinned;
} retain_report;

/* Applies the policy above to `st` (keep >= 1). verify_fallback: read every blob of the
 * states older than HEAD's, newest first, until one verifies, and keep it (gc does; the
 * writer, which just committed HEAD's state itself, keeps the previous state unverified
 * instead: it is one of the newest `keep` when keep >= 2). dry: say, delete nothing.
 * `log` (may be NULL) gets one line per deletion. ERR_STORE when HEAD cannot be read
 * (nothing is deleted then). */
/* Appends the chunks of every state manifest set aside under quarantine/ that decodes to
 * *ref (n entries of cap, realloc'd): the blobs gc keeps so that a copy kept for an audit
 * can still be loaded (verify does not call them orphans). 0, or -1 with e set. */
int retain_quarantined_refs(store *st, sha256_digest **ref, size_t *n, size_t *cap, tdm_err *e);

/* guard (may be NULL): called before every deletion; non-zero (with *e set) stops the
 * pass there. gc's guard checks that no run has taken the lease since gc looked at it: a
 * run that starts meanwhile uploads blobs whose manifests gc has not read, and they look
 * unreferenced. Without HEAD the fall-back kept is the newest state that verifies. */
typedef struct retain_guard {
    int (*check)(store *st, void *ctx, tdm_err *e);
    void *ctx;
} retain_guard;

int retain_collect(store *st, long keep, int verify_fallback, int dry, const retain_guard *guard,
                   FILE *log, retain_report *out, tdm_err *e);

/* The writer's pass after a commit: the same choice of states (without the verified
 * fall-back), but of the blobs only those the deleted manifests referenced and no kept one
 * does — never an unreferenced blob, which may belong to a commit on its way from another
 * writer; `tandem gc` collects those. */
int retain_after_commit(store *st, long keep, retain_report *out, tdm_err *e);

#endif
