/* store.h — the object store interface (DESIGN.md §5).
 *
 * A run lives under one store URL: `file:///path/run` (or a plain path) or, later,
 * `s3://bucket/prefix`. Objects are named by keys such as "HEAD", "states/12.mp",
 * "blobs/<sha256>": relative, '/'-separated, characters [A-Za-z0-9._-/], no "." or ".."
 * segments. The store knows nothing of models: it moves bytes, and offers the two
 * conditional writes the commit protocol needs — create-only and compare-and-swap.
 *
 * Return values: 0 on success; the negative STORE_* outcomes below when the condition
 * they name holds (not errors: callers decide); ERR_* (util/err.h) on failure, with
 * the message naming the store URL and key.
 */
#ifndef TANDEM_STORAGE_STORE_H
#define TANDEM_STORAGE_STORE_H

#include <stddef.h>

#include "storage/sha256.h"
#include "util/err.h"

enum {
    STORE_NOT_FOUND = -1, /* get/delete/put_if: the key does not exist */
    STORE_EXISTS = -2,    /* put with STORE_CREATE: the key already exists */
    STORE_CONFLICT = -3,  /* put_if: the object changed since `expected` was read */
    STORE_CORRUPT = -4,   /* get_verified: the content does not hash to what was expected */
};

/* Put modes. */
enum { STORE_OVERWRITE = 0, STORE_CREATE = 1 };

/* The largest object tandem writes is a tensor chunk (checkpoint.chunk_kib: 64 MiB at most);
 * records are kilobytes, data.mp a few hundred bytes a shard, a state manifest ~34 bytes a
 * chunk. store_put refuses more (a manifest of very many small chunks: raise chunk_kib); an
 * object past it in the store is damage (a file grown or replaced by something else): the
 * file store says so (ERR_STORE, naming it and what to do) instead of allocating its size
 * (1 TiB: every command ended "out of memory", exit 1) or replacing it; S3 stops its GET at
 * the same bound. */
#define STORE_OBJECT_MAX ((uint64_t)256 << 20)

/* An object version token for compare-and-swap: opaque text (an ETag on S3, the content's
 * SHA-256 on the file store). An empty token means "the key does not exist". */
#define STORE_VERSION_MAX 128
typedef struct store_version {
    char v[STORE_VERSION_MAX];
} store_version;

typedef struct store store;

/* A list of keys, sorted bytewise; free with store_list_free. */
typedef struct store_list {
    char **keys;
    size_t n;
} store_list;

/* Opens the store at `url`; creates the root if missing (file store). NULL with e set
 * (ERR_USAGE for a malformed URL, ERR_STORE when unreachable). Only `tandem run` (and
 * what creates a run) opens stores this way. */
store *store_open(const char *url, tdm_err *e);

/* Flags of store_open_existing. */
enum { STORE_OPEN_WRITABLE = 0, STORE_OPEN_READ_ONLY = 1 };

/* Opens the store at `url` only if it is there, creating nothing: a file store's root
 * must be a directory holding at least one entry, an S3 store's prefix at least one
 * object. A missing store is ERR_STORE "no store at URL" (with what to do); a malformed
 * URL ERR_USAGE. With STORE_OPEN_READ_ONLY every write or delete through the handle is
 * refused (ERR_INTERNAL): the commands that only read open stores this way. */
store *store_open_existing(const char *url, int flags, tdm_err *e);
/* store_open_existing, and *absent 1 where it failed because nothing is there. */
store *store_open_present(const char *url, int flags, int *absent, tdm_err *e);
void store_close(store *s);
const char *store_url(const store *s);

/* Writes `n` bytes at `key` atomically: readers see the old object or the new one,
 * never a part; the write is durable when this returns 0. STORE_CREATE fails with
 * STORE_EXISTS (nothing written) when the key exists. */
int store_put(store *s, const char *key, const void *data, size_t n, int mode, tdm_err *e);
/* store_put without its wait for a DELETE of key given up on: for a put-back that must
 * stand at once (gc's, ledger/retain.c), which waits afterwards and puts back again. */
int store_put_now(store *s, const char *key, const void *data, size_t n, int mode, tdm_err *e);

/* Replaces `key` only if its current version is `expected` (an empty version: only if
 * absent). STORE_CONFLICT otherwise. On success `out` (may be NULL) gets the new version. */
int store_put_if(store *s, const char *key, const void *data, size_t n,
                 const store_version *expected, store_version *out, tdm_err *e);

/* Reads a whole object into a malloc'ed buffer the caller frees; `ver` (may be NULL)
 * gets its version. STORE_NOT_FOUND when absent. */
