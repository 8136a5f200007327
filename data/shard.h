/* shard.h — token shards in llm.c's format.
 *
 * A shard is a header of 256 little-endian int32 ([0] magic 20240520, [1] version 1,
 * [2] token count, the rest zero) followed by `count` little-endian uint16 tokens, so
 * shards written by llm.c's data scripts are read unchanged and ours feed llm.c. Readers
 * map the file read-only and validate it completely before use (a corrupt shard must fail
 * at load, not as a wrong loss hours later); writers replace the file atomically.
 */
#ifndef TANDEM_DATA_SHARD_H
#define TANDEM_DATA_SHARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256
#define SHARD_HEADER_BYTES (SHARD_HEADER_INTS * 4)
#define SHARD_MAX_TOKENS 2147483647u /* the header's count is an int32 */

typedef struct shard {
    char *path;          /* owned copy of the path it was opened from */
    const uint16_t *tok; /* n tokens inside the read-only mapping */
    size_t n;
    void *map; /* mapping of the whole file (header included) */
    size_t map_len;
    dev_t dev; /* identity of the file, so a dataset can refuse the same file twice */
    ino_t ino;
} shard;

/* Maps `path` read-only into `s` and validates it: header size, magic, version, count
 * against the file size, and every token < vocab (1..65536). On failure returns ERR_USAGE
 * (ERR_INTERNAL for out-of-memory) with a message naming the file and the problem, and
 * leaves `s` zeroed. On success the caller releases it with shard_close. */
int shard_open(shard *s, const char *path, int vocab, tdm_err *e);

/* Unmaps and frees; safe on a zeroed or already closed shard. */
void shard_close(shard *s);

/* Writes n tokens (n <= SHARD_MAX_TOKENS) as a shard at `path`, atomically: readers see
 * the old file or the complete new one, never a partial one, even across a crash. */
int shard_write(const char *path, const uint16_t *tok, size_t n, tdm_err *e);

/* The atomic writer under shard_write, for other small files of a dataset (its YAML):
 * writes head then body (either may be empty) to a temporary file in the same directory,
 * fsyncs it, renames it over `path` and fsyncs the directory. */
int shard_atomic_write(const char *path, const void *head, size_t head_len, const void *body,
                       size_t body_len, tdm_err *e);

#endif
