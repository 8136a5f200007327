/* run_state.h — a run's committed state opened read-only, for the commands that read a
 * run without continuing it (`tandem eval`, `tandem export`): its pinned config with the
 * model.init folder checked against the digests model.mp pins, then the dataset, the model's layout
 * and a verified state (the newest, or a kept one) loaded under the run's config
 * generation, so that states made after an allowed config change load too. */
#ifndef TANDEM_RUNNER_RUN_STATE_H
#define TANDEM_RUNNER_RUN_STATE_H

#include <stdint.h>

#include "data/dataset.h"
#include "ledger/ckpt.h"
#include "model/model.h"
#include "config/config.h"
#include "storage/store.h"

typedef struct run_state {
    config cfg;
    char run_id[64];
    dataset ds;       /* loaded unless dataset_optional allowed it to be missing (ds.vocab 2) */
    model_config mc;
    model_layout lay;
    ckpt *ck;         /* ckpt_host(ck, 0) is u of the state loaded */
    rec_state rec;
} run_state;

/* The pinned config of the run in st and the model.init folder checked (model_source_fingerprint).
 * *rs is zeroed first; run_state_close frees it whatever happened. */
int run_state_config(store *st, run_state *rs, tdm_err *e);

/* Then the dataset, the layout and the state: states/<*seq>.mp when seq is not NULL, else
 * the newest verified. With dataset_optional, a model of the Llama / Qwen2 family (whose
 * folder says its shape) goes on without a dataset that cannot be loaded. ERR_USAGE "holds
 * no committed state to VERB" when there is none; ERR_STORE "a run is committing" when a
 * live run's retention deleted every state it tried (RUN_STATE_TRIES times). */
int run_state_load(store *st, const uint64_t *seq, int dataset_optional, const char *verb, run_state *rs,
                   tdm_err *e);
/* How often run_state_load reads again while a live run moves HEAD under it. */
#define RUN_STATE_TRIES 10

void run_state_close(run_state *rs);

#endif
