/* ckpt_impl.h — what the parts of the checkpoint writer share: the ckpt struct and the
 * helpers that cross its files (ckpt.c: open, lease, generations, set-aside;
 * ckpt_commit.c: blobs, commits, snapshots; ckpt_load.c: verified loads, HEAD;
 * ckpt_alpha.c: the α records and their chain). Only ledger/ckpt*.c include it. */
#ifndef TANDEM_LEDGER_CKPT_IMPL_H
#define TANDEM_LEDGER_CKPT_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ledger/ckpt.h"
#include "ledger/records.h"
#include "storage/digest_set.h"
#include "storage/sha256.h"
#include "storage/store.h"

struct ckpt {
    store *st;
    const ckpt_layout *lay; /* &lay_own, or NULL (the lease alone) */
    ckpt_layout lay_own;    /* a copy of the caller's, views included (owned) */
    uint64_t chunk_bytes;
    float *host[CKPT_TENSORS];
    /* the lease and HEAD as this writer last saw them */
    uint64_t epoch;
    int fenced; /* ckpt_check_lease found the lease another writer's (not merely unreadable) */
    const char *reader_verb; /* ckpt_set_reader: a reader's ("evaluate"); NULL: a run's */
    uint64_t commits; /* the run's full commits so far, as HEAD counts them */
    store_version lease_ver, head_ver;
    char host_name[REC_NAME_MAX];
    uint64_t attempt;
    /* DELETEs this writer is about to send that a later writer would write again (a state
     * set aside, states and α records superseded by a change): keys or prefixes, each
     * followed by '\n', or "*". Named in the lease before they are sent, so that a writer
     * taking over from this one killed meanwhile waits until they cannot land
     * (ckpt_announce_deletes); "" once sent */
    char announced[REC_LATE_DELETES_MAX];
    double lease_time; /* when this writer took the lease (its lease's time while held) */
    /* chunks of the last committed or loaded state: known to be stored intact, as far as
     * this writer knows; known_ok[i] == known_gen once this commit saw chunk known.d[i]
     * still there (another process may have deleted it since: ckpt_set_known, put_blob).
     * A set: a list scanned per chunk made each commit quadratic in chunks (a hunt at scale) */
    digest_set known;
    atomic_uint *known_ok;
    unsigned known_gen;
    /* the run's pinned run.seed (has_seed: a writer's; readers do not know it): a state
     * made with another is another run's (ckpt_load passes over it) */
    int has_seed;
    uint64_t seed;
    /* the run's identity (ckpt_set_run; has_run unset where unknown): a state that carries
     * another is another run's (ckpt_load passes over it); legacy_run: the state resumed
     * from carried none (written before identities), so this writer's carry none either
     * and its replays compare byte for byte with what was written then */
    int has_run, legacy_run;
    sha256_digest run;
    /* the writer thread and its one-slot queue */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending, quit;
    int result; /* of the last background write */
    tdm_err result_err;
    atomic_int bg_failed; /* result is a failure, set with it under mu (ckpt_failed's cheap look) */
    rec_state snap; /* scalars of the state being written */
    double last_time;
    uint64_t last_seq;
    /* the config generation this writer computes under and where each change took effect
     * (ckpt_set_generation); legacy: the run began before states and α records carried a
     * generation and a self-digest, so this writer writes none either */
    ckpt_gens gens; /* gens.n: the generation this writer computes under */
    int legacy;
    long keep; /* retention after each commit (ckpt_set_retention); 0 = keep all */
    /* throughput of this writer's last completed commit (bytes it wrote over the seconds
     * the commit took, snapshot to HEAD), for ckpt_commit_estimate; 0 before any */
    double rate;
    double last_seconds; /* how long the last completed commit took, snapshot to HEAD */
    /* the guess before any rate is measured: CKPT_UNMEASURED_RATE, or the test-only
     * TANDEM_TEST_UNMEASURED_RATE (bytes/s) */
    double unmeasured_rate;
    atomic_int cancel; /* ckpt_cancel: the commit in flight stops before its next object */
    double commit_started; /* monotonic time the pending commit began (0: none pending) */
    /* under mu: the monotonic time to which the pending commit waits out a late DELETE
     * (outlast_late_delete; 0: none), and the longest such wait so far (not in its rate) */
    double late_until, late_waited;
    /* the state the last ckpt_load chose, and whether HEAD names it as it is; head_note
     * says what was wrong with HEAD when that is news (empty when HEAD merely lags behind
     * a state whose commit was cut off before HEAD moved) */
    int loaded, head_current;
    int head_at_load; /* head_current as the load found it (ckpt_settle_head moves HEAD) */
    uint64_t loaded_seq;
    char loaded_key[64];
    sha256_digest loaded_sha;
    char head_note[REC_KEY_MAX + 96];
    /* states the last load found unusable although their manifests decode (a chunk
     * missing or corrupt, another layout): not evidence for a replay that reaches them */
    uint64_t *rejected;
    size_t nrejected;
    int seed_replay; /* the load found states but none usable: the run replays from its seed */
    /* the one state past HEAD that a writer's load went past (has_unvouched): its own commit
     * cut off before HEAD moved, which the replay reproduces byte for byte, or another run's
     * copied in, which it replaces (a copy kept aside) */
    int has_unvouched;
    uint64_t unvouched;
    /* streaming (ckpt_open_stream): no host copy of the state; each chunk crosses between
     * the backend's tensors and the store on its own, through a chunk-sized buffer per I/O
     * thread. dev_mu: one transfer at a time (a backend's stream is not shared between
     * threads) */
    int stream;
    ckpt_tensor_io io;
    float *dev[CKPT_TENSORS];
    pthread_mutex_t dev_mu;
    /* ckpt_set_stop_check: asked before each chunk of a streamed commit */
    int (*stop_fn)(void *arg, double seconds_left);
    void *stop_arg;
    atomic_ullong done_bytes; /* of the commit in flight */
    atomic_ullong blobs_created; /* blobs the commit in flight stored that were not there */
    atomic_int given_up;      /* the stop check gave the commit in flight up */
    atomic_int stopped_short; /* the newest commit was given up for a stop (ckpt_stopped_short) */
};

