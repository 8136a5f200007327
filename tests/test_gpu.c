/* test_gpu.c — the CUDA backend (gpu/) against the CPU reference (model/cpu.c), on a GPU.
 * Run by `make test-gpu` (tests/gpu_run.sh), never by `make test`.
 *
 *   ops          forward losses, every gradient tensor by name, SGD, AdamW, norm, scale,
 *                copy, upload/download, zeroed alloc, clip — against model_cpu_ops
 *   determinism  two workspaces, same inputs: the same bits (fp32 and bf16)
 *   train step   forward, backward, clip, AdamW (the free phase's step) and the probe's
 *                SGD step, several steps, against the CPU
 *   state        commit on CUDA → load on CPU → train → commit → load on CUDA: tensors
 *                intact at every hop
 *   SIGKILL      a training process committing every step, killed with SIGKILL again and
 *                again (at random and inside commits), resumed each time: the final
 *                tensors are bit-identical to an uninterrupted run; then the same with
 *                `tandem run --set run.device=cuda` when the runner selects the backend
 *   gelu         the MLP's GELU in cuBLASLt's epilogues against the GELU kernels (fp32 and
 *                bf16 tolerances); skipped where cuBLASLt has none, unless
 *                TANDEM_REQUIRE_GELU_EPILOGUE=1
 *   cudnn        model.attention = cudnn against the built-in attention (bf16 tolerances,
 *                whole model), and the same bits twice; skipped without cuDNN unless
 *                TANDEM_REQUIRE_CUDNN=1
 *   memory       peak GPU memory of a 160M model's workspace, both twins and AdamW
 *                (step_nets, as the runner allocates them), reported
 *
 * Tolerances (CPU float32 reference; the GPU sums in other orders, so fp32 is not
 * bit-identical to the CPU, only close):
 *   fp32  per-domain losses: relative 1e-5. Gradients: per tensor, max |gpu - cpu| <=
 *         1e-4 x max |cpu| of that tensor (floored at 1e-3 of the largest gradient).
 *         Optimiser ops on identical inputs: relative 1e-6 (SGD), 1e-5 (AdamW, as
 *         test_model), 1e-12 (norm), bit-exact (scale, copy, upload/download).
 *         Whole steps: losses relative 1e-5, gradient norms 1e-5, the first AdamW
 *         update ||Δgpu - Δcpu|| / ||Δcpu|| <= 5e-3 (elements whose gradient is rounding
 *         noise, e.g. the key bias's, get updates of either sign from Adam's
 *         normalisation), the SGD update 1e-4.
 *   bf16  per-domain losses: relative 1e-2. Gradients: per tensor ||gpu - cpu||_2 <=
 *         2.5e-2 x ||cpu||_2 (floored at 1e-3 of the whole gradient's norm), whole
 *         gradient 1e-2. Whole steps: losses relative 2e-2, gradient norms 5e-2, the SGD
 *         update 5e-2 (AdamW's first update is mostly sign(g): not compared).
 *   (Seen on the simulator, gpu/sim/, whose products are exact float arithmetic: fp32
 *   gradients within 1e-6, bf16 within 6e-3 per tensor, 3e-3 whole.)
 *   Determinism and the SIGKILL runs: bit-exact.
 *
 * Without a CUDA build or without a device every case is SKIPPED, and the summary says
 * "0 passed, 0 failed, N skipped": a skip is never a pass.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "model/model.h"
#include "tests/test.h"
#include "util/rng.h"
#ifdef TANDEM_HAVE_CUDA
#include "gpu/cuda.h"
#include "ledger/ckpt.h"
#include "runner/ckpt_model.h"
#include "ledger/records.h"
#include "steps/steps.h"
#include "storage/store.h"
#include "tests/corpus_fixture.h"
#include "tests/runner_fixture.h"
#endif

static int g_skipped;

#define N_CASES 15 /* the RUN_GPU lines in main */

static int summary(void) {
    printf("test_gpu: %d passed, %d failed, %d skipped\n", test_passed_, test_failed_, g_skipped);
    return test_failed_ ? 1 : 0;
}

#ifdef TANDEM_HAVE_CUDA

static int g_case_skipped;
static char g_skip_why[512];

/* Marks the current case skipped (with the reason) and returns from it. */
#define SKIP_CASE(...)                                                                     \
    do {                                                                                   \
        snprintf(g_skip_why, sizeof g_skip_why, __VA_ARGS__);                              \
        g_case_skipped = 1;                                                                \
        return;                                                                            \
    } while (0)

