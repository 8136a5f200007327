/* cpu.c — the CPU reference backend of model.h.
 *
 * Reads top to bottom like llm.c: one function per layer, forward then backward, shapes
 * in the comments (N = B*T rows, C channels, H heads, hs = C/H, V vocabulary). Matmuls go
 * through OpenBLAS; everything else is OpenMP over independent outputs.
 *
 * Determinism: every output element is produced by exactly one thread with a fixed
 * summation order, so results do not depend on scheduling; reductions across rows
 * (bias and LayerNorm gradients, embedding scatter, norms) run over fixed column or
 * chunk partitions in double precision. OpenBLAS gemm is deterministic for a given
 * thread count. No floating-point atomics, no OpenMP reduction clauses on floats.
 *
 * The file is compiled twice: as float (model_cpu_ops, production) and, through
 * model/cpu64.c, as double (model_cpu64_ops) for the finite-difference tests.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

#ifdef MODEL_CPU_DOUBLE
#include "model/cpu64.h"
typedef double real;
#define OPS_TYPE model_ops_f64
#define OPS_NAME model_cpu64_ops
#define BACKEND_NAME "cpu64"
#define GEMM cblas_dgemm
#define R_SQRT sqrt
#else
typedef float real;
#define OPS_TYPE model_ops
#define OPS_NAME model_cpu_ops
#define BACKEND_NAME "cpu"
#define GEMM cblas_sgemm
#define R_SQRT sqrtf
#endif

#define LN_EPS 1e-5
#define NORM_CHUNK 65536 /* fixed chunking keeps norms independent of the thread count */

#ifdef MODEL_CPU_DOUBLE
static inline real exp_r(real x) { return exp(x); }
#else
/* expf that GCC can vectorise (libm's expf is a scalar call): x = n ln2 + r with
 * |r| <= ln2/2, e^r by Cephes' degree-6 polynomial (about 1 ulp), 2^n through the
 * exponent bits. Inputs are clamped to [-87, 88] so 2^n stays a normal float; below
 * that the result is ~1e-38 instead of a denormal, which softmax and GELU cannot see. */
static inline float exp_r(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    union {
        int32_t i;
        float f;
    } scale = {.i = ((int32_t)n + 127) << 23};
    return y * scale.f;
}
#endif

/* Per-layer activations are stored as [L][...] blocks; these index one layer. */
struct model_ctx {
    model_layout lay;
    int max_B, max_T, M;
    /* forward activations, N = max_B * max_T */
    real *encoded;                /* [N, C] */
    real *ln1, *ln1_mean, *ln1_rstd; /* [L, N, C], [L, N], [L, N] */
    real *qkv;                    /* [L, N, 3C] */
    real *att;                    /* [L, B, H, T, T] softmax probabilities */
    real *atty;                   /* [L, N, C] attention output before c_proj */
    real *res2;                   /* [L, N, C] residual after attention */
    real *ln2, *ln2_mean, *ln2_rstd;
    real *fch, *fch_gelu;         /* [L, N, 4C] */
    real *res3;                   /* [L, N, C] block output */
    real *lnf, *lnf_mean, *lnf_rstd; /* [N, C], [N], [N] */
    real *probs;                  /* [N, V] logits, then softmax, then dlogits */
    double *row_loss;             /* [N] */
    /* backward scratch */
    real *dres, *dln, *datty;     /* [N, C] */
    real *dqkv;                   /* [N, 3C] */
    real *dfch;                   /* [N, 4C] */
    real *datt_row;               /* [B, H, T] */
    real *head_t;                 /* [B, H, hs, T]: K or V transposed per head */
    /* the last forward's batch (copied, so backward needs nothing from the caller) */
    int B, T;
    uint16_t *tokens;             /* [max_B, max_T + 1] */
    int32_t *domain;              /* [max_B] */
    long *ntok;                   /* [M] */
    int have_forward;
};

static real *param(const model_ctx *ctx, const real *base, const char *name) {
    const model_tensor *t = model_layout_find(&ctx->lay, name);
    return (real *)base + t->offset;
}

static real *layer_param(const model_ctx *ctx, const real *base, int l, const char *suffix) {
    char name[MODEL_NAME_MAX];
    snprintf(name, sizeof name, "h.%d.%s", l, suffix);
    return param(ctx, base, name);
}

/* ---------------------------------------------------------------- forward layers */

