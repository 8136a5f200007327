/* qwen2.c — the Qwen2 / Llama forward pass on the CPU, fp32; see qwen2.h. One function
 * per layer kind, shapes in comments, as model/cpu.c does for GPT-2. */
#include "model/qwen2.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/safetensors.h"

/* ---- loading -------------------------------------------------------------------------- */

typedef struct load_ctx {
    const st_set *s;
    float *at;
    tdm_err *e;
} load_ctx;

static int load_one(const char *name, int64_t rows, int64_t cols, void *arg) {
    load_ctx *x = arg;
    int rc = safetensors_to_f32(safetensors_find(x->s, name), x->at, x->e);
    x->at += rows * (cols ? cols : 1);
    return rc;
}

/* The tensors in each_tensor order: walks the same order to hand out pointers. */
typedef struct point_ctx {
    qwen2_model *m;
    const float *at;
} point_ctx;

static int point_one(const char *name, int64_t rows, int64_t cols, void *arg) {
    point_ctx *x = arg;
    qwen2_model *m = x->m;
    const float *p = x->at;
    x->at += rows * (cols ? cols : 1);
    if (!strcmp(name, "model.embed_tokens.weight")) m->embed = p;
    else if (!strcmp(name, "model.norm.weight")) m->norm = p;
    else if (!strcmp(name, "lm_head.weight")) m->head = p;
    else {
        int l = atoi(name + strlen("model.layers."));
        const char *what = strchr(name + strlen("model.layers."), '.') + 1;
        qwen2_layer *L = &m->layer[l];
        static const char *const names[] = {"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.q_proj.bias",
                                            "self_attn.k_proj.weight", "self_attn.k_proj.bias", "self_attn.v_proj.weight",
                                            "self_attn.v_proj.bias", "self_attn.o_proj.weight",
                                            "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                                            "mlp.down_proj.weight"};
        const float **slot[] = {&L->ln_in, &L->wq, &L->bq, &L->wk, &L->bk, &L->wv,
                                &L->bv,    &L->wo, &L->ln_post, &L->wg, &L->wu, &L->wd};
        for (size_t i = 0; i < sizeof names / sizeof *names; i++)
            if (!strcmp(what, names[i])) *slot[i] = p;
    }
    return 0;
}

int qwen2_load(const char *dir, qwen2_model *m, tdm_err *e) {
    memset(m, 0, sizeof *m);
    st_set *s = NULL;
    int rc = hf_arch_read(dir, &m->a, e);
    if (!rc) rc = safetensors_open(dir, &s, e);
    if (!rc) rc = hf_arch_check_weights(&m->a, s, e);
    if (!rc) {
        m->numel = (size_t)hf_arch_params(&m->a);
        m->params = malloc(m->numel * sizeof *m->params);
        m->layer = calloc((size_t)m->a.layers, sizeof *m->layer);
        if (!m->params || !m->layer) rc = err_set(e, ERR_INTERNAL, "out of memory for %zu parameters", m->numel);
    }
    if (!rc) {
        load_ctx x = {s, m->params, e};
        rc = hf_arch_each_tensor(&m->a, load_one, &x);
    }
    if (!rc) {
        point_ctx x = {m, m->params};
        hf_arch_each_tensor(&m->a, point_one, &x);
        if (m->a.tied) m->head = m->embed;
    }
    safetensors_close(s);
    if (rc) qwen2_free(m);
    return rc;
}

void qwen2_free(qwen2_model *m) {
    free(m->params);
    free(m->layer);
    memset(m, 0, sizeof *m);
}

/* ---- layers --------------------------------------------------------------------------- */

/* out[N, C] = x / sqrt(mean(x^2) + eps) * w; the reciprocal root of each row into
 * rstd[N] when not NULL (the backward pass needs it) */
static void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C, double eps) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C;
        double ss = 0;
        for (int c = 0; c < C; c++) ss += (double)xi[c] * xi[c];
        float r = (float)(1.0 / sqrt(ss / C + eps));
        if (rstd) rstd[i] = r;
        for (int c = 0; c < C; c++) out[(size_t)i * C + c] = xi[c] * r * w[c];
    }
}

