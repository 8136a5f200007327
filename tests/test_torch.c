/* test_torch.c — the CPU backend against PyTorch (tests/torch_gpt.py, tests/torch_ref.py).
 *
 * For a tiny GPT-2, the test writes the config, a batch, the loss coefficients and the
 * parameters to an exchange file, runs `/usr/bin/python3 tests/torch_ref.py IN OUT`, and
 * compares: per-domain losses, the gradient of sum_m coef[m] * loss[m] tensor by tensor,
 * and the losses and final parameters of a few AdamW steps with gradient clipping. The
 * PyTorch model is built from torch's own modules and autograd, so agreement is evidence
 * that both compute the GPT-2 of model/model.h, not that they share a bug.
 *
 * A missing /usr/bin/python3 or torch is a FAILURE (with the command that installs them),
 * never a skip: a cross-check that silently does not run checks nothing.
 * TEST_TORCH_KEEP=1 keeps the exchange files (their paths are printed) for debugging.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/model.h"
#include "tests/test.h"
#include "util/rng.h"

/* Debian's interpreter: the one python3-torch (scripts/deps.sh test) installs into. */
#define PYTHON "/usr/bin/python3"

/* The optimiser run of the exchange: lr large enough that 5 steps move the loss by ~10%,
 * clip below the initial gradient norm (~1.5) so clipping is active at every step, weight
 * decay large enough that a decay bug shows in the parameters (see STEP_UPDATE_RTOL). */
#define N_STEPS 5
#define STEP_LR 1e-2f
#define STEP_BETA1 0.9f
#define STEP_BETA2 0.95f
#define STEP_EPS 1e-8f
#define STEP_WD 0.5f
#define STEP_CLIP 0.5f

/* Tolerances. Both sides compute in fp32 but in different orders (OpenBLAS vs torch's
 * kernels, fused vs separate softmax/cross-entropy), so agreement is to rounding, scaled
 * by how much each quantity accumulates. Observed figures are printed on every run.
 * - LOSS_RTOL: a loss is a mean of ~70 log-softmaxes over V = 64 logits, a few fp32 ulps
 *   (observed ~1e-7); any real bug (a wrong mask, a missing bias) moves it by 1e-3 or more.
 * - GRAD_RTOL: a gradient tensor is judged by its largest deviation relative to its largest
 *   entry (single entries can be ~0, where a relative error is meaningless); 1e-4 is the
 *   issue's fp32 criterion (observed <1e-6). GRAD_ATOL only matters for a tensor whose
 *   whole gradient is at rounding level.
 * - STEP_LOSS_RTOL: after AdamW steps the parameters moved by ~lr per step; rounding is
 *   amplified but stays far below what a bug changes.
 * - STEP_UPDATE_RTOL, STEP_ENTRY_TOL: the parameters after AdamW are compared through the
 *   update u = p_final - p_init, per tensor: ||u_ours - u_torch||_2 <= STEP_UPDATE_RTOL *
 *   ||u_torch||_2, and every entry within STEP_ENTRY_TOL of the total move N_STEPS * lr.
 *   Not elementwise relative: Adam divides each gradient entry by its own RMS, so an entry
 *   whose first moment nearly cancels (seen: m = 7e-8 from gradients of +-1.6e-4) has an
 *   update only as precise as that cancellation. Observed: L2 <= 7e-5, entries <= 1e-3 of
 *   the move. A missing or misplaced decay (STEP_WD: ~1% of the update of a 0.02 weight,
 *   ~50% of a LayerNorm gain's) or a wrong bias correction exceeds 1e-3 on whole tensors.
 * - The key third of attn.c_attn.bias is exempt from both: its gradient is exactly 0 in
 *   theory (adding b to every key shifts all scores of a query by q.b, which the softmax
 *   cancels; PyTorch's is ~1e-12), so both sides feed rounding noise to Adam, which
 *   normalises it into O(lr) moves in unrelated directions. Those entries are only held
 *   within the largest move Adam can make, 2 lr per step. */
#define LOSS_RTOL 1e-5
#define GRAD_RTOL 1e-4
#define GRAD_ATOL 1e-9
#define STEP_LOSS_RTOL 1e-4
#define STEP_UPDATE_RTOL 1e-3
#define STEP_ENTRY_TOL 1e-2

#define MAX_M 8
#define MAX_B 16