/* out[N, C] = wte[tokens] + wpe[position]; tokens are rows of T+1 (last is a target). */
static void encoder_forward(real *out, const uint16_t *tokens, const real *wte, const real *wpe,
                            int B, int T, int C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < B * T; i++) {
        int b = i / T, t = i % T;
        const real *we = wte + (size_t)tokens[(size_t)b * (T + 1) + t] * C;
        const real *pe = wpe + (size_t)t * C;
        real *o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) o[c] = we[c] + pe[c];
    }
}

/* out[N, C] = (inp - mean) * rstd * w + b per row; keeps mean and rstd [N] for backward. */
static void layernorm_forward(real *out, real *mean, real *rstd, const real *inp, const real *w,
                              const real *bias, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const real *x = inp + (size_t)i * C;
        double s = 0, s2 = 0;
        for (int c = 0; c < C; c++) s += x[c];
        double m = s / C;
        for (int c = 0; c < C; c++) s2 += (x[c] - m) * (x[c] - m);
        real r = (real)(1.0 / sqrt(s2 / C + LN_EPS));
        real mr = (real)m;
        real *o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - mr) * r * w[c] + bias[c];
        mean[i] = mr;
        rstd[i] = r;
    }
}

/* out[N, OC] = inp[N, IC] @ W[OC, IC]^T + bias[OC] */
static void matmul_forward(real *out, const real *inp, const real *W, const real *bias, int N,
                           int IC, int OC) {
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, IC, 1, inp, IC, W, IC, 0, out, OC);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        real *o = out + (size_t)i * OC;
        for (int j = 0; j < OC; j++) o[j] += bias[j];
    }
}

/* Causal self-attention. qkv[B, T, 3C] (q | k | v, head h at h*hs) → out[B, T, C];
 * att[B, H, T, T] keeps the softmax probabilities (zero above the diagonal).
 * scratch[B, H, hs, T] receives K transposed per head, so that the score loop runs over
 * t2 in the innermost (vectorisable) position while each score still sums q·k in the
 * fixed order i = 0..hs-1. */
static void attention_forward(real *out, real *att, real *scratch, const real *qkv, int B, int T,
                              int C, int H) {
    int hs = C / H;
    real scale = (real)(1.0 / sqrt((double)hs));
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            real *kT = scratch + ((size_t)b * H + h) * hs * T;
            for (int t2 = 0; t2 < T; t2++) {
                const real *k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                for (int i = 0; i < hs; i++) kT[(size_t)i * T + t2] = k[i];
            }
            for (int t = 0; t < T; t++) {
                const real *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                real *a = att + (((size_t)b * H + h) * T + t) * T;
                for (int t2 = 0; t2 <= t; t2++) a[t2] = 0;
                for (int i = 0; i < hs; i++) {
                    real qi = q[i];
                    const real *kr = kT + (size_t)i * T;
                    for (int t2 = 0; t2 <= t; t2++) a[t2] += qi * kr[t2];
                }
                real maxv = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    a[t2] *= scale;
                    maxv = a[t2] > maxv ? a[t2] : maxv;
                }
                for (int t2 = 0; t2 <= t; t2++) a[t2] = exp_r(a[t2] - maxv);
                double sum = 0;
                for (int t2 = 0; t2 <= t; t2++) sum += a[t2];
                real inv = (real)(1.0 / sum);
                for (int t2 = 0; t2 <= t; t2++) a[t2] *= inv;
                for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0;
                real *o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) o[i] = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const real *v = qkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
                    real at = a[t2];
                    for (int i = 0; i < hs; i++) o[i] += at * v[i];
                }
            }
        }
    }
}

#define GELU_K 0.7978845608028654 /* sqrt(2 / pi) */

/* out = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), elementwise over n,
 * computed as x * sigmoid(2u): 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)) exactly, and this
 * form keeps full relative precision where tanh(u) is near -1. */
static void gelu_forward(real *out, const real *inp, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        real x = inp[i];
        real u = (real)GELU_K * (x + (real)0.044715 * x * x * x);
        out[i] = x / (1 + exp_r(-2 * u));
    }
}