/* out[N, O] = in[N, K] W^T (W: [O, K]) + b (b: [O] or NULL) */
static void linear_forward(float *out, const float *in, const float *w, const float *b, int N, int K, int O) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, O, K, 1.0f, in, K, w, K, 0.0f, out, O);
    if (!b) return;
#pragma omp parallel for
    for (int i = 0; i < N; i++)
        for (int o = 0; o < O; o++) out[(size_t)i * O + o] += b[o];
}

/* x[B*T, heads*D] rotated in place by RoPE: position t = row % T, pairs (i, i + D/2),
 * angle t * theta^(-2i/D); sign -1 rotates back (the transpose: the backward pass). The
 * angles of a row are computed once for all its heads. */
static void rope_rotate(float *x, int B, int T, int heads, int D, double theta, float sign) {
    int half = D / 2;
#pragma omp parallel
    {
        float *cs = malloc((size_t)D * sizeof *cs); /* cos in [0, half), sign * sin after */
#pragma omp for
        for (int r = 0; r < B * T; r++) {
            int t = r % T;
            for (int i = 0; i < half; i++) {
                /* as HF computes it: inv_freq in float32, the angle t * inv_freq in float32 */
                float inv = (float)(1.0 / pow(theta, (double)(2 * i) / D));
                float ang = (float)t * inv;
                cs[i] = cosf(ang);
                cs[half + i] = sign * sinf(ang);
            }
            for (int h = 0; h < heads; h++) {
                float *v = x + ((size_t)r * heads + h) * D;
                for (int i = 0; i < half; i++) {
                    float a = v[i], b = v[i + half], c = cs[i], sn = cs[half + i];
                    v[i] = a * c - b * sn;
                    v[i + half] = b * c + a * sn;
                }
            }
        }
        free(cs);
    }
}

/* out[B*T, H*D]: causal attention of query head h over key/value head h / (H / Hkv);
 * q [B*T, H*D], k and v [B*T, Hkv*D]; the softmax weights into probs when not NULL */
static void attention_forward(float *out, float *probs, const float *q, const float *k, const float *v, int B,
                              int T, int H, int Hkv, int D) {
    int group = H / Hkv;
    float scale = (float)(1.0 / sqrt((double)D));
#pragma omp parallel
    {
        float *p = malloc((size_t)T * sizeof *p);
#pragma omp for collapse(2)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++) {
                    const float *qt = q + ((size_t)(b * T + t) * H + h) * D;
                    int g = h / group;
                    float mx = -INFINITY;
                    for (int s = 0; s <= t; s++) {
                        const float *ks = k + ((size_t)(b * T + s) * Hkv + g) * D;
                        float dot = 0;
                        for (int i = 0; i < D; i++) dot += qt[i] * ks[i];
                        p[s] = dot * scale;
                        if (p[s] > mx) mx = p[s];
                    }
                    double sum = 0;
                    for (int s = 0; s <= t; s++) sum += p[s] = expf(p[s] - mx);
                    float *ot = out + ((size_t)(b * T + t) * H + h) * D;
                    if (probs) { /* [B][H][T][T], the row's causal part; the rest zero */
                        float *pr = probs + (((size_t)b * H + h) * T + t) * T;
                        for (int s = 0; s < T; s++) pr[s] = s <= t ? (float)(p[s] / sum) : 0.0f;
                    }
                    for (int i = 0; i < D; i++) ot[i] = 0;
                    for (int s = 0; s <= t; s++) {
                        const float *vs = v + ((size_t)(b * T + s) * Hkv + g) * D;
                        float w = (float)(p[s] / sum);
                        for (int i = 0; i < D; i++) ot[i] += w * vs[i];
                    }
                }
        free(p);
    }
}

