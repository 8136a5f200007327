/* run_config.h — the configuration a run was created with (RUN and configs/<n>.mp in the store).
 *
 * A run's configuration is fixed when the run is created: RUN holds its canonical form
 * (every key → exact value text) and that form's SHA-256. A resume compares the config it
 * was given with the pinned one (RUN plus every recorded change, in order); any key that
 * differs is a usage error listing the keys, unless the caller allows those keys to
 * change, in which case the change is recorded as configs/<n>.mp and the new values take
 * effect. The `store` and `cluster.*` keys are not compared: they say where the run is and
 * where it executes, not what it computes.
 *
 * RUN is write-once and nothing else holds the whole config, so a store that holds a run
 * but whose RUN is missing or damaged is refused (ERR_STORE, naming RUN and the repair:
 * restore it from a copy); it never becomes a new run. RUN's own config must be valid,
 * each change record must start from the values the config held before it (its old
 * values) and leave a valid config; a fault is blamed on the object that holds it.
 */
#ifndef TANDEM_CONFIG_RUN_CONFIG_H
#define TANDEM_CONFIG_RUN_CONFIG_H

#include <stdint.h>

#include "config/config.h"
#include "ledger/gens.h"
#include "ledger/ledger.h"
#include "ledger/records.h"
#include "storage/store.h"
#include "util/err.h"

typedef struct run_config_result {
    int created;       /* RUN was written now: a new run */
    int changed;       /* allowed keys changed and the change record was written */
    ckpt_gens gens;      /* the change records in the store (configs/0.mp ..: gens.n of them, a
                            recorded one included) and their positions; freed by
                            run_config_result_free */
    char run_id[64];
    int has_identity;       /* RUN was read or written: */
    sha256_digest identity; /* its run_config_identity, what the run's states carry */
    rec_change pending;  /* allowed keys differ: the record run_config_record_change writes (n > 0) */
    char pending_list[2048]; /* its keys, "  key: old -> new" lines, for the message */
} run_config_result;

/* Creates RUN from `cfg` and the dataset's domain names, or checks `cfg` against the
 * pinned config. `allowed` lists keys that may change (n_allowed of them). A change of
 * allowed keys is not written here: it is left in out->pending for run_config_record_change,
 * which the caller calls once it holds the lease — a writer that records a change and
 * then fails to take the run over would leave a change record no writer made, under
 * which the states the live writer goes on committing look superseded. Free *out with
 * run_config_result_free. store_defaulted: the store is a default nobody named, so a
 * refusal suggests a store of its own (--store) rather than --allow-change. */
int run_config_open(store *st, const config *cfg, const char *const *domains, int M, char *const *allowed,
                    int n_allowed, int store_defaulted, run_config_result *out, tdm_err *e);

/* Writes out->pending (when it holds keys) as configs/<gens.n>.mp applying at state
 * position `at_seq` (read after the lease was taken), and counts it in out->gens. The
 * lease of `ld` is checked right before the write (ERR_STORE "fenced out": nothing
 * written); NULL skips the check. A record already there that makes the same change
 * (another writer started with it at the same instant) counts as this one; another change
 * there is ERR_STORE. */
int run_config_record_change(store *st, ledger *ld, run_config_result *out, uint64_t at_seq, tdm_err *e);
void run_config_result_free(run_config_result *out);

/* The effective pinned config of an existing run (for commands that only read).
 * ERR_USAGE "holds no run" for a store without RUN or any other object of a run;
 * ERR_STORE naming RUN and its repair when RUN is missing from a store that holds a run
 * (HEAD, states/, alpha/, configs/, superseded/, mixture.mp), or when RUN or a change
 * record does not decode, does not match its config_sha256, or holds a config that is
 * not valid — exactly the cases in which run_config_open refuses to go on. */
int run_config_read(store *st, config *cfg, char *run_id, size_t run_id_cap, tdm_err *e);

/* The run's effective pinned config (*have 1), or *have 0 where the store holds no run
 * yet, or a missing or damaged RUN (run_config_open says which); a store that fails is the
 * error. */
int run_config_pinned(store *st, config *cfg, int *have, tdm_err *e);

/* The run's identity: the SHA-256 of RUN's values of the keys that decide what a run
 * computes (config_key_identity), as RUN pinned them at the run's start (changes recorded
 * later do not alter it). Its states carry it, so another run's copied in is known; two
 * runs of one config share it, so their states still compare byte for byte. */
int run_config_identity(const rec_run *run, sha256_digest *out); /* 0, or -1: out of memory */

/* RUN itself (for audits: run id, creation time, domain names); free with rec_run_free.
 * Errors as run_config_read's for RUN (change records are not read). */
int run_config_read_run(store *st, rec_run *run, tdm_err *e);

/* The health of RUN (the pinned config), judged as `tandem run` judges it (run_config_read). */
enum { RUN_CONFIG_OK = 0, RUN_CONFIG_NO_RUN, RUN_CONFIG_MISSING, RUN_CONFIG_DAMAGED };

/* Sets *health to RUN_CONFIG_OK, RUN_CONFIG_NO_RUN (no RUN and nothing else of a run), RUN_CONFIG_MISSING (no
 * RUN but objects of a run) or RUN_CONFIG_DAMAGED (RUN or a change record does not decode or
 * verify), with e->msg saying what, and how to repair it, for all but RUN_CONFIG_OK. Returns
 * non-zero only when the store itself failed (e set, *health RUN_CONFIG_OK). */
int run_config_check(store *st, int *health, tdm_err *e);

/* For commands that work on damaged runs too (gc, pin, repair): ERR_STORE "holds no run"
 * when the store holds nothing of a run (RUN_CONFIG_NO_RUN), as every command says it;
 * 0 otherwise (a missing or damaged RUN is the command's to judge), or the store's error. */
int run_config_require_run(store *st, tdm_err *e);

/* 1 when the run's states were made with another seed than the pinned `pinned`: the
 * seed of HEAD's state (else of the newest state that decodes) into *seed, that state's
 * key into which. 0 when they agree or no state can be read. A RUN that pins another seed
 * than its states is another run's (or damaged): run_config_open refuses it (ERR_STORE) when the
 * config given has the states' seed, and verify reports it. */
int run_config_seed_mismatch(store *st, uint64_t pinned, uint64_t *seed, char *which, size_t cap);

/* *has = 1 when the store holds objects of a run besides RUN (HEAD, mixture.mp, anything
 * under states/, alpha/, configs/ or superseded/), naming the first one found in `found`;
 * 0 when it holds none. Returns 0, or an ERR_* code when the store could not be read. */
int run_config_run_state(store *st, int *has, char *found, size_t cap, tdm_err *e);

/* The runs of a `tandem compare` that `st` holds one level down (dmo, uniform, ...: those
 * whose RUN exists), comma-separated into out (empty when none); how many. A store that
 * holds no run itself may be a compare's, and commands given it say so. */
int run_config_compare_runs(store *st, char *out, size_t cap);

/* 1 when the store holds nothing a run computed (run_config_run_state finds nothing), 0
 * when it does or cannot be read: whether an input's pin (data.mp, model.mp) may follow
 * today's input. */
int run_config_nothing_computed(store *st);

#endif
