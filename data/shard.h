/* shard.h — token shards in llm.c's format.
 *
 * A shard is a header of 256 little-endian int32 ([0] magic, [1] version, [2] token
 * count, the rest zero) followed by `count` little-endian tokens, in one of llm.c's two
 * formats (dev/data/data_common.py):
 *
 *   magic 20240520, version 1: uint16 tokens ("gpt-2"; vocabularies up to 65536),
 *   magic 20240801, version 7: uint32 tokens ("llama-3": vocabularies that do not fit
 *                              uint16, Llama-3's 128k, Qwen2's 152k),
 *
 * and, read only, magic 20240520 with version 2 and uint32 tokens (a "version 2" that
 * tools following issue 18's wording may write; llm.c itself never does). So shards
 * written by llm.c's data scripts are read unchanged and ours feed llm.c.
 *
 * Readers map the file read-only and validate it completely before use (a corrupt shard
 * must fail at load, not as a wrong loss hours later): magic, version, count against the
 * file size, and every token < vocab. Tokens leave a shard as uint32 whatever its format
 * (shard_token, shard_copy). Writers replace the file atomically and pick the narrowest
 * format the vocabulary allows (shard_write_tokens), so byte-level and GPT-2-sized
 * datasets stay readable by llm.c's GPT-2 trainer, which reads uint16 shards only.
 *
 * The largest vocabulary is SHARD_VOCAB_MAX = 2^24 (MODEL_VOCAB_MAX, the same bound, is
 * checked for models): 64 times the largest real tokenizer's (~256k), while the GPU
 * backend's per-batch counting sort over the vocabulary and its int arithmetic on the
 * padded vocabulary (and grid sizes) stay far from their limits.
 */
#ifndef TANDEM_DATA_SHARD_H
#define TANDEM_DATA_SHARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

#define SHARD_MAGIC 20240520     /* with SHARD_VERSION: uint16 tokens */
#define SHARD_VERSION 1
#define SHARD_MAGIC_U32 20240801 /* with SHARD_VERSION_U32: uint32 tokens (llm.c's llama-3) */
#define SHARD_VERSION_U32 7
#define SHARD_VERSION_ALT_U32 2 /* read only: SHARD_MAGIC with version 2, uint32 tokens */
#define SHARD_VOCAB_MAX 16777216 /* 2^24; see above */
#define SHARD_HEADER_INTS 256
#define SHARD_HEADER_BYTES (SHARD_HEADER_INTS * 4)
#define SHARD_MAX_TOKENS 2147483647u /* the header's count is an int32 */

typedef struct shard {
    char *path;          /* owned copy of the path it was opened from */
    const uint16_t *tok; /* uint16 shards: the n tokens inside the read-only mapping; NULL
                          * for uint32 ones (read any shard with shard_token or shard_copy) */
    const uint32_t *tok32; /* uint32 shards: the n tokens; NULL for uint16 ones */
    size_t n;
    int width; /* bytes per token: 2 or 4 */
    void *map; /* mapping of the whole file (header included) */
    size_t map_len;
    dev_t dev; /* identity of the file, so a dataset can refuse the same file twice */
    ino_t ino;
    uint32_t vocab; /* what every token was checked to be below when the shard was opened */
    /* its SHA-256 once computed (runner/data_source.c): a start hashes the data for
     * data.mp and, on several ranks, for the run's identity too; the mapping is
     * read-only, so the second asks the first */
    int digested;
    unsigned char digest[32];
} shard;

/* Maps `path` read-only into `s` and validates it: header size, magic and version (one of
 * the formats above), count against the file size, and every token < vocab
 * (1..SHARD_VOCAB_MAX; a uint16 shard loads into any larger vocabulary). On failure
 * returns ERR_USAGE (ERR_INTERNAL for out-of-memory) with a message naming the file and
 * the problem, and leaves `s` zeroed. On success the caller releases it with shard_close. */
int shard_open(shard *s, const char *path, int vocab, tdm_err *e);

/* Unmaps and frees; safe on a zeroed or already closed shard. */
void shard_close(shard *s);

/* Token i (< s->n) of an open shard, whatever its version. */
static inline uint32_t shard_token(const shard *s, size_t i) {
    return s->tok32 ? s->tok32[i] : s->tok[i];
}

/* Copies tokens [off, off + n) of an open shard (off + n <= s->n) into out, widened to
 * uint32 from a uint16 shard, and checks them again against the vocabulary: the file is
 * mapped, so bytes written into it while a run reads it (a shard of another tokenizer
 * copied over it, at least as long) would hand the model a token past its embedding table
 * (a write out of bounds in its backward). ERR_USAGE naming the file then; 0 otherwise.
 * (A file cut shorter under the mapping ends the process with SIGBUS: never write shards
 * a run is reading.) */
int shard_copy(const shard *s, size_t off, size_t n, uint32_t *out, tdm_err *e);

/* Bytes per token of the shards shard_write_tokens writes for vocabulary `vocab`: 2
 * (magic 20240520, version 1) up to 65536, else 4 (magic 20240801, version 7). */
int shard_width_for(int vocab);

/* Writes n uint16 tokens (n <= SHARD_MAX_TOKENS) as a uint16 shard (version 1) at `path`,
 * atomically: readers see the old file or the complete new one, never a partial one,
 * even across a crash. */
int shard_write(const char *path, const uint16_t *tok, size_t n, tdm_err *e);

/* Writes n tokens of a vocabulary of `vocab` (1..SHARD_VOCAB_MAX) as a shard at `path`,
 * atomically like shard_write, at shard_width_for(vocab): the uint16 format when the
 * vocabulary fits it (readable by every llm.c version), else the uint32 one. Every token
 * must be < vocab: ERR_USAGE naming
 * the file, the first bad token and its position otherwise (nothing is written), so that
 * what is written always loads back. */
int shard_write_tokens(const char *path, const uint32_t *tok, size_t n, int vocab, tdm_err *e);

/* The atomic writer under shard_write, for other small files of a dataset (its YAML):
 * writes head then body (either may be empty) to a temporary file in the same directory,
 * fsyncs it, renames it over `path` and fsyncs the directory. */
int shard_atomic_write(const char *path, const void *head, size_t head_len, const void *body,
                       size_t body_len, tdm_err *e);

#endif
