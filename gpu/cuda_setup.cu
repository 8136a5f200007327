/* cuda_setup.cu — a CUDA workspace's life: the plan of its buffers (one list for the
 * allocation and the estimate the runner prints before it starts), create and destroy,
 * and gpu/cuda.h's questions about the device (precision, memory, description). */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <new>
#include <string>
#include <utility>
#include <unordered_map>
#include <vector>

extern "C" {
#include "gpu/cuda.h"
#include "model/model.h"
}
#include "gpu/check.h"
#include "gpu/kernels.h"
#include "gpu/cuda_impl.h"


void cuda_destroy(model_ctx *ctx) {
    if (!ctx) return;
    if (ctx->stream) cudaStreamSynchronize(ctx->stream);
    void *bufs[] = {ctx->encoded, ctx->ln1, ctx->ln1_mean, ctx->ln1_rstd, ctx->qkv, ctx->atty,
                    ctx->lse, ctx->res2, ctx->ln2, ctx->ln2_mean, ctx->ln2_rstd, ctx->fch,
                    ctx->fch_gelu, ctx->res3, ctx->lnf, ctx->lnf_mean, ctx->lnf_rstd, ctx->logits,
                    ctx->use_bf16 ? ctx->dlogits : NULL, ctx->row_max, ctx->row_inv, ctx->row_g,
                    ctx->row_loss, ctx->dres, ctx->dres_act, ctx->dln, ctx->datty, ctx->dqkv,
                    ctx->dfch, ctx->attD, ctx->part, ctx->norm_part, ctx->pbf, ctx->spans,
                    ctx->d_idx, ctx->lt_ws, ctx->d_clip};
    if (ctx->sizes) {
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) cuda_dev_free(ctx, bufs[i]);
        cuda_hf_free(ctx);
    }
    cudnn_att_destroy(ctx->dnn);
    if (ctx->lt) cublasLtDestroy(ctx->lt);
    if (ctx->stream) cudaStreamDestroy(ctx->stream);
    free(ctx->off_block);
    for (int k = 0; k < 2; k++) {
        cudaFreeHost(ctx->h_idx2[k]);
        cudaFreeHost(ctx->h_g2[k]);
        if (ctx->ev_idx[k]) cudaEventDestroy(ctx->ev_idx[k]);
        if (ctx->ev_g[k]) cudaEventDestroy(ctx->ev_g[k]);
    }
    cudaFreeHost(ctx->h_row_loss);
    cudaFreeHost(ctx->h_clip);
    free(ctx->h_count);
    free(ctx->last_loss);
    free(ctx->h_norm_part);
    free(ctx->h_domain);
    free(ctx->ntok);
    delete ctx->sizes;
    model_layout_free(&ctx->lay);
    delete ctx;
}

extern "C" int model_cuda_device_count(char *why, size_t cap) {
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) {
        if (why) snprintf(why, cap, "%s", cudaGetErrorString(rc));
        cudaGetLastError();
        return 0;
    }
    if (n == 0 && why) snprintf(why, cap, "the driver reports no CUDA device");
    return n;
}

static pthread_mutex_t g_setup_mu = PTHREAD_MUTEX_INITIALIZER;

/* One device buffer of the workspace: where its pointer goes, bytes, what it is for. A
 * NULL slot is a buffer this precision does without. */
struct ws_item {
    void **p;
    size_t bytes;
    const char *what;
};
#define WS_ITEMS 37

/* The shapes every buffer of a workspace for N = B x T rows follows. */
static void set_dims(model_ctx *ctx, const model_config *c, size_t N) {
    size_t C = (size_t)c->channels, H = (size_t)c->heads;
    ctx->lN = N;
    ctx->Vp = (int)pad64((size_t)c->vocab);
    ctx->s_C = pad64(N * C), ctx->s_3C = pad64(N * 3 * C), ctx->s_4C = pad64(N * 4 * C);
    ctx->s_N = pad64(N), ctx->s_HN = pad64(N * H);
}

/* The AdamW work list: spans of at most GPU_SPAN elements of one tensor. */
static std::vector<gpu_span> adamw_spans(const model_layout *lay) {
    std::vector<gpu_span> spans;
    for (int i = 0; i < lay->n; i++) {
        const model_tensor *t = &lay->t[i];
        for (size_t o = 0; o < t->numel; o += GPU_SPAN) {
            gpu_span sp;
            sp.off = t->offset + o;
            sp.n = (unsigned)(t->numel - o < GPU_SPAN ? t->numel - o : GPU_SPAN);
            sp.decay = (unsigned)(t->decay != 0);
            spans.push_back(sp);
        }
    }
    return spans;
}

