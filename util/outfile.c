/* outfile.c — see outfile.h. */
#include "util/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fileio.h"

static const char *volatile outfile_pending;

static void outfile_on_signal(int sig) {
    const char *p = outfile_pending;
    if (p) unlink(p); /* async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig); /* ends as it would have (unblocked when this handler returns) */
}

void outfile_guard(const char *tmp) {
    static int installed;
    if (tmp && !installed) {
        installed = 1;
        int sigs[] = {SIGTERM, SIGINT, SIGHUP};
        for (int i = 0; i < 3; i++) {
            struct sigaction old, sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = outfile_on_signal;
            sigemptyset(&sa.sa_mask);
            /* a handler of the caller's own (a run's stop signal) stays */
            if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL) sigaction(sigs[i], &sa, NULL);
        }
    }
    outfile_pending = tmp;
}

/* The path as a message shows it: a very long one (a file name may be 255 bytes, a path
 * 4095) keeps its head and tail, so the reason after it still fits tdm_err's message. */
static const char *outfile_shown(const char *path, char *buf, size_t cap) {
    size_t n = strlen(path);
    if (n < 400) return path;
    snprintf(buf, cap, "%.180s...%s", path, path + n - 180);
    return buf;
}

int outfile_open(outfile *o, const char *what, const char *path, tdm_err *e) {
    memset(o, 0, sizeof *o);
    o->what = what;
    o->path = strdup(path);
    size_t cap = strlen(path) + 48;
    o->tmp = malloc(cap);
    if (!o->path || !o->tmp) {
        outfile_close(o, 1, 0, e);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    static unsigned n;
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        snprintf(o->tmp, cap, "%s.tmp.%d.%u", path, (int)getpid(), n++);
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int err = errno;
        char shown[400];
        free(o->tmp), o->tmp = NULL; /* nothing of ours to remove */
        outfile_close(o, 1, 0, e);
        return err_sys(e, ERR_USAGE, err, "%s %s: cannot create a file there", what,
                       outfile_shown(path, shown, sizeof shown));
    }
    outfile_guard(o->tmp);
    o->f = fdopen(fd, "w");
    if (!o->f) {
        close(fd);
        return outfile_close(o, err_set(e, ERR_INTERNAL, "out of memory"), 0, e);
    }
    return 0;
}

int outfile_close(outfile *o, int rc, unsigned mode, tdm_err *e) {
    if (o->f) {
        int fd = fileno(o->f);
        unsigned m = mode ? mode : 0666u & ~fileio_umask();
        errno = 0;
        int bad = fflush(o->f) != 0 || ferror(o->f);
        int err = errno ? errno : EIO;
        if (!rc && !bad && fchmod(fd, m) != 0) bad = 1, err = errno;
        if (fclose(o->f) != 0 && !bad) bad = 1, err = errno;
        o->f = NULL;
        char shown[400];
        if (!rc && bad)
            rc = err_sys(e, ERR_USAGE, err, "%s %s: cannot write it", o->what,
                         outfile_shown(o->path, shown, sizeof shown));
        if (!rc && rename(o->tmp, o->path) != 0)
            rc = err_sys(e, ERR_USAGE, errno, "%s %s: cannot put it in place", o->what,
                         outfile_shown(o->path, shown, sizeof shown));
    }
    if (o->tmp && (rc || !o->path)) unlink(o->tmp);
    if (o->tmp) outfile_guard(NULL);
    free(o->tmp);
    free(o->path);
    o->tmp = o->path = NULL;
    return rc;
}