static void residual_forward(real *out, const real *a, const real *b, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* probs[N, V] holds logits on entry and softmax on exit; row_loss[i] = -log p(target). */
static void softmax_crossentropy_forward(real *probs, double *row_loss, const uint16_t *tokens,
                                         int B, int T, int V) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < B * T; i++) {
        int b = i / T, t = i % T;
        real *p = probs + (size_t)i * V;
        real maxv = -INFINITY;
        for (int v = 0; v < V; v++) maxv = p[v] > maxv ? p[v] : maxv;
        for (int v = 0; v < V; v++) p[v] = exp_r(p[v] - maxv);
        double sum = 0;
        for (int v = 0; v < V; v++) sum += p[v];
        int target = tokens[(size_t)b * (T + 1) + t + 1];
        /* loss from the exact log-sum-exp, not from the rounded probability */
        row_loss[i] = log(sum) - log((double)p[target]);
        real inv = (real)(1.0 / sum);
        for (int v = 0; v < V; v++) p[v] *= inv;
    }
}

/* ---------------------------------------------------------------- backward layers */

/* out[C] = sum over rows of inp[N, C], by column blocks (deterministic). */
static void column_sum(real *out, const real *inp, int N, int C) {
    enum { BLOCK = 32 };
    int nblocks = (C + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblocks; blk++) {
        int c0 = blk * BLOCK, c1 = c0 + BLOCK < C ? c0 + BLOCK : C;
        double acc[BLOCK] = {0};
        for (int i = 0; i < N; i++) {
            const real *row = inp + (size_t)i * C;
            for (int c = c0; c < c1; c++) acc[c - c0] += row[c];
        }
        for (int c = c0; c < c1; c++) out[c] = (real)acc[c - c0];
    }
}

/* Given dout[N, OC] of out = inp @ W^T + bias: dinp[N, IC] = dout @ W (overwritten),
 * dW[OC, IC] = dout^T @ inp, dbias[OC] = column sums of dout (both overwritten). */
static void matmul_backward(real *dinp, real *dW, real *dbias, const real *dout, const real *inp,
                            const real *W, int N, int IC, int OC) {
    GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IC, OC, 1, dout, OC, W, IC, 0, dinp, IC);
    GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, N, 1, dout, OC, inp, IC, 0, dW, IC);
    column_sum(dbias, dout, N, OC);
}

/* LayerNorm backward: dinp[N, C] += d(inp) (accumulated: the residual stream);
 * dw[C], db[C] overwritten. mean/rstd are the forward's. */
static void layernorm_backward(real *dinp, real *dw, real *db, const real *dout, const real *inp,
                               const real *mean, const real *rstd, const real *w, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const real *x = inp + (size_t)i * C, *g = dout + (size_t)i * C;
        real m = mean[i], r = rstd[i];
        double s_dn = 0, s_dn_n = 0;
        for (int c = 0; c < C; c++) {
            double dn = (double)w[c] * g[c];
            s_dn += dn;
            s_dn_n += dn * ((x[c] - m) * r);
        }
        real a = (real)(s_dn / C), bcoef = (real)(s_dn_n / C);
        real *d = dinp + (size_t)i * C;
        for (int c = 0; c < C; c++) {
            real n = (x[c] - m) * r;
            d[c] += r * (w[c] * g[c] - a - n * bcoef);
        }
    }
    enum { BLOCK = 32 };
    int nblocks = (C + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblocks; blk++) {
        int c0 = blk * BLOCK, c1 = c0 + BLOCK < C ? c0 + BLOCK : C;
        double aw[BLOCK] = {0}, ab[BLOCK] = {0};
        for (int i = 0; i < N; i++) {
            const real *x = inp + (size_t)i * C, *g = dout + (size_t)i * C;
            for (int c = c0; c < c1; c++) {
                aw[c - c0] += (double)g[c] * ((x[c] - mean[i]) * rstd[i]);
                ab[c - c0] += g[c];
            }
        }
        for (int c = c0; c < c1; c++) {
            dw[c] = (real)aw[c - c0];
            db[c] = (real)ab[c - c0];
        }
    }
}

/* Attention backward: dout[B, T, C] → dqkv[B, T, 3C] (overwritten), using the forward's
 * qkv and att. datt_rows[B, H, T] holds one row of d(att) per (b, h); vt[B, H, hs, T]
 * receives V transposed per head so d(att) = dout · v runs over t2 innermost. */
