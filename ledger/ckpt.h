/* ckpt.h — checkpoints of a run in its store: commit, verified load with fall-back,
 * α records with their hash chain, the writer lease (DESIGN.md §5).
 *
 * Commit = upload the tensor chunks that are not already known to be stored (blobs are
 * content-addressed by SHA-256, write-once) → write states/<seq>.mp (create-only) →
 * move HEAD (compare-and-swap against the version this writer last saw). `seq` is the
 * run position (steps completed), so a state's bytes depend only on where it is in the
 * run: re-committing a position after a crash writes the same manifest, and a
 * different one is nondeterminism (ERR_NONDET), never overwritten.
 *
 * Load = every state manifest, newest first, until one decodes and all its blobs
 * verify; each one that fails is reported to stderr by name. HEAD is a pointer the
 * commit keeps current; load does not trust it.
 *
 * Background writing: ckpt_submit() copies the tensors into host memory (the only
 * stall of the training loop) and hands the copy to a writer thread; it first waits for
 * the previous write. Errors of a background write are returned by the next
 * ckpt_submit/ckpt_wait. Fencing: the writer holds the lease epoch it took at start; a
 * commit whose lease was taken over fails with ERR_STORE ("fenced out") and moves
 * nothing.
 *
 * A run goes through the front door, ledger/ledger.h, which orders these calls (the
 * resume, the commit policy, the grace decision); the commands that read or repair a store
 * (verify, eval, export, repair) use this layer directly.
 *
 * Test hooks (environment, for the test suite only): TANDEM_TEST_KILL_AT=label:n raises
 * SIGKILL at the n-th passage of `label` (blob, manifest, head, alpha), to kill a run
 * inside a commit deterministically; TANDEM_TEST_STOP_AT=label:n raises SIGSTOP at the
 * n-th passage of `label` (manifest-put, alpha-put, head-put: after the lease check,
 * before the write; head-stamp: a new writer between its read of HEAD and its stamp;
 * lease-put: a new writer between its read of the lease and its write; release: a writer
 * done, before it releases the lease), to freeze a writer exactly where a takeover can
 * overtake it.
 */
#ifndef TANDEM_LEDGER_CKPT_H
#define TANDEM_LEDGER_CKPT_H

#include <stdint.h>

#include "ledger/gens.h"
#include "ledger/records.h"
#include "storage/store.h"
#include "util/err.h"

#define CKPT_TENSORS 3 /* params, adam_m, adam_v */
/* Chunks are hashed and uploaded (and read back) by a few threads: hashing (~1.5 GB/s)
 * and the store's writes (fsync-bound) then overlap, and chunk k's work never depends on
 * another's. Streaming holds one chunk per thread in host memory. */
#define CKPT_IO_THREADS 4

/* What an exit 4 most often is, said with it: a replay on other hardware or libraries
 * than the ones that wrote the records it is compared with (docs/gpu.md, Determinism). */
#define CKPT_NONDET_HINT                                                                   \
    "A replay computes the same bits only on the kind of machine that wrote what it is "   \
    "compared with: another GPU model or CUDA, cuBLAS or cuDNN version, or another build "  \
    "of tandem, gives other bits; resume it where it ran (tandem status names the host of " \
    "the last writer), or start the run over in a new store"

typedef struct ckpt ckpt;

/* ------------------------------------------------------------------ what the ledger
 * knows of the model: sizes and names, and a way to move chunks (redis's rio.h shape).
 * The ledger never includes model/: runner/ckpt_model.c builds these from a backend. */

/* The three tensors (u, AdamW m, AdamW v) hold numel floats each; views name the
 * parameter tensors inside them (written into every manifest, checked on load). */
typedef struct ckpt_layout {
    size_t numel;
    int nviews;
    const rec_view *views;
} ckpt_layout;

/* Moves n floats between a backend tensor and host memory: download from the backend's
 * src into host, upload from host into the backend's dst. 0 or an ERR_* code with e set. */
