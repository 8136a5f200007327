/* cmd_eval.c — `tandem eval STORE [--split test|val] [--max-tokens N] [--json]`: the
 * per-domain loss and perplexity of a run's newest verified state on a split, read in
 * order (every window of T+1 tokens at stride T, no sampling), and "Average" =
 * exp(mean of the per-domain losses) as the paper's tables report it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "runner/args.h"
#include "cli/cmds.h"
#include "runner/evaluate.h"
#include "util/json.h"

int cmd_eval(int argc, char **argv) {
    const char *url = NULL, *split_name = "test";
    uint64_t max_tokens = UINT64_MAX, state_seq = 0;
    int json = 0, rc = 0, have_state = 0;
    tdm_err e = {0};
    args_iter it;
    args_init(&it, argc, argv, 1);
    while (!rc && args_next(&it)) {
        if (!it.flag[0]) {
            rc = args_positional(&it, &url, "STORE", &e);
        } else if (!strcmp(it.flag, "--help")) {
            printf("usage: tandem eval STORE [--split test|val|train] [--max-tokens N] [--state SEQ] "
                   "[--json]\n"
                   "  --state SEQ   evaluate the kept state states/SEQ.mp instead of the newest\n");
            return 0;
        } else if (!strcmp(it.flag, "--split")) {
            rc = args_value(&it, &split_name, &e);
        } else if (!strcmp(it.flag, "--max-tokens")) {
            rc = args_u64(&it, &max_tokens, &e);
        } else if (!strcmp(it.flag, "--state")) {
            rc = args_u64(&it, &state_seq, &e);
            have_state = 1;
        } else if (!strcmp(it.flag, "--json")) {
            json = 1;
        } else {
            rc = err_set(&e, ERR_USAGE, "unknown option %s", it.flag);
        }
    }
    int split = -1;
    for (int s = 0; s < SPLIT_COUNT; s++)
        if (!strcmp(split_name, dataset_split_name(s))) split = s;
    if (!rc && split < 0) rc = err_set(&e, ERR_USAGE, "--split %s: use test, val or train", split_name);
    if (!rc && !url) rc = err_set(&e, ERR_USAGE, "a STORE is required");
    store *st = rc ? NULL : store_open_existing(url, STORE_OPEN_READ_ONLY, &e);
    if (!rc && !st) rc = e.code;
    eval_result r;
    if (!rc) rc = eval_store(st, split, max_tokens, have_state ? &state_seq : NULL, &r, &e);
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
    return rc;
}
