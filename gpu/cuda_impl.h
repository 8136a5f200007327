/* cuda_impl.h — what the CUDA backend's two files share: the workspace (struct
 * model_ctx) and its memory accounting. cuda.cu holds the ops (matmuls, forward, backward,
 * optimiser) and the ops table; cuda_setup.cu creates and destroys a workspace, plans
 * and estimates its buffers, and answers gpu/cuda.h's questions about the device. */
#ifndef TANDEM_GPU_CUDA_IMPL_H
#define TANDEM_GPU_CUDA_IMPL_H

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <new>
#include <unordered_map>
#include <vector>

extern "C" {
#include "gpu/cuda.h"
#include "model/model.h"
}
#include "gpu/check.h"
#include "gpu/kernels.h"
#include "gpu/cudnn_att.h"

#define LT_WORKSPACE (32u << 20) /* cuBLASLt workspace, fixed: part of what picks an algorithm */

enum { PREC_UNSET = 0, PREC_FP32 = 1, PREC_BF16 = 2 };
/* model.attention: auto (cuDNN when it loads and passes the self-check), cudnn, builtin */
enum { ATT_UNSET = 0, ATT_AUTO = 1, ATT_CUDNN = 2, ATT_BUILTIN = 3 };

struct model_ctx {
    model_layout lay;
    int max_B, max_T, M;
    int use_bf16; /* precision: activations and matmul operands in bf16 */
    int tile;  /* attention tile */
    cudnn_att *dnn; /* cuDNN attention (gpu/cudnn_att.h) when chosen; NULL: the built-in kernels */
    int att_forced;   /* model.attention = cudnn: a shape cuDNN refuses is an error */
    int dnn_shape_ok; /* the current batch's shape has cuDNN plans (cuda_use_cudnn) */
    /* the MLP's GELU in cuBLASLt's epilogues (TANDEM_GELU_EPILOGUE, read at create):
     * gelu_epi 1 to try them (auto), 0 for the kernels; gelu_fused_fwd / _bwd say what the
     * last forward / backward ran (1: the epilogue, 0: the kernels) */
    int gelu_epi, gelu_fused_fwd, gelu_fused_bwd;
    int Vp;    /* vocab rounded up to 64: leading dimension of the logits */
    size_t lN; /* max_B * max_T: rows of the activation buffers */
    int device;
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *lt_ws;
    size_t off_wte, off_wpe, off_lnf_w, off_lnf_b;
    size_t *off_block; /* [L][MODEL_BLOCK_TENSORS] */
    /* per-layer strides (elements), each a multiple of 64 so every layer's slice stays
     * aligned like the first */
    size_t s_C, s_3C, s_4C, s_N, s_HN;
    /* forward activations; void * are of the activation type */
    float *encoded;                     /* [N, C] */
    void *ln1;                          /* [L][N, C] */
    float *ln1_mean, *ln1_rstd;         /* [L][N] */
    void *qkv;                          /* [L][N, 3C] */
    void *atty;                         /* [L][N, C] */
    float *lse;                         /* [L][B, H, T] */
    float *res2;                        /* [L][N, C] */
    void *ln2;                          /* [L][N, C] */
    float *ln2_mean, *ln2_rstd;         /* [L][N] */
    void *fch, *fch_gelu;               /* [L][N, 4C] */
    float *res3;                        /* [L][N, C] */
    void *lnf;                          /* [N, C] */
    float *lnf_mean, *lnf_rstd;         /* [N] */
    float *logits;                      /* [N, Vp] */
    void *dlogits;                      /* [N, Vp]: bf16; in fp32 the logits buffer itself */
    float *row_max, *row_inv, *row_g;   /* [N] */
    double *row_loss;                   /* [N] */
    /* backward scratch */
    float *dres;                        /* [N, C] residual gradient */
    void *dres_act;                     /* [N, C] its bf16 copy (bf16 only) */
    float *dln;                         /* [N, C] */
    void *datty;                        /* [N, C] */
    void *dqkv;                         /* [N, 3C] */
    void *dfch;                         /* [N, 4C] */
    float *attD;                        /* [B, H, T] */
    double *part;                       /* [ceil(N / GPU_ROW_CHUNK), 4C] */
    double *norm_part;                  /* [ceil(P / GPU_NORM_CHUNK)] */
    bf16 *pbf;                          /* [P] bf16 copy of the parameters (bf16 only) */
    gpu_span *spans;                    /* AdamW work list */
    int nspans;
    /* the batch: device indices [inputs N | targets N | pos N | uniq N | start N+1] */
    int32_t *d_idx;
    int32_t *h_count;                   /* [V] counting sort */
    /* Page-locked host memory, so that copies are truly asynchronous and a step waits for
     * the device once, at its end (ops->results). The uploads alternate between two slots,
     * each reused only after an event says its copy has been read (two forwards back). */
    int32_t *h_idx2[2];                 /* [5N + 1] each */
    float *h_g2[2];                     /* [N] each: the backward's row coefficients */
    cudaEvent_t ev_idx[2], ev_g[2];
    unsigned fwd_n, bwd_n;
    double *h_row_loss;                 /* [N] page-locked: the last forward's row losses */
    gpu_clip *d_clip, *h_clip;          /* the last clip's outcome; page-locked copy */
    int loss_pending;                   /* h_row_loss is on its way: means not computed */
    int clip_armed;                     /* the next adamw is gated by d_clip */
    double *last_loss;                  /* [M] the last forward's per-domain means */
    double *h_norm_part;
    int32_t *h_domain;                  /* [max_B] */
    long *ntok;                         /* [M] */
    int B, T, nuniq;
    const float *fwd_params;
    int have_forward;
    /* memory accounting */
    std::unordered_map<void *, size_t> *sizes;
    size_t bytes_now, bytes_peak;
    /* an error from an op that cannot return one (scale, norm): reported by the next op */
    int sticky;
    tdm_err sticky_err;
    /* the Llama / Qwen2 family (lay.cfg.arch == MODEL_ARCH_HF): its activations and
     * offsets (cuda_hf.cu); NULL for GPT-2, whose buffers are the ones above */
    struct cuda_hf *hf;
};

