/* model.h — the GPT-2 model interface that every compute backend implements.
 *
 * Architecture (GPT-2): token + learned position embeddings, `layers` pre-LayerNorm
 * blocks (causal multi-head self-attention, GELU(tanh) MLP of width 4C, residuals), a
 * final LayerNorm and an output head tied to the token embedding. LayerNorm eps 1e-5.
 *
 * Parameters of one network live in ONE contiguous fp32 buffer; the tensor table
 * (model_layout) gives each tensor's name, shape and offset, so checkpoints and the
 * PyTorch cross-check address tensors by name. Linear weights are [out, in] as in
 * torch.nn.Linear (unlike HF GPT-2's Conv1D). Order and names, for l = 0..layers-1:
 *
 *   wte [V, C]   wpe [ctx, C]
 *   h.l.ln_1.weight [C]          h.l.ln_1.bias [C]
 *   h.l.attn.c_attn.weight [3C, C]  h.l.attn.c_attn.bias [3C]   (rows: q, k, v; head h
 *   h.l.attn.c_proj.weight [C, C]   h.l.attn.c_proj.bias [C]     uses dims h*C/H..)
 *   h.l.ln_2.weight [C]          h.l.ln_2.bias [C]
 *   h.l.mlp.c_fc.weight [4C, C]  h.l.mlp.c_fc.bias [4C]
 *   h.l.mlp.c_proj.weight [C, 4C]  h.l.mlp.c_proj.bias [C]
 *   ln_f.weight [C]   ln_f.bias [C]
 *
 * A backend (model_ops) owns device memory and a workspace (model_ctx) sized for a
 * maximum batch. Buffers it hands out are opaque pointers into its memory (host memory
 * for the CPU backend, device memory for CUDA); only upload/download cross to the host.
 * Every operation is deterministic: the same inputs and thread count give the same bits.
 */
#ifndef TANDEM_MODEL_MODEL_H
#define TANDEM_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "model/hf_config.h"
#include "util/err.h"

/* The largest vocabulary: 2^24, as data/shard.h's SHARD_VOCAB_MAX (tokens are uint32 from
 * the shards to the backends; the bound keeps the CUDA backend's per-batch counting sort
 * over the vocabulary small and its int arithmetic on the padded vocabulary exact). */
#define MODEL_VOCAB_MAX 16777216

/* The architectures a layout describes: GPT-2 (above; the default, arch 0) or the
 * Llama / Qwen2 family of a Hugging Face folder (model/hf_config.h: RMSNorm, RoPE,
 * grouped-query attention, SwiGLU, optional QKV biases and untied head), whose tensors
 * keep HF's names and hf_arch_each_tensor's order. Both backends run both: the CPU's the
 * family through model/qwen2.h's tape, the CUDA backend in fp32 (gpu/cuda_hf.cu). */
enum { MODEL_ARCH_GPT2 = 0, MODEL_ARCH_HF = 1 };

typedef struct model_config {
    int vocab;    /* V: token ids are < vocab (≤ MODEL_VOCAB_MAX) */
    int ctx;      /* maximum sequence length (rows of wpe; for the HF family the longest
                     sequence a workspace takes, at most max_position_embeddings) */
    int layers;   /* L */
    int heads;    /* H; channels % heads == 0 */
    int channels; /* C */
    int arch;     /* MODEL_ARCH_GPT2, or MODEL_ARCH_HF: then `hf` is the architecture and
                     vocab, layers, heads, channels are set from it (model_config_hf) */
    hf_arch hf;
} model_config;

/* A config for the HF architecture a (its vocabulary, depth, heads and width) with
 * sequences up to ctx tokens. */
void model_config_hf(model_config *c, const hf_arch *a, int ctx);

/* Checks ranges and divisibility; ERR_USAGE naming the bad field. */
int model_config_check(const model_config *cfg, tdm_err *e);

/* Refuses what cannot fit: 0 when `bytes` of host memory is at most this machine's
 * physical memory, else ERR_USAGE "WHAT needs X GiB of memory, more than the Y GiB this
 * machine has: REMEDY". Checked before allocating, so that a size at the configs' limits
 * ends with that message instead of an allocation that the kernel kills later. */
int model_memory_check(double bytes, const char *what, const char *remedy, tdm_err *e);

#define MODEL_NAME_MAX 64 /* HF names: "model.layers.123.post_attention_layernorm.weight" */

typedef struct model_tensor {
    char name[MODEL_NAME_MAX];
    int ndim;     /* 1 or 2 */
    int shape[2]; /* shape[1] == 1 when ndim == 1 */
    size_t offset; /* in elements from the start of the parameter buffer */
    size_t numel;
    int decay; /* AdamW weight decay applies (2-D tensors: embeddings and linear weights) */
} model_tensor;