typedef struct tcase {
    const char *name;
    model_config cfg;
    int B, T, M;
    int32_t domain[MAX_B];
    double coef[MAX_M];
    uint64_t seed;
    float weight_scale; /* 2-D tensors are multiplied by this after init */
} tcase;

/* PyTorch's answer file (format in tests/torch_ref.py). */
typedef struct torch_answer {
    double loss0[MAX_M];
    float *grads; /* at the initial parameters */
    double step_loss[N_STEPS][MAX_M];
    double final_loss[MAX_M];
    float *params; /* after the last step */
} torch_answer;

/* Worst figures over all cases, printed at the end (and quoted in the notes). */
static double worst_loss, worst_grad, worst_step_loss, worst_update, worst_entry;
static char worst_grad_name[MODEL_NAME_MAX], worst_update_name[MODEL_NAME_MAX];
static const char *worst_grad_case = "", *worst_update_case = "";

/* The directory holding tests/torch_ref.py: $TANDEM_ROOT (tests/run.sh exports it) or
 * the current directory. */
static const char *repo_root(void) {
    const char *r = getenv("TANDEM_ROOT");
    return r && *r ? r : ".";
}

/* Runs argv (argv[0] an absolute path) and waits; returns its exit status, or -1 when it
 * could not run or died of a signal. No shell, so paths need no quoting. */
static int run_argv(char *const argv[]) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        execv(argv[0], argv);
        fprintf(stderr, "execv %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* 0 when /usr/bin/python3 can import torch and numpy; otherwise says how to get them. */
static int python_ready(void) {
    if (access(PYTHON, X_OK) != 0) {
        fprintf(stderr, "  %s not found: the PyTorch cross-check needs Debian's python3-torch; "
                        "run `scripts/deps.sh test` (or `make test`, which runs it)\n",
                PYTHON);
        return -1;
    }
    char *argv[] = {PYTHON, "-c", "import torch, numpy", NULL};
    if (run_argv(argv) != 0) {
        fprintf(stderr, "  %s cannot import torch/numpy: run `scripts/deps.sh test` "
                        "(installs python3-torch and python3-numpy)\n",
                PYTHON);
        return -1;
    }
    return 0;
}

static int write_all(FILE *f, const void *p, size_t size, size_t n) {
    return fwrite(p, size, n, f) == n ? 0 : -1;
}

static int read_all(FILE *f, void *p, size_t size, size_t n) {
    return fread(p, size, n, f) == n ? 0 : -1;
}

/* Writes the exchange file (format in tests/torch_ref.py) in host byte order, which the
 * caller has checked is little-endian. */
static int write_input(const char *path, const tcase *c, const uint32_t *tokens,
                       const float *params, size_t n_params) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int32_t hdr[9] = {c->cfg.vocab, c->cfg.ctx, c->cfg.layers, c->cfg.heads, c->cfg.channels,
                      c->B,           c->T,       c->M,          N_STEPS};
    float hp[6] = {STEP_LR, STEP_BETA1, STEP_BETA2, STEP_EPS, STEP_WD, STEP_CLIP};
    size_t ntok = (size_t)c->B * (size_t)(c->T + 1);
    int32_t *tok32 = malloc(ntok * sizeof *tok32);
    int rc = -1;
    if (tok32) {
        for (size_t i = 0; i < ntok; i++) tok32[i] = tokens[i];
        rc = write_all(f, "TDMREF1", 1, 8) || write_all(f, hdr, sizeof hdr, 1) ||
                     write_all(f, hp, sizeof hp, 1) ||
                     write_all(f, c->coef, sizeof(double), (size_t)c->M) ||
                     write_all(f, c->domain, sizeof(int32_t), (size_t)c->B) ||
                     write_all(f, tok32, sizeof *tok32, ntok) ||
                     write_all(f, params, sizeof(float), n_params)
                 ? -1
                 : 0;
    }
    free(tok32);
    if (fclose(f) != 0) rc = -1;
    return rc;
}

/* Runs tests/torch_ref.py on the case and reads its answer into *ans (buffers of n floats
 * allocated here). Returns 0, or -1 with the reason on stderr. */
