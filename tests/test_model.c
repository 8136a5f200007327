/* test_model.c — the CPU reference backend: tensor table, initialisation, determinism,
 * a float64 finite-difference check of the whole backward, optimisers, clipping and the
 * learning-rate schedule. (The PyTorch comparison is tests/test_torch.c.) */
#include <math.h>

#include "model/cpu64.h"
#include "model/model.h"
#include "tests/test.h"
#include "util/rng.h"

static const model_config TINY = {.vocab = 16, .ctx = 8, .layers = 2, .heads = 2, .channels = 8};

/* Random tokens [B][T+1] < V and domains b % M. */
static void make_batch(uint32_t *tok, int32_t *dom, int B, int T, int V, int M, uint64_t seed) {
    rng_stream s;
    rng_stream_init(&s, seed, RNG_TEST, 1, 0, 0);
    for (int i = 0; i < B * (T + 1); i++) tok[i] = (uint32_t)rng_below(&s, (uint64_t)V);
    for (int b = 0; b < B; b++) dom[b] = b % M;
}

/* Initial params with LayerNorm gains and biases moved off 1 and 0 so that every
 * gradient path is exercised with generic values. */
static void init_perturbed(const model_layout *lay, float *p, uint64_t seed) {
    model_init_params(lay, seed, p);
    rng_stream s;
    rng_stream_init(&s, seed, RNG_TEST, 2, 0, 0);
    for (int i = 0; i < lay->n; i++) {
        const model_tensor *t = &lay->t[i];
        if (t->ndim != 1) continue;
        for (size_t j = 0; j < t->numel; j++) p[t->offset + j] += (float)(0.1 * rng_normal(&s));
    }
}

static void test_layout_table(void) {
    model_layout lay;
    tdm_err e = {0};
    CHECK(model_layout_init(&lay, &TINY, &e) == 0, "%s", e.msg);
    size_t V = 16, T = 8, C = 8, L = 2;
    size_t want = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
    CHECK(lay.numel == want, "numel %zu != %zu", lay.numel, want);
    CHECK(lay.n == 4 + 12 * 2, "tensor count %d", lay.n);
    size_t off = 0;
    for (int i = 0; i < lay.n; i++) {
        CHECK(lay.t[i].offset == off, "%s offset %zu != %zu", lay.t[i].name, lay.t[i].offset, off);
        off += lay.t[i].numel;
    }
    const model_tensor *qkv = model_layout_find(&lay, "h.1.attn.c_attn.weight");
    CHECK(qkv && qkv->shape[0] == 24 && qkv->shape[1] == 8 && qkv->decay, "c_attn shape");
    const model_tensor *b = model_layout_find(&lay, "h.0.mlp.c_fc.bias");
    CHECK(b && b->ndim == 1 && b->numel == 32 && !b->decay, "c_fc bias");
    CHECK(model_layout_find(&lay, "h.2.ln_1.weight") == NULL, "layer 2 must not exist");
    model_layout_free(&lay);

    model_config bad = TINY;
    bad.heads = 3;
    CHECK(model_layout_init(&lay, &bad, &e) == ERR_USAGE, "heads not dividing channels");
    CHECK(strstr(e.msg, "model.heads"), "message names the key: %s", e.msg);
    bad = TINY;
    bad.vocab = MODEL_VOCAB_MAX + 1;
    CHECK(model_layout_init(&lay, &bad, &e) == ERR_USAGE && strstr(e.msg, "model.vocab") &&
              strstr(e.msg, "2..16777216"),
          "vocab: %s", e.msg);
    bad.vocab = 152064; /* Qwen2's padded vocabulary: above uint16 */
    CHECK(model_config_check(&bad, &e) == 0, "vocab 152064: %s", e.msg);
}

