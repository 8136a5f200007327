/* vanilla.c — plain fixed-mixture training; see vanilla.h. */
#include "runner/vanilla.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/sampler.h"

void vanilla_opts_init(vanilla_opts *o) {
    memset(o, 0, sizeof *o);
    o->model = (model_config){.vocab = 0, .ctx = 64, .layers = 2, .heads = 2, .channels = 64};
    o->batch = 8;
    o->seq = 64;
    o->steps = 300;
    o->lr = 3e-3;
    o->lr_min = 3e-4;
    o->weight_decay = 1e-2;
    o->clip = 1.0;
    o->warmup = 10;
    o->seed = 1;
    o->eval_every = 50;
    o->eval_batches = 4;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Mean validation loss per domain over the same `eval_batches` batches every time (the
 * cursors start from zero), so evaluations are comparable across steps. */
static int evaluate(const vanilla_opts *o, const model_ops *ops, model_ctx *ctx,
                    const float *params, uint16_t *tok, int32_t *dom, double *out, tdm_err *e) {
    int M = dataset_n_domains(o->ds);
    sampler_cursor cur[64] = {{0, 0}};
    double loss[64];
    for (int m = 0; m < M; m++) out[m] = 0;
    for (int k = 0; k < o->eval_batches; k++) {
        if (sampler_batch_per_domain(o->ds, SPLIT_VAL, o->seq, o->batch, o->seed, cur, tok, dom, e))
            return e->code;
        model_batch b = {.B = o->batch, .T = o->seq, .tokens = tok, .domain = dom};
        if (ops->forward(ctx, params, &b, loss, NULL, e)) return e->code;
        for (int m = 0; m < M; m++) out[m] += loss[m] / o->eval_batches;
    }
    return 0;
}

static void print_losses(FILE *f, const char *label, const dataset *ds, const double *v) {
    fprintf(f, "  %s", label);
    for (int m = 0; m < dataset_n_domains(ds); m++)
        fprintf(f, " %s %.4f", dataset_domain_name(ds, m), v[m]);
    fputc('\n', f);
}

int vanilla_train(const vanilla_opts *o, vanilla_result *res, tdm_err *e) {
    const dataset *ds = o->ds;
    int M = dataset_n_domains(ds), B = o->batch, T = o->seq;
    if (M > 64) return err_set(e, ERR_USAGE, "at most 64 domains");
    if (B % M) return err_set(e, ERR_USAGE, "batch %d is not a multiple of the %d domains", B, M);
    model_config mc = o->model;
    if (mc.vocab == 0) mc.vocab = ds->vocab;
    if (mc.ctx < T) mc.ctx = T;
    model_layout lay;
    if (model_layout_init(&lay, &mc, e)) return e->code;
    const model_ops *ops = &model_cpu_ops;
    model_ctx *ctx = ops->create(&lay, B, T, M, o->threads, e);
    float *p = NULL, *g = NULL, *mm = NULL, *vv = NULL, *host = NULL;
    uint16_t *tok = malloc((size_t)B * (T + 1) * sizeof *tok);
    int32_t *dom = malloc((size_t)B * sizeof *dom);
    int rc = 0;
    if (!ctx) {
        rc = e->code;
        goto out;
    }
    p = ops->alloc(ctx, lay.numel);
    g = ops->alloc(ctx, lay.numel);
    mm = ops->alloc(ctx, lay.numel);
    vv = ops->alloc(ctx, lay.numel);
    host = malloc(lay.numel * sizeof *host);
    if (!p || !g || !mm || !vv || !host || !tok || !dom) {
        rc = err_set(e, ERR_INTERNAL, "out of memory for a %zu-parameter model", lay.numel);
        goto out;
    }
    for (int m = 0; m < M; m++)
        if ((rc = sampler_check(ds, m, SPLIT_TRAIN, T, e)) || (rc = sampler_check(ds, m, SPLIT_VAL, T, e)))
            goto out;
    model_init_params(&lay, o->seed, host);
    if ((rc = ops->upload(ctx, p, host, lay.numel, e))) goto out;
    res->M = M;
    if ((rc = evaluate(o, ops, ctx, p, tok, dom, res->val_first, e))) goto out;
    if (o->log) {
        fprintf(o->log, "model: %d layers, %d channels, %d heads, %zu parameters; %d domains, batch %d x %d\n",
                mc.layers, mc.channels, mc.heads, lay.numel, M, B, T);
        print_losses(o->log, "step 0 val:", ds, res->val_first);
    }
    sampler_cursor cur[64] = {{0, 0}};
    double coef[64], loss[64], train_sum[64] = {0};
    for (int m = 0; m < M; m++) coef[m] = 1.0 / M;
    double t0 = now_s();
    long since = 0;
    for (long step = 0; step < o->steps; step++) {
        if ((rc = sampler_batch_per_domain(ds, SPLIT_TRAIN, T, B, o->seed, cur, tok, dom, e))) goto out;
        model_batch b = {.B = B, .T = T, .tokens = tok, .domain = dom};
        if ((rc = ops->forward(ctx, p, &b, loss, NULL, e))) goto out;
        if ((rc = ops->backward(ctx, p, coef, g, e))) goto out;
        model_clip_grads(ops, ctx, g, o->clip);
        model_adamw hp = {.lr = (float)model_lr_cosine(step, o->steps, o->warmup, o->lr, o->lr_min),
                          .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                          .weight_decay = (float)o->weight_decay, .step = step + 1};
        if ((rc = ops->adamw(ctx, p, g, mm, vv, &hp, e))) goto out;
        for (int m = 0; m < M; m++) train_sum[m] += loss[m];
        since++;
        int last = step + 1 == o->steps;
        if (o->log && ((o->eval_every && (step + 1) % o->eval_every == 0) || last)) {
            double val[64];
            if ((rc = evaluate(o, ops, ctx, p, tok, dom, val, e))) goto out;
            char label[64];
            snprintf(label, sizeof label, "step %ld/%ld train:", step + 1, o->steps);
            for (int m = 0; m < M; m++) train_sum[m] /= since;
            print_losses(o->log, label, ds, train_sum);
            print_losses(o->log, "          val:  ", ds, val);
            memset(train_sum, 0, sizeof train_sum);
            since = 0;
        }
    }
    double dt = now_s() - t0;
    res->tokens_per_s = dt > 0 ? (double)o->steps * B * T / dt : 0;
    rc = evaluate(o, ops, ctx, p, tok, dom, res->val_last, e);
out:
    if (ctx) {
        ops->release(ctx, p);
        ops->release(ctx, g);
        ops->release(ctx, mm);
        ops->release(ctx, vv);
        ops->destroy(ctx);
    }
    free(host);
    free(tok);
    free(dom);
    model_layout_free(&lay);
    return rc;
}