static void attention_backward(real *dqkv, real *datt_rows, real *vt, const real *dout,
                               const real *qkv, const real *att, int B, int T, int C, int H) {
    int hs = C / H;
    real scale = (real)(1.0 / sqrt((double)hs));
    memset(dqkv, 0, (size_t)B * T * 3 * C * sizeof *dqkv);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            real *datt = datt_rows + ((size_t)b * H + h) * T;
            real *vT = vt + ((size_t)b * H + h) * hs * T;
            for (int t2 = 0; t2 < T; t2++) {
                const real *v = qkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
                for (int i = 0; i < hs; i++) vT[(size_t)i * T + t2] = v[i];
            }
            for (int t = 0; t < T; t++) {
                const real *a = att + (((size_t)b * H + h) * T + t) * T;
                const real *go = dout + ((size_t)b * T + t) * C + h * hs;
                const real *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                real *dq = dqkv + ((size_t)b * T + t) * 3 * C + h * hs;
                for (int t2 = 0; t2 <= t; t2++) datt[t2] = 0;
                for (int i = 0; i < hs; i++) {
                    real gi = go[i];
                    const real *vr = vT + (size_t)i * T;
                    for (int t2 = 0; t2 <= t; t2++) datt[t2] += gi * vr[t2];
                }
                double dot = 0;
                for (int t2 = 0; t2 <= t; t2++) dot += (double)a[t2] * datt[t2];
                for (int t2 = 0; t2 <= t; t2++) {
                    real *dv = dqkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
                    real at = a[t2];
                    for (int i = 0; i < hs; i++) dv[i] += at * go[i];
                }
                for (int t2 = 0; t2 <= t; t2++) {
                    real dpre = a[t2] * (datt[t2] - (real)dot) * scale;
                    const real *k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    real *dk = dqkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    for (int i = 0; i < hs; i++) {
                        dq[i] += dpre * k[i];
                        dk[i] += dpre * q[i];
                    }
                }
            }
        }
    }
}

/* d/dx of the tanh GELU, applied in place: dinout[i] = dinout[i] * gelu'(inp[i]).
 * With s = sigmoid(2u): gelu = x s, so gelu' = s + 2 x s (1 - s) du/dx. */
static void gelu_backward_inplace(real *dinout, const real *inp, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        real x = inp[i];
        real u = (real)GELU_K * (x + (real)0.044715 * x * x * x);
        real sg = 1 / (1 + exp_r(-2 * u));
        real du = (real)GELU_K * (1 + (real)(3 * 0.044715) * x * x);
        dinout[i] *= sg + 2 * x * sg * (1 - sg) * du;
    }
}

/* dwte[V, C] += scatter of dres rows by input token; dwpe[ctx, C] = sums over the batch
 * (rows ≥ T zeroed). Parallel over column blocks so each element has one writer. */
static void encoder_backward(real *dwte, real *dwpe, const real *dres, const uint16_t *tokens,
                             int B, int T, int C, int ctx) {
    enum { BLOCK = 32 };
    int nblocks = (C + BLOCK - 1) / BLOCK;
    memset(dwpe + (size_t)T * C, 0, (size_t)(ctx - T) * C * sizeof *dwpe);
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblocks; blk++) {
        int c0 = blk * BLOCK, c1 = c0 + BLOCK < C ? c0 + BLOCK : C;
        for (int t = 0; t < T; t++) {
            double acc[BLOCK] = {0};
            for (int b = 0; b < B; b++) {
                const real *d = dres + ((size_t)b * T + t) * C;
                for (int c = c0; c < c1; c++) acc[c - c0] += d[c];
            }
            for (int c = c0; c < c1; c++) dwpe[(size_t)t * C + c] = (real)acc[c - c0];
        }
        for (int i = 0; i < B * T; i++) {
            int b = i / T, t = i % T;
            real *w = dwte + (size_t)tokens[(size_t)b * (T + 1) + t] * C;
            const real *d = dres + (size_t)i * C;
            for (int c = c0; c < c1; c++) w[c] += d[c];
        }
    }
}

/* ---------------------------------------------------------------- the ops table */

static real *cpu_alloc(model_ctx *ctx, size_t n) {
    (void)ctx;
    size_t bytes = (n * sizeof(real) + 63) / 64 * 64;
    real *p = aligned_alloc(64, bytes ? bytes : 64);
    if (p) memset(p, 0, bytes);
    return p;
}

static void cpu_release(model_ctx *ctx, real *buf) {
    (void)ctx;
    free(buf);
}