/* "params", "adam_m", "adam_v": the names of the three tensors in a manifest. */
extern const char *const ckpt_tensor_names[CKPT_TENSORS];

/* Clocks: monotonic (durations) and wall (records' timestamps), seconds. */
double ckpt_now_mono(void);
double ckpt_now_wall(void);

/* Streaming: whether the stop check gives the commit in flight up (then sets cancel). */
int ckpt_stream_should_stop(ckpt *c);
/* The chunks of the state just committed or loaded (chunks: n digests, taken over, freed
 * here later), whose blobs a commit need not store again — once it has seen each still
 * there (put_blob). */
void ckpt_set_known(ckpt *c, sha256_digest *chunks, size_t n);
/* Whether a stop came and `seconds_left` more of this commit would outlast its grace (the
 * ledger's stop check; never without a known grace): then sets cancel and given_up, so
 * that the commit is given up — not a failure (ckpt_given_up_ok), the last full state
 * standing. */
int ckpt_stop_outlasts(ckpt *c, double seconds_left);

/* ckpt_gen_belongs for this writer's generation and change position. */
int ckpt_belongs(const ckpt *c, int has_gen, uint64_t gen, uint64_t seq);

/* Waits until no DELETE of key that this process gave up on can land (S3: a request held
 * past TANDEM_S3_TIMEOUT, retried, the first one applied later), before a writer's lease
 * check and its write of key: a blob that came back to the content of one retention
 * deleted, a state manifest or α record set aside and written again by the replay
 * (store_put would wait too, but after the lease check, and without the commit's
 * accounting). The wait counts in ckpt_commit_estimate (a stop's grace decision sees it,
 * and cancels the commit where it does not fit: the last state stands), not in the
 * measured rate; a cancel or the stop check ends it (the commit given up). */
