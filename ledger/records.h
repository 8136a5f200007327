/* records.h — the msgpack records of a run's store (DESIGN.md §5), version 1.
 *
 *   RUN            rec_run      run id, the pinned config (key → value text), its SHA-256,
 *                               the domain names
 *   HEAD           rec_head     seq, state key, the manifest's SHA-256, writer epoch, commit
 *                               time and the run's commit count
 *   states/<seq>.mp rec_state   everything between two steps except tensor bytes, plus a
 *                               tensor table name → dtype, shape, chunk SHA-256s
 *   alpha/<t>.mp   rec_alpha    α_t, α_{t+1}, ℓ_u, ℓ_w, η_α, γ, state seq, previous hash;
 *                               plus a meta part (time, host, attempt) outside the hash
 *   lease          rec_lease    writer epoch, host, pid (PID namespace, boot id), attempt, released flag, settle time
 *   configs/<n>.mp rec_change   a recorded change of pinned config keys
 *   mixture.mp     rec_mixture  the final mixture α*: domain names, α*, episodes averaged
 *   SWEEP          rec_sweep    a study's root: its --sweep texts and number of points
 *   diverged.mp    rec_diverged where the run diverged (exit 5) and the message, until the
 *                               next start
 *
 * HEAD, change records, state manifests and α records written by this version end with a
 * self-digest ("self": the SHA-256 of every byte before it), which the decoders check when
 * it is there (older records have none), so that each is recognised as damaged on its own.
 *
 * Each kind is described once, as a table of its fields in records.c (metrics rows in
 * metrics.c): name, type, where the value lives, range, when it is present; one encoder
 * and one decoder (rectab.h) work from the tables, and tests/records/golden/ pins the
 * bytes of every kind.
 *
 * Every record is a map with "format": 1. Decoders are strict: unknown versions, unknown
 * or missing fields, wrong types and out-of-range values are ERR_STORE errors naming the
 * object (the `what` argument, normally its store key). Encoders are deterministic: the
 * same record gives the same bytes, which is what makes manifest hashes comparable
 * across interrupted and uninterrupted runs.
 */
#ifndef TANDEM_LEDGER_RECORDS_H
#define TANDEM_LEDGER_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "storage/sha256.h"
#include "util/err.h"

/* The record format versions: REC_FORMAT is what records are written in; a state that
 * carries its run's identity (`run`, 2026-12-07) is written in REC_FORMAT_RUN, so that a
 * tandem from before it, which refuses the field, says "a newer tandem" and changes
 * nothing rather than take the run's own states for damage. REC_FORMAT_MAX: the newest
 * this tandem reads (every version from REC_FORMAT up). */
#define REC_FORMAT 1
#define REC_FORMAT_RUN 2
#define REC_FORMAT_MAX 2
#define REC_MAX_DOMAINS 64
#define REC_NAME_MAX 64 /* run ids, hosts, tensor names: at most 63 bytes and a NUL */
/* a domain name: data/dataset.h's DATASET_NAME_MAX (64) bytes and a NUL (before, such
 * fields were REC_NAME_MAX: a 64-character name, valid in a dataset, was cut to 63) */
#define REC_DOMAIN_MAX 65
#define REC_KEY_MAX 128
#define REC_MAX_TENSORS 4096
#define REC_MAX_DIMS 4

/* ------------------------------------------------------------------ the records */

typedef struct rec_head {
    uint64_t seq;
    char state[REC_KEY_MAX]; /* store key of the manifest */
    sha256_digest state_sha;
    uint64_t epoch;   /* writer epoch that moved HEAD here */
    double time;      /* unix seconds of the commit */
    uint64_t commits; /* full commits of the run so far, this one included */
} rec_head;

typedef struct rec_kv {
    char *key;
    char *value;
} rec_kv;

typedef struct rec_run {
    char run_id[REC_NAME_MAX];
    uint64_t created; /* unix seconds */
    size_t nconfig;
    rec_kv *config; /* sorted by key, owned */
    sha256_digest config_sha;
    int M;
    char domains[REC_MAX_DOMAINS][REC_DOMAIN_MAX]; /* the dataset's domain names, in order */
} rec_run;

typedef struct rec_change {
    uint64_t seq;     /* state position at which the change applies */
    uint64_t created; /* unix seconds */
    size_t n;
    rec_kv *old_values; /* key → previous value */
    rec_kv *new_values; /* key → new value (same keys, same order) */
} rec_change;

