/* cuda.cu — the CUDA backend of model.h: the ops table, cuBLASLt matmuls, the forward
 * and backward passes that chain the kernels of gpu/kernels_*.cu, and the optimiser;
 * cuda_setup.cu creates the workspace (gpu/cuda_impl.h).
 *
 * Same model, tensor layout, loss and optimiser semantics as the CPU reference
 * (model/cpu.c), layer for layer; see gpu/README.md for the map and docs/gpu.md for use.
 *
 * Precision (gpu/cuda.h): the forward and backward are written once, templated on the
 * activation type `T` (float or bf16). Matmul operands are T; a matmul writes T where the
 * next consumer is a matmul or attention (qkv, fch, dfch, datty) and float where it feeds
 * the residual stream, a LayerNorm backward, the loss, or a parameter gradient. In bf16
 * the weights come from a bf16 copy of the parameters made at each forward (kept for the
 * backward, which the interface runs on the same parameters).
 *
 * Determinism (DESIGN.md §4): one stream per workspace; no atomics in any kernel; every
 * reduction in a fixed order (gpu/kernels.h). cuBLASLt: one algorithm per problem (shape,
 * transposes, types, epilogue, leading dimensions and pointer alignments), chosen by the
 * heuristic the first time the process meets the problem and then reused for every
 * call (a process-wide table), with a fixed 32 MiB workspace and split-K reductions
 * restricted to the schemes that reduce in a separate, ordered pass (no in-place
 * reduction). The same GPU model, driver, CUDA and cuBLAS versions and configuration
 * therefore give the same bits.
 */
#include "gpu/cuda_impl.h"

/* ------------------------------------------------------------------ errors */

int gpu_cuda_error(tdm_err *e, cudaError_t rc, const char *call, const char *file, int line) {
    return err_set(e, ERR_INTERNAL, "CUDA error %s (%s) at %s:%d in %.300s", cudaGetErrorName(rc),
                   cudaGetErrorString(rc), file, line, call);
}

int gpu_cublas_error(tdm_err *e, cublasStatus_t rc, const char *call, const char *file, int line) {
    return err_set(e, ERR_INTERNAL, "cuBLASLt error %s (%s) at %s:%d in %.300s",
                   cublasLtGetStatusName(rc), cublasLtGetStatusString(rc), file, line, call);
}

/* ------------------------------------------------------------------ precision */

static int g_precision = PREC_UNSET; /* set by model_cuda_set_precision */

static int parse_precision(const char *name) {
    if (!strcmp(name, "fp32")) return PREC_FP32;
    if (!strcmp(name, "bf16")) return PREC_BF16;
    return PREC_UNSET;
}

extern "C" int model_cuda_set_precision(const char *name, tdm_err *e) {
    if (!name) {
        g_precision = PREC_UNSET;
        return 0;
    }
    int p = parse_precision(name);
    if (p == PREC_UNSET)
        return err_set(e, ERR_USAGE, "run.precision = %s: must be fp32 or bf16", name);
    g_precision = p;
    return 0;
}

int cuda_next_precision(int *prec, tdm_err *e) {
    if (g_precision != PREC_UNSET) {
        *prec = g_precision;
        return 0;
    }
    const char *env = getenv("TANDEM_PRECISION");
    if (!env || !*env) {
        *prec = PREC_FP32;
        return 0;
    }
    int p = parse_precision(env);
    if (p == PREC_UNSET)
        return err_set(e, ERR_USAGE, "TANDEM_PRECISION=%s: must be fp32 or bf16", env);
    *prec = p;
    return 0;
}

extern "C" int model_cuda_next_precision(const char **name, tdm_err *e) {
    int p;
    int rc = cuda_next_precision(&p, e);
    if (rc) return rc;
    *name = p == PREC_BF16 ? "bf16" : "fp32";
    return 0;
}

/* ------------------------------------------------------------------ attention */

static int g_attention = ATT_UNSET; /* set by model_cuda_set_attention */

static int parse_attention(const char *name) {
    if (!strcmp(name, "auto")) return ATT_AUTO;
    if (!strcmp(name, "cudnn")) return ATT_CUDNN;
    if (!strcmp(name, "builtin")) return ATT_BUILTIN;
    return ATT_UNSET;
}

extern "C" int model_cuda_set_attention(const char *name, tdm_err *e) {
    if (!name) {
        g_attention = ATT_UNSET;
        return 0;
    }
    int a = parse_attention(name);
    if (a == ATT_UNSET)
        return err_set(e, ERR_USAGE, "model.attention = %s: must be auto, cudnn or builtin", name);
    g_attention = a;
    return 0;
}

int cuda_next_attention(int *att, tdm_err *e) {
    if (g_attention != ATT_UNSET) {
        *att = g_attention;
        return 0;
    }
    const char *env = getenv("TANDEM_ATTENTION");
    if (!env || !*env) {
        *att = ATT_AUTO;
        return 0;
    }
    int a = parse_attention(env);
    if (a == ATT_UNSET)
        return err_set(e, ERR_USAGE, "TANDEM_ATTENTION=%s: must be auto, cudnn or builtin", env);
    *att = a;
    return 0;
}

/* Whether this batch's shape runs on cuDNN (ctx->dnn_shape_ok, read again by the
 * backward, which follows the forward of the same shape): its plans exist. A shape cuDNN
 * refuses runs the built-in kernels in model.attention = auto (said once on stderr), and
 * is an error (-1, ERR_USAGE naming model.attention) when cudnn was asked for. */
int cuda_use_cudnn(model_ctx *ctx, int B, int T, int H, int Hkv, tdm_err *e) {
    ctx->dnn_shape_ok = 0;
    if (!ctx->dnn) return 0;
    tdm_err pe = {};
    if (cudnn_att_prepare(ctx->dnn, B, T, H, Hkv, &pe) == 0) {
        ctx->dnn_shape_ok = 1;
        return 0;
    }
    if (ctx->att_forced) {
        err_set(e, ERR_USAGE, "model.attention = cudnn: batch %d x %d: %s", B, T, pe.msg);
        return -1;
    }
    static char said[64];
    char key[64];
    snprintf(key, sizeof key, "%d %d %d %d", B, T, H, Hkv);
    if (strcmp(said, key)) {
        snprintf(said, sizeof said, "%s", key);
        fprintf(stderr, "tandem: attention: builtin for batch %d x %d (cuDNN: %s)\n", B, T, pe.msg);
    }
    return 0;
}