static int ask_torch(const tcase *c, const uint32_t *tokens, const float *params, size_t n,
                     torch_answer *ans) {
    char *dir = test_tmpdir("torch");
    size_t plen = strlen(dir) + 16, slen = strlen(repo_root()) + 32;
    char *in = malloc(plen), *out = malloc(plen), *script = malloc(slen);
    ans->grads = malloc(n * sizeof *ans->grads);
    ans->params = malloc(n * sizeof *ans->params);
    int rc = -1;
    if (!in || !out || !script || !ans->grads || !ans->params) {
        fprintf(stderr, "  out of memory\n");
        goto done;
    }
    snprintf(in, plen, "%s/in.bin", dir);
    snprintf(out, plen, "%s/out.bin", dir);
    snprintf(script, slen, "%s/tests/torch_ref.py", repo_root());
    if (access(script, R_OK) != 0) {
        fprintf(stderr, "  %s not found: run from the repository root or set TANDEM_ROOT\n",
                script);
        goto done;
    }
    if (write_input(in, c, tokens, params, n) != 0) {
        fprintf(stderr, "  writing %s failed\n", in);
        goto done;
    }
    char *argv[] = {PYTHON, script, in, out, NULL};
    int st = run_argv(argv);
    if (st != 0) {
        fprintf(stderr, "  %s %s %s %s failed (exit %d)\n", PYTHON, script, in, out, st);
        goto done;
    }
    FILE *f = fopen(out, "rb");
    if (!f) {
        fprintf(stderr, "  cannot open %s\n", out);
        goto done;
    }
    size_t M = (size_t)c->M;
    int bad = read_all(f, ans->loss0, sizeof(double), M) ||
              read_all(f, ans->grads, sizeof(float), n);
    for (int k = 0; k < N_STEPS && !bad; k++)
        bad = read_all(f, ans->step_loss[k], sizeof(double), M);
    bad = bad || read_all(f, ans->final_loss, sizeof(double), M) ||
          read_all(f, ans->params, sizeof(float), n) || fgetc(f) != EOF;
    fclose(f);
    if (bad) {
        fprintf(stderr, "  %s: wrong size for %zu parameters\n", out, n);
        goto done;
    }
    rc = 0;
done:
    if (getenv("TEST_TORCH_KEEP")) {
        printf("  exchange files kept: %s %s\n", in, out);
    } else {
        if (in) unlink(in);
        if (out) unlink(out);
        rmdir(dir);
    }
    free(in);
    free(out);
    free(script);
    free(dir);
    return rc;
}

/* Compares per-domain losses: |a - b| <= rtol |b| (an absent domain must be exactly 0 on
 * both sides). Returns the worst relative error, or -1 on a mismatch (reported). */
static double compare_losses(const char *what, const double *ours, const double *ref, int M,
                             double rtol) {
    double worst = 0;
    for (int m = 0; m < M; m++) {
        double d = fabs(ours[m] - ref[m]);
        double rel = ref[m] != 0 ? d / fabs(ref[m]) : (d == 0 ? 0 : INFINITY);
        if (!(rel <= rtol)) {
            fprintf(stderr, "  %s: domain %d loss ours %.9g torch %.9g (rel %.3g > %.0e)\n",
                    what, m, ours[m], ref[m], rel, rtol);
            return -1;
        }
        if (rel > worst) worst = rel;
    }
    return worst;
}

/* Compares gradients tensor by tensor: max|a - b| <= GRAD_RTOL * max|b| + GRAD_ATOL, and
 * max|b| > 0 (a check on an all-zero reference tensor would check nothing). Reports every
 * failing tensor; *worst gets the largest max|a-b| / max|b| and worst_name its tensor.
 * Returns the number of failing tensors. */
static int compare_grads(const model_layout *lay, const float *ours, const float *ref,
                         double *worst, char *worst_name, size_t name_size) {
    int bad = 0;
    *worst = 0;
    for (int i = 0; i < lay->n; i++) {
        const model_tensor *t = &lay->t[i];
        const float *a = ours + t->offset, *b = ref + t->offset;
        double maxd = 0, maxb = 0;
        size_t at = 0;
        for (size_t j = 0; j < t->numel; j++) {
            double d = fabs((double)a[j] - (double)b[j]);
            if (!(d <= maxd)) { /* NaN included */
                maxd = isnan(d) ? INFINITY : d;
                at = j;
            }
            if (fabs(b[j]) > maxb) maxb = fabs(b[j]);
        }
        double rel = maxb > 0 ? maxd / maxb : INFINITY;
        if (rel > *worst || i == 0) {
            *worst = rel;
            snprintf(worst_name, name_size, "%s", t->name);
        }
        if (!(maxd <= GRAD_RTOL * maxb + GRAD_ATOL) || maxb == 0) {
            fprintf(stderr,
                    "  gradient %s: max|ours-torch| %.3g at [%zu] (ours %.9g torch %.9g), "
                    "max|torch| %.3g, ratio %.3g (tolerance %.0e*max + %.0e)\n",
                    t->name, maxd, at, a[at], b[at], maxb, rel, GRAD_RTOL, GRAD_ATOL);
            bad++;
        }
    }
    return bad;
}

