/* cuda_hf.cu — the Llama / Qwen2 family (model/qwen2.h) on the CUDA backend, in fp32 and
 * bf16: the workspace's buffers and the forward and backward passes, layer by layer as
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
 *
 * fp32 follows the CPU operation for operation (kernels_hf.cu's attention keeps the
 * probabilities, O(T^2) per layer: a reference, not a fast path). bf16 is the fast path,
 * GPT-2's scheme (cuda.cu): matmul operands in bf16 from a bf16 copy of the parameters made
 * at each forward; q | k | v packed in one row of (QD + 2 KD) so that the attention is
 * the flash-style kernel of kernels_attention.cu (grouped-query heads, O(T) memory) or
 * cuDNN's fused attention when model.attention chose it; gate_proj and up_proj (adjacent
 * in the layout) as one matmul into packed g | u rows; the residual stream, RMSNorm
 * statistics, logits and parameter gradients stay float.
 */
#include "gpu/cuda_impl.h"

/* Offsets of one layer's tensors in a parameter-sized buffer (bias: SIZE_MAX when none). */
struct hf_off {
    size_t ln_in, wq, bq, wk, bk, wv, bv, wo, ln_post, wg, wu, wd;
};

/* One layer's activations (device), fp32. */
struct hf_tape {
    float *x_in, *h1, *r1, *q, *k, *v, *p, *att, *x_mid, *h2, *r2, *g, *u, *act;
};

/* One layer's activations, bf16: float where they feed the residual stream or RMSNorm,
 * bf16 where a matmul or the attention reads them; qkv[N, QD + 2 KD] and gu[N, 2F] packed,
 * lse[B, H, T]. */
struct hf_tape16 {
    float *x_in, *r1, *x_mid, *r2, *lse;
    bf16 *h1, *qkv, *att, *h2, *gu, *act;
};

struct cuda_hf {
    hf_arch a;
    bool bf;                          /* bf16 */
    size_t off_embed, off_norm, off_head;
    std::vector<hf_off> off;
    std::vector<hf_tape> tape;        /* fp32 */
    std::vector<hf_tape16> tape16;    /* bf16 */
    void *mem;                        /* every activation buffer below, one allocation */
    float *x_last, *rf;               /* [N, C], [N] */
    float *hfn;                       /* [N, C] (fp32) */
    float *dx, *dh, *dq, *dk, *dv, *datt, *dact, *dg, *du, *ds; /* backward scratch (fp32) */
    /* bf16 */
    bf16 *hfn16, *dx16, *dqkv16, *datt16, *dact16, *dgu16; /* [N, C], [N, C], [N, QD + 2 KD], ... */
    float *attD, *bsum;               /* [B, H, T], [QD + 2 KD] */
};

/* Rounds a buffer up to 256 bytes, so that every buffer carved from one allocation starts
 * 256-byte aligned like a cudaMalloc. */
static size_t pad256(size_t bytes) { return (bytes + 255) / 256 * 256; }

/* Carves the activation buffers of a workspace for N rows of T positions (B = N / T
 * sequences) out of one region: take(bytes) gives the next buffer (nullptr when only
 * counting). One function for the allocation and the estimate, so they cannot drift. */