/* One tensor stored as little-endian chunks of at most chunk_bytes. */
typedef struct rec_tensor {
    char name[REC_NAME_MAX];
    char dtype[8]; /* "f32" */
    int ndim;
    uint64_t shape[REC_MAX_DIMS];
    uint64_t chunk_bytes;
    size_t nchunks;
    sha256_digest *chunks; /* owned */
} rec_tensor;

/* A named view into the parameter tensor (the model's tensor table), so a state is
 * self-describing and device-independent. */
typedef struct rec_view {
    char name[REC_NAME_MAX];
    uint64_t rows, cols, offset;
} rec_view;

typedef struct rec_state {
    uint64_t seq;        /* run position: steps completed since the start */
    uint64_t episode;    /* t of the next step */
    char step[16];       /* next step: "probe", "alpha", "free", "done" */
    uint64_t index;      /* index of the next free step within the episode */
    uint64_t free_steps; /* AdamW steps done (the LR schedule position) */
    uint64_t seed;
    int M;
    double alpha[REC_MAX_DOMAINS];
    int have_losses; /* probe done, alpha not yet: ℓ_u and ℓ_w pending */
    double loss_u[REC_MAX_DOMAINS], loss_w[REC_MAX_DOMAINS];
    uint64_t cursors[REC_MAX_DOMAINS][4]; /* train epoch, train pos, val epoch, val pos */
    uint64_t alpha_records;               /* α records in the chain so far */
    sha256_digest alpha_head;             /* hash of the last α record (zeros if none) */
    /* Written by this version on (has_gen): the config generation the state was computed
     * under (the number of recorded config changes, configs/<n>.mp), and a self-digest
     * ("self": the SHA-256 of every byte before it) that the decoder checks, so that a
     * damaged manifest is recognised on its own. Older manifests have neither. */
    int has_gen;
    uint64_t gen;
    /* Written by this version on (has_run): the run's identity (run_config_identity: the
     * SHA-256 of what RUN pins that decides what the run computes), so that another run's
     * state copied or synced into this store is known as such even where HEAD is lost.
     * Two runs of one config write the same value, so their states still compare byte for
     * byte (`tandem hash`). Older manifests have none. */
    int has_run;
    sha256_digest run;
    /* In the free phase of an episode (has_episode; absent at episode boundaries and in
     * older manifests): what the episode's metrics row needs that the steps after a resume
     * cannot recompute — the probe's losses (loss_u and loss_w are gone once the α step
     * used them; zeros in fixed mode), the sums of the free steps done so far (per-domain
     * loss, gradient norm) and how many they are (free_n). */
    int has_episode;
    double ep_loss_u[REC_MAX_DOMAINS], ep_loss_w[REC_MAX_DOMAINS], ep_free_loss[REC_MAX_DOMAINS];
    double ep_grad;
    uint64_t ep_free_n;
    /* Written by this version on (has_seen): the tokens of each domain u has trained on
     * (steps_state's seen; what data.max_epochs caps). Older manifests have none: a run
     * resumed from one counts from zero. */
    int has_seen;
    double seen[REC_MAX_DOMAINS];
    /* Written with tandem.overfit_cap on (has_val): the overfitting record of steps.h's
     * step_state (val_n probes scored; val_now, val_ema, val_var, val_best, val_best_seen, and
     * overfit as 0 or 1 per domain). */
    int has_val;
    uint64_t val_n;
    double val_now[REC_MAX_DOMAINS], val_ema[REC_MAX_DOMAINS], val_var[REC_MAX_DOMAINS], val_best[REC_MAX_DOMAINS];
    double val_best_seen[REC_MAX_DOMAINS], overfit[REC_MAX_DOMAINS];
    size_t nviews;
    rec_view *views; /* owned */
    size_t ntensors;
    rec_tensor *tensors; /* owned */
} rec_state;

typedef struct rec_alpha {
    uint64_t t;
    int M;
    double alpha[REC_MAX_DOMAINS], alpha_next[REC_MAX_DOMAINS];
    double loss_u[REC_MAX_DOMAINS], loss_w[REC_MAX_DOMAINS];
    double lr_alpha, gamma;
    uint64_t seq; /* run position at which α_{t+1} took effect */
    sha256_digest prev; /* hash of record t-1 (zeros for t = 0) */
    /* as in rec_state (has_gen: a "gen" field in the hashed part and a "self" digest of
     * the whole record after the meta part); older records have neither */
    int has_gen;
    uint64_t gen;
    /* has_seen: the tokens of each domain u had trained on when α_{t+1} was chosen (in the
     * hashed part; older records have none) */
    int has_seen;
    double seen[REC_MAX_DOMAINS];
    /* meta: not hashed */
    double time; /* unix seconds */
    char host[REC_NAME_MAX];
    uint64_t attempt;
} rec_alpha;

