/* outfile.c — see outfile.h. */
#include "util/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fileio.h"

/* ------------------------------------------------------------ the pending temporary */

static const char *volatile outfile_pending;
/* other writers' temporaries (shards, exported files), several at once from several threads */
#define GUARD_SLOTS 32
static _Atomic(const char *) guard_slot[GUARD_SLOTS];

static void outfile_on_signal(int sig) {
    const char *p = outfile_pending;
    if (p) unlink(p); /* async-signal-safe */
    for (int i = 0; i < GUARD_SLOTS; i++)
        if ((p = atomic_load(&guard_slot[i]))) unlink(p);
    signal(sig, SIG_DFL);
    raise(sig); /* ends as it would have (unblocked when this handler returns) */
}

static void guard_install(void);

int outfile_guard_add(const char *tmp) {
    guard_install();
    for (int i = 0; i < GUARD_SLOTS; i++) {
        const char *none = NULL;
        if (atomic_compare_exchange_strong(&guard_slot[i], &none, tmp)) return i;
    }
    return -1; /* all taken: this one is swept later as a dead temporary */
}

void outfile_guard_drop(int slot) {
    if (slot >= 0 && slot < GUARD_SLOTS) atomic_store(&guard_slot[slot], NULL);
}

void outfile_signals_hold(sigset_t *old) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM), sigaddset(&s, SIGINT), sigaddset(&s, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &s, old);
}

void outfile_signals_release(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

static void guard_install(void) {
    static atomic_flag installed = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&installed)) {
        int sigs[] = {SIGTERM, SIGINT, SIGHUP};
        for (int i = 0; i < 3; i++) {
            struct sigaction old, sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = outfile_on_signal;
            sigemptyset(&sa.sa_mask);
            /* a handler of the caller's own (a run's stop signal) or an ignored one
             * (nohup's SIGHUP) stays */
            if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL) sigaction(sigs[i], &sa, NULL);
        }
    }
}

void outfile_guard(const char *tmp) {
    if (tmp) guard_install();
    outfile_pending = tmp;
}

int outfile_stream_error(FILE *f) {
    errno = 0;
    if (fflush(f) == 0 && !ferror(f)) return 0;
    return errno ? errno : EIO;
}

/* ------------------------------------------------------------ messages, names */

/* The path as a message shows it: a very long one (a file name may be 255 bytes, a path
 * 4095) keeps its head and tail, so the reason after it still fits tdm_err's message. */
static const char *outfile_shown(const char *path, char *buf, size_t cap) {
    size_t n = strlen(path);
    if (n < 400) return path;
    snprintf(buf, cap, "%.180s...%s", path, path + n - 180);
    return buf;
}

/* the stem of the temporaries beside `target` (its file name, or .tandem-out when the
 * temporary's name would pass NAME_MAX), for fileio_sweep_dead_temporaries */
static char outfile_stem[NAME_MAX + 1];

static int outfile_ours(const char *name, size_t len) {
    return len == strlen(outfile_stem) && !memcmp(name, outfile_stem, len);
}

/* ------------------------------------------------------------ stores' own paths */

#define OUTFILE_ROOTS 16
static char *protected_root[OUTFILE_ROOTS]; /* real paths, for the process's life */
static int nprotected;
static int (*owned_fn)(const char *rel);

void outfile_protect(const char *root) {
    char real[PATH_MAX];
    if (nprotected >= OUTFILE_ROOTS || !realpath(root, real)) return;
    for (int i = 0; i < nprotected; i++)
        if (!strcmp(protected_root[i], real)) return;
    protected_root[nprotected] = strdup(real);
    if (protected_root[nprotected]) nprotected++;
}

void outfile_set_owned(int (*owned)(const char *rel)) { owned_fn = owned; }

/* The store root that real path `p` lies in and owns (the part below it is the store's),
 * or NULL. */
static const char *owned_by_store(const char *p) {
    for (int i = 0; owned_fn && i < nprotected; i++) {
        const char *r = protected_root[i];
        size_t n = strlen(r);
        if (n == 1) n = 0; /* a store at / */
        if (strncmp(p, r, n) || p[n] != '/') continue;
        if (owned_fn(p + n + 1)) return r;
    }
    return NULL;
}

int outfile_check_target(const char *what, const char *path, int is_dir, tdm_err *e) {
    if (!owned_fn || !nprotected || !*path) return 0;
    /* where the path leads (through links): its deepest existing part, resolved, and the
     * rest of it as given */
    char p[PATH_MAX], real[PATH_MAX], rest[PATH_MAX] = "", probe[PATH_MAX + 8];
    snprintf(p, sizeof p, "%s", path);
    for (;;) {
        if (realpath(p, real)) break;
        char *slash = strrchr(p, '/');
        const char *last = slash ? slash + 1 : p;
        if (*last) {
            char t[2 * PATH_MAX + 2];
            snprintf(t, sizeof t, "%s%s%s", last, *rest ? "/" : "", rest);
            if (strlen(t) >= sizeof rest) return 0; /* no such path can be opened anyway */
            memcpy(rest, t, strlen(t) + 1);
        }
        if (!slash) {
            if (!realpath(".", real)) return 0;
            break;
        }
        if (slash == p) {
            snprintf(real, sizeof real, "/");
            break;
        }
        *slash = '\0';
    }
    /* pieced together with lengths checked (no path that long can be opened anyway) */
    const char *head = strcmp(real, "/") ? real : "", *tail = is_dir ? "/x" : "";
    size_t hl = strlen(head), rl = strlen(rest), tl = strlen(tail);
    if (hl + 1 + rl + tl + 1 > sizeof probe) return 0;
    memcpy(probe, head, hl);
    size_t at = hl;
    if (*rest) probe[at++] = '/', memcpy(probe + at, rest, rl), at += rl;
    memcpy(probe + at, tail, tl + 1);
    if (!*rest && !is_dir && !strcmp(real, "/")) return 0;
    const char *root = owned_by_store(probe);
    if (!root) return 0;
    return err_set(e, ERR_USAGE, "%s %s is inside the store %s, where it would replace or sit among the store's "
                   "own objects (RUN, HEAD, states/, ...): write it outside the store, or beside them under "
                   "another name", what, path, root);
}

