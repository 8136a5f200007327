/* cpu.c — the CPU reference backend of model.h.
 *
 * Reads top to bottom like llm.c: one function per layer, forward then backward, shapes
 * in the comments (N = B*T rows, C channels, H heads, hs = C/H, V vocabulary). Matmuls,
 * including attention's per-head products, go through OpenBLAS; everything else is
 * OpenMP over independent outputs, with the arithmetic in small row or span kernels
 * (HOT below) that the compiler vectorises.
 *
 * Determinism: every output element is produced by exactly one thread with a fixed
 * summation order, so results do not depend on scheduling. Reductions across rows (bias
 * and LayerNorm gradients) sum fixed chunks of ROW_CHUNK rows into double partials and
 * combine the chunks in order; the embedding scatter and norms use fixed column or chunk
 * partitions; none of these partitions depends on the thread count. Attention calls a
 * single-threaded gemm per (sequence, head) (OpenBLAS runs single-threaded inside an
 * OpenMP parallel region), so attention too is independent of the thread count. Only
 * the large gemms, deterministic for a given thread count, may round differently with
 * another thread count. No floating-point atomics, no OpenMP reduction clauses on floats.
 *
 * The file is compiled twice: as float (model_cpu_ops, production) and, through
 * model/cpu64.c, as double (model_cpu64_ops) for the finite-difference tests.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/qwen2.h"

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
#define ROW_CHUNK 64     /* rows per partial sum of a reduction over rows (fixed, as above) */
#define SPAN 4096        /* elements per work item of the elementwise loops */
#define LANES 8          /* interleaved partial sums of the row reductions, see sum_lanes */

/* HOT kernels are compiled twice, for x86-64-v3 (AVX2) and for the baseline x86-64, and
 * the loader picks the clone for the machine, so the binary runs anywhere and uses AVX2
 * where it exists. Both clones compute the same bits: -std=c11 implies
 * -ffp-contract=off (no FMA contraction), the vectorised loops are elementwise, and
 * every reduction runs in the lane order written in the source (sum_lanes), never in an
 * order chosen by the vectoriser. */
#ifndef HOT /* -DHOT= builds a single version, for checking that the clones agree */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define HOT
#endif
#endif

/* e^x in two steps, exp_arg (clamp) then exp_core, so that vectorised loops can run
 * them as two loops: in one loop GCC duplicates the code after the clamp into each branch
 * and then refuses to if-convert (the copies could trap), so nothing vectorises. */
#ifdef MODEL_CPU_DOUBLE
static inline real exp_arg(real x) { return x; }
static inline real exp_core(real x) { return exp(x); }
#else
/* Inputs are clamped to [-87, 88] so that 2^n in exp_core stays a normal float; below
 * that the result is ~1e-38 instead of a denormal, which softmax and GELU cannot see. */
static inline float exp_arg(float x) {
    x = x < -87.0f ? -87.0f : x;
    return x > 88.0f ? 88.0f : x;
}

/* expf that GCC can vectorise (libm's expf is a scalar call), for x in [-87, 88]:
 * x = n ln2 + r with |r| <= ln2/2, e^r by Cephes' degree-6 polynomial (about 1 ulp), 2^n
 * through the exponent bits. */
static inline float exp_core(float x) {
    float t = x * 1.44269504088896341f + 12582912.0f; /* 1.5 * 2^23 + n: n in t's low bits */
    float n = t - 12582912.0f;                         /* round to nearest */
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    /* 2^n through the exponent bits, with n read from t's bits (t = 0x4B400000 + n as an
     * integer, since |n| < 2^22) in unsigned arithmetic: a NaN input (a diverged model)
     * then stays NaN (y is NaN) without the undefined float-to-int conversion of NaN or
     * shift of a negative value, and the loops still vectorise */
    union {
        float f;
        uint32_t u;
    } tb = {.f = t}, scale;
    scale.u = (tb.u - 0x4B400000u + 127u) << 23;
    return y * scale.f;
}
#endif

/* Sums of x[0..n) (and of x*y) in double, accumulated in LANES interleaved partial sums
 * that are added in a fixed tree at the end: the lanes map onto vector registers, and the
 * result is the same whatever the vector width. */
static inline double lanes_total(const double *acc) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static inline double sum_lanes(const real *x, int n) {
    double acc[LANES] = {0};
    int c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) acc[k] += x[c + k];
    for (int k = 0; c < n; c++, k++) acc[k] += x[c];
    return lanes_total(acc);
}

static inline double dot_lanes(const real *x, const real *y, int n) {
    double acc[LANES] = {0};
    int c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) acc[k] += (double)x[c + k] * y[c + k];
    for (int k = 0; c < n; c++, k++) acc[k] += (double)x[c] * y[c];
    return lanes_total(acc);
}

/* max of x[0..n), n >= 1, in LANES partial maxima (exact in any order) */
static inline real max_lanes(const real *x, int n) {
    real acc[LANES];
    for (int k = 0; k < LANES; k++) acc[k] = x[0];
    int c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) acc[k] = x[c + k] > acc[k] ? x[c + k] : acc[k];
    for (int k = 0; c < n; c++, k++) acc[k] = x[c] > acc[k] ? x[c] : acc[k];
    real m = acc[0];
    for (int k = 1; k < LANES; k++) m = acc[k] > m ? acc[k] : m;
    return m;
}


/* Per-layer activations are stored as [L][...] blocks; these index one layer. */
struct model_ctx {
    model_layout lay;
    int max_B, max_T, M;
    /* tensor offsets, looked up by name once at create */
    size_t off_wte, off_wpe, off_lnf_w, off_lnf_b;
    size_t *off_block;            /* [L][MODEL_BLOCK_TENSORS] */
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
    real *datt;                   /* [datt_slots, T, T] per thread: d(att), then d(scores) */
    int datt_slots;
    double *part;                 /* [N / ROW_CHUNK rounded up, 4C] partial sums over rows */
    /* the last forward's batch (copied, so backward needs nothing from the caller) */
    int B, T;
    uint32_t *tokens;             /* [max_B, max_T + 1] */
    int32_t *domain;              /* [max_B] */
    long *ntok;                   /* [M] */
    double *last_loss;            /* [M] the last forward's per-domain means, for results() */
    int have_forward;
    double clip_norm;             /* the last clip's norm, for results() */
    int clip_bad;                 /* that norm is not finite: the next adamw changes nothing */
    /* the Llama / Qwen2 family (lay.cfg.arch == MODEL_ARCH_HF): its tape replaces every
     * GPT-2 buffer above but the batch, row_loss and ntok (float build only) */
    qwen2_tape *hf;
    double *row_scale;            /* [N] the backward's d(objective)/d(row loss) */
};

