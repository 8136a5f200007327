/* gpt2_export.h — a GPT-2 layout's weights (model/model.h) as a Hugging Face GPT-2
 * folder: config.json for GPT2LMHeadModel and model.safetensors with HF's names
 * ("transformer.h.0.attn.c_attn.weight", ...). HF's GPT-2 stores its linear weights as
 * Conv1D, [in, out]: ours ([out, in], torch.nn.Linear) are written transposed. The head
 * is tied to wte and not stored, as HF saves it. */
#ifndef TANDEM_MODEL_GPT2_EXPORT_H
#define TANDEM_MODEL_GPT2_EXPORT_H

#include "model/model.h"
#include "model/safetensors.h"
#include "util/err.h"

/* Writes lay's parameters `params` (lay->numel floats) as a folder DIR (created if
 * missing), stored as `dtype` (ST_F32 or ST_BF16). config.json's bos_token_id and
 * eos_token_id are `eos` where it is >= 0 (the tokenizer's end of text: a byte-level
 * export's newline); -1: none said, written null where HF's default (50256) is not a
 * token of this vocabulary. ERR_USAGE naming the path when it cannot be written. */
int gpt2_save(const model_layout *lay, const float *params, const char *dir, st_dtype dtype, int eos, tdm_err *e);

#endif