static inline size_t pad64(size_t n) { return (n + 63) / 64 * 64; }

/* The precision the next workspace takes: run.precision, else TANDEM_PRECISION, else
 * fp32 (ERR_USAGE for a bad TANDEM_PRECISION). */
int cuda_next_precision(int *prec, tdm_err *e);
/* The attention the next workspace asks for: model_cuda_set_attention's, else
 * TANDEM_ATTENTION, else auto (ERR_USAGE for a bad TANDEM_ATTENTION). */
int cuda_next_attention(int *att, tdm_err *e);
/* Sets ctx->dnn_shape_ok for a batch of B x T with H query heads on Hkv key/value heads:
 * 0, or -1 with e set when model.attention = cudnn and cuDNN has no plan for the shape
 * (cuda.cu). */
int cuda_use_cudnn(model_ctx *ctx, int B, int T, int H, int Hkv, tdm_err *e);
/* The attention of a batch of ctx->B x ctx->T, H query heads on Hkv key/value heads of hs
 * dimensions (kernels.h's packed layout): cuDNN's when the workspace chose it and the
 * shape has plans (cuda_use_cudnn, decided once per forward and kept for its backward; bf16
 * only), else the flash-style kernels of kernels_attention.cu. For GPT-2 and the family. */
template <typename T>
static inline int cuda_attention_forward(model_ctx *ctx, T *out, float *lse, const T *qkv, int H, int Hkv, int hs,
                                         tdm_err *e) {
    if constexpr (sizeof(T) == 2)
        if (ctx->dnn && ctx->dnn_shape_ok) return cudnn_att_forward(ctx->dnn, out, lse, qkv, ctx->B, ctx->T, H, Hkv, e);
    LAUNCH_TRY(gpu_attention_forward<T>(out, lse, qkv, ctx->B, ctx->T, H, Hkv, hs, ctx->tile, ctx->stream), e);
    return 0;
}
/* dqkv (overwritten) from dout; Dbuf[B, H, T] scratch */
template <typename T>
static inline int cuda_attention_backward(model_ctx *ctx, T *dqkv, float *Dbuf, const T *dout, const T *qkv,
                                          const T *out, const float *lse, int H, int Hkv, int hs, tdm_err *e) {
    if constexpr (sizeof(T) == 2)
        if (ctx->dnn && ctx->dnn_shape_ok)
            return cudnn_att_backward(ctx->dnn, dqkv, Dbuf, dout, qkv, out, lse, ctx->B, ctx->T, H, Hkv, e);
    LAUNCH_TRY(gpu_attention_backward<T>(dqkv, Dbuf, dout, qkv, out, lse, ctx->B, ctx->T, H, Hkv, hs, ctx->tile,
                                         ctx->stream), e);
    return 0;
}
/* cudaMalloc counted in the workspace's bytes_now/bytes_peak; ERR_INTERNAL naming `what`
 * and the device's free memory when it fails. */