/* ------------------------------------------------------------------ the workspace */
int cuda_dev_alloc(model_ctx *ctx, void **p, size_t bytes, const char *what, tdm_err *e) {
    *p = NULL;
    if (bytes == 0) bytes = 4;
    cudaError_t rc = cudaMalloc(p, bytes);
    if (rc != cudaSuccess) {
        *p = NULL;
        cudaGetLastError(); /* clear the (non-sticky) allocation error */
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        return err_set(e, ERR_INTERNAL,
                       "out of GPU memory: need %zu bytes for %s (this workspace holds %zu "
                       "bytes; the device has %zu of %zu free) — use a smaller train.batch or "
                       "train.seq, or a larger GPU",
                       bytes, what, ctx->bytes_now, fr, tot);
    }
    (*ctx->sizes)[*p] = bytes;
    ctx->bytes_now += bytes;
    if (ctx->bytes_now > ctx->bytes_peak) ctx->bytes_peak = ctx->bytes_now;
    return 0;
}

void cuda_dev_free(model_ctx *ctx, void *p) {
    if (!p) return;
    auto it = ctx->sizes->find(p);
    if (it != ctx->sizes->end()) {
        ctx->bytes_now -= it->second;
        ctx->sizes->erase(it);
    }
    cudaFree(p);
}

int cuda_check_sticky(model_ctx *ctx, tdm_err *e) {
    if (!ctx->sticky) return 0;
    if (e) *e = ctx->sticky_err;
    return ERR_INTERNAL;
}

static void set_sticky(model_ctx *ctx, const tdm_err *e) {
    if (ctx->sticky) return;
    ctx->sticky = 1;
    ctx->sticky_err = *e;
    fprintf(stderr, "tandem: cuda backend: %s\n", e->msg);
}

/* ------------------------------------------------------------------ cuBLASLt */

/* Everything that can change cuBLASLt's choice of algorithm. All fields are 4 or 8 bytes
 * and the struct is zeroed before filling, so memcmp compares keys. */
struct MmKey {
    int64_t m, n, k, lda, ldb, ldd, ld_aux;
    int32_t ta, tb, abtype, dtype, bias, beta, device, epi;
    uint32_t al_a, al_b, al_c, al_d, al_bias, al_aux;
};

struct MmAlgo {
    MmKey key;
    cublasLtMatmulAlgo_t algo;
    bool ok; /* false: no algorithm for this epilogue (the caller falls back) */
};

static pthread_mutex_t g_algo_mu = PTHREAD_MUTEX_INITIALIZER;
static std::vector<MmAlgo> *g_algos; /* process-wide: one algorithm per problem */

static uint32_t alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && a % al) al /= 2;
    return al;
}

static const char *type_name(cudaDataType_t t) { return t == CUDA_R_16BF ? "bf16" : "fp32"; }

/* Column-major D[m x n] (ld ldd, type dtype) = op(A) op(B) (+ C, when C is not NULL,
 * beta = 1) (+ bias[m], type dtype), A and B of type abtype, fp32 accumulate. op(A) is
 * m x k (A stored k x m when ta), op(B) k x n (B stored n x k when tb). */
int cuda_lt_matmul(model_ctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                     const void *A, int64_t lda, const void *B, int64_t ldb, cudaDataType_t abtype,
                     void *D, int64_t ldd, cudaDataType_t dtype, const void *C, const void *bias,
                     tdm_err *e) {
    bool unsupported = false;
    return cuda_lt_matmul_epi(ctx, ta, tb, m, n, k, A, lda, B, ldb, abtype, D, ldd, dtype, C, bias, NULL,
                              &unsupported, e);
}

/* cuda_lt_matmul with an epilogue (cuda_impl.h). An epilogue's problem that cuBLASLt has
 * no algorithm for is remembered as such (ok false), so every later call of it falls back
 * at once: which path a problem takes is fixed for the process, and so are the bits. */
