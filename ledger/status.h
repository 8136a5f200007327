/* status.h — what `tandem status` reports of a store beside HEAD, the α chain and the
 * lease (audit.h): how fast the run goes (from its newest metrics rows) and what its
 * states cost (states kept, the unique chunks they reference, orphan blobs). The ledger
 * gathers; cli/cmd_status.c prints (text or JSON). */
#ifndef TANDEM_LEDGER_STATUS_H
#define TANDEM_LEDGER_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "ledger/records.h"
#include "storage/store.h"
#include "util/err.h"

/* Rows the speed is averaged over (the newest; a long run's thousands of rows are not all
 * fetched). */
#define LEDGER_SPEED_ROWS 10

typedef struct ledger_speed {
    int n;                 /* rows measured (0: none readable — not a fault: rows are not
                            * part of the audit trail) */
    double tokens_per_s;   /* their mean */
    double episode_s;      /* their mean */
    double eta_s;          /* the episodes left to `episodes` at that pace */
    uint64_t reached;      /* episodes the newest row says are done */
    uint64_t reached_seq;  /* the run position at its end (a fixed run has no α records
                            * to tell how far it went past its last state) */
} ledger_speed;

/* How fast the run in st goes, from at most LEDGER_SPEED_ROWS of its newest metrics rows,
 * toward `episodes` (run.episodes). Never fails: what cannot be read is left out. */
void ledger_speed_read(store *st, uint64_t episodes, ledger_speed *sp);

typedef struct ledger_size {
    uint64_t *seqs;        /* the kept states' run positions, ascending (owned) */
    size_t states;
    double state_bytes;    /* one state: 3 tensors x the model's floats (from head_state) */
    size_t chunks;         /* unique chunks the states reference */
    double chunk_bytes;    /* their bytes */
    size_t blobs;          /* blobs in the store */
    size_t orphan_blobs;   /* blobs beyond the referenced chunks (tandem gc removes them) */
} ledger_size;

/* What the states of the run in st cost; head_state (HEAD's manifest) gives one state's
 * size. A store failure listing the states is returned (e set); free with
 * ledger_size_free. */
int ledger_size_read(store *st, const rec_state *head_state, ledger_size *sz, tdm_err *e);
void ledger_size_free(ledger_size *sz);

/* Whether the run diverged, from diverged.mp (rec_diverged): the record is the latest word
 * on the run while it is in the store — the next run to start removes it (ledger_start) —
 * except while a writer of a later epoch holds the lease (a run starting again, not yet at
 * its start). */
enum {
    LEDGER_DIVERGED_NO,      /* none, or one that a later writer holding the lease is replacing */
    LEDGER_DIVERGED_YES,     /* d holds it */
    LEDGER_DIVERGED_DAMAGED, /* there but not readable: why says so */
};
typedef struct ledger_divergence {
    int state;
    rec_diverged d;
    char why[1024]; /* a tdm_err's message */
} ledger_divergence;

/* Reads diverged.mp (and the lease) of st into *out. A store failure is returned (e set). */
int ledger_divergence_read(store *st, ledger_divergence *out, tdm_err *e);

#endif
