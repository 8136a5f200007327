/* tok_export.h — the tokenizer files of a byte-level dataset, for a model exported as a
 * Hugging Face folder: a tokenizer.json whose 256 tokens are the 256 bytes (token id =
 * byte value, as `tandem prep` without --tokenizer makes them), so that
 * AutoTokenizer.from_pretrained(DIR) encodes text into the ids the model was trained on.
 */
#ifndef TANDEM_DATA_TOK_EXPORT_H
#define TANDEM_DATA_TOK_EXPORT_H

#include "util/err.h"

/* Writes DIR/tokenizer.json (a byte-level BPE with no merges: the ByteLevel
 * pre-tokenizer's character for byte b is token b) and DIR/tokenizer_config.json
 * (PreTrainedTokenizerFast, model_max_length ctx, eos "\n": the byte-level
 * end-of-text). ERR_USAGE naming the file when it cannot be written. */
int tok_export_byte_level(const char *dir, int ctx, tdm_err *e);

#endif