/* TEST_GPU_CASES=name,name,... runs only those cases (the others are skipped) */
static int selected(const char *name) {
    const char *list = getenv("TEST_GPU_CASES");
    if (!list || !*list) return 1;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

#define RUN_GPU(fn)                                                                        \
    do {                                                                                   \
        g_case_skipped = 0;                                                                \
        test_case_failed_ = 0;                                                             \
        if (selected(#fn)) fn();                                                           \
        else snprintf(g_skip_why, sizeof g_skip_why, "not in TEST_GPU_CASES"), g_case_skipped = 1; \
        if (test_case_failed_) {                                                           \
            test_failed_++;                                                                \
            printf("FAIL %s\n", #fn);                                                      \
        } else if (g_case_skipped) {                                                       \
            g_skipped++;                                                                   \
            printf("SKIP %s: %s\n", #fn, g_skip_why);                                      \
        } else {                                                                           \
            test_passed_++;                                                                \
            printf("PASS %s\n", #fn);                                                      \
        }                                                                                  \
        fflush(stdout);                                                                    \
    } while (0)

static const model_ops *CPU = &model_cpu_ops;
static const model_ops *GPU = &model_cuda_ops;
static char g_self[4096]; /* this binary, for child processes */

/* ---------------------------------------------------------------- shapes and batches */

typedef struct shape {
    const char *name;
    model_config cfg;
    int B, T, M;
    int32_t dom[8];
    double coef[8];
} shape;

/* hs = 8 (padded to 16 in the attention tiles), 3 key tiles of 64 with a partial last
 * one, vocab not a multiple of 64, a domain without sequences (coefficient 123 must not
 * matter); hs = 64 (the tensor-core path without padding), T = 130; and a vocabulary
 * above 65536 (Llama-3/Qwen2-sized tokenizers). */
static const shape SHAPES[] = {
    {"small-heads", {.vocab = 67, .ctx = 160, .layers = 2, .heads = 4, .channels = 32},
     3, 150, 3, {0, 2, 0}, {0.7, 123.0, 1.9}},
    {"gpt2-heads", {.vocab = 300, .ctx = 192, .layers = 1, .heads = 2, .channels = 128},
     2, 130, 2, {0, 1}, {1.0, 0.5}},
    /* token ids above uint16 (uint32 from the batch to the device), a padded vocabulary */
    {"wide-vocab", {.vocab = 70000, .ctx = 8, .layers = 1, .heads = 2, .channels = 16},
     1, 4, 1, {0}, {1.0}},
};
#define N_SHAPES ((int)(sizeof SHAPES / sizeof *SHAPES))

static void make_tokens(uint32_t *tok, int B, int T, int V, uint64_t seed) {
    rng_stream s;
    rng_stream_init(&s, seed, RNG_TEST, 40, 0, 0);
    for (int i = 0; i < B * (T + 1); i++) tok[i] = (uint32_t)rng_below(&s, (uint64_t)V);
}

/* GPT-2 initialisation with LayerNorm gains and biases moved off 1 and 0 (as test_model) */
static void init_perturbed(const model_layout *lay, float *p, uint64_t seed) {
    model_init_params(lay, seed, p);
    rng_stream s;
    rng_stream_init(&s, seed, RNG_TEST, 41, 0, 0);
    for (int i = 0; i < lay->n; i++) {
        const model_tensor *t = &lay->t[i];
        if (t->ndim != 1) continue;
        for (size_t j = 0; j < t->numel; j++) p[t->offset + j] += (float)(0.1 * rng_normal(&s));
    }
}

static int set_precision(const char *prec) {
    tdm_err e;
    if (model_cuda_set_precision(prec, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        return -1;
    }
    return 0;
}

/* Where the last GPU workspace of forward_backward ran the MLP's GELU
 * (model_cuda_gelu_epilogue) */
static char g_gelu[32];

/* One forward and backward of `ops` in a fresh workspace: losses, token counts and the
 * gradient (host). 0 or -1 with the message printed. */
typedef struct fb {
    double loss[8];
    long ntok[8];
    float *grad;
} fb;

static int forward_backward(const model_ops *ops, const model_layout *lay, const float *params,
                            const shape *sh, const uint32_t *tok, fb *out) {
    tdm_err e = {0};
    model_batch b = {.B = sh->B, .T = sh->T, .tokens = tok, .domain = sh->dom};
    model_ctx *ctx = ops->create(lay, sh->B, sh->T, sh->M, 1, &e);
    if (!ctx) {
        fprintf(stderr, "  %s create: %s\n", ops->name, e.msg);
        return -1;
    }
    float *p = ops->alloc(ctx, lay->numel), *g = ops->alloc(ctx, lay->numel);
    out->grad = malloc(lay->numel * sizeof(float));
    int rc = p && g && out->grad ? 0 : err_set(&e, ERR_INTERNAL, "out of memory");
    if (!rc) rc = ops->upload(ctx, p, params, lay->numel, &e);
    if (!rc) rc = ops->forward(ctx, p, &b, out->loss, out->ntok, &e);
    if (!rc) rc = ops->backward(ctx, p, sh->coef, g, &e);
    if (!rc) rc = ops->download(ctx, out->grad, g, lay->numel, &e);
    if (rc) fprintf(stderr, "  %s: %s\n", ops->name, e.msg);
    if (p) ops->release(ctx, p);
    if (g) ops->release(ctx, g);
    if (ops == GPU) snprintf(g_gelu, sizeof g_gelu, "%s", model_cuda_gelu_epilogue(ctx));
    ops->destroy(ctx);
    return rc ? -1 : 0;
}

/* ---------------------------------------------------------------- comparisons */

/* Checks GPU losses and gradients against the CPU's under the precision's tolerances;
 * prints the worst figures. 0 when within them. */
static int compare_fb(const model_layout *lay, const shape *sh, const fb *c, const fb *g, int bf16) {
    int bad = 0;
    double worst_loss = 0;
    for (int m = 0; m < sh->M; m++) {
        if (c->ntok[m] != g->ntok[m]) {
            fprintf(stderr, "  domain %d: %ld tokens on the GPU, %ld on the CPU\n", m, g->ntok[m],
                    c->ntok[m]);
            bad = 1;
        }
        if (c->ntok[m] == 0) {
            if (g->loss[m] != 0.0) fprintf(stderr, "  absent domain %d has loss %g\n", m, g->loss[m]), bad = 1;
            continue;
        }
        double rel = fabs(g->loss[m] - c->loss[m]) / fabs(c->loss[m]);
        if (rel > worst_loss) worst_loss = rel;
    }
    double tol_loss = bf16 ? 1e-2 : 1e-5;
    if (worst_loss > tol_loss || !(worst_loss == worst_loss)) {
        fprintf(stderr, "  loss relative error %.3e > %.0e\n", worst_loss, tol_loss);
        bad = 1;
    }
    double gmax = 0, gss = 0, dss = 0;
    for (size_t i = 0; i < lay->numel; i++) {
        gmax = fmax(gmax, fabs(c->grad[i]));
        gss += (double)c->grad[i] * c->grad[i];
        double d = (double)g->grad[i] - c->grad[i];
        dss += d * d;
    }
    double worst = 0;
    const char *worst_name = "";
    for (int ti = 0; ti < lay->n; ti++) {
        const model_tensor *t = &lay->t[ti];
        double tmax = 0, dmax = 0, tss = 0, tdss = 0;
        for (size_t j = 0; j < t->numel; j++) {
            double cv = c->grad[t->offset + j], d = g->grad[t->offset + j] - cv;
            if (!(d == d)) d = INFINITY; /* NaN never passes */
            tmax = fmax(tmax, fabs(cv));
            dmax = fmax(dmax, fabs(d));
            tss += cv * cv;
            tdss += d * d;
        }
        double err = bf16 ? sqrt(tdss) / fmax(sqrt(tss), 1e-3 * sqrt(gss))
                          : dmax / fmax(tmax, 1e-3 * gmax);
        double tol = bf16 ? 2.5e-2 : 1e-4;
        if (err > worst) worst = err, worst_name = t->name;
        if (err > tol) {
            fprintf(stderr, "  %s: gradient error %.3e > %.0e (max |cpu| %.3e, max |diff| %.3e)\n",
                    t->name, err, tol, tmax, dmax);
            bad = 1;
        }
    }
    double whole = sqrt(dss) / sqrt(gss);
    if (bf16 && !(whole <= 1e-2)) {
        fprintf(stderr, "  whole gradient: relative error %.3e > 1e-2\n", whole);
        bad = 1;
    }
    printf("  %-11s %s: loss rel err %.2e, worst tensor %.2e (%s), whole gradient %.2e\n",
           sh->name, bf16 ? "bf16" : "fp32", worst_loss, worst, worst_name, whole);
    return bad;
}

/* A shape's layout, perturbed GPT-2 parameters (seed) and tokens (seed + 2), malloc'd;
 * -1 when the layout is refused or memory runs out (nothing to free then). */
static int shape_inputs(const shape *sh, uint64_t seed, model_layout *lay, float **params, uint32_t **tok) {
    if (model_layout_init(lay, &sh->cfg, NULL)) return -1;
    *params = malloc(lay->numel * sizeof(float));
    *tok = malloc((size_t)sh->B * (sh->T + 1) * sizeof **tok);
    if (!*params || !*tok) {
        free(*params);
        free(*tok);
        model_layout_free(lay);
        return -1;
    }
    init_perturbed(lay, *params, seed);
    make_tokens(*tok, sh->B, sh->T, sh->cfg.vocab, seed + 2);
    return 0;
}

static void forward_backward_against_cpu(int bf16) {
    CHECK(set_precision(bf16 ? "bf16" : "fp32") == 0, "precision");
    for (int si = 0; si < N_SHAPES; si++) {
        const shape *sh = &SHAPES[si];
        model_layout lay;
        float *params;
        uint32_t *tok;
        CHECK(shape_inputs(sh, 3 + si, &lay, &params, &tok) == 0, "%s: layout or memory", sh->name);
        fb c, g;
        memset(&c, 0, sizeof c);
        memset(&g, 0, sizeof g);
        int ok = forward_backward(CPU, &lay, params, sh, tok, &c) == 0 &&
                 forward_backward(GPU, &lay, params, sh, tok, &g) == 0;
        int bad = ok ? compare_fb(&lay, sh, &c, &g, bf16) : 1;
        free(c.grad);
        free(g.grad);
        free(tok);
        free(params);
        model_layout_free(&lay);
        CHECK(ok, "%s: a backend failed", sh->name);
        CHECK(!bad, "%s: the GPU differs from the CPU beyond the tolerances above", sh->name);
    }
}

static void test_forward_backward_fp32(void) { forward_backward_against_cpu(0); }
static void test_forward_backward_bf16(void) { forward_backward_against_cpu(1); }

/* ---------------------------------------------------------------- the memory estimate */

/* model_ops.workspace_bytes, which the run prints and checks against the GPU's free memory
 * before it allocates, is what create() then allocates, to the byte, in both precisions
 * and for shapes with odd sizes (padding) and several AdamW spans. */
static void test_workspace_estimate(void) {
    static const model_config shapes[] = {
        {.vocab = 300, .ctx = 64, .layers = 3, .heads = 2, .channels = 64},
        {.vocab = 257, .ctx = 40, .layers = 1, .heads = 3, .channels = 48},
    };
    static const int batch[][2] = {{1, 4}, {5, 40}};
    for (int bf16 = 0; bf16 <= 1; bf16++)
        for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
            CHECK(set_precision(bf16 ? "bf16" : "fp32") == 0, "precision");
            model_layout lay;
            CHECK(model_layout_init(&lay, &shapes[k], NULL) == 0, "layout");
            tdm_err e = {0};
            int B = batch[k][0], T = batch[k][1];
            double want = GPU->workspace_bytes(&lay, B, T, 3, 0);
            model_ctx *gc = GPU->create(&lay, B, T, 3, 0, &e);
            CHECK(gc, "create: %s", e.msg);
            model_cuda_mem mem = {0};
            CHECK(model_cuda_memory(gc, &mem, &e) == 0, "%s", e.msg);
            CHECK(want > 0 && (double)mem.backend_now == want,
                  "%s shape %zu: estimate %.0f bytes, create allocated %zu", bf16 ? "bf16" : "fp32",
                  k, want, mem.backend_now);
            GPU->destroy(gc);
            model_layout_free(&lay);
        }
}

/* ---------------------------------------------------------------- optimiser and buffer ops */

static void test_buffer_and_optimiser_ops(void) {
    CHECK(set_precision("fp32") == 0, "precision");
    model_config cfg = {.vocab = 300, .ctx = 64, .layers = 3, .heads = 2, .channels = 64};
    model_layout lay;
    CHECK(model_layout_init(&lay, &cfg, NULL) == 0, "layout");
    size_t n = lay.numel;
    CHECK(n > 2 * 65536, "needs several norm chunks (%zu)", n);
    tdm_err e = {0};
    model_ctx *cc = CPU->create(&lay, 1, 4, 1, 1, &e);
    model_ctx *gc = GPU->create(&lay, 1, 4, 1, 1, &e);
    CHECK(cc && gc, "create: %s", e.msg);
    float *h[4], *back = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    rng_stream s;
    rng_stream_init(&s, 1, RNG_TEST, 42, 0, 0);
    for (int k = 0; k < 4; k++) h[k] = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        h[0][i] = (float)rng_normal(&s);                /* params */
        h[1][i] = (float)rng_normal(&s);                /* grads */
        h[2][i] = (float)(0.1 * rng_normal(&s));        /* m */
        h[3][i] = (float)(0.01 * rng_uniform(&s));      /* v */
    }
    float *cb[4], *gb[4];
    for (int k = 0; k < 4; k++) {
        cb[k] = CPU->alloc(cc, n);
        gb[k] = GPU->alloc(gc, n);
        CHECK(cb[k] && gb[k], "alloc");
    }
    /* a fresh buffer is zeroed */
    CHECK(GPU->download(gc, back, gb[0], n, &e) == 0, "%s", e.msg);
    for (size_t i = 0; i < n; i++) CHECK(back[i] == 0.0f, "alloc not zeroed at %zu", i);
    /* upload/download and copy are exact */
    for (int k = 0; k < 4; k++) {
        CHECK(CPU->upload(cc, cb[k], h[k], n, &e) == 0 && GPU->upload(gc, gb[k], h[k], n, &e) == 0,
              "%s", e.msg);
    }
    CHECK(GPU->download(gc, back, gb[1], n, &e) == 0, "%s", e.msg);
    CHECK(memcmp(back, h[1], n * sizeof(float)) == 0, "upload/download changed bits");
    float *tmp = GPU->alloc(gc, n);
    CHECK(GPU->copy(gc, tmp, gb[1], n, &e) == 0, "%s", e.msg);
    CHECK(GPU->download(gc, back, tmp, n, &e) == 0, "%s", e.msg);
    CHECK(memcmp(back, h[1], n * sizeof(float)) == 0, "copy changed bits");
    /* norm: both sum fixed chunks in double */
    double nc = CPU->norm(cc, cb[1]), ng = GPU->norm(gc, gb[1]);
    CHECK(fabs(ng - nc) <= 1e-12 * nc, "norm %.17g vs CPU %.17g", ng, nc);
    /* scale: one rounding each, bit-exact */
    CPU->scale(cc, cb[1], 0.37f);
    GPU->scale(gc, gb[1], 0.37f);
    CHECK(GPU->download(gc, back, gb[1], n, &e) == 0, "%s", e.msg);
    CHECK(memcmp(back, cb[1], n * sizeof(float)) == 0, "scale differs from the CPU");
    /* SGD */
    CHECK(CPU->sgd(cc, cb[0], cb[1], 0.05f, &e) == 0 && GPU->sgd(gc, gb[0], gb[1], 0.05f, &e) == 0,
          "%s", e.msg);
    CHECK(GPU->download(gc, back, gb[0], n, &e) == 0, "%s", e.msg);
    double sgd_worst = 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)back[i] - cb[0][i]) /
                     (fabs(cb[0][i]) + fabs(0.05 * cb[1][i]) + 1e-30);
        sgd_worst = fmax(sgd_worst, err == err ? err : INFINITY); /* fmax would drop a NaN */
    }
    CHECK(sgd_worst <= 1e-6, "SGD differs from the CPU by %.2e relative", sgd_worst);
    /* AdamW */
    model_adamw hp = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                      .weight_decay = 0.1f, .step = 3};
    CHECK(CPU->adamw(cc, cb[0], cb[1], cb[2], cb[3], &hp, &e) == 0, "%s", e.msg);
    CHECK(GPU->adamw(gc, gb[0], gb[1], gb[2], gb[3], &hp, &e) == 0, "%s", e.msg);
    worst = 0;
    for (int k = 0; k < 4; k++) {
        if (k == 1) continue;
        CHECK(GPU->download(gc, back, gb[k], n, &e) == 0, "%s", e.msg);
        for (size_t i = 0; i < n; i++) {
            double err = fabs((double)back[i] - cb[k][i]) / (fabs(cb[k][i]) + 1e-3);
            worst = fmax(worst, err == err ? err : INFINITY); /* fmax would drop a NaN */
        }
    }
    CHECK(worst <= 1e-5, "AdamW differs from the CPU by %.2e relative", worst);
    double adam_worst = worst;
    /* decay only on 2-D tensors: a bias with zero gradient and moments stays put */
    const model_tensor *bias = model_layout_find(&lay, "h.0.attn.c_proj.bias");
    const model_tensor *w = model_layout_find(&lay, "h.0.attn.c_proj.weight");
    memset(want, 0, n * sizeof(float));
    for (int k = 1; k < 4; k++) CHECK(GPU->upload(gc, gb[k], want, n, &e) == 0, "%s", e.msg);
    CHECK(GPU->download(gc, want, gb[0], n, &e) == 0, "%s", e.msg);
    hp.step = 1;
    CHECK(GPU->adamw(gc, gb[0], gb[1], gb[2], gb[3], &hp, &e) == 0, "%s", e.msg);
    CHECK(GPU->download(gc, back, gb[0], n, &e) == 0, "%s", e.msg);
    CHECK(back[bias->offset] == want[bias->offset], "bias decayed");
    CHECK(back[w->offset] != want[w->offset], "weight not decayed");
    hp.step = 0;
    CHECK(GPU->adamw(gc, gb[0], gb[1], gb[2], gb[3], &hp, &e) != 0, "step 0 must be rejected");
    /* clipping through the backend's norm and scale */
    CHECK(GPU->upload(gc, gb[1], h[1], n, &e) == 0, "%s", e.msg);
    double before = model_clip_grads(GPU, gc, gb[1], 2.0);
    CHECK(fabs(before - sqrt(nc * nc)) <= 1e-12 * nc, "clip returned %.17g, norm %.17g", before, nc);
    double after = GPU->norm(gc, gb[1]);
    CHECK(fabs(after - 2.0) < 1e-5, "norm after clipping %g", after);
    printf("  norm %.17g (CPU %.17g); SGD %.1e, AdamW %.1e relative\n", ng, nc, sgd_worst, adam_worst);
    GPU->release(gc, tmp);
    for (int k = 0; k < 4; k++) {
        CPU->release(cc, cb[k]);
        GPU->release(gc, gb[k]);
        free(h[k]);
    }
    CPU->destroy(cc);
    GPU->destroy(gc);
    free(back);
    free(want);
    model_layout_free(&lay);
}

/* ---------------------------------------------------------------- determinism */

static void test_bit_identical_runs(void) {
    for (int bf16 = 0; bf16 < 2; bf16++) {
        CHECK(set_precision(bf16 ? "bf16" : "fp32") == 0, "precision");
        for (int si = 0; si < N_SHAPES; si++) {
            const shape *sh = &SHAPES[si];
            model_layout lay;
            CHECK(model_layout_init(&lay, &sh->cfg, NULL) == 0, "layout");
            float *params = malloc(lay.numel * sizeof(float));
            init_perturbed(&lay, params, 7);
            uint32_t *tok = malloc((size_t)sh->B * (sh->T + 1) * sizeof *tok);
            make_tokens(tok, sh->B, sh->T, sh->cfg.vocab, 9);
            fb r[2];
            memset(r, 0, sizeof r);
            int ok = forward_backward(GPU, &lay, params, sh, tok, &r[0]) == 0 &&
                     forward_backward(GPU, &lay, params, sh, tok, &r[1]) == 0;
            int same = ok && memcmp(r[0].loss, r[1].loss, sizeof r[0].loss) == 0 &&
                       memcmp(r[0].grad, r[1].grad, lay.numel * sizeof(float)) == 0;
            free(r[0].grad);
            free(r[1].grad);
            free(tok);
            free(params);
            model_layout_free(&lay);
            CHECK(ok, "a run failed");
            CHECK(same, "%s %s: two runs on the same inputs gave different bits", sh->name,
                  bf16 ? "bf16" : "fp32");
        }
    }
}

/* ---------------------------------------------------------------- cuDNN attention */

/* model.attention = cudnn (gpu/cudnn_att.cu) against the built-in kernels, through the
 * whole model in bf16: GPT-2 shapes with head size 64 (T 256, a multiple of cuDNN's tiles,
 * and T 200, which is not), per-domain losses relative 1e-2 and every gradient tensor
 * within bf16's tolerances of the built-in kernels' (the same test as against the CPU),
 * and two cuDNN runs with the same bits. Skipped where cuDNN does not load (the simulator;
 * a machine without libcudnn.so.9) unless TANDEM_REQUIRE_CUDNN=1 (gpu/lease_check.sh sets
 * it): then that is a failure. The resume half of the bit-exact guarantee with cuDNN is
 * test_sigkill_resume_bit_exact's bf16 run, which takes the default model.attention =
 * auto, i.e. cuDNN wherever this case passes (its log says which ran). */
static void test_cudnn_attention(void) {
    static const shape shapes[] = {
        {"cudnn-T256", {.vocab = 300, .ctx = 256, .layers = 2, .heads = 4, .channels = 256},
         4, 256, 2, {0, 1, 0, 1}, {1.0, 0.5}},
        {"cudnn-T200", {.vocab = 300, .ctx = 256, .layers = 1, .heads = 2, .channels = 128},
         3, 200, 2, {0, 1, 1}, {0.8, 1.3}},
    };
    tdm_err e = {0};
    CHECK(set_precision("bf16") == 0, "precision");
    const char *req = getenv("TANDEM_REQUIRE_CUDNN");
    int required = req && !strcmp(req, "1");
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const shape *sh = &shapes[si];
        model_layout lay;
        CHECK(model_layout_init(&lay, &sh->cfg, NULL) == 0, "layout");
        /* does cuDNN serve this build and device at all? */
        CHECK(model_cuda_set_attention("cudnn", &e) == 0, "%s", e.msg);
        model_ctx *probe = GPU->create(&lay, sh->B, sh->T, sh->M, 0, &e);
        if (!probe) {
            model_layout_free(&lay);
            model_cuda_set_attention(NULL, &e);
            if (required) CHECK(0, "model.attention = cudnn refused: %s", e.msg);
            SKIP_CASE("cuDNN attention unavailable: %.400s", e.msg);
        }
        CHECK(!strcmp(model_cuda_attention(probe), "cudnn"), "the workspace runs %s",
              model_cuda_attention(probe));
        GPU->destroy(probe);
        float *params = malloc(lay.numel * sizeof(float));
        init_perturbed(&lay, params, 21 + si);
        uint32_t *tok = malloc((size_t)sh->B * (sh->T + 1) * sizeof *tok);
        make_tokens(tok, sh->B, sh->T, sh->cfg.vocab, 23 + si);
        fb ref, dn[2];
        memset(&ref, 0, sizeof ref);
        memset(dn, 0, sizeof dn);
        CHECK(model_cuda_set_attention("builtin", &e) == 0, "%s", e.msg);
        int ok = forward_backward(GPU, &lay, params, sh, tok, &ref) == 0;
        CHECK(model_cuda_set_attention("cudnn", &e) == 0, "%s", e.msg);
        ok = ok && forward_backward(GPU, &lay, params, sh, tok, &dn[0]) == 0 &&
             forward_backward(GPU, &lay, params, sh, tok, &dn[1]) == 0;
        int bad = ok ? compare_fb(&lay, sh, &ref, &dn[0], 1) : 1;
        int same = ok && memcmp(dn[0].loss, dn[1].loss, sizeof dn[0].loss) == 0 &&
                   memcmp(dn[0].grad, dn[1].grad, lay.numel * sizeof(float)) == 0;
        free(ref.grad);
        free(dn[0].grad);
        free(dn[1].grad);
        free(tok);
        free(params);
        model_layout_free(&lay);
        model_cuda_set_attention(NULL, &e);
        CHECK(ok, "%s: a run failed", sh->name);
        CHECK(!bad, "%s: cuDNN's attention differs from the built-in kernels beyond bf16's tolerances",
              sh->name);
        CHECK(same, "%s: two cuDNN runs on the same inputs gave different bits", sh->name);
    }
}

