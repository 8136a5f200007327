/* qwen2.h — the Qwen2 / Llama architecture (model/hf_config.h) on the CPU, fp32: the
 * reference the SFT setting starts from. This file holds the weights loaded from a
 * Hugging Face folder, the forward pass (per-row cross-entropy) and its backward pass
 * through a tape (a workspace that keeps every layer's activations), and export back to
 * a folder. The CPU backend (model/cpu.c) runs a model_layout of this family through the
 * tape; qwen2_forward / qwen2_forward_backward are the one-batch reference entry points.
 *
 * Forward, for a batch of B rows of T input tokens (HF's Qwen2ForCausalLM / LlamaForCausalLM):
 *   x = embed[tokens]                                               [B*T, C]
 *   per layer: h = rmsnorm(x) * w_in;  q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv)
 *              q, k rotated by RoPE (HF's rotate_half pairing: dims i and i + D/2,
 *              angle t * theta^(-2i/D) for position t = 0..T-1)
 *              attention per query head h over key/value head h / (H/Hkv), causal,
 *              softmax(q k^T / sqrt(D)) v;  x += attn Wo^T
 *              h = rmsnorm(x) * w_post;  x += (silu(h Wg^T) * (h Wu^T)) Wd^T
 *   logits = (rmsnorm(x) * w_norm) E^T   (E = lm_head, or embed when tied)
 * rmsnorm(x) = x / sqrt(mean(x^2) + eps).
 */
#ifndef TANDEM_MODEL_QWEN2_H
#define TANDEM_MODEL_QWEN2_H

#include <stddef.h>
#include <stdint.h>

#include "model/hf_config.h"
#include "model/safetensors.h"
#include "util/err.h"

typedef struct qwen2_layer {
    const float *ln_in, *wq, *bq, *wk, *bk, *wv, *bv, *wo, *ln_post, *wg, *wu, *wd; /* b*: NULL without biases */
} qwen2_layer;

typedef struct qwen2_model {
    hf_arch a;
    float *params; /* every tensor in hf_arch_each_tensor order, float32 */
    size_t numel;
    const float *embed, *norm, *head; /* head == embed when tied */
    qwen2_layer *layer;
} qwen2_model;

/* Loads DIR (config.json, safetensors; checked as `tandem inspect` checks) into *m,
 * converting the weights to float32. Free with qwen2_free. */
int qwen2_load(const char *dir, qwen2_model *m, tdm_err *e);
void qwen2_free(qwen2_model *m);

/* Forward pass over tokens [B][T+1] (inputs tokens[b][0..T-1], targets tokens[b][1..T]):
 * logits [B*T][V] into `logits` when not NULL, and the mean cross-entropy over the B*T
 * targets into *loss. ERR_USAGE for a token >= vocab or T > max_position_embeddings. */
int qwen2_forward(const qwen2_model *m, const uint32_t *tokens, int B, int T, float *logits, double *loss,
                  tdm_err *e);

/* Writes weights `params` (m->numel floats laid out as m->params, e.g. a trained u) as a
 * Hugging Face folder DIR (created if missing): config.json describing m's architecture
 * (the keys transformers reads for Qwen2/Llama) and model.safetensors with HF's tensor
 * names, stored as `dtype` (ST_F32 or ST_BF16). What qwen2_load and PyTorch read back.
 * `ids_from` (may be NULL): the folder whose config.json's special token ids (bos, eos,
 * pad) config.json carries on, the run's source. */
int qwen2_save(const qwen2_model *m, const float *params, const char *dir, st_dtype dtype, const char *ids_from,
               tdm_err *e);

/* The tape: a workspace for forward passes of up to max_B x max_T tokens (max_T at most
 * max_position_embeddings) of architecture a, and the backward pass of the last one.
 * Parameters and gradients are buffers of hf_arch_params(a) floats laid out in
 * hf_arch_each_tensor order. Deterministic: each output is computed by one thread in a
 * fixed order, and the reductions over rows run in row order (the large gemms, as in the
 * GPT-2 backend, for a given thread count). */
typedef struct qwen2_tape qwen2_tape;
qwen2_tape *qwen2_tape_create(const hf_arch *a, int max_B, int max_T, tdm_err *e);
void qwen2_tape_free(qwen2_tape *t);
/* Bytes qwen2_tape_create allocates for these arguments (computed, not allocated). */
double qwen2_tape_bytes(const hf_arch *a, int max_B, int max_T);
/* Forward over tokens [B][T+1]: each target's cross-entropy into row_loss[B*T] (row
 * b*T + t: target tokens[b][t+1]); the logits stay in the tape (qwen2_tape_logits) until
 * the backward. ERR_USAGE for a batch larger than the tape or a token >= vocab. */
int qwen2_tape_forward(qwen2_tape *t, const float *params, const uint32_t *tokens, int B, int T, double *row_loss,
                       tdm_err *e);
/* [B*T][V] logits of the last forward; NULL after a backward (it overwrites them). */
const float *qwen2_tape_logits(const qwen2_tape *t);
/* The gradient of sum_r row_scale[r] * row_loss[r] for the last forward (same params)
 * into grad (overwritten; tied embeddings get both parts). Once per forward. */
int qwen2_tape_backward(qwen2_tape *t, const float *params, const double *row_scale, float *grad, tdm_err *e);

/* The same pass and its backward: the gradient of the mean cross-entropy with respect to
 * every weight into grad[numel], laid out as m->params (hf_arch_each_tensor order; with
 * tied embeddings the head's part is added to the embedding's). Keeps every layer's
 * activations (and B*H*T*T attention weights) for the backward pass (a tape). */
int qwen2_forward_backward(const qwen2_model *m, const uint32_t *tokens, int B, int T, float *grad, double *loss,
                           tdm_err *e);

#endif