int cuda_lt_matmul_epi(model_ctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                       const void *A, int64_t lda, const void *B, int64_t ldb, cudaDataType_t abtype,
                       void *D, int64_t ldd, cudaDataType_t dtype, const void *C, const void *bias,
                       const lt_epi *x, bool *unsupported, tdm_err *e) {
    *unsupported = false;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    int rc = 0;
    cublasStatus_t st;
    const float alpha = 1.0f, beta = C ? 1.0f : 0.0f;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulAlgo_t algo;
    bool found = false, ok = true;
    MmKey key;
    memset(&key, 0, sizeof key);
    key.m = m, key.n = n, key.k = k, key.lda = lda, key.ldb = ldb, key.ldd = ldd;
    key.ta = ta, key.tb = tb, key.abtype = abtype, key.dtype = dtype, key.bias = bias != NULL;
    key.beta = C != NULL, key.device = ctx->device;
    key.al_a = alignment(A), key.al_b = alignment(B), key.al_c = alignment(C ? C : D);
    key.al_d = alignment(D), key.al_bias = bias ? alignment(bias) : 0;
    if (x) key.epi = x->kind, key.ld_aux = x->ld_aux, key.al_aux = alignment(x->aux);

#define LT(call)                                                                            \
    do {                                                                                    \
        if ((st = (call)) != CUBLAS_STATUS_SUCCESS) {                                       \
            rc = gpu_cublas_error(e, st, #call, __FILE__, __LINE__);                        \
            goto out;                                                                       \
        }                                                                                   \
    } while (0)

    LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (x) {
        /* GELU after the bias with its input kept, or GELU's derivative at a kept input */
        cublasLtEpilogue_t epi = x->kind == LT_EPI_GELU_AUX_BIAS ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                                 : CUBLASLT_EPILOGUE_DGELU;
        int32_t aux_type = dtype;
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &x->aux,
                                          sizeof x->aux));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &x->ld_aux,
                                          sizeof x->ld_aux));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type,
                                          sizeof aux_type));
        if (bias)
            LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                              sizeof bias));
    } else if (bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                          sizeof bias));
    }
    LT(cublasLtMatrixLayoutCreate(&la, abtype, ta ? k : m, ta ? m : k, lda));
    LT(cublasLtMatrixLayoutCreate(&lb, abtype, tb ? n : k, tb ? k : n, ldb));
    LT(cublasLtMatrixLayoutCreate(&lc, dtype, m, n, ldd));

    pthread_mutex_lock(&g_algo_mu);
    if (!g_algos) g_algos = new (std::nothrow) std::vector<MmAlgo>();
    for (size_t i = 0; g_algos && i < g_algos->size(); i++)
        if (!memcmp(&(*g_algos)[i].key, &key, sizeof key)) {
            algo = (*g_algos)[i].algo;
            ok = (*g_algos)[i].ok;
            found = true;
            break;
        }
    pthread_mutex_unlock(&g_algo_mu);
    if (found && !ok) {
        *unsupported = true;
        goto out;
    }
    if (!found) {
        size_t ws = LT_WORKSPACE;
        uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                           CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
        LT(cublasLtMatmulPreferenceCreate(&pref));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                sizeof ws));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                &schemes, sizeof schemes));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                &key.al_a, sizeof key.al_a));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                &key.al_b, sizeof key.al_b));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                &key.al_c, sizeof key.al_c));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                &key.al_d, sizeof key.al_d));
        cublasLtMatmulHeuristicResult_t res;
        int count = 0;
        memset(&res, 0, sizeof res);
        st = cublasLtMatmulAlgoGetHeuristic(ctx->lt, op, la, lb, lc, lc, pref, 1, &res, &count);
        if (x && (st != CUBLAS_STATUS_SUCCESS || count < 1 || res.state != CUBLAS_STATUS_SUCCESS)) {
            /* no algorithm with this epilogue: remembered, and the caller falls back */
            pthread_mutex_lock(&g_algo_mu);
            bool seen = false;
            for (size_t i = 0; g_algos && i < g_algos->size(); i++)
                seen |= !memcmp(&(*g_algos)[i].key, &key, sizeof key);
            if (!seen && g_algos) g_algos->push_back(MmAlgo{key, res.algo, false});
            pthread_mutex_unlock(&g_algo_mu);
            *unsupported = true;
            goto out;
        }
        if (st != CUBLAS_STATUS_SUCCESS) {
            rc = gpu_cublas_error(e, st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
            goto out;
        }
        if (count < 1 || res.state != CUBLAS_STATUS_SUCCESS) {
            rc = err_set(e, ERR_INTERNAL,
                         "cuBLASLt has no algorithm for a %lld x %lld x %lld matmul (%s in, %s "
                         "out%s)",
                         (long long)m, (long long)n, (long long)k, type_name(abtype),
                         type_name(dtype), bias ? ", bias" : "");
            goto out;
        }
        algo = res.algo;
        pthread_mutex_lock(&g_algo_mu);
        /* another thread may have added the same problem meanwhile: keep the first */
        for (size_t i = 0; g_algos && i < g_algos->size(); i++)
            if (!memcmp(&(*g_algos)[i].key, &key, sizeof key)) {
                algo = (*g_algos)[i].algo;
                found = true;
                break;
            }
        if (!found && g_algos) g_algos->push_back(MmAlgo{key, algo, true});
        pthread_mutex_unlock(&g_algo_mu);
    }
    st = cublasLtMatmul(ctx->lt, op, &alpha, A, la, B, lb, &beta, C ? C : D, lc, D, lc, &algo, ctx->lt_ws,
                        LT_WORKSPACE, ctx->stream);
    if (x && st == CUBLAS_STATUS_NOT_SUPPORTED) {
        /* refused when called (nothing was queued): this problem falls back from now on */
        pthread_mutex_lock(&g_algo_mu);
        for (size_t i = 0; g_algos && i < g_algos->size(); i++)
            if (!memcmp(&(*g_algos)[i].key, &key, sizeof key)) (*g_algos)[i].ok = false;
        pthread_mutex_unlock(&g_algo_mu);
        *unsupported = true;
        goto out;
    }
    if (st != CUBLAS_STATUS_SUCCESS)
        rc = gpu_cublas_error(e, st, "cublasLtMatmul", __FILE__, __LINE__);
#undef LT
out:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return rc;
}

/* Row-major matmuls of a linear layer with W[OC, IC] (torch.nn.Linear's layout). */

/* out[N, OC] = inp[N, IC] W^T (+ bias[OC]) (+ resid[N, OC]) */
int cuda_mm_forward(model_ctx *ctx, void *out, cudaDataType_t otype, const void *inp,
                      const void *W, const void *bias, const float *resid, int N, int IC, int OC,
                      cudaDataType_t at, tdm_err *e) {
    return cuda_lt_matmul(ctx, true, false, OC, N, IC, W, IC, inp, IC, at, out, OC, otype, resid, bias, e);
}

/* dinp[N, IC] = dout[N, OC] W (overwritten) */
int cuda_mm_dinp(model_ctx *ctx, void *dinp, cudaDataType_t dtype, const void *dout,
                   const void *W, int N, int IC, int OC, cudaDataType_t at, tdm_err *e) {
    return cuda_lt_matmul(ctx, false, false, IC, N, OC, W, IC, dout, OC, at, dinp, IC, dtype, NULL,
                     NULL, e);
}

/* dW[OC, IC] = dout[N, OC]^T inp[N, IC] (float, overwritten); ld_dout is dout's row length */
int cuda_mm_dweight(model_ctx *ctx, float *dW, const void *dout, int64_t ld_dout,
                      const void *inp, int N, int IC, int OC, cudaDataType_t at, tdm_err *e) {
    return cuda_lt_matmul(ctx, false, true, IC, OC, N, inp, IC, dout, ld_dout, at, dW, IC, CUDA_R_32F,
                     NULL, NULL, e);
}

