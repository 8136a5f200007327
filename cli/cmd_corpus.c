/* cmd_corpus.c — `tandem gen-corpus`: command-line front end of data/corpus.h. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "data/corpus.h"
#include "data/dataset.h"
#include "data/prep.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "util/args.h"
#include "util/fileio.h"
#include "util/outfile.h"

#define STR_(x) #x
#define STR(x) STR_(x) /* a default as text, for --help */

static const cli_opt OPTS[] = {
    {"--out", CLI_STR, "DIR", "output directory (created if missing; required)", NULL, 0, 0, NULL, NULL},
    {"--domains", CLI_STR, "N",
     "number of domains, 1..64 (default " STR(CORPUS_DEFAULT_DOMAINS) ", or the number of --names)",
     NULL, 0, 0, NULL, NULL},
    {"--names", CLI_STR, "a,b,c", "domain names (default d0,d1,...)", NULL, 0, 0, NULL, NULL},
    {"--train-tokens", CLI_STR, "N|N1,N2..",
     "train tokens, one count for all domains or one per domain\n"
     "(default " STR(CORPUS_DEFAULT_TRAIN) ")",
     NULL, 0, 0, NULL, NULL},
    {"--val-tokens", CLI_STR, "N", "val tokens per domain (default " STR(CORPUS_DEFAULT_VAL) ")",
     NULL, 0, 0, NULL, NULL},
    {"--test-tokens", CLI_STR, "N",
     "test tokens per domain, 0 for no test split (default " STR(CORPUS_DEFAULT_TEST) ")",
     NULL, 0, 0, NULL, NULL},
    {"--shard-tokens", CLI_STR, "N", "most tokens per shard file (default " STR(CORPUS_DEFAULT_SHARD) ")",
     NULL, 0, 0, NULL, NULL},
    {"--vocab", CLI_STR, "V", "vocabulary size, 2..65536 (default " STR(CORPUS_DEFAULT_VOCAB) ")",
     NULL, 0, 0, NULL, NULL},
    {"--seed", CLI_STR, "S", "generator seed (default " STR(CORPUS_DEFAULT_SEED) ")", NULL, 0, 0, NULL, NULL},
    {"--successors", CLI_STR, "B|B1,B2,..",
     "successors per context (the entropy), one for all domains\n"
     "or one per domain (default 2, 4, 8, ... by domain)",
     NULL, 0, 0, NULL, NULL},
    {"--order", CLI_STR, "K",
     "Markov order, 1 or 2 (default " STR(CORPUS_DEFAULT_ORDER) "; order 2 needs a far\n"
     "larger model and corpus to learn)",
     NULL, 0, 0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};

static void more_help(FILE *f) {
    fprintf(f, "Counts accept k, M, G (x1000) and Ki, Mi, Gi (x1024) suffixes (10M = 10000000).\n"
               "Prints one line per domain with its entropy: the lowest loss (bits and nats per\n"
               "token) a model can reach on it.\n");
}

static const cli_spec SPEC = {
    "gen-corpus", "--out DIR", 0, 0, NULL,
    "Writes a synthetic multi-domain corpus: per domain a Markov source of its own\n"
    "entropy (2, 4, 8, ... successors per context), as llm.c token shards under DIR/<name>/\n"
    "and DIR/dataset.yaml describing them. Same options, same bytes.",
    OPTS, more_help};

/* Reports a bad argument naming its flag; returns the usage exit code. */
static int bad(const char *flag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(const char *flag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tandem gen-corpus: %s: ", flag);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see tandem gen-corpus --help)\n");
    va_end(ap);
    return 2;
}

/* Splits a comma list in place into at most `max` items; -1 if more or one is empty. */
static int split_list(char *s, char **items, int max) {
    int n = 0;
    for (char *tok = s;;) {
        char *comma = strchr(tok, ',');
        if (comma) *comma = '\0';
        if (!*tok || n == max) return -1;
        items[n++] = tok;
        if (!comma) return n;
        tok = comma + 1;
    }
}

/* The values are checked here, not by the rows: counts take k/M/G suffixes and comma lists
 * (the messages name the option as before). */
/* Whether the corpus fits the free space of the file system --out goes to (its deepest
 * folder that exists): 2 bytes a token (uint16 shards). Before, 1e11 train tokens started
 * writing and filled the disk. 0, or 3 with the sizes said. */
static int room_for(const corpus_opts *o) {
    double tokens = 0;
    for (int m = 0; m < o->n_domains; m++)
        tokens += (o->n_train ? (double)o->train_tokens[o->n_train > 1 ? m : 0] : (double)CORPUS_DEFAULT_TRAIN) +
                  (double)o->val_tokens + (double)o->test_tokens;
    char dir[PATH_MAX];
    struct statvfs fs; /* --out may be created: judged where it will be */
    if (!fileio_existing_ancestor(o->out, dir) || statvfs(dir, &fs) != 0)
        return 0; /* cannot tell: corpus_generate's writes will */
    double need = 2.0 * tokens, have = (double)fs.f_bavail * (double)fs.f_frsize;
    if (need <= have) return 0;
    fprintf(stderr, "tandem gen-corpus: the corpus needs %.2f GB (%.3g tokens at 2 bytes) and %s has %.2f GB "
            "free: give fewer tokens (--train-tokens, --val-tokens, --test-tokens) or another --out\n",
            need / 1e9, tokens, o->out, have / 1e9);
    return 3;
}

static int run_gen_corpus(const cli_args *a) {
    corpus_opts o;
    corpus_opts_init(&o);
    char *names_buf = NULL, *names[DATASET_MAX_DOMAINS];
    uint64_t train[DATASET_MAX_DOMAINS];
    int succ[DATASET_MAX_DOMAINS], succ_all[DATASET_MAX_DOMAINS], n_succ = 0;
    int n_names = 0, domains_given = 0, rc = 0;
    const char *val;
    uint64_t v = 0;
    if ((val = cli_str(a, "--out", NULL))) {
        tdm_err le;
        if (!*val) rc = bad("--out", "empty directory name");
        else if (outfile_check_local("--out", val, &le)) rc = (fprintf(stderr, "tandem gen-corpus: %s\n", le.msg), 2);
        o.out = val;
    }
    if (!rc && (val = cli_str(a, "--names", NULL))) {
        names_buf = strdup(val);
        if (!names_buf)
            rc = bad("--names", "out of memory");
        else if ((n_names = split_list(names_buf, names, DATASET_MAX_DOMAINS)) < 0)
            rc = bad("--names", "'%s' is not a comma list of 1..64 non-empty names", val);
    }
    if (!rc && (val = cli_str(a, "--train-tokens", NULL))) {
        char *copy = strdup(val), *items[DATASET_MAX_DOMAINS];
        int n = copy ? split_list(copy, items, DATASET_MAX_DOMAINS) : -1;
        for (int k = 0; k < n && n > 0; k++)
            if (args_parse_count(items[k], &train[k]) || train[k] == 0) n = -1;
        free(copy);
        if (n < 0) rc = bad("--train-tokens", "'%s' is not a count >= 1 or a comma list of them", val);
        o.train_tokens = train;
        o.n_train = n < 0 ? 0 : n;
    }
    if (!rc && (val = cli_str(a, "--domains", NULL))) {
        if (args_parse_count(val, &v) || v < 1 || v > DATASET_MAX_DOMAINS)
            rc = bad("--domains", "'%s' is not a number of domains in 1..64", val);
        o.n_domains = (int)v;
        domains_given = 1;
    }
    if (!rc && (val = cli_str(a, "--val-tokens", NULL)))
        if (args_parse_count(val, &o.val_tokens) || o.val_tokens == 0)
            rc = bad("--val-tokens", "'%s' is not a count >= 1", val);
    if (!rc && (val = cli_str(a, "--test-tokens", NULL)))
        if (args_parse_count(val, &o.test_tokens)) rc = bad("--test-tokens", "'%s' is not a count", val);
    if (!rc && (val = cli_str(a, "--shard-tokens", NULL)))
        if (args_parse_count(val, &o.shard_tokens) || o.shard_tokens < PREP_MIN_SHARD_TOKENS ||
            o.shard_tokens > 2147483647u) /* as prep: a window lies within one shard */
            rc = bad("--shard-tokens", "'%s' is not a count in %d..2147483647", val, PREP_MIN_SHARD_TOKENS);
    if (!rc && (val = cli_str(a, "--vocab", NULL))) {
        if (args_parse_count(val, &v) || v < 2 || v > 65536)
            rc = bad("--vocab", "'%s' is not a vocabulary size in 2..65536 (a model needs two tokens)", val);
        o.vocab = (int)v;
    }
    if (!rc && (val = cli_str(a, "--successors", NULL))) {
        char *copy = strdup(val), *items[DATASET_MAX_DOMAINS];
        int n = copy ? split_list(copy, items, DATASET_MAX_DOMAINS) : -1;
        for (int k = 0; k < n && n > 0; k++)
            if (args_parse_count(items[k], &v) || v < 1 || v > 65536) n = -1;
            else succ[k] = (int)v;
        free(copy);
        if (n < 0) rc = bad("--successors", "'%s' is not a count >= 1 or a comma list of them", val);
        n_succ = n < 0 ? 0 : n;
    }
    if (!rc && (val = cli_str(a, "--order", NULL))) {
        if (args_parse_count(val, &v) || v < 1 || v > 2) rc = bad("--order", "'%s' is not 1 or 2", val);
        o.order = (int)v;
    }
    if (!rc && (val = cli_str(a, "--seed", NULL)))
        if (args_parse_count(val, &o.seed)) rc = bad("--seed", "'%s' is not a non-negative integer", val);
    if (!rc && !o.out) rc = bad("--out", "is required");
    if (!rc && n_names) {
        if (domains_given && o.n_domains != n_names) {
            fprintf(stderr,
                    "tandem gen-corpus: --names gives %d names but --domains is %d; make them "
                    "agree or drop --domains\n",
                    n_names, o.n_domains);
            rc = 2;
        }
        o.n_domains = n_names;
        o.names = (const char *const *)names;
    }
    if (!rc && o.n_train > 1 && o.n_train != o.n_domains) {
        fprintf(stderr,
                "tandem gen-corpus: --train-tokens gives %d counts for %d domains; give one "
                "count for all or one per domain\n",
                o.n_train, o.n_domains);
        rc = 2;
    }
    if (!rc && n_succ > 1 && n_succ != o.n_domains) {
        fprintf(stderr, "tandem gen-corpus: --successors gives %d counts for %d domains\n", n_succ,
                o.n_domains);
        rc = 2;
    }
    if (!rc && n_succ) {
        for (int m = 0; m < o.n_domains; m++) succ_all[m] = succ[n_succ == 1 ? 0 : m];
        o.successors = succ_all;
    }
    if (!rc) rc = room_for(&o);
    if (!rc) {
        tdm_err e = {0};
        if (corpus_generate(&o, &e)) {
            fprintf(stderr, "tandem %s\n", e.msg); /* the message starts "gen-corpus: " */
            rc = e.code;
        } else {
            printf("wrote %s/dataset.yaml\n", o.out);
        }
    }
    free(names_buf);
    return rc;
}

int cmd_gen_corpus(int argc, char **argv) { return cli_run(&SPEC, run_gen_corpus, argc, argv); }
