/* qwen2.c — the Qwen2 / Llama forward pass on the CPU, fp32; see qwen2.h. One function
 * per layer kind, shapes in comments, as model/cpu.c does for GPT-2. */
#include "model/qwen2.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "model/safetensors.h"
#include "data/shard.h"

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
static void rope_rotate(float *x, int B, int T, int heads, int D, double theta, float sign, float *scratch,
                        size_t stride) {
    int half = D / 2;
#pragma omp parallel
    {
        float *cs = scratch + (size_t)omp_get_thread_num() * stride; /* cos in [0, half), sign * sin after */
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
    }
}

/* out[B*T, H*D]: causal attention of query head h over key/value head h / (H / Hkv);
 * q [B*T, H*D], k and v [B*T, Hkv*D]; the softmax weights into probs when not NULL */
static void attention_forward(float *out, float *probs, const float *q, const float *k, const float *v, int B,
                              int T, int H, int Hkv, int D, float *scratch, size_t stride) {
    int group = H / Hkv;
    float scale = (float)(1.0 / sqrt((double)D));
#pragma omp parallel
    {
        float *p = scratch + (size_t)omp_get_thread_num() * stride;
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
    }
}

/* act[N, F] = silu(g) * u (act may be g) */
static void swiglu_forward(float *act, const float *g, const float *u, size_t n) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) act[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* ---- backward layers ------------------------------------------------------------------ */

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
                               const float *v, const float *probs, int B, int T, int H, int Hkv, int D,
                               float *scratch, size_t stride) {
    int group = H / Hkv;
    float scale = (float)(1.0 / sqrt((double)D));
    memset(dk, 0, (size_t)B * T * Hkv * D * sizeof *dk);
    memset(dv, 0, (size_t)B * T * Hkv * D * sizeof *dv);
#pragma omp parallel
    {
        float *dp = scratch + (size_t)omp_get_thread_num() * stride;
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
    }
}

/* ---- the tape: one workspace for a forward pass and its backward ---------------------- */

/* What the backward pass needs of one layer's forward. */
typedef struct layer_tape {
    float *x_in, *h1, *r1, *q, *k, *v, *p, *att, *x_mid, *h2, *r2, *g, *u, *act;
} layer_tape;

struct qwen2_tape {
    hf_arch a;
    int max_B, max_T;
    int B, T, have_forward;     /* the last forward's shape; whether backward may follow */
    float *mem;                 /* every float array below, one allocation */
    layer_tape *lt;             /* [layers], arrays sized for max_B x max_T */
    float *x_last, *hf, *rf;    /* [N, C], [N, C], [N]: the final norm's input, output, 1/rms */
    float *logits;              /* [N, V]; the backward turns them into dlogits */
    float *dx, *dh, *dq, *dk, *dv, *datt, *dg, *du; /* backward scratch */
    uint32_t *tokens;           /* [max_B][max_T + 1]: the last forward's */
    qwen2_layer *wl, *gl;       /* per-layer pointers into params and into grad */
    float *scratch;             /* [slots][stride]: a row of one thread (RoPE angles, scores) */
    int slots;                  /* threads it has room for */
    size_t stride;              /* max(head_dim, max_T) */
};

/* The per-thread rows for a parallel region of up to omp_get_max_threads() threads (grown
 * when the thread count rose since the tape was made); NULL with e set when out of memory. */
static float *tape_scratch(qwen2_tape *t, tdm_err *e) {
    int want = omp_get_max_threads();
    if (want > t->slots) {
        float *g = realloc(t->scratch, (size_t)want * t->stride * sizeof *g);
        if (!g) {
            err_set(e, ERR_INTERNAL, "out of memory for %d threads' scratch", want);
            return NULL;
        }
        t->scratch = g, t->slots = want;
    }
    return t->scratch;
}

/* Floats of the tape for batches up to B x T. */
static size_t tape_floats(const hf_arch *a, int B, int T) {
    size_t N = (size_t)B * T, C = (size_t)a->channels, F = (size_t)a->intermediate;
    size_t QD = (size_t)a->heads * a->head_dim, KD = (size_t)a->kv_heads * a->head_dim;
    size_t P = (size_t)B * a->heads * T * T;
    size_t per = N * (4 * C + 2 + 2 * QD + 2 * KD + 3 * F) + P;
    size_t scratch = N * (2 * C + 2 * QD + 2 * KD + 2 * F);
    return (size_t)a->layers * per + N * (2 * C + 1) + N * (size_t)a->vocab + scratch;
}

