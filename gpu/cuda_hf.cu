/* cuda_hf.cu — the Llama / Qwen2 family (model/qwen2.h) on the CUDA backend, fp32: the
 * workspace's buffers and the forward and backward passes, layer by layer as
 * model/qwen2.c's tape computes them, with the matmuls of cuda.cu (cuBLASLt) and the
 * kernels of kernels_hf.cu (RMSNorm, RoPE, SwiGLU, grouped-query attention).
 *
 * Shapes (N = B*T rows, C channels, H query heads and Hkv key/value heads of D dims,
 * QD = H*D, KD = Hkv*D, F the MLP width, V the vocabulary):
 *   x = embed[inputs]                                                 [N, C]
 *   per layer: h1 = rmsnorm(x) w_in; q, k, v = h1 Wq^T + bq, ...     [N, QD], [N, KD]
 *              q, k rotated (RoPE); att = causal GQA softmax(q k^T / sqrt(D)) v  [N, QD]
 *              x_mid = x + att Wo^T; h2 = rmsnorm(x_mid) w_post
 *              act = silu(h2 Wg^T) * (h2 Wu^T)                        [N, F]
 *              x_next = x_mid + act Wd^T
 *   logits = rmsnorm(x_last) w_norm head^T                            [N, V] (ld Vp)
 * Every layer keeps what its backward reads (the CPU tape's list). Determinism is
 * kernels.h's: no atomics, fixed reduction orders, launches that depend on shapes only.
 * bf16 is not implemented for the family (cuda_create refuses it).
 */
#include "gpu/cuda_impl.h"

/* Offsets of one layer's tensors in a parameter-sized buffer (bias: SIZE_MAX when none). */
struct hf_off {
    size_t ln_in, wq, bq, wk, bk, wv, bv, wo, ln_post, wg, wu, wd;
};

/* One layer's activations (device). */
struct hf_tape {
    float *x_in, *h1, *r1, *q, *k, *v, *p, *att, *x_mid, *h2, *r2, *g, *u, *act;
};

struct cuda_hf {
    hf_arch a;
    size_t off_embed, off_norm, off_head;
    std::vector<hf_off> off;
    std::vector<hf_tape> tape;
    float *mem;                       /* every float buffer below, one allocation */
    float *x_last, *hfn, *rf;         /* [N, C], [N, C], [N] */
    float *dx, *dh, *dq, *dk, *dv, *datt, *dact, *dg, *du, *ds; /* backward scratch */
};

/* Float buffers of a workspace for N rows of T positions (B = N / T sequences). */
static size_t hf_floats(const hf_arch *a, size_t N, size_t B, size_t T, std::vector<size_t> *sizes) {
    size_t C = (size_t)a->channels, F = (size_t)a->intermediate, QD = (size_t)a->heads * a->head_dim;
    size_t KD = (size_t)a->kv_heads * a->head_dim, P = B * (size_t)a->heads * T * T;
    const size_t layer[14] = {N * C, N * C, N, N * QD, N * KD, N * KD, P, N * QD, N * C, N * C, N, N * F, N * F, N * F};
    const size_t rest[13] = {N * C, N * C, N, N * C, N * C, N * QD, N * KD, N * KD, N * QD, N * F, N * F, N * F, P};
    size_t total = 0;
    for (int l = 0; l < a->layers; l++)
        for (size_t x : layer) total += pad64(x), sizes ? sizes->push_back(x) : (void)0;
    for (size_t x : rest) total += pad64(x), sizes ? sizes->push_back(x) : (void)0;
    return total;
}

/* The partial sums (doubles) of the reductions over rows: column sums of the biases and
 * the RMSNorm weights' gradients. */
static size_t hf_part(const hf_arch *a, size_t N) {
    size_t widest = (size_t)a->channels;
    size_t QD = (size_t)a->heads * a->head_dim;
    if (QD > widest) widest = QD;
    return (N + GPU_ROW_CHUNK - 1) / GPU_ROW_CHUNK * widest;
}

/* Bytes of the shared buffers the family uses from model_ctx (logits, loss rows, batch,
 * partial sums, AdamW list, cuBLASLt workspace). */
