/* dataset.h — a multi-domain dataset: per domain, train/val/test lists of token shards.
 *
 * Described by a YAML file (DESIGN.md §7):
 *
 *   vocab: 256                      # 1..2^24; every token must be below it
 *   tokenizer: "byte"               # optional: what made the tokens ("byte",
 *                                   #   "hf-bpe:gpt2", "tiktoken:cl100k", ...)
 *   tokenizer_sha256: 3b1f...       # optional: SHA-256 (64 hex digits) of its files
 *   eot: 50256                      # optional: the end-of-text token id, < vocab
 *   domains:                        # 1..64 domains, in the order α is indexed
 *     - name: web                   # unique, [A-Za-z0-9_.-]{1,64}
 *       train: [web/train_*.bin]    # glob(3) patterns (a list or one string), relative
 *       val: [web/val_*.bin]        #   to the YAML file's directory unless absolute;
 *       test: [web/test_*.bin]      #   optional (llm.c datasets have train/val only)
 *
 * Each pattern must match at least one file; matches are taken in sorted order, pattern
 * after pattern. No file may appear twice in a dataset (a val shard that is also a train
 * shard would make L_val, which DMO optimises, a training loss). Loading opens and
 * validates every shard; the dataset then holds the read-only mappings. Shards may be
 * uint16 or uint32 (data/shard.h), mixed; above vocab 65536 only uint32 ones hold the ids.
 *
 * The tokenizer keys are recorded, not interpreted: they say which tokenizer the ids
 * belong to, so that a model and a dataset of different tokenizers are not mixed by
 * accident (a vocabulary size is a weak witness of that).
 */
#ifndef TANDEM_DATA_DATASET_H
#define TANDEM_DATA_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "data/shard.h"
#include "util/err.h"

enum { SPLIT_TRAIN = 0, SPLIT_VAL = 1, SPLIT_TEST = 2, SPLIT_COUNT = 3 };

#define DATASET_MAX_DOMAINS 64
#define DATASET_NAME_MAX 64

typedef struct dataset_split {
    shard *shards; /* in dataset order; empty only for an absent optional test split */
    size_t n_shards;
    uint64_t tokens; /* sum over the shards */
} dataset_split;

typedef struct dataset_domain {
    char *name;
    dataset_split split[SPLIT_COUNT];
} dataset_domain;

#define DATASET_TOKENIZER_MAX 128 /* bytes of a tokenizer kind, NUL included */

typedef struct dataset {
    char *path; /* the YAML file it was loaded from */
    int vocab;
    char tokenizer[DATASET_TOKENIZER_MAX]; /* "tokenizer:", "" when absent */
    char tokenizer_sha256[65];             /* "tokenizer_sha256:" in lowercase hex, or "" */
    int eot;                               /* "eot:", -1 when absent */
    int n_domains;
    dataset_domain *domains;
} dataset;

/* Loads and validates the dataset described by `yaml_path` into `ds`. On failure returns
 * ERR_USAGE (ERR_INTERNAL for out-of-memory) with a message naming the file, line, key,
 * domain or shard at fault, and leaves `ds` zeroed. The caller frees with dataset_free. */
int dataset_load(dataset *ds, const char *yaml_path, tdm_err *e);

/* Closes every shard and frees; safe on a zeroed or already freed dataset. */
void dataset_free(dataset *ds);

/* Whether `name` is a valid domain name (non-empty, at most DATASET_NAME_MAX bytes of
 * [A-Za-z0-9_.-]); shared with the corpus generator so what it writes loads back. */
int dataset_name_ok(const char *name);

/* Why a valid name cannot name a domain's folder beside dataset.yaml (prep, gen-corpus;
 * a dataset's own names too, for . and ..), or NULL. */
const char *dataset_folder_name_bad(const char *name);

/* Whether `name` is reserved for a row of the reports: "Average" in any case, the mean over
 * domains that eval, results and compare print beside the domains (a domain of that name
 * could not be told from it in a table or CSV). Refused where names are made (prep,
 * gen-corpus) and where a run is created (config/run_config.c), not by dataset_load: a
 * run begun before the reservation still resumes and is evaluated. DATASET_RESERVED_WHY
 * says why. */