/* ------------------------------------------------------------------ forward, backward */

template <typename T> static inline T *L_(void *base, int l, size_t stride) {
    return (T *)base + (size_t)l * stride;
}

static const float *block_param(const model_ctx *ctx, const float *base, int l, int k) {
    return base + ctx->off_block[(size_t)l * MODEL_BLOCK_TENSORS + k];
}

/* The rows of the tied head's matmuls: Vp (the vocabulary rounded up to 64) where the
 * parameters hold that many rows from wte on, else V. An odd V (GPT-2's 50257) sent
 * cuBLASLt to align-1 CUTLASS kernels of sm_75 for the logits and dlnf: 23 ms of a 103 ms
 * step on an H100 (ncu, GPT-2 124M, T 1024, B 16). The extra rows are the parameters that
 * follow wte: their logits are never read and their dlogits are zero, so they add nothing. */
static int64_t head_rows(const model_ctx *ctx) {
    const model_config *cf = &ctx->lay.cfg;
    return ctx->off_wte + (size_t)ctx->Vp * cf->channels <= ctx->lay.numel ? ctx->Vp : cf->vocab;
}

template <typename T> static int forward_impl(model_ctx *ctx, const float *params, tdm_err *e) {
    const bool BF = sizeof(T) == 2;
    const cudaDataType_t AT = BF ? CUDA_R_16BF : CUDA_R_32F;
    const model_config *cf = &ctx->lay.cfg;
    const int B = ctx->B, T_ = ctx->T, C = cf->channels, L = cf->layers, H = cf->heads;
    const int V = cf->vocab, N = B * T_;
    cudaStream_t s = ctx->stream;
    const int32_t *inputs = ctx->d_idx, *targets = ctx->d_idx + N;
    /* matmul weights (and biases of T outputs) in T; LayerNorm and float-output biases
     * from the float parameters */
    const T *wp = BF ? (const T *)ctx->pbf : (const T *)params;
    if (BF) LAUNCH_TRY(gpu_cast_bf16(ctx->pbf, params, ctx->lay.numel, s), e);
#define WT(k) (wp + ctx->off_block[(size_t)l * MODEL_BLOCK_TENSORS + (k)]) /* T */
#define WF(k) block_param(ctx, params, l, (k))                           /* float */

    /* cuDNN or the built-in attention for this batch's shape: once, for every layer */
    if (cuda_use_cudnn(ctx, B, T_, H, H, e) < 0) return e->code;
    LAUNCH_TRY(gpu_encoder_forward(ctx->encoded, inputs, params + ctx->off_wte,
                                   params + ctx->off_wpe, B, T_, C, s), e);
    const float *x = ctx->encoded;
    for (int l = 0; l < L; l++) {
        T *ln1 = L_<T>(ctx->ln1, l, ctx->s_C), *qkv = L_<T>(ctx->qkv, l, ctx->s_3C);
        T *atty = L_<T>(ctx->atty, l, ctx->s_C), *ln2 = L_<T>(ctx->ln2, l, ctx->s_C);
        T *fch = L_<T>(ctx->fch, l, ctx->s_4C), *fchg = L_<T>(ctx->fch_gelu, l, ctx->s_4C);
        float *ln1m = ctx->ln1_mean + l * ctx->s_N, *ln1r = ctx->ln1_rstd + l * ctx->s_N;
        float *ln2m = ctx->ln2_mean + l * ctx->s_N, *ln2r = ctx->ln2_rstd + l * ctx->s_N;
        float *lse = ctx->lse + l * ctx->s_HN;
        float *res2 = ctx->res2 + l * ctx->s_C, *res3 = ctx->res3 + l * ctx->s_C;
        int rc;
        LAUNCH_TRY(gpu_layernorm_forward<T>(ln1, ln1m, ln1r, x, WF(MODEL_LN1_W), WF(MODEL_LN1_B), N, C, s), e);
        if ((rc = cuda_mm_forward(ctx, qkv, AT, ln1, WT(MODEL_QKV_W), WT(MODEL_QKV_B), NULL, N, C, 3 * C, AT, e)))
            return rc;
        if ((rc = cuda_attention_forward<T>(ctx, atty, lse, qkv, H, H, C / H, e))) return rc;
        if ((rc = cuda_mm_forward(ctx, res2, CUDA_R_32F, atty, WT(MODEL_ATTPROJ_W), WF(MODEL_ATTPROJ_B), x, N, C,
                             C, AT, e)))
            return rc;
        LAUNCH_TRY(gpu_layernorm_forward<T>(ln2, ln2m, ln2r, res2, WF(MODEL_LN2_W), WF(MODEL_LN2_B), N, C, s), e);
        /* fchg = gelu(fch), fch = ln2 W_fc^T + b_fc: one matmul with cuBLASLt's GELU epilogue
         * keeping fch for the backward, else the matmul and the GELU kernel */
        bool unfused = true;
        if (ctx->gelu_epi) {
            lt_epi x = {LT_EPI_GELU_AUX_BIAS, fch, 4 * (int64_t)C};
            if ((rc = cuda_lt_matmul_epi(ctx, true, false, 4 * C, N, C, WT(MODEL_FC_W), C, ln2, C, AT, fchg, 4 * C,
                                         AT, NULL, WT(MODEL_FC_B), &x, &unfused, e)))
                return rc;
        }
        ctx->gelu_fused_fwd = !unfused;
        if (unfused) {
            if ((rc = cuda_mm_forward(ctx, fch, AT, ln2, WT(MODEL_FC_W), WT(MODEL_FC_B), NULL, N, C, 4 * C, AT, e)))
                return rc;
            LAUNCH_TRY(gpu_gelu_forward<T>(fchg, fch, (size_t)N * 4 * C, s), e);
        }
        if ((rc = cuda_mm_forward(ctx, res3, CUDA_R_32F, fchg, WT(MODEL_FCPROJ_W), WF(MODEL_FCPROJ_B), res2, N,
                             4 * C, C, AT, e)))
            return rc;
        x = res3;
    }
#undef WT
#undef WF
    T *lnf = (T *)ctx->lnf;
    LAUNCH_TRY(gpu_layernorm_forward<T>(lnf, ctx->lnf_mean, ctx->lnf_rstd, x,
                                        params + ctx->off_lnf_w, params + ctx->off_lnf_b, N, C, s),
               e);
    /* logits[N, V] (ld Vp) = lnf wte^T: the tied head, no bias (over head_rows(): the
     * columns past V are never read) */
    int rc = cuda_lt_matmul(ctx, true, false, head_rows(ctx), N, C, wp + ctx->off_wte, C, lnf, C, AT, ctx->logits,
                       ctx->Vp, CUDA_R_32F, NULL, NULL, e);
    if (rc) return rc;
    LAUNCH_TRY(gpu_crossentropy_forward(ctx->row_loss, ctx->row_max, ctx->row_inv, ctx->logits,
                                        (size_t)ctx->Vp, targets, N, V, s), e);
    return 0;
}

