/* shard.c — reading (mmap + validation) and atomic writing of llm.c token shards. */
#include "data/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fileio.h"
#include "util/outfile.h"

/* Tokens are used in place from the mapping, which is only right on a little-endian host
 * (every machine tandem targets). */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "data/shard.c reads little-endian shards in place; port it before building here"
#endif

static int32_t read_le32(const unsigned char *p) {
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    int32_t r;
    memcpy(&r, &v, sizeof r);
    return r;
}

static void write_le32(unsigned char *p, int32_t x) {
    uint32_t v;
    memcpy(&v, &x, sizeof v);
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

/* Bytes per token of a (magic, version); 0 for a format this reader does not know. */
static unsigned token_bytes(int32_t magic, int32_t version) {
    if (magic == SHARD_MAGIC)
        return version == SHARD_VERSION ? 2 : version == SHARD_VERSION_ALT_U32 ? 4 : 0;
    return magic == SHARD_MAGIC_U32 && version == SHARD_VERSION_U32 ? 4 : 0;
}

/* Checks the mapped header against the file size and sets *width; the count must account
 * for every byte so that truncation and appended garbage are both caught. */
static int check_header(const char *path, const unsigned char *map, uint64_t size,
                        unsigned *width_out, tdm_err *e) {
    int32_t magic = read_le32(map), version = read_le32(map + 4), count = read_le32(map + 8);
    if (magic != SHARD_MAGIC && magic != SHARD_MAGIC_U32)
        return err_set(e, ERR_USAGE,
                       "%s: bad magic %d (expected %d or %d): not an llm.c token shard", path,
                       magic, SHARD_MAGIC, SHARD_MAGIC_U32);
    unsigned width = token_bytes(magic, version);
    if (!width)
        return err_set(e, ERR_USAGE,
                       "%s: shard version %d is not supported with magic %d (magic %d: version "
                       "1, uint16 tokens, or 2, uint32; magic %d: version %d, uint32); rewrite "
                       "the shard in one of them",
                       path, version, magic, SHARD_MAGIC, SHARD_MAGIC_U32, SHARD_VERSION_U32);
    if (count < 0)
        return err_set(e, ERR_USAGE, "%s: header has a negative token count %d", path, count);
    uint64_t want = SHARD_HEADER_BYTES + width * (uint64_t)count;
    if (size < want)
        return err_set(e, ERR_USAGE,
                       "%s: header announces %d tokens (%llu bytes) but the file has %llu "
                       "bytes: truncated; rewrite the shard",
                       path, count, (unsigned long long)want, (unsigned long long)size);
    if (size > want)
        return err_set(e, ERR_USAGE,
                       "%s: %llu trailing bytes after the %d tokens the header announces; "
                       "the shard is corrupt or was appended to",
                       path, (unsigned long long)(size - want), count);
    *width_out = width;
    return 0;
}

/* Index of the first token >= vocab, or n when every token is below it. */
static size_t first_bad16(const uint16_t *tok, size_t n, uint32_t vocab) {
    if (vocab > 65535) return n; /* every uint16 is below it */
    for (size_t i = 0; i < n; i++)
        if (tok[i] >= vocab) return i;
    return n;
}

static size_t first_bad32(const uint32_t *tok, size_t n, uint32_t vocab) {
    for (size_t i = 0; i < n; i++)
        if (tok[i] >= vocab) return i;
    return n;
}

int shard_open(shard *s, const char *path, int vocab, tdm_err *e) {
    memset(s, 0, sizeof *s);
    if (vocab < 1 || vocab > SHARD_VOCAB_MAX)
        return err_set(e, ERR_USAGE, "%s: vocab %d is outside 1..%d", path, vocab, SHARD_VOCAB_MAX);
    int fd = fileio_open_regular(path); /* a FIFO would block open() for ever */
    if (fd < 0) return err_set(e, ERR_USAGE, "%s: cannot open shard: %s", path, fileio_strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int rc = err_sys(e, ERR_USAGE, errno, "%s: cannot stat shard", path);
        close(fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(e, ERR_USAGE, "%s: not a regular file", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < SHARD_HEADER_BYTES) {
        close(fd);
        return err_set(e, ERR_USAGE,
                       "%s: %llu bytes is shorter than the %d-byte shard header: truncated or "
                       "not a shard",
                       path, (unsigned long long)size, SHARD_HEADER_BYTES);
    }
    if (size > SIZE_MAX) {
        close(fd);
        return err_set(e, ERR_USAGE, "%s: too large to map on this machine", path);
    }
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    int map_errno = errno;
    close(fd); /* the mapping keeps the file alive */
    if (map == MAP_FAILED && map_errno == ENOMEM) {
        /* with memory to spare: the kernel's cap on a process's mappings (one per shard),
         * reached by tens of thousands of shards — "Cannot allocate memory" said nothing of
         * it (hunt: 66,000 small shards, 290 MB in use) */
        long cap = -1;
        FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
        if (f && fscanf(f, "%ld", &cap) != 1) cap = -1;
        if (f) fclose(f);
        struct rlimit as;
        char limit[96] = "";
        if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
            snprintf(limit, sizeof limit, " (the address-space limit, ulimit -v, is %llu MiB)",
                     (unsigned long long)(as.rlim_cur >> 20));
        return err_set(e, ERR_USAGE, "%s: cannot map the shard's %llu MiB: out of address space%s or of mappings — "
                       "a process may hold at most vm.max_map_count of them (%ld here), one per shard: write fewer, "
                       "larger shards (tandem prep --shard-tokens), list each file once, or raise those limits",
                       path, (unsigned long long)(size >> 20), limit, cap);
    }
    if (map == MAP_FAILED) return err_sys(e, ERR_USAGE, map_errno, "%s: cannot mmap shard", path);
    unsigned width = 0;
    int rc = check_header(path, map, size, &width, e);
    if (rc) {
        munmap(map, (size_t)size);
        return rc;
    }
    const void *body = (const unsigned char *)map + SHARD_HEADER_BYTES;
    size_t n = (size_t)((size - SHARD_HEADER_BYTES) / width);
    size_t bad = width == 2 ? first_bad16(body, n, (uint32_t)vocab)
                            : first_bad32(body, n, (uint32_t)vocab);
    if (bad < n) {
        uint32_t t = width == 2 ? ((const uint16_t *)body)[bad] : ((const uint32_t *)body)[bad];
        rc = err_set(e, ERR_USAGE,
                     "%s: token %lu at position %zu is >= vocab %d (shard made for another "
                     "tokenizer? fix the dataset's vocab)",
                     path, (unsigned long)t, bad, vocab);
        munmap(map, (size_t)size);
        return rc;
    }
    s->path = strdup(path);
    if (!s->path) {
        munmap(map, (size_t)size);
        return err_set(e, ERR_INTERNAL, "%s: out of memory", path);
    }
    s->width = (int)width;
    if (width == 2) s->tok = body;
    else s->tok32 = body;
    s->n = n;
    s->map = map;
    s->map_len = (size_t)size;
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    s->vocab = (uint32_t)vocab;
    return 0;
}

void shard_close(shard *s) {
    if (!s) return;
    if (s->map) munmap(s->map, s->map_len);
    free(s->path);
    memset(s, 0, sizeof *s);
}

/* fsync of the directory makes the rename itself durable. */
static int sync_dir_of(const char *path, tdm_err *e) {
    if (fileio_fsync_parent(path) != 0)
        return err_sys(e, ERR_INTERNAL, errno, "%s: cannot fsync its directory", path);
    return 0;
}

/* An atomic write in progress: the temporary file beside `path` (tmp, fd). */
typedef struct atomic_file {
    char *tmp;
    int fd;
    int guard; /* outfile_guard_add's slot: a stop signal removes the temporary */
} atomic_file;

/* Creates the temporary file. A unique name (pid + counter) opened with O_EXCL instead of
 * mkstemp, so the file gets the usual 0666 & ~umask mode rather than mkstemp's 0600. */
static int atomic_begin(const char *path, atomic_file *f, tdm_err *e) {
    static atomic_uint counter;
    size_t tlen = strlen(path) + 48;
    f->fd = -1;
    f->guard = -1;
    f->tmp = malloc(tlen);
    if (!f->tmp) return err_set(e, ERR_INTERNAL, "%s: out of memory", path);
    /* a SIGTERM or SIGINT (prep, gen-corpus and export keep the default) removes it, as
     * for --plot and --out files: guarded before it is created (outfile.h says why) */
    for (int tries = 0; tries < 100 && f->fd < 0; tries++) {
        snprintf(f->tmp, tlen, "%s.tmp.%ld.%u", path, (long)getpid(),
                 atomic_fetch_add(&counter, 1));
        f->guard = outfile_guard_add(f->tmp);
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        int err = errno;
        if (f->fd < 0) outfile_guard_drop(f->guard), f->guard = -1;
        errno = err;
        if (f->fd < 0 && errno != EEXIST) break;
    }
    if (f->fd < 0) {
        int rc = err_sys(e, ERR_USAGE, errno, "%s: cannot create temporary file %s", path, f->tmp);
        free(f->tmp);
        f->tmp = NULL;
        return rc;
    }
    return 0;
}

static int atomic_append(const char *path, atomic_file *f, const void *p, size_t len, tdm_err *e) {
    if (fileio_write_all(f->fd, p, len) != 0)
        return err_sys(e, ERR_INTERNAL, errno, "%s: cannot write %s", path, f->tmp);
    return 0;
}

/* Ends the write: when rc is 0 fsyncs, closes and renames the temporary file over `path`
 * and fsyncs the directory; otherwise (or when any of that fails) removes it. Returns the
 * first error. */
static int atomic_end(const char *path, atomic_file *f, int rc, tdm_err *e) {
    if (!rc && fsync(f->fd) != 0)
        rc = err_sys(e, ERR_INTERNAL, errno, "%s: cannot fsync %s", path, f->tmp);
    if (close(f->fd) != 0 && !rc)
        rc = err_sys(e, ERR_INTERNAL, errno, "%s: cannot close %s", path, f->tmp);
    if (!rc && rename(f->tmp, path) != 0)
        rc = err_sys(e, ERR_USAGE, errno, "%s: cannot rename %s over it", path, f->tmp);
    if (rc) unlink(f->tmp);
    outfile_guard_drop(f->guard);
    f->guard = -1;
    free(f->tmp);
    f->tmp = NULL;
    f->fd = -1;
    if (rc) return rc;
    return sync_dir_of(path, e);
}

int shard_atomic_write(const char *path, const void *head, size_t head_len, const void *body,
                       size_t body_len, tdm_err *e) {
    atomic_file f;
    int rc = atomic_begin(path, &f, e);
    if (rc) return rc;
    rc = atomic_append(path, &f, head, head_len, e);
    if (!rc) rc = atomic_append(path, &f, body, body_len, e);
    return atomic_end(path, &f, rc, e);
}

/* The header of a shard of n tokens of `width` bytes, in llm.c's format for that width. */
static void make_header(unsigned char header[SHARD_HEADER_BYTES], int width, size_t n) {
    memset(header, 0, SHARD_HEADER_BYTES);
    write_le32(header, width == 2 ? SHARD_MAGIC : SHARD_MAGIC_U32);
    write_le32(header + 4, width == 2 ? SHARD_VERSION : SHARD_VERSION_U32);
    write_le32(header + 8, (int32_t)n);
}

static int check_count(const char *path, size_t n, tdm_err *e) {
    if (n > SHARD_MAX_TOKENS)
        return err_set(e, ERR_USAGE,
                       "%s: %zu tokens exceed the %u a shard's int32 count can hold; split "
                       "into more shards",
                       path, n, SHARD_MAX_TOKENS);
    return 0;
}

int shard_write(const char *path, const uint16_t *tok, size_t n, tdm_err *e) {
    int rc = check_count(path, n, e);
    if (rc) return rc;
    unsigned char header[SHARD_HEADER_BYTES];
    make_header(header, 2, n);
    return shard_atomic_write(path, header, sizeof header, tok, n * sizeof *tok, e);
}

int shard_width_for(int vocab) {
    return vocab <= 65536 ? 2 : 4;
}

int shard_copy(const shard *s, size_t off, size_t n, uint32_t *out, tdm_err *e) {
    if (s->tok32) {
        memcpy(out, s->tok32 + off, n * sizeof *out);
    } else {
        const uint16_t *in = s->tok + off;
        for (size_t i = 0; i < n; i++) out[i] = in[i];
    }
    uint32_t most = 0;
    for (size_t i = 0; i < n; i++) most = out[i] > most ? out[i] : most;
    if (most < s->vocab) return 0;
    size_t at = 0;
    while (out[at] < s->vocab) at++;
    return err_set(e, ERR_USAGE, "%s: token %lu at position %zu is >= vocab %lu, though every token was "
                   "below it when the run opened the file: the shard was rewritten while the run read it "
                   "(write new shards elsewhere and swap them in between runs; a run refuses a swapped "
                   "shard at start)", s->path, (unsigned long)out[at], off + at, (unsigned long)s->vocab);
}

int shard_write_tokens(const char *path, const uint32_t *tok, size_t n, int vocab, tdm_err *e) {
    if (vocab < 1 || vocab > SHARD_VOCAB_MAX)
        return err_set(e, ERR_USAGE, "%s: vocab %d is outside 1..%d", path, vocab, SHARD_VOCAB_MAX);
    int rc = check_count(path, n, e);
    if (rc) return rc;
    size_t bad = first_bad32(tok, n, (uint32_t)vocab);
    if (bad < n)
        return err_set(e, ERR_USAGE,
                       "%s: token %lu at position %zu is >= vocab %d; nothing written", path,
                       (unsigned long)tok[bad], bad, vocab);
    int width = shard_width_for(vocab);
    unsigned char header[SHARD_HEADER_BYTES];
    make_header(header, width, n);
    if (width == 4) return shard_atomic_write(path, header, sizeof header, tok, n * sizeof *tok, e);
    /* uint16: narrowed through a small buffer rather than a uint16 copy of the shard */
    atomic_file f;
    if ((rc = atomic_begin(path, &f, e))) return rc;
    rc = atomic_append(path, &f, header, sizeof header, e);
    uint16_t buf[4096];
    for (size_t i = 0; i < n && !rc;) {
        size_t k = n - i < 4096 ? n - i : 4096;
        for (size_t j = 0; j < k; j++) buf[j] = (uint16_t)tok[i + j];
        rc = atomic_append(path, &f, buf, k * sizeof *buf, e);
        i += k;
    }
    return atomic_end(path, &f, rc, e);
}