/* The room for a lease's late_deletes (about 25 blob keys, more state or α keys). */
#define REC_LATE_DELETES_MAX 2048

typedef struct rec_lease {
    uint64_t epoch;
    char host[REC_NAME_MAX];
    uint64_t pid;
    uint64_t attempt;
    double time;
    int released;
    /* a released lease whose writer gave up on writes that may still land (S3: a request
     * held in a proxy): until this wall time (unix seconds), the next writer and gc count
     * every write as unsettled (store_note_lost_writer). Absent (has_settle 0): none */
    int has_settle;
    double settle_until;
    /* the holder's settle window (seconds: how long a write it gave up on may still land
     * after it was sent, from its own TANDEM_S3_TIMEOUT), written while it holds the lease
     * where there is one (S3): a writer that takes over a killed one's lease, and gc,
     * keep at least that long, not only their own window. Absent (has_window 0): none */
    int has_window;
    double settle_window;
    /* what the holder's pid means (util/pidns.h): the inode of its /proc/self/ns/pid and
     * the boot id of its machine. A reader judges the pid (kill, /proc) only in the same
     * PID namespace on the same boot; elsewhere the holder counts as on another host.
     * Absent (has_pid_ns / has_boot_id 0): an older writer's lease, judged as before */
    int has_pid_ns;
    uint64_t pid_ns;
    int has_boot_id;
    char boot_id[40];
    /* the holder's start in clock ticks since its boot (util/pidns.h pidns_start_ticks):
     * with pid and boot id, the one process that holds the lease, judged without any wall
     * clock (a step of the judge's clock read a live holder as "another process", and gc
     * collected its blobs: a clock hunt). Absent (has_start 0): judged by wall times */
    int has_start;
    uint64_t start_ticks;
    /* a released lease whose writer gave up on DELETEs that may still land until
     * settle_until (S3; a run stopped by a signal does not wait for them): their keys, each
     * followed by '\n', or "*" where it could not name them all. The next writer waits
     * before it writes one of those keys (store_note_late_delete): a run's replay writes
     * again the state or α record such a DELETE set aside. Absent (has_late_deletes 0): none */
    int has_late_deletes;
    char late_deletes[REC_LATE_DELETES_MAX];
} rec_lease;

typedef struct rec_mixture {
    int M;
    char names[REC_MAX_DOMAINS][REC_DOMAIN_MAX];
    double alpha[REC_MAX_DOMAINS];
    uint64_t first, last; /* episodes whose α_{t+1} were averaged, inclusive */
} rec_mixture;

/* A sweep's root (the store its points live under, each in ROOT/<label>): the --sweep
 * texts as given ("key=v1,v2,..."; deploy/sweep.h parses them) and the number of points
 * they make. Written by the first point that starts; what `tandem status ROOT` and
 * `tandem results ROOT` read to find the points. */
#define REC_SWEEP_MAX_KEYS 8
#define REC_SWEEP_TEXT_MAX 4096
typedef struct rec_sweep {
    int n;
    char text[REC_SWEEP_MAX_KEYS][REC_SWEEP_TEXT_MAX];
    uint64_t points;
} rec_sweep;

/* Encoders return a malloc'ed buffer (caller frees) and its size. */
/* -------------------------------------------------------- encoding and decoding */

void *rec_head_encode(const rec_head *h, size_t *n);
void *rec_run_encode(const rec_run *r, size_t *n);
void *rec_change_encode(const rec_change *c, size_t *n);
void *rec_state_encode(const rec_state *s, size_t *n);
void *rec_alpha_encode(const rec_alpha *a, size_t *n);
void *rec_lease_encode(const rec_lease *l, size_t *n);
void *rec_mixture_encode(const rec_mixture *x, size_t *n);
void *rec_sweep_encode(const rec_sweep *w, size_t *n);

/* The format version data[0..n) says it is written in when that is newer than this
 * tandem reads (REC_FORMAT_MAX), else 0. A record that does not decode because a newer tandem
 * wrote it is no damage: the load refuses to go on rather than set it aside (an older
 * binary on a store must not quietly downgrade it) — only where HEAD's hash vouches for
 * the bytes, since a damaged format byte reads the same. */
unsigned long long rec_format_newer(const void *data, size_t n);