/* Tensor k (MODEL_LN1_W..MODEL_FCPROJ_B) of block l inside a parameter-sized buffer. */
static real *block_param(const model_ctx *ctx, const real *base, int l, int k) {
    return (real *)base + ctx->off_block[(size_t)l * MODEL_BLOCK_TENSORS + k];
}

/* out[c] = sum over chunks k of part[k * stride + c], added in chunk order (in place in
 * chunk 0), for c < n. */
static void combine_chunks(real *out, double *part, int nchunks, size_t stride, int n) {
    for (int k = 1; k < nchunks; k++) {
        const double *pk = part + (size_t)k * stride;
#pragma omp simd
        for (int c = 0; c < n; c++) part[c] += pk[c];
    }
    for (int c = 0; c < n; c++) out[c] = (real)part[c];
}

/* C[M, N] (row-major, leading dimension ldc) = alpha op(A) op(B). OpenBLAS's beta = 0
 * clears C with scalar stores (a fifth of the time of attention's small products);
 * clearing C here with memset and accumulating with beta = 1 gives the same bits
 * (+0 + x = x, and the kernel adds to C in both cases). */
static void gemm_set(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, real alpha,
                     const real *A, int lda, const real *B, int ldb, real *C, int ldc) {
#pragma omp parallel for schedule(static) if ((size_t)M * N >= (1 << 18))
    for (int i = 0; i < M; i++) memset(C + (size_t)i * ldc, 0, (size_t)N * sizeof *C);
    GEMM(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, 1, C, ldc);
}

/* ---------------------------------------------------------------- forward layers */

/* out[N, C] = wte[tokens] + wpe[position]; tokens are rows of T+1 (last is a target). */
static void encoder_forward(real *out, const uint32_t *tokens, const real *wte, const real *wpe,
                            int B, int T, int C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < B * T; i++) {
        int b = i / T, t = i % T;
        const real *we = wte + (size_t)tokens[(size_t)b * (T + 1) + t] * C;
        const real *pe = wpe + (size_t)t * C;
        real *o = out + (size_t)i * C;
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = we[c] + pe[c];
    }
}

/* One row of layernorm_forward: o[C], *mean and *rstd from x[C]. */
static HOT void layernorm_row(real *o, real *mean, real *rstd, const real *x, const real *w,
                              const real *bias, int C) {
    double m = sum_lanes(x, C) / C;
    double acc[LANES] = {0};
    int c = 0;
    for (; c + LANES <= C; c += LANES)
        for (int k = 0; k < LANES; k++) acc[k] += (x[c + k] - m) * (x[c + k] - m);
    for (int k = 0; c < C; c++, k++) acc[k] += (x[c] - m) * (x[c] - m);
    real r = (real)(1.0 / sqrt(lanes_total(acc) / C + LN_EPS));
    real mr = (real)m;
#pragma omp simd
    for (int j = 0; j < C; j++) o[j] = (x[j] - mr) * r * w[j] + bias[j];
    *mean = mr;
    *rstd = r;
}

/* out[N, C] = (inp - mean) * rstd * w + b per row; keeps mean and rstd [N] for backward. */
static void layernorm_forward(real *out, real *mean, real *rstd, const real *inp, const real *w,
                              const real *bias, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++)
        layernorm_row(out + (size_t)i * C, mean + i, rstd + i, inp + (size_t)i * C, w, bias, C);
}

/* out[N, OC] = resid[N, OC] (none when NULL) + bias[OC] + inp[N, IC] @ W[OC, IC]^T.
 * Residual and bias are written first and the gemm accumulates onto them (beta = 1): one
 * pass over out instead of a zeroing pass, a bias pass and a residual pass. */
static void matmul_forward(real *out, const real *inp, const real *W, const real *bias,
                           const real *resid, int N, int IC, int OC) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        real *o = out + (size_t)i * OC;
        if (resid) {
            const real *x = resid + (size_t)i * OC;
#pragma omp simd
            for (int j = 0; j < OC; j++) o[j] = x[j] + bias[j];
        } else {
            memcpy(o, bias, (size_t)OC * sizeof *o);
        }
    }
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, IC, 1, inp, IC, W, IC, 1, out, OC);
}

/* Softmax over the n = t+1 visible positions of one attention row a[T], in place; the
 * masked positions n..T-1 are set to 0. */
static HOT void softmax_causal_row(real *a, int n, int T) {
    real maxv = max_lanes(a, n);
#pragma omp simd
    for (int j = 0; j < n; j++) a[j] = exp_arg(a[j] - maxv);
#pragma omp simd
    for (int j = 0; j < n; j++) a[j] = exp_core(a[j]);
    real inv = (real)(1.0 / sum_lanes(a, n));
#pragma omp simd
    for (int j = 0; j < n; j++) a[j] *= inv;
    for (int j = n; j < T; j++) a[j] = 0;
}

/* Causal self-attention. qkv[B, T, 3C] (q | k | v, head h at h*hs) → out[B, T, C];
 * att[B, H, T, T] keeps the softmax probabilities (zero above the diagonal). Per
 * (sequence, head) the products are gemms on strided views of qkv, by blocks of ATT_BLOCK
 * query rows: rows r0..r1-1 only see keys 0..r1-1, so the blocks skip most of the masked
 * upper triangle (at T = 4 blocks, 5/8 of the work of the full products). */
#define ATT_BLOCK 32

static void attention_forward(real *out, real *att, const real *qkv, int B, int T, int C, int H) {
    int hs = C / H;
    real scale = (real)(1.0 / sqrt((double)hs));
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            const real *q = qkv + (size_t)b * T * 3 * C + h * hs, *k = q + C, *v = q + 2 * C;
            real *a = att + ((size_t)b * H + h) * T * T;
            real *y = out + (size_t)b * T * C + h * hs;
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
                int r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, nr = r1 - r0;
                real *ar = a + (size_t)r0 * T;
                /* scores[r0:r1, 0:r1] = scale * q[r0:r1] k[0:r1]^T */
                gemm_set(CblasNoTrans, CblasTrans, nr, r1, hs, scale, q + (size_t)r0 * 3 * C,
                         3 * C, k, 3 * C, ar, T);
                for (int t = r0; t < r1; t++) softmax_causal_row(a + (size_t)t * T, t + 1, T);
                /* y[r0:r1] = att[r0:r1, 0:r1] v[0:r1] */
                gemm_set(CblasNoTrans, CblasNoTrans, nr, hs, r1, 1, ar, T, v, 3 * C,
                         y + (size_t)r0 * C, C);
            }
        }
    }
}

