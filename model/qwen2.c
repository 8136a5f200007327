/* qwen2.c — the Qwen2 / Llama forward pass on the CPU, fp32; see qwen2.h. One function
 * per layer kind, shapes in comments, as model/cpu.c does for GPT-2. */
#include "model/qwen2.h"

#include <cblas.h>
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

/* out[N, C] = x / sqrt(mean(x^2) + eps) * w */
static void rmsnorm_forward(float *out, const float *x, const float *w, int N, int C, double eps) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C;
        double ss = 0;
        for (int c = 0; c < C; c++) ss += (double)xi[c] * xi[c];
        float r = (float)(1.0 / sqrt(ss / C + eps));
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

/* x[B*T, heads*D] rotated in place: position t = row % T; pairs (i, i + D/2) */
static void rope_forward(float *x, int B, int T, int heads, int D, double theta) {
    int half = D / 2;
#pragma omp parallel for
    for (int r = 0; r < B * T; r++) {
        int t = r % T;
        for (int h = 0; h < heads; h++) {
            float *v = x + ((size_t)r * heads + h) * D;
            for (int i = 0; i < half; i++) {
                /* as HF computes it: inv_freq in float32, the angle t * inv_freq in float32 */
                float inv = (float)(1.0 / pow(theta, (double)(2 * i) / D));
                float ang = (float)t * inv;
                float c = cosf(ang), s = sinf(ang);
                float a = v[i], b = v[i + half];
                v[i] = a * c - b * s;
                v[i + half] = b * c + a * s;
            }
        }
    }
}

/* out[B*T, H*D]: causal attention of query head h over key/value head h / (H / Hkv);
 * q [B*T, H*D], k and v [B*T, Hkv*D] */
static void attention_forward(float *out, const float *q, const float *k, const float *v, int B, int T, int H,
                              int Hkv, int D) {
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

/* g[N, F] = silu(g) * u */
static void swiglu_forward(float *g, const float *u, size_t n) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
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
        rmsnorm_forward(h, x, L->ln_in, (int)N, C, a->rms_eps);
        linear_forward(q, h, L->wq, L->bq, (int)N, C, (int)QD);
        linear_forward(k, h, L->wk, L->bk, (int)N, C, (int)KD);
        linear_forward(v, h, L->wv, L->bv, (int)N, C, (int)KD);
        rope_forward(q, B, T, H, D, a->rope_theta);
        rope_forward(k, B, T, Hkv, D, a->rope_theta);
        attention_forward(att, q, k, v, B, T, H, Hkv, D);
        /* x += att Wo^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, C, (int)QD, 1.0f, att, (int)QD, L->wo, (int)QD,
                    1.0f, x, C);
        rmsnorm_forward(h, x, L->ln_post, (int)N, C, a->rms_eps);
        linear_forward(g, h, L->wg, NULL, (int)N, C, F);
        linear_forward(u, h, L->wu, NULL, (int)N, C, F);
        swiglu_forward(g, u, N * (size_t)F);
        /* x += act Wd^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, C, F, 1.0f, g, F, L->wd, F, 1.0f, x, C);
    }
    if (!rc) {
        rmsnorm_forward(h, x, m->norm, (int)N, C, a->rms_eps);
        linear_forward(lg, h, m->head, NULL, (int)N, C, V);
        double total = 0;
#pragma omp parallel for reduction(+ : total)
        for (size_t r = 0; r < N; r++) {
            const float *row = lg + r * V;
            float mx = row[0];
            for (int c = 1; c < V; c++) mx = row[c] > mx ? row[c] : mx;
            double sum = 0;
            for (int c = 0; c < V; c++) sum += exp((double)row[c] - mx);
            uint32_t target = tokens[(r / T) * (T + 1) + r % T + 1];
            total += log(sum) + mx - row[target];
        }
        if (loss) *loss = total / (double)N;
    }
    free(x), free(h), free(q), free(k), free(v), free(att), free(g), free(u);
    if (!logits) free(lg);
    return rc;
}