double qwen2_tape_bytes(const hf_arch *a, int max_B, int max_T) {
    double stride = a->head_dim > max_T ? a->head_dim : max_T; /* the threads' scratch rows */
    return 4.0 * (double)tape_floats(a, max_B, max_T) + 4.0 * max_B * (max_T + 1.0) +
           2.0 * a->layers * sizeof(qwen2_layer) + a->layers * sizeof(layer_tape) +
           4.0 * omp_get_max_threads() * stride;
}

void qwen2_tape_free(qwen2_tape *t) {
    if (!t) return;
    free(t->mem), free(t->lt), free(t->tokens), free(t->wl), free(t->gl), free(t->scratch);
    free(t);
}

qwen2_tape *qwen2_tape_create(const hf_arch *a, int max_B, int max_T, tdm_err *e) {
    if (max_B < 1 || max_T < 1 || max_T > a->max_positions) {
        err_set(e, ERR_USAGE, "a workspace for batches of %d x %d tokens (at most %d positions)", max_B, max_T,
                a->max_positions);
        return NULL;
    }
    qwen2_tape *t = calloc(1, sizeof *t);
    size_t total = tape_floats(a, max_B, max_T);
    if (t) {
        t->a = *a, t->max_B = max_B, t->max_T = max_T;
        t->mem = malloc(total * sizeof *t->mem);
        t->lt = calloc((size_t)a->layers, sizeof *t->lt);
        t->tokens = calloc((size_t)max_B * (max_T + 1), sizeof *t->tokens);
        t->wl = calloc((size_t)a->layers, sizeof *t->wl);
        t->gl = calloc((size_t)a->layers, sizeof *t->gl);
        t->stride = (size_t)(a->head_dim > max_T ? a->head_dim : max_T);
        t->slots = omp_get_max_threads();
        t->scratch = malloc((size_t)t->slots * t->stride * sizeof *t->scratch);
    }
    if (!t || !t->mem || !t->lt || !t->tokens || !t->wl || !t->gl || !t->scratch) {
        qwen2_tape_free(t);
        err_set(e, ERR_INTERNAL, "out of memory for the activations (%zu floats)", total);
        return NULL;
    }
    size_t N = (size_t)max_B * max_T, C = (size_t)a->channels, F = (size_t)a->intermediate;
    size_t QD = (size_t)a->heads * a->head_dim, KD = (size_t)a->kv_heads * a->head_dim;
    size_t P = (size_t)max_B * a->heads * max_T * max_T;
    float *at = t->mem;
#define TAKE(n) (at += (n), at - (n))
    for (int l = 0; l < a->layers; l++) {
        layer_tape *x = &t->lt[l];
        x->x_in = TAKE(N * C), x->h1 = TAKE(N * C), x->r1 = TAKE(N), x->q = TAKE(N * QD), x->k = TAKE(N * KD);
        x->v = TAKE(N * KD), x->p = TAKE(P), x->att = TAKE(N * QD), x->x_mid = TAKE(N * C), x->h2 = TAKE(N * C);
        x->r2 = TAKE(N), x->g = TAKE(N * F), x->u = TAKE(N * F), x->act = TAKE(N * F);
    }
    t->x_last = TAKE(N * C), t->hf = TAKE(N * C), t->rf = TAKE(N), t->logits = TAKE(N * (size_t)a->vocab);
    t->dx = TAKE(N * C), t->dh = TAKE(N * C), t->dq = TAKE(N * QD), t->datt = TAKE(N * QD);
    t->dk = TAKE(N * KD), t->dv = TAKE(N * KD), t->dg = TAKE(N * F), t->du = TAKE(N * F);
#undef TAKE
    return t;
}

/* m: a view of `buf` (laid out as the weights) with the tape's per-layer array `layers` */
static void view(const hf_arch *a, const float *buf, qwen2_layer *layers, qwen2_model *m) {
    memset(m, 0, sizeof *m);
    m->a = *a;
    m->layer = layers;
    point_ctx x = {m, buf};
    hf_arch_each_tensor(a, point_one, &x);
    if (a->tied) m->head = m->embed;
}

