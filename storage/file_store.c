/* file_store.c — the file:// store: one directory, one file per key.
 *
 * Durability: every write goes to a temporary file in the key's directory, is fsync'ed,
 * then renamed (or, for create-only, hard-linked: link(2) fails atomically if the key
 * exists) onto the key, and the directory is fsync'ed. A crash at any moment leaves
 * either the old object or the new one, plus at worst a stray ".tmp-*" file that
 * listings ignore. Compare-and-swap holds an exclusive flock on "<root>/.lock" while
 * it compares and renames; versions are the SHA-256 of the content. The lock is held
 * for milliseconds; a holder that keeps it (a process frozen by SIGSTOP, a paused VM)
 * is waited for at most TANDEM_STORE_LOCK_TIMEOUT_S seconds (default 120), saying so
 * after 5, then the write fails naming the holder's pid: a clear error, not a hang.
 *
 * Permissions follow the umask, as git and other Unix tools do: every file the store
 * writes (objects, temporaries, .lock) is 0666 & ~umask, every directory it creates (the
 * root and its missing parents included) 0777 & ~umask — so a team shares a store with
 * umask 007 and a group (docs/running.md); credentials never go into a store.
 *
 * Nothing outside the store is opened for writing or changed: .lock is opened with
 * O_NOFOLLOW, and a write refuses a key whose directories below the root include a
 * symbolic link or something that is not a directory (the root itself may be a link: it
 * is the user's choice of where the store lives). Renames and unlinks act on the entry,
 * never on what a link points to.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/sha256.h"
#include "storage/store_impl.h"
#include "util/args.h"
#include "util/fileio.h"
#include "util/outfile.h"
#include "util/testhook.h"

/* What stands in an object's place and is no regular file (URL, key). */
#define NOT_REGULAR_FMT "%s: %s is not a regular file (a FIFO, device or directory in an object's place: " \
                        "remove it, then tandem verify says what the object held and how to get it back)"

typedef struct file_store {
    char *root;
    unsigned file_mode; /* 0666 & ~umask, read when the store was opened */
    double lock_limit_s; /* TANDEM_STORE_LOCK_TIMEOUT_S, read when the store was opened */
    atomic_int lock_given_up; /* a wait for .lock was given up with a stop pending: the next is not waited */
} file_store;

#define TMP_PREFIX ".tmp-"
/* bytes a store's objects add to its root's path: the longest key the ledger writes
 * (superseded/<n>/alpha/<n>.mp with 20-digit numbers) and a temporary's name beside it */
#define FILE_STORE_KEY_ROOM 160

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

static const char *root_of(store *s) { return ((file_store *)s->impl)->root; }
static unsigned file_mode(store *s) { return ((file_store *)s->impl)->file_mode; }

/* ERR_STORE when a directory of `key` below the root (states/ of states/4.mp, every level
 * of quarantine/3/states/4.mp) is a symbolic link or not a directory: a write there would
 * land outside the store. Missing ones are fine (the write makes them). */
static int key_dirs_plain(store *s, const char *key, tdm_err *e) {
    char *path = join(root_of(s), key);
    if (!path) return err_set(e, ERR_INTERNAL, "out of memory");
    size_t base = strlen(root_of(s)) + 1;
    int r = 0;
    for (char *p = path + base; *p && !r; p++) {
        if (*p != '/') continue;
        *p = '\0';
        struct stat st;
        if (lstat(path, &st) == 0 && (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)))
            r = err_set(e, ERR_STORE,
                        "%s: %s is %s, not a directory of the store: tandem writes nothing outside its "
                        "store (remove it, then run again)",
                        s->url, path, S_ISLNK(st.st_mode) ? "a symbolic link" : "a file");
        *p = '/';
    }
    free(path);
    return r;
}

/* A write that failed for lack of space (ENOSPC, EDQUOT): says what to do, since nothing
 * is lost — the partial temporary is removed and the objects already there stand. */
static int write_failed(store *s, const char *key, int err, tdm_err *e) {
    err_sys(e, ERR_STORE, err, "%s: cannot write %s", s->url, key);
    if (err == ENOSPC || err == EDQUOT)
        err_append(e, " (the store's file system is full: free space or raise the quota, then run "
                      "again; the run resumes from its last full state and nothing committed is lost)");
    return ERR_STORE;
}