static void test_init_is_seeded_gpt2(void) {
    model_config cfg = {.vocab = 256, .ctx = 64, .layers = 4, .heads = 4, .channels = 64};
    model_layout lay;
    CHECK(model_layout_init(&lay, &cfg, NULL) == 0, "layout");
    float *a = malloc(lay.numel * sizeof *a), *b = malloc(lay.numel * sizeof *b);
    model_init_params(&lay, 1, a);
    model_init_params(&lay, 1, b);
    CHECK(memcmp(a, b, lay.numel * sizeof *a) == 0, "same seed must give the same weights");
    model_init_params(&lay, 2, b);
    CHECK(memcmp(a, b, lay.numel * sizeof *a) != 0, "another seed must differ");
    const model_tensor *wte = model_layout_find(&lay, "wte");
    double s2 = 0;
    for (size_t i = 0; i < wte->numel; i++) s2 += (double)a[wte->offset + i] * a[wte->offset + i];
    double sd = sqrt(s2 / wte->numel);
    CHECK(fabs(sd - 0.02) < 0.001, "wte std %g, want 0.02", sd);
    const model_tensor *proj = model_layout_find(&lay, "h.3.mlp.c_proj.weight");
    s2 = 0;
    for (size_t i = 0; i < proj->numel; i++) s2 += (double)a[proj->offset + i] * a[proj->offset + i];
    sd = sqrt(s2 / proj->numel);
    CHECK(fabs(sd - 0.02 / sqrt(8.0)) < 0.0005, "c_proj std %g, want %g", sd, 0.02 / sqrt(8.0));
    CHECK(a[model_layout_find(&lay, "ln_f.weight")->offset] == 1.0f, "LayerNorm gain 1");
    CHECK(a[model_layout_find(&lay, "h.0.attn.c_attn.bias")->offset + 5] == 0.0f, "bias 0");
    free(a);
    free(b);
    model_layout_free(&lay);
}

/* The initialisation is drawn in parallel pieces of 2^20 (model.c): every tensor must still
 * hold its stream's normals in order, as one sequential pass draws them, whatever the
 * thread count. wte here is 3 pieces and a part (50304 x 64 = 3.2M values). */
static void test_init_pieces_equal_one_sequential_stream(void) {
    model_config cfg = {.vocab = 50304, .ctx = 64, .layers = 1, .heads = 2, .channels = 64};
    model_layout lay;
    CHECK(model_layout_init(&lay, &cfg, NULL) == 0, "layout");
    float *a = malloc(lay.numel * sizeof *a), *b = malloc(lay.numel * sizeof *b);
    CHECK(a && b, "alloc");
    model_init_params(&lay, 7, a);
    memset(b, 0, lay.numel * sizeof *b);
    for (int i = 0; i < lay.n; i++) {
        const model_tensor *t = &lay.t[i];
        if (t->ndim == 1) {
            memcpy(b + t->offset, a + t->offset, t->numel * sizeof *b);
            continue;
        }
        double std = strstr(t->name, "c_proj.weight") ? 0.02 / sqrt(2.0) : 0.02;
        rng_stream s;
        rng_stream_init(&s, 7, RNG_MODEL_INIT, (uint32_t)i, 0, 0);
        for (size_t j = 0; j < t->numel; j++) b[t->offset + j] = (float)(std * rng_normal(&s));
    }
    size_t diff = 0, first = 0;
    for (size_t j = 0; j < lay.numel; j++)
        if (a[j] != b[j] && diff++ == 0) first = j;
    CHECK(diff == 0, "%zu values differ from the sequential stream (first at %zu)", diff, first);
    const model_tensor *wte = model_layout_find(&lay, "wte");
    CHECK(wte->numel > 3 * ((size_t)1 << 20), "wte must span several pieces (%zu)", wte->numel);
    /* and the seek itself: the j-th normal is the first after seeking to block j */
    rng_stream s, t;
    rng_stream_init(&s, 3, RNG_TEST, 4, 5, 6);
    double want = 0;
    for (int j = 0; j <= 1000; j++) want = rng_normal(&s);
    rng_stream_init(&t, 3, RNG_TEST, 4, 5, 6);
    (void)rng_u32(&t); /* a partly read block is dropped by the seek */
    rng_stream_seek(&t, 1000);
    CHECK(rng_normal(&t) == want, "normal 1000 after a seek");
    free(a);
    free(b);
    model_layout_free(&lay);
}

