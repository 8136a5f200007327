/* verify.h — the audit of a run's store (`tandem verify`): the pinned config as a run
 * judges it, every state manifest, every blob they reference, the α chain and what each
 * state vouches for of it, mixture.mp, the lease; metrics rows and orphan blobs as notes.
 *
 * The ledger does the checking and returns a report; cli/cmd_verify.c parses options and
 * prints it (text or JSON). The pinned config itself is config/'s to read (the ledger
 * never includes config/): the caller passes what verify needs of it as a ledger_pin.
 */
#ifndef TANDEM_LEDGER_VERIFY_H
#define TANDEM_LEDGER_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "ledger/records.h"
#include "storage/store.h"
#include "util/err.h"

/* What verify needs of the pinned config (config/run_config.h reads it). */
typedef struct ledger_pin {
    int ok;              /* RUN and the change records decode and verify */
    const char *problem; /* !ok: what is wrong with them (a fault), as run_config_check says */
    int have;            /* ok, and the config and RUN's domain names were read */
    uint64_t seed;       /* run.seed */
    int fixed;           /* run.mode = fixed: no α*, so no mixture.mp */
    int M;
    const char (*names)[REC_DOMAIN_MAX]; /* [M] */
    int has_run;       /* have, and the run's identity (run_config_identity) in run: */
    sha256_digest run; /* a state carrying another is another run's */
} ledger_pin;

/* One line of the report, in the order the checks ran. */
typedef enum {
    VERIFY_FAULT, /* a fault: the text says what and what to do */
    VERIFY_OK,    /* an object checked and good ("RUN (pinned config)", "states/4.mp", ...) */
    VERIFY_BAD,   /* a state checked and not good (its faults are the lines before) */
    VERIFY_CHAIN, /* the α chain's line: "alpha chain: N records" (ok as alpha_chain_ok) */
    VERIFY_NOTE,  /* not a fault: a metrics row that cannot be read, orphan blobs */
} ledger_verify_kind;

typedef struct ledger_verify_line {
    ledger_verify_kind kind;
    int state;  /* VERIFY_OK/BAD of a state manifest (a "state_checks" entry) */
    char *text; /* owned */
} ledger_verify_line;

typedef struct ledger_verify_report {
    ledger_verify_line *lines;
    size_t nlines;
    long faults;
    int chain_read;       /* the α chain was read (the counts below mean something) */
    size_t alpha_records; /* records in the chain */
    int alpha_chain_ok;
    int mixture_ok;       /* -1: not checked (not finished, fixed, the chain not whole) */
    char **damaged_metrics; /* keys of metrics rows that cannot be read (owned) */
    size_t ndamaged;
    long orphan_blobs;    /* -1: the blobs could not be listed */
    size_t states, blobs;
    size_t vanished;      /* states listed, then gone when read (a live run's retention) */
    double blob_bytes;
} ledger_verify_report;

/* Audits the run in st (`url` names it in messages) against `pin`, filling *r (free with
 * ledger_verify_free, whatever the result). 0 when the audit ran — faults are in the
 * report, not the result; an ERR_* code with e set when the store failed or memory ran out
 * (then *r holds what was found until then). */
int ledger_verify(store *st, const char *url, const ledger_pin *pin, ledger_verify_report *r, tdm_err *e);
void ledger_verify_free(ledger_verify_report *r);

#endif
