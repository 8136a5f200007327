/* audit.h — reading a run's history back from its store: the α records with their hash
 * chain, HEAD and its state, RUN. Shared by `tandem alpha`, `mixture`, `status`,
 * `verify`, `gc` and `eval`; nothing here writes. */
#ifndef TANDEM_LEDGER_AUDIT_H
#define TANDEM_LEDGER_AUDIT_H

#include <stdint.h>

#include "ledger/gens.h"
#include "ledger/records.h"
#include "storage/store.h"
#include "util/err.h"

/* The α records alpha/0.mp .. alpha/(n-1).mp, in order, with their hashes. */
typedef struct audit_chain {
    size_t n;
    rec_alpha *rec;        /* [n] */
    sha256_digest *hash;   /* [n]: rec_alpha_hash of each */
    /* verification result (audit_chain_read fills it; the records before `bad` are good) */
    int ok;                /* 1: complete and every link holds */
    size_t bad;            /* first bad episode when !ok */
    char problem[1024];    /* what is wrong with it, naming the object */
} audit_chain;

/* Reads every alpha/<t>.mp, in episode order, and checks the chain: episodes 0..last all
 * present, each record decodes, record t's `prev` is the hash of record t-1 (zeros for
 * t = 0), its α_t equals record t-1's α_{t+1}, and its episode number is t. Reading stops
 * at the first bad record (chain->ok = 0, problem set); store errors are returned (the
 * chain then holds nothing to free). */
int audit_chain_read(store *st, audit_chain *chain, tdm_err *e);
void audit_chain_free(audit_chain *chain);

/* Marks a chain whose records are not of the run's M domains (RUN's) as broken at
 * alpha/0.mp: every record shares record 0's M (audit_chain_read checks that), so one
 * record's count decides. A no-op on a broken or empty chain, or when M is 0 (unknown). */
void audit_chain_domains(audit_chain *chain, int M);

/* HEAD and the manifest it names (verified against HEAD's SHA-256). *have = 0 when the
 * store has no HEAD. The state is freed with rec_state_free. */
int audit_head(store *st, rec_head *head, rec_state *state, int *have, tdm_err *e);
/* The same, but HEAD there and unusable (it does not decode, names a missing state, or one
 * whose bytes or manifest do not hold) is no error: *have 0 and damage says why (a resume
 * goes on from the newest state that verifies; head zeroed when it did not decode). damage
 * is "" otherwise. A HEAD, or the state it names, of a newer tandem stays an error. */
int audit_head_damage(store *st, rec_head *head, rec_state *state, int *have, char *damage, size_t cap,
                      tdm_err *e);

/* With HEAD missing: the newest listed state whose manifest decodes and is the run's (its
 * seed, and its identity where both carry one), which is what a resume goes on from when
 * its blobs and α records hold (ckpt_load; no blob is read here); head (NULL, or HEAD as
 * decoded: its state[0] '\0' when it did not) passes over the state it names when that
 * state's bytes are not the ones it records. *have 0 when none;
 * *listed the states listed. Returns 0, or an ERR_* code when the store could not be read. */
int audit_newest_listed(store *st, uint64_t seed, const sha256_digest *run, const rec_head *head, rec_state *state,
                        char *key, size_t cap, size_t *listed, int *have, tdm_err *e);

/* What HEAD holds now, as the SHA-256 of its bytes (all zero when missing): a reader that
 * compares it before and after its work knows whether a live run committed meanwhile, and
 * reads again rather than report what a commit (and its retention) did as damage. 0, or
 * the store's error. */
int audit_head_digest(store *st, sha256_digest *d, tdm_err *e);

/* Seq numbers of every states/<seq>.mp, ascending (caller frees). */
int audit_state_seqs(store *st, uint64_t **seqs, size_t *n, tdm_err *e);

/* Metrics rows missing (deleted, or not a file: a damaged one is listed): below the newest,
 * and after it up to the last episode HEAD's state has finished (a run's last rows; none
 * looked for when no row is there at all: a run from before metrics rows). Up to cap runs
 * of episodes [first, last] in gaps, their number in *n. */
