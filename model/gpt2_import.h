/* gpt2_import.h — a Hugging Face GPT-2 folder (GPT2LMHeadModel: config.json with
 * model_type "gpt2", model.safetensors) read into a GPT-2 layout (model/model.h): the
 * inverse of model/gpt2_export.h, so that `model.init: hf:DIR` starts a GPT-2 run from
 * an exported run or from real GPT-2 weights.
 *
 * HF's GPT-2 stores its linear weights as Conv1D, [in, out]: they are transposed into
 * ours ([out, in]). The tensors may carry the "transformer." prefix (as transformers
 * saves GPT2LMHeadModel) or none (GPT2Model, and the Hub's original GPT-2 files); the
 * attention's causal-mask buffers (h.N.attn.bias, h.N.attn.masked_bias) are ignored; a
 * stored lm_head.weight must equal wte (the head is tied). wpe keeps its first model.ctx
 * rows. F32, BF16 and F16 weights are loaded (converted to float32 exactly).
 *
 * What tandem's GPT-2 computes and therefore requires of config.json: the tanh GELU
 * (activation_function gelu_new or gelu_pytorch_tanh), LayerNorm eps 1e-5, an MLP of
 * width 4 * n_embd, attention scaled by 1/sqrt(head dim) and nothing else, tied
 * embeddings, no cross-attention.
 */
#ifndef TANDEM_MODEL_GPT2_IMPORT_H
#define TANDEM_MODEL_GPT2_IMPORT_H

#include "model/model.h"
#include "util/err.h"

typedef struct gpt2_hf {
    int vocab;     /* vocab_size */
    int positions; /* n_positions (or the older n_ctx; default 1024) */
    int channels;  /* n_embd */
    int layers;    /* n_layer */
    int heads;     /* n_head */
} gpt2_hf;

/* 1 when DIR/config.json is readable JSON whose model_type is "gpt2", else 0 (a folder
 * that is unreadable or of another family: hf_arch_read then says why). */
int gpt2_hf_is(const char *dir);

/* Reads DIR/config.json into *g. ERR_USAGE naming config.json and the key for a missing
 * or out-of-range size, n_embd not divisible by n_head, or a setting tandem's GPT-2 does
 * not compute (above), saying what it computes instead. */
int gpt2_hf_read(const char *dir, gpt2_hf *g, tdm_err *e);

/* The layout's config for DIR's model g with sequences up to ctx tokens: ERR_USAGE when
 * ctx exceeds n_positions. */
int gpt2_hf_model_config(const gpt2_hf *g, const char *dir, int ctx, model_config *mc, tdm_err *e);

/* DIR's weights into host[lay->numel] in lay's order and orientation; host NULL: only
 * checked (names, shapes, dtypes: what a run checks before its store is made). lay must be the
 * GPT-2 layout of DIR's config.json (ERR_USAGE otherwise: the folder changed). ERR_USAGE
 * naming the file and the tensor for a tensor missing, misshapen, of a dtype other than
 * F32/BF16/F16, unexpected (another architecture, or a name under the other prefix), or
 * an lm_head.weight that is not wte. */
int gpt2_load(const char *dir, const model_layout *lay, float *host, tdm_err *e);

#endif
