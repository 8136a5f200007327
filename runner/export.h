/* export.h — a run's u as a Hugging Face model folder that transformers (and tandem's
 * own loader, model.init: hf:DIR) reads: a run of the Llama / Qwen2 family as that
 * family (config.json and model.safetensors, with the source folder's tokenizer files),
 * a GPT-2 run as GPT2LMHeadModel (model/gpt2_export.h). Used by `tandem export`. */
#ifndef TANDEM_RUNNER_EXPORT_H
#define TANDEM_RUNNER_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "model/safetensors.h"
#include "storage/store.h"
#include "util/err.h"

enum { EXPORT_TOK_NONE, EXPORT_TOK_BYTES, EXPORT_TOK_FOLDER };

typedef struct export_result {
    char run_id[64];
    uint64_t seq;        /* the state exported */
    char step[16];       /* its position's next step ("done" for a finished run) */
    char arch[32];       /* "gpt2", "qwen2", "llama", ... */
    size_t params;       /* parameters written */
    int copied;          /* tokenizer files written: copied from the source folder, or a
                          * byte-level dataset's tokenizer.json and tokenizer_config.json */
    int tok_from;        /* where the tokenizer files came from: EXPORT_TOK_* */
    char tokenizer[128]; /* the dataset's recorded tokenizer kind ("" when it records none) */
    char removed[512];   /* an earlier export's tokenizer and generation files removed first
                          * (", "-joined; "" for none): those this one has are written anew */
} export_result;

/* Writes u of the run in `st` — its newest verified state, or states/<*seq>.mp when seq
 * is not NULL — to folder `dir` (created if missing) as `dtype` (ST_F32 or ST_BF16). The
 * pinned config says the model; an HF-family run needs its model.init folder (for the
 * architecture and tokenizer files), a GPT-2 run its dataset (for the vocabulary).
 * ERR_USAGE when there is no such state or the folder cannot be written; store errors as
 * they come. */
int export_store(store *st, const uint64_t *seq, const char *dir, st_dtype dtype, export_result *out, tdm_err *e);

#endif
