/* prep.h — real text into a byte-level token dataset (`tandem prep`).
 *
 * Tokenizer: byte-level, vocab 256; every byte of the input is one token (any bytes are
 * fine, UTF-8 or not), so no tokenizer download is needed (DESIGN.md §7).
 *
 * A domain is the union of the paths given for it (a name given again adds paths). Each
 * path is a regular file or a directory; directories are walked recursively, reading
 * only regular files: symlinks and special files met inside a directory are skipped and
 * counted, never followed (a path given directly is followed if it is a symlink). The
 * domain's files are taken in sorted path order (strcmp of the paths as built from the
 * arguments, so the order does not depend on the order of the arguments or of readdir).
 *
 * Byte stream: the files' bytes one after the other, each non-empty file followed by one
 * PREP_SEPARATOR byte ('\n'); empty files add nothing. The stream is cut into blocks of
 * block_bytes (the last one may be shorter). Block k of domain m (domains numbered from 0
 * in order of first appearance) draws u = Philox(seed, PREP_RNG_PURPOSE; m, k mod 2^32,
 * k >> 32) uniform in [0, 1) and goes to train if u < f_train, to val if u < f_train +
 * f_val, else to test (see prep_block_split). A split is its blocks in stream order, so
 * the three splits partition the stream and the assignment depends on nothing but
 * (seed, m, k, fractions): not on file sizes or on how the stream falls into shards.
 *
 * Small domains: a split whose fraction is > 0 (train and val always, test when f_test >
 * 0) must hold at least one block. When the hash gives it none, the one block whose u is
 * nearest to that split's interval [lo, hi) moves there, taken from a split that keeps
 * at least one block (the rescue; done for val, then test, then train; ties go to the
 * lower block index), and the summary line says so. A domain with fewer blocks than
 * required splits is an error naming the bytes it needs.
 *
 * Output under `out`, in gen-corpus's layout: per domain <name>/train_NNN.bin, val_NNN.bin
 * and test_NNN.bin (llm.c shards of at most shard_tokens tokens, numbered with enough
 * digits, at least 3, to sort) and out/dataset.yaml (vocab: 256, quoted globs). Shards
 * are streamed to a temporary file and renamed into place once complete and fsynced, so
 * memory stays a few MiB whatever the input size. Every check (options, paths,
 * readability, duplicate files, sizes, stale shards) runs before the first write; an
 * existing out/dataset.yaml is removed before the first shard is written and rewritten
 * last, so a run that fails half-way never leaves a dataset.yaml naming a mix of old and
 * new shards.
 */
#ifndef TANDEM_DATA_PREP_H
#define TANDEM_DATA_PREP_H

#include <stdint.h>
#include <stdio.h>

#include "util/err.h"

#define PREP_VOCAB 256
#define PREP_SEPARATOR '\n'
#define PREP_RNG_PURPOSE 0x70726570u /* "prep"; far from util/rng.h's small purposes */

#define PREP_DEFAULT_BLOCK_BYTES 65536
#define PREP_DEFAULT_SHARD_TOKENS 100000000 /* llm.c's shard size */
#define PREP_DEFAULT_SEED 1
#define PREP_DEFAULT_PROGRESS_BYTES (256ull << 20)
#define PREP_SPLIT_TOLERANCE 1e-6 /* |f_train + f_val + f_test - 1| allowed */

/* One --domain NAME=PATH argument. */
typedef struct prep_input {
    const char *name;
    const char *path;
} prep_input;

typedef struct prep_opts {
    const char *out;          /* output directory, created if missing */
    const prep_input *inputs; /* n_inputs (name, path) pairs; a repeated name adds paths */
    int n_inputs;
    double split[3]; /* train, val, test fractions: sum 1, each >= 0, train and val > 0 */
    uint64_t block_bytes;  /* >= 1: the unit the split assigns */
    uint64_t shard_tokens; /* 1..SHARD_MAX_TOKENS */
    uint64_t seed;
    FILE *report;            /* one summary line per domain; NULL: silent */
    FILE *progress;          /* progress lines while a large domain is read; NULL: silent */
    uint64_t progress_bytes; /* a progress line every this many bytes of a domain larger
                                than it (0: none) */
} prep_opts;

/* Defaults: split 0.9/0.05/0.05, the PREP_DEFAULT_* values, report stdout, progress
 * stderr; out and inputs NULL. */
void prep_opts_init(prep_opts *o);

/* Checks split fractions (finite, each in [0, 1], train and val > 0, sum 1 within
 * PREP_SPLIT_TOLERANCE). 0, or ERR_USAGE with a message giving the fractions. */
int prep_check_split(const double split[3], tdm_err *e);

/* The hash's choice for block `block` of domain `domain`: SPLIT_TRAIN, SPLIT_VAL or
 * SPLIT_TEST (never SPLIT_TEST when split[2] == 0), before any small-domain rescue. */
int prep_block_split(uint64_t seed, int domain, uint64_t block, const double split[3]);

/* Writes the dataset described by `o`. Errors are ERR_USAGE (ERR_INTERNAL for
 * out-of-memory and failed writes of the output) with a message starting "prep: " that
 * names the domain, path or option at fault and what to do. Refused: no inputs, a bad
 * domain name (dataset_name_ok, not . or ..; two names differing only in case), more
 * than 64 domains, a missing or unreadable path, a path that is neither a file nor a
 * directory, the same file twice (also across domains, or through a hard link), an
 * output directory inside an input directory, a domain with too little text, bad
 * fractions, and shards in a domain directory that this run would not overwrite (the
 * dataset's globs would pick them up). A file that changes size while it is read is an
 * error too, since the plan was made from its size. */
int prep_run(const prep_opts *o, tdm_err *e);

#endif
