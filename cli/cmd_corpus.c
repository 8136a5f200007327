/* cmd_corpus.c — `tandem gen-corpus`: command-line front end of data/corpus.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/corpus.h"
#include "data/dataset.h"
#include "cli/cmds.h"
#include "runner/args.h"

static const char usage[] =
    "usage: tandem gen-corpus --out DIR [options]\n"
    "\n"
    "Writes a synthetic multi-domain corpus: per domain a Markov source of its own\n"
    "entropy (2, 4, 8, ... successors per context), as llm.c token shards under DIR/<name>/\n"
    "and DIR/dataset.yaml describing them. Same options, same bytes.\n"
    "\n"
    "  --out DIR                 output directory (created if missing)\n"
    "  --domains N               number of domains, 1..64 (default %d, or the number of --names)\n"
    "  --names a,b,c             domain names (default d0,d1,...)\n"
    "  --train-tokens N|N1,N2..  train tokens, one count for all domains or one per domain\n"
    "                            (default %d)\n"
    "  --val-tokens N            val tokens per domain (default %d)\n"
    "  --test-tokens N           test tokens per domain, 0 for no test split (default %d)\n"
    "  --shard-tokens N          most tokens per shard file (default %d)\n"
    "  --vocab V                 vocabulary size, 1..65536 (default %d)\n"
    "  --seed S                  generator seed (default %d)\n"
    "  --successors B|B1,B2,..   successors per context (the entropy), one for all domains\n"
    "                            or one per domain (default 2, 4, 8, ... by domain)\n"
    "  --order K                 Markov order, 1 or 2 (default %d; order 2 needs a far\n"
    "                            larger model and corpus to learn)\n"
    "\n"
    "Counts accept k, M, G suffixes (10M = 10000000). Prints one line per domain with its\n"
    "entropy: the lowest loss (bits and nats per token) a model can reach on it.\n";

static void print_usage(FILE *f) {
    fprintf(f, usage, CORPUS_DEFAULT_DOMAINS, CORPUS_DEFAULT_TRAIN, CORPUS_DEFAULT_VAL,
            CORPUS_DEFAULT_TEST, CORPUS_DEFAULT_SHARD, CORPUS_DEFAULT_VOCAB, CORPUS_DEFAULT_SEED,
            CORPUS_DEFAULT_ORDER);
}

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

/* A decimal count with an optional k/M/G suffix; 0 on success. */
static int parse_count(const char *s, uint64_t *out) {
    uint64_t v = 0;
    const char *p = s;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10) return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    uint64_t mul = 1;
    if (*p == 'k' || *p == 'K')
        mul = 1000, p++;
    else if (*p == 'M')
        mul = 1000000, p++;
    else if (*p == 'G')
        mul = 1000000000, p++;
    if (*p || v > UINT64_MAX / mul) return -1;
    *out = v * mul;
    return 0;
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

int cmd_gen_corpus(int argc, char **argv) {
    corpus_opts o;
    corpus_opts_init(&o);
    char *names_buf = NULL, *names[DATASET_MAX_DOMAINS];
    uint64_t train[DATASET_MAX_DOMAINS];
    int succ[DATASET_MAX_DOMAINS], succ_all[DATASET_MAX_DOMAINS], n_succ = 0;
    int n_names = 0, domains_given = 0, rc = 0;
    args_iter it;
    args_init(&it, argc, argv, 1);
    while (!rc && args_next(&it)) {
        const char *flag = it.flag, *val = NULL;
        if (!*flag) {
            rc = bad(it.value, "unexpected argument");
            break;
        }
        if (!strcmp(flag, "--help") || !strcmp(flag, "-h")) {
            print_usage(stdout);
            free(names_buf);
            return 0;
        }
        static const char *const known[] = {"--out",          "--names",      "--train-tokens",
                                            "--domains",      "--val-tokens", "--test-tokens",
                                            "--shard-tokens", "--vocab",      "--seed",
                                            "--order", "--successors"};
        int is_known = 0;
        for (size_t k = 0; k < sizeof known / sizeof *known; k++)
            is_known |= !strcmp(flag, known[k]);
        if (!is_known) {
            rc = bad(flag, "unknown option");
            break;
        }
        tdm_err ve;
        if (args_value(&it, &val, &ve)) {
            rc = bad(flag, "missing value");
            break;
        }
        uint64_t v = 0;
        if (!strcmp(flag, "--out")) {
            if (!*val) rc = bad(flag, "empty directory name");
            o.out = val;
        } else if (!strcmp(flag, "--names")) {
            free(names_buf);
            names_buf = strdup(val);
            if (!names_buf)
                rc = bad(flag, "out of memory");
            else if ((n_names = split_list(names_buf, names, DATASET_MAX_DOMAINS)) < 0)
                rc = bad(flag, "'%s' is not a comma list of 1..64 non-empty names", val);
        } else if (!strcmp(flag, "--train-tokens")) {
            char *copy = strdup(val), *items[DATASET_MAX_DOMAINS];
            int n = copy ? split_list(copy, items, DATASET_MAX_DOMAINS) : -1;
            for (int k = 0; k < n && n > 0; k++)
                if (parse_count(items[k], &train[k]) || train[k] == 0) n = -1;
            free(copy);
            if (n < 0) rc = bad(flag, "'%s' is not a count >= 1 or a comma list of them", val);
            o.train_tokens = train;
            o.n_train = n < 0 ? 0 : n;
        } else if (!strcmp(flag, "--domains")) {
            if (parse_count(val, &v) || v < 1 || v > DATASET_MAX_DOMAINS)
                rc = bad(flag, "'%s' is not a number of domains in 1..64", val);
            o.n_domains = (int)v;
            domains_given = 1;
        } else if (!strcmp(flag, "--val-tokens")) {
            if (parse_count(val, &o.val_tokens) || o.val_tokens == 0)
                rc = bad(flag, "'%s' is not a count >= 1", val);
        } else if (!strcmp(flag, "--test-tokens")) {
            if (parse_count(val, &o.test_tokens)) rc = bad(flag, "'%s' is not a count", val);
        } else if (!strcmp(flag, "--shard-tokens")) {
            if (parse_count(val, &o.shard_tokens) || o.shard_tokens == 0 ||
                o.shard_tokens > 2147483647u)
                rc = bad(flag, "'%s' is not a count in 1..2147483647", val);
        } else if (!strcmp(flag, "--vocab")) {
            if (parse_count(val, &v) || v < 1 || v > 65536)
                rc = bad(flag, "'%s' is not a vocabulary size in 1..65536", val);
            o.vocab = (int)v;
        } else if (!strcmp(flag, "--successors")) {
            char *copy = strdup(val), *items[DATASET_MAX_DOMAINS];
            int n = copy ? split_list(copy, items, DATASET_MAX_DOMAINS) : -1;
            for (int k = 0; k < n && n > 0; k++)
                if (parse_count(items[k], &v) || v < 1 || v > 65536) n = -1;
                else succ[k] = (int)v;
            free(copy);
            if (n < 0) rc = bad(flag, "'%s' is not a count >= 1 or a comma list of them", val);
            n_succ = n < 0 ? 0 : n;
        } else if (!strcmp(flag, "--order")) {
            if (parse_count(val, &v) || v < 1 || v > 2) rc = bad(flag, "'%s' is not 1 or 2", val);
            o.order = (int)v;
        } else if (!strcmp(flag, "--seed")) {
            if (parse_count(val, &o.seed))
                rc = bad(flag, "'%s' is not a non-negative integer", val);
        }
    }
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