template <typename T> static int backward_impl(model_ctx *ctx, const float *params, float *grads,
                                               tdm_err *e) {
    const bool BF = sizeof(T) == 2;
    const cudaDataType_t AT = BF ? CUDA_R_16BF : CUDA_R_32F;
    const model_config *cf = &ctx->lay.cfg;
    const int B = ctx->B, T_ = ctx->T, C = cf->channels, L = cf->layers, H = cf->heads;
    const int V = cf->vocab, N = B * T_;
    cudaStream_t s = ctx->stream;
    const int32_t *targets = ctx->d_idx + N, *pos = ctx->d_idx + 2 * (size_t)N;
    const int32_t *uniq = ctx->d_idx + 3 * (size_t)N, *start = ctx->d_idx + 4 * (size_t)N;
    const T *wp = BF ? (const T *)ctx->pbf : (const T *)params;
    T *dlogits = (T *)ctx->dlogits, *lnf = (T *)ctx->lnf;
    T *dres_act = BF ? (T *)ctx->dres_act : (T *)ctx->dres; /* matmul operand view of dres */
    T *copy = BF ? (T *)ctx->dres_act : NULL;                /* LayerNorm backward's copy */
    T *datty = (T *)ctx->datty, *dqkv = (T *)ctx->dqkv, *dfch = (T *)ctx->dfch;
    double *part = ctx->part;
    int rc;

    /* dlogits = g_row (softmax - onehot(target)), g_row = coef[m] / ntok[m] */
    LAUNCH_TRY(gpu_crossentropy_backward<T>(dlogits, (size_t)ctx->Vp, ctx->logits, (size_t)ctx->Vp,
                                            ctx->row_max, ctx->row_inv, ctx->row_g, targets, N, V,
                                            s), e);
    /* head: dlnf[N, C] = dlogits wte; dwte[V, C] = dlogits^T lnf (first contribution) */
    if ((rc = cuda_lt_matmul(ctx, false, false, C, N, head_rows(ctx), wp + ctx->off_wte, C, dlogits, ctx->Vp, AT,
                        ctx->dln, C, CUDA_R_32F, NULL, NULL, e)))
        return rc;
    float *dwte = grads + ctx->off_wte;
    if ((rc = cuda_mm_dweight(ctx, dwte, dlogits, ctx->Vp, lnf, N, C, V, AT, e))) return rc;
    CUDA_TRY(cudaMemsetAsync(ctx->dres, 0, (size_t)N * C * sizeof(float), s), e);
    const float *xlast = L > 0 ? ctx->res3 + (L - 1) * ctx->s_C : ctx->encoded;
    LAUNCH_TRY(gpu_layernorm_backward<T>(ctx->dres, copy, grads + ctx->off_lnf_w,
                                         grads + ctx->off_lnf_b, part, ctx->dln, xlast,
                                         ctx->lnf_mean, ctx->lnf_rstd, params + ctx->off_lnf_w, N,
                                         C, s), e);
    for (int l = L - 1; l >= 0; l--) {
        const float *x = l == 0 ? ctx->encoded : ctx->res3 + (l - 1) * ctx->s_C;
        T *ln1 = L_<T>(ctx->ln1, l, ctx->s_C), *qkv = L_<T>(ctx->qkv, l, ctx->s_3C);
        T *atty = L_<T>(ctx->atty, l, ctx->s_C), *ln2 = L_<T>(ctx->ln2, l, ctx->s_C);
        T *fch = L_<T>(ctx->fch, l, ctx->s_4C), *fchg = L_<T>(ctx->fch_gelu, l, ctx->s_4C);
        float *ln1m = ctx->ln1_mean + l * ctx->s_N, *ln1r = ctx->ln1_rstd + l * ctx->s_N;
        float *ln2m = ctx->ln2_mean + l * ctx->s_N, *ln2r = ctx->ln2_rstd + l * ctx->s_N;
        float *lse = ctx->lse + l * ctx->s_HN, *res2 = ctx->res2 + l * ctx->s_C;
#define WT(k) (wp + ctx->off_block[(size_t)l * MODEL_BLOCK_TENSORS + (k)])
#define WF(k) block_param(ctx, params, l, (k))
#define G(k) (grads + ctx->off_block[(size_t)l * MODEL_BLOCK_TENSORS + (k)])
        /* MLP: res3 = res2 + c_proj(gelu(c_fc(ln_2(res2)))); dres holds d(res3) */
        /* dfch = (dres W_fcproj) gelu'(fch): one matmul with cuBLASLt's DGELU epilogue,
         * else the matmul and the GELU backward kernel */
        bool unfused = true;
        if (ctx->gelu_epi) {
            lt_epi x = {LT_EPI_DGELU, fch, 4 * (int64_t)C};
            if ((rc = cuda_lt_matmul_epi(ctx, false, false, 4 * C, N, C, WT(MODEL_FCPROJ_W), 4 * C, dres_act, C, AT,
                                         dfch, 4 * C, AT, NULL, NULL, &x, &unfused, e)))
                return rc;
        }
        ctx->gelu_fused_bwd = !unfused;
        if (unfused && (rc = cuda_mm_dinp(ctx, dfch, AT, dres_act, WT(MODEL_FCPROJ_W), N, 4 * C, C, AT, e)))
            return rc;
        if ((rc = cuda_mm_dweight(ctx, G(MODEL_FCPROJ_W), dres_act, C, fchg, N, 4 * C, C, AT, e))) return rc;
        LAUNCH_TRY(gpu_column_sum<float>(G(MODEL_FCPROJ_B), part, ctx->dres, N, C, s), e);
        if (unfused) LAUNCH_TRY(gpu_gelu_backward<T>(dfch, fch, (size_t)N * 4 * C, s), e);
        if ((rc = cuda_mm_dinp(ctx, ctx->dln, CUDA_R_32F, dfch, WT(MODEL_FC_W), N, C, 4 * C, AT, e))) return rc;
        if ((rc = cuda_mm_dweight(ctx, G(MODEL_FC_W), dfch, 4 * C, ln2, N, C, 4 * C, AT, e))) return rc;
        LAUNCH_TRY(gpu_column_sum<T>(G(MODEL_FC_B), part, dfch, N, 4 * C, s), e);
        LAUNCH_TRY(gpu_layernorm_backward<T>(ctx->dres, copy, G(MODEL_LN2_W), G(MODEL_LN2_B), part, ctx->dln,
                                             res2, ln2m, ln2r, WF(MODEL_LN2_W), N, C, s), e);
        /* attention: res2 = x + c_proj(attn(c_attn(ln_1(x)))); dres holds d(res2) */
        if ((rc = cuda_mm_dinp(ctx, datty, AT, dres_act, WT(MODEL_ATTPROJ_W), N, C, C, AT, e))) return rc;
        if ((rc = cuda_mm_dweight(ctx, G(MODEL_ATTPROJ_W), dres_act, C, atty, N, C, C, AT, e))) return rc;
        LAUNCH_TRY(gpu_column_sum<float>(G(MODEL_ATTPROJ_B), part, ctx->dres, N, C, s), e);
        if ((rc = cuda_attention_backward<T>(ctx, dqkv, ctx->attD, datty, qkv, atty, lse, H, H, C / H, e))) return rc;
        if ((rc = cuda_mm_dinp(ctx, ctx->dln, CUDA_R_32F, dqkv, WT(MODEL_QKV_W), N, C, 3 * C, AT, e))) return rc;
        if ((rc = cuda_mm_dweight(ctx, G(MODEL_QKV_W), dqkv, 3 * C, ln1, N, C, 3 * C, AT, e))) return rc;
        LAUNCH_TRY(gpu_column_sum<T>(G(MODEL_QKV_B), part, dqkv, N, 3 * C, s), e);
        LAUNCH_TRY(gpu_layernorm_backward<T>(ctx->dres, copy, G(MODEL_LN1_W), G(MODEL_LN1_B), part, ctx->dln,
                                             x, ln1m, ln1r, WF(MODEL_LN1_W), N, C, s), e);
#undef WT
#undef WF
#undef G
    }
    LAUNCH_TRY(gpu_encoder_backward_wpe(grads + ctx->off_wpe, ctx->dres, B, T_, C, cf->ctx, s), e);
    LAUNCH_TRY(gpu_encoder_backward_wte(dwte, ctx->dres, uniq, start, pos, ctx->nuniq, C, s), e);
    return 0;
}