/* Forward+backward twice in separate workspaces; the bits must match. */
static void test_forward_backward_bit_identical(void) {
    model_config cfg = {.vocab = 64, .ctx = 32, .layers = 2, .heads = 4, .channels = 32};
    int B = 6, T = 32, M = 3;
    model_layout lay;
    CHECK(model_layout_init(&lay, &cfg, NULL) == 0, "layout");
    const model_ops *ops = &model_cpu_ops;
    tdm_err e = {0};
    uint32_t tok[6 * 33];
    int32_t dom[6];
    make_batch(tok, dom, B, T, cfg.vocab, M, 5);
    model_batch batch = {.B = B, .T = T, .tokens = tok, .domain = dom};
    float *host = malloc(lay.numel * sizeof *host);
    init_perturbed(&lay, host, 3);
    double coef[3] = {0.5, 1.25, 2.0};
    double loss[2][3];
    float *grads[2];
    for (int r = 0; r < 2; r++) {
        model_ctx *ctx = ops->create(&lay, B, T, M, 2, &e);
        CHECK(ctx, "create: %s", e.msg);
        float *p = ops->alloc(ctx, lay.numel), *g = ops->alloc(ctx, lay.numel);
        ops->upload(ctx, p, host, lay.numel, &e);
        CHECK(ops->forward(ctx, p, &batch, loss[r], NULL, &e) == 0, "forward: %s", e.msg);
        CHECK(ops->backward(ctx, p, coef, g, &e) == 0, "backward: %s", e.msg);
        grads[r] = malloc(lay.numel * sizeof(float));
        ops->download(ctx, grads[r], g, lay.numel, &e);
        ops->release(ctx, p);
        ops->release(ctx, g);
        ops->destroy(ctx);
    }
    CHECK(memcmp(loss[0], loss[1], sizeof loss[0]) == 0, "losses differ between runs");
    CHECK(memcmp(grads[0], grads[1], lay.numel * sizeof(float)) == 0, "gradients differ");
    double gn = 0;
    for (size_t i = 0; i < lay.numel; i++) gn += (double)grads[0][i] * grads[0][i];
    CHECK(gn > 0, "gradient is all zero");
    for (int m = 0; m < M; m++)
        CHECK(fabs(loss[0][m] - log(64.0)) < 0.2, "initial loss %g far from ln V", loss[0][m]);
    free(grads[0]);
    free(grads[1]);
    free(host);
    model_layout_free(&lay);
}

/* f(p) = sum_m coef[m] L_m(p) in float64 through the double build of the same code. */
static double objective64(model_ctx *ctx, double *p, const model_batch *batch, const double *coef,
                          int M) {
    double loss[8];
    tdm_err e = {0};
    if (model_cpu64_ops.forward(ctx, p, batch, loss, NULL, &e)) return NAN;
    double f = 0;
    for (int m = 0; m < M; m++) f += coef[m] * loss[m];
    return f;
}

/* Central differences in float64 on 4 elements of every tensor against the analytic
 * backward, h = 1e-5. A wrong term in any layer's backward gives errors of order 1;
 * a correct one agrees to ~1e-8. */