int store_get(store *s, const char *key, void **data, size_t *n, store_version *ver, tdm_err *e);

/* Like store_get, for content-addressed objects: the content must hash to `expect`
 * (SHA-256), else STORE_CORRUPT and nothing is returned. Backends that already verify a
 * transfer against the same hash do not hash twice. */
int store_get_verified(store *s, const char *key, const sha256_digest *expect, void **data,
                       size_t *n, tdm_err *e);

/* One read of store_get_many: key in; data (malloc'd, the caller frees; NULL unless rc is
 * 0), n, rc (store_get's return: 0, STORE_NOT_FOUND or an error) and err (where rc is an
 * error) out. */
typedef struct store_got {
    const char *key;
    void *data;
    size_t n;
    int rc;
    tdm_err err;
} store_got;

/* The most reads store_get_many has in flight. */
#define STORE_GET_THREADS 8

/* store_get of each of items[0..n), up to STORE_GET_THREADS at once (storage/store_many.c):
 * each item gets its own result, whatever the others' are; in what order the reads reach
 * the store is not defined. For many small objects (records) on an object store, where
 * each read is a round trip. */
void store_get_many(store *s, store_got *items, size_t n);

/* Sets *exists to 1 or 0. */
int store_exists(store *s, const char *key, int *exists, tdm_err *e);

/* How long ago key was last written, on the store's own clock where it keeps one: S3's
 * answer's Date less the object's Last-Modified (both the server's, whole seconds), the
 * file store's clock of this machine less the file's mtime. A time that one writer's
 * machine stamped into a record (a released lease's settle_until, a holder's last sign of
 * life) is judged by this instead of against another machine's clock (a clock hunt: a skew
 * of 90 s between hosts erased the settle window, and a state was lost). 0 with *age_s
 * (>= 0) set; STORE_NOT_FOUND; 1 when the store cannot say (an answer without those
 * headers); ERR_* on failure. */
int store_age(store *s, const char *key, double *age_s, tdm_err *e);

/* Keys that start with `prefix` (may be ""), sorted. */
int store_list_prefix(store *s, const char *prefix, store_list *out, tdm_err *e);
void store_list_free(store_list *l);

/* Removes a key; STORE_NOT_FOUND when absent (S3 does not always say: it may be 0). */
int store_delete(store *s, const char *key, tdm_err *e);

/* Removes what writes killed midway left behind and nothing lists (a file store's
 * ".tmp-*" files), when older than min_age_s seconds: a younger one may be a live write
 * on its way. *n and *bytes say how many and how large; 0 of both where the backend
 * leaves none (S3: an interrupted PUT leaves nothing). Refused on a read-only store. */
int store_sweep_temporaries(store *s, double min_age_s, size_t *n, uint64_t *bytes, tdm_err *e);

/* 0 while a write of `key` that this process gave up on without an answer (a timeout or
 * a reset on S3) may still be applied by the server, else 1. Retention keeps a state
 * whose manifest such a write may still create: deleted first, it would come back
 * without its blobs (a request held past the client's time limit lands late). */
int store_write_settled(store *s, const char *key);

/* The same for a DELETE of `key` alone: the seconds until none this process gave up on
 * can land (0: none can). A commit that stores a blob under such a key (a chunk that came
 * back to content an earlier state had, whose blob retention deleted) must not rely on it
 * until then. */
double store_delete_unsettled_s(store *s, const char *key);

/* Waits until no DELETE of `key` (NULL: of any key) that this process gave up on can land
 * (store_delete_unsettled_s reaches 0), polling every 200 ms. Before each sleep it calls
 * each_round(ctx, left) where given: a non-zero answer gives the wait up and is returned
 * (a commit's cancel or stop check, a stop's deadline). 0 once settled, at once where
 * nothing was pending. The one wait behind store_put's, a writer's
 * (ckpt_outlast_late_delete), gc's put-back and store_settle_own_deletes. */
int store_wait_delete_settled(store *s, const char *key, int (*each_round)(void *ctx, double left), void *ctx);

/* The wait before a write of `key`: where a DELETE of it that this process gave up on may
 * still land, says so on stderr ("waiting until it cannot (N s), then writing it") and
 * waits as store_wait_delete_settled does, each_round deciding when to give up. 0 at once
 * where nothing is pending. The one front door of store_put's wait and a run writer's
 * (ckpt_outlast_late_delete: its own round, before its lease check). */
int store_outlast_delete(store *s, const char *key, int (*each_round)(void *ctx, double left), void *ctx);