/* act[N, F] = silu(g) * u (act may be g) */
static void swiglu_forward(float *act, const float *g, const float *u, size_t n) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) act[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* The mean cross-entropy of logits[N, V] against the targets (tokens [N/T][T+1], target
 * of row r: its next token), each row's loss computed in parallel and summed in row
 * order, so the result does not depend on the threads. With grad, the logits are
 * replaced by d(mean)/d(logits) = (softmax - onehot) / N. -1 when out of memory. */
static double crossentropy(float *logits, const uint32_t *tokens, size_t N, int T, int V, int grad) {
    double *row_loss = malloc(N * sizeof *row_loss);
    if (!row_loss) return -1;
#pragma omp parallel for
    for (size_t r = 0; r < N; r++) {
        float *row = logits + r * V;
        float mx = row[0];
        for (int c = 1; c < V; c++) mx = row[c] > mx ? row[c] : mx;
        double sum = 0;
        for (int c = 0; c < V; c++) sum += exp((double)row[c] - mx);
        uint32_t target = tokens[(r / T) * (T + 1) + r % T + 1];
        row_loss[r] = log(sum) + mx - row[target];
        if (grad) {
            for (int c = 0; c < V; c++) row[c] = (float)(exp((double)row[c] - mx) / sum / (double)N);
            row[target] -= (float)(1.0 / (double)N);
        }
    }
    double total = 0;
    for (size_t r = 0; r < N; r++) total += row_loss[r];
    free(row_loss);
    return total / (double)N;
}

/* ---- the pass ------------------------------------------------------------------------- */

int qwen2_forward(const qwen2_model *m, const uint32_t *tokens, int B, int T, float *logits, double *loss,
                  tdm_err *e) {
    const hf_arch *a = &m->a;
    int C = a->channels, H = a->heads, Hkv = a->kv_heads, D = a->head_dim, F = a->intermediate, V = a->vocab;
    if (B < 1 || T < 1 || T > a->max_positions)
        return err_set(e, ERR_USAGE, "a batch of %d x %d tokens (at most %d positions)", B, T, a->max_positions);
    for (int b = 0; b < B; b++)
        for (int t = 0; t <= T; t++)
            if (tokens[(size_t)b * (T + 1) + t] >= (uint32_t)V)
                return err_set(e, ERR_USAGE, "row %d, position %d: token %u >= vocab %d", b, t,
                               tokens[(size_t)b * (T + 1) + t], V);
    size_t N = (size_t)B * T, QD = (size_t)H * D, KD = (size_t)Hkv * D;
    float *x = malloc(N * C * sizeof *x), *h = malloc(N * C * sizeof *h), *q = malloc(N * QD * sizeof *q);
    float *k = malloc(N * KD * sizeof *k), *v = malloc(N * KD * sizeof *v), *att = malloc(N * QD * sizeof *att);
    float *g = malloc(N * (size_t)F * sizeof *g), *u = malloc(N * (size_t)F * sizeof *u);
    float *lg = logits ? logits : malloc(N * (size_t)V * sizeof *lg);
    int rc = 0;
    if (!x || !h || !q || !k || !v || !att || !g || !u || !lg) rc = err_set(e, ERR_INTERNAL, "out of memory");
    for (size_t r = 0; !rc && r < N; r++) /* x = embed[inputs] */
        memcpy(x + r * C, m->embed + (size_t)tokens[(r / T) * (T + 1) + r % T] * C, (size_t)C * sizeof *x);
    for (int l = 0; !rc && l < a->layers; l++) {
        const qwen2_layer *L = &m->layer[l];
        rmsnorm_forward(h, NULL, x, L->ln_in, (int)N, C, a->rms_eps);
        linear_forward(q, h, L->wq, L->bq, (int)N, C, (int)QD);
        linear_forward(k, h, L->wk, L->bk, (int)N, C, (int)KD);
        linear_forward(v, h, L->wv, L->bv, (int)N, C, (int)KD);
        rope_rotate(q, B, T, H, D, a->rope_theta, 1.0f);
        rope_rotate(k, B, T, Hkv, D, a->rope_theta, 1.0f);
        attention_forward(att, NULL, q, k, v, B, T, H, Hkv, D);
        /* x += att Wo^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, C, (int)QD, 1.0f, att, (int)QD, L->wo, (int)QD,
                    1.0f, x, C);
        rmsnorm_forward(h, NULL, x, L->ln_post, (int)N, C, a->rms_eps);
        linear_forward(g, h, L->wg, NULL, (int)N, C, F);
        linear_forward(u, h, L->wu, NULL, (int)N, C, F);
        swiglu_forward(g, g, u, N * (size_t)F);
        /* x += act Wd^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, C, F, 1.0f, g, F, L->wd, F, 1.0f, x, C);
    }
    if (!rc) {
        rmsnorm_forward(h, NULL, x, m->norm, (int)N, C, a->rms_eps);
        linear_forward(lg, h, m->head, NULL, (int)N, C, V);
        double mean = crossentropy(lg, tokens, N, T, V, 0);
        if (mean < 0) rc = err_set(e, ERR_INTERNAL, "out of memory");
        else if (loss) *loss = mean;
    }
    free(x), free(h), free(q), free(k), free(v), free(att), free(g), free(u);
    if (!logits) free(lg);
    return rc;
}

/* ---- the backward pass ---------------------------------------------------------------- */

/* What the backward pass needs of one layer's forward. */
typedef struct layer_tape {
    float *x_in, *h1, *r1, *q, *k, *v, *p, *att, *x_mid, *h2, *r2, *g, *u, *act;
} layer_tape;

/* dx[N, C] += rmsnorm backward of dy through y = x * r * w; dw[C] += sum_n dy * x * r */
static void rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *r, const float *w,
                             int N, int C) {
    for (int i = 0; i < N; i++) { /* sequential over rows: dw is shared */
        const float *xi = x + (size_t)i * C, *dyi = dy + (size_t)i * C;
        double dot = 0;
        for (int c = 0; c < C; c++) {
            dot += (double)dyi[c] * w[c] * xi[c];
            dw[c] += dyi[c] * xi[c] * r[i];
        }
        float coef = (float)(dot * r[i] * r[i] * r[i] / C);
        for (int c = 0; c < C; c++) dx[(size_t)i * C + c] += dyi[c] * w[c] * r[i] - xi[c] * coef;
    }
}

/* Given dout[N, O] of out = in W^T + b: dW[O, K] += dout^T in, db[O] += sum dout, and
 * din[N, K] = dout W (overwritten when beta 0, added when beta 1) */
static void linear_backward(float *din, float beta, float *dw, float *db, const float *dout, const float *in,
                            const float *w, int N, int K, int O) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, O, K, N, 1.0f, dout, O, in, K, 1.0f, dw, K);
    if (db)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < O; o++) db[o] += dout[(size_t)n * O + o];
    if (din) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, K, O, 1.0f, dout, O, w, K, beta, din, K);
}