/* Writes data to a fresh temporary file next to `path` and fsyncs it; returns the
 * temporary's path (caller frees) or NULL with e set. */
static char *write_temp(store *s, const char *key, const char *path, const void *data, size_t n,
                        tdm_err *e) {
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) : 0;
    size_t len = dirlen + strlen(TMP_PREFIX) + 32;
    char *tmp = malloc(len);
    if (!tmp) {
        err_set(e, ERR_INTERNAL, "out of memory");
        return NULL;
    }
    snprintf(tmp, len, "%.*s/" TMP_PREFIX "XXXXXX", (int)dirlen, path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        if (errno == ENOSPC || errno == EDQUOT) write_failed(s, key, errno, e);
        else err_sys(e, ERR_STORE, errno, "%s: cannot create a temporary file for %s", s->url, key);
        free(tmp);
        return NULL;
    }
    /* mkstemp makes it 0600: the store's files follow the umask (0666 & ~umask) */
    if (fchmod(fd, file_mode(s)) || fileio_write_all(fd, data, n) || fsync(fd)) {
        write_failed(s, key, errno, e);
        close(fd);
        unlink(tmp);
        free(tmp);
        return NULL;
    }
    if (close(fd)) {
        write_failed(s, key, errno, e);
        unlink(tmp);
        free(tmp);
        return NULL;
    }
    return tmp;
}

static int fs_put(store *s, const char *key, const void *data, size_t n, int mode, tdm_err *e) {
    char *path = join(root_of(s), key);
    if (!path) return err_set(e, ERR_INTERNAL, "out of memory");
    int r = key_dirs_plain(s, key, e);
    if (r) goto out;
    if (fileio_make_parents(path)) {
        if (errno == ENOSPC || errno == EDQUOT) r = write_failed(s, key, errno, e);
        else r = err_sys(e, ERR_STORE, errno, "%s: cannot create the directory of %s", s->url, key);
        goto out;
    }
    char *tmp = write_temp(s, key, path, data, n, e);
    if (!tmp) {
        r = e ? e->code : ERR_STORE;
        goto out;
    }
    if (mode == STORE_CREATE) {
        if (link(tmp, path)) {
            int err = errno;
            unlink(tmp);
            free(tmp);
            if (err == EEXIST) r = STORE_EXISTS;
            else r = err_sys(e, ERR_STORE, err, "%s: cannot create %s", s->url, key);
            goto out;
        }
        unlink(tmp);
    } else if (rename(tmp, path)) {
        if (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST) /* a directory there */
            r = err_set(e, ERR_STORE, NOT_REGULAR_FMT, s->url, key);
        else
            r = err_sys(e, ERR_STORE, errno, "%s: cannot replace %s", s->url, key);
        unlink(tmp);
        free(tmp);
        goto out;
    }
    free(tmp);
    if (fileio_fsync_parent(path)) r = err_sys(e, ERR_STORE, errno, "%s: cannot sync the directory of %s", s->url, key);
out:
    free(path);
    return r;
}

/* Reads a whole file. 0, STORE_NOT_FOUND, or ERR_STORE. Opened without blocking, so that
 * a FIFO put in an object's place is refused as what it is instead of waiting for a writer
 * that never comes (O_NONBLOCK changes nothing for the regular files read). */
static int read_file(store *s, const char *key, const char *path, void **data, size_t *n,
                     tdm_err *e) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) return STORE_NOT_FOUND;
        return err_sys(e, ERR_STORE, errno, "%s: cannot open %s", s->url, key);
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(e, ERR_STORE, NOT_REGULAR_FMT, s->url, key);
    }
    if ((uint64_t)st.st_size > STORE_OBJECT_MAX) { /* damage (store.h): said, never read nor replaced */
        close(fd);
        /* one advice for every key (the keys are the ledger's to tell apart): RUN is the
         * exception, it pins the run's configuration and no run resumes without it */
        return err_set(e, ERR_STORE, "%s: %s is %llu bytes, more than any object tandem writes (%llu): it is "
                       "damaged; restore it from a copy, or move it out of the store: a run then goes on "
                       "without it (from an older state, or writing it again); but not without RUN, "
                       "which pins the run's configuration: that one only a copy restores", s->url, key,
                       (unsigned long long)st.st_size, (unsigned long long)STORE_OBJECT_MAX);
    }
    size_t size = (size_t)st.st_size, got = 0;
    char *buf = malloc(size ? size : 1);
    if (!buf) {
        close(fd);
        return err_set(e, ERR_INTERNAL, "%s: out of memory reading %s (%zu bytes)", s->url, key, size);
    }
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int err = r < 0 ? errno : EIO;
            free(buf);
            close(fd);
            return err_sys(e, ERR_STORE, err, "%s: cannot read %s", s->url, key);
        }
        got += (size_t)r;
    }
    close(fd);
    *data = buf;
    *n = size;
    return 0;
}