static void cpu_destroy(model_ctx *ctx) {
    if (!ctx) return;
    real **bufs[] = {&ctx->encoded, &ctx->ln1, &ctx->ln1_mean, &ctx->ln1_rstd, &ctx->qkv,
                     &ctx->att, &ctx->atty, &ctx->res2, &ctx->ln2, &ctx->ln2_mean,
                     &ctx->ln2_rstd, &ctx->fch, &ctx->fch_gelu, &ctx->res3, &ctx->lnf,
                     &ctx->lnf_mean, &ctx->lnf_rstd, &ctx->probs, &ctx->dres, &ctx->dln,
                     &ctx->datty, &ctx->dqkv, &ctx->dfch, &ctx->datt_row, &ctx->head_t};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(*bufs[i]);
    free(ctx->row_loss);
    free(ctx->tokens);
    free(ctx->domain);
    free(ctx->ntok);
    model_layout_free(&ctx->lay);
    free(ctx);
}

static model_ctx *cpu_create(const model_layout *lay, int max_B, int max_T, int n_domains,
                             int threads, tdm_err *e) {
    const model_config *c = &lay->cfg;
    if (max_B < 1 || max_T < 1 || max_T > c->ctx || n_domains < 1) {
        err_set(e, ERR_USAGE,
                "model workspace: batch %d x %d with %d domains is invalid (need B >= 1, "
                "1 <= T <= ctx = %d, domains >= 1)",
                max_B, max_T, n_domains, c->ctx);
        return NULL;
    }
    if (threads > 0) {
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
    }
    model_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) goto oom;
    if (model_layout_init(&ctx->lay, c, e)) {
        free(ctx);
        return NULL;
    }
    ctx->max_B = max_B;
    ctx->max_T = max_T;
    ctx->M = n_domains;
    size_t N = (size_t)max_B * max_T, C = (size_t)c->channels, L = (size_t)c->layers;
    size_t H = (size_t)c->heads, V = (size_t)c->vocab;
    struct {
        real **p;
        size_t n;
    } plan[] = {
        {&ctx->encoded, N * C},      {&ctx->ln1, L * N * C},       {&ctx->ln1_mean, L * N},
        {&ctx->ln1_rstd, L * N},     {&ctx->qkv, L * N * 3 * C},   {&ctx->att, L * N * H * max_T},
        {&ctx->atty, L * N * C},     {&ctx->res2, L * N * C},      {&ctx->ln2, L * N * C},
        {&ctx->ln2_mean, L * N},     {&ctx->ln2_rstd, L * N},      {&ctx->fch, L * N * 4 * C},
        {&ctx->fch_gelu, L * N * 4 * C}, {&ctx->res3, L * N * C},  {&ctx->lnf, N * C},
        {&ctx->lnf_mean, N},         {&ctx->lnf_rstd, N},          {&ctx->probs, N * V},
        {&ctx->dres, N * C},         {&ctx->dln, N * C},           {&ctx->datty, N * C},
        {&ctx->dqkv, N * 3 * C},     {&ctx->dfch, N * 4 * C},      {&ctx->datt_row, N * H},
        {&ctx->head_t, N * C},
    };
    for (size_t i = 0; i < sizeof plan / sizeof *plan; i++)
        if (!(*plan[i].p = cpu_alloc(ctx, plan[i].n))) goto oom;
    ctx->row_loss = calloc(N, sizeof *ctx->row_loss);
    ctx->tokens = calloc((size_t)max_B * (max_T + 1), sizeof *ctx->tokens);
    ctx->domain = calloc((size_t)max_B, sizeof *ctx->domain);
    ctx->ntok = calloc((size_t)n_domains, sizeof *ctx->ntok);
    if (!ctx->row_loss || !ctx->tokens || !ctx->domain || !ctx->ntok) goto oom;
    return ctx;
oom:
    cpu_destroy(ctx);
    err_set(e, ERR_INTERNAL, "out of memory for the model workspace (batch %d x %d)", max_B, max_T);
    return NULL;
}

static int cpu_upload(model_ctx *ctx, real *dst, const real *host, size_t n, tdm_err *e) {
    (void)ctx;
    (void)e;
    memcpy(dst, host, n * sizeof *dst);
    return 0;
}

static int cpu_copy(model_ctx *ctx, real *dst, const real *src, size_t n, tdm_err *e) {
    return cpu_upload(ctx, dst, src, n, e);
}