/* ERR_USAGE for a batch the tape cannot take or a token outside the vocabulary */
static int check_batch(const qwen2_tape *t, const uint32_t *tokens, int B, int T, tdm_err *e) {
    if (B < 1 || T < 1 || B > t->max_B || T > t->max_T)
        return err_set(e, ERR_USAGE, "a batch of %d x %d tokens (the workspace takes %d x %d, at most %d positions)",
                       B, T, t->max_B, t->max_T, t->a.max_positions);
    for (int b = 0; b < B; b++)
        for (int i = 0; i <= T; i++)
            if (tokens[(size_t)b * (T + 1) + i] >= (uint32_t)t->a.vocab)
                return err_set(e, ERR_USAGE, "row %d, position %d: token %u >= vocab %d", b, i,
                               tokens[(size_t)b * (T + 1) + i], t->a.vocab);
    return 0;
}

int qwen2_tape_forward(qwen2_tape *t, const float *params, const uint32_t *tokens, int B, int T, double *row_loss,
                       tdm_err *e) {
    const hf_arch *a = &t->a;
    int C = a->channels, H = a->heads, Hkv = a->kv_heads, D = a->head_dim, F = a->intermediate, V = a->vocab;
    int L = a->layers;
    int rc = check_batch(t, tokens, B, T, e);
    if (rc) return rc;
    float *sc = tape_scratch(t, e);
    if (!sc) return e->code;
    size_t st = t->stride;
    t->B = B, t->T = T, t->have_forward = 0;
    memcpy(t->tokens, tokens, (size_t)B * (T + 1) * sizeof *tokens);
    qwen2_model m;
    view(a, params, t->wl, &m);
    size_t N = (size_t)B * T, QD = (size_t)H * D, KD = (size_t)Hkv * D;
    float *x = t->lt[0].x_in;
    for (size_t r = 0; r < N; r++) /* x = embed[inputs] */
        memcpy(x + r * C, m.embed + (size_t)tokens[(r / T) * (T + 1) + r % T] * C, (size_t)C * sizeof *x);
    for (int l = 0; l < L; l++) {
        const qwen2_layer *W = &m.layer[l];
        layer_tape *p = &t->lt[l];
        rmsnorm_forward(p->h1, p->r1, p->x_in, W->ln_in, (int)N, C, a->rms_eps);
        linear_forward(p->q, p->h1, W->wq, W->bq, (int)N, C, (int)QD);
        linear_forward(p->k, p->h1, W->wk, W->bk, (int)N, C, (int)KD);
        linear_forward(p->v, p->h1, W->wv, W->bv, (int)N, C, (int)KD);
        rope_rotate(p->q, B, T, H, D, a->rope_theta, 1.0f, sc, st);
        rope_rotate(p->k, B, T, Hkv, D, a->rope_theta, 1.0f, sc, st);
        attention_forward(p->att, p->p, p->q, p->k, p->v, B, T, H, Hkv, D, sc, st);
        /* x_mid = x_in + att Wo^T */
        memcpy(p->x_mid, p->x_in, N * C * sizeof *x);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, C, (int)QD, 1.0f, p->att, (int)QD, W->wo, (int)QD,
                    1.0f, p->x_mid, C);
        rmsnorm_forward(p->h2, p->r2, p->x_mid, W->ln_post, (int)N, C, a->rms_eps);
        linear_forward(p->g, p->h2, W->wg, NULL, (int)N, C, F);
        linear_forward(p->u, p->h2, W->wu, NULL, (int)N, C, F);
        swiglu_forward(p->act, p->g, p->u, N * (size_t)F);
        /* next = x_mid + act Wd^T */
        float *next = l + 1 < L ? t->lt[l + 1].x_in : t->x_last;
        memcpy(next, p->x_mid, N * C * sizeof *x);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, C, F, 1.0f, p->act, F, W->wd, F, 1.0f, next, C);
    }
    rmsnorm_forward(t->hf, t->rf, t->x_last, m.norm, (int)N, C, a->rms_eps);
    linear_forward(t->logits, t->hf, m.head, NULL, (int)N, C, V);
    /* each row's cross-entropy against its next token, rows in parallel */
#pragma omp parallel for
    for (size_t r = 0; r < N; r++) {
        const float *row = t->logits + r * V;
        float mx = row[0];
        for (int c = 1; c < V; c++) mx = row[c] > mx ? row[c] : mx;
        double sum = 0;
        for (int c = 0; c < V; c++) sum += exp((double)row[c] - mx);
        row_loss[r] = log(sum) + mx - row[tokens[(r / T) * (T + 1) + r % T + 1]];
    }
    t->have_forward = 1;
    return 0;
}

const float *qwen2_tape_logits(const qwen2_tape *t) { return t->have_forward ? t->logits : NULL; }