/* ------------------------------------------------------------------ the ops */


static float *cuda_alloc(model_ctx *ctx, size_t n) {
    void *p;
    tdm_err e;
    if (cuda_dev_alloc(ctx, &p, n * sizeof(float), "a parameter-sized buffer", &e)) {
        fprintf(stderr, "tandem: cuda backend: %s\n", e.msg);
        return NULL;
    }
    if (cudaMemsetAsync(p, 0, n * sizeof(float), ctx->stream) != cudaSuccess ||
        cudaStreamSynchronize(ctx->stream) != cudaSuccess) {
        cuda_dev_free(ctx, p);
        return NULL;
    }
    return (float *)p;
}

static void cuda_release(model_ctx *ctx, float *buf) {
    if (!buf) return;
    cudaStreamSynchronize(ctx->stream);
    cuda_dev_free(ctx, buf);
}

static int cuda_upload(model_ctx *ctx, float *dst, const float *host, size_t n, tdm_err *e) {
    if (cuda_check_sticky(ctx, e)) return ERR_INTERNAL;
    CUDA_TRY(cudaMemcpyAsync(dst, host, n * sizeof(float), cudaMemcpyHostToDevice, ctx->stream), e);
    CUDA_TRY(cudaStreamSynchronize(ctx->stream), e);
    return 0;
}

static int cuda_download(model_ctx *ctx, float *host, const float *src, size_t n, tdm_err *e) {
    if (cuda_check_sticky(ctx, e)) return ERR_INTERNAL;
    CUDA_TRY(cudaMemcpyAsync(host, src, n * sizeof(float), cudaMemcpyDeviceToHost, ctx->stream), e);
    CUDA_TRY(cudaStreamSynchronize(ctx->stream), e);
    return 0;
}

static int cuda_copy(model_ctx *ctx, float *dst, const float *src, size_t n, tdm_err *e) {
    if (cuda_check_sticky(ctx, e)) return ERR_INTERNAL;
    CUDA_TRY(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, ctx->stream), e);
    return 0;
}

/* Copies the batch, sorts its rows by input token (for the dwte scatter) and uploads the
 * index arrays: [inputs N | targets N | pos N | uniq N | start nuniq+1], from the
 * page-locked slot of this forward (cuda_impl.h). */
