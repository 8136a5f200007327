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

#include "storage/digest_set.h"
#include "storage/store.h"
#include "util/err.h"

typedef struct retain_report {
    size_t states, deleted_states, deleted_blobs, kept, pinned;
    size_t pinned_late; /* states pinned while the pass ran, kept (in pinned too) */
    /* Filled when a pass stops midway too (gc says them). last_deleted: the last deletion
     * that no passing check of the guard has followed yet (empty: none) — it may have
     * landed after what the guard watches changed. put_back: a deletion the guard's check
     * right after it found raced, undone (the object had been read before it went). */
    char last_deleted[96], put_back[96];
    /* not_put_back: a state whose deletion raced but whose blobs were gone (a run's
     * retention deleted it meanwhile), left deleted; put_back_broken: the state put back
     * lost its blobs right after */
    char not_put_back[96];
    int put_back_broken;
    /* pinned_lost: a state pinned as it was deleted whose blobs were gone (another gc's
     * deletion), not put back */
    char pinned_lost[96];
} retain_report;

/* Applies the policy above to `st` (keep >= 1). verify_fallback: read every blob of the
 * states older than HEAD's, newest first, until one verifies, and keep it (gc does; the
 * writer, which just committed HEAD's state itself, keeps the previous state unverified
 * instead: it is one of the newest `keep` when keep >= 2). dry: say, delete nothing.
 * `log` (may be NULL) gets one line per deletion. ERR_STORE when HEAD cannot be read
 * (nothing is deleted then). */
/* Adds the chunks of every state manifest set aside under quarantine/ that decodes to
 * the set ref: the blobs gc keeps so that a copy kept for an audit
 * can still be loaded (verify does not call them orphans). 0, or -1 with e set. */
int retain_quarantined_refs(store *st, digest_set *ref, tdm_err *e);

/* guard (may be NULL): called before every deletion; non-zero (with *e set) stops the
 * pass there. gc's guard checks that no run has taken the lease since gc looked at it: a
 * run that starts meanwhile uploads blobs whose manifests gc has not read, and they look
 * unreferenced. Without HEAD the fall-back kept is the newest state that verifies.
 *
 * The check comes before the deletion, so a run can take the lease between the two (or gc
 * be paused there). What such a run can use is an object gc is deleting that it finds
 * stored: above all an orphan blob of a commit cut off before its manifest, which the
 * run's replay of that commit computes again, finds stored and does not upload. So the
 * objects gc has in hand or can cheaply have — state manifests (read before they go) and
 * orphan blobs (no manifest gc listed names them; read, verified, before they go) — are
 * checked again right after their deletion, and put back (create-only) when the guard
 * fails then: the run's lease came before gc's check, so every object it found stored is
 * one gc either had not deleted yet or puts back. A blob of a state this pass deleted is not
 * read (reading every blob gc deletes would double its traffic; a resumed run does not
 * compute an old state's content again): one deleted after the guard's last passing check
 * is left in out->last_deleted. A gc killed between a deletion and its put-back loses that
 * object (the run that used it falls back and replays at its next start).
 * TANDEM_TEST_STOP_AT=gc-delete:n freezes the pass between a check and its deletion. */
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
