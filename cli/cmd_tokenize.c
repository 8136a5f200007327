/* cmd_tokenize.c — `tandem tokenize --tokenizer PATH [--pattern P] [--threads N]
 * [--count] FILE...`: the token ids of each file with a real tokenizer (data/tokenizer.h),
 * one line per file, ids separated by spaces; `--count`: "TOKENS<TAB>FILE" per file and
 * a total. A way to check a tokenizer file and what it makes of a corpus before prep. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmds.h"
#include "cli/opts.h"
#include "data/tokenizer.h"
#include "data/utf8.h"
#include "util/buf.h"
#include "util/fileio.h"

static const cli_opt OPTS[] = {
    {"--tokenizer", CLI_STR, "PATH",
     "(required) a tokenizer.json (byte-level BPE) or a tiktoken ranks file", NULL, 0, 0, NULL,
     NULL},
    {"--pattern", CLI_STR, "P",
     "the pre-tokenizer of a ranks file: gpt2|r50k|cl100k|o200k|llama3|qwen2\n(a tokenizer.json "
     "says its own)",
     NULL, 0, 0, NULL, NULL},
    {"--threads", CLI_INT, "N", "encoding threads (default: all cores)", NULL, 1, 1024, NULL, NULL},
    {"--count", CLI_SWITCH, NULL, "print the number of tokens of each file, not the ids", NULL, 0,
     0, NULL, NULL},
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {
    "tokenize",
    "FILE... --tokenizer PATH",
    1,
    CLI_MAX_ARGS,
    "a FILE is required",
    "Encodes ordinary text: special tokens written in a file are not matched.",
    OPTS,
    NULL};

/* The whole of path in *data (malloc'd), *n: 0, ERR_USAGE or ERR_INTERNAL. The whole file; a FIFO or a device is refused at once (it blocked, or never ended:
 * /dev/zero ran out of memory), as are files past 16 GiB. */
static int slurp(const char *path, char **data, size_t *n, tdm_err *e) {
    if (!path[0]) return err_set(e, ERR_USAGE, "a FILE is '' (empty): name a text file"); /* was ": No such file" */
    buf_t b = {0};
    if (fileio_read_all(path, &b, (size_t)1 << 34)) {
        int err = errno;
        buf_free(&b);
        return err_set(e, err == ENOMEM ? ERR_INTERNAL : ERR_USAGE, "%s: %s", path,
                       err == EFBIG ? "larger than 16 GiB: split it" : fileio_strerror(err));
    }
    *n = b.n;
    *data = b.p ? b.p : calloc(1, 1);
    return *data ? 0 : err_set(e, ERR_INTERNAL, "out of memory");
}

static int run_tokenize(const cli_args *a) {
    const char *path = cli_str(a, "--tokenizer", NULL);
    if (!path) {
        fprintf(stderr, "tandem tokenize: --tokenizer PATH is required\n");
        cli_usage(a->spec, stderr);
        return ERR_USAGE;
    }
    tdm_err e = {0};
    tokenizer *t;
    int rc = tokenizer_load(path, cli_str(a, "--pattern", NULL), &t, &e);
    int threads = (int)cli_int(a, "--threads", 0), count = cli_given(a, "--count") > 0;
    unsigned long long total = 0;
    for (int i = 0; i < a->nargs && !rc; i++) {
        char *data = NULL;
        size_t n = 0;
        tok_ids ids = {0};
        rc = slurp(a->arg[i], &data, &n, &e);
        if (rc) break;
        /* text is UTF-8: prep leaves out a file that is not, and tokenizers that take
         * strings (Hugging Face's) cannot be given its bytes, so the ids here would match
         * nothing a user compares them with (a hunt: they were encoded silently) */
        utf8_state u = {0};
        size_t bad = utf8_scan(&u, (const unsigned char *)data, n);
        if (bad < n || !utf8_done(&u)) {
            free(data);
            rc = err_set(&e, ERR_USAGE, "%s: %s at byte %zu: tokenize reads UTF-8 text (prep leaves such a file "
                         "out); convert it first, e.g. iconv -f LATIN1 -t UTF-8", a->arg[i],
                         bad < n ? "bytes that are not UTF-8" : "the file ends inside a UTF-8 character",
                         bad < n ? bad : n - u.seen);
            break;
        }
        rc = tokenizer_encode_parallel(t, data, n, threads, &ids, &e);
        if (rc) err_prefix(&e, "%s: ", a->arg[i]);
        free(data);
        if (!rc && count) {
            printf("%zu\t%s\n", ids.n, a->arg[i]);
            total += ids.n;
        } else if (!rc) {
            for (size_t k = 0; k < ids.n; k++) printf(k ? " %u" : "%u", ids.v[k]);
            putchar('\n');
        }
        tok_ids_free(&ids);
    }
    if (!rc && count && a->nargs > 1) printf("%llu\ttotal\n", total);
    if (rc) fprintf(stderr, "tandem tokenize: %s\n", e.msg);
    tokenizer_free(t);
    return rc;
}

int cmd_tokenize(int argc, char **argv) { return cli_run(&SPEC, run_tokenize, argc, argv); }
