/* outfile.c — see outfile.h. */
#include "util/outfile.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/fileio.h"
#include "util/stop_signals.h"
#include "util/urltext.h"

/* ------------------------------------------------------------ the pending temporary */

/* Temporaries a stop signal removes: slot 0 is outfile_guard's (--plot, --out, a
 * TensorBoard file), the others outfile_guard_add's (shards, an export's files), several
 * at once from several threads. Each holds a copy of the name, so that a handler never
 * reads memory its writer has freed; a slot is armed (2) only once its name is whole. */
#define GUARD_SLOTS 32
static char guard_name[GUARD_SLOTS][PATH_MAX];
static atomic_int guard_state[GUARD_SLOTS]; /* 0 free, 1 being filled, 2 armed */

static void outfile_on_signal(int sig) {
    for (int i = 0; i < GUARD_SLOTS; i++)
        if (atomic_load(&guard_state[i]) == 2) unlink(guard_name[i]); /* async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig); /* ends as it would have (unblocked when this handler returns) */
}

static atomic_int guards_enabled;

void outfile_guards_enable(void) { atomic_store(&guards_enabled, 1); }

static void guard_install(void) {
    static atomic_flag installed = ATOMIC_FLAG_INIT;
    /* the tandem command only (main): a process that links the library (a test that
     * writes shards, then forks a run) keeps its signals as it set them */
    if (!atomic_load(&guards_enabled)) return;
    if (!atomic_flag_test_and_set(&installed)) {
        /* every signal that stops a run (Ctrl-\, the batch systems' warnings, a timeout's
         * ALRM, ...): TERM, INT and HUP alone left a temporary behind on the others (a
         * hunt: QUIT left mix.yaml.tmp.<pid>.0, USR2 prep's shard temporaries) */
        const int *sigs = TDM_STOP_SIGNALS;
        for (int i = 0; i < TDM_N_STOP_SIGNALS; i++) {
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

/* Fills claimed slot i with tmp and arms it; -1 (slot freed) when the name is too long. */
static int guard_fill(int i, const char *tmp) {
    size_t n = strlen(tmp);
    if (n >= PATH_MAX) {
        atomic_store(&guard_state[i], 0);
        return -1;
    }
    memcpy(guard_name[i], tmp, n + 1);
    atomic_store(&guard_state[i], 2);
    return i;
}

int outfile_guard_add(const char *tmp) {
    guard_install();
    for (int i = 1; i < GUARD_SLOTS; i++) {
        int free_slot = 0;
        if (atomic_compare_exchange_strong(&guard_state[i], &free_slot, 1)) return guard_fill(i, tmp);
    }
    return -1; /* all taken: this one is swept later as a dead temporary */
}

void outfile_guard_drop(int slot) {
    if (slot >= 1 && slot < GUARD_SLOTS) atomic_store(&guard_state[slot], 0);
}

void outfile_guard(const char *tmp) {
    atomic_store(&guard_state[0], 0);
    if (!tmp) return;
    guard_install();
    atomic_store(&guard_state[0], 1);
    guard_fill(0, tmp);
}

/* ------------------------------------------------------------ streams that keep their errno */

/* stdio sets a stream's error flag but forgets why: a write that failed inside an fprintf
 * (its buffer full) left nothing for the final fflush to fail on, and the reason read as
 * EIO ("Input/output error" for a full disk or a closed stdout). A stream made here writes
 * through a cookie that keeps the errno of its first failed write. */
typedef struct kept_fd {
    int fd, owned; /* owned: closed with the stream */
    int err;       /* the first failed write's errno; 0: none */
} kept_fd;

#define KEPT_STREAMS 16
static struct {
    FILE *f;
    kept_fd *k;
} kept[KEPT_STREAMS];
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

static ssize_t kept_write(void *cookie, const char *buf, size_t n) {
    kept_fd *k = cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(k->fd, buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int err = w < 0 ? errno : EIO;
            __atomic_compare_exchange_n(&k->err, &(int){0}, err, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
            errno = err;
            return -1; /* stdio marks the stream failed; what was left is lost */
        }
        done += (size_t)w;
    }
    return (ssize_t)n;
}

static int kept_close(void *cookie) {
    kept_fd *k = cookie;
    pthread_mutex_lock(&kept_lock);
    for (int i = 0; i < KEPT_STREAMS; i++)
        if (kept[i].k == k) kept[i].f = NULL, kept[i].k = NULL;
    pthread_mutex_unlock(&kept_lock);
    int rc = k->owned ? close(k->fd) : 0;
    int err = errno;
    free(k);
    errno = err;
    return rc;
}

FILE *outfile_fd_stream(int fd, int owned) {
    kept_fd *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->fd = fd, k->owned = owned;
    FILE *f = fopencookie(k, "w", (cookie_io_functions_t){.write = kept_write, .close = kept_close});
    if (!f) {
        free(k);
        return NULL;
    }
    pthread_mutex_lock(&kept_lock);
    for (int i = 0; i < KEPT_STREAMS; i++)
        if (!kept[i].f) {
            kept[i].f = f, kept[i].k = k;
            break;
        }
    pthread_mutex_unlock(&kept_lock); /* all taken: it writes as well, its errno may be EIO */
    return f;
}

/* The first failed write's errno of a stream made by outfile_fd_stream; 0: none or unknown. */
static int kept_error(FILE *f) {
    int err = 0;
    pthread_mutex_lock(&kept_lock);
    for (int i = 0; i < KEPT_STREAMS; i++)
        if (kept[i].f == f) err = __atomic_load_n(&kept[i].k->err, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&kept_lock);
    return err;
}

void outfile_keep_stdout(void) {
    fflush(stdout);
    FILE *f = outfile_fd_stream(STDOUT_FILENO, 0);
    if (!f) return; /* stdout as it was: a failure's reason may read as EIO */
    /* buffered as stdio buffers stdout: by line at a terminal, by block elsewhere */
    setvbuf(f, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, BUFSIZ);
    stdout = f;
}

int outfile_stream_error(FILE *f) {
    errno = 0;
    if (fflush(f) == 0 && !ferror(f)) return 0;
    int err = errno, first = kept_error(f);
    return first ? first : err ? err : EIO;
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

static char **protected_root; /* real paths, for the process's life */
static int nprotected, capprotected;
static int (*owned_fn)(const char *rel);

void outfile_protect(const char *root) {
    char real[PATH_MAX];
    if (!realpath(root, real)) return;
    for (int i = 0; i < nprotected; i++)
        if (!strcmp(protected_root[i], real)) return;
    if (nprotected == capprotected) {
        int cap = capprotected ? 2 * capprotected : 16;
        char **n = realloc(protected_root, (size_t)cap * sizeof *n);
        if (!n) return;
        protected_root = n, capprotected = cap;
    }
    if ((protected_root[nprotected] = strdup(real))) nprotected++;
}

void outfile_set_owned(int (*owned)(const char *rel)) { owned_fn = owned; }

/* Whether directory d (a real path) is a store's root a command did not open: it holds a
 * run's RUN or a study's SWEEP (manifest --out, a store named by another command). */
static int holds_store(const char *d) {
    static const char *const marks[] = {"/RUN", "/SWEEP"};
    size_t n = strcmp(d, "/") ? strlen(d) : 0;
    char f[PATH_MAX + 8];
    if (n >= PATH_MAX) return 0;
    memcpy(f, d, n);
    for (int i = 0; i < 2; i++) {
        struct stat st;
        memcpy(f + n, marks[i], strlen(marks[i]) + 1);
        if (lstat(f, &st) == 0 && S_ISREG(st.st_mode)) return 1;
    }
    return 0;
}

/* Whether directory d (a real path) holds a study's SWEEP. */
static int holds_sweep(const char *d) {
    char f[PATH_MAX + 8];
    size_t n = strcmp(d, "/") ? strlen(d) : 0;
    if (n >= PATH_MAX) return 0;
    memcpy(f, d, n);
    memcpy(f + n, "/SWEEP", 7);
    struct stat st;
    return lstat(f, &st) == 0 && S_ISREG(st.st_mode);
}

/* src into buf (cap bytes), cut if it must be (a message's root): buf. */
static const char *copy_root(char *buf, size_t cap, const char *src) {
    size_t n = strlen(src) < cap - 1 ? strlen(src) : cap - 1;
    memcpy(buf, src, n);
    buf[n] = '\0';
    return buf;
}

/* The store root that real path `p` lies in and owns (the part below it is the store's):
 * a root a command opened (outfile_protect), or any folder above p holding RUN or SWEEP.
 * NULL when none. The root is copied into buf. */
static const char *owned_by_store(const char *p, char *buf, size_t cap) {
    for (int i = 0; owned_fn && i < nprotected; i++) {
        const char *r = protected_root[i];
        size_t n = strlen(r);
        if (n == 1) n = 0; /* a store at / */
        if (strncmp(p, r, n) || p[n] != '/') continue;
        if (owned_fn(p + n + 1)) return copy_root(buf, cap, r);
    }
    char d[PATH_MAX + 8];
    if (strlen(p) >= sizeof d) return NULL;
    memcpy(d, p, strlen(p) + 1);
    for (char *slash; owned_fn && (slash = strrchr(d, '/'));) {
        *slash = '\0';
        const char *dir = slash == d ? "/" : d;
        const char *rel = p + (slash == d ? 1 : strlen(d) + 1);
        if (holds_store(dir) && owned_fn(rel)) return copy_root(buf, cap, dir);
        /* a study's root: its points' stores are named key=value,... (a file written
         * there took a pending point's place, and the study could no longer report) */
        if (holds_sweep(dir) && memchr(rel, '=', strcspn(rel, "/"))) return copy_root(buf, cap, dir);
        if (slash == d) break;
    }
    return NULL;
}

/* outfile_check_target's work, following a link that leads nowhere yet at most `hops` times. */
static int check_target(const char *what, const char *shown, const char *path, int is_dir, int hops, tdm_err *e) {
    if (!*path) return 0;
    /* a link that leads nowhere yet is written through: judged where it leads */
    struct stat lst;
    char real[PATH_MAX];
    if (hops > 0 && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) && !realpath(path, real)) {
        char to[PATH_MAX], target[2 * PATH_MAX + 2];
        ssize_t n = readlink(path, to, sizeof to - 1);
        if (n <= 0) return 0;
        to[n] = '\0';
        const char *slash = strrchr(path, '/');
        if (to[0] == '/' || !slash) snprintf(target, sizeof target, "%s", to);
        else snprintf(target, sizeof target, "%.*s/%s", (int)(slash - path), path, to);
        if (strlen(target) >= PATH_MAX) return 0;
        return check_target(what, shown, target, is_dir, hops - 1, e);
    }
    /* where the path leads (through links): its deepest existing part, resolved, and the
     * rest of it as given, its . and .. taken lexically (folders not there yet hold no
     * links: `make_dirs` creates them as written, so x/../states is states) */
    char p[PATH_MAX], rest[PATH_MAX] = "", probe[PATH_MAX + 8];
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
    /* real + rest, lexically */
    size_t at = strcmp(real, "/") ? strlen(real) : 0;
    memcpy(probe, real, at);
    probe[at] = '\0';
    for (char *save = NULL, *seg = strtok_r(rest, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
        if (!strcmp(seg, ".")) continue;
        if (!strcmp(seg, "..")) {
            char *up = strrchr(probe, '/');
            at = up ? (size_t)(up - probe) : 0;
            probe[at] = '\0';
            continue;
        }
        size_t sl = strlen(seg);
        if (at + 1 + sl + 3 >= sizeof probe) return 0;
        probe[at++] = '/';
        memcpy(probe + at, seg, sl + 1);
        at += sl;
    }
    if (is_dir) memcpy(probe + at, "/x", 3), at += 2;
    if (!at) return 0; /* "/" itself */
    char root[PATH_MAX];
    if (!owned_by_store(probe, root, sizeof root)) return 0;
    return err_set(e, ERR_USAGE, "%s %s is inside the store %s, where it would replace or sit among the store's "
                   "own objects (RUN, HEAD, states/, ...): write it outside the store, or beside them under "
                   "another name", what, shown, root);
}

/* ------------------------------------------------------------ local paths only */

/* Length of the URL scheme that `path` starts with when a '/' or '\\' follows its ':'
 * ("s3://", "s3:/b", "https://", "file:///x", "http:\\h"), else 0. A ':' with anything else
 * after it ("hf:x", "12:00") is no URL. */
static size_t url_scheme_len(const char *path) {
    if (!isalpha((unsigned char)path[0])) return 0;
    size_t n = url_scheme_word_len(path, strlen(path));
    return path[n] == ':' && (path[n + 1] == '/' || path[n + 1] == '\\') ? n : 0;
}

/* Where the authority of the URL whose scheme is `n` bytes long starts (past "scheme:" and
 * its slashes), and through *end where it stops (the next '/' or '\\'). */
static const char *url_authority(const char *path, size_t n, const char **end) {
    const char *a = path + n + 1;
    while (*a == '/' || *a == '\\') a++;
    *end = a + strcspn(a, "/\\");
    return a;
}

/* Whether `path` holds user info in a spelling outfile_path_local refuses. A path with
 * no scheme (nor "word//", a scheme whose ':' was left out) is a local one, where a ':'
 * and an '@' in different segments are a name ("2024-06-01T12:00/data@v2/d.yaml", refused
 * by the URL rule, whose secret may hold '/'); there, user info is "K:S@host" within its
 * first segment. */
static int path_has_userinfo(const char *path) {
    size_t n = url_scheme_len(path), w = url_scheme_word_len(path, strlen(path));
    int slashed = w > 0 && (path[w] == '/' || path[w] == '\\') && (path[w + 1] == '/' || path[w + 1] == '\\');
    if (!n && !slashed) {
        size_t seg = strcspn(path, "/\\");
        const char *colon = memchr(path, ':', seg);
        return colon && memchr(colon, '@', seg - (size_t)(colon - path)) != NULL;
    }
    if (url_text_has_userinfo(path, strlen(path))) return 1;
    if (!n) return 0;
    const char *end, *a = url_authority(path, n, &end);
    return memchr(a, '@', (size_t)(end - a)) != NULL; /* "s3://KEY@bucket": a user alone */
}

int outfile_path_local(const char *path, int output, char *why, size_t n) {
    if (path_has_userinfo(path)) {
        snprintf(why, n, "holds user info (user:secret@ or user@ before a host), which is refused and not "
                         "repeated here: credentials never go into a path, a URL or a config; tandem takes "
                         "them from the environment, a profile or the rest of the credential chain "
                         "(docs/running.md)");
        return 0;
    }
    size_t s = url_scheme_len(path);
    if (!s) return 1;
    int shown = s < 16 ? (int)s : 16;
    if (s == 4 && !strncasecmp(path, "file", 4))
        snprintf(why, n, "a file:// URL is not taken here: name the %s path itself (/data/x, not file:///data/x)",
                 output ? "local" : "file's");
    else if (output)
        snprintf(why, n, "an output path is local; %.*s:// is not supported here: write it locally and copy it "
                         "(aws s3 cp, gsutil cp, ...); a folder really named '%.*s:' is ./%.*s:/...",
                 shown, path, shown, path, shown, path);
    else
        snprintf(why, n, "a local path is read here; %.*s:// is not supported: copy it onto this machine "
                         "first and name that copy", shown, path);
    return 0;
}

void outfile_mask_path(const char *path, char *out, size_t cap) {
    if (!cap) return;
    char first[PATH_MAX];
    url_text_mask_userinfo(path, first, sizeof first);
    snprintf(out, cap, "%s", first);
    size_t n = url_scheme_len(first);
    if (!n) return;
    const char *end, *auth = url_authority(first, n, &end), *at = NULL;
    for (const char *p = auth; p < end; p++)
        if (*p == '@') at = p;
    if (!at || (at - auth == 3 && !strncmp(auth, "***", 3))) return; /* none, or masked already */
    snprintf(out, cap, "%.*s***%s", (int)(auth - first), first, at); /* "s3://KEY@b": "***" for KEY */
}

int outfile_check_local(const char *what, const char *path, tdm_err *e) {
    char why[400], shown[240];
    if (outfile_path_local(path, 1, why, sizeof why)) return 0;
    outfile_mask_path(path, shown, sizeof shown);
    return err_set(e, ERR_USAGE, "%s %s: %s", what, shown, why);
}

int outfile_check_target(const char *what, const char *path, int is_dir, tdm_err *e) {
    /* a URL before anything reads the path as a folder (tfevents_open makes it) */
    if (outfile_check_local(what, path, e)) return e->code;
    if (!owned_fn) return 0;
    return check_target(what, path, path, is_dir, 8, e);
}

/* ------------------------------------------------------------ open and close */

/* A FIFO at `path` opened for writing without waiting for ever: a reader started beside
 * the command (`cat fifo & tandem ... --out fifo`) is given two seconds to open its end;
 * then -1 with errno ENXIO. The descriptor returned blocks again, as a pipe's writer
 * should. */
static int open_fifo(const char *path) {
    for (int waited_ms = 0;; waited_ms += 10) {
        int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            int fl = fcntl(fd, F_GETFL);
            if (fl == -1 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1) {
                int err = errno;
                close(fd);
                errno = err;
                return -1;
            }
            return fd;
        }
        if (errno != ENXIO || waited_ms >= 2000) return -1;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

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
        if (!o->path || !o->given) {
            outfile_close(o, 1, 0, e);
            return err_set(e, ERR_INTERNAL, "out of memory");
        }
        if (exists && S_ISFIFO(st.st_mode)) {
            /* a FIFO (or a pipe: a process substitution) no process reads: open(2) would
             * wait for a reader for ever */
            int fd = open_fifo(path);
            if (fd < 0) {
                int err = errno;
                outfile_close(o, 1, 0, e);
                if (err == ENXIO)
                    return err_set(e, ERR_USAGE, "%s %s is a FIFO that no process reads: start its reader "
                                   "first, or name a regular file", what, outfile_shown(path, shown, sizeof shown));
                return err_sys(e, ERR_USAGE, err, "%s %s: cannot write there", what, outfile_shown(path, shown, sizeof shown));
            }
            if (!(o->f = outfile_fd_stream(fd, 1))) {
                close(fd);
                return outfile_close(o, err_set(e, ERR_INTERNAL, "out of memory"), 0, e);
            }
            return 0;
        }
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666); /* fopen's "w" */
        if (fd < 0) {
            int err = errno;
            outfile_close(o, 1, 0, e);
            return err_sys(e, ERR_USAGE, err, "%s %s: cannot write there", what, outfile_shown(path, shown, sizeof shown));
        }
        if (!(o->f = outfile_fd_stream(fd, 1))) {
            close(fd);
            return outfile_close(o, err_set(e, ERR_INTERNAL, "out of memory"), 0, e);
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
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        snprintf(o->tmp, cap, "%.*s%s%s.tmp.%d.%u", dirlen, o->path, slash ? "/" : "", outfile_stem, (int)getpid(),
                 n++);
        /* guarded before it exists (its name is this process's alone): a stop signal in
         * between removes nothing else (before: one there left the temporary) */
        outfile_guard(o->tmp);
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) outfile_guard(NULL);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int err = errno;
        free(o->tmp), o->tmp = NULL; /* nothing of ours to remove */
        outfile_close(o, 1, 0, e);
        return err_sys(e, ERR_USAGE, err, "%s %s: cannot create a file there", what, outfile_shown(path, shown, sizeof shown));
    }
    o->fd = fd;
    o->f = outfile_fd_stream(fd, 1);
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
            if (fchmod(o->fd, m) != 0) err = errno;
            /* on the disk before it takes its name, and the name after (fileio.h): a power
             * loss after the rename left an empty file under it, a mixture file a run
             * then read (a hunt: export, shards and the store synced, these did not) */
            if (!err && fsync(o->fd) != 0 && errno != EINVAL) err = errno; /* flushed above */
        }
        if (fclose(o->f) != 0 && !err) err = errno ? errno : EIO;
        o->f = NULL;
        if (!rc && err)
            rc = err_sys(e, ERR_USAGE, err, "%s %s: cannot write it", o->what, outfile_shown(o->given ? o->given : "?", shown, sizeof shown));
        if (!rc && o->tmp && rename(o->tmp, o->path) != 0)
            rc = err_sys(e, ERR_USAGE, errno, "%s %s: cannot put it in place", o->what,
                         outfile_shown(o->given ? o->given : "?", shown, sizeof shown));
        if (!rc && o->tmp) (void)fileio_fsync_parent(o->path); /* best effort: it is in place */
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