template <typename Take>
static void hf_carve(cuda_hf *hf, const hf_arch *a, size_t N, size_t B, size_t T, bool bf, Take take) {
    size_t C = (size_t)a->channels, F = (size_t)a->intermediate, QD = (size_t)a->heads * a->head_dim;
    size_t KD = (size_t)a->kv_heads * a->head_dim, RS = QD + 2 * KD, HT = B * (size_t)a->heads * T;
    auto f32 = [&](size_t n) { return (float *)take(n * 4); };
    auto b16 = [&](size_t n) { return (bf16 *)take(n * 2); };
    hf->tape.clear(), hf->tape16.clear();
    for (int l = 0; l < a->layers; l++) {
        if (bf) {
            hf_tape16 t;
            t.x_in = f32(N * C), t.h1 = b16(N * C), t.r1 = f32(N), t.qkv = b16(N * RS), t.att = b16(N * QD);
            t.lse = f32(HT), t.x_mid = f32(N * C), t.h2 = b16(N * C), t.r2 = f32(N), t.gu = b16(N * 2 * F);
            t.act = b16(N * F);
            hf->tape16.push_back(t);
        } else {
            hf_tape t;
            t.x_in = f32(N * C), t.h1 = f32(N * C), t.r1 = f32(N), t.q = f32(N * QD), t.k = f32(N * KD);
            t.v = f32(N * KD), t.p = f32(HT * T), t.att = f32(N * QD), t.x_mid = f32(N * C), t.h2 = f32(N * C);
            t.r2 = f32(N), t.g = f32(N * F), t.u = f32(N * F), t.act = f32(N * F);
            hf->tape.push_back(t);
        }
    }
    hf->x_last = f32(N * C), hf->rf = f32(N), hf->dx = f32(N * C), hf->dh = f32(N * C);
    if (bf) {
        hf->hfn16 = b16(N * C), hf->dx16 = b16(N * C), hf->dqkv16 = b16(N * RS), hf->datt16 = b16(N * QD);
        hf->dact16 = b16(N * F), hf->dgu16 = b16(N * 2 * F), hf->attD = f32(HT);
        hf->bsum = f32(RS);
    } else {
        hf->hfn = f32(N * C), hf->dq = f32(N * QD), hf->dk = f32(N * KD), hf->dv = f32(N * KD);
        hf->datt = f32(N * QD), hf->dact = f32(N * F), hf->dg = f32(N * F), hf->du = f32(N * F);
        hf->ds = f32(HT * T);
    }
}

/* Bytes of the carved region. */
static size_t hf_region_bytes(const hf_arch *a, size_t N, size_t B, size_t T, bool bf) {
    cuda_hf probe;
    size_t total = 0;
    hf_carve(&probe, a, N, B, T, bf, [&](size_t bytes) -> void * {
        total += pad256(bytes);
        return nullptr;
    });
    return total;
}

/* The partial sums (doubles) of the reductions over rows: column sums of the biases (the
 * whole packed q | k | v row in bf16) and the RMSNorm weights' gradients. */
static size_t hf_part(const hf_arch *a, size_t N) {
    size_t widest = (size_t)a->channels;
    size_t RS = ((size_t)a->heads + 2 * (size_t)a->kv_heads) * a->head_dim;
    if (RS > widest) widest = RS;
    return (N + GPU_ROW_CHUNK - 1) / GPU_ROW_CHUNK * widest;
}

/* The buffers the family shares with GPT-2's fields of model_ctx (logits, loss rows,
 * batch, partial sums, AdamW list, cuBLASLt workspace; in bf16 the logits' gradient and
 * the parameters' bf16 copy), for the allocation and the estimate alike. */
struct hf_shared_item {
    void **p;
    size_t bytes;
    const char *what;
};
static std::vector<hf_shared_item> hf_shared(model_ctx *ctx, const hf_arch *a, size_t N, size_t P, size_t nspans,
                                             bool bf) {
    size_t Vp = pad64((size_t)a->vocab), nnorm = (P + GPU_NORM_CHUNK - 1) / GPU_NORM_CHUNK;
    std::vector<hf_shared_item> v = {
        {&ctx->lt_ws, LT_WORKSPACE, "the cuBLASLt workspace"},
        {(void **)&ctx->logits, N * Vp * 4, "the logits"},
        {(void **)&ctx->row_max, N * 4, "the loss rows"},
        {(void **)&ctx->row_inv, N * 4, "the loss rows"},
        {(void **)&ctx->row_g, N * 4, "the loss rows"},
        {(void **)&ctx->row_loss, N * 8, "the loss rows"},
        {(void **)&ctx->part, hf_part(a, N) * 8, "partial sums"},
        {(void **)&ctx->norm_part, nnorm * 8, "partial sums"},
        {(void **)&ctx->spans, nspans * sizeof(gpu_span), "the AdamW work list"},
        {(void **)&ctx->d_idx, (5 * N + 1) * 4, "the batch"},
        {(void **)&ctx->d_clip, sizeof(gpu_clip), "the clip's outcome"},
    };
    if (bf) {
        v.push_back({&ctx->dlogits, N * Vp * 2, "the logits' gradient"});
        v.push_back({(void **)&ctx->pbf, P * 2, "the bf16 copy of the parameters"});
    }
    return v;
}