#define GELU_K 0.7978845608028654 /* sqrt(2 / pi) */

/* out = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), elementwise over n,
 * computed as x * sigmoid(2u): 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)) exactly, and this
 * form keeps full relative precision where tanh(u) is near -1. */
static HOT void gelu_span(real *out, const real *inp, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        real x = inp[i];
        real u = (real)GELU_K * (x + (real)0.044715 * x * x * x);
        out[i] = exp_arg(-2 * u);
    }
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = inp[i] / (1 + exp_core(out[i]));
}

static void gelu_forward(real *out, const real *inp, size_t n) {
    size_t nspans = (n + SPAN - 1) / SPAN;
#pragma omp parallel for schedule(static)
    for (size_t s = 0; s < nspans; s++)
        gelu_span(out + s * SPAN, inp + s * SPAN, s + 1 < nspans ? SPAN : n - s * SPAN);
}

/* One row of softmax_crossentropy_forward: logits p[V] → probabilities; returns the
 * row's loss -log p(target) from the exact log-sum-exp, not from the rounded p. */
static HOT double softmax_crossentropy_row(real *p, int target, int V) {
    real maxv = max_lanes(p, V);
#pragma omp simd
    for (int v = 0; v < V; v++) p[v] = exp_arg(p[v] - maxv);
#pragma omp simd
    for (int v = 0; v < V; v++) p[v] = exp_core(p[v]);
    double sum = sum_lanes(p, V);
    double loss = log(sum) - log((double)p[target]);
    real inv = (real)(1.0 / sum);
#pragma omp simd
    for (int v = 0; v < V; v++) p[v] *= inv;
    return loss;
}

/* probs[N, V] holds logits on entry and softmax on exit; row_loss[i] = -log p(target). */
static void softmax_crossentropy_forward(real *probs, double *row_loss, const uint32_t *tokens,
                                         int B, int T, int V) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < B * T; i++) {
        int b = i / T, t = i % T;
        row_loss[i] = softmax_crossentropy_row(probs + (size_t)i * V,
                                               tokens[(size_t)b * (T + 1) + t + 1], V);
    }
}

/* ---------------------------------------------------------------- backward layers */

/* acc[n] += x[n] in double: one row's contribution to a column sum. */
static HOT void add_row(double *acc, const real *x, int n) {
#pragma omp simd
    for (int c = 0; c < n; c++) acc[c] += x[c];
}

/* out[C] = sum over rows of inp[N, C]: rows summed in fixed chunks of ROW_CHUNK into
 * part[chunk][C], read contiguously, then the chunks combined in order. */
static void column_sum(real *out, double *part, const real *inp, int N, int C) {
    int nchunks = (N + ROW_CHUNK - 1) / ROW_CHUNK;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < nchunks; k++) {
        double *acc = part + (size_t)k * C;
        memset(acc, 0, (size_t)C * sizeof *acc);
        int i1 = (k + 1) * ROW_CHUNK < N ? (k + 1) * ROW_CHUNK : N;
        for (int i = k * ROW_CHUNK; i < i1; i++) add_row(acc, inp + (size_t)i * C, C);
    }
    combine_chunks(out, part, nchunks, (size_t)C, C);
}

/* Given dout[N, OC] of out = inp @ W^T + bias: dinp[N, IC] = dout @ W (overwritten),
 * dW[OC, IC] = dout^T @ inp, dbias[OC] = column sums of dout (both overwritten). */
static void matmul_backward(real *dinp, real *dW, real *dbias, double *part, const real *dout,
                            const real *inp, const real *W, int N, int IC, int OC) {
    gemm_set(CblasNoTrans, CblasNoTrans, N, IC, OC, 1, dout, OC, W, IC, dinp, IC);
    gemm_set(CblasTrans, CblasNoTrans, OC, IC, N, 1, dout, OC, inp, IC, dW, IC);
    column_sum(dbias, part, dout, N, OC);
}

/* One row of layernorm_backward: d[C] += d(x), and the row's terms of the weight and bias
 * gradients added to pw[C], pb[C]. With n = (x - mean) rstd and dn = w g:
 * dx = rstd (dn - mean(dn) - n mean(dn n)). */
static HOT void layernorm_backward_row(real *d, double *pw, double *pb, const real *g,
                                       const real *x, real m, real r, const real *w, int C) {
    double s_dn[LANES] = {0}, s_dn_n[LANES] = {0};
    int c = 0;
    for (; c + LANES <= C; c += LANES)
        for (int k = 0; k < LANES; k++) {
            double dn = (double)w[c + k] * g[c + k];
            s_dn[k] += dn;
            s_dn_n[k] += dn * ((x[c + k] - m) * r);
        }
    for (int k = 0; c < C; c++, k++) {
        double dn = (double)w[c] * g[c];
        s_dn[k] += dn;
        s_dn_n[k] += dn * ((x[c] - m) * r);
    }
    real a = (real)(lanes_total(s_dn) / C), bcoef = (real)(lanes_total(s_dn_n) / C);
#pragma omp simd
    for (int j = 0; j < C; j++) {
        real n = (x[j] - m) * r;
        d[j] += r * (w[j] * g[j] - a - n * bcoef);
        pw[j] += (double)g[j] * n;
        pb[j] += g[j];
    }
}

/* LayerNorm backward: dinp[N, C] += d(inp) (accumulated: the residual stream);
 * dw[C], db[C] overwritten, through partial sums over fixed row chunks (part[chunk][2C]).
 * mean/rstd are the forward's. */
static void layernorm_backward(real *dinp, real *dw, real *db, double *part, const real *dout,
                               const real *inp, const real *mean, const real *rstd,
                               const real *w, int N, int C) {
    int nchunks = (N + ROW_CHUNK - 1) / ROW_CHUNK;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < nchunks; k++) {
        double *pw = part + (size_t)k * 2 * C, *pb = pw + C;
        memset(pw, 0, 2 * (size_t)C * sizeof *pw);
        int i1 = (k + 1) * ROW_CHUNK < N ? (k + 1) * ROW_CHUNK : N;
        for (int i = k * ROW_CHUNK; i < i1; i++) {
            size_t o = (size_t)i * C;
            layernorm_backward_row(dinp + o, pw, pb, dout + o, inp + o, mean[i], rstd[i], w, C);
        }
    }
    combine_chunks(dw, part, nchunks, 2 * (size_t)C, C);
    combine_chunks(db, part + C, nchunks, 2 * (size_t)C, C);
}