static int cpu_forward(model_ctx *ctx, const real *params, const model_batch *batch, double *loss,
                       long *ntok, tdm_err *e) {
    const model_config *cf = &ctx->lay.cfg;
    int B = batch->B, T = batch->T, C = cf->channels, L = cf->layers, H = cf->heads;
    int V = cf->vocab, M = ctx->M;
    if (B < 1 || B > ctx->max_B || T < 1 || T > ctx->max_T)
        return err_set(e, ERR_USAGE, "batch %d x %d exceeds the workspace %d x %d", B, T,
                       ctx->max_B, ctx->max_T);
    for (int b = 0; b < B; b++)
        if (batch->domain[b] < 0 || batch->domain[b] >= M)
            return err_set(e, ERR_USAGE, "batch sequence %d has domain %d, outside 0..%d", b,
                           batch->domain[b], M - 1);
    size_t ntokens = (size_t)B * (T + 1);
    for (size_t i = 0; i < ntokens; i++)
        if (batch->tokens[i] >= V)
            return err_set(e, ERR_USAGE, "batch token %u at %zu is >= vocab %d", batch->tokens[i],
                           i, V);
    memcpy(ctx->tokens, batch->tokens, ntokens * sizeof *ctx->tokens);
    memcpy(ctx->domain, batch->domain, (size_t)B * sizeof *ctx->domain);
    ctx->B = B;
    ctx->T = T;
    size_t N = (size_t)B * T, NC = N * C;
    size_t lN = (size_t)ctx->max_B * ctx->max_T; /* per-layer stride of the activation blocks */

    encoder_forward(ctx->encoded, ctx->tokens, param(ctx, params, "wte"),
                    param(ctx, params, "wpe"), B, T, C);
    const real *x = ctx->encoded;
    for (int l = 0; l < L; l++) {
        real *ln1 = ctx->ln1 + l * lN * C, *ln1m = ctx->ln1_mean + l * lN;
        real *ln1r = ctx->ln1_rstd + l * lN, *qkv = ctx->qkv + l * lN * 3 * C;
        real *att = ctx->att + l * lN * H * ctx->max_T, *atty = ctx->atty + l * lN * C;
        real *res2 = ctx->res2 + l * lN * C, *ln2 = ctx->ln2 + l * lN * C;
        real *ln2m = ctx->ln2_mean + l * lN, *ln2r = ctx->ln2_rstd + l * lN;
        real *fch = ctx->fch + l * lN * 4 * C, *fchg = ctx->fch_gelu + l * lN * 4 * C;
        real *res3 = ctx->res3 + l * lN * C;

        layernorm_forward(ln1, ln1m, ln1r, x, layer_param(ctx, params, l, "ln_1.weight"),
                          layer_param(ctx, params, l, "ln_1.bias"), (int)N, C);
        matmul_forward(qkv, ln1, layer_param(ctx, params, l, "attn.c_attn.weight"),
                       layer_param(ctx, params, l, "attn.c_attn.bias"), (int)N, C, 3 * C);
        attention_forward(atty, att, ctx->head_t, qkv, B, T, C, H);
        matmul_forward(ctx->datty, atty, layer_param(ctx, params, l, "attn.c_proj.weight"),
                       layer_param(ctx, params, l, "attn.c_proj.bias"), (int)N, C, C);
        residual_forward(res2, x, ctx->datty, NC); /* datty is free scratch until backward */
        layernorm_forward(ln2, ln2m, ln2r, res2, layer_param(ctx, params, l, "ln_2.weight"),
                          layer_param(ctx, params, l, "ln_2.bias"), (int)N, C);
        matmul_forward(fch, ln2, layer_param(ctx, params, l, "mlp.c_fc.weight"),
                       layer_param(ctx, params, l, "mlp.c_fc.bias"), (int)N, C, 4 * C);
        gelu_forward(fchg, fch, N * 4 * C);
        matmul_forward(ctx->datty, fchg, layer_param(ctx, params, l, "mlp.c_proj.weight"),
                       layer_param(ctx, params, l, "mlp.c_proj.bias"), (int)N, 4 * C, C);
        residual_forward(res3, res2, ctx->datty, NC);
        x = res3;
    }
    layernorm_forward(ctx->lnf, ctx->lnf_mean, ctx->lnf_rstd, x, param(ctx, params, "ln_f.weight"),
                      param(ctx, params, "ln_f.bias"), (int)N, C);
    /* logits[N, V] = lnf @ wte^T (tied head, no bias) */
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, V, C, 1, ctx->lnf, C,
         param(ctx, params, "wte"), C, 0, ctx->probs, V);
    softmax_crossentropy_forward(ctx->probs, ctx->row_loss, ctx->tokens, B, T, V);

    /* per-domain means, summed in row order */
    double *sum = calloc((size_t)M, sizeof *sum);
    if (!sum) return err_set(e, ERR_INTERNAL, "out of memory");
    for (int m = 0; m < M; m++) ctx->ntok[m] = 0;
    for (size_t i = 0; i < N; i++) {
        int m = ctx->domain[i / T];
        sum[m] += ctx->row_loss[i];
        ctx->ntok[m]++;
    }
    for (int m = 0; m < M; m++) {
        loss[m] = ctx->ntok[m] ? sum[m] / ctx->ntok[m] : 0.0;
        if (ntok) ntok[m] = ctx->ntok[m];
    }
    free(sum);
    ctx->have_forward = 1;
    return 0;
}