/* ---------------------------------------------------------------- the GELU epilogues */

/* The MLP's GELU in cuBLASLt's epilogues (GELU_AUX_BIAS forward, DGELU backward) against
 * the GELU kernels (TANDEM_GELU_EPILOGUE=off), fp32 and bf16, every shape: losses and
 * every gradient within the precision's tolerances. (The same bits twice: the default is
 * the fused path, so test_bit_identical_runs checks it.) Where this cuBLASLt has no
 * algorithm for them the workspace says "kernels" and the comparison is skipped, unless
 * TANDEM_REQUIRE_GELU_EPILOGUE=1 (the simulator's runs, gpu/lease_check.sh). */
static void test_gelu_epilogue(void) {
    const char *req = getenv("TANDEM_REQUIRE_GELU_EPILOGUE");
    int required = req && !strcmp(req, "1");
    /* the simulator told to have no algorithm for them (1) or to refuse them when called
     * (2): every problem falls back */
    const char *none = getenv("TANDEM_GPU_SIM_NO_GELU_EPILOGUE");
    int absent = none && (!strcmp(none, "1") || !strcmp(none, "2"));
    for (int bf16 = 0; bf16 < 2; bf16++) {
        CHECK(set_precision(bf16 ? "bf16" : "fp32") == 0, "precision");
        for (int si = 0; si < N_SHAPES; si++) {
            const shape *sh = &SHAPES[si];
            model_layout lay;
            float *params;
            uint32_t *tok;
            CHECK(shape_inputs(sh, 31 + si, &lay, &params, &tok) == 0, "%s: layout or memory", sh->name);
            fb ref, fu;
            memset(&ref, 0, sizeof ref);
            memset(&fu, 0, sizeof fu);
            char off_said[32], auto_said[32];
            setenv("TANDEM_GELU_EPILOGUE", "off", 1);
            int ok = forward_backward(GPU, &lay, params, sh, tok, &ref) == 0;
            snprintf(off_said, sizeof off_said, "%s", g_gelu);
            setenv("TANDEM_GELU_EPILOGUE", "auto", 1);
            ok = ok && forward_backward(GPU, &lay, params, sh, tok, &fu) == 0;
            snprintf(auto_said, sizeof auto_said, "%s", g_gelu);
            unsetenv("TANDEM_GELU_EPILOGUE");
            int fused = !strcmp(auto_said, "fused");
            int bad = ok && fused ? compare_fb(&lay, sh, &ref, &fu, bf16) : 0;
            if (!fused) printf("  %s %s: the GELU epilogue ran as '%s'\n", sh->name, bf16 ? "bf16" : "fp32", auto_said);
            free(ref.grad);
            free(fu.grad);
            free(tok);
            free(params);
            model_layout_free(&lay);
            CHECK(ok, "%s: a run failed", sh->name);
            CHECK(!strcmp(off_said, "off"), "%s: TANDEM_GELU_EPILOGUE=off ran '%s'", sh->name, off_said);
            CHECK(fused || !required, "%s %s: the GELU epilogue is required but ran as '%s'", sh->name,
                  bf16 ? "bf16" : "fp32", auto_said);
            CHECK(!absent || !strcmp(auto_said, "kernels"),
                  "%s: the simulator has no GELU epilogue, yet the workspace ran '%s'", sh->name, auto_said);
            CHECK(!bad, "%s: the fused GELU differs from the kernels beyond the tolerances above", sh->name);
        }
    }
}