/* Softmax backward for one attention row: with p the probabilities and dp = d(p) over the
 * n visible positions, scale * p * (dp - p·dp) is the gradient of the unscaled products
 * q·k (the scores are scale * q·k); written over dp, zero at the masked positions n..T-1. */
static HOT void softmax_backward_row(real *dp, const real *p, int n, int T, real scale) {
    real dot = (real)dot_lanes(p, dp, n);
#pragma omp simd
    for (int j = 0; j < n; j++) dp[j] = p[j] * (dp[j] - dot) * scale;
    for (int j = n; j < T; j++) dp[j] = 0;
}

/* Attention backward: dout[B, T, C] → dqkv[B, T, 3C] (overwritten), using the forward's
 * qkv and att; datt[threads, T, T] is per-thread scratch for d(att) and then d(scores),
 * small enough to stay in cache (one [B, H, T, T] buffer would not). Per (sequence,
 * head), as gemms on strided views, in blocks as in the forward: for query rows r0..r1-1,
 * d(att) = dout v^T over keys 0..r1-1, the softmax backward row by row, and
 * dq = d(scores) k; then for key rows c0..c1-1, which only queries c0..T-1 see,
 * dv = att^T dout and dk = d(scores)^T q. */
static void attention_backward(real *dqkv, real *datt, const real *dout, const real *qkv,
                               const real *att, int B, int T, int C, int H) {
    int hs = C / H;
    real scale = (real)(1.0 / sqrt((double)hs));
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            size_t qo = (size_t)b * T * 3 * C + h * hs; /* this head's q in qkv and dqkv */
            const real *q = qkv + qo, *k = q + C, *v = q + 2 * C;
            real *dq = dqkv + qo, *dk = dq + C, *dv = dq + 2 * C;
            const real *a = att + ((size_t)b * H + h) * T * T;
            const real *dy = dout + (size_t)b * T * C + h * hs;
            real *da = datt + (size_t)omp_get_thread_num() * T * T;
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
                int r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, nr = r1 - r0;
                real *dar = da + (size_t)r0 * T;
                /* d(att)[r0:r1, 0:r1] = dy[r0:r1] v[0:r1]^T, then d(scores) in place */
                gemm_set(CblasNoTrans, CblasTrans, nr, r1, hs, 1, dy + (size_t)r0 * C, C, v,
                         3 * C, dar, T);
                for (int t = r0; t < r1; t++)
                    softmax_backward_row(da + (size_t)t * T, a + (size_t)t * T, t + 1, T, scale);
                /* dq[r0:r1] = d(scores)[r0:r1, 0:r1] k[0:r1] */
                gemm_set(CblasNoTrans, CblasNoTrans, nr, hs, r1, 1, dar, T, k, 3 * C,
                         dq + (size_t)r0 * 3 * C, 3 * C);
            }
            for (int c0 = 0; c0 < T; c0 += ATT_BLOCK) {
                int c1 = c0 + ATT_BLOCK < T ? c0 + ATT_BLOCK : T, nc = c1 - c0;
                size_t sub = (size_t)c0 * T + c0; /* [c0:T, c0:c1] of att and d(scores) */
                size_t row = (size_t)c0 * 3 * C;  /* row c0 of q, dk, dv */
                /* dv[c0:c1] = att[c0:T, c0:c1]^T dy[c0:T] */
                gemm_set(CblasTrans, CblasNoTrans, nc, hs, T - c0, 1, a + sub, T,
                         dy + (size_t)c0 * C, C, dv + row, 3 * C);
                /* dk[c0:c1] = d(scores)[c0:T, c0:c1]^T q[c0:T] */
                gemm_set(CblasTrans, CblasNoTrans, nc, hs, T - c0, 1, da + sub, T, q + row, 3 * C,
                         dk + row, 3 * C);
            }
        }
    }
}

/* d/dx of the tanh GELU, applied in place: dinout[i] = dinout[i] * gelu'(inp[i]).
 * With s = sigmoid(2u): gelu = x s, so gelu' = s + 2 x s (1 - s) du/dx. */
static HOT void gelu_backward_span(real *dinout, const real *inp, size_t n) {
    enum { BLOCK = 256 };
    real e[BLOCK]; /* exp_arg(-2u) of a block */
    for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
        const real *xs = inp + i0;
        real *d = dinout + i0;
        size_t nb = n - i0 < BLOCK ? n - i0 : BLOCK;
#pragma omp simd
        for (size_t i = 0; i < nb; i++) {
            real x = xs[i];
            real u = (real)GELU_K * (x + (real)0.044715 * x * x * x);
            e[i] = exp_arg(-2 * u);
        }
#pragma omp simd
        for (size_t i = 0; i < nb; i++) {
            real x = xs[i];
            real sg = 1 / (1 + exp_core(e[i]));
            real du = (real)GELU_K * (1 + (real)(3 * 0.044715) * x * x);
            d[i] *= sg + 2 * x * sg * (1 - sg) * du;
        }
    }
}

static void gelu_backward_inplace(real *dinout, const real *inp, size_t n) {
    size_t nspans = (n + SPAN - 1) / SPAN;
#pragma omp parallel for schedule(static)
    for (size_t s = 0; s < nspans; s++)
        gelu_backward_span(dinout + s * SPAN, inp + s * SPAN, s + 1 < nspans ? SPAN : n - s * SPAN);
}

/* dwte[V, C] += scatter of dres rows by input token; dwpe[ctx, C] = sums over the batch
 * (rows ≥ T zeroed). Parallel over column blocks so each element has one writer. */