double cuda_hf_workspace_bytes(const model_layout *lay, int max_B, int max_T, size_t nspans, int bf16) {
    size_t N = (size_t)max_B * max_T;
    model_ctx probe = model_ctx();
    double bytes = (double)hf_region_bytes(&lay->cfg.hf, N, (size_t)max_B, (size_t)max_T, bf16 != 0);
    for (const hf_shared_item &s : hf_shared(&probe, &lay->cfg.hf, N, lay->numel, nspans, bf16 != 0))
        bytes += (double)(s.bytes ? s.bytes : 4);
    return bytes;
}

/* The offset of tensor `name` (SIZE_MAX when the layout has none). */
static size_t off_of(const model_layout *lay, const char *name) {
    const model_tensor *t = model_layout_find(lay, name);
    return t ? t->offset : SIZE_MAX;
}

int cuda_hf_alloc(model_ctx *ctx, size_t nspans, tdm_err *e) {
    const hf_arch *a = &ctx->lay.cfg.hf;
    size_t N = ctx->lN, B = (size_t)ctx->max_B, T = (size_t)ctx->max_T, P = ctx->lay.numel;
    bool bf = ctx->use_bf16 != 0;
    cuda_hf *hf = new (std::nothrow) cuda_hf();
    if (!hf) return err_set(e, ERR_INTERNAL, "out of memory for the model workspace");
    ctx->hf = hf;
    hf->a = *a;
    hf->bf = bf;
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
        /* bf16 runs gate_proj and up_proj as one [2F, C] matrix (hf_arch_each_tensor's order) */
        if (bf && o[10] != o[9] + (size_t)a->intermediate * a->channels)
            return err_set(e, ERR_INTERNAL, "layer %d: mlp.up_proj.weight does not follow mlp.gate_proj.weight in "
                           "the parameter layout", l);
    }
    int rc = cuda_dev_alloc(ctx, &hf->mem, hf_region_bytes(a, N, B, T, bf),
                            bf ? "activations (Llama / Qwen2, bf16)" : "activations (Llama / Qwen2)", e);
    if (rc) return rc;
    unsigned char *at = (unsigned char *)hf->mem;
    hf_carve(hf, a, N, B, T, bf, [&](size_t bytes) -> void * {
        void *p = at;
        at += pad256(bytes);
        return p;
    });
    for (const hf_shared_item &s : hf_shared(ctx, a, N, P, nspans, bf))
        if ((rc = cuda_dev_alloc(ctx, s.p, s.bytes, s.what, e))) return rc;
    if (!bf) ctx->dlogits = ctx->logits; /* fp32: in place */
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