int ckpt_outlast_late_delete(ckpt *c, const char *key, tdm_err *e);
/* The same wait before a record written outside a commit (an α record, a metrics row):
 * a stop whose grace the wait would outlast gives the write up as a requeue (ERR_STORE,
 * store_note_deadline: exit 75), touching no commit in flight. */
int ckpt_outlast_late_delete_record(ckpt *c, const char *key, tdm_err *e);

/* Creates `key` holding data, unless an object is there: then STORE_EXISTS with what is
 * stored in *old (the caller frees it), *on and *ver (ver may be NULL). An object deleted
 * between the put and the read is created after all (0). Other codes as store_put/get.
 * The create-only write of every immutable object (blobs, manifests, alpha records), the
 * caller judging what it finds. */
int ckpt_put_once(ckpt *c, const char *key, const void *data, size_t n, void **old, size_t *on,
                  store_version *ver, tdm_err *e);

/* Keeps a copy of `key` (data, n) under quarantine/<epoch>/ with the reason. */
int ckpt_quarantine(ckpt *c, const char *key, const void *data, size_t n, const char *why,
                    tdm_err *e);


/* Replaces a damaged or stale object: a copy set aside, then a compare-and-swap against
 * `ver` under the lease. */
int ckpt_replace_object(ckpt *c, const char *key, const void *old, size_t on,
                        const store_version *ver, const char *why, const void *data, size_t n,
                        tdm_err *e);

/* ERR_STORE "fenced out": `key` was written under a newer config generation. */
int ckpt_newer_generation(ckpt *c, const char *key, uint64_t gen, tdm_err *e);

/* A replay found an object at `key` (old, on; version ver) that is not what it computed
 * (data, n). Settles the cases that do not depend on the object's kind: damaged (`damage`
 * says how; NULL when it decodes) or written under another config generation (has_gen,
 * gen at run position seq): a newer one fences this writer out, one that does not belong
 * to this run's generations is set aside and replaced. Returns 1 with the outcome in *rc
 * when it settled the case, 0 when the object is intact and belongs (the caller judges
 * the difference: nondeterminism, or a kind-specific reason to replace). */
int ckpt_judge_stored(ckpt *c, const char *key, const void *old, size_t on,
                      const store_version *ver, const char *damage, int has_gen, uint64_t gen,
                      uint64_t seq, const void *data, size_t n, int *rc, tdm_err *e);

/* Moves HEAD to *h (its commits set here: this writer's count + bump) by compare-and-swap
 * against c->head_ver. When HEAD changed since, and the change is an older epoch's (that
 * writer's one commit in flight whose lease check preceded this writer's takeover: HEAD
 * was missing at the takeover, or the stamp was overtaken) and the lease is still ours,
 * goes on from it: its version and count taken, the move tried again. STORE_CONFLICT
 * for any other change (a newer epoch, or a HEAD that does not decode: the caller says
 * fenced out), the lease check's error when the lease is no longer ours, ERR_STORE when
 * older epochs kept moving it or it cannot be read back, else store_put_if's. */
int ckpt_put_head(ckpt *c, rec_head *h, int bump, tdm_err *e);

/* The background writer thread (ckpt_open starts it): one pending commit at a time. */
void *ckpt_writer_main(void *arg);

/* blobs/<hex of d>. */
void ckpt_blob_key(const sha256_digest *d, char key[8 + SHA256_HEX_LEN + 1]);

/* Streaming: len bytes at byte offset off of tensor t between the backend and buf,
 * device to host when `down`. One transfer at a time (dev_mu). */
int ckpt_transfer(ckpt *c, int t, uint64_t off, size_t len, uint8_t *buf, int down, tdm_err *e);

#endif