/* ---------------------------------------------------------------- the Llama / Qwen2 family */

static void whole_steps(int bf16, const shape *sh);

/* The family on the GPU (gpu/cuda_hf.cu) against the CPU backend (model/qwen2.c's tape),
 * in fp32 (the CPU's operations: fp32 tolerances) and in bf16 (the packed q | k | v rows,
 * the flash-style grouped-query attention, bf16 operands: bf16 tolerances): per-domain
 * losses and every tensor's gradient, a domain without sequences, two runs giving the same
 * bits, the estimate equal to what create allocates, and four AdamW steps and an SGD step
 * (whole_steps: the optimiser's decay list of the family's tensors). A Qwen2 shape (tied embeddings,
 * q/k/v biases, 4 query heads on 2 key/value heads, a vocabulary that is not a multiple of
 * 64) and a Llama shape (an untied head, no biases, 4 query heads on 1, head_dim 6 so that
 * H * D != C and the packed rows are not 16-byte multiples); T 9 and 40 (one and several
 * attention tiles, a part-filled last one). */
static void test_hf_family(void) {
    static const hf_arch arch[2] = {
        {.model_type = "qwen2", .vocab = 67, .channels = 32, .layers = 2, .heads = 4, .kv_heads = 2, .head_dim = 8,
         .intermediate = 48, .max_positions = 64, .rope_theta = 1e4, .rms_eps = 1e-6, .tied = 1, .qkv_bias = 1},
        {.model_type = "llama", .vocab = 130, .channels = 32, .layers = 1, .heads = 4, .kv_heads = 1, .head_dim = 6,
         .intermediate = 40, .max_positions = 64, .rope_theta = 5e5, .rms_eps = 1e-5, .tied = 0, .qkv_bias = 0},
    };
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (int k = 0; k < 2; k++) {
            CHECK(set_precision(bf16 ? "bf16" : "fp32") == 0, "precision");
            int T = bf16 && k == 0 ? 40 : 9;
            shape sh = {arch[k].model_type, {0}, 3, T, 3, {0, 2, 0}, {0.7, 123.0, 1.9}};
            model_config_hf(&sh.cfg, &arch[k], 64);
            model_layout lay;
            CHECK(model_layout_init(&lay, &sh.cfg, NULL) == 0, "layout");
            float *params = malloc(lay.numel * sizeof(float));
            init_perturbed(&lay, params, 11 + k);
            /* fp32: weights near 0.1, so that every path matters. Not in bf16, whose rounding
             * they amplify past its tolerances (4-10 % per tensor on the simulator; at the
             * scale of the GPT-2 cases 0.3-0.7 %, as GPT-2's) */
            if (!bf16)
                for (size_t i = 0; i < lay.numel; i++) params[i] *= 4;
            uint32_t *tok = malloc((size_t)sh.B * (sh.T + 1) * sizeof *tok);
            make_tokens(tok, sh.B, sh.T, arch[k].vocab, 13 + k);
            fb c, g, g2;
            memset(&c, 0, sizeof c), memset(&g, 0, sizeof g), memset(&g2, 0, sizeof g2);
            int ok = forward_backward(CPU, &lay, params, &sh, tok, &c) == 0 &&
                     forward_backward(GPU, &lay, params, &sh, tok, &g) == 0 &&
                     forward_backward(GPU, &lay, params, &sh, tok, &g2) == 0;
            int bad = ok ? compare_fb(&lay, &sh, &c, &g, bf16) : 1;
            int same = ok && !memcmp(g.loss, g2.loss, sizeof g.loss) &&
                       !memcmp(g.grad, g2.grad, lay.numel * sizeof(float));
            tdm_err e = {0};
            double want = GPU->workspace_bytes(&lay, sh.B, sh.T, 3, 0);
            model_ctx *gc = GPU->create(&lay, sh.B, sh.T, 3, 0, &e);
            model_cuda_mem mem = {0};
            int est = gc && model_cuda_memory(gc, &mem, &e) == 0 && want > 0 && (double)mem.backend_now == want;
            const char *prec = gc ? model_cuda_precision(gc) : "?";
            int prec_ok = !strcmp(prec, bf16 ? "bf16" : "fp32");
            if (gc) GPU->destroy(gc);
            free(c.grad), free(g.grad), free(g2.grad), free(tok), free(params);
            model_layout_free(&lay);
            CHECK(ok, "%s %s: a backend failed", sh.name, bf16 ? "bf16" : "fp32");
            CHECK(!bad, "%s %s: the GPU differs from the CPU beyond the tolerances above", sh.name,
                  bf16 ? "bf16" : "fp32");
            CHECK(same, "%s %s: two GPU runs gave different bits", sh.name, bf16 ? "bf16" : "fp32");
            CHECK(est, "%s %s: estimate %.0f bytes, create allocated %zu", sh.name, bf16 ? "bf16" : "fp32", want,
                  mem.backend_now);
            CHECK(prec_ok, "%s: the workspace runs in %s, asked for %s", sh.name, prec, bf16 ? "bf16" : "fp32");
            whole_steps(bf16, &sh);
            if (test_case_failed_) return;
        }
    /* Qwen2-0.5B's shape at the paper's SFT batch: in bf16 no buffer grows with T² (the
     * estimate for 16 x 1024 is the one for 32 x 512, the same rows), in fp32 the kept
     * probabilities do; and the bf16 workspace fits an 80 GB GPU beside the run's buffers */
    static const hf_arch q05 = {.model_type = "qwen2", .vocab = 151936, .channels = 896, .layers = 24, .heads = 14,
                                .kv_heads = 2, .head_dim = 64, .intermediate = 4864, .max_positions = 4096,
                                .rope_theta = 1e6, .rms_eps = 1e-6, .tied = 1, .qkv_bias = 1};
    model_config qc;
    model_config_hf(&qc, &q05, 1024);
    model_layout ql;
    CHECK(model_layout_init(&ql, &qc, NULL) == 0, "layout");
    double ws[2][2];
    for (int bf16 = 0; bf16 < 2; bf16++) {
        CHECK(set_precision(bf16 ? "bf16" : "fp32") == 0, "precision");
        ws[bf16][0] = GPU->workspace_bytes(&ql, 32, 512, 1, 0);
        ws[bf16][1] = GPU->workspace_bytes(&ql, 16, 1024, 1, 0);
    }
    CHECK(set_precision("fp32") == 0, "precision");
    double gib = 1073741824.0, params = (double)ql.numel;
    model_layout_free(&ql);
    printf("  Qwen2-0.5B (%.0fM parameters) workspace: bf16 %.1f GiB at 32 x 512 and 16 x 1024; fp32 %.1f and %.1f GiB\n",
           params / 1e6, ws[1][0] / gib, ws[0][0] / gib, ws[0][1] / gib);
    CHECK(ws[1][0] == ws[1][1], "bf16: the estimate grows with T at the same rows (%.0f -> %.0f bytes)", ws[1][0],
          ws[1][1]);
    CHECK(ws[0][1] > ws[0][0], "fp32 keeps the probabilities: its estimate should grow with T");
    CHECK(ws[1][0] + 8 * 4.0 * params < 80 * gib, "bf16 at 32 x 512: %.1f GiB of workspace and 8 parameter-sized "
          "buffers exceed 80 GiB", (ws[1][0] + 32.0 * params) / gib);
}

/* ---------------------------------------------------------------- a whole training step */

/* STEPS AdamW steps (forward, backward, clip, update) on the CPU and the GPU from the same
 * parameters and batches, then one SGD step: losses, gradient norms and updates compared. */
