/* model_source.h — where a run's model comes from (model.init): a GPT-2 of the model.*
 * shape initialised from run.seed ("random"), or a Hugging Face folder ("hf:DIR": its
 * config.json is the architecture, its safetensors the initial u) of the Llama / Qwen2
 * family or a GPT-2 (GPT2LMHeadModel, model/gpt2_import.h: the GPT-2 model, the
 * folder's shape). One place for the run, `tandem eval` and `tandem export` to build the
 * same model_config from a config.
 */
#ifndef TANDEM_RUNNER_MODEL_SOURCE_H
#define TANDEM_RUNNER_MODEL_SOURCE_H

#include <stdbool.h>
#include <stddef.h>

#include "data/dataset.h"
#include "model/model.h"
#include "config/config.h"
#include "storage/store.h"
#include "util/err.h"
#include "ledger/ledger.h"
#include "runner/pin_mode.h"

/* DIR of model.init = hf:DIR, or NULL for "random". */
const char *model_source_hf_dir(const config *cfg);

/* The architecture the run trains, for the dataset ds: GPT-2 from model.* (vocabulary
 * from the dataset unless model.vocab says more), or the folder's config.json. ERR_USAGE,
 * naming the key or the file, for a folder that is not a model of either family, a
 * vocabulary below the dataset's, a model.vocab that contradicts the folder, a dataset
 * made with another tokenizer than the folder's tokenizer.json (when both are recorded),
 * a byte-level dataset beside a tokenizer that does not map byte b to token b, or a
 * model.ctx past max_position_embeddings (n_positions). A GPT-2 folder's weights are
 * checked here too (names, shapes, dtypes), before a run makes its store. */
int model_source_config(const config *cfg, const dataset *ds, model_config *mc, tdm_err *e);

/* u's initial values into host[lay->numel]: GPT-2's initialisation from run.seed, or the
 * folder's weights (converted to float32; checked against lay). */
int model_source_weights(const config *cfg, const model_layout *lay, float *host, tdm_err *e);

/* With model.init = hf:DIR: DIR's config.json and weights (every *.safetensors and the
 * index, by name) hashed and compared with the store's model.mp; when the store has none
 * and mode PIN_WRITE, it is written (the first run). ERR_USAGE naming the file when they
 * differ: another model under the same path would make a resume or a replay compute
 * something else. A damaged model.mp is said and, with PIN_WRITE, written again. PIN_CHECK
 * refuses what PIN_WRITE would and writes nothing. Every write is preceded by ld's lease
 * check (ld NULL: none). 0 for random. */
int model_source_fingerprint(store *st, const config *cfg, pin_mode mode, ledger *ld, tdm_err *e);

/* The preset that fine-tunes a pretrained model (sft-qwen2-0.5b) without model.init: hf:DIR is
 * ERR_USAGE saying what to download and about how much memory the run needs; 0
 * otherwise. */
int model_source_preset_check(const config *cfg, tdm_err *e);

#endif