typedef struct ckpt_tensor_io {
    void *ctx;
    int (*download)(void *ctx, float *host, const float *src, size_t n, tdm_err *e);
    int (*upload)(void *ctx, float *dst, const float *host, size_t n, tdm_err *e);
} ckpt_tensor_io;

/* ------------------------------------------------------------------ open and close */

/* Opens checkpointing of a run whose parameter tensors follow `lay` (copied), with blob
 * chunks of chunk_bytes. Allocates the host snapshot buffers (3 x numel floats). lay == NULL opens
 * the lease alone (acquire, release, the generation; no loads or commits): for commands
 * that repair a store without holding a model. */
ckpt *ckpt_open(store *st, const ckpt_layout *lay, uint64_t chunk_bytes, tdm_err *e);
/* Opens checkpointing without host buffers: commits read the three tensors dev[] (u,
 * AdamW m, v) of the backend chunk by chunk through io->download, and loads write them
 * back chunk by chunk through io->upload (io is copied; io->ctx must outlive c), so
 * host memory holds at most one chunk per I/O
 * thread (4 x chunk_bytes) instead of a second full copy of the state. The price: a
 * commit is synchronous (ckpt_snapshot returns when it is stored), so the training loop
 * waits for the whole write. For states too large to copy into host memory
 * (checkpoint.snapshot: stream). ckpt_host returns NULL. */
ckpt *ckpt_open_stream(store *st, const ckpt_layout *lay, uint64_t chunk_bytes,
                       const ckpt_tensor_io *io, float *const dev[CKPT_TENSORS], tdm_err *e);
/* Whether `c` was opened by ckpt_open_stream. */
int ckpt_streaming(const ckpt *c);
/* Streaming: `stop` is asked before each chunk of a commit (from the I/O threads) with the
 * seconds the rest of that commit would take at the throughput it has had so far; nonzero
 * gives the commit up: no manifest is written, HEAD does not move, the chunks already
 * stored stay as orphans (tandem gc), and ckpt_snapshot returns 0 saying so on stderr —
 * the last full state stands. For a stop signal whose grace period the commit would
 * outlast. NULL: never given up. */
void ckpt_set_stop_check(ckpt *c, int (*stop)(void *arg, double seconds_left), void *arg);
/* Waits for a pending write, stops the writer thread, frees everything. */
void ckpt_close(ckpt *c);

/* ------------------------------------------------------------------ the writer lease */

/* Takes the writer lease: epoch = previous epoch + 1, and stamps HEAD with it so that a
 * writer holding an older epoch fails its next compare-and-swap (the lease checked before
 * each stamp: a writer that lost it meanwhile stamps nothing, ERR_STORE "fenced out"). A
 * lease that changed between its read and the write (released meanwhile, another tandem
 * starting at the same instant) is read again and taken over, a few times. `attempt` is recorded
 * (e.g. SLURM_RESTART_COUNT). Prints who held it before when it was not released. Writes
 * the previous writer may have left in flight count as unsettled (store_note_lost_writer):
 * for the store's window when its lease was not released, until its settle_until when it
 * says one (at most CKPT_SETTLE_MAX_S). */
int ckpt_acquire(ckpt *c, uint64_t attempt, tdm_err *e);
/* Marks the lease released (best effort; the run is committed before), with the time
 * until which a write this process gave up on may still land (store_unsettled_s). A
 * lease taken over by another writer meanwhile is nothing to release: said on stderr
 * (unless this writer knew itself fenced out already), and 0 — the work is committed. */
int ckpt_release(ckpt *c, tdm_err *e);

/* The longest a lease's settle_until is believed: the longest settle window S3 has
 * (60 s + twice TANDEM_S3_TIMEOUT's 3600 s). A later time (a clock far ahead, a lease
 * written by hand) would keep every state that long. */
#define CKPT_SETTLE_MAX_S 7260.0