/* Every device buffer cuda_create allocates (besides the parameter-sized ones of
 * cuda_alloc), from the dims set_dims put into ctx and its precision: one list for the
 * allocation and for the estimate (cuda_workspace_bytes), so that the two cannot drift. */
static void ws_plan(model_ctx *ctx, const model_config *c, size_t P, size_t nspans,
                    ws_item plan[WS_ITEMS]) {
    size_t N = ctx->lN, C = (size_t)c->channels, L = (size_t)c->layers, H = (size_t)c->heads;
    size_t A = ctx->use_bf16 ? sizeof(bf16) : sizeof(float); /* activation bytes */
    size_t nchunks = (N + GPU_ROW_CHUNK - 1) / GPU_ROW_CHUNK;
    size_t nnorm = (P + GPU_NORM_CHUNK - 1) / GPU_NORM_CHUNK;
    const ws_item list[WS_ITEMS] = {
        {&ctx->lt_ws, LT_WORKSPACE, "the cuBLASLt workspace"},
        {(void **)&ctx->encoded, N * C * 4, "activations (embeddings)"},
        {&ctx->ln1, L * ctx->s_C * A, "activations (ln_1)"},
        {(void **)&ctx->ln1_mean, L * ctx->s_N * 4, "activations (ln_1 mean)"},
        {(void **)&ctx->ln1_rstd, L * ctx->s_N * 4, "activations (ln_1 rstd)"},
        {&ctx->qkv, L * ctx->s_3C * A, "activations (qkv)"},
        {&ctx->atty, L * ctx->s_C * A, "activations (attention output)"},
        {(void **)&ctx->lse, L * ctx->s_HN * 4, "activations (attention lse)"},
        {(void **)&ctx->res2, L * ctx->s_C * 4, "activations (residual)"},
        {&ctx->ln2, L * ctx->s_C * A, "activations (ln_2)"},
        {(void **)&ctx->ln2_mean, L * ctx->s_N * 4, "activations (ln_2 mean)"},
        {(void **)&ctx->ln2_rstd, L * ctx->s_N * 4, "activations (ln_2 rstd)"},
        {&ctx->fch, L * ctx->s_4C * A, "activations (mlp)"},
        {&ctx->fch_gelu, L * ctx->s_4C * A, "activations (gelu)"},
        {(void **)&ctx->res3, L * ctx->s_C * 4, "activations (block output)"},
        {&ctx->lnf, N * C * A, "activations (ln_f)"},
        {(void **)&ctx->lnf_mean, N * 4, "activations (ln_f mean)"},
        {(void **)&ctx->lnf_rstd, N * 4, "activations (ln_f rstd)"},
        {(void **)&ctx->logits, N * (size_t)ctx->Vp * 4, "the logits"},
        {ctx->use_bf16 ? &ctx->dlogits : NULL, N * (size_t)ctx->Vp * 2, "the logits' gradient"},
        {(void **)&ctx->row_max, N * 4, "the loss rows"},
        {(void **)&ctx->row_inv, N * 4, "the loss rows"},
        {(void **)&ctx->row_g, N * 4, "the loss rows"},
        {(void **)&ctx->row_loss, N * 8, "the loss rows"},
        {(void **)&ctx->dres, N * C * 4, "gradients (residual)"},
        {ctx->use_bf16 ? &ctx->dres_act : NULL, N * C * 2, "gradients (residual, bf16)"},
        {(void **)&ctx->dln, N * C * 4, "gradients (LayerNorm)"},
        {&ctx->datty, N * C * A, "gradients (attention)"},
        {&ctx->dqkv, N * 3 * C * A, "gradients (qkv)"},
        {&ctx->dfch, N * 4 * C * A, "gradients (mlp)"},
        {(void **)&ctx->attD, N * H * 4, "gradients (attention rows)"},
        {(void **)&ctx->part, nchunks * 4 * C * 8, "partial sums"},
        {(void **)&ctx->norm_part, nnorm * 8, "partial sums"},
        {ctx->use_bf16 ? (void **)&ctx->pbf : NULL, P * 2, "the bf16 copy of the parameters"},
        {(void **)&ctx->spans, nspans * sizeof(gpu_span), "the AdamW work list"},
        {(void **)&ctx->d_idx, (5 * N + 1) * 4, "the batch"},
        {(void **)&ctx->d_clip, sizeof(gpu_clip), "the clip's outcome"},
    };
    for (size_t i = 0; i < WS_ITEMS; i++) plan[i] = list[i];
}