static int cpu_backward(model_ctx *ctx, const real *params, const double *coef, real *grads,
                        tdm_err *e) {
    if (!ctx->have_forward)
        return err_set(e, ERR_INTERNAL, "model backward called without a forward pass");
    ctx->have_forward = 0; /* probs are overwritten by dlogits below */
    const model_config *cf = &ctx->lay.cfg;
    int B = ctx->B, T = ctx->T, C = cf->channels, L = cf->layers, H = cf->heads, V = cf->vocab;
    int N = B * T;
    size_t lN = (size_t)ctx->max_B * ctx->max_T;

    /* dlogits = coef[m] / ntok[m] * (softmax - onehot(target)), in place */
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        int b = i / T, t = i % T, m = ctx->domain[b];
        real g = (real)(coef[m] / (double)ctx->ntok[m]);
        real *p = ctx->probs + (size_t)i * V;
        for (int v = 0; v < V; v++) p[v] *= g;
        p[ctx->tokens[(size_t)b * (T + 1) + t + 1]] -= g;
    }
    /* head: dlnf[N, C] = dlogits @ wte; dwte[V, C] = dlogits^T @ lnf (first contribution) */
    real *wte = param(ctx, params, "wte"), *dwte = param(ctx, grads, "wte");
    GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, V, 1, ctx->probs, V, wte, C, 0,
         ctx->dln, C);
    GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, N, 1, ctx->probs, V, ctx->lnf, C, 0, dwte,
         C);
    memset(ctx->dres, 0, (size_t)N * C * sizeof *ctx->dres);
    const real *xlast = L > 0 ? ctx->res3 + (L - 1) * lN * C : ctx->encoded;
    layernorm_backward(ctx->dres, param(ctx, grads, "ln_f.weight"), param(ctx, grads, "ln_f.bias"),
                       ctx->dln, xlast, ctx->lnf_mean, ctx->lnf_rstd,
                       param(ctx, params, "ln_f.weight"), N, C);

    for (int l = L - 1; l >= 0; l--) {
        const real *x = l == 0 ? ctx->encoded : ctx->res3 + (l - 1) * lN * C;
        real *ln1 = ctx->ln1 + l * lN * C, *ln1m = ctx->ln1_mean + l * lN;
        real *ln1r = ctx->ln1_rstd + l * lN, *qkv = ctx->qkv + l * lN * 3 * C;
        real *att = ctx->att + l * lN * H * ctx->max_T, *atty = ctx->atty + l * lN * C;
        real *res2 = ctx->res2 + l * lN * C, *ln2 = ctx->ln2 + l * lN * C;
        real *ln2m = ctx->ln2_mean + l * lN, *ln2r = ctx->ln2_rstd + l * lN;
        real *fch = ctx->fch + l * lN * 4 * C, *fchg = ctx->fch_gelu + l * lN * 4 * C;
#define W(s) layer_param(ctx, params, l, s)
#define G(s) layer_param(ctx, grads, l, s)
        /* MLP: res3 = res2 + c_proj(gelu(c_fc(ln_2(res2)))); dres holds d(res3) */
        matmul_backward(ctx->dfch, G("mlp.c_proj.weight"), G("mlp.c_proj.bias"), ctx->dres, fchg,
                        W("mlp.c_proj.weight"), N, 4 * C, C);
        gelu_backward_inplace(ctx->dfch, fch, (size_t)N * 4 * C);
        matmul_backward(ctx->dln, G("mlp.c_fc.weight"), G("mlp.c_fc.bias"), ctx->dfch, ln2,
                        W("mlp.c_fc.weight"), N, C, 4 * C);
        layernorm_backward(ctx->dres, G("ln_2.weight"), G("ln_2.bias"), ctx->dln, res2, ln2m,
                           ln2r, W("ln_2.weight"), N, C);
        /* attention: res2 = x + c_proj(attn(c_attn(ln_1(x)))); dres now holds d(res2) */
        matmul_backward(ctx->datty, G("attn.c_proj.weight"), G("attn.c_proj.bias"), ctx->dres,
                        atty, W("attn.c_proj.weight"), N, C, C);
        attention_backward(ctx->dqkv, ctx->datt_row, ctx->head_t, ctx->datty, qkv, att, B, T, C, H);
        matmul_backward(ctx->dln, G("attn.c_attn.weight"), G("attn.c_attn.bias"), ctx->dqkv, ln1,
                        W("attn.c_attn.weight"), N, C, 3 * C);
        layernorm_backward(ctx->dres, G("ln_1.weight"), G("ln_1.bias"), ctx->dln, x, ln1m, ln1r,
                           W("ln_1.weight"), N, C);
#undef W
#undef G
    }
    encoder_backward(dwte, param(ctx, grads, "wpe"), ctx->dres, ctx->tokens, B, T, C, cf->ctx);
    return 0;
}