static void content_version(const void *data, size_t n, store_version *ver) {
    sha256_digest d;
    sha256(data, n, &d);
    sha256_hex(&d, ver->v);
}

static int fs_get(store *s, const char *key, void **data, size_t *n, store_version *ver,
                  tdm_err *e) {
    char *path = join(root_of(s), key);
    if (!path) return err_set(e, ERR_INTERNAL, "out of memory");
    int r = read_file(s, key, path, data, n, e);
    free(path);
    if (r == 0 && ver) content_version(*data, *n, ver);
    return r;
}

/* The pid holding a flock on the file open as fd, from /proc/locks (0 when unknown). */
static long lock_holder(int fd) {
    struct stat st;
    FILE *f = fopen("/proc/locks", "r");
    if (!f || fstat(fd, &st)) {
        if (f) fclose(f);
        return 0;
    }
    char line[256];
    long pid = 0;
    while (!pid && fgets(line, sizeof line, f)) {
        char kind[16], rw[16];
        long p;
        unsigned maj, min;
        unsigned long ino;
        /* "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF" (blocked waiters: "1: -> ...") */
        if (sscanf(line, "%*d: %15s %*s %15s %ld %x:%x:%lu", kind, rw, &p, &maj, &min, &ino) == 6 &&
            !strcmp(kind, "FLOCK") && ino == (unsigned long)st.st_ino && maj == major(st.st_dev) &&
            min == minor(st.st_dev))
            pid = p;
    }
    fclose(f);
    return pid;
}

/* Takes the exclusive lock on fd, waiting at most the lock timeout (see the top). A stop
 * ends the wait as it ends any store request: at the stop's deadline when one is known
 * (store_deadline), else at the timeout, and a later wait while the stop is pending is
 * not waited at all; either is noted as given up at the deadline, so that the run exits
 * 75 — the last full state stands — not 3 (a SIGTERM during the wait was heard only once
 * the lock was free, past the grace period; mid-run it waited the timeout twice and
 * exited 3: hunt). */