/* model_ops.workspace_bytes: what cuda_create would allocate for these arguments at the
 * precision it would take now (run.precision, else TANDEM_PRECISION, else fp32). */
double cuda_workspace_bytes(const model_layout *lay, int max_B, int max_T,
                                   int n_domains, int threads) {
    (void)n_domains;
    (void)threads;
    int prec;
    tdm_err ignore;
    if (cuda_next_precision(&prec, &ignore)) prec = PREC_FP32;
    if (lay->cfg.arch == MODEL_ARCH_HF)
        return cuda_hf_workspace_bytes(lay, max_B, max_T, adamw_spans(lay).size(), prec == PREC_BF16);
    model_ctx probe = model_ctx();
    probe.use_bf16 = prec == PREC_BF16;
    set_dims(&probe, &lay->cfg, (size_t)max_B * max_T);
    std::vector<gpu_span> spans = adamw_spans(lay);
    ws_item plan[WS_ITEMS];
    ws_plan(&probe, &lay->cfg, lay->numel, spans.size(), plan);
    double bytes = 0;
    for (size_t i = 0; i < WS_ITEMS; i++)
        if (plan[i].p) bytes += (double)(plan[i].bytes ? plan[i].bytes : 4);
    return bytes;
}

/* Says on stderr the choice of attention ("tandem: attention: cudnn 9.19.0 (self-check
 * passed: ...)" or "... builtin (why)") when it differs from the last one said: once for a
 * run, whose workspaces all choose alike. */
static void say_attention(const char *line) {
    static char last[512];
    pthread_mutex_lock(&g_setup_mu);
    bool fresh = strcmp(last, line) != 0;
    if (fresh) snprintf(last, sizeof last, "%s", line);
    pthread_mutex_unlock(&g_setup_mu);
    if (fresh) fprintf(stderr, "tandem: attention: %s\n", line);
}

/* Whether the MLP's GELU goes into cuBLASLt's matmul epilogues (TANDEM_GELU_EPILOGUE:
 * unset or "auto" tries them, each problem falling back to the kernels where this
 * cuBLASLt has no algorithm; "off" runs the kernels). An environment switch, not a config
 * key: it is for measuring one path against the other (bench_gpu --gelu-epilogue); both
 * compute the same function, the fused one with one rounding fewer in bf16. */
static int gelu_epilogue_mode(int *on, tdm_err *e) {
    const char *v = getenv("TANDEM_GELU_EPILOGUE");
    if (!v || !*v || !strcmp(v, "auto")) *on = 1;
    else if (!strcmp(v, "off")) *on = 0;
    else return err_set(e, ERR_USAGE, "TANDEM_GELU_EPILOGUE=%s: must be auto or off", v);
    return 0;
}

/* Chooses the workspace's attention (model.attention, gpu/cudnn_att.h): builtin; or
 * cuDNN when the precision is bf16, cuDNN loads, a handle is made on the workspace's
 * stream and the self-check against the built-in kernels passes (run once per process,
 * head size and group of query heads per key/value head; its verdict is remembered).
 * auto falls back to builtin with the reason, cudnn makes any of these an ERR_USAGE
 * naming model.attention. Needs ctx's stream, tile and precision. */