typedef struct model_layout {
    model_config cfg;
    int n; /* number of tensors */
    model_tensor *t;
    size_t numel; /* total parameters */
} model_layout;

/* The tensors of one transformer block, in layout order: their names follow "h.<l>."
 * (model_block_tensor_names), and a backend finds block l's tensor k as
 * "h.<l>.<name k>" in the layout. */
enum {
    MODEL_LN1_W, MODEL_LN1_B, MODEL_QKV_W, MODEL_QKV_B, MODEL_ATTPROJ_W, MODEL_ATTPROJ_B,
    MODEL_LN2_W, MODEL_LN2_B, MODEL_FC_W, MODEL_FC_B, MODEL_FCPROJ_W, MODEL_FCPROJ_B,
    MODEL_BLOCK_TENSORS
};
extern const char *const model_block_tensor_names[MODEL_BLOCK_TENSORS];

/* Builds the tensor table for `cfg` (checked). The caller frees with model_layout_free. */
int model_layout_init(model_layout *lay, const model_config *cfg, tdm_err *e);
void model_layout_free(model_layout *lay);
const model_tensor *model_layout_find(const model_layout *lay, const char *name);

/* Where a backend finds its tensors in a parameter-sized buffer: wte, wpe, ln_f and, for
 * each block l and tensor k, block[l * MODEL_BLOCK_TENSORS + k] (block: lay's layers x
 * MODEL_BLOCK_TENSORS entries, the caller's). GPT-2 layouts only: ERR_USAGE for an HF
 * family layout, ERR_INTERNAL naming a tensor the layout lacks (it cannot, for a layout
 * from model_layout_init). */
typedef struct model_offsets {
    size_t wte, wpe, lnf_w, lnf_b;
    size_t *block;
} model_offsets;
int model_layout_offsets(const model_layout *lay, model_offsets *out, tdm_err *e);

/* The shape a backend's create() is asked for: B >= 1, 1 <= T <= ctx, domains >= 1;
 * ERR_USAGE saying which is wrong otherwise. Both backends check with it first. */
int model_workspace_check(const model_config *c, int max_B, int max_T, int n_domains, tdm_err *e);

/* GPT-2 initialisation into a host buffer of lay->numel floats: weights N(0, 0.02),
 * residual projections (c_proj; o_proj and down_proj in the HF family) N(0,
 * 0.02/sqrt(2L)), biases 0, LayerNorm and RMSNorm weights 1. (A run with model.init:
 * hf:DIR starts from its folder's weights instead, of either architecture:
 * runner/model_source.h.)
 * Each tensor draws from its own counter-based stream, so the result depends only on
 * (seed, config). */
void model_init_params(const model_layout *lay, uint64_t seed, float *host);

/* B sequences of T+1 tokens each: inputs are tokens[b][0..T-1], targets tokens[b][1..T].
 * domain[b] in [0, n_domains) says which domain's loss the sequence counts towards. */
typedef struct model_batch {
    int B, T;
    const uint32_t *tokens; /* [B][T+1] */
    const int32_t *domain;  /* [B] */
} model_batch;

/* Checks a batch against a workspace for max_B x max_T over n_domains domains of a
 * vocabulary of `vocab`: ERR_USAGE naming the first row, domain or token out of range. */
int model_batch_check(const model_batch *b, int max_B, int max_T, int n_domains, int vocab,
                      tdm_err *e);

typedef struct model_adamw {
    float lr, beta1, beta2, eps, weight_decay;
    long step; /* 1-based step number, for bias correction */
} model_adamw;

typedef struct model_ctx model_ctx; /* a backend's workspace */

/* The table of functions a backend provides, with buffers of element type REAL. The
 * production table is model_ops (float); the CPU reference is also built in double
 * (model_ops_f64, model/cpu64.h) for finite-difference checks of the backward. */