/* dq[B*T, H*D], dk and dv [B*T, Hkv*D] (zeroed here) from datt through the causal
 * softmax attention; parallel over (row, key/value head), so that the query heads that
 * share a key/value head add into it one after another */
static void attention_backward(float *dq, float *dk, float *dv, const float *datt, const float *q, const float *k,
                               const float *v, const float *probs, int B, int T, int H, int Hkv, int D) {
    int group = H / Hkv;
    float scale = (float)(1.0 / sqrt((double)D));
    memset(dk, 0, (size_t)B * T * Hkv * D * sizeof *dk);
    memset(dv, 0, (size_t)B * T * Hkv * D * sizeof *dv);
#pragma omp parallel
    {
        float *dp = malloc((size_t)T * sizeof *dp);
#pragma omp for collapse(2)
        for (int b = 0; b < B; b++)
            for (int g = 0; g < Hkv; g++)
                for (int h = g * group; h < (g + 1) * group; h++)
                    for (int t = 0; t < T; t++) {
                        const float *pr = probs + (((size_t)b * H + h) * T + t) * T;
                        const float *dot = datt + ((size_t)(b * T + t) * H + h) * D;
                        const float *qt = q + ((size_t)(b * T + t) * H + h) * D;
                        float *dqt = dq + ((size_t)(b * T + t) * H + h) * D;
                        double sum = 0;
                        for (int s = 0; s <= t; s++) {
                            const float *vs = v + ((size_t)(b * T + s) * Hkv + g) * D;
                            float acc = 0;
                            for (int i = 0; i < D; i++) acc += dot[i] * vs[i];
                            dp[s] = acc;
                            sum += (double)pr[s] * acc;
                            float *dvs = dv + ((size_t)(b * T + s) * Hkv + g) * D;
                            for (int i = 0; i < D; i++) dvs[i] += pr[s] * dot[i];
                        }
                        for (int i = 0; i < D; i++) dqt[i] = 0;
                        for (int s = 0; s <= t; s++) {
                            float ds = pr[s] * (dp[s] - (float)sum) * scale;
                            const float *ks = k + ((size_t)(b * T + s) * Hkv + g) * D;
                            float *dks = dk + ((size_t)(b * T + s) * Hkv + g) * D;
                            for (int i = 0; i < D; i++) {
                                dqt[i] += ds * ks[i];
                                dks[i] += ds * qt[i];
                            }
                        }
                    }
        free(dp);
    }
}

