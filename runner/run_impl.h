/* run_impl.h — what the parts of `tandem run` share (run.c: the episode loop and the end;
 * run_setup.c: before the first step; run_load.c: the ledger opened and the state loaded;
 * run_position.c: the position as a record; run_signal.c: the stop signal). Only
 * runner/run*.c include it. */
#ifndef TANDEM_RUNNER_RUN_IMPL_H
#define TANDEM_RUNNER_RUN_IMPL_H

#include <signal.h>
#include <stdint.h>
#include <time.h>

#include "comm/comm.h"
#include "config/config.h"
#include "config/run_config.h"
#include "data/dataset.h"
#include "gpu/plugin.h"
#include "ledger/ledger.h"
#include "ledger/metrics.h"
#include "model/model.h"
#include "runner/ckpt_model.h"
#include "runner/run.h"
#include "steps/steps.h"
#include "storage/store.h"
#include "util/err.h"
#include "util/tfevents.h"

/* Where the run is: the next step and the position. */
enum { NEXT_PROBE, NEXT_ALPHA, NEXT_FREE, NEXT_DONE };
extern const char *const run_next_names[]; /* [NEXT_DONE + 1]: the step names of records */

typedef struct run_ctx {
    config cfg;
    dataset ds;
    model_layout lay;
    step_hparams hp;
    const model_ops *ops; /* the backend run.device names */
    comm *comm;           /* the ranks of a data-parallel run; rank 0 alone writes the store */
    int rank;
    step_nets nets;
    step_state st;
    /* the episode's free phase so far, for its metrics row: per-domain loss and gradient
     * norm sums over ep_n free steps (kept in the state record across a resume) */
    double ep_loss[STEP_MAX_DOMAINS], ep_grad;
    int ep_n;
    int ep_held[STEP_MAX_DOMAINS]; /* free steps of the episode whose batch held a row of the
                                    * domain (under weight mixing every one): the divisor of
                                    * its row's loss */
    store *store;
    ledger *ld;          /* rank 0: the run's checkpointing (ledger/ledger.h) */
    ckpt_model_io ck_io; /* the backend's transfers as the ledger moves chunks */
    int progress;
    uint64_t seq;
    int next;
    uint64_t index; /* next free step within the episode */
    uint64_t alpha_records;
    sha256_digest alpha_head;
    const char *names[STEP_MAX_DOMAINS];
    int shortened; /* run.episodes lowered to where the run stands: commit it as done */
    const gpu_plugin *gpu; /* run.device = cuda: the loaded backend */
    int streaming;         /* commits stream from the model's memory (memplan) */
    int pin_have;          /* the store holds a run: its pinned run.threads follows */
    int pin_threads;       /* (run_setup: read once, before the kernels are pinned) */
    uint64_t reported_commit; /* the newest state a "commit" event named (--json) */
    int have_mixture;         /* the final mixture was written: mixture holds it */
    double mixture[STEP_MAX_DOMAINS];
    tfevents *tb; /* log.tensorboard: the event file of this life (rank 0) */
    int tb_replaced; /* a row of an older config generation was replaced: said once */
    int val_off;  /* log.val_every failed once (said): not tried again in this life */
    /* the episode's free steps this life ran: each one's mixture loss, for the row */
    double step_loss[METRICS_MAX_STEPS];
    int step_n;
    uint64_t step_first; /* the AdamW step count after the first of them */
} run_ctx;

/* ------------------------------------------------------------------ the stop signal */

/* The first stop signal (util/stop_signals.h) that came, or 0, and the monotonic
 * time it came (run_signal.c's handler writes both; the safe point honours them). */
extern volatile sig_atomic_t run_stop_signal;
extern struct timespec run_stop_at;
/* The grace period as far as it is known (TANDEM_GRACE_S, then checkpoint.grace_s once the
 * config is read), 0 when unknown: the store requests' deadline after a stop counts on it. */
extern double run_grace_s;
/* The store's deadline for this run (storage/store.h store_set_deadline): after a stop
 * signal, the grace period less RUN_STOP_EXIT_S to exit in; INFINITY before one, and when
 * the grace period is unknown (then a stop always commits, however long it takes). */
#define RUN_STOP_EXIT_S 2.0
double run_store_deadline(void);

static inline double run_now_mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline double run_now_wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ before the first step */

/* Loads the config (with the overrides of o), picks the store, the backend, the dataset
 * and the model's layout, fills the step hyper-parameters and checks them; opens the
 * store. */
int run_setup(run_ctx *r, const run_opts *o, tdm_err *e);

/* The memory estimate (runner/memplan.h), before the workspace exists: printed by rank 0,
 * checked by every rank against its own GPU and host; decides checkpoint.snapshot = auto. */
int run_plan_memory(run_ctx *r, tdm_err *e);

/* ------------------------------------------------------------------ the position */

/* Attempt number for the lease record: Slurm's restart count when present. */
uint64_t run_attempt_number(void);
/* The first step of every episode: the probe in a TANDEM run, a free step in a fixed one. */
int run_first_step(const run_ctx *r);
/* The scalars of the state as a manifest record (views and tensors are the ledger's). */
void run_to_record(const run_ctx *r, rec_state *rec);
/* The position and small state from a loaded record; ERR_STORE when it does not fit the
 * run (domains, seed, an inconsistent position). */
int run_from_record(run_ctx *r, const rec_state *rec, tdm_err *e);
/* A lowered or raised run.episodes against where the loaded run stands. */
int run_fit_episodes(run_ctx *r, tdm_err *e);
/* The α a run starts from (or, fixed, trains with), in place over alpha[0..M), which holds
 * uniform, natural or the file's mixture: UniMax computed for the run's free-step budget
 * where data.mixture = unimax, then moved into the caps' box (*moved, may be NULL: whether
 * the box moved it). Reads only r->cfg, r->ds and r->hp. */
int run_start_alpha(const run_ctx *r, int M, double *alpha, int *moved, tdm_err *e);
/* run_fit_episodes' refusal, before anything is pinned (reads HEAD's state). */
int run_precheck_episodes(run_ctx *r, tdm_err *e);

/* ------------------------------------------------------------------ the start */

/* Rank 0 pins the run, opens the ledger (the lease) and loads (or initialises) the state;
 * then every rank receives the position, the step state and u, m, v from it. Collective. */
/* Collective, right after every rank set up: each rank's resolved config, dataset tokens
 * and world size against rank 0's (digests; the differing ranks name the keys). ERR_USAGE
 * on every rank when one differs. runner/run_identity.c */
int run_agree_identity(run_ctx *r, tdm_err *e);

int run_load_everywhere(run_ctx *r, const run_opts *o, run_config_result *pinned, ledger_resumed *res,
                        tdm_err *e);

#endif
