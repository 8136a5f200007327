/* ledger.h — the front door of a run's checkpointing: what `tandem run` calls.
 *
 * One object holds the writer's side of the protocol that ckpt.h spells out piece by piece
 * (models: torchtitan's CheckpointManager, which keeps interval, async save and retention
 * behind save()/load(); libgit2's odb in front of its backends):
 *
 *   ledger_open    the lease taken, retention and the commit policy set
 *   ledger_resume  generation → load (newest verified state, fall-back) → α chain check →
 *                  holes past the state reported; the caller then accepts the state
 *   ledger_start   HEAD settled on the state the run goes on from, its tensors in the
 *                  backend, what a config change left behind set aside
 *   ledger_save    a commit when the policy says it is due (checkpoint.every_seconds,
 *                  every_episodes), or now
 *   ledger_stop    the grace decision at a stop signal: a full commit if it fits in what is
 *                  left of the grace period, else the last full state stands; lease released
 *   ledger_alpha / ledger_metrics   the per-episode records
 *   ledger_finish  the last write landed, the final mixture sealed, the lease released
 *   ledger_diverged  a run that diverged (exit 5) says so in diverged.mp, before
 *                  ledger_close gives the lease back
 *   ledger_close   a failed run gives the lease back; everything freed
 *
 * The ledger never calls back up into the run: a stop signal reaches it as data (the flag
 * and time run.c's handler records), and it says what it decided in structs the caller
 * prints. ckpt.h stays the layer below, for the commands that read a store (verify, eval,
 * export, repair).
 *
 * Fencing: like every write of ckpt.h, each write and deletion here is preceded by a lease
 * check (a writer that lost the lease writes and deletes nothing): the states dropped and α
 * records set aside after a config change (one of a newer generation than the writer's
 * fences it out), mixture.mp (also a compare-and-swap on the version read), diverged.mp.
 * Test hooks (TANDEM_TEST_STOP_AT=label:n, as ckpt.h's): supersede (before the α records
 * past a change are listed), supersede-put (after the lease check, before a move), mixture
 * (before the α chain is read for mixture.mp), mixture-put (after the lease check, before
 * the write).
 */
#ifndef TANDEM_LEDGER_LEDGER_H
#define TANDEM_LEDGER_LEDGER_H

#include <signal.h>
#include <stdint.h>
#include <time.h>

#include "ledger/ckpt.h"
#include "ledger/metrics.h" /* defines: rec_metrics */
#include "ledger/records.h"
#include "storage/store.h"
#include "util/err.h"

typedef struct ledger ledger;

/* ------------------------------------------------------------------ open and close */

typedef struct ledger_opts {
    const ckpt_layout *layout;  /* the parameter tensors (copied) */
    uint64_t chunk_bytes;       /* checkpoint.chunk_kib in bytes */
    int streaming;              /* checkpoint.snapshot resolved to stream (ckpt_open_stream) */
    const ckpt_tensor_io *io;   /* the backend's transfers; must outlive the ledger */
    float *dev[CKPT_TENSORS];   /* u, AdamW m, AdamW v in the backend */
    uint64_t attempt;           /* recorded with the lease (SLURM_RESTART_COUNT) */
    long keep;                  /* checkpoint.keep (0: every state) */
    long every_episodes;        /* checkpoint.every_episodes (0: off) */
    double every_seconds;       /* checkpoint.every_seconds (0: off) */
    uint64_t episodes;          /* run.episodes: the α records the run writes (0: unknown) */
    double grace_s;             /* seconds from a stop signal to SIGKILL; 0: unknown */
    uint64_t seed;              /* run.seed (pinned): states of another seed are another run's */
    const sha256_digest *run;   /* the run's identity (run_config_identity), or NULL: states carry it */
    /* the stop signal as the process's handler records it: nonzero flag, and the monotonic
     * time the first one came (zero until then). Read, never written. */
    const volatile sig_atomic_t *stop_flag;
    const struct timespec *stop_at;
} ledger_opts;

/* Opens checkpointing for a run in `st` and takes the writer lease. NULL with e set. */
ledger *ledger_open(store *st, const ledger_opts *o, tdm_err *e);

/* After a failure (`failed` nonzero, not a requeue): waits for a write in flight and
 * releases the lease, best effort, so that status and gc do not see a holder that is gone
 * (a writer that was fenced out writes nothing). Then frees everything. NULL is a no-op. */
void ledger_close(ledger *l, int failed);

/* ERR_STORE "fenced out" unless this writer still holds the lease (ckpt_check_lease): for
 * what the run writes to the store itself under the lease (a config change record), so
 * that a writer taken over since ledger_open writes nothing. */
int ledger_check_lease(ledger *l, tdm_err *e);

/* ------------------------------------------------------------------ resuming */

/* What ledger_resume found. */
typedef struct ledger_resumed {
    int found;       /* a verified state: rec holds it */
    int seed_replay; /* states were there but none usable: the run replays from its seed */
    int head_named;  /* HEAD named the loaded state as found (not lagging behind it) */
} ledger_resumed;

/* Under the run's config generations g (run_config's, gens.h), loads the newest verified
 * state that belongs to the run into *rec (caller frees with rec_state_free when
 * out->found) and checks the α chain it vouches for (a hole or damaged record is ERR_STORE
 * naming it and the repair); records missing past the state are reported on stderr. The
 * caller checks that the state fits the run, then calls ledger_start. */
int ledger_resume(ledger *l, const ckpt_gens *g, rec_state *rec, ledger_resumed *out, tdm_err *e);