int qwen2_forward_backward(const qwen2_model *m, const uint32_t *tokens, int B, int T, float *grad, double *loss,
                           tdm_err *e) {
    const hf_arch *a = &m->a;
    int C = a->channels, H = a->heads, Hkv = a->kv_heads, D = a->head_dim, F = a->intermediate, V = a->vocab;
    int L = a->layers;
    if (B < 1 || T < 1 || T > a->max_positions)
        return err_set(e, ERR_USAGE, "a batch of %d x %d tokens (at most %d positions)", B, T, a->max_positions);
    for (int b = 0; b < B; b++)
        for (int t = 0; t <= T; t++)
            if (tokens[(size_t)b * (T + 1) + t] >= (uint32_t)V)
                return err_set(e, ERR_USAGE, "row %d, position %d: token %u >= vocab %d", b, t,
                               tokens[(size_t)b * (T + 1) + t], V);
    size_t N = (size_t)B * T, QD = (size_t)H * D, KD = (size_t)Hkv * D, P = (size_t)B * H * T * T;
    /* the tape: every layer's activations, then the final norm and the probabilities */
    size_t per = N * (4 * (size_t)C + 2 + 2 * QD + 2 * KD + 3 * (size_t)F) + P;
    size_t total = (size_t)L * per + N * (2 * (size_t)C + 1) + N * (size_t)V;
    float *mem = calloc(total, sizeof *mem);
    layer_tape *tp = calloc((size_t)L, sizeof *tp);
    if (!mem || !tp) {
        free(mem);
        free(tp);
        return err_set(e, ERR_INTERNAL, "out of memory for the activations (%zu floats)", total);
    }
    float *at = mem;
#define TAKE(n) (at += (n), at - (n))
    for (int l = 0; l < L; l++) {
        layer_tape *t = &tp[l];
        t->x_in = TAKE(N * C), t->h1 = TAKE(N * C), t->r1 = TAKE(N), t->q = TAKE(N * QD), t->k = TAKE(N * KD);
        t->v = TAKE(N * KD), t->p = TAKE(P), t->att = TAKE(N * QD), t->x_mid = TAKE(N * C), t->h2 = TAKE(N * C);
        t->r2 = TAKE(N), t->g = TAKE(N * F), t->u = TAKE(N * F), t->act = TAKE(N * F);
    }
    float *x_last = TAKE(N * C), *hf = TAKE(N * C), *rf = TAKE(N), *probs = TAKE(N * V);
#undef TAKE
    /* forward, keeping what the backward pass reads */
    float *x = tp[0].x_in;
    for (size_t r = 0; r < N; r++)
        memcpy(x + r * C, m->embed + (size_t)tokens[(r / T) * (T + 1) + r % T] * C, (size_t)C * sizeof *x);
    for (int l = 0; l < L; l++) {
        const qwen2_layer *W = &m->layer[l];
        layer_tape *t = &tp[l];
        rmsnorm_forward(t->h1, t->r1, t->x_in, W->ln_in, (int)N, C, a->rms_eps);
        linear_forward(t->q, t->h1, W->wq, W->bq, (int)N, C, (int)QD);
        linear_forward(t->k, t->h1, W->wk, W->bk, (int)N, C, (int)KD);
        linear_forward(t->v, t->h1, W->wv, W->bv, (int)N, C, (int)KD);
        rope_rotate(t->q, B, T, H, D, a->rope_theta, 1.0f);
        rope_rotate(t->k, B, T, Hkv, D, a->rope_theta, 1.0f);
        attention_forward(t->att, t->p, t->q, t->k, t->v, B, T, H, Hkv, D);
        memcpy(t->x_mid, t->x_in, N * C * sizeof *x);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, C, (int)QD, 1.0f, t->att, (int)QD, W->wo, (int)QD,
                    1.0f, t->x_mid, C);
        rmsnorm_forward(t->h2, t->r2, t->x_mid, W->ln_post, (int)N, C, a->rms_eps);
        linear_forward(t->g, t->h2, W->wg, NULL, (int)N, C, F);
        linear_forward(t->u, t->h2, W->wu, NULL, (int)N, C, F);
        swiglu_forward(t->act, t->g, t->u, N * (size_t)F);
        float *next = l + 1 < L ? tp[l + 1].x_in : x_last;
        memcpy(next, t->x_mid, N * C * sizeof *x);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, C, F, 1.0f, t->act, F, W->wd, F, 1.0f, next, C);
    }
    rmsnorm_forward(hf, rf, x_last, m->norm, (int)N, C, a->rms_eps);
    linear_forward(probs, hf, m->head, NULL, (int)N, C, V);
    /* the loss, and dlogits = (softmax - onehot) / N in place of the logits */
    double mean = crossentropy(probs, tokens, N, T, V, 1);
    if (mean < 0) {
        free(mem);
        free(tp);
        return err_set(e, ERR_INTERNAL, "out of memory");
    }
    if (loss) *loss = mean;
    /* backward: the gradient buffer laid out as the weights */
    memset(grad, 0, m->numel * sizeof *grad);
    qwen2_model gv = *m;
    gv.layer = calloc((size_t)L, sizeof *gv.layer);
    float *dx = malloc(N * C * sizeof *dx), *dh = malloc(N * C * sizeof *dh), *dq = malloc(N * QD * sizeof *dq);
    float *dk = malloc(N * KD * sizeof *dk), *dv = malloc(N * KD * sizeof *dv), *datt = malloc(N * QD * sizeof *datt);
    float *dg = malloc(N * F * sizeof *dg), *du = malloc(N * F * sizeof *du);
    int rc = 0;
    if (!gv.layer || !dx || !dh || !dq || !dk || !dv || !datt || !dg || !du)
        rc = err_set(e, ERR_INTERNAL, "out of memory");
    if (!rc) {
        point_ctx pc = {&gv, grad};
        hf_arch_each_tensor(a, point_one, &pc);
        if (a->tied) gv.head = gv.embed;
        /* logits = hf head^T */
        linear_backward(dh, 0.0f, (float *)gv.head, NULL, probs, hf, m->head, (int)N, C, V);
        memset(dx, 0, N * C * sizeof *dx);
        rmsnorm_backward(dx, (float *)gv.norm, dh, x_last, rf, m->norm, (int)N, C);
    }
    for (int l = L - 1; !rc && l >= 0; l--) {
        const qwen2_layer *W = &m->layer[l];
        qwen2_layer *G = &gv.layer[l];
        layer_tape *t = &tp[l];
        /* next = x_mid + act Wd^T: dx flows to x_mid as is; dact = dx Wd */
        linear_backward(dg, 0.0f, (float *)G->wd, NULL, dx, t->act, W->wd, (int)N, F, C);
        for (size_t i = 0; i < N * (size_t)F; i++) { /* act = silu(g) * u */
            float s = 1.0f / (1.0f + expf(-t->g[i]));
            float dact = dg[i];
            du[i] = dact * t->g[i] * s;
            dg[i] = dact * t->u[i] * s * (1.0f + t->g[i] * (1.0f - s));
        }
        linear_backward(dh, 0.0f, (float *)G->wg, NULL, dg, t->h2, W->wg, (int)N, C, F);
        linear_backward(dh, 1.0f, (float *)G->wu, NULL, du, t->h2, W->wu, (int)N, C, F);
        rmsnorm_backward(dx, (float *)G->ln_post, dh, t->x_mid, t->r2, W->ln_post, (int)N, C);
        /* x_mid = x_in + att Wo^T */
        linear_backward(datt, 0.0f, (float *)G->wo, NULL, dx, t->att, W->wo, (int)N, (int)QD, C);
        attention_backward(dq, dk, dv, datt, t->q, t->k, t->v, t->p, B, T, H, Hkv, D);
        rope_rotate(dq, B, T, H, D, a->rope_theta, -1.0f);
        rope_rotate(dk, B, T, Hkv, D, a->rope_theta, -1.0f);
        linear_backward(dh, 0.0f, (float *)G->wq, (float *)G->bq, dq, t->h1, W->wq, (int)N, C, (int)QD);
        linear_backward(dh, 1.0f, (float *)G->wk, (float *)G->bk, dk, t->h1, W->wk, (int)N, C, (int)KD);
        linear_backward(dh, 1.0f, (float *)G->wv, (float *)G->bv, dv, t->h1, W->wv, (int)N, C, (int)KD);
        rmsnorm_backward(dx, (float *)G->ln_in, dh, t->x_in, t->r1, W->ln_in, (int)N, C);
    }
    for (size_t r = 0; !rc && r < N; r++) { /* x = embed[inputs] */
        float *de = (float *)gv.embed + (size_t)tokens[(r / T) * (T + 1) + r % T] * C;
        for (int c = 0; c < C; c++) de[c] += dx[r * C + c];
    }
    free(gv.layer), free(dx), free(dh), free(dq), free(dk), free(dv), free(datt), free(dg), free(du);
    free(mem);
    free(tp);
    return rc;
}