static int stage_batch(model_ctx *ctx, const model_batch *batch, tdm_err *e) {
    int B = batch->B, T = batch->T, N = B * T, V = ctx->lay.cfg.vocab;
    int slot = (int)(ctx->fwd_n++ & 1);
    /* the slot's upload two forwards back has been read (at once for an event never
     * recorded); in a step of its own the device is long past it */
    CUDA_TRY(cudaEventSynchronize(ctx->ev_idx[slot]), e);
    int32_t *in = ctx->h_idx2[slot], *tg = in + N, *pos = in + 2 * (size_t)N, *uniq = in + 3 * (size_t)N;
    int32_t *start = in + 4 * (size_t)N, *cnt = ctx->h_count;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            /* tokens < vocab <= MODEL_VOCAB_MAX (checked by model_batch_check): exact in int32 */
            in[b * T + t] = (int32_t)batch->tokens[(size_t)b * (T + 1) + t];
            tg[b * T + t] = (int32_t)batch->tokens[(size_t)b * (T + 1) + t + 1];
        }
    /* counting sort of the rows by input token, stable: rows in increasing order */
    memset(cnt, 0, (size_t)V * sizeof *cnt);
    for (int i = 0; i < N; i++) cnt[in[i]]++;
    int nu = 0, run = 0;
    for (int v = 0; v < V; v++) {
        int c = cnt[v];
        if (!c) continue;
        uniq[nu] = v;
        start[nu] = run;
        cnt[v] = run; /* becomes the next free slot of token v */
        run += c;
        nu++;
    }
    start[nu] = N;
    for (int i = 0; i < N; i++) pos[cnt[in[i]]++] = i;
    ctx->nuniq = nu;
    size_t n = 4 * (size_t)N + (size_t)nu + 1;
    CUDA_TRY(cudaMemcpyAsync(ctx->d_idx, in, n * sizeof(int32_t), cudaMemcpyHostToDevice, ctx->stream), e);
    CUDA_TRY(cudaEventRecord(ctx->ev_idx[slot], ctx->stream), e);
    return 0;
}

/* ctx->last_loss[m]: the mean of the last forward's row losses of domain m's sequences,
 * summed in row order (as cpu.c); waits for them first when they are on their way and the
 * caller has not just waited (waited). */
static int finish_losses(model_ctx *ctx, int waited, tdm_err *e) {
    if (!ctx->loss_pending) return 0;
    if (!waited) CUDA_TRY(cudaStreamSynchronize(ctx->stream), e);
    int M = ctx->M, T = ctx->T;
    size_t N = (size_t)ctx->B * T;
    for (int m = 0; m < M; m++) ctx->last_loss[m] = 0;
    for (size_t i = 0; i < N; i++) ctx->last_loss[ctx->h_domain[i / T]] += ctx->h_row_loss[i];
    for (int m = 0; m < M; m++) ctx->last_loss[m] = ctx->ntok[m] ? ctx->last_loss[m] / ctx->ntok[m] : 0.0;
    ctx->loss_pending = 0;
    return 0;
}

static int cuda_forward(model_ctx *ctx, const float *params, const model_batch *batch,
                        double *loss, long *ntok, tdm_err *e) {
    if (cuda_check_sticky(ctx, e)) return ERR_INTERNAL;
    const model_config *cf = &ctx->lay.cfg;
    int B = batch->B, T = batch->T, V = cf->vocab, M = ctx->M;
    int brc = model_batch_check(batch, ctx->max_B, ctx->max_T, M, V, e);
    if (brc) return brc;
    ctx->have_forward = 0;
    ctx->B = B;
    ctx->T = T;
    memcpy(ctx->h_domain, batch->domain, (size_t)B * sizeof *ctx->h_domain);
    int rc = stage_batch(ctx, batch, e);
    if (!rc)
        rc = ctx->hf ? cuda_hf_forward(ctx, params, e)
                     : ctx->use_bf16 ? forward_impl<bf16>(ctx, params, e) : forward_impl<float>(ctx, params, e);
    if (rc) return rc;
    size_t N = (size_t)B * T;
    /* the row losses travel to page-locked memory behind the forward; the host waits for
     * them only when the caller wants the losses now (loss) or later (results) */
    CUDA_TRY(cudaMemcpyAsync(ctx->h_row_loss, ctx->row_loss, N * sizeof(double),
                             cudaMemcpyDeviceToHost, ctx->stream), e);
    ctx->loss_pending = 1;
    for (int m = 0; m < M; m++) ctx->ntok[m] = 0; /* the backward's weights: no wait */
    for (int b = 0; b < B; b++) ctx->ntok[ctx->h_domain[b]] += T;
    if (ntok)
        for (int m = 0; m < M; m++) ntok[m] = ctx->ntok[m];
    ctx->fwd_params = params;
    ctx->have_forward = 1;
    if (loss) {
        if ((rc = finish_losses(ctx, 0, e))) return rc;
        memcpy(loss, ctx->last_loss, (size_t)M * sizeof *loss);
    }
    return 0;
}

static int cuda_backward(model_ctx *ctx, const float *params, const double *coef, float *grads,
                         tdm_err *e) {
    if (cuda_check_sticky(ctx, e)) return ERR_INTERNAL;
    if (!ctx->have_forward)
        return err_set(e, ERR_INTERNAL, "model backward called without a forward pass");
    if (params != ctx->fwd_params)
        return err_set(e, ERR_INTERNAL,
                       "model backward called with other parameters than the last forward");
    ctx->have_forward = 0; /* dlogits overwrite the logits in fp32 */
    int N = ctx->B * ctx->T, slot = (int)(ctx->bwd_n++ & 1);
    CUDA_TRY(cudaEventSynchronize(ctx->ev_g[slot]), e); /* as stage_batch's slot */
    float *h_g = ctx->h_g2[slot];
    for (int i = 0; i < N; i++) {
        int m = ctx->h_domain[i / ctx->T];
        h_g[i] = ctx->ntok[m] ? (float)(coef[m] / (double)ctx->ntok[m]) : 0.0f;
    }
    CUDA_TRY(cudaMemcpyAsync(ctx->row_g, h_g, (size_t)N * sizeof(float), cudaMemcpyHostToDevice,
                             ctx->stream), e);
    CUDA_TRY(cudaEventRecord(ctx->ev_g[slot], ctx->stream), e);
    if (ctx->hf) return cuda_hf_backward(ctx, params, grads, e);
    return ctx->use_bf16 ? backward_impl<bf16>(ctx, params, grads, e)
                     : backward_impl<float>(ctx, params, grads, e);
}