static int choose_attention(model_ctx *ctx, int hs, int group, tdm_err *e) {
    int att;
    if (cuda_next_attention(&att, e)) return e->code;
    char line[512];
    if (att == ATT_BUILTIN) {
        say_attention("builtin (model.attention = builtin)");
        return 0;
    }
    char why[400] = "";
    if (!ctx->use_bf16)
        snprintf(why, sizeof why, "run.precision = fp32: cuDNN's fused attention takes bf16");
    int version = 0;
    cudnn_att *a = NULL;
    if (!why[0] && cudnn_att_load(&version, why, sizeof why) == 0)
        a = cudnn_att_create(ctx->stream, hs, why, sizeof why);
    if (a) {
        /* the verdict per head size and group, for the life of the process */
        static std::unordered_map<long, std::pair<int, std::string>> verdicts;
        const long vkey = (long)hs * 65536 + group;
        pthread_mutex_lock(&g_setup_mu);
        auto it = verdicts.find(vkey);
        bool known = it != verdicts.end();
        std::pair<int, std::string> v = known ? it->second : std::pair<int, std::string>();
        pthread_mutex_unlock(&g_setup_mu);
        if (!known) {
            char msg[400];
            v.first = cudnn_att_selfcheck(a, group, ctx->tile, msg, sizeof msg);
            v.second = msg;
            pthread_mutex_lock(&g_setup_mu);
            verdicts[vkey] = v;
            pthread_mutex_unlock(&g_setup_mu);
        }
        if (v.first == 0) {
            ctx->dnn = a;
            ctx->att_forced = att == ATT_CUDNN;
            snprintf(line, sizeof line, "cudnn %d.%d.%d (self-check passed: %s)", version / 10000,
                     version / 100 % 100, version % 100, v.second.c_str());
            say_attention(line);
            return 0;
        }
        cudnn_att_destroy(a);
        snprintf(why, sizeof why, "cuDNN %d.%d.%d %s", version / 10000, version / 100 % 100,
                 version % 100, v.second.c_str());
    }
    if (att == ATT_CUDNN)
        return err_set(e, ERR_USAGE, "model.attention = cudnn: %s; use model.attention = auto or builtin",
                       why);
    snprintf(line, sizeof line, "builtin (%s)", why);
    say_attention(line);
    return 0;
}

