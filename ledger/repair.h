/* repair.h — what a run cannot heal by itself (`tandem repair`): the plan and its carrying
 * out. cli/cmd_repair.c parses options, calls these and prints.
 *
 * The plan: every state manifest a run would never use (damaged, naming a chunk that is
 * missing or corrupt, or computed under a config generation that does not belong to the
 * run) is set aside; with the α chain broken at record t, every state that vouches for
 * records ≥ t and the records ≥ t themselves (the run resumes before the damage and
 * re-derives them bit for bit); HEAD, when missing, damaged or naming a state set aside,
 * moved to the newest state that remains (or removed when none does). A state of a
 * generation the store has no change record for (a lost configs/<n>.mp) is refused: only
 * the record itself repairs that.
 *
 * "Set aside" = copied to quarantine/<epoch>/<key>, then deleted: nothing is destroyed.
 */
#ifndef TANDEM_LEDGER_REPAIR_H
#define TANDEM_LEDGER_REPAIR_H

#include <stddef.h>
#include <stdint.h>

#include "ledger/records.h"
#include "storage/store.h"
#include "util/err.h"

typedef struct ledger_repair_item {
    char key[REC_KEY_MAX];
    char why[400];
} ledger_repair_item;

typedef struct ledger_repair_plan {
    ledger_repair_item *items; /* the objects to set aside, in plan order */
    size_t n, cap;
    int head_bad;  /* HEAD is missing, damaged or names a state that does not remain */
    int move_head; /* head_bad and a state remains: HEAD moves to head_key */
    char head_key[64];
    uint64_t head_seq;
    sha256_digest head_sha;
    uint64_t commits; /* HEAD's commit count as it was (0 when unreadable) */
} ledger_repair_plan;

/* Plans the repair of the run in st (`url` names it in messages). ERR_STORE when a state
 * needs a change record the store lost; other errors as the store gives them. Free the
 * plan with ledger_repair_free whatever the result. */
int ledger_repair_plan_make(store *st, const char *url, ledger_repair_plan *p, tdm_err *e);
/* Whether the plan changes anything. */
int ledger_repair_needed(const ledger_repair_plan *p);
/* Carries the plan out holding the writer lease (a running writer is fenced out), then
 * releases it; *epoch gets the lease's epoch (what was set aside is under
 * quarantine/<epoch>/). Under the lease the plan is made again and must equal `p`
 * (ERR_STORE, nothing done, when the store changed since), the lease is checked before
 * every deletion (a run that takes it over stops the repair: ERR_STORE "fenced out"), and
 * HEAD is replaced by compare-and-swap. */
int ledger_repair_apply(store *st, const char *url, const ledger_repair_plan *p, uint64_t *epoch,
                        tdm_err *e);
void ledger_repair_free(ledger_repair_plan *p);

#endif