/* Different copies of one key that ckpt_keep_aside keeps under one epoch. */
#define CKPT_ASIDE_COPIES 1000
/* Keeps a copy of `key` (data, n) as quarantine/<epoch>/<key> — never over a different
 * copy already there (an epoch used twice: a lease that did not decode, or repair after a
 * run of the same epoch), which gets `key`.1, .2, ... instead; the same bytes there already
 * count as kept. The name used is left in dst. Nothing set aside is ever destroyed. */
int ckpt_keep_aside(store *st, uint64_t epoch, const char *key, const void *data, size_t n,
                    char *dst, size_t cap, tdm_err *e);
/* ERR_STORE "fenced out" unless this writer still holds the lease. */
int ckpt_check_lease(ckpt *c, tdm_err *e);
/* Whether seq is the position of the one state past HEAD that the load went past (a
 * commit there compares it with the replay: ledger_save commits there). */
int ckpt_unvouched_at(const ckpt *c, uint64_t seq);
/* At the run's end: that state, when no commit reached its position (past the run's end:
 * another run's), and the states of another run (seed or identity) the load passed over
 * that no commit replaced, set aside under quarantine/ and removed, said. 0 when there is
 * none. */
int ckpt_set_aside_unreached(ckpt *c, tdm_err *e);
/* Names `what` (a key, or a prefix ending in '/') in this writer's lease before DELETEs of
 * it are sent, on a store whose writes may land late (S3): a writer that takes the lease
 * over after this one was killed waits, before it writes such a key again, until they
 * cannot land (a killed writer otherwise says nothing of its DELETEs in flight). A no-op
 * elsewhere. ERR_STORE "fenced out" when the lease is another writer's. */
int ckpt_announce_deletes(ckpt *c, const char *what, tdm_err *e);
/* The announced DELETEs were sent (each answered, or given up on: the store still counts
 * those): the lease names only what may still land. Best effort. */
void ckpt_announce_settled(ckpt *c);
uint64_t ckpt_epoch(const ckpt *c);

/* The host buffers a load fills and a snapshot copies into: [CKPT_TENSORS][numel]; NULL
 * when streaming (a load then fills the device tensors directly). */
float *ckpt_host(ckpt *c, int tensor);

/* ---------------------------------------------------------- generations and retention */

/* The run's config generations (copied): this writer computes under the newest, g->n.
 * States and α records carry the generation they were computed under: one that is neither
 * the current generation nor an older one at or before that generation's end
 * (ckpt_gen_belongs) belongs to a writer that was fenced out or superseded, and is never
 * used (loads skip it, replays replace it; both keep a copy under quarantine/<epoch>/).
 * Call before ckpt_load. ERR_INTERNAL when out of memory. */
int ckpt_set_generation(ckpt *c, const ckpt_gens *g, tdm_err *e);

/* checkpoint.keep: after each commit the writer deletes the states beyond the newest
 * `keep` (never HEAD's, never a pinned one) and the blobs only they used (ledger/retain.h);
 * 0 keeps everything. */
void ckpt_set_retention(ckpt *c, long keep);

/* Marks c a reader's (verb: what it does with the state, e.g. "evaluate"; kept, not
 * copied): where ckpt_load takes another state than HEAD's, it says it reads that one,
 * not that a run resumes from it. */
void ckpt_set_reader(ckpt *c, const char *verb);

/* (The rule as a pure function, also for `tandem verify`: ckpt_gen_belongs, gens.h.) */

/* ------------------------------------------------------------------ loading a state */

/* Loads the newest verified state into *rec (scalars; caller frees with
 * rec_state_free) and the host buffers. *found = 0 when the store holds no usable
 * state (then nothing is loaded). A run with manifests but none that verifies is
 * ERR_STORE. */
int ckpt_load(ckpt *c, rec_state *rec, int *found, tdm_err *e);