#define MODEL_OPS_DECLARE(TYPE, REAL)                                                         \
    typedef struct TYPE {                                                                     \
        const char *name;                                                                     \
        /* A workspace for batches up to max_B x max_T (max_T ≤ cfg.ctx) over n_domains   \
         * domains, using `threads` CPU threads (0 = backend default). The layout is      \
         * copied. NULL with e set on failure. */                                         \
        model_ctx *(*create)(const model_layout *lay, int max_B, int max_T, int n_domains,   \
                             int threads, tdm_err *e);                                        \
        void (*destroy)(model_ctx *ctx);                                                      \
        /* A zeroed buffer of n elements owned by the backend; NULL when out of memory. */  \
        REAL *(*alloc)(model_ctx *ctx, size_t n);                                             \
        void (*release)(model_ctx *ctx, REAL *buf);                                           \
        int (*upload)(model_ctx *ctx, REAL *dst, const REAL *host, size_t n, tdm_err *e);     \
        int (*download)(model_ctx *ctx, REAL *host, const REAL *src, size_t n, tdm_err *e);   \
        int (*copy)(model_ctx *ctx, REAL *dst, const REAL *src, size_t n, tdm_err *e);        \
        /* Forward pass of `params` on `batch`. loss[m] = mean token loss of domain m's     \
         * sequences (0 when the batch has none); ntok[m] (may be NULL) their token count. \
         * loss NULL: the losses are not waited for (a device backend returns with the     \
         * work queued); results() reads them until the next forward. Keeps the            \
         * activations for the next backward. */                                           \
        int (*forward)(model_ctx *ctx, const REAL *params, const model_batch *batch,          \
                       double *loss, long *ntok, tdm_err *e);                                 \
        /* Gradient of sum_m coef[m] * loss[m] for the last forward (same params), written \
         * (not added) into grads. */                                                       \
        int (*backward)(model_ctx *ctx, const REAL *params, const double *coef, REAL *grads,  \
                        tdm_err *e);                                                          \
        /* params -= lr * grads. */                                                           \
        int (*sgd)(model_ctx *ctx, REAL *params, const REAL *grads, float lr, tdm_err *e);    \
        /* Decoupled-weight-decay Adam (torch.optim.AdamW semantics), decay only on tensors \
         * with decay set; m and v are the moment buffers. */                              \
        int (*adamw)(model_ctx *ctx, REAL *params, const REAL *grads, REAL *m, REAL *v,       \
                     const model_adamw *hp, tdm_err *e);                                      \
        /* Global L2 norm of a whole parameter-sized buffer, summed in a fixed order. */    \
        double (*norm)(model_ctx *ctx, const REAL *buf);                                      \
        /* buf *= s over a whole parameter-sized buffer. */                                   \
        void (*scale)(model_ctx *ctx, REAL *buf, float s);                                    \
        /* Clips grads to global norm max_norm by model_clip_grads' rule without waiting   \
         * for the norm (results() reads it). The next adamw after a clip whose norm is not \
         * finite leaves params, m and v as they were: a diverged step changes nothing. */  \
        int (*clip)(model_ctx *ctx, REAL *grads, double max_norm, tdm_err *e);               \
        /* Waits for the work queued so far. loss[m] (NULL: not wanted) gets the last       \
         * forward's per-domain mean losses, *norm (NULL: not wanted) the last clip's norm. \
         * The one wait a training step needs (steps/steps.c), at its end. */              \
        int (*results)(model_ctx *ctx, double *loss, double *norm, tdm_err *e);              \
        /* Bytes create() would allocate for these arguments (its activations and scratch; \
         * not the parameter-sized buffers of alloc): for the memory estimate printed      \
         * before a run starts. Computed, never allocated; 0 when unknown. */              \
        double (*workspace_bytes)(const model_layout *lay, int max_B, int max_T,             \
                                  int n_domains, int threads);                               \
    } TYPE;

MODEL_OPS_DECLARE(model_ops, float)

/* The backend called `name` ("cpu"), or NULL. The CUDA backend lives in a plugin that a
 * higher layer loads: gpu_plugin_load() (gpu/plugin.h). */
const model_ops *model_backend(const char *name);

extern const model_ops model_cpu_ops;
#ifdef TANDEM_HAVE_CUDA
/* The CUDA backend (gpu/), defined in tandem-cuda.so and in the programs that link the
 * backend themselves; ./tandem reaches it through gpu_plugin_load(). */
extern const model_ops model_cuda_ops;
#endif

/* Clips grads to global norm max_norm as torch.nn.utils.clip_grad_norm_ does (scale by
 * max_norm / (norm + 1e-6) when norm > max_norm). Returns the norm before clipping (NaN
 * when the backend failed). ops->clip then ops->results: it waits for the norm. */
double model_clip_grads(const model_ops *ops, model_ctx *ctx, float *grads, double max_norm);

/* Learning rate at 0-based `step` of `total`: linear warm-up from lr_max/warmup to lr_max
 * over `warmup` steps, then cosine decay to lr_min at step total-1 (constant lr_max when
 * total ≤ warmup + 1). */
double model_lr_cosine(long step, long total, long warmup, double lr_max, double lr_min);

#endif
