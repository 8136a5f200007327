/* shard.c — reading (mmap + validation) and atomic writing of llm.c token shards. */
#include "data/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fileio.h"

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

/* Checks the mapped header against the file size; the count must account for every byte
 * so that truncation and appended garbage are both caught. */
static int check_header(const char *path, const unsigned char *map, uint64_t size, tdm_err *e) {
    int32_t magic = read_le32(map), version = read_le32(map + 4), count = read_le32(map + 8);
    if (magic != SHARD_MAGIC)
        return err_set(e, ERR_USAGE, "%s: bad magic %d (expected %d): not an llm.c token shard",
                       path, magic, SHARD_MAGIC);
    if (version != SHARD_VERSION)
        return err_set(e, ERR_USAGE,
                       "%s: shard version %d is not supported (expected %d, uint16 tokens; "
                       "version 2 is llm.c's uint32 format, re-export with uint16 tokens)",
                       path, version, SHARD_VERSION);
    if (count < 0)
        return err_set(e, ERR_USAGE, "%s: header has a negative token count %d", path, count);
    uint64_t want = SHARD_HEADER_BYTES + 2 * (uint64_t)count;
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
    return 0;
}

int shard_open(shard *s, const char *path, int vocab, tdm_err *e) {
    memset(s, 0, sizeof *s);
    if (vocab < 1 || vocab > 65536)
        return err_set(e, ERR_USAGE, "%s: vocab %d is outside 1..65536", path, vocab);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_sys(e, ERR_USAGE, errno, "%s: cannot open shard", path);
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
    if (map == MAP_FAILED) return err_sys(e, ERR_USAGE, map_errno, "%s: cannot mmap shard", path);
    int rc = check_header(path, map, size, e);
    if (rc) {
        munmap(map, (size_t)size);
        return rc;
    }
    const uint16_t *tok = (const uint16_t *)((const unsigned char *)map + SHARD_HEADER_BYTES);
    size_t n = (size_t)((size - SHARD_HEADER_BYTES) / 2);
    if (vocab < 65536) {
        for (size_t i = 0; i < n; i++) {
            if (tok[i] >= vocab) {
                rc = err_set(e, ERR_USAGE,
                             "%s: token %u at position %zu is >= vocab %d (shard made for "
                             "another tokenizer? fix the dataset's vocab)",
                             path, tok[i], i, vocab);
                munmap(map, (size_t)size);
                return rc;
            }
        }
    }
    s->path = strdup(path);
    if (!s->path) {
        munmap(map, (size_t)size);
        return err_set(e, ERR_INTERNAL, "%s: out of memory", path);
    }
    s->tok = tok;
    s->n = n;
    s->map = map;
    s->map_len = (size_t)size;
    s->dev = st.st_dev;
    s->ino = st.st_ino;
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

int shard_atomic_write(const char *path, const void *head, size_t head_len, const void *body,
                       size_t body_len, tdm_err *e) {
    /* A unique name (pid + counter) opened with O_EXCL instead of mkstemp, so the file gets
     * the usual 0666 & ~umask mode rather than mkstemp's 0600. */
    static atomic_uint counter;
    size_t tlen = strlen(path) + 48;
    char *tmp = malloc(tlen);
    if (!tmp) return err_set(e, ERR_INTERNAL, "%s: out of memory", path);
    int fd = -1;
    for (int tries = 0; tries < 100 && fd < 0; tries++) {
        snprintf(tmp, tlen, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int rc = err_sys(e, ERR_USAGE, errno, "%s: cannot create temporary file %s", path, tmp);
        free(tmp);
        return rc;
    }
    int rc = 0;
    if (fileio_write_all(fd, head, head_len) != 0 || fileio_write_all(fd, body, body_len) != 0)
        rc = err_sys(e, ERR_INTERNAL, errno, "%s: cannot write %s", path, tmp);
    else if (fsync(fd) != 0)
        rc = err_sys(e, ERR_INTERNAL, errno, "%s: cannot fsync %s", path, tmp);
    if (close(fd) != 0 && !rc)
        rc = err_sys(e, ERR_INTERNAL, errno, "%s: cannot close %s", path, tmp);
    if (!rc && rename(tmp, path) != 0)
        rc = err_sys(e, ERR_USAGE, errno, "%s: cannot rename %s over it", path, tmp);
    if (rc) {
        unlink(tmp);
        free(tmp);
        return rc;
    }
    free(tmp);
    return sync_dir_of(path, e);
}

int shard_write(const char *path, const uint16_t *tok, size_t n, tdm_err *e) {
    if (n > SHARD_MAX_TOKENS)
        return err_set(e, ERR_USAGE,
                       "%s: %zu tokens exceed the %u a shard's int32 count can hold; split "
                       "into more shards",
                       path, n, SHARD_MAX_TOKENS);
    unsigned char header[SHARD_HEADER_BYTES] = {0};
    write_le32(header, SHARD_MAGIC);
    write_le32(header + 4, SHARD_VERSION);
    write_le32(header + 8, (int32_t)n);
    return shard_atomic_write(path, header, sizeof header, tok, n * sizeof *tok, e);
}