static void test_backward_matches_finite_differences_f64(void) {
    const model_ops_f64 *ops = &model_cpu64_ops;
    int B = 4, T = 6, M = 3;
    model_layout lay;
    CHECK(model_layout_init(&lay, &TINY, NULL) == 0, "layout");
    tdm_err e = {0};
    model_ctx *ctx = ops->create(&lay, B, T, M, 1, &e);
    CHECK(ctx, "create: %s", e.msg);
    uint32_t tok[4 * 7];
    int32_t dom[4] = {0, 2, 0, 2}; /* domain 1 absent: its coefficient must not matter */
    make_batch(tok, dom, B, T, TINY.vocab, M, 11);
    dom[0] = 0, dom[1] = 2, dom[2] = 0, dom[3] = 2;
    model_batch batch = {.B = B, .T = T, .tokens = tok, .domain = dom};
    float *pf = malloc(lay.numel * sizeof *pf);
    init_perturbed(&lay, pf, 4);
    /* larger weights than GPT-2's init so attention is far from uniform */
    for (size_t i = 0; i < lay.numel; i++) pf[i] *= 4.0f;
    double *p = ops->alloc(ctx, lay.numel), *g = ops->alloc(ctx, lay.numel);
    for (size_t i = 0; i < lay.numel; i++) p[i] = pf[i];
    double coef[3] = {0.7, 123.0, 1.9};
    double loss[3];
    long ntok[3];
    CHECK(ops->forward(ctx, p, &batch, loss, ntok, &e) == 0, "%s", e.msg);
    CHECK(ntok[1] == 0 && loss[1] == 0.0, "absent domain: ntok %ld loss %g", ntok[1], loss[1]);
    CHECK(ntok[0] == 2 * T && ntok[2] == 2 * T, "token counts %ld %ld", ntok[0], ntok[2]);
    CHECK(ops->backward(ctx, p, coef, g, &e) == 0, "%s", e.msg);
    /* relative error, floored at 1e-4 of the largest gradient: rounding in f (~1e-16 |f| / h)
     * must not count against elements whose gradient is nearly zero */
    double gmax = 0;
    for (size_t i = 0; i < lay.numel; i++) gmax = fmax(gmax, fabs(g[i]));
    double floor = 1e-4 * gmax;
    double worst = 0;
    const char *worst_name = "";
    rng_stream s;
    rng_stream_init(&s, 99, RNG_TEST, 3, 0, 0);
    int checked = 0;
    for (int ti = 0; ti < lay.n; ti++) {
        const model_tensor *t = &lay.t[ti];
        for (int k = 0; k < 4; k++) {
            size_t j = t->offset + rng_below(&s, t->numel);
            if (t->offset == 0 && k == 0) j = (size_t)tok[0] * TINY.channels; /* a used row */
            double keep = p[j], h = 1e-5;
            p[j] = keep + h;
            double fp = objective64(ctx, p, &batch, coef, M);
            p[j] = keep - h;
            double fm = objective64(ctx, p, &batch, coef, M);
            p[j] = keep;
            double fd = (fp - fm) / (2 * h);
            double err = fabs(fd - g[j]) / (fabs(fd) + fabs(g[j]) + floor);
            if (err > worst) worst = err, worst_name = t->name;
            checked++;
        }
    }
    printf("  finite differences: %d elements, worst relative error %.2e (%s)\n", checked, worst,
           worst_name);
    CHECK(worst < 1e-6, "worst relative error %.3e in %s", worst, worst_name);
    ops->release(ctx, p);
    ops->release(ctx, g);
    ops->destroy(ctx);
    free(pf);
    model_layout_free(&lay);
}

static void test_sgd_lowers_loss_on_a_fixed_batch(void) {
    const model_ops *ops = &model_cpu_ops;
    int B = 4, T = 8, M = 2;
    model_layout lay;
    CHECK(model_layout_init(&lay, &TINY, NULL) == 0, "layout");
    tdm_err e = {0};
    model_ctx *ctx = ops->create(&lay, B, T, M, 0, &e);
    CHECK(ctx, "%s", e.msg);
    uint32_t tok[4 * 9];
    int32_t dom[4];
    make_batch(tok, dom, B, T, TINY.vocab, M, 21);
    model_batch batch = {.B = B, .T = T, .tokens = tok, .domain = dom};
    float *p = ops->alloc(ctx, lay.numel), *g = ops->alloc(ctx, lay.numel);
    model_init_params(&lay, 5, p);
    double coef[2] = {1, 1}, first[2], loss[2];
    for (int step = 0; step < 30; step++) {
        CHECK(ops->forward(ctx, p, &batch, loss, NULL, &e) == 0, "%s", e.msg);
        if (step == 0) memcpy(first, loss, sizeof first);
        CHECK(ops->backward(ctx, p, coef, g, &e) == 0, "%s", e.msg);
        ops->sgd(ctx, p, g, 0.5f, &e);
    }
    for (int m = 0; m < M; m++)
        CHECK(loss[m] < first[m] - 0.2, "domain %d: loss %g -> %g did not fall", m, first[m],
              loss[m]);
    ops->release(ctx, p);
    ops->release(ctx, g);
    ops->destroy(ctx);
    model_layout_free(&lay);
}