/* The host buffer of u (numel floats) a new run's initial parameters may be built in; NULL
 * when streaming (the caller then uses one of its own). */
float *ledger_host(ledger *l);

/* The run goes on from run position `seq`: when a state was found, HEAD is moved to it if
 * it does not name it and its tensors are uploaded into the backend (streaming wrote them
 * already). Resuming at or before the newest config change, the states past `seq` are
 * dropped and the α records past it set aside under superseded/ (said on stderr). */
int ledger_start(ledger *l, uint64_t seq, tdm_err *e);

/* ------------------------------------------------------------------ saving */

typedef enum {
    LEDGER_SAVE_TICK,    /* between steps: due when checkpoint.every_seconds have passed */
    LEDGER_SAVE_EPISODE, /* an episode ended: due every checkpoint.every_episodes */
    LEDGER_SAVE_NOW,     /* always, and synchronously (the end of a run) */
} ledger_save_when;

/* Commits the state `rec` (the scalars; the tensors are read from the backend) when `when`
 * says it is due: in the background for TICK and EPISODE, before returning for NOW. 0 when
 * not due. Every call first returns the error of a background commit that has failed
 * since (without waiting for one in flight): the run stops at the next step boundary
 * (TICK is called at each), not at the next commit. */
int ledger_save(ledger *l, const rec_state *rec, ledger_save_when when, tdm_err *e);

/* ------------------------------------------------------------------ a stop signal */

typedef struct ledger_stop_plan {
    int full;          /* a full commit fits (or the grace period is unknown) */
    double need;       /* seconds a full commit would take now (estimate) */
    double margin;     /* the factor need is taken by against left (a safety margin) */
    double left;       /* seconds left of the grace period, minus the exit margin */
    double grace;      /* the grace period (0: unknown) */
    int landed;        /* !full: the commit in flight was let land (it is the state that stands) */
    uint64_t last_seq; /* !full: the run position of the last full state (0: none) */
    int none_yet;      /* !full: no full state was ever committed (the resume starts afresh) */
} ledger_stop_plan;

/* At a stop signal: decides whether a full commit of the state fits in what is left of the
 * grace period (letting a first commit in flight show its pace first), fills *p, and with
 * act nonzero carries it out: commits `rec` synchronously, or lets the commit in flight land
 * when it fits and gives it up otherwise; then releases the lease. Called twice — act 0 to
 * say what will happen, act 1 to do it — so that the caller can announce a full commit
 * before it starts. */
int ledger_stop(ledger *l, const rec_state *rec, ledger_stop_plan *p, int act, tdm_err *e);

/* ------------------------------------------------------------------ per-episode records */

/* The α record of an episode (ckpt_alpha_record: written, or checked on a replay). */
int ledger_alpha(ledger *l, const rec_alpha *a, sha256_digest *hash, tdm_err *e);

/* The episode's metrics row (ckpt_metrics_record); *fresh: this life wrote it. The row's
 * commit_s is filled here (seconds the last completed commit took). */
int ledger_metrics(ledger *l, rec_metrics *row, int *fresh, tdm_err *e);

/* The last completed commit of this writer: its run position (UINT64_MAX: none yet) and
 * monotonic time (0: none). */
typedef struct ledger_commit_info {
    uint64_t seq;
    double time;
} ledger_commit_info;
ledger_commit_info ledger_last_commit(const ledger *l);

/* ------------------------------------------------------------------ the end */

/* What the end of a TANDEM run seals: α* from the α chain. */
typedef struct ledger_final {
    int mixture;               /* write mixture.mp (a TANDEM run; fixed runs have none) */
    const char *const *names;  /* the domains' names, [M] */
    uint64_t alpha_records;    /* the chain the final state vouches for */
    sha256_digest alpha_head;
    int again;                 /* the run was finished before this process started */
} ledger_final;

/* α* and where α started (episode 0's α), for the closing lines. */
typedef struct ledger_mixture {
    rec_mixture x;
    double start[REC_MAX_DOMAINS];
} ledger_mixture;

/* Waits for the write in flight; with f->mixture, reads and verifies the whole α chain
 * (every record present and linked, ending where the final state says; ERR_STORE naming
 * the record and the repair otherwise), takes α* = the mean of α_{t+1} over the last 10 %
 * of the episodes into *out and writes mixture.mp (f->again: one already there that differs
 * or is missing is reported as it is rewritten); then releases the lease. */
int ledger_finish(ledger *l, const ledger_final *f, ledger_mixture *out, tdm_err *e);
/* What ledger_finish returns when the final commit was given up for a stop signal (it
 * would have outlasted the grace period): the lease is released and the run is not
 * finished — the run's exit 75, a requeue, whose resume replays from the last full state. */
#define LEDGER_STOPPED_SHORT 75

/* ------------------------------------------------------------------ a divergence */

/* A run that diverged (ERR_DIVERGED) writes diverged.mp (rec_diverged) before it closes:
 * the caller fills where (seq, episode, step, index), the message, time, host and attempt;
 * the ledger waits for the write in flight, fills the writer's epoch and the run position
 * of the last full state that stands (HEAD's, 0 when none), masks user info in the
 * message, checks the lease (a fenced-out writer writes nothing: ERR_STORE) and puts it.
 * The next ledger_start removes it: while it is in the store, it is the latest word on the
 * run (tandem status, mixture). 0, or the failure (the run exits 5 all the same). */
int ledger_diverged(ledger *l, rec_diverged *d, tdm_err *e);

#endif