int cuda_dev_alloc(model_ctx *ctx, void **p, size_t bytes, const char *what, tdm_err *e);
void cuda_dev_free(model_ctx *ctx, void *p);
/* The error an op that cannot return one (scale, norm) left behind, for the next op. */
int cuda_check_sticky(model_ctx *ctx, tdm_err *e);

/* The matmuls (cuda.cu). Column-major D[m x n] (ld ldd, type dtype) = op(A) op(B) (+ C
 * when C is not NULL, beta 1; C may be D) (+ bias[m]), A and B of type abtype, fp32
 * accumulate; op(A) is m x k (A stored k x m when ta), op(B) k x n (stored n x k when tb). */
int cuda_lt_matmul(model_ctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
                   const void *B, int64_t ldb, cudaDataType_t abtype, void *D, int64_t ldd, cudaDataType_t dtype,
                   const void *C, const void *bias, tdm_err *e);
/* An epilogue beyond the bias: GELU (tanh form) after the bias, its input kept in aux
 * (CUBLASLT_EPILOGUE_GELU_AUX_BIAS), or the product times GELU's derivative at aux
 * (CUBLASLT_EPILOGUE_DGELU). aux is m x n, column-major with ld ld_aux (a multiple of 8),
 * of D's type. */
enum { LT_EPI_GELU_AUX_BIAS = 1, LT_EPI_DGELU = 2 };
typedef struct lt_epi {
    int kind;
    void *aux;
    int64_t ld_aux;
} lt_epi;
/* cuda_lt_matmul with epilogue x. When this cuBLASLt has no algorithm for it (remembered
 * per problem, so the answer never changes within a process) *unsupported is set, nothing
 * runs and 0 is returned: the caller runs the unfused kernels instead. */
int cuda_lt_matmul_epi(model_ctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *A,
                       int64_t lda, const void *B, int64_t ldb, cudaDataType_t abtype, void *D, int64_t ldd,
                       cudaDataType_t dtype, const void *C, const void *bias, const lt_epi *x, bool *unsupported,
                       tdm_err *e);
/* Row-major, W[OC, IC] as torch.nn.Linear: out[N, OC] = inp W^T (+ bias) (+ resid) */
int cuda_mm_forward(model_ctx *ctx, void *out, cudaDataType_t otype, const void *inp, const void *W,
                    const void *bias, const float *resid, int N, int IC, int OC, cudaDataType_t at, tdm_err *e);
/* dinp[N, IC] = dout[N, OC] W (overwritten) */
int cuda_mm_dinp(model_ctx *ctx, void *dinp, cudaDataType_t dtype, const void *dout, const void *W, int N, int IC,
                 int OC, cudaDataType_t at, tdm_err *e);
/* dW[OC, IC] = dout[N, OC]^T inp[N, IC] (float, overwritten); ld_dout is dout's row length */
int cuda_mm_dweight(model_ctx *ctx, float *dW, const void *dout, int64_t ld_dout, const void *inp, int N, int IC,
                    int OC, cudaDataType_t at, tdm_err *e);

/* The Llama / Qwen2 family (cuda_hf.cu), fp32 or bf16 (ctx->use_bf16): the device
 * buffers of a workspace for ctx->lN rows (besides the host ones cuda_create makes for
 * every layout; ctx->hf set), their bytes for the estimate, their release, and the passes
 * over the staged batch (d_idx, as cuda.cu stages it for GPT-2). */
int cuda_hf_alloc(model_ctx *ctx, size_t nspans, tdm_err *e);
double cuda_hf_workspace_bytes(const model_layout *lay, int max_B, int max_T, size_t nspans, int bf16);
void cuda_hf_free(model_ctx *ctx);
int cuda_hf_forward(model_ctx *ctx, const float *params, tdm_err *e);
int cuda_hf_backward(model_ctx *ctx, const float *params, float *grads, tdm_err *e);

/* model_ops.create, .destroy and .workspace_bytes (cuda_setup.cu). */
model_ctx *cuda_create(const model_layout *lay, int max_B, int max_T, int n_domains, int threads,
                       tdm_err *e);
void cuda_destroy(model_ctx *ctx);
double cuda_workspace_bytes(const model_layout *lay, int max_B, int max_T, int n_domains,
                            int threads);

#endif