/* One AdamW step against the formula evaluated in double, and decay only on 2-D tensors. */
static void test_adamw_step_formula(void) {
    const model_ops *ops = &model_cpu_ops;
    model_layout lay;
    CHECK(model_layout_init(&lay, &TINY, NULL) == 0, "layout");
    tdm_err e = {0};
    model_ctx *ctx = ops->create(&lay, 1, 4, 1, 0, &e);
    CHECK(ctx, "%s", e.msg);
    size_t n = lay.numel;
    float *p = ops->alloc(ctx, n), *g = ops->alloc(ctx, n), *m = ops->alloc(ctx, n),
          *v = ops->alloc(ctx, n);
    rng_stream s;
    rng_stream_init(&s, 1, RNG_TEST, 4, 0, 0);
    for (size_t i = 0; i < n; i++) {
        p[i] = (float)rng_normal(&s);
        g[i] = (float)rng_normal(&s);
        m[i] = (float)(0.1 * rng_normal(&s));
        v[i] = (float)(0.01 * rng_uniform(&s));
    }
    float *p0 = malloc(n * sizeof *p0), *m0 = malloc(n * sizeof *m0), *v0 = malloc(n * sizeof *v0);
    memcpy(p0, p, n * sizeof *p0);
    memcpy(m0, m, n * sizeof *m0);
    memcpy(v0, v, n * sizeof *v0);
    model_adamw hp = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                      .weight_decay = 0.1f, .step = 3};
    CHECK(ops->adamw(ctx, p, g, m, v, &hp, &e) == 0, "%s", e.msg);
    double worst = 0;
    for (int ti = 0; ti < lay.n; ti++) {
        const model_tensor *t = &lay.t[ti];
        double wd = t->decay ? hp.weight_decay : 0.0;
        for (size_t k = 0; k < t->numel; k++) {
            size_t i = t->offset + k;
            double b1 = hp.beta1, b2 = hp.beta2;
            double mm = b1 * m0[i] + (1 - b1) * g[i];
            double vv = b2 * v0[i] + (1 - b2) * (double)g[i] * g[i];
            double mh = mm / (1 - pow(b1, 3)), vh = vv / (1 - pow(b2, 3));
            double want = p0[i] * (1 - hp.lr * wd) - hp.lr * mh / (sqrt(vh) + hp.eps);
            double err = fabs(want - p[i]) / (fabs(want) + 1e-3);
            if (err > worst) worst = err;
        }
    }
    CHECK(worst < 1e-5, "AdamW differs from the formula by %.2e relative", worst);
    /* weight decay must leave a bias with zero gradient and zero moments unchanged */
    const model_tensor *bias = model_layout_find(&lay, "h.0.attn.c_proj.bias");
    const model_tensor *w = model_layout_find(&lay, "h.0.attn.c_proj.weight");
    memset(g, 0, n * sizeof *g);
    memset(m, 0, n * sizeof *m);
    memset(v, 0, n * sizeof *v);
    memcpy(p0, p, n * sizeof *p0);
    hp.step = 1;
    ops->adamw(ctx, p, g, m, v, &hp, &e);
    CHECK(p[bias->offset] == p0[bias->offset], "bias decayed");
    CHECK(p[w->offset] != p0[w->offset], "weight not decayed");
    hp.step = 0;
    CHECK(ops->adamw(ctx, p, g, m, v, &hp, &e) != 0, "step 0 must be rejected");
    free(p0);
    free(m0);
    free(v0);
    ops->release(ctx, p);
    ops->release(ctx, g);
    ops->release(ctx, m);
    ops->release(ctx, v);
    ops->destroy(ctx);
    model_layout_free(&lay);
}

