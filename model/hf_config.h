/* hf_config.h — a Hugging Face model folder of the Llama / Qwen2 family: its config.json
 * read into an architecture, and its weights (model/safetensors.h) checked against it.
 *
 * The family (model_type "llama", "qwen2", "mistral" without sliding windows): token
 * embedding, `layers` pre-RMSNorm blocks of grouped-query attention (num_attention_heads
 * query heads sharing num_key_value_heads key/value heads; RoPE on q and k; q, k, v
 * biases in Qwen2) and a SwiGLU MLP (down(silu(gate(x)) * up(x))), a final RMSNorm and an
 * output head (lm_head) or, with tie_word_embeddings, the embedding itself.
 *
 * The tensors, for l = 0..layers-1 (HF's names, [out, in] as torch.nn.Linear):
 *   model.embed_tokens.weight [V, C]
 *   model.layers.l.input_layernorm.weight [C]
 *   model.layers.l.self_attn.{q,k,v}_proj.weight [H*D, C], [Hkv*D, C], [Hkv*D, C]
 *   model.layers.l.self_attn.{q,k,v}_proj.bias    (attention_bias, or Qwen2)
 *   model.layers.l.self_attn.o_proj.weight [C, H*D]
 *   model.layers.l.post_attention_layernorm.weight [C]
 *   model.layers.l.mlp.{gate,up}_proj.weight [I, C]   model.layers.l.mlp.down_proj.weight [C, I]
 *   model.norm.weight [C]
 *   lm_head.weight [V, C]   (absent when tied)
 */
#ifndef TANDEM_MODEL_HF_CONFIG_H
#define TANDEM_MODEL_HF_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "model/safetensors.h"
#include "util/err.h"
#include "util/json_tree.h"

typedef struct hf_arch {
    char model_type[32]; /* "qwen2", "llama", "mistral" */
    int vocab;           /* vocab_size */
    int channels;        /* hidden_size C */
    int layers;          /* num_hidden_layers */
    int heads;           /* num_attention_heads H */
    int kv_heads;        /* num_key_value_heads (default H) */
    int head_dim;        /* head_dim (default C / H) */
    int intermediate;    /* intermediate_size I */
    int max_positions;   /* max_position_embeddings */
    double rope_theta;   /* default 10000 */
    double rms_eps;      /* rms_norm_eps, default 1e-6 */
    int tied;            /* tie_word_embeddings */
    int qkv_bias;        /* q, k, v projections have biases (Qwen2, or attention_bias) */
    char torch_dtype[16]; /* as the config says ("bfloat16", "float32"), "" when absent */
} hf_arch;

/* Reads DIR/config.json into *a. ERR_USAGE naming config.json and the key for a file
 * that is missing or not JSON, a model_type outside the family, a missing or
 * out-of-range size, heads not divisible by kv_heads, rope_scaling or sliding windows
 * (not implemented: refused rather than computed differently). */
int hf_arch_read(const char *dir, hf_arch *a, tdm_err *e);

/* DIR/config.json read and parsed (a JSON object) into *doc / *root, its path into path
 * (cap bytes); the caller frees *doc (tjson_free), also after a failure. ERR_USAGE naming
 * the file when it cannot be read or is not a JSON object. For every folder kind
 * (the Qwen2/Llama family here, GPT-2 in model/gpt2_import.c). */
int hf_config_json_read(const char *dir, char *path, size_t cap, tjson_doc **doc, const tjson **root, tdm_err *e);

/* The special token ids of DIR/config.json (bos_token_id, eos_token_id, pad_token_id:
 * an id below `vocab`, a list of such ids, or null) as the JSON members an exported
 * config.json carries on, each line `  "key": value,` into out (cap bytes); "" when the
 * file cannot be read. An id out of range or of another type is left out: the export
 * must load. Without them transformers' generate() knows no end of text. */
void hf_token_ids_json(const char *dir, int vocab, char *out, size_t cap);

/* Parameters of the architecture (the lm_head counted only when untied). */
uint64_t hf_arch_params(const hf_arch *a);

/* The tensors the architecture has, in load order: calls fn(name, rows, cols, arg) for
 * each (cols = 0 for a vector); stops at and returns fn's first non-zero result. */
int hf_arch_each_tensor(const hf_arch *a, int (*fn)(const char *name, int64_t rows, int64_t cols, void *arg),
                        void *arg);

/* Checks that s holds exactly the architecture's tensors (those HF saves but recomputes,
 * such as rotary inv_freq, are ignored) with their shapes and a loadable dtype:
 * ERR_USAGE naming the first tensor missing, misshapen, of another dtype, or unexpected. */
int hf_arch_check_weights(const hf_arch *a, const st_set *s, tdm_err *e);

#endif