static int cpu_sgd(model_ctx *ctx, real *params, const real *grads, float lr, tdm_err *e) {
    (void)e;
    size_t n = ctx->lay.numel;
    real rlr = (real)lr;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) params[i] -= rlr * grads[i];
    return 0;
}

/* torch.optim.AdamW, single-tensor form, operation for operation. */
static int cpu_adamw(model_ctx *ctx, real *params, const real *grads, real *m, real *v,
                     const model_adamw *hp, tdm_err *e) {
    if (hp->step < 1) return err_set(e, ERR_INTERNAL, "AdamW step must be >= 1 (got %ld)", hp->step);
    double bc1 = 1.0 - pow(hp->beta1, (double)hp->step);
    double bc2 = 1.0 - pow(hp->beta2, (double)hp->step);
    real step_size = (real)(hp->lr / bc1), bc2_sqrt = (real)sqrt(bc2);
    real b1 = hp->beta1, b2 = hp->beta2, eps = hp->eps;
    for (int ti = 0; ti < ctx->lay.n; ti++) {
        const model_tensor *t = &ctx->lay.t[ti];
        real keep = t->decay ? (real)(1.0 - (double)hp->lr * hp->weight_decay) : (real)1;
        real *p = params + t->offset, *mm = m + t->offset, *vv = v + t->offset;
        const real *g = grads + t->offset;
        size_t n = t->numel;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) {
            p[i] *= keep;
            mm[i] = mm[i] * b1 + g[i] * (1 - b1);
            vv[i] = vv[i] * b2 + g[i] * g[i] * (1 - b2);
            real denom = R_SQRT(vv[i]) / bc2_sqrt + eps;
            p[i] -= step_size * (mm[i] / denom);
        }
    }
    return 0;
}

static double cpu_norm(model_ctx *ctx, const real *buf) {
    size_t n = ctx->lay.numel, nchunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    double *part = malloc(nchunks * sizeof *part);
    if (!part) return NAN;
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < nchunks; k++) {
        size_t i0 = k * NORM_CHUNK, i1 = i0 + NORM_CHUNK < n ? i0 + NORM_CHUNK : n;
        double s = 0;
        for (size_t i = i0; i < i1; i++) s += (double)buf[i] * buf[i];
        part[k] = s;
    }
    double s = 0;
    for (size_t k = 0; k < nchunks; k++) s += part[k];
    free(part);
    return sqrt(s);
}

static void cpu_scale(model_ctx *ctx, real *buf, float s) {
    size_t n = ctx->lay.numel;
    real rs = (real)s;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] *= rs;
}

const OPS_TYPE OPS_NAME = {
    .name = BACKEND_NAME,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_upload,
    .download = cpu_upload, /* host memory both ways */
    .copy = cpu_copy,
    .forward = cpu_forward,
    .backward = cpu_backward,
    .sgd = cpu_sgd,
    .adamw = cpu_adamw,
    .norm = cpu_norm,
    .scale = cpu_scale,
};
