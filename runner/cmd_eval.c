/* cmd_eval.c — `tandem eval STORE [--split test|val] [--max-tokens N] [--json]`: the
 * per-domain loss and perplexity of a run's newest verified state on a split, read in
 * order (every window of T+1 tokens at stride T, no sampling), and "Average" =
 * exp(mean of the per-domain losses) as the paper's tables report it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "model/model.h"
#include "runner/args.h"
#include "runner/ckpt.h"
#include "runner/cmds.h"
#include "runner/pin.h"

/* Mean token loss of `params` on domain m's split, over at most max_tokens targets. */
static int eval_domain(const model_ops *ops, model_ctx *ctx, const float *params, const dataset *ds,
                       int m, int split, int B, int T, uint64_t max_tokens, double *loss,
                       uint64_t *tokens, tdm_err *e) {
    uint16_t *tok = malloc((size_t)B * (T + 1) * sizeof *tok);
    int32_t *dom = malloc((size_t)B * sizeof *dom);
    if (!tok || !dom) {
        free(tok), free(dom);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    double sum = 0;
    uint64_t count = 0;
    size_t nsh = 0;
    const shard *sh = dataset_shards(ds, m, split, &nsh);
    int rows = 0, rc = 0;
    double l[128];
    long nt[128];
    for (size_t s = 0; s < nsh && !rc && count < max_tokens; s++) {
        for (size_t start = 0; start + (size_t)T + 1 <= sh[s].n && count < max_tokens; start += (size_t)T) {
            memcpy(tok + (size_t)rows * (T + 1), sh[s].tok + start, (size_t)(T + 1) * sizeof *tok);
            dom[rows++] = 0;
            count += (uint64_t)T;
            if (rows == B) {
                model_batch b = {.B = rows, .T = T, .tokens = tok, .domain = dom};
                if ((rc = ops->forward(ctx, params, &b, l, nt, e))) break;
                sum += l[0] * (double)nt[0];
                rows = 0;
            }
        }
    }
    if (!rc && rows) {
        model_batch b = {.B = rows, .T = T, .tokens = tok, .domain = dom};
        rc = ops->forward(ctx, params, &b, l, nt, e);
        if (!rc) sum += l[0] * (double)nt[0];
    }
    free(tok);
    free(dom);
    if (rc) return rc;
    if (count == 0)
        return err_set(e, ERR_USAGE, "domain %s has no %s window of %d tokens", dataset_domain_name(ds, m),
                       dataset_split_name(split), T + 1);
    *loss = sum / (double)count;
    *tokens = count;
    return 0;
}

int cmd_eval(int argc, char **argv) {
    const char *url = NULL, *split_name = "test";
    uint64_t max_tokens = UINT64_MAX;
    int json = 0, rc = 0;
    tdm_err e = {0};
    args_iter it;
    args_init(&it, argc, argv, 1);
    while (!rc && args_next(&it)) {
        if (!it.flag[0]) {
            rc = args_positional(&it, &url, "STORE", &e);
        } else if (!strcmp(it.flag, "--help")) {
            printf("usage: tandem eval STORE [--split test|val|train] [--max-tokens N] [--json]\n");
            return 0;
        } else if (!strcmp(it.flag, "--split")) {
            rc = args_value(&it, &split_name, &e);
        } else if (!strcmp(it.flag, "--max-tokens")) {
            rc = args_u64(&it, &max_tokens, &e);
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
    store *st = rc ? NULL : store_open(url, &e);
    if (!rc && !st) rc = e.code;
    config cfg;
    char run_id[64] = "";
    dataset ds;
    memset(&ds, 0, sizeof ds);
    model_layout lay;
    memset(&lay, 0, sizeof lay);
    ckpt *ck = NULL;
    model_ctx *ctx = NULL;
    const model_ops *ops = &model_cpu_ops;
    float *params = NULL;
    if (!rc) rc = pin_read(st, &cfg, run_id, sizeof run_id, &e);
    if (!rc) rc = dataset_load(&ds, cfg.data.dataset, &e);
    if (!rc) {
        model_config mc = {.vocab = cfg.model.vocab ? cfg.model.vocab : ds.vocab, .ctx = cfg.model.ctx,
                           .layers = cfg.model.layers, .heads = cfg.model.heads, .channels = cfg.model.channels};
        rc = model_layout_init(&lay, &mc, &e);
    }
    rec_state rec;
    memset(&rec, 0, sizeof rec);
    int found = 0;
    if (!rc && !(ck = ckpt_open(st, &lay, 64u << 20, &e))) rc = e.code;
    if (!rc) rc = ckpt_load(ck, &rec, &found, &e);
    if (!rc && !found) rc = err_set(&e, ERR_USAGE, "%s holds no committed state to evaluate", url);
    int B = cfg.train.batch, T = cfg.train.seq, M = dataset_n_domains(&ds);
    if (!rc && !(ctx = ops->create(&lay, B, T, 1, cfg.run.threads, &e))) rc = e.code;
    if (!rc && !(params = ops->alloc(ctx, lay.numel))) rc = err_set(&e, ERR_INTERNAL, "out of memory");
    if (!rc) rc = ops->upload(ctx, params, ckpt_host(ck, 0), lay.numel, &e);
    double loss[64];
    uint64_t tokens[64];
    for (int m = 0; !rc && m < M; m++)
        rc = eval_domain(ops, ctx, params, &ds, m, split, B, T, max_tokens, &loss[m], &tokens[m], &e);
    if (!rc) {
        double mean = 0;
        for (int m = 0; m < M; m++) mean += loss[m] / M;
        if (json) {
            printf("{\"run\":\"%s\",\"split\":\"%s\",\"seq\":%llu,\"domains\":{", run_id, split_name,
                   (unsigned long long)rec.seq);
            for (int m = 0; m < M; m++)
                printf("%s\"%s\":{\"loss\":%.17g,\"ppl\":%.17g,\"tokens\":%llu}", m ? "," : "",
                       dataset_domain_name(&ds, m), loss[m], exp(loss[m]), (unsigned long long)tokens[m]);
            printf("},\"average_ppl\":%.17g,\"mean_loss\":%.17g}\n", exp(mean), mean);
        } else {
            printf("%s (state %llu, step %s), %s split:\n", run_id, (unsigned long long)rec.seq, rec.step, split_name);
            printf("  %-16s %12s %10s %12s\n", "domain", "tokens", "loss", "perplexity");
            for (int m = 0; m < M; m++)
                printf("  %-16s %12llu %10.4f %12.3f\n", dataset_domain_name(&ds, m),
                       (unsigned long long)tokens[m], loss[m], exp(loss[m]));
            printf("  %-16s %12s %10.4f %12.3f\n", "Average", "", mean, exp(mean));
        }
    }
    rec_state_free(&rec);
    if (ctx) {
        if (params) ops->release(ctx, params);
        ops->destroy(ctx);
    }
    if (ck) ckpt_close(ck);
    model_layout_free(&lay);
    dataset_free(&ds);
    if (st) store_close(st);
    if (rc) fprintf(stderr, "tandem eval: %s\n", e.msg);
    return rc;
}