static void whole_steps(int bf16, const shape *sh) {
    CHECK(set_precision(bf16 ? "bf16" : "fp32") == 0, "precision");
    model_layout lay;
    CHECK(model_layout_init(&lay, &sh->cfg, NULL) == 0, "layout");
    size_t P = lay.numel;
    float *init = malloc(P * sizeof(float));
    init_perturbed(&lay, init, 11);
    uint32_t *tok = malloc((size_t)sh->B * (sh->T + 1) * sizeof *tok);
    model_batch b = {.B = sh->B, .T = sh->T, .tokens = tok, .domain = sh->dom};
    enum { STEPS = 4 };
    double loss[2][STEPS][8], gnorm[2][STEPS];
    float *after1[2], *sgd[2];
    tdm_err e = {0};
    const model_ops *ops2[2] = {CPU, GPU};
    for (int r = 0; r < 2; r++) {
        const model_ops *ops = ops2[r];
        model_ctx *ctx = ops->create(&lay, sh->B, sh->T, sh->M, 1, &e);
        CHECK(ctx, "%s create: %s", ops->name, e.msg);
        float *p = ops->alloc(ctx, P), *g = ops->alloc(ctx, P), *m = ops->alloc(ctx, P),
              *v = ops->alloc(ctx, P);
        CHECK(p && g && m && v, "alloc");
        CHECK(ops->upload(ctx, p, init, P, &e) == 0, "%s", e.msg);
        after1[r] = malloc(P * sizeof(float));
        sgd[r] = malloc(P * sizeof(float));
        for (int k = 0; k < STEPS; k++) {
            make_tokens(tok, sh->B, sh->T, sh->cfg.vocab, 100 + k);
            model_adamw hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                              .weight_decay = 0.01f, .step = k + 1};
            CHECK(ops->forward(ctx, p, &b, loss[r][k], NULL, &e) == 0, "%s", e.msg);
            CHECK(ops->backward(ctx, p, sh->coef, g, &e) == 0, "%s", e.msg);
            gnorm[r][k] = model_clip_grads(ops, ctx, g, 1.0);
            CHECK(ops->adamw(ctx, p, g, m, v, &hp, &e) == 0, "%s", e.msg);
            if (k == 0) CHECK(ops->download(ctx, after1[r], p, P, &e) == 0, "%s", e.msg);
        }
        /* the probe's step: SGD from the initial parameters */
        CHECK(ops->upload(ctx, p, init, P, &e) == 0, "%s", e.msg);
        make_tokens(tok, sh->B, sh->T, sh->cfg.vocab, 200);
        double l[8];
        CHECK(ops->forward(ctx, p, &b, l, NULL, &e) == 0, "%s", e.msg);
        CHECK(ops->backward(ctx, p, sh->coef, g, &e) == 0, "%s", e.msg);
        CHECK(ops->sgd(ctx, p, g, 1e-2f, &e) == 0, "%s", e.msg);
        CHECK(ops->download(ctx, sgd[r], p, P, &e) == 0, "%s", e.msg);
        ops->release(ctx, p);
        ops->release(ctx, g);
        ops->release(ctx, m);
        ops->release(ctx, v);
        ops->destroy(ctx);
    }
    double tl = bf16 ? 2e-2 : 1e-5, tn = bf16 ? 5e-2 : 1e-5, wl = 0, wn = 0;
    for (int k = 0; k < STEPS; k++) {
        /* fmax drops a NaN: a non-finite figure counts as an infinite error */
        for (int m = 0; m < sh->M; m++)
            if (loss[0][k][m] != 0 || !isfinite(loss[1][k][m]))
                wl = fmax(wl, isfinite(loss[1][k][m]) ? fabs(loss[1][k][m] - loss[0][k][m]) / loss[0][k][m] : INFINITY);
        wn = fmax(wn, isfinite(gnorm[1][k]) ? fabs(gnorm[1][k] - gnorm[0][k]) / gnorm[0][k] : INFINITY);
    }
    /* update errors, relative to the update */
    double du = 0, uu = 0, ds = 0, us = 0;
    for (size_t i = 0; i < P; i++) {
        double dc = (double)after1[0][i] - init[i], dg = (double)after1[1][i] - init[i];
        du += (dg - dc) * (dg - dc), uu += dc * dc;
        double sc = (double)sgd[0][i] - init[i], sg = (double)sgd[1][i] - init[i];
        ds += (sg - sc) * (sg - sc), us += sc * sc;
    }
    double adam_err = sqrt(du / uu), sgd_err = sqrt(ds / us);
    printf("  %s %s: %d AdamW steps: losses %.2e, grad norms %.2e; first update %.2e; SGD update %.2e\n",
           sh->name, bf16 ? "bf16" : "fp32", STEPS, wl, wn, adam_err, sgd_err);
    for (int r = 0; r < 2; r++) {
        free(after1[r]);
        free(sgd[r]);
    }
    free(init);
    free(tok);
    model_layout_free(&lay);
    CHECK(wl <= tl, "losses along the steps differ by %.2e > %.0e", wl, tl);
    CHECK(wn <= tn, "gradient norms differ by %.2e > %.0e", wn, tn);
    CHECK(bf16 || adam_err <= 5e-3, "AdamW update differs by %.2e > 5e-3", adam_err);
    CHECK(sgd_err <= (bf16 ? 5e-2 : 1e-4), "SGD update differs by %.2e", sgd_err);
}

static void test_training_steps_fp32(void) { whole_steps(0, &SHAPES[0]); }
static void test_training_steps_bf16(void) { whole_steps(1, &SHAPES[0]); }

/* ---------------------------------------------------------------- one wait per step */

#ifdef TANDEM_GPU_SIM
void gpu_sim_waits(long *device_waits, long *event_waits); /* gpu/sim/sim.cpp */
#endif

/* The device waits a step makes (the simulator counts them; on a GPU -1: not counted). */
static long device_waits(void) {
#ifdef TANDEM_GPU_SIM
    long w;
    gpu_sim_waits(&w, NULL);
    return w;
#else
    return -1;
#endif
}

/* model.h's deferred results on the CUDA ops: forward without losses then results() gives
 * the forward's losses to the bit; clip() is model_clip_grads' rule on the device (the
 * norm bit-equal to ops->norm, the clipped gradient bit-equal to ops->scale's); an AdamW
 * after a clip of a non-finite gradient leaves parameters and moments as they were, and
 * the next one (no clip before it) steps again. Then a TANDEM episode (probe, α step,
 * free steps) on the CUDA nets against the CPU nets: its losses, norms and α agree, and
 * on the simulator, which holds a copy into page-locked memory back until a wait covers
 * it, a free step waits for the device once and a probe once plus twice per evaluation
 * batch (it used to wait after every forward and at every norm). */
static void deferred_ops(void) {
    CHECK(set_precision("fp32") == 0, "precision");
    const shape *sh = &SHAPES[0];
    model_layout lay;
    CHECK(model_layout_init(&lay, &sh->cfg, NULL) == 0, "layout");
    size_t P = lay.numel;
    tdm_err e = {0};
    model_ctx *ctx = GPU->create(&lay, sh->B, sh->T, sh->M, 0, &e);
    CHECK(ctx, "create: %s", e.msg);
    float *init = malloc(P * sizeof(float)), *h1 = malloc(P * sizeof(float)), *h2 = malloc(P * sizeof(float));
    uint32_t *tok = malloc((size_t)sh->B * (sh->T + 1) * sizeof *tok);
    init_perturbed(&lay, init, 21);
    model_batch b = {.B = sh->B, .T = sh->T, .tokens = tok, .domain = sh->dom};
    float *p = GPU->alloc(ctx, P), *g = GPU->alloc(ctx, P), *g2 = GPU->alloc(ctx, P);
    float *m = GPU->alloc(ctx, P), *v = GPU->alloc(ctx, P);
    CHECK(p && g && g2 && m && v, "alloc");
    CHECK(GPU->upload(ctx, p, init, P, &e) == 0, "%s", e.msg);
    make_tokens(tok, sh->B, sh->T, sh->cfg.vocab, 301);
    double now[8], later[8];
    CHECK(GPU->forward(ctx, p, &b, now, NULL, &e) == 0, "%s", e.msg);
    long w0 = device_waits();
    CHECK(GPU->forward(ctx, p, &b, NULL, NULL, &e) == 0, "%s", e.msg);
    CHECK(GPU->backward(ctx, p, sh->coef, g, &e) == 0, "%s", e.msg);
    long w1 = device_waits();
    CHECK(GPU->results(ctx, later, NULL, &e) == 0, "%s", e.msg);
    CHECK(w0 < 0 || w1 == w0, "a forward without losses and its backward waited %ld times", w1 - w0);
    CHECK(memcmp(now, later, (size_t)sh->M * sizeof *now) == 0, "deferred losses differ from the forward's");
    /* the clip against norm + scale, on a copy of the same gradient */
    CHECK(GPU->copy(ctx, g2, g, P, &e) == 0, "%s", e.msg);
    double n_old = GPU->norm(ctx, g2), n_new = NAN, cap = n_old / 3;
    GPU->scale(ctx, g2, (float)(cap / (n_old + 1e-6)));
    CHECK(GPU->clip(ctx, g, cap, &e) == 0 && GPU->results(ctx, NULL, &n_new, &e) == 0, "%s", e.msg);
    CHECK(n_new == n_old, "clip's norm %.17g, ops->norm's %.17g", n_new, n_old);
    CHECK(GPU->download(ctx, h1, g, P, &e) == 0 && GPU->download(ctx, h2, g2, P, &e) == 0, "%s", e.msg);
    CHECK(memcmp(h1, h2, P * sizeof *h1) == 0, "the clipped gradient differs from norm + scale's");
    /* a non-finite gradient: the AdamW after its clip changes nothing */
    h1[P / 2] = INFINITY;
    CHECK(GPU->upload(ctx, g, h1, P, &e) == 0, "%s", e.msg);
    model_adamw hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.01f, .step = 1};
    double bad = 0;
    CHECK(GPU->clip(ctx, g, 1.0, &e) == 0 && GPU->adamw(ctx, p, g, m, v, &hp, &e) == 0 &&
          GPU->results(ctx, NULL, &bad, &e) == 0, "%s", e.msg);
    CHECK(!isfinite(bad), "the norm of a gradient with an inf is %g", bad);
    CHECK(GPU->download(ctx, h2, p, P, &e) == 0, "%s", e.msg);
    CHECK(memcmp(h2, init, P * sizeof *h2) == 0, "an AdamW after a non-finite clip changed the parameters");
    CHECK(GPU->download(ctx, h2, m, P, &e) == 0, "%s", e.msg);
    int zero = 1;
    for (size_t i = 0; i < P; i++) zero &= h2[i] == 0.0f;
    CHECK(zero, "an AdamW after a non-finite clip changed the moments");
    h1[P / 2] = 0.5f;
    CHECK(GPU->upload(ctx, g, h1, P, &e) == 0 && GPU->adamw(ctx, p, g, m, v, &hp, &e) == 0 &&
          GPU->download(ctx, h2, p, P, &e) == 0, "%s", e.msg);
    CHECK(memcmp(h2, init, P * sizeof *h2) != 0, "the AdamW after the skipped one did not step");
    GPU->release(ctx, p);
    GPU->release(ctx, g);
    GPU->release(ctx, g2);
    GPU->release(ctx, m);
    GPU->release(ctx, v);
    GPU->destroy(ctx);
    free(init);
    free(h1);
    free(h2);
    free(tok);
    model_layout_free(&lay);
}