model_ctx *cuda_create(const model_layout *lay, int max_B, int max_T, int n_domains, int threads,
                       tdm_err *e) {
    (void)threads; /* the GPU does the work; host threads are not used */
    const model_config *c = &lay->cfg;
    if (model_workspace_check(c, max_B, max_T, n_domains, e)) return NULL;
    size_t N = (size_t)max_B * max_T;
    if (N > (size_t)65535 * GPU_ROW_CHUNK) {
        err_set(e, ERR_USAGE, "model workspace: batch %d x %d has more than %d rows, the CUDA "
                "backend's limit", max_B, max_T, 65535 * GPU_ROW_CHUNK);
        return NULL;
    }
    int prec;
    if (cuda_next_precision(&prec, e)) return NULL;
    char why[256];
    if (model_cuda_device_count(why, sizeof why) < 1) {
        err_set(e, ERR_USAGE, "no CUDA device (%s): use run.device=cpu", why);
        return NULL;
    }
    int dev = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        err_set(e, ERR_USAGE, "no usable CUDA device (%s): use run.device=cpu",
                cudaGetErrorString(cudaGetLastError()));
        return NULL;
    }
    {
        cudaError_t prc = gpu_attention_probe();
        if (prc != cudaSuccess) {
            cudaGetLastError();
            err_set(e, ERR_USAGE,
                    "CUDA device %d (%s, compute capability %d.%d) cannot run this build's "
                    "kernels (%s): rebuild with CUDA_ARCH=%d%d, or use run.device=cpu",
                    dev, prop.name, prop.major, prop.minor, cudaGetErrorString(prc), prop.major,
                    prop.minor);
            return NULL;
        }
    }
    int hf = c->arch == MODEL_ARCH_HF;
    /* the flash-style attention serves GPT-2 in both precisions and the family in bf16
     * (its fp32 path runs kernels_hf.cu's reference attention) */
    int flash = !hf || prec == PREC_BF16;
    int hs = hf ? c->hf.head_dim : c->channels / c->heads;
    int group = hf ? c->hf.heads / c->hf.kv_heads : 1;
    int tile = flash ? gpu_attention_pick_tile(hs, prec == PREC_BF16, prop.sharedMemPerBlockOptin) : 0;
    if (!tile && flash) {
        err_set(e, ERR_USAGE, "%s = %d: head size too large for the CUDA attention kernels (shared memory "
                "of %zu bytes per block)", hf ? "head_dim" : "model.channels / model.heads", hs,
                (size_t)prop.sharedMemPerBlockOptin);
        return NULL;
    }
    model_ctx *ctx = new (std::nothrow) model_ctx();
    if (!ctx) {
        err_set(e, ERR_INTERNAL, "out of memory for the model workspace");
        return NULL;
    }
    ctx->sizes = new (std::nothrow) std::unordered_map<void *, size_t>();
    if (!ctx->sizes) {
        delete ctx;
        err_set(e, ERR_INTERNAL, "out of memory for the model workspace");
        return NULL;
    }
    if (model_layout_init(&ctx->lay, c, e)) {
        delete ctx->sizes;
        delete ctx;
        return NULL;
    }
    ctx->max_B = max_B;
    ctx->max_T = max_T;
    ctx->M = n_domains;
    ctx->use_bf16 = prec == PREC_BF16;
    ctx->tile = tile;
    ctx->device = dev;
    set_dims(ctx, c, N);
    size_t L = (size_t)c->layers;
    size_t V = (size_t)c->vocab, P = lay->numel;
    {
        pthread_mutex_lock(&g_setup_mu);
        cudaError_t crc = gpu_attention_setup(prop.sharedMemPerBlockOptin);
        pthread_mutex_unlock(&g_setup_mu);
        if (crc != cudaSuccess) {
            gpu_cuda_error(e, crc, "gpu_attention_setup", __FILE__, __LINE__);
            goto fail;
        }
    }
    if (cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking) != cudaSuccess) {
        ctx->stream = NULL;
        err_set(e, ERR_INTERNAL, "cannot create a CUDA stream: %s",
                cudaGetErrorString(cudaGetLastError()));
        goto fail;
    }
    {
        cublasStatus_t st = cublasLtCreate(&ctx->lt);
        if (st != CUBLAS_STATUS_SUCCESS) {
            ctx->lt = NULL;
            gpu_cublas_error(e, st, "cublasLtCreate", __FILE__, __LINE__);
            goto fail;
        }
    }
    if (flash && choose_attention(ctx, hs, group, e)) goto fail;
    if (gelu_epilogue_mode(&ctx->gelu_epi, e)) goto fail;
    ctx->off_block = (size_t *)malloc(L * MODEL_BLOCK_TENSORS * sizeof *ctx->off_block);
    if (!ctx->off_block) {
        err_set(e, ERR_INTERNAL, "out of memory");
        goto fail;
    }
    if (!hf) {
        model_offsets off = {0, 0, 0, 0, ctx->off_block};
        if (model_layout_offsets(&ctx->lay, &off, e)) goto fail;
        ctx->off_wte = off.wte, ctx->off_wpe = off.wpe;
        ctx->off_lnf_w = off.lnf_w, ctx->off_lnf_b = off.lnf_b;
    }
    {
        size_t nnorm = (P + GPU_NORM_CHUNK - 1) / GPU_NORM_CHUNK;
        std::vector<gpu_span> spans = adamw_spans(&ctx->lay);
        ctx->nspans = (int)spans.size();
        if (hf) {
            if (cuda_hf_alloc(ctx, spans.size(), e)) goto fail;
        } else {
            ws_item plan[WS_ITEMS];
            ws_plan(ctx, c, P, spans.size(), plan);
            for (size_t i = 0; i < WS_ITEMS; i++)
                if (plan[i].p && cuda_dev_alloc(ctx, plan[i].p, plan[i].bytes, plan[i].what, e)) goto fail;
            if (!ctx->use_bf16) ctx->dlogits = ctx->logits; /* in place */
        }
        if (cudaMemcpy(ctx->spans, spans.data(), spans.size() * sizeof(gpu_span),
                       cudaMemcpyHostToDevice) != cudaSuccess) {
            gpu_cuda_error(e, cudaGetLastError(), "cudaMemcpy(spans)", __FILE__, __LINE__);
            goto fail;
        }
        /* page-locked: the copies of a step run without the host waiting (cuda_impl.h) */
        struct {
            void **p;
            size_t bytes;
        } pin[] = {{(void **)&ctx->h_idx2[0], (5 * N + 1) * sizeof(int32_t)},
                   {(void **)&ctx->h_idx2[1], (5 * N + 1) * sizeof(int32_t)},
                   {(void **)&ctx->h_g2[0], N * sizeof(float)},
                   {(void **)&ctx->h_g2[1], N * sizeof(float)},
                   {(void **)&ctx->h_row_loss, N * sizeof(double)},
                   {(void **)&ctx->h_clip, sizeof(gpu_clip)}};
        for (size_t i = 0; i < sizeof pin / sizeof *pin; i++)
            if (cudaMallocHost(pin[i].p, pin[i].bytes) != cudaSuccess) {
                gpu_cuda_error(e, cudaGetLastError(), "cudaMallocHost (page-locked batch and loss buffers)",
                               __FILE__, __LINE__);
                goto fail;
            }
        for (int k = 0; k < 2; k++)
            if (cudaEventCreateWithFlags(&ctx->ev_idx[k], cudaEventDisableTiming) != cudaSuccess ||
                cudaEventCreateWithFlags(&ctx->ev_g[k], cudaEventDisableTiming) != cudaSuccess) {
                gpu_cuda_error(e, cudaGetLastError(), "cudaEventCreateWithFlags", __FILE__, __LINE__);
                goto fail;
            }
        ctx->h_clip->norm = NAN; /* no clip yet */
        ctx->h_count = (int32_t *)malloc(V * sizeof(int32_t));
        ctx->h_norm_part = (double *)malloc(nnorm * sizeof(double));
        ctx->h_domain = (int32_t *)calloc((size_t)max_B, sizeof(int32_t));
        ctx->ntok = (long *)calloc((size_t)n_domains, sizeof(long));
        ctx->last_loss = (double *)calloc((size_t)n_domains, sizeof(double));
        if (!ctx->h_count || !ctx->h_norm_part || !ctx->h_domain || !ctx->ntok || !ctx->last_loss) {
            err_set(e, ERR_INTERNAL, "out of memory for the model workspace (batch %d x %d)",
                    max_B, max_T);
            goto fail;
        }
    }
    return ctx;