/* Decoders fill the record (zeroing it first); on failure nothing needs freeing. */
int rec_head_decode(const void *data, size_t n, const char *what, rec_head *h, tdm_err *e);
int rec_sweep_decode(const void *data, size_t n, const char *what, rec_sweep *w, tdm_err *e);
int rec_run_decode(const void *data, size_t n, const char *what, rec_run *r, tdm_err *e);
int rec_change_decode(const void *data, size_t n, const char *what, rec_change *c, tdm_err *e);
int rec_state_decode(const void *data, size_t n, const char *what, rec_state *s, tdm_err *e);
int rec_alpha_decode(const void *data, size_t n, const char *what, rec_alpha *a, tdm_err *e);
int rec_lease_decode(const void *data, size_t n, const char *what, rec_lease *l, tdm_err *e);
int rec_mixture_decode(const void *data, size_t n, const char *what, rec_mixture *x, tdm_err *e);
/* Whether the stored bytes hold exactly `want` (decoded and compared field by field, α
 * bit for bit): so that a mixture.mp written before the self-digest, which encodes to
 * other bytes, still counts as the same. */
int rec_mixture_same(const void *stored, size_t n, const rec_mixture *want);

/* model.mp: the Hugging Face folder a run of the Llama / Qwen2 family started from
 * (model.init: hf:DIR), pinned by content so that a resume, a replay from the seed or an
 * evaluation cannot silently use another model under the same path. Sealed. */
typedef struct rec_model {
    char init[4096];             /* model.init as pinned ("hf:DIR") */
    sha256_digest config_sha;    /* DIR/config.json */
    sha256_digest weights_sha;   /* the weights: every .safetensors file of DIR and the index, by name */
} rec_model;

void *rec_model_encode(const rec_model *m, size_t *n);
int rec_model_decode(const void *data, size_t n, const char *what, rec_model *m, tdm_err *e);

/* data.mp: the dataset a run started from, pinned by content (runner/data_source.c), so
 * that a resume or a replay cannot silently read other tokens under the same paths (a
 * corpus rebuilt with another seed, two domains' shards swapped). Sealed. */
#define REC_DATA_SPLITS 3 /* train, val, test: the order of data/dataset.h's splits */
typedef struct rec_data {
    int M;
    char domains[REC_MAX_DOMAINS][REC_DOMAIN_MAX];
    /* per domain and split: SHA-256 over its shards' digests in order, each the SHA-256 of
     * the shard's token count (8 bytes, little-endian) and its token bytes as stored */
    sha256_digest sha[REC_MAX_DOMAINS][REC_DATA_SPLITS];
} rec_data;

void *rec_data_encode(const rec_data *d, size_t *n);
int rec_data_decode(const void *data, size_t n, const char *what, rec_data *d, tdm_err *e);

/* diverged.mp: a run that stopped with exit 5 (a loss, gradient or α not finite) says so in
 * its store, written through the ledger's front door (ledger_diverged) before the lease is
 * given back: where (the run position, the episode, the step and its index), the message
 * (which names the key to lower; user info masked), when and where from, and the writer's
 * epoch. The next run that starts from the store removes it (ledger_start): while it is
 * there it is the latest word on the run. Sealed. */
#define REC_DIVERGED_MSG_MAX 1024
typedef struct rec_diverged {
    uint64_t epoch;   /* the writer that diverged */
    uint64_t seq;     /* run position: steps completed before the step that diverged */
    uint64_t episode; /* t of that step */
    char step[16];    /* "probe", "alpha" or "free" */
    uint64_t index;   /* free: the free step's index within the episode (0 otherwise) */
    uint64_t state_seq; /* the last full state that stands (the resume replays from it) */
    char message[REC_DIVERGED_MSG_MAX];
    double time;      /* unix seconds */
    char host[REC_NAME_MAX];
    uint64_t attempt;
} rec_diverged;

void *rec_diverged_encode(const rec_diverged *d, size_t *n);
int rec_diverged_decode(const void *data, size_t n, const char *what, rec_diverged *d, tdm_err *e);

void rec_run_free(rec_run *r);
void rec_change_free(rec_change *c);
void rec_state_free(rec_state *s);

/* SHA-256 of the canonical encoding of an α record without its meta part: the link of
 * the hash chain, and what a replay must reproduce. */
void rec_alpha_hash(const rec_alpha *a, sha256_digest *out);

/* SHA-256 over "key=value\n" lines of a sorted config. */
void rec_config_hash(const rec_kv *kv, size_t n, sha256_digest *out);

#endif