/* ---- export --------------------------------------------------------------------------- */

typedef struct save_ctx {
    st_out *t;
    size_t n;
    const float *at;
    st_dtype dtype;
    char (*names)[128];
} save_ctx;

static int save_one(const char *name, int64_t rows, int64_t cols, void *arg) {
    save_ctx *x = arg;
    st_out *o = &x->t[x->n];
    snprintf(x->names[x->n], sizeof x->names[x->n], "%s", name);
    *o = (st_out){.name = x->names[x->n], .dtype = x->dtype, .ndim = cols ? 2 : 1, .shape = {rows, cols},
                  .data = x->at};
    x->at += rows * (cols ? cols : 1);
    x->n++;
    return 0;
}

int qwen2_save(const qwen2_model *m, const float *params, const char *dir, st_dtype dtype, tdm_err *e) {
    const hf_arch *a = &m->a;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return err_sys(e, ERR_USAGE, errno, "%s: cannot create", dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return err_sys(e, ERR_USAGE, errno, "%s: cannot create", path);
    fprintf(f,
            "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n  \"vocab_size\": %d,\n"
            "  \"hidden_size\": %d,\n  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n"
            "  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n  \"intermediate_size\": %d,\n"
            "  \"max_position_embeddings\": %d,\n  \"rope_theta\": %.17g,\n  \"rms_norm_eps\": %.17g,\n"
            "  \"hidden_act\": \"silu\",\n  \"tie_word_embeddings\": %s,\n  \"attention_bias\": %s,\n"
            "  \"rope_scaling\": null,\n  \"use_sliding_window\": false,\n  \"torch_dtype\": \"%s\"\n}\n",
            strcmp(a->model_type, "qwen2") ? "LlamaForCausalLM" : "Qwen2ForCausalLM", a->model_type, a->vocab,
            a->channels, a->layers, a->heads, a->kv_heads, a->head_dim, a->intermediate, a->max_positions, a->rope_theta,
            a->rms_eps, a->tied ? "true" : "false", a->qkv_bias ? "true" : "false",
            dtype == ST_BF16 ? "bfloat16" : "float32");
    if (fclose(f) != 0) return err_sys(e, ERR_USAGE, errno, "%s: write failed", path);
    size_t nt = 3 + (size_t)a->layers * 12; /* embed, norm, lm_head; 12 per layer at most */
    st_out *t = calloc(nt, sizeof *t);
    char (*names)[128] = calloc(nt, sizeof *names);
    int rc = t && names ? 0 : err_set(e, ERR_INTERNAL, "out of memory");
    if (!rc) {
        save_ctx x = {t, 0, params, dtype, names};
        hf_arch_each_tensor(a, save_one, &x);
        const char *meta[] = {"format", "pt", "written_by", "tandem"};
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        rc = safetensors_write(path, t, x.n, meta, 2, e);
    }
    free(t);
    free(names);
    return rc;
}