int dataset_name_reserved(const char *name);
#define DATASET_RESERVED_WHY \
    "is reserved: eval, results and compare print the mean over domains under that name; " \
    "rename the domain"

/* "train", "val", "test", or "?" for anything else. */
const char *dataset_split_name(int split);

/* The file name of shard `index` of a split: "<split>_<index>.bin" with the index padded
 * to `digits` (so that names sort in shard order), as gen-corpus and prep write them and
 * dataset.yaml's globs ("<split>_*.bin") find them. */
void dataset_shard_name(int split, uint64_t index, int digits, char out[64]);
/* Whether a file name looks like a shard of a split, "<split>_*.bin" as dataset.yaml's
 * globs match it: 1 with *split set and, when the middle is all decimal digits (at most
 * 19), *index and *digits (its length; else *digits = 0). For finding stale shards. */
int dataset_shard_match(const char *file, int *split, uint64_t *index, int *digits);
/* Whether the first len bytes of name are a shard's file name (dataset_shard_match): the
 * temporaries of shard writers (util/fileio.h, fileio_sweep_dead_temporaries). */
int dataset_shard_stem(const char *name, size_t len);

/* One domain of a dataset.yaml being written: its name and a comment for its line. */
typedef struct dataset_yaml_domain {
    const char *name;
    char comment[160];
} dataset_yaml_domain;

/* Writes DIR's dataset.yaml (atomically, at `path`) as gen-corpus and prep do: the
 * `header` comment lines (each "# ...\n"), vocab, and per domain its train, val and (when
 * with_test) test globs "<name>/<split>_*.bin". No tokenizer keys (dataset_write_yaml_meta
 * writes them). */
int dataset_write_yaml(const char *path, const char *header, int vocab,
                       const dataset_yaml_domain *doms, int n, int with_test, tdm_err *e);

/* What a dataset.yaml says about its tokens besides the domains. */
typedef struct dataset_yaml_meta {
    int vocab;
    const char *tokenizer;        /* NULL or "" for none; else as dataset_tokenizer_ok */
    const char *tokenizer_sha256; /* NULL or "" for none; else 64 hex digits */
    int eot;                      /* -1 for none; else 0..vocab-1 */
} dataset_yaml_meta;

/* dataset_write_yaml with the optional tokenizer, tokenizer_sha256 and eot keys after
 * vocab. Values dataset_load would refuse are refused here (ERR_USAGE), before writing. */
int dataset_write_yaml_meta(const char *path, const char *header, const dataset_yaml_meta *meta,
                            const dataset_yaml_domain *doms, int n, int with_test, tdm_err *e);

/* Whether `kind` is a tokenizer string dataset.yaml accepts: 1..DATASET_TOKENIZER_MAX-1
 * bytes of [A-Za-z0-9_.:/@+-] (e.g. "byte", "hf-bpe:gpt2", "tiktoken:cl100k"). */
int dataset_tokenizer_ok(const char *kind);

/* Whether the dataset's ids are bytes (token b is byte b): tokenizer "byte", or no
 * tokenizer key and a vocabulary of 256 (what `tandem prep` makes without --tokenizer). */
int dataset_byte_level(const dataset *ds);

/* The vocabulary of a model trained on `ds`: config_vocab (the config's model.vocab) when
 * it is set, else (0) the dataset's. A set vocabulary may be larger than the dataset's
 * (rows never seen as inputs: padding) but not smaller: ERR_USAGE naming both, the
 * dataset.yaml and what to do. */
int dataset_model_vocab(const dataset *ds, int config_vocab, int *vocab, tdm_err *e);

/* Accessors; domain and split must be in range (callers check against n_domains). */
int dataset_n_domains(const dataset *ds);
const char *dataset_domain_name(const dataset *ds, int domain);
/* Index of the domain called `name`, or -1. */
int dataset_find_domain(const dataset *ds, const char *name);
/* The shards of (domain, split); *n receives their number. */
const shard *dataset_shards(const dataset *ds, int domain, int split, size_t *n);
uint64_t dataset_tokens(const dataset *ds, int domain, int split);

#endif