/* An episode through steps.c on both backends, the device's waits counted. */
static void episode_waits(void) {
    CHECK(set_precision("fp32") == 0, "precision");
    tdm_err e = {0};
    model_layout lay;
    char dir[] = "/tmp/tandem-test-gpu-waits-XXXXXX";
    CHECK(mkdtemp(dir), "mkdtemp");
    uint64_t tr = 20000;
    dataset ds;
    CHECK(corpus_fixture(dir, 2, &tr, 1, 3000, &ds, &e) == 0, "%s", e.msg);
    model_config mc = {.vocab = 256, .ctx = 16, .layers = 1, .heads = 2, .channels = 16};
    CHECK(model_layout_init(&lay, &mc, &e) == 0, "%s", e.msg);
    step_hparams shp = {.B = 4, .T = 16, .K = 3, .E = 3, .V = 2, .gamma = 1, .lr_probe = 1e-2,
                        .alpha_budget = 2, .episodes = 10, .lr = 1e-3, .lr_min = 1e-4, .total_free = 20,
                        .cosine = 1, .weight_decay = 0.01, .clip = 1, .beta1 = 0.9, .beta2 = 0.95,
                        .eps = 1e-8, .seed = 5, .eval_batches = 2};
    CHECK(step_check(&shp, &ds, &e) == 0, "%s", e.msg);
    float *host = malloc(lay.numel * sizeof *host);
    model_init_params(&lay, 9, host);
    step_state st[2];
    double floss[2][3][2], fnorm[2][3];
    long probe_waits = 0, free_waits[3] = {0};
    for (int r = 0; r < 2; r++) {
        step_nets n;
        CHECK(step_nets_create(&n, r ? GPU : CPU, &lay, &shp, 2, 1, &e) == 0, "%s", e.msg);
        CHECK(n.ops->upload(n.ctx, n.u, host, lay.numel, &e) == 0, "%s", e.msg);
        step_state_init(&st[r], &ds, 0);
        CHECK(step_sync(&n, &e) == 0, "%s", e.msg);
        long a = device_waits();
        CHECK(step_probe(&shp, &ds, &n, &st[r], NULL, &e) == 0, "probe: %s", e.msg);
        if (r) probe_waits = device_waits() - a;
        CHECK(step_alpha(&shp, &st[r], NULL, &e) == 0, "%s", e.msg);
        for (int i = 0; i < 3; i++) {
            step_report rep;
            a = device_waits();
            CHECK(step_free(&shp, &ds, &n, &st[r], &rep, &e) == 0, "free: %s", e.msg);
            if (r) free_waits[i] = device_waits() - a;
            memcpy(floss[r][i], rep.loss, sizeof floss[r][i]);
            fnorm[r][i] = rep.grad_norm;
        }
        step_nets_destroy(&n);
    }
    double wl = 0, wn = 0, wa = 0;
    for (int i = 0; i < 3; i++) { /* fmax drops a NaN: one counts as an infinite error */
        for (int d = 0; d < 2; d++)
            wl = fmax(wl, isfinite(floss[1][i][d]) ? fabs(floss[1][i][d] - floss[0][i][d]) / floss[0][i][d] : INFINITY);
        wn = fmax(wn, isfinite(fnorm[1][i]) ? fabs(fnorm[1][i] - fnorm[0][i]) / fnorm[0][i] : INFINITY);
    }
    for (int d = 0; d < 2; d++)
        wa = fmax(wa, isfinite(st[1].alpha[d]) ? fabs(st[1].alpha[d] - st[0].alpha[d]) : INFINITY);
    printf("  episode against the CPU: free-step losses %.2e, norms %.2e, alpha %.2e; waits: probe %ld "
           "(K = 3, 2 evaluation batches), free steps %ld %ld %ld\n",
           wl, wn, wa, probe_waits, free_waits[0], free_waits[1], free_waits[2]);
    CHECK(wl <= 1e-5 && wn <= 1e-5, "free steps differ from the CPU's: losses %.2e, norms %.2e", wl, wn);
    CHECK(wa <= 1e-6, "alpha differs from the CPU's by %.2e", wa);
#ifdef TANDEM_GPU_SIM
    CHECK(probe_waits == 1 + 2 * 2, "the probe waited %ld times, not 5 (its first loss, 2 per evaluation batch)",
          probe_waits);
    for (int i = 0; i < 3; i++) CHECK(free_waits[i] == 1, "free step %d waited %ld times, not once", i, free_waits[i]);
#endif
    free(host);
    model_layout_free(&lay);
    dataset_free(&ds);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "rm");
}

static void test_one_wait_per_step(void) {
    deferred_ops();
    episode_waits();
}

/* ---------------------------------------------------------------- state round trip */

static void make_rec(rec_state *r, uint64_t seq) {
    memset(r, 0, sizeof *r);
    r->seq = seq;
    r->episode = 0;
    snprintf(r->step, sizeof r->step, "free");
    r->index = seq;
    r->free_steps = seq;
    r->seed = 1;
    r->M = 2;
    r->alpha[0] = r->alpha[1] = 0.5;
}

/* Commits dev[0..2] (buffers of ops/ctx) as state seq into url. */
static int commit_state(const char *url, const model_layout *lay, const model_ops *ops,
                        model_ctx *ctx, float *const dev[CKPT_TENSORS], uint64_t seq, tdm_err *e) {
    store *st = store_open(url, e);
    if (!st) return e->code;
    ckpt_model_io cio;
    ckpt *c = ckpt_model_open(st, lay, 1 << 20, e);
    int rc = c ? 0 : e->code, found = 0;
    rec_state rec;
    if (!rc) rc = ckpt_acquire(c, 0, e);
    if (!rc) rc = ckpt_load(c, &rec, &found, e);
    if (!rc && found) rec_state_free(&rec);
    make_rec(&rec, seq);
    if (!rc) rc = ckpt_snapshot(c, &rec, ckpt_io_of(&cio, ops, ctx), dev, 0, e);
    if (!rc) rc = ckpt_release(c, e);
    if (c) ckpt_close(c);
    store_close(st);
    return rc;
}

/* Loads url's newest state into host[0..2]; *seq its position (UINT64_MAX when none). */
static int load_state(const char *url, const model_layout *lay, float *host[CKPT_TENSORS],
                      uint64_t *seq, tdm_err *e) {
    store *st = store_open(url, e);
    if (!st) return e->code;
    ckpt *c = ckpt_model_open(st, lay, 1 << 20, e);
    int rc = c ? 0 : e->code, found = 0;
    rec_state rec;
    *seq = UINT64_MAX;
    if (!rc) rc = ckpt_load(c, &rec, &found, e);
    if (!rc && found) {
        *seq = rec.seq;
        rec_state_free(&rec);
        for (int k = 0; k < CKPT_TENSORS; k++)
            memcpy(host[k], ckpt_host(c, k), lay->numel * sizeof(float));
    }
    if (c) ckpt_close(c);
    store_close(st);
    return rc;
}

/* One free-phase step of ops on dev = {p, m, v}. */
static int train_step(const model_ops *ops, model_ctx *ctx, float *const dev[3], float *g,
                      const shape *sh, long step, uint32_t *tok, tdm_err *e) {
    model_batch b = {.B = sh->B, .T = sh->T, .tokens = tok, .domain = sh->dom};
    make_tokens(tok, sh->B, sh->T, sh->cfg.vocab, 1000 + (uint64_t)step);
    model_adamw hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                      .weight_decay = 0.01f, .step = step};
    double loss[8];
    int rc = ops->forward(ctx, dev[0], &b, loss, NULL, e);
    if (!rc) rc = ops->backward(ctx, dev[0], sh->coef, g, e);
    if (!rc) model_clip_grads(ops, ctx, g, 1.0);
    if (!rc) rc = ops->adamw(ctx, dev[0], g, dev[1], dev[2], &hp, e);
    return rc;
}