/* ------------------------------------------------------------ open and close */

int outfile_open(outfile *o, const char *what, const char *path, tdm_err *e) {
    memset(o, 0, sizeof *o);
    if (!*path) return err_set(e, ERR_USAGE, "%s: an empty path; name the file to write", what);
    if (outfile_check_target(what, path, 0, e)) return e->code;
    o->what = what;
    o->given = strdup(path);
    char shown[400];
    struct stat st, lst;
    int exists = stat(path, &st) == 0;
    if ((exists && !S_ISREG(st.st_mode)) || (!exists && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))) {
        /* a device, a FIFO, /dev/stdout, or a link to where nothing is yet: as fopen */
        o->path = strdup(path);
        o->f = o->path && o->given ? fopen(path, "w") : NULL;
        if (!o->f) {
            int err = o->path && o->given ? errno : ENOMEM;
            outfile_close(o, 1, 0, e);
            return err_sys(e, ERR_USAGE, err, "%s %s: cannot write there", what, outfile_shown(path, shown, sizeof shown));
        }
        return 0;
    }
    /* a regular file replaced: the one a link names, keeping its permission bits */
    o->path = exists ? realpath(path, NULL) : strdup(path);
    if (exists) o->mode = st.st_mode & 07777;
    size_t cap = (o->path ? strlen(o->path) : 0) + NAME_MAX + 48;
    o->tmp = malloc(cap);
    if (!o->path || !o->tmp || !o->given) {
        outfile_close(o, 1, 0, e);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    const char *slash = strrchr(o->path, '/');
    const char *base = slash ? slash + 1 : o->path;
    int dirlen = slash ? (int)(slash - o->path) : 0;
    snprintf(outfile_stem, sizeof outfile_stem, "%s", strlen(base) + 24 > NAME_MAX ? ".tandem-out" : base);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", slash ? (dirlen ? dirlen : 1) : 1, slash ? o->path : ".");
    fileio_sweep_dead_temporaries(dir, outfile_ours, 60); /* killed writers' */
    static unsigned n;
    int fd = -1;
    /* no stop signal between the temporary's creation and its guard (one there ended the
     * process by default and left the temporary) */
    sigset_t held;
    outfile_signals_hold(&held);
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        snprintf(o->tmp, cap, "%.*s%s%s.tmp.%d.%u", dirlen, o->path, slash ? "/" : "", outfile_stem, (int)getpid(),
                 n++);
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    int open_err = errno;
    if (fd >= 0) outfile_guard(o->tmp);
    outfile_signals_release(&held);
    errno = open_err;
    if (fd < 0) {
        int err = errno;
        free(o->tmp), o->tmp = NULL; /* nothing of ours to remove */
        outfile_close(o, 1, 0, e);
        return err_sys(e, ERR_USAGE, err, "%s %s: cannot create a file there", what, outfile_shown(path, shown, sizeof shown));
    }
    o->f = fdopen(fd, "w");
    if (!o->f) {
        close(fd);
        return outfile_close(o, err_set(e, ERR_INTERNAL, "out of memory"), 0, e);
    }
    return 0;
}

int outfile_close(outfile *o, int rc, unsigned mode, tdm_err *e) {
    char shown[400];
    if (o->f) {
        int err = outfile_stream_error(o->f);
        if (!err && o->tmp) {
            unsigned m = mode ? mode : o->mode ? o->mode : 0666u & ~fileio_umask();
            if (fchmod(fileno(o->f), m) != 0) err = errno;
        }
        if (fclose(o->f) != 0 && !err) err = errno ? errno : EIO;
        o->f = NULL;
        if (!rc && err)
            rc = err_sys(e, ERR_USAGE, err, "%s %s: cannot write it", o->what, outfile_shown(o->given ? o->given : "?", shown, sizeof shown));
        if (!rc && o->tmp && rename(o->tmp, o->path) != 0)
            rc = err_sys(e, ERR_USAGE, errno, "%s %s: cannot put it in place", o->what,
                         outfile_shown(o->given ? o->given : "?", shown, sizeof shown));
    }
    if (o->tmp) {
        if (rc) unlink(o->tmp);
        outfile_guard(NULL);
    }
    free(o->tmp);
    free(o->path);
    free(o->given);
    o->tmp = o->path = o->given = NULL;
    return rc;
}
