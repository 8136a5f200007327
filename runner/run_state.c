/* run_state.c — a run's committed state opened read-only; see run_state.h. */
#include "runner/run_state.h"
#include "runner/ckpt_model.h"

#include <string.h>

#include "ledger/audit.h"
#include "runner/data_source.h"
#include "runner/model_source.h"
#include "config/run_config.h"

int run_state_config(store *st, run_state *rs, tdm_err *e) {
    memset(rs, 0, sizeof *rs);
    int rc = run_config_read(st, &rs->cfg, rs->run_id, sizeof rs->run_id, e);
    if (!rc) rc = model_source_fingerprint(st, &rs->cfg, PIN_READ, NULL, e); /* the model.init folder is still the run's */
    return rc;
}

int run_state_load(store *st, const uint64_t *seq, int dataset_optional, const char *verb, run_state *rs,
                   tdm_err *e) {
    int rc = dataset_load(&rs->ds, rs->cfg.data.dataset, e);
    if (rc == ERR_USAGE && dataset_optional && model_source_hf_dir(&rs->cfg)) {
        rc = 0; /* the folder alone says an HF model's shape */
        memset(&rs->ds, 0, sizeof rs->ds);
        rs->ds.vocab = 2;
    } else if (rc && dataset_optional) {
        err_prefix(e, "data.dataset (the GPT-2 run's vocabulary): ");
    }
    /* an evaluation reads the run's own tokens: the dataset is still the one data.mp pins */
    if (!rc && !dataset_optional) rc = data_source_fingerprint(st, &rs->ds, PIN_READ, 0, NULL, e);
    if (!rc) rc = model_source_config(&rs->cfg, &rs->ds, &rs->mc, e);
    if (!rc) rc = model_layout_init(&rs->lay, &rs->mc, e);
    /* the model RUN's config describes against the state HEAD names, before its buffers
     * are allocated: a RUN changed to a vocabulary of 16M took 6 GB here, then said the
     * states were damaged (ckpt_load says it too, for every state it reads) */
    rec_head h;
    rec_state hs;
    int have = 0;
    tdm_err he;
    if (!rc && !seq && audit_head(st, &h, &hs, &have, &he) == 0 && have) {
        if (hs.has_gen && hs.ntensors && hs.tensors[0].shape[0] != rs->lay.numel)
            rc = err_set(e, ERR_STORE, "%s/%s is intact (its seal holds) but holds a model of %llu parameters, and the "
                         "config %s/RUN pins describes one of %zu: RUN was changed or damaged; restore it from a copy "
                         "of the store (nothing was changed)", store_url(st), h.state,
                         (unsigned long long)hs.tensors[0].shape[0], store_url(st), rs->lay.numel);
        rec_state_free(&hs);
    }
    if (!rc && !(rs->ck = ckpt_model_open(st, &rs->lay, 64u << 20, e))) rc = e->code;
    if (!rc) ckpt_set_reader(rs->ck, verb);
    /* the run's seed and identity: another run's state copied in (past HEAD, the newest)
     * is passed over as the run passes it over, not exported or evaluated as this run's */
    rec_run run;
    tdm_err re;
    if (!rc && run_config_read_run(st, &run, &re) == 0) {
        sha256_digest id;
        ckpt_set_seed(rs->ck, rs->cfg.run.seed);
        if (run_config_identity(&run, &id) == 0) ckpt_set_run(rs->ck, &id);
        rec_run_free(&run);
    }
    /* the run's config generation: states made after an allowed config change carry it */
    ckpt_gens gens = {0};
    if (!rc) rc = audit_generation(st, &gens, e);
    if (!rc) rc = ckpt_set_generation(rs->ck, &gens, e);
    ckpt_gens_free(&gens);
    int found = 0;
    if (!rc && seq) rc = ckpt_load_seq(rs->ck, *seq, &rs->rec, e), found = !rc;
    /* beside a live run, its retention may delete the states this load walks (newest
     * first) before their blobs are read: none loaded, "damaged or deleted" said of a
     * healthy store. Loaded again while HEAD moved meanwhile (RUN_STATE_TRIES tries: three
     * were spent by a reader slower than a run's commits, a hunt) */
    int moved = 0;
    for (int attempt = 0; !rc && !seq && attempt < RUN_STATE_TRIES; attempt++) {
        sha256_digest before, after;
        tdm_err he;
        int hb = audit_head_digest(st, &before, &he);
        if (attempt) rec_state_free(&rs->rec);
        rc = ckpt_load(rs->ck, &rs->rec, &found, e);
        moved = 0;
        if (rc || found || hb || audit_head_digest(st, &after, &he) || sha256_equal(&before, &after)) break;
        moved = 1;
    }
    if (!rc && !found && moved)
        return err_set(e, ERR_STORE, "%s: a run is committing, and its retention deleted each state before this "
                       "command could read it (HEAD moved %d times meanwhile: no damage is known of): run it "
                       "again, or tandem pin a state and pass --state", store_url(st), RUN_STATE_TRIES);
    /* states there but none usable (damaged, deleted behind HEAD) is damage, not an empty run:
     * a run heals it by replaying, a reader has nothing to read */
    if (!rc && !found && ckpt_seed_replay(rs->ck))
        rc = err_set(e, ERR_STORE, "%s: no state of it can be loaded to %s (damaged or deleted; see above): "
                     "tandem verify names the damage, and a tandem run of it heals it by replaying from the seed",
                     store_url(st), verb);
    else if (!rc && !found) rc = err_set(e, ERR_USAGE, "%s holds no committed state to %s", store_url(st), verb);
    return rc;
}

void run_state_close(run_state *rs) {
    rec_state_free(&rs->rec);
    if (rs->ck) ckpt_close(rs->ck);
    model_layout_free(&rs->lay);
    dataset_free(&rs->ds);
    rs->ck = NULL;
}