static double hf_shared_bytes(const hf_arch *a, size_t N, size_t P, size_t nspans) {
    size_t Vp = pad64((size_t)a->vocab);
    return (double)LT_WORKSPACE + 4.0 * N * Vp + 3 * 4.0 * N + 8.0 * N + 8.0 * hf_part(a, N) +
           8.0 * ((P + GPU_NORM_CHUNK - 1) / GPU_NORM_CHUNK) + (double)nspans * sizeof(gpu_span) + 4.0 * (5 * N + 1);
}

double cuda_hf_workspace_bytes(const model_layout *lay, int max_B, int max_T, size_t nspans) {
    size_t N = (size_t)max_B * max_T;
    return 4.0 * (double)hf_floats(&lay->cfg.hf, N, (size_t)max_B, (size_t)max_T, NULL) +
           hf_shared_bytes(&lay->cfg.hf, N, lay->numel, nspans);
}

/* The offset of tensor `name` (SIZE_MAX when the layout has none). */
static size_t off_of(const model_layout *lay, const char *name) {
    const model_tensor *t = model_layout_find(lay, name);
    return t ? t->offset : SIZE_MAX;
}

int cuda_hf_alloc(model_ctx *ctx, size_t nspans, tdm_err *e) {
    const hf_arch *a = &ctx->lay.cfg.hf;
    size_t N = ctx->lN, B = (size_t)ctx->max_B, T = (size_t)ctx->max_T, P = ctx->lay.numel;
    cuda_hf *hf = new (std::nothrow) cuda_hf();
    if (!hf) return err_set(e, ERR_INTERNAL, "out of memory for the model workspace");
    ctx->hf = hf;
    hf->a = *a;
    hf->off_embed = off_of(&ctx->lay, "model.embed_tokens.weight");
    hf->off_norm = off_of(&ctx->lay, "model.norm.weight");
    hf->off_head = a->tied ? hf->off_embed : off_of(&ctx->lay, "lm_head.weight");
    static const char *const names[12] = {"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.q_proj.bias",
                                          "self_attn.k_proj.weight", "self_attn.k_proj.bias", "self_attn.v_proj.weight",
                                          "self_attn.v_proj.bias", "self_attn.o_proj.weight",
                                          "post_attention_layernorm.weight", "mlp.gate_proj.weight",
                                          "mlp.up_proj.weight", "mlp.down_proj.weight"};
    for (int l = 0; l < a->layers; l++) {
        size_t o[12];
        for (int k = 0; k < 12; k++) {
            char name[MODEL_NAME_MAX];
            snprintf(name, sizeof name, "model.layers.%d.%s", l, names[k]);
            o[k] = off_of(&ctx->lay, name);
        }
        hf->off.push_back(hf_off{o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7], o[8], o[9], o[10], o[11]});
    }
    std::vector<size_t> sizes;
    size_t total = hf_floats(a, N, B, T, &sizes);
    int rc = cuda_dev_alloc(ctx, (void **)&hf->mem, total * sizeof(float), "activations (Llama / Qwen2)", e);
    if (rc) return rc;
    float *at = hf->mem;
    size_t i = 0;
    auto take = [&]() { float *p = at; at += pad64(sizes[i++]); return p; };
    for (int l = 0; l < a->layers; l++) {
        hf_tape t;
        t.x_in = take(), t.h1 = take(), t.r1 = take(), t.q = take(), t.k = take(), t.v = take(), t.p = take();
        t.att = take(), t.x_mid = take(), t.h2 = take(), t.r2 = take(), t.g = take(), t.u = take(), t.act = take();
        hf->tape.push_back(t);
    }
    hf->x_last = take(), hf->hfn = take(), hf->rf = take(), hf->dx = take(), hf->dh = take(), hf->dq = take();
    hf->dk = take(), hf->dv = take(), hf->datt = take(), hf->dact = take(), hf->dg = take(), hf->du = take();
    hf->ds = take();
    /* the shared buffers, as ws_plan lists them for GPT-2 */
    size_t nnorm = (P + GPU_NORM_CHUNK - 1) / GPU_NORM_CHUNK;
    struct {
        void **p;
        size_t bytes;
        const char *what;
    } shared[] = {
        {&ctx->lt_ws, LT_WORKSPACE, "the cuBLASLt workspace"},
        {(void **)&ctx->logits, N * (size_t)ctx->Vp * 4, "the logits"},
        {(void **)&ctx->row_max, N * 4, "the loss rows"},
        {(void **)&ctx->row_inv, N * 4, "the loss rows"},
        {(void **)&ctx->row_g, N * 4, "the loss rows"},
        {(void **)&ctx->row_loss, N * 8, "the loss rows"},
        {(void **)&ctx->part, hf_part(a, N) * 8, "partial sums"},
        {(void **)&ctx->norm_part, nnorm * 8, "partial sums"},
        {(void **)&ctx->spans, nspans * sizeof(gpu_span), "the AdamW work list"},
        {(void **)&ctx->d_idx, (5 * N + 1) * 4, "the batch"},
    };
    for (auto &s : shared)
        if ((rc = cuda_dev_alloc(ctx, s.p, s.bytes, s.what, e))) return rc;
    ctx->dlogits = ctx->logits; /* fp32: in place */
    return 0;
}