/* After ckpt_load found a state (and the run accepted it): when HEAD does not name that
 * state as it is — HEAD missing or damaged, naming a state that is gone or unusable, or
 * behind it because a commit was cut off between its manifest and the HEAD move — moves
 * HEAD to it (the lease checked, compare-and-swap), so that `tandem hash`, status and
 * verify see the run where it is even when no commit follows (a finished run). Says so on
 * stderr unless HEAD merely lagged behind. 0 when nothing needed doing. */
int ckpt_settle_head(ckpt *c, tdm_err *e);

/* Whether HEAD named the state the last ckpt_load chose, as it found HEAD (before
 * ckpt_settle_head). 0 when HEAD lagged behind it: the commit of that state was cut off
 * before HEAD moved, so nothing written after it (a finished run's mixture.mp) can be
 * there yet. */
int ckpt_head_named_loaded(const ckpt *c);
/* Whether the last ckpt_load found states but none it could resume from, so that the run
 * replays from its seed (the store's α records check the replay). */
int ckpt_seed_replay(const ckpt *c);

/* Loads exactly states/<seq>.mp (read-only use: evaluating a kept state), verified like
 * ckpt_load but without falling back: ERR_USAGE when it does not exist, ERR_STORE when it
 * does not verify. */
int ckpt_load_seq(ckpt *c, uint64_t seq, rec_state *rec, tdm_err *e);

/* ------------------------------------------------------------------ committing a state */

/* Snapshots the state: waits for the previous write, copies `rec` and the three
 * device buffers (u, AdamW m, AdamW v) into host memory through io->download, then
 * commits in the background (async = 1) or before returning (async = 0). */
int ckpt_snapshot(ckpt *c, const rec_state *rec, const ckpt_tensor_io *io, float *const dev[CKPT_TENSORS],
                  int async, tdm_err *e);

/* Waits for the background write; returns its result. */
int ckpt_wait(ckpt *c, tdm_err *e);

/* Without waiting: the error of a background write that has ended in failure (what
 * ckpt_wait would return), else 0 (none failed, or one still in flight). One atomic load
 * when nothing failed: for every step boundary, so that the run stops at once rather
 * than train on for a whole checkpoint interval with nothing saved. */
int ckpt_failed(ckpt *c, tdm_err *e);

/* ---------------------------------------------------- the grace decision: a commit's cost now */

/* Throughput assumed before this writer has measured one commit of its own: what a slow
 * object store does (bytes/s), so that an unmeasured estimate errs on the long side. */
#define CKPT_UNMEASURED_RATE 50e6

/* Seconds a full commit of this state would take now: what is left of one in flight plus
 * a new one, at the throughput of this writer's last commit (CKPT_UNMEASURED_RATE before
 * it has one); *inflight (may be NULL) gets the first part alone. For deciding whether a
 * commit fits in a preemption's grace period. */
double ckpt_commit_estimate(ckpt *c, double *inflight);

/* Whether ckpt_commit_estimate rests on a measurement (a completed commit of this writer,
 * or the commit in flight having written something) rather than the guess. */
int ckpt_rate_measured(ckpt *c);

/* Waits up to `seconds` for the commit in flight to show its pace (to have written for
 * CKPT_PACE_S) or to land, whichever comes first; at once when none is in flight
 * or a rate is measured already. For a stop that would otherwise judge a first commit by
 * the guess alone (a fast disk taken for a slow store gives up a commit that would fit). */
void ckpt_await_pace(ckpt *c, double seconds);
#define CKPT_PACE_S 1.0

/* Gives up the commit in flight: it stops before its next object (HEAD is not moved; what
 * it uploaded stays as orphan blobs) and this returns once it has. */
void ckpt_cancel(ckpt *c);