/* Compares the parameters after the AdamW steps (criteria at STEP_UPDATE_RTOL) given the
 * initial ones p0; `C` locates the key slice of attn.c_attn.bias. Reports each failing
 * tensor; *worst gets the largest L2 update error and worst_name its tensor, *entry the
 * largest entry difference as a fraction of N_STEPS * lr. Returns the number of failing
 * tensors. */
static int compare_params(const model_layout *lay, const float *ours, const float *ref,
                          const float *p0, int C, double *worst, char *worst_name,
                          size_t name_size, double *entry) {
    const double move = N_STEPS * (double)STEP_LR;
    int bad = 0;
    *worst = *entry = 0;
    for (int i = 0; i < lay->n; i++) {
        const model_tensor *t = &lay->t[i];
        const float *a = ours + t->offset, *b = ref + t->offset, *p = p0 + t->offset;
        int has_key_bias = strstr(t->name, "attn.c_attn.bias") != NULL;
        double d2 = 0, u2 = 0, maxd = 0, maxkey = 0;
        size_t at = 0;
        for (size_t j = 0; j < t->numel; j++) {
            double d = fabs((double)a[j] - (double)b[j]);
            if (isnan(d)) d = INFINITY;
            if (has_key_bias && j >= (size_t)C && j < 2 * (size_t)C) {
                if (d > maxkey) maxkey = d;
                continue;
            }
            double u = (double)b[j] - (double)p[j];
            d2 += d * d;
            u2 += u * u;
            if (d > maxd) {
                maxd = d;
                at = j;
            }
        }
        double rel = u2 > 0 ? sqrt(d2 / u2) : (d2 > 0 ? INFINITY : 0);
        if (rel > *worst || i == 0) {
            *worst = rel;
            snprintf(worst_name, name_size, "%s", t->name);
        }
        if (maxd / move > *entry) *entry = maxd / move;
        if (!(rel <= STEP_UPDATE_RTOL) || !(maxd <= STEP_ENTRY_TOL * move) ||
            !(maxkey <= 2 * move)) {
            fprintf(stderr,
                    "  params after AdamW: %s: update L2 error %.3g (tol %.0e); worst entry "
                    "[%zu] ours %.9g torch %.9g (initial %.9g): %.3g of the total move %.3g "
                    "(tol %.0e); key-bias max diff %.3g (tol %.3g)\n",
                    t->name, rel, STEP_UPDATE_RTOL, at, a[at], b[at], p[at], maxd / move, move,
                    STEP_ENTRY_TOL, maxkey, 2 * move);
            bad++;
        }
    }
    return bad;
}

/* The case's initial parameters: GPT-2 init, 2-D tensors scaled by weight_scale, then
 * LayerNorm weights/biases and linear biases moved off 1/0 by N(0, 0.1) so that their
 * gradients are nontrivial and their use in the forward is exercised. */
static void make_params(const tcase *c, const model_layout *lay, float *params) {
    model_init_params(lay, c->seed, params);
    rng_stream s;
    rng_stream_init(&s, c->seed, RNG_TEST, 1, 0, 0);
    for (int i = 0; i < lay->n; i++) {
        const model_tensor *t = &lay->t[i];
        float *p = params + t->offset;
        for (size_t j = 0; j < t->numel; j++) {
            if (t->ndim == 1)
                p[j] += (float)(0.1 * rng_normal(&s));
            else
                p[j] *= c->weight_scale;
        }
    }
}

static void print_losses(const double *loss, int M) {
    for (int m = 0; m < M; m++) printf("%s%.6f", m ? ", " : "", loss[m]);
    printf("\n");
}

/* Runs one case end to end; CHECK failures return from the case (leaking its buffers,
 * which only matters to a test that has already failed). */
