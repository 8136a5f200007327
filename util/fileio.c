/* fileio.c — durable-write primitives; see fileio.h. */
#include "util/fileio.h"

#include "util/buf.h"

#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fileio_write_all(int fd, const void *data, size_t n) {
    const unsigned char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int fileio_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    if (rc != 0 && err == EINVAL) return 0;
    errno = err;
    return rc;
}

int fileio_fsync_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return fileio_fsync_dir(".");
    char *dir = strndup(path, slash == path ? 1 : (size_t)(slash - path));
    if (!dir) return -1;
    int rc = fileio_fsync_dir(dir);
    int err = errno;
    free(dir);
    errno = err;
    return rc;
}

/* mkdir -p of everything before path's last '/', with `mode`; `exact`: chmod each new
 * directory to `mode` so that the umask has no say. */
static int make_parents(char *path, mode_t mode, int exact) {
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        int rc = mkdir(path, mode);
        int err = errno;
        if (rc == 0 && exact && chmod(path, mode)) rc = -1, err = errno;
        if (rc == 0) {
            fileio_fsync_parent(path); /* the new entry must survive a crash */
        } else if (err != EEXIST) {
            *p = '/';
            errno = err;
            return -1;
        }
        *p = '/';
    }
    return 0;
}

int fileio_make_parents(char *path) { return make_parents(path, 0777, 0); }

unsigned fileio_umask(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned um = 0;
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) found = sscanf(line, "Umask: %o", &um) == 1;
    if (f) fclose(f);
    if (found) return um & 0777;
    mode_t old = umask(022); /* Linux before 4.7: no Umask line */
    umask(old);
    return (unsigned)old & 0777;
}

int fileio_make_parents_mode(char *path, unsigned mode) { return make_parents(path, (mode_t)mode, 1); }

int fileio_open_regular(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    struct stat st = {0};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int err = S_ISREG(st.st_mode) ? errno : EINVAL;
        close(fd);
        errno = err;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

const char *fileio_strerror(int err) {
    return err == EINVAL ? "not a regular file (a FIFO, a device or a directory?)" : strerror(err);
}

int fileio_read_all(const char *path, buf_t *out, size_t max) {
    int fd = fileio_open_regular(path);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        int err = errno;
        if (fd >= 0) close(fd);
        errno = err;
        return -1;
    }
    char chunk[65536];
    size_t k, total = 0;
    int rc = 0;
    while (!rc && (k = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if ((total += k) > max) errno = EFBIG, rc = -1;
        else buf_putn(out, chunk, k);
    }
    if (!rc && ferror(f)) rc = -1;
    fclose(f);
    if (!rc && out->oom) errno = ENOMEM, rc = -1;
    return rc;
}

/* The PID of a temporary's name (NAME.tmp.PID.N or NAME.tmp-PID), or 0 when it is none;
 * *stem gets the length of NAME. */
static long temporary_pid(const char *name, size_t *stem) {
    const char *dot = NULL, *dash = NULL;
    for (const char *p = strstr(name, ".tmp"); p; p = strstr(p + 1, ".tmp")) {
        if (p[4] == '.') dot = p + 5;
        if (p[4] == '-') dash = p + 5;
    }
    const char *at = dot ? dot : dash;
    if (!at || !*at) return 0;
    *stem = (size_t)(at - 5 - name);
    char *end;
    long pid = strtol(at, &end, 10);
    if (end == at || pid <= 0) return 0;
    if (dot && at == dot) { /* .N after the PID, digits to the end */
        if (*end != '.' || !end[1]) return 0;
        for (const char *q = end + 1; *q; q++)
            if (*q < '0' || *q > '9') return 0;
        return pid;
    }
    return *end ? 0 : pid;
}

size_t fileio_sweep_dead_temporaries(const char *dir, int (*ours)(const char *name, size_t len),
                                     double min_age_s) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t removed = 0;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t stem = 0;
        long pid = temporary_pid(de->d_name, &stem);
        if (pid <= 0 || pid == (long)getpid() || !ours(de->d_name, stem)) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to judge */
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        if (difftime(now, st.st_mtime) < min_age_s) continue;
        if (unlinkat(dirfd(d), de->d_name, 0) == 0) removed++;
    }
    closedir(d);
    return removed;
}

int fileio_existing_ancestor(const char *path, char *out) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    for (;;) {
        if (realpath(p, out)) return 1;
        char *slash = strrchr(p, '/');
        if (!slash) return realpath(".", out) != NULL;
        if (slash == p) return realpath("/", out) != NULL;
        *slash = '\0';
    }
}