static void test_state_round_trip_cuda_cpu_cuda(void) {
    CHECK(set_precision("bf16") == 0, "precision");
    const shape *sh = &SHAPES[0];
    model_layout lay;
    CHECK(model_layout_init(&lay, &sh->cfg, NULL) == 0, "layout");
    size_t P = lay.numel;
    tdm_err e = {0};
    char *dir = test_tmpdir("gpustate");
    char url[600];
    snprintf(url, sizeof url, "file://%s/run", dir);
    uint32_t *tok = malloc((size_t)sh->B * (sh->T + 1) * sizeof *tok);
    float *host[3], *got[3];
    for (int k = 0; k < 3; k++) {
        host[k] = malloc(P * sizeof(float));
        got[k] = malloc(P * sizeof(float));
    }
    init_perturbed(&lay, host[0], 5);
    memset(host[1], 0, P * sizeof(float));
    memset(host[2], 0, P * sizeof(float));
    /* CUDA: two steps, commit */
    model_ctx *gc = GPU->create(&lay, sh->B, sh->T, sh->M, 1, &e);
    CHECK(gc, "%s", e.msg);
    float *gd[3], *gg = GPU->alloc(gc, P);
    for (int k = 0; k < 3; k++) {
        gd[k] = GPU->alloc(gc, P);
        CHECK(GPU->upload(gc, gd[k], host[k], P, &e) == 0, "%s", e.msg);
    }
    for (long s = 1; s <= 2; s++) CHECK(train_step(GPU, gc, gd, gg, sh, s, tok, &e) == 0, "%s", e.msg);
    for (int k = 0; k < 3; k++) CHECK(GPU->download(gc, host[k], gd[k], P, &e) == 0, "%s", e.msg);
    CHECK(commit_state(url, &lay, GPU, gc, gd, 2, &e) == 0, "commit on CUDA: %s", e.msg);
    /* CPU: load, check, one step, commit */
    uint64_t seq;
    CHECK(load_state(url, &lay, got, &seq, &e) == 0 && seq == 2, "load on CPU: %s", e.msg);
    for (int k = 0; k < 3; k++)
        CHECK(memcmp(got[k], host[k], P * sizeof(float)) == 0, "tensor %d changed CUDA → store", k);
    model_ctx *cc = CPU->create(&lay, sh->B, sh->T, sh->M, 1, &e);
    CHECK(cc, "%s", e.msg);
    float *cd[3], *cg = CPU->alloc(cc, P);
    for (int k = 0; k < 3; k++) {
        cd[k] = CPU->alloc(cc, P);
        CHECK(CPU->upload(cc, cd[k], got[k], P, &e) == 0, "%s", e.msg);
    }
    CHECK(train_step(CPU, cc, cd, cg, sh, 3, tok, &e) == 0, "%s", e.msg);
    for (int k = 0; k < 3; k++) CHECK(CPU->download(cc, host[k], cd[k], P, &e) == 0, "%s", e.msg);
    CHECK(commit_state(url, &lay, CPU, cc, cd, 3, &e) == 0, "commit on CPU: %s", e.msg);
    /* CUDA: load, check, continue */
    CHECK(load_state(url, &lay, got, &seq, &e) == 0 && seq == 3, "load: %s", e.msg);
    for (int k = 0; k < 3; k++) {
        CHECK(GPU->upload(gc, gd[k], got[k], P, &e) == 0, "%s", e.msg);
        CHECK(GPU->download(gc, got[k], gd[k], P, &e) == 0, "%s", e.msg);
        CHECK(memcmp(got[k], host[k], P * sizeof(float)) == 0, "tensor %d changed CPU → CUDA", k);
    }
    CHECK(train_step(GPU, gc, gd, gg, sh, 4, tok, &e) == 0, "continuing on CUDA: %s", e.msg);
    for (int k = 0; k < 3; k++) {
        CPU->release(cc, cd[k]);
        GPU->release(gc, gd[k]);
        free(host[k]);
        free(got[k]);
    }
    CPU->release(cc, cg);
    GPU->release(gc, gg);
    CPU->destroy(cc);
    GPU->destroy(gc);
    free(tok);
    test_rmtree(dir);
    free(dir);
    model_layout_free(&lay);
}

/* ---------------------------------------------------------------- SIGKILL and resume */

/* steps of the killed runs: 30, or 6 in quick mode (TEST_GPU_QUICK=1: the simulator) */
static int quick(void);
static int kill_steps(void) { return quick() ? 6 : 30; }

static int quick(void) {
    const char *v = getenv("TEST_GPU_QUICK");
    return v && *v && strcmp(v, "0");
}

/* the killed runs' model: hs = 64 on a GPU, the cheaper small-heads shape in quick mode */
static const shape *kill_shape(void) { return &SHAPES[quick() ? 0 : 1]; }

/* The child: trains kill_steps() free steps with the CUDA backend in precision `prec`,
 * committing after every step, resuming from the store's newest state. Exit 0 when done. */
static int child_train(const char *url, const char *prec) {
    tdm_err e = {0};
    if (set_precision(prec)) return 2;
    const shape *sh = kill_shape();
    model_layout lay;
    if (model_layout_init(&lay, &sh->cfg, &e)) return 2;
    size_t P = lay.numel;
    float *host[3], *dev[3] = {0}, *g = NULL;
    for (int k = 0; k < 3; k++) host[k] = calloc(P, sizeof(float));
    uint32_t *tok = malloc((size_t)sh->B * (sh->T + 1) * sizeof *tok);
    model_ctx *ctx = NULL;
    uint64_t seq;
    int rc = load_state(url, &lay, host, &seq, &e);
    if (!rc && seq == UINT64_MAX) {
        seq = 0;
        init_perturbed(&lay, host[0], 21);
    }
    if (!rc && !(ctx = GPU->create(&lay, sh->B, sh->T, sh->M, 1, &e))) rc = e.code;
    if (!rc && !(g = GPU->alloc(ctx, P))) rc = err_set(&e, ERR_INTERNAL, "alloc");
    for (int k = 0; !rc && k < 3; k++) {
        if (!(dev[k] = GPU->alloc(ctx, P))) rc = err_set(&e, ERR_INTERNAL, "alloc");
        else rc = GPU->upload(ctx, dev[k], host[k], P, &e);
    }
    for (uint64_t s = seq; !rc && s < (uint64_t)kill_steps(); s++) {
        rc = train_step(GPU, ctx, dev, g, sh, (long)s + 1, tok, &e);
        if (!rc) rc = commit_state(url, &lay, GPU, ctx, dev, s + 1, &e);
    }
    if (rc) fprintf(stderr, "child: %s\n", e.msg);
    for (int k = 0; k < 3; k++) {
        if (dev[k]) GPU->release(ctx, dev[k]);
        free(host[k]);
    }
    if (g) GPU->release(ctx, g);
    if (ctx) GPU->destroy(ctx);
    free(tok);
    model_layout_free(&lay);
    return rc ? 1 : 0;
}

/* Runs `self --child-train url prec` with an optional environment entry; returns its pid. */
static pid_t spawn_child(const char *url, const char *prec, const char *env_kv, const char *log) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    if (env_kv) putenv((char *)env_kv);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    execl(g_self, g_self, "--child-train", url, prec, (char *)NULL);
    _exit(127);
}

static int wait_pid(pid_t pid) {
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sigkill_resume(const char *prec) {
    const shape *sh = kill_shape();
    model_layout lay;
    CHECK(model_layout_init(&lay, &sh->cfg, NULL) == 0, "layout");
    size_t P = lay.numel;
    tdm_err e = {0};
    char *dir = test_tmpdir("gpukill");
    char ref[600], chaos[600], log[700];
    snprintf(ref, sizeof ref, "file://%s/ref", dir);
    snprintf(chaos, sizeof chaos, "file://%s/chaos", dir);
    snprintf(log, sizeof log, "%s/log.txt", dir);
    double t0 = mono();
    int rc = wait_pid(spawn_child(ref, prec, NULL, log));
    double ref_s = mono() - t0;
    CHECK(rc == 0, "uninterrupted run exited %d (log %s)", rc, log);
    rng_stream s;
    rng_stream_init(&s, (uint64_t)time(NULL), RNG_TEST, 43, 0, 0);
    /* kills inside commits first: each process counts its own passages */
    static const char *const hooks_long[] = {"TANDEM_TEST_KILL_AT=blob:7", "TANDEM_TEST_KILL_AT=manifest:5",
                                             "TANDEM_TEST_KILL_AT=head:3", "TANDEM_TEST_KILL_AT=head:9"};
    static const char *const hooks_quick[] = {"TANDEM_TEST_KILL_AT=blob:2", "TANDEM_TEST_KILL_AT=manifest:1",
                                              "TANDEM_TEST_KILL_AT=head:1", "TANDEM_TEST_KILL_AT=head:2"};
    const char *const *hooks = quick() ? hooks_quick : hooks_long;
    int kills = 0, finished = 0, attempts = 0;
    for (; attempts < 40 && !finished; attempts++) {
        if (attempts < 4) {
            rc = wait_pid(spawn_child(chaos, prec, hooks[attempts], log));
        } else {
            pid_t pid = spawn_child(chaos, prec, NULL, log);
            double delay = (0.2 + 0.6 * rng_uniform(&s)) * ref_s;
            struct timespec ts = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9)};
            nanosleep(&ts, NULL);
            kill(pid, SIGKILL);
            rc = wait_pid(pid);
        }
        if (rc == 128 + SIGKILL) kills++;
        else if (rc == 0) finished = 1;
        else CHECK(0, "attempt %d exited %d (log %s)", attempts, rc, log);
    }
    if (!finished) CHECK(wait_pid(spawn_child(chaos, prec, NULL, log)) == 0, "final resume failed");
    float *a[3], *b[3];
    for (int k = 0; k < 3; k++) {
        a[k] = malloc(P * sizeof(float));
        b[k] = malloc(P * sizeof(float));
    }
    uint64_t sa, sb;
    CHECK(load_state(ref, &lay, a, &sa, &e) == 0 && load_state(chaos, &lay, b, &sb, &e) == 0,
          "load: %s", e.msg);
    printf("  %s: %d SIGKILLs in %d attempts (uninterrupted run %.1f s, %d steps)\n", prec, kills,
           attempts, ref_s, kill_steps());
    CHECK(sa == (uint64_t)kill_steps() && sb == (uint64_t)kill_steps(), "final positions %llu and %llu",
          (unsigned long long)sa, (unsigned long long)sb);
    CHECK(kills >= 4, "only %d kills landed", kills);
    for (int k = 0; k < 3; k++)
        CHECK(memcmp(a[k], b[k], P * sizeof(float)) == 0,
              "%s: tensor %d after SIGKILLs and resumes differs from the uninterrupted run", prec, k);
    for (int k = 0; k < 3; k++) {
        free(a[k]);
        free(b[k]);
    }
    test_rmtree(dir);
    free(dir);
    model_layout_free(&lay);
}