int qwen2_tape_backward(qwen2_tape *t, const float *params, const double *row_scale, float *grad, tdm_err *e) {
    if (!t->have_forward) return err_set(e, ERR_INTERNAL, "qwen2 backward called without a forward pass");
    float *sc = tape_scratch(t, e);
    if (!sc) return e->code;
    size_t st = t->stride;
    t->have_forward = 0; /* the logits become dlogits below */
    const hf_arch *a = &t->a;
    int B = t->B, T = t->T, C = a->channels, H = a->heads, Hkv = a->kv_heads, D = a->head_dim;
    int F = a->intermediate, V = a->vocab, L = a->layers;
    size_t N = (size_t)B * T, QD = (size_t)H * D, KD = (size_t)Hkv * D;
    const uint32_t *tokens = t->tokens;
    qwen2_model m, gv;
    view(a, params, t->wl, &m);
    memset(grad, 0, (size_t)hf_arch_params(a) * sizeof *grad);
    view(a, grad, t->gl, &gv);
    /* dlogits = scale_r (softmax - onehot), the gradient of sum_r scale_r * loss_r */
#pragma omp parallel for
    for (size_t r = 0; r < N; r++) {
        float *row = t->logits + r * V;
        float mx = row[0];
        for (int c = 1; c < V; c++) mx = row[c] > mx ? row[c] : mx;
        double sum = 0;
        for (int c = 0; c < V; c++) sum += exp((double)row[c] - mx);
        double s = row_scale[r];
        for (int c = 0; c < V; c++) row[c] = (float)(exp((double)row[c] - mx) / sum * s);
        row[tokens[(r / T) * (T + 1) + r % T + 1]] -= (float)s;
    }
    float *dx = t->dx, *dh = t->dh, *dq = t->dq, *dk = t->dk, *dv = t->dv, *datt = t->datt, *dg = t->dg, *du = t->du;
    /* logits = hf head^T */
    linear_backward(dh, 0.0f, (float *)gv.head, NULL, t->logits, t->hf, m.head, (int)N, C, V);
    memset(dx, 0, N * C * sizeof *dx);
    rmsnorm_backward(dx, (float *)gv.norm, dh, t->x_last, t->rf, m.norm, (int)N, C);
    for (int l = L - 1; l >= 0; l--) {
        const qwen2_layer *W = &m.layer[l];
        qwen2_layer *G = &gv.layer[l];
        layer_tape *p = &t->lt[l];
        /* next = x_mid + act Wd^T: dx flows to x_mid as is; dact = dx Wd */
        linear_backward(dg, 0.0f, (float *)G->wd, NULL, dx, p->act, W->wd, (int)N, F, C);
#pragma omp parallel for
        for (size_t i = 0; i < N * (size_t)F; i++) { /* act = silu(g) * u */
            float sg = 1.0f / (1.0f + expf(-p->g[i]));
            float dact = dg[i];
            du[i] = dact * p->g[i] * sg;
            dg[i] = dact * p->u[i] * sg * (1.0f + p->g[i] * (1.0f - sg));
        }
        linear_backward(dh, 0.0f, (float *)G->wg, NULL, dg, p->h2, W->wg, (int)N, C, F);
        linear_backward(dh, 1.0f, (float *)G->wu, NULL, du, p->h2, W->wu, (int)N, C, F);
        rmsnorm_backward(dx, (float *)G->ln_post, dh, p->x_mid, p->r2, W->ln_post, (int)N, C);
        /* x_mid = x_in + att Wo^T */
        linear_backward(datt, 0.0f, (float *)G->wo, NULL, dx, p->att, W->wo, (int)N, (int)QD, C);
        attention_backward(dq, dk, dv, datt, p->q, p->k, p->v, p->p, B, T, H, Hkv, D, sc, st);
        rope_rotate(dq, B, T, H, D, a->rope_theta, -1.0f, sc, st);
        rope_rotate(dk, B, T, Hkv, D, a->rope_theta, -1.0f, sc, st);
        linear_backward(dh, 0.0f, (float *)G->wq, (float *)G->bq, dq, p->h1, W->wq, (int)N, C, (int)QD);
        linear_backward(dh, 1.0f, (float *)G->wk, (float *)G->bk, dk, p->h1, W->wk, (int)N, C, (int)KD);
        linear_backward(dh, 1.0f, (float *)G->wv, (float *)G->bv, dv, p->h1, W->wv, (int)N, C, (int)KD);
        rmsnorm_backward(dx, (float *)G->ln_in, dh, p->x_in, p->r1, W->ln_in, (int)N, C);
    }
    for (size_t r = 0; r < N; r++) { /* x = embed[inputs], rows in order */
        float *de = (float *)gv.embed + (size_t)tokens[(r / T) * (T + 1) + r % T] * C;
        for (int c = 0; c < C; c++) de[c] += dx[r * C + c];
    }
    return 0;
}