typedef struct audit_gap {
    uint64_t first, last;
} audit_gap;
int audit_metrics_gaps(store *st, audit_gap *gaps, size_t cap, size_t *n, tdm_err *e);

/* The run's config generations (configs/0.mp, 1.mp, ... and the position each took effect
 * at): what ckpt_gen_belongs needs to tell a stale writer's objects from the run's. *g is
 * freed with ckpt_gens_free (also after an error). */
int audit_generation(store *st, ckpt_gens *g, tdm_err *e);

/* Whether a store with no state left (the caller knows there is none) is stranded: its config was changed past
 * the start (g: audit_generation's), so a run cannot start again from its seed (it would
 * compute all of it under today's config). Then 1, and `why` (cap bytes) says so and what
 * to do — naming the state manifests set aside under quarantine/ (an older tandem's
 * repair sets aside the states it cannot read), which moved back to states/ are resumed
 * from. 0 when not stranded. One text for run, verify and status. */
int audit_stranded(store *st, const ckpt_gens *g, char *why, size_t cap);
/* audit_stranded for a store as it is now: no state listed and its change records read
 * (0 when there are states, or when configs/ cannot be read: run says why). For status
 * and repair, which read neither otherwise. */
int audit_store_stranded(store *st, char *why, size_t cap);

/* α* of a verified chain (chain->ok, n > 0): the mean of α_{t+1} over its last
 * ceil(fraction · n) records (at least one), as the paper reports the learned mixture;
 * x->M, x->alpha, x->first and x->last are set (names are the caller's). */
void audit_mixture(const audit_chain *chain, double fraction, rec_mixture *x);

/* Formats a unix time as "2026-11-22 23:10:00 UTC". */
void audit_time(double t, char *out, size_t cap);

/* A lease unreleased for this long since its holder's last sign of life counts as
 * stale even when nothing else proves the holder gone (24 hours: far beyond any episode
 * or commit interval, during which a live writer writes an α record every episode). */
#define AUDIT_LEASE_STALE_AGE_S (24.0 * 3600.0)

enum { AUDIT_LEASE_NONE, AUDIT_LEASE_RELEASED, AUDIT_LEASE_HELD, AUDIT_LEASE_STALE };

/* The writer lease and what can be said of its holder. */
typedef struct audit_lease {
    int state;        /* AUDIT_LEASE_*: NONE also for a lease that does not decode */
    int damaged;      /* NONE as the lease is there but does not decode: why says why (it
                       * fences nobody; the next run replaces it, verify calls it a fault) */
    rec_lease lease;  /* when state != NONE */
    double life;      /* the holder's last sign of life: the newest of the lease's time,
                       * HEAD's commit time and the newest α record's time (unix s) */
    double age;       /* now - life, seconds (>= 0) */
    char why[256];    /* HELD/STALE: why, e.g. "no process 4242 on this host"; damaged:
                       * the decoder's message */
} audit_lease;

/* Reads `lease` and judges an unreleased one. It is STALE only when that is proven: on
 * the lease's own host (gethostname), in the holder's PID namespace on its boot (where
 * the lease records them: util/pidns.h; elsewhere judged as on another host), its pid
 * does not exist, or belongs to a process started after the lease was taken (the pid
 * was reused); or, on any host, the holder shows no sign of life for
 * AUDIT_LEASE_STALE_AGE_S. Otherwise it is HELD (the holder may be alive). Host names
 * are taken to name machines (or containers) uniquely.
 * Returns 0, or an ERR_* code when the store could not be read. */
int audit_lease_read(store *st, audit_lease *out, tdm_err *e);

/* How many seconds of released lease l's settle window are left (<= 0: none): what was
 * left at the release (settle_until less the lease's time, both the releasing writer's
 * clock) less lease_age, the lease's age on the store's clock (store_age; 1 s more for its
 * whole seconds), so that no two machines' wall clocks are compared (a clock hunt: a skew
 * of 90 s erased the window, and a late write removed a state). lease_age < 0 (the store
 * cannot say): settle_until against now, this machine's clock, as before. */
double audit_settle_left(const rec_lease *l, double lease_age, double now);

/* "3h12m" / "45s" for a duration in seconds. */
void audit_duration(double s, char *out, size_t cap);

#endif