/* Waits until no DELETE that this process gave up on, of any key, can land, saying so on
 * stderr (who: the command, for the message). For a process about to end, or to give its
 * lease back, after deleting objects: a later process that writes one of those keys again
 * (a run's replay of a state or α record repair or gc removed, a blob of the same content)
 * would lose it to the late DELETE, found by a race hunt on S3. Not while a stop is
 * pending (store_set_stop_check, or a finite store_deadline), and a stop that comes while it
 * waits ends the wait: a run stopping within its grace does not wait. store_close does it too. */
void store_settle_own_deletes(store *s, const char *who);

/* The seconds until no write of any key that this process gave up on (or that
 * store_note_lost_writer counts) can still land; 0: none can. A writer that releases its
 * lease says so in it (rec_lease's settle_until), for the next writer and gc. */
double store_unsettled_s(store *s);

/* 1 when something that is no object stands in key's place (the file store: a directory,
 * FIFO, device or a link that leads nowhere it can read — what a read calls "not a regular
 * file" or a link loop): not damage a run can heal by going back, but an obstacle its
 * writes would meet too, for the user to remove. 0 otherwise, and where objects are only
 * objects (S3). */
int store_obstacle(store *s, const char *key);

/* The longest a write given up on may still land after it was sent (S3: a minute plus
 * twice TANDEM_S3_TIMEOUT); 0 where writes land when they return (the file store). gc
 * keeps that long after a killed writer's last sign of life. */
double store_settle_window_s(store *s);

/* Says that another process wrote to this store and a write it gave up on may still land:
 * for_s <= 0, it ended without releasing its lease (killed) and cannot say which or when,
 * so every write counts as unsettled (store_write_settled) for as long as one of this
 * process's own would, counted from this call (a writer that takes over the lease,
 * ckpt_acquire); for_s > 0, for that many seconds (what a released lease or a recent kill
 * says, ckpt_acquire and gc). DELETEs are not covered here (a killed writer's retention
 * deletes blobs of old states, whose content a resumed run does not write again; a
 * released lease names its DELETEs: store_note_late_delete). No-op where
 * writes land when they return (the file store). */
void store_note_lost_writer(store *s, double for_s);

/* The DELETEs this process gave up on that may still land: their keys, each followed by
 * '\n', into out (cap bytes, always terminated), or "*" where they cannot all be named
 * (more than out holds, or some unknown); the seconds until none can land. 0 and "" when
 * none can (and always on the file store). A writer that releases its lease names them in
 * it (rec_lease's late_deletes), so that the next writer waits before writing one of
 * those keys again: a run stopped by a signal does not wait for them itself. */
double store_unsettled_delete_keys(store *s, char *out, size_t cap);

/* Says that another process gave up on a DELETE of `key` (ending in '/': of every key
 * under it; NULL: of any key) that may still land for for_s seconds: a write of that key
 * waits until it cannot (store_put), as for this process's own (ckpt_acquire, from the
 * lease the previous writer released) — but this process's end does not wait for it
 * (store_settle_own_deletes), and its own lease passes it on. No-op on the file store. */
void store_note_late_delete(store *s, const char *key, double for_s);

/* The longest key, in bytes. */
#define STORE_KEY_MAX 512

/* 1 if `key` is a well-formed key (see above), else 0. */
int store_key_valid(const char *key);

/* A stop's deadline: the CLOCK_MONOTONIC time (seconds) by which every store request must
 * have ended, asked before each attempt and while one is in flight; INFINITY for none.
 * `tandem run` gives one for after a stop signal (what is left of the grace period), so
 * that an endpoint that stops answering cannot hold the process until SIGKILL: requests
 * still unanswered then are given up (a store error naming the deadline; the last full
 * state stands) and the run exits 75. Set once, before any store is opened; NULL: none.
 * Backends whose requests cannot hang on a network (the file store) do not ask. */
typedef double (*store_deadline_fn)(void);
void store_set_deadline(store_deadline_fn fn);
/* fn() (INFINITY when none is set) and the monotonic clock it is measured on. */
double store_deadline(void);
double store_clock_s(void);
/* Whether a stop is pending (a run's stop signal), for the waits that a stop must not
 * hold up even where no deadline is known (store_settle_own_deletes): set once, before
 * any store is opened; NULL: never. */
void store_set_stop_check(int (*pending)(void));
/* That check's answer now (0 where none is set). */
int store_stop_pending(void);
/* A backend gave a request up at the deadline (store_note_deadline); whether any was
 * (a run's store error after a stop is a requeue only then, not for any store error). */
void store_note_deadline(void);
int store_gave_up_at_deadline(void);

#endif