/* ---- the reference entry points (one batch, the mean over every target) ---------------- */

/* A tape for one B x T pass of m's forward; the row losses into a fresh array. */
static int one_pass(const qwen2_model *m, const uint32_t *tokens, int B, int T, qwen2_tape **tp, double **rows,
                    double *loss, tdm_err *e) {
    *rows = NULL;
    if (B < 1 || T < 1 || T > m->a.max_positions)
        return err_set(e, ERR_USAGE, "a batch of %d x %d tokens (at most %d positions)", B, T, m->a.max_positions);
    if (!(*tp = qwen2_tape_create(&m->a, B, T, e))) return e->code;
    size_t N = (size_t)B * T;
    if (!(*rows = malloc(N * sizeof **rows))) return err_set(e, ERR_INTERNAL, "out of memory");
    int rc = qwen2_tape_forward(*tp, m->params, tokens, B, T, *rows, e);
    double total = 0;
    for (size_t r = 0; !rc && r < N; r++) total += (*rows)[r]; /* row order: thread-independent */
    if (!rc && loss) *loss = total / (double)N;
    return rc;
}

int qwen2_forward(const qwen2_model *m, const uint32_t *tokens, int B, int T, float *logits, double *loss,
                  tdm_err *e) {
    qwen2_tape *t = NULL;
    double *rows = NULL;
    int rc = one_pass(m, tokens, B, T, &t, &rows, loss, e);
    if (!rc && logits) memcpy(logits, t->logits, (size_t)B * T * m->a.vocab * sizeof *logits);
    free(rows);
    qwen2_tape_free(t);
    return rc;
}

int qwen2_forward_backward(const qwen2_model *m, const uint32_t *tokens, int B, int T, float *grad, double *loss,
                           tdm_err *e) {
    qwen2_tape *t = NULL;
    double *rows = NULL;
    int rc = one_pass(m, tokens, B, T, &t, &rows, loss, e);
    size_t N = (size_t)B * T;
    for (size_t r = 0; !rc && r < N; r++) rows[r] = 1.0 / (double)N; /* d(mean)/d(row loss) */
    if (!rc) rc = qwen2_tape_backward(t, m->params, rows, grad, e);
    free(rows);
    qwen2_tape_free(t);
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

int qwen2_save(const qwen2_model *m, const float *params, const char *dir, st_dtype dtype, const char *ids_from,
               tdm_err *e) {
    const hf_arch *a = &m->a;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return err_sys(e, ERR_USAGE, errno, "%s: cannot create", dir);
    char path[4200], text[8192], ids[3200];
    hf_token_ids_json(ids_from, a->vocab, ids, sizeof ids);
    snprintf(text, sizeof text,
            "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n%s  \"vocab_size\": %d,\n"
            "  \"hidden_size\": %d,\n  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n"
            "  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n  \"intermediate_size\": %d,\n"
            "  \"max_position_embeddings\": %d,\n  \"rope_theta\": %.17g,\n  \"rms_norm_eps\": %.17g,\n"
            "  \"hidden_act\": \"silu\",\n  \"tie_word_embeddings\": %s,\n  \"attention_bias\": %s,\n"
            "  \"rope_scaling\": null,\n  \"use_sliding_window\": false,\n  \"torch_dtype\": \"%s\"\n}\n",
            strcmp(a->model_type, "qwen2") ? "LlamaForCausalLM" : "Qwen2ForCausalLM", a->model_type, ids, a->vocab,
            a->channels, a->layers, a->heads, a->kv_heads, a->head_dim, a->intermediate, a->max_positions, a->rope_theta,
            a->rms_eps, a->tied ? "true" : "false", a->qkv_bias ? "true" : "false",
            dtype == ST_BF16 ? "bfloat16" : "float32");
    size_t nt = 3 + (size_t)a->layers * 12; /* embed, norm, lm_head; 12 per layer at most */
    st_out *t = calloc(nt, sizeof *t);
    char (*names)[128] = calloc(nt, sizeof *names);
    int rc = t && names ? 0 : err_set(e, ERR_INTERNAL, "out of memory");
    /* config.json before the weights, which come last (gpt2_save says why) */
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (!rc) rc = shard_atomic_write(path, text, strlen(text), NULL, 0, e);
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