void cuda_hf_free(model_ctx *ctx) {
    if (!ctx->hf) return;
    cuda_dev_free(ctx, ctx->hf->mem);
    delete ctx->hf;
    ctx->hf = NULL;
}

/* x[N, C] = embed[inputs] */
__global__ void hf_embed_kernel(float *x, const int32_t *inputs, const float *embed, int N, int C) {
    size_t n = (size_t)N * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = embed[(size_t)inputs[i / C] * C + i % C];
}

/* The head's rows in the logits matmul: Vp when the parameters hold Vp rows from the
 * head on (the extra logits are never read and their dlogits are zero), else V. */
static int64_t hf_head_rows(const model_ctx *ctx) {
    const cuda_hf *hf = ctx->hf;
    return hf->off_head + (size_t)ctx->Vp * hf->a.channels <= ctx->lay.numel ? ctx->Vp : hf->a.vocab;
}

int cuda_hf_forward(model_ctx *ctx, const float *params, tdm_err *e) {
    cuda_hf *hf = ctx->hf;
    const hf_arch *a = &hf->a;
    const int B = ctx->B, T = ctx->T, N = B * T, C = a->channels, H = a->heads, Hkv = a->kv_heads, D = a->head_dim;
    const int QD = H * D, KD = Hkv * D, F = a->intermediate, L = a->layers, V = a->vocab;
    const cudaDataType_t R = CUDA_R_32F;
    cudaStream_t s = ctx->stream;
    const int32_t *inputs = ctx->d_idx, *targets = ctx->d_idx + N;
    int rc;
#define W(field) (params + hf->off[l].field)
#define BIAS(field) (hf->off[l].field == SIZE_MAX ? NULL : params + hf->off[l].field)
    {
        size_t n = (size_t)N * C, blocks = (n + 255) / 256;
        GPU_LAUNCH(hf_embed_kernel, (unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, s, hf->tape[0].x_in, inputs,
                   params + hf->off_embed, N, C);
        LAUNCH_TRY(cudaGetLastError(), e);
    }
    for (int l = 0; l < L; l++) {
        hf_tape &t = hf->tape[l];
        float *next = l + 1 < L ? hf->tape[l + 1].x_in : hf->x_last;
        LAUNCH_TRY(gpu_rmsnorm_forward(t.h1, t.r1, t.x_in, W(ln_in), N, C, a->rms_eps, s), e);
        if ((rc = cuda_mm_forward(ctx, t.q, R, t.h1, W(wq), BIAS(bq), NULL, N, C, QD, R, e)) ||
            (rc = cuda_mm_forward(ctx, t.k, R, t.h1, W(wk), BIAS(bk), NULL, N, C, KD, R, e)) ||
            (rc = cuda_mm_forward(ctx, t.v, R, t.h1, W(wv), BIAS(bv), NULL, N, C, KD, R, e)))
            return rc;
        LAUNCH_TRY(gpu_rope_rotate(t.q, B, T, H, D, a->rope_theta, 1.0f, s), e);
        LAUNCH_TRY(gpu_rope_rotate(t.k, B, T, Hkv, D, a->rope_theta, 1.0f, s), e);
        LAUNCH_TRY(gpu_gqa_attention_forward(t.att, t.p, t.q, t.k, t.v, B, T, H, Hkv, D, s), e);
        if ((rc = cuda_mm_forward(ctx, t.x_mid, R, t.att, W(wo), NULL, t.x_in, N, QD, C, R, e))) return rc;
        LAUNCH_TRY(gpu_rmsnorm_forward(t.h2, t.r2, t.x_mid, W(ln_post), N, C, a->rms_eps, s), e);
        if ((rc = cuda_mm_forward(ctx, t.g, R, t.h2, W(wg), NULL, NULL, N, C, F, R, e)) ||
            (rc = cuda_mm_forward(ctx, t.u, R, t.h2, W(wu), NULL, NULL, N, C, F, R, e)))
            return rc;
        LAUNCH_TRY(gpu_swiglu_forward(t.act, t.g, t.u, (size_t)N * F, s), e);
        if ((rc = cuda_mm_forward(ctx, next, R, t.act, W(wd), NULL, t.x_mid, N, F, C, R, e))) return rc;
    }
#undef W
#undef BIAS
    LAUNCH_TRY(gpu_rmsnorm_forward(hf->hfn, hf->rf, hf->x_last, params + hf->off_norm, N, C, a->rms_eps, s), e);
    /* logits[N, V] (ld Vp) = hfn head^T */
    if ((rc = cuda_lt_matmul(ctx, true, false, hf_head_rows(ctx), N, C, params + hf->off_head, C, hf->hfn, C, R,
                             ctx->logits, ctx->Vp, R, NULL, NULL, e)))
        return rc;
    LAUNCH_TRY(gpu_crossentropy_forward(ctx->row_loss, ctx->row_max, ctx->row_inv, ctx->logits, (size_t)ctx->Vp,
                                        targets, N, V, s), e);
    return 0;
}

/* dh[N, C] += dout[N, OC] W[OC, C] */
static int mm_dinp_add(model_ctx *ctx, float *dh, const float *dout, const float *W, int N, int C, int OC,
                       tdm_err *e) {
    return cuda_lt_matmul(ctx, false, false, C, N, OC, W, C, dout, OC, CUDA_R_32F, dh, C, CUDA_R_32F, dh, NULL, e);
}

int cuda_hf_backward(model_ctx *ctx, const float *params, float *grads, tdm_err *e) {
    cuda_hf *hf = ctx->hf;
    const hf_arch *a = &hf->a;
    const int B = ctx->B, T = ctx->T, N = B * T, C = a->channels, H = a->heads, Hkv = a->kv_heads, D = a->head_dim;
    const int QD = H * D, KD = Hkv * D, F = a->intermediate, L = a->layers, V = a->vocab;
    const cudaDataType_t R = CUDA_R_32F;
    cudaStream_t s = ctx->stream;
    const int32_t *targets = ctx->d_idx + N, *pos = ctx->d_idx + 2 * (size_t)N;
    const int32_t *uniq = ctx->d_idx + 3 * (size_t)N, *start = ctx->d_idx + 4 * (size_t)N;
    double *part = ctx->part;
    int rc;
    /* the RMSNorm weights' and the embedding's gradients are added into: start from zero
     * (the matmuls' and column sums' overwrite theirs) */
    CUDA_TRY(cudaMemsetAsync(grads, 0, ctx->lay.numel * sizeof(float), s), e);
    /* dlogits = g_row (softmax - onehot(target)), in place of the logits */
    LAUNCH_TRY(gpu_crossentropy_backward<float>(ctx->logits, (size_t)ctx->Vp, ctx->logits, (size_t)ctx->Vp,
                                                ctx->row_max, ctx->row_inv, ctx->row_g, targets, N, V, s), e);
    /* head: dh = dlogits head; d(head) = dlogits^T hfn (the embedding's first part when tied) */
    if ((rc = cuda_lt_matmul(ctx, false, false, C, N, hf_head_rows(ctx), params + hf->off_head, C, ctx->logits,
                             ctx->Vp, R, hf->dh, C, R, NULL, NULL, e)) ||
        (rc = cuda_mm_dweight(ctx, grads + hf->off_head, ctx->logits, ctx->Vp, hf->hfn, N, C, V, R, e)))
        return rc;
    CUDA_TRY(cudaMemsetAsync(hf->dx, 0, (size_t)N * C * sizeof(float), s), e);
    LAUNCH_TRY(gpu_rmsnorm_backward(hf->dx, grads + hf->off_norm, part, hf->dh, hf->x_last, hf->rf,
                                    params + hf->off_norm, N, C, s), e);
#define W(field) (params + hf->off[l].field)
#define G(field) (grads + hf->off[l].field)
    for (int l = L - 1; l >= 0; l--) {
        hf_tape &t = hf->tape[l];
        /* x_next = x_mid + act Wd^T: dx flows to x_mid as is */
        if ((rc = cuda_mm_dinp(ctx, hf->dact, R, hf->dx, W(wd), N, F, C, R, e)) ||
            (rc = cuda_mm_dweight(ctx, G(wd), hf->dx, C, t.act, N, F, C, R, e)))
            return rc;
        LAUNCH_TRY(gpu_swiglu_backward(hf->dg, hf->du, hf->dact, t.g, t.u, (size_t)N * F, s), e);
        if ((rc = cuda_mm_dinp(ctx, hf->dh, R, hf->dg, W(wg), N, C, F, R, e)) ||
            (rc = mm_dinp_add(ctx, hf->dh, hf->du, W(wu), N, C, F, e)) ||
            (rc = cuda_mm_dweight(ctx, G(wg), hf->dg, F, t.h2, N, C, F, R, e)) ||
            (rc = cuda_mm_dweight(ctx, G(wu), hf->du, F, t.h2, N, C, F, R, e)))
            return rc;
        LAUNCH_TRY(gpu_rmsnorm_backward(hf->dx, G(ln_post), part, hf->dh, t.x_mid, t.r2, W(ln_post), N, C, s), e);
        /* x_mid = x_in + att Wo^T */
        if ((rc = cuda_mm_dinp(ctx, hf->datt, R, hf->dx, W(wo), N, QD, C, R, e)) ||
            (rc = cuda_mm_dweight(ctx, G(wo), hf->dx, C, t.att, N, QD, C, R, e)))
            return rc;
        LAUNCH_TRY(gpu_gqa_attention_backward(hf->dq, hf->dk, hf->dv, hf->ds, hf->datt, t.q, t.k, t.v, t.p, B, T, H,
                                              Hkv, D, s), e);
        LAUNCH_TRY(gpu_rope_rotate(hf->dq, B, T, H, D, a->rope_theta, -1.0f, s), e);
        LAUNCH_TRY(gpu_rope_rotate(hf->dk, B, T, Hkv, D, a->rope_theta, -1.0f, s), e);
        if ((rc = cuda_mm_dinp(ctx, hf->dh, R, hf->dq, W(wq), N, C, QD, R, e)) ||
            (rc = mm_dinp_add(ctx, hf->dh, hf->dk, W(wk), N, C, KD, e)) ||
            (rc = mm_dinp_add(ctx, hf->dh, hf->dv, W(wv), N, C, KD, e)) ||
            (rc = cuda_mm_dweight(ctx, G(wq), hf->dq, QD, t.h1, N, C, QD, R, e)) ||
            (rc = cuda_mm_dweight(ctx, G(wk), hf->dk, KD, t.h1, N, C, KD, R, e)) ||
            (rc = cuda_mm_dweight(ctx, G(wv), hf->dv, KD, t.h1, N, C, KD, R, e)))
            return rc;
        if (hf->off[l].bq != SIZE_MAX) {
            LAUNCH_TRY(gpu_column_sum<float>(G(bq), part, hf->dq, N, QD, s), e);
            LAUNCH_TRY(gpu_column_sum<float>(G(bk), part, hf->dk, N, KD, s), e);
            LAUNCH_TRY(gpu_column_sum<float>(G(bv), part, hf->dv, N, KD, s), e);
        }
        LAUNCH_TRY(gpu_rmsnorm_backward(hf->dx, G(ln_in), part, hf->dh, t.x_in, t.r1, W(ln_in), N, C, s), e);
    }
#undef W
#undef G
    /* x = embed[inputs]: the rows of each token added in row order */
    LAUNCH_TRY(gpu_encoder_backward_wte(grads + hf->off_embed, hf->dx, uniq, start, pos, ctx->nuniq, C, s), e);
    return 0;
}