static void test_clip_and_norm(void) {
    const model_ops *ops = &model_cpu_ops;
    model_config cfg = {.vocab = 300, .ctx = 64, .layers = 3, .heads = 2, .channels = 64};
    model_layout lay;
    CHECK(model_layout_init(&lay, &cfg, NULL) == 0, "layout");
    CHECK(lay.numel > 65536 * 2, "needs several norm chunks (%zu)", lay.numel);
    tdm_err e = {0};
    model_ctx *ctx = ops->create(&lay, 1, 4, 1, 0, &e);
    CHECK(ctx, "%s", e.msg);
    float *g = ops->alloc(ctx, lay.numel);
    rng_stream s;
    rng_stream_init(&s, 2, RNG_TEST, 5, 0, 0);
    double ss = 0;
    for (size_t i = 0; i < lay.numel; i++) {
        g[i] = (float)rng_normal(&s);
        ss += (double)g[i] * g[i];
    }
    double norm = model_clip_grads(ops, ctx, g, 1e9);
    CHECK(fabs(norm - sqrt(ss)) < 1e-9 * sqrt(ss), "norm %.12g vs %.12g", norm, sqrt(ss));
    double before = model_clip_grads(ops, ctx, g, 2.0);
    CHECK(before == norm, "clip returns the norm before clipping");
    double after = ops->norm(ctx, g);
    CHECK(fabs(after - 2.0) < 1e-5, "norm after clipping %g", after);
    double same = model_clip_grads(ops, ctx, g, 10.0);
    CHECK(fabs(ops->norm(ctx, g) - same) < 1e-12, "no clipping below the threshold");
    ops->release(ctx, g);
    ops->destroy(ctx);
    model_layout_free(&lay);
}

/* model.h's deferred pair: forward without losses, then results() gives that forward's
 * losses to the bit (and a later forward's after it); clip() is model_clip_grads' rule
 * (norm then scale) to the bit; an AdamW after a clip of a non-finite gradient leaves the
 * parameters and moments as they were, and the next one steps again. */
static void test_deferred_results_and_gated_adamw(void) {
    const model_ops *ops = &model_cpu_ops;
    model_config cfg = {.vocab = 64, .ctx = 16, .layers = 1, .heads = 2, .channels = 16};
    int B = 4, T = 16, M = 2;
    model_layout lay;
    CHECK(model_layout_init(&lay, &cfg, NULL) == 0, "layout");
    size_t P = lay.numel;
    tdm_err e = {0};
    model_ctx *ctx = ops->create(&lay, B, T, M, 1, &e);
    CHECK(ctx, "%s", e.msg);
    uint32_t tok[4 * 17];
    int32_t dom[4];
    model_batch batch = {.B = B, .T = T, .tokens = tok, .domain = dom};
    float *p = ops->alloc(ctx, P), *g = ops->alloc(ctx, P), *g2 = ops->alloc(ctx, P);
    float *m = ops->alloc(ctx, P), *v = ops->alloc(ctx, P), *init = malloc(P * sizeof *init);
    init_perturbed(&lay, init, 8);
    memcpy(p, init, P * sizeof *p);
    double first[2], second[2], got[2];
    make_batch(tok, dom, B, T, cfg.vocab, M, 1);
    CHECK(ops->forward(ctx, p, &batch, first, NULL, &e) == 0, "%s", e.msg);
    make_batch(tok, dom, B, T, cfg.vocab, M, 2);
    CHECK(ops->forward(ctx, p, &batch, second, NULL, &e) == 0, "%s", e.msg);
    make_batch(tok, dom, B, T, cfg.vocab, M, 1);
    CHECK(ops->forward(ctx, p, &batch, NULL, NULL, &e) == 0 && ops->results(ctx, got, NULL, &e) == 0, "%s", e.msg);
    CHECK(memcmp(got, first, sizeof got) == 0, "deferred losses differ from the forward's");
    CHECK(memcmp(first, second, sizeof first) != 0, "two batches gave the same losses");
    double coef[2] = {1.0, 0.5};
    CHECK(ops->backward(ctx, p, coef, g, &e) == 0, "%s", e.msg);
    memcpy(g2, g, P * sizeof *g);
    double n_old = ops->norm(ctx, g2), n_new = NAN, cap = n_old / 3;
    ops->scale(ctx, g2, (float)(cap / (n_old + 1e-6)));
    CHECK(ops->clip(ctx, g, cap, &e) == 0 && ops->results(ctx, NULL, &n_new, &e) == 0, "%s", e.msg);
    CHECK(n_new == n_old, "clip's norm %.17g, norm's %.17g", n_new, n_old);
    CHECK(memcmp(g, g2, P * sizeof *g) == 0, "clip differs from norm + scale");
    model_adamw hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.01f, .step = 1};
    g[P / 3] = NAN;
    double bad = 0;
    CHECK(ops->clip(ctx, g, 1.0, &e) == 0 && ops->adamw(ctx, p, g, m, v, &hp, &e) == 0 &&
          ops->results(ctx, NULL, &bad, &e) == 0, "%s", e.msg);
    CHECK(isnan(bad), "the norm of a gradient with a NaN is %g", bad);
    CHECK(memcmp(p, init, P * sizeof *p) == 0, "an AdamW after a non-finite clip changed the parameters");
    int zero = 1;
    for (size_t i = 0; i < P; i++) zero &= m[i] == 0.0f && v[i] == 0.0f;
    CHECK(zero, "an AdamW after a non-finite clip changed the moments");
    g[P / 3] = 0.25f;
    CHECK(ops->adamw(ctx, p, g, m, v, &hp, &e) == 0, "%s", e.msg);
    CHECK(memcmp(p, init, P * sizeof *p) != 0, "the AdamW after the skipped one did not step");
    ops->release(ctx, p);
    ops->release(ctx, g);
    ops->release(ctx, g2);
    ops->release(ctx, m);
    ops->release(ctx, v);
    ops->destroy(ctx);
    free(init);
    model_layout_free(&lay);
}