static void test_sigkill_resume_bit_exact(void) {
    sigkill_resume("bf16");
    if (test_case_failed_ || quick()) return; /* quick: bf16 only */
    sigkill_resume("fp32");
}

/* The same through the runner: `tandem run --set run.device=cuda`, killed at random and
 * inside commits, must end with the same `tandem hash` as an uninterrupted run. */
static int runner_fixture(fixture *f, const char *corpus, const char *tag) {
    f->dir = test_tmpdir(tag);
    snprintf(f->config, sizeof f->config, "%s/run.yaml", f->dir);
    snprintf(f->store, sizeof f->store, "%s/store", f->dir);
    snprintf(f->log, sizeof f->log, "%s/log.txt", f->dir);
    char text[2048];
    snprintf(text, sizeof text,
             "run: {episodes: 12, seed: 3, device: cuda, precision: bf16}\n"
             "data: {dataset: %s/dataset.yaml}\n"
             "model: {layers: 2, channels: 64, heads: 2, ctx: 64}\n"
             "train: {batch: 6, seq: 64}\n"
             "tandem: {K: 2, E: 3, lr_alpha: 0.5, alpha_cut: any}\n"
             "optim: {lr: 3e-3}\n"
             "checkpoint: {every_episodes: 1}\n",
             corpus);
    return write_file(f->config, text);
}

static void test_sigkill_resume_runner(void) {
    if (quick()) SKIP_CASE("quick mode (TEST_GPU_QUICK)");
    if (access(tandem_bin(), X_OK) != 0) SKIP_CASE("no tandem binary at %s", tandem_bin());
    char *cdir = test_tmpdir("gpucorpus");
    uint64_t tr[3] = {30000, 15000, 6000};
    tdm_err e = {0};
    CHECK(corpus_fixture(cdir, 3, tr, 3, 3000, NULL, &e) == 0, "corpus: %s", e.msg);
    fixture f;
    CHECK(runner_fixture(&f, cdir, "gpurun") == 0, "fixture");
    double t0 = mono();
    int rc = run_to_end(&f, NULL);
    double ref_s = mono() - t0;
    char log[8192];
    read_all(f.log, log, sizeof log);
    if (rc == 2 && (strstr(log, "no CUDA backend") || strstr(log, "run.device"))) {
        fixture_done(&f);
        test_rmtree(cdir);
        free(cdir);
        SKIP_CASE("the runner does not select the CUDA backend yet: %.200s", log);
    }
    CHECK(rc == 0, "uninterrupted run exited %d: %s", rc, log);
    char ref_hash[1024];
    CHECK(hash_of(&f, ref_hash, sizeof ref_hash) == 0, "hash: %s", ref_hash);
    fixture_done(&f);
    CHECK(runner_fixture(&f, cdir, "gpuchaos") == 0, "fixture");
    rng_stream s;
    rng_stream_init(&s, (uint64_t)time(NULL), RNG_TEST, 44, 0, 0);
    static const char *const labels[] = {"blob", "manifest", "head", "alpha"};
    int kills = 0, finished = 0;
    for (int attempt = 0; attempt < 30 && kills < 10 && !finished; attempt++) {
        if (attempt < 4) {
            char env[64];
            snprintf(env, sizeof env, "TANDEM_TEST_KILL_AT=%s:%d", labels[attempt], 2);
            rc = run_to_end(&f, env);
        } else {
            pid_t pid = start_run(&f, NULL, NULL, NULL);
            double delay = (0.1 + 0.4 * rng_uniform(&s)) * ref_s;
            struct timespec ts = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9)};
            nanosleep(&ts, NULL);
            kill(pid, SIGKILL);
            rc = wait_exit(pid);
        }
        if (rc == 128 + SIGKILL) kills++;
        else if (rc == 0) finished = 1;
        else {
            read_all(f.log, log, sizeof log);
            CHECK(0, "attempt %d exited %d: %s", attempt, rc, log);
        }
    }
    if (!finished) {
        rc = run_to_end(&f, NULL);
        read_all(f.log, log, sizeof log);
        CHECK(rc == 0, "final resume exited %d: %s", rc, log);
    }
    char h[1024];
    CHECK(hash_of(&f, h, sizeof h) == 0, "hash: %s", h);
    printf("  runner: %d SIGKILLs; uninterrupted run %.1f s\n", kills, ref_s);
    CHECK(kills >= 4, "only %d kills landed", kills);
    CHECK(strcmp(h, ref_hash) == 0, "killed run ended elsewhere:\n%s\nvs uninterrupted:\n%s", h,
          ref_hash);
    fixture_done(&f);
    test_rmtree(cdir);
    free(cdir);
}

/* ---------------------------------------------------------------- memory of a 160M run */

static void test_memory_160m(void) {
    if (quick()) SKIP_CASE("quick mode (TEST_GPU_QUICK)");
    /* the presets' shape (12 x 768, 12 heads), GPT-2's vocabulary, batch 64 + 5 validation
     * sequences (5 domains), as step_nets_create allocates for the runner */
    model_config cfg = {.vocab = 50257, .ctx = 1024, .layers = 12, .heads = 12, .channels = 768};
    model_layout lay;
    CHECK(model_layout_init(&lay, &cfg, NULL) == 0, "layout");
    size_t P = lay.numel;
    printf("  %-5s %5s %10s %12s %12s %12s %12s\n", "prec", "seq", "params", "6 x params",
           "workspace", "peak (ours)", "device used");
    int fitted_restricted = 0;
    for (int bf16 = 1; bf16 >= 0; bf16--) {
        for (int T = 512; T <= 1024; T *= 2) {
            CHECK(set_precision(bf16 ? "bf16" : "fp32") == 0, "precision");
            step_hparams hp = {.B = 64, .T = T, .V = 5};
            step_nets n;
            tdm_err e = {0};
            if (step_nets_create(&n, GPU, &lay, &hp, 5, 0, &e)) {
                printf("  %-5s %5d does not fit: %s\n", bf16 ? "bf16" : "fp32", T, e.msg);
                continue;
            }
            /* one probe-sized step (B + V rows) and an AdamW step, so that the peak is real */
            int rows = hp.B + hp.V;
            uint32_t *tok = malloc((size_t)rows * (T + 1) * sizeof *tok);
            int32_t *dom = malloc((size_t)rows * sizeof *dom);
            make_tokens(tok, rows, T, cfg.vocab, 77);
            for (int r = 0; r < rows; r++) dom[r] = r % 10;
            model_batch b = {.B = rows, .T = T, .tokens = tok, .domain = dom};
            float *host = malloc(P * sizeof(float));
            model_init_params(&lay, 1, host);
            double loss[10], coef[10];
            for (int m = 0; m < 10; m++) coef[m] = 0.1;
            model_adamw a = {.lr = 5e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                             .weight_decay = 0.01f, .step = 1};
            int rc = n.ops->upload(n.ctx, n.u, host, P, &e);
            if (!rc) rc = n.ops->forward(n.ctx, n.u, &b, loss, NULL, &e);
            if (!rc) rc = n.ops->backward(n.ctx, n.u, coef, n.grad, &e);
            if (!rc) rc = n.ops->adamw(n.ctx, n.u, n.grad, n.m, n.v, &a, &e);
            if (!rc) rc = model_cuda_sync(n.ctx, &e);
            model_cuda_mem mem = {0};
            if (!rc) rc = model_cuda_memory(n.ctx, &mem, &e);
            free(tok);
            free(dom);
            free(host);
            if (!rc) {
                double gib = 1024.0 * 1024 * 1024;
                printf("  %-5s %5d %9.1fM %10.2f GiB %10.2f GiB %10.2f GiB %10.2f GiB (of %.1f)\n",
                       bf16 ? "bf16" : "fp32", T, P / 1e6, 6.0 * P * 4 / gib,
                       (mem.backend_peak - 6.0 * P * 4) / gib, mem.backend_peak / gib,
                       mem.device_used / gib, mem.device_total / gib);
                if (bf16 && T == 512) fitted_restricted = 1;
                CHECK(loss[0] > 0 && loss[0] < 20, "loss %g", loss[0]);
            } else {
                printf("  %-5s %5d failed: %s\n", bf16 ? "bf16" : "fp32", T, e.msg);
            }
            step_nets_destroy(&n);
        }
    }
    model_layout_free(&lay);
    CHECK(fitted_restricted, "the data-restricted-160m shape (bf16, batch 64, seq 512) must fit");
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--child-train")) return child_train(argv[2], argv[3]);
    char why[256];
    if (model_cuda_device_count(why, sizeof why) < 1) {
        printf("SKIP: no CUDA device (%s): all %d cases skipped\n", why, N_CASES);
        g_skipped = N_CASES;
        return summary();
    }
    ssize_t k = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
    if (k <= 0) {
        fprintf(stderr, "test_gpu: cannot find its own binary\n");
        return 1;
    }
    g_self[k] = '\0';
    char desc[512];
    tdm_err e;
    if (model_cuda_describe(desc, sizeof desc, &e) == 0) printf("device: %s\n", desc);
    RUN_GPU(test_forward_backward_fp32);
    RUN_GPU(test_forward_backward_bf16);
    RUN_GPU(test_workspace_estimate);
    RUN_GPU(test_buffer_and_optimiser_ops);
    RUN_GPU(test_bit_identical_runs);
    RUN_GPU(test_cudnn_attention);
    RUN_GPU(test_gelu_epilogue);
    RUN_GPU(test_hf_family);
    RUN_GPU(test_training_steps_fp32);
    RUN_GPU(test_training_steps_bf16);
    RUN_GPU(test_one_wait_per_step);
    RUN_GPU(test_state_round_trip_cuda_cpu_cuda);
    RUN_GPU(test_sigkill_resume_bit_exact);
    RUN_GPU(test_sigkill_resume_runner);
    RUN_GPU(test_memory_160m);
    return summary();
}

#else /* no CUDA in this build */

int main(void) {
    (void)test_case_failed_;
    printf("SKIP: this build has no CUDA backend (nvcc was not found when it was built): all %d "
           "cases skipped\n", N_CASES);
    g_skipped = N_CASES;
    return summary();
}

#endif