static void run_case(const tcase *c) {
    printf("case %s: V=%d ctx=%d L=%d H=%d C=%d B=%d T=%d M=%d\n", c->name, c->cfg.vocab,
           c->cfg.ctx, c->cfg.layers, c->cfg.heads, c->cfg.channels, c->B, c->T, c->M);
    const uint16_t one = 1;
    CHECK(*(const uint8_t *)&one == 1, "the exchange file format assumes a little-endian host");
    CHECK(c->M <= MAX_M && c->B <= MAX_B, "case too large for the fixed arrays");
    CHECK(python_ready() == 0, "PyTorch is not available (see above)");

    tdm_err e = {0};
    model_layout lay;
    CHECK(model_layout_init(&lay, &c->cfg, &e) == 0, "layout: %s", e.msg);
    const size_t n = lay.numel;
    const int M = c->M, B = c->B, T = c->T;
    float *params = malloc(n * sizeof *params), *got = malloc(n * sizeof *got);
    uint32_t *tokens = malloc((size_t)B * (size_t)(T + 1) * sizeof *tokens);
    CHECK(params && tokens && got, "out of memory");
    make_params(c, &lay, params);
    rng_stream s;
    rng_stream_init(&s, c->seed, RNG_TEST, 2, 0, 0);
    for (int i = 0; i < B * (T + 1); i++)
        tokens[i] = (uint32_t)rng_below(&s, (uint64_t)c->cfg.vocab);

    torch_answer ref;
    CHECK(ask_torch(c, tokens, params, n, &ref) == 0, "no answer from PyTorch (see above)");

    /* Forward and gradient at the initial parameters. */
    const model_ops *ops = &model_cpu_ops;
    model_ctx *ctx = ops->create(&lay, B, T, M, 0, &e);
    CHECK(ctx, "create: %s", e.msg);
    float *d_params = ops->alloc(ctx, n), *d_grads = ops->alloc(ctx, n);
    float *d_m = ops->alloc(ctx, n), *d_v = ops->alloc(ctx, n);
    CHECK(d_params && d_grads && d_m && d_v, "alloc failed");
    CHECK(ops->upload(ctx, d_params, params, n, &e) == 0, "upload: %s", e.msg);
    model_batch batch = {.B = B, .T = T, .tokens = tokens, .domain = c->domain};
    double loss[MAX_M];
    long ntok[MAX_M];
    CHECK(ops->forward(ctx, d_params, &batch, loss, ntok, &e) == 0, "forward: %s", e.msg);
    for (int m = 0; m < M; m++) {
        long want = 0;
        for (int b = 0; b < B; b++) want += (c->domain[b] == m) * T;
        CHECK(ntok[m] == want, "ntok[%d] = %ld, expected %ld", m, ntok[m], want);
    }
    double w = compare_losses("initial forward", loss, ref.loss0, M, LOSS_RTOL);
    CHECK(w >= 0, "per-domain losses differ from PyTorch");
    printf("  losses     worst rel err %.3g (tol %.0e): ", w, LOSS_RTOL);
    print_losses(loss, M);
    if (w > worst_loss) worst_loss = w;

    CHECK(ops->backward(ctx, d_params, c->coef, d_grads, &e) == 0, "backward: %s", e.msg);
    CHECK(ops->download(ctx, got, d_grads, n, &e) == 0, "download: %s", e.msg);
    char name[MODEL_NAME_MAX];
    int bad = compare_grads(&lay, got, ref.grads, &w, name, sizeof name);
    printf("  gradients  worst tensor %s: max|diff|/max|torch| %.3g (tol %.0e)\n", name, w,
           GRAD_RTOL);
    if (w > worst_grad) {
        worst_grad = w;
        snprintf(worst_grad_name, sizeof worst_grad_name, "%s", name);
        worst_grad_case = c->name;
    }
    CHECK(bad == 0, "%d gradient tensors differ from PyTorch", bad);

    /* AdamW with clipping on the same batch, from zero moments, as torch_ref.py does. */
    model_adamw hp = {.lr = STEP_LR, .beta1 = STEP_BETA1, .beta2 = STEP_BETA2, .eps = STEP_EPS,
                      .weight_decay = STEP_WD};
    double wl = 0, first_norm = 0;
    for (int k = 0; k < N_STEPS; k++) {
        CHECK(ops->forward(ctx, d_params, &batch, loss, NULL, &e) == 0, "forward: %s", e.msg);
        char what[32];
        snprintf(what, sizeof what, "before step %d", k);
        double wk = compare_losses(what, loss, ref.step_loss[k], M, STEP_LOSS_RTOL);
        CHECK(wk >= 0, "losses during AdamW differ from PyTorch");
        if (wk > wl) wl = wk;
        CHECK(ops->backward(ctx, d_params, c->coef, d_grads, &e) == 0, "backward: %s", e.msg);
        double norm = model_clip_grads(ops, ctx, d_grads, STEP_CLIP);
        if (k == 0) first_norm = norm;
        hp.step = k + 1;
        CHECK(ops->adamw(ctx, d_params, d_grads, d_m, d_v, &hp, &e) == 0, "adamw: %s", e.msg);
    }
    CHECK(first_norm > STEP_CLIP, "initial gradient norm %g does not exercise clipping (%g)",
          first_norm, (double)STEP_CLIP);
    CHECK(ops->forward(ctx, d_params, &batch, loss, NULL, &e) == 0, "forward: %s", e.msg);
    double wf = compare_losses("after the last step", loss, ref.final_loss, M, STEP_LOSS_RTOL);
    CHECK(wf >= 0, "losses after AdamW differ from PyTorch");
    if (wf > wl) wl = wf;
    printf("  adamw      %d steps (grad norm %.3f clipped to %.1f): loss worst rel err %.3g "
           "(tol %.0e); final ",
           N_STEPS, first_norm, (double)STEP_CLIP, wl, STEP_LOSS_RTOL);
    print_losses(loss, M);
    if (wl > worst_step_loss) worst_step_loss = wl;

    CHECK(ops->download(ctx, got, d_params, n, &e) == 0, "download: %s", e.msg);
    double we;
    bad = compare_params(&lay, got, ref.params, params, c->cfg.channels, &w, name, sizeof name,
                         &we);
    printf("  params     worst update L2 error %.3g in %s (tol %.0e); worst entry %.3g of the "
           "total move (tol %.0e)\n",
           w, name, STEP_UPDATE_RTOL, we, STEP_ENTRY_TOL);
    if (w > worst_update) {
        worst_update = w;
        snprintf(worst_update_name, sizeof worst_update_name, "%s", name);
        worst_update_case = c->name;
    }
    if (we > worst_entry) worst_entry = we;
    CHECK(bad == 0, "%d parameter tensors differ from PyTorch after AdamW", bad);

    ops->release(ctx, d_params);
    ops->release(ctx, d_grads);
    ops->release(ctx, d_m);
    ops->release(ctx, d_v);
    ops->destroy(ctx);
    free(ref.grads);
    free(ref.params);
    free(params);
    free(tokens);
    free(got);
    model_layout_free(&lay);
}

