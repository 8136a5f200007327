/* cmd_prep.c — `tandem prep`: command-line front end of data/prep.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/docread.h"
#include "data/prep.h"
#include "data/shard.h"
#include "util/args.h"
#include "util/outfile.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "report/progress.h"

#define STR_(x) #x
#define STR(x) STR_(x) /* a default as text, for --help */

static const cli_opt OPTS[] = {
    {"--domain", CLI_LIST, "NAME=PATH",
     "text for domain NAME; repeat it to add paths to a domain or to\n"
     "add domains (at most 64). PATH: a file, a directory (walked\n"
     "recursively, regular files only; symlinks and special files\n"
     "inside are counted, never followed; hidden ones, .git or .env,\n"
     "left out) or a quoted glob that tandem\n"
     "expands ('py=src/**/*.py': ** is any depth). NAME: 1..64 of\n"
     "[A-Za-z0-9_.-] (required)",
     NULL, 0, 0, NULL, NULL},
    {"--exclude", CLI_LIST, "NAME=GLOB",
     "leave out domain NAME's files that GLOB matches anywhere in\n"
     "their path ('py=*.pyc', 'py=tests', 'web=/abs/path/**'); repeat it",
     NULL, 0, 0, NULL, NULL},
    {"--text-field", CLI_LIST, "[NAME=]F",
     "the string field of a .jsonl/.json record, or the string\n"
     "column of a .parquet file, that is its text (default\n"
     PREP_DEFAULT_TEXT_FIELD "); NAME=F for domain NAME alone; repeat it",
     NULL, 0, 0, NULL, NULL},
    {"--out", CLI_STR, "DIR", "output directory (created if missing; required)", NULL, 0, 0, NULL, NULL},
    {"--split", CLI_STR, "T,V[,E]",
     "train,val,test fractions of the documents, each >= 0, summing\n"
     "to 1; train and val > 0; test 0 or left out: no test split\n"
     "(default 0.9,0.05,0.05)",
     NULL, 0, 0, NULL, NULL},
    {"--shard-tokens", CLI_STR, "N", "most tokens per shard file (default " STR(PREP_DEFAULT_SHARD_TOKENS) ")",
     NULL, 0, 0, NULL, NULL},
    {"--seed", CLI_STR, "S", "seed of the document split (default " STR(PREP_DEFAULT_SEED) ")",
     NULL, 0, 0, NULL, NULL},
    {"--tokenizer", CLI_STR, "FILE",
     "encode with this tokenizer instead of bytes: a Hugging Face\n"
     "tokenizer.json (byte-level BPE) or a tiktoken ranks file; each\n"
     "document is followed by its end-of-text id (default: byte-level)",
     NULL, 0, 0, NULL, NULL},
    {"--pattern", CLI_STR, "P",
     "the pre-tokenizer of a ranks file: gpt2|r50k|cl100k|o200k|llama3|\n"
     "qwen2 (a tokenizer.json says its own)",
     NULL, 0, 0, NULL, NULL},
    {"--eot-token", CLI_STR, "STRING",
     "the token put after each document, by its text (an added token\n"
     "such as '<|im_end|>'); required when the tokenizer has no\n"
     "<|endoftext|>, <|end_of_text|> or </s>",
     NULL, 0, 0, NULL, NULL},
    {"--threads", CLI_INT, "N", "encoding threads with --tokenizer (default: all cores); the\n"
     "tokens do not depend on it", NULL, 1, 1024, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};

static void more_help(FILE *f) {
    fprintf(f,
            "Formats by name: *.jsonl (a JSON object per line), *.json (an object or an array\n"
            "of objects): the document is the record's --text-field string, escapes decoded;\n"
            "*.parquet: each row's --text-field column (a top-level string column; PLAIN,\n"
            "dictionary or DELTA_*_BYTE_ARRAY; uncompressed, snappy, gzip or zstd pages;\n"
            "nulls skipped and counted); any other file is plain text, one document. All but\n"
            ".parquet may be .gz or .zst.\n"
            "Left out, counted and reported (stderr, the first %d per reason with file:line):\n"
            "binary files (a NUL byte anywhere, or non-UTF-8 bytes in the first %d), invalid\n"
            "UTF-8, bad JSON lines, records without the field, unreadable files, corrupt\n"
            "compressed streams, symlinks and special files inside directories (not followed).\n"
            "Empty and excluded files are counted in the summary only.\n"
            "\n"
            "A domain's documents come in sorted path order, each followed by one '\\n' (the\n"
            "byte-level end-of-text) or, with --tokenizer, by the tokenizer's end-of-text id\n"
            "(a document is encoded whole, as `tandem tokenize` would). Shards hold uint16\n"
            "tokens (llm.c's 20240520 format) up to vocab 65536, uint32 ones (20240801) above;\n"
            "with --tokenizer, dataset.yaml also records tokenizer, tokenizer_sha256 and eot.\n"
            "\n"
            "Document k of domain NAME goes to train, val or test by a Philox hash of (seed,\n"
            "NAME, k) against the cumulative fractions, so the order of the arguments does\n"
            "not matter. A split with a fraction > 0 that the hash gives no\n"
            "document (a small domain) gets the document whose hash lies nearest its range; a\n"
            "domain with fewer documents than such splits is refused. Refused before anything\n"
            "is written: missing paths, globs matching nothing, the same file twice, bad names\n"
            "or fractions, an --out inside an input directory, and shards in DIR/<NAME>/ that\n"
            "this run would not overwrite.\n"
            "\n"
            "Counts accept k, M, G (x1000) and Ki, Mi, Gi (x1024) suffixes. Prints a table\n"
            "(files, documents, text bytes, tokens, and per split documents/tokens/shards) and\n"
            "what was left out per domain; progress lines for long inputs go to stderr when it is a\n"
            "terminal.\n",
            PREP_ISSUES_SHOWN, TEXTSRC_SNIFF_BYTES);
}

static const cli_spec SPEC = {
    "prep", "--domain NAME=PATH ... --out DIR", 0, 0, NULL,
    "Turns text files, JSON lines and JSON records (plain, .gz or .zst) into a dataset:\n"
    "tokens of a byte-level tokenizer (vocab 256, each byte of the UTF-8 text is one\n"
    "token; no download) or of --tokenizer FILE, per domain train/val/test llm.c token\n"
    "shards under DIR/<NAME>/ and DIR/dataset.yaml describing them. Same inputs and\n"
    "options, same bytes (whatever --threads).",
    OPTS, more_help};

static void prep_free_inputs(prep_input *in, int n) {
    for (int i = 0; i < n && in; i++) free((char *)in[i].name);
    free(in);
}

/* The NAME=VALUE values of list option `opt` into a new array (*out, *n); the name part
 * is copied, the value points into the argument. */
static int prep_pairs(const cli_args *a, const char *opt, const char *what, prep_input **out,
                      int *n, tdm_err *e) {
    int nv = 0;
    char **vals = cli_list(a, opt, &nv);
    *out = NULL;
    *n = 0;
    if (nv && !(*out = calloc((size_t)nv, sizeof **out)))
        return err_set(e, ERR_INTERNAL, "out of memory");
    for (int i = 0; i < nv; i++) {
        const char *v = vals[i], *eq = strchr(v, '=');
        if (!eq || eq == v || !eq[1])
            return err_set(e, ERR_USAGE, "%s: '%s' is not %s", opt, v, what);
        char *name = strndup(v, (size_t)(eq - v));
        if (!name) return err_set(e, ERR_INTERNAL, "out of memory");
        (*out)[*n].name = name;
        (*out)[(*n)++].path = eq + 1;
    }
    return 0;
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

/* The values are checked here, not by the rows: NAME=PATH and NAME=GLOB pairs, split
 * fractions, counts with k/M/G/Ki/Mi/Gi suffixes and a 64-bit seed. */
static int run_prep(const cli_args *a) {
    prep_opts o;
    prep_opts_init(&o);
    if (!progress_on_terminal()) o.progress = NULL; /* a log or a pipe gets the table alone */
    prep_input *inputs = NULL, *excludes = NULL;
    int n_inputs = 0, n_excludes = 0, rc = 0;
    tdm_err e = {0};
    const char *v;
    uint64_t u = 0;
    rc = prep_pairs(a, "--domain", "NAME=PATH", &inputs, &n_inputs, &e);
    if (!rc) rc = prep_pairs(a, "--exclude", "NAME=GLOB", &excludes, &n_excludes, &e);
    /* --text-field F for every domain, NAME=F for one (NAME one of the --domain names) */
    int ntf = 0;
    char **tfs = cli_list(a, "--text-field", &ntf);
    prep_input *fields = NULL;
    int n_fields = 0;
    const char *every = NULL; /* the F of `--text-field F` */
    if (!rc && ntf && !(fields = calloc((size_t)ntf, sizeof *fields))) rc = err_set(&e, ERR_INTERNAL, "out of memory");
    for (int i = 0; !rc && i < ntf; i++) {
        const char *t = tfs[i], *eq = strchr(t, '=');
        int named = 0;
        for (int k = 0; eq && k < n_inputs; k++)
            named |= strlen(inputs[k].name) == (size_t)(eq - t) && !strncmp(inputs[k].name, t, (size_t)(eq - t));
        /* a field given twice for the same domains is refused: which one counts would be a guess */
        for (int k = 0; named && !rc && k < n_fields; k++)
            if (strlen(fields[k].name) == (size_t)(eq - t) && !strncmp(fields[k].name, t, (size_t)(eq - t)))
                rc = err_set(&e, ERR_USAGE, "--text-field: domain '%s' is given a field twice ('%s' and '%s')",
                             fields[k].name, fields[k].path, eq + 1);
        if (rc) break;
        if (named) {
            char *name = strndup(t, (size_t)(eq - t));
            if (!name) rc = err_set(&e, ERR_INTERNAL, "out of memory");
            else fields[n_fields].name = name, fields[n_fields++].path = eq + 1;
        } else if (!*t) {
            rc = err_set(&e, ERR_USAGE, "--text-field: empty field name");
        } else if (every) {
            rc = err_set(&e, ERR_USAGE,
                         "--text-field: the field of every domain is given twice ('%s' and '%s'); "
                         "give NAME=FIELD for one domain", every, t);
        } else {
            o.text_field = every = t;
        }
    }
    o.text_fields = fields;
    o.n_text_fields = n_fields;
    if (!rc && (v = cli_str(a, "--out", NULL))) {
        if (!*v) rc = err_set(&e, ERR_USAGE, "--out: empty directory name");
        else rc = outfile_check_local("--out", v, &e);
        o.out = v;
    }
    if (!rc && (v = cli_str(a, "--split", NULL)) && prep_parse_split(v, o.split))
        rc = err_set(&e, ERR_USAGE,
                     "--split: '%s' is not train,val[,test] fractions such as 0.9,0.05,0.05", v);
    if (!rc && (v = cli_str(a, "--shard-tokens", NULL))) {
        if (args_parse_count(v, &u) || u < PREP_MIN_SHARD_TOKENS || u > SHARD_MAX_TOKENS)
            rc = err_set(&e, ERR_USAGE, "--shard-tokens: '%s' is not a count in %d..%u (a training window of "
                         "train.seq + 1 tokens lies within one shard)", v, PREP_MIN_SHARD_TOKENS, SHARD_MAX_TOKENS);
        o.shard_tokens = u;
    }
    if (!rc && (v = cli_str(a, "--seed", NULL)) && args_parse_u64(v, &o.seed))
        rc = err_set(&e, ERR_USAGE, "--seed: '%s' is not a non-negative integer", v);
    if (!rc && (v = cli_str(a, "--tokenizer", NULL))) {
        if (!*v) rc = err_set(&e, ERR_USAGE, "--tokenizer: empty file name");
        o.tokenizer = v;
    }
    if (!rc && (v = cli_str(a, "--pattern", NULL))) o.pattern = v;
    if (!rc && (v = cli_str(a, "--eot-token", NULL))) {
        if (!*v) rc = err_set(&e, ERR_USAGE, "--eot-token: empty token");
        o.eot_token = v;
    }
    if (!rc && (o.pattern || o.eot_token) && !o.tokenizer)
        rc = err_set(&e, ERR_USAGE, "%s needs --tokenizer FILE",
                     o.pattern ? "--pattern" : "--eot-token");
    o.threads = (int)cli_int(a, "--threads", 0);
    if (!rc && !n_inputs) rc = err_set(&e, ERR_USAGE, "--domain NAME=PATH is required");
    if (!rc && !o.out) rc = err_set(&e, ERR_USAGE, "--out DIR is required");
    if (rc) {
        fprintf(stderr, "tandem prep: %s (see tandem prep --help)\n", e.msg);
        prep_free_inputs(inputs, n_inputs);
        prep_free_inputs(excludes, n_excludes);
        prep_free_inputs(fields, n_fields);
        return rc;
    }
    o.inputs = inputs;
    o.n_inputs = n_inputs;
    o.excludes = excludes;
    o.n_excludes = n_excludes;
    if (prep_run(&o, &e)) {
        fprintf(stderr, "tandem %s\n", e.msg); /* the message starts "prep: " */
        rc = e.code;
    } else {
        printf("wrote %s/dataset.yaml\n", o.out);
    }
    prep_free_inputs(inputs, n_inputs);
    prep_free_inputs(excludes, n_excludes);
    prep_free_inputs(fields, n_fields);
    return rc;
}

int cmd_prep(int argc, char **argv) { return cli_run(&SPEC, run_prep, argc, argv); }
