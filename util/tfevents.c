/* tfevents.c — TensorBoard event files; see tfevents.h. */
#include "util/tfevents.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/fileio.h"
#include "util/outfile.h"

struct tfevents {
    int fd;          /* -1: none */
    buf_t pend;      /* records made and not yet written: a row's, written by one write() */
    off_t size;      /* bytes in the file: whole records only */
    char path[4200]; /* its name */
    char tmp[4200];  /* a whole file's name until it is closed; "" for a live one */
};

/* CRC-32C (Castagnoli, reflected 0x82f63b78) by bytes; built once for all threads. */
static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_table_build(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t tfevents_crc32c(const void *data, size_t n) {
    pthread_once(&crc_once, crc_table_build);
    const unsigned char *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t tfevents_masked_crc(const void *data, size_t n) {
    uint32_t c = tfevents_crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* protocol buffer pieces */
static void varint(buf_t *b, uint64_t v) {
    while (v >= 0x80) {
        buf_putc(b, (char)(v | 0x80));
        v >>= 7;
    }
    buf_putc(b, (char)v);
}
static void le(buf_t *b, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) buf_putc(b, (char)(v >> (8 * i)));
}
static void field_bytes(buf_t *b, int field, const void *data, size_t n) {
    varint(b, (uint64_t)field << 3 | 2);
    varint(b, n);
    buf_putn(b, data, n);
}

/* Event{wall_time, step} with either file_version or the summary bytes. */
static int record(tfevents *w, double wall, int64_t step, const char *version, const buf_t *summary,
                  tdm_err *e) {
    buf_t ev = {0};
    uint64_t bits;
    memcpy(&bits, &wall, sizeof bits);
    varint(&ev, 1 << 3 | 1); /* wall_time: fixed64 */
    le(&ev, bits, 8);
    varint(&ev, 2 << 3 | 0); /* step: varint (two's complement for a negative) */
    varint(&ev, (uint64_t)step);
    if (version) field_bytes(&ev, 3, version, strlen(version));
    if (summary) field_bytes(&ev, 5, summary->p ? summary->p : "", summary->n);
    if (ev.oom) {
        buf_free(&ev);
        return err_set(e, ERR_INTERNAL, "out of memory for an event");
    }
    unsigned char head[12];
    uint64_t n = ev.n;
    for (int i = 0; i < 8; i++) head[i] = (unsigned char)(n >> (8 * i));
    uint32_t hc = tfevents_masked_crc(head, 8), dc = tfevents_masked_crc(ev.p, ev.n);
    for (int i = 0; i < 4; i++) head[8 + i] = (unsigned char)(hc >> (8 * i));
    unsigned char tail[4];
    for (int i = 0; i < 4; i++) tail[i] = (unsigned char)(dc >> (8 * i));
    buf_putn(&w->pend, (const char *)head, 12);
    buf_putn(&w->pend, ev.p, ev.n);
    buf_putn(&w->pend, (const char *)tail, 4);
    buf_free(&ev);
    if (w->pend.oom) {
        buf_free(&w->pend);
        return err_set(e, ERR_INTERNAL, "out of memory for an event");
    }
    return 0;
}

/* mkdir -p */
static int make_dirs(const char *dir, tdm_err *e) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return err_set(e, ERR_USAGE, "the TensorBoard directory's path is too long (%zu bytes)", strlen(dir));
    for (char *s = p + 1;; s++) {
        if (*s == '/' || !*s) {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST)
                return err_sys(e, ERR_USAGE, errno, "cannot create the TensorBoard directory %s", p);
            if (!c) break;
            *s = c;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return err_set(e, ERR_USAGE, "%s is not a directory (TensorBoard log directory)", dir);
    return 0;
}

/* fileio_sweep_dead_temporaries: the temporaries of whole files are ours */
static int tb_temporary(const char *name, size_t len) { return len == 10 && !memcmp(name, ".tandem-tb", 10); }

tfevents *tfevents_open(const char *dir, int whole, tdm_err *e) {
    if (!dir || !*dir) {
        err_set(e, ERR_USAGE, "no TensorBoard directory given");
        return NULL;
    }
    if (outfile_check_target("the TensorBoard directory", dir, 1, e) || make_dirs(dir, e)) return NULL;
    tfevents *w = calloc(1, sizeof *w);
    if (!w) {
        err_set(e, ERR_INTERNAL, "out of memory");
        return NULL;
    }
    w->fd = -1;
    char host[256] = "localhost";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    for (char *h = host; *h; h++)
        if (*h == '/') *h = '_';
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%lld.%s.%d%s", dir, (long long)ts.tv_sec,
             host, (int)getpid(), whole ? TFEVENTS_EXPORT_MARK : "");
    if (whole) { /* a name TensorBoard does not read ('tfevents' in it would be) */
        fileio_sweep_dead_temporaries(dir, tb_temporary, 60); /* killed writers' */
        static unsigned n; /* another writer of the same pid (another PID namespace) keeps its file */
        for (int tries = 0; w->fd < 0 && tries < 100; tries++) {
            snprintf(w->tmp, sizeof w->tmp, "%s/.tandem-tb.tmp.%d.%u", dir, (int)getpid(), n++);
            w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (w->fd < 0 && errno != EEXIST) break;
        }
    } else {
        /* never append to another writer's file; a name taken (an earlier life of this
         * process's pid in the same second: a container's PID 1 restarted at once) gives
         * NAME.1, NAME.2, ... as a whole file's does */
        size_t len = strlen(w->path);
        w->fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        for (int k = 1; w->fd < 0 && errno == EEXIST && k < 1000 && len + 5 < sizeof w->path; k++) {
            snprintf(w->path + len, sizeof w->path - len, ".%d", k);
            w->fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        }
    }
    if (w->fd < 0) {
        err_sys(e, ERR_USAGE, errno, "cannot create %s", whole ? w->tmp : w->path);
        free(w);
        return NULL;
    }
    if (whole) outfile_guard(w->tmp);
    if (record(w, (double)ts.tv_sec + ts.tv_nsec * 1e-9, 0, "brain.Event:2", NULL, e) ||
        tfevents_flush(w, e)) {
        tfevents_close(w, 0, NULL);
        return NULL;
    }
    return w;
}

int tfevents_scalar(tfevents *w, const char *tag, int64_t step, double wall_time, double value,
                    tdm_err *e) {
    buf_t v = {0}, s = {0};
    field_bytes(&v, 1, tag, strlen(tag));
    float f = (float)value;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    varint(&v, 2 << 3 | 5); /* simple_value: fixed32 */
    le(&v, bits, 4);
    field_bytes(&s, 1, v.p, v.n); /* Summary.value */
    int rc = v.oom || s.oom ? err_set(e, ERR_INTERNAL, "out of memory for an event")
                            : record(w, wall_time, step, NULL, &s, e);
    buf_free(&v);
    buf_free(&s);
    return rc;
}

/* Writes what is pending with one write() (a kill leaves all of it or none; a short
 * write's rest follows), so the file holds whole records only: a write that fails partway
 * (a full disk) is cut back to the last whole one and what was pending is dropped. */
int tfevents_flush(tfevents *w, tdm_err *e) {
    int err = w->pend.oom ? ENOMEM : 0;
    size_t done = 0;
    while (!err && done < w->pend.n) {
        ssize_t k = write(w->fd, w->pend.p + done, w->pend.n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) err = k < 0 ? errno : EIO;
        else done += (size_t)k;
    }
    if (err && done && ftruncate(w->fd, w->size) == 0) lseek(w->fd, w->size, SEEK_SET);
    else if (!err) w->size += (off_t)done;
    w->pend.n = 0;
    w->pend.oom = 0;
    return err ? err_sys(e, ERR_USAGE, err, "cannot write %s", w->path) : 0;
}

const char *tfevents_path(const tfevents *w) { return w->path; }

int tfevents_close(tfevents *w, int keep, tdm_err *e) { return tfevents_close_named(w, keep, NULL, 0, e); }

int tfevents_close_named(tfevents *w, int keep, char *name, size_t cap, tdm_err *e) {
    if (name && cap) name[0] = '\0';
    if (!w) return 0;
    int rc = 0;
    if (w->fd >= 0) {
        tdm_err fe;
        int err = w->pend.n || w->pend.oom ? tfevents_flush(w, &fe) : 0;
        if (close(w->fd) != 0 && !err) err = ERR_USAGE, err_sys(&fe, ERR_USAGE, errno, "cannot write %s", w->path);
        if (err && keep && e) *e = fe, rc = ERR_USAGE;
    }
    buf_free(&w->pend);
    if (w->tmp[0]) {
        /* put in place without replacing: another writer (another PID namespace, the same
         * pid and second) may have taken the name; then NAME.1, NAME.2, ... */
        size_t len = strlen(w->path);
        for (int k = 1; !rc && keep && link(w->tmp, w->path) != 0; k++) {
            if (errno == EPERM || errno == ENOTSUP || errno == EOPNOTSUPP) { /* no hard links here */
                if (rename(w->tmp, w->path) != 0)
                    rc = e ? err_sys(e, ERR_USAGE, errno, "cannot put %s in place", w->path) : ERR_USAGE;
                break;
            }
            if (errno != EEXIST || k > 99 || len + 4 >= sizeof w->path) {
                rc = e ? err_sys(e, ERR_USAGE, errno, "cannot put %s in place", w->path) : ERR_USAGE;
                break;
            }
            snprintf(w->path + len, sizeof w->path - len, ".%d", k);
        }
        if (!rc && keep) unlink(w->tmp); /* linked: the temporary's name goes */
        if (!rc && keep && name && cap) snprintf(name, cap, "%s", w->path);
        if (rc || !keep) unlink(w->tmp);
        outfile_guard(NULL);
    }
    free(w);
    return rc;
}

/* An event file's name (TensorBoard reads a file whose name holds "tfevents"), and one of
 * an export's. */
static int event_file(const char *name) { return strstr(name, "tfevents") != NULL; }
static int export_file(const char *name) {
    /* the mark at the end (".tandem-export", or ".tandem-export.<k>" of a taken name): a
     * live log ends in ".<pid>" or ".<pid>.<k>", whatever its host is called (a pod named
     * tandem-export-... holds the mark in the middle: its live log is no export) */
    if (strncmp(name, "events.out.tfevents.", 20) != 0) return 0;
    size_t n = strlen(name), m = strlen(TFEVENTS_EXPORT_MARK);
    while (n > 0 && name[n - 1] >= '0' && name[n - 1] <= '9') n--;
    if (n < strlen(name) && n > 0 && name[n - 1] == '.') n--; /* ".<k>" */
    else n = strlen(name);
    /* and right after the writer's pid, as tfevents_open names it (a host "x.tandem-export"
     * has its name there, not digits) */
    return n >= m + 21 && !strncmp(name + n - m, TFEVENTS_EXPORT_MARK, m) && name[n - m - 1] >= '0' &&
           name[n - m - 1] <= '9';
}

int tfevents_export_check(const char *dir, tdm_err *e) {
    DIR *d = opendir(dir);
    if (!d) return 0; /* missing: made by tfevents_open; another failure: said there */
    int rc = 0;
    for (struct dirent *de; !rc && (de = readdir(d));)
        if (event_file(de->d_name) && !export_file(de->d_name))
            rc = err_set(e, ERR_USAGE, "%s already holds the event file %s (a run's live log, or another "
                         "writer's): the whole history beside it would show every scalar twice; write it "
                         "into an empty directory (or one of earlier exports, which it replaces)",
                         dir, de->d_name);
    closedir(d);
    return rc;
}

int tfevents_export_sweep(const char *dir, const char *keep) {
    const char *base = strrchr(keep, '/');
    base = base ? base + 1 : keep;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    char path[4200];
    for (struct dirent *de; (de = readdir(d));) {
        if (!export_file(de->d_name) || !strcmp(de->d_name, base)) continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) < (int)sizeof path && unlink(path) == 0) n++;
    }
    closedir(d);
    return n;
}