/* Every domain present, GPT-2 initialisation scale, T < ctx (the unused rows of wpe must
 * get a zero gradient on both sides). */
static void test_torch_all_domains(void) {
    static const tcase c = {
        .name = "all_domains",
        .cfg = {.vocab = 64, .ctx = 16, .layers = 2, .heads = 2, .channels = 32},
        .B = 6, .T = 12, .M = 3,
        .domain = {0, 1, 2, 0, 1, 2},
        .coef = {0.5, 1.3, 0.2},
        .seed = 11,
        .weight_scale = 1.0f,
    };
    run_case(&c);
}

/* Domain 1 absent but weighted (its loss is 0 and it contributes no gradient), uneven
 * sequence counts per domain, 4 heads, weights enlarged 5x so that attention is far from
 * uniform and GELU far from linear, T = ctx. */
static void test_torch_absent_domain(void) {
    static const tcase c = {
        .name = "absent_domain",
        .cfg = {.vocab = 64, .ctx = 12, .layers = 2, .heads = 4, .channels = 32},
        .B = 5, .T = 12, .M = 3,
        .domain = {0, 2, 2, 0, 2},
        .coef = {0.5, 1.3, 0.2},
        .seed = 12,
        .weight_scale = 5.0f,
    };
    run_case(&c);
}

int main(void) {
    RUN(test_torch_all_domains);
    RUN(test_torch_absent_domain);
    printf("worst vs PyTorch: loss rel %.3g; gradient %.3g in %s (%s); AdamW loss rel %.3g; "
           "update L2 %.3g in %s (%s); param entry %.3g of the move\n",
           worst_loss, worst_grad, worst_grad_name, worst_grad_case, worst_step_loss,
           worst_update, worst_update_name, worst_update_case, worst_entry);
    return test_summary("test_torch");
}