static void encoder_backward(real *dwte, real *dwpe, const real *dres, const uint32_t *tokens,
                             int B, int T, int C, int ctx) {
    enum { BLOCK = 64 };
    int nblocks = (C + BLOCK - 1) / BLOCK;
    memset(dwpe + (size_t)T * C, 0, (size_t)(ctx - T) * C * sizeof *dwpe);
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblocks; blk++) {
        int c0 = blk * BLOCK, nc = c0 + BLOCK < C ? BLOCK : C - c0;
        for (int t = 0; t < T; t++) {
            double acc[BLOCK] = {0};
            for (int b = 0; b < B; b++) add_row(acc, dres + ((size_t)b * T + t) * C + c0, nc);
            for (int c = 0; c < nc; c++) dwpe[(size_t)t * C + c0 + c] = (real)acc[c];
        }
        for (int i = 0; i < B * T; i++) {
            int b = i / T, t = i % T;
            real *w = dwte + (size_t)tokens[(size_t)b * (T + 1) + t] * C + c0;
            const real *d = dres + (size_t)i * C + c0;
#pragma omp simd
            for (int c = 0; c < nc; c++) w[c] += d[c];
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
                     &ctx->datty, &ctx->dqkv, &ctx->dfch, &ctx->datt};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(*bufs[i]);
    free(ctx->part);
    free(ctx->off_block);
    free(ctx->row_loss);
    free(ctx->tokens);
    free(ctx->domain);
    free(ctx->ntok);
    free(ctx->last_loss);
    qwen2_tape_free(ctx->hf);
    free(ctx->row_scale);
    model_layout_free(&ctx->lay);
    free(ctx);
}


/* One activation or scratch buffer of the workspace: where its pointer goes, elements. */
typedef struct ws_item {
    real **p;
    size_t n;
} ws_item;
#define WS_ITEMS 23

/* The workspace's buffers for batches up to max_B x max_T; the slots point into ctx (any
 * model_ctx serves when only counting). One list for cpu_create and the estimate. */
static void ws_plan(model_ctx *ctx, const model_config *c, int max_B, int max_T,
                    ws_item plan[WS_ITEMS]) {
    size_t N = (size_t)max_B * max_T, C = (size_t)c->channels, L = (size_t)c->layers;
    size_t H = (size_t)c->heads, V = (size_t)c->vocab, T = (size_t)max_T;
    const ws_item list[WS_ITEMS] = {
        {&ctx->encoded, N * C},      {&ctx->ln1, L * N * C},       {&ctx->ln1_mean, L * N},
        {&ctx->ln1_rstd, L * N},     {&ctx->qkv, L * N * 3 * C},   {&ctx->att, L * N * H * T},
        {&ctx->atty, L * N * C},     {&ctx->res2, L * N * C},      {&ctx->ln2, L * N * C},
        {&ctx->ln2_mean, L * N},     {&ctx->ln2_rstd, L * N},      {&ctx->fch, L * N * 4 * C},
        {&ctx->fch_gelu, L * N * 4 * C}, {&ctx->res3, L * N * C},  {&ctx->lnf, N * C},
        {&ctx->lnf_mean, N},         {&ctx->lnf_rstd, N},          {&ctx->probs, N * V},
        {&ctx->dres, N * C},         {&ctx->dln, N * C},           {&ctx->datty, N * C},
        {&ctx->dqkv, N * 3 * C},     {&ctx->dfch, N * 4 * C},
    };
    memcpy(plan, list, sizeof list);
}

/* Bytes of the whole workspace with `slots` attention-gradient slots (one per thread):
 * the plan, those slots, the partial sums, the loss rows and the batch. */
static double ws_bytes(model_ctx *ctx, const model_config *c, int max_B, int max_T, int slots) {
    ws_item plan[WS_ITEMS];
    ws_plan(ctx, c, max_B, max_T, plan);
    size_t N = (size_t)max_B * max_T, C = (size_t)c->channels;
    double need = (double)slots * max_T * max_T * sizeof(real) +
                  (double)((N + ROW_CHUNK - 1) / ROW_CHUNK) * 4 * C * sizeof *ctx->part +
                  (double)N * sizeof *ctx->row_loss + (double)max_B * (max_T + 1) * sizeof *ctx->tokens;
    for (size_t i = 0; i < WS_ITEMS; i++) need += (double)plan[i].n * sizeof(real);
    return need;
}

static double cpu_workspace_bytes(const model_layout *lay, int max_B, int max_T, int n_domains,
                                  int threads) {
    (void)n_domains;
    if (lay->cfg.arch == MODEL_ARCH_HF)
        return qwen2_tape_bytes(&lay->cfg.hf, max_B, max_T) +
               (double)max_B * max_T * (sizeof(double) * 2) + (double)max_B * (max_T + 1) * sizeof(uint32_t);
    model_ctx probe;
    memset(&probe, 0, sizeof probe);
    return ws_bytes(&probe, &lay->cfg, max_B, max_T, threads > 0 ? threads : omp_get_max_threads());
}

/* The HF family's workspace: the tape (model/qwen2.h) and the batch. Frees ctx on
 * failure (0 or the error code). The double build runs GPT-2 only. */
static int hf_create(model_ctx *ctx, tdm_err *e) {
    int rc = 0;
#ifdef MODEL_CPU_DOUBLE
    rc = err_set(e, ERR_USAGE, "the " BACKEND_NAME " backend runs GPT-2 models only");
#else
    const model_config *c = &ctx->lay.cfg;
    size_t N = (size_t)ctx->max_B * ctx->max_T;
    char what[200];
    snprintf(what, sizeof what, "the model workspace for batches of %d x %d tokens (%s, %d layers, "
             "%d channels, vocab %d)", ctx->max_B, ctx->max_T, c->hf.model_type, c->layers, c->channels, c->vocab);
    rc = model_memory_check(cpu_workspace_bytes(&ctx->lay, ctx->max_B, ctx->max_T, ctx->M, 0), what,
                            "lower train.batch (or set train.micro_batch), tandem.val_batch or train.seq", e);
    if (!rc && !(ctx->hf = qwen2_tape_create(&c->hf, ctx->max_B, ctx->max_T, e))) rc = e->code;
    if (!rc) {
        ctx->row_loss = calloc(N, sizeof *ctx->row_loss);
        ctx->row_scale = calloc(N, sizeof *ctx->row_scale);
        ctx->tokens = calloc((size_t)ctx->max_B * (ctx->max_T + 1), sizeof *ctx->tokens);
        ctx->domain = calloc((size_t)ctx->max_B, sizeof *ctx->domain);
        ctx->ntok = calloc((size_t)ctx->M, sizeof *ctx->ntok);
        ctx->last_loss = calloc((size_t)ctx->M, sizeof *ctx->last_loss);
        if (!ctx->row_loss || !ctx->row_scale || !ctx->tokens || !ctx->domain || !ctx->ntok ||
            !ctx->last_loss)
            rc = err_set(e, ERR_INTERNAL, "out of memory for the model workspace");
    }
#endif
    if (rc) cpu_destroy(ctx);
    return rc;
}