fail:
    cuda_destroy(ctx);
    return NULL;
}

/* ------------------------------------------------------------------ extras (gpu/cuda.h) */

extern "C" const char *model_cuda_precision(const model_ctx *ctx) {
    return ctx && ctx->use_bf16 ? "bf16" : "fp32";
}

extern "C" int model_cuda_attention_tile(const model_ctx *ctx) { return ctx ? ctx->tile : 0; }

extern "C" const char *model_cuda_attention(const model_ctx *ctx) {
    return ctx && ctx->dnn ? "cudnn" : "builtin";
}

extern "C" const char *model_cuda_gelu_epilogue(const model_ctx *ctx) {
    if (ctx && ctx->hf) return "none"; /* the Llama / Qwen2 family has no GELU */
    if (!ctx || !ctx->gelu_epi) return "off";
    if (ctx->gelu_fused_fwd && ctx->gelu_fused_bwd) return "fused";
    if (ctx->gelu_fused_fwd) return "forward-only";
    if (ctx->gelu_fused_bwd) return "backward-only";
    return "kernels";
}

extern "C" int model_cuda_free_memory(size_t *free_bytes, size_t *total, tdm_err *e) {
    char why[256];
    if (model_cuda_device_count(why, sizeof why) < 1)
        return err_set(e, ERR_USAGE, "no CUDA device (%s)", why);
    CUDA_TRY(cudaMemGetInfo(free_bytes, total), e);
    return 0;
}

extern "C" int model_cuda_describe(char *buf, size_t cap, tdm_err *e) {
    char why[256];
    if (model_cuda_device_count(why, sizeof why) < 1)
        return err_set(e, ERR_USAGE, "no CUDA device (%s)", why);
    int dev = 0, rt = 0, drv = 0;
    cudaDeviceProp prop;
    CUDA_TRY(cudaGetDevice(&dev), e);
    CUDA_TRY(cudaGetDeviceProperties(&prop, dev), e);
    CUDA_TRY(cudaRuntimeGetVersion(&rt), e);
    CUDA_TRY(cudaDriverGetVersion(&drv), e);
    snprintf(buf, cap,
             "%s (sm_%d%d, %d SMs, %.1f GiB), CUDA runtime %d.%d, driver %d.%d, cuBLASLt %zu",
             prop.name, prop.major, prop.minor, prop.multiProcessorCount,
             (double)prop.totalGlobalMem / (1024.0 * 1024 * 1024), rt / 1000, rt % 1000 / 10,
             drv / 1000, drv % 1000 / 10, cublasLtGetVersion());
    return 0;
}

extern "C" int model_cuda_memory(model_ctx *ctx, model_cuda_mem *out, tdm_err *e) {
    size_t fr = 0, tot = 0;
    CUDA_TRY(cudaMemGetInfo(&fr, &tot), e);
    out->backend_now = ctx->bytes_now;
    out->backend_peak = ctx->bytes_peak;
    out->device_used = tot - fr;
    out->device_total = tot;
    return 0;
}

extern "C" int model_cuda_sync(model_ctx *ctx, tdm_err *e) {
    if (cuda_check_sticky(ctx, e)) return ERR_INTERNAL;
    CUDA_TRY(cudaStreamSynchronize(ctx->stream), e);
    return 0;
}