/* Time (seconds, monotonic) and seq of the last completed commit; seq UINT64_MAX if none. */
double ckpt_last_commit_time(const ckpt *c);
/* Seconds the last completed commit of this writer took, snapshot to HEAD (0: none). */
double ckpt_last_commit_seconds(const ckpt *c);
uint64_t ckpt_last_commit_seq(const ckpt *c);
/* 1 when the newest commit was given up for a stop (its rest, or the wait for a late
 * DELETE of its key, would have outlasted the grace period): the state it carried is not
 * in the store, so a run that ended its loop on it has not finished (ledger_finish). */
int ckpt_stopped_short(ckpt *c);
/* The run's pinned run.seed, for ckpt_load: a state made with another seed is another
 * run's (copied or synced in from another run's store) and is passed over, replaced when
 * the replay reaches its position; where no state has the pinned seed, RUN is the odd one
 * out and the load says so instead (nothing set aside). */
void ckpt_set_seed(ckpt *c, uint64_t seed);

/* The run's identity (run_config_identity of RUN; NULL: unknown): states written carry it,
 * and a state that carries another is another run's, passed over by ckpt_load. */
void ckpt_set_run(ckpt *c, const sha256_digest *run);

/* -------------------------------------------------- the alpha records and their chain */

/* Writes alpha/<t>.mp (stamped with the writer's generation and a self-digest), or, when
 * it exists (a replay), checks that the stored record has the same hash: a record that is
 * damaged (its digest fails, or it does not decode) or was computed under another
 * generation is kept aside under quarantine/ and replaced (reported); an intact one of
 * the same generation with a different hash is ERR_NONDET naming the episode and both
 * hashes. Every write is preceded by a lease check (ERR_STORE "fenced out"). *hash gets
 * the record's hash. */
int ckpt_alpha_record(ckpt *c, const rec_alpha *a, sha256_digest *hash, tdm_err *e);

/* The part of the α chain a state vouches for (its alpha_records and alpha_head): every
 * alpha/<t>.mp for t < records is present, intact (decodes, its self-digest holds), links
 * to the one before and the last one hashes to head. ERR_STORE naming the hole or the
 * damaged record and the repair otherwise: a run never goes on with a hole in its audit
 * trail. Reads `records` small objects. */
int ckpt_check_chain(ckpt *c, uint64_t records, const sha256_digest *head, tdm_err *e);
/* The same, *bad set to the record it stopped at (missing, damaged, unreadable; records
 * when the chain holds). */
int ckpt_check_chain_at(ckpt *c, uint64_t records, const sha256_digest *head, uint64_t *bad, tdm_err *e);

/* Reports (stderr) the α records missing between the part of the chain a state vouches
 * for (`records`) and the newest record in the store — a hole past the state, which the
 * replay re-derives, said out loud as verify says it: one line per gap, however long. A
 * record at or past `episodes` (run.episodes; 0: unknown), which no episode of the run
 * writes and which would leave the chain ending past the run, is set aside under
 * quarantine/ and removed. Store errors are returned. */
int ckpt_report_alpha_holes(ckpt *c, uint64_t records, uint64_t episodes, tdm_err *e);

/* ------------------------------------------------ a config change: the old trajectory */

/* (The old trajectory's states are deleted by ledger.c's drop_states_after, which fences.) */

/* Sets aside the α records of episodes whose α update took effect after run position
 * `after` (record seq > after): each alpha/<t>.mp is copied to
 * superseded/<change>/alpha/<t>.mp, then deleted, so that the replay under changed config
 * writes its own records instead of failing the replay check. Nothing is lost: the old
 * trajectory's records stay readable under superseded/. Idempotent (a crash midway is
 * finished by the next call). *moved gets the number set aside. The lease is checked
 * before each move and deletion, and a record of a newer config generation than this
 * writer's fences it out (ERR_STORE, nothing of it moved): a writer taken over meanwhile
 * never sets aside the new writer's records. */
int ckpt_supersede_alpha_after(ckpt *c, uint64_t after, uint64_t change, int *moved, tdm_err *e);

#endif