/* ctx->last_loss[m] and loss[m] (when not NULL; and ntok[m] when not NULL): the mean of
 * the last forward's row losses of domain m's sequences, summed in row order; ctx->ntok[m]
 * their count. */
static int domain_means(model_ctx *ctx, double *loss, long *ntok, tdm_err *e) {
    int M = ctx->M, T = ctx->T;
    size_t N = (size_t)ctx->B * T;
    double *sum = calloc((size_t)M, sizeof *sum);
    if (!sum) return err_set(e, ERR_INTERNAL, "out of memory");
    for (int m = 0; m < M; m++) ctx->ntok[m] = 0;
    for (size_t i = 0; i < N; i++) {
        int m = ctx->domain[i / T];
        sum[m] += ctx->row_loss[i];
        ctx->ntok[m]++;
    }
    for (int m = 0; m < M; m++) {
        ctx->last_loss[m] = ctx->ntok[m] ? sum[m] / ctx->ntok[m] : 0.0;
        if (loss) loss[m] = ctx->last_loss[m];
        if (ntok) ntok[m] = ctx->ntok[m];
    }
    free(sum);
    ctx->have_forward = 1;
    return 0;
}

#ifndef MODEL_CPU_DOUBLE
/* The HF family's backward: row r of domain m weighs coef[m] / ntok[m], as GPT-2's. */
static int hf_backward(model_ctx *ctx, const real *params, const double *coef, real *grads, tdm_err *e) {
    size_t N = (size_t)ctx->B * ctx->T;
    for (size_t i = 0; i < N; i++) {
        int m = ctx->domain[i / ctx->T];
        ctx->row_scale[i] = coef[m] / (double)ctx->ntok[m];
    }
    return qwen2_tape_backward(ctx->hf, params, ctx->row_scale, grads, e);
}
#endif

static model_ctx *cpu_create(const model_layout *lay, int max_B, int max_T, int n_domains,
                             int threads, tdm_err *e) {
    const model_config *c = &lay->cfg;
    if (model_workspace_check(c, max_B, max_T, n_domains, e)) return NULL;
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
    if (c->arch == MODEL_ARCH_HF) return hf_create(ctx, e) ? NULL : ctx;
    size_t N = (size_t)max_B * max_T, C = (size_t)c->channels, L = (size_t)c->layers;
    size_t V = (size_t)c->vocab;
    ctx->off_block = malloc(L * MODEL_BLOCK_TENSORS * sizeof *ctx->off_block);
    if (!ctx->off_block) goto oom;
    {
        model_offsets off = {.block = ctx->off_block};
        if (model_layout_offsets(&ctx->lay, &off, e)) goto fail;
        ctx->off_wte = off.wte, ctx->off_wpe = off.wpe;
        ctx->off_lnf_w = off.lnf_w, ctx->off_lnf_b = off.lnf_b;
    }
    ctx->datt_slots = omp_get_max_threads();
    ws_item plan[WS_ITEMS];
    ws_plan(ctx, c, max_B, max_T, plan);
    double need = ws_bytes(ctx, c, max_B, max_T, ctx->datt_slots);
    char what[200];
    snprintf(what, sizeof what, "the model workspace for batches of %d x %d tokens (%d layers, "
             "%d channels, vocab %zu)", max_B, max_T, c->layers, c->channels, V);
    if (model_memory_check(need, what, "lower train.batch (and tandem.val_batch), train.seq, "
                           "model.layers, model.channels or model.vocab", e))
        goto fail;
    for (size_t i = 0; i < WS_ITEMS; i++)
        if (!(*plan[i].p = cpu_alloc(ctx, plan[i].n))) goto oom;
    if (!(ctx->datt = cpu_alloc(ctx, (size_t)ctx->datt_slots * max_T * max_T))) goto oom;
    size_t nchunks = (N + ROW_CHUNK - 1) / ROW_CHUNK;
    ctx->part = malloc(nchunks * 4 * C * sizeof *ctx->part);
    ctx->row_loss = calloc(N, sizeof *ctx->row_loss);
    ctx->tokens = calloc((size_t)max_B * (max_T + 1), sizeof *ctx->tokens);
    ctx->domain = calloc((size_t)max_B, sizeof *ctx->domain);
    ctx->ntok = calloc((size_t)n_domains, sizeof *ctx->ntok);
    ctx->last_loss = calloc((size_t)n_domains, sizeof *ctx->last_loss);
    if (!ctx->part || !ctx->row_loss || !ctx->tokens || !ctx->domain || !ctx->ntok || !ctx->last_loss)
        goto oom;
    return ctx;
oom:
    err_set(e, ERR_INTERNAL, "out of memory for the model workspace (batch %d x %d)", max_B, max_T);
fail:
    cpu_destroy(ctx);
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
    int rc = model_batch_check(batch, ctx->max_B, ctx->max_T, M, V, e);
    if (rc) return rc;
    size_t ntokens = (size_t)B * (T + 1);
    memcpy(ctx->tokens, batch->tokens, ntokens * sizeof *ctx->tokens);
    memcpy(ctx->domain, batch->domain, (size_t)B * sizeof *ctx->domain);
    ctx->B = B;
    ctx->T = T;
    ctx->have_forward = 0;
#ifndef MODEL_CPU_DOUBLE
    if (ctx->hf) {
        rc = qwen2_tape_forward(ctx->hf, params, ctx->tokens, B, T, ctx->row_loss, e);
        return rc ? rc : domain_means(ctx, loss, ntok, e);
    }
#endif
    size_t N = (size_t)B * T;
    size_t lN = (size_t)ctx->max_B * ctx->max_T; /* per-layer stride of the activation blocks */
    const real *wte = params + ctx->off_wte;

    encoder_forward(ctx->encoded, ctx->tokens, wte, params + ctx->off_wpe, B, T, C);
    const real *x = ctx->encoded;
    for (int l = 0; l < L; l++) {
        real *ln1 = ctx->ln1 + l * lN * C, *ln1m = ctx->ln1_mean + l * lN;
        real *ln1r = ctx->ln1_rstd + l * lN, *qkv = ctx->qkv + l * lN * 3 * C;
        real *att = ctx->att + l * lN * H * ctx->max_T, *atty = ctx->atty + l * lN * C;
        real *res2 = ctx->res2 + l * lN * C, *ln2 = ctx->ln2 + l * lN * C;
        real *ln2m = ctx->ln2_mean + l * lN, *ln2r = ctx->ln2_rstd + l * lN;
        real *fch = ctx->fch + l * lN * 4 * C, *fchg = ctx->fch_gelu + l * lN * 4 * C;
        real *res3 = ctx->res3 + l * lN * C;
#define W(k) block_param(ctx, params, l, k)
        layernorm_forward(ln1, ln1m, ln1r, x, W(MODEL_LN1_W), W(MODEL_LN1_B), (int)N, C);
        matmul_forward(qkv, ln1, W(MODEL_QKV_W), W(MODEL_QKV_B), NULL, (int)N, C, 3 * C);
        attention_forward(atty, att, qkv, B, T, C, H);
        matmul_forward(res2, atty, W(MODEL_ATTPROJ_W), W(MODEL_ATTPROJ_B), x, (int)N, C, C); /* + x */
        layernorm_forward(ln2, ln2m, ln2r, res2, W(MODEL_LN2_W), W(MODEL_LN2_B), (int)N, C);
        matmul_forward(fch, ln2, W(MODEL_FC_W), W(MODEL_FC_B), NULL, (int)N, C, 4 * C);
        gelu_forward(fchg, fch, N * 4 * C);
        matmul_forward(res3, fchg, W(MODEL_FCPROJ_W), W(MODEL_FCPROJ_B), res2, (int)N, 4 * C, C); /* + res2 */
#undef W
        x = res3;
    }
    layernorm_forward(ctx->lnf, ctx->lnf_mean, ctx->lnf_rstd, x, params + ctx->off_lnf_w,
                      params + ctx->off_lnf_b, (int)N, C);
    /* logits[N, V] = lnf @ wte^T (tied head, no bias) */
    gemm_set(CblasNoTrans, CblasTrans, (int)N, V, C, 1, ctx->lnf, C, wte, C, ctx->probs, V);
    softmax_crossentropy_forward(ctx->probs, ctx->row_loss, ctx->tokens, B, T, V);
    return domain_means(ctx, loss, ntok, e);
}