static int cuda_sgd(model_ctx *ctx, float *params, const float *grads, float lr, tdm_err *e) {
    if (cuda_check_sticky(ctx, e)) return ERR_INTERNAL;
    LAUNCH_TRY(gpu_sgd(params, grads, lr, ctx->lay.numel, ctx->stream), e);
    return 0;
}

static int cuda_adamw(model_ctx *ctx, float *params, const float *grads, float *m, float *v,
                      const model_adamw *hp, tdm_err *e) {
    if (cuda_check_sticky(ctx, e)) return ERR_INTERNAL;
    if (hp->step < 1) return err_set(e, ERR_INTERNAL, "AdamW step must be >= 1 (got %ld)", hp->step);
    /* the scalars exactly as cpu.c derives them */
    double bc1 = 1.0 - pow(hp->beta1, (double)hp->step);
    double bc2 = 1.0 - pow(hp->beta2, (double)hp->step);
    float step_size = (float)(hp->lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    float decay_keep = (float)(1.0 - (double)hp->lr * hp->weight_decay);
    /* after a clip, its outcome gates the step on the device: no wait for the norm */
    const gpu_clip *gate = ctx->clip_armed ? ctx->d_clip : NULL;
    ctx->clip_armed = 0;
    LAUNCH_TRY(gpu_adamw(params, grads, m, v, ctx->spans, ctx->nspans, decay_keep, hp->beta1,
                         hp->beta2, hp->eps, step_size, bc2_sqrt, gate, ctx->stream), e);
    return 0;
}

/* model.h's clip: the norm's partial sums, their sum, the scale and the finite flag all
 * on the device (gpu_clip_finish, in cpu.c's order of additions), the gradient scaled by
 * it, and the outcome copied behind them to page-locked memory for results(). */
static int cuda_clip(model_ctx *ctx, float *grads, double max_norm, tdm_err *e) {
    if (cuda_check_sticky(ctx, e)) return ERR_INTERNAL;
    size_t n = ctx->lay.numel, nchunks = (n + GPU_NORM_CHUNK - 1) / GPU_NORM_CHUNK;
    LAUNCH_TRY(gpu_sumsq_chunks(ctx->norm_part, grads, n, ctx->stream), e);
    LAUNCH_TRY(gpu_clip_finish(ctx->d_clip, ctx->norm_part, nchunks, max_norm, ctx->stream), e);
    LAUNCH_TRY(gpu_scale_clip(grads, ctx->d_clip, n, ctx->stream), e);
    CUDA_TRY(cudaMemcpyAsync(ctx->h_clip, ctx->d_clip, sizeof(gpu_clip), cudaMemcpyDeviceToHost,
                             ctx->stream), e);
    ctx->clip_armed = 1;
    return 0;
}

/* model.h's results: the one wait of a step */
static int cuda_results(model_ctx *ctx, double *loss, double *norm, tdm_err *e) {
    if (cuda_check_sticky(ctx, e)) return ERR_INTERNAL;
    CUDA_TRY(cudaStreamSynchronize(ctx->stream), e);
    if (loss) {
        int rc = finish_losses(ctx, 1, e);
        if (rc) return rc;
        memcpy(loss, ctx->last_loss, (size_t)ctx->M * sizeof *loss);
    }
    if (norm) *norm = ctx->h_clip->norm;
    return 0;
}

static int norm_impl(model_ctx *ctx, const float *buf, double *out, tdm_err *e) {
    size_t n = ctx->lay.numel, nchunks = (n + GPU_NORM_CHUNK - 1) / GPU_NORM_CHUNK;
    LAUNCH_TRY(gpu_sumsq_chunks(ctx->norm_part, buf, n, ctx->stream), e);
    CUDA_TRY(cudaMemcpyAsync(ctx->h_norm_part, ctx->norm_part, nchunks * sizeof(double),
                             cudaMemcpyDeviceToHost, ctx->stream), e);
    CUDA_TRY(cudaStreamSynchronize(ctx->stream), e);
    double s = 0;
    for (size_t k = 0; k < nchunks; k++) s += ctx->h_norm_part[k];
    *out = sqrt(s);
    return 0;
}

static double cuda_norm(model_ctx *ctx, const float *buf) {
    tdm_err e;
    double r = NAN;
    if (ctx->sticky) return NAN;
    if (norm_impl(ctx, buf, &r, &e)) {
        set_sticky(ctx, &e);
        return NAN;
    }
    return r;
}

static void cuda_scale(model_ctx *ctx, float *buf, float a) {
    if (ctx->sticky) return;
    cudaError_t rc = gpu_scale(buf, a, ctx->lay.numel, ctx->stream);
    if (rc != cudaSuccess) {
        tdm_err e;
        gpu_cuda_error(&e, rc, "gpu_scale", __FILE__, __LINE__);
        set_sticky(ctx, &e);
    }
}

/* positional: C++17 has no designated initialisers; the order is model.h's */
extern "C" const model_ops model_cuda_ops = {
    "cuda",        /* name */
    cuda_create,   /* create */
    cuda_destroy,  /* destroy */
    cuda_alloc,    /* alloc */
    cuda_release,  /* release */
    cuda_upload,   /* upload */
    cuda_download, /* download */
    cuda_copy,     /* copy */
    cuda_forward,  /* forward */
    cuda_backward, /* backward */
    cuda_sgd,      /* sgd */
    cuda_adamw,    /* adamw */
    cuda_norm,     /* norm */
    cuda_scale,    /* scale */
    cuda_clip,     /* clip */
    cuda_results,  /* results */
    cuda_workspace_bytes, /* workspace_bytes */
};