static void test_lr_cosine_schedule(void) {
    double mx = 1e-3, mn = 1e-4;
    CHECK(fabs(model_lr_cosine(0, 100, 10, mx, mn) - mx / 10) < 1e-15, "first warm-up step");
    CHECK(fabs(model_lr_cosine(9, 100, 10, mx, mn) - mx) < 1e-15, "end of warm-up");
    CHECK(fabs(model_lr_cosine(10, 100, 10, mx, mn) - mx) < 1e-15, "start of decay");
    CHECK(fabs(model_lr_cosine(99, 100, 10, mx, mn) - mn) < 1e-15, "last step reaches lr_min");
    double mid = model_lr_cosine(54, 100, 10, mx, mn);
    double want = mn + 0.5 * (mx - mn) * (1 + cos(M_PI * 44.0 / 89.0));
    CHECK(fabs(mid - want) < 1e-15, "midway %g vs %g", mid, want);
    double prev = 1;
    for (long t = 10; t < 100; t++) {
        double lr = model_lr_cosine(t, 100, 10, mx, mn);
        CHECK(lr <= prev && lr >= mn, "not monotone at %ld", t);
        prev = lr;
    }
    CHECK(model_lr_cosine(500, 100, 10, mx, mn) == mn, "clamped after the end");
    CHECK(model_lr_cosine(3, 1, 0, mx, mn) == mx, "degenerate schedule is constant");
}

static void test_bad_batches_are_rejected(void) {
    const model_ops *ops = &model_cpu_ops;
    model_layout lay;
    CHECK(model_layout_init(&lay, &TINY, NULL) == 0, "layout");
    tdm_err e = {0};
    model_ctx *ctx = ops->create(&lay, 2, 4, 2, 0, &e);
    CHECK(ctx, "%s", e.msg);
    float *p = ops->alloc(ctx, lay.numel);
    uint32_t tok[3 * 5] = {0};
    int32_t dom[3] = {0, 1, 0};
    double loss[2];
    model_batch b = {.B = 3, .T = 4, .tokens = tok, .domain = dom};
    CHECK(ops->forward(ctx, p, &b, loss, NULL, &e) == ERR_USAGE, "B above the workspace");
    b.B = 2;
    tok[7] = 16;
    CHECK(ops->forward(ctx, p, &b, loss, NULL, &e) == ERR_USAGE && strstr(e.msg, "vocab"),
          "token >= vocab: %s", e.msg);
    tok[7] = 3;
    dom[1] = 2;
    CHECK(ops->forward(ctx, p, &b, loss, NULL, &e) == ERR_USAGE && strstr(e.msg, "domain"),
          "domain out of range: %s", e.msg);
    double coef[2] = {1, 1};
    CHECK(ops->backward(ctx, p, coef, p, &e) != 0, "backward without forward");
    CHECK(ops->create(&lay, 2, 9, 2, 0, &e) == NULL && e.code == ERR_USAGE, "T above ctx");
    ops->release(ctx, p);
    ops->destroy(ctx);
    model_layout_free(&lay);
}

/* Token ids above 65535 select their own embedding rows and targets: the loss of a batch
 * of ids x + 65536 under parameters P equals (up to summation order) the loss of ids x
 * under P with the rows x and x + 65536 of wte swapped, and differs from the loss of ids x
 * under P (which is what ids truncated to 16 bits would give). */
