/* evaluate.c — held-out loss per domain; see evaluate.h. */
#include "runner/evaluate.h"

#include "model/blas_core.h"
#include "report/progress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "gpu/plugin.h"
#include "ledger/ckpt.h"
#include "model/model.h"
#include "config/config.h"
#include "runner/run.h"
#include "runner/run_state.h"
#include "util/testhook.h"

static int (*g_stop_pending)(void); /* eval_set_stop_check */

void eval_set_stop_check(int (*pending)(void)) { g_stop_pending = pending; }

/* Mean token loss of `params` on domain m's split, over whole windows of T targets, at most
 * max_tokens of them in all; stop (NULL: none) is asked between batches. */
static int eval_domain(const model_ops *ops, model_ctx *ctx, const float *params, const dataset *ds,
                       int m, int split, int B, int T, uint64_t max_tokens, int (*stop)(void), double *loss,
                       uint64_t *tokens, tdm_err *e) {
    uint32_t *tok = malloc((size_t)B * (T + 1) * sizeof *tok);
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
    for (size_t s = 0; s < nsh && !rc && count + (uint64_t)T <= max_tokens; s++) {
        /* whole windows of T targets, never past max_tokens */
        for (size_t start = 0; start + (size_t)T + 1 <= sh[s].n && count + (uint64_t)T <= max_tokens;
             start += (size_t)T) {
            if ((rc = shard_copy(&sh[s], start, (size_t)T + 1, tok + (size_t)rows * (T + 1), e))) break;
            dom[rows++] = 0;
            count += (uint64_t)T;
            if (rows == B) {
                testhook_stop_at("eval-batch"); /* frozen or killed here by the tests */
                testhook_kill_at("eval-batch");
                if (stop && stop()) {
                    rc = err_set(e, RUN_EXIT_REQUEUE, "stopped by a signal");
                    break;
                }
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
        return err_set(e, ERR_USAGE, "%s: domain %s has no %s window of %d tokens (its %s split holds %llu): "
                       "give it more %s text (tandem prep --split), or evaluate another split (--split)",
                       ds->path, dataset_domain_name(ds, m), dataset_split_name(split), T + 1,
                       dataset_split_name(split), (unsigned long long)ds->domains[m].split[split].tokens,
                       dataset_split_name(split));
    *loss = sum / (double)count;
    *tokens = count;
    return 0;
}

/* eval_params, asking stop between batches */
static int eval_all(const model_ops *ops, model_ctx *ctx, const float *params, const dataset *ds, int split, int B,
                    int T, uint64_t max_tokens, int (*stop)(void), double *loss, uint64_t *tokens, tdm_err *e) {
    int rc = 0, M = dataset_n_domains(ds);
    for (int m = 0; !rc && m < M; m++) {
        progress_tty("evaluating %s on the %s split (domain %d of %d)", dataset_domain_name(ds, m),
                     dataset_split_name(split), m + 1, M);
        rc = eval_domain(ops, ctx, params, ds, m, split, B, T, max_tokens, stop, &loss[m], &tokens[m], e);
    }
    progress_tty_end();
    return rc;
}

/* a run's own validation is not stopped midway: the run stops at its next commit */
int eval_params(const model_ops *ops, model_ctx *ctx, const float *params, const dataset *ds, int split, int B,
                int T, uint64_t max_tokens, double *loss, uint64_t *tokens, tdm_err *e) {
    return eval_all(ops, ctx, params, ds, split, B, T, max_tokens, NULL, loss, tokens, e);
}

int eval_store(store *st, int split, uint64_t max_tokens, const uint64_t *seq, int blas_mode, eval_result *out,
               tdm_err *e) {
    memset(out, 0, sizeof *out);
    const char *url = store_url(st);
    /* on the heap: its config alone is ~95 KB, a crash under a small stack (ulimit -s 128) */
    run_state *rs = calloc(1, sizeof *rs);
    if (!rs) return err_set(e, ERR_INTERNAL, "out of memory");
    model_ctx *ctx = NULL;
    const model_ops *ops = &model_cpu_ops;
    float *params = NULL;
    int rc = run_state_config(st, rs, e);
    const config *cfg = &rs->cfg;
    snprintf(out->run_id, sizeof out->run_id, "%s", rs->run_id);
    /* on the run's own device: a model trained on a GPU is evaluated there too */
    if (!rc && cfg->run.device == CONFIG_DEVICE_CUDA) {
        const gpu_plugin *gpu = gpu_plugin_load(e);
        char why[256] = "";
        if (!gpu) rc = e->code;
        else if (gpu->device_count(why, sizeof why) < 1)
            rc = err_set(e, ERR_USAGE, "%s was trained with run.device = cuda, and no CUDA device "
                         "is usable here (%s): evaluate it on a GPU node", url, why);
        else if (!(rc = gpu->set_precision(cfg->run.precision == CONFIG_PRECISION_BF16 ? "bf16" : "fp32", e)) &&
                 !(rc = gpu->set_attention(config_attention_names[cfg->model.attention], e)))
            ops = gpu->ops;
    }
    /* on the run's own kernels too (as its resumes: runner/run_setup.c pin_kernels), so
     * that its losses are the ones it computed, whatever this node's OpenBLAS picked */
    if (!rc && cfg->run.device == CONFIG_DEVICE_CPU) rc = blas_core_pin(cfg->run.blas_kernels, blas_mode, NULL, e);
    if (!rc && max_tokens < (uint64_t)cfg->train.seq)
        rc = err_set(e, ERR_USAGE, "--max-tokens %llu is less than one window of this run (train.seq = %d "
                     "targets): evaluation takes whole windows, so give at least %d",
                     (unsigned long long)max_tokens, cfg->train.seq, cfg->train.seq);
    if (!rc) rc = run_state_load(st, seq, 0, "evaluate", rs, e);
    int B = cfg->train.batch, T = cfg->train.seq, M = dataset_n_domains(&rs->ds);
    if (!rc && !(ctx = ops->create(&rs->lay, B, T, 1, cfg->run.threads, e))) rc = e->code;
    if (!rc && !(params = ops->alloc(ctx, rs->lay.numel))) rc = err_set(e, ERR_INTERNAL, "out of memory");
    if (!rc) rc = ops->upload(ctx, params, ckpt_host(rs->ck, 0), rs->lay.numel, e);
    if (!rc)
        rc = eval_all(ops, ctx, params, &rs->ds, split, B, T, max_tokens, g_stop_pending, out->loss, out->tokens, e);
    for (int m = 0; !rc && m < M; m++) snprintf(out->names[m], REC_DOMAIN_MAX, "%s", dataset_domain_name(&rs->ds, m));
    if (!rc) {
        out->M = M;
        out->seq = rs->rec.seq;
        snprintf(out->step, sizeof out->step, "%s", rs->rec.step);
        for (int m = 0; m < M; m++) out->mean_loss += out->loss[m] / M;
        out->average_ppl = exp(out->mean_loss);
    }
    if (ctx) {
        if (params) ops->release(ctx, params);
        ops->destroy(ctx);
    }
    run_state_close(rs);
    free(rs);
    return rc;
}