static int cpu_backward(model_ctx *ctx, const real *params, const double *coef, real *grads,
                        tdm_err *e) {
    if (!ctx->have_forward)
        return err_set(e, ERR_INTERNAL, "model backward called without a forward pass");
    ctx->have_forward = 0; /* probs are overwritten by dlogits below */
#ifndef MODEL_CPU_DOUBLE
    if (ctx->hf) return hf_backward(ctx, params, coef, grads, e);
#endif
    const model_config *cf = &ctx->lay.cfg;
    int B = ctx->B, T = ctx->T, C = cf->channels, L = cf->layers, H = cf->heads, V = cf->vocab;
    int N = B * T;
    size_t lN = (size_t)ctx->max_B * ctx->max_T;
    double *part = ctx->part;
    int slots = omp_get_max_threads(); /* the team size of the parallel regions below */
    if (slots > ctx->datt_slots) {
        real *d = cpu_alloc(ctx, (size_t)slots * ctx->max_T * ctx->max_T);
        if (!d) return err_set(e, ERR_INTERNAL, "out of memory for attention scratch");
        free(ctx->datt);
        ctx->datt = d;
        ctx->datt_slots = slots;
    }

    /* dlogits = coef[m] / ntok[m] * (softmax - onehot(target)), in place */
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        int b = i / T, t = i % T, m = ctx->domain[b];
        real g = (real)(coef[m] / (double)ctx->ntok[m]);
        real *p = ctx->probs + (size_t)i * V;
#pragma omp simd
        for (int v = 0; v < V; v++) p[v] *= g;
        p[ctx->tokens[(size_t)b * (T + 1) + t + 1]] -= g;
    }
    /* head: dlnf[N, C] = dlogits @ wte; dwte[V, C] = dlogits^T @ lnf (first contribution) */
    const real *wte = params + ctx->off_wte;
    real *dwte = grads + ctx->off_wte;
    gemm_set(CblasNoTrans, CblasNoTrans, N, C, V, 1, ctx->probs, V, wte, C, ctx->dln, C);
    gemm_set(CblasTrans, CblasNoTrans, V, C, N, 1, ctx->probs, V, ctx->lnf, C, dwte, C);
    memset(ctx->dres, 0, (size_t)N * C * sizeof *ctx->dres);
    const real *xlast = L > 0 ? ctx->res3 + (L - 1) * lN * C : ctx->encoded;
    layernorm_backward(ctx->dres, grads + ctx->off_lnf_w, grads + ctx->off_lnf_b, part, ctx->dln,
                       xlast, ctx->lnf_mean, ctx->lnf_rstd, params + ctx->off_lnf_w, N, C);

    for (int l = L - 1; l >= 0; l--) {
        const real *x = l == 0 ? ctx->encoded : ctx->res3 + (l - 1) * lN * C;
        real *ln1 = ctx->ln1 + l * lN * C, *ln1m = ctx->ln1_mean + l * lN;
        real *ln1r = ctx->ln1_rstd + l * lN, *qkv = ctx->qkv + l * lN * 3 * C;
        real *att = ctx->att + l * lN * H * ctx->max_T, *atty = ctx->atty + l * lN * C;
        real *res2 = ctx->res2 + l * lN * C, *ln2 = ctx->ln2 + l * lN * C;
        real *ln2m = ctx->ln2_mean + l * lN, *ln2r = ctx->ln2_rstd + l * lN;
        real *fch = ctx->fch + l * lN * 4 * C, *fchg = ctx->fch_gelu + l * lN * 4 * C;
#define W(k) block_param(ctx, params, l, k)
#define G(k) block_param(ctx, grads, l, k)
        /* MLP: res3 = res2 + c_proj(gelu(c_fc(ln_2(res2)))); dres holds d(res3) */
        matmul_backward(ctx->dfch, G(MODEL_FCPROJ_W), G(MODEL_FCPROJ_B), part, ctx->dres, fchg, W(MODEL_FCPROJ_W), N,
                        4 * C, C);
        gelu_backward_inplace(ctx->dfch, fch, (size_t)N * 4 * C);
        matmul_backward(ctx->dln, G(MODEL_FC_W), G(MODEL_FC_B), part, ctx->dfch, ln2, W(MODEL_FC_W), N, C, 4 * C);
        layernorm_backward(ctx->dres, G(MODEL_LN2_W), G(MODEL_LN2_B), part, ctx->dln, res2, ln2m, ln2r,
                           W(MODEL_LN2_W), N, C);
        /* attention: res2 = x + c_proj(attn(c_attn(ln_1(x)))); dres now holds d(res2) */
        matmul_backward(ctx->datty, G(MODEL_ATTPROJ_W), G(MODEL_ATTPROJ_B), part, ctx->dres, atty,
                        W(MODEL_ATTPROJ_W), N, C, C);
        attention_backward(ctx->dqkv, ctx->datt, ctx->datty, qkv, att, B, T, C, H);
        matmul_backward(ctx->dln, G(MODEL_QKV_W), G(MODEL_QKV_B), part, ctx->dqkv, ln1, W(MODEL_QKV_W), N, C, 3 * C);
        layernorm_backward(ctx->dres, G(MODEL_LN1_W), G(MODEL_LN1_B), part, ctx->dln, x, ln1m, ln1r, W(MODEL_LN1_W),
                           N, C);
#undef W
#undef G
    }
    encoder_backward(dwte, grads + ctx->off_wpe, ctx->dres, ctx->tokens, B, T, C, cf->ctx);
    return 0;
}

