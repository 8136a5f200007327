/* prep.h — real text into a token dataset (`tandem prep`).
 *
 * Inputs (data/textsrc.h, data/docread.h). A domain is the union of its includes (a
 * file, a directory walked recursively, or a quoted glob that tandem expands, "**" for
 * any depth), less its excludes; a name given again adds includes. Files are read by
 * name: plain text (one document per file), .jsonl (one JSON object per line) and .json
 * (an object or an array of objects), the document of a record being its string field
 * `text_field` with JSON escapes decoded to UTF-8; any of them may be .gz or .zst
 * compressed. The domain's files are taken in sorted path order (strcmp of the paths as
 * built from the arguments, so neither the order of the arguments nor readdir's order
 * matters), a file's records in file order.
 *
 * Left out, counted per reason (TEXTSRC_*) and reported: binary files (a NUL byte
 * anywhere, or non-UTF-8 bytes within the first TEXTSRC_SNIFF_BYTES), invalid UTF-8 later in a text
 * file or in a JSON text field, JSON lines that do not parse or lack the field, empty
 * files and texts, unreadable files and directories, corrupt or truncated gzip/zstd
 * streams (the whole file), excluded files, symlinks and special files inside
 * directories. The first PREP_ISSUES_SHOWN of each reason per domain go to `warnings`
 * as "prep: NAME: PATH:LINE: what", then one line with the count of the rest. Fatal: a
 * domain left with fewer documents than splits to fill, and every usage error below.
 *
 * Tokens: documents become tokens at one place (prep.c, prep_encode). By default the
 * tokenizer is byte-level, vocab 256: every byte of a document's UTF-8 text is one token,
 * and each document is followed by the end-of-text separator, which for byte-level
 * datasets is the byte PREP_SEPARATOR ('\n'), a token like any other (vocab 256 has no
 * room for a dedicated id). With `tokenizer` (data/tokenizer.h; data/prep_encode.h) the
 * document's whole text is encoded as tokenizer_encode would (in parts cut at safe
 * points, so memory stays bounded), then its end-of-text id follows (tokenizer_eot, or
 * the token `eot_token` names; neither: a usage error). The vocab is the tokenizer's.
 *
 * Split: documents are the unit. Document k of a domain (k counts the documents kept, in
 * the order above, from 0) draws u = Philox(seed, PREP_RNG_PURPOSE; prep_domain_key(name),
 * k mod 2^32, k >> 32) uniform in [0, 1) and goes to train if u < f_train, to val if
 * u < f_train + f_val, else to test (prep_doc_split). The key is the domain's name, not
 * its position, so reordering --domain arguments changes no split. A split is its
 * documents in order, so the three splits partition the domain's token stream.
 *
 * Small domains: a split whose fraction is > 0 (train and val always, test when f_test >
 * 0) must hold at least one document. When the hash gives it none, the one document whose
 * u is nearest to that split's interval [lo, hi) moves there, taken from a split that
 * keeps at least one (done for val, then test, then train; ties go to the lower index),
 * and the summary says so. A domain with fewer documents than such splits is an error.
 *
 * Two passes: the first reads every file to count documents and tokens per split (and
 * reports what it leaves out), the second reads the kept files again and writes. A file
 * whose documents or tokens differ between the passes is an error (the input changed).
 *
 * Output under `out`, in gen-corpus's layout: per domain <name>/train_NNN.bin, val_NNN.bin
 * and test_NNN.bin (llm.c shards of at most shard_tokens tokens, numbered with enough
 * digits, at least 3, to sort; uint16 up to vocab 65536, else llm.c's uint32 format, as
 * shard_width_for says) and out/dataset.yaml (vocab, quoted globs; with a tokenizer also
 * tokenizer, tokenizer_sha256 and eot, by dataset_write_yaml_meta). Shards
 * are streamed to a temporary file and renamed into place once complete and fsynced, so
 * memory stays a few MiB whatever the input size (a .jsonl line and a .json file are
 * held whole; with a tokenizer also the tokenizer, about 4 MiB of the open document's
 * text and a 4 MiB batch of short documents, and a document without a safe cut whole).
 * Every check (options, paths, duplicate files, document counts, stale
 * shards) runs before the first write; an existing out/dataset.yaml is removed before the
 * first shard is written and rewritten last, so a run that fails half-way never leaves a
 * dataset.yaml naming a mix of old and new shards.
 */
#ifndef TANDEM_DATA_PREP_H
#define TANDEM_DATA_PREP_H

#include <stdint.h>
#include <stdio.h>

#include "data/textsrc.h"
#include "util/err.h"

#define PREP_VOCAB 256
#define PREP_SEPARATOR '\n'
#define PREP_RNG_PURPOSE 0x70726570u /* "prep"; far from util/rng.h's small purposes */

#define PREP_DEFAULT_SHARD_TOKENS 100000000 /* llm.c's shard size */
/* The fewest tokens per shard: a training window (train.seq + 1 tokens) lies within one
 * shard, and shorter shards only multiply files (1 gave 26 k files no run could use) */