static void test_wide_token_ids(void) {
    model_config cfg = {.vocab = 70000, .ctx = 8, .layers = 1, .heads = 2, .channels = 8};
    enum { B = 2, T = 4, M = 1, LO = 1000 };
    model_layout lay;
    CHECK(model_layout_init(&lay, &cfg, NULL) == 0, "layout");
    const model_ops *ops = &model_cpu_ops;
    tdm_err e = {0};
    uint32_t lo[B * (T + 1)], hi[B * (T + 1)];
    int32_t dom[B] = {0, 0};
    for (int i = 0; i < B * (T + 1); i++) lo[i] = (uint32_t)(i * 37 % LO), hi[i] = lo[i] + 65536;
    hi[3] = 69999; /* vocab - 1 */
    lo[3] = 69999 - 65536;
    float *host = malloc(lay.numel * sizeof *host), *swapped = malloc(lay.numel * sizeof *swapped);
    CHECK(host && swapped, "out of memory");
    init_perturbed(&lay, host, 9);
    const model_tensor *wte = model_layout_find(&lay, "wte");
    CHECK(wte && wte->shape[0] == 70000, "wte");
    for (size_t i = 0; i < wte->numel; i++) host[wte->offset + i] *= 50; /* logits far from flat */
    memcpy(swapped, host, lay.numel * sizeof *host);
    const size_t C = (size_t)cfg.channels;
    for (size_t x = 0; x < 70000 - 65536; x++) {
        float *a = swapped + wte->offset + x * C, *b = swapped + wte->offset + (x + 65536) * C;
        for (size_t c = 0; c < C; c++) {
            float t = a[c];
            a[c] = b[c], b[c] = t;
        }
    }
    model_ctx *ctx = ops->create(&lay, B, T, M, 1, &e);
    CHECK(ctx, "create: %s", e.msg);
    float *p = ops->alloc(ctx, lay.numel);
    double l_hi, l_lo, l_swap;
    model_batch bh = {.B = B, .T = T, .tokens = hi, .domain = dom};
    model_batch bl = {.B = B, .T = T, .tokens = lo, .domain = dom};
    ops->upload(ctx, p, host, lay.numel, &e);
    CHECK(ops->forward(ctx, p, &bh, &l_hi, NULL, &e) == 0, "forward hi: %s", e.msg);
    CHECK(ops->forward(ctx, p, &bl, &l_lo, NULL, &e) == 0, "forward lo: %s", e.msg);
    ops->upload(ctx, p, swapped, lay.numel, &e);
    CHECK(ops->forward(ctx, p, &bl, &l_swap, NULL, &e) == 0, "forward swapped: %s", e.msg);
    CHECK(fabs(l_hi - l_swap) < 1e-5 * fabs(l_hi), "ids > 65535: loss %.9g, swapped rows %.9g", l_hi,
          l_swap);
    CHECK(fabs(l_hi - l_lo) > 1e-2, "ids > 65535 behave like their low 16 bits: %.9g vs %.9g", l_hi,
          l_lo);
    hi[6] = 70000;
    CHECK(ops->forward(ctx, p, &bh, &l_hi, NULL, &e) == ERR_USAGE &&
              strstr(e.msg, "token 70000 at 6 is >= vocab 70000"),
          "token = vocab: %s", e.msg);
    ops->release(ctx, p);
    ops->destroy(ctx);
    free(host);
    free(swapped);
    model_layout_free(&lay);
}

int main(void) {
    RUN(test_layout_table);
    RUN(test_init_is_seeded_gpt2);
    RUN(test_init_pieces_equal_one_sequential_stream);
    RUN(test_forward_backward_bit_identical);
    RUN(test_backward_matches_finite_differences_f64);
    RUN(test_sgd_lowers_loss_on_a_fixed_batch);
    RUN(test_adamw_step_formula);
    RUN(test_clip_and_norm);
    RUN(test_deferred_results_and_gated_adamw);
    RUN(test_lr_cosine_schedule);
    RUN(test_bad_batches_are_rejected);
    RUN(test_wide_token_ids);
    return test_summary("test_model");
}
