/* cmd_eval.c — `tandem eval STORE [--split test|val] [--max-tokens N] [--json]`: the
 * per-domain loss and perplexity of a run's newest verified state on a split, read in
 * order (every window of T+1 tokens at stride T, no sampling), and "Average" =
 * exp(mean of the per-domain losses) as the paper's tables report it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "util/args.h"
#include "cli/cmds.h"
#include "cli/opts.h"
#include "model/blas_core.h"
#include "runner/evaluate.h"
#include "util/json.h"

static const cli_opt OPTS[] = {
    {"--split", CLI_STR, NULL, "the split to evaluate (default test)", "test|val|train", 0, 0, NULL, NULL},
    {"--max-tokens", CLI_STR, "N", "at most N target tokens per domain (500k, 2M, 64Ki), in whole windows of\ntrain.seq (default all)", NULL, 0, 0, NULL, NULL},
    {"--state", CLI_STR, "SEQ", "evaluate the kept state states/SEQ.mp instead of the newest", NULL, 0, 0, NULL, NULL},
    {"--json", CLI_SWITCH, NULL, "the result as one JSON object on stdout", NULL, 0, 0, NULL, NULL},
    CLI_FORMAT_TABLE_JSON,
    {NULL, 0, NULL, NULL, NULL, 0, 0, NULL, NULL},
};
static const cli_spec SPEC = {"eval", "STORE", 1, 1, "a STORE is required",
                              "Per-domain loss and perplexity of a run's newest verified state (or --state) on\n"
                              "a split, every window read in order, and their Average = exp(mean loss).",
                              OPTS, NULL};

/* A non-negative integer option into *out: uint64_t, which a CLI_INT row (a long) cannot
 * hold, so its row is a CLI_STR checked here as before; a usage error naming it. */
static int u64_opt(const cli_args *a, const char *name, uint64_t *out, tdm_err *e) {
    const char *v = cli_str(a, name, NULL);
    if (v && args_parse_u64(v, out))
        return err_set(e, ERR_USAGE, "%s: '%s' is not a non-negative integer", name, v);
    return 0;
}

static int run_eval(const cli_args *a) {
    const char *url = a->arg[0], *split_name = cli_str(a, "--split", "test");
    uint64_t max_tokens = UINT64_MAX, state_seq = 0;
    int json = cli_json(a), have_state = cli_given(a, "--state") > 0;
    tdm_err e = {0};
    int rc = 0;
    const char *mt = cli_str(a, "--max-tokens", NULL);
    /* a count, as gen-corpus takes token counts: 500k, 2M, 64Ki (a hunt: "2M", and a number
     * past 2^64, were each "not a non-negative integer") */
    if (mt && args_parse_count(mt, &max_tokens))
        rc = err_set(&e, ERR_USAGE, "--max-tokens %s: give the most target tokens per domain to evaluate, a whole "
                     "number with an optional k, M, G (or Ki, Mi, Gi) below 2^64, or leave it out for all", mt);
    if (!rc && max_tokens == 0)
        rc = err_set(&e, ERR_USAGE, "--max-tokens 0 would evaluate nothing: give the most target tokens per "
                     "domain to evaluate (whole windows of train.seq), or leave it out for all");
    if (!rc) rc = u64_opt(a, "--state", &state_seq, &e);
    if (rc) {
        fprintf(stderr, "tandem eval: %s\n", e.msg);
        cli_usage(a->spec, stderr);
        if (json) json_document(stdout, rc, e.msg, NULL);
        return rc;
    }
    int split = -1;
    for (int s = 0; s < SPLIT_COUNT; s++)
        if (!strcmp(split_name, dataset_split_name(s))) split = s;
    if (split < 0) rc = err_set(&e, ERR_USAGE, "--split %s: use test, val or train", split_name);
    store *st = rc ? NULL : store_open_existing(url, STORE_OPEN_READ_ONLY, &e);
    if (!rc && !st) rc = e.code;
    eval_result r;
    if (!rc) rc = eval_store(st, split, max_tokens, have_state ? &state_seq : NULL, BLAS_PIN_EVAL, &r, &e);
    if (!rc) {
        int M = r.M;
        if (json) {
            /* names through util/json: a domain's name is the user's */
            printf("{\"run\":");
            json_str(stdout, r.run_id);
            printf(",\"split\":");
            json_str(stdout, split_name);
            printf(",\"seq\":%llu,\"domains\":{", (unsigned long long)r.seq);
            for (int m = 0; m < M; m++) {
                if (m) printf(",");
                json_key(stdout, r.names[m]);
                printf("{\"loss\":");
                json_num(stdout, r.loss[m]);
                printf(",\"ppl\":");
                json_num(stdout, exp(r.loss[m]));
                printf(",\"tokens\":%llu}", (unsigned long long)r.tokens[m]);
            }
            printf("},\"average_ppl\":");
            json_num(stdout, r.average_ppl);
            printf(",\"mean_loss\":");
            json_num(stdout, r.mean_loss);
            printf("}\n");
        } else {
            printf("%s (state %llu, step %s), %s split:\n", r.run_id, (unsigned long long)r.seq,
                   r.step, split_name);
            printf("  %-16s %12s %10s %12s\n", "domain", "tokens", "loss", "perplexity");
            for (int m = 0; m < M; m++)
                printf("  %-16s %12llu %10.4f %12.3f\n", r.names[m],
                       (unsigned long long)r.tokens[m], r.loss[m], exp(r.loss[m]));
            printf("  %-16s %12s %10.4f %12.3f\n", "Average", "", r.mean_loss, r.average_ppl);
        }
    }
    if (st) store_close(st);
    if (rc) fprintf(stderr, "tandem eval: %s\n", e.msg);
    if (rc && json) json_document(stdout, rc, e.msg, NULL); /* docs/json.md: the error object */
    return rc;
}

int cmd_eval(int argc, char **argv) { return cli_run(&SPEC, run_eval, argc, argv); }