#define PREP_MIN_SHARD_TOKENS 256
#define PREP_DEFAULT_SEED 1
#define PREP_DEFAULT_PROGRESS_BYTES (256ull << 20)
#define PREP_SPLIT_TOLERANCE 1e-6 /* |f_train + f_val + f_test - 1| allowed */
#define PREP_DEFAULT_TEXT_FIELD "text"
#define PREP_ISSUES_SHOWN 5 /* messages per reason and domain before a count */

/* One --domain NAME=PATH argument (PATH a file, directory or glob), or one --exclude
 * NAME=GLOB. */
typedef struct prep_input {
    const char *name;
    const char *path;
} prep_input;

/* What a run did with one domain (prep_opts.stats). */
typedef struct prep_stats {
    const char *name; /* the domain's name as given */
    uint64_t files;   /* files listed (after excludes) */
    uint64_t files_used; /* files that gave at least one document */
    uint64_t input_bytes; /* their sizes on disk, compressed or not */
    uint64_t docs, text_bytes, tokens; /* documents kept, their text, their tokens */
    uint64_t split_docs[3], split_tokens[3], shards[3];
    uint64_t skipped[TEXTSRC_N_REASONS];
    int n_moved; /* small-domain rescues */
} prep_stats;

typedef struct prep_opts {
    const char *out;          /* output directory, created if missing */
    const prep_input *inputs; /* n_inputs (name, include) pairs; a repeated name adds */
    int n_inputs;
    const prep_input *excludes; /* n_excludes (name, glob): each name must be a domain's */
    int n_excludes;
    const char *text_field; /* the JSON key of a record's text (a Parquet file: its column) */
    const prep_input *text_fields; /* n_text_fields (domain, field) pairs: a domain's own */
    int n_text_fields;
    const char *tokenizer;  /* NULL: byte-level; else a tokenizer.json or tiktoken ranks
                               file (data/tokenizer.h) */
    const char *pattern;    /* its pre-tokenizer (tokenizer_load), or NULL */
    const char *eot_token;  /* NULL: the tokenizer's end-of-text token; else this token */
    int threads;            /* encoding threads for a tokenizer (<= 0: all cores) */
    size_t chunk_bytes;     /* a document's text buffered before a part of it is encoded
                               (0: PREP_ENC_CHUNK, data/prep_encode.h); tests make it small */
    size_t doc_max_bytes;   /* the most of a document held whole for want of a safe cut
                               (0: PREP_DOC_HELD_MAX, data/prep_encode.h); tests make it small */
    double split[3]; /* train, val, test fractions: sum 1, each >= 0, train and val > 0 */
    uint64_t shard_tokens; /* 1..SHARD_MAX_TOKENS */
    uint64_t seed;
    FILE *report;            /* the summary table; NULL: silent */
    FILE *warnings;          /* what was left out and why; NULL: silent */
    FILE *progress;          /* progress lines while a large domain is read; NULL: silent */
    uint64_t progress_bytes; /* a progress line every this many bytes read or tokens
                                written (0: none) */
    prep_stats *stats;       /* NULL, or room for DATASET_MAX_DOMAINS: filled in domain
                                order when the run succeeds, *n_stats set */
    int *n_stats;
} prep_opts;

/* Defaults: split 0.9/0.05/0.05, the PREP_DEFAULT_* values, report stdout, warnings and
 * progress stderr; out, inputs, excludes and stats NULL. */
void prep_opts_init(prep_opts *o);

/* Checks split fractions (finite, each in [0, 1], train and val > 0, sum 1 within
 * PREP_SPLIT_TOLERANCE). 0, or ERR_USAGE with a message giving the fractions. */
int prep_check_split(const double split[3], tdm_err *e);

/* The key of a domain's documents in the split hash: 32-bit FNV-1a of its name. */
uint32_t prep_domain_key(const char *name);

/* The hash's choice for document `doc` of the domain named `domain`: SPLIT_TRAIN,
 * SPLIT_VAL or SPLIT_TEST (never SPLIT_TEST when split[2] == 0), before any small-domain
 * rescue. */
int prep_doc_split(uint64_t seed, const char *domain, uint64_t doc, const double split[3]);

/* Writes the dataset described by `o`. Errors are ERR_USAGE (ERR_INTERNAL for
 * out-of-memory and failed writes of the output) with a message starting "prep: " that
 * names the domain, path or option at fault and what to do. Refused: no inputs, a bad
 * domain name (dataset_name_ok, not . or ..; two names differing only in case), more
 * than 64 domains, an exclude for no domain, a missing path, a path that is neither a
 * file nor a directory nor a glob, a glob that matches nothing, the same file twice (also
 * across domains, or through a hard link), an output directory inside an input directory,
 * a domain with fewer documents than splits to fill (the message counts what was left out
 * and why), bad fractions, and shards in a domain directory that this run would not
 * overwrite (the dataset's globs would pick them up), a tokenizer that does not load, one
 * without an end-of-text token when eot_token is NULL, an eot_token that is not one of its
 * tokens, and pattern or eot_token without a tokenizer. A file that changes between the
 * two passes is an error too. */
int prep_run(const prep_opts *o, tdm_err *e);

/* Takes OUT/.tandem-prep.lock (OUT made if missing) for a prep's or gen-corpus's writes:
 * the open descriptor (close it to release), or -1 with e set (ERR_USAGE: another one
 * holds it, said with what to do). */
int prep_lock_out(const char *out, tdm_err *e);

#endif
