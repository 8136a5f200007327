/* cmd_prep.c — `tandem prep`: command-line front end of data/prep.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/prep.h"
#include "data/shard.h"
#include "runner/args.h"
#include "cli/cmds.h"
#include "cli/opts.h"

#define STR_(x) #x
#define STR(x) STR_(x) /* a default as text, for --help */

static const cli_opt OPTS[] = {
    {"--domain", CLI_LIST, "NAME=PATH",
     "a text file or a directory of them for domain NAME; repeat it\n"
     "to add paths to a domain or to add domains (at most 64).\n"
     "Directories are walked recursively, reading regular files\n"
     "only; symlinks and special files inside are skipped (counted\n"
     "in the summary), never followed. NAME: 1..64 of [A-Za-z0-9_.-]\n"
     "(required)",
     NULL, 0, 0, NULL, NULL},
    {"--out", CLI_STR, "DIR", "output directory (created if missing; required)", NULL, 0, 0, NULL, NULL},
    {"--split", CLI_STR, "T,V[,E]",
     "train,val,test fractions, each >= 0, summing to 1; train and\n"
     "val > 0; test 0 or left out: no test split (default 0.9,0.05,0.05)",
     NULL, 0, 0, NULL, NULL},
    {"--block-bytes", CLI_STR, "N",
     "bytes per block, the unit the split assigns (default " STR(PREP_DEFAULT_BLOCK_BYTES) ")",
     NULL, 0, 0, NULL, NULL},
    {"--shard-tokens", CLI_STR, "N", "most tokens per shard file (default " STR(PREP_DEFAULT_SHARD_TOKENS) ")",
     NULL, 0, 0, NULL, NULL},
    {"--seed", CLI_STR, "S", "seed of the block assignment (default " STR(PREP_DEFAULT_SEED) ")",
     NULL, 0, 0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};

static void more_help(FILE *f) {
    fprintf(f,
            "A domain's text is its files in sorted path order, each non-empty file followed by\n"
            "one '\\n' (empty files add nothing), cut into blocks of --block-bytes. Block k of the\n"
            "m-th domain (in order of first --domain) goes to train, val or test by a Philox hash\n"
            "of (seed, m, k) against the cumulative fractions; each split holds its blocks in\n"
            "order, so the three splits partition the text. A split with a fraction > 0 that the\n"
            "hash gives no block (a small domain) gets the block whose hash lies nearest its\n"
            "range; a domain with fewer blocks than such splits is refused, naming the bytes it\n"
            "needs. Refused before anything is written: missing or unreadable paths, the same\n"
            "file twice, bad names or fractions, an --out inside an input directory, and shards\n"
            "in DIR/<NAME>/ that this run would not overwrite.\n"
            "\n"
            "Counts accept k, M, G (x1000) and Ki, Mi, Gi (x1024) suffixes. Prints one line per\n"
            "domain (files, tokens, and tokens, blocks and shards per split); progress lines for\n"
            "domains over 256 MiB go to stderr.\n");
}

static const cli_spec SPEC = {
    "prep", "", 0, 0, NULL,
    "Turns text files into a dataset for any text without a tokenizer download: a\n"
    "byte-level tokenizer (vocab 256, each byte is one token; any bytes, UTF-8 or not),\n"
    "per domain train/val/test llm.c token shards under DIR/<NAME>/ and DIR/dataset.yaml\n"
    "describing them. Same inputs and options, same bytes.",
    OPTS, more_help};

static void prep_free_inputs(prep_input *in, int n) {
    for (int i = 0; i < n; i++) free((char *)in[i].name);
    free(in);
}

/* "T,V" or "T,V,E" into split[3]; -1 on anything else. */
static int prep_parse_split(const char *s, double split[3]) {
    char *copy = strdup(s);
    if (!copy) return -1;
    int n = 0, bad = 0;
    for (char *tok = copy; !bad;) {
        char *comma = strchr(tok, ',');
        if (comma) *comma = '\0';
        if (n == 3 || args_parse_double(tok, &split[n])) bad = 1;
        n++;
        if (!comma) break;
        tok = comma + 1;
    }
    free(copy);
    if (bad || n < 2) return -1;
    if (n == 2) split[2] = 0;
    return 0;
}

/* The values are checked here, not by the rows: NAME=PATH pairs, split fractions, counts
 * with k/M/G/Ki/Mi/Gi suffixes and a 64-bit seed (the messages as before). */
static int run_prep(const cli_args *a) {
    prep_opts o;
    prep_opts_init(&o);
    prep_input *inputs = NULL;
    int n_inputs = 0, ndomain = 0, rc = 0;
    tdm_err e = {0};
    const char *v;
    uint64_t u = 0;
    char **domains = cli_list(a, "--domain", &ndomain);
    if (ndomain && !(inputs = calloc((size_t)ndomain, sizeof *inputs)))
        rc = err_set(&e, ERR_INTERNAL, "out of memory");
    for (int i = 0; !rc && i < ndomain; i++) {
        v = domains[i];
        const char *eq = strchr(v, '=');
        if (!eq || eq == v || !eq[1]) {
            rc = err_set(&e, ERR_USAGE, "--domain: '%s' is not NAME=PATH", v);
            break;
        }
        char *name = strndup(v, (size_t)(eq - v));
        if (!name) {
            rc = err_set(&e, ERR_INTERNAL, "out of memory");
            break;
        }
        inputs[n_inputs].name = name;
        inputs[n_inputs++].path = eq + 1;
    }
    if (!rc && (v = cli_str(a, "--out", NULL))) {
        if (!*v) rc = err_set(&e, ERR_USAGE, "--out: empty directory name");
        o.out = v;
    }
    if (!rc && (v = cli_str(a, "--split", NULL)) && prep_parse_split(v, o.split))
        rc = err_set(&e, ERR_USAGE,
                     "--split: '%s' is not train,val[,test] fractions such as 0.9,0.05,0.05", v);
    if (!rc && (v = cli_str(a, "--block-bytes", NULL)))
        if (args_parse_count(v, &o.block_bytes) || o.block_bytes == 0)
            rc = err_set(&e, ERR_USAGE, "--block-bytes: '%s' is not a count >= 1", v);
    if (!rc && (v = cli_str(a, "--shard-tokens", NULL))) {
        if (args_parse_count(v, &u) || u == 0 || u > SHARD_MAX_TOKENS)
            rc = err_set(&e, ERR_USAGE, "--shard-tokens: '%s' is not a count in 1..%u", v, SHARD_MAX_TOKENS);
        o.shard_tokens = u;
    }
    if (!rc && (v = cli_str(a, "--seed", NULL)) && args_parse_u64(v, &o.seed))
        rc = err_set(&e, ERR_USAGE, "--seed: '%s' is not a non-negative integer", v);
    if (!rc && !n_inputs) rc = err_set(&e, ERR_USAGE, "--domain NAME=PATH is required");
    if (!rc && !o.out) rc = err_set(&e, ERR_USAGE, "--out DIR is required");
    if (rc) {
        fprintf(stderr, "tandem prep: %s (see tandem prep --help)\n", e.msg);
        prep_free_inputs(inputs, n_inputs);
        return rc;
    }
    o.inputs = inputs;
    o.n_inputs = n_inputs;
    if (prep_run(&o, &e)) {
        fprintf(stderr, "tandem %s\n", e.msg); /* the message starts "prep: " */
        rc = e.code;
    } else {
        printf("wrote %s/dataset.yaml\n", o.out);
    }
    prep_free_inputs(inputs, n_inputs);
    return rc;
}

int cmd_prep(int argc, char **argv) { return cli_run(&SPEC, run_prep, argc, argv); }