static int cpu_sgd(model_ctx *ctx, real *params, const real *grads, float lr, tdm_err *e) {
    (void)e;
    size_t n = ctx->lay.numel;
    real rlr = (real)lr;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) params[i] -= rlr * grads[i];
    return 0;
}

/* One span of cpu_adamw: torch.optim.AdamW's single-tensor update, operation for
 * operation. The square roots run in a loop of their own: with errno semantics sqrt is a
 * call on a branch, which would keep the rest of the update from vectorising. */
static HOT void adamw_span(real *p, const real *g, real *m, real *v, size_t n, real keep, real b1,
                           real b2, real eps, real step_size, real bc2_sqrt) {
    enum { BLOCK = 256 };
    real root[BLOCK];
    for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
        size_t nb = n - i0 < BLOCK ? n - i0 : BLOCK;
        real *pb = p + i0, *mb = m + i0, *vb = v + i0;
        const real *gb = g + i0;
#pragma omp simd
        for (size_t i = 0; i < nb; i++) {
            pb[i] *= keep;
            mb[i] = mb[i] * b1 + gb[i] * (1 - b1);
            vb[i] = vb[i] * b2 + gb[i] * gb[i] * (1 - b2);
        }
        for (size_t i = 0; i < nb; i++) root[i] = R_SQRT(vb[i]);
#pragma omp simd
        for (size_t i = 0; i < nb; i++) pb[i] -= step_size * (mb[i] / (root[i] / bc2_sqrt + eps));
    }
}

/* torch.optim.AdamW, single-tensor form. One parallel region for all tensors. */
static int cpu_adamw(model_ctx *ctx, real *params, const real *grads, real *m, real *v,
                     const model_adamw *hp, tdm_err *e) {
    if (hp->step < 1) return err_set(e, ERR_INTERNAL, "AdamW step must be >= 1 (got %ld)", hp->step);
    if (ctx->clip_bad) { /* the clip before saw a non-finite norm (model.h) */
        ctx->clip_bad = 0;
        return 0;
    }
    double bc1 = 1.0 - pow(hp->beta1, (double)hp->step);
    double bc2 = 1.0 - pow(hp->beta2, (double)hp->step);
    real step_size = (real)(hp->lr / bc1), bc2_sqrt = (real)sqrt(bc2);
    real b1 = hp->beta1, b2 = hp->beta2, eps = hp->eps;
    real decay_keep = (real)(1.0 - (double)hp->lr * hp->weight_decay);
    const model_layout *lay = &ctx->lay;
#pragma omp parallel
    for (int ti = 0; ti < lay->n; ti++) {
        const model_tensor *t = &lay->t[ti];
        real keep = t->decay ? decay_keep : (real)1;
        size_t o = t->offset, n = t->numel, nspans = (n + SPAN - 1) / SPAN;
#pragma omp for schedule(static) nowait
        for (size_t s = 0; s < nspans; s++) {
            size_t i = o + s * SPAN;
            adamw_span(params + i, grads + i, m + i, v + i, s + 1 < nspans ? SPAN : n - s * SPAN,
                       keep, b1, b2, eps, step_size, bc2_sqrt);
        }
    }
    return 0;
}

/* sum of squares of x[0..n) in double, in LANES partial sums */
static HOT double sumsq_span(const real *x, size_t n) { return dot_lanes(x, x, (int)n); }

/* *out = the L2 norm of buf, partial sums per NORM_CHUNK added in chunk order; -1 when
 * out of memory. */
static int norm_of(model_ctx *ctx, const real *buf, double *out) {
    size_t n = ctx->lay.numel, nchunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    double *part = malloc(nchunks * sizeof *part);
    if (!part) return -1;
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < nchunks; k++) {
        size_t i0 = k * NORM_CHUNK, i1 = i0 + NORM_CHUNK < n ? i0 + NORM_CHUNK : n;
        part[k] = sumsq_span(buf + i0, i1 - i0);
    }
    double s = 0;
    for (size_t k = 0; k < nchunks; k++) s += part[k];
    free(part);
    *out = sqrt(s);
    return 0;
}

static double cpu_norm(model_ctx *ctx, const real *buf) {
    double r;
    return norm_of(ctx, buf, &r) ? NAN : r;
}

static void cpu_scale(model_ctx *ctx, real *buf, float s) {
    size_t n = ctx->lay.numel;
    real rs = (real)s;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] *= rs;
}

/* model_clip_grads' rule; the CPU has the norm at once, results() only hands it over */
static int cpu_clip(model_ctx *ctx, real *grads, double max_norm, tdm_err *e) {
    double norm;
    if (norm_of(ctx, grads, &norm)) return err_set(e, ERR_INTERNAL, "out of memory for a gradient norm");
    if (max_norm > 0 && norm > max_norm) cpu_scale(ctx, grads, (float)(max_norm / (norm + 1e-6)));
    ctx->clip_norm = norm;
    ctx->clip_bad = !isfinite(norm);
    return 0;
}

static int cpu_results(model_ctx *ctx, double *loss, double *norm, tdm_err *e) {
    (void)e;
    if (loss) memcpy(loss, ctx->last_loss, (size_t)ctx->M * sizeof *loss);
    if (norm) *norm = ctx->clip_norm;
    return 0;
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
    .clip = cpu_clip,
    .results = cpu_results,
    .workspace_bytes = cpu_workspace_bytes,
};