static int lock_store(store *s, int fd, tdm_err *e) {
    file_store *fs = s->impl;
    double limit = fs->lock_limit_s;
    struct timespec t0, now, nap = {0, 2 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int said = 0;
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
        if (errno != EWOULDBLOCK && errno != EINTR)
            return err_sys(e, ERR_STORE, errno, "%s: cannot lock the store", s->url);
        clock_gettime(CLOCK_MONOTONIC, &now);
        double waited = (double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9;
        int stop = store_stop_pending();
        if (store_clock_s() >= store_deadline() || (stop && atomic_load(&fs->lock_given_up))) {
            char who[64] = "another process";
            long pid = lock_holder(fd);
            if (pid) snprintf(who, sizeof who, "process %ld", pid);
            store_note_deadline();
            atomic_store(&fs->lock_given_up, 1);
            return err_set(e, ERR_STORE, "%s/.lock is held by %s: given up for the stop (nothing was written)", s->url,
                           who);
        }
        if (waited >= limit) {
            if (stop) store_note_deadline(), atomic_store(&fs->lock_given_up, 1); /* a requeue: see above */
            long pid = lock_holder(fd);
            char who[64] = "another process";
            if (pid) snprintf(who, sizeof who, "process %ld", pid);
            return err_set(e, ERR_STORE,
                           "%s/.lock has been held by %s for %.0f s (TANDEM_STORE_LOCK_TIMEOUT_S): "
                           "a writer frozen (stopped, or its machine paused) in the middle of a "
                           "compare-and-swap. Nothing was written; end that process (or let it go "
                           "on), then run again", s->url, who, waited);
        }
        if (!said && waited >= 5 && limit > 5) {
            char who[64] = "another process"; /* not "another process0" */
            long pid = lock_holder(fd);
            if (pid) snprintf(who, sizeof who, "process %ld", pid);
            fprintf(stderr, "tandem: waiting for %s/.lock, held by %s for 5 s (at most %.0f s)\n", s->url, who, limit);
            said = 1;
        }
        nanosleep(&nap, NULL);
        if (nap.tv_nsec < 50 * 1000 * 1000) nap.tv_nsec *= 2;
    }
}

static int fs_put_if(store *s, const char *key, const void *data, size_t n,
                     const store_version *expected, store_version *out, tdm_err *e) {
    char *lockpath = join(root_of(s), ".lock");
    if (!lockpath) return err_set(e, ERR_INTERNAL, "out of memory");
    /* never through a link: a .lock pointing elsewhere must not be created or changed */
    int fd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    free(lockpath);
    if (fd < 0 && errno == ELOOP)
        return err_set(e, ERR_STORE, "%s: .lock is a symbolic link: tandem opens nothing outside its "
                                     "store for writing (remove the link, then run again)", s->url);
    if (fd < 0 && (errno == EACCES || errno == EROFS || errno == EPERM))
        return err_sys(e, ERR_STORE, errno, "%s: cannot open %s/.lock for writing, which every write takes: the "
                       "store is not writable here (a read-only mount or restore, or another user's files); "
                       "make it writable or copy it somewhere that is (status, verify, eval and export only "
                       "read it)", s->url, root_of(s));
    if (fd < 0) return err_sys(e, ERR_STORE, errno, "%s: cannot open the lock file %s/.lock", s->url, root_of(s));
    struct stat lst;
    if (fstat(fd, &lst) == 0 && !S_ISREG(lst.st_mode)) {
        close(fd);
        return err_set(e, ERR_STORE, "%s: .lock is not a regular file (remove it, then run again)", s->url);
    }
    if (lock_store(s, fd, e)) {
        close(fd);
        return ERR_STORE;
    }
    /* a test freezes a writer here, holding the lock */
    testhook_stop_at("store-lock");
    void *cur = NULL;
    size_t curn = 0;
    store_version curv = {{0}};
    int r = fs_get(s, key, &cur, &curn, &curv, e);
    if (r == STORE_NOT_FOUND) {
        curv.v[0] = '\0';
        r = 0;
    }
    free(cur);
    if (r == 0 && strcmp(curv.v, expected->v) != 0) r = STORE_CONFLICT;
    if (r == 0) r = fs_put(s, key, data, n, STORE_OVERWRITE, e);
    if (r == 0 && out) content_version(data, n, out);
    close(fd); /* releases the lock */
    return r;
}

static int fs_obstacle(store *s, const char *key) {
    char *path = join(root_of(s), key);
    if (!path) return 0;
    struct stat st;
    int r = stat(path, &st);
    int err = errno;
    free(path);
    if (r == 0) return !S_ISREG(st.st_mode);
    return err == ELOOP;
}

static int fs_exists(store *s, const char *key, int *exists, tdm_err *e) {
    char *path = join(root_of(s), key);
    if (!path) return err_set(e, ERR_INTERNAL, "out of memory");
    struct stat st;
    int r = 0;
    if (stat(path, &st) == 0) *exists = S_ISREG(st.st_mode);
    else if (errno == ENOENT || errno == ENOTDIR) *exists = 0;
    else r = err_sys(e, ERR_STORE, errno, "%s: cannot stat %s", s->url, key);
    free(path);
    return r;
}

static int fs_age(store *s, const char *key, double *age_s, tdm_err *e) {
    char *path = join(root_of(s), key);
    if (!path) return err_set(e, ERR_INTERNAL, "out of memory");
    struct stat st;
    int r = 0;
    if (stat(path, &st) != 0) {
        r = errno == ENOENT || errno == ENOTDIR ? STORE_NOT_FOUND
                                                : err_sys(e, ERR_STORE, errno, "%s: cannot stat %s", s->url, key);
    } else if (!S_ISREG(st.st_mode)) {
        r = STORE_NOT_FOUND; /* as store_exists says of it */
    } else {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        double age = (double)(now.tv_sec - st.st_mtim.tv_sec) + (double)(now.tv_nsec - st.st_mtim.tv_nsec) * 1e-9;
        *age_s = age > 0 ? age : 0;
    }
    free(path);
    return r;
}

/* Appends the keys of regular files below root/rel (rel "" = root) that start with
 * prefix, skipping temporaries and the lock file. */
/* The folders being walked, root first: a linked folder that is one of them (a link to
 * "." or to a folder above it) is a loop. */
typedef struct walk_path {
    dev_t dev[64];
    ino_t ino[64];
    int n;
} walk_path;

/* Whether a folder (st) is not to be walked into: a loop (one of the folders being walked:
 * a link to "." or above, a bind mount), past 64 levels, or, when `linked`, a folder that
 * holds the store's root (a link to / or to the store's parent). */
static int walk_loop(store *s, const walk_path *w, const struct stat *st, const char *full, int linked) {
    if (w->n >= 64) return 1;
    for (int i = 0; i < w->n; i++)
        if (w->dev[i] == st->st_dev && w->ino[i] == st->st_ino) return 1;
    if (!linked) return 0;
    char target[PATH_MAX], root[PATH_MAX];
    if (!realpath(full, target) || !realpath(root_of(s), root)) return 1;
    size_t tn = strlen(target);
    return !strcmp(target, "/") || (!strncmp(root, target, tn) && (root[tn] == '/' || !root[tn]));
}

static int walk_in(store *s, const char *rel, const char *prefix, store_list *out, walk_path *w, tdm_err *e);

static int walk(store *s, const char *rel, const char *prefix, store_list *out, tdm_err *e) {
    walk_path w = {.n = 0};
    struct stat st;
    if (stat(root_of(s), &st) == 0) w.dev[0] = st.st_dev, w.ino[0] = st.st_ino, w.n = 1;
    return walk_in(s, rel, prefix, out, &w, e);
}

static int walk_in(store *s, const char *rel, const char *prefix, store_list *out, walk_path *w, tdm_err *e) {
    char *dir = *rel ? join(root_of(s), rel) : strdup(root_of(s));
    if (!dir) return err_set(e, ERR_INTERNAL, "out of memory");
    DIR *d = opendir(dir);
    if (!d) {
        int err = errno;
        free(dir);
        if (err == ENOENT || err == ENOTDIR) return 0;
        return err_sys(e, ERR_STORE, err, "%s: cannot list %s", s->url, *rel ? rel : "/");
    }
    int r = 0;
    struct dirent *ent;
    while (r == 0 && (ent = readdir(d))) {
        const char *name = ent->d_name;
        if (name[0] == '.') continue; /* ".", "..", ".lock", ".tmp-*" */
        char *key = *rel ? join(rel, name) : strdup(name);
        if (!key) {
            r = err_set(e, ERR_INTERNAL, "out of memory");
            break;
        }
        size_t klen = strlen(key), plen = strlen(prefix);
        size_t m = klen < plen ? klen : plen;
        if (strncmp(key, prefix, m) == 0) { /* key is a prefix of prefix or matches it */
            char *full = join(dir, name);
            struct stat st, lst;
            /* a linked folder that loops (a link to "." or to a folder above) or holds the
             * store (a link to /) is not walked into: such links made every listing endless
             * or a walk of the whole file system (verify, gc, a run deaf to SIGTERM). One
             * to a folder elsewhere (states/ on another disk) is walked, as it reads */
            int linked = full && lstat(full, &lst) == 0 && S_ISLNK(lst.st_mode);
            if (full && stat(full, &st) == 0) {
                if (S_ISDIR(st.st_mode) && !walk_loop(s, w, &st, full, linked)) {
                    w->dev[w->n] = st.st_dev, w->ino[w->n] = st.st_ino, w->n++;
                    r = walk_in(s, key, prefix, out, w, e);
                    w->n--;
                }
                else if (S_ISREG(st.st_mode) && klen >= plen && store_key_valid(key) &&
                         store_list_append(out, key))
                    r = err_set(e, ERR_INTERNAL, "out of memory");
            }
            free(full);
        }
        free(key);
    }
    closedir(d);
    free(dir);
    return r;
}

static int fs_list(store *s, const char *prefix, store_list *out, tdm_err *e) {
    return walk(s, "", prefix, out, e);
}

static int fs_del(store *s, const char *key, tdm_err *e) {
    int r = key_dirs_plain(s, key, e); /* a file through a linked directory is not ours */
    if (r) return r;
    char *path = join(root_of(s), key);
    if (!path) return err_set(e, ERR_INTERNAL, "out of memory");
    if (unlink(path)) {
        if (errno == ENOENT || errno == ENOTDIR) r = STORE_NOT_FOUND;
        else r = err_sys(e, ERR_STORE, errno, "%s: cannot delete %s", s->url, key);
    } else if (fileio_fsync_parent(path)) {
        r = err_sys(e, ERR_STORE, errno, "%s: cannot sync the directory of %s", s->url, key);
    }
    free(path);
    return r;
}

static void fs_close(store *s) {
    file_store *fs = s->impl;
    if (fs) free(fs->root);
    free(fs);
}

/* The ".tmp-*" files of writes killed before their rename in root/rel and, depth_left > 0,
 * in its subdirectories, older than min_age_s. A directory that cannot be read is passed
 * over: a store may sit beside things that are not its own (lost+found at a volume root). */
static int sweep_dir(store *s, const char *rel, int depth_left, double min_age_s, size_t *n, uint64_t *bytes,
                     tdm_err *e) {
    char *dir = *rel ? join(root_of(s), rel) : strdup(root_of(s));
    if (!dir) return err_set(e, ERR_INTERNAL, "out of memory");
    DIR *d = opendir(dir);
    free(dir);
    if (!d) return 0;
    int r = 0;
    struct dirent *ent;
    time_t now = time(NULL);
    while (r == 0 && (ent = readdir(d))) {
        const char *name = ent->d_name;
        if (!strcmp(name, ".") || !strcmp(name, "..")) continue;
        char *key = *rel ? join(rel, name) : strdup(name);
        char *full = key ? join(root_of(s), key) : NULL;
        struct stat st;
        if (!full) {
            r = err_set(e, ERR_INTERNAL, "out of memory");
        } else if (lstat(full, &st) == 0) {
            if (S_ISDIR(st.st_mode) && name[0] != '.' && depth_left > 0) {
                r = sweep_dir(s, key, depth_left - 1, min_age_s, n, bytes, e);
            } else if (S_ISREG(st.st_mode) && !strncmp(name, TMP_PREFIX, strlen(TMP_PREFIX)) &&
                       difftime(now, st.st_mtime) >= min_age_s) {
                if (unlink(full) == 0) {
                    (*n)++;
                    *bytes += (uint64_t)st.st_size;
                } else if (errno != ENOENT) {
                    r = err_sys(e, ERR_STORE, errno, "%s: cannot remove the stray %s", s->url, key);
                }
            }
        }
        free(full);
        free(key);
    }
    closedir(d);
    return r;
}

/* The store's own places only: its root's files and the folders its keys live in. */
static int fs_sweep(store *s, double min_age_s, size_t *n, uint64_t *bytes, tdm_err *e) {
    static const char *const own[] = {"blobs", "states", "alpha", "metrics", "configs", "superseded", "quarantine",
                                      "pins"};
    int r = sweep_dir(s, "", 0, min_age_s, n, bytes, e);
    for (size_t i = 0; !r && i < sizeof own / sizeof *own; i++) r = sweep_dir(s, own[i], 8, min_age_s, n, bytes, e);
    return r;
}

static const store_backend file_backend = {
    .scheme = "file",
    .put = fs_put,
    .put_if = fs_put_if,
    .get = fs_get,
    .exists = fs_exists,
    .age = fs_age,
    .obstacle = fs_obstacle,
    .list = fs_list,
    .del = fs_del,
    .sweep = fs_sweep,
    .close = fs_close,
};

/* 1 when directory `root` holds an entry other than ".", "..", ".lock" and temporaries
 * (any of those would be the store's or someone else's content), else 0. */
static int has_content(const char *root) {
    DIR *d = opendir(root);
    if (!d) return errno == ENOENT || errno == ENOTDIR ? 0 : -1; /* -1: unreadable (errno) */
    int found = 0;
    struct dirent *ent;
    while (!found && (ent = readdir(d))) found = ent->d_name[0] != '.';
    closedir(d);
    return found;
}

/* The lock's patience: TANDEM_STORE_LOCK_TIMEOUT_S seconds, 120 when unset. Read strictly
 * (atof read "2m" as 2 s, "abc" as 0: every contended write failed at once; "nan" waited
 * for ever); -1 with e set when it is not a number of seconds in (0, 1e6]. */
static double lock_limit(tdm_err *e) {
    const char *v = getenv("TANDEM_STORE_LOCK_TIMEOUT_S");
    double x = 120;
    if (v && *v && (args_parse_double(v, &x) || !(x > 0) || x > 1e6)) {
        err_set(e, ERR_USAGE, "TANDEM_STORE_LOCK_TIMEOUT_S = '%.60s' is not a number of seconds in (0, 1e6]: "
                "set it to how long a write waits for another process's store lock (default 120), or unset it", v);
        return -1;
    }
    return x;
}

store *file_store_open(const char *url, const char *path, int must_exist, int *absent, tdm_err *e) {
    double limit = lock_limit(e);
    if (limit < 0) return NULL;
    store *s = calloc(1, sizeof *s);
    file_store *fs = calloc(1, sizeof *fs);
    char *root = strdup(path);
    char *u = strdup(url);
    if (!s || !fs || !root || !u) goto oom;
    size_t len = strlen(root);
    while (len > 1 && root[len - 1] == '/') root[--len] = '\0';
    /* the objects' paths under it (superseded/<n>/alpha/<n>.mp, a temporary's name beside
     * one) must fit the system's PATH_MAX too: a root too long for them was pinned, then
     * its first commit failed ("File name too long") after the episodes it had computed */
    if (!must_exist && len + FILE_STORE_KEY_ROOM >= PATH_MAX) { /* (a store being made or written) */
        err_set(e, ERR_USAGE, "store %.80s...: its path is %zu bytes long, and the objects under it need up to %d "
                "more within the system's limit of %d bytes (PATH_MAX): choose a shorter path",
                url, len, FILE_STORE_KEY_ROOM, PATH_MAX);
        goto fail;
    }
    struct stat st;
    if (must_exist) {
        /* nothing is created: a missing or empty directory is no store */
        int err = stat(root, &st) ? errno : 0;
        int content = !err && S_ISDIR(st.st_mode) ? has_content(root) : 0;
        if (content < 0) { /* there, and not to be read: not "no store" */
            err_sys(e, ERR_STORE, errno, "store %s: cannot read the directory %s (check its permissions: "
                    "tandem needs to read and enter it)", url, root);
            goto fail;
        }
        if (err == ENOENT || err == ENOTDIR || (!err && S_ISDIR(st.st_mode) && !content)) {
            if (absent) *absent = 1;
            err_set(e, ERR_STORE, "no store at %s", url);
            goto fail;
        }
        if (err || !S_ISDIR(st.st_mode)) {
            err_sys(e, ERR_STORE, err ? err : ENOTDIR, "store %s: cannot use %s as a directory", url, root);
            goto fail;
        }
    } else {
        /* create the root (and its parents) so a new run needs no preparation */
        char *probe = join(root, "x");
        if (!probe) goto oom;
        int mk = fileio_make_parents(probe);
        free(probe);
        if (mk || stat(root, &st) || !S_ISDIR(st.st_mode)) {
            err_sys(e, ERR_STORE, errno ? errno : ENOTDIR,
                    "store %s: cannot use %s as a directory", url, root);
            goto fail;
        }
    }
    fs->root = root;
    outfile_protect(root); /* no --plot, --svg or --out over its objects */
    fs->file_mode = 0666u & ~fileio_umask();
    fs->lock_limit_s = limit;
    s->b = &file_backend;
    s->url = u;
    s->impl = fs;
    return s;
oom:
    err_set(e, ERR_INTERNAL, "out of memory");
fail:
    free(s);
    free(fs);
    free(root);
    free(u);
    return NULL;
}