/* The fp32 forward: the CPU's operations (kernels_hf.cu). */
static int hf_forward32(model_ctx *ctx, const float *params, tdm_err *e) {
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

static int hf_backward32(model_ctx *ctx, const float *params, float *grads, tdm_err *e) {
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

/* ------------------------------------------------------------------ bf16 */

/* The bf16 forward. Weights (and the biases of bf16 outputs) from the bf16 copy pbf,
 * RMSNorm weights from the float parameters. */
static int hf_forward16(model_ctx *ctx, const float *params, tdm_err *e) {
    cuda_hf *hf = ctx->hf;
    const hf_arch *a = &hf->a;
    const int B = ctx->B, T = ctx->T, N = B * T, C = a->channels, H = a->heads, Hkv = a->kv_heads, D = a->head_dim;
    const int QD = H * D, KD = Hkv * D, RS = QD + 2 * KD, F = a->intermediate, L = a->layers, V = a->vocab;
    const cudaDataType_t BF = CUDA_R_16BF, R = CUDA_R_32F;
    cudaStream_t s = ctx->stream;
    const int32_t *inputs = ctx->d_idx, *targets = ctx->d_idx + N;
    const bf16 *wp = ctx->pbf;
    int rc;
    LAUNCH_TRY(gpu_cast_bf16(ctx->pbf, params, ctx->lay.numel, s), e);
    if (cuda_use_cudnn(ctx, B, T, H, Hkv, e) < 0) return e->code;
#define W(field) (wp + hf->off[l].field)
#define WF(field) (params + hf->off[l].field)
#define BIAS(field) (hf->off[l].field == SIZE_MAX ? NULL : wp + hf->off[l].field)
    {
        size_t n = (size_t)N * C, blocks = (n + 255) / 256;
        GPU_LAUNCH(hf_embed_kernel, (unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, s, hf->tape16[0].x_in,
                   inputs, params + hf->off_embed, N, C);
        LAUNCH_TRY(cudaGetLastError(), e);
    }
    for (int l = 0; l < L; l++) {
        hf_tape16 &t = hf->tape16[l];
        float *next = l + 1 < L ? hf->tape16[l + 1].x_in : hf->x_last;
        LAUNCH_TRY(gpu_rmsnorm_forward<bf16>(t.h1, t.r1, t.x_in, WF(ln_in), N, C, a->rms_eps, s), e);
        /* q | k | v into one packed row of RS (ld RS) */
        if ((rc = cuda_lt_matmul(ctx, true, false, QD, N, C, W(wq), C, t.h1, C, BF, t.qkv, RS, BF, NULL, BIAS(bq), e)) ||
            (rc = cuda_lt_matmul(ctx, true, false, KD, N, C, W(wk), C, t.h1, C, BF, t.qkv + QD, RS, BF, NULL,
                                 BIAS(bk), e)) ||
            (rc = cuda_lt_matmul(ctx, true, false, KD, N, C, W(wv), C, t.h1, C, BF, t.qkv + QD + KD, RS, BF, NULL,
                                 BIAS(bv), e)))
            return rc;
        LAUNCH_TRY(gpu_rope_rotate_rows<bf16>(t.qkv, RS, B, T, H, D, a->rope_theta, 1.0f, s), e);
        LAUNCH_TRY(gpu_rope_rotate_rows<bf16>(t.qkv + QD, RS, B, T, Hkv, D, a->rope_theta, 1.0f, s), e);
        if ((rc = cuda_attention_forward<bf16>(ctx, t.att, t.lse, t.qkv, H, Hkv, D, e))) return rc;
        if ((rc = cuda_mm_forward(ctx, t.x_mid, R, t.att, W(wo), NULL, t.x_in, N, QD, C, BF, e))) return rc;
        LAUNCH_TRY(gpu_rmsnorm_forward<bf16>(t.h2, t.r2, t.x_mid, WF(ln_post), N, C, a->rms_eps, s), e);
        /* g | u = h2 [Wg; Wu]^T: the two weights are one [2F, C] matrix */
        if ((rc = cuda_mm_forward(ctx, t.gu, BF, t.h2, W(wg), NULL, NULL, N, C, 2 * F, BF, e))) return rc;
        LAUNCH_TRY(gpu_swiglu_forward_packed<bf16>(t.act, t.gu, N, F, s), e);
        if ((rc = cuda_mm_forward(ctx, next, R, t.act, W(wd), NULL, t.x_mid, N, F, C, BF, e))) return rc;
    }
#undef W
#undef WF
#undef BIAS
    LAUNCH_TRY(gpu_rmsnorm_forward<bf16>(hf->hfn16, hf->rf, hf->x_last, params + hf->off_norm, N, C, a->rms_eps, s),
               e);
    /* logits[N, V] (ld Vp, float) = hfn head^T */
    if ((rc = cuda_lt_matmul(ctx, true, false, hf_head_rows(ctx), N, C, wp + hf->off_head, C, hf->hfn16, C, BF,
                             ctx->logits, ctx->Vp, R, NULL, NULL, e)))
        return rc;
    LAUNCH_TRY(gpu_crossentropy_forward(ctx->row_loss, ctx->row_max, ctx->row_inv, ctx->logits, (size_t)ctx->Vp,
                                        targets, N, V, s), e);
    return 0;
}

/* The bf16 backward: the fp32 one's order, with dx's bf16 copy (dx16, from each RMSNorm
 * backward) as the operand of the matmuls that read the residual gradient. */
static int hf_backward16(model_ctx *ctx, const float *params, float *grads, tdm_err *e) {
    cuda_hf *hf = ctx->hf;
    const hf_arch *a = &hf->a;
    const int B = ctx->B, T = ctx->T, N = B * T, C = a->channels, H = a->heads, Hkv = a->kv_heads, D = a->head_dim;
    const int QD = H * D, KD = Hkv * D, RS = QD + 2 * KD, F = a->intermediate, L = a->layers, V = a->vocab;
    const cudaDataType_t BF = CUDA_R_16BF, R = CUDA_R_32F;
    cudaStream_t s = ctx->stream;
    const int32_t *targets = ctx->d_idx + N, *pos = ctx->d_idx + 2 * (size_t)N;
    const int32_t *uniq = ctx->d_idx + 3 * (size_t)N, *start = ctx->d_idx + 4 * (size_t)N;
    const bf16 *wp = ctx->pbf;
    bf16 *dlogits = (bf16 *)ctx->dlogits;
    double *part = ctx->part;
    int rc;
    CUDA_TRY(cudaMemsetAsync(grads, 0, ctx->lay.numel * sizeof(float), s), e);
    LAUNCH_TRY(gpu_crossentropy_backward<bf16>(dlogits, (size_t)ctx->Vp, ctx->logits, (size_t)ctx->Vp, ctx->row_max,
                                               ctx->row_inv, ctx->row_g, targets, N, V, s), e);
    /* head: dh = dlogits head (float); d(head) = dlogits^T hfn */
    if ((rc = cuda_lt_matmul(ctx, false, false, C, N, hf_head_rows(ctx), wp + hf->off_head, C, dlogits, ctx->Vp, BF,
                             hf->dh, C, R, NULL, NULL, e)) ||
        (rc = cuda_mm_dweight(ctx, grads + hf->off_head, dlogits, ctx->Vp, hf->hfn16, N, C, V, BF, e)))
        return rc;
    CUDA_TRY(cudaMemsetAsync(hf->dx, 0, (size_t)N * C * sizeof(float), s), e);
    LAUNCH_TRY(gpu_rmsnorm_backward<bf16>(hf->dx, hf->dx16, grads + hf->off_norm, part, hf->dh, hf->x_last, hf->rf,
                                          params + hf->off_norm, N, C, s), e);
#define W(field) (wp + hf->off[l].field)
#define WF(field) (params + hf->off[l].field)
#define G(field) (grads + hf->off[l].field)
    for (int l = L - 1; l >= 0; l--) {
        hf_tape16 &t = hf->tape16[l];
        /* x_next = x_mid + act Wd^T */
        if ((rc = cuda_mm_dinp(ctx, hf->dact16, BF, hf->dx16, W(wd), N, F, C, BF, e)) ||
            (rc = cuda_mm_dweight(ctx, G(wd), hf->dx16, C, t.act, N, F, C, BF, e)))
            return rc;
        LAUNCH_TRY(gpu_swiglu_backward_packed<bf16>(hf->dgu16, hf->dact16, t.gu, N, F, s), e);
        /* dh = [dg | du] [Wg; Wu] (float), d[Wg; Wu] = [dg | du]^T h2: one matmul each */
        if ((rc = cuda_mm_dinp(ctx, hf->dh, R, hf->dgu16, W(wg), N, C, 2 * F, BF, e)) ||
            (rc = cuda_mm_dweight(ctx, G(wg), hf->dgu16, 2 * F, t.h2, N, C, 2 * F, BF, e)))
            return rc;
        LAUNCH_TRY(gpu_rmsnorm_backward<bf16>(hf->dx, hf->dx16, G(ln_post), part, hf->dh, t.x_mid, t.r2, WF(ln_post),
                                              N, C, s), e);
        /* x_mid = x_in + att Wo^T */
        if ((rc = cuda_mm_dinp(ctx, hf->datt16, BF, hf->dx16, W(wo), N, QD, C, BF, e)) ||
            (rc = cuda_mm_dweight(ctx, G(wo), hf->dx16, C, t.att, N, QD, C, BF, e)))
            return rc;
        if ((rc = cuda_attention_backward<bf16>(ctx, hf->dqkv16, hf->attD, hf->datt16, t.qkv, t.att, t.lse, H, Hkv, D,
                                                e)))
            return rc;
        LAUNCH_TRY(gpu_rope_rotate_rows<bf16>(hf->dqkv16, RS, B, T, H, D, a->rope_theta, -1.0f, s), e);
        LAUNCH_TRY(gpu_rope_rotate_rows<bf16>(hf->dqkv16 + QD, RS, B, T, Hkv, D, a->rope_theta, -1.0f, s), e);
        /* dh = dq Wq + dk Wk + dv Wv; the weights' gradients from the packed rows (ld RS) */
        const bf16 *dq = hf->dqkv16, *dk = hf->dqkv16 + QD, *dv = hf->dqkv16 + QD + KD;
        if ((rc = cuda_lt_matmul(ctx, false, false, C, N, QD, W(wq), C, dq, RS, BF, hf->dh, C, R, NULL, NULL, e)) ||
            (rc = cuda_lt_matmul(ctx, false, false, C, N, KD, W(wk), C, dk, RS, BF, hf->dh, C, R, hf->dh, NULL, e)) ||
            (rc = cuda_lt_matmul(ctx, false, false, C, N, KD, W(wv), C, dv, RS, BF, hf->dh, C, R, hf->dh, NULL, e)) ||
            (rc = cuda_mm_dweight(ctx, G(wq), dq, RS, t.h1, N, C, QD, BF, e)) ||
            (rc = cuda_mm_dweight(ctx, G(wk), dk, RS, t.h1, N, C, KD, BF, e)) ||
            (rc = cuda_mm_dweight(ctx, G(wv), dv, RS, t.h1, N, C, KD, BF, e)))
            return rc;
        if (hf->off[l].bq != SIZE_MAX) {
            /* the biases' gradients: the packed rows' column sums, then each part to its tensor */
            LAUNCH_TRY(gpu_column_sum<bf16>(hf->bsum, part, hf->dqkv16, N, RS, s), e);
            CUDA_TRY(cudaMemcpyAsync(G(bq), hf->bsum, (size_t)QD * 4, cudaMemcpyDeviceToDevice, s), e);
            CUDA_TRY(cudaMemcpyAsync(G(bk), hf->bsum + QD, (size_t)KD * 4, cudaMemcpyDeviceToDevice, s), e);
            CUDA_TRY(cudaMemcpyAsync(G(bv), hf->bsum + QD + KD, (size_t)KD * 4, cudaMemcpyDeviceToDevice, s), e);
        }
        LAUNCH_TRY(gpu_rmsnorm_backward<bf16>(hf->dx, hf->dx16, G(ln_in), part, hf->dh, t.x_in, t.r1, WF(ln_in), N, C,
                                              s), e);
    }
#undef W
#undef WF
#undef G
    LAUNCH_TRY(gpu_encoder_backward_wte(grads + hf->off_embed, hf->dx, uniq, start, pos, ctx->nuniq, C, s), e);
    return 0;
}

int cuda_hf_forward(model_ctx *ctx, const float *params, tdm_err *e) {
    return ctx->hf->bf ? hf_forward16(ctx, params, e) : hf_forward32(ctx, params, e);
}

int cuda_hf_backward(model_ctx *ctx, const float *params, float *grads, tdm_err *e) {
    return ctx->hf->bf ? hf_backward16(ctx, params, grads, e) : hf_backward32(ctx, params, grads, e);
}
